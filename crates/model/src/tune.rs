//! `bloatlab tune`: what it is asked to do ([`TuneConfig`], whose options
//! are defined once in [`TUNE_OPTIONS`]), and the tests it runs: the quick
//! profile before and after, and the short loaded test of one search step.
use crate::config::TestConfig;
use crate::options::{one, Arity, Configurable, OptionDef, Shape};
use crate::scenario::Scenario;
use crate::units::{fmt_bytes, fmt_duration, parse_bytes, parse_duration};
use std::path::PathBuf;
use std::time::Duration;

/// What shapes the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TuneShaper {
    /// cake where the kernel has it, else HTB + fq_codel, else the emulator.
    #[default]
    Auto,
    Cake,
    /// HTB at the rate, fq_codel under it.
    FqCodel,
    /// bloatlab's user-space link emulator (rate + FQ-CoDel), for kernels
    /// with neither: it shapes the traffic the router forwards.
    Emulator,
}
crate::words!(TuneShaper, "a shaper", Auto = "auto", Cake = "cake", FqCodel = "fq_codel", Emulator = "emulator");

/// The default state directory: where a tune's saved state waits for its undo.
pub const DEFAULT_TUNE_STATE_DIR: &str = "/run/bloatlab/tune";

/// What a tune measures the line against: a bloatlab server, or an RPM
/// server (the monitor's grammar: `HOST[:PORT]`, or
/// `https://HOST[:PORT]/.well-known/nq[#pin-sha256=HEX]`).
pub type TuneTarget = crate::MonitorTarget;

/// A test a tune runs: `bloatlab test`'s against a bloatlab server, or the
/// IETF responsiveness method's stages (after idle probes) against an RPM
/// server. Either gives a result of the test schema whose one-way phases
/// the search reads.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TuneTest {
    Test(TestConfig),
    Rpm(crate::RpmConfig),
}

impl TuneTest {
    /// What the test is, for progress lines.
    pub fn describe(&self) -> String {
        match self {
            TuneTest::Test(t) => match t.profile {
                Some(p) => format!("the {} profile", p.name()),
                None => t.scenarios.iter().map(|s| s.name()).collect::<Vec<_>>().join(", "),
            },
            TuneTest::Rpm(r) => format!("the RPM method's {} stage{}", r.directions.iter().map(|d| d.name()).collect::<Vec<_>>().join(" and "), if r.directions.len() > 1 { "s" } else { "" }),
        }
    }
}

/// Everything `bloatlab tune` is asked to do.
#[derive(Debug, Clone, PartialEq)]
pub struct TuneConfig {
    /// The server beyond the bottleneck (None: not given).
    pub server: Option<TuneTarget>,
    /// The router's WAN interface.
    pub wan: String,
    /// The highest added latency under load a rate may show, the A+ boundary.
    pub target_added: Duration,
    /// Time the search may take over both directions (not the tests before and after).
    pub budget: Duration,
    /// Bytes the search may move over both directions (None: unbounded).
    pub budget_bytes: Option<u64>,
    /// The shortest loaded phase of one search step.
    pub step: Duration,
    pub shaper: TuneShaper,
    /// cake's per-packet overhead and minimum packet size, bytes.
    pub overhead: u32,
    pub mpu: u32,
    /// Interfaces on the LAN side (the emulator shaper's: what it forwards
    /// to the WAN); empty = every other interface that is up.
    pub lan: Vec<String>,
    /// Run the measuring client in this network namespace (a LAN host
    /// behind the router) instead of on the router itself.
    pub client_netns: Option<String>,
    /// The bottleneck is this host's own interface (`wan`): tune its queue
    /// (the root qdisc, or the queue under the rate limiter that stands for
    /// its link; txqueuelen; BQL) instead of adding a shaper. Its upload
    /// only: the download's queue is the far end's.
    pub local: bool,
    pub dry_run: bool,
    pub keep: bool,
    pub write_config: Option<PathBuf>,
    pub json: Option<PathBuf>,
    /// Directory for the HTML report and its plots.
    pub report: Option<PathBuf>,
    pub state_dir: PathBuf,
    /// Congestion control of the test flows ("" = the host's default).
    pub cc: String,
}

impl Default for TuneConfig {
    fn default() -> TuneConfig {
        TuneConfig {
            server: None,
            wan: String::new(),
            target_added: Duration::from_millis(5),
            budget: Duration::from_secs(180),
            budget_bytes: None,
            step: Duration::from_secs(5),
            shaper: TuneShaper::Auto,
            overhead: 18,
            mpu: 64,
            lan: vec![],
            client_netns: None,
            local: false,
            dry_run: false,
            keep: false,
            write_config: None,
            json: None,
            report: None,
            state_dir: PathBuf::from(DEFAULT_TUNE_STATE_DIR),
            cc: String::new(),
        }
    }
}

/// A search step's loaded phase runs at least [`TuneConfig::step`] and on
/// while latency still rises, up to this.
pub const STEP_CAP: Duration = Duration::from_secs(12);

impl TuneConfig {
    /// The target `s` (the command line's SERVER): a bloatlab server or an
    /// RPM server; anything else is refused with what a target is.
    pub fn set_server(&mut self, s: &str) -> Result<(), String> {
        const FORMS: &str = "tune measures a loaded line against a bloatlab server, HOST[:PORT], or an RPM server, https://HOST[:PORT]/.well-known/nq (#pin-sha256=HEX pins its certificate)";
        let t = TuneTarget::parse(s).map_err(|e| format!("{}; {FORMS}", e.split("; a target is").next().unwrap_or(&e)))?;
        if t.latency_only() {
            return Err(format!("`{s}` is a latency-only target; {FORMS}"));
        }
        self.server = Some(t);
        Ok(())
    }

    /// The server's name, as results and documents show it.
    pub fn server_name(&self) -> String {
        self.server.as_ref().map(TuneTarget::name).unwrap_or_default()
    }

    /// The server as `bloatlab test` names it.
    fn base_test(&self, host: &str, port: u16) -> TestConfig {
        let mut t = TestConfig::default();
        t.server = host.to_string();
        t.port = port;
        if !self.cc.is_empty() {
            t.cc = self.cc.clone();
        }
        t.command = vec!["tune".into(), self.server_name()];
        t
    }

    /// The RPM method against `url`: `directions`' stages after `idle`
    /// of idle probes, each stage at most `max_stage`.
    fn rpm_test(&self, url: &str, pin: &Option<String>, directions: Vec<crate::RpmDirection>, idle: Duration, max_stage: Duration) -> Result<crate::RpmConfig, String> {
        let r = crate::RpmConfig { url: url.to_string(), pin_sha256: pin.clone(), directions, idle, max_stage, ..Default::default() };
        r.validate()?;
        Ok(r)
    }

    fn target(&self) -> Result<&TuneTarget, String> {
        self.server.as_ref().ok_or_else(|| "no server: give a bloatlab server beyond the line, HOST[:PORT], or an RPM server's https:// URL".to_string())
    }

    /// The test before and after: the quick profile, as the browser test,
    /// `bloatlab test --profile quick` and the monitor run it; against an
    /// RPM server, 2 s of idle probes, then the download and upload
    /// stages (each at most the quick profile's cap).
    pub fn verify_test(&self) -> Result<TuneTest, String> {
        match self.target()? {
            TuneTarget::Server { host, port } => {
                let mut t = self.base_test(host, *port);
                crate::web::WebPlan::of(crate::web::Profile::Quick).apply_to(&mut t)?;
                t.validate()?;
                Ok(TuneTest::Test(t))
            }
            TuneTarget::Rpm { url, pin_sha256 } => {
                let cap = quick_cap();
                self.rpm_test(url, pin_sha256, vec![crate::RpmDirection::Download, crate::RpmDirection::Upload], RPM_IDLE, cap).map(TuneTest::Rpm)
            }
            t => Err(format!("{}: not a target tune measures against", t.name())),
        }
    }

    /// One search step: 1 s idle, then four flows one way for at least
    /// [`TuneConfig::step`] and on while latency still rises (at most
    /// [`STEP_CAP`]); against an RPM server, 1 s of idle probes and the
    /// direction's stage (it ends when goodput and responsiveness are
    /// stable, at most [`STEP_CAP`]).
    pub fn step_test(&self, upload: bool) -> Result<TuneTest, String> {
        match self.target()? {
            TuneTarget::Server { host, port } => {
                let mut t = self.base_test(host, *port);
                t.scenarios = vec![if upload { Scenario::new(4, 0) } else { Scenario::new(0, 4) }];
                t.idle = Duration::from_secs(1);
                t.duration = self.step;
                t.until_settled = Some(STEP_CAP.max(self.step));
                t.probe_interval = Duration::from_millis(20);
                t.validate()?;
                Ok(TuneTest::Test(t))
            }
            TuneTarget::Rpm { url, pin_sha256 } => {
                let d = if upload { crate::RpmDirection::Upload } else { crate::RpmDirection::Download };
                self.rpm_test(url, pin_sha256, vec![d], Duration::from_secs(1), STEP_CAP.max(self.step)).map(TuneTest::Rpm)
            }
            t => Err(format!("{}: not a target tune measures against", t.name())),
        }
    }

    /// Check what options alone cannot.
    pub fn check(&self) -> Result<(), String> {
        if self.wan.is_empty() {
            return Err("which interface leads to the line? --wan IFACE (the router's WAN)".into());
        }
        self.target()?;
        if self.lan.contains(&self.wan) {
            return Err(format!("--lan {}: that is the WAN interface", self.wan));
        }
        if self.dry_run && self.keep {
            return Err("--dry-run changes nothing, so there is nothing to --keep".into());
        }
        if self.local && self.client_netns.is_some() {
            return Err("--local tunes this host's own queue, which only its own traffic fills: the tests run here, not from --client-netns".into());
        }
        if self.local && !self.lan.is_empty() {
            return Err("--local adds no shaper between LAN and WAN: --lan does not go with it".into());
        }
        self.verify_test().and(self.step_test(true)).map(drop)
    }
}

/// The idle probes before an RPM server's test before and after.
pub const RPM_IDLE: Duration = Duration::from_secs(2);

/// The quick profile's longest loaded phase: an RPM stage's limit in the
/// test before and after.
fn quick_cap() -> Duration {
    let p = crate::web::WebPlan::of(crate::web::Profile::Quick);
    p.phases.iter().map(|ph| ph.cap).max().unwrap_or(Duration::from_secs(15))
}

impl Configurable for TuneConfig {
    const COMMAND: &'static str = "`bloatlab tune`";
    fn options() -> &'static [OptionDef<TuneConfig>] {
        TUNE_OPTIONS
    }
}

fn iface(s: &str) -> Result<String, String> {
    if s.is_empty() || s.len() > 15 || s.contains(['/', ' ', ':']) || s == "." || s == ".." {
        return Err(format!("`{s}` is not an interface name (1-15 characters, no `/`, `:` or space)"));
    }
    Ok(s.to_string())
}

/// cake's per-packet sizes: 0..=256 bytes.
fn packet_bytes(s: &str) -> Result<u32, String> {
    let v: u32 = s.parse().map_err(|_| format!("`{s}` is not a number of bytes"))?;
    if v > 256 {
        return Err(format!("`{s}` is over 256 bytes"));
    }
    Ok(v)
}


fn file(s: &str) -> Result<PathBuf, String> {
    if s.is_empty() {
        return Err("an empty file name".into());
    }
    Ok(PathBuf::from(s))
}

fn on(b: bool) -> Vec<String> {
    if b {
        one("on")
    } else {
        vec![]
    }
}

fn path_of(p: &Option<PathBuf>) -> Vec<String> {
    p.iter().map(|p| p.display().to_string()).collect()
}

/// Every option of `bloatlab tune`, in `--help` order.
pub static TUNE_OPTIONS: &[OptionDef<TuneConfig>] = &[
    OptionDef {
        long: "wan",
        short: None,
        value_name: "IFACE",
        doc: "The router's interface towards the line (its WAN): upload is shaped on its egress, download on its ingress through an IFB device",
        arity: Arity::Value,
        shape: Shape::Word,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["eth1"],
        set: |c, s| Ok(c.wan = iface(s)?),
        get: |c| if c.wan.is_empty() { vec![] } else { one(&c.wan) },
    },
    OptionDef {
        long: "target-added",
        short: None,
        value_name: "DURATION",
        doc: "The most added latency under load a shaper rate may show (the search keeps the highest rate within it; by default the A+ boundary)",
        arity: Arity::Value,
        shape: Shape::Duration,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["15ms"],
        set: |c, s| {
            let d = parse_duration(s)?;
            if d < Duration::from_micros(500) || d > Duration::from_secs(1) {
                return Err(format!("`{s}` is outside 0.5ms..1s"));
            }
            c.target_added = d;
            Ok(())
        },
        get: |c| one(fmt_duration(c.target_added)),
    },
    OptionDef {
        long: "budget",
        short: None,
        value_name: "DURATION",
        doc: "The longest the search may take, both directions together; a step is not begun when it would end past this (the tests before and after come on top)",
        arity: Arity::Value,
        shape: Shape::Duration,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["90s"],
        set: |c, s| {
            let d = parse_duration(s)?;
            if d < Duration::from_secs(20) || d > Duration::from_secs(3600) {
                return Err(format!("`{s}` is outside 20s..1h"));
            }
            c.budget = d;
            Ok(())
        },
        get: |c| one(fmt_duration(c.budget)),
    },
    OptionDef {
        long: "budget-bytes",
        short: None,
        value_name: "BYTES",
        doc: "The most data the search may move, both directions together, in bytes or as tc spells sizes (2g = 2 GiB), on a metered line [default: unbounded]",
        arity: Arity::Value,
        shape: Shape::Bytes,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["2g"],
        set: |c, s| {
            let b = parse_bytes(s)?;
            if b < 1_000_000 {
                return Err(format!("`{s}` is under 1MB: not one step"));
            }
            c.budget_bytes = Some(b);
            Ok(())
        },
        get: |c| c.budget_bytes.map(fmt_bytes).into_iter().collect(),
    },
    OptionDef {
        long: "step",
        short: None,
        value_name: "DURATION",
        doc: "The shortest loaded phase of one search step (it runs on while latency still rises, up to 12s)",
        arity: Arity::Value,
        shape: Shape::Duration,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["8s"],
        set: |c, s| {
            let d = parse_duration(s)?;
            if d < Duration::from_secs(2) || d > Duration::from_secs(60) {
                return Err(format!("`{s}` is outside 2s..60s"));
            }
            c.step = d;
            Ok(())
        },
        get: |c| one(fmt_duration(c.step)),
    },
    OptionDef {
        long: "sqm",
        short: None,
        value_name: "KIND",
        doc: "The smart queue management that shapes: cake, fq_codel (HTB + fq_codel), emulator (bloatlab's user-space shaper, for kernels with neither; it shapes forwarded traffic, so measure from a LAN host: --client-netns), or auto: the first of these the kernel has",
        arity: Arity::Value,
        shape: Shape::Word,
        choices: TuneShaper::WORDS,
        requires: None,
        one_run_each: false,
        examples: &["fq_codel"],
        set: |c, s| Ok(c.shaper = s.parse()?),
        get: |c| one(c.shaper.name()),
    },
    OptionDef {
        long: "overhead",
        short: None,
        value_name: "BYTES",
        doc: "cake's per-packet overhead of the line, bytes (18 = Ethernet with FCS; 34 for VDSL2/PTM with PPPoE and VLAN; 44 for ADSL/ATM)",
        arity: Arity::Value,
        shape: Shape::Int,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["34"],
        set: |c, s| Ok(c.overhead = packet_bytes(s)?),
        get: |c| one(c.overhead),
    },
    OptionDef {
        long: "mpu",
        short: None,
        value_name: "BYTES",
        doc: "cake's minimum packet size on the line, bytes",
        arity: Arity::Value,
        shape: Shape::Int,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["88"],
        set: |c, s| Ok(c.mpu = packet_bytes(s)?),
        get: |c| one(c.mpu),
    },
    OptionDef {
        long: "lan",
        short: None,
        value_name: "IFACE",
        doc: "A LAN-side interface (repeat for more): what the emulator shaper takes towards the WAN [default: every other interface that is up]",
        arity: Arity::Repeated,
        shape: Shape::Word,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["br-lan"],
        set: |c, s| Ok(c.lan.push(iface(s)?)),
        get: |c| c.lan.clone(),
    },
    OptionDef {
        long: "client-netns",
        short: None,
        value_name: "NETNS",
        doc: "Run the measuring client in this network namespace, a LAN host behind the router, rather than on the router itself [default: on the router]",
        arity: Arity::Value,
        shape: Shape::Word,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["lan-host"],
        set: |c, s| {
            if s.is_empty() || s.contains('/') || s.starts_with('.') {
                return Err(format!("`{s}` is not a network namespace's name (as `ip netns list` shows it)"));
            }
            c.client_netns = Some(s.to_string());
            Ok(())
        },
        get: |c| c.client_netns.iter().cloned().collect(),
    },
    OptionDef {
        long: "local",
        short: None,
        value_name: "",
        doc: "The bottleneck is this host's own interface (--wan), the seeds' txqueuelen case: tune its queue (root qdisc or the queue under its rate limiter, txqueuelen, BQL) for its upload instead of adding a shaper",
        arity: Arity::Switch,
        shape: Shape::OnOff,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["on"],
        set: |c, s| Ok(c.local = crate::options::on_off(s)?),
        get: |c| on(c.local),
    },
    OptionDef {
        long: "dry-run",
        short: None,
        value_name: "",
        doc: "Measure the line and say what would be installed; change nothing",
        arity: Arity::Switch,
        shape: Shape::OnOff,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["on"],
        set: |c, s| Ok(c.dry_run = crate::options::on_off(s)?),
        get: |c| on(c.dry_run),
    },
    OptionDef {
        long: "keep",
        short: None,
        value_name: "",
        doc: "Leave the shaper found in place when done (until reboot, or `bloatlab tune --undo IFACE`); without it the interface is put back as it was",
        arity: Arity::Switch,
        shape: Shape::OnOff,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["on"],
        set: |c, s| Ok(c.keep = crate::options::on_off(s)?),
        get: |c| on(c.keep),
    },
    OptionDef {
        long: "write-config",
        short: None,
        value_name: "FILE",
        doc: "Write how to keep the setting: FILE (a shell script of the tc commands), FILE.sqm (an OpenWrt /etc/config/sqm section) and FILE.service (a systemd unit)",
        arity: Arity::Value,
        shape: Shape::File,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["shaper.sh"],
        set: |c, s| Ok(c.write_config = Some(file(s)?)),
        get: |c| path_of(&c.write_config),
    },
    OptionDef {
        long: "json",
        short: None,
        value_name: "FILE",
        doc: "Write the tune as JSON: `before` and `after` (bloatlab-result documents), the search's `steps` and the chosen `settings`",
        arity: Arity::Value,
        shape: Shape::File,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["tune.json"],
        set: |c, s| Ok(c.json = Some(file(s)?)),
        get: |c| path_of(&c.json),
    },
    OptionDef {
        long: "report",
        short: None,
        value_name: "DIR",
        doc: "Write an HTML report with its plots (the search's steps, latency before and after) into DIR",
        arity: Arity::Value,
        shape: Shape::File,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["tune-report"],
        set: |c, s| Ok(c.report = Some(file(s)?)),
        get: |c| path_of(&c.report),
    },
    OptionDef {
        long: "state-dir",
        short: None,
        value_name: "DIR",
        doc: "Where the interface's state waits for its undo (kept until the shaper is removed)",
        arity: Arity::Value,
        shape: Shape::File,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["/var/lib/bloatlab"],
        set: |c, s| Ok(c.state_dir = file(s)?),
        get: |c| one(c.state_dir.display()),
    },
    OptionDef {
        long: "cc",
        short: None,
        value_name: "NAME",
        doc: "Congestion control of the test flows [default: the host's]",
        arity: Arity::Value,
        shape: Shape::Word,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["cubic"],
        set: |c, s| {
            crate::config::check_cc(s)?;
            c.cc = s.to_string();
            Ok(())
        },
        get: |c| if c.cc.is_empty() { vec![] } else { one(&c.cc) },
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_option_takes_its_examples_and_spells_them_back() {
        for o in TUNE_OPTIONS {
            for e in o.examples {
                let mut c = TuneConfig::default();
                o.set(&mut c, e).unwrap_or_else(|err| panic!("--{} {e}: {err}", o.long));
                assert_eq!(o.get(&c).last().map(String::as_str), Some(*e), "--{}", o.long);
            }
        }
    }

    #[test]
    fn bad_values_are_refused_with_the_reason() {
        let set = |n: &str, v: &str| crate::options::option::<TuneConfig>(n).unwrap().set(&mut TuneConfig::default(), v);
        assert!(set("wan", "a/b").unwrap_err().contains("interface name"));
        assert!(set("wan", "averyveryverylongname").is_err());
        assert!(set("target-added", "0").is_err());
        assert!(set("target-added", "2s").unwrap_err().contains("0.5ms..1s"));
        assert!(set("budget", "5s").unwrap_err().contains("20s..1h"));
        assert!(set("sqm", "tbf").unwrap_err().contains("cake, fq_codel"));
        assert!(set("budget-bytes", "10kB").is_err());
        let srv = |s: &str| {
            let mut c = TuneConfig::default();
            c.set_server(s).map(|_| c)
        };
        let c = srv("h").unwrap();
        assert!(c.check().unwrap_err().contains("--wan"));
        let c = TuneConfig { wan: "eth1".into(), lan: vec!["eth1".into()], ..srv("h").unwrap() };
        assert!(c.check().unwrap_err().contains("WAN"));
        assert!(TuneConfig { wan: "eth1".into(), ..Default::default() }.check().unwrap_err().contains("no server"));
        // a target is a bloatlab server or an RPM server, nothing else
        for (bad, why) in [("ping:h", "latency-only"), ("udp:h", "latency-only"), ("ftp://h/", "RPM server"), ("h:99999", "not a port"), ("https://h/#x=1", "pin-sha256")] {
            let e = srv(bad).unwrap_err();
            assert!(e.contains(why) && e.contains("tune measures"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_step_loads_one_direction_and_the_verification_is_the_quick_profile() {
        let mut c = TuneConfig { wan: "eth1".into(), ..Default::default() };
        c.set_server("192.0.2.1:5999").unwrap();
        let TuneTest::Test(s) = c.step_test(true).unwrap() else { panic!("a bloatlab server's step is a test") };
        assert_eq!((s.server.as_str(), s.port), ("192.0.2.1", 5999));
        assert_eq!(s.scenarios, vec![Scenario::new(4, 0)]);
        assert_eq!(s.until_settled, Some(STEP_CAP));
        let TuneTest::Test(v) = c.verify_test().unwrap() else { panic!() };
        assert_eq!(v.profile, Some(crate::web::Profile::Quick));
        c.set_server("[2001:db8::1]:5999").unwrap();
        let TuneTest::Test(s) = c.step_test(false).unwrap() else { panic!() };
        assert_eq!((s.server.as_str(), s.port), ("2001:db8::1", 5999));
    }

    #[test]
    fn an_rpm_server_is_measured_by_its_stages_after_idle_probes() {
        let pin = "65f09ce4151094751545164182e7e745f17a7466f54c2bbfc3eb10b2f9561aa7";
        let mut c = TuneConfig { wan: "eth1".into(), ..Default::default() };
        c.set_server(&format!("https://nq.example.net:4043/.well-known/nq#pin-sha256={pin}")).unwrap();
        c.check().unwrap();
        assert_eq!(c.server_name(), "https://nq.example.net:4043/.well-known/nq");
        assert_eq!(c.server.as_ref().unwrap().address().unwrap(), ("nq.example.net".to_string(), 4043));
        let TuneTest::Rpm(v) = c.verify_test().unwrap() else { panic!("an RPM server's test is the RPM method") };
        assert_eq!((v.directions.clone(), v.idle, v.pin_sha256.as_deref()), (vec![crate::RpmDirection::Download, crate::RpmDirection::Upload], RPM_IDLE, Some(pin)));
        let TuneTest::Rpm(s) = c.step_test(true).unwrap() else { panic!() };
        assert_eq!((s.directions.clone(), s.max_stage), (vec![crate::RpmDirection::Upload], STEP_CAP));
        c.set_server("https://[2001:db8::1]/").unwrap();
        assert_eq!(c.server.as_ref().unwrap().address().unwrap(), ("2001:db8::1".to_string(), 443));
        c.set_server("https://h.example").unwrap();
        assert_eq!(c.server.as_ref().unwrap().address().unwrap(), ("h.example".to_string(), 443));
    }
}
