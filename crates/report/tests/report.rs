//! Golden-file, plot, HTML, CSV and CLI tests on deterministic fixtures.
//! Regenerate the golden files with `BLESS=1 cargo test -p bloatlab-report`.
mod common;

use bloatlab_report::*;
use bloatlab_results::TestResult;
use std::path::{Path, PathBuf};

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn golden(name: &str, actual: &str) {
    let p = crate_dir().join("tests/golden").join(name);
    if std::env::var_os("BLESS").is_some() {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e} (run with BLESS=1 to create)", p.display()));
    if expected != actual {
        let tmp = std::env::temp_dir().join(format!("bloatlab-report-actual-{name}"));
        std::fs::write(&tmp, actual).unwrap();
        panic!("{name} differs from the golden file {}; actual written to {} (BLESS=1 to accept)", p.display(), tmp.display());
    }
}

/// The checked-in small fixture is what the generator produces.
#[test]
fn fixture_file_matches_generator() {
    let r = common::small();
    let json = serde_json::to_string_pretty(&r).unwrap() + "\n";
    let p = crate_dir().join("tests/fixtures/small.json");
    if std::env::var_os("BLESS").is_some() {
        std::fs::write(&p, &json).unwrap();
    }
    let on_disk = std::fs::read_to_string(&p).unwrap();
    assert!(on_disk == json, "tests/fixtures/small.json is stale (BLESS=1 to regenerate)");
    TestResult::read_file(&p).unwrap();
}

#[test]
fn summary_table_golden() {
    let r = common::small();
    let t = summary_table(&r);
    golden("summary_table.txt", &t);
    // Content checks independent of the golden file.
    assert!(t.contains("    Upload Capacity: "), "{t}");
    assert!(t.contains("Download Capacity: "));
    assert!(t.contains("Link Responsiveness: "));
    assert!(t.contains("    Flow Smoothness: "));
    assert!(t.contains("Verdict: D"), "{t}");
    for n in ["idle", "1u0d", "0u1d", "2u2d"] {
        assert!(t.lines().any(|l| l.starts_with(n)), "row {n} missing:\n{t}");
    }
    golden("summary_table_nolab.txt", &summary_table(&common::small_nolab()));
}

#[test]
fn seed003_lines_golden() {
    let r = common::small();
    let s = seed003_lines(&r);
    golden("seed003_lines.txt", &s);
    let first = s.lines().next().unwrap();
    assert!(first.starts_with("Scenario 1: 1 upload, 0 downloads... "), "{first}");
    assert!(first.ends_with(" Hz smoothness"));
    // 1u0d at ~9.5 Mbit/s = ~1160 KiB/s
    let kib: f64 = first.split("... ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
    let expect = r.scenarios[0].summary.upload_bps / 8.0 / 1024.0;
    assert!((kib - expect).abs() <= 0.5, "{kib} vs {expect}");
    assert!(s.lines().nth(2).unwrap().contains(" KiB/s up, ") && s.lines().nth(2).unwrap().contains(" KiB/s down, "));
}

/// A direction no scenario loaded is "not measured", not 0; an interrupted
/// run says how many of the scenarios asked for ran.
#[test]
fn summary_says_what_was_not_measured() {
    let mut r = common::small();
    r.metadata.scenario_definitions = r.scenarios.iter().map(|p| p.name.clone()).collect();
    r.scenarios.retain(|p| p.downloads == 0);
    r.complete = false;
    let t = summary_table(&r);
    assert!(t.contains("Download Capacity: not measured"), "{t}");
    assert!(!t.contains("Upload Capacity: not measured"), "{t}");
    assert!(t.contains(&format!("{} of {} scenario(s) run", r.scenarios.len(), r.metadata.scenario_definitions.len())), "{t}");
    assert!(t.lines().filter(|l| !l.starts_with("Verdict:")).all(|l| l.chars().count() < 200), "a line over 200 characters: {t}");
}

/// A short queue that loses throughput and probes does not grade A+.
#[test]
fn verdict_weighs_lost_goodput_and_probe_loss() {
    let mut r = common::small();
    for p in &mut r.scenarios {
        p.summary.added_latency_ms = Some(1.0);
        p.summary.latency.loss_pct = 0.0;
    }
    r.headline.max_added_latency_ms = Some(1.0);
    let lab = r.lab.as_mut().unwrap();
    // a link the load could fill: no cap
    lab.config.rate_up_bps = Some(1.0);
    lab.config.rate_down_bps = Some(1.0);
    assert_eq!(verdict(&r).grade, Grade::APlus, "{}", verdict(&r).sentence);
    // the link could carry ~3x what the worst scenario reached: lost goodput caps the grade
    let worst_up = r.scenarios.iter().filter(|p| p.uploads > 0).map(|p| p.summary.upload_bps).fold(f64::MAX, f64::min);
    r.lab.as_mut().unwrap().config.rate_up_bps = Some(worst_up / 0.32 / (1448.0 / 1514.0));
    let v = verdict(&r);
    assert_eq!(v.grade, Grade::D, "{}", v.sentence);
    assert!(v.sentence.contains("Graded D, not A+") && v.sentence.contains("reached only 32%"), "{}", v.sentence);
    // probe loss under load caps it too
    r.lab.as_mut().unwrap().config.rate_up_bps = Some(1.0);
    r.scenarios[0].summary.latency.loss_pct = 12.0;
    let v = verdict(&r);
    assert_eq!(v.grade, Grade::B, "{}", v.sentence);
    assert!(v.sentence.contains("12.0% of the latency probes were lost"), "{}", v.sentence);
    r.scenarios[0].summary.latency.loss_pct = 3.0;
    assert_eq!(verdict(&r).grade, Grade::APlus);
    // the sentence's number has the headline's digits
    r.headline.max_added_latency_ms = Some(0.007);
    let v = verdict(&r);
    assert!(v.sentence.contains("only 0.007 ms"), "{}", v.sentence);
    // below the probes' microsecond resolution: no "rose by only 0.000 ms"
    r.headline.max_added_latency_ms = Some(0.0003);
    let v = verdict(&r);
    assert!(v.sentence.contains("did not rise") && v.sentence.contains("to the microsecond") && !v.sentence.contains("0.000"), "{}", v.sentence);
    // a good latency grade beside bulk flows that stalled: both said
    r.headline.max_added_latency_ms = Some(1.0);
    r.headline.flow_smoothness_hz = Some(0.372);
    let v = verdict(&r);
    assert!(v.sentence.contains("stay responsive") && v.sentence.contains("were not smooth: one waited 2.69 s for data (flow smoothness 0.372 Hz)"), "{}", v.sentence);
    r.headline.flow_smoothness_hz = Some(3.2);
    assert!(!verdict(&r).sentence.contains("not smooth"));
}

#[test]
fn verdict_uses_queue_data() {
    let r = common::small();
    let v = verdict(&r);
    // Worst added latency is 2u2d: ~200 ms up + ~60 ms down queueing.
    let added = v.added_latency_ms.unwrap();
    assert!(added > 200.0 && added < 400.0, "{added}");
    assert_eq!(v.grade, Grade::D);
    assert_eq!(v.worst_scenario.as_deref(), Some("2u2d"));
    assert!(v.sentence.contains("bottleneck queue"), "{}", v.sentence);
    assert!(v.sentence.contains("fq_codel"), "{}", v.sentence);
    // The upload queue held 200 ms at 10 Mbit/s = 250 kB = 165 packets.
    assert!(v.sentence.contains("200 ms of data"), "{}", v.sentence);
    let nl = verdict(&common::small_nolab());
    assert!(nl.sentence.contains("smart queue management"), "{}", nl.sentence);
    // No idle baseline: no grade.
    let mut r2 = common::small_nolab();
    r2.idle = None;
    r2.headline.max_added_latency_ms = None;
    for p in &mut r2.scenarios {
        p.summary.added_latency_ms = None;
    }
    let v2 = verdict(&r2);
    assert_eq!(v2.grade, Grade::Unknown);
    assert!(v2.sentence.contains("idle"), "{}", v2.sentence);
}

#[test]
fn compare_table_golden() {
    let a = common::small();
    let mut b = common::small_nolab();
    b.metadata.cc = "bbr".into();
    for p in &mut b.scenarios {
        p.summary.latency.p50_ms /= 4.0;
        p.summary.added_latency_ms = p.summary.added_latency_ms.map(|x| x / 8.0);
    }
    b.headline.max_added_latency_ms = b.headline.max_added_latency_ms.map(|x| x / 8.0);
    let t = compare_table_labeled(&[("pfifo", &a), ("fixed", &b)]);
    golden("compare_table.txt", &t);
    assert!(t.contains("cc: pfifo=cubic, fixed=bbr"), "{t}");
    assert!(t.contains("diff fixed"));
    assert!(t.contains("Scenario 2u2d"));
    let plain = compare_table(&[a.clone(), b.clone(), a.clone()]);
    assert!(plain.contains("#3"));
}

#[test]
fn csv_header_and_rows() {
    let r = common::small();
    let csv = csv_string(&r);
    let head: String = csv.lines().take(6).map(|l| format!("{l}\n")).collect();
    golden("csv_head.txt", &head);
    let mut lines = csv.lines();
    assert_eq!(lines.next().unwrap(), CSV_COLUMNS.join(","));
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert!(rows.iter().all(|r| r.len() == CSV_COLUMNS.len()));
    let count = |k: &str| rows.iter().filter(|r| r[1] == k).count();
    let phases: Vec<&bloatlab_results::Phase> = r.idle.iter().chain(r.scenarios.iter()).collect();
    assert_eq!(count("probe"), phases.iter().map(|p| p.probes.len()).sum::<usize>());
    assert_eq!(count("witness_probe"), phases.iter().map(|p| p.witness_probes.len()).sum::<usize>());
    assert_eq!(count("rr"), phases.iter().map(|p| p.rr.len()).sum::<usize>());
    assert_eq!(count("goodput"), phases.iter().flat_map(|p| &p.flows).map(|f| f.goodput.len()).sum::<usize>());
    assert_eq!(count("tcp_info"), phases.iter().flat_map(|p| &p.flows).map(|f| f.tcp_info.len()).sum::<usize>());
    assert_eq!(count("queue"), r.lab.as_ref().unwrap().queues.iter().map(|q| q.samples.len()).sum::<usize>());
    // Lost probes are rows with lost=1 and an empty rtt.
    let lost = rows.iter().filter(|r| r[1] == "probe" && r[6] == "1").count();
    let lost_expected: u32 = phases.iter().map(|p| p.summary.latency.lost).sum();
    assert_eq!(lost as u32, lost_expected);
    assert!(rows.iter().filter(|r| r[1] == "probe" && r[6] == "1").all(|r| r[5].is_empty()));
    // Goodput rate column: a 1u0d sample in the steady part is ~9.5 Mbit/s.
    let g: Vec<f64> = rows.iter().filter(|r| r[0] == "1u0d" && r[1] == "goodput" && !r[10].is_empty()).map(|r| r[10].parse().unwrap()).collect();
    let mean = g[10..].iter().sum::<f64>() / (g.len() - 10) as f64;
    assert!((mean - 9.5).abs() < 0.5, "{mean}");
}

fn png_stats(p: &Path) -> (u32, u32, f64) {
    let img = image::open(p).unwrap_or_else(|e| panic!("{}: not a PNG: {e}", p.display())).to_rgb8();
    let (w, h) = img.dimensions();
    let non_white = img.pixels().filter(|px| px.0.iter().any(|c| *c < 240)).count();
    (w, h, non_white as f64 / (w * h) as f64)
}

#[test]
fn plots_png_and_svg() {
    let r = common::small();
    let dir = tempfile::tempdir().unwrap();
    let runs = [Run { label: "small", result: &r }];
    let expect: &[(PlotKind, &[&str])] = &[
        (PlotKind::Timeseries, &["throughput and latency", "upload (sum)", "download (sum)", "round trip", "one-way up", "lost probe", "Queue backlog", "2u2d"]),
        (PlotKind::Throughput, &["Goodput", "upload, per flow", "download (sum)"]),
        (PlotKind::Latency, &["Latency", "TCP request/response", "witness host RTT"]),
        (PlotKind::Cdf, &["latency CDF per phase", "idle (n=", "2u2d (n="]),
        (PlotKind::Box, &["RTT per phase", "whiskers"]),
        (PlotKind::Queue, &["bottleneck queues", "bottleneck-up (pfifo)", "Queueing delay", "Queue drops", "analytic up: "]),
        (PlotKind::Tcp, &["TCP_INFO", "Congestion window", "uploads (client sends)"]),
    ];
    for (kind, words) in expect {
        let png = dir.path().join(format!("{}.png", kind.name()));
        plot_runs(&runs, *kind, Format::Png, &png).unwrap();
        let (w, h, ink) = png_stats(&png);
        assert!(w >= 900 && h >= 450, "{kind:?} {w}x{h}");
        assert!(ink > 0.02 && ink < 0.7, "{kind:?}: {ink} of pixels non-white");
        let svg_path = dir.path().join(format!("{}.svg", kind.name()));
        plot_runs(&runs, *kind, Format::Svg, &svg_path).unwrap();
        let svg = std::fs::read_to_string(&svg_path).unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"), "{kind:?}");
        for w in *words {
            assert!(svg.contains(w), "{kind:?} SVG lacks '{w}'");
        }
    }
    // Overlays of several runs.
    let b = common::small_nolab();
    let two = [Run { label: "alpha", result: &r }, Run { label: "beta", result: &b }];
    let p = dir.path().join("cdf2.svg");
    plot_runs(&two, PlotKind::Cdf, Format::Svg, &p).unwrap();
    let svg = std::fs::read_to_string(&p).unwrap();
    assert!(svg.contains("alpha loaded") && svg.contains("beta loaded") && svg.contains("beta idle"));
    let p = dir.path().join("box2.png");
    plot_runs(&two, PlotKind::Box, Format::Png, &p).unwrap();
    assert!(png_stats(&p).2 > 0.02);
    // One-way delays slightly below zero (within the offset uncertainty) stay on the plot.
    let mut neg = common::small_nolab();
    for p in neg.idle.as_mut().unwrap().probes.iter_mut() {
        p.owd_down_ns = p.owd_down_ns.map(|d| d - 12_000_000);
    }
    let svg = plot_svg_string(&[Run { label: "neg", result: &neg }], PlotKind::Latency).unwrap();
    assert!(svg.contains("one-way down"));
    // Errors are clear.
    let e = plot_runs(&two, PlotKind::Timeseries, Format::Png, &dir.path().join("x.png")).unwrap_err();
    assert!(e.to_string().contains("one result"), "{e}");
    let e = plot_runs(&[Run { label: "b", result: &b }], PlotKind::Queue, Format::Png, &dir.path().join("x.png")).unwrap_err();
    assert!(e.to_string().contains("queue samples"), "{e}");
}

#[test]
fn sweep_plot_log_axis() {
    let dir = tempfile::tempdir().unwrap();
    let qs = [1.0, 10.0, 100.0, 1000.0];
    let lat: Vec<(f64, f64)> = qs.iter().map(|q| (*q, 20.0 + q * 1.2)).collect();
    let good: Vec<(f64, f64)> = qs.iter().map(|q| (*q, 9.0 + (*q).ln())).collect();
    let series = vec![("latency p50 (ms)".to_string(), lat), ("goodput (Mbit/s)".to_string(), good)];
    let p = dir.path().join("sweep.png");
    sweep_plot("txqueuelen sweep at 10 Mbit/s", "queue length (packets)", SweepAxes::new(true, false), &series, "value", &p, Format::Png).unwrap();
    assert!(png_stats(&p).2 > 0.01);
    let svg = sweep_plot_svg_string("txqueuelen sweep at 10 Mbit/s", "queue length (packets)", SweepAxes::new(true, false), &series, "value").unwrap();
    for w in ["txqueuelen sweep", "queue length (packets)", "latency p50 (ms)", "goodput (Mbit/s)", "\n1000\n", "\n100\n", "\n10\n"] {
        assert!(svg.contains(w), "sweep SVG lacks {w}");
    }
    let bad = vec![("x".to_string(), vec![(0.0, 1.0)])];
    assert!(sweep_plot_svg_string("t", "x", SweepAxes::new(true, false), &bad, "y").is_err());
}

/// The text of every `<text>` element of an SVG (tick labels, titles, legends).
fn svg_texts(svg: &str) -> Vec<String> {
    svg.split("<text").skip(1).filter_map(|t| Some(t.split_once('>')?.1.split_once("</text>")?.0.trim().to_string())).collect()
}

#[test]
fn sweep_plot_log_y_axis() {
    // x linear over 20..50 so that no x tick label is 1, 10, 100 or 1000:
    // those can only come from the y axis.
    let series = vec![("queue delay (ms)".to_string(), vec![(20.0, 1.0), (30.0, 10.0), (40.0, 100.0), (50.0, 1000.0)])];
    let log = sweep_plot_svg_string("log y", "x", SweepAxes::new(false, true), &series, "ms").unwrap();
    assert!(log.starts_with("<svg") && log.trim_end().ends_with("</svg>"), "not an SVG document");
    let t = svg_texts(&log);
    for w in ["1", "10", "100", "1000"] {
        assert!(t.iter().any(|x| x == w), "log-y SVG has no tick label {w}: {t:?}");
    }
    assert!(!t.iter().any(|x| x.contains("not shown")), "no point was left out: {t:?}");
    // The same data on a linear y axis has no "1" or "10" tick (0, 100, 200, ...).
    let lin = svg_texts(&sweep_plot_svg_string("lin y", "x", SweepAxes::LINEAR, &series, "ms").unwrap());
    assert!(!lin.iter().any(|x| x == "1" || x == "10"), "linear y axis has decade ticks: {lin:?}");
    // Log-log, and PNG output.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("loglog.png");
    let ll = vec![("delay".to_string(), vec![(1.0, 1.0), (10.0, 10.0), (100.0, 100.0), (1000.0, 1000.0)])];
    sweep_plot("log-log", "queue", SweepAxes::new(true, true), &ll, "ms", &p, Format::Png).unwrap();
    assert!(png_stats(&p).2 > 0.01);
    let t = svg_texts(&sweep_plot_svg_string("log-log", "queue", SweepAxes::new(true, true), &ll, "ms").unwrap());
    for w in ["1", "10", "100", "1000"] {
        assert_eq!(t.iter().filter(|x| *x == w).count(), 2, "log-log: {w} should label both axes: {t:?}");
    }
    // Points with y <= 0 are left out of a log-y plot and the caption says so.
    let with_zero = vec![
        ("a".to_string(), vec![(20.0, 0.0), (30.0, 10.0), (40.0, 100.0)]),
        ("b".to_string(), vec![(20.0, -1.0), (30.0, 0.0)]),
    ];
    let t = svg_texts(&sweep_plot_svg_string("zeros", "x", SweepAxes::new(false, true), &with_zero, "ms").unwrap());
    assert!(t.iter().any(|x| x == "log y axis: 3 points with y \u{2264} 0 not shown"), "{t:?}");
    assert!(t.iter().any(|x| x == "b (all y \u{2264} 0: not shown)"), "{t:?}");
    // ... and a plot with no y > 0 at all is an error, not an empty chart.
    let none = vec![("a".to_string(), vec![(20.0, 0.0), (30.0, -2.0)])];
    let e = sweep_plot_svg_string("none", "x", SweepAxes::new(false, true), &none, "ms").unwrap_err();
    assert!(e.to_string().contains("log y axis needs y > 0"), "{e}");
    // Linear y keeps them.
    assert!(sweep_plot_svg_string("none", "x", SweepAxes::LINEAR, &none, "ms").is_ok());
}

#[test]
fn html_report_is_self_contained() {
    let r = common::small();
    let dir = tempfile::tempdir().unwrap();
    let runs = [Run { label: "small", result: &r }];
    let files = write_report(&runs, dir.path(), "small", Format::Png).unwrap();
    let html = std::fs::read_to_string(&files.html).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("<title>bloatlab report — lab — 2026-11-22T06:00:00Z</title>"));
    assert!(html.contains("<table class=\"summary\">"));
    assert!(html.matches("<svg").count() >= 5, "plots inline");
    assert!(html.contains(">D</div>"), "grade badge");
    for k in ["6.1.0-test", "pfifo", "offloads (TSO/GSO/GRO)", "cubic", "bloatlab version", "Scenario 1: 1 upload,"] {
        assert!(html.contains(k), "metadata {k} missing");
    }
    // Nothing is fetched: no scripts, stylesheets, images or fonts by URL.
    let lower = html.to_lowercase();
    for bad in ["<script", "<link", "<img", "src=", "url(", "@import", "href=\"http"] {
        assert!(!lower.contains(bad), "HTML contains {bad}");
    }
    for i in &files.images {
        assert!(png_stats(i).2 > 0.01, "{}", i.display());
    }
    let names: Vec<String> = files.images.iter().map(|p| p.file_name().unwrap().to_string_lossy().to_string()).collect();
    assert_eq!(names, ["small.timeseries.png", "small.cdf.png", "small.box.png", "small.queue.png", "small.tcp.png"]);
    // Comparison report.
    let b = common::small_nolab();
    let two = [Run { label: "a", result: &r }, Run { label: "b", result: &b }];
    let files = write_report(&two, &dir.path().join("cmp"), "compare", Format::Svg).unwrap();
    let html = std::fs::read_to_string(&files.html).unwrap();
    assert!(html.contains("<title>bloatlab comparison — 2 results</title>"));
    assert!(html.contains("<table class=\"compare\">") && html.contains("diff b"));
    assert_eq!(files.images.len(), 4);
}

#[test]
fn test_report_goes_next_to_the_result() {
    // `bloatlab test --report`: next to the JSON, same base name.
    let dir = tempfile::tempdir().unwrap();
    let files = bloatlab_report::files::write_test_report(&common::small_nolab(), Some(&dir.path().join("t.json"))).unwrap();
    assert_eq!(files.html, dir.path().join("t.html"));
    assert!(files.images.iter().all(|p| p.exists()));
    assert_eq!(bloatlab_report::files::stem_of(std::path::Path::new("a/b.json")), "b");
}

/// A 32-flow, 60 s result (6000+ probes per scenario, 19k goodput samples)
/// renders fully; display thinning keeps the inline plots small. Timing is
/// printed, not asserted (see bench/report_large.sh).
#[test]
fn large_result_renders() {
    let r = common::large();
    let t0 = std::time::Instant::now();
    let runs = [Run { label: "large", result: &r }];
    let dir = tempfile::tempdir().unwrap();
    let files = write_report(&runs, dir.path(), "large", Format::Png).unwrap();
    let html = std::fs::metadata(&files.html).unwrap().len();
    eprintln!("large report (HTML {html} bytes + {} PNGs) in {:.2?}", files.images.len(), t0.elapsed());
    assert!(html < 12_000_000, "HTML {html} bytes");
    // Statistics are untouched by display thinning.
    let csv = csv_string(&r);
    let probes = csv.lines().filter(|l| l.split(',').nth(1) == Some("probe")).count();
    assert_eq!(probes, r.idle.iter().chain(r.scenarios.iter()).map(|p| p.probes.len()).sum::<usize>());
}

/// Every output a user gets from a result, written and checked: the JSON
/// reads back, the flent file is gzip, the CSV has its header, the reports
/// are HTML with PNG plots, the sweep plots are PNG and SVG. With
/// REPORT_SAMPLES_DIR set they are kept there for eyeballing.
#[test]
fn sample_outputs_are_complete_files() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = std::env::var_os("REPORT_SAMPLES_DIR").map(PathBuf::from).unwrap_or_else(|| tmp.path().to_path_buf());
    std::fs::create_dir_all(&dir).unwrap();
    if std::env::var_os("REPORT_SAMPLES_LARGE").is_some() {
        std::fs::write(dir.join("large.json"), serde_json::to_string(&common::large()).unwrap()).unwrap();
    }
    let r = common::small();
    std::fs::write(dir.join("small.json"), serde_json::to_string(&r).unwrap()).unwrap();
    export_flent(&r, &dir.join("small.flent.gz")).unwrap();
    export_csv(&r, &dir.join("small.csv")).unwrap();
    write_report(&[Run { label: "small", result: &r }], &dir, "small", Format::Png).unwrap();
    let b = common::small_nolab();
    write_report(&[Run { label: "lab", result: &r }, Run { label: "nolab", result: &b }], &dir, "compare", Format::Png).unwrap();
    let series = vec![("latency p50 (ms)".to_string(), vec![(1.0, 21.0), (10.0, 32.0), (100.0, 140.0), (1000.0, 1220.0)])];
    sweep_plot("txqueuelen sweep", "queue length (packets)", SweepAxes::new(true, false), &series, "ms", &dir.join("sweep.png"), Format::Png).unwrap();
    std::fs::write(dir.join("sweep.svg"), sweep_plot_svg_string("txqueuelen sweep", "queue length (packets)", SweepAxes::new(true, false), &series, "ms").unwrap()).unwrap();
    let read = |n: &str| std::fs::read(dir.join(n)).unwrap_or_else(|e| panic!("{n}: {e}"));
    let back = TestResult::read_file(&dir.join("small.json")).unwrap();
    assert!(back.scenarios.len() == r.scenarios.len() && back.metadata.start_unix_ns == r.metadata.start_unix_ns, "small.json does not read back");
    assert_eq!(&read("small.flent.gz")[..2], &[0x1f, 0x8b], "gzip magic");
    assert!(String::from_utf8(read("small.csv")).unwrap().starts_with(&CSV_COLUMNS.join(",")));
    for html in ["small.html", "compare.html"] {
        let t = String::from_utf8(read(html)).unwrap();
        assert!(t.starts_with("<!DOCTYPE html>") && t.trim_end().ends_with("</html>"), "{html}");
    }
    assert_eq!(&read("sweep.png")[..8], b"\x89PNG\r\n\x1a\n");
    assert!(String::from_utf8(read("sweep.svg")).unwrap().contains("<svg"));
    let pngs = std::fs::read_dir(&dir).unwrap().filter_map(|e| e.ok()).filter(|e| e.path().extension().is_some_and(|x| x == "png")).count();
    assert!(pngs >= 4, "{pngs} PNG plots");
}

/// Sparse and broken-off results still give a report (plots that have
/// nothing to draw are skipped with a reason), and the table says INCOMPLETE.
#[test]
fn sparse_and_incomplete_results() {
    let dir = tempfile::tempdir().unwrap();
    // Interrupted during the second scenario; every probe of it lost.
    let mut r = common::small_nolab();
    r.complete = false;
    r.incomplete_reason = Some("interrupted (SIGINT)".into());
    r.scenarios.truncate(2);
    for p in &mut r.scenarios[1].probes {
        p.rtt_ns = None;
        p.owd_up_ns = None;
        p.owd_down_ns = None;
    }
    let t = summary_table(&r);
    assert!(t.starts_with("INCOMPLETE RUN: interrupted (SIGINT)"), "{t}");
    assert!(verdict(&r).sentence.starts_with("Incomplete run"));
    let files = write_report(&[Run { label: "r", result: &r }], dir.path(), "r", Format::Png).unwrap();
    assert!(files.html.exists() && !files.images.is_empty());
    // Idle only: no load, no grade, plots of what there is.
    let mut idle_only = common::small_nolab();
    idle_only.scenarios.clear();
    idle_only.headline = Default::default();
    let v = verdict(&idle_only);
    assert_eq!(v.grade, Grade::Unknown);
    assert!(v.sentence.contains("No load scenario"), "{}", v.sentence);
    write_report(&[Run { label: "i", result: &idle_only }], dir.path(), "i", Format::Svg).unwrap();
    // No probes at all: CDF/box skipped, report written.
    let mut none = common::small_nolab();
    for p in none.idle.iter_mut().chain(none.scenarios.iter_mut()) {
        p.probes.clear();
        p.witness_probes.clear();
    }
    let files = write_report(&[Run { label: "n", result: &none }], dir.path(), "n", Format::Png).unwrap();
    assert!(files.skipped.iter().any(|s| s.starts_with("cdf")), "{:?}", files.skipped);
    let html = std::fs::read_to_string(&files.html).unwrap();
    assert!(html.contains("No cdf plot"));
}

#[test]
fn pings_and_an_ietf_rpm_result_show_in_the_table_and_the_html_report() {
    use bloatlab_results::{LatencyStats, PingInfo, PingSummary, RpmResult, RpmStage};
    let mut r = common::small_nolab();
    r.metadata.pings = vec![PingInfo { target: "icmp 10.0.0.1".into(), address: "10.0.0.1".into(), method: "raw ICMP socket".into(), interval_ms: 100.0 }];
    let lat = |p50: f64| LatencyStats { sent: 50, received: 49, lost: 1, loss_pct: 2.0, p50_ms: p50, p99_ms: p50 + 5.0, ..Default::default() };
    r.idle.as_mut().unwrap().summary.pings = vec![PingSummary { target: "icmp 10.0.0.1".into(), latency: lat(0.25), added_latency_ms: None }];
    r.scenarios[0].summary.pings = vec![PingSummary { target: "icmp 10.0.0.1".into(), latency: lat(88.75), added_latency_ms: Some(88.5) }];
    let mut x = RpmResult::default();
    x.method.specification = "draft-ietf-ippm-responsiveness-08".into();
    x.tls.verified = true;
    x.tls.pinned = true;
    x.stages.push(RpmStage { direction: bloatlab_model::RpmDirection::Download, rpm: Some(1234.0), confidence: "high".into(), goodput_bps: 9e6, connections: 4, ..Default::default() });
    r.rpm = Some(x);
    r.ramp = vec![bloatlab_results::RampResult {
        direction: bloatlab_results::Direction::Up,
        steps: vec![
            bloatlab_results::RampStep { scenario: "1u0d".into(), flows: 1, goodput_bps: 5e6 },
            bloatlab_results::RampStep { scenario: "2u0d".into(), flows: 2, goodput_bps: 5.1e6 },
        ],
        saturated_at: Some(1),
        capacity_bps: 5.1e6,
        growth: 0.05,
        stopped: "saturated at 1 flow(s): doubling them to 2 added only 2.0% goodput (less than 5%)".into(),
    }];
    let t = summary_table(&r);
    assert!(t.contains("Auto-ramp upload: 1 flow(s) 5.00 Mbit/s, 2 flow(s) 5.10 Mbit/s; saturated at 1 flow(s)"), "{t}");
    assert!(t.contains("Pings to other hosts: icmp 10.0.0.1 = 10.0.0.1 (raw ICMP socket, every 100 ms)"), "{t}");
    let row = t.lines().find(|l| l.contains("icmp 10.0.0.1") && l.contains("+88.5")).unwrap_or_else(|| panic!("no loaded ping row: {t}"));
    assert!(row.contains("88.8") && row.contains("93.8") && row.ends_with("2.0"), "{row}");
    assert!(t.contains("IETF RPM: download 1230 (high confidence); draft-ietf-ippm-responsiveness-08, HTTP/2 load"), "{t}");
    assert!(t.contains("pinned by SHA-256"), "{t}");
    let html = render_html(&[Run { label: "x", result: &r }]).unwrap();
    let pings = &html[html.find("<table class=\"pings\">").expect("an HTML ping table")..];
    let pings = &pings[..pings.find("</table>").unwrap()];
    assert!(pings.contains("<td>+88.5</td>") && pings.contains("<td>icmp 10.0.0.1</td>"), "{pings}");
    assert!(html.contains("<p class=\"ramp\">Auto-ramp upload: 1 flow(s)"), "no ramp line in the HTML");
    assert!(html.contains("<h2>Responsiveness (IETF RPM)</h2>") && html.contains("download RPM") && html.contains(">1230<"), "no RPM section");
}

/// The time axes end with the last phase, not with a lab sampler that ran
/// on through an RPM stage (the issue saw 0-39 s for a 10 s test).
#[test]
fn the_time_axis_ends_with_the_last_phase() {
    let mut r = common::small();
    let end = r.scenarios.last().unwrap().end_ns;
    let lab = r.lab.as_mut().unwrap();
    let mut late = lab.queues[0].samples.last().unwrap().clone();
    late.t_ns = end + 29_000_000_000;
    lab.queues[0].samples.push(late);
    assert!((bloatlab_report::series::test_span_s(&r) - end as f64 / 1e9).abs() < 1e-9);
}

/// A UDP load's rows (offered, received, loss, jitter per phase and
/// direction) are in the terminal summary and the HTML report alike.
#[test]
fn udp_rows_show_in_the_terminal_and_the_html_report() {
    let mut r = common::small_nolab();
    r.scenarios[0].summary.udp = vec![bloatlab_results::UdpSummary {
        direction: bloatlab_results::Direction::Up,
        flows: 2,
        offered_bps: 40e6,
        received_bps: 31.25e6,
        sent: 10000,
        received: 7812,
        lost: 2188,
        loss_pct: 21.88,
        out_of_order: 3,
        jitter_ms: 0.4567,
    }];
    let t = summary_table(&r);
    let row = t.lines().find(|l| l.contains("21.88")).unwrap_or_else(|| panic!("no UDP row: {t}"));
    assert!(row.contains("40.0") && row.contains("31.3") && row.contains("0.457"), "{row}");
    let html = render_html(&[Run { label: "x", result: &r }]).unwrap();
    let udp = &html[html.find("<table class=\"udp\">").expect("an HTML UDP table")..];
    let udp = &udp[..udp.find("</table>").unwrap()];
    for cell in ["<th>Offered Mbit/s</th>", "<td>40.0</td>", "<td>31.3</td>", "<td>2188</td>", "<td>21.88</td>", "<td>0.457</td>"] {
        assert!(udp.contains(cell), "{cell} not in {udp}");
    }
}

/// `--dscp` classes: a row per phase and class in the terminal summary and
/// the HTML report, a `classes` plot, and the class probes in the CSV.
#[test]
fn dscp_classes_show_in_every_output() {
    use bloatlab_results::{ClassProbes, ClassSummary, LatencyStats};
    let mut r = common::small_nolab();
    let ph = r.scenarios[0].clone();
    let marked: Vec<_> = ph.probes.iter().map(|p| bloatlab_results::Probe { rtt_ns: p.rtt_ns.map(|v| v / 10), ..*p }).collect();
    r.scenarios[0].class_probes = vec![ClassProbes { dscp: 0, probes: ph.probes.clone() }, ClassProbes { dscp: 46, probes: marked }];
    r.scenarios[0].flows[0].dscp = 46;
    let lat = |p50: f64| LatencyStats { sent: 100, received: 99, lost: 1, loss_pct: 1.0, p50_ms: p50, p99_ms: p50 * 2.0, ..Default::default() };
    r.scenarios[0].summary.classes = vec![
        ClassSummary { dscp: 0, class: "BE".into(), download_flows: 1, download_bps: 7.25e6, latency: lat(80.0), added_latency_ms: Some(60.0), ..Default::default() },
        ClassSummary { dscp: 46, class: "EF".into(), upload_flows: 1, upload_bps: 2.5e6, latency: lat(4.5), added_latency_ms: Some(2.25), retransmits: 3, ..Default::default() },
    ];
    let t = summary_table(&r);
    assert!(t.contains("Per DSCP class (--dscp)"), "{t}");
    let ef = t.lines().find(|l| l.contains(" EF ")).unwrap_or_else(|| panic!("no EF row: {t}"));
    for cell in ["46", "1/0", "2.50", "4.50", "9.00", "+2.25", "1.0"] {
        assert!(ef.contains(cell), "{cell} not in {ef}");
    }
    let html = render_html(&[Run { label: "x", result: &r }]).unwrap();
    let tab = &html[html.find("<table class=\"classes\">").expect("an HTML class table")..];
    let tab = &tab[..tab.find("</table>").unwrap()];
    assert!(tab.contains("<td>EF</td>") && tab.contains("<td>+60.0</td>") && tab.contains("<td>7.25</td>"), "{tab}");
    assert!(html.contains("<h2>Per DSCP class</h2>") && html.contains("Round trip of each class"), "no class plot in the HTML");
    let csv = bloatlab_report::csv_string(&r);
    assert!(csv.lines().next().unwrap().ends_with(",queue,dscp"));
    let rows: Vec<&str> = csv.lines().filter(|l| l.contains(",class_probe,")).collect();
    assert_eq!(rows.len(), 2 * ph.probes.len());
    assert!(rows.iter().filter(|l| l.ends_with(",46")).count() == ph.probes.len(), "EF probes carry their DSCP");
    assert!(csv.lines().any(|l| l.contains(",goodput,") && l.ends_with(",46")), "a marked flow's rows carry its DSCP");
    // a result without classes has no class plot
    let plain = common::small_nolab();
    assert!(bloatlab_report::plot_available(&[Run { label: "p", result: &plain }], bloatlab_report::PlotKind::Classes).is_err());
}

/// The grade recorded in a result's headline is the verdict's, for every
/// fixture (one rule: `metrics::grade`).
#[test]
fn the_headline_grade_is_the_verdicts() {
    for mut r in [common::small(), common::small_nolab(), common::large(), common::everything()] {
        bloatlab_metrics::grade::record(&mut r);
        let v = verdict(&r);
        let want = if v.grade == Grade::Unknown { None } else { Some(v.grade.as_str().to_string()) };
        assert_eq!(r.headline.grade, want, "{}", v.sentence);
    }
    // and it reaches the JSON
    let mut r = common::small();
    bloatlab_metrics::grade::record(&mut r);
    let j = serde_json::to_value(&r).unwrap();
    assert_eq!(j["headline"]["grade"].as_str(), r.headline.grade.as_deref());
}

/// A browser's household test: `bloatlab report` shows each profile's
/// verdict (`metrics::household`) in the terminal and the HTML report.
#[test]
fn the_household_verdicts_are_in_the_text_and_html_reports() {
    use bloatlab_results::{CallRecord, Household, Probe, Segment, StreamRecord};
    let mut r = common::small();
    let last = r.scenarios.len() - 1;
    r.scenarios[last].name = "household".into();
    let (start, end) = (r.scenarios[last].start_ns, r.scenarios[last].end_ns);
    let frames = (0..100u32)
        .map(|i| Probe { seq: i, t_ns: start + i as u64 * 33_000_000, rtt_ns: (i % 10 != 0).then_some(40_000_000), server_rx_unix_ns: Some(1), owd_up_ns: None, owd_down_ns: None })
        .collect();
    r.household = Some(Household {
        phase: "household".into(),
        game_interval_ms: 20.0,
        call: CallRecord { frames_per_second: 30, frame_bytes: 6250, frames, lost_way_known: true },
        stream: StreamRecord {
            segment_ms: 4000.0,
            segment_bytes: 1_500_000,
            segments: vec![Segment { t_ns: start, first_byte_ns: Some(5_000_000), done_ns: Some(1_500_000_000), bytes: 1_500_000 }],
        },
    });
    assert!(end > start);
    let t = summary_table(&r);
    assert!(t.contains("Household test (a game, a video call, a stream and a bulk update at once"), "{t}");
    let call = t.lines().find(|l| l.trim_start().starts_with("video call")).unwrap_or_else(|| panic!("no call row: {t}"));
    assert!(call.contains("poor") && call.contains("10 of 100 frames lost"), "{call}");
    let stream = t.lines().find(|l| l.trim_start().starts_with("stream")).unwrap_or_else(|| panic!("no stream row: {t}"));
    assert!(stream.contains("good") && stream.contains("slowest segment 1.50 s"), "{stream}");
    let html = render_html(&[Run { label: "x", result: &r }]).unwrap();
    let table = &html[html.find("<table class=\"household\">").expect("an HTML household table")..];
    assert!(table[..table.find("</table>").unwrap()].contains("<td>poor</td>"), "{table}");
    // a result without one has no such table
    assert!(!summary_table(&common::small()).contains("Household test"));
}
