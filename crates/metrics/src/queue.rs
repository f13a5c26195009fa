//! Statistics of a lab's queue time series: drops and the largest backlog
//! during a phase, and the share of the link a bottleneck kept busy. One
//! definition for the lab's table, recipes and reports.
use bloatlab_results::{LabInfo, PhaseQueue, QueueSeries, TestResult};

/// What the queues did during one phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PhaseQueueStats {
    /// Packets dropped: the cumulative counter at the phase's last sample
    /// minus its value at the last sample at or before the phase start
    /// (or at the phase's first sample when the series starts inside it).
    pub drops: u64,
    pub max_backlog_packets: u64,
    pub max_backlog_bytes: u64,
}

/// Drops and largest backlog over `(start_ns, end_ns]`, summed (drops) and
/// maxed (backlog) over the given series; None when no series has a sample
/// inside the phase.
pub fn queue_in_phase<'a>(series: impl IntoIterator<Item = &'a QueueSeries>, start_ns: u64, end_ns: u64) -> Option<PhaseQueueStats> {
    let mut out: Option<PhaseQueueStats> = None;
    for q in series {
        let before = q.samples.iter().rev().find(|s| s.t_ns <= start_ns);
        let inside: Vec<_> = q.samples.iter().filter(|s| s.t_ns > start_ns && s.t_ns <= end_ns).collect();
        let Some(last) = inside.last() else { continue };
        let base = before.map(|s| s.drops).unwrap_or(inside[0].drops);
        let o = out.get_or_insert_with(PhaseQueueStats::default);
        o.drops += last.drops.saturating_sub(base);
        for s in &inside {
            o.max_backlog_packets = o.max_backlog_packets.max(s.backlog_packets);
            o.max_backlog_bytes = o.max_backlog_bytes.max(s.backlog_bytes);
        }
    }
    out
}

/// The rate a queue drained at while it held data, bits/s: the median of the
/// sent-byte rates over sampled intervals inside `(start_ns, end_ns]` that
/// began and ended with a backlog. None when it never held data there.
pub fn drain_bps(q: &QueueSeries, start_ns: u64, end_ns: u64) -> Option<f64> {
    let rates: Vec<f64> = q
        .samples
        .windows(2)
        .filter(|w| w[0].t_ns >= start_ns && w[1].t_ns <= end_ns && w[1].t_ns > w[0].t_ns)
        .filter(|w| w[0].backlog_bytes > 0 && w[1].backlog_bytes > 0)
        .map(|w| w[1].sent_bytes.saturating_sub(w[0].sent_bytes) as f64 * 8.0 / ((w[1].t_ns - w[0].t_ns) as f64 / 1e9))
        .filter(|r| *r > 0.0)
        .collect();
    crate::stats::percentile(&rates, 50.0)
}

/// Everything one queue did during a phase: drops, the largest backlog, the
/// delay it meant at the measured drain rate, and the share of `rate_bps`
/// it kept busy. None without a sample inside the phase. Computed once,
/// when a lab merges its queues into the result; every table, verdict and
/// plot reads it from there.
pub fn phase_queue(q: &QueueSeries, start_ns: u64, end_ns: u64, rate_bps: Option<f64>) -> Option<PhaseQueue> {
    let s = queue_in_phase([q], start_ns, end_ns)?;
    let drain = drain_bps(q, start_ns, end_ns);
    Some(PhaseQueue {
        role: q.role.clone(),
        location: q.location.clone(),
        qdisc: q.qdisc.clone(),
        drops: s.drops,
        max_backlog_packets: s.max_backlog_packets,
        max_backlog_bytes: s.max_backlog_bytes,
        drain_bps: drain,
        max_delay_ms: drain.map(|d| s.max_backlog_bytes as f64 * 8.0 / d * 1000.0),
        link_use_pct: rate_bps.and_then(|r| link_use_pct(q, start_ns, end_ns, r)),
    })
}

/// Fill every phase's `summary.queues` from the lab's queue series (the
/// configured rate of a queue's direction gives its link use).
pub fn phase_queues(result: &mut TestResult, lab: &LabInfo) {
    for p in result.idle.iter_mut().chain(result.scenarios.iter_mut()) {
        p.summary.queues = lab
            .queues
            .iter()
            .filter_map(|q| {
                let rate = if q.role.ends_with("-up") {
                    lab.config.rate_up_bps
                } else if q.role.ends_with("-down") {
                    lab.config.rate_down_bps
                } else {
                    None
                };
                phase_queue(q, p.start_ns, p.end_ns, rate)
            })
            .collect();
    }
}

/// Drops summed and the largest backlog over the queues of one phase whose
/// role starts with `role_prefix` ("bottleneck": both directions).
pub fn phase_queues_total(queues: &[PhaseQueue], role_prefix: &str) -> PhaseQueueStats {
    let mut o = PhaseQueueStats::default();
    for q in queues.iter().filter(|q| q.role.starts_with(role_prefix)) {
        o.drops += q.drops;
        o.max_backlog_packets = o.max_backlog_packets.max(q.max_backlog_packets);
        o.max_backlog_bytes = o.max_backlog_bytes.max(q.max_backlog_bytes);
    }
    o
}

/// Share of `rate_bps` the queue sent (bytes it put on the wire) during the
/// steady part of a phase — the goodput's window: without its first 20% and
/// last 5% — in percent. None without two samples in the window or a rate.
pub fn link_use_pct(q: &QueueSeries, start_ns: u64, end_ns: u64, rate_bps: f64) -> Option<f64> {
    let len = end_ns.saturating_sub(start_ns) as f64;
    let (a, b) = (start_ns as f64 + 0.2 * len, start_ns as f64 + 0.95 * len);
    let inside: Vec<_> = q.samples.iter().filter(|s| s.t_ns as f64 >= a && s.t_ns as f64 <= b).collect();
    let (first, last) = (inside.first()?, inside.last()?);
    let dt = (last.t_ns - first.t_ns) as f64 / 1e9;
    if dt <= 0.0 || rate_bps.is_nan() || rate_bps <= 0.0 {
        return None;
    }
    Some(last.sent_bytes.saturating_sub(first.sent_bytes) as f64 * 8.0 / dt / rate_bps * 100.0)
}

/// TCP payload the queue carried during the steady part of a phase (the
/// goodput's window: without its first 20% and last 5%), bits/s: the bytes
/// it sent minus `header_bytes` per packet, both counters interpolated
/// linearly at the window's edges. The kernel counts a qdisc's bytes as IP packet lengths, without
/// the link header (a lab's 64-byte UDP probe counts 92 bytes), so
/// `header_bytes` is IP + TCP: 20 + 32 with timestamps = 52 for IPv4. What
/// any goodput through this queue can at most be (retransmitted payload
/// counts here, not in goodput). None without samples around both edges.
pub fn carried_payload_bps(q: &QueueSeries, start_ns: u64, end_ns: u64, header_bytes: u64) -> Option<f64> {
    let len = end_ns.saturating_sub(start_ns) as f64;
    let (a, b) = (start_ns as f64 + 0.2 * len, start_ns as f64 + 0.95 * len);
    let at = |t: f64, f: fn(&bloatlab_results::QueueSample) -> u64| -> Option<f64> {
        let w = q.samples.windows(2).find(|w| w[0].t_ns as f64 <= t && t <= w[1].t_ns as f64)?;
        let span = (w[1].t_ns - w[0].t_ns) as f64;
        let k = if span > 0.0 { (t - w[0].t_ns as f64) / span } else { 0.0 };
        Some(f(&w[0]) as f64 + k * (f(&w[1]) as f64 - f(&w[0]) as f64))
    };
    let bytes = at(b, |s| s.sent_bytes)? - at(a, |s| s.sent_bytes)?;
    let packets = at(b, |s| s.sent_packets)? - at(a, |s| s.sent_packets)?;
    (b > a).then(|| (bytes - packets * header_bytes as f64).max(0.0) * 8.0 * 1e9 / (b - a))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bloatlab_results::QueueSample;

    fn series(samples: &[(u64, u64, u64, u64)]) -> QueueSeries {
        QueueSeries {
            samples: samples
                .iter()
                .map(|&(t_ns, drops, backlog_packets, sent_bytes)| QueueSample {
                    t_ns,
                    drops,
                    backlog_packets,
                    backlog_bytes: backlog_packets * 1514,
                    sent_bytes,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn carried_payload_is_the_bytes_sent_less_headers_in_the_goodput_window() {
        // 10 s phase; window [2 s, 9.5 s]. Samples every second: 1000 full
        // 1500-byte IP packets a second, counted from 0.
        let q = QueueSeries {
            samples: (0..=10u64)
                .map(|i| QueueSample { t_ns: i * 1_000_000_000, sent_packets: 1000 * i, sent_bytes: 1500 * 1000 * i, ..Default::default() })
                .collect(),
            ..Default::default()
        };
        // payload per packet 1500 - 52 = 1448 bytes: 1000 x 1448 x 8 = 11.584 Mbit/s
        let p = carried_payload_bps(&q, 0, 10_000_000_000, 52).unwrap();
        assert!((p - 11.584e6).abs() < 1e-3, "{p}");
        // The edges fall between samples (2.0 s and 9.5 s): interpolated,
        // so a burst just outside the window does not count.
        let mut burst = q.clone();
        for s in burst.samples.iter_mut().filter(|s| s.t_ns >= 10_000_000_000) {
            s.sent_bytes += 1_000_000;
            s.sent_packets += 700;
        }
        let pb = carried_payload_bps(&burst, 0, 10_000_000_000, 52).unwrap();
        // half of the last second's extra (9.5 s is midway to 10 s) falls in the window:
        // (500,000 - 350 x 52) bytes x 8 / 7.5 s = 513,920 bit/s more
        assert!((pb - p - (500_000.0 - 350.0 * 52.0) * 8.0 / 7.5).abs() < 1e-3, "{pb} vs {p}");
        assert_eq!(carried_payload_bps(&q, 0, 30_000_000_000, 52), None, "the window's end is past the samples");
    }

    #[test]
    fn drops_count_from_the_last_sample_before_the_phase() {
        // 5 drops before the phase; 3 at t=15 inside (10, 30]; 2 more after it
        let q = series(&[(0, 0, 0, 0), (10, 5, 1, 0), (15, 8, 7, 0), (30, 8, 3, 0), (40, 10, 9, 0)]);
        let s = queue_in_phase([&q], 10, 30).unwrap();
        assert_eq!(s, PhaseQueueStats { drops: 3, max_backlog_packets: 7, max_backlog_bytes: 7 * 1514 });
        // a series that starts inside the phase counts from its first sample
        let late = series(&[(20, 4, 2, 0), (25, 6, 2, 0)]);
        assert_eq!(queue_in_phase([&late], 10, 30).unwrap().drops, 2);
        // two series: drops add up, backlogs take the larger
        let both = queue_in_phase([&q, &late], 10, 30).unwrap();
        assert_eq!((both.drops, both.max_backlog_packets), (5, 7));
        assert_eq!(queue_in_phase([&q], 100, 200), None);
    }

    #[test]
    fn link_use_over_the_steady_window() {
        // phase 0..10 s; window 2 s..9.5 s; samples each second sending 1.25 MB/s = 10 Mbit/s
        let s: Vec<_> = (0..=10).map(|i| (i * 1_000_000_000, 0, 0, i * 1_250_000)).collect();
        let q = series(&s);
        let u = link_use_pct(&q, 0, 10_000_000_000, 10e6).unwrap();
        assert!((u - 100.0).abs() < 1e-9, "{u}");
        assert!((link_use_pct(&q, 0, 10_000_000_000, 20e6).unwrap() - 50.0).abs() < 1e-9);
        assert_eq!(link_use_pct(&q, 0, 10_000_000_000, 0.0), None);
        assert_eq!(link_use_pct(&series(&[(0, 0, 0, 0)]), 0, 10, 1e6), None);
    }
}
