//! What `bloatlab lab` does, on typed configurations: run the lab over a
//! list of queues (a one-axis sweep through [`Session`]), print its table,
//! write the results; and the `cleanup`, `list` and `qdiscs` commands.
use crate::run::RunOptions;
use crate::session::Session;
use bloatlab_host::signals;
use crate::{state, sys, table};
use anyhow::{anyhow, bail, Result};
use bloatlab_model::{Backend, LabConfig, Placement, QueueSpec, Shaper};
use std::path::{Path, PathBuf};
use std::time::Instant;

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

/// `bloatlab lab cleanup [--id ID ...] [--all] [--dry-run]`.
pub fn run_cleanup(sel: &state::CleanupSelection) -> Result<i32> {
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
pub fn run_list(json: bool) -> Result<i32> {
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
pub fn run_qdiscs(json: bool) -> Result<i32> {
    let s = crate::lab::probe_qdiscs()?;
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
pub fn run_lab(a: &LabRun) -> Result<i32> {
    for q in &a.queues {
        crate::lab::validate(&LabConfig { queue: q.clone(), ..a.cfg.clone() })?;
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
            crate::lab::backend(&cfg).1,
            match (cfg.analytic_queue_delay_ms(true), cfg.analytic_queue_delay_ms(false)) {
                (Some(u), Some(d)) if (u - d).abs() > 1e-9 => format!(" (holds {} ms up, {} ms down when full)", table::ms(u), table::ms(d)),
                (Some(x), _) | (None, Some(x)) => format!(" (holds {} ms when full)", table::ms(x)),
                (None, None) => String::new(),
            }
        ));
        let run = crate::RunOptions { progress: progress.for_run(&format!("run {}/{n} {label}", i + 1)), ..a.run.clone() };
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

/// A live progress display for lab runs: a bar on a terminal, a plain line
/// every 5 s otherwise; nothing when quiet. `label` names the run.
pub struct Progress {
    bar: Option<indicatif::ProgressBar>,
    quiet: bool,
}

impl Progress {
    pub fn new(quiet: bool) -> Progress {
        use std::io::IsTerminal;
        let bar = (!quiet && std::io::stderr().is_terminal()).then(|| {
            let b = indicatif::ProgressBar::new(1000);
            b.set_style(
                indicatif::ProgressStyle::with_template("  {prefix} [{bar:24}] {msg}").expect("a valid template").progress_chars("=> "),
            );
            b
        });
        Progress { bar, quiet }
    }

    /// The callback for one run labelled `label` (e.g. "run 1/2 fifo:1000").
    pub fn for_run(&self, label: &str) -> Option<crate::ProgressFn> {
        if self.quiet {
            return None;
        }
        let bar = self.bar.clone();
        let label = label.to_string();
        let last_line = std::sync::Mutex::new(Instant::now());
        Some(crate::ProgressFn(std::sync::Arc::new(move |p: &crate::LabProgress| {
            let l = &p.live;
            let rate = |bps: f64| if bps > 0.0 { format!("{:.2} Mbit/s", bps / 1e6) } else { "-".into() };
            let msg = format!(
                "{} {}/{} {:.1}/{:.0} s  up {}  down {}  rtt {:.1} ms{}",
                l.phase,
                l.phase_index + 1,
                l.phases,
                l.elapsed_s.min(l.phase_len_s),
                l.phase_len_s,
                rate(l.up_bps),
                rate(l.down_bps),
                l.rtt_ms,
                p.backlog_packets.map(|b| format!("  backlog {b} pkts")).unwrap_or_default()
            );
            match &bar {
                Some(b) => {
                    let frac = (l.phase_index as f64 + (l.elapsed_s / l.phase_len_s.max(1e-9)).min(1.0)) / l.phases.max(1) as f64;
                    b.set_prefix(label.clone());
                    b.set_position((frac * 1000.0) as u64);
                    b.set_message(msg);
                }
                None => {
                    let mut t = last_line.lock().expect("progress lock");
                    if t.elapsed() >= std::time::Duration::from_secs(5) {
                        *t = Instant::now();
                        eprintln!("  {label}: {msg}");
                    }
                }
            }
        })))
    }

    /// Clear the bar (before printing results).
    pub fn clear(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
            b.reset();
        }
    }
}

/// The line printed once the lab is up.
fn banner(lab: &crate::Lab, t0: Instant) -> String {
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
        match (crate::lab::backend(cfg).0, cfg.shaper) {
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

    #[test]
    fn json_names() {
        assert_eq!(json_path(Path::new("out.json"), "fifo:10", 1), PathBuf::from("out.json"));
        assert_eq!(json_path(Path::new("d/out.json"), "fifo:10", 2), PathBuf::from("d/out.fifo-10.json"));
        assert_eq!(json_path(Path::new("out"), "bfifo:65536", 2), PathBuf::from("out.bfifo-65536.json"));
    }
}
