//! Link rates: a fixed [`Rate`] (tc units, one range for every command), and
//! a direction's [`RateSpec`] (unlimited, fixed, or a mahimahi trace).
use crate::units;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::{Path, PathBuf};

/// Slowest and fastest link rates bloatlab shapes (a veth carries tens of Gbit/s).
pub const MIN_RATE_BPS: u64 = 1_000;
pub const MAX_RATE_BPS: u64 = 400_000_000_000;

/// A link rate in bits per second (decimal units, as tc's `kbit`/`mbit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Rate {
    pub bps: u64,
}

impl Rate {
    pub fn mbit(m: f64) -> Rate {
        Rate { bps: (m * 1e6).round() as u64 }
    }

    /// A shaper's burst at this rate (HTB's `burst`/`cburst`, TBF's
    /// `burst`), bytes: 1 ms of data, at least two full frames. Sized to
    /// the rate, never fixed: a fixed 5 KB burst was measured capping a
    /// gigabit shaper at 65-70% of its rate (its timer cannot refill a
    /// small bucket often enough); sqm-scripts sizes it the same way
    /// (`SHAPER_BURST_DUR_US`, 1 ms). The lab's bottleneck and `bloatlab
    /// tune`'s shaper both use it.
    pub fn shaper_burst_bytes(&self) -> u64 {
        (self.bps / 8 / 1000).max(2 * crate::FRAME_BYTES)
    }

    /// HTB's `quantum` at this rate, bytes: 100 ms of data, between one
    /// frame and 200 KB (HTB warns outside 1 frame .. 200000).
    pub fn htb_quantum_bytes(&self) -> u64 {
        (self.bps / 8 / 10).clamp(crate::FRAME_BYTES, 200_000)
    }

    /// Parse a rate (tc units, decimal bits per second; `bps`/`mb` refused as
    /// ambiguous), 1kbit ..= 400gbit.
    pub fn parse(s: &str) -> Result<Rate, String> {
        let bps = units::parse_rate_bps(s)?;
        if bps < MIN_RATE_BPS {
            return Err(format!("rate `{s}` is below 1kbit; {}", units::RATE_FORMS));
        }
        if bps > MAX_RATE_BPS {
            return Err(format!("rate `{s}` is above 400gbit, more than a veth can carry"));
        }
        Ok(Rate { bps })
    }

    /// [`Rate::parse`], or `Ok(None)` for "no limit" (`none`, `unlimited`, `off`).
    pub fn parse_limit(s: &str) -> Result<Option<Rate>, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "none" | "unlimited" | "off" => Ok(None),
            _ => Rate::parse(s).map(Some).map_err(|e| format!("{e}, or `none` for no rate limit")),
        }
    }

    /// The rate in tc syntax (`bit` units, exact).
    pub fn tc(&self) -> String {
        format!("{}bit", self.bps)
    }

    pub fn as_f64(&self) -> f64 {
        self.bps as f64
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&units::fmt_rate(self.bps))
    }
}

impl std::str::FromStr for Rate {
    type Err = String;
    fn from_str(s: &str) -> Result<Rate, String> {
        Rate::parse(s)
    }
}

/// How fast one direction of a link serializes packets.
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
    pub fn trace(path: &Path) -> Result<RateSpec, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read trace {}: {e}", path.display()))?;
        let opps = parse_trace(&text).map_err(|e| format!("{}: {e}", path.display()))?;
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
            RateSpec::Fixed { bps } => units::fmt_rate_tc(*bps),
            RateSpec::Trace { path, opportunities_ms, .. } => format!(
                "trace {} ({} opportunities over {} ms, mean {})",
                path.display(),
                opportunities_ms.len(),
                opportunities_ms.last().copied().unwrap_or(0),
                units::fmt_rate_tc(self.mean_bps().unwrap_or(0.0) as u64)
            ),
        }
    }
}

/// Parse mahimahi trace text: one non-negative integer (ms) per line,
/// non-decreasing, last one > 0. Blank lines and `#` comments are ignored.
pub fn parse_trace(text: &str) -> Result<Vec<u64>, String> {
    let mut v = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let l = line.split('#').next().unwrap_or("").trim();
        if l.is_empty() {
            continue;
        }
        let t: u64 = l.parse().map_err(|_| format!("line {}: \"{l}\" is not a whole number of milliseconds", i + 1))?;
        if let Some(&last) = v.last() {
            if t < last {
                return Err(format!("line {}: timestamps must not decrease ({t} after {last})", i + 1));
            }
        }
        v.push(t);
    }
    match v.last() {
        None => Err("trace is empty".into()),
        Some(0) => Err("trace's last timestamp must be > 0 (it is the period the trace repeats with)".into()),
        _ => Ok(v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shapers_burst_and_quantum_follow_its_rate() {
        // 1 ms of data: 125 KB at 1 Gbit/s, where a fixed 5 KB capped HTB at 65-70%
        assert_eq!(Rate::mbit(1000.0).shaper_burst_bytes(), 125_000);
        // at least two full frames on a slow line
        assert_eq!(Rate::mbit(5.0).shaper_burst_bytes(), 2 * crate::FRAME_BYTES);
        assert_eq!(Rate::mbit(5.0).htb_quantum_bytes(), 62_500);
        assert_eq!(Rate::mbit(1000.0).htb_quantum_bytes(), 200_000);
        assert_eq!(Rate { bps: 64_000 }.htb_quantum_bytes(), crate::FRAME_BYTES);
    }

    #[test]
    fn rates() {
        assert_eq!(Rate::parse("10mbit").unwrap().bps, 10_000_000);
        assert_eq!(Rate::parse("1.5Mbit").unwrap().bps, 1_500_000);
        assert_eq!(Rate::parse("100kbit").unwrap().bps, 100_000);
        assert_eq!(Rate::parse("1gbit").unwrap().bps, 1_000_000_000);
        assert_eq!(Rate::parse("10M").unwrap().bps, 10_000_000);
        assert_eq!(Rate::parse("500000").unwrap().bps, 500_000);
        assert_eq!(Rate::parse_limit("none").unwrap(), None);
        assert_eq!(Rate::parse_limit("10mbit").unwrap(), Some(Rate::mbit(10.0)));
        assert!(Rate::parse("10mbps").unwrap_err().contains("ambiguous"));
        assert!(Rate::parse_limit("fast").unwrap_err().contains("accepted forms"));
        assert!(Rate::parse("10furlong").unwrap_err().contains("unknown unit"));
        assert!(Rate::parse("0mbit").unwrap_err().contains("below 1kbit"));
        assert!(Rate::parse("999bit").is_err());
        assert!(Rate::parse("500gbit").unwrap_err().contains("400gbit"));
        assert_eq!(Rate { bps: 10_000_000 }.to_string(), "10mbit");
        assert_eq!(Rate { bps: 1_500_000 }.to_string(), "1.5mbit");
        assert_eq!(Rate { bps: 10_000_000 }.tc(), "10000000bit");
    }

    #[test]
    fn traces() {
        assert_eq!(parse_trace("1\n1\n2\n# c\n\n5\n").unwrap(), vec![1, 1, 2, 5]);
        assert!(parse_trace("").is_err());
        assert!(parse_trace("0\n0\n").is_err());
        assert!(parse_trace("3\n2\n").unwrap_err().contains("line 2"));
        assert!(parse_trace("1\nx\n").is_err());
        let r = RateSpec::Trace { path: "t".into(), opportunities_ms: (1..=10).collect(), opportunity_bytes: 1500 };
        // 10 opportunities of 1500 B per 10 ms = 12 Mbit/s
        assert!((r.mean_bps().unwrap() - 12e6).abs() < 1.0);
        assert!(RateSpec::trace(Path::new("/nonexistent/x.trace")).unwrap_err().contains("cannot read trace"));
    }
}
