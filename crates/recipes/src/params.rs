//! The parameters a recipe or `bloatlab sweep` can set, where each one goes
//! (the lab's [`LabConfig`], the test's [`TestOverrides`], or the in-process
//! pacing experiment), and how its values are checked and spelled. Values
//! are parsed once, by the model's parsers, into [`Typed`] values.
//!
//! One table serves recipe files and `--set KEY=V1,V2`, so both accept the
//! same names and reject the same mistakes as `bloatlab lab` and `bloatlab test`.
use bloatlab_model::units::{fmt_duration_ns, parse_bytes, parse_duration_ns, parse_probability};
use bloatlab_model::options::{Arity, Shape};
use bloatlab_model::{Backend, LabConfig, OnOff, Placement, QueueSpec, Rate, Shaper, TestOption, TestOverrides, TEST_OPTIONS};
use std::path::PathBuf;
use std::time::Duration;

/// What kind of experiment a recipe runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecipeKind {
    /// Each point is one `bloatlab lab ... -- <test args>` run.
    Lab,
    /// Each point is one paced UDP run on loopback (no root needed).
    Pacing,
}

impl RecipeKind {
    pub fn parse(s: &str) -> Result<RecipeKind, String> {
        match s {
            "lab" => Ok(RecipeKind::Lab),
            "pacing" => Ok(RecipeKind::Pacing),
            o => Err(format!("unknown kind \"{o}\" (expected \"lab\" or \"pacing\")")),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            RecipeKind::Lab => "lab",
            RecipeKind::Pacing => "pacing",
        }
    }
}

/// Where a parameter ends up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// A field of the lab's configuration (`bloatlab lab --NAME`).
    Lab,
    /// A `bloatlab test` option inside the lab (after `--`), as the model
    /// defines it (name, help and parser come from its [`TestOption`]).
    Test(&'static TestOption),
    /// Consumed by the pacing experiment itself.
    Pacing,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueKind {
    Rate,
    Queue,
    /// Any kernel qdisc, "KIND ARGS".
    KernelQdisc,
    Duration,
    /// Unsigned integer in [min, max].
    Int(u64, u64),
    /// Byte size (tc units) in [min, max].
    Bytes(u64, u64),
    OnOff,
    /// Congestion control name (letters, digits, '_').
    Word,
    /// Checked by the `bloatlab test` option's own parser; a list's commas
    /// and a repeated option's occurrences are written `+` (commas separate
    /// the values of a sweep).
    Test,
    Timer,
    Probability,
    /// A file path.
    Path,
    /// One of a fixed set of words.
    Choice(&'static [&'static str]),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ParamSpec {
    pub name: &'static str,
    pub kind: RecipeKind,
    pub target: Target,
    pub value: ValueKind,
    pub help: &'static str,
}

macro_rules! p {
    ($name:literal, $kind:ident, $target:ident, $value:expr, $help:literal) => {
        ParamSpec { name: $name, kind: RecipeKind::$kind, target: Target::$target, value: $value, help: $help }
    };
}

/// The parameters of the lab and of the pacing experiment; with the
/// `bloatlab test` options (see [`params`]) every parameter a recipe or
/// sweep may set.
const OWN_PARAMS: &[ParamSpec] = &[
    // ---- the lab (LabConfig; `bloatlab lab` flags) ----
    p!("rate", Lab, Lab, ValueKind::Rate, "bottleneck rate, e.g. 10mbit, 100mbit, 1gbit"),
    p!("queue", Lab, Lab, ValueKind::Queue, "bottleneck queue: fifo:N (packets), bfifo:BYTES, drophead:N, codel, fq_codel, pie (with parameters); a bare number N means fifo:N"),
    p!("bottleneck", Lab, Lab, ValueKind::Choice(Placement::WORDS), "where the bottleneck queue sits: router (router egress) or local (the sender's own interface)"),
    p!("txqueuelen", Lab, Lab, ValueKind::Int(1, 1_000_000), "txqueuelen of the bottleneck interfaces (= queue fifo:N)"),
    p!("cc", Lab, Lab, ValueKind::Word, "TCP congestion control of the load flows: cubic, bbr, reno, ..."),
    p!("offloads", Lab, Lab, ValueKind::OnOff, "TSO/GSO/GRO on the lab interfaces: off (default, a packet is an MTU) or on"),
    p!("ecn", Lab, Lab, ValueKind::OnOff, "ECN for TCP inside the lab (net.ipv4.tcp_ecn 1 or 0; default: the kernel's)"),
    p!("delay", Lab, Lab, ValueKind::Duration, "added one-way delay (needs the emulator backend, or netem when the kernel has it)"),
    p!("backend", Lab, Lab, ValueKind::Choice(Backend::WORDS), "lab backend: auto, kernel (qdiscs) or emulator (bloatlab's user-space link)"),
    p!("rate_up", Lab, Lab, ValueKind::Rate, "upload (client to server) rate; overrides rate"),
    p!("rate_down", Lab, Lab, ValueKind::Rate, "download (server to client) rate; overrides rate"),
    p!("queue_up", Lab, Lab, ValueKind::Queue, "upload (client to server) queue; overrides queue for that direction"),
    p!("queue_down", Lab, Lab, ValueKind::Queue, "download (server to client) queue; overrides queue for that direction"),
    p!("qdisc", Lab, Lab, ValueKind::KernelQdisc, "any kernel qdisc as the bottleneck queue, \"KIND ARGS\" (e.g. fq_codel, \"cake bandwidth 10mbit\")"),
    p!("shaper", Lab, Lab, ValueKind::Choice(Shaper::WORDS), "rate limiter of the kernel backend: htb or tbf"),
    p!("jitter", Lab, Lab, ValueKind::Duration, "delay variation (with delay)"),
    p!("loss", Lab, Lab, ValueKind::Probability, "random loss per direction, e.g. 1% or 0.01"),
    p!("trace_up", Lab, Lab, ValueKind::Path, "mahimahi rate trace of the uplink (emulator backend)"),
    p!("trace_down", Lab, Lab, ValueKind::Path, "mahimahi rate trace of the downlink (emulator backend)"),
    p!("ipv6", Lab, Lab, ValueKind::OnOff, "run the test over IPv6 (on) or IPv4 (off, default)"),
    p!("tcp_mem_max", Lab, Lab, ValueKind::Bytes(65536, 1 << 31), "tcp_wmem/tcp_rmem maximum inside the lab (default 16m)"),
    p!("queue_interval", Lab, Lab, ValueKind::Duration, "queue sampling interval (default: the test's sample interval)"),
    // ---- pacing ----
    p!("ipi", Pacing, Pacing, ValueKind::Duration, "inter-packet interval t_ipi, e.g. 50us .. 50ms"),
    p!("timer", Pacing, Pacing, ValueKind::Timer, "timer strategy: precise | sleep | tick:HZ (emulated scheduler tick of 1/HZ) | ccid3:HZ[:PHASE] (emulated 2.6.20 CCID-3 sender)"),
    p!("payload", Pacing, Pacing, ValueKind::Int(32, 65000), "UDP payload bytes per packet (seed 004: 1424)"),
    p!("duration", Pacing, Pacing, ValueKind::Duration, "length of each paced run"),
    p!("line_rate", Pacing, Pacing, ValueKind::Rate, "NIC speed of the emulated senders (tick, ccid3): no packet leaves before the previous one has serialized"),
];

/// Every parameter a recipe or sweep may set: the lab's, then every
/// measurement option of `bloatlab test` (from the model's one table;
/// `cc` is the lab's, which sets the test's too), then the pacing
/// experiment's.
pub fn params() -> &'static [ParamSpec] {
    static ALL: std::sync::OnceLock<Vec<ParamSpec>> = std::sync::OnceLock::new();
    ALL.get_or_init(|| {
        let mut v: Vec<ParamSpec> = OWN_PARAMS.iter().filter(|p| p.kind == RecipeKind::Lab).copied().collect();
        for o in TEST_OPTIONS {
            let name = o.param_name();
            if v.iter().any(|p| p.name == name) {
                continue;
            }
            // once per process: the table's names live as long as it does
            let name: &'static str = Box::leak(name.into_boxed_str());
            v.push(ParamSpec { name, kind: RecipeKind::Lab, target: Target::Test(o), value: ValueKind::Test, help: o.help });
        }
        v.extend(OWN_PARAMS.iter().filter(|p| p.kind == RecipeKind::Pacing).copied());
        v
    })
}

pub fn spec(kind: RecipeKind, name: &str) -> Option<&'static ParamSpec> {
    params().iter().find(|p| p.kind == kind && p.name == name)
}

pub fn names(kind: RecipeKind) -> Vec<&'static str> {
    params().iter().filter(|p| p.kind == kind).map(|p| p.name).collect()
}

/// Error for an unknown parameter name, with a suggestion.
pub fn unknown_param(kind: RecipeKind, name: &str) -> String {
    let known = names(kind);
    let close = known
        .iter()
        .find(|k| edit_distance(k, name) <= 2 || k.replace('_', "-") == name)
        .map(|k| format!(" (did you mean \"{k}\"?)"))
        .unwrap_or_default();
    format!(
        "unknown parameter \"{name}\"{close}; {} recipes know: {}",
        kind.name(),
        known.join(", ")
    )
}

fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut cur = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let c = if a[i - 1] == b[j - 1] { 0 } else { 1 };
            cur[j] = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + c);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// A parsed parameter value.
#[derive(Debug, Clone, PartialEq)]
pub enum Typed {
    Rate(Rate),
    Queue(QueueSpec),
    Duration(Duration),
    Int(u64),
    OnOff(OnOff),
    Word(String),
    /// A `bloatlab test` option's values, canonically spelled (several for
    /// a repeated option).
    Test(Vec<String>),
    Timer(TimerSpec),
    Probability(f64),
    Path(PathBuf),
    Choice(String),
}

/// A checked parameter value: its canonical spelling (`text`, in tables,
/// file names and the recipe written back), its number in base units where
/// it has one (bit/s, ns, packets, bytes; for plot axes), and the parsed value.
#[derive(Debug, Clone, PartialEq)]
pub struct Value {
    pub text: String,
    pub num: Option<f64>,
    pub typed: Typed,
}

/// Parsed `timer` value of the pacing experiment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TimerSpec {
    /// Absolute deadlines, sleep to shortly before each, then spin.
    Precise,
    /// Naive: sleep t_ipi after each send (relative sleeps, errors add up).
    Sleep,
    /// Emulated coarse scheduler tick of 1/hz seconds (see docs/recipes.md).
    Tick { hz: u32 },
    /// Emulated Linux 2.6.20 CCID-3 sender on a 1/hz tick; `phase` is where
    /// the first nominal send time falls inside a tick (0 .. 1).
    Ccid3 { hz: u32, phase: f64 },
}

/// Default phase of the ccid3 model (see docs/recipes.md).
pub const CCID3_DEFAULT_PHASE: f64 = 0.6;

fn parse_hz(s: &str, h: &str) -> Result<u32, String> {
    let hz: u32 = h
        .trim_end_matches("hz")
        .parse()
        .map_err(|_| format!("\"{s}\": needs a whole HZ value, e.g. tick:1000 or ccid3:250"))?;
    if !(10..=10_000).contains(&hz) {
        return Err(format!("\"{s}\": HZ must be between 10 and 10000"));
    }
    Ok(hz)
}

impl TimerSpec {
    pub fn parse(s: &str) -> Result<TimerSpec, String> {
        let t = s.trim().to_ascii_lowercase();
        let parts: Vec<&str> = t.split(':').collect();
        match parts.as_slice() {
            ["precise"] => Ok(TimerSpec::Precise),
            ["sleep"] => Ok(TimerSpec::Sleep),
            ["tick"] => Ok(TimerSpec::Tick { hz: 1000 }),
            ["tick", h] => Ok(TimerSpec::Tick { hz: parse_hz(s, h)? }),
            ["ccid3"] => Ok(TimerSpec::Ccid3 { hz: 1000, phase: CCID3_DEFAULT_PHASE }),
            ["ccid3", h] => Ok(TimerSpec::Ccid3 { hz: parse_hz(s, h)?, phase: CCID3_DEFAULT_PHASE }),
            ["ccid3", h, p] => {
                let phase: f64 = p.parse().map_err(|_| format!("\"{s}\": the phase must be a number in [0, 1)"))?;
                if !(0.0..1.0).contains(&phase) {
                    return Err(format!("\"{s}\": the phase must be in [0, 1)"));
                }
                Ok(TimerSpec::Ccid3 { hz: parse_hz(s, h)?, phase })
            }
            _ => Err(format!("\"{s}\" is not a timer strategy (precise, sleep, tick:HZ, ccid3:HZ[:PHASE])")),
        }
    }
    pub fn name(&self) -> String {
        match self {
            TimerSpec::Precise => "precise".into(),
            TimerSpec::Sleep => "sleep".into(),
            TimerSpec::Tick { hz } => format!("tick:{hz}"),
            TimerSpec::Ccid3 { hz, phase } => {
                if *phase == CCID3_DEFAULT_PHASE {
                    format!("ccid3:{hz}")
                } else {
                    format!("ccid3:{hz}:{phase}")
                }
            }
        }
    }
    /// Tick length of an emulated timer, ns.
    pub fn gran_ns(&self) -> Option<u64> {
        match self {
            TimerSpec::Tick { hz } | TimerSpec::Ccid3 { hz, .. } => Some(1_000_000_000 / *hz as u64),
            _ => None,
        }
    }
    /// Emulated timers send through the emulated line; real pacers do not.
    pub fn emulated(&self) -> bool {
        self.gran_ns().is_some()
    }
}

/// Check and parse a value for parameter `p` with the model's parsers.
pub fn check_value(p: &ParamSpec, raw: &str) -> Result<Value, String> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Err(format!("{}: empty value", p.name));
    }
    let v = |text: String, num: Option<f64>, typed: Typed| Value { text, num, typed };
    let r = match p.value {
        ValueKind::Rate => Rate::parse(raw).map(|r| v(bloatlab_model::units::fmt_rate_tc(r.bps), Some(r.bps as f64), Typed::Rate(r))),
        ValueKind::Queue => QueueSpec::parse(raw).map(|q| {
            let n = q.fifo_packets().map(f64::from).or(match q {
                QueueSpec::Bfifo { bytes } => Some(bytes as f64),
                _ => None,
            });
            v(q.label(), n, Typed::Queue(q))
        }),
        ValueKind::KernelQdisc => {
            if raw.contains(',') {
                Err(format!("\"{raw}\": no commas allowed"))
            } else {
                QueueSpec::kernel(raw).map(|q| v(q.label(), None, Typed::Queue(q)))
            }
        }
        ValueKind::Duration => parse_duration_ns(raw).and_then(|ns| {
            if ns == 0 && !matches!(p.name, "idle" | "delay" | "jitter" | "pause") {
                Err("must be greater than zero".into())
            } else if ns > 1_000_000_000_000_000 {
                Err(format!("\"{raw}\" is out of range (at most 11 days)"))
            } else {
                Ok(v(fmt_duration_ns(ns), Some(ns as f64), Typed::Duration(Duration::from_nanos(ns))))
            }
        }),
        ValueKind::Int(lo, hi) => raw
            .parse::<u64>()
            .map_err(|_| format!("\"{raw}\" is not a whole number"))
            .and_then(|n| {
                if n < lo || n > hi {
                    Err(format!("{n} is out of range ({lo} .. {hi})"))
                } else {
                    Ok(v(n.to_string(), Some(n as f64), Typed::Int(n)))
                }
            }),
        ValueKind::Bytes(lo, hi) => parse_bytes(raw).and_then(|n| {
            if n < lo || n > hi {
                Err(format!("{n} bytes is out of range ({lo} .. {hi})"))
            } else {
                Ok(v(n.to_string(), Some(n as f64), Typed::Int(n)))
            }
        }),
        ValueKind::OnOff => match raw.to_ascii_lowercase().as_str() {
            "on" | "true" => Ok(v("on".into(), None, Typed::OnOff(OnOff::On))),
            "off" | "false" => Ok(v("off".into(), None, Typed::OnOff(OnOff::Off))),
            o => Err(format!("\"{o}\": expected on or off")),
        },
        ValueKind::Word => bloatlab_model::config::check_cc(raw).map(|_| v(raw.into(), None, Typed::Word(raw.into()))),
        ValueKind::Test => match p.target {
            Target::Test(o) => test_value(o, raw),
            _ => Err("not a `bloatlab test` option".into()),
        },
        ValueKind::Timer => TimerSpec::parse(raw).map(|t| v(t.name(), None, Typed::Timer(t))),
        ValueKind::Probability => parse_probability(raw).map(|x| v(raw.into(), Some(x), Typed::Probability(x))),
        ValueKind::Path => {
            if raw.contains(',') {
                Err(format!("\"{raw}\": no commas allowed"))
            } else {
                Ok(v(raw.into(), None, Typed::Path(PathBuf::from(raw))))
            }
        }
        ValueKind::Choice(words) => {
            let t = raw.to_ascii_lowercase();
            if words.contains(&t.as_str()) {
                Ok(v(t.clone(), None, Typed::Choice(t)))
            } else {
                Err(format!("\"{raw}\": expected one of {}", words.join(", ")))
            }
        }
    };
    r.map_err(|e| format!("{}: {e}", p.name))
}

/// A `bloatlab test` option's value in a recipe or sweep: `+` joins a
/// list's items (`1u0d+0u1d`) or a repeated option's occurrences
/// (`router+server`), since commas separate the values of a sweep.
fn test_value(o: &TestOption, raw: &str) -> Result<Value, String> {
    let items: Vec<String> = match o.arity {
        Arity::Repeated => raw.split('+').map(|x| o.canonical(x)).collect::<Result<_, _>>()?,
        _ => vec![o.canonical(&raw.replace('+', ","))?],
    };
    let text = items.join("+");
    let first = items.first().map(String::as_str).unwrap_or_default();
    let num = match o.shape {
        Shape::Duration => parse_duration_ns(first).ok().map(|ns| ns as f64),
        Shape::Rate => Rate::parse(first).ok().map(|r| r.bps as f64),
        Shape::Int | Shape::Bytes => first.parse::<f64>().ok(),
        _ => None,
    };
    Ok(Value { text, num, typed: Typed::Test(items) })
}

/// Where a lab point's parameters go.
#[derive(Debug, Clone, Default)]
pub struct LabPoint {
    pub lab: LabConfig,
    pub test: TestOverrides,
    pub queue_interval: Option<Duration>,
}

/// Build a lab point from the lab's defaults and the point's parameter values.
pub fn lab_point(vals: &[(String, Value)]) -> Result<LabPoint, String> {
    let mut pt = LabPoint::default();
    let (c, t) = (&mut pt.lab, &mut pt.test);
    let mut rate = None;
    for (k, v) in vals {
        let bad = || format!("{k}: value {:?} does not fit this parameter", v.text);
        match (k.as_str(), &v.typed) {
            ("rate", Typed::Rate(r)) => rate = Some(*r),
            ("rate_up", Typed::Rate(r)) => c.rate_up = Some(*r),
            ("rate_down", Typed::Rate(r)) => c.rate_down = Some(*r),
            ("queue" | "qdisc", Typed::Queue(q)) => c.queue = q.clone(),
            ("queue_up", Typed::Queue(q)) => c.queue_up = Some(q.clone()),
            ("queue_down", Typed::Queue(q)) => c.queue_down = Some(q.clone()),
            ("bottleneck", Typed::Choice(w)) => c.placement = w.parse()?,
            ("backend", Typed::Choice(w)) => c.backend = w.parse()?,
            ("shaper", Typed::Choice(w)) => c.shaper = w.parse()?,
            ("txqueuelen", Typed::Int(n)) => {
                c.txqueuelen = Some(*n as u32);
                c.queue = QueueSpec::Fifo { packets: *n as u32 };
            }
            ("cc", Typed::Word(w)) => c.cc = w.clone(),
            ("offloads", Typed::OnOff(o)) => c.offloads = *o,
            ("ecn", Typed::OnOff(o)) => c.ecn = Some(*o),
            ("ipv6", Typed::OnOff(o)) => c.ipv6 = *o == OnOff::On,
            ("delay", Typed::Duration(d)) => c.delay = Some(*d),
            ("jitter", Typed::Duration(d)) => c.jitter = Some(*d),
            ("loss", Typed::Probability(p)) => c.loss = Some(*p),
            ("trace_up", Typed::Path(p)) => c.trace_up = Some(p.clone()),
            ("trace_down", Typed::Path(p)) => c.trace_down = Some(p.clone()),
            ("tcp_mem_max", Typed::Int(n)) => c.tcp_mem_max = *n,
            ("queue_interval", Typed::Duration(d)) => pt.queue_interval = Some(*d),
            (_, Typed::Test(items)) => {
                for x in items {
                    t.set(k, x)?;
                }
            }
            _ => return Err(bad()),
        }
    }
    if let Some(r) = rate {
        // rate sets both directions unless rate_up/rate_down say otherwise
        let has = |n: &str| vals.iter().any(|(k, _)| k == n);
        if !has("rate_up") {
            c.rate_up = Some(r);
        }
        if !has("rate_down") {
            c.rate_down = Some(r);
        }
    }
    Ok(pt)
}

/// The test options a sweep got after `--`, as parameter values (they are
/// written into the sweep's recipe as settings).
pub fn overrides_as_values(o: &TestOverrides) -> Result<Vec<(String, Value)>, String> {
    let mut out = vec![];
    for (opt, vals) in o.iter() {
        let name = opt.param_name();
        let p = spec(RecipeKind::Lab, &name).ok_or_else(|| format!("--{} has no recipe parameter", opt.long))?;
        out.push((name, check_value(p, &vals.join("+"))?));
    }
    Ok(out)
}

/// Render a TOML value as the raw text `check_value` expects.
pub fn toml_scalar_text(v: &toml::Value) -> Result<String, String> {
    match v {
        toml::Value::String(s) => Ok(s.clone()),
        toml::Value::Integer(i) => Ok(i.to_string()),
        toml::Value::Float(f) => Ok(f.to_string()),
        toml::Value::Boolean(b) => Ok(if *b { "on".into() } else { "off".into() }),
        toml::Value::Array(a) => {
            // an array of scenario names is one value
            let mut parts = vec![];
            for x in a {
                match x {
                    toml::Value::String(s) => parts.push(s.clone()),
                    _ => return Err("expected a string, number or boolean".into()),
                }
            }
            Ok(parts.join("+"))
        }
        _ => Err("expected a string, number or boolean".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_values() {
        let p = spec(RecipeKind::Lab, "queue").unwrap();
        assert_eq!(check_value(p, "100").unwrap().text, "fifo:100");
        assert_eq!(check_value(p, "fifo:10").unwrap().num, Some(10.0));
        assert_eq!(check_value(p, "bfifo:150000").unwrap().text, "bfifo:150000");
        assert_eq!(check_value(p, "fq_codel").unwrap().text, "fq_codel");
        assert_eq!(check_value(p, "pfifo:5").unwrap().text, "fifo:5");
        assert_eq!(check_value(p, "bfifo:64k").unwrap().text, "bfifo:65536");
        assert!(check_value(p, "cake").is_err());
        assert_eq!(check_value(p, "codel:target=10ms,interval=100ms").unwrap().text, "codel:target=10ms");
        let b = spec(RecipeKind::Lab, "backend").unwrap();
        assert!(check_value(b, "emu").is_err());
        for bad in ["fifo:0", "fifo:ten", "fifo", "fi fo"] {
            assert!(check_value(p, bad).is_err(), "{bad}");
        }
        let q = spec(RecipeKind::Lab, "qdisc").unwrap();
        assert_eq!(check_value(q, "cake bandwidth 10mbit").unwrap().typed, Typed::Queue(QueueSpec::kernel("cake bandwidth 10mbit").unwrap()));
    }

    #[test]
    fn other_values() {
        let s = spec(RecipeKind::Lab, "scenarios").unwrap();
        assert_eq!(check_value(s, "1u0d+0U1D").unwrap().text, "1u0d,0u1d");
        assert!(check_value(s, "0u0d").is_err());
        assert!(check_value(s, "1up").is_err());
        assert!(check_value(s, "40u0d").unwrap_err().contains("at most 32"));
        let b = spec(RecipeKind::Lab, "bottleneck").unwrap();
        assert!(check_value(b, "sender").is_err());
        let t = spec(RecipeKind::Pacing, "timer").unwrap();
        assert_eq!(check_value(t, "tick:250").unwrap().text, "tick:250");
        assert_eq!(check_value(t, "tick").unwrap().text, "tick:1000");
        assert!(check_value(t, "tick:0").is_err());
        assert_eq!(check_value(t, "ccid3").unwrap().text, "ccid3:1000");
        assert_eq!(check_value(t, "ccid3:250:0.3").unwrap().text, "ccid3:250:0.3");
        assert!(check_value(t, "ccid3:250:1.5").is_err());
        assert!(unknown_param(RecipeKind::Lab, "qeue").contains("did you mean \"queue\""));
    }

    #[test]
    fn points_become_typed_configurations() {
        let val = |k: &str, raw: &str| (k.to_string(), check_value(spec(RecipeKind::Lab, k).unwrap(), raw).unwrap());
        let pt = lab_point(&[
            val("rate", "100mbit"),
            val("rate_down", "20mbit"),
            val("queue", "fifo:100"),
            val("cc", "bbr"),
            val("scenarios", "1u0d+0u1d"),
            val("duration", "10"),
            val("tcp_mem_max", "32m"),
        ])
        .unwrap();
        assert_eq!(pt.lab.rate_up, Some(Rate::mbit(100.0)));
        assert_eq!(pt.lab.rate_down, Some(Rate::mbit(20.0)));
        assert_eq!(pt.lab.queue, QueueSpec::Fifo { packets: 100 });
        assert_eq!((pt.lab.cc.as_str(), pt.lab.tcp_mem_max), ("bbr", 32 << 20));
        assert_eq!(pt.test.args(), ["--scenarios", "1u0d,0u1d", "--duration", "10s"]);
        let mut o = TestOverrides::default();
        o.set("scenarios", "1u0d").unwrap();
        o.set("idle", "0").unwrap();
        o.set("ping", "router").unwrap();
        o.set("ping", "server").unwrap();
        let vals = overrides_as_values(&o).unwrap();
        assert_eq!(vals.iter().map(|(k, v)| format!("{k}={}", v.text)).collect::<Vec<_>>(), vec!["scenarios=1u0d", "idle=0s", "ping=router+server"]);
        assert_eq!(lab_point(&vals).unwrap().test, o);
    }
}
