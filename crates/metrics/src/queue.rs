//! Statistics of a lab's queue time series: drops and the largest backlog
//! during a phase, and the share of the link a bottleneck kept busy. One
//! definition for the lab's table, recipes and reports.
use bloatlab_results::QueueSeries;

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
