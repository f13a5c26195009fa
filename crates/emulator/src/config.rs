//! Emulator configuration: what each direction of the link does, with parsers
//! for the command-line spellings (`10mbit`, `20ms`, `1%`, `fq_codel:target=5ms`,
//! `ge:p=1%,r=25%`, ...). Everything is serde so the lab can store it in the
//! result's `lab.config` and pass it to the emulator process as JSON.

use crate::qdisc::codel::{Codel, CodelParams};
use crate::qdisc::fifo::Fifo;
use crate::qdisc::fq_codel::{FqCodel, FqCodelParams};
use crate::qdisc::pie::{Pie, PieParams};
use crate::qdisc::Qdisc;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::{Path, PathBuf};

/// A parse error with a one-line, user-facing message.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("{0}")]
pub struct ParseError(pub String);

fn err<T>(msg: impl Into<String>) -> Result<T, ParseError> {
    Err(ParseError(msg.into()))
}

// ---------------------------------------------------------------- numbers

// One parser per unit for the whole workspace lives in crates/units; these
// wrap its String errors in ParseError and keep the emulator's conventions.

/// Parse a duration with a unit: `20ms`, `1.5s`, `500us`, `250ns`, `2m`; `0` alone is allowed
/// (a bare number like `20` is refused: 20 ms or 20 s?).
pub fn parse_duration_ns(s: &str) -> Result<u64, ParseError> {
    bloatlab_units::parse_duration_ns_unit_required(s).map_err(ParseError)
}

/// Parse a bit rate, tc style with SI prefixes: `10mbit`, `1.5gbit`, `500kbit`,
/// `10Mbit/s`, `10M`, `2g`, or a bare number of bits/s; at least 1 bit/s.
pub fn parse_rate_bps(s: &str) -> Result<u64, ParseError> {
    let bps = bloatlab_units::parse_rate_bps(s).map_err(ParseError)?;
    if bps == 0 {
        return err(format!("rate \"{s}\" must be at least 1 bit/s"));
    }
    Ok(bps)
}

/// Parse a byte size as tc and the kernel backend do: `150000`, `64k` = `64kb`
/// = 65536, `1.5mb`, `2kib`; so `bfifo:64k` means the same with either backend.
pub fn parse_bytes(s: &str) -> Result<u64, ParseError> {
    bloatlab_units::parse_bytes(s).map_err(ParseError)
}

/// Parse a probability: `1%`, `0.5%`, or a fraction `0.01`.
pub fn parse_probability(s: &str) -> Result<f64, ParseError> {
    bloatlab_units::parse_probability(s).map_err(ParseError)
}

/// Durations in descriptions and queue specs: `0`, `250ns`, `20ms`, `1.5s`, `2m` (exact).
fn fmt_ns(ns: u64) -> String {
    if ns == 0 {
        "0".into()
    } else {
        bloatlab_units::fmt_duration_ns(ns)
    }
}

/// Format bits/s tc style (`10mbit`, `1500kbit`).
pub use bloatlab_units::fmt_rate_tc as fmt_rate;

fn fmt_pct(p: f64) -> String {
    format!("{}%", (p * 100.0 * 1e6).round() / 1e6)
}

// ---------------------------------------------------------------- queue

/// Which queue discipline a direction uses, with its parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum QueueSpec {
    /// Droptail FIFO, `limit` packets.
    Pfifo { limit: usize },
    /// Droptail FIFO, `limit_bytes` bytes.
    Bfifo { limit_bytes: u64 },
    /// Drop-head FIFO, `limit` packets.
    Drophead { limit: usize },
    Codel { params: CodelParams, limit: usize },
    FqCodel { params: FqCodelParams },
    Pie { params: PieParams },
}

impl Default for QueueSpec {
    fn default() -> Self {
        QueueSpec::Pfifo { limit: 1000 }
    }
}

const QUEUE_HELP: &str = "fifo[:PACKETS], bfifo:BYTES, drophead:PACKETS, codel[:target=5ms,interval=100ms,limit=1000,ecn|noecn], fq_codel[:target=5ms,interval=100ms,quantum=1514,flows=1024,limit=10240,ecn|noecn], pie[:target=15ms,tupdate=15ms,alpha=0.125,beta=1.25,burst=150ms,limit=1000,ecn|noecn,derandomize|noderandomize]";

fn parse_count(key: &str, v: &str) -> Result<usize, ParseError> {
    match v.trim().parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => err(format!("{key} must be a positive whole number, got \"{v}\"")),
    }
}

impl std::str::FromStr for QueueSpec {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<QueueSpec, ParseError> {
        let s = s.trim();
        let (name, rest) = match s.split_once(':') {
            Some((n, r)) => (n.trim().to_ascii_lowercase(), r.trim()),
            None => (s.to_ascii_lowercase(), ""),
        };
        // key=value list (or a bare number for the limit)
        let mut kv: Vec<(String, String)> = vec![];
        if !rest.is_empty() {
            for part in rest.split(',') {
                let part = part.trim();
                if part.is_empty() {
                    continue;
                }
                match part.split_once('=') {
                    Some((k, v)) => kv.push((k.trim().to_ascii_lowercase(), v.trim().to_string())),
                    None if part.chars().next().is_some_and(|c| c.is_ascii_digit()) => {
                        kv.push(("limit".into(), part.to_string()))
                    }
                    None => kv.push((part.to_ascii_lowercase(), String::new())),
                }
            }
        }
        let unknown = |k: &str| ParseError(format!("unknown parameter \"{k}\" for queue {name} (queues: {QUEUE_HELP})"));
        let flag = |k: &str, v: &str| -> Result<bool, ParseError> {
            match (k, v) {
                (_, "") => Ok(!k.starts_with("no")),
                (_, "on" | "true" | "1" | "yes") => Ok(true),
                (_, "off" | "false" | "0" | "no") => Ok(false),
                _ => err(format!("{k} takes on/off, got \"{v}\"")),
            }
        };
        match name.as_str() {
            "fifo" | "pfifo" | "drophead" | "pfifo_head_drop" => {
                let mut limit = 1000;
                for (k, v) in &kv {
                    match k.as_str() {
                        "limit" => limit = parse_count("limit", v)?,
                        _ => return Err(unknown(k)),
                    }
                }
                if name.starts_with("drop") || name == "pfifo_head_drop" {
                    Ok(QueueSpec::Drophead { limit })
                } else {
                    Ok(QueueSpec::Pfifo { limit })
                }
            }
            "bfifo" => {
                let mut limit = None;
                for (k, v) in &kv {
                    match k.as_str() {
                        "limit" => limit = Some(parse_bytes(v)?),
                        _ => return Err(unknown(k)),
                    }
                }
                match limit {
                    Some(l) if l > 0 => Ok(QueueSpec::Bfifo { limit_bytes: l }),
                    _ => err("bfifo needs a byte limit, e.g. bfifo:150000 or bfifo:150kb"),
                }
            }
            "codel" => {
                let mut p = CodelParams { ecn: true, ..Default::default() };
                let mut limit = 1000;
                for (k, v) in &kv {
                    match k.as_str() {
                        "target" => p.target_ns = parse_duration_ns(v)?,
                        "interval" => p.interval_ns = parse_duration_ns(v)?,
                        "limit" => limit = parse_count("limit", v)?,
                        "ecn" | "noecn" => p.ecn = flag(k, v)?,
                        _ => return Err(unknown(k)),
                    }
                }
                check_codel(&p)?;
                Ok(QueueSpec::Codel { params: p, limit })
            }
            "fq_codel" | "fq-codel" | "fqcodel" => {
                let mut p = FqCodelParams::default();
                for (k, v) in &kv {
                    match k.as_str() {
                        "target" => p.codel.target_ns = parse_duration_ns(v)?,
                        "interval" => p.codel.interval_ns = parse_duration_ns(v)?,
                        "limit" => p.limit = parse_count("limit", v)?,
                        "flows" => p.flows = parse_count("flows", v)?,
                        "quantum" => p.quantum = parse_count("quantum", v)? as u32,
                        "ecn" | "noecn" => p.codel.ecn = flag(k, v)?,
                        _ => return Err(unknown(k)),
                    }
                }
                check_codel(&p.codel)?;
                if p.flows > 65536 {
                    return err("fq_codel flows must be at most 65536");
                }
                Ok(QueueSpec::FqCodel { params: p })
            }
            "pie" => {
                let mut p = PieParams::default();
                for (k, v) in &kv {
                    let num = |v: &str| -> Result<f64, ParseError> {
                        v.parse::<f64>().ok().filter(|x| x.is_finite() && *x >= 0.0).ok_or_else(|| ParseError(format!("{k} must be a non-negative number, got \"{v}\"")))
                    };
                    match k.as_str() {
                        "target" => p.target_ns = parse_duration_ns(v)?,
                        "tupdate" => p.tupdate_ns = parse_duration_ns(v)?,
                        "alpha" => p.alpha = num(v)?,
                        "beta" => p.beta = num(v)?,
                        "burst" | "max_burst" => p.max_burst_ns = parse_duration_ns(v)?,
                        "limit" => p.limit = parse_count("limit", v)?,
                        "ecn" | "noecn" => p.ecn = flag(k, v)?,
                        "derandomize" | "noderandomize" => p.derandomize = flag(k, v)?,
                        _ => return Err(unknown(k)),
                    }
                }
                if p.target_ns == 0 || p.tupdate_ns == 0 {
                    return err("pie target and tupdate must be > 0");
                }
                Ok(QueueSpec::Pie { params: p })
            }
            "" => err(format!("empty queue spec (queues: {QUEUE_HELP})")),
            other => err(format!("unknown queue \"{other}\" (queues: {QUEUE_HELP})")),
        }
    }
}

fn check_codel(p: &CodelParams) -> Result<(), ParseError> {
    if p.target_ns == 0 || p.interval_ns == 0 {
        return err("codel target and interval must be > 0");
    }
    if p.target_ns >= p.interval_ns {
        return err("codel target must be smaller than interval");
    }
    Ok(())
}

impl fmt::Display for QueueSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ecn = |e: bool| if e { "ecn" } else { "noecn" };
        match self {
            QueueSpec::Pfifo { limit } => write!(f, "fifo:{limit}"),
            QueueSpec::Bfifo { limit_bytes } => write!(f, "bfifo:{limit_bytes}"),
            QueueSpec::Drophead { limit } => write!(f, "drophead:{limit}"),
            QueueSpec::Codel { params, limit } => write!(
                f,
                "codel:target={},interval={},limit={limit},{}",
                fmt_ns(params.target_ns),
                fmt_ns(params.interval_ns),
                ecn(params.ecn)
            ),
            QueueSpec::FqCodel { params } => write!(
                f,
                "fq_codel:target={},interval={},quantum={},flows={},limit={},{}",
                fmt_ns(params.codel.target_ns),
                fmt_ns(params.codel.interval_ns),
                params.quantum,
                params.flows,
                params.limit,
                ecn(params.codel.ecn)
            ),
            QueueSpec::Pie { params } => write!(
                f,
                "pie:target={},tupdate={},alpha={},beta={},burst={},limit={},{}{}",
                fmt_ns(params.target_ns),
                fmt_ns(params.tupdate_ns),
                params.alpha,
                params.beta,
                fmt_ns(params.max_burst_ns),
                params.limit,
                ecn(params.ecn),
                if params.derandomize { "" } else { ",noderandomize" }
            ),
        }
    }
}

impl QueueSpec {
    /// Kind name as reported in queue series ("pfifo", "bfifo", "drophead", "codel", "fq_codel", "pie").
    pub fn kind(&self) -> &'static str {
        match self {
            QueueSpec::Pfifo { .. } => "pfifo",
            QueueSpec::Bfifo { .. } => "bfifo",
            QueueSpec::Drophead { .. } => "drophead",
            QueueSpec::Codel { .. } => "codel",
            QueueSpec::FqCodel { .. } => "fq_codel",
            QueueSpec::Pie { .. } => "pie",
        }
    }

    /// Packet limit, when the discipline has one (for the analytic queue delay).
    pub fn limit_packets(&self) -> Option<usize> {
        match self {
            QueueSpec::Pfifo { limit } | QueueSpec::Drophead { limit } | QueueSpec::Codel { limit, .. } => Some(*limit),
            QueueSpec::Bfifo { .. } => None,
            QueueSpec::FqCodel { params } => Some(params.limit),
            QueueSpec::Pie { params } => Some(params.limit),
        }
    }

    /// Build the discipline. `seed` perturbs FQ hashing and PIE's random drops.
    pub fn build(&self, seed: u64) -> Box<dyn Qdisc> {
        match self {
            QueueSpec::Pfifo { limit } => Box::new(Fifo::new(*limit)),
            QueueSpec::Bfifo { limit_bytes } => Box::new(Fifo::bytes(*limit_bytes)),
            QueueSpec::Drophead { limit } => Box::new(Fifo::drophead(*limit)),
            QueueSpec::Codel { params, limit } => Box::new(Codel::new(params.clone(), *limit)),
            QueueSpec::FqCodel { params } => {
                let mut p = params.clone();
                if p.seed == 0 {
                    p.seed = seed;
                }
                Box::new(FqCodel::new(p))
            }
            QueueSpec::Pie { params } => {
                let mut p = params.clone();
                p.seed ^= seed;
                Box::new(Pie::new(p))
            }
        }
    }
}

// ---------------------------------------------------------------- rate

/// How fast the link serializes packets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RateSpec {
    /// No serialization delay (packets leave the queue as they arrive).
    #[default]
    Unlimited,
    /// Fixed rate in bits per second (on-wire bits: packet + per-packet overhead).
    Fixed { bps: u64 },
    /// Mahimahi trace: one delivery opportunity of `opportunity_bytes` per line
    /// (millisecond timestamps), looped. `path` is kept for the record; the
    /// opportunities themselves are in `opportunities_ms`.
    Trace { path: PathBuf, opportunities_ms: Vec<u64>, opportunity_bytes: u32 },
}

impl RateSpec {
    /// Load a mahimahi trace file.
    pub fn trace(path: &Path) -> Result<RateSpec, ParseError> {
        let text = std::fs::read_to_string(path).map_err(|e| ParseError(format!("cannot read trace {}: {e}", path.display())))?;
        let opps = parse_trace(&text).map_err(|e| ParseError(format!("{}: {}", path.display(), e.0)))?;
        Ok(RateSpec::Trace { path: path.to_path_buf(), opportunities_ms: opps, opportunity_bytes: 1500 })
    }

    /// Mean rate in bits/s (a trace's average over its period), None when unlimited.
    pub fn mean_bps(&self) -> Option<f64> {
        match self {
            RateSpec::Unlimited => None,
            RateSpec::Fixed { bps } => Some(*bps as f64),
            RateSpec::Trace { opportunities_ms, opportunity_bytes, .. } => {
                let period = *opportunities_ms.last()? as f64 / 1000.0;
                Some(opportunities_ms.len() as f64 * *opportunity_bytes as f64 * 8.0 / period)
            }
        }
    }

    pub fn describe(&self) -> String {
        match self {
            RateSpec::Unlimited => "unlimited".into(),
            RateSpec::Fixed { bps } => fmt_rate(*bps),
            RateSpec::Trace { path, opportunities_ms, .. } => format!(
                "trace {} ({} opportunities over {} ms, mean {})",
                path.display(),
                opportunities_ms.len(),
                opportunities_ms.last().copied().unwrap_or(0),
                fmt_rate(self.mean_bps().unwrap_or(0.0) as u64)
            ),
        }
    }
}

/// Parse mahimahi trace text: one non-negative integer (ms) per line,
/// non-decreasing, last one > 0. Blank lines and `#` comments are ignored.
pub fn parse_trace(text: &str) -> Result<Vec<u64>, ParseError> {
    let mut v = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let l = line.split('#').next().unwrap_or("").trim();
        if l.is_empty() {
            continue;
        }
        let t: u64 = l.parse().map_err(|_| ParseError(format!("line {}: \"{l}\" is not a whole number of milliseconds", i + 1)))?;
        if let Some(&last) = v.last() {
            if t < last {
                return err(format!("line {}: timestamps must not decrease ({t} after {last})", i + 1));
            }
        }
        v.push(t);
    }
    match v.last() {
        None => err("trace is empty"),
        Some(0) => err("trace's last timestamp must be > 0 (it is the period the trace repeats with)"),
        _ => Ok(v),
    }
}

// ---------------------------------------------------------------- loss, jitter

/// Random loss, applied to packets as they leave the bottleneck ("lost on the wire").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LossSpec {
    #[default]
    None,
    /// Independent loss with probability `p`.
    Bernoulli { p: f64 },
    /// Gilbert-Elliott: Good->Bad with probability `p`, Bad->Good with `r`
    /// (per packet); loss probability `loss_good` in Good, `loss_bad` in Bad.
    GilbertElliott { p: f64, r: f64, loss_good: f64, loss_bad: f64 },
}

impl std::str::FromStr for LossSpec {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<LossSpec, ParseError> {
        let t = s.trim();
        let lower = t.to_ascii_lowercase();
        if let Some(rest) = lower.strip_prefix("ge:").or_else(|| lower.strip_prefix("gilbert:")).or_else(|| lower.strip_prefix("gemodel:")) {
            let (mut p, mut r, mut good, mut bad) = (None, None, 0.0, 1.0);
            for part in rest.split(',').map(str::trim).filter(|x| !x.is_empty()) {
                let (k, v) = part.split_once('=').ok_or_else(|| ParseError(format!("Gilbert-Elliott parameter \"{part}\" needs key=value (p, r, good, bad)")))?;
                let v = parse_probability(v)?;
                match k.trim() {
                    "p" => p = Some(v),
                    "r" => r = Some(v),
                    "good" | "loss_good" | "k" => good = v,
                    "bad" | "loss_bad" | "h" => bad = v,
                    other => return err(format!("unknown Gilbert-Elliott parameter \"{other}\" (p, r, good, bad)")),
                }
            }
            let p = p.ok_or_else(|| ParseError("Gilbert-Elliott loss needs p= (Good->Bad probability)".into()))?;
            let r = r.ok_or_else(|| ParseError("Gilbert-Elliott loss needs r= (Bad->Good probability)".into()))?;
            if r == 0.0 && p > 0.0 {
                return err("Gilbert-Elliott r must be > 0 (otherwise the link never leaves the Bad state)");
            }
            return Ok(LossSpec::GilbertElliott { p, r, loss_good: good, loss_bad: bad });
        }
        let v = lower.strip_prefix("bernoulli:").unwrap_or(&lower);
        let p = parse_probability(v).map_err(|e| ParseError(format!("{} (or ge:p=1%,r=25%,good=0%,bad=100%)", e.0)))?;
        Ok(if p == 0.0 { LossSpec::None } else { LossSpec::Bernoulli { p } })
    }
}

impl LossSpec {
    /// Long-run loss rate.
    pub fn mean_loss(&self) -> f64 {
        match self {
            LossSpec::None => 0.0,
            LossSpec::Bernoulli { p } => *p,
            LossSpec::GilbertElliott { p, r, loss_good, loss_bad } => {
                if p + r == 0.0 {
                    *loss_good
                } else {
                    let pi_bad = p / (p + r);
                    (1.0 - pi_bad) * loss_good + pi_bad * loss_bad
                }
            }
        }
    }
    pub fn describe(&self) -> String {
        match self {
            LossSpec::None => "none".into(),
            LossSpec::Bernoulli { p } => fmt_pct(*p),
            LossSpec::GilbertElliott { p, r, loss_good, loss_bad } => format!(
                "ge:p={},r={},good={},bad={}",
                fmt_pct(*p),
                fmt_pct(*r),
                fmt_pct(*loss_good),
                fmt_pct(*loss_bad)
            ),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum JitterDist {
    /// Uniform in [-amount, +amount] (netem's default).
    #[default]
    Uniform,
    /// Normal with standard deviation `amount`.
    Normal,
}

/// Per-packet delay variation added to the propagation delay (the total never goes below 0).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JitterSpec {
    pub amount_ns: u64,
    pub dist: JitterDist,
    /// Release each packet at its own time even if that overtakes earlier
    /// packets; false keeps packet order (a packet never leaves before its predecessor).
    pub reorder: bool,
}

impl JitterSpec {
    /// Parse `5ms`, `uniform:5ms` or `normal:5ms`.
    pub fn parse(s: &str, reorder: bool) -> Result<JitterSpec, ParseError> {
        let t = s.trim().to_ascii_lowercase();
        let (dist, amount) = if let Some(a) = t.strip_prefix("normal:") {
            (JitterDist::Normal, a)
        } else if let Some(a) = t.strip_prefix("uniform:") {
            (JitterDist::Uniform, a)
        } else {
            (JitterDist::Uniform, t.as_str())
        };
        Ok(JitterSpec { amount_ns: parse_duration_ns(amount)?, dist, reorder })
    }
}

// ---------------------------------------------------------------- config

/// One direction of the emulated link.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct DirectionConfig {
    pub rate: RateSpec,
    /// One-way propagation delay, ns.
    pub delay_ns: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter: Option<JitterSpec>,
    #[serde(default)]
    pub loss: LossSpec,
    pub queue: QueueSpec,
    /// Bytes added to every packet's size when computing its time on the wire
    /// (e.g. 14 for an Ethernet header as htb/tbf count it on a veth, 38 more
    /// for preamble, FCS and inter-frame gap). Default 0: the rate applies to IP packets.
    #[serde(default)]
    pub overhead_bytes: u32,
}

impl DirectionConfig {
    pub fn describe(&self) -> String {
        let mut s = format!("rate {}, delay {}", self.rate.describe(), fmt_ns(self.delay_ns));
        if let Some(j) = &self.jitter {
            s += &format!(
                ", jitter {}{} ({})",
                if j.dist == JitterDist::Normal { "normal:" } else { "+/-" },
                fmt_ns(j.amount_ns),
                if j.reorder { "reordering" } else { "order kept" }
            );
        }
        if self.loss != LossSpec::None {
            s += &format!(", loss {}", self.loss.describe());
        }
        s += &format!(", queue {}", self.queue);
        if self.overhead_bytes > 0 {
            s += &format!(", overhead {} B/packet", self.overhead_bytes);
        }
        s
    }

    /// True when the direction neither shapes nor loses nor jitters packets
    /// (only a fixed delay, or nothing): such a direction can pass
    /// segmentation-offloaded (GSO) packets through whole.
    pub fn is_unshaped(&self) -> bool {
        self.rate == RateSpec::Unlimited && self.loss == LossSpec::None && self.jitter.as_ref().is_none_or(|j| j.amount_ns == 0)
    }

    /// Analytic maximum queueing delay: limit x packet size x 8 / rate, ms
    /// (for byte limits: bytes x 8 / rate). None without a fixed rate.
    pub fn analytic_queue_delay_ms(&self, packet_bytes: u32) -> Option<f64> {
        let bps = self.rate.mean_bps()?;
        let bytes = match &self.queue {
            QueueSpec::Bfifo { limit_bytes } => *limit_bytes as f64,
            q => q.limit_packets()? as f64 * (packet_bytes + self.overhead_bytes) as f64,
        };
        Some(bytes * 8.0 / bps * 1000.0)
    }
}

/// How the data path waits for a packet's release time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimerMode {
    /// Sleep (poll with a timeout, 1 ns timer slack) until `spin_ns` before the
    /// deadline, then spin (at most half of the time of any 10 ms window).
    SleepSpin,
    /// Sleep until the deadline (no spinning; least CPU, largest error).
    Sleep,
    /// Spin continuously (one busy core per direction; never with real-time priority).
    Spin,
}

impl std::str::FromStr for TimerMode {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<TimerMode, ParseError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "sleep-spin" | "sleep_spin" | "hybrid" => Ok(TimerMode::SleepSpin),
            "sleep" => Ok(TimerMode::Sleep),
            "spin" => Ok(TimerMode::Spin),
            o => err(format!("unknown timer mode \"{o}\" (sleep-spin, sleep, spin)")),
        }
    }
}

/// The whole emulator: two independent directions plus run-time knobs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmulatorConfig {
    /// Client -> server.
    pub up: DirectionConfig,
    /// Server -> client.
    pub down: DirectionConfig,
    /// Seed for loss, jitter, PIE and FQ hashing; None = random per run (recorded in the stats).
    #[serde(default)]
    pub seed: Option<u64>,
    /// Queue time-series sampling interval, ns (default 100 ms).
    #[serde(default = "default_sample")]
    pub sample_interval_ns: u64,
    #[serde(default = "default_timer")]
    pub timer: TimerMode,
    /// Spin window before a deadline for `sleep_spin`, ns (default 30 us).
    #[serde(default = "default_spin")]
    pub spin_ns: u64,
    /// Max packets read from a TUN device per wake-up (default 64).
    #[serde(default = "default_batch")]
    pub batch: usize,
    /// SCHED_FIFO priority of the direction threads (1-99; 0 = normal scheduling).
    /// Real-time priority lets a sleeping thread run at once when its timer
    /// fires, even on a busy machine.
    #[serde(default = "default_rt")]
    pub rt_priority: u32,
    /// Let unshaped directions (no rate, loss or jitter) accept segmentation
    /// offloads, so that 64 KB GSO packets cross the emulator in one piece
    /// (default true). Shaped directions always see MTU-sized packets.
    #[serde(default = "default_true")]
    pub offload: bool,
}

fn default_true() -> bool {
    true
}

fn default_rt() -> u32 {
    10
}

fn default_sample() -> u64 {
    100_000_000
}
fn default_timer() -> TimerMode {
    TimerMode::SleepSpin
}
fn default_spin() -> u64 {
    30_000
}
fn default_batch() -> usize {
    64
}

impl Default for EmulatorConfig {
    fn default() -> Self {
        EmulatorConfig {
            up: DirectionConfig::default(),
            down: DirectionConfig::default(),
            seed: None,
            sample_interval_ns: default_sample(),
            timer: default_timer(),
            spin_ns: default_spin(),
            batch: default_batch(),
            rt_priority: default_rt(),
            offload: true,
        }
    }
}

impl EmulatorConfig {
    /// Check the configuration for values the data path cannot honour.
    pub fn validate(&self) -> Result<(), ParseError> {
        for (name, d) in [("up", &self.up), ("down", &self.down)] {
            if let RateSpec::Trace { opportunities_ms, opportunity_bytes, .. } = &d.rate {
                if opportunities_ms.is_empty() || *opportunities_ms.last().unwrap() == 0 {
                    return err(format!("{name}: trace needs at least one line and a last timestamp > 0"));
                }
                if *opportunity_bytes == 0 {
                    return err(format!("{name}: trace opportunity size must be > 0"));
                }
            }
            if let RateSpec::Fixed { bps: 0 } = d.rate {
                return err(format!("{name}: rate must be > 0"));
            }
            if d.delay_ns > 60_000_000_000 {
                return err(format!("{name}: delay over 60 s is not supported"));
            }
        }
        if self.sample_interval_ns < 1_000_000 {
            return err("sample interval must be at least 1 ms");
        }
        if self.rt_priority > 99 {
            return err("real-time priority must be 0 (off) or 1-99");
        }
        if self.batch == 0 {
            return err("batch must be at least 1");
        }
        Ok(())
    }

    pub fn describe(&self) -> String {
        format!("up: {}; down: {}", self.up.describe(), self.down.describe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration_ns("20ms").unwrap(), 20_000_000);
        assert_eq!(parse_duration_ns("1.5s").unwrap(), 1_500_000_000);
        assert_eq!(parse_duration_ns("500us").unwrap(), 500_000);
        assert_eq!(parse_duration_ns("0").unwrap(), 0);
        assert!(parse_duration_ns("20").unwrap_err().0.contains("needs a unit"));
        assert!(parse_duration_ns("20 parsecs").is_err());
        assert!(parse_duration_ns("-5ms").is_err());
    }

    #[test]
    fn rates() {
        assert_eq!(parse_rate_bps("10mbit").unwrap(), 10_000_000);
        assert_eq!(parse_rate_bps("10Mbit/s").unwrap(), 10_000_000);
        assert_eq!(parse_rate_bps("1.5gbit").unwrap(), 1_500_000_000);
        assert_eq!(parse_rate_bps("500kbit").unwrap(), 500_000);
        assert_eq!(parse_rate_bps("2g").unwrap(), 2_000_000_000);
        assert_eq!(parse_rate_bps("64000").unwrap(), 64_000);
        assert!(parse_rate_bps("10mbps").unwrap_err().0.contains("bytes per second"));
        assert!(parse_rate_bps("fast").is_err());
        assert!(parse_rate_bps("0mbit").is_err());
        assert_eq!(fmt_rate(10_000_000), "10mbit");
        assert_eq!(fmt_rate(1_500_000), "1500kbit");
    }

    #[test]
    fn probabilities_and_loss() {
        assert_eq!(parse_probability("1%").unwrap(), 0.01);
        assert_eq!(parse_probability("0.25").unwrap(), 0.25);
        assert!(parse_probability("150%").is_err());
        assert_eq!("1%".parse::<LossSpec>().unwrap(), LossSpec::Bernoulli { p: 0.01 });
        assert_eq!("0%".parse::<LossSpec>().unwrap(), LossSpec::None);
        let ge: LossSpec = "ge:p=1%,r=25%".parse().unwrap();
        assert_eq!(ge, LossSpec::GilbertElliott { p: 0.01, r: 0.25, loss_good: 0.0, loss_bad: 1.0 });
        assert!((ge.mean_loss() - 0.01 / 0.26).abs() < 1e-12);
        assert!("ge:p=1%".parse::<LossSpec>().unwrap_err().0.contains("r="));
        assert!("lots".parse::<LossSpec>().is_err());
    }

    #[test]
    fn queue_specs_round_trip() {
        for (s, want) in [
            ("fifo:1000", QueueSpec::Pfifo { limit: 1000 }),
            ("fifo", QueueSpec::Pfifo { limit: 1000 }),
            ("pfifo:limit=10", QueueSpec::Pfifo { limit: 10 }),
            ("bfifo:150kb", QueueSpec::Bfifo { limit_bytes: 153_600 }),
            ("drophead:50", QueueSpec::Drophead { limit: 50 }),
        ] {
            let q: QueueSpec = s.parse().unwrap();
            assert_eq!(q, want, "{s}");
            assert_eq!(q.to_string().parse::<QueueSpec>().unwrap(), q);
        }
        let c: QueueSpec = "codel:target=10ms,interval=200ms,noecn".parse().unwrap();
        match &c {
            QueueSpec::Codel { params, limit } => {
                assert_eq!(params.target_ns, 10_000_000);
                assert_eq!(params.interval_ns, 200_000_000);
                assert!(!params.ecn);
                assert_eq!(*limit, 1000);
            }
            _ => panic!(),
        }
        assert_eq!(c.to_string().parse::<QueueSpec>().unwrap(), c);
        let f: QueueSpec = "fq_codel".parse().unwrap();
        assert_eq!(f, QueueSpec::FqCodel { params: FqCodelParams::default() });
        assert_eq!(f.to_string().parse::<QueueSpec>().unwrap(), f);
        let p: QueueSpec = "pie:target=20ms,ecn=off,burst=100ms".parse().unwrap();
        assert_eq!(p.to_string().parse::<QueueSpec>().unwrap(), p);
        assert!("sfq".parse::<QueueSpec>().unwrap_err().0.contains("unknown queue"));
        assert!("codel:foo=1".parse::<QueueSpec>().unwrap_err().0.contains("unknown parameter"));
        assert!("fifo:0".parse::<QueueSpec>().is_err());
        assert!("bfifo".parse::<QueueSpec>().unwrap_err().0.contains("byte limit"));
        assert!("codel:target=200ms".parse::<QueueSpec>().is_err());
        // serde round trip
        let j = serde_json::to_string(&p).unwrap();
        assert_eq!(serde_json::from_str::<QueueSpec>(&j).unwrap(), p);
    }

    #[test]
    fn traces() {
        assert_eq!(parse_trace("1\n1\n2\n# c\n\n5\n").unwrap(), vec![1, 1, 2, 5]);
        assert!(parse_trace("").is_err());
        assert!(parse_trace("0\n0\n").is_err());
        assert!(parse_trace("3\n2\n").unwrap_err().0.contains("line 2"));
        assert!(parse_trace("1\nx\n").is_err());
        let r = RateSpec::Trace { path: "t".into(), opportunities_ms: (1..=10).collect(), opportunity_bytes: 1500 };
        // 10 opportunities of 1500 B per 10 ms = 12 Mbit/s
        assert!((r.mean_bps().unwrap() - 12e6).abs() < 1.0);
    }

    #[test]
    fn shipped_example_traces() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("traces");
        let mean = |f: &str| RateSpec::trace(&dir.join(f)).unwrap().mean_bps().unwrap();
        assert!((mean("constant-12mbit.trace") - 12e6).abs() < 1.0);
        let down = mean("cellular-down.trace");
        let up = mean("cellular-up.trace");
        assert!((down - 13.84e6).abs() < 0.05e6, "{down}");
        assert!((up - 3.76e6).abs() < 0.05e6, "{up}");
    }

    #[test]
    fn analytic_delay_and_json() {
        let d = DirectionConfig { rate: RateSpec::Fixed { bps: 10_000_000 }, queue: QueueSpec::Pfifo { limit: 1000 }, ..Default::default() };
        assert!((d.analytic_queue_delay_ms(1500).unwrap() - 1200.0).abs() < 1e-9);
        let cfg = EmulatorConfig { up: d.clone(), down: d, ..Default::default() };
        cfg.validate().unwrap();
        let j = serde_json::to_string(&cfg).unwrap();
        assert_eq!(serde_json::from_str::<EmulatorConfig>(&j).unwrap(), cfg);
        assert!(cfg.describe().contains("rate 10mbit, delay 0, queue fifo:1000"));
        let j = JitterSpec::parse("normal:5ms", true).unwrap();
        assert_eq!(j.dist, JitterDist::Normal);
        assert_eq!(j.amount_ns, 5_000_000);
    }
}
