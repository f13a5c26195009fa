//! Seed 003's numbers: flow smoothness (longest gap between data arrivals)
//! and link responsiveness (worst request/response round trip).

use crate::rates::hz_from_ms;

/// Tracks the longest gap between data arrivals of one bulk flow.
///
/// * Time before the first arrival is ignored (connection setup is not a gap).
/// * Each arrival after the first closes a gap `t − previous arrival`; the
///   largest one is kept, with the time it ended. On a tie the earlier gap is
///   kept.
/// * An arrival stamped earlier than the latest one seen (out-of-order
///   timestamps) closes a gap of 0 and does not move the latest arrival back.
/// * [`GapTracker::finish`] also counts the tail: a flow that received nothing
///   from its last arrival to `end_ns` had a gap of that length, ending at
///   `end_ns`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GapTracker {
    first: Option<u64>,
    last: u64,
    arrivals: u64,
    max_gap: u64,
    max_gap_at: u64,
}

impl GapTracker {
    pub fn new() -> Self {
        Self::default()
    }

    /// Record a data arrival at `t_ns`.
    pub fn on_arrival(&mut self, t_ns: u64) {
        self.arrivals += 1;
        if self.first.is_none() {
            self.first = Some(t_ns);
            self.last = t_ns;
            return;
        }
        let gap = t_ns.saturating_sub(self.last);
        if gap > self.max_gap {
            self.max_gap = gap;
            self.max_gap_at = t_ns;
        }
        self.last = self.last.max(t_ns);
    }

    /// Close the observation at `end_ns`: the time since the last arrival counts
    /// as a gap ending at `end_ns`. Does nothing when nothing arrived (see
    /// [`GapTracker::has_arrivals`]) or `end_ns` precedes the last arrival.
    /// Calling it again with the same `end_ns` changes nothing.
    pub fn finish(&mut self, end_ns: u64) {
        if self.first.is_none() {
            return;
        }
        let gap = end_ns.saturating_sub(self.last);
        if gap > self.max_gap {
            self.max_gap = gap;
            self.max_gap_at = end_ns;
        }
    }

    /// Longest gap seen so far, ns (0 with fewer than two arrivals and no tail).
    pub fn max_gap_ns(&self) -> u64 {
        self.max_gap
    }

    /// When the longest gap ended, ns (0 while there is no gap).
    pub fn max_gap_at_ns(&self) -> u64 {
        self.max_gap_at
    }

    /// Whether any data arrived. A flow with no arrival at all has no
    /// measurable gap here: the caller must report it (e.g. as smoothness 0 Hz
    /// over the whole phase), not treat `max_gap_ns() == 0` as perfect.
    pub fn has_arrivals(&self) -> bool {
        self.first.is_some()
    }

    pub fn arrivals(&self) -> u64 {
        self.arrivals
    }

    pub fn first_arrival_ns(&self) -> Option<u64> {
        self.first
    }

    pub fn last_arrival_ns(&self) -> Option<u64> {
        self.first.map(|_| self.last)
    }
}

/// Smoothness from the longest arrival gap: `(gap in ms, 1000 / gap_ms Hz)`.
/// The Hz value is `None` for a zero gap (no measurable gap).
pub fn smoothness(max_gap_ns: u64) -> (f64, Option<f64>) {
    let ms = max_gap_ns as f64 / 1e6;
    (ms, hz_from_ms(ms))
}

/// Responsiveness from request/response exchanges `(rtt_ns, completed)`.
///
/// The worst practical round trip, including loss recovery, is the maximum of
/// `rtt_ns` over **all** entries: completed exchanges contribute their round
/// trip, unanswered ones the time they had been waiting when the phase ended
/// (a lower bound of their round trip, which is still a round trip the user
/// waited for). Returns `(ms, 1000 / ms Hz)`; `None` for no exchanges or a
/// worst round trip of 0.
pub fn responsiveness(rr: &[(u64, bool)]) -> Option<(f64, f64)> {
    let worst = rr.iter().map(|&(ns, _)| ns).max()?;
    let ms = worst as f64 / 1e6;
    Some((ms, hz_from_ms(ms)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn gap_tracker_basic() {
        let mut g = GapTracker::new();
        assert!(!g.has_arrivals());
        // arrivals at 100, 110, 150, 160 ms: gaps 10, 40, 10 -> max 40 ending at 150
        for t in [100, 110, 150, 160] {
            g.on_arrival(t * MS);
        }
        assert_eq!(g.max_gap_ns(), 40 * MS);
        assert_eq!(g.max_gap_at_ns(), 150 * MS);
        assert_eq!(g.first_arrival_ns(), Some(100 * MS));
        assert_eq!(g.last_arrival_ns(), Some(160 * MS));
        assert_eq!(g.arrivals(), 4);
        // the 100 ms before the first arrival is not a gap
        // tail shorter than max: finish at 190 -> tail 30 < 40, unchanged
        g.finish(190 * MS);
        assert_eq!((g.max_gap_ns(), g.max_gap_at_ns()), (40 * MS, 150 * MS));
        // tail longer: finish at 260 -> tail 100 ms, ending at 260
        g.finish(260 * MS);
        assert_eq!((g.max_gap_ns(), g.max_gap_at_ns()), (100 * MS, 260 * MS));
        // idempotent
        g.finish(260 * MS);
        assert_eq!(g.max_gap_ns(), 100 * MS);
    }

    #[test]
    fn gap_tracker_edges() {
        // one arrival then a tail: 5 ms -> finish at 505 ms -> gap 500 ms = 2 Hz
        let mut g = GapTracker::new();
        g.on_arrival(5 * MS);
        assert_eq!(g.max_gap_ns(), 0);
        g.finish(505 * MS);
        assert_eq!(g.max_gap_ns(), 500 * MS);
        assert_eq!(smoothness(g.max_gap_ns()), (500.0, Some(2.0)));
        // no arrivals: finish does nothing
        let mut g = GapTracker::new();
        g.finish(1000 * MS);
        assert_eq!(g.max_gap_ns(), 0);
        assert!(!g.has_arrivals());
        // tie: first gap kept. arrivals 0, 10, 20 -> gaps 10, 10 -> at 10
        let mut g = GapTracker::new();
        for t in [0, 10, 20] {
            g.on_arrival(t * MS);
        }
        assert_eq!((g.max_gap_ns(), g.max_gap_at_ns()), (10 * MS, 10 * MS));
        // out of order: 0, 50, 30, 60 -> gaps 50, 0, 10 -> 50 at 50
        let mut g = GapTracker::new();
        for t in [0, 50, 30, 60] {
            g.on_arrival(t * MS);
        }
        assert_eq!((g.max_gap_ns(), g.max_gap_at_ns()), (50 * MS, 50 * MS));
        assert_eq!(g.last_arrival_ns(), Some(60 * MS));
        // finish before last arrival: no effect
        g.finish(55 * MS);
        assert_eq!(g.max_gap_ns(), 50 * MS);
    }

    #[test]
    fn smoothness_units() {
        // 31.75 ms gap -> 1000/31.75 = 31.496 Hz
        let (ms, hz) = smoothness(31_750_000);
        assert_eq!(ms, 31.75);
        assert!((hz.unwrap() - 31.496_062_992).abs() < 1e-6);
        assert_eq!(smoothness(0), (0.0, None));
    }

    #[test]
    fn responsiveness_worst_including_unanswered() {
        // completed 10, 30, 20 ms -> worst 30 ms -> 33.33 Hz
        let rr = [(10 * MS, true), (30 * MS, true), (20 * MS, true)];
        let (ms, hz) = responsiveness(&rr).unwrap();
        assert_eq!(ms, 30.0);
        assert!((hz - 1000.0 / 30.0).abs() < 1e-12);
        // an exchange still unanswered after 500 ms dominates -> 2 Hz
        let rr = [(10 * MS, true), (500 * MS, false), (20 * MS, true)];
        assert_eq!(responsiveness(&rr), Some((500.0, 2.0)));
        // a long-delayed (loss-recovered) completion 334 ms -> 2.99 Hz (seed 003)
        let (ms, hz) = responsiveness(&[(334 * MS, true)]).unwrap();
        assert_eq!(ms, 334.0);
        assert!((hz - 2.994_011_976).abs() < 1e-6);
        assert_eq!(responsiveness(&[]), None);
        assert_eq!(responsiveness(&[(0, true)]), None);
    }
}
