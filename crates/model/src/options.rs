//! Every option of an experiment, defined once: its name, help, value
//! spelling and how it reads and writes the configuration it belongs to:
//! the measurement options of `bloatlab test` ([`TEST_OPTIONS`], on
//! [`TestConfig`]) and the link options of `bloatlab lab` ([`LAB_OPTIONS`],
//! on [`LabConfig`]).
//!
//! Every front end derives from these tables: the `bloatlab test` and
//! `bloatlab lab` command lines, the options after `bloatlab lab --` and
//! `bloatlab sweep --` (the binary builds its clap arguments from the
//! tables, so completions and man pages follow), the parameters of
//! `bloatlab sweep --set` and of recipe files, and the dry run that prints
//! what a point will run. An option added here appears in all of them; the
//! tests in crates/cli walk the tables through every front end to the
//! configuration the engine and the lab run.
//!
//! A value is checked once, where it enters (a command line, a recipe
//! file), and kept in its canonical spelling in [`Overrides`], which layers
//! the user's options over a front end's defaults (the lab's test defaults
//! differ from `bloatlab test`'s).
use crate::config::{check_cc, TestConfig, UDP_PAYLOAD_DEFAULT};
use crate::dscp::Dscp;
use crate::lab::{Backend, LabConfig, OnOff, Placement, Shaper};
use crate::queue::QueueSpec;
use crate::ping::PingTarget;
use crate::rpm::RpmDirection;
use crate::scenario::{list_name, Ramp, Scenario};
use crate::units::{fmt_bytes, fmt_duration, fmt_rate_tc, parse_bytes, parse_duration};
use crate::Rate;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::time::Duration;

/// How an option takes its value on a command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arity {
    /// `--rx-copy`: on when given (`on`/`off` in a recipe or sweep).
    Switch,
    /// `--duration 5s`.
    Value,
    /// `--rpm` alone means `missing`; `--rpm=upload` gives a value.
    OptionalValue { missing: &'static str },
    /// `--ping A --ping B`: each occurrence adds one (joined with `+` in a
    /// recipe or sweep value).
    Repeated,
}

/// What a value looks like: for completions and plot axes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Duration,
    Rate,
    Bytes,
    Int,
    /// A comma-separated list (joined with `+` in a sweep value, where commas
    /// separate the values swept).
    List,
    /// A host name or address.
    Host,
    /// A file name.
    File,
    /// A bottleneck queue (its number: a fifo's packets, a bfifo's bytes).
    Queue,
    /// Any other word.
    Word,
    OnOff,
}

/// A configuration whose options are defined in a table here.
pub trait Configurable: Default + 'static {
    /// The command whose options these are, for messages: "`bloatlab test`".
    const COMMAND: &'static str;
    fn options() -> &'static [OptionDef<Self>];
    /// Named configurations of `Self` whose values the help states after
    /// the default (`bloatlab lab`'s test: `[default: 5s; lab: 18s]`).
    fn profiles() -> Vec<(&'static str, Self)> {
        Vec::new()
    }
    /// A default held elsewhere than in `Self::default()`, spelled as the
    /// option's values (`bloatlab lab`'s two demo queues).
    fn default_elsewhere(_long: &str) -> Option<String> {
        None
    }
}

impl Configurable for TestConfig {
    const COMMAND: &'static str = "`bloatlab test`";
    fn options() -> &'static [TestOption] {
        TEST_OPTIONS
    }
    fn profiles() -> Vec<(&'static str, Self)> {
        vec![("lab", LabConfig::default().test_defaults())]
    }
    fn default_elsewhere(long: &str) -> Option<String> {
        // unset without --udp (the argument is not given then)
        (long == "udp-size").then(|| UDP_PAYLOAD_DEFAULT.to_string())
    }
}

impl Configurable for LabConfig {
    const COMMAND: &'static str = "`bloatlab lab`";
    fn options() -> &'static [LabOption] {
        LAB_OPTIONS
    }
    fn default_elsewhere(long: &str) -> Option<String> {
        (long == "queue").then(|| crate::lab::DEMO_QUEUES.iter().map(|q| q.to_string()).collect::<Vec<_>>().join(","))
    }
}

/// A measurement option of `bloatlab test`.
pub type TestOption = OptionDef<TestConfig>;
/// A link option of `bloatlab lab`.
pub type LabOption = OptionDef<LabConfig>;

/// One option of a [`Configurable`] configuration `T`.
pub struct OptionDef<T: 'static> {
    /// The long flag without dashes (`probe-interval`); recipes and sweeps
    /// spell it with `_` (`probe_interval`).
    pub long: &'static str,
    pub short: Option<char>,
    pub value_name: &'static str,
    /// What the option does. The help ([`OptionDef::help`]) adds the
    /// defaults, spelled from the configurations themselves; a default no
    /// value spells is stated here in words at the end (`[default: each
    /// host's]`, `[lab: --cc]`), and only such a one.
    pub doc: &'static str,
    pub arity: Arity,
    pub shape: Shape,
    /// Fixed words the value is one of (for completions), if any.
    pub choices: &'static [&'static str],
    /// Another option this one needs (`udp-size` needs `udp`).
    pub requires: Option<&'static str>,
    /// On the `bloatlab lab` command line a comma list runs one test per
    /// value (`--queue fifo:1000,fifo:10`).
    pub one_run_each: bool,
    /// Values other than `bloatlab test`'s defaults, in the canonical
    /// spelling: the tests carry each through every front end.
    pub examples: &'static [&'static str],
    /// Parse one value (of a [`Arity::Repeated`] option: one occurrence)
    /// and store it in the configuration.
    pub(crate) set: fn(&mut T, &str) -> Result<(), String>,
    /// The configuration's value in the canonical spelling, one string per
    /// occurrence; empty when the option is off or unset (`--rpm` not run,
    /// no `--ping`, no `--witness`, `--rx-copy` off).
    pub(crate) get: fn(&T) -> Vec<String>,
}

impl<T> Clone for OptionDef<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for OptionDef<T> {}

impl<T> std::fmt::Debug for OptionDef<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "--{}", self.long)
    }
}

impl<T> PartialEq for OptionDef<T> {
    fn eq(&self, o: &OptionDef<T>) -> bool {
        self.long == o.long
    }
}

impl<T> Eq for OptionDef<T> {}

impl<T: Configurable> OptionDef<T> {
    /// The name in recipes and sweeps: `probe_interval`.
    pub fn param_name(&self) -> String {
        self.long.replace('-', "_")
    }

    /// Set this option's value in `t` (one occurrence of a repeated option).
    /// The error says what is wrong with the value; where the value came
    /// from (a flag, a recipe parameter) is for the caller to say.
    pub fn set(&self, t: &mut T, raw: &str) -> Result<(), String> {
        (self.set)(t, raw.trim())
    }

    /// An error about `raw` as this option's command-line flag names it:
    /// `--rate "fast": ...` (messages that name their flag already stay).
    pub fn flag_error(&self, raw: &str, e: String) -> String {
        if e.starts_with("--") {
            e
        } else {
            format!("--{} {raw:?}: {e}", self.long)
        }
    }

    /// The help text: the doc, then the defaults of `T::default()` and of
    /// `T`'s profiles as the option spells them (`[default: 5s; lab: 18s]`),
    /// where the doc states no default in words.
    pub fn help(&self) -> String {
        let (about, words) = stated_defaults(self.doc);
        let spelled = |t: &T| Some(self.get(t)).filter(|v| !v.is_empty()).map(|v| v.join(","));
        let d = T::default();
        let mut parts = Vec::new();
        let word = |key: &str| words.iter().find(|(k, _)| *k == key).map(|(_, w)| w.to_string());
        if let Some(v) = word("default").or_else(|| T::default_elsewhere(self.long)).or_else(|| spelled(&d)) {
            parts.push(format!("default: {v}"));
        }
        for (name, p) in T::profiles() {
            if let Some(v) = word(name).or_else(|| (spelled(&p) != spelled(&d)).then(|| spelled(&p).unwrap_or_else(|| "off".into()))) {
                parts.push(format!("{name}: {v}"));
            }
        }
        match parts.is_empty() {
            true => about.trim_end().to_string(),
            false => format!("{} [{}]", about.trim_end(), parts.join("; ")),
        }
    }

    /// `t`'s value of this option, canonically spelled (empty = off / unset).
    pub fn get(&self, t: &T) -> Vec<String> {
        (self.get)(t)
    }

    /// Check one value and spell it canonically (`5` -> `5s`, `1U0D` -> `1u0d`).
    pub fn canonical(&self, raw: &str) -> Result<String, String> {
        // (a repeated option's default is no occurrence: the last is this one)
        let mut t = T::default();
        self.set(&mut t, raw)?;
        let v = (self.get)(&t);
        Ok(match v.len() {
            0 => "off".into(),
            _ => v.last().cloned().unwrap_or_default(),
        })
    }

    /// This option with `value` as command-line arguments.
    pub fn args(&self, value: &str) -> Vec<String> {
        match self.arity {
            Arity::Switch if value == "on" => vec![format!("--{}", self.long)],
            Arity::Switch => vec![],
            Arity::OptionalValue { missing } if value == missing => vec![format!("--{}", self.long)],
            Arity::OptionalValue { .. } => vec![format!("--{}={value}", self.long)],
            Arity::Value | Arity::Repeated => vec![format!("--{}", self.long), value.to_string()],
        }
    }
}

/// A doc split into its text and the defaults it states in words at its
/// end: `"Length [default: each host's; lab: --cc]"` -> `("Length",
/// [("default", "each host's"), ("lab", "--cc")])`.
fn stated_defaults(doc: &str) -> (&str, Vec<(&str, &str)>) {
    let starts_group = |i: &usize| doc[i + 2..].split_once(": ").is_some_and(|(k, _)| !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'));
    let Some(i) = doc.match_indices(" [").map(|(i, _)| i).find(starts_group).filter(|_| doc.ends_with(']')) else { return (doc, Vec::new()) };
    let inner = &doc[i + 2..doc.len() - 1];
    let mut parts = Vec::new();
    // "; NAME: " starts the next part (a part's words may hold "; ")
    let mut rest = inner;
    loop {
        let Some((key, after)) = rest.split_once(": ") else { return (doc, Vec::new()) };
        if key.contains(' ') {
            return (doc, Vec::new());
        }
        let next = after.match_indices("; ").find(|(j, _)| after[j + 2..].split_once(": ").is_some_and(|(k, _)| !k.contains(' ') && !k.is_empty()));
        match next {
            Some((j, _)) => {
                parts.push((key, &after[..j]));
                rest = &after[j + 2..];
            }
            None => {
                parts.push((key, after));
                break;
            }
        }
    }
    (&doc[..i], parts)
}

/// The option of `T` named `long` (`probe-interval`) or, as recipes spell
/// it, `probe_interval`.
pub fn option<T: Configurable>(name: &str) -> Option<&'static OptionDef<T>> {
    let long = name.replace('_', "-");
    T::options().iter().find(|o| o.long == long)
}

/// The `bloatlab test` option named `name`.
pub fn test_option(name: &str) -> Option<&'static TestOption> {
    option::<TestConfig>(name)
}

/// The `bloatlab lab` option named `name`.
pub fn lab_option(name: &str) -> Option<&'static LabOption> {
    option::<LabConfig>(name)
}

fn dur(s: &str) -> Result<std::time::Duration, String> {
    parse_duration(s)
}

/// One value, as an option's `get` spells it.
pub(crate) fn one<T: ToString>(v: T) -> Vec<String> {
    vec![v.to_string()]
}

/// A whole number of an option (its range is the configuration's check).
pub(crate) fn count(s: &str) -> Result<u32, String> {
    s.trim().parse().map_err(|_| format!("`{s}` is not a whole number"))
}

/// A switch's value in a recipe, sweep or config file: on/off (true/false, yes/no, 1/0).
pub(crate) fn on_off(s: &str) -> Result<bool, String> {
    match s.to_ascii_lowercase().as_str() {
        "on" | "true" | "yes" | "1" => Ok(true),
        "off" | "false" | "no" | "0" => Ok(false),
        _ => Err(format!("`{s}` is not on or off")),
    }
}

fn parse_socket_buffer(s: &str) -> Result<u32, String> {
    let b = parse_bytes(s)?;
    if b > (i32::MAX / 2) as u64 {
        return Err(format!("`{s}` is too large (at most 1 GiB)"));
    }
    Ok(b as u32)
}

/// Every measurement option of `bloatlab test`, in `--help` order.
pub static TEST_OPTIONS: &[TestOption] = &[
    // first: the options after it adjust what the profile set
    TestOption {
        long: "profile",
        short: None,
        value_name: "PROFILE",
        doc: "Run a named test plan, as the browser test does: quick (idle 2s; 0u4d, 4u0d, 3u3d, each at least \
               5s and on until latency stopped rising, at most 15s), thorough (idle 4s; each 12s to 30s) or \
               household (0u4d and 4u0d as quick, then 12s of a game, a video call, a stream and a bulk update \
               at once, each judged); options given with it adjust it [default: none: --scenarios and --duration \
               as given]",
        arity: Arity::Value,
        shape: Shape::Word,
        choices: crate::web::Profile::WORDS,
        requires: None,
        one_run_each: false,
        examples: crate::web::Profile::WORDS,
        set: |t, s| crate::web::WebPlan::of(s.parse()?).apply_to(t),
        get: |t| t.profile.map(one).unwrap_or_default(),
    },
    TestOption {
        long: "scenarios",
        short: Some('s'),
        value_name: "NuMd,...|auto",
        doc: "Scenarios NuMd (N uploads, M downloads, 0..32 each), comma separated; or auto (auto-up, \
               auto-down): per direction 1, 2, 4, ... flows until doubling them adds less than 5% goodput \
              ",
        arity: Arity::Value,
        shape: Shape::List,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["auto", "1u1d,4u0d"],
        set: |t, s| {
            match Ramp::parse(s) {
                Some(r) => {
                    t.ramp = Some(r);
                    t.scenarios = vec![];
                }
                None => {
                    t.scenarios = Scenario::parse_list(s).map_err(|e| format!("{e}; or auto, auto-up, auto-down to ramp the flows"))?;
                    t.ramp = None;
                }
            }
            Ok(())
        },
        get: |t| match &t.ramp {
            Some(r) => one(r.name()),
            None => one(list_name(&t.scenarios)),
        },
    },
    TestOption {
        long: "duration",
        short: Some('d'),
        value_name: "DURATION",
        doc: "Length of each scenario",
        arity: Arity::Value,
        shape: Shape::Duration,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["7s"],
        set: |t, s| Ok(t.duration = dur(s)?),
        get: |t| one(fmt_duration(t.duration)),
    },
    TestOption {
        long: "until-settled",
        short: None,
        value_name: "CAP",
        doc: "Run each scenario at least --duration, then on until the probes' round trip stopped rising \
               (the last 3 one-second medians within 5% + 1 ms of the highest before them), at most CAP; \
               a scenario that reaches CAP still rising is marked still_rising [default: off]",
        arity: Arity::Value,
        shape: Shape::Duration,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["30s"],
        set: |t, s| Ok(t.until_settled = Some(dur(s)?)),
        get: |t| t.until_settled.map(|d| one(fmt_duration(d))).unwrap_or_default(),
    },
    TestOption {
        long: "idle",
        short: None,
        value_name: "DURATION",
        doc: "Idle baseline before the first scenario (0 = none; added latency then unavailable)",
        arity: Arity::Value,
        shape: Shape::Duration,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["0s", "3.5s"],
        set: |t, s| Ok(t.idle = dur(s)?),
        get: |t| one(fmt_duration(t.idle)),
    },
    TestOption {
        long: "pause",
        short: None,
        value_name: "DURATION",
        doc: "Pause between scenarios so queues drain [lab: 1.5 x the full queue's delay + 0.5 s]",
        arity: Arity::Value,
        shape: Shape::Duration,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["4s"],
        set: |t, s| Ok(t.pause = dur(s)?),
        get: |t| one(fmt_duration(t.pause)),
    },
    TestOption {
        long: "probe-interval",
        short: None,
        value_name: "DURATION",
        doc: "UDP probe interval (isochronous); also paces the TCP request/response probe",
        arity: Arity::Value,
        shape: Shape::Duration,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["20ms"],
        set: |t, s| Ok(t.probe_interval = dur(s)?),
        get: |t| one(fmt_duration(t.probe_interval)),
    },
    TestOption {
        long: "probe-size",
        short: None,
        value_name: "BYTES",
        doc: "UDP probe payload size, bytes (48..1472)",
        arity: Arity::Value,
        shape: Shape::Int,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["200"],
        set: |t, s| Ok(t.probe_size = s.parse().map_err(|_| "not a whole number of bytes".to_string())?),
        get: |t| one(t.probe_size),
    },
    TestOption {
        long: "sample-interval",
        short: None,
        value_name: "DURATION",
        doc: "Goodput and TCP_INFO sampling interval (10ms..1s)",
        arity: Arity::Value,
        shape: Shape::Duration,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["50ms"],
        set: |t, s| Ok(t.sample_interval = dur(s)?),
        get: |t| one(fmt_duration(t.sample_interval)),
    },
    TestOption {
        long: "cc",
        short: None,
        value_name: "NAME",
        doc: "Congestion control of the load flows on both ends (e.g. cubic, bbr, reno) [default: each host's; lab: --cc]",
        arity: Arity::Value,
        shape: Shape::Word,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["reno"],
        set: |t, s| {
            check_cc(s)?;
            if s.is_empty() {
                return Err("an empty name".into());
            }
            t.cc = s.to_string();
            Ok(())
        },
        get: |t| if t.cc.is_empty() { vec![] } else { one(&t.cc) },
    },
    TestOption {
        long: "socket-buffer",
        short: None,
        value_name: "SIZE",
        doc: "SO_SNDBUF/SO_RCVBUF of the load flows on both ends (e.g. 4M) [default: kernel autotuning]",
        arity: Arity::Value,
        shape: Shape::Bytes,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["4m"],
        set: |t, s| Ok(t.socket_buffer = parse_socket_buffer(s)?),
        get: |t| if t.socket_buffer == 0 { vec![] } else { one(fmt_bytes(t.socket_buffer.into())) },
    },
    TestOption {
        long: "rx-copy",
        short: None,
        value_name: "on|off",
        doc: "TCP load receivers (both ends) copy the data into user space, as an application would \
               [default: the kernel discards it unread (MSG_TRUNC, iperf3's --skip-rx-copy), so a fast link \
               is not limited by the receiver's memory copy]",
        arity: Arity::Switch,
        shape: Shape::OnOff,
        choices: &["on", "off"],
        requires: None,
        one_run_each: false,
        examples: &["on"],
        set: |t, s| Ok(t.rx_copy = on_off(s)?),
        get: |t| if t.rx_copy { one("on") } else { vec![] },
    },
    TestOption {
        long: "dscp",
        short: None,
        value_name: "CLASS[,CLASS...]",
        doc: "DSCP classes of the load flows, taken in turn by each direction's flows (e.g. BE,BK,CS5,EF as \
               flent's RRUL; names or 0..63; at most 7 distinct); each class also gets its own marked latency \
               probes, and the summary a row per class [default: unmarked]",
        arity: Arity::Value,
        shape: Shape::List,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["BE,BK,CS5,EF"],
        set: |t, s| Ok(t.dscp = Dscp::parse_list(s)?),
        get: |t| if t.dscp.is_empty() { vec![] } else { one(t.dscp.iter().map(Dscp::to_string).collect::<Vec<_>>().join(",")) },
    },
    TestOption {
        long: "udp",
        short: None,
        value_name: "RATE",
        doc: "UDP load instead of bulk TCP: every load flow sends datagrams at RATE (iperf3's -u -b); offered \
               and received rate, loss, reordering and jitter are reported per direction (and per flow in the JSON)",
        arity: Arity::Value,
        shape: Shape::Rate,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["5mbit"],
        set: |t, s| Ok(t.udp_rate_bps = Some(Rate::parse(s)?.bps)),
        get: |t| t.udp_rate_bps.map(fmt_rate_tc).into_iter().collect(),
    },
    TestOption {
        long: "udp-size",
        short: None,
        value_name: "BYTES",
        doc: "UDP payload of each load datagram, bytes (64..1472; with --udp)",
        arity: Arity::Value,
        shape: Shape::Int,
        choices: &[],
        requires: Some("udp"),
        one_run_each: false,
        examples: &["1000"],
        set: |t, s| Ok(t.udp_size = s.parse().map_err(|_| "not a whole number of bytes".to_string())?),
        get: |t| if t.udp_size == UDP_PAYLOAD_DEFAULT { vec![] } else { one(t.udp_size) },
    },
    TestOption {
        long: "ping",
        short: None,
        value_name: "HOST",
        doc: "Also ping HOST (ICMP echo; repeatable) while the test runs: a gateway, any host without a \
               bloatlab server (unprivileged ping sockets where net.ipv4.ping_group_range allows, else raw \
               sockets as root); in a lab also a role: router, server, witness, client",
        arity: Arity::Repeated,
        shape: Shape::Host,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["192.0.2.1"],
        set: |t, s| Ok(t.pings.push(PingTarget::icmp(s)?)),
        get: |t| t.pings.iter().filter(|p| p.kind == crate::PingKind::Icmp).map(|p| p.host.clone()).collect(),
    },
    TestOption {
        long: "tcp-ping",
        short: None,
        value_name: "HOST:PORT",
        doc: "Also time TCP connects to HOST:PORT (repeatable) while the test runs",
        arity: Arity::Repeated,
        shape: Shape::Host,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["192.0.2.2:443"],
        set: |t, s| Ok(t.pings.push(PingTarget::tcp(s)?)),
        get: |t| t.pings.iter().filter(|p| p.kind == crate::PingKind::Tcp).map(|p| p.label()["tcp ".len()..].to_string()).collect(),
    },
    TestOption {
        long: "ping-interval",
        short: None,
        value_name: "DURATION",
        doc: "Interval of each --ping / --tcp-ping target (10ms..10s)",
        arity: Arity::Value,
        shape: Shape::Duration,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["250ms"],
        set: |t, s| Ok(t.ping_interval = dur(s)?),
        get: |t| one(fmt_duration(t.ping_interval)),
    },
    TestOption {
        long: "rpm",
        short: None,
        value_name: "download|upload|bidirectional,...",
        doc: "After the scenarios, also run the IETF responsiveness method (as `bloatlab rpm`) against the \
               server's RPM endpoints, pinning the certificate the server announced: --rpm for \
               download,upload, or --rpm=STAGES (off: none)",
        arity: Arity::OptionalValue { missing: "download,upload" },
        shape: Shape::List,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["download,upload", "bidirectional"],
        set: |t, s| {
            t.rpm = match s {
                "off" | "none" => vec![],
                _ => s.split(',').map(|d| d.parse::<RpmDirection>()).collect::<Result<Vec<_>, _>>()?,
            };
            Ok(())
        },
        get: |t| if t.rpm.is_empty() { vec![] } else { one(t.rpm.iter().map(|d| d.name()).collect::<Vec<_>>().join(",")) },
    },
    TestOption {
        long: "witness",
        short: None,
        value_name: "HOST",
        doc: "A second bloatlab server that only receives UDP probes (the \"witness\" whose latency the load \
               harms) [lab: its witness host; or server]",
        arity: Arity::Value,
        shape: Shape::Host,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["192.0.2.3"],
        set: |t, s| {
            if s.is_empty() || s.contains(char::is_whitespace) {
                return Err("a host name or address".into());
            }
            t.witness = Some(s.to_string());
            Ok(())
        },
        get: |t| t.witness.iter().cloned().collect(),
    },
];

fn rate_word(r: Option<Rate>) -> String {
    r.map(|r| fmt_rate_tc(r.bps)).unwrap_or_else(|| "none".into())
}

fn opt_dur(d: Option<Duration>) -> Vec<String> {
    d.map(fmt_duration).into_iter().collect()
}

fn path(s: &str) -> Result<std::path::PathBuf, String> {
    if s.is_empty() || s.contains(',') {
        return Err("a file name without commas".into());
    }
    Ok(s.into())
}

/// Every link option of `bloatlab lab`, in `--help` order. Applied in this
/// order: `rate` before `rate-up`/`rate-down`, `queue` before `qdisc` and
/// `txqueuelen`, which replace it.
pub static LAB_OPTIONS: &[LabOption] = &[
    LabOption {
        long: "rate",
        short: None,
        value_name: "RATE",
        doc: "Bottleneck rate both ways: 10mbit, 1.5mbit, 100kbit, 1gbit, or none",
        arity: Arity::Value,
        shape: Shape::Rate,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["20mbit"],
        set: |c, s| {
            let r = Rate::parse_limit(s)?;
            c.rate_up = r;
            c.rate_down = r;
            Ok(())
        },
        get: |c| if c.rate_up == c.rate_down { one(rate_word(c.rate_up)) } else { vec![] },
    },
    LabOption {
        long: "rate-up",
        short: None,
        value_name: "RATE",
        doc: "Upload (client to server) rate [default: --rate]",
        arity: Arity::Value,
        shape: Shape::Rate,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["1mbit"],
        set: |c, s| Ok(c.rate_up = Rate::parse_limit(s)?),
        get: |c| one(rate_word(c.rate_up)),
    },
    LabOption {
        long: "rate-down",
        short: None,
        value_name: "RATE",
        doc: "Download (server to client) rate [default: --rate]",
        arity: Arity::Value,
        shape: Shape::Rate,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["50mbit"],
        set: |c, s| Ok(c.rate_down = Rate::parse_limit(s)?),
        get: |c| one(rate_word(c.rate_down)),
    },
    LabOption {
        long: "queue",
        short: None,
        value_name: "QUEUE[,QUEUE...]",
        doc: "Bottleneck queue: fifo:N (packets), bfifo:BYTES (64k = 65536), or with the emulator codel, fq_codel, \
               pie (e.g. codel:target=5ms), drophead:N; a bare number N is fifo:N; on the lab's command line a comma \
               list runs one test per queue",
        arity: Arity::Value,
        shape: Shape::Queue,
        choices: &[],
        requires: None,
        one_run_each: true,
        examples: &["fifo:100", "fq_codel"],
        set: |c, s| Ok(c.queue = QueueSpec::parse(s)?),
        get: |c| if c.kernel_qdisc().is_some() { vec![] } else { one(c.queue.label()) },
    },
    LabOption {
        long: "queue-up",
        short: None,
        value_name: "QUEUE",
        doc: "Upload (client to server) queue instead of --queue's, e.g. a modem's deep upstream buffer: --queue-up \
               fifo:500 --queue-down fifo:50; with only one of the two, a --queue list varies the other direction",
        arity: Arity::Value,
        shape: Shape::Queue,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["fifo:500"],
        set: |c, s| Ok(c.queue_up = Some(QueueSpec::parse(s)?)),
        get: |c| c.queue_up.iter().map(QueueSpec::label).collect(),
    },
    LabOption {
        long: "queue-down",
        short: None,
        value_name: "QUEUE",
        doc: "Download (server to client) queue instead of --queue's",
        arity: Arity::Value,
        shape: Shape::Queue,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["bfifo:65536"],
        set: |c, s| Ok(c.queue_down = Some(QueueSpec::parse(s)?)),
        get: |c| c.queue_down.iter().map(QueueSpec::label).collect(),
    },
    LabOption {
        long: "qdisc",
        short: None,
        value_name: "\"KIND ARGS\"",
        doc: "Any kernel qdisc as the bottleneck queue, \"KIND [ARGS]\" (e.g. fq_codel, \"cake\", \"netem delay 20ms\")",
        arity: Arity::Value,
        shape: Shape::Word,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["pfifo limit 50"],
        set: |c, s| {
            if s.contains(',') {
                return Err("no commas allowed".into());
            }
            c.queue = QueueSpec::kernel(s)?;
            Ok(())
        },
        get: |c| c.kernel_qdisc().map(QueueSpec::label).into_iter().collect(),
    },
    LabOption {
        long: "txqueuelen",
        short: None,
        value_name: "N",
        doc: "Queue length of the bottleneck interface in packets (= --queue fifo:N, and `ip link set txqueuelen N`)",
        arity: Arity::Value,
        shape: Shape::Int,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["100"],
        set: |c, s| {
            let n: u32 = s.parse().ok().filter(|n| (1..=1_000_000).contains(n)).ok_or("a whole number of packets, 1 .. 1000000")?;
            c.txqueuelen = Some(n);
            c.queue = QueueSpec::Fifo { packets: n };
            Ok(())
        },
        get: |c| c.txqueuelen.map(one).unwrap_or_default(),
    },
    LabOption {
        long: "bottleneck",
        short: None,
        value_name: "router|local",
        doc: "Where the bottleneck sits: the router's egress, or the sender's own interface",
        arity: Arity::Value,
        shape: Shape::Word,
        choices: Placement::WORDS,
        requires: None,
        one_run_each: false,
        examples: &["local"],
        set: |c, s| Ok(c.placement = s.parse()?),
        get: |c| one(c.placement.name()),
    },
    LabOption {
        long: "shaper",
        short: None,
        value_name: "htb|tbf",
        doc: "Rate limiter of the kernel backend",
        arity: Arity::Value,
        shape: Shape::Word,
        choices: Shaper::WORDS,
        requires: None,
        one_run_each: false,
        examples: &["tbf"],
        set: |c, s| Ok(c.shaper = s.parse()?),
        get: |c| one(c.shaper.name()),
    },
    LabOption {
        long: "offloads",
        short: None,
        value_name: "on|off",
        doc: "Segmentation offloads (TSO/GSO/GRO) on the lab's interfaces (off: a packet is an MTU)",
        arity: Arity::Value,
        shape: Shape::OnOff,
        choices: OnOff::WORDS,
        requires: None,
        one_run_each: false,
        examples: &["on"],
        set: |c, s| Ok(c.offloads = s.parse()?),
        get: |c| one(c.offloads.name()),
    },
    LabOption {
        long: "cc",
        short: None,
        value_name: "NAME",
        doc: "TCP congestion control of the load flows and the namespaces' default: cubic, bbr, reno, ...",
        arity: Arity::Value,
        shape: Shape::Word,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["bbr"],
        set: |c, s| {
            check_cc(s)?;
            if s.is_empty() {
                return Err("an empty name".into());
            }
            c.cc = s.into();
            Ok(())
        },
        get: |c| one(&c.cc),
    },
    LabOption {
        long: "tcp-mem-max",
        short: None,
        value_name: "SIZE",
        doc: "net.ipv4.tcp_wmem/tcp_rmem maximum inside the lab, so TCP can fill big queues",
        arity: Arity::Value,
        shape: Shape::Bytes,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["32m"],
        set: |c, s| {
            let n = parse_bytes(s)?;
            if !(65536..=1 << 31).contains(&n) {
                return Err(format!("{n} bytes is out of range (65536 .. 2147483648)"));
            }
            c.tcp_mem_max = n;
            Ok(())
        },
        get: |c| one(fmt_bytes(c.tcp_mem_max)),
    },
    LabOption {
        long: "ecn",
        short: None,
        value_name: "on|off",
        doc: "ECN for TCP inside the lab (net.ipv4.tcp_ecn 1 / 0) [default: the kernel's, 2 = accept only]",
        arity: Arity::Value,
        shape: Shape::OnOff,
        choices: OnOff::WORDS,
        requires: None,
        one_run_each: false,
        examples: &["on"],
        set: |c, s| Ok(c.ecn = Some(s.parse()?)),
        get: |c| c.ecn.map(|e| one(e.name())).unwrap_or_default(),
    },
    LabOption {
        long: "delay",
        short: None,
        value_name: "DURATION",
        doc: "One-way delay added in each direction, so the RTT grows by twice this (emulator, or netem with \
               --backend kernel); a unit is required",
        arity: Arity::Value,
        shape: Shape::Duration,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["20ms"],
        set: |c, s| Ok(c.delay = Some(dur(s)?)),
        get: |c| opt_dur(c.delay),
    },
    LabOption {
        long: "jitter",
        short: None,
        value_name: "JITTER",
        doc: "Per-direction delay variation (with --delay): 5ms (uniform +/-5 ms) or normal:5ms (standard \
               deviation); packet order is kept",
        arity: Arity::Value,
        shape: Shape::Duration,
        choices: &[],
        requires: Some("delay"),
        one_run_each: false,
        examples: &["5ms"],
        set: |c, s| Ok(c.jitter = Some(crate::link::JitterSpec::parse(s, false)?)),
        get: |c| c.jitter.as_ref().map(|j| one(j.spec())).unwrap_or_default(),
    },
    LabOption {
        long: "loss",
        short: None,
        value_name: "LOSS",
        doc: "Random loss per direction: 1% or 0.01 (independent), or ge:p=1%,r=25%[,good=0%,bad=100%] \
               (Gilbert-Elliott bursts)",
        arity: Arity::Value,
        shape: Shape::Word,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["1%", "ge:p=1%,r=25%,good=0%,bad=100%"],
        set: |c, s| Ok(c.loss = Some(s.parse()?)),
        get: |c| c.loss.as_ref().map(|l| one(l.describe())).unwrap_or_default(),
    },
    LabOption {
        long: "backend",
        short: None,
        value_name: "auto|kernel|emulator",
        doc: "kernel (qdiscs), emulator (bloatlab's user-space link), or auto: the emulator when --queue \
               codel|fq_codel|pie|drophead, a trace, --delay, --jitter or --loss asks for it",
        arity: Arity::Value,
        shape: Shape::Word,
        choices: Backend::WORDS,
        requires: None,
        one_run_each: false,
        examples: &["emulator"],
        set: |c, s| Ok(c.backend = s.parse()?),
        get: |c| one(c.backend.name()),
    },
    LabOption {
        long: "trace-up",
        short: None,
        value_name: "FILE",
        doc: "Rate trace for the uplink (mahimahi format; emulator backend)",
        arity: Arity::Value,
        shape: Shape::File,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["up.trace"],
        set: |c, s| Ok(c.trace_up = Some(path(s)?)),
        get: |c| c.trace_up.iter().map(|p| p.display().to_string()).collect(),
    },
    LabOption {
        long: "trace-down",
        short: None,
        value_name: "FILE",
        doc: "Rate trace for the downlink (mahimahi format; emulator backend)",
        arity: Arity::Value,
        shape: Shape::File,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["down.trace"],
        set: |c, s| Ok(c.trace_down = Some(path(s)?)),
        get: |c| c.trace_down.iter().map(|p| p.display().to_string()).collect(),
    },
    LabOption {
        long: "ipv6",
        short: None,
        value_name: "on|off",
        doc: "Run the test over IPv6 (the lab's ULA addresses) [default: IPv4]",
        arity: Arity::Switch,
        shape: Shape::OnOff,
        choices: &["on", "off"],
        requires: None,
        one_run_each: false,
        examples: &["on"],
        set: |c, s| Ok(c.ipv6 = on_off(s)?),
        get: |c| if c.ipv6 { one("on") } else { vec![] },
    },
    LabOption {
        long: "queue-interval",
        short: None,
        value_name: "DURATION",
        doc: "Queue sampling interval [default: the test's --sample-interval, 100ms]",
        arity: Arity::Value,
        shape: Shape::Duration,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["20ms"],
        set: |c, s| {
            let d = dur(s)?;
            if d < Duration::from_millis(5) || d > Duration::from_secs(10) {
                return Err("between 5ms and 10s".into());
            }
            c.queue_interval = Some(d);
            Ok(())
        },
        get: |c| opt_dur(c.queue_interval),
    },
];

/// The options a user set, over a front end's defaults: each option's
/// values in their canonical spelling (checked when set).
pub struct Overrides<T: Configurable> {
    values: BTreeMap<String, Vec<String>>,
    _t: PhantomData<fn() -> T>,
}

/// The `bloatlab test` options a user set.
pub type TestOverrides = Overrides<TestConfig>;
/// The `bloatlab lab` options a user set.
pub type LabOverrides = Overrides<LabConfig>;

impl<T: Configurable> Default for Overrides<T> {
    fn default() -> Self {
        Overrides { values: BTreeMap::new(), _t: PhantomData }
    }
}

impl<T: Configurable> Clone for Overrides<T> {
    fn clone(&self) -> Self {
        Overrides { values: self.values.clone(), _t: PhantomData }
    }
}

impl<T: Configurable> PartialEq for Overrides<T> {
    fn eq(&self, o: &Self) -> bool {
        self.values == o.values
    }
}

impl<T: Configurable> Eq for Overrides<T> {}

impl<T: Configurable> std::fmt::Debug for Overrides<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.values.fmt(f)
    }
}

impl<T: Configurable> Serialize for Overrides<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.values.serialize(s)
    }
}

impl<'de, T: Configurable> Deserialize<'de> for Overrides<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let values = BTreeMap::<String, Vec<String>>::deserialize(d)?;
        let mut o = Overrides::default();
        for (k, vs) in values {
            for v in vs {
                o.add(&k, &v).map_err(serde::de::Error::custom)?;
            }
        }
        Ok(o)
    }
}

impl<T: Configurable> Overrides<T> {
    /// Set option `name` (long or recipe spelling) to `raw`: checked, kept in
    /// its canonical spelling. A repeated option gains an occurrence; any
    /// other option's value is replaced.
    pub fn set(&mut self, name: &str, raw: &str) -> Result<(), String> {
        let o = option::<T>(name).ok_or_else(|| format!("`{name}` is not a {} option", T::COMMAND))?;
        let v = o.canonical(raw).map_err(|e| o.flag_error(raw, e))?;
        let e = self.values.entry(o.long.to_string()).or_default();
        if o.arity != Arity::Repeated {
            e.clear();
        }
        e.push(v);
        Ok(())
    }

    /// Add a value to option `name` without replacing the ones it has: an
    /// occurrence of a repeated option, or one more run of an option that
    /// runs once per value (`--queue fifo:1000,fifo:10`).
    pub fn add(&mut self, name: &str, raw: &str) -> Result<(), String> {
        let o = option::<T>(name).ok_or_else(|| format!("`{name}` is not a {} option", T::COMMAND))?;
        let v = o.canonical(raw).map_err(|e| o.flag_error(raw, e))?;
        self.values.entry(o.long.to_string()).or_default().push(v);
        Ok(())
    }

    /// Forget option `name`.
    pub fn remove(&mut self, name: &str) {
        if let Some(o) = option::<T>(name) {
            self.values.remove(o.long);
        }
    }

    /// The values set for `o`, if any.
    pub fn get(&self, o: &OptionDef<T>) -> Option<&[String]> {
        self.values.get(o.long).map(|v| v.as_slice())
    }

    /// Whether option `name` was given.
    pub fn has(&self, name: &str) -> bool {
        option::<T>(name).is_some_and(|o| self.values.contains_key(o.long))
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Set every given option in `t`, in table order (a later value of an
    /// option given several times wins).
    pub fn apply(&self, t: &mut T) -> Result<(), String> {
        for o in T::options() {
            for v in self.get(o).unwrap_or_default() {
                o.set(t, v).map_err(|e| o.flag_error(v, e))?;
            }
        }
        Ok(())
    }

    /// Options set in `other` win over ours.
    pub fn merge(&mut self, other: &Overrides<T>) {
        for (k, v) in &other.values {
            self.values.insert(k.clone(), v.clone());
        }
    }

    /// The options and values set, in table order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static OptionDef<T>, &[String])> {
        T::options().iter().filter_map(move |o| self.get(o).map(|v| (o, v)))
    }

    /// As command-line arguments.
    pub fn args(&self) -> Vec<String> {
        self.iter().flat_map(|(o, vs)| vs.iter().flat_map(move |v| o.args(v))).collect()
    }
}

/// `t` as the `bloatlab test` options that differ from `bloatlab test`'s
/// defaults: what a dry run shows a point will run.
pub fn differing_args<T: Configurable>(t: &T) -> Vec<String> {
    let d = T::default();
    let mut out = vec![];
    for o in T::options() {
        let (now, def) = (o.get(t), o.get(&d));
        if now == def {
            continue;
        }
        if now.is_empty() && matches!(o.arity, Arity::OptionalValue { .. }) {
            // switched off against the defaults (`--rpm=off`); an option
            // that no longer has a value is carried by others (`--rate`
            // by `--rate-up` and `--rate-down`)
            out.extend(o.args("off"));
        }
        for v in &now {
            out.extend(o.args(v));
        }
    }
    out
}

/// Split a comma list of values (`--queue A,B`, `--set KEY=A,B`), keeping
/// a value's own `key=value` parameters with it: "fifo:10,codel:target=5ms,interval=50ms" is two
/// values, "ge:p=1%,r=25%,1%" two losses (no value starts with `key=` or
/// is a queue's bare flag such as `noecn`).
pub fn split_values(v: &str) -> Vec<String> {
    let mut out: Vec<String> = vec![];
    for piece in v.split(',') {
        let is_param = piece.split_once('=').is_some_and(|(k, _)| !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
            || crate::queue::QUEUE_FLAGS.contains(&piece.trim());
        match out.last_mut() {
            Some(last) if is_param && last.contains(':') => {
                last.push(',');
                last.push_str(piece);
            }
            _ => out.push(piece.to_string()),
        }
    }
    out
}

/// The lab the options of a command line, a recipe point or a sweep ask
/// for: one resolution with the same cross-option checks for every front
/// end ([`crate::LabOverrides::resolve`]).
impl Overrides<LabConfig> {
    /// `base` with these options applied, checked across options (what
    /// one option alone cannot see), and the queues to run one after
    /// another: a `--queue` list; else the one queue the options set
    /// (`--txqueuelen`, `--qdisc`, `--queue-up` with `--queue-down`); empty
    /// when no option chose a queue (the caller's default: the demo's two).
    pub fn resolve(&self, base: LabConfig) -> Result<(LabConfig, Vec<QueueSpec>), String> {
        let listed: Vec<QueueSpec> = self
            .get(lab_option("queue").expect("the queue option"))
            .unwrap_or_default()
            .iter()
            .map(|q| QueueSpec::parse(q).map_err(|e| format!("--queue {q}: {e}")))
            .collect::<Result<_, _>>()?;
        let mut cfg = base;
        self.apply(&mut cfg)?;
        let (up, down) = (self.has("queue-up"), self.has("queue-down"));
        if let Some(t) = cfg.txqueuelen {
            if !listed.is_empty() && listed != vec![QueueSpec::Fifo { packets: t }] {
                return Err(format!("--txqueuelen {t} sets the queue to fifo:{t}; do not combine it with a different --queue"));
            }
            if up || down {
                return Err(format!("--txqueuelen {t} sets both directions' queue to fifo:{t}; do not combine it with --queue-up/--queue-down"));
            }
        }
        if up && down && !listed.is_empty() {
            return Err("--queue-up and --queue-down set both directions; --queue has nothing left to set (drop it)".into());
        }
        if self.has("qdisc") && (!listed.is_empty() || up || down) {
            return Err("--qdisc replaces the bottleneck queue; do not combine it with --queue, --queue-up or --queue-down".into());
        }
        let queues = if cfg.txqueuelen.is_some() || self.has("qdisc") {
            vec![cfg.queue.clone()]
        } else if up && down {
            vec![cfg.queue_of(true).clone()]
        } else {
            listed
        };
        if let Some(q) = queues.first() {
            cfg.queue = q.clone();
        }
        Ok((cfg, queues))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn examples_are_canonical_and_not_the_default<T: Configurable + PartialEq + std::fmt::Debug>() {
        for o in T::options() {
            assert!(!o.examples.is_empty(), "{o:?} has no example");
            for e in o.examples {
                assert_eq!(o.canonical(e).as_deref(), Ok(*e), "{o:?}");
                let mut t = T::default();
                o.set(&mut t, e).unwrap();
                assert_ne!(t, T::default(), "{o:?} {e} changes nothing");
                assert_eq!(o.get(&t).last().map(String::as_str), Some(*e), "{o:?}");
            }
            if let Some(r) = o.requires {
                assert!(option::<T>(r).is_some(), "{o:?} requires an unknown option {r}");
            }
        }
        let names: std::collections::BTreeSet<_> = T::options().iter().map(|o| o.long).collect();
        assert_eq!(names.len(), T::options().len(), "an option is defined twice");
    }

    /// Every default the help states is spelled from the configurations
    /// (`T::default()`, `T`'s profiles) and reads back as that default; a
    /// doc states a default in words only where no value of the option
    /// spells it (a value typed by hand beside the table would drift).
    /// Returns how many generated defaults were checked.
    fn stated_defaults_are_the_defaults<T: Configurable>() -> usize {
        let d = T::default();
        let profiles = T::profiles();
        let mut checked = 0;
        for o in T::options() {
            let (_, words) = stated_defaults(o.doc);
            for (key, w) in &words {
                let holder = match *key {
                    "default" => &d,
                    k => &profiles.iter().find(|(n, _)| *n == k).unwrap_or_else(|| panic!("{} --{}: [{k}: ...] names no profile", T::COMMAND, o.long)).1,
                };
                let actual = o.get(holder);
                let first = w.split([' ', ';']).next().unwrap().trim_end_matches(',');
                let mut t = T::default();
                if !actual.is_empty() && o.set(&mut t, first).is_ok() && o.get(&t) == actual && !(*key == "default" && T::default_elsewhere(o.long).is_some()) {
                    panic!("{} --{}: [{key}: {w}] is typed by hand; the help spells it from the configuration", T::COMMAND, o.long);
                }
            }
            let help = o.help();
            if let Some(i) = help.find("[default: ").filter(|_| !words.iter().any(|(k, _)| *k == "default")) {
                let stated = &help[i + "[default: ".len()..];
                let stated = &stated[..stated.find([';', ']']).unwrap()];
                let runs: Vec<String> = if T::default_elsewhere(o.long).is_some() { split_values(stated).into_iter().take(1).collect() } else { vec![stated.to_string()] };
                let mut t = T::default();
                for v in if o.arity == Arity::Repeated { stated.split(',').map(str::to_string).collect() } else { runs } {
                    o.set(&mut t, &v).unwrap_or_else(|e| panic!("{} --{}: the help's [default: {stated}] does not parse: {e}", T::COMMAND, o.long));
                }
                if T::default_elsewhere(o.long).is_none() {
                    assert_eq!(o.get(&t), o.get(&d), "{} --{}: the help's [default: {stated}]", T::COMMAND, o.long);
                }
                checked += 1;
            }
        }
        checked
    }

    /// `--profile`'s help describes the plans as the model defines them
    /// (the words are written once there; the figures are checked here).
    #[test]
    fn the_profile_help_states_the_plans_figures() {
        use crate::web::{Profile, WebPlan, HOUSEHOLD_PHASE};
        let doc = test_option("profile").unwrap().doc;
        let part = |name: &str| {
            let i = doc.find(&format!("{name} (")).unwrap_or_else(|| panic!("--profile's help does not describe {name}"));
            doc[i..].split_once(')').unwrap().0.to_string()
        };
        for p in [Profile::Quick, Profile::Thorough, Profile::Household] {
            let plan = WebPlan::of(p);
            let mut t = TestConfig::default();
            plan.apply_to(&mut t).unwrap();
            let words = part(p.name());
            let loaded: Vec<&crate::web::WebPhase> = plan.phases.iter().filter(|x| x.download || x.upload).collect();
            let (d, cap) = (fmt_duration(loaded[0].duration), fmt_duration(loaded[0].cap));
            match p {
                Profile::Quick => {
                    let scen: Vec<String> = t.scenarios.iter().map(|s| s.to_string()).collect();
                    for w in [format!("idle {}", fmt_duration(t.idle)), scen.join(", "), format!("at least {d}"), format!("at most {cap}")] {
                        assert!(words.contains(&w), "quick: `{w}` is not in {words:?}");
                    }
                }
                Profile::Thorough => {
                    for w in [format!("idle {}", fmt_duration(t.idle)), format!("each {d} to {cap}")] {
                        assert!(words.contains(&w), "thorough: `{w}` is not in {words:?}");
                    }
                }
                Profile::Household => {
                    let h = plan.phases.iter().find(|x| x.name == HOUSEHOLD_PHASE).unwrap();
                    let first: Vec<String> = t.scenarios[..t.scenarios.len() - 1].iter().map(|s| s.to_string()).collect();
                    for w in [format!("{} as quick", first.join(" and ")), format!("then {} of", fmt_duration(h.duration))] {
                        assert!(words.contains(&w), "household: `{w}` is not in {words:?}");
                    }
                    assert_eq!(WebPlan::of(Profile::Quick).phases[1].duration, loaded[0].duration, "household's first phases are quick's");
                }
            }
        }
    }

    #[test]
    fn a_help_states_its_defaults_from_the_configurations() {
        let help = |long| test_option(long).unwrap().help();
        assert_eq!(help("duration"), "Length of each scenario [default: 5s; lab: 18s]");
        assert_eq!(help("cc"), "Congestion control of the load flows on both ends (e.g. cubic, bbr, reno) [default: each host's; lab: --cc]");
        assert!(lab_option("queue").unwrap().help().ends_with(""), "{}", lab_option("queue").unwrap().help());
        assert_eq!(stated_defaults("A [default: x; y; lab: z]"), ("A", vec![("default", "x; y"), ("lab", "z")]));
        assert_eq!(stated_defaults("A (b) [e.g. c]"), ("A (b) [e.g. c]", vec![]));
        assert_eq!(stated_defaults("A [::1]:9 [default: [::] both]"), ("A [::1]:9", vec![("default", "[::] both")]));
    }

    #[test]
    fn one_resolution_checks_options_across_each_other() {
        use crate::LabOverrides;
        let of = |pairs: &[(&str, &str)]| {
            let mut o = LabOverrides::default();
            for (k, v) in pairs {
                o.add(k, v).unwrap();
            }
            o.resolve(LabConfig::default())
        };
        let (c, q) = of(&[]).unwrap();
        assert!(q.is_empty(), "no queue chosen: the caller's default");
        assert_eq!(c.queue, LabConfig::default().queue);
        let (c, q) = of(&[("queue", "fifo:10"), ("queue", "fq_codel")]).unwrap();
        assert_eq!((q.len(), c.queue.clone()), (2, QueueSpec::Fifo { packets: 10 }));
        let (c, q) = of(&[("txqueuelen", "5")]).unwrap();
        assert_eq!((q, c.queue), (vec![QueueSpec::Fifo { packets: 5 }], QueueSpec::Fifo { packets: 5 }));
        for (pairs, why) in [
            (&[("txqueuelen", "5"), ("queue", "fifo:100")][..], "--txqueuelen 5 sets the queue"),
            (&[("txqueuelen", "5"), ("queue-up", "fifo:100")][..], "--queue-up/--queue-down"),
            (&[("queue-up", "fifo:10"), ("queue-down", "fifo:20"), ("queue", "fifo:30")][..], "--queue has nothing left"),
            (&[("qdisc", "cake bandwidth 10mbit"), ("queue", "fifo:30")][..], "--qdisc replaces"),
        ] {
            let e = of(pairs).unwrap_err();
            assert!(e.contains(why), "{pairs:?}: {e}");
        }
    }


    #[test]
    fn every_stated_default_is_the_configurations() {
        let n = stated_defaults_are_the_defaults::<TestConfig>()
            + stated_defaults_are_the_defaults::<LabConfig>()
            + stated_defaults_are_the_defaults::<crate::MonitorConfig>()
            + stated_defaults_are_the_defaults::<crate::TuneConfig>()
            + stated_defaults_are_the_defaults::<crate::RpmConfig>()
            + stated_defaults_are_the_defaults::<crate::ServerConfig>()
            + stated_defaults_are_the_defaults::<crate::ServerSetup>();
        assert!(n >= 20, "only {n} stated defaults checked");
    }

    #[test]
    fn list_values_keep_their_own_parameters() {
        assert_eq!(split_values("fifo:10,fifo:100"), ["fifo:10", "fifo:100"]);
        assert_eq!(split_values("fifo:10,codel:target=5ms,interval=50ms"), ["fifo:10", "codel:target=5ms,interval=50ms"]);
        assert_eq!(split_values("ge:p=1%,r=25%,good=0%,bad=100%,1%"), ["ge:p=1%,r=25%,good=0%,bad=100%", "1%"]);
        assert_eq!(split_values("5s,6s"), ["5s", "6s"]);
        assert_eq!(split_values("pie:target=20ms,noecn,codel"), ["pie:target=20ms,noecn", "codel"]);
    }

    #[test]
    fn every_example_is_canonical_and_not_the_default() {
        examples_are_canonical_and_not_the_default::<TestConfig>();
        examples_are_canonical_and_not_the_default::<LabConfig>();
        examples_are_canonical_and_not_the_default::<crate::RpmConfig>();
        examples_are_canonical_and_not_the_default::<crate::ServerConfig>();
        examples_are_canonical_and_not_the_default::<crate::ServerSetup>();
    }

    #[test]
    fn lab_options_apply_in_table_order() {
        let mut o = LabOverrides::default();
        o.set("rate-down", "50mbit").unwrap();
        o.set("rate", "10mbit").unwrap();
        o.set("txqueuelen", "5").unwrap();
        o.set("queue", "fifo:100").unwrap();
        let mut c = LabConfig::default();
        o.apply(&mut c).unwrap();
        assert_eq!((c.rate_up, c.rate_down), (Some(Rate::mbit(10.0)), Some(Rate::mbit(50.0))), "rate, then rate-down");
        assert_eq!(c.queue, QueueSpec::Fifo { packets: 5 }, "txqueuelen replaces the queue");
        assert!(o.set("delay", "20").unwrap_err().contains("unit"));
        assert!(o.set("colour", "red").unwrap_err().contains("not a `bloatlab lab` option"));
        o.set("rate", "none").unwrap();
        o.apply(&mut c).unwrap();
        assert_eq!((c.rate_up, c.rate_down), (None, Some(Rate::mbit(50.0))));
        let mut q = LabOverrides::default();
        q.add("queue", "100").unwrap();
        q.add("queue", "fq_codel").unwrap();
        assert_eq!(q.get(lab_option("queue").unwrap()), Some(&["fifo:100".to_string(), "fq_codel".to_string()][..]));
    }

    #[test]
    fn overrides_layer_over_defaults() {
        let mut o = TestOverrides::default();
        o.set("duration", "9s").unwrap();
        o.set("cc", "reno").unwrap();
        o.set("ping", "a").unwrap();
        o.set("ping", "b").unwrap();
        o.set("rpm", "download,upload").unwrap();
        let mut t = TestConfig::default();
        o.apply(&mut t).unwrap();
        assert_eq!((t.duration, t.cc.as_str(), t.idle), (Duration::from_secs(9), "reno", Duration::from_secs(2)));
        assert_eq!(t.pings.len(), 2);
        assert_eq!(o.args(), ["--duration", "9s", "--cc", "reno", "--ping", "a", "--ping", "b", "--rpm"]);
        let mut a = TestOverrides::default();
        a.set("duration", "1s").unwrap();
        a.set("idle", "0").unwrap();
        a.merge(&o);
        assert_eq!(a.get(test_option("duration").unwrap()), Some(&["9s".to_string()][..]));
        assert_eq!(a.get(test_option("idle").unwrap()), Some(&["0s".to_string()][..]));
        // a scenario list and a ramp replace each other
        o.set("scenarios", "auto").unwrap();
        o.apply(&mut t).unwrap();
        assert!(t.ramp.is_some() && t.scenarios.is_empty());
        assert!(differing_args(&t).windows(2).any(|w| w == ["--scenarios", "auto"]));
        assert_eq!(test_option("probe_interval").unwrap().long, "probe-interval");
    }

    #[test]
    fn bad_values_name_their_option() {
        let mut o = TestOverrides::default();
        for (k, v, why) in [
            ("duration", "fast", "--duration"),
            ("scenarios", "1up", "or auto"),
            ("rpm", "sideways", "RPM stage"),
            ("socket-buffer", "4G", "at most 1 GiB"),
            ("rx-copy", "maybe", "on or off"),
            ("tcp-ping", "h", "HOST:PORT"),
            ("colour", "red", "not a `bloatlab test` option"),
        ] {
            let e = o.set(k, v).unwrap_err();
            assert!(e.contains(why), "{k} {v}: {e}");
        }
        assert!(o.is_empty(), "a refused value is not kept");
    }
}
