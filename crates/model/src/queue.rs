//! The bottleneck queue: one type and one grammar for `bloatlab lab --queue`,
//! `bloatlab emulate --queue`, recipes and sweeps, and the emulator's
//! configuration; and the one rule for the analytic delay of a full queue.
//!
//! Grammar (case-insensitive):
//!
//! | spelling | queue |
//! |---|---|
//! | `fifo:N`, `pfifo:N`, `fifo:limit=N`, a bare `N` | droptail FIFO of N packets (the txqueuelen) |
//! | `bfifo:BYTES` (`bfifo:64k` = 65536, tc's units) | droptail FIFO of BYTES |
//! | `drophead:N` | FIFO of N packets that drops from the head |
//! | `codel[:target=5ms,interval=100ms,limit=1000,ecn\|noecn]` | CoDel (RFC 8289) |
//! | `fq_codel[:target=,interval=,quantum=1514,flows=1024,limit=10240,ecn\|noecn]` | FQ-CoDel (RFC 8290) |
//! | `pie[:target=15ms,tupdate=15ms,alpha=0.125,beta=1.25,burst=150ms,limit=1000,ecn\|noecn,derandomize\|noderandomize]` | PIE (RFC 8033) |
//!
//! Any other kernel qdisc is [`QueueSpec::Kernel`], built from `--qdisc "KIND ARGS"`
//! with [`QueueSpec::kernel`]. [`QueueSpec`]'s `Display` is the canonical
//! spelling (AQM parameters only where they differ from the defaults) and
//! parses back to the same value.
use crate::units;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Bytes of one full-size frame as a qdisc counts it on a veth: 1500 (MTU) + 14 (Ethernet header).
/// A queue's parameters that are bare words, not `key=value`.
pub const QUEUE_FLAGS: &[&str] = &["ecn", "noecn"];

pub const FRAME_BYTES: u64 = 1514;
/// The lab's MTU.
pub const MTU: u32 = 1500;
/// Largest packet limit of a FIFO.
pub const MAX_PACKETS: u32 = 1_000_000;
/// Byte limits of a bfifo: at least one frame's worth of header, at most 2 GiB.
pub const MIN_BYTES: u64 = 64;
pub const MAX_BYTES: u64 = 1 << 31;

/// CoDel parameters (RFC 8289 defaults: target 5 ms, interval 100 ms).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CodelParams {
    pub target_ns: u64,
    pub interval_ns: u64,
    /// Mark ECN-capable packets instead of dropping them.
    pub ecn: bool,
}

impl Default for CodelParams {
    fn default() -> Self {
        CodelParams { target_ns: 5_000_000, interval_ns: 100_000_000, ecn: true }
    }
}

/// FQ-CoDel parameters (RFC 8290 / Linux defaults).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FqCodelParams {
    pub codel: CodelParams,
    pub flows: usize,
    pub quantum: u32,
    pub limit: usize,
    /// Hash perturbation (0 = none: the emulator picks one from its seed).
    pub seed: u64,
}

impl Default for FqCodelParams {
    fn default() -> Self {
        FqCodelParams { codel: CodelParams::default(), flows: 1024, quantum: 1514, limit: 10240, seed: 0 }
    }
}

/// PIE parameters (RFC 8033 defaults).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PieParams {
    /// QDELAY_REF, latency target (default 15 ms).
    pub target_ns: u64,
    /// T_UPDATE (default 15 ms).
    pub tupdate_ns: u64,
    /// alpha and beta, in 1/s (defaults 0.125 and 1.25).
    pub alpha: f64,
    pub beta: f64,
    /// MAX_BURST (default 150 ms).
    pub max_burst_ns: u64,
    /// Queue limit in packets (default 1000, as Linux).
    pub limit: usize,
    /// Mark ECN-capable packets instead of dropping while drop_prob <= 10%.
    pub ecn: bool,
    /// Apply section 5.1 de-randomisation.
    pub derandomize: bool,
    /// RNG seed for the random drops.
    pub seed: u64,
}

impl Default for PieParams {
    fn default() -> Self {
        PieParams {
            target_ns: 15_000_000,
            tupdate_ns: 15_000_000,
            alpha: 0.125,
            beta: 1.25,
            max_burst_ns: 150_000_000,
            limit: 1000,
            ecn: true,
            derandomize: true,
            seed: 1,
        }
    }
}

/// A bottleneck queue discipline with its parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum QueueSpec {
    /// Droptail FIFO of `packets` packets (`pfifo limit N`): the txqueuelen.
    Fifo { packets: u32 },
    /// Droptail FIFO of `bytes` bytes (`bfifo limit N`).
    Bfifo { bytes: u64 },
    /// Drop-head FIFO of `packets` packets.
    Drophead { packets: u32 },
    Codel { params: CodelParams, limit: u32 },
    FqCodel { params: FqCodelParams },
    Pie { params: PieParams },
    /// Any kernel qdisc: `tc qdisc add ... QDISC ARGS` (`--qdisc "KIND ARGS"`).
    Kernel { qdisc: String, args: Vec<String> },
}

/// Accepted spellings, for error messages and help.
pub const QUEUE_FORMS: &str = "accepted forms: fifo:N (packets, e.g. fifo:1000; the txqueuelen; a bare N is the same), \
     bfifo:BYTES (e.g. bfifo:64k = 65536), drophead:N, and the AQMs codel, fq_codel, pie, optionally with \
     parameters (e.g. codel:target=5ms,interval=100ms; fq_codel:quantum=300,flows=64; pie:target=20ms,noecn); \
     any other kernel qdisc goes through --qdisc \"KIND ARGS\"";

fn parse_count(q: &str, key: &str, v: &str, max: u64) -> Result<u64, String> {
    match v.trim().parse::<u64>() {
        Ok(n) if n >= 1 && n <= max => Ok(n),
        Ok(n) => Err(format!("queue `{q}`: {key} {n} is out of range (1 .. {max})")),
        Err(_) => Err(format!("queue `{q}`: {key} must be a whole number, not `{v}`; {QUEUE_FORMS}")),
    }
}

fn parse_flag(q: &str, k: &str, v: &str) -> Result<bool, String> {
    match v {
        "" => Ok(!k.starts_with("no")),
        "on" | "true" | "1" | "yes" => Ok(true),
        "off" | "false" | "0" | "no" => Ok(false),
        _ => Err(format!("queue `{q}`: {k} takes on or off, not `{v}`")),
    }
}

fn parse_time(q: &str, k: &str, v: &str) -> Result<u64, String> {
    units::parse_duration_ns(v).map_err(|e| format!("queue `{q}`: {k}: {e}"))
}

fn check_codel(q: &str, p: &CodelParams) -> Result<(), String> {
    if p.target_ns == 0 || p.interval_ns == 0 {
        return Err(format!("queue `{q}`: codel target and interval must be > 0"));
    }
    if p.target_ns >= p.interval_ns {
        return Err(format!("queue `{q}`: codel target must be smaller than interval"));
    }
    Ok(())
}

impl QueueSpec {
    /// Parse a queue in the grammar of the module docs.
    pub fn parse(s: &str) -> Result<QueueSpec, String> {
        let t = s.trim().to_ascii_lowercase();
        if t.is_empty() {
            return Err(format!("empty queue; {QUEUE_FORMS}"));
        }
        if t.bytes().all(|b| b.is_ascii_digit()) {
            let n = parse_count(s, "packet limit", &t, MAX_PACKETS as u64)?;
            return Ok(QueueSpec::Fifo { packets: n as u32 });
        }
        let (name, rest) = match t.split_once(':') {
            Some((n, r)) => (n.trim().to_string(), r.trim().to_string()),
            None => (t.clone(), String::new()),
        };
        // key=value list; a bare number is the limit; a bare word is a flag
        let mut kv: Vec<(String, String)> = vec![];
        for part in rest.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match part.split_once('=') {
                Some((k, v)) => kv.push((k.trim().to_string(), v.trim().to_string())),
                None if part.starts_with(|c: char| c.is_ascii_digit()) || matches!(name.as_str(), "fifo" | "pfifo" | "bfifo" | "drophead") => {
                    kv.push(("limit".into(), part.to_string()))
                }
                None => kv.push((part.to_string(), String::new())),
            }
        }
        let unknown = |k: &str| format!("queue `{s}`: unknown parameter `{k}` for {name}; {QUEUE_FORMS}");
        match name.as_str() {
            "fifo" | "pfifo" | "drophead" | "pfifo_head_drop" => {
                let mut limit = None;
                for (k, v) in &kv {
                    match k.as_str() {
                        "limit" => limit = Some(parse_count(s, "packet limit", v, MAX_PACKETS as u64)? as u32),
                        _ => return Err(unknown(k)),
                    }
                }
                let packets = limit.ok_or_else(|| format!("queue `{s}` needs a packet limit, e.g. {name}:100; {QUEUE_FORMS}"))?;
                Ok(if name.starts_with("drop") || name == "pfifo_head_drop" {
                    QueueSpec::Drophead { packets }
                } else {
                    QueueSpec::Fifo { packets }
                })
            }
            "bfifo" => {
                let mut limit = None;
                for (k, v) in &kv {
                    match k.as_str() {
                        "limit" => {
                            let b = units::parse_bytes(v).map_err(|e| format!("queue `{s}`: {e}"))?;
                            if !(MIN_BYTES..=MAX_BYTES).contains(&b) {
                                return Err(format!("queue `{s}`: byte limit {b} is out of range ({MIN_BYTES} .. 2^31); below 64 it cannot hold a packet"));
                            }
                            limit = Some(b);
                        }
                        _ => return Err(unknown(k)),
                    }
                }
                let bytes = limit.ok_or_else(|| format!("queue `{s}` needs a byte limit, e.g. bfifo:64k; {QUEUE_FORMS}"))?;
                Ok(QueueSpec::Bfifo { bytes })
            }
            "codel" => {
                let mut p = CodelParams::default();
                let mut limit = 1000;
                for (k, v) in &kv {
                    match k.as_str() {
                        "target" => p.target_ns = parse_time(s, k, v)?,
                        "interval" => p.interval_ns = parse_time(s, k, v)?,
                        "limit" => limit = parse_count(s, "limit", v, MAX_PACKETS as u64)? as u32,
                        "ecn" | "noecn" => p.ecn = parse_flag(s, k, v)?,
                        _ => return Err(unknown(k)),
                    }
                }
                check_codel(s, &p)?;
                Ok(QueueSpec::Codel { params: p, limit })
            }
            "fq_codel" | "fq-codel" | "fqcodel" => {
                let mut p = FqCodelParams::default();
                for (k, v) in &kv {
                    match k.as_str() {
                        "target" => p.codel.target_ns = parse_time(s, k, v)?,
                        "interval" => p.codel.interval_ns = parse_time(s, k, v)?,
                        "limit" => p.limit = parse_count(s, "limit", v, MAX_PACKETS as u64)? as usize,
                        "flows" => p.flows = parse_count(s, "flows", v, 65536)? as usize,
                        "quantum" => p.quantum = parse_count(s, "quantum", v, 1 << 20)? as u32,
                        "ecn" | "noecn" => p.codel.ecn = parse_flag(s, k, v)?,
                        _ => return Err(unknown(k)),
                    }
                }
                check_codel(s, &p.codel)?;
                Ok(QueueSpec::FqCodel { params: p })
            }
            "pie" => {
                let mut p = PieParams::default();
                for (k, v) in &kv {
                    let num = |v: &str| -> Result<f64, String> {
                        v.parse::<f64>()
                            .ok()
                            .filter(|x| x.is_finite() && *x >= 0.0)
                            .ok_or_else(|| format!("queue `{s}`: {k} must be a non-negative number, not `{v}`"))
                    };
                    match k.as_str() {
                        "target" => p.target_ns = parse_time(s, k, v)?,
                        "tupdate" => p.tupdate_ns = parse_time(s, k, v)?,
                        "alpha" => p.alpha = num(v)?,
                        "beta" => p.beta = num(v)?,
                        "burst" | "max_burst" => p.max_burst_ns = parse_time(s, k, v)?,
                        "limit" => p.limit = parse_count(s, "limit", v, MAX_PACKETS as u64)? as usize,
                        "ecn" | "noecn" => p.ecn = parse_flag(s, k, v)?,
                        "derandomize" | "noderandomize" => p.derandomize = parse_flag(s, k, v)?,
                        _ => return Err(unknown(k)),
                    }
                }
                if p.target_ns == 0 || p.tupdate_ns == 0 {
                    return Err(format!("queue `{s}`: pie target and tupdate must be > 0"));
                }
                Ok(QueueSpec::Pie { params: p })
            }
            _ => Err(format!("unknown queue `{s}`; {QUEUE_FORMS}")),
        }
    }

    /// Any kernel qdisc, from `--qdisc "KIND [ARGS]"`.
    pub fn kernel(text: &str) -> Result<QueueSpec, String> {
        let mut words = text.split_whitespace().map(String::from);
        let qdisc = words
            .next()
            .ok_or_else(|| "--qdisc needs a qdisc kind, e.g. --qdisc fq_codel or --qdisc \"netem delay 20ms\"".to_string())?;
        if !qdisc.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
            return Err(format!("`{qdisc}` is not a qdisc kind (letters, digits, _ and -)"));
        }
        Ok(QueueSpec::Kernel { qdisc, args: words.collect() })
    }

    /// True for disciplines only bloatlab's user-space emulator provides on
    /// the kernels the lab has run on (AQMs and drop-head).
    pub fn needs_emulator(&self) -> bool {
        matches!(self, QueueSpec::Drophead { .. } | QueueSpec::Codel { .. } | QueueSpec::FqCodel { .. } | QueueSpec::Pie { .. })
    }

    /// Short name of the discipline: fifo, bfifo, drophead, codel, fq_codel, pie, or the kernel qdisc's kind.
    pub fn kind(&self) -> &str {
        match self {
            QueueSpec::Fifo { .. } => "fifo",
            QueueSpec::Bfifo { .. } => "bfifo",
            QueueSpec::Drophead { .. } => "drophead",
            QueueSpec::Codel { .. } => "codel",
            QueueSpec::FqCodel { .. } => "fq_codel",
            QueueSpec::Pie { .. } => "pie",
            QueueSpec::Kernel { qdisc, .. } => qdisc,
        }
    }

    /// Short label used in tables and file names: `fifo:1000`, `codel`,
    /// `codel:target=10ms`, `cake bandwidth 10mbit` (the canonical spelling).
    pub fn label(&self) -> String {
        self.to_string()
    }

    /// The kernel qdisc that runs this discipline, and its `tc qdisc add`
    /// arguments (kind first): pfifo, bfifo, pfifo_head_drop, codel,
    /// fq_codel, pie with the same parameters (tc's PIE alpha and beta are
    /// in 1/16 units), or a `--qdisc` as given.
    pub fn kernel_args(&self) -> Vec<String> {
        let us = |ns: u64| format!("{}us", ns / 1000);
        let ecn = |e: bool| if e { "ecn" } else { "noecn" }.to_string();
        let v: Vec<String> = match self {
            QueueSpec::Fifo { packets } => vec!["pfifo".into(), "limit".into(), packets.to_string()],
            QueueSpec::Bfifo { bytes } => vec!["bfifo".into(), "limit".into(), bytes.to_string()],
            QueueSpec::Drophead { packets } => vec!["pfifo_head_drop".into(), "limit".into(), packets.to_string()],
            QueueSpec::Codel { params, limit } => vec![
                "codel".into(),
                "limit".into(),
                limit.to_string(),
                "target".into(),
                us(params.target_ns),
                "interval".into(),
                us(params.interval_ns),
                ecn(params.ecn),
            ],
            QueueSpec::FqCodel { params } => vec![
                "fq_codel".into(),
                "limit".into(),
                params.limit.to_string(),
                "flows".into(),
                params.flows.to_string(),
                "quantum".into(),
                params.quantum.to_string(),
                "target".into(),
                us(params.codel.target_ns),
                "interval".into(),
                us(params.codel.interval_ns),
                ecn(params.codel.ecn),
            ],
            QueueSpec::Pie { params } => vec![
                "pie".into(),
                "limit".into(),
                params.limit.to_string(),
                "target".into(),
                us(params.target_ns),
                "tupdate".into(),
                us(params.tupdate_ns),
                "alpha".into(),
                ((params.alpha * 16.0).round() as u32).to_string(),
                "beta".into(),
                ((params.beta * 16.0).round() as u32).to_string(),
                ecn(params.ecn),
            ],
            QueueSpec::Kernel { qdisc, args } => std::iter::once(qdisc.clone()).chain(args.iter().cloned()).collect(),
        };
        v
    }

    /// Packet limit of a FIFO (`fifo:N`, `drophead:N`), the number a txqueuelen sets.
    pub fn fifo_packets(&self) -> Option<u32> {
        match self {
            QueueSpec::Fifo { packets } | QueueSpec::Drophead { packets } => Some(*packets),
            _ => None,
        }
    }

    /// Bytes a full queue holds with `frame`-byte packets: packet FIFOs hold
    /// N x frame, byte FIFOs their limit. None for AQMs, whose standing queue
    /// is set by their target, and for other kernel qdiscs.
    pub fn capacity_bytes(&self, frame: u64) -> Option<u64> {
        match self {
            QueueSpec::Fifo { packets } | QueueSpec::Drophead { packets } => Some(*packets as u64 * frame),
            QueueSpec::Bfifo { bytes } => Some(*bytes),
            _ => None,
        }
    }
}

/// The analytic delay of a full queue, ms: capacity x 8 / rate, where a
/// packet is a full [`FRAME_BYTES`] frame (1514 B: MTU + Ethernet header, as
/// htb and the emulator count it). None for AQMs and unknown rates.
pub fn analytic_queue_delay_ms(queue: &QueueSpec, rate_bps: f64) -> Option<f64> {
    if rate_bps.is_nan() || rate_bps <= 0.0 {
        return None;
    }
    Some(queue.capacity_bytes(FRAME_BYTES)? as f64 * 8.0 / rate_bps * 1e3)
}

impl std::str::FromStr for QueueSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<QueueSpec, String> {
        QueueSpec::parse(s)
    }
}

fn fmt_ns(ns: u64) -> String {
    units::fmt_duration_ns(ns)
}

impl fmt::Display for QueueSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // AQM parameters are listed only where they differ from the defaults.
        let mut opts: Vec<String> = vec![];
        let codel_opts = |opts: &mut Vec<String>, p: &CodelParams| {
            let d = CodelParams::default();
            if p.target_ns != d.target_ns {
                opts.push(format!("target={}", fmt_ns(p.target_ns)));
            }
            if p.interval_ns != d.interval_ns {
                opts.push(format!("interval={}", fmt_ns(p.interval_ns)));
            }
            if p.ecn != d.ecn {
                opts.push(if p.ecn { "ecn".into() } else { "noecn".into() });
            }
        };
        let name = match self {
            QueueSpec::Fifo { packets } => return write!(f, "fifo:{packets}"),
            QueueSpec::Bfifo { bytes } => return write!(f, "bfifo:{bytes}"),
            QueueSpec::Drophead { packets } => return write!(f, "drophead:{packets}"),
            QueueSpec::Kernel { qdisc, args } => {
                f.write_str(qdisc)?;
                for a in args {
                    write!(f, " {a}")?;
                }
                return Ok(());
            }
            QueueSpec::Codel { params, limit } => {
                codel_opts(&mut opts, params);
                if *limit != 1000 {
                    opts.push(format!("limit={limit}"));
                }
                "codel"
            }
            QueueSpec::FqCodel { params } => {
                let d = FqCodelParams::default();
                codel_opts(&mut opts, &params.codel);
                if params.quantum != d.quantum {
                    opts.push(format!("quantum={}", params.quantum));
                }
                if params.flows != d.flows {
                    opts.push(format!("flows={}", params.flows));
                }
                if params.limit != d.limit {
                    opts.push(format!("limit={}", params.limit));
                }
                "fq_codel"
            }
            QueueSpec::Pie { params } => {
                let d = PieParams::default();
                if params.target_ns != d.target_ns {
                    opts.push(format!("target={}", fmt_ns(params.target_ns)));
                }
                if params.tupdate_ns != d.tupdate_ns {
                    opts.push(format!("tupdate={}", fmt_ns(params.tupdate_ns)));
                }
                if params.alpha != d.alpha {
                    opts.push(format!("alpha={}", params.alpha));
                }
                if params.beta != d.beta {
                    opts.push(format!("beta={}", params.beta));
                }
                if params.max_burst_ns != d.max_burst_ns {
                    opts.push(format!("burst={}", fmt_ns(params.max_burst_ns)));
                }
                if params.limit != d.limit {
                    opts.push(format!("limit={}", params.limit));
                }
                if params.ecn != d.ecn {
                    opts.push(if params.ecn { "ecn".into() } else { "noecn".into() });
                }
                if params.derandomize != d.derandomize {
                    opts.push(if params.derandomize { "derandomize".into() } else { "noderandomize".into() });
                }
                "pie"
            }
        };
        if opts.is_empty() {
            f.write_str(name)
        } else {
            write!(f, "{name}:{}", opts.join(","))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_parses_and_round_trips() {
        for (s, want) in [
            ("fifo:1000", QueueSpec::Fifo { packets: 1000 }),
            ("pfifo:10", QueueSpec::Fifo { packets: 10 }),
            ("fifo:limit=10", QueueSpec::Fifo { packets: 10 }),
            ("100", QueueSpec::Fifo { packets: 100 }),
            (" FIFO:5 ", QueueSpec::Fifo { packets: 5 }),
            ("bfifo:64k", QueueSpec::Bfifo { bytes: 65536 }),
            ("bfifo:65536", QueueSpec::Bfifo { bytes: 65536 }),
            ("bfifo:150kb", QueueSpec::Bfifo { bytes: 153_600 }),
            ("drophead:50", QueueSpec::Drophead { packets: 50 }),
            ("codel", QueueSpec::Codel { params: CodelParams::default(), limit: 1000 }),
            ("fq_codel", QueueSpec::FqCodel { params: FqCodelParams::default() }),
            ("fq-codel", QueueSpec::FqCodel { params: FqCodelParams::default() }),
            ("pie", QueueSpec::Pie { params: PieParams::default() }),
        ] {
            let q = QueueSpec::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"));
            assert_eq!(q, want, "{s}");
            assert_eq!(QueueSpec::parse(&q.to_string()).unwrap(), q, "round trip of {s}");
        }
        let c = QueueSpec::parse("codel:target=10ms,interval=200ms,noecn,limit=500").unwrap();
        assert_eq!(c.to_string(), "codel:target=10ms,interval=200ms,noecn,limit=500");
        assert_eq!(QueueSpec::parse(&c.to_string()).unwrap(), c);
        // defaults are not repeated in the label
        assert_eq!(QueueSpec::parse("codel:target=5ms,interval=100ms").unwrap().to_string(), "codel");
        let f = QueueSpec::parse("fq_codel:quantum=300,flows=64,target=2ms").unwrap();
        assert_eq!(f.to_string(), "fq_codel:target=2ms,quantum=300,flows=64");
        assert_eq!(QueueSpec::parse(&f.to_string()).unwrap(), f);
        let p = QueueSpec::parse("pie:target=20ms,ecn=off,burst=100ms,noderandomize").unwrap();
        assert_eq!(p.to_string(), "pie:target=20ms,burst=100ms,noecn,noderandomize");
        assert_eq!(QueueSpec::parse(&p.to_string()).unwrap(), p);
        // serde round trip
        let j = serde_json::to_string(&p).unwrap();
        assert_eq!(serde_json::from_str::<QueueSpec>(&j).unwrap(), p);
        assert_eq!(serde_json::to_string(&QueueSpec::Fifo { packets: 3 }).unwrap(), r#"{"kind":"fifo","packets":3}"#);
    }

    #[test]
    fn refusals_say_why() {
        for (bad, why) in [
            ("", "empty"),
            ("fifo", "needs a packet limit"),
            ("fifo:x", "whole number"),
            ("fifo:0", "out of range"),
            ("0", "out of range"),
            ("fifo:2000000", "out of range"),
            ("red", "unknown queue"),
            ("sfq", "unknown queue"),
            ("cake", "unknown queue"),
            ("bfifo", "needs a byte limit"),
            ("bfifo:", "needs a byte limit"),
            ("bfifo:10", "cannot hold a packet"),
            ("bfifo:lots", "not a byte size"),
            ("drophead", "needs a packet limit"),
            ("codel:bogus=5", "unknown parameter `bogus`"),
            ("codel:target=200ms", "smaller than interval"),
            ("codel:target=5", "needs a unit"),
            ("fq_codel:flows=100000", "out of range"),
            ("pie:alpha=-1", "non-negative"),
            ("fi fo", "unknown queue"),
        ] {
            let e = QueueSpec::parse(bad).unwrap_err();
            assert!(e.contains(why), "{bad:?}: {e}");
        }
    }

    #[test]
    fn kernel_arguments() {
        let a = |s: &str| QueueSpec::parse(s).unwrap().kernel_args().join(" ");
        assert_eq!(a("fifo:100"), "pfifo limit 100");
        assert_eq!(a("bfifo:64k"), "bfifo limit 65536");
        assert_eq!(a("drophead:50"), "pfifo_head_drop limit 50");
        assert_eq!(a("codel"), "codel limit 1000 target 5000us interval 100000us ecn");
        assert_eq!(a("fq_codel:quantum=300,noecn"), "fq_codel limit 10240 flows 1024 quantum 300 target 5000us interval 100000us noecn");
        // tc's PIE alpha/beta are in 1/16: RFC 8033's 0.125 and 1.25 are tc's defaults 2 and 20
        assert_eq!(a("pie"), "pie limit 1000 target 15000us tupdate 15000us alpha 2 beta 20 ecn");
        assert_eq!(QueueSpec::kernel("cake bandwidth 10mbit").unwrap().kernel_args().join(" "), "cake bandwidth 10mbit");
    }

    #[test]
    fn kernel_qdiscs() {
        let k = QueueSpec::kernel("cake  bandwidth 10mbit").unwrap();
        assert_eq!(k, QueueSpec::Kernel { qdisc: "cake".into(), args: vec!["bandwidth".into(), "10mbit".into()] });
        assert_eq!(k.label(), "cake bandwidth 10mbit");
        assert_eq!(k.kind(), "cake");
        assert!(!k.needs_emulator());
        assert!(QueueSpec::kernel("  ").unwrap_err().contains("needs a qdisc kind"));
        assert!(QueueSpec::kernel("a;b").is_err());
    }

    #[test]
    fn analytic_delay_uses_full_frames() {
        // 1000 x 1514 B x 8 / 10 Mbit/s = 1211.2 ms
        let d = analytic_queue_delay_ms(&QueueSpec::Fifo { packets: 1000 }, 10e6).unwrap();
        assert!((d - 1211.2).abs() < 1e-9, "{d}");
        // 100 packets at 10 Mbit/s: 121.12 ms
        assert!((analytic_queue_delay_ms(&QueueSpec::Fifo { packets: 100 }, 10e6).unwrap() - 121.12).abs() < 1e-9);
        // a byte FIFO holds its bytes: 65536 x 8 / 1 Mbit/s = 524.288 ms
        assert!((analytic_queue_delay_ms(&QueueSpec::Bfifo { bytes: 65536 }, 1e6).unwrap() - 524.288).abs() < 1e-9);
        assert_eq!(analytic_queue_delay_ms(&QueueSpec::parse("drophead:10").unwrap(), 10e6).map(|x| x.round()), Some(12.0));
        assert_eq!(analytic_queue_delay_ms(&QueueSpec::parse("codel").unwrap(), 10e6), None);
        assert_eq!(analytic_queue_delay_ms(&QueueSpec::Fifo { packets: 1 }, 0.0), None);
        assert_eq!(QueueSpec::Fifo { packets: 100 }.capacity_bytes(FRAME_BYTES), Some(151_400));
    }
}
