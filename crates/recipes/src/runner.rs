//! Running a recipe: expand the grid into points, run each (a lab run through
//! the lab's typed configuration and [`bloatlab_lab::Session`], which keeps
//! the lab up while only the queue changes; or an in-process pacing run),
//! and write the results folder:
//!
//! ```text
//! <out>/<name>-<UTC stamp>/
//!   recipe.toml        the recipe as run (re-runnable)
//!   points/NNN-<k=v>.json   one result per point (bloatlab-result / bloatlab-pacing)
//!   points/NNN-<k=v>.log    the point's lab and test configuration, and what went wrong
//!   index.json         points, parameters, status, files, timings
//!   results.csv        one row per point and phase, every metric
//!   table.md           the printed table(s)
//!   *.svg              plots
//! ```
use crate::pacing::{self, PacingConfig, PacingResult};
use crate::params::{self, RecipeKind, TimerSpec, Typed, Value};
use crate::recipe::Recipe;
use crate::rows;
use crate::units::utc_now_strings;
use bloatlab_report::fmt::hms as fmt_hms;
use bloatlab_lab::{signals, Session};
use bloatlab_results::TestResult;
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

pub use crate::points::{Point, PointOutcome};

/// Expand the grid (first axis outermost) into points, repetitions
/// interleaved (all combinations once, then again), optionally shuffled.
pub fn plan(r: &Recipe, shuffle: bool, seed: u64) -> Vec<Point> {
    let mut combos: Vec<Vec<(String, String)>> = vec![vec![]];
    for axis in &r.grid {
        let mut next = vec![];
        for c in &combos {
            for v in &axis.values {
                let mut c2 = c.clone();
                c2.push((axis.name.clone(), v.text.clone()));
                next.push(c2);
            }
        }
        combos = next;
    }
    let mut pts = vec![];
    for rep in 1..=r.repeat {
        for (i, c) in combos.iter().enumerate() {
            pts.push(Point { index: 0, combo: i, rep, params: c.clone() });
        }
    }
    if shuffle {
        use rand::seq::SliceRandom;
        use rand::SeedableRng;
        pts.shuffle(&mut rand::rngs::SmallRng::seed_from_u64(seed));
    }
    for (i, p) in pts.iter_mut().enumerate() {
        p.index = i + 1;
    }
    pts
}

/// All parameter values of a point: fixed settings, then its grid values.
pub fn point_values(r: &Recipe, p: &Point) -> Vec<(String, Value)> {
    let mut out: Vec<(String, Value)> = r.settings.clone();
    for (k, text) in &p.params {
        let axis = r.grid.iter().find(|a| &a.name == k).expect("grid axis");
        let v = axis.values.iter().find(|v| &v.text == text).expect("grid value").clone();
        out.push((k.clone(), v));
    }
    out
}

fn get<'a>(vals: &'a [(String, Value)], k: &str) -> Option<&'a Value> {
    vals.iter().find(|(n, _)| n == k).map(|(_, v)| v)
}

/// What a lab point runs, in one line: the lab's link, and the test as the
/// `bloatlab test` options that differ from that command's defaults (the
/// lab's own defaults included).
pub fn describe_lab_point(pt: &params::LabPoint) -> String {
    let c = &pt.lab;
    let mut t = c.test_defaults();
    let checked = bloatlab_lab::validate(c)
        .and_then(|_| pt.test.apply(&mut t).map_err(anyhow::Error::msg))
        .and_then(|_| bloatlab_lab::check_test_options(c, &pt.test));
    if let Err(e) = checked {
        return format!("invalid: {e:#}");
    }
    // the link as `bloatlab lab` options: those that differ from the lab's
    // defaults, and the rate and queue always
    // the rate(s) and the queue first, then every other option that differs
    // from the lab's defaults
    let mut rest = bloatlab_model::options::differing_args(c);
    let mut i = 0;
    while i < rest.len() {
        if ["--rate", "--rate-up", "--rate-down"].contains(&rest[i].as_str()) {
            rest.drain(i..(i + 2).min(rest.len()));
        } else {
            i += 1;
        }
    }
    let rate = |r: Option<bloatlab_model::Rate>| r.map(|r| bloatlab_model::units::fmt_rate_tc(r.bps)).unwrap_or_else(|| "none".into());
    let mut lab = if c.rate_up == c.rate_down {
        vec!["--rate".to_string(), rate(c.rate_up)]
    } else {
        vec!["--rate-up".to_string(), rate(c.rate_up), "--rate-down".to_string(), rate(c.rate_down)]
    };
    if !rest.iter().any(|a| ["--queue", "--qdisc", "--txqueuelen"].contains(&a.as_str())) {
        lab.extend(["--queue".to_string(), c.queue.label()]);
    }
    lab.extend(rest);
    format!(
        "lab {} ({} backend); test {}",
        lab.join(" "),
        bloatlab_lab::backend(c).0,
        bloatlab_model::options::differing_args(&t).join(" ")
    )
}

/// Expected wall time of a point, seconds.
pub fn estimate_point_s(r: &Recipe, p: &Point) -> f64 {
    estimate_s(r, &point_values(r, p))
}

/// Expected wall time of a point, seconds (before any point has run).
fn estimate_s(r: &Recipe, vals: &[(String, Value)]) -> f64 {
    match r.kind {
        RecipeKind::Pacing => get(vals, "duration").and_then(|v| v.num).map(|ns| ns / 1e9).unwrap_or(2.0) + 0.2,
        RecipeKind::Lab => {
            let Ok(pt) = params::lab_point(vals) else { return 0.0 };
            let mut t = pt.lab.test_defaults();
            if pt.test.apply(&mut t).is_err() {
                return 0.0;
            }
            // a ramp usually stops after 3 or 4 steps per direction; an RPM
            // stage takes about 12 s (its ramp-up and stable intervals)
            let n = match t.ramp {
                Some(r) => (r.max_steps() as f64 * 0.6).round(),
                None => t.scenarios.len() as f64,
            };
            t.idle.as_secs_f64() + n * (t.duration + t.pause).as_secs_f64() + 12.0 * t.rpm.len() as f64 + 4.0
        }
    }
}

/// The analytic delay of the point's full upload queue, ms (the model's one rule).
pub fn analytic_delay_ms(vals: &[(String, Value)]) -> Option<f64> {
    params::lab_point(vals).ok()?.lab.analytic_queue_delay_ms(true)
}

pub struct RunOptions {
    /// Parent folder for the results folder.
    pub out_root: PathBuf,
    pub shuffle: bool,
    pub seed: u64,
    pub dry_run: bool,
    pub version: String,
}

#[derive(Serialize)]
struct IndexEntry<'a> {
    index: usize,
    combo: usize,
    rep: u32,
    params: &'a [(String, String)],
    status: &'a str,
    file: &'a Option<String>,
    elapsed_s: f64,
}

pub fn interrupted() -> bool {
    signals::pending() != 0
}

fn slug(p: &Point) -> String {
    let mut s = format!("{:03}", p.index);
    for (k, v) in &p.params {
        s.push('-');
        s.push_str(k);
        s.push('=');
        s.push_str(v);
    }
    if p.rep > 1 || s.len() > 100 {
        s.push_str(&format!("-rep{}", p.rep));
    }
    let mut s: String = s.chars().map(|c| if c.is_ascii_alphanumeric() || "-=._".contains(c) { c } else { '_' }).collect();
    s.truncate(120);
    s
}

/// The results of a whole run.
pub struct RunReport {
    pub dir: PathBuf,
    pub outcomes: Vec<PointOutcome>,
    pub interrupted: bool,
    pub table: String,
}

fn describe(p: &Point) -> String {
    let mut s = p.params.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ");
    if s.is_empty() {
        s = "(single point)".into();
    }
    if p.rep > 1 {
        s.push_str(&format!(" rep {}", p.rep));
    }
    s
}

/// Run every point of the recipe and write the results folder.
pub fn run(r: &Recipe, opts: &RunOptions) -> anyhow::Result<RunReport> {
    let points = plan(r, opts.shuffle, opts.seed);
    let total = points.len();
    let estimates: Vec<f64> = points.iter().map(|p| estimate_s(r, &point_values(r, p))).collect();
    let est_total: f64 = estimates.iter().sum();
    if opts.dry_run {
        let mut o = std::io::stdout().lock();
        let mode = if r.full { " (full)" } else if r.full_note.is_some() { " (short mode)" } else { "" };
        let mut lines = vec![format!("recipe {}{mode}: {} point(s), about {}", r.name, total, fmt_hms(est_total))];
        for p in &points {
            let vals = point_values(r, p);
            lines.push(match r.kind {
                RecipeKind::Lab => format!(
                    "[{}/{}] {}: {}",
                    p.index,
                    total,
                    describe(p),
                    params::lab_point(&vals).map(|pt| describe_lab_point(&pt)).unwrap_or_else(|e| format!("invalid: {e}"))
                ),
                RecipeKind::Pacing => format!(
                    "[{}/{}] pacing {}",
                    p.index,
                    total,
                    vals.iter().map(|(k, v)| format!("{k}={}", v.text)).collect::<Vec<_>>().join(" ")
                ),
            });
        }
        for l in lines {
            if writeln!(o, "{l}").is_err() {
                break; // closed pipe (e.g. | head)
            }
        }
        return Ok(RunReport { dir: PathBuf::new(), outcomes: vec![], interrupted: false, table: String::new() });
    }

    let (stamp, _) = utc_now_strings();
    std::fs::create_dir_all(&opts.out_root)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", opts.out_root.display()))?;
    let mut dir = opts.out_root.join(format!("{}-{stamp}", r.name));
    let mut n = 2;
    while dir.exists() {
        dir = opts.out_root.join(format!("{}-{stamp}-{n}", r.name));
        n += 1;
    }
    std::fs::create_dir_all(dir.join("points"))?;
    std::fs::write(dir.join("recipe.toml"), &r.source)?;
    signals::install();
    let mut session = Session::new();
    let progress = bloatlab_lab::progress::Progress::new(false);
    eprintln!(
        "bloatlab recipe {}: {} point(s){}, about {}; results in {}",
        r.name,
        total,
        if r.full { " (full)" } else if r.full_note.is_some() { " (short mode; --full for the complete run)" } else { "" },
        fmt_hms(est_total),
        dir.display()
    );

    let started = Instant::now();
    let mut outcomes: Vec<PointOutcome> = vec![];
    let mut was_interrupted = false;
    for (i, p) in points.iter().enumerate() {
        if interrupted() {
            was_interrupted = true;
            break;
        }
        let vals = point_values(r, p);
        let done_s = started.elapsed().as_secs_f64();
        // time left: measured pace once points have finished, estimates before
        let left = if outcomes.is_empty() {
            estimates[i..].iter().sum::<f64>()
        } else {
            let ratio = done_s / estimates[..i].iter().sum::<f64>().max(1e-9);
            estimates[i..].iter().sum::<f64>() * ratio
        };
        eprintln!(
            "[{:>w$}/{total}] {}  (elapsed {}, ~{} left)",
            p.index,
            describe(p),
            fmt_hms(done_s),
            fmt_hms(left),
            w = total.to_string().len()
        );
        let t = Instant::now();
        let name = slug(p);
        let out = match r.kind {
            RecipeKind::Lab => run_lab_point(&mut session, &progress, p, &vals, &dir, &name),
            RecipeKind::Pacing => run_pacing_point(p, &vals, &dir, &name, opts),
        };
        let mut o = out;
        o.elapsed_s = t.elapsed().as_secs_f64();
        eprintln!("      {}{} in {:.1}s", o.status, o.detail, o.elapsed_s);
        let fatal = o.status.starts_with("invalid");
        outcomes.push(o);
        write_index(&dir, r, &outcomes)?;
        if fatal {
            eprintln!("bloatlab: stopping: the lab refused this point's configuration (see the .log file above)");
            break;
        }
        if interrupted() {
            was_interrupted = true;
            break;
        }
    }
    if let Err(e) = session.finish() {
        eprintln!("bloatlab: {e:#}");
    }
    let table = crate::tables::render(r, &outcomes);
    std::fs::write(dir.join("table.md"), format!("# {}\n\n{}\n", if r.report.title.is_empty() { &r.title } else { &r.report.title }, table))?;
    if r.kind == RecipeKind::Lab {
        match crate::plot::write_html(&outcomes, &dir) {
            Ok(Some(f)) => eprintln!("report: {}", f.display()),
            Ok(None) => {}
            Err(e) => eprintln!("bloatlab: warning: HTML report not written: {e:#}"),
        }
    }
    let plots = crate::plot::write_plots(r, &outcomes, &dir);
    match plots {
        Ok(files) if !files.is_empty() => eprintln!("plots: {}", files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(", ")),
        Ok(_) => {}
        Err(e) => eprintln!("bloatlab: warning: plots not written: {e:#}"),
    }
    Ok(RunReport { dir, outcomes, interrupted: was_interrupted, table })
}

fn run_lab_point(
    session: &mut Session,
    progress: &bloatlab_lab::progress::Progress,
    p: &Point,
    vals: &[(String, Value)],
    dir: &Path,
    name: &str,
) -> PointOutcome {
    let json = dir.join("points").join(format!("{name}.json"));
    let log = dir.join("points").join(format!("{name}.log"));
    let mut o = PointOutcome::new(p.clone(), vals.to_vec());
    let mut logf = match std::fs::File::create(&log) {
        Ok(f) => f,
        Err(e) => {
            o.status = format!("failed: cannot create {}: {e}", log.display());
            return o;
        }
    };
    let pt = match params::lab_point(vals).and_then(|pt| bloatlab_lab::validate(&pt.lab).map(|_| pt).map_err(|e| format!("{e:#}"))) {
        Ok(pt) => pt,
        Err(e) => {
            let _ = writeln!(logf, "invalid point: {e}");
            o.status = format!("invalid: {e}");
            return o;
        }
    };
    let _ = writeln!(logf, "{}", describe_lab_point(&pt));
    let _ = writeln!(logf, "lab: {}", serde_json::to_string(&pt.lab).unwrap_or_default());
    let _ = writeln!(logf, "test overrides: {}", serde_json::to_string(&pt.test).unwrap_or_default());
    let run = bloatlab_lab::RunOptions {
        test: pt.test.clone(),
        command: std::env::args().collect(),
        progress: progress.for_run(&format!("point {}", p.index)),
        ..Default::default()
    };
    let out = session.run(&pt.lab, &run);
    progress.clear();
    let out = match out {
        Ok(out) => out,
        Err(e) => {
            let _ = writeln!(logf, "error: {e:#}");
            o.status = format!("failed: {e:#}");
            return o;
        }
    };
    let res = out.result;
    match serde_json::to_string_pretty(&res).map_err(anyhow::Error::from).and_then(|t| std::fs::write(&json, t + "\n").map_err(Into::into)) {
        Ok(()) => o.file = Some(format!("points/{name}.json")),
        Err(e) => {
            let _ = writeln!(logf, "cannot write {}: {e}", json.display());
        }
    }
    o.rows = rows::lab_rows(&res, pt.lab.analytic_queue_delay_ms(true));
    o.ok = out.failure.is_none() && out.interrupted_by == 0 && res.complete;
    o.status = if o.ok {
        "ok".into()
    } else if out.interrupted_by != 0 {
        "interrupted (partial result kept)".into()
    } else {
        format!("incomplete: {}", out.failure.clone().or(res.incomplete_reason.clone()).unwrap_or_default())
    };
    let _ = writeln!(logf, "status: {}", o.status);
    o.lab = Some(res);
    o
}

/// The pacing configuration of a point.
pub fn pacing_config(vals: &[(String, Value)]) -> anyhow::Result<PacingConfig> {
    let typed = |k: &str| get(vals, k).map(|v| &v.typed);
    let ns = |k: &str, d: u64| match typed(k) {
        Some(Typed::Duration(x)) => x.as_nanos() as u64,
        _ => d,
    };
    Ok(PacingConfig {
        ipi_ns: match typed("ipi") {
            Some(Typed::Duration(x)) => x.as_nanos() as u64,
            _ => anyhow::bail!("ipi is not set"),
        },
        timer: match typed("timer") {
            Some(Typed::Timer(t)) => *t,
            _ => TimerSpec::Precise,
        },
        payload: match typed("payload") {
            Some(Typed::Int(n)) => *n as usize,
            _ => 1424,
        },
        duration_ns: ns("duration", 2_000_000_000),
        line_rate_bps: match typed("line_rate") {
            Some(Typed::Rate(r)) => r.bps as f64,
            _ => 100e6,
        },
    })
}

fn run_pacing_point(p: &Point, vals: &[(String, Value)], dir: &Path, name: &str, opts: &RunOptions) -> PointOutcome {
    let mut o = PointOutcome::new(p.clone(), vals.to_vec());
    let res = pacing_config(vals).and_then(|c| pacing::run_steady(&c, &opts.version, signals::flag(), 3));
    match res {
        Ok(pr) => {
            let file = dir.join("points").join(format!("{name}.json"));
            match serde_json::to_string_pretty(&pr).map_err(anyhow::Error::from).and_then(|t| std::fs::write(&file, t).map_err(Into::into)) {
                Ok(()) => o.file = Some(format!("points/{name}.json")),
                Err(e) => eprintln!("bloatlab: warning: cannot write {}: {e}", file.display()),
            }
            o.rows = vec![rows::pacing_row(&pr)];
            o.status = "ok".into();
            o.detail = format!(
                ": ideal {}, achieved {} ({:.3}x, model {}), burst factor {:.2}{}",
                bloatlab_report::fmt::rate(pr.ideal_bps),
                bloatlab_report::fmt::rate(pr.achieved_bps),
                pr.ratio,
                pr.model_ratio.map(|m| format!("{m:.3}x")).unwrap_or_else(|| "-".into()),
                pr.burst_factor,
                match &pr.host {
                    Some(h) if h.stalls > 0 => format!(
                        "; host stalled the sender {} time(s) in {} wait(s){}",
                        h.stalls,
                        h.waits,
                        if h.attempts > 1 { format!(", best of {} runs", h.attempts) } else { String::new() }
                    ),
                    _ => String::new(),
                }
            );
            o.ok = true;
            o.pacing = Some(pr);
        }
        Err(e) => o.status = format!("failed: {e:#}"),
    }
    o
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn fmt_num(v: Option<f64>) -> String {
    match v {
        Some(x) if x.is_finite() => {
            if x == x.trunc() && x.abs() < 1e15 {
                format!("{}", x as i64)
            } else {
                format!("{x:.6}").trim_end_matches('0').trim_end_matches('.').to_string()
            }
        }
        _ => String::new(),
    }
}

/// results.csv: one line per point and phase; index.json: the points.
fn write_index(dir: &Path, r: &Recipe, outs: &[PointOutcome]) -> anyhow::Result<()> {
    let metrics = rows::metric_names(r.kind);
    let mut csv = String::from("point,rep");
    for a in &r.grid {
        csv.push(',');
        csv.push_str(&csv_field(&a.name));
    }
    csv.push_str(",phase");
    for m in metrics {
        csv.push(',');
        csv.push_str(m);
    }
    csv.push_str(",status,file\n");
    for o in outs {
        let mut base = format!("{},{}", o.point.index, o.point.rep);
        for (_, v) in &o.point.params {
            base.push(',');
            base.push_str(&csv_field(v));
        }
        if o.rows.is_empty() {
            csv.push_str(&base);
            csv.push(',');
            csv.push_str(&",".repeat(metrics.len()));
            csv.push_str(&format!(",{},{}\n", csv_field(&o.status), o.file.clone().unwrap_or_default()));
        }
        for row in &o.rows {
            csv.push_str(&base);
            csv.push(',');
            csv.push_str(&csv_field(&row.phase));
            for v in &row.values {
                csv.push(',');
                csv.push_str(&fmt_num(*v));
            }
            csv.push_str(&format!(",{},{}\n", csv_field(&o.status), o.file.clone().unwrap_or_default()));
        }
    }
    std::fs::write(dir.join("results.csv"), csv)?;
    let idx: Vec<IndexEntry> = outs
        .iter()
        .map(|o| IndexEntry {
            index: o.point.index,
            combo: o.point.combo,
            rep: o.point.rep,
            params: &o.point.params,
            status: &o.status,
            file: &o.file,
            elapsed_s: o.elapsed_s,
        })
        .collect();
    let doc = serde_json::json!({
        "schema": "bloatlab-sweep-index",
        "schema_version": 1,
        "recipe": r.name,
        "kind": r.kind.name(),
        "full": r.full,
        "repeat": r.repeat,
        "settings": r.settings.iter().map(|(k, v)| (k.clone(), serde_json::Value::String(v.text.clone()))).collect::<serde_json::Map<_, _>>(),
        "grid": r.grid.iter().map(|a| serde_json::json!({"name": a.name, "values": a.values.iter().map(|v| v.text.clone()).collect::<Vec<_>>()})).collect::<Vec<_>>(),
        "points": idx,
    });
    std::fs::write(dir.join("index.json"), serde_json::to_string_pretty(&doc)?)?;
    Ok(())
}

/// Read a results folder back (recipe.toml, index.json, the point files) so
/// its tables and plots can be redrawn without running anything.
pub fn reload(dir: &Path) -> anyhow::Result<(Recipe, Vec<PointOutcome>)> {
    let idx_text = std::fs::read_to_string(dir.join("index.json"))
        .map_err(|e| anyhow::anyhow!("{}: not a bloatlab results folder (index.json: {e})", dir.display()))?;
    let idx: serde_json::Value = serde_json::from_str(&idx_text)?;
    anyhow::ensure!(idx["schema"] == "bloatlab-sweep-index", "{}: index.json is not a bloatlab sweep index", dir.display());
    let full = idx["full"].as_bool().unwrap_or(false);
    let rpath = dir.join("recipe.toml");
    let text = std::fs::read_to_string(&rpath).map_err(|e| anyhow::anyhow!("{}: {e}", rpath.display()))?;
    let mut r = Recipe::parse(&text, &rpath.display().to_string(), full).map_err(|e| anyhow::anyhow!("{e}"))?;
    if let Some(n) = idx["repeat"].as_u64() {
        r.repeat = n as u32;
    }
    let mut outs = vec![];
    for p in idx["points"].as_array().cloned().unwrap_or_default() {
        let params: Vec<(String, String)> = serde_json::from_value(p["params"].clone()).unwrap_or_default();
        let point = Point {
            index: p["index"].as_u64().unwrap_or(0) as usize,
            combo: p["combo"].as_u64().unwrap_or(0) as usize,
            rep: p["rep"].as_u64().unwrap_or(1) as u32,
            params,
        };
        let vals = point_values(&r, &point);
        let mut o = PointOutcome {
            status: p["status"].as_str().unwrap_or("").to_string(),
            ok: p["status"] == "ok",
            file: p["file"].as_str().map(String::from),
            elapsed_s: p["elapsed_s"].as_f64().unwrap_or(0.0),
            ..PointOutcome::new(point, vals.clone())
        };
        if let Some(f) = &o.file {
            let path = dir.join(f);
            match r.kind {
                RecipeKind::Lab => {
                    let res = TestResult::read_file(&path).map_err(anyhow::Error::msg)?;
                    o.rows = rows::lab_rows(&res, analytic_delay_ms(&vals));
                    o.lab = Some(res);
                }
                RecipeKind::Pacing => {
                    let pr: PacingResult = serde_json::from_str(&std::fs::read_to_string(&path)?)
                        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
                    o.rows = vec![rows::pacing_row(&pr)];
                    o.pacing = Some(pr);
                }
            }
        }
        outs.push(o);
    }
    Ok((r, outs))
}

/// Redraw table.md, results.csv and the plots of a results folder.
pub fn retabulate(dir: &Path) -> anyhow::Result<String> {
    let (r, outs) = reload(dir)?;
    write_index(dir, &r, &outs)?;
    let table = crate::tables::render(&r, &outs);
    std::fs::write(dir.join("table.md"), format!("# {}\n\n{}\n", if r.report.title.is_empty() { &r.title } else { &r.report.title }, table))?;
    if let Err(e) = crate::plot::write_plots(&r, &outs, dir) {
        eprintln!("bloatlab: warning: plots not written: {e:#}");
    }
    if r.kind == RecipeKind::Lab {
        if let Err(e) = crate::plot::write_html(&outs, dir) {
            eprintln!("bloatlab: warning: HTML report not written: {e:#}");
        }
    }
    Ok(table)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recipe(t: &str) -> Recipe {
        Recipe::parse(t, "t", false).unwrap()
    }

    #[test]
    fn cross_product_and_repeats() {
        let r = recipe("name = \"x\"\nkind = \"lab\"\nrepeat = 2\n[grid]\nqueue = [1, 10, 100]\ncc = [\"cubic\", \"bbr\"]\n");
        let p = plan(&r, false, 0);
        assert_eq!(p.len(), 12);
        assert_eq!(p[0].params, vec![("queue".into(), "fifo:1".into()), ("cc".into(), "cubic".into())]);
        assert_eq!(p[1].params[1].1, "bbr");
        assert_eq!(p[2].params[0].1, "fifo:10");
        assert_eq!((p[6].rep, p[6].combo), (2, 0));
        let s = plan(&r, true, 42);
        assert_eq!(s.len(), 12);
        assert_ne!(s.iter().map(|x| x.combo).collect::<Vec<_>>(), p.iter().map(|x| x.combo).collect::<Vec<_>>());
        assert_eq!(plan(&r, true, 42).iter().map(|x| (x.combo, x.rep)).collect::<Vec<_>>(), s.iter().map(|x| (x.combo, x.rep)).collect::<Vec<_>>());
        let mut combos: Vec<_> = s.iter().map(|x| (x.combo, x.rep)).collect();
        combos.sort();
        combos.dedup();
        assert_eq!(combos.len(), 12);
    }

    #[test]
    fn lab_points() {
        let r = recipe("name = \"x\"\nkind = \"lab\"\n[settings]\nrate = \"10Mbit\"\nduration = \"10s\"\ncc = \"reno\"\nscenarios = [\"1u0d\", \"0u1d\"]\n[grid]\nqueue = [100]\n");
        let p = &plan(&r, false, 0)[0];
        let vals = point_values(&r, p);
        let pt = params::lab_point(&vals).unwrap();
        assert_eq!(
            describe_lab_point(&pt),
            "lab --rate 10mbit --queue fifo:100 --cc reno (kernel backend); test --scenarios 1u0d,0u1d --duration 10s --probe-interval 50ms --cc reno --witness witness"
        );
        // 100 full frames (1514 B) at 10 Mbit/s
        assert!((analytic_delay_ms(&vals).unwrap() - 121.12).abs() < 1e-9);
    }
}
