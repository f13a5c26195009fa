//! The hidden `bloatlab emulate` subcommand: the lab starts it inside the
//! router namespace with `--spec FILE` (a serialized [`RunSpec`]); by hand it
//! takes the link options ([`LinkArgs`]), parsed here into the emulator's
//! typed [`EmulatorConfig`].

use anyhow::{anyhow, bail, Context, Result};
use bloatlab_emulator::{run, EmulatorConfig, JitterSpec, LossSpec, QueueSpec, RateSpec, RunSpec, TimerMode};
use bloatlab_model::units::{parse_duration_ns_unit_required, parse_rate_bps};
use bloatlab_model::Rate;
use clap::Args;
use std::path::PathBuf;

fn parse_ns(s: &str) -> Result<u64, String> {
    parse_duration_ns_unit_required(s)
}

/// A rate of at least 1 bit/s (the emulator shapes below the lab's 1 kbit minimum too).
fn parse_link_rate(s: &str) -> Result<Rate, String> {
    match parse_rate_bps(s)? {
        0 => Err(format!("rate \"{s}\" must be at least 1 bit/s")),
        bps => Ok(Rate { bps }),
    }
}

/// Link emulation options. Values given without -up/-down apply to both directions;
/// the -up/-down variants override them. Delay is one-way (RTT = delay up + delay down).
#[derive(Debug, Clone, Args, Default)]
pub struct LinkArgs {
    /// Link rate, both directions (e.g. 10mbit, 1gbit); default unlimited.
    #[arg(long, value_name = "RATE", value_parser = parse_link_rate)]
    pub rate: Option<Rate>,
    /// Rate client -> server.
    #[arg(long, value_name = "RATE", value_parser = parse_link_rate)]
    pub rate_up: Option<Rate>,
    /// Rate server -> client.
    #[arg(long, value_name = "RATE", value_parser = parse_link_rate)]
    pub rate_down: Option<Rate>,
    /// Mahimahi trace for client -> server (one 1500-byte delivery opportunity per line, ms).
    #[arg(long, value_name = "FILE")]
    pub trace_up: Option<PathBuf>,
    /// Mahimahi trace for server -> client.
    #[arg(long, value_name = "FILE")]
    pub trace_down: Option<PathBuf>,
    /// One-way propagation delay, each direction (e.g. 20ms gives a 40 ms RTT).
    #[arg(long, value_name = "DELAY", value_parser = parse_ns)]
    pub delay: Option<u64>,
    /// One-way delay client -> server.
    #[arg(long, value_name = "DELAY", value_parser = parse_ns)]
    pub delay_up: Option<u64>,
    /// One-way delay server -> client.
    #[arg(long, value_name = "DELAY", value_parser = parse_ns)]
    pub delay_down: Option<u64>,
    /// Delay variation, each direction: 5ms (uniform +/-5 ms) or normal:5ms (std dev).
    #[arg(long, value_name = "JITTER")]
    pub jitter: Option<String>,
    /// Let jitter reorder packets (default: order is kept).
    #[arg(long)]
    pub reorder: bool,
    /// Random loss, each direction: 1% (Bernoulli) or ge:p=1%,r=25%[,good=0%,bad=100%] (Gilbert-Elliott).
    #[arg(long, value_name = "LOSS", value_parser = str::parse::<LossSpec>)]
    pub loss: Option<LossSpec>,
    /// Loss client -> server.
    #[arg(long, value_name = "LOSS", value_parser = str::parse::<LossSpec>)]
    pub loss_up: Option<LossSpec>,
    /// Loss server -> client.
    #[arg(long, value_name = "LOSS", value_parser = str::parse::<LossSpec>)]
    pub loss_down: Option<LossSpec>,
    /// Queue discipline, both directions: fifo:N, bfifo:BYTES, drophead:N, codel, fq_codel, pie (with :key=value options).
    #[arg(long, value_name = "QUEUE", value_parser = QueueSpec::parse)]
    pub queue: Option<QueueSpec>,
    /// Queue client -> server.
    #[arg(long, value_name = "QUEUE", value_parser = QueueSpec::parse)]
    pub queue_up: Option<QueueSpec>,
    /// Queue server -> client.
    #[arg(long, value_name = "QUEUE", value_parser = QueueSpec::parse)]
    pub queue_down: Option<QueueSpec>,
    /// Per-packet link overhead in bytes added when computing time on the wire (default 0).
    #[arg(long, value_name = "BYTES")]
    pub overhead: Option<u32>,
    /// Seed for loss, jitter, PIE and FQ hashing (default: random, recorded in the stats).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Release timer: sleep-spin (default), sleep, spin.
    #[arg(long, value_name = "MODE", value_parser = str::parse::<TimerMode>)]
    pub timer: Option<TimerMode>,
    /// Spin window before each deadline for sleep-spin (default 30us).
    #[arg(long, value_name = "DURATION", value_parser = parse_ns)]
    pub spin: Option<u64>,
    /// SCHED_FIFO priority of the emulator threads, 0 = normal scheduling (default 10).
    #[arg(long, value_name = "N")]
    pub rt_priority: Option<u32>,
    /// Never pass segmentation-offloaded packets through (by default an unshaped direction does).
    #[arg(long)]
    pub no_offload: bool,
}

/// One direction's value: its own option, else the both-ways one.
fn pick<T: Clone>(up: bool, both: &Option<T>, u: &Option<T>, d: &Option<T>) -> Option<T> {
    if up { u.clone() } else { d.clone() }.or_else(|| both.clone())
}

impl LinkArgs {
    /// Build the emulator configuration.
    pub fn to_config(&self) -> Result<EmulatorConfig> {
        let mut cfg = EmulatorConfig::default();
        for up in [true, false] {
            let dir = if up { "up" } else { "down" };
            let rate: Option<Rate> = pick(up, &self.rate, &self.rate_up, &self.rate_down);
            let one_rate = if up { self.rate_up.is_some() } else { self.rate_down.is_some() };
            let trace = if up { &self.trace_up } else { &self.trace_down };
            let d = if up { &mut cfg.up } else { &mut cfg.down };
            d.rate = match (trace, rate) {
                (Some(_), Some(_)) if one_rate => bail!("--rate-{dir} and --trace-{dir} cannot both be given"),
                (Some(t), _) => RateSpec::trace(t).map_err(|e| anyhow!("--trace-{dir}: {e}"))?,
                (None, Some(r)) => RateSpec::Fixed { bps: r.bps },
                (None, None) => RateSpec::Unlimited,
            };
            if let Some(x) = pick(up, &self.delay, &self.delay_up, &self.delay_down) {
                d.delay_ns = x;
            }
            if let Some(x) = pick(up, &self.loss, &self.loss_up, &self.loss_down) {
                d.loss = x;
            }
            if let Some(x) = pick(up, &self.queue, &self.queue_up, &self.queue_down) {
                d.queue = x;
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
        if let Some(t) = self.timer {
            cfg.timer = t;
        }
        if let Some(s) = self.spin {
            cfg.spin_ns = s;
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
    /// Everything as one JSON file (a RunSpec, as the lab writes it); no other option then.
    #[arg(long, value_name = "FILE", exclusive = true)]
    pub spec: Option<PathBuf>,
    /// Network namespace to run in (name under /run/netns); default: the current one.
    #[arg(long)]
    pub netns: Option<String>,
    /// Interface(s) facing the client: traffic arriving there goes through the "up" direction.
    #[arg(long = "client-if", value_name = "IF", required_unless_present_any = ["spec", "print_config"])]
    pub client_if: Vec<String>,
    /// Interface(s) facing the server: traffic arriving there goes through the "down" direction.
    #[arg(long = "server-if", value_name = "IF", required_unless_present_any = ["spec", "print_config"])]
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
    #[arg(long, value_parser = parse_ns)]
    pub duration: Option<u64>,
    /// Queue time-series sampling interval (default 100ms).
    #[arg(long, value_parser = parse_ns)]
    pub sample_interval: Option<u64>,
    /// Print the configuration the link options make (JSON) and exit.
    #[arg(long)]
    pub print_config: bool,
    /// Print a summary to stderr.
    #[arg(long, short)]
    pub verbose: bool,
    #[command(flatten)]
    pub link: LinkArgs,
}

/// Run `bloatlab emulate`.
pub fn run_emulate(a: EmulateArgs) -> Result<i32> {
    if let Some(p) = &a.spec {
        let text = std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display()))?;
        let spec: RunSpec = serde_json::from_str(&text).with_context(|| format!("{} is not an emulator run spec", p.display()))?;
        spec.cfg.validate().map_err(|e| anyhow!("{}: {e}", p.display()))?;
        return run(spec);
    }
    let mut cfg = match &a.config {
        Some(p) => {
            let text = std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display()))?;
            serde_json::from_str::<EmulatorConfig>(&text).with_context(|| format!("{} is not an emulator configuration", p.display()))?
        }
        None => a.link.to_config()?,
    };
    if let Some(s) = a.sample_interval {
        cfg.sample_interval_ns = s;
    }
    cfg.validate().map_err(|e| anyhow!(e))?;
    if a.print_config {
        println!("{}", serde_json::to_string_pretty(&cfg)?);
        return Ok(0);
    }
    let duration = a.duration.map(std::time::Duration::from_nanos);
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
        assert_eq!(c.down.queue, QueueSpec::Fifo { packets: 1000 });
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
        let e = cfg(&["--queue", "fifo"]).unwrap_err().to_string();
        assert!(e.contains("needs a packet limit"), "{e}");
        let e = cfg(&["--reorder"]).unwrap_err().to_string();
        assert!(e.contains("--jitter"), "{e}");
        let e = cfg(&["--delay", "20"]).unwrap_err().to_string();
        assert!(e.contains("unit"), "{e}");
        assert!(cfg(&["--rate-up", "1mbit", "--trace-up", "/x"]).is_err());
    }
}
