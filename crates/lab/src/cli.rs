//! `bloatlab lab` command line.
use crate::lab::{Lab, LabConfig};
use crate::run::{check_engine_args, RunOptions};
use crate::spec::*;
use crate::{signals, state, sys, table};
use anyhow::{anyhow, bail, Result};
use clap::{Args, Subcommand};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// `bloatlab lab`: a bufferbloat testbed in network namespaces.
#[derive(Args, Debug)]
#[command(
    args_conflicts_with_subcommands = true,
    after_help = "With no options: the default demo (10 Mbit/s, one cubic upload through a 1000-packet FIFO, \
then a 10-packet FIFO; < 60 s). Options after `--` go to `bloatlab test`, e.g. \
`bloatlab lab --queue fifo:100 -- --scenarios 1u0d,1u1d --duration 5s`. Needs root. See docs/lab.md."
)]
pub struct LabArgs {
    #[command(subcommand)]
    pub cmd: Option<LabCmd>,
    #[command(flatten)]
    pub run: LabRunArgs,
}

#[derive(Subcommand, Debug)]
pub enum LabCmd {
    /// Remove namespaces and processes left behind by killed or --keep labs.
    Cleanup(CleanupArgs),
    /// List the queue disciplines this kernel offers (probed in a scratch namespace).
    Qdiscs(QdiscsArgs),
    /// List labs on this machine: running, kept (--keep) or left over by a killed run.
    List(ListArgs),
}

#[derive(Args, Debug)]
pub struct ListArgs {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct CleanupArgs {
    /// Only this lab (6 hex digits, as in the namespace names blab-ID-ROLE); repeatable.
    #[arg(long = "id")]
    pub ids: Vec<String>,
}

#[derive(Args, Debug)]
pub struct QdiscsArgs {
    /// Print JSON {"kernel","available","missing"}.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct LabRunArgs {
    /// Bottleneck rate both ways: 10mbit, 1.5mbit, 100kbit, 1gbit, or none.
    #[arg(long, default_value = "10mbit", value_name = "RATE")]
    pub rate: String,
    /// Upload (client→server) rate; overrides --rate.
    #[arg(long, value_name = "RATE")]
    pub rate_up: Option<String>,
    /// Download (server→client) rate; overrides --rate.
    #[arg(long, value_name = "RATE")]
    pub rate_down: Option<String>,
    /// Bottleneck queue: fifo:N (packets), bfifo:BYTES (64k = 65536), or with the emulator codel,
    /// fq_codel, pie (e.g. codel:target=5ms), drophead:N; a comma list runs one test per queue
    /// [default: fifo:1000,fifo:10].
    #[arg(long, value_name = "QUEUE[,QUEUE...]", value_delimiter = ',')]
    pub queue: Vec<String>,
    /// Upload (client→server) queue instead of --queue's, e.g. a modem's deep upstream buffer:
    /// --queue-up fifo:500 --queue-down fifo:50. With only one of the two, a --queue list varies the other direction.
    #[arg(long, value_name = "QUEUE")]
    pub queue_up: Option<String>,
    /// Download (server→client) queue instead of --queue's.
    #[arg(long, value_name = "QUEUE")]
    pub queue_down: Option<String>,
    /// Any kernel qdisc as the bottleneck queue, "KIND [ARGS]" (e.g. fq_codel, "cake", "netem delay 20ms").
    #[arg(long, value_name = "\"KIND ARGS\"")]
    pub qdisc: Option<String>,
    /// Where the bottleneck sits: the router's egress, or the sender's own interface.
    #[arg(long, value_enum, default_value = "router")]
    pub bottleneck: Placement,
    /// Queue length of the bottleneck interface in packets (= --queue fifo:N, and `ip link set txqueuelen N`).
    #[arg(long, value_name = "N")]
    pub txqueuelen: Option<u32>,
    /// Rate limiter of the kernel backend.
    #[arg(long, value_enum, default_value = "htb")]
    pub shaper: Shaper,
    /// Segmentation offloads (TSO/GSO/GRO) on the lab's interfaces.
    #[arg(long, value_enum, default_value = "off")]
    pub offloads: OnOff,
    /// TCP congestion control for the load flows (and the namespaces' default).
    #[arg(long, default_value = "cubic")]
    pub cc: String,
    /// net.ipv4.tcp_wmem/tcp_rmem maximum inside the lab, so TCP can fill big queues.
    #[arg(long, default_value = "16m", value_name = "SIZE")]
    pub tcp_mem_max: String,
    /// ECN for TCP inside the lab (net.ipv4.tcp_ecn 1 / 0) [default: the kernel's, 2 = accept only].
    #[arg(long, value_enum, value_name = "on|off")]
    pub ecn: Option<OnOff>,
    /// One-way delay added in each direction, so the RTT grows by twice this (emulator, or netem with --backend kernel).
    #[arg(long, value_name = "DURATION")]
    pub delay: Option<String>,
    /// Per-direction delay variation, uniform +/- (with --delay).
    #[arg(long, value_name = "DURATION")]
    pub jitter: Option<String>,
    /// Random loss per direction, e.g. 1% or 0.01.
    #[arg(long, value_name = "PROB")]
    pub loss: Option<String>,
    /// kernel (qdiscs), emulator (bloatlab's user-space link), or auto: the emulator
    /// when --queue codel|fq_codel|pie|drophead, a trace, --delay, --jitter or --loss asks for it.
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: Backend,
    /// Rate trace for the uplink (mahimahi format; emulator backend).
    #[arg(long, value_name = "FILE")]
    pub trace_up: Option<PathBuf>,
    /// Rate trace for the downlink (mahimahi format; emulator backend).
    #[arg(long, value_name = "FILE")]
    pub trace_down: Option<PathBuf>,
    /// Run the test over IPv6 (the lab's ULA addresses).
    #[arg(long)]
    pub ipv6: bool,
    /// Port of the bloatlab servers inside the lab.
    #[arg(long, default_value_t = 9770)]
    pub port: u16,
    /// Write the result JSON (with the lab section) here; several queues: FILE's stem + ".QUEUE.json" each.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Leave the lab up afterwards and print how to enter each namespace.
    #[arg(long)]
    pub keep: bool,
    /// Build the lab and start the servers, run no test (implies --keep).
    #[arg(long)]
    pub no_run: bool,
    /// Lab id (6 hex digits) instead of a random one.
    #[arg(long, value_name = "HEX")]
    pub id: Option<String>,
    /// Queue sampling interval [default: the engine's --sample-interval, 100ms].
    #[arg(long, value_name = "DURATION")]
    pub queue_interval: Option<String>,
    /// Show bloatlab test's own output too.
    #[arg(long)]
    pub engine_output: bool,
    /// No progress lines and no table (errors only).
    #[arg(long)]
    pub quiet: bool,
    /// Options passed to `bloatlab test` (after `--`).
    #[arg(last = true, value_name = "TEST_OPTIONS")]
    pub engine_args: Vec<String>,
}

/// Resolve the command line into a configuration and the list of queues to run.
pub fn resolve(a: &LabRunArgs) -> Result<(LabConfig, Vec<QueueSpec>)> {
    let rate = parse_rate(&a.rate).map_err(|e| anyhow!("--rate: {e}"))?;
    let rate_up = match &a.rate_up {
        Some(r) => parse_rate(r).map_err(|e| anyhow!("--rate-up: {e}"))?,
        None => rate,
    };
    let rate_down = match &a.rate_down {
        Some(r) => parse_rate(r).map_err(|e| anyhow!("--rate-down: {e}"))?,
        None => rate,
    };
    let mut queues = a
        .queue
        .iter()
        .map(|q| QueueSpec::parse(q).map_err(|e| anyhow!("--queue: {e}")))
        .collect::<Result<Vec<_>>>()?;
    if let Some(t) = a.txqueuelen {
        if t == 0 {
            bail!("--txqueuelen must be at least 1 packet");
        }
        if !queues.is_empty() && queues != vec![QueueSpec::Fifo { packets: t }] {
            bail!("--txqueuelen {t} sets the queue to fifo:{t}; do not combine it with a different --queue");
        }
        queues = vec![QueueSpec::Fifo { packets: t }];
    }
    let one = |o: &Option<String>, flag: &str| -> Result<Option<QueueSpec>> {
        o.as_ref().map(|q| QueueSpec::parse(q).map_err(|e| anyhow!("{flag}: {e}"))).transpose()
    };
    let queue_up = one(&a.queue_up, "--queue-up")?;
    let queue_down = one(&a.queue_down, "--queue-down")?;
    if let (Some(u), Some(_)) = (&queue_up, &queue_down) {
        if !a.queue.is_empty() {
            bail!("--queue-up and --queue-down set both directions; --queue has nothing left to set (drop it)");
        }
        queues = vec![u.clone()];
    }
    if let (Some(t), true) = (a.txqueuelen, queue_up.is_some() || queue_down.is_some()) {
        bail!("--txqueuelen {t} sets both directions' queue to fifo:{t}; do not combine it with --queue-up/--queue-down");
    }
    if a.qdisc.is_some() {
        if !a.queue.is_empty() || queue_up.is_some() || queue_down.is_some() {
            bail!("--qdisc replaces the bottleneck queue; do not combine it with --queue, --queue-up or --queue-down");
        }
        queues = vec![QueueSpec::Fifo { packets: a.txqueuelen.unwrap_or(1000) }];
    }
    if queues.is_empty() {
        queues = vec![QueueSpec::Fifo { packets: 1000 }, QueueSpec::Fifo { packets: 10 }];
    }
    if rate_up.is_none() && rate_down.is_none() && a.qdisc.is_none() {
        bail!("with --rate none in both directions there is no bottleneck; give a rate or a --qdisc that shapes (e.g. \"cake bandwidth 10mbit\")");
    }
    let dur = |o: &Option<String>, f: &str| -> Result<Option<std::time::Duration>> {
        o.as_ref().map(|s| parse_duration(s).map_err(|e| anyhow!("{f}: {e}"))).transpose()
    };
    let cfg = LabConfig {
        id: a.id.clone(),
        backend: a.backend,
        placement: a.bottleneck,
        rate_up,
        rate_down,
        queue: queues[0].clone(),
        queue_up,
        queue_down,
        qdisc: a.qdisc.clone(),
        txqueuelen: a.txqueuelen,
        shaper: a.shaper,
        offloads: a.offloads,
        cc: a.cc.clone(),
        tcp_mem_max: parse_size(&a.tcp_mem_max).map_err(|e| anyhow!("--tcp-mem-max: {e}"))?,
        ecn: a.ecn,
        delay: dur(&a.delay, "--delay")?,
        jitter: dur(&a.jitter, "--jitter")?,
        loss: a.loss.as_ref().map(|l| parse_loss(l).map_err(|e| anyhow!("--loss: {e}"))).transpose()?,
        trace_up: a.trace_up.clone(),
        trace_down: a.trace_down.clone(),
        ipv6: a.ipv6,
        port: a.port,
        exe: None,
    };
    for q in &queues {
        let mut c = cfg.clone();
        c.queue = q.clone();
        c.validate()?;
    }
    check_engine_args(&a.engine_args)?;
    if a.json.as_deref() == Some(Path::new("-")) && queues.len() > 1 {
        bail!("--json - writes one result; with several queues give a file name (one file per queue)");
    }
    Ok((cfg, queues))
}

/// File name for run `i` of `n`: the path itself for one run, else `STEM.QUEUE.EXT`.
pub fn json_path(base: &Path, label: &str, n: usize) -> PathBuf {
    if n <= 1 {
        return base.to_path_buf();
    }
    let safe: String = label
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '.' { c } else { '-' })
        .collect();
    let stem = base.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "lab".into());
    let ext = base.extension().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "json".into());
    base.with_file_name(format!("{stem}.{safe}.{ext}"))
}

pub fn run_lab(args: LabArgs) -> Result<i32> {
    match args.cmd {
        Some(LabCmd::Cleanup(c)) => run_cleanup(c),
        Some(LabCmd::Qdiscs(q)) => run_qdiscs(q),
        Some(LabCmd::List(l)) => run_list(l),
        None => run_lab_test(args.run),
    }
}

pub fn run_cleanup(a: CleanupArgs) -> Result<i32> {
    for id in &a.ids {
        if !state::valid_id(id) {
            bail!("--id `{id}` is not a lab id (6 hex digits, as in blab-1a2b3c-client)");
        }
    }
    sys::require_privileges()?;
    let rep = state::cleanup(&a.ids)?;
    if rep.lines.is_empty() {
        println!("nothing to clean up (no blab-* namespaces or lab records)");
    }
    for l in &rep.lines {
        println!("{l}");
    }
    Ok(0)
}

pub fn run_list(a: ListArgs) -> Result<i32> {
    let labs = state::list()?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&labs)?);
        return Ok(0);
    }
    if labs.is_empty() {
        println!("no labs");
    }
    for l in labs {
        println!(
            "{}  {:<8}  {}{}",
            l.id,
            l.state,
            if l.namespaces.is_empty() { "(no namespaces)".to_string() } else { l.namespaces.join(" ") },
            match (l.state.as_str(), l.owner_pid) {
                ("running", Some(p)) => format!("  (bloatlab lab pid {p})"),
                _ => format!("  (remove: bloatlab lab cleanup --id {})", l.id),
            }
        );
    }
    Ok(0)
}

pub fn run_qdiscs(a: QdiscsArgs) -> Result<i32> {
    let s = crate::lab::probe_qdiscs()?;
    let k = sys::kernel_release();
    if a.json {
        println!("{}", serde_json::json!({"kernel": k, "available": s.available, "missing": s.missing}));
    } else {
        println!("kernel {k}");
        println!("available: {}", s.available.join(" "));
        println!("missing:   {}", if s.missing.is_empty() { "-".into() } else { s.missing.join(" ") });
        if s.missing.iter().any(|m| ["netem", "fq_codel", "codel", "pie", "cake"].contains(&m.as_str())) {
            println!("(missing delay/AQM qdiscs: bloatlab's user-space emulator backend provides delay, loss, CoDel, FQ-CoDel and PIE)");
        }
    }
    Ok(0)
}

fn run_lab_test(a: LabRunArgs) -> Result<i32> {
    let (cfg, queues) = resolve(&a)?;
    sys::require_privileges()?;
    signals::install();
    let say = |s: String| {
        if !a.quiet {
            eprintln!("{s}");
        }
    };
    let t0 = Instant::now();
    let mut lab = match Lab::build(&cfg) {
        Ok(l) => l,
        Err(e) => {
            let sig = signals::pending();
            if sig != 0 {
                eprintln!("bloatlab lab: interrupted by {} while building; removed what was built", signals::name(sig));
                return Ok(signals::exit_code(sig));
            }
            return Err(e);
        }
    };
    let (up, down) = lab.bottleneck_devices();
    say(format!(
        "lab {} built in {:.1} s: client {} -- router -- server {} (+ witness {}); bottleneck {} ({}{}), {} {}, offloads {}, cc {}, kernel {}",
        lab.id,
        t0.elapsed().as_secs_f64(),
        lab.client.v4,
        lab.server.v4,
        lab.witness.v4,
        match cfg.placement {
            Placement::Router => "on the router's egress",
            Placement::Local => "on the senders' own interfaces",
        },
        up.map(|(n, d)| format!("up {n}/{d}")).unwrap_or_else(|| "up unlimited".into()),
        down.map(|(n, d)| format!(", down {n}/{d}")).unwrap_or_else(|| ", down unlimited".into()),
        match (cfg.effective_backend(), cfg.shaper) {
            (Backend::Emulator, _) => "emulator",
            (_, Shaper::Htb) => "htb",
            (_, Shaper::Tbf) => "tbf",
        },
        if cfg.rate_desc(true).0 == cfg.rate_desc(false).0 {
            cfg.rate_desc(true).0
        } else {
            format!("{} up / {} down", cfg.rate_desc(true).0, cfg.rate_desc(false).0)
        },
        cfg.offloads,
        cfg.cc,
        lab.kernel
    ));
    if a.no_run {
        lab.start_servers()?;
        print!("{}", lab.keep());
        return Ok(0);
    }
    let queue_interval = a
        .queue_interval
        .as_ref()
        .map(|s| parse_duration(s).map_err(|e| anyhow!("--queue-interval: {e}")))
        .transpose()?;
    let opts = RunOptions {
        engine_args: a.engine_args.clone(),
        show_engine_output: a.engine_output,
        queue_interval,
        command: std::env::args().collect(),
    };
    let mut results = Vec::new();
    let mut exit = 0;
    let n = queues.len();
    let mut used_labels: Vec<String> = vec![];
    for (i, q) in queues.iter().enumerate() {
        if i > 0 || lab.cfg.queue != *q {
            lab.cfg.queue = q.clone();
            lab.apply_bottleneck()?;
        }
        let label = lab.cfg.queue_label();
        say(format!(
            "run {}/{n}: queue {label} ({}){} ...",
            i + 1,
            match lab.cfg.effective_backend() {
                Backend::Emulator => "emulator",
                _ => "kernel",
            },
            match (lab.cfg.analytic_queue_delay_ms(true), lab.cfg.analytic_queue_delay_ms(false)) {
                (Some(u), Some(d)) if (u - d).abs() > 1e-9 => format!(" (holds {} ms up, {} ms down when full)", table::ms(u), table::ms(d)),
                (Some(x), _) | (None, Some(x)) => format!(" (holds {} ms when full)", table::ms(x)),
                (None, None) => String::new(),
            }
        ));
        let out = match lab.run_test(&opts) {
            Ok(o) => o,
            Err(e) => {
                let sig = signals::pending();
                if sig != 0 {
                    eprintln!("bloatlab lab: {e:#}; lab removed");
                    exit = signals::exit_code(sig);
                    break;
                }
                return Err(e);
            }
        };
        if let Some(base) = &a.json {
            let seen = used_labels.iter().filter(|l| **l == label).count();
            used_labels.push(label.clone());
            let name = if seen == 0 { label.clone() } else { format!("{label}-{}", seen + 1) };
            let p = json_path(base, &name, n);
            let text = serde_json::to_string_pretty(&out.result)? + "\n";
            if p == Path::new("-") {
                print!("{text}");
            } else {
                std::fs::write(&p, text).map_err(|e| anyhow!("cannot write {}: {e}", p.display()))?;
                say(format!("  result written to {}", p.display()));
            }
        }
        results.push(out.result);
        if let Some(f) = &out.failure {
            eprintln!("bloatlab lab: {f}; partial result kept");
            exit = 1;
        }
        if out.interrupted_by != 0 {
            eprintln!("bloatlab lab: interrupted by {}; partial result kept, lab removed", signals::name(out.interrupted_by));
            exit = signals::exit_code(out.interrupted_by);
            break;
        }
    }
    if !a.quiet && !results.is_empty() {
        let rows: Vec<table::Row> = results.iter().flat_map(table::rows).collect();
        let t = table::render(&rows);
        let pi = results[0].metadata.probe_interval_ms;
        let note = format!(
            "latency = RTT of UDP probes to the server every {} ms; added = loaded p50 - idle p50; \
witness added = the same for a third host behind the bottleneck; analytic = queue limit x 1514 B x 8 / rate \
(the delay of a full queue); link use = bytes the bottleneck sent / its rate in the goodput's window; \
max backlog / drops = the bottleneck qdisc during the load",
            table::ms(pi)
        );
        let mut notes = note;
        if let Some(c) = compare_line(&results) {
            notes = format!("{c}\n{notes}");
        }
        for r in &results {
            if let Some(n) = short_local_queue_note(r) {
                notes.push_str(&format!("\nnote: {n}"));
            }
        }
        if a.json.as_deref() == Some(Path::new("-")) {
            eprint!("\n{t}{notes}\n");
        } else {
            print!("\n{t}{notes}\n");
        }
    }
    if a.keep {
        let s = lab.keep();
        if !a.quiet {
            eprint!("{s}");
        }
    } else {
        lab.teardown()?;
    }
    Ok(exit)
}

/// For several single-scenario runs: the largest and smallest added latency side by side.
fn compare_line(results: &[bloatlab_results::TestResult]) -> Option<String> {
    if results.len() < 2 || results.iter().any(|r| r.scenarios.len() != 1) {
        return None;
    }
    let added = |r: &bloatlab_results::TestResult| r.scenarios[0].summary.added_latency_ms;
    let label = |r: &bloatlab_results::TestResult| {
        r.lab.as_ref().and_then(|l| l.config.get("queue")).and_then(|q| q.as_str()).unwrap_or("?").to_string()
    };
    let gp = |r: &bloatlab_results::TestResult| {
        let s = &r.scenarios[0].summary;
        (s.upload_bps + s.download_bps) / 1e6
    };
    let hi = results.iter().filter(|r| added(r).is_some()).max_by(|a, b| added(a).partial_cmp(&added(b)).unwrap())?;
    let lo = results.iter().filter(|r| added(r).is_some()).min_by(|a, b| added(a).partial_cmp(&added(b)).unwrap())?;
    let (h, l) = (added(hi)?, added(lo)?);
    if l <= 0.0 || std::ptr::eq(hi, lo) {
        return None;
    }
    let busy = |r: &bloatlab_results::TestResult| -> String {
        let p = &r.scenarios[0];
        let (role, key) = if p.uploads > 0 { ("bottleneck-up", "rate_up_bps") } else { ("bottleneck-down", "rate_down_bps") };
        r.lab
            .as_ref()
            .and_then(|l| table::link_use(&l.queues, role, p, l.config.get(key)?.as_f64()?))
            .map(|u| format!("{u:.0}%"))
            .unwrap_or_else(|| "-".into())
    };
    Some(format!(
        "{} adds {} ms at the median, {} adds {} ms ({:.0}x), with the link {} vs {} busy (goodput {:.2} vs {:.2} Mbit/s)",
        label(hi),
        table::ms(h),
        label(lo),
        table::ms(l),
        h / l,
        busy(hi),
        busy(lo),
        gp(hi),
        gp(lo)
    ))
}

/// With the bottleneck on the sender's own interface, a TCP sender's queue stays
/// short because of TCP small queues; say so when it happened.
fn short_local_queue_note(r: &bloatlab_results::TestResult) -> Option<String> {
    let lab = r.lab.as_ref()?;
    if lab.config.get("placement").and_then(|p| p.as_str()) != Some("local") {
        return None;
    }
    let spec = lab.config.get("queue_up_spec").filter(|v| !v.is_null()).or(lab.config.get("queue_spec"));
    let limit = spec.and_then(|q| q.get("packets")).and_then(|p| p.as_u64())?;
    let mut maxq = 0;
    for p in r.scenarios.iter().filter(|p| p.uploads + p.downloads > 0) {
        maxq = maxq.max(table::queue_in_phase(&lab.queues, "bottleneck", p).1);
    }
    (maxq * 4 < limit).then(|| {
        format!(
            "the sender's own queue never exceeded {maxq} of its {limit} packets: TCP small queues (Linux >= 3.6) \
             limit the bytes a TCP socket keeps in its own host's qdisc to a few packets, so a local txqueuelen \
             no longer bloats for TCP; the same queue on the router (--bottleneck router) does (docs/lab.md)"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        a: LabArgs,
    }

    fn parse(v: &[&str]) -> Result<(LabConfig, Vec<QueueSpec>)> {
        let mut argv = vec!["lab"];
        argv.extend_from_slice(v);
        let t = T::try_parse_from(argv).map_err(|e| anyhow!("{e}"))?;
        resolve(&t.a.run)
    }

    #[test]
    fn defaults_are_the_demo() {
        let (c, q) = parse(&[]).unwrap();
        assert_eq!(q, vec![QueueSpec::Fifo { packets: 1000 }, QueueSpec::Fifo { packets: 10 }]);
        assert_eq!(c.rate_up, Some(Rate::mbit(10.0)));
        assert_eq!(c.placement, Placement::Router);
        assert_eq!(c.offloads, OnOff::Off);
        assert_eq!(c.cc, "cubic");
        assert_eq!(c.analytic_queue_delay_ms(true).map(|x| (x * 10.0).round() / 10.0), Some(1211.2));
    }

    #[test]
    fn issue_examples_parse() {
        let (_, q) = parse(&["--rate", "10mbit", "--queue", "fifo:1000", "--", "--scenarios", "1u0d,1u1d"]).unwrap();
        assert_eq!(q.len(), 1);
        let (c, q) = parse(&["--rate-up", "1mbit", "--rate-down", "20mbit", "--queue", "bfifo:64k", "--bottleneck", "router"]).unwrap();
        assert_eq!(c.rate_up.unwrap().bps, 1_000_000);
        assert_eq!(c.rate_down.unwrap().bps, 20_000_000);
        assert_eq!(q, vec![QueueSpec::Bfifo { bytes: 65536 }]);
        let (c, q) = parse(&["--bottleneck", "local", "--txqueuelen", "100"]).unwrap();
        assert_eq!(c.placement, Placement::Local);
        assert_eq!(q, vec![QueueSpec::Fifo { packets: 100 }]);
        let (c, _) = parse(&["--qdisc", "fq_codel limit 100"]).unwrap();
        assert_eq!(c.qdisc.as_deref(), Some("fq_codel limit 100"));
        assert!(parse(&["--keep"]).is_ok());
        let (c, q) = parse(&["--queue", "fq_codel,codel:target=5ms", "--delay", "40ms"]).unwrap();
        assert_eq!(c.effective_backend(), Backend::Emulator);
        assert_eq!(q.len(), 2);
        let (c, _) = parse(&["--queue", "fifo:10"]).unwrap();
        assert_eq!(c.effective_backend(), Backend::Kernel);
        let t = T::try_parse_from(["lab", "cleanup", "--id", "1a2b3c"]).unwrap();
        assert!(matches!(t.a.cmd, Some(LabCmd::Cleanup(_))));
    }

    #[test]
    fn queues_per_direction() {
        let (c, q) = parse(&["--queue-up", "fifo:500", "--queue-down", "bfifo:64k"]).unwrap();
        // both directions set: one run (the default list has nothing left to vary)
        assert_eq!(q.len(), 1);
        assert_eq!(c.queue_of(true), &QueueSpec::Fifo { packets: 500 });
        assert_eq!(c.queue_of(false), &QueueSpec::Bfifo { bytes: 65536 });
        assert_eq!(c.queue_label(), "up-fifo:500+down-bfifo:65536");
        assert_eq!(c.analytic_queue_delay_ms(true).map(|x| x.round()), Some(606.0));
        assert_eq!(c.analytic_queue_delay_ms(false).map(|x| (x * 10.0).round() / 10.0), Some(52.4));
        assert_eq!(c.effective_backend(), Backend::Kernel);
        // one direction overridden: the other keeps --queue
        let (c, _) = parse(&["--queue", "fifo:100", "--queue-down", "fifo:10"]).unwrap();
        assert_eq!((c.queue_of(true), c.queue_of(false)), (&QueueSpec::Fifo { packets: 100 }, &QueueSpec::Fifo { packets: 10 }));
        // one direction set: the --queue list (here the default) varies the other
        let (c, q) = parse(&["--queue-down", "fifo:10"]).unwrap();
        assert_eq!((q.len(), c.queue_of(false)), (2, &QueueSpec::Fifo { packets: 10 }));
        // the same queue both ways is labelled as one
        let (c, _) = parse(&["--queue", "fifo:100", "--queue-down", "fifo:100"]).unwrap();
        assert_eq!(c.queue_label(), "fifo:100");
        // an AQM in one direction moves the lab to the emulator, which gets each direction's queue
        let (c, _) = parse(&["--queue", "fifo:100", "--queue-up", "codel"]).unwrap();
        assert_eq!(c.effective_backend(), Backend::Emulator);
        let e = c.emulator_config().unwrap();
        assert_eq!(e.up.queue.kind(), "codel");
        assert_eq!(e.down.queue.kind(), "pfifo");
    }

    #[test]
    fn bad_input_is_explained() {
        let e = |v: &[&str]| format!("{:#}", parse(v).unwrap_err());
        assert!(e(&["--queue-up", "red"]).contains("--queue-up"));
        assert!(e(&["--queue-up", "fifo:1", "--queue-down", "fifo:2", "--queue", "fifo:3"]).contains("nothing left"));
        assert!(e(&["--queue-down", "fq_codel", "--backend", "kernel"]).contains("--queue-down fq_codel"));
        assert!(e(&["--queue-up", "fifo:10", "--txqueuelen", "10"]).contains("--queue-up"));
        assert!(e(&["--queue-up", "fifo:10", "--qdisc", "sfq"]).contains("--qdisc"));
        assert!(e(&["--rate", "fast"]).contains("accepted forms"));
        assert!(e(&["--queue", "red"]).contains("accepted forms"));
        assert!(e(&["--queue", "fq_codel", "--backend", "kernel"]).contains("emulator"));
        assert!(e(&["--queue", "fq_codel", "--bottleneck", "local"]).contains("kernel backend"));
        assert!(e(&["--delay", "20ms", "--qdisc", "sfq", "--backend", "emulator"]).contains("--qdisc"));
        assert!(e(&["--txqueuelen", "5", "--queue", "fifo:10"]).contains("txqueuelen"));
        assert!(e(&["--qdisc", "sfq", "--queue", "fifo:10"]).contains("--qdisc"));
        assert!(e(&["--", "--json", "x"]).contains("--json"));
        assert!(e(&["--id", "xyz"]).contains("hex"));
        assert!(e(&["--rate", "none"]).contains("no bottleneck"));
        assert!(e(&["--jitter", "5ms"]).contains("--delay"));
        assert!(e(&["--json", "-"]).contains("one result"));
    }

    #[test]
    fn json_names() {
        assert_eq!(json_path(Path::new("out.json"), "fifo:10", 1), PathBuf::from("out.json"));
        assert_eq!(json_path(Path::new("d/out.json"), "fifo:10", 2), PathBuf::from("d/out.fifo-10.json"));
        assert_eq!(json_path(Path::new("out"), "bfifo:65536", 2), PathBuf::from("out.bfifo-65536.json"));
    }
}
