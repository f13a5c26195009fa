//! Emulator configuration: what each direction of the link does. Rates,
//! queues, traces, loss and jitter are the shared model's
//! ([`bloatlab_model`]: the lab's options parse the same types). Everything is serde so the lab can store it
//! in the result's `lab.config` and hand it to the emulator process as JSON.

use bloatlab_model::units::fmt_duration_ns;
pub use bloatlab_model::link::{JitterDist, JitterSpec, LossSpec};
pub use bloatlab_model::{QueueSpec, RateSpec};
use serde::{Deserialize, Serialize};

fn fmt_ns(ns: u64) -> String {
    if ns == 0 {
        "0".into()
    } else {
        fmt_duration_ns(ns)
    }
}

// ---------------------------------------------------------------- loss, jitter

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
