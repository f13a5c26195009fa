//! The lab's summary table (`bloatlab lab`): latency under load beside the
//! analytic queue delay, from the figures the result already carries.
use crate::fmt::{md_table, ms, rate as mbit};
use bloatlab_metrics::queue;
use bloatlab_results::{Phase, TestResult};

/// One table row per (run, scenario).
#[derive(Debug, Clone)]
pub struct Row {
    pub cells: Vec<String>,
}

pub const HEADER: &[&str] = &[
    "queue",
    "rate",
    "scenario",
    "goodput",
    "link use",
    "idle p50",
    "loaded min/avg/max/mdev",
    "lost",
    "p99",
    "added",
    "witness",
    "analytic",
    "max backlog",
    "drops",
];

/// The two tables a row is printed in, by column of [`HEADER`]: the
/// latency beside the analytic queue delay, then the link (each fits a
/// 120-column terminal).
const LATENCY: &[usize] = &[0, 2, 5, 6, 7, 8, 9, 10, 11];
const LINK: &[usize] = &[0, 2, 1, 3, 4, 12, 13];

/// Drops and the largest backlog (packets, bytes) of the queues whose role
/// starts with `role_prefix`, during a phase (as the lab recorded them in
/// the phase's summary).
pub fn queue_in_phase(role_prefix: &str, p: &Phase) -> (u64, u64, u64) {
    let s = queue::phase_queues_total(&p.summary.queues, role_prefix);
    (s.drops, s.max_backlog_packets, s.max_backlog_bytes)
}

/// Share of the configured rate the queue `role` sent during the steady
/// part of a phase, in percent (the phase summary's `link_use_pct`).
pub fn link_use(role: &str, p: &Phase) -> Option<f64> {
    p.summary.queues.iter().find(|q| q.role == role)?.link_use_pct
}

/// Rows for one result.
pub fn rows(r: &TestResult) -> Vec<Row> {
    let lab = r.lab.as_ref();
    let cfg = lab.map(|l| &l.config);
    let s = |f: fn(&bloatlab_results::LabRecord) -> &String| cfg.map(|c| f(c).clone()).filter(|v| !v.is_empty()).unwrap_or_else(|| "-".into());
    let queue = s(|c| &c.queue);
    let (ru, rd) = (s(|c| &c.rate_up), s(|c| &c.rate_down));
    let rate = if ru == rd { ru } else { format!("{ru} up / {rd} down") };
    let idle_p50 = r.idle.as_ref().map(|i| i.summary.latency.p50_ms);
    let mut out = Vec::new();
    for p in &r.scenarios {
        let sm = &p.summary;
        let l = &sm.latency;
        let goodput = match (p.uploads > 0, p.downloads > 0) {
            (true, false) => mbit(sm.upload_bps),
            (false, true) => mbit(sm.download_bps),
            _ => format!("{} up / {} down", mbit(sm.upload_bps), mbit(sm.download_bps)),
        };
        let analytic = {
            let up = if p.uploads > 0 { lab.and_then(|l| l.analytic_queue_delay_up_ms) } else { None };
            let dn = if p.downloads > 0 { lab.and_then(|l| l.analytic_queue_delay_down_ms) } else { None };
            match (up, dn) {
                (Some(u), Some(d)) if (u - d).abs() < 1e-9 => format!("{} ms", ms(u)),
                (Some(u), Some(d)) => format!("{} / {} ms", ms(u), ms(d)),
                (Some(x), None) | (None, Some(x)) => format!("{} ms", ms(x)),
                (None, None) => "-".into(),
            }
        };
        let (drops, maxq, maxb) = queue_in_phase("bottleneck", p);
        let util = |role: &str, _up: bool| link_use(role, p);
        let pct = |x: Option<f64>| x.map(|v| format!("{v:.0}%")).unwrap_or_else(|| "-".into());
        let link = match (p.uploads > 0, p.downloads > 0) {
            (true, false) => pct(util("bottleneck-up", true)),
            (false, true) => pct(util("bottleneck-down", false)),
            _ => format!("{} up / {} down", pct(util("bottleneck-up", true)), pct(util("bottleneck-down", false))),
        };
        let loaded = if l.received == 0 {
            format!("all {} probes lost", l.sent)
        } else {
            format!("{}/{}/{}/{} ms", ms(l.min_ms), ms(l.avg_ms), ms(l.max_ms), ms(l.mdev_ms))
        };
        let lost = if l.sent > 0 { l.lost.to_string() } else { "-".into() };
        out.push(Row {
            cells: vec![
                queue.clone(),
                rate.clone(),
                p.name.clone(),
                goodput,
                link,
                idle_p50.map(|x| format!("{} ms", ms(x))).unwrap_or_else(|| "-".into()),
                loaded,
                lost,
                if l.received > 0 { format!("{} ms", ms(l.p99_ms)) } else { "-".into() },
                sm.added_latency_ms.map(|x| format!("{} ms", ms(x))).unwrap_or_else(|| "-".into()),
                sm.witness_added_latency_ms.map(|x| format!("{} ms", ms(x))).unwrap_or_else(|| "-".into()),
                analytic,
                if lab.is_some() { format!("{maxq} pkts, {} KB", (maxb + 512) / 1000) } else { "-".into() },
                if lab.is_some() { drops.to_string() } else { "-".into() },
            ],
        });
    }
    out
}

/// Render rows as the lab's tables (the one table renderer, markdown
/// style): the latency, then the link.
pub fn render(rows: &[Row]) -> String {
    let part = |cols: &[usize]| {
        let head: Vec<&str> = cols.iter().map(|&c| HEADER[c]).collect();
        let body: Vec<Vec<String>> = rows.iter().map(|r| cols.iter().map(|&c| r.cells.get(c).cloned().unwrap_or_default()).collect()).collect();
        md_table(&head, &body)
    };
    format!("{}\n{}", part(LATENCY), part(LINK))
}

/// `text` cut into lines of at most `width` characters at spaces, each
/// after the first indented by `indent`.
fn wrap(text: &str, width: usize, indent: &str) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for w in text.split(' ') {
        if !line.is_empty() && line.chars().count() + 1 + w.chars().count() > width {
            out.push_str(&line);
            out.push('\n');
            line = indent.to_string();
        } else if !line.is_empty() && line != indent {
            line.push(' ');
        }
        line.push_str(w);
    }
    out.push_str(&line);
    out
}

/// The lab's printed report: the table, a comparison line, what the columns
/// mean, and notes (e.g. TCP small queues with a local bottleneck).
pub fn report(results: &[TestResult]) -> String {
    let rows: Vec<Row> = results.iter().flat_map(rows).collect();
    let t = render(&rows);
    let pi = results.first().map(|r| r.metadata.probe_interval_ms).unwrap_or(0.0);
    let legend = [
        format!("latency: the round trip of UDP probes to the server every {} ms (lost: how many of them went unanswered)", ms(pi)),
        "added: loaded p50 (once the load filled the queue) - idle p50; witness: the same for a third host behind the bottleneck".to_string(),
        format!("analytic: queue limit x {} B x 8 / rate, the delay of a full queue", bloatlab_model::FRAME_BYTES),
        "link use: bytes the bottleneck sent / its rate in the goodput's window; max backlog, drops: the bottleneck qdisc during the load".to_string(),
    ];
    let mut notes = legend.iter().map(|l| wrap(l, 78, "  ")).collect::<Vec<_>>().join("\n");
    if let Some(c) = compare_line(results) {
        notes = format!("{c}\n{notes}");
    }
    for r in results {
        if let Some(n) = short_local_queue_note(r) {
            notes.push_str(&format!("\nnote: {n}"));
        }
        for d in &r.ramp {
            notes.push_str(&format!("\n{}", d.line(mbit)));
        }
    }
    format!("{t}{notes}{}", extras(results))
}

/// What a run measured besides the table's columns, per queue: the pings to
/// other hosts (`-- --ping`) and the IETF RPM stages (`-- --rpm`).
fn extras(results: &[TestResult]) -> String {
    let mut out = String::new();
    for r in results {
        let label = r.lab.as_ref().map(|l| l.config.queue.clone()).filter(|q| !q.is_empty()).unwrap_or_else(|| "?".into());
        if let Some((how, rows)) = crate::table::ping_rows(r) {
            out.push_str(&format!("\n\nPings to other hosts ({label}): {how}\n{}", crate::fmt::text_table(&rows).trim_end()));
        }
        if let Some(x) = &r.rpm {
            out.push_str(&format!("\n\nIETF responsiveness ({label}), after the scenarios (-- --rpm):\n{}", crate::rpm::rpm_table(x).trim_end()));
        }
    }
    out
}

/// For several single-scenario runs: the largest and smallest added latency side by side.
fn compare_line(results: &[bloatlab_results::TestResult]) -> Option<String> {
    if results.len() < 2 || results.iter().any(|r| r.scenarios.len() != 1) {
        return None;
    }
    let added = |r: &bloatlab_results::TestResult| r.scenarios[0].summary.added_latency_ms;
    let label = |r: &bloatlab_results::TestResult| {
        r.lab.as_ref().map(|l| l.config.queue.clone()).filter(|q| !q.is_empty()).unwrap_or_else(|| "?".into())
    };
    let gp = |r: &bloatlab_results::TestResult| {
        let s = &r.scenarios[0].summary;
        mbit(s.upload_bps + s.download_bps)
    };
    let hi = results.iter().filter(|r| added(r).is_some()).max_by(|a, b| added(a).partial_cmp(&added(b)).unwrap())?;
    let lo = results.iter().filter(|r| added(r).is_some()).min_by(|a, b| added(a).partial_cmp(&added(b)).unwrap())?;
    let (h, l) = (added(hi)?, added(lo)?);
    if l <= 0.0 || std::ptr::eq(hi, lo) {
        return None;
    }
    let busy = |r: &bloatlab_results::TestResult| -> String {
        let p = &r.scenarios[0];
        let up = p.uploads > 0;
        let role = if up { "bottleneck-up" } else { "bottleneck-down" };
        link_use(role, p)
            .map(|u| format!("{u:.0}%"))
            .unwrap_or_else(|| "-".into())
    };
    Some(format!(
        "{} adds {} ms at the median, {} adds {} ms ({:.0}x), with the link {} vs {} busy (goodput {} vs {})",
        label(hi),
        ms(h),
        label(lo),
        ms(l),
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
    if lab.config.placement != "local" {
        return None;
    }
    let spec = lab.config.queue_up_spec.as_ref().or(lab.config.queue_spec.as_ref());
    let limit = spec?.fifo_packets()? as u64;
    let mut maxq = 0;
    for p in r.scenarios.iter().filter(|p| p.uploads + p.downloads > 0) {
        maxq = maxq.max(queue_in_phase("bottleneck", p).1);
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
    use bloatlab_results::{QueueSample, QueueSeries};

    fn series(role: &str) -> QueueSeries {
        QueueSeries {
            role: role.into(),
            location: "ns/dev".into(),
            qdisc: "pfifo".into(),
            samples: (0..=10)
                .map(|i| QueueSample {
                    t_ns: i * 1_000_000_000,
                    backlog_packets: if i == 5 { 100 } else { 10 },
                    backlog_bytes: if i == 5 { 151_400 } else { 15_140 },
                    drops: i * 2,
                    sent_bytes: i * 1_250_000, // 10 Mbit/s
                    ..Default::default()
                })
                .collect(),
        }
    }

    /// A complete result of one scenario phase and nothing else.
    fn one_phase(p: Phase) -> TestResult {
        TestResult {
            schema: bloatlab_results::SCHEMA_NAME.into(),
            schema_version: bloatlab_results::SCHEMA_VERSION,
            complete: true,
            incomplete_reason: None,
            metadata: Default::default(),
            idle: None,
            scenarios: vec![p],
            headline: Default::default(),
            lab: None,
            rpm: None,
            ramp: vec![],
            client: Default::default(),
            household: None,
            monitor: None,
        }
    }

    #[test]
    fn queue_statistics_over_a_phase() {
        let p = Phase { name: "1u0d".into(), uploads: 1, start_ns: 2_000_000_000, end_ns: 8_000_000_000, ..Default::default() };
        let lab = bloatlab_results::LabInfo {
            queues: vec![series("bottleneck-up"), series("sender-local-up")],
            config: bloatlab_results::LabRecord { rate_up_bps: Some(10e6), ..Default::default() },
            ..Default::default()
        };
        let mut r = one_phase(p);
        bloatlab_metrics::queue::phase_queues(&mut r, &lab);
        let p = &r.scenarios[0];
        assert_eq!(queue_in_phase("bottleneck", p), (12, 100, 151_400));
        let u = link_use("bottleneck-up", p).unwrap();
        assert!((u - 100.0).abs() < 1e-9, "{u}");
        assert!(link_use("bottleneck-down", p).is_none());
        // 151400 bytes at the 10 Mbit/s it drained at: 121 ms
        let q = &p.summary.queues[0];
        assert_eq!(q.drain_bps, Some(10e6));
        assert!((q.max_delay_ms.unwrap() - 121.12).abs() < 1e-9);
    }

    #[test]
    fn pings_and_rpm_stages_follow_the_table() {
        use bloatlab_results::{PingInfo, PingSeries, PingSummary, RpmResult, RpmStage};
        let mut p = Phase { name: "1u0d".into(), uploads: 1, ..Default::default() };
        p.summary.pings = vec![PingSummary { target: "icmp 10.0.0.1".into(), added_latency_ms: Some(88.5), ..Default::default() }];
        p.summary.pings[0].latency.received = 10;
        p.summary.pings[0].latency.p50_ms = 90.0;
        p.pings = vec![PingSeries { target: "icmp 10.0.0.1".into(), samples: vec![] }];
        let mut r = one_phase(p);
        r.metadata.pings = vec![PingInfo { target: "icmp 10.0.0.1".into(), address: "10.0.0.1".into(), method: "raw ICMP socket".into(), interval_ms: 100.0 }];
        r.lab = Some(bloatlab_results::LabInfo { config: bloatlab_results::LabRecord { queue: "fifo:100".into(), ..Default::default() }, ..Default::default() });
        let mut x = RpmResult::default();
        x.stages.push(RpmStage { direction: bloatlab_model::RpmDirection::Download, rpm: Some(133.0), confidence: "low".into(), ..Default::default() });
        r.rpm = Some(x);
        let t = report(&[r]);
        assert!(t.contains("Pings to other hosts (fifo:100): icmp 10.0.0.1 = 10.0.0.1"), "{t}");
        assert!(t.contains("+88.5"), "{t}");
        assert!(t.contains("IETF responsiveness (fifo:100)") && t.contains("download") && t.contains("133"), "{t}");
    }

    #[test]
    fn renders_aligned() {
        let rows = vec![Row { cells: HEADER.iter().map(|h| h.to_uppercase()).collect() }];
        let t = render(&rows);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 7, "{t}");
        assert!(lines[0].starts_with("| queue | scenario | idle p50 | loaded"), "{t}");
        assert!(lines[1].starts_with("| ----- |"), "{t}");
        assert!(lines[4].starts_with("| queue | scenario | rate | goodput"), "{t}");
        // the demo's widest row fits a 120-column terminal, both tables
        let demo = Row {
            cells: ["fifo:1000", "10mbit", "1u0d", "9.00 Mbit/s", "100%", "0.24 ms", "43.6/1055/1193/350 ms", "13", "1184 ms", "1047 ms", "1043 ms", "1211 ms", "1000 pkts, 1496 KB", "250"]
                .iter()
                .map(|c| c.to_string())
                .collect(),
        };
        let t = render(&[demo]);
        assert!(t.lines().all(|l| l.chars().count() <= 120), "{t}");
    }
}
