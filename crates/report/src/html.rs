//! The HTML report: one self-contained file (inline CSS and SVG, no scripts,
//! no network fetches) with the verdict, headline numbers, summary table,
//! plots and metadata. Several results make a comparison report.
use crate::fmt::{esc, ms, opt_sig3, rate, sig3, signed, RateUnit};
use crate::plot::{plot_runs, plot_svg_string, Format, PlotKind};
use crate::series;
use crate::table::{compare_grid, context_line, seed003_lines};
use crate::verdict::{grade_color, verdict, GRADE_THRESHOLDS_MS};
use crate::Run;
use anyhow::{bail, Context, Result};
use bloatlab_results::{Direction, Phase, TestResult};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

const CSS: &str = r#"
:root { --fg:#1f2328; --muted:#59636e; --line:#d1d9e0; --bg:#ffffff; --soft:#f6f8fa; --up:#1f77b4; --down:#e66e00; }
* { box-sizing: border-box; }
body { margin:0; background:var(--bg); color:var(--fg);
  font: 15px/1.45 "DejaVu Sans", "Segoe UI", Helvetica, Arial, sans-serif; }
main { max-width: 1240px; margin: 0 auto; padding: 24px 28px 48px; }
header h1 { font-size: 26px; margin: 0 0 4px; }
header p { margin: 0; color: var(--muted); font-size: 13px; }
h2 { font-size: 19px; margin: 34px 0 10px; padding-bottom: 4px; border-bottom: 1px solid var(--line); }
.verdict { display:flex; gap:20px; align-items:center; margin: 22px 0 8px; padding: 16px 20px;
  border:1px solid var(--line); border-radius: 10px; background: var(--soft); }
.grade { flex: 0 0 auto; width: 84px; height: 84px; border-radius: 14px; color: #fff; font-size: 42px;
  font-weight: 700; display:flex; align-items:center; justify-content:center; }
.grade.small { width: 46px; height: 46px; font-size: 22px; border-radius: 9px; }
.verdict .headline { font-size: 18px; font-weight: 600; margin: 0 0 4px; }
.verdict p { margin: 0 0 4px; }
.note { color: var(--muted); font-size: 12.5px; }
.cards { display:grid; grid-template-columns: repeat(auto-fit, minmax(170px, 1fr)); gap: 12px; margin: 16px 0; }
.card { border:1px solid var(--line); border-radius: 10px; padding: 10px 14px; }
.card .k { color: var(--muted); font-size: 12.5px; text-transform: uppercase; letter-spacing: .03em; }
.card { min-width: 0; }
.card .v { font-size: 21px; font-weight: 650; overflow-wrap: anywhere; }
.card .u { font-size: 14px; color: var(--muted); font-weight: 400; }
table { border-collapse: collapse; width: 100%; font-size: 13px; font-variant-numeric: tabular-nums; }
th, td { padding: 5px 7px; border-bottom: 1px solid var(--line); text-align: right; white-space: nowrap; }
th:first-child, td:first-child { text-align: left; }
thead th { background: var(--soft); font-weight: 600; position: sticky; top: 0; white-space: normal; vertical-align: bottom; }
tr.section td { background: var(--soft); font-weight: 600; text-align: left; }
td.worse { color: #b42318; } td.better { color: #1a7f37; }
table.meta td { text-align: left; white-space: normal; }
table.witness { width: auto; min-width: 50%; }
table.verdicts td { white-space: normal; text-align: left; vertical-align: middle; }
table.household th, table.household td { white-space: normal; text-align: left; }
table.verdicts td:first-child { width: 34%; }
table.compare { width: auto; min-width: 70%; }
table.meta td:first-child { color: var(--muted); width: 220px; }
figure { margin: 10px 0 18px; border:1px solid var(--line); border-radius: 10px; padding: 8px; }
figure svg { width: 100%; height: auto; display:block; }
figcaption { color: var(--muted); font-size: 12.5px; padding: 4px 6px 0; }
pre { background: var(--soft); border:1px solid var(--line); border-radius: 8px; padding: 10px 12px;
  font: 12.5px/1.4 "DejaVu Sans Mono", Menlo, Consolas, monospace; overflow-x: auto; }
.scroll { overflow-x: auto; }
.warn { background:#fff8c5; border:1px solid #d4a72c; border-radius: 8px; padding: 8px 12px; margin: 12px 0; }
footer { margin-top: 40px; color: var(--muted); font-size: 12px; }
"#;

/// An inline SVG figure; a plot that has nothing to draw becomes a short note
/// instead of failing the whole report.
fn figure(runs: &[Run], kind: PlotKind, caption: &str) -> Result<String> {
    let svg = match plot_svg_string(runs, kind) {
        Ok(s) => s,
        Err(e) => return Ok(format!("<p class=\"note\">No {} plot: {}.</p>\n", kind.name(), esc(&e.to_string()))),
    };
    Ok(format!(
        "<figure class=\"plot-{}\">{}<figcaption>{}</figcaption></figure>\n",
        kind.name(),
        crate::fmt::svg_inline(&svg),
        esc(caption)
    ))
}

fn grade_thresholds_note() -> String {
    let mut parts = vec![];
    for (g, lim) in GRADE_THRESHOLDS_MS {
        parts.push(format!("{g} &lt; {lim:.0} ms"));
    }
    parts.push("F &ge; 400 ms".into());
    format!(
        "Grade from the added round-trip latency of the worst loaded scenario (loaded median minus idle median): {}. Thresholds: DSLReports speed test bufferbloat grades (also used by the Waveform bufferbloat test).",
        parts.join(", ")
    )
}

fn verdict_block(r: &TestResult) -> String {
    let v = verdict(r);
    let head = match v.added_latency_ms {
        Some(a) => format!(
            "{} ms added latency under load (median UDP-probe round trip, loaded vs idle){}",
            signed(a),
            v.worst_scenario.as_ref().map(|s| format!(" (worst: {s})")).unwrap_or_default()
        ),
        None => "Added latency unknown".to_string(),
    };
    format!(
        "<section class=\"verdict\"><div class=\"grade\" style=\"background:{}\" title=\"bufferbloat grade\">{}</div>\
<div><p class=\"headline\">{}</p><p class=\"sentence\">{}</p><p class=\"note\">{}</p></div></section>\n",
        grade_color(v.grade),
        esc(v.grade.as_str()),
        esc(&head),
        esc(&v.sentence),
        grade_thresholds_note()
    )
}

fn cards(r: &TestResult) -> String {
    let h = &r.headline;
    let card = |k: &str, v: String, u: &str, title: &str| {
        // value and unit stay on one line together (a no-break space), the card wraps between values
        format!("<div class=\"card\" title=\"{}\"><div class=\"k\">{}</div><div class=\"v\">{}&nbsp;<span class=\"u\">{}</span></div></div>", esc(title), esc(k), esc(&v), esc(u))
    };
    let mut s = String::from("<section class=\"cards\">");
    let (up, down) = (r.scenarios.iter().any(|p| p.uploads > 0), r.scenarios.iter().any(|p| p.downloads > 0));
    let cap = |measured: bool, bps: f64| {
        let u = RateUnit::fit(bps);
        if measured { (u.num(bps), u.name()) } else { ("not measured".to_string(), "") }
    };
    for (d, any, bps, name) in [(Direction::Up, up, h.upload_capacity_bps, "upload"), (Direction::Down, down, h.download_capacity_bps, "download")] {
        match crate::table::udp_best(r, d) {
            Some((_, x)) => {
                let u = RateUnit::fit(x.received_bps);
                let title = format!("UDP at {} offered: {} received, {}% lost (a UDP load measures delivery at its rate, not capacity)", rate(x.offered_bps), rate(x.received_bps), sig3(x.loss_pct));
                s.push_str(&card(&format!("{} (UDP) received", if name == "upload" { "Upload" } else { "Download" }), u.num(x.received_bps), u.name(), &title));
            }
            None => {
                let (v, u) = cap(any, bps);
                let title = format!("highest {name} goodput over scenarios (not measured when no scenario loads that direction)");
                s.push_str(&card(&format!("{} capacity", if name == "upload" { "Upload" } else { "Download" }), v, u, &title));
            }
        }
    }
    s.push_str(&card("Link responsiveness", opt_sig3(h.link_responsiveness_hz), "Hz", "1 / worst TCP request-response round trip under load"));
    s.push_str(&card("Flow smoothness", opt_sig3(h.flow_smoothness_hz), "Hz", "1 / longest gap between data arrivals in a bulk flow"));
    s.push_str(&card("Latency idle → loaded", format!("{}\u{a0}→ {}", crate::fmt::opt_ms(h.idle_latency_ms), crate::fmt::opt_ms(h.loaded_latency_ms)), "ms", "median RTT idle and in the worst scenario"));
    s.push_str(&card("UDP-probe RPM", h.rpm.map(crate::fmt::int3).unwrap_or_else(|| "-".into()), "RPM", "60000 / the 95% trimmed mean of the UDP probes' round trips under load, a lost probe counted as 3 s (the IETF draft's unit, not its method: bloatlab rpm runs that)"));
    s.push_str("</section>\n");
    s
}

fn phase_cells(p: &Phase, unit: RateUnit) -> Vec<String> {
    let s = &p.summary;
    let l = &s.latency;
    let rx = l.received > 0;
    vec![
        p.name.clone(),
        if p.uploads > 0 { unit.num(s.upload_bps) } else { "-".into() },
        if p.downloads > 0 { unit.num(s.download_bps) } else { "-".into() },
        if rx { format!("{}/{}/{}/{}", ms(l.min_ms), ms(l.avg_ms), ms(l.max_ms), ms(l.mdev_ms)) } else { "-".into() },
        if rx { ms(l.p50_ms) } else { "-".into() },
        if rx { ms(l.p90_ms) } else { "-".into() },
        if rx { ms(l.p99_ms) } else { "-".into() },
        s.added_latency_ms.map(signed).unwrap_or_else(|| "-".into()),
        format!("{:.1}% ({}/{})", l.loss_pct, l.lost, l.sent),
        format!("{} / {}", crate::fmt::opt_ms(s.owd_up_p50_ms), crate::fmt::opt_ms(s.owd_down_p50_ms)),
        opt_sig3(s.responsiveness_hz),
        opt_sig3(s.smoothness_hz),
        s.rpm.map(crate::fmt::int3).unwrap_or_else(|| "-".into()),
        s.retransmits.to_string(),
    ]
}

fn summary_html(r: &TestResult) -> String {
    let unit = crate::table::phase_rate_unit(r);
    let (up, down) = (format!("Up {}", unit.name()), format!("Down {}", unit.name()));
    let head = [
        "Phase", &up, &down, "RTT min/ avg/max/mdev ms", "p50", "p90", "p99", "Added ms", "Loss", "OWD up/down ms",
        "Resp Hz", "Smooth Hz", "UDP RPM", "Retrans",
    ];
    let mut s = String::from("<div class=\"scroll\"><table class=\"summary\"><thead><tr>");
    for h in head {
        let _ = write!(s, "<th>{}</th>", esc(h));
    }
    s.push_str("</tr></thead><tbody>");
    for p in r.idle.iter().chain(r.scenarios.iter()) {
        s.push_str("<tr>");
        for c in phase_cells(p, unit) {
            let _ = write!(s, "<td>{}</td>", esc(&c));
        }
        s.push_str("</tr>");
    }
    s.push_str("</tbody></table></div>\n");
    let wit: Vec<&Phase> = r.idle.iter().chain(r.scenarios.iter()).filter(|p| p.summary.witness_latency.is_some()).collect();
    if !wit.is_empty() {
        let _ = write!(
            s,
            "<h3>Witness host {}</h3><div class=\"scroll\"><table class=\"witness\"><thead><tr><th>Phase</th><th>RTT p50 ms</th><th>p90</th><th>p99</th><th>Added ms</th><th>Loss</th></tr></thead><tbody>",
            esc(r.metadata.witness_address.as_deref().unwrap_or(""))
        );
        for p in wit {
            let w = p.summary.witness_latency.unwrap();
            let _ = write!(
                s,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1}% ({}/{})</td></tr>",
                esc(&p.name),
                ms(w.p50_ms),
                ms(w.p90_ms),
                ms(w.p99_ms),
                p.summary.witness_added_latency_ms.map(signed).unwrap_or_else(|| "-".into()),
                w.loss_pct,
                w.lost,
                w.sent
            );
        }
        s.push_str("</tbody></table></div>\n");
    }
    if let Some(rows) = crate::table::class_rows(r) {
        let _ = write!(s, "<h3>Per DSCP class</h3><p>{}</p>{}", esc(crate::table::CLASS_TABLE_TITLE), crate::fmt::html_table("classes", &rows));
    }
    if let Some(rows) = crate::table::udp_rows(r) {
        let _ = write!(s, "<h3>UDP load</h3><p>{}</p>{}", esc(crate::table::UDP_TABLE_TITLE), crate::fmt::html_table("udp", &rows));
    }
    if let Some(rows) = crate::table::household_rows(r) {
        let _ = write!(
            s,
            "<h3>Household test</h3><p>The browser's household test: a game, a video call, a stream and a bulk update at once, each judged by its rule (docs/web.md).</p>{}",
            crate::fmt::html_table("household", &rows)
        );
    }
    if let Some((how, rows)) = crate::table::ping_rows(r) {
        let _ = write!(s, "<h3>Pings to other hosts</h3><p>{}</p>{}", esc(&how), crate::fmt::html_table("pings", &rows));
    }
    s
}

/// (key, value) metadata rows: everything needed to reproduce or judge the run.
fn meta_rows(r: &TestResult) -> Vec<(String, String)> {
    let m = &r.metadata;
    let mut v: Vec<(String, String)> = vec![
        ("bloatlab version".into(), format!("{} (protocol {}, result schema {} v{})", m.bloatlab_version, m.protocol_version, r.schema, r.schema_version)),
        ("start".into(), format!("{} (unix ns {})", m.start_time, m.start_unix_ns)),
        ("command".into(), m.command.join(" ")),
        ("server".into(), m.server_address.clone()),
        ("client host".into(), format!("{} — default cc {} (available: {})", m.client.identity(), m.client.default_cc, m.client.available_cc.join(" "))),
        ("server host".into(), format!("{} — bloatlab {} — default cc {}", m.server.identity(), m.server.bloatlab_version, m.server.default_cc)),
        ("congestion control".into(), m.cc.clone()),
        ("scenarios".into(), format!("{} — {} s each, idle baseline {} s", m.scenario_definitions.join(", "), sig3(m.scenario_duration_s), sig3(m.idle_duration_s))),
        ("probes".into(), format!("UDP, {} bytes every {} ms", m.probe_size, sig3(m.probe_interval_ms))),
        ("sampling".into(), format!("goodput and TCP_INFO every {} ms", sig3(m.sample_interval_ms))),
        ("goodput trimming".into(), m.trimming_rule.clone()),
        ("socket".into(), format!("MSS {} bytes; sndbuf {} / rcvbuf {} bytes ({})", m.socket.mss, m.socket.sndbuf, m.socket.rcvbuf, if m.socket.buffers_set { "set by bloatlab" } else { "kernel autotuning" })),
        ("receivers".into(), m.socket.receive_mode().into()),
        ("clock offset".into(), format!("{}; offset {} ms, drift {} ppm, ±{} ms, {} samples", m.clock_offset.method, sig3(m.clock_offset.offset_ns as f64 / 1e6), sig3(m.clock_offset.drift_ppm), sig3(m.clock_offset.uncertainty_ns as f64 / 1e6), m.clock_offset.samples_used)),
    ];
    if let Some(w) = &m.witness_address {
        v.push(("witness".into(), w.clone()));
    }
    if let Some(o) = &m.server_rpm {
        v.push(("server RPM endpoints".into(), format!("port {}, certificate SHA-256 {}", o.port, o.certificate_sha256)));
    }
    if let Some(lab) = &r.lab {
        v.push(("lab backend".into(), format!("{} on kernel {}", lab.backend, lab.kernel)));
        v.push(("offloads (TSO/GSO/GRO)".into(), lab.offloads.clone()));
        let qs: Vec<String> = lab.queues.iter().map(|q| format!("{}: {} at {}", q.role, q.qdisc, q.location)).collect();
        v.push(("queues".into(), qs.join("; ")));
        if let Some(a) = lab.analytic_queue_delay_up_ms {
            v.push(("analytic queue delay up".into(), format!("{} ms", sig3(a))));
        }
        if let Some(a) = lab.analytic_queue_delay_down_ms {
            v.push(("analytic queue delay down".into(), format!("{} ms", sig3(a))));
        }
        v.push(("qdiscs available".into(), lab.qdiscs_available.join(" ")));
        v.push(("qdiscs missing".into(), lab.qdiscs_missing.join(" ")));
        let hosts: Vec<String> = lab.hosts.iter().map(|h| format!("{} ({}: {})", h.role, h.netns, h.addresses.join(" "))).collect();
        v.push(("lab hosts".into(), hosts.join("; ")));
        for (q, pk) in lab.queues.iter().filter_map(|q| Some((q, series::queue_over_test(q)?))) {
            v.push((
                format!("queue {} observed", q.role),
                format!(
                    "max backlog {} packets / {} bytes{}; {} drops",
                    pk.max_backlog_packets,
                    pk.max_backlog_bytes,
                    pk.max_delay_ms.map(|d| format!(" = {} ms at the measured drain rate {}", ms(d), rate(pk.drain_bps.unwrap_or(0.0)))).unwrap_or_default(),
                    pk.drops
                ),
            ));
        }
    }
    v
}

fn meta_html(r: &TestResult) -> String {
    let mut s = String::from("<table class=\"meta\"><tbody>");
    for (k, v) in meta_rows(r) {
        let _ = write!(s, "<tr><td>{}</td><td>{}</td></tr>", esc(&k), esc(&v));
    }
    s.push_str("</tbody></table>\n");
    if let Some(lab) = &r.lab {
        let cfg = serde_json::to_string_pretty(&lab.config).unwrap_or_default();
        let _ = writeln!(s, "<details><summary>Lab configuration (resolved)</summary><pre>{}</pre></details>", esc(&cfg));
        if let Some(e) = &lab.emulator {
            let _ = writeln!(s, "<details><summary>Emulator counters</summary><pre>{}</pre></details>", esc(&serde_json::to_string_pretty(e).unwrap_or_default()));
        }
    }
    s
}

/// `bloatlab history --html`: the runs as a page, the plots over time
/// (`plot::history`) above the table of `history::history_rows`.
pub fn history_html(rows: &[bloatlab_results::history::RunRow], by: crate::history::By, what: &str) -> Result<String> {
    let mut body = format!("<h1>bloatlab history</h1>\n<p class=\"context\">{}</p>\n", esc(what));
    if rows.is_empty() {
        body.push_str("<p>No runs in this range.</p>\n");
        return Ok(page("bloatlab history", &body));
    }
    for (caption, svg) in crate::plot::history::history_svgs(rows, by)? {
        let _ = write!(body, "<figure class=\"plot-history\">{}<figcaption>{}</figcaption></figure>\n", crate::fmt::svg_inline(&svg), esc(&caption));
    }
    let (t, failures, note) = crate::history::history_rows(rows, by);
    body.push_str("<h2>Runs</h2>\n");
    body.push_str(&crate::fmt::html_table("history", &t));
    if let Some(n) = note {
        let _ = write!(body, "<p>{}</p>\n", esc(&n));
    }
    if !failures.is_empty() {
        body.push_str("<h2>Failures</h2>\n<ul>\n");
        for f in failures {
            let _ = writeln!(body, "<li>{}</li>", esc(&f));
        }
        body.push_str("</ul>\n");
    }
    Ok(page("bloatlab history", &body))
}

pub(crate) fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<meta name=\"generator\" content=\"bloatlab {}\">\n<title>{}</title>\n<style>{}</style>\n</head>\n<body><main>\n{}\n<footer>Generated by bloatlab {} — a self-contained page: inline styles and SVG, no scripts, nothing fetched from the network.</footer>\n</main></body>\n</html>\n",
        env!("CARGO_PKG_VERSION"),
        esc(title),
        CSS,
        body,
        env!("CARGO_PKG_VERSION")
    )
}

fn single_title(r: &TestResult) -> String {
    let m = &r.metadata;
    let what = if r.lab.is_some() { "lab".to_string() } else { m.server_address.clone() };
    format!("bloatlab report — {} — {}", what, m.start_time)
}

fn single_body(run: Run) -> Result<String> {
    let r = run.result;
    let runs = [run];
    let mut b = String::new();
    let _ = writeln!(b, "<header><h1>bloatlab report</h1><p>{}</p></header>", esc(&context_line(r)));
    if !r.complete {
        let _ = writeln!(b, "<div class=\"warn\">Incomplete run: {}. The numbers cover only what ran.</div>", esc(r.incomplete_reason.as_deref().unwrap_or("interrupted")));
    }
    b.push_str(&verdict_block(r));
    b.push_str(&cards(r));
    b.push_str("<h2>Summary</h2>\n");
    b.push_str(&summary_html(r));
    for l in crate::table::ramp_lines(r) {
        let _ = writeln!(b, "<p class=\"ramp\">{}</p>", esc(&l));
    }
    let seed = seed003_lines(r);
    if !seed.is_empty() {
        let _ = writeln!(b, "<pre class=\"seed003\">{}</pre>", esc(&seed));
    }
    if let Some(x) = &r.rpm {
        let _ = writeln!(
            b,
            "<h2>Responsiveness (IETF RPM)</h2>\n<p>{}, against the same server after the scenarios: HTTP/2 load-generating connections, \
             foreign probes on fresh connections, self probes on the loaded ones.</p>",
            esc(&x.method.specification)
        );
        b.push_str(&crate::rpm::rpm_section(x)?);
    }
    if !series::phases(r).is_empty() {
        b.push_str("<h2>Over time</h2>\n");
        let panels = if r.lab.as_ref().is_some_and(|l| l.queues.iter().any(|q| !q.samples.is_empty())) {
            "Goodput (top), latency (middle) and the bottleneck queues (bottom)"
        } else {
            "Goodput (top) and latency (bottom)"
        };
        let caption = format!("{panels} on one time axis; shaded bands are the test phases. Lost probes are red ticks at the top of the latency panel (lost witness probes brown, just below). Goodput is the data each receiver got in sequence per sample: data held behind a lost packet arrives all at once when the loss is repaired, so a line can spike above the link rate right after a dip. Long series are thinned for display only (min/max per pixel bucket); all statistics use every sample.");
        b.push_str(&figure(&runs, PlotKind::Timeseries, &caption)?);
        b.push_str("<h2>Latency distribution</h2>\n");
        b.push_str(&figure(&runs, PlotKind::Cdf, "CDF over all probes sent: lost probes count as infinitely late, so a curve tops out at 1 - loss.")?);
        b.push_str(&figure(&runs, PlotKind::Box, "RTT per phase.")?);
        if r.lab.as_ref().is_some_and(|l| l.queues.iter().any(|q| !q.samples.is_empty())) {
            b.push_str("<h2>Bottleneck queues</h2>\n");
            b.push_str(&figure(&runs, PlotKind::Queue, "Queue backlog from the kernel (tc) or the emulator; queueing delay = backlog bytes / drain rate measured while the queue was busy.")?);
        }
        if crate::plot::plot_available(&runs, PlotKind::Classes).is_ok() {
            b.push_str("<h2>Per DSCP class</h2>\n");
            b.push_str(&figure(&runs, PlotKind::Classes, "Each class's goodput (solid: upload, dashed: download) and the round trips of UDP probes marked with it (answered in the same class), as flent's RRUL plots them: a working priority queue keeps the higher classes' latency low.")?);
        }
        if series::phases(r).iter().any(|p| p.flows.iter().any(|f| !f.tcp_info.is_empty())) {
            b.push_str("<h2>TCP internals</h2>\n");
            b.push_str(&figure(&runs, PlotKind::Tcp, "TCP_INFO sampled on each flow's sending socket.")?);
        }
    }
    b.push_str("<h2>Metadata</h2>\n");
    b.push_str(&meta_html(r));
    Ok(b)
}

pub(crate) fn compare_body(runs: &[Run]) -> Result<String> {
    let mut b = String::new();
    let _ = writeln!(b, "<header><h1>bloatlab comparison</h1><p>{} results; differences are against {}.</p></header>", runs.len(), esc(runs[0].label));
    b.push_str("<h2>Verdicts</h2>\n<table class=\"verdicts\"><tbody>");
    for run in runs {
        let v = verdict(run.result);
        let _ = write!(
            b,
            "<tr><td><b>{}</b><br><span class=\"note\">{}</span></td><td style=\"width:60px\"><div class=\"grade small\" style=\"background:{}\">{}</div></td><td>{}</td></tr>",
            esc(run.label),
            esc(&context_line(run.result)),
            grade_color(v.grade),
            esc(v.grade.as_str()),
            esc(&v.line())
        );
    }
    let _ = writeln!(b, "</tbody></table><p class=\"note\">{}</p>", grade_thresholds_note());
    b.push_str("<h2>Side by side</h2>\n<div class=\"scroll\"><table class=\"compare\"><thead><tr>");
    let pairs: Vec<(&str, &TestResult)> = runs.iter().map(|r| (r.label, r.result)).collect();
    let grid = compare_grid(&pairs);
    for h in &grid[0] {
        let _ = write!(b, "<th>{}</th>", esc(h));
    }
    b.push_str("</tr></thead><tbody>");
    for row in &grid[1..] {
        if row.iter().skip(1).all(|c| c.is_empty()) {
            let _ = write!(b, "<tr class=\"section\"><td colspan=\"{}\">{}</td></tr>", row.len(), esc(&row[0]));
            continue;
        }
        b.push_str("<tr>");
        for (i, c) in row.iter().enumerate() {
            let class = if grid[0][i].starts_with("diff ") { diff_class(&row[0], c) } else { "" };
            if class.is_empty() {
                let _ = write!(b, "<td>{}</td>", esc(c.trim_start()));
            } else {
                let _ = write!(b, "<td class=\"{class}\">{}</td>", esc(c.trim_start()));
            }
        }
        b.push_str("</tr>");
    }
    b.push_str("</tbody></table></div>\n");
    b.push_str("<h2>Latency distribution</h2>\n");
    b.push_str(&figure(runs, PlotKind::Cdf, "Loaded probes of each result pooled over scenarios (solid) and the idle baseline (dashed); lost probes count as infinitely late.")?);
    b.push_str(&figure(runs, PlotKind::Box, "RTT per phase, results side by side.")?);
    for run in runs {
        if series::phases(run.result).is_empty() {
            continue;
        }
        let _ = writeln!(b, "<h2>{} over time</h2>", esc(run.label));
        b.push_str(&figure(std::slice::from_ref(run), PlotKind::Timeseries, "Goodput and latency over time.")?);
    }
    b.push_str("<h2>Metadata</h2>\n<div class=\"scroll\"><table class=\"meta\"><thead><tr><th></th>");
    for run in runs {
        let _ = write!(b, "<th style=\"text-align:left\">{}</th>", esc(run.label));
    }
    b.push_str("</tr></thead><tbody>");
    let metas: Vec<Vec<(String, String)>> = runs.iter().map(|r| meta_rows(r.result)).collect();
    let mut keys: Vec<String> = vec![];
    for m in &metas {
        for (k, _) in m {
            if !keys.contains(k) {
                keys.push(k.clone());
            }
        }
    }
    for k in keys {
        let _ = write!(b, "<tr><td>{}</td>", esc(&k));
        for m in &metas {
            let v = m.iter().find(|(kk, _)| kk == &k).map(|(_, v)| v.as_str()).unwrap_or("-");
            let _ = write!(b, "<td>{}</td>", esc(v));
        }
        b.push_str("</tr>");
    }
    b.push_str("</tbody></table></div>\n");
    Ok(b)
}

/// "better" / "worse" for a difference cell like "-149 (-88.8%)" of a metric
/// named like "  RTT p50 ms"; "" when unchanged (< 2 %) or neutral.
fn diff_class(metric: &str, cell: &str) -> &'static str {
    let m = metric.trim();
    let higher_better = if m.ends_with("bit/s") || m.ends_with("Hz") || m.ends_with("RPM") {
        true
    } else if m.ends_with("ms") || m.starts_with("Loss") || m.starts_with("Retransmits") {
        false
    } else {
        return "";
    };
    let c = cell.trim();
    let rel: Option<f64> = c.split_once('(').and_then(|(_, r)| r.trim_end_matches(')').trim_end_matches('%').parse().ok());
    let up = c.starts_with('+');
    let down = c.starts_with('-') && c != "-";
    if !(up || down) || rel.is_some_and(|r: f64| r.abs() < 2.0) {
        return "";
    }
    if up == higher_better {
        "better"
    } else {
        "worse"
    }
}

/// The report as an HTML string: one result = a test report, several = a comparison.
pub fn render_html(runs: &[Run]) -> Result<String> {
    match runs.len() {
        0 => bail!("no result to report"),
        1 => Ok(page(&single_title(runs[0].result), &single_body(runs[0])?)),
        n => Ok(page(&format!("bloatlab comparison — {n} results"), &compare_body(runs)?)),
    }
}

/// Write the HTML report to `path`.
pub fn write_html(runs: &[Run], path: &Path) -> Result<()> {
    let s = render_html(runs)?;
    std::fs::write(path, s).with_context(|| format!("writing {}", path.display()))
}

/// Files written by [`write_report`].
#[derive(Debug, Clone, Default)]
pub struct ReportFiles {
    pub html: PathBuf,
    pub images: Vec<PathBuf>,
    /// Plots not written because they had nothing to draw, with the reason.
    pub skipped: Vec<String>,
}

/// Write `<stem>.html` and the plots as PNG (or SVG) files into `dir`.
/// One result: timeseries, cdf, box, and queue (lab) / tcp (when sampled).
/// Several: cdf and box overlays plus one timeseries per result.
pub fn write_report(runs: &[Run], dir: &Path, stem: &str, image_format: Format) -> Result<ReportFiles> {
    if runs.is_empty() {
        bail!("no result to report");
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut files = ReportFiles { html: dir.join(format!("{stem}.html")), images: vec![], skipped: vec![] };
    write_html(runs, &files.html)?;
    let ext = image_format.ext();
    let mut emit = |runs: &[Run], kind: PlotKind, name: String| -> Result<()> {
        let p = dir.join(name);
        // Nothing to draw (e.g. every probe lost): note it, keep the report.
        if let Err(e) = crate::plot::plot_available(runs, kind) {
            files.skipped.push(format!("{} plot: {e}", kind.name()));
            return Ok(());
        }
        plot_runs(runs, kind, image_format, &p)?;
        files.images.push(p);
        Ok(())
    };
    if runs.len() == 1 {
        let r = runs[0].result;
        if series::phases(r).is_empty() {
            return Ok(files);
        }
        emit(runs, PlotKind::Timeseries, format!("{stem}.timeseries.{ext}"))?;
        emit(runs, PlotKind::Cdf, format!("{stem}.cdf.{ext}"))?;
        emit(runs, PlotKind::Box, format!("{stem}.box.{ext}"))?;
        if r.lab.as_ref().is_some_and(|l| l.queues.iter().any(|q| !q.samples.is_empty())) {
            emit(runs, PlotKind::Queue, format!("{stem}.queue.{ext}"))?;
        }
        if series::phases(r).iter().any(|p| p.flows.iter().any(|f| !f.tcp_info.is_empty())) {
            emit(runs, PlotKind::Tcp, format!("{stem}.tcp.{ext}"))?;
        }
        if !series::phases(r).iter().all(|p| p.summary.classes.is_empty()) {
            emit(runs, PlotKind::Classes, format!("{stem}.classes.{ext}"))?;
        }
    } else {
        emit(runs, PlotKind::Cdf, format!("{stem}.cdf.{ext}"))?;
        emit(runs, PlotKind::Box, format!("{stem}.box.{ext}"))?;
        for run in runs {
            if series::phases(run.result).is_empty() {
                continue;
            }
            let safe: String = run.label.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' { c } else { '_' }).collect();
            emit(std::slice::from_ref(run), PlotKind::Timeseries, format!("{stem}.{safe}.timeseries.{ext}"))?;
        }
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    #[test]
    fn diff_classes() {
        use super::diff_class;
        assert_eq!(diff_class("  RTT p50 ms", "-149 (-88.8%)"), "better");
        assert_eq!(diff_class("  Upload Mbit/s", "-2.00 (-20.0%)"), "worse");
        assert_eq!(diff_class("  Responsiveness Hz", "+0.310 (+8.9%)"), "better");
        assert_eq!(diff_class("  Loss %", "+3.00"), "worse");
        assert_eq!(diff_class("  RTT p50 ms", "+0.01 (+1.0%)"), "");
        assert_eq!(diff_class("  RTT p50 ms", "-"), "");
        assert_eq!(diff_class("  RTT p50 ms", "0"), "");
    }
}

