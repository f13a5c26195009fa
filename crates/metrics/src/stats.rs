//! Percentiles, ping-style statistics and the probe latency summary.

use bloatlab_results::LatencyStats;
use serde::{Deserialize, Serialize};

/// Percentile by linear interpolation between closest ranks
/// (Hyndman–Fan type 7, numpy's default `method="linear"`).
///
/// With `n` values `x[0] <= ... <= x[n-1]` and `h = (n - 1) * p / 100`:
/// `x[floor(h)] + (h - floor(h)) * (x[floor(h) + 1] - x[floor(h)])`.
///
/// `sorted` must be ascending (checked in debug builds). Returns `None` for an
/// empty slice, for `p` outside `[0, 100]` and for a NaN `p`. The slice is
/// used as given: sort and filter it yourself, or use [`percentile`].
pub fn percentile_sorted(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() || !(0.0..=100.0).contains(&p) {
        return None;
    }
    debug_assert!(
        sorted
            .windows(2)
            .all(|w| w[0].partial_cmp(&w[1]) != Some(std::cmp::Ordering::Greater)),
        "percentile_sorted: input is not sorted ascending"
    );
    let n = sorted.len();
    let h = (n - 1) as f64 * p / 100.0;
    let lo = h.floor() as usize;
    if lo + 1 >= n {
        return Some(sorted[n - 1]);
    }
    let frac = h - lo as f64;
    Some(sorted[lo] + frac * (sorted[lo + 1] - sorted[lo]))
}

/// Finite values of `values`, sorted ascending.
fn finite_sorted(values: &[f64]) -> Vec<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(|a, b| a.partial_cmp(b).expect("finite values compare"));
    v
}

/// Convenience form of [`percentile_sorted`]: copies and sorts `values`.
///
/// Non-finite values (NaN, ±∞) are **ignored**; `None` when no finite value
/// remains (or `p` is invalid).
pub fn percentile(values: &[f64], p: f64) -> Option<f64> {
    percentile_sorted(&finite_sorted(values), p)
}

/// Arithmetic mean of the finite values; `None` when there are none.
pub fn mean(values: &[f64]) -> Option<f64> {
    let (mut sum, mut n) = (0.0f64, 0usize);
    for &x in values.iter().filter(|x| x.is_finite()) {
        sum += x;
        n += 1;
    }
    (n > 0).then(|| sum / n as f64)
}

/// ping(8)-style statistics, in the unit of the input.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PingStats {
    /// Number of values the statistics are over.
    pub n: usize,
    pub min: f64,
    pub avg: f64,
    pub max: f64,
    /// Population standard deviation: `sqrt(mean(x²) − mean(x)²)`, as iputils
    /// ping computes it ("mdev").
    pub mdev: f64,
}

/// min/avg/max/mdev of the finite values (non-finite ones are ignored);
/// `None` when there are none.
///
/// `mdev = sqrt(mean(x²) − mean(x)²)` (iputils ping). It is computed in the
/// mathematically identical two-pass form `sqrt(mean((x − avg)²))`, which does
/// not lose precision to cancellation.
pub fn ping_stats(values: &[f64]) -> Option<PingStats> {
    let avg = mean(values)?;
    let (mut min, mut max, mut ss, mut n) = (f64::INFINITY, f64::NEG_INFINITY, 0.0f64, 0usize);
    for &x in values.iter().filter(|x| x.is_finite()) {
        min = min.min(x);
        max = max.max(x);
        ss += (x - avg) * (x - avg);
        n += 1;
    }
    Some(PingStats {
        n,
        min,
        avg,
        max,
        mdev: (ss / n as f64).sqrt(),
    })
}

/// Full latency summary of a probe stream, `None` = lost probe.
///
/// * `sent` = number of entries, `received` = number of `Some`, `lost` =
///   `sent − received`, `loss_pct = 100 × lost / sent` (0 when nothing was sent).
///   Counts saturate at `u32::MAX`.
/// * Over the received probes: min/avg/max/mdev ([`ping_stats`]) and p50/p90/p99
///   ([`percentile_sorted`], type 7), all converted from ns to ms.
/// * When nothing was received, every `*_ms` field is `0.0` and `received` is
///   0: consumers must look at `received` (and `loss_pct`, which is then 100
///   if anything was sent) before reading the times.
///
/// Lost probes are never dropped silently: they are counted in `lost` and
/// `loss_pct`; the time statistics are over received probes only.
pub fn latency_stats_ns(rtts_ns: &[Option<u64>]) -> LatencyStats {
    let sent = rtts_ns.len();
    let mut ms: Vec<f64> = rtts_ns
        .iter()
        .flatten()
        .map(|&ns| ns as f64 / 1e6)
        .collect();
    let received = ms.len();
    let lost = sent - received;
    let sat = |x: usize| u32::try_from(x).unwrap_or(u32::MAX);
    let mut s = LatencyStats {
        sent: sat(sent),
        received: sat(received),
        lost: sat(lost),
        loss_pct: if sent == 0 {
            0.0
        } else {
            100.0 * lost as f64 / sent as f64
        },
        ..Default::default()
    };
    if let Some(ps) = ping_stats(&ms) {
        ms.sort_by(|a, b| a.partial_cmp(b).expect("finite"));
        s.min_ms = ps.min;
        s.avg_ms = ps.avg;
        s.max_ms = ps.max;
        s.mdev_ms = ps.mdev;
        s.p50_ms = percentile_sorted(&ms, 50.0).unwrap_or(0.0);
        s.p90_ms = percentile_sorted(&ms, 90.0).unwrap_or(0.0);
        s.p99_ms = percentile_sorted(&ms, 99.0).unwrap_or(0.0);
    }
    s
}

/// "Added latency" = loaded p50 − idle p50 (ms). `None` when either side
/// received no probe (pass `None` for a phase with `received == 0`) or a value
/// is not finite.
pub fn added_latency_ms(loaded_p50_ms: Option<f64>, idle_p50_ms: Option<f64>) -> Option<f64> {
    let d = loaded_p50_ms? - idle_p50_ms?;
    d.is_finite().then_some(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn percentile_type7_hand_computed() {
        let x = [1.0, 2.0, 3.0, 4.0];
        // n = 4, h = 3p/100.
        // p50: h = 1.5 -> x[1] + 0.5*(x[2]-x[1]) = 2 + 0.5 = 2.5
        assert_eq!(percentile_sorted(&x, 50.0), Some(2.5));
        // p90: h = 2.7 -> 3 + 0.7*1 = 3.7
        assert!(close(percentile_sorted(&x, 90.0).unwrap(), 3.7, 1e-12));
        // p99: h = 2.97 -> 3.97
        assert!(close(percentile_sorted(&x, 99.0).unwrap(), 3.97, 1e-12));
        // p25: h = 0.75 -> 1.75 (numpy: np.percentile([1,2,3,4],25) = 1.75)
        assert!(close(percentile_sorted(&x, 25.0).unwrap(), 1.75, 1e-12));
        // endpoints: p0 = min, p100 = max
        assert_eq!(percentile_sorted(&x, 0.0), Some(1.0));
        assert_eq!(percentile_sorted(&x, 100.0), Some(4.0));
    }

    #[test]
    fn percentile_edge_cases() {
        assert_eq!(percentile_sorted(&[], 50.0), None);
        assert_eq!(percentile_sorted(&[7.0], 0.0), Some(7.0));
        assert_eq!(percentile_sorted(&[7.0], 99.0), Some(7.0));
        assert_eq!(percentile_sorted(&[1.0, 2.0], -1.0), None);
        assert_eq!(percentile_sorted(&[1.0, 2.0], 100.1), None);
        assert_eq!(percentile_sorted(&[1.0, 2.0], f64::NAN), None);
        // [10, 20, 30, 40, 50], p10: h = 4*0.1 = 0.4 -> 10 + 0.4*10 = 14
        assert!(close(
            percentile_sorted(&[10.0, 20.0, 30.0, 40.0, 50.0], 10.0).unwrap(),
            14.0,
            1e-12
        ));
    }

    #[test]
    fn percentile_sorts_and_ignores_nan() {
        // unsorted, with NaN and inf ignored -> [1,2,3,4] -> p50 = 2.5
        let v = [4.0, f64::NAN, 1.0, 3.0, f64::INFINITY, 2.0];
        assert_eq!(percentile(&v, 50.0), Some(2.5));
        assert_eq!(percentile(&[f64::NAN], 50.0), None);
        assert_eq!(percentile(&[], 50.0), None);
    }

    #[test]
    fn ping_stats_hand_computed() {
        // [1,2,3]: mean = 2, mean(x^2) = (1+4+9)/3 = 14/3, mdev = sqrt(14/3 - 4) = sqrt(2/3) = 0.8165
        let s = ping_stats(&[1.0, 2.0, 3.0]).unwrap();
        assert_eq!(s.n, 3);
        assert_eq!((s.min, s.avg, s.max), (1.0, 2.0, 3.0));
        assert!(close(s.mdev, (2.0f64 / 3.0).sqrt(), 1e-12));
        assert!(close(s.mdev, 0.8165, 1e-4));
        // constant -> mdev 0
        assert_eq!(ping_stats(&[5.0, 5.0]).unwrap().mdev, 0.0);
        // [2, 4, 4, 4, 5, 5, 7, 9]: mean 5, population sd = 2 (classic example)
        let s = ping_stats(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).unwrap();
        assert!(close(s.mdev, 2.0, 1e-12));
        assert!(ping_stats(&[]).is_none());
        assert!(ping_stats(&[f64::NAN]).is_none());
        // large offset: two-pass keeps precision. 1e9 + [1,2,3] -> mdev still sqrt(2/3)
        let s = ping_stats(&[1e9 + 1.0, 1e9 + 2.0, 1e9 + 3.0]).unwrap();
        assert!(close(s.mdev, (2.0f64 / 3.0).sqrt(), 1e-6));
    }

    #[test]
    fn latency_stats_counts_losses() {
        // 5 sent, 1 lost; received 1,2,3,4 ms (in ns)
        let v = [
            Some(1_000_000),
            None,
            Some(3_000_000),
            Some(2_000_000),
            Some(4_000_000),
        ];
        let s = latency_stats_ns(&v);
        assert_eq!((s.sent, s.received, s.lost), (5, 4, 1));
        assert!(close(s.loss_pct, 20.0, 1e-12)); // 100 * 1/5
        assert_eq!((s.min_ms, s.max_ms), (1.0, 4.0));
        assert!(close(s.avg_ms, 2.5, 1e-12)); // 10/4
                                              // mdev: mean(x^2) = (1+4+9+16)/4 = 7.5; 7.5 - 6.25 = 1.25; sqrt = 1.1180
        assert!(close(s.mdev_ms, 1.25f64.sqrt(), 1e-12));
        assert!(close(s.p50_ms, 2.5, 1e-12));
        assert!(close(s.p90_ms, 3.7, 1e-12));
        assert!(close(s.p99_ms, 3.97, 1e-12));
    }

    #[test]
    fn latency_stats_nothing_received() {
        let s = latency_stats_ns(&[None, None]);
        assert_eq!((s.sent, s.received, s.lost), (2, 0, 2));
        assert_eq!(s.loss_pct, 100.0);
        assert_eq!(
            (s.min_ms, s.avg_ms, s.max_ms, s.mdev_ms, s.p50_ms, s.p99_ms),
            (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
        );
        let s = latency_stats_ns(&[]);
        assert_eq!((s.sent, s.received, s.lost, s.loss_pct), (0, 0, 0, 0.0));
    }

    #[test]
    fn added_latency() {
        assert_eq!(added_latency_ms(Some(30.0), Some(2.5)), Some(27.5));
        assert_eq!(added_latency_ms(None, Some(2.5)), None);
        assert_eq!(added_latency_ms(Some(1.0), None), None);
    }
}
