//! Turning point results into rows of named metrics: one row per point and
//! phase for lab runs (idle, then each scenario), one row per point for
//! pacing. The CSV, the tables and the plots all read these rows.
use crate::pacing::PacingResult;
use crate::params::RecipeKind;
use bloatlab_results::{LatencyStats, Phase, PhaseQueue, TestResult};

/// Metrics of a lab row, in CSV column order.
pub const LAB_METRICS: &[&str] = &[
    "uploads",
    "downloads",
    "upload_mbps",
    "download_mbps",
    "latency_min_ms",
    "latency_avg_ms",
    "latency_max_ms",
    "latency_mdev_ms",
    "latency_p50_ms",
    "latency_p90_ms",
    "latency_p99_ms",
    "latency_n",
    "latency_lost",
    "witness_min_ms",
    "witness_avg_ms",
    "witness_max_ms",
    "witness_mdev_ms",
    "witness_p50_ms",
    "witness_p90_ms",
    "witness_p99_ms",
    "witness_n",
    "witness_lost",
    "added_latency_ms",
    "witness_added_latency_ms",
    "responsiveness_ms",
    "responsiveness_hz",
    "smoothness_ms",
    "smoothness_hz",
    "rpm",
    "retransmits",
    "analytic_queue_delay_ms",
    "bottleneck_drops",
    "bottleneck_max_backlog_pkts",
    "local_drops",
    "local_max_backlog_pkts",
    "cwnd_reductions",
    "cwr_entries",
    "mean_cwnd",
    "upload_gb_per_month",
    "download_gb_per_month",
];

pub const PACING_METRICS: &[&str] = &[
    "ipi_us",
    "ideal_mbps",
    "sent_mbps",
    "achieved_mbps",
    "ratio",
    "sent_ratio",
    "burst_factor",
    "max_back_to_back",
    "gaps_within_10pct",
    "gap_p50_us",
    "gap_p99_us",
    "gap_max_us",
    "sent",
    "received",
    "lost",
    "model_ratio",
    "host_stalls",
    "host_wake_late_p99_us",
    "cpu_steal_pct",
];

pub fn metric_names(kind: RecipeKind) -> &'static [&'static str] {
    match kind {
        RecipeKind::Lab => LAB_METRICS,
        RecipeKind::Pacing => PACING_METRICS,
    }
}

/// One row: a phase of one point.
#[derive(Debug, Clone)]
pub struct Row {
    pub phase: String,
    pub values: Vec<Option<f64>>,
}

impl Row {
    pub fn get(&self, kind: RecipeKind, name: &str) -> Option<f64> {
        let i = metric_names(kind).iter().position(|m| *m == name)?;
        self.values.get(i).copied().flatten()
    }
}

fn lat(l: &LatencyStats) -> [Option<f64>; 9] {
    if l.received == 0 {
        return [None, None, None, None, None, None, None, Some(0.0), Some(l.lost as f64)];
    }
    [
        Some(l.min_ms),
        Some(l.avg_ms),
        Some(l.max_ms),
        Some(l.mdev_ms),
        Some(l.p50_ms),
        Some(l.p90_ms),
        Some(l.p99_ms),
        Some(l.received as f64),
        Some(l.lost as f64),
    ]
}

/// Drops summed and the largest backlog (packets) of the picked queues
/// during a phase, as the lab recorded them in the phase's summary.
fn queue_stats(ph: &Phase, pick: impl Fn(&PhaseQueue) -> bool) -> (Option<f64>, Option<f64>) {
    let qs: Vec<&PhaseQueue> = ph.summary.queues.iter().filter(|q| pick(q)).collect();
    if qs.is_empty() {
        return (None, None);
    }
    (Some(qs.iter().map(|q| q.drops).sum::<u64>() as f64), Some(qs.iter().map(|q| q.max_backlog_packets).max().unwrap_or(0) as f64))
}

/// A queue on a sending host's own interface: the lab's "sender-local"
/// series, or the bottleneck itself when it sits in the client or server
/// namespace (bottleneck = local).
pub fn is_local(role: &str, location: &str, qdisc: &str) -> bool {
    if role.starts_with("sender-local") {
        return qdisc != "noqueue";
    }
    let ns = location.split('/').next().unwrap_or("");
    role.starts_with("bottleneck") && (ns.ends_with("-client") || ns.ends_with("-server"))
}

/// cwnd decreases between consecutive TCP_INFO samples, entries into CWR
/// state (ca_state 2, "local congestion"), and the mean cwnd, over sending
/// sockets of the phase.
fn cwnd_stats(ph: &Phase) -> (Option<f64>, Option<f64>, Option<f64>) {
    let (mut red, mut cwr, mut sum, mut n) = (0u64, 0u64, 0f64, 0u64);
    let mut any = false;
    for f in &ph.flows {
        for w in f.tcp_info.windows(2) {
            any = true;
            if w[1].cwnd < w[0].cwnd {
                red += 1;
            }
            if w[1].ca_state == 2 && w[0].ca_state != 2 {
                cwr += 1;
            }
        }
        for s in &f.tcp_info {
            sum += s.cwnd as f64;
            n += 1;
        }
    }
    if !any {
        return (None, None, None);
    }
    (Some(red as f64), Some(cwr as f64), if n > 0 { Some(sum / n as f64) } else { None })
}

/// Analytic maximum queueing delay for the phase's direction(s), ms.
fn analytic_delay(r: &TestResult, ph: &Phase, fallback_ms: Option<f64>) -> Option<f64> {
    let lab = r.lab.as_ref();
    let up = lab.and_then(|l| l.analytic_queue_delay_up_ms);
    let down = lab.and_then(|l| l.analytic_queue_delay_down_ms);
    let v = match (ph.uploads > 0, ph.downloads > 0) {
        (true, false) => up,
        (false, true) => down,
        _ => match (up, down) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        },
    };
    v.or(fallback_ms)
}

/// Rows of a lab result: the idle phase first, then each scenario.
/// `fallback_delay_ms` is N*MTU*8/rate from the point's parameters, used when
/// the lab did not record its own analytic delay.
pub fn lab_rows(r: &TestResult, fallback_delay_ms: Option<f64>) -> Vec<Row> {
    let mut out = vec![];
    for ph in r.idle.iter().chain(r.scenarios.iter()) {
        let s = &ph.summary;
        let idle = ph.name == "idle";
        let mut v: Vec<Option<f64>> = vec![
            Some(ph.uploads as f64),
            Some(ph.downloads as f64),
            if idle { None } else { Some(s.upload_bps / 1e6) },
            if idle { None } else { Some(s.download_bps / 1e6) },
        ];
        v.extend(lat(&s.latency));
        match &s.witness_latency {
            Some(w) => v.extend(lat(w)),
            None => v.extend([None; 9]),
        }
        v.push(s.added_latency_ms);
        v.push(s.witness_added_latency_ms);
        v.push(s.responsiveness_ms);
        v.push(s.responsiveness_hz);
        v.push(s.smoothness_ms);
        v.push(s.smoothness_hz);
        v.push(s.rpm);
        v.push(if idle { None } else { Some(s.retransmits as f64) });
        v.push(if idle { None } else { analytic_delay(r, ph, fallback_delay_ms) });
        let (bd, bb) = queue_stats(ph, |q| q.role.starts_with("bottleneck"));
        let (ld, lb) = queue_stats(ph, |q| is_local(&q.role, &q.location, &q.qdisc));
        v.extend([bd, bb, ld, lb]);
        let (red, cwr, mean) = cwnd_stats(ph);
        v.extend([red, cwr, mean]);
        v.push(if idle { None } else { Some(s.upload_gb_per_month) });
        v.push(if idle { None } else { Some(s.download_gb_per_month) });
        debug_assert_eq!(v.len(), LAB_METRICS.len());
        out.push(Row { phase: ph.name.clone(), values: v });
    }
    out
}

pub fn pacing_row(p: &PacingResult) -> Row {
    let v = vec![
        Some(p.ipi_ns as f64 / 1e3),
        Some(p.ideal_bps / 1e6),
        Some(p.sent_bps / 1e6),
        Some(p.achieved_bps / 1e6),
        Some(p.ratio),
        Some(p.sent_ratio),
        Some(p.burst_factor),
        Some(p.max_back_to_back as f64),
        Some(p.gaps_within_10pct),
        Some(p.gap_p50_ns as f64 / 1e3),
        Some(p.gap_p99_ns as f64 / 1e3),
        Some(p.gap_max_ns as f64 / 1e3),
        Some(p.sent as f64),
        Some(p.received as f64),
        Some(p.lost as f64),
        p.model_ratio,
        p.host.as_ref().map(|h| h.stalls as f64),
        p.host.as_ref().map(|h| h.wake_late_p99_ns as f64 / 1e3),
        p.host.as_ref().map(|h| h.cpu_steal_pct),
    ];
    debug_assert_eq!(v.len(), PACING_METRICS.len());
    Row { phase: "paced".into(), values: v }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bloatlab_results::*;

    fn phase(name: &str, u: u32, start: u64, end: u64) -> Phase {
        Phase {
            name: name.into(),
            uploads: u,
            downloads: 0,
            start_ns: start,
            end_ns: end,
            summary: Summary {
                upload_bps: 9.4e6,
                latency: LatencyStats { sent: 10, received: 10, min_ms: 1.0, avg_ms: 2.0, max_ms: 3.0, p50_ms: 2.0, ..Default::default() },
                witness_latency: Some(LatencyStats { sent: 10, received: 9, lost: 1, p90_ms: 7.0, ..Default::default() }),
                ..Default::default()
            },
            flows: vec![Flow {
                id: 1,
                direction: Direction::Up,
                goodput: vec![],
                tcp_info: [10u32, 20, 15, 30, 12].iter().enumerate().map(|(i, &c)| TcpInfoSample { t_ns: start + i as u64, cwnd: c, ca_state: if c == 15 { 2 } else { 0 }, ..Default::default() }).collect(),
                bytes: 0,
                max_gap_ns: 0,
                max_gap_at_ns: 0,
                dscp: 0,
                udp: None,
            }],
            ..Default::default()
        }
    }

    #[test]
    fn lab_rows_extract_queue_and_tcp_figures() {
        let q = |t: u64, drops: u64, backlog: u64| QueueSample { t_ns: t, drops, backlog_packets: backlog, ..Default::default() };
        let mut r = TestResult {
            schema: SCHEMA_NAME.into(),
            schema_version: SCHEMA_VERSION,
            complete: true,
            incomplete_reason: None,
            metadata: Metadata::default(),
            idle: Some(phase("idle", 0, 0, 100)),
            scenarios: vec![phase("1u0d", 1, 100, 200)],
            headline: Headline::default(),
            lab: Some(LabInfo {
                queues: vec![QueueSeries {
                    role: "sender-local".into(),
                    qdisc: "pfifo".into(),
                    samples: vec![q(50, 5, 0), q(100, 7, 1), q(150, 20, 9), q(200, 27, 4), q(250, 40, 0)],
                    ..Default::default()
                }],
                analytic_queue_delay_up_ms: Some(1200.0),
                ..Default::default()
            }),
            rpm: None,
            ramp: vec![],
            client: Default::default(),
            household: None,
            monitor: None,
        };
        // as the lab records them when it merges its queues into the result
        let lab = r.lab.clone().unwrap();
        bloatlab_lab::phase_queues(&mut r, &lab);
        let rows = lab_rows(&r, Some(99.0));
        assert_eq!(rows.len(), 2);
        for row in &rows {
            assert_eq!(row.values.len(), LAB_METRICS.len());
        }
        let k = RecipeKind::Lab;
        let s = &rows[1];
        assert_eq!(s.phase, "1u0d");
        assert_eq!(s.get(k, "upload_mbps"), Some(9.4));
        assert_eq!(s.get(k, "latency_avg_ms"), Some(2.0));
        assert_eq!(s.get(k, "witness_p90_ms"), Some(7.0));
        assert_eq!(s.get(k, "witness_lost"), Some(1.0));
        assert_eq!(s.get(k, "local_drops"), Some(20.0));
        assert_eq!(s.get(k, "local_max_backlog_pkts"), Some(9.0));
        assert_eq!(s.get(k, "bottleneck_drops"), None);
        assert_eq!(s.get(k, "cwnd_reductions"), Some(2.0));
        assert_eq!(s.get(k, "cwr_entries"), Some(1.0));
        assert_eq!(s.get(k, "analytic_queue_delay_ms"), Some(1200.0));
        assert_eq!(rows[0].get(k, "analytic_queue_delay_ms"), None);
        assert_eq!(rows[0].get(k, "local_drops"), Some(2.0));
        let local = |role: &str, loc: &str, qd: &str| is_local(role, loc, qd);
        assert!(local("bottleneck-up", "blab-0c70ce-client/eth0", "pfifo"));
        assert!(!local("bottleneck-up", "blab-0c70ce-router/wan", "pfifo"));
        assert!(!local("sender-local-up", "blab-0c70ce-client/eth0", "noqueue"));
    }
}
