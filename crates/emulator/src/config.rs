//! Emulator configuration: what each direction of the link does. Rates,
//! queues and traces are the shared model's ([`bloatlab_model`]); loss and
//! jitter are the emulator's own. Everything is serde so the lab can store it
//! in the result's `lab.config` and hand it to the emulator process as JSON.

use bloatlab_model::units::{fmt_duration_ns, parse_duration_ns_unit_required, parse_probability};
pub use bloatlab_model::{QueueSpec, RateSpec};
use serde::{Deserialize, Serialize};

fn fmt_ns(ns: u64) -> String {
    if ns == 0 {
        "0".into()
    } else {
        fmt_duration_ns(ns)
    }
}

fn fmt_pct(p: f64) -> String {
    format!("{}%", (p * 100.0 * 1e6).round() / 1e6)
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
    type Err = String;
    fn from_str(s: &str) -> Result<LossSpec, String> {
        let t = s.trim();
        let lower = t.to_ascii_lowercase();
        if let Some(rest) = lower.strip_prefix("ge:").or_else(|| lower.strip_prefix("gilbert:")).or_else(|| lower.strip_prefix("gemodel:")) {
            let (mut p, mut r, mut good, mut bad) = (None, None, 0.0, 1.0);
            for part in rest.split(',').map(str::trim).filter(|x| !x.is_empty()) {
                let (k, v) = part.split_once('=').ok_or_else(|| format!("Gilbert-Elliott parameter \"{part}\" needs key=value (p, r, good, bad)"))?;
                let v = parse_probability(v)?;
                match k.trim() {
                    "p" => p = Some(v),
                    "r" => r = Some(v),
                    "good" | "loss_good" | "k" => good = v,
                    "bad" | "loss_bad" | "h" => bad = v,
                    other => return Err(format!("unknown Gilbert-Elliott parameter \"{other}\" (p, r, good, bad)")),
                }
            }
            let p = p.ok_or_else(|| "Gilbert-Elliott loss needs p= (Good->Bad probability)".to_string())?;
            let r = r.ok_or_else(|| "Gilbert-Elliott loss needs r= (Bad->Good probability)".to_string())?;
            if r == 0.0 && p > 0.0 {
                return Err("Gilbert-Elliott r must be > 0 (otherwise the link never leaves the Bad state)".into());
            }
            return Ok(LossSpec::GilbertElliott { p, r, loss_good: good, loss_bad: bad });
        }
        let v = lower.strip_prefix("bernoulli:").unwrap_or(&lower);
        let p = parse_probability(v).map_err(|e| format!("{e} (or ge:p=1%,r=25%,good=0%,bad=100%)"))?;
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
    pub fn parse(s: &str, reorder: bool) -> Result<JitterSpec, String> {
        let t = s.trim().to_ascii_lowercase();
        let (dist, amount) = if let Some(a) = t.strip_prefix("normal:") {
            (JitterDist::Normal, a)
        } else if let Some(a) = t.strip_prefix("uniform:") {
            (JitterDist::Uniform, a)
        } else {
            (JitterDist::Uniform, t.as_str())
        };
        Ok(JitterSpec { amount_ns: parse_duration_ns_unit_required(amount)?, dist, reorder })
    }
}

// ---------------------------------------------------------------- config

/// One direction of the emulated link.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

impl Default for DirectionConfig {
    /// Unlimited, no delay, a 1000-packet FIFO.
    fn default() -> Self {
        DirectionConfig {
            rate: RateSpec::Unlimited,
            delay_ns: 0,
            jitter: None,
            loss: LossSpec::None,
            queue: QueueSpec::Fifo { packets: 1000 },
            overhead_bytes: 0,
        }
    }
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
    type Err = String;
    fn from_str(s: &str) -> Result<TimerMode, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "sleep-spin" | "sleep_spin" | "hybrid" => Ok(TimerMode::SleepSpin),
            "sleep" => Ok(TimerMode::Sleep),
            "spin" => Ok(TimerMode::Spin),
            o => Err(format!("unknown timer mode \"{o}\" (sleep-spin, sleep, spin)")),
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
    pub fn validate(&self) -> Result<(), String> {
        for (name, d) in [("up", &self.up), ("down", &self.down)] {
            if let QueueSpec::Kernel { qdisc, .. } = &d.queue {
                return Err(format!("{name}: `{qdisc}` is a kernel qdisc; the emulator offers fifo:N, bfifo:BYTES, drophead:N, codel, fq_codel, pie"));
            }
            if let RateSpec::Trace { opportunities_ms, opportunity_bytes, .. } = &d.rate {
                if opportunities_ms.is_empty() || *opportunities_ms.last().unwrap() == 0 {
                    return Err(format!("{name}: trace needs at least one line and a last timestamp > 0"));
                }
                if *opportunity_bytes == 0 {
                    return Err(format!("{name}: trace opportunity size must be > 0"));
                }
            }
            if let RateSpec::Fixed { bps: 0 } = d.rate {
                return Err(format!("{name}: rate must be > 0"));
            }
            if d.delay_ns > 60_000_000_000 {
                return Err(format!("{name}: delay over 60 s is not supported"));
            }
        }
        if self.sample_interval_ns < 1_000_000 {
            return Err("sample interval must be at least 1 ms".into());
        }
        if self.rt_priority > 99 {
            return Err("real-time priority must be 0 (off) or 1-99".into());
        }
        if self.batch == 0 {
            return Err("batch must be at least 1".into());
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
    fn loss_specs() {
        assert_eq!("1%".parse::<LossSpec>().unwrap(), LossSpec::Bernoulli { p: 0.01 });
        assert_eq!("0%".parse::<LossSpec>().unwrap(), LossSpec::None);
        let ge: LossSpec = "ge:p=1%,r=25%".parse().unwrap();
        assert_eq!(ge, LossSpec::GilbertElliott { p: 0.01, r: 0.25, loss_good: 0.0, loss_bad: 1.0 });
        assert!((ge.mean_loss() - 0.01 / 0.26).abs() < 1e-12);
        assert!("ge:p=1%".parse::<LossSpec>().unwrap_err().contains("r="));
        assert!("lots".parse::<LossSpec>().is_err());
    }

    #[test]
    fn shipped_example_traces() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("traces");
        let mean = |f: &str| RateSpec::trace(&dir.join(f)).unwrap().mean_bps().unwrap();
        assert!((mean("constant-12mbit.trace") - 12e6).abs() < 1.0);
        let down = mean("cellular-down.trace");
        let up = mean("cellular-up.trace");
        assert!((down - 13.84e6).abs() < 0.05e6, "{down}");
        assert!((up - 3.76e6).abs() < 0.05e6, "{up}");
    }

    #[test]
    fn config_json_and_description() {
        let d = DirectionConfig { rate: RateSpec::Fixed { bps: 10_000_000 }, queue: QueueSpec::Fifo { packets: 1000 }, ..Default::default() };
        let cfg = EmulatorConfig { up: d.clone(), down: d, ..Default::default() };
        cfg.validate().unwrap();
        let j = serde_json::to_string(&cfg).unwrap();
        assert_eq!(serde_json::from_str::<EmulatorConfig>(&j).unwrap(), cfg);
        assert!(cfg.describe().contains("rate 10mbit, delay 0, queue fifo:1000"), "{}", cfg.describe());
        let j = JitterSpec::parse("normal:5ms", true).unwrap();
        assert_eq!(j.dist, JitterDist::Normal);
        assert_eq!(j.amount_ns, 5_000_000);
        let bad = EmulatorConfig { up: DirectionConfig { queue: QueueSpec::kernel("cake").unwrap(), ..Default::default() }, ..Default::default() };
        assert!(bad.validate().unwrap_err().contains("kernel qdisc"));
    }
}
