//! `bloatlab lab` command line: parsed here into the model's [`LabConfig`]
//! (plus the queues to run and the test options after `--`), then run by
//! the lab crate.
use crate::options::OptionArgs;
use anyhow::{anyhow, bail, Result};
use bloatlab_host::signals;
use bloatlab_lab::progress::Progress;
use bloatlab_lab::{state, sys, RunOptions, Session};
use bloatlab_report::{fmt::ms, lab as table};
use bloatlab_model::{lab_option, Backend, LabConfig, Placement, QueueSpec, Shaper};
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
#[command(after_help = "Without --id or --all, removes only labs left over by a bloatlab lab that died; \
labs kept with --keep stay until named. A lab whose bloatlab lab still runs is never touched.")]
pub struct CleanupArgs {
    /// Only this lab (6 hex digits, as in the namespace names blab-ID-ROLE), kept or not; repeatable.
    #[arg(long = "id")]
    pub ids: Vec<String>,
    /// Every lab whose bloatlab lab is gone, including the ones kept with --keep.
    #[arg(long, conflicts_with = "ids")]
    pub all: bool,
    /// List what would be removed; remove nothing.
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Args, Debug)]
pub struct QdiscsArgs {
    /// Print JSON {"kernel","available","missing"}.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct LabRunArgs {
    /// The link: rate, queue, delay, ... (the model's LAB_OPTIONS).
    #[command(flatten)]
    pub link: OptionArgs<LabConfig>,
    /// Port of the bloatlab servers inside the lab.
    #[arg(long, default_value_t = bloatlab_model::DEFAULT_PORT, value_parser = super::server_port)]
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
    /// Show bloatlab test's own output too.
    #[arg(long)]
    pub engine_output: bool,
    /// No progress lines and no table (errors only).
    #[arg(long)]
    pub quiet: bool,
    /// Put a home router between the client and the line and run `bloatlab
    /// tune` on it: the line before (the quick profile), the search for the
    /// shaper rate, the line after; --json writes the tune's document. See docs/tune.md.
    /// With --no-run: the lab with its home router, for running `bloatlab
    /// tune` in it by hand.
    #[arg(long)]
    pub tune: bool,
    /// `bloatlab tune`'s search options (with --tune).
    #[command(flatten)]
    pub tune_opts: crate::options::LabTuneArgs,
    /// Options passed to `bloatlab test` (after `--`).
    #[arg(last = true, value_name = "TEST_OPTIONS")]
    pub engine_args: Vec<String>,
}

/// Resolve the command line into the lab run it asks for, checked before
/// anything is built.
pub fn resolve(a: &LabRunArgs) -> Result<LabRun> {
    let o = &a.link.0;
    let (mut cfg, queues) = o.resolve(LabConfig { id: a.id.clone(), port: a.port, ..Default::default() }).map_err(|e| anyhow!(e))?;
    // tune shapes a home router's WAN; with the bottleneck on the client's
    // own interface it tunes that queue instead (tune --local), no router
    cfg.home_router = a.tune && cfg.placement != bloatlab_model::Placement::Local;
    let tune = match a.tune {
        true => {
            if !a.engine_args.is_empty() {
                bail!("--tune runs tune's own tests (the quick profile and its search steps): no `bloatlab test` options after `--`");
            }
            if o.get(lab_option("queue").expect("the queue option")).is_some_and(|q| q.len() > 1) {
                bail!("--tune tunes one line: give one --queue");
            }
            let mut t = bloatlab_model::TuneConfig::default();
            a.tune_opts.0.apply(&mut t).map_err(|e| anyhow!(e))?;
            t.json = a.json.clone();
            Some(t)
        }
        false if !a.tune_opts.0.is_empty() => bail!("{} only go with --tune", a.tune_opts.0.args().join(" ")),
        false => None,
    };
    // no queue chosen: the demo's two
    let queues = if queues.is_empty() { bloatlab_model::lab::DEMO_QUEUES.to_vec() } else { queues };
    cfg.queue = queues[0].clone();
    let test = super::test::parse_pass_through(&a.engine_args, "bloatlab lab")?;
    for q in &queues {
        let c = LabConfig { queue: q.clone(), ..cfg.clone() };
        bloatlab_lab::validate(&c)?;
        bloatlab_lab::check_test_options(&c, &test)?;
    }
    if a.json.as_deref() == Some(std::path::Path::new("-")) && queues.len() > 1 {
        bail!("--json - writes one result; with several queues give a file name (one file per queue)");
    }
    Ok(LabRun {
        cfg,
        queues,
        run: RunOptions {
            test,
            engine_args: a.engine_args.clone(),
            show_engine_output: a.engine_output,
            command: std::env::args().collect(),
            progress: None,
            config: None,
        },
        json: a.json.clone(),
        keep: a.keep,
        no_run: a.no_run,
        quiet: a.quiet,
        tune,
    })
}

pub fn run_lab(args: LabArgs) -> Result<i32> {
    match args.cmd {
        Some(LabCmd::Cleanup(c)) => run_cleanup(&state::CleanupSelection { ids: c.ids, all: c.all, dry_run: c.dry_run }),
        Some(LabCmd::Qdiscs(q)) => run_qdiscs(q.json),
        Some(LabCmd::List(l)) => run_list(l.json),
        None => run(&resolve(&args.run)?),
    }
}

/// One `bloatlab lab` run: a lab, the queues to run it with (one test each),
/// and what to do with the results.
#[derive(Debug, Clone)]
pub struct LabRun {
    /// The lab; `cfg.queue` is replaced by each of `queues` in turn.
    pub cfg: LabConfig,
    pub queues: Vec<QueueSpec>,
    pub run: RunOptions,
    /// Result JSON; with several queues FILE's stem + ".QUEUE.json" each; `-` = stdout.
    pub json: Option<PathBuf>,
    pub keep: bool,
    /// Build the lab and start the servers, run no test (implies keep).
    pub no_run: bool,
    pub quiet: bool,
    /// `--tune`: tune the home router instead of running the test(s).
    pub tune: Option<bloatlab_model::TuneConfig>,
}

/// File name for run `i` of `n`: the path itself for one run, else `STEM.QUEUE.EXT`.
fn json_path(base: &Path, label: &str, n: usize) -> PathBuf {
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

/// `bloatlab lab cleanup [--id ID ...] [--all] [--dry-run]`.
fn run_cleanup(sel: &state::CleanupSelection) -> Result<i32> {
    for id in &sel.ids {
        if !state::valid_id(id) {
            bail!("--id `{id}` is not a lab id (6 hex digits, as in blab-1a2b3c-client)");
        }
    }
    sys::require_privileges()?;
    let rep = state::cleanup(sel)?;
    if rep.lines.is_empty() {
        println!("nothing to clean up (no blab-* namespaces or lab records)");
    }
    for l in &rep.lines {
        println!("{l}");
    }
    Ok(0)
}

/// `bloatlab lab list [--json]`.
fn run_list(json: bool) -> Result<i32> {
    let labs = state::list()?;
    if json {
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
        if l.state == "kept" {
            for p in &l.processes {
                println!("        {} {}: {}", if p.running { "running" } else { "gone   " }, p.pid, p.what);
            }
        }
    }
    Ok(0)
}

/// `bloatlab lab qdiscs [--json]`.
fn run_qdiscs(json: bool) -> Result<i32> {
    let s = bloatlab_lab::probe_qdiscs()?;
    let k = sys::kernel_release();
    if json {
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

/// `bloatlab lab`: build the lab, run one test per queue, print the table.
fn run(a: &LabRun) -> Result<i32> {
    for q in &a.queues {
        bloatlab_lab::validate(&LabConfig { queue: q.clone(), ..a.cfg.clone() })?;
    }
    if a.json.as_deref() == Some(Path::new("-")) && a.queues.len() > 1 {
        bail!("--json - writes one result; with several queues give a file name (one file per queue)");
    }
    sys::require_privileges()?;
    signals::install();
    let say = |s: String| {
        if !a.quiet {
            eprintln!("{s}");
        }
    };
    let t0 = Instant::now();
    let mut session = if a.keep { Session::keeping_failed() } else { Session::new() };
    let first = LabConfig { queue: a.queues.first().cloned().unwrap_or_else(|| a.cfg.queue.clone()), ..a.cfg.clone() };
    if let Err(e) = session.prepare(&first) {
        let sig = signals::pending();
        if sig != 0 {
            eprintln!("bloatlab lab: interrupted by {} while building; removed what was built", signals::name(sig));
            return Ok(signals::exit_code(sig));
        }
        return Err(e);
    }
    say(banner(session.lab().expect("prepared"), t0));
    if a.no_run {
        let lab = session.lab().expect("prepared");
        lab.start_servers()?;
        lab.start_kept_emulator()?;
        print!("{}", lab.keep());
        return Ok(0);
    }
    if let Some(t) = &a.tune {
        return run_tune(a, t, &mut session);
    }
    let mut results = Vec::new();
    let mut exit = 0;
    let n = a.queues.len();
    let progress = Progress::new(a.quiet);
    let mut used_labels: Vec<String> = vec![];
    for (i, q) in a.queues.iter().enumerate() {
        let cfg = LabConfig { queue: q.clone(), ..a.cfg.clone() };
        let label = cfg.queue_label();
        say(format!(
            "run {}/{n}: queue {label} ({}){} ...",
            i + 1,
            bloatlab_lab::backend(&cfg).1,
            match (cfg.analytic_queue_delay_ms(true), cfg.analytic_queue_delay_ms(false)) {
                (Some(u), Some(d)) if (u - d).abs() > 1e-9 => format!(" (holds {} ms up, {} ms down when full)", ms(u), ms(d)),
                (Some(x), _) | (None, Some(x)) => format!(" (holds {} ms when full)", ms(x)),
                (None, None) => String::new(),
            }
        ));
        let run = bloatlab_lab::RunOptions { progress: progress.for_run(&format!("run {}/{n} {label}", i + 1)), ..a.run.clone() };
        let out = session.run(&cfg, &run);
        progress.clear();
        let out = match out {
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
        let mut written: Option<PathBuf> = None;
        if let Some(base) = &a.json {
            let seen = used_labels.iter().filter(|l| **l == label).count();
            used_labels.push(label.clone());
            let name = if seen == 0 { label.clone() } else { format!("{label}-{}", seen + 1) };
            let p = json_path(base, &name, n);
            let text = serde_json::to_string_pretty(&out.result)? + "\n";
            if p == Path::new("-") {
                print!("{text}");
                written = Some(PathBuf::from("stdout"));
            } else {
                std::fs::write(&p, text).map_err(|e| anyhow!("cannot write {}: {e}", p.display()))?;
                say(format!("  result written to {}", p.display()));
                written = Some(p.clone());
            }
        }
        results.push(out.result);
        // say where the partial result is, or that only the table shows it
        let kept = match &written {
            Some(p) => format!("partial result kept in {}", p.display()),
            None => "partial result in the table below (no --json: no file written)".into(),
        };
        if let Some(f) = &out.failure {
            eprintln!("bloatlab lab: {f}; {kept}");
            exit = 1;
        }
        if out.interrupted_by != 0 {
            eprintln!("bloatlab lab: interrupted by {}; {kept}, lab removed", signals::name(out.interrupted_by));
            exit = signals::exit_code(out.interrupted_by);
            break;
        }
    }
    if !a.quiet && !results.is_empty() {
        let text = table::report(&results);
        if a.json.as_deref() == Some(Path::new("-")) {
            eprint!("\n{text}\n");
        } else {
            print!("\n{text}\n");
        }
    }
    if a.keep {
        if let Some(lab) = session.lab() {
            lab.start_kept_emulator()?;
            let s = lab.keep();
            if !a.quiet {
                eprint!("{s}");
            }
        }
    } else {
        session.finish()?;
    }
    Ok(exit)
}

/// The line printed once the lab is up.
fn banner(lab: &bloatlab_lab::Lab, t0: Instant) -> String {
    let cfg = &lab.cfg;
    let (up, down) = lab.bottleneck_devices();
    format!(
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
        match (bloatlab_lab::backend(cfg).0, cfg.shaper) {
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
    )
}



#[cfg(test)]
mod tests {
    use super::*;
    use bloatlab_model::{OnOff, Rate};
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
        resolve(&t.a.run).map(|r| (r.cfg, r.queues))
    }

    #[test]
    fn json_names() {
        use std::path::PathBuf;
        assert_eq!(json_path(Path::new("out.json"), "fifo:10", 1), PathBuf::from("out.json"));
        assert_eq!(json_path(Path::new("d/out.json"), "fifo:10", 2), PathBuf::from("d/out.fifo-10.json"));
        assert_eq!(json_path(Path::new("out"), "bfifo:65536", 2), PathBuf::from("out.bfifo-65536.json"));
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
        assert_eq!(c.kernel_qdisc().map(|q| q.label()).as_deref(), Some("fq_codel limit 100"));
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
        let e = bloatlab_lab::emulator_config(&c).unwrap();
        assert_eq!(e.up.queue.kind(), "codel");
        assert_eq!(e.down.queue.kind(), "fifo");
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
        // every mistake is caught before anything is built
        assert!(e(&["--delay", "20"]).contains("needs a unit"));
        assert!(e(&["--", "--duration", "10ms"]).contains("--duration"));
        assert!(e(&["--", "--scenarios", "40u0d"]).contains("at most 32"));
        assert!(e(&["--rate", "10mbps"]).contains("ambiguous"));
    }

}


/// `bloatlab lab --tune`: tune the home router of the lab just built.
fn run_tune(a: &LabRun, t: &bloatlab_model::TuneConfig, session: &mut Session) -> Result<i32> {
    let lab = session.lab().expect("prepared");
    let progress = Progress::new(a.quiet);
    let quiet = a.quiet;
    let mut say = |s: &str| {
        progress.clear();
        if !quiet {
            eprintln!("tune: {s}");
        }
    };
    let r = lab.tune(t, progress.for_run("tune"), &mut say);
    progress.clear();
    let doc = match r {
        Ok(d) => d,
        Err(e) => {
            let sig = signals::pending();
            if sig != 0 {
                eprintln!("bloatlab lab: {e:#}; lab removed");
                return Ok(signals::exit_code(sig));
            }
            return Err(e);
        }
    };
    let cfg = lab.tune_config(t)?;
    super::tune::finish(&cfg, &doc)?;
    if a.keep {
        print!("{}", lab.keep());
    }
    Ok(0)
}
