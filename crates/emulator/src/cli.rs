//! Command-line interface: [`LinkArgs`] (the link options, reusable by
//! `bloatlab lab` with `#[command(flatten)]`) and the hidden `bloatlab emulate`
//! subcommand that the lab starts inside the router namespace.

use crate::config::*;
use crate::run::{run, RunSpec};
use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use std::path::PathBuf;

/// Link emulation options. Values given without -up/-down apply to both directions;
/// the -up/-down variants override them. Delay is one-way (RTT = delay up + delay down).
#[derive(Debug, Clone, Args, Default)]
pub struct LinkArgs {
    /// Link rate, both directions (e.g. 10mbit, 1gbit); default unlimited.
    #[arg(long, value_name = "RATE")]
    pub rate: Option<String>,
    /// Rate client -> server.
    #[arg(long, value_name = "RATE")]
    pub rate_up: Option<String>,
    /// Rate server -> client.
    #[arg(long, value_name = "RATE")]
    pub rate_down: Option<String>,
    /// Mahimahi trace for client -> server (one 1500-byte delivery opportunity per line, ms).
    #[arg(long, value_name = "FILE")]
    pub trace_up: Option<PathBuf>,
    /// Mahimahi trace for server -> client.
    #[arg(long, value_name = "FILE")]
    pub trace_down: Option<PathBuf>,
    /// One-way propagation delay, each direction (e.g. 20ms gives a 40 ms RTT).
    #[arg(long, value_name = "DELAY")]
    pub delay: Option<String>,
    #[arg(long, value_name = "DELAY")]
    pub delay_up: Option<String>,
    #[arg(long, value_name = "DELAY")]
    pub delay_down: Option<String>,
    /// Delay variation, each direction: 5ms (uniform +/-5 ms) or normal:5ms (std dev).
    #[arg(long, value_name = "JITTER")]
    pub jitter: Option<String>,
    /// Let jitter reorder packets (default: order is kept).
    #[arg(long)]
    pub reorder: bool,
    /// Random loss, each direction: 1% (Bernoulli) or ge:p=1%,r=25%[,good=0%,bad=100%] (Gilbert-Elliott).
    #[arg(long, value_name = "LOSS")]
    pub loss: Option<String>,
    #[arg(long, value_name = "LOSS")]
    pub loss_up: Option<String>,
    #[arg(long, value_name = "LOSS")]
    pub loss_down: Option<String>,
    /// Queue discipline, both directions: fifo:N, bfifo:BYTES, drophead:N, codel, fq_codel, pie (with :key=value options).
    #[arg(long, value_name = "QUEUE")]
    pub queue: Option<String>,
    #[arg(long, value_name = "QUEUE")]
    pub queue_up: Option<String>,
    #[arg(long, value_name = "QUEUE")]
    pub queue_down: Option<String>,
    /// Per-packet link overhead in bytes added when computing time on the wire (default 0).
    #[arg(long, value_name = "BYTES")]
    pub overhead: Option<u32>,
    /// Seed for loss, jitter, PIE and FQ hashing (default: random, recorded in the stats).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Release timer: sleep-spin (default), sleep, spin.
    #[arg(long, value_name = "MODE")]
    pub timer: Option<String>,
    /// Spin window before each deadline for sleep-spin (default 30us).
    #[arg(long, value_name = "DURATION")]
    pub spin: Option<String>,
    /// SCHED_FIFO priority of the emulator threads, 0 = normal scheduling (default 10).
    #[arg(long, value_name = "N")]
    pub rt_priority: Option<u32>,
    /// Never pass segmentation-offloaded packets through (by default an unshaped direction does).
    #[arg(long)]
    pub no_offload: bool,
}

impl LinkArgs {
    /// True when any emulator-only option (delay, jitter, loss, trace, an AQM queue) is set.
    pub fn needs_emulator(&self) -> bool {
        self.delay.is_some()
            || self.delay_up.is_some()
            || self.delay_down.is_some()
            || self.jitter.is_some()
            || self.loss.is_some()
            || self.loss_up.is_some()
            || self.loss_down.is_some()
            || self.trace_up.is_some()
            || self.trace_down.is_some()
    }

    /// Build the emulator configuration.
    pub fn to_config(&self) -> Result<EmulatorConfig> {
        let mut cfg = EmulatorConfig::default();
        let pick = |both: &Option<String>, one: &Option<String>| one.clone().or_else(|| both.clone());
        for (dir, d) in [("up", &mut cfg.up), ("down", &mut cfg.down)] {
            let (rate, trace, delay, loss, queue) = if dir == "up" {
                (pick(&self.rate, &self.rate_up), &self.trace_up, pick(&self.delay, &self.delay_up), pick(&self.loss, &self.loss_up), pick(&self.queue, &self.queue_up))
            } else {
                (pick(&self.rate, &self.rate_down), &self.trace_down, pick(&self.delay, &self.delay_down), pick(&self.loss, &self.loss_down), pick(&self.queue, &self.queue_down))
            };
            d.rate = match (trace, &rate) {
                (Some(_), Some(_)) if (dir == "up" && self.rate_up.is_some()) || (dir == "down" && self.rate_down.is_some()) => {
                    bail!("--rate-{dir} and --trace-{dir} cannot both be given")
                }
                (Some(t), _) => RateSpec::trace(t).map_err(|e| anyhow!("--trace-{dir}: {e}"))?,
                (None, Some(r)) => RateSpec::Fixed { bps: parse_rate_bps(r).map_err(|e| anyhow!("--rate: {e}"))? },
                (None, None) => RateSpec::Unlimited,
            };
            if let Some(x) = delay {
                d.delay_ns = parse_duration_ns(&x).map_err(|e| anyhow!("--delay: {e}"))?;
            }
            if let Some(x) = loss {
                d.loss = x.parse().map_err(|e: ParseError| anyhow!("--loss: {e}"))?;
            }
            if let Some(x) = queue {
                d.queue = x.parse().map_err(|e: ParseError| anyhow!("--queue: {e}"))?;
            }
            if let Some(j) = &self.jitter {
                d.jitter = Some(JitterSpec::parse(j, self.reorder).map_err(|e| anyhow!("--jitter: {e}"))?);
            }
            d.overhead_bytes = self.overhead.unwrap_or(0);
        }
        if self.reorder && self.jitter.is_none() {
            bail!("--reorder needs --jitter (packets are only reordered by jitter)");
        }
        cfg.seed = self.seed;
        if let Some(t) = &self.timer {
            cfg.timer = t.parse().map_err(|e: ParseError| anyhow!("--timer: {e}"))?;
        }
        if let Some(s) = &self.spin {
            cfg.spin_ns = parse_duration_ns(s).map_err(|e| anyhow!("--spin: {e}"))?;
        }
        if let Some(p) = self.rt_priority {
            cfg.rt_priority = p;
        }
        cfg.offload = !self.no_offload;
        cfg.validate().map_err(|e| anyhow!("{e}"))?;
        Ok(cfg)
    }
}

/// `bloatlab emulate`: run the link emulator between interfaces of a router
/// namespace (started by `bloatlab lab`; usable by hand).
#[derive(Debug, Clone, Args)]
pub struct EmulateArgs {
    /// Network namespace to run in (name under /run/netns); default: the current one.
    #[arg(long)]
    pub netns: Option<String>,
    /// Interface(s) facing the client: traffic arriving there goes through the "up" direction.
    #[arg(long = "client-if", value_name = "IF", required = true)]
    pub client_if: Vec<String>,
    /// Interface(s) facing the server: traffic arriving there goes through the "down" direction.
    #[arg(long = "server-if", value_name = "IF", required = true)]
    pub server_if: Vec<String>,
    /// Configuration as JSON (an EmulatorConfig); replaces the link options.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Write statistics here at exit (default: stdout).
    #[arg(long, value_name = "FILE")]
    pub stats: Option<PathBuf>,
    #[arg(long, default_value = "emu-up")]
    pub tun_up: String,
    #[arg(long, default_value = "emu-down")]
    pub tun_down: String,
    #[arg(long, default_value_t = 7701)]
    pub table_up: u32,
    #[arg(long, default_value_t = 7702)]
    pub table_down: u32,
    /// Stop after this long (e.g. 30s); default: run until SIGTERM / Ctrl-C.
    #[arg(long)]
    pub duration: Option<String>,
    /// Queue time-series sampling interval (default 100ms).
    #[arg(long)]
    pub sample_interval: Option<String>,
    /// Print a summary to stderr.
    #[arg(long, short)]
    pub verbose: bool,
    #[command(flatten)]
    pub link: LinkArgs,
}

/// Run `bloatlab emulate`.
pub fn run_emulate(a: EmulateArgs) -> Result<i32> {
    let mut cfg = match &a.config {
        Some(p) => {
            let text = std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display()))?;
            serde_json::from_str::<EmulatorConfig>(&text).with_context(|| format!("{} is not an emulator configuration", p.display()))?
        }
        None => a.link.to_config()?,
    };
    if let Some(s) = &a.sample_interval {
        cfg.sample_interval_ns = parse_duration_ns(s).map_err(|e| anyhow!("--sample-interval: {e}"))?;
    }
    let duration = match &a.duration {
        Some(d) => Some(std::time::Duration::from_nanos(parse_duration_ns(d).map_err(|e| anyhow!("--duration: {e}"))?)),
        None => None,
    };
    run(RunSpec {
        netns: a.netns,
        client_side_ifs: a.client_if,
        server_side_ifs: a.server_if,
        tun_up: a.tun_up,
        tun_down: a.tun_down,
        table_up: a.table_up,
        table_down: a.table_down,
        cfg,
        stats_path: a.stats,
        duration,
        verbose: a.verbose,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        link: LinkArgs,
    }

    fn cfg(args: &[&str]) -> Result<EmulatorConfig> {
        let mut v = vec!["t"];
        v.extend_from_slice(args);
        T::try_parse_from(v).map_err(|e| anyhow!("{e}"))?.link.to_config()
    }

    #[test]
    fn issue_examples_parse() {
        let c = cfg(&["--rate", "10mbit", "--delay", "20ms", "--queue", "fifo:1000"]).unwrap();
        assert_eq!(c.up.rate, RateSpec::Fixed { bps: 10_000_000 });
        assert_eq!(c.down.delay_ns, 20_000_000);
        assert_eq!(c.down.queue, QueueSpec::Pfifo { limit: 1000 });
        let c = cfg(&["--rate-up", "1mbit", "--rate-down", "20mbit", "--delay", "30ms", "--queue", "fq_codel"]).unwrap();
        assert_eq!(c.up.rate, RateSpec::Fixed { bps: 1_000_000 });
        assert_eq!(c.down.rate, RateSpec::Fixed { bps: 20_000_000 });
        assert_eq!(c.up.queue.kind(), "fq_codel");
        let c = cfg(&["--loss", "1%", "--jitter", "5ms", "--queue", "pie"]).unwrap();
        assert_eq!(c.up.loss, LossSpec::Bernoulli { p: 0.01 });
        assert_eq!(c.up.jitter.as_ref().unwrap().amount_ns, 5_000_000);
        assert!(!c.up.jitter.as_ref().unwrap().reorder);
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path().join("lte.trace");
        std::fs::write(&t, "1\n2\n3\n4\n").unwrap();
        let ts = t.to_str().unwrap();
        let c = cfg(&["--trace-down", ts, "--trace-up", ts, "--queue", "codel"]).unwrap();
        assert!(matches!(c.up.rate, RateSpec::Trace { .. }));
        assert!((c.down.rate.mean_bps().unwrap() - 12e6).abs() < 1.0);
    }

    #[test]
    fn bad_input_is_explained() {
        let e = cfg(&["--rate", "10mbps"]).unwrap_err().to_string();
        assert!(e.contains("bytes per second"), "{e}");
        let e = cfg(&["--queue", "cake"]).unwrap_err().to_string();
        assert!(e.contains("unknown queue"), "{e}");
        let e = cfg(&["--trace-up", "/nonexistent/x.trace"]).unwrap_err().to_string();
        assert!(e.contains("cannot read trace"), "{e}");
        let e = cfg(&["--reorder"]).unwrap_err().to_string();
        assert!(e.contains("--jitter"), "{e}");
        let e = cfg(&["--delay", "20"]).unwrap_err().to_string();
        assert!(e.contains("unit"), "{e}");
        assert!(cfg(&["--rate-up", "1mbit", "--trace-up", "/x"]).is_err());
    }
}
