//! The parameters a recipe or `bloatlab sweep` can set, where each one goes
//! (a `bloatlab lab` flag, a `bloatlab test` flag, or the in-process pacing
//! experiment), and how its values are checked and spelled.
//!
//! One table serves recipe files and `--set KEY=V1,V2`, so both accept the
//! same names and reject the same mistakes.
use crate::units::{fmt_duration_ns, fmt_rate_tc, parse_duration_ns, parse_rate_bps};

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
    /// `bloatlab lab --FLAG VALUE`
    Lab(&'static str),
    /// `bloatlab lab ... -- --FLAG VALUE` (passed through to `bloatlab test`)
    Test(&'static str),
    /// Consumed by the pacing experiment itself.
    Pacing,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueKind {
    Rate,
    Queue,
    Placement,
    Duration,
    /// Unsigned integer in [min, max].
    Int(u64, u64),
    OnOff,
    /// Congestion control name (letters, digits, '_').
    Word,
    Scenarios,
    Timer,
    /// Free text passed as one argument (non-empty).
    Text,
    /// One of a fixed set of words.
    Choice(&'static [&'static str]),
}

#[derive(Debug, Clone, Copy)]
pub struct ParamSpec {
    pub name: &'static str,
    pub kind: RecipeKind,
    pub target: Target,
    pub value: ValueKind,
    pub help: &'static str,
}

/// Every parameter a recipe or sweep may set.
pub const PARAMS: &[ParamSpec] = &[
    // ---- lab (bloatlab lab flags) ----
    ParamSpec { name: "rate", kind: RecipeKind::Lab, target: Target::Lab("--rate"), value: ValueKind::Rate,
        help: "bottleneck rate, e.g. 10mbit, 100mbit, 1gbit" },
    ParamSpec { name: "queue", kind: RecipeKind::Lab, target: Target::Lab("--queue"), value: ValueKind::Queue,
        help: "bottleneck queue: fifo:N (packets), bfifo:BYTES, or an AQM the backend offers (codel, fq_codel, pie, ...); a bare number N means fifo:N" },
    ParamSpec { name: "bottleneck", kind: RecipeKind::Lab, target: Target::Lab("--bottleneck"), value: ValueKind::Placement,
        help: "where the bottleneck queue sits: router (router egress) or local (the sender's own interface)" },
    ParamSpec { name: "txqueuelen", kind: RecipeKind::Lab, target: Target::Lab("--txqueuelen"), value: ValueKind::Int(0, 1_000_000),
        help: "txqueuelen of the lab interfaces" },
    ParamSpec { name: "cc", kind: RecipeKind::Lab, target: Target::Lab("--cc"), value: ValueKind::Word,
        help: "TCP congestion control of the load flows: cubic, bbr, reno, ..." },
    ParamSpec { name: "offloads", kind: RecipeKind::Lab, target: Target::Lab("--offloads"), value: ValueKind::OnOff,
        help: "TSO/GSO/GRO on the lab interfaces: off (default, a packet is an MTU) or on" },
    ParamSpec { name: "delay", kind: RecipeKind::Lab, target: Target::Lab("--delay"), value: ValueKind::Duration,
        help: "added one-way delay (needs the emulator backend, or netem when the kernel has it)" },
    ParamSpec { name: "backend", kind: RecipeKind::Lab, target: Target::Lab("--backend"), value: ValueKind::Choice(&["auto", "kernel", "emulator"]),
        help: "lab backend: auto, kernel (qdiscs) or emulator (bloatlab's user-space link)" },
    ParamSpec { name: "rate_up", kind: RecipeKind::Lab, target: Target::Lab("--rate-up"), value: ValueKind::Rate,
        help: "upload (client to server) rate; overrides rate" },
    ParamSpec { name: "rate_down", kind: RecipeKind::Lab, target: Target::Lab("--rate-down"), value: ValueKind::Rate,
        help: "download (server to client) rate; overrides rate" },
    ParamSpec { name: "queue_up", kind: RecipeKind::Lab, target: Target::Lab("--queue-up"), value: ValueKind::Queue,
        help: "upload (client to server) queue; overrides queue for that direction" },
    ParamSpec { name: "queue_down", kind: RecipeKind::Lab, target: Target::Lab("--queue-down"), value: ValueKind::Queue,
        help: "download (server to client) queue; overrides queue for that direction" },
    ParamSpec { name: "qdisc", kind: RecipeKind::Lab, target: Target::Lab("--qdisc"), value: ValueKind::Text,
        help: "any kernel qdisc as the bottleneck queue, \"KIND ARGS\" (e.g. fq_codel, \"cake bandwidth 10mbit\")" },
    ParamSpec { name: "shaper", kind: RecipeKind::Lab, target: Target::Lab("--shaper"), value: ValueKind::Choice(&["htb", "tbf"]),
        help: "rate limiter of the kernel backend: htb or tbf" },
    ParamSpec { name: "jitter", kind: RecipeKind::Lab, target: Target::Lab("--jitter"), value: ValueKind::Duration,
        help: "delay variation (with delay)" },
    ParamSpec { name: "loss", kind: RecipeKind::Lab, target: Target::Lab("--loss"), value: ValueKind::Text,
        help: "random loss per direction, e.g. 1% or 0.01" },
    ParamSpec { name: "tcp_mem_max", kind: RecipeKind::Lab, target: Target::Lab("--tcp-mem-max"), value: ValueKind::Text,
        help: "tcp_wmem/tcp_rmem maximum inside the lab (default 16m)" },
    ParamSpec { name: "queue_interval", kind: RecipeKind::Lab, target: Target::Lab("--queue-interval"), value: ValueKind::Duration,
        help: "queue sampling interval (default: the test's sample interval)" },
    // ---- test (bloatlab test flags, after `--`) ----
    ParamSpec { name: "scenarios", kind: RecipeKind::Lab, target: Target::Test("--scenarios"), value: ValueKind::Scenarios,
        help: "load scenarios NuMd (N uploads, M downloads); join several with + in one sweep value: 1u0d+0u1d" },
    ParamSpec { name: "duration", kind: RecipeKind::Lab, target: Target::Test("--duration"), value: ValueKind::Duration,
        help: "duration of each load scenario" },
    ParamSpec { name: "idle", kind: RecipeKind::Lab, target: Target::Test("--idle"), value: ValueKind::Duration,
        help: "idle baseline before the load (0s = none)" },
    ParamSpec { name: "probe_interval", kind: RecipeKind::Lab, target: Target::Test("--probe-interval"), value: ValueKind::Duration,
        help: "interval of the latency probes" },
    ParamSpec { name: "probe_size", kind: RecipeKind::Lab, target: Target::Test("--probe-size"), value: ValueKind::Int(16, 1400),
        help: "UDP payload of a latency probe, bytes" },
    ParamSpec { name: "sample_interval", kind: RecipeKind::Lab, target: Target::Test("--sample-interval"), value: ValueKind::Duration,
        help: "goodput / TCP_INFO sampling interval" },
    ParamSpec { name: "socket_buffer", kind: RecipeKind::Lab, target: Target::Test("--socket-buffer"), value: ValueKind::Int(4096, 1 << 30),
        help: "SO_SNDBUF/SO_RCVBUF of the load flows, bytes (default: kernel autotuning)" },
    // ---- pacing ----
    ParamSpec { name: "ipi", kind: RecipeKind::Pacing, target: Target::Pacing, value: ValueKind::Duration,
        help: "inter-packet interval t_ipi, e.g. 50us .. 50ms" },
    ParamSpec { name: "timer", kind: RecipeKind::Pacing, target: Target::Pacing, value: ValueKind::Timer,
        help: "timer strategy: precise | sleep | tick:HZ (emulated scheduler tick of 1/HZ) | ccid3:HZ[:PHASE] (emulated 2.6.20 CCID-3 sender)" },
    ParamSpec { name: "payload", kind: RecipeKind::Pacing, target: Target::Pacing, value: ValueKind::Int(32, 65000),
        help: "UDP payload bytes per packet (seed 004: 1424)" },
    ParamSpec { name: "duration", kind: RecipeKind::Pacing, target: Target::Pacing, value: ValueKind::Duration,
        help: "length of each paced run" },
    ParamSpec { name: "line_rate", kind: RecipeKind::Pacing, target: Target::Pacing, value: ValueKind::Rate,
        help: "NIC speed of the emulated senders (tick, ccid3): no packet leaves before the previous one has serialized" },
];

pub fn spec(kind: RecipeKind, name: &str) -> Option<&'static ParamSpec> {
    PARAMS.iter().find(|p| p.kind == kind && p.name == name)
}

pub fn names(kind: RecipeKind) -> Vec<&'static str> {
    PARAMS.iter().filter(|p| p.kind == kind).map(|p| p.name).collect()
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

/// A checked parameter value: the spelling passed on (`text`) and, where it
/// has one, its number in base units (bit/s, ns, packets, bytes).
#[derive(Debug, Clone, PartialEq)]
pub struct Value {
    pub text: String,
    pub num: Option<f64>,
}

/// Parsed form of a `queue` value.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueSpec {
    pub discipline: String,
    /// Packet limit (fifo/pfifo) or byte limit (bfifo).
    pub limit: Option<u64>,
    pub limit_in_bytes: bool,
}

pub fn parse_queue(s: &str) -> Result<QueueSpec, String> {
    let t = s.trim().to_ascii_lowercase();
    if let Ok(n) = t.parse::<u64>() {
        return check_fifo(n, false).map(|_| QueueSpec { discipline: "fifo".into(), limit: Some(n), limit_in_bytes: false });
    }
    let (name, arg) = match t.split_once(':') {
        Some((n, a)) => (n.to_string(), Some(a.to_string())),
        None => (t.clone(), None),
    };
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        return Err(format!("\"{s}\" is not a queue (examples: fifo:100, bfifo:150000, codel)"));
    }
    match name.as_str() {
        "fifo" | "pfifo" | "drophead" | "bfifo" => {
            let bytes = name == "bfifo";
            let name = if name == "pfifo" { "fifo".to_string() } else { name };
            let a = arg.ok_or_else(|| format!("\"{s}\": {name} needs a limit, e.g. {name}:{}", if bytes { "150000" } else { "100" }))?;
            let n: u64 = if bytes {
bloatlab_units::parse_bytes(&a).map_err(|e| format!("\"{s}\": the bfifo limit must be a byte count: {e}"))?
            } else {
                a.parse().map_err(|_| format!("\"{s}\": the {name} limit must be a whole number of packets"))?
            };
            check_fifo(n, bytes)?;
            Ok(QueueSpec { discipline: name, limit: Some(n), limit_in_bytes: bytes })
        }
        // AQMs of the emulator, optionally with its parameters (codel:target=5ms,interval=100ms)
        "codel" | "fq_codel" | "fq-codel" | "pie" => {
            Ok(QueueSpec { discipline: name.replace('-', "_"), limit: None, limit_in_bytes: false })
        }
        _ => Err(format!(
            "unknown queue \"{s}\" (fifo:N, bfifo:BYTES, drophead:N, codel, fq_codel, pie; other kernel qdiscs go in the qdisc parameter)"
        )),
    }
}

fn check_fifo(n: u64, bytes: bool) -> Result<(), String> {
    if bytes {
        if !(64..=1 << 31).contains(&n) {
            return Err(format!("byte limit {n} out of range (64 .. 2^31)"));
        }
    } else if !(1..=1_000_000).contains(&n) {
        return Err(format!("packet limit {n} out of range (1 .. 1000000)"));
    }
    Ok(())
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

/// Parse one scenario name "NuMd".
pub fn parse_scenario(s: &str) -> Result<(u32, u32), String> {
    let t = s.trim().to_ascii_lowercase();
    let bad = || format!("\"{s}\" is not a scenario (NuMd: N uploads, M downloads, e.g. 1u0d, 4u4d)");
    let (u, rest) = t.split_once('u').ok_or_else(bad)?;
    let d = rest.strip_suffix('d').ok_or_else(bad)?;
    let u: u32 = u.parse().map_err(|_| bad())?;
    let d: u32 = d.parse().map_err(|_| bad())?;
    if u > 64 || d > 64 {
        return Err(format!("\"{s}\": at most 64 flows per direction"));
    }
    if u == 0 && d == 0 {
        return Err(format!("\"{s}\": a scenario needs at least one flow (the idle baseline is the `idle` parameter)"));
    }
    Ok((u, d))
}

/// Check and normalize a value for parameter `p`.
pub fn check_value(p: &ParamSpec, raw: &str) -> Result<Value, String> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Err(format!("{}: empty value", p.name));
    }
    let r = match p.value {
        ValueKind::Rate => parse_rate_bps(raw).map(|b| Value { text: fmt_rate_tc(b), num: Some(b) }),
        ValueKind::Queue => parse_queue(raw).map(|q| Value {
            text: match q.limit {
                Some(n) => format!("{}:{n}", q.discipline),
                None => raw.to_ascii_lowercase(),
            },
            num: q.limit.map(|n| n as f64),
        }),
        ValueKind::Placement => match raw {
            "router" | "local" => Ok(Value { text: raw.into(), num: None }),
            o => Err(format!("\"{o}\" is not a bottleneck placement (router or local)")),
        },
        ValueKind::Duration => parse_duration_ns(raw).and_then(|ns| {
            if ns == 0 && !matches!(p.name, "idle" | "delay" | "jitter") {
                Err("must be greater than zero".into())
            } else {
                Ok(Value { text: fmt_duration_ns(ns), num: Some(ns as f64) })
            }
        }),
        ValueKind::Int(lo, hi) => raw
            .parse::<u64>()
            .map_err(|_| format!("\"{raw}\" is not a whole number"))
            .and_then(|n| {
                if n < lo || n > hi {
                    Err(format!("{n} is out of range ({lo} .. {hi})"))
                } else {
                    Ok(Value { text: n.to_string(), num: Some(n as f64) })
                }
            }),
        ValueKind::OnOff => match raw {
            "on" | "true" => Ok(Value { text: "on".into(), num: None }),
            "off" | "false" => Ok(Value { text: "off".into(), num: None }),
            o => Err(format!("\"{o}\": expected on or off")),
        },
        ValueKind::Word => {
            if raw.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                Ok(Value { text: raw.into(), num: None })
            } else {
                Err(format!("\"{raw}\" is not a congestion control name"))
            }
        }
        ValueKind::Scenarios => {
            let parts: Vec<&str> = raw.split(['+', ',']).collect();
            let mut out = vec![];
            for s in parts {
                parse_scenario(s)?;
                out.push(s.trim().to_ascii_lowercase());
            }
            Ok(Value { text: out.join(","), num: None })
        }
        ValueKind::Timer => TimerSpec::parse(raw).map(|t| Value { text: t.name(), num: None }),
        ValueKind::Text => {
            if raw.contains(',') {
                Err(format!("\"{raw}\": no commas allowed"))
            } else {
                Ok(Value { text: raw.into(), num: None })
            }
        }
        ValueKind::Choice(words) => {
            let t = raw.to_ascii_lowercase();
            if words.contains(&t.as_str()) {
                Ok(Value { text: t, num: None })
            } else {
                Err(format!("\"{raw}\": expected one of {}", words.join(", ")))
            }
        }
    };
    r.map_err(|e| format!("{}: {e}", p.name))
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
        assert_eq!(check_value(p, "codel:target=5ms,interval=100ms").unwrap().text, "codel:target=5ms,interval=100ms");
        let b = spec(RecipeKind::Lab, "backend").unwrap();
        assert!(check_value(b, "emu").is_err());
        assert!(check_value(p, "fifo:0").is_err());
        assert!(check_value(p, "fifo:ten").is_err());
        assert!(check_value(p, "fifo").is_err());
        assert!(check_value(p, "fi fo").is_err());
    }

    #[test]
    fn other_values() {
        let s = spec(RecipeKind::Lab, "scenarios").unwrap();
        assert_eq!(check_value(s, "1u0d+0U1D").unwrap().text, "1u0d,0u1d");
        assert!(check_value(s, "0u0d").is_err());
        assert!(check_value(s, "1up").is_err());
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
}
