//! The lab's summary table: latency under load beside the analytic queue delay.
use bloatlab_results::{Phase, QueueSeries, TestResult};

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
    "p99",
    "added",
    "witness added",
    "analytic",
    "max backlog",
    "drops",
];

pub fn ms(x: f64) -> String {
    if !x.is_finite() {
        "-".into()
    } else if x.abs() < 10.0 {
        format!("{x:.2}")
    } else if x.abs() < 100.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.0}")
    }
}

fn mbit(bps: f64) -> String {
    if bps >= 1e9 {
        format!("{:.2} Gbit/s", bps / 1e9)
    } else if bps >= 1e6 {
        format!("{:.2} Mbit/s", bps / 1e6)
    } else {
        format!("{:.0} kbit/s", bps / 1e3)
    }
}

/// Change of a cumulative counter and the max backlog over [start, end] of a phase.
pub fn queue_in_phase(series: &[QueueSeries], role_prefix: &str, p: &Phase) -> (u64, u64, u64) {
    let mut drops = 0;
    let mut max_pkts = 0;
    let mut max_bytes = 0;
    for s in series.iter().filter(|s| s.role.starts_with(role_prefix)) {
        let inside: Vec<_> = s.samples.iter().filter(|q| q.t_ns >= p.start_ns && q.t_ns <= p.end_ns).collect();
        if let (Some(a), Some(b)) = (inside.first(), inside.last()) {
            drops += b.drops.saturating_sub(a.drops);
        }
        for q in inside {
            max_pkts = max_pkts.max(q.backlog_packets);
            max_bytes = max_bytes.max(q.backlog_bytes);
        }
    }
    (drops, max_pkts, max_bytes)
}

/// Share of the configured rate the bottleneck queue sent (frames on the wire)
/// during the steady part of a phase (the goodput's window: without its first
/// 20% and last 5%), in percent.
pub fn link_use(series: &[QueueSeries], role: &str, p: &Phase, rate_bps: f64) -> Option<f64> {
    let s = series.iter().find(|s| s.role == role)?;
    let len = p.end_ns.saturating_sub(p.start_ns) as f64;
    let (a, b) = (p.start_ns as f64 + 0.2 * len, p.start_ns as f64 + 0.95 * len);
    let inside: Vec<_> = s.samples.iter().filter(|q| q.t_ns as f64 >= a && q.t_ns as f64 <= b).collect();
    let (first, last) = (inside.first()?, inside.last()?);
    let dt = (last.t_ns - first.t_ns) as f64 / 1e9;
    if dt <= 0.0 || rate_bps <= 0.0 {
        return None;
    }
    Some(last.sent_bytes.saturating_sub(first.sent_bytes) as f64 * 8.0 / dt / rate_bps * 100.0)
}

/// Rows for one result.
pub fn rows(r: &TestResult) -> Vec<Row> {
    let lab = r.lab.as_ref();
    let cfg = lab.map(|l| &l.config);
    let s = |k: &str| cfg.and_then(|c| c.get(k)).and_then(|v| v.as_str()).unwrap_or("-").to_string();
    let queue = s("queue");
    let (ru, rd) = (s("rate_up"), s("rate_down"));
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
        let (drops, maxq, maxb) = lab.map(|l| queue_in_phase(&l.queues, "bottleneck", p)).unwrap_or((0, 0, 0));
        let util = |role: &str, key: &str| -> Option<f64> {
            let l = lab?;
            let rate = l.config.get(key)?.as_f64()?;
            link_use(&l.queues, role, p, rate)
        };
        let pct = |x: Option<f64>| x.map(|v| format!("{v:.0}%")).unwrap_or_else(|| "-".into());
        let link = match (p.uploads > 0, p.downloads > 0) {
            (true, false) => pct(util("bottleneck-up", "rate_up_bps")),
            (false, true) => pct(util("bottleneck-down", "rate_down_bps")),
            _ => format!(
                "{} up / {} down",
                pct(util("bottleneck-up", "rate_up_bps")),
                pct(util("bottleneck-down", "rate_down_bps"))
            ),
        };
        let loaded = if l.received == 0 {
            format!("all {} probes lost", l.sent)
        } else {
            format!("{}/{}/{}/{} ms", ms(l.min_ms), ms(l.avg_ms), ms(l.max_ms), ms(l.mdev_ms))
        };
        let lossnote = if l.lost > 0 && l.received > 0 { format!(" ({} lost)", l.lost) } else { String::new() };
        out.push(Row {
            cells: vec![
                queue.clone(),
                rate.clone(),
                p.name.clone(),
                goodput,
                link,
                idle_p50.map(|x| format!("{} ms", ms(x))).unwrap_or_else(|| "-".into()),
                format!("{loaded}{lossnote}"),
                if l.received > 0 { format!("{} ms", ms(l.p99_ms)) } else { "-".into() },
                sm.added_latency_ms.map(|x| format!("{} ms", ms(x))).unwrap_or_else(|| "-".into()),
                sm.witness_added_latency_ms.map(|x| format!("{} ms", ms(x))).unwrap_or_else(|| "-".into()),
                analytic,
                if lab.is_some() { format!("{maxq} pkts / {} KB", (maxb + 512) / 1000) } else { "-".into() },
                if lab.is_some() { drops.to_string() } else { "-".into() },
            ],
        });
    }
    out
}

/// Render rows as an aligned text table.
pub fn render(rows: &[Row]) -> String {
    let mut w: Vec<usize> = HEADER.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.cells.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i > 0 {
                s.push_str(" | ");
            }
            s.push_str(&format!("{:<width$}", c, width = w[i]));
        }
        s.trim_end().to_string()
    };
    let mut out = line(&HEADER.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    out.push('\n');
    out.push_str(&w.iter().map(|n| "-".repeat(*n)).collect::<Vec<_>>().join("-|-"));
    out.push('\n');
    for r in rows {
        out.push_str(&line(&r.cells));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use bloatlab_results::QueueSample;

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

    #[test]
    fn queue_statistics_over_a_phase() {
        let p = Phase { name: "1u0d".into(), uploads: 1, start_ns: 2_000_000_000, end_ns: 8_000_000_000, ..Default::default() };
        let s = vec![series("bottleneck-up"), series("sender-local-up")];
        assert_eq!(queue_in_phase(&s, "bottleneck", &p), (12, 100, 151_400));
        let u = link_use(&s, "bottleneck-up", &p, 10e6).unwrap();
        assert!((u - 100.0).abs() < 1e-9, "{u}");
        assert!(link_use(&s, "bottleneck-down", &p, 10e6).is_none());
    }

    #[test]
    fn renders_aligned() {
        let rows = vec![Row { cells: HEADER.iter().map(|h| h.to_uppercase()).collect() }];
        let t = render(&rows);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("queue | rate"));
        assert_eq!(ms(1211.2), "1211");
        assert_eq!(ms(12.11), "12.1");
        assert_eq!(ms(0.146), "0.15");
    }
}
