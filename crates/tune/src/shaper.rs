//! The shaper on a live interface while tune searches: set to a pair of
//! rates (each step replaces the last), kept, or put back exactly as it
//! was. In the kernel (cake, or HTB + fq_codel, through [`crate::apply`])
//! or as bloatlab's user-space shaper (`bloatlab emulate` with policy
//! routing, for kernels with neither). Which one, and why, is chosen once
//! by [`choose`] from what the kernel offers.
use crate::apply::{self, run_in};
use crate::plan::{Leaf, Plan, EMULATOR_TABLES, EMULATOR_TUN};
use crate::state::{self, Saved};
use bloatlab_model::{QueueSpec, Rate, RateSpec, TuneShaper};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Where the shaper goes.
#[derive(Debug, Clone)]
pub struct Place {
    /// The namespace the router's interfaces are in (the lab's home router), if any.
    pub netns: Option<String>,
    pub wan: String,
    /// The LAN-side interfaces (the emulator shaper's).
    pub lan: Vec<String>,
    /// Where the saved state waits for its undo.
    pub state_file: PathBuf,
    /// The bloatlab binary (the emulator shaper runs `bloatlab emulate`).
    pub exe: PathBuf,
    /// For the emulator's statistics and log.
    pub run_dir: PathBuf,
}

/// What the kernel offers a shaper, probed on a scratch veth pair.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Support {
    pub cake: bool,
    pub htb: bool,
    pub fq_codel: bool,
    /// IFB devices, the ingress qdisc, u32 filters and the mirred action:
    /// the download path of a kernel shaper.
    pub ifb: bool,
    pub tun: bool,
}

/// Probe the kernel (in `netns`) for what a shaper needs, on a scratch
/// veth pair (`bltune-p0`/`p1`) and IFB (`bltune-ifb`) that are removed again.
pub fn probe(netns: Option<&str>) -> Result<Support, String> {
    let scratch = bloatlab_shape::probe::Scratch::new(netns, "bltune-p0", "bltune-p1")?;
    Ok(Support {
        cake: scratch.has("cake", &[]),
        htb: scratch.has("htb", &[]),
        fq_codel: scratch.has("fq_codel", &[]),
        ifb: scratch.has_ifb_redirect("bltune-ifb"),
        tun: Path::new("/dev/net/tun").exists(),
    })
}

/// The shaper tune uses, and why: the one asked for, or with `auto` cake,
/// else HTB + fq_codel, else the emulator. Refused, naming what is
/// missing and what to install, when the kernel lacks what it needs.
pub fn choose(asked: TuneShaper, s: &Support, overhead: u32, mpu: u32, lan_host_measures: bool) -> Result<(Leaf, String), String> {
    let ifb = |what: &str| -> Result<(), String> {
        if s.ifb {
            Ok(())
        } else {
            Err(format!("{what} shapes download on an IFB device, and this kernel cannot redirect ingress to one (ifb, sch_ingress, cls_u32, act_mirred: on Debian they are in the kernel, `modprobe ifb act_mirred`; on OpenWrt `opkg install kmod-ifb kmod-sched`)"))
        }
    };
    let emulator = |why: String| -> Result<(Leaf, String), String> {
        if !s.tun {
            return Err(format!("{why}, and there is no /dev/net/tun for bloatlab's user-space shaper (modprobe tun)"));
        }
        if !lan_host_measures {
            return Err(format!("{why}; bloatlab's user-space shaper shapes the traffic the router forwards, not its own, so the tests must run from a LAN host: --client-netns NETNS (or install cake/fq_codel: kmod-sched-cake on OpenWrt)"));
        }
        Ok((Leaf::Emulator, why))
    };
    match asked {
        TuneShaper::Cake if !s.cake => Err("this kernel has no cake qdisc (sch_cake: `modprobe sch_cake`; OpenWrt: `opkg install kmod-sched-cake`); --sqm fq_codel or auto".into()),
        TuneShaper::Cake => ifb("cake").map(|_| (Leaf::Cake { overhead, mpu }, "as asked".to_string())),
        TuneShaper::FqCodel if !(s.htb && s.fq_codel) => Err(format!(
            "this kernel lacks {} (sch_htb, sch_fq_codel); --sqm cake, emulator or auto",
            [(!s.htb).then_some("htb"), (!s.fq_codel).then_some("fq_codel")].into_iter().flatten().collect::<Vec<_>>().join(" and ")
        )),
        TuneShaper::FqCodel => ifb("HTB + fq_codel").map(|_| (Leaf::FqCodel, "as asked".to_string())),
        TuneShaper::Emulator => emulator("as asked".into()),
        TuneShaper::Auto if s.cake && s.ifb => Ok((Leaf::Cake { overhead, mpu }, "the kernel has cake".into())),
        TuneShaper::Auto if s.htb && s.fq_codel && s.ifb => Ok((Leaf::FqCodel, "the kernel has no cake".into())),
        TuneShaper::Auto => emulator(format!(
            "this kernel has {}",
            if !s.ifb && (s.cake || s.fq_codel) { "no IFB path for the download (ifb, act_mirred)" } else { "neither cake nor fq_codel" }
        )),
    }
}

/// The LAN side when none is named: every interface that is up, but
/// the loopback, the WAN and tune's own devices.
pub fn default_lan(netns: Option<&str>, wan: &str) -> Result<Vec<String>, String> {
    let out = run_in(netns, &["ip", "-j", "link", "show", "up"].map(String::from))?;
    #[derive(serde::Deserialize)]
    struct Link {
        ifname: String,
    }
    let links: Vec<Link> = serde_json::from_str(&out).map_err(|e| format!("cannot read `ip -j link show`: {e}"))?;
    let skip = |n: &str| n == "lo" || n == wan || n == EMULATOR_TUN.0 || n == EMULATOR_TUN.1 || n.starts_with("ifb4") || n.starts_with("bltune-");
    Ok(links.into_iter().map(|l| l.ifname).filter(|n| !skip(n)).collect())
}

/// The shaper as tune drives it.
pub struct LineShaper {
    pub place: Place,
    pub leaf: Leaf,
    /// Why this shaper (for the record).
    pub why: String,
    saved: Option<Saved>,
    emulator: Option<bloatlab_emulator::EmulatorHandle>,
    /// The plan in place now.
    current: Option<Plan>,
}

impl LineShaper {
    pub fn new(place: Place, leaf: Leaf, why: String) -> LineShaper {
        LineShaper { place, leaf, why, saved: None, emulator: None, current: None }
    }

    /// What is in place now (None: the interface as it was).
    pub fn current(&self) -> Option<&Plan> {
        self.current.as_ref()
    }

    fn plan(&self, up: Option<Rate>, down: Option<Rate>) -> Plan {
        let mut p = Plan::new(&self.place.wan, up, down, self.leaf);
        if self.leaf == Leaf::Emulator {
            p.lan = self.place.lan.clone();
        }
        p
    }

    /// Shape at these rates (None: that direction unshaped; both None:
    /// the interface as it was). Replaces what was set before.
    pub fn set(&mut self, up: Option<Rate>, down: Option<Rate>) -> Result<(), String> {
        self.restore()?;
        if up.is_none() && down.is_none() {
            return Ok(());
        }
        let plan = self.plan(up, down);
        if plan.is_emulator() {
            self.start_emulator(plan, true)
        } else {
            self.saved = Some(apply::install(&plan, self.place.netns.as_deref(), &self.place.state_file)?);
            self.current = Some(plan);
            Ok(())
        }
    }

    fn start_emulator(&mut self, plan: Plan, die_with_parent: bool) -> Result<(), String> {
        let ns = self.place.netns.as_deref();
        if !apply::device_exists(ns, &plan.wan) {
            return Err(format!("there is no interface {}{}", plan.wan, ns.map(|n| format!(" in {n}")).unwrap_or_default()));
        }
        if self.place.state_file.exists() {
            return Err(format!(
                "{} holds the state of a tune not undone yet: run `bloatlab tune --undo {}` first",
                self.place.state_file.display(),
                plan.wan
            ));
        }
        let before = apply::qdiscs(ns, &plan.wan)?;
        let dir = |r: Option<&crate::plan::Setting>| bloatlab_emulator::DirectionConfig {
            rate: r.map(|s| RateSpec::Fixed { bps: s.rate_bps }).unwrap_or(RateSpec::Unlimited),
            queue: if r.is_some() { QueueSpec::parse("fq_codel").expect("fq_codel") } else { QueueSpec::Fifo { packets: 1000 } },
            // HTB counts the Ethernet header on a veth; so does the shaper
            overhead_bytes: 14,
            ..Default::default()
        };
        let cfg = bloatlab_emulator::EmulatorConfig { up: dir(plan.upload.as_ref()), down: dir(plan.download.as_ref()), ..Default::default() };
        let stats = self.place.run_dir.join("tune-emulator.json");
        let lan: Vec<&str> = plan.lan.iter().map(String::as_str).collect();
        let mut o = bloatlab_emulator::StartOptions::new(&self.place.exe, ns.unwrap_or(""), &cfg, &lan, &[&plan.wan], &stats);
        o.spec.netns = ns.map(String::from);
        o.spec.tun_up = EMULATOR_TUN.0.into();
        o.spec.tun_down = EMULATOR_TUN.1.into();
        o.spec.table_up = EMULATOR_TABLES.0;
        o.spec.table_down = EMULATOR_TABLES.1;
        o.die_with_parent = die_with_parent;
        let mut saved = Saved {
            iface: plan.wan.clone(),
            netns: ns.map(String::from),
            before,
            plan: plan.clone(),
            emulator_pid: None,
            pid: std::process::id(),
            at_unix_s: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
            local: None,
        };
        // saved before the change: a kill in between still leaves the undo its plan
        saved.save(&self.place.state_file)?;
        let h = match bloatlab_emulator::start_with(o) {
            Ok(h) => h,
            Err(e) => {
                let _ = undo(&saved, &self.place.state_file);
                return Err(format!("starting bloatlab's user-space shaper: {e:#}"));
            }
        };
        saved.emulator_pid = h.pid();
        saved.save(&self.place.state_file)?;
        if die_with_parent {
            self.emulator = Some(h);
        } else {
            h.detach();
        }
        self.saved = Some(saved);
        self.current = Some(plan);
        Ok(())
    }

    /// Put the interface back as it was (and check that it reads so).
    pub fn restore(&mut self) -> Result<(), String> {
        if let Some(h) = self.emulator.take() {
            // the emulator removes its routing when it stops
            let _ = h.stop();
        }
        self.current = None;
        match self.saved.take() {
            Some(s) => undo(&s, &self.place.state_file),
            None => Ok(()),
        }
    }

    /// Leave the current shaper in place when tune ends (the emulator
    /// shaper restarted on its own, outliving tune); the state stays on
    /// disk for `bloatlab tune --undo`.
    pub fn keep(&mut self) -> Result<Option<Plan>, String> {
        let Some(plan) = self.current.clone() else { return Ok(None) };
        if plan.is_emulator() {
            self.restore()?;
            self.start_emulator(plan.clone(), false)?;
        }
        self.saved = None;
        self.emulator = None;
        Ok(Some(plan))
    }
}

impl Drop for LineShaper {
    fn drop(&mut self) {
        if self.saved.is_some() {
            if let Err(e) = self.restore() {
                eprintln!("bloatlab tune: putting {} back: {e}; run `bloatlab tune --undo {}`", self.place.wan, self.place.wan);
            }
        }
    }
}

/// The start time of process `pid` (clock ticks since boot, /proc/PID/stat
/// field 22), to tell it from a later process with the same pid.
fn start_time(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    s[s.rfind(')')? + 2..].split_whitespace().nth(19)?.parse().ok()
}

/// Stop the emulator shaper a saved state names: only a `bloatlab
/// emulate` process (checked by its command line), SIGTERM, then SIGKILL
/// after 10 s.
fn stop_emulator(pid: u32) -> Result<(), String> {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let words: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
    if !words.iter().any(|w| *w == b"emulate") {
        return Ok(()); // gone (or the pid is another process's now)
    }
    let t0 = start_time(pid);
    bloatlab_host::process::signal(pid, bloatlab_host::process::Signal::Term);
    let deadline = Instant::now() + Duration::from_secs(10);
    while start_time(pid).is_some() && start_time(pid) == t0 {
        let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat")).map(|s| s.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z')).unwrap_or(true);
        if zombie {
            break;
        }
        if Instant::now() > deadline {
            bloatlab_host::process::signal(pid, bloatlab_host::process::Signal::Kill);
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// Undo a saved tune (a kernel shaper's qdiscs and IFB, or the emulator
/// shaper's process and rules) and check the interface reads as before.
pub fn undo(saved: &Saved, state_file: &Path) -> Result<(), String> {
    if let Some(pid) = saved.emulator_pid {
        stop_emulator(pid)?;
    }
    apply::undo(saved, state_file)?;
    if saved.plan.is_emulator() {
        let ns = saved.netns.as_deref();
        for t in [EMULATOR_TUN.0, EMULATOR_TUN.1] {
            if apply::device_exists(ns, t) {
                return Err(format!("the user-space shaper's device {t} is still there"));
            }
        }
    }
    Ok(())
}

/// `bloatlab tune --undo IFACE`: undo what the saved state in `dir` names.
pub fn undo_saved(dir: &Path, netns: Option<&str>, iface: &str) -> Result<Saved, String> {
    let f = state::path(dir, netns, iface);
    if !f.exists() {
        return Err(format!("nothing to undo on {iface}: no saved state at {} (tune puts its interface back itself unless it was killed or run with --keep)", f.display()));
    }
    let s = Saved::load(&f)?;
    undo(&s, &f)?;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_takes_cake_then_fq_codel_then_the_emulator_and_says_why() {
        let all = Support { cake: true, htb: true, fq_codel: true, ifb: true, tun: true };
        let (l, why) = choose(TuneShaper::Auto, &all, 18, 64, false).unwrap();
        assert_eq!(l, Leaf::Cake { overhead: 18, mpu: 64 });
        assert_eq!(why, "the kernel has cake");
        let no_cake = Support { cake: false, ..all.clone() };
        assert_eq!(choose(TuneShaper::Auto, &no_cake, 18, 64, false).unwrap().0, Leaf::FqCodel);
        // this machine's kernel: htb and IFB, no AQM
        let here = Support { cake: false, fq_codel: false, ..all.clone() };
        let e = choose(TuneShaper::Auto, &here, 18, 64, false).unwrap_err();
        assert!(e.contains("neither cake nor fq_codel") && e.contains("--client-netns"), "{e}");
        let (l, why) = choose(TuneShaper::Auto, &here, 18, 64, true).unwrap();
        assert_eq!(l, Leaf::Emulator);
        assert_eq!(why, "this kernel has neither cake nor fq_codel");
        assert!(choose(TuneShaper::Cake, &here, 18, 64, true).unwrap_err().contains("kmod-sched-cake"));
        assert!(choose(TuneShaper::FqCodel, &here, 18, 64, true).unwrap_err().contains("lacks fq_codel"));
        let no_ifb = Support { ifb: false, ..all.clone() };
        assert!(choose(TuneShaper::FqCodel, &no_ifb, 18, 64, true).unwrap_err().contains("IFB"));
        assert!(choose(TuneShaper::Emulator, &Support { tun: false, ..all }, 18, 64, true).unwrap_err().contains("/dev/net/tun"));
    }
}
