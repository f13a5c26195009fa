//! Terminal tables: the per-test summary, seed 003's per-scenario lines, and
//! the side-by-side comparison of several results.
use crate::fmt::{ms, opt_ms, opt_sig3, pct_change, rate, sig3, signed, text_table, trim_num, RateUnit};
use crate::series::loaded;
use crate::verdict::verdict;
use bloatlab_results::{Direction, Phase, TestResult};

fn opt_rate(bps: f64, present: bool, unit: RateUnit) -> String {
    if present {
        unit.num(bps)
    } else {
        "-".into()
    }
}

/// The unit of the phase tables' goodput columns: the one the largest
/// goodput of any phase needs (Gbit/s on a fast link).
pub(crate) fn phase_rate_unit(r: &TestResult) -> RateUnit {
    RateUnit::fit_all(r.idle.iter().chain(r.scenarios.iter()).flat_map(|p| [p.summary.upload_bps, p.summary.download_bps]))
}

/// One line of context: where, when, how.
pub(crate) fn context_line(r: &TestResult) -> String {
    let m = &r.metadata;
    let what = if r.client == bloatlab_results::ClientKind::Browser { "browser test" } else { "test" };
    // the household test's phase has its own length
    let household = r.household.as_ref().and_then(|h| r.scenarios.iter().find(|p| p.name == h.phase));
    let scenarios = match household {
        Some(h) => format!(
            "{} scenario(s) x {} s + household {} s",
            r.scenarios.len() - 1,
            match m.until_settled_s {
                Some(cap) => format!("{}-{}", trim_num(m.scenario_duration_s), trim_num(cap)),
                None => trim_num(m.scenario_duration_s),
            },
            trim_num(((h.end_ns - h.start_ns) as f64 / 1e8).round() / 10.0)
        ),
        // phases that run until latency stopped rising: their least and most
        None => match m.until_settled_s {
            Some(cap) => format!("{} x {}-{} s (until latency stopped rising)", scenario_count(r), trim_num(m.scenario_duration_s), trim_num(cap)),
            None => format!("{} x {} s", scenario_count(r), trim_num(m.scenario_duration_s)),
        },
    };
    let mut s = format!(
        "bloatlab {} {what} to {} at {}; cc {}; {scenarios}, idle {} s; probes every {} ms",
        m.bloatlab_version,
        if m.server_address.is_empty() { "?" } else { &m.server_address },
        if m.start_time.is_empty() { "?" } else { &m.start_time },
        if m.cc.is_empty() { "default" } else { &m.cc },
        trim_num(m.idle_duration_s),
        trim_num(m.probe_interval_ms),
    );
    if let Some(lab) = &r.lab {
        s.push_str(&format!("; lab backend {}, offloads {}", lab.backend, lab.offloads));
    }
    s
}

/// "2 scenario(s)", or "1 of 2 scenario(s) run" when a run ended early.
pub(crate) fn scenario_count(r: &TestResult) -> String {
    let (ran, asked) = (r.scenarios.len(), r.metadata.scenario_definitions.len());
    if asked > ran {
        format!("{ran} of {asked} scenario(s) run")
    } else {
        format!("{ran} scenario(s)")
    }
}

/// A capacity, or "not measured" when no scenario loaded that direction.
pub(crate) fn capacity(bps: f64, measured: bool) -> String {
    if measured {
        rate(bps)
    } else {
        "not measured (no scenario loaded this direction)".into()
    }
}

fn phase_row(p: &Phase, unit: RateUnit) -> Vec<String> {
    let s = &p.summary;
    vec![
        p.name.clone(),
        opt_rate(s.upload_bps, p.uploads > 0, unit),
        opt_rate(s.download_bps, p.downloads > 0, unit),
        if s.latency.received > 0 { ms(s.latency.p50_ms) } else { "-".into() },
        if s.latency.received > 0 { ms(s.latency.p90_ms) } else { "-".into() },
        if s.latency.received > 0 { ms(s.latency.p99_ms) } else { "-".into() },
        s.added_latency_ms.map(signed).unwrap_or_else(|| "-".into()),
        if s.latency.sent > 0 { format!("{:.1}", s.latency.loss_pct) } else { "-".into() },
        opt_sig3(s.responsiveness_hz),
        opt_sig3(s.smoothness_hz),
        s.rpm.map(crate::fmt::int3).unwrap_or_else(|| "-".into()),
    ]
}

/// The phase where a direction's UDP load delivered most, when every
/// scenario loaded that direction with UDP only.
pub(crate) fn udp_best(r: &TestResult, d: Direction) -> Option<(&Phase, &bloatlab_results::UdpSummary)> {
    let loading: Vec<&Phase> = r.scenarios.iter().filter(|p| p.flows.iter().any(|f| f.direction == d)).collect();
    if loading.is_empty() || !loading.iter().all(|p| p.flows.iter().filter(|f| f.direction == d).all(|f| f.udp.is_some())) {
        return None;
    }
    loading
        .into_iter()
        .flat_map(|p| p.summary.udp.iter().filter(|u| u.direction == d).map(move |u| (p, u)))
        .max_by(|a, b| a.1.received_bps.total_cmp(&b.1.received_bps))
}

/// UDP load flows (`--udp`): per phase and direction, what was offered
/// and what arrived, loss, reordering and jitter, from the phase summary's
/// `udp`: a header row and one row each (None without UDP flows). The
/// terminal and the HTML report render these rows.
pub(crate) fn udp_rows(r: &TestResult) -> Option<Vec<Vec<String>>> {
    let all: Vec<(&Phase, &bloatlab_results::UdpSummary)> = r.scenarios.iter().flat_map(|p| p.summary.udp.iter().map(move |u| (p, u))).collect();
    if all.is_empty() {
        return None;
    }
    // one unit for both rate columns: the largest offered or received rate's
    let unit = RateUnit::fit_all(all.iter().flat_map(|(_, u)| [u.offered_bps, u.received_bps]));
    let (offered_h, got_h) = (format!("Offered {}", unit.name()), format!("Received {}", unit.name()));
    let mut rows = vec![["Phase", "Dir", "Flows", &offered_h, &got_h, "Sent", "Lost", "Loss %", "Reordered", "Jitter ms"]
        .iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>()];
    for (p, u) in all {
        rows.push(vec![
            p.name.clone(),
            u.direction.name().into(),
            u.flows.to_string(),
            unit.num(u.offered_bps),
            unit.num(u.received_bps),
            u.sent.to_string(),
            u.lost.to_string(),
            format!("{:.2}", u.loss_pct),
            u.out_of_order.to_string(),
            ms(u.jitter_ms),
        ]);
    }
    Some(rows)
}

/// Per DSCP class (`--dscp`), per phase: the class's flows and goodput, its
/// marked probes' latency, loss and one-way delays, from the phase
/// summary's `classes` (None without classes). Terminal and HTML render these.
pub(crate) fn class_rows(r: &TestResult) -> Option<Vec<Vec<String>>> {
    let all: Vec<(&Phase, &bloatlab_results::ClassSummary)> =
        r.idle.iter().chain(r.scenarios.iter()).flat_map(|p| p.summary.classes.iter().map(move |c| (p, c))).collect();
    if all.is_empty() {
        return None;
    }
    let unit = RateUnit::fit_all(all.iter().flat_map(|(_, c)| [c.upload_bps, c.download_bps]));
    let (up_h, down_h) = (format!("Up {}", unit.name()), format!("Down {}", unit.name()));
    let mut rows = vec![["Phase", "Class", "DSCP", "Flows up/down", &up_h, &down_h, "RTT p50 ms", "p99 ms", "Added ms", "Loss %", "OWD up/down ms", "Retrans"]
        .iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>()];
    for (p, c) in all {
        let l = &c.latency;
        let rx = l.received > 0;
        rows.push(vec![
            p.name.clone(),
            c.class.clone(),
            c.dscp.to_string(),
            format!("{}/{}", c.upload_flows, c.download_flows),
            if c.upload_flows > 0 { unit.num(c.upload_bps) } else { "-".into() },
            if c.download_flows > 0 { unit.num(c.download_bps) } else { "-".into() },
            if rx { ms(l.p50_ms) } else { "-".into() },
            if rx { ms(l.p99_ms) } else { "-".into() },
            c.added_latency_ms.map(signed).unwrap_or_else(|| "-".into()),
            format!("{:.1}", l.loss_pct),
            format!("{} / {}", crate::fmt::opt_ms(c.owd_up_p50_ms), crate::fmt::opt_ms(c.owd_down_p50_ms)),
            c.retransmits.to_string(),
        ]);
    }
    Some(rows)
}

/// What the class table shows (terminal heading, HTML caption).
pub(crate) const CLASS_TABLE_TITLE: &str =
    "Per DSCP class (--dscp): goodput of the class's flows; latency, loss and one-way delays of UDP probes marked with the class and answered in it";

fn class_table(r: &TestResult) -> String {
    class_rows(r).map(|rows| format!("\n{CLASS_TABLE_TITLE}:\n{}", text_table(&rows))).unwrap_or_default()
}

/// What the UDP table shows, in one line (terminal heading, HTML caption).
pub(crate) const UDP_TABLE_TITLE: &str = "UDP load (datagrams at a target rate; jitter: RFC 3550, the largest flow's)";

fn udp_table(r: &TestResult) -> String {
    udp_rows(r).map(|rows| format!("\n{UDP_TABLE_TITLE}:\n{}", text_table(&rows))).unwrap_or_default()
}

/// The terminal summary printed after a test: per-phase table, seed 003's
/// headline four, and the verdict line.
/// Pings to other hosts (--ping, --tcp-ping): one row per phase and target.
/// The pings to other hosts: how each was pinged, and a row per phase and
/// target (the first row is the header); None without pings. The text and
/// HTML tables both show these.
pub(crate) fn ping_rows(r: &TestResult) -> Option<(String, Vec<Vec<String>>)> {
    if r.metadata.pings.is_empty() {
        return None;
    }
    let how: Vec<String> =
        r.metadata.pings.iter().map(|p| format!("{} = {} ({}, every {} ms)", p.target, p.address, p.method, p.interval_ms)).collect();
    let mut rows = vec![["Phase", "Target", "RTT p50 ms", "p99 ms", "Added ms", "Loss %"].iter().map(|s| s.to_string()).collect::<Vec<_>>()];
    for p in r.idle.iter().chain(r.scenarios.iter()) {
        for s in &p.summary.pings {
            let l = &s.latency;
            rows.push(vec![
                p.name.clone(),
                s.target.clone(),
                if l.received > 0 { ms(l.p50_ms) } else { "-".into() },
                if l.received > 0 { ms(l.p99_ms) } else { "-".into() },
                s.added_latency_ms.map(signed).unwrap_or_else(|| "-".into()),
                format!("{:.1}", l.loss_pct),
            ]);
        }
    }
    Some((how.join("; "), rows))
}

/// One line per ramped direction (`--scenarios auto`): the goodput of each
/// step and where the ramp stopped. The text summary and the HTML report
/// both show these.
pub(crate) fn ramp_lines(r: &TestResult) -> Vec<String> {
    r.ramp.iter().map(|d| d.line(rate)).collect()
}

/// What the household table shows (terminal heading, HTML caption).
pub(crate) const HOUSEHOLD_TABLE_TITLE: &str =
    "Household test (a game, a video call, a stream and a bulk update at once; each judged by its rule, docs/web.md)";

/// The household test's verdicts (`metrics::household`), a row per profile
/// (the first row is the header); None without a household test.
pub(crate) fn household_rows(r: &TestResult) -> Option<Vec<Vec<String>>> {
    let v = bloatlab_metrics::household::household(r);
    if v.is_empty() {
        return None;
    }
    let mut rows = vec![vec!["Profile".to_string(), "Verdict".into(), "Measured".into()]];
    for u in v {
        rows.push(vec![u.name, u.verdict.as_str().into(), u.measured]);
    }
    Some(rows)
}

/// A line per profile (its words are long: a table would pad them apart).
fn household_table(r: &TestResult) -> String {
    let Some(rows) = household_rows(r) else { return String::new() };
    let mut s = format!("\n{HOUSEHOLD_TABLE_TITLE}:\n");
    for row in &rows[1..] {
        s.push_str(&format!("  {:<12} {:<5} {}\n", row[0], row[1], row[2]));
    }
    s
}

fn ping_table(r: &TestResult) -> String {
    match ping_rows(r) {
        Some((how, rows)) => format!("\nPings to other hosts: {how}\n{}", text_table(&rows)),
        None => String::new(),
    }
}

pub fn summary_table(r: &TestResult) -> String {
    let mut out = String::new();
    if !r.complete {
        out.push_str(&format!(
            "INCOMPLETE RUN: {}\n",
            r.incomplete_reason.as_deref().unwrap_or("interrupted")
        ));
    }
    out.push_str(&context_line(r));
    out.push('\n');
    out.push_str(&phase_table(r));
    out.push_str(&witness_table(r));
    out.push_str(&ping_table(r));
    out.push_str(&udp_table(r));
    out.push_str(&class_table(r));
    out.push_str(&household_table(r));
    if let Some(x) = &r.rpm {
        out.push_str("\nIETF responsiveness against the same server, after the scenarios (bloatlab test --rpm):\n");
        out.push_str(&crate::rpm::rpm_table(x));
    }
    out.push('\n');
    out.push_str(&capacity_lines(r));
    out.push_str(&headline_lines(r));
    out.push_str(&clock_lines(r));
    out.push_str(&verdict(r).line());
    out.push('\n');
    out
}

/// A row per phase: goodput, probe RTT percentiles, added latency, loss,
/// responsiveness, smoothness, UDP-probe RPM.
fn phase_table(r: &TestResult) -> String {
    let unit = phase_rate_unit(r);
    let (up, down) = (format!("Up {}", unit.name()), format!("Down {}", unit.name()));
    let mut rows = vec![[
        "Phase", &up, &down, "RTT p50 ms", "p90 ms", "p99 ms", "Added ms", "Loss %",
        "Resp Hz", "Smooth Hz", "UDP RPM",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect::<Vec<_>>()];
    for p in r.idle.iter().chain(r.scenarios.iter()) {
        rows.push(phase_row(p, unit));
    }
    text_table(&rows)
}

/// The witness host's latency per phase, when one was probed.
fn witness_table(r: &TestResult) -> String {
    let mut out = String::new();
    let wit: Vec<&Phase> =
        r.idle.iter().chain(r.scenarios.iter()).filter(|p| p.summary.witness_latency.is_some()).collect();
    if !wit.is_empty() {
        out.push_str(&format!(
            "\nWitness host {} (latency a bystander sees):\n",
            r.metadata.witness_address.as_deref().unwrap_or("?")
        ));
        let mut rows = vec![["Phase", "RTT p50 ms", "p99 ms", "Added ms", "Loss %"].iter().map(|s| s.to_string()).collect::<Vec<_>>()];
        for p in wit {
            let w = p.summary.witness_latency.unwrap();
            rows.push(vec![
                p.name.clone(),
                if w.received > 0 { ms(w.p50_ms) } else { "-".into() },
                if w.received > 0 { ms(w.p99_ms) } else { "-".into() },
                p.summary.witness_added_latency_ms.map(signed).unwrap_or_else(|| "-".into()),
                format!("{:.1}", w.loss_pct),
            ]);
        }
        out.push_str(&text_table(&rows));
    }
    out
}

/// Capacity per direction (or, for a UDP-only direction, what it delivered), and the ramp's lines.
fn capacity_lines(r: &TestResult) -> String {
    let mut out = String::new();
    let h = &r.headline;
    let (any_up, any_down) = (r.scenarios.iter().any(|p| p.uploads > 0), r.scenarios.iter().any(|p| p.downloads > 0));
    for (d, any, cap, label) in [
        (Direction::Up, any_up, h.upload_capacity_bps, "    Upload Capacity"),
        (Direction::Down, any_down, h.download_capacity_bps, "  Download Capacity"),
    ] {
        match udp_best(r, d) {
            // a UDP load measures delivery at the rate it was given, not capacity
            Some((p, u)) => out.push_str(&format!(
                "{:>19}: {} received of {} offered ({}), {}% lost, jitter {} ms\n",
                if d == Direction::Up { "Upload (UDP)" } else { "Download (UDP)" },
                rate(u.received_bps),
                rate(u.offered_bps),
                p.name,
                sig3(u.loss_pct),
                ms(u.jitter_ms)
            )),
            None => out.push_str(&format!("{label}: {}\n", capacity(cap, any))),
        }
    }
    for l in ramp_lines(r) {
        out.push_str(&format!("          {l}\n"));
    }
    out
}

/// Responsiveness, smoothness, latency, the IETF RPM and the goodput rule.
fn headline_lines(r: &TestResult) -> String {
    let mut out = String::new();
    let h = &r.headline;
    let worst_rr = r.scenarios.iter().filter_map(|p| p.summary.responsiveness_ms).fold(None, |a: Option<f64>, b| Some(a.map_or(b, |a| a.max(b))));
    let worst_gap = r.scenarios.iter().filter_map(|p| p.summary.smoothness_ms).fold(None, |a: Option<f64>, b| Some(a.map_or(b, |a| a.max(b))));
    out.push_str(&format!(
        "Link Responsiveness: {} Hz{}\n",
        opt_sig3(h.link_responsiveness_hz),
        worst_rr.map(|v| format!(" (worst request/response round trip {} ms)", ms(v))).unwrap_or_default()
    ));
    out.push_str(&format!(
        "    Flow Smoothness: {} Hz{}\n",
        opt_sig3(h.flow_smoothness_hz),
        worst_gap.map(|v| format!(" (longest gap in a flow {} ms)", ms(v))).unwrap_or_default()
    ));
    let mut lat = format!("            Latency: idle {} ms, loaded {} ms", opt_ms(h.idle_latency_ms), opt_ms(h.loaded_latency_ms));
    if let Some(a) = h.max_added_latency_ms {
        lat.push_str(&format!(" ({} ms)", signed(a)));
    }
    if let Some(rpm) = h.rpm {
        lat.push_str(&format!("; UDP-probe RPM {}", crate::fmt::int3(rpm)));
    }
    out.push_str(&lat);
    out.push('\n');
    if let Some(x) = &r.rpm {
        let stages: Vec<String> = x
            .stages
            .iter()
            .map(|s| format!("{} {} ({} confidence)", s.direction, s.rpm.map(crate::fmt::int3).unwrap_or_else(|| "-".into()), s.confidence))
            .collect();
        out.push_str(&format!("           IETF RPM: {}; {}, HTTP/2 load\n", stages.join(", "), x.method.specification));
    }
    if !r.metadata.trimming_rule.is_empty() {
        // the rule itself is in the JSON (metadata.trimming_rule) and docs/metrics.md;
        // what the receivers did with the data is a TCP statement
        let tcp = r.scenarios.iter().any(|p| p.flows.iter().any(|f| f.udp.is_none()));
        let received = if tcp { format!("; TCP data {}", r.metadata.socket.receive_mode()) } else { "; UDP datagram payload".into() };
        out.push_str(&format!("            Goodput: mean over each scenario's steady part (rule: metadata.trimming_rule){received}\n"));
    }
    out.push_str(&settling_line(r));
    out
}

/// How long each loaded phase ran when phases run until latency stopped
/// rising, and which phases ended still rising (their added latency is a
/// lower bound), in any run.
fn settling_line(r: &TestResult) -> String {
    let rising: Vec<&str> = r.scenarios.iter().filter(|p| p.summary.still_rising).map(|p| p.name.as_str()).collect();
    let rising = if rising.is_empty() {
        String::new()
    } else {
        format!("; still rising when it ended (the queue had not shown its size; added latency at least as shown): {}", rising.join(", "))
    };
    match r.metadata.until_settled_s {
        Some(cap) => {
            let ran: Vec<String> = r.scenarios.iter().map(|p| format!("{} {} s", p.name, crate::fmt::sig3((p.end_ns - p.start_ns) as f64 / 1e9))).collect();
            format!(
                "             Phases: each at least {} s, then until latency stopped rising, at most {} s (metadata.settle_rule): {}{rising}\n",
                trim_num(r.metadata.scenario_duration_s),
                trim_num(cap),
                ran.join(", ")
            )
        }
        None if !rising.is_empty() => format!("             Phases: {} s each{rising}\n", trim_num(r.metadata.scenario_duration_s)),
        None => String::new(),
    }
}

/// One-way delays and the clock offset they rest on.
fn clock_lines(r: &TestResult) -> String {
    let mut out = String::new();
    let c = &r.metadata.clock_offset;
    if !c.method.is_empty() {
        // One-way delays are only as good as this estimate: say how it was made.
        let owd = loaded(r)
            .filter_map(|p| Some((p.name.as_str(), p.summary.owd_up_p50_ms?, p.summary.owd_down_p50_ms?)))
            .map(|(n, u, d)| format!("{n} {} / {} ms", ms(u), ms(d)))
            .collect::<Vec<_>>();
        if !owd.is_empty() {
            out.push_str(&format!("      One-way delay: p50 up / down: {}\n", owd.join(", ")));
        }
        // how it was estimated is in metadata.clock_offset.method and docs/metrics.md
        out.push_str(&format!(
            "       Clock offset: server - client {} ms +/- {} ms, drift {:.2} ppm\n",
            ms(c.offset_ns as f64 / 1e6),
            ms(c.uncertainty_ns as f64 / 1e6),
            c.drift_ppm,
        ));
    }
    out
}

/// Seed 003's per-scenario lines, e.g.
/// `Scenario 1: 0 uploads, 1 download... 1343 KiB/s down, 31.52 Hz smoothness`.
/// Goodput in KiB/s (1024 bytes/s) as the seed prints it; from 100000
/// KiB/s on (a fast LAN, loopback) in MiB/s, which stays readable.
pub fn seed003_lines(r: &TestResult) -> String {
    let rate = |bps: f64| {
        let kib = bps / 8.0 / 1024.0;
        if kib >= 100_000.0 {
            format!("{:.0} MiB/s", kib / 1024.0)
        } else {
            format!("{kib:.0} KiB/s")
        }
    };
    let n = |k: u32, word: &str| format!("{k} {word}{}", if k == 1 { "" } else { "s" });
    let mut out = String::new();
    for (i, p) in r.scenarios.iter().enumerate() {
        let mut parts = Vec::new();
        if p.uploads > 0 {
            parts.push(format!("{} up", rate(p.summary.upload_bps)));
        }
        if p.downloads > 0 {
            parts.push(format!("{} down", rate(p.summary.download_bps)));
        }
        if let Some(hz) = p.summary.smoothness_hz {
            parts.push(format!("{hz:.2} Hz smoothness"));
        }
        out.push_str(&format!("Scenario {}: {}, {}... {}\n", i + 1, n(p.uploads, "upload"), n(p.downloads, "download"), parts.join(", ")));
    }
    out
}

/// A metric extracted for comparison: value (None = absent), formatted.
struct Metric {
    name: String,
    /// Higher is better? Used only for the legend of the difference sign.
    values: Vec<Option<f64>>,
    fmt: fn(f64) -> String,
}

fn fmt_sig3(v: f64) -> String {
    sig3(v)
}

/// A rate metric in the unit its largest value needs, named with it.
fn rate_metric(label: &str, bps: Vec<Option<f64>>) -> Metric {
    let unit = RateUnit::fit_all(bps.iter().flatten().copied());
    Metric { name: format!("  {label} {}", unit.name()), values: bps.iter().map(|v| v.map(|b| b / unit.divisor())).collect(), fmt: fmt_sig3 }
}
fn fmt_ms(v: f64) -> String {
    ms(v)
}
fn fmt_int(v: f64) -> String {
    format!("{v:.0}")
}
fn fmt_pct(v: f64) -> String {
    format!("{v:.1}")
}

/// Side-by-side comparison of several results, labelled "#1", "#2", ...
/// Differences are against the first result.
pub fn compare_table(results: &[TestResult]) -> String {
    let labels = crate::default_labels(results.len());
    let runs: Vec<(&str, &TestResult)> = labels.iter().map(String::as_str).zip(results.iter()).collect();
    compare_table_labeled(&runs)
}

/// As [`compare_table`] with your own labels (e.g. file names).
pub fn compare_table_labeled(runs: &[(&str, &TestResult)]) -> String {
    let mut out = String::new();
    if runs.is_empty() {
        return out;
    }
    out.push_str(&format!("Comparing {} results; differences are against {}.\n", runs.len(), runs[0].0));
    for (l, r) in runs {
        out.push_str(&format!("  {l}: {}\n", context_line(r)));
    }
    // Context differences that explain the numbers.
    let ctx: Vec<(&str, Vec<String>)> = vec![
        ("cc", runs.iter().map(|(_, r)| r.metadata.cc.clone()).collect()),
        ("client kernel", runs.iter().map(|(_, r)| r.metadata.client.kernel_or_note()).collect()),
        ("server kernel", runs.iter().map(|(_, r)| r.metadata.server.kernel_or_note()).collect()),
        ("lab backend", runs.iter().map(|(_, r)| r.lab.as_ref().map(|l| l.backend.clone()).unwrap_or_else(|| "-".into())).collect()),
        (
            "bottleneck qdisc",
            runs.iter()
                .map(|(_, r)| {
                    r.lab
                        .as_ref()
                        .and_then(|l| l.queues.iter().find(|q| q.role.starts_with("bottleneck")).map(|q| q.qdisc.clone()))
                        .unwrap_or_else(|| "-".into())
                })
                .collect(),
        ),
        ("offloads", runs.iter().map(|(_, r)| r.lab.as_ref().map(|l| l.offloads.clone()).unwrap_or_else(|| "-".into())).collect()),
    ];
    let differing: Vec<_> = ctx.into_iter().filter(|(_, v)| v.iter().any(|x| x != &v[0])).collect();
    if !differing.is_empty() {
        out.push_str("Setup differences:\n");
        for (k, v) in differing {
            let parts: Vec<String> = runs.iter().zip(v.iter()).map(|((l, _), x)| format!("{l}={x}")).collect();
            out.push_str(&format!("  {k}: {}\n", parts.join(", ")));
        }
    }
    out.push('\n');
    out.push_str(&text_table(&compare_grid(runs)));
    out.push('\n');
    for (l, r) in runs {
        let v = verdict(r);
        out.push_str(&format!("{l}: {}\n", v.line()));
    }
    out
}

/// The comparison as rows: header first; section rows have only their first
/// cell filled.
pub(crate) fn compare_grid(runs: &[(&str, &TestResult)]) -> Vec<Vec<String>> {
    let mut header = vec!["".to_string()];
    for (i, (l, _)) in runs.iter().enumerate() {
        header.push(l.to_string());
        if i > 0 {
            header.push(format!("diff {l}"));
        }
    }
    let mut rows = vec![header];
    let push = |rows: &mut Vec<Vec<String>>, m: Metric| {
        if m.values.iter().all(|v| v.is_none()) {
            return;
        }
        let mut row = vec![m.name.clone()];
        let base = m.values[0];
        for (i, v) in m.values.iter().enumerate() {
            row.push(v.map(m.fmt).unwrap_or_else(|| "-".into()));
            if i > 0 {
                row.push(match (base, v) {
                    (Some(b), Some(x)) => {
                        let abs = signed(x - b);
                        let rel = pct_change(b, *x);
                        if rel == "-" { abs } else { format!("{abs} ({rel})") }
                    }
                    _ => "-".into(),
                });
            }
        }
        rows.push(row);
    };
    let all = |f: &dyn Fn(&TestResult) -> Option<f64>| runs.iter().map(|(_, r)| f(r)).collect::<Vec<_>>();
    let section = |rows: &mut Vec<Vec<String>>, title: &str| {
        let mut r = vec![title.to_string()];
        r.resize(rows[0].len(), String::new());
        rows.push(r);
    };
    section(&mut rows, "Headline");
    push(&mut rows, rate_metric("Upload capacity", all(&|r| Some(r.headline.upload_capacity_bps))));
    push(&mut rows, rate_metric("Download capacity", all(&|r| Some(r.headline.download_capacity_bps))));
    push(&mut rows, Metric { name: "  Link responsiveness Hz".into(), values: all(&|r| r.headline.link_responsiveness_hz), fmt: fmt_sig3 });
    push(&mut rows, Metric { name: "  Flow smoothness Hz".into(), values: all(&|r| r.headline.flow_smoothness_hz), fmt: fmt_sig3 });
    push(&mut rows, Metric { name: "  Idle latency ms".into(), values: all(&|r| r.headline.idle_latency_ms), fmt: fmt_ms });
    push(&mut rows, Metric { name: "  Loaded latency ms".into(), values: all(&|r| r.headline.loaded_latency_ms), fmt: fmt_ms });
    push(&mut rows, Metric { name: "  Added latency ms".into(), values: all(&|r| r.headline.max_added_latency_ms), fmt: fmt_ms });
    push(&mut rows, Metric { name: "  UDP RPM".into(), values: all(&|r| r.headline.rpm), fmt: crate::fmt::int3 });

    // Scenarios by name, in first-seen order.
    let mut names: Vec<String> = Vec::new();
    for (_, r) in runs {
        for p in r.idle.iter().chain(r.scenarios.iter()) {
            if !names.contains(&p.name) {
                names.push(p.name.clone());
            }
        }
    }
    for name in &names {
        let ph = |r: &TestResult| -> Option<Phase> { r.idle.iter().chain(r.scenarios.iter()).find(|p| &p.name == name).cloned() };
        let phs: Vec<Option<Phase>> = runs.iter().map(|(_, r)| ph(r)).collect();
        let get = |f: &dyn Fn(&Phase) -> Option<f64>| phs.iter().map(|p| p.as_ref().and_then(f)).collect::<Vec<_>>();
        section(&mut rows, &format!("Scenario {name}"));
        push(&mut rows, rate_metric("Upload", get(&|p| (p.uploads > 0).then_some(p.summary.upload_bps))));
        push(&mut rows, rate_metric("Download", get(&|p| (p.downloads > 0).then_some(p.summary.download_bps))));
        push(&mut rows, Metric { name: "  RTT p50 ms".into(), values: get(&|p| (p.summary.latency.received > 0).then_some(p.summary.latency.p50_ms)), fmt: fmt_ms });
        push(&mut rows, Metric { name: "  RTT p90 ms".into(), values: get(&|p| (p.summary.latency.received > 0).then_some(p.summary.latency.p90_ms)), fmt: fmt_ms });
        push(&mut rows, Metric { name: "  RTT p99 ms".into(), values: get(&|p| (p.summary.latency.received > 0).then_some(p.summary.latency.p99_ms)), fmt: fmt_ms });
        // The loaded part (metadata.latency_rule): what added latency reads,
        // beside the RTT of every probe of the phase above.
        push(&mut rows, Metric { name: "  Loaded p50 ms".into(), values: get(&|p| p.summary.loaded_p50_ms), fmt: fmt_ms });
        push(&mut rows, Metric { name: "  Loaded from s".into(), values: get(&|p| p.summary.loaded_from_s), fmt: fmt_sig3 });
        push(&mut rows, Metric { name: "  Added latency ms".into(), values: get(&|p| p.summary.added_latency_ms), fmt: fmt_ms });
        push(&mut rows, Metric { name: "  Loss %".into(), values: get(&|p| (p.summary.latency.sent > 0).then_some(p.summary.latency.loss_pct)), fmt: fmt_pct });
        push(&mut rows, Metric { name: "  Responsiveness Hz".into(), values: get(&|p| p.summary.responsiveness_hz), fmt: fmt_sig3 });
        push(&mut rows, Metric { name: "  Smoothness Hz".into(), values: get(&|p| p.summary.smoothness_hz), fmt: fmt_sig3 });
        push(&mut rows, Metric { name: "  UDP RPM".into(), values: get(&|p| p.summary.rpm), fmt: crate::fmt::int3 });
        push(&mut rows, Metric { name: "  Retransmits".into(), values: get(&|p| (p.uploads + p.downloads > 0).then_some(p.summary.retransmits as f64)), fmt: fmt_int });
    }
    rows
}
