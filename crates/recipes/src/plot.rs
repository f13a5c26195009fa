//! Plots of a run, drawn with the report crate's `sweep_plot` (SVG).
use crate::params::RecipeKind;
use crate::recipe::Recipe;
use crate::points::PointOutcome;
use anyhow::Result;
use bloatlab_report::{sweep_plot, write_report, Format, Run, SweepAxes};
use std::path::{Path, PathBuf};

type Series = Vec<(String, Vec<(f64, f64)>)>;

fn x_value(o: &PointOutcome, x: &str) -> Option<f64> {
    o.values.iter().find(|(k, _)| k == x).and_then(|(_, v)| v.num)
}

fn x_label(x: &str) -> String {
    match x {
        "queue" => "queue limit (packets)".into(),
        "rate" => "rate (bit/s)".into(),
        "ipi" => "t_ipi (us)".into(),
        "delay" | "duration" | "idle" => format!("{x} (ms)"),
        o => o.to_string(),
    }
}

/// "latency_avg_ms" -> "latency avg (ms)".
fn y_label(y: &str) -> String {
    for (suffix, unit) in [("_ms", "ms"), ("_mbps", "Mbit/s"), ("_hz", "Hz"), ("_us", "us"), ("_pkts", "packets")] {
        if let Some(stem) = y.strip_suffix(suffix) {
            return format!("{} ({unit})", stem.replace('_', " "));
        }
    }
    y.replace('_', " ")
}

fn x_scale(x: &str) -> f64 {
    match x {
        "ipi" => 1e-3,                          // ns -> us
        "delay" | "duration" | "idle" => 1e-6, // ns -> ms
        _ => 1.0,
    }
}

/// Series name for a point: the `series` parameter if given, else every
/// swept parameter except x.
fn series_name(r: &Recipe, o: &PointOutcome, x: &str) -> String {
    if let Some(s) = &r.report.series {
        if let Some((_, v)) = o.values.iter().find(|(k, _)| k == s) {
            return format!("{s}={}", v.text);
        }
    }
    let n: Vec<String> = o.point.params.iter().filter(|(k, _)| k != x).map(|(k, v)| format!("{k}={v}")).collect();
    if n.is_empty() {
        "measured".into()
    } else {
        n.join(" ")
    }
}

fn push(series: &mut Series, name: String, p: (f64, f64)) {
    if !p.0.is_finite() || !p.1.is_finite() {
        return;
    }
    match series.iter_mut().find(|(n, _)| *n == name) {
        Some((_, v)) => v.push(p),
        None => series.push((name, vec![p])),
    }
}

/// Keep a drawn plot; a plot that cannot be drawn (e.g. a log y axis and no
/// value > 0) is skipped with a warning and does not stop the others.
fn keep(files: &mut Vec<PathBuf>, f: PathBuf, drawn: Result<()>) {
    match drawn {
        Ok(()) => files.push(f),
        Err(e) => eprintln!("bloatlab: warning: plot {} not written: {e:#}", f.display()),
    }
}

/// The plots of a run. The `y` metric plots use the recipe's `logx` / `logy`
/// axes; the fixed extra plots (pacing ratio, cumulative drops) have their own.
pub fn write_plots(r: &Recipe, outs: &[PointOutcome], dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files = vec![];
    let ok: Vec<&PointOutcome> = outs.iter().filter(|o| !o.rows.is_empty()).collect();
    if ok.is_empty() {
        return Ok(files);
    }
    let title = if r.report.title.is_empty() { r.title.clone() } else { r.report.title.clone() };
    if let Some(x) = &r.report.x {
        for y in &r.report.y {
            let mut s: Series = vec![];
            for o in &ok {
                let Some(xv) = x_value(o, x) else { continue };
                let xv = xv * x_scale(x);
                let base = series_name(r, o, x);
                for row in &o.rows {
                    if r.kind == RecipeKind::Lab && row.phase == "idle" {
                        continue;
                    }
                    let name = if r.kind == RecipeKind::Lab && o.rows.len() > 2 { format!("{base} {}", row.phase) } else { base.clone() };
                    if let Some(v) = row.get(r.kind, y) {
                        push(&mut s, name, (xv, v));
                    }
                }
            }
            // beside measured latency, the analytic delay of a full queue
            // (N x 1514 B x 8 / rate), one line per series
            if r.kind == RecipeKind::Lab && y.starts_with("latency_") && y.ends_with("_ms") {
                let mut analytic: Series = vec![];
                for o in &ok {
                    let Some(xv) = x_value(o, x) else { continue };
                    let Some(a) = o.rows.iter().find_map(|row| row.get(r.kind, "analytic_queue_delay_ms")) else { continue };
                    push(&mut analytic, format!("{} analytic (full queue)", series_name(r, o, x)), (xv * x_scale(x), a));
                }
                for (_, v) in &mut analytic {
                    v.sort_by(|a, b| a.0.total_cmp(&b.0));
                    v.dedup_by(|a, b| a.0 == b.0);
                }
                s.extend(analytic);
            }
            // seed 000's own measurements (an XO laptop's wifi txqueuelen, avg ping under scp)
            if r.report.table == "txqueuelen" && x == "queue" && y == "latency_avg_ms" {
                s.push(("seed 000 (XO-1.5 wifi, scp)".into(), crate::seeds::SEED000_SCP.iter().map(|(q, v)| (*q as f64, v[1])).collect()));
            }
            if r.kind == RecipeKind::Pacing && y == "achieved_mbps" {
                let mut ideal: Vec<(f64, f64)> = ok.iter().filter_map(|o| Some((x_value(o, x)? * x_scale(x), o.rows[0].get(r.kind, "ideal_mbps")?))).collect();
                ideal.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap());
                ideal.dedup_by(|a, b| a.0 == b.0);
                s.push(("ideal 1/t_ipi x size x 8".into(), ideal));
            }
            if s.is_empty() {
                continue;
            }
            let f = dir.join(format!("{}-{y}.svg", r.name));
            let axes = SweepAxes::new(r.report.logx, r.report.logy);
            let drawn = sweep_plot(&title, &x_label(x), axes, &s, &y_label(y), &f, Format::Svg);
            keep(&mut files, f, drawn);
        }
    }
    match r.report.table.as_str() {
        "pacing" => {
            let mut s: Series = vec![];
            for o in &ok {
                if let Some(p) = &o.pacing {
                    push(&mut s, p.timer.clone(), (p.ipi_ns as f64 / 1e3, p.ratio));
                }
            }
            // references: exact pacing, and seed 004's measured ~3.2x for a
            // 2.6.20 CCID-3 sender once t_ipi exceeds its 1 ms tick
            let xs: Vec<f64> = s.iter().flat_map(|(_, v)| v.iter().map(|p| p.0)).collect();
            let (lo, hi) = (xs.iter().copied().fold(f64::INFINITY, f64::min), xs.iter().copied().fold(0.0, f64::max));
            if lo.is_finite() && hi > lo {
                s.push(("exact pacing (1)".into(), vec![(lo, 1.0), (hi, 1.0)]));
                if hi > 1000.0 {
                    s.push(("seed 004: CCID-3 ~3.2x above t_gran".into(), vec![(lo.max(1000.0), 3.2), (hi, 3.2)]));
                }
            }
            let f = dir.join(format!("{}-ratio.svg", r.name));
            // log y: one timer out of control below its tick (25x) must not squash the others near 1
            let drawn = sweep_plot("Achieved / idealized rate (1 = exact pacing)", "t_ipi (us)", SweepAxes::new(true, true), &s, "achieved / ideal (log)", &f, Format::Svg);
            keep(&mut files, f, drawn);
        }
        "sendstalls" => {
            // the seed's cumulative plot: local drops over time, one line per queue length
            let mut s: Series = vec![];
            for o in &ok {
                let Some(res) = &o.lab else { continue };
                let Some(lab) = &res.lab else { continue };
                let Some(ph) = res.scenarios.first() else { continue };
                let q = o.values.iter().find(|(k, _)| k == "queue").map(|(_, v)| v.text.clone()).unwrap_or_default();
                for qs in lab.queues.iter().filter(|q| crate::rows::is_local(&q.role, &q.location, &q.qdisc) && q.role.ends_with("up")) {
                    let inside: Vec<_> = qs.samples.iter().filter(|x| x.t_ns >= ph.start_ns && x.t_ns <= ph.end_ns).collect();
                    let Some(first) = inside.first() else { continue };
                    let pts: Vec<(f64, f64)> = inside.iter().map(|x| ((x.t_ns - ph.start_ns) as f64 / 1e9, (x.drops - first.drops) as f64)).collect();
                    s.push((format!("{q}{}", if o.point.rep > 1 { format!(" rep {}", o.point.rep) } else { String::new() }), pts));
                }
            }
            if !s.is_empty() {
                let f = dir.join(format!("{}-cumulative-drops.svg", r.name));
                let drawn = sweep_plot("Cumulative local drops (send stalls) during the upload", "time since the upload started (s)", SweepAxes::LINEAR, &s, "local drops", &f, Format::Svg);
                keep(&mut files, f, drawn);
            }
        }
        _ => {}
    }
    Ok(files)
}

/// The report crate's HTML report over all lab points of a run (cdf and box
/// overlays, one time series per point), in `DIR/report/report.html`.
pub fn write_html(outs: &[PointOutcome], dir: &Path) -> Result<Option<PathBuf>> {
    let labs: Vec<(String, &bloatlab_results::TestResult)> = outs
        .iter()
        .filter_map(|o| {
            let res = o.lab.as_ref()?;
            let mut label = o.point.params.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ");
            if label.is_empty() {
                label = format!("point {}", o.point.index);
            }
            if o.point.rep > 1 {
                label.push_str(&format!(" rep {}", o.point.rep));
            }
            Some((label, res))
        })
        .collect();
    if labs.is_empty() {
        return Ok(None);
    }
    let runs: Vec<Run> = labs.iter().map(|(l, r)| Run { label: l, result: r }).collect();
    let sub = dir.join("report");
    std::fs::create_dir_all(&sub)?;
    let files = write_report(&runs, &sub, "report", Format::Svg)?;
    Ok(Some(files.html))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rows::{Row, LAB_METRICS};
    use crate::points::Point;

    /// A parsed lab recipe sweeping queue over 20..50 packets, with `logy`
    /// as given, and one outcome per point whose latency_avg_ms is 1, 10,
    /// 100, 1000 ms (and, for the second plot, zero drops everywhere).
    fn run(logy: bool) -> (Recipe, Vec<PointOutcome>) {
        let text = format!(
            "name = \"ly\"\nkind = \"lab\"\n[grid]\nqueue = [20, 30, 40, 50]\n\
             [report]\ntable = \"generic\"\nx = \"queue\"\ny = [\"latency_avg_ms\", \"upload_mbps\"]\nlogy = {logy}\n"
        );
        let r = Recipe::parse(&text, "ly.toml", false).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.report.logy, logy);
        let lat = LAB_METRICS.iter().position(|m| *m == "latency_avg_ms").unwrap();
        let up = LAB_METRICS.iter().position(|m| *m == "upload_mbps").unwrap();
        let outs = r.grid[0]
            .values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let mut values = vec![None; LAB_METRICS.len()];
                values[lat] = Some(10f64.powi(i as i32));
                values[up] = Some(0.0);
                PointOutcome {
                    status: "ok".into(),
                    ok: true,
                    rows: vec![Row { phase: "1u0d".into(), values }],
                    ..PointOutcome::new(
                        Point { index: i + 1, combo: i, rep: 1, params: vec![("queue".into(), v.text.clone())] },
                        vec![("queue".into(), v.clone())],
                    )
                }
            })
            .collect();
        (r, outs)
    }

    fn tick_labels(svg: &str) -> Vec<String> {
        svg.split("<text").skip(1).filter_map(|t| Some(t.split_once('>')?.1.split_once("</text>")?.0.trim().to_string())).collect()
    }

    #[test]
    fn logy_reaches_the_plot() {
        let dir = tempfile::tempdir().unwrap();
        let (r, outs) = run(true);
        let files = write_plots(&r, &outs, dir.path()).unwrap();
        // latency plot drawn on a log y axis: decade ticks 1 .. 1000
        // (x runs 20..50 packets, so those labels come from the y axis)
        assert_eq!(files, vec![dir.path().join("ly-latency_avg_ms.svg")], "the all-zero goodput plot cannot have a log y axis and is skipped");
        let t = tick_labels(&std::fs::read_to_string(&files[0]).unwrap());
        for w in ["1", "10", "100", "1000"] {
            assert!(t.iter().any(|x| x == w), "log-y recipe plot lacks tick {w}: {t:?}");
        }

        let (r, outs) = run(false);
        let files = write_plots(&r, &outs, dir.path()).unwrap();
        assert_eq!(files.len(), 2);
        let t = tick_labels(&std::fs::read_to_string(&files[0]).unwrap());
        assert!(!t.iter().any(|x| x == "1" || x == "10"), "linear y axis has decade ticks: {t:?}");
    }

    #[test]
    fn latency_plots_carry_the_analytic_delay() {
        let dir = tempfile::tempdir().unwrap();
        let (r, mut outs) = run(false);
        let a = LAB_METRICS.iter().position(|m| *m == "analytic_queue_delay_ms").unwrap();
        for (i, o) in outs.iter_mut().enumerate() {
            o.rows[0].values[a] = Some(24.2 * (i + 2) as f64);
        }
        let files = write_plots(&r, &outs, dir.path()).unwrap();
        let svg = std::fs::read_to_string(&files[0]).unwrap();
        let labels = tick_labels(&svg);
        assert!(labels.iter().any(|l| l == "measured"), "{labels:?}");
        assert!(labels.iter().any(|l| l == "measured analytic (full queue)"), "{labels:?}");
        assert!(!labels.iter().any(|l| l == "all"));
    }
}
