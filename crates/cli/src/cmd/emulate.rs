//! The hidden `bloatlab emulate` subcommand: the lab starts it inside the
//! router namespace with `--spec FILE` (a serialized [`RunSpec`]); by hand it
//! takes the link options ([`LinkArgs`]: the lab's link options from the
//! model's table, and the emulator's own), parsed here into the emulator's
//! typed [`EmulatorConfig`].

use anyhow::{anyhow, bail, Context, Result};
use crate::options::LinkOptionArgs;
use bloatlab_emulator::{run, EmulatorConfig, JitterSpec, LossSpec, QueueSpec, RunSpec, TimerMode};
use bloatlab_model::units::parse_duration_ns;
use bloatlab_model::{lab_option, LabConfig};
use clap::Args;
use std::path::PathBuf;

fn parse_ns(s: &str) -> Result<u64, String> {
    parse_duration_ns(s)
}

/// Link emulation options. The link itself (rate, queue, delay, jitter,
/// loss, traces, with their -up/-down variants) takes the lab's options,
/// defined once in the model's table ([`LinkOptionArgs`]); the rest are the
/// emulator's own. Values without -up/-down apply to both directions; the
/// -up/-down variants override them. Delay is one-way (RTT = delay up +
/// delay down).
#[derive(Debug, Clone, Args, Default)]
pub struct LinkArgs {
    #[command(flatten)]
    pub link: LinkOptionArgs,
    /// One-way delay client -> server (instead of --delay).
    #[arg(long, value_name = "DELAY", value_parser = parse_ns)]
    pub delay_up: Option<u64>,
    /// One-way delay server -> client (instead of --delay).
    #[arg(long, value_name = "DELAY", value_parser = parse_ns)]
    pub delay_down: Option<u64>,
    /// Let jitter reorder packets (default: order is kept).
    #[arg(long)]
    pub reorder: bool,
    /// Loss client -> server (instead of --loss; the same values).
    #[arg(long, value_name = "LOSS", value_parser = str::parse::<LossSpec>)]
    pub loss_up: Option<LossSpec>,
    /// Loss server -> client (instead of --loss; the same values).
    #[arg(long, value_name = "LOSS", value_parser = str::parse::<LossSpec>)]
    pub loss_down: Option<LossSpec>,
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

impl LinkArgs {
    /// Build the emulator configuration: the link options through the
    /// lab's configuration (the same parsing and checks as `bloatlab lab`),
    /// then the emulator's own.
    pub fn to_config(&self) -> Result<EmulatorConfig> {
        let given = &self.link.0;
        // The emulator's defaults where no option is given: no rate limit, a 1000-packet FIFO.
        let mut lab = LabConfig { rate_up: None, rate_down: None, queue: QueueSpec::Fifo { packets: 1000 }, ..Default::default() };
        if given.get(lab_option("queue").expect("the queue option")).is_some_and(|q| q.len() > 1) {
            bail!("--queue: the emulator runs one queue per direction (a comma list is the lab's, one run each)");
        }
        given.apply(&mut lab).map_err(|e| anyhow!(e))?;
        for dir in ["up", "down"] {
            if given.has(&format!("rate-{dir}")) && given.has(&format!("trace-{dir}")) {
                bail!("--rate-{dir} and --trace-{dir} cannot both be given");
            }
        }
        let mut cfg = EmulatorConfig::default();
        for up in [true, false] {
            let dir = if up { "up" } else { "down" };
            let d = if up { &mut cfg.up } else { &mut cfg.down };
            d.rate = lab.rate_spec(up).map_err(|e| anyhow!("--trace-{dir}: {e}"))?;
            d.queue = lab.queue_of(up).clone();
            let own_delay = if up { self.delay_up } else { self.delay_down };
            d.delay_ns = own_delay.or(lab.delay.map(|x| x.as_nanos() as u64)).unwrap_or(0);
            let own_loss = if up { &self.loss_up } else { &self.loss_down };
            d.loss = own_loss.clone().or(lab.loss.clone()).unwrap_or_default();
            d.jitter = lab.jitter.clone().map(|j| JitterSpec { reorder: self.reorder, ..j });
            d.overhead_bytes = self.overhead.unwrap_or(0);
        }
        if self.reorder && lab.jitter.is_none() {
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
    use bloatlab_emulator::RateSpec;
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
        let c = cfg(&["--loss", "1%", "--delay", "10ms", "--jitter", "5ms", "--queue", "pie"]).unwrap();
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
        let e = cfg(&["--queue", "fifo:10,fifo:100"]).unwrap_err().to_string();
        assert!(e.contains("one queue per direction"), "{e}");
    }

    #[test]
    fn the_link_options_are_the_labs() {
        // the same definitions: a Gilbert-Elliott loss and a normal jitter
        // parse here as in `bloatlab lab`, and the per-direction loss wins
        let c = cfg(&["--delay", "10ms", "--jitter", "normal:2ms", "--loss", "ge:p=1%,r=25%", "--loss-down", "2%", "--reorder"]).unwrap();
        assert_eq!(c.up.loss, LossSpec::GilbertElliott { p: 0.01, r: 0.25, loss_good: 0.0, loss_bad: 1.0 });
        assert_eq!(c.down.loss, LossSpec::Bernoulli { p: 0.02 });
        let j = c.up.jitter.unwrap();
        assert_eq!((j.amount_ns, j.dist, j.reorder), (2_000_000, bloatlab_model::link::JitterDist::Normal, true));
        let c = cfg(&[]).unwrap();
        assert_eq!((c.up.rate.clone(), c.up.queue.clone(), c.up.delay_ns), (RateSpec::Unlimited, QueueSpec::Fifo { packets: 1000 }, 0));
        let help = {
            use clap::CommandFactory;
            T::command().render_long_help().to_string()
        };
        for o in crate::options::LINK_OPTIONS {
            let def = lab_option(o).unwrap();
            assert!(help.contains(&format!("--{o}")) && help.contains(def.doc.split_whitespace().next().unwrap()), "--{o} missing from the help");
        }
    }
}
