//! Parsing of the lab's user-facing values: rates, sizes, queues, durations,
//! placement. Every parser returns a message that names the accepted forms.
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// A link rate in bits per second (decimal units, as tc's `kbit`/`mbit`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Rate {
    pub bps: u64,
}

impl Rate {
    pub fn mbit(m: f64) -> Rate {
        Rate { bps: (m * 1e6).round() as u64 }
    }
    /// The rate in tc syntax (`bit` units, exact).
    pub fn tc(&self) -> String {
        format!("{}bit", self.bps)
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&bloatlab_units::fmt_rate(self.bps))
    }
}

/// Parse a rate (crates/units: tc units, decimal bits per second, `bps`
/// refused as ambiguous); `Ok(None)` means "no limit" (`none`, `unlimited`,
/// `off`). The lab accepts 1kbit ..= 400gbit.
pub fn parse_rate(s: &str) -> Result<Option<Rate>, String> {
    let t = s.trim().to_ascii_lowercase();
    if t == "none" || t == "unlimited" || t == "off" {
        return Ok(None);
    }
    let bps = bloatlab_units::parse_rate_bps(s).map_err(|e| format!("{e}, or `none` for no rate limit"))?;
    if bps < 1000 {
        return Err(format!("rate `{s}` is below 1kbit; {}", bloatlab_units::RATE_FORMS));
    }
    if bps > 400_000_000_000 {
        return Err(format!("rate `{s}` is above 400gbit, more than a veth can carry"));
    }
    Ok(Some(Rate { bps }))
}

/// Parse a byte size, tc style (crates/units): `k` = 1024, `m` = 1024², plain = bytes; at least 1.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let v = bloatlab_units::parse_bytes(s)?;
    if v < 1 {
        return Err(format!("size `{s}` must be at least 1 byte"));
    }
    Ok(v)
}

/// The queue of the bottleneck.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum QueueSpec {
    /// Packet-limited FIFO (`pfifo limit N`): the txqueuelen.
    Fifo { packets: u32 },
    /// Byte-limited FIFO (`bfifo limit N`).
    Bfifo { bytes: u64 },
    /// A discipline only bloatlab's user-space emulator provides, in its
    /// syntax: `codel[:target=5ms,...]`, `fq_codel[:...]`, `pie[:...]`, `drophead:N`.
    Emulator { spec: String },
}

pub const QUEUE_FORMS: &str = "accepted forms: fifo:N (packets, e.g. fifo:1000; the txqueuelen), \
     bfifo:BYTES (e.g. bfifo:64k = 65536, bfifo:65536), and with bloatlab's user-space emulator \
     codel, fq_codel, pie (optionally with parameters, e.g. codel:target=5ms,interval=100ms) and drophead:N; \
     any other kernel qdisc goes through --qdisc \"KIND ARGS\"";

impl QueueSpec {
    pub fn parse(s: &str) -> Result<QueueSpec, String> {
        let t = s.trim().to_ascii_lowercase();
        let (kind, arg) = match t.split_once(':') {
            Some((k, a)) => (k.to_string(), Some(a.to_string())),
            None => (t.clone(), None),
        };
        let packets = |a: Option<String>| -> Result<u32, String> {
            let a = a.ok_or_else(|| format!("queue `{s}` needs a length; {QUEUE_FORMS}"))?;
            let n: u32 = a
                .parse()
                .map_err(|_| format!("queue `{s}`: `{a}` is not a packet count; {QUEUE_FORMS}"))?;
            if n == 0 || n > 1_000_000 {
                return Err(format!("queue `{s}`: packet limit must be 1..1000000"));
            }
            Ok(n)
        };
        match kind.as_str() {
            "fifo" | "pfifo" => Ok(QueueSpec::Fifo { packets: packets(arg)? }),
            "bfifo" => {
                let a = arg.ok_or_else(|| format!("queue `{s}` needs a byte limit; {QUEUE_FORMS}"))?;
                let b = parse_size(&a).map_err(|e| format!("queue `{s}`: {e}"))?;
                if b < 64 {
                    return Err(format!("queue `{s}`: a byte limit below 64 cannot hold a packet"));
                }
                Ok(QueueSpec::Bfifo { bytes: b })
            }
            "drophead" => {
                packets(arg)?;
                Ok(QueueSpec::Emulator { spec: t.clone() })
            }
            "codel" | "fq_codel" | "fq-codel" | "pie" => {
                t.parse::<bloatlab_emulator::QueueSpec>()
                    .map_err(|e| format!("queue `{s}`: {e}"))?;
                Ok(QueueSpec::Emulator { spec: t.replace("fq-codel", "fq_codel") })
            }
            _ => Err(format!("unknown queue `{s}`; {QUEUE_FORMS}")),
        }
    }

    /// True for disciplines only the user-space emulator provides.
    pub fn needs_emulator(&self) -> bool {
        matches!(self, QueueSpec::Emulator { .. })
    }

    /// Short label used in tables and file names, e.g. `fifo:1000`.
    pub fn label(&self) -> String {
        match self {
            QueueSpec::Fifo { packets } => format!("fifo:{packets}"),
            QueueSpec::Bfifo { bytes } => format!("bfifo:{bytes}"),
            QueueSpec::Emulator { spec } => spec.clone(),
        }
    }

    /// Maximum bytes the queue can hold with full-size frames of `frame` bytes
    /// (None for AQMs, whose standing queue is set by their target instead).
    pub fn capacity_bytes(&self, frame: u64) -> Option<u64> {
        match self {
            QueueSpec::Fifo { packets } => Some(*packets as u64 * frame),
            QueueSpec::Bfifo { bytes } => Some(*bytes),
            QueueSpec::Emulator { spec } => {
                let q: bloatlab_emulator::QueueSpec = spec.parse().ok()?;
                match q {
                    bloatlab_emulator::QueueSpec::Drophead { limit } => Some(limit as u64 * frame),
                    _ => None,
                }
            }
        }
    }

    /// The emulator's form of this queue.
    pub fn to_emulator(&self) -> Result<bloatlab_emulator::QueueSpec, String> {
        Ok(match self {
            QueueSpec::Fifo { packets } => bloatlab_emulator::QueueSpec::Pfifo { limit: *packets as usize },
            QueueSpec::Bfifo { bytes } => bloatlab_emulator::QueueSpec::Bfifo { limit_bytes: *bytes },
            QueueSpec::Emulator { spec } => spec.parse().map_err(|e| format!("queue `{spec}`: {e}"))?,
        })
    }
}

impl fmt::Display for QueueSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}

/// Where the bottleneck sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    /// The router's egress: toward server+witness (up) and toward the client (down).
    Router,
    /// The sender's own interface: client eth0 (up), server eth0 (down).
    Local,
}

/// The rate limiter used by the kernel backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Shaper {
    Htb,
    Tbf,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// The emulator when an emulator-only feature is asked for (AQM queue,
    /// trace, delay/jitter/loss), else the kernel.
    Auto,
    /// Kernel qdiscs (htb/tbf + pfifo/bfifo or any --qdisc).
    Kernel,
    /// bloatlab's user-space link emulator.
    Emulator,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum OnOff {
    On,
    Off,
}

impl fmt::Display for OnOff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OnOff::On => "on",
            OnOff::Off => "off",
        })
    }
}

/// Durations (crates/units): "5s", "500ms", "1.5s", "2m", "20us", bare
/// numbers = seconds; the lab accepts up to one day.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let d = bloatlab_units::parse_duration(s)?;
    if d > Duration::from_secs(86400) {
        return Err(format!("duration `{s}` out of range (at most 1 day)"));
    }
    Ok(d)
}

/// Loss probability: "1%", "0.5%", "0.01" (crates/units).
pub use bloatlab_units::parse_probability as parse_loss;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates() {
        assert_eq!(parse_rate("10mbit").unwrap().unwrap().bps, 10_000_000);
        assert_eq!(parse_rate("1.5Mbit").unwrap().unwrap().bps, 1_500_000);
        assert_eq!(parse_rate("100kbit").unwrap().unwrap().bps, 100_000);
        assert_eq!(parse_rate("1gbit").unwrap().unwrap().bps, 1_000_000_000);
        assert_eq!(parse_rate("10M").unwrap().unwrap().bps, 10_000_000);
        assert_eq!(parse_rate("500000").unwrap().unwrap().bps, 500_000);
        assert_eq!(parse_rate("none").unwrap(), None);
        assert!(parse_rate("10mbps").unwrap_err().contains("ambiguous"));
        assert!(parse_rate("fast").unwrap_err().contains("accepted forms"));
        assert!(parse_rate("10furlong").unwrap_err().contains("unknown unit"));
        assert!(parse_rate("0mbit").is_err());
        assert_eq!(Rate { bps: 10_000_000 }.to_string(), "10mbit");
        assert_eq!(Rate { bps: 1_500_000 }.to_string(), "1.5mbit");
        assert_eq!(Rate { bps: 1_000_000_000 }.to_string(), "1gbit");
        assert_eq!(Rate { bps: 100_000 }.to_string(), "100kbit");
        assert_eq!(Rate { bps: 10_000_000 }.tc(), "10000000bit");
    }

    #[test]
    fn sizes_and_queues() {
        assert_eq!(parse_size("64k").unwrap(), 65536);
        assert_eq!(parse_size("65536").unwrap(), 65536);
        assert_eq!(parse_size("2m").unwrap(), 2 * 1024 * 1024);
        assert_eq!(QueueSpec::parse("fifo:1000").unwrap(), QueueSpec::Fifo { packets: 1000 });
        assert_eq!(QueueSpec::parse("pfifo:10").unwrap(), QueueSpec::Fifo { packets: 10 });
        assert_eq!(QueueSpec::parse("bfifo:64k").unwrap(), QueueSpec::Bfifo { bytes: 65536 });
        assert_eq!(QueueSpec::parse("bfifo:65536").unwrap(), QueueSpec::Bfifo { bytes: 65536 });
        assert_eq!(QueueSpec::parse("fq_codel").unwrap(), QueueSpec::Emulator { spec: "fq_codel".into() });
        assert_eq!(QueueSpec::parse("drophead:50").unwrap(), QueueSpec::Emulator { spec: "drophead:50".into() });
        assert_eq!(QueueSpec::parse("drophead:50").unwrap().capacity_bytes(1514), Some(50 * 1514));
        assert_eq!(QueueSpec::parse("codel").unwrap().capacity_bytes(1514), None);
        assert!(QueueSpec::parse("codel:target=5ms,interval=100ms").is_ok());
        for bad in ["fifo", "fifo:x", "fifo:0", "red", "bfifo:", "bfifo:10", "codel:bogus=5", "drophead"] {
            let e = QueueSpec::parse(bad).unwrap_err();
            assert!(e.contains("accepted forms") || e.contains("must") || e.contains("cannot") || e.contains("unknown"), "{bad}: {e}");
        }
        assert_eq!(QueueSpec::Fifo { packets: 100 }.capacity_bytes(1514), Some(151400));
        assert!(QueueSpec::parse("pie").unwrap().needs_emulator());
        assert!(!QueueSpec::Bfifo { bytes: 100 }.needs_emulator());
    }

    #[test]
    fn durations_and_loss() {
        assert_eq!(parse_duration("5s").unwrap(), Duration::from_secs(5));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert!(parse_duration("5 parsecs").is_err());
        assert_eq!(parse_loss("1%").unwrap(), 0.01);
        assert_eq!(parse_loss("0.5").unwrap(), 0.5);
        assert!(parse_loss("150%").is_err());
    }
}
