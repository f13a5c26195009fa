//! Units where bigger is better: Hz, RPM, and goodput per month.

/// Seconds in the "month" of [`gb_per_month`]: 30 days × 86 400 s.
pub const SECONDS_PER_MONTH: f64 = 30.0 * 86_400.0;

/// Fraction of RTT samples the RPM aggregation keeps (the IETF draft's 95%).
pub const RPM_KEEP_FRACTION: f64 = 0.95;

/// TCP payload per full frame: 1448 B of a 1514 B frame (MTU 1500 - IPv4 20 -
/// TCP 20 - timestamps 12; + Ethernet 14), the most goodput a link can carry.
pub const TCP_PAYLOAD_PER_FRAME: f64 = 1448.0 / 1514.0;

/// Share of the most goodput a link of `link_bps` (on-wire frame bits, as
/// htb and the emulator count them) can carry that `goodput_bps` reached;
/// None without a link rate.
pub fn goodput_share(goodput_bps: f64, link_bps: f64) -> Option<f64> {
    (link_bps > 0.0 && goodput_bps.is_finite()).then(|| goodput_bps / (link_bps * TCP_PAYLOAD_PER_FRAME))
}

/// Rate in Hz of something that takes `ms` milliseconds: `1000 / ms`.
/// `None` when `ms <= 0` or not finite.
pub fn hz_from_ms(ms: f64) -> Option<f64> {
    (ms.is_finite() && ms > 0.0).then(|| 1000.0 / ms)
}

/// Round trips per minute for an RTT of `ms` milliseconds: `60000 / ms`.
/// `None` when `ms <= 0` or not finite.
pub fn rpm_from_ms(ms: f64) -> Option<f64> {
    (ms.is_finite() && ms > 0.0).then(|| 60_000.0 / ms)
}

/// Single-sided trimmed mean: sort the finite values ascending, drop the
/// **largest** `d` of them and average the rest, where
///
/// `d = floor(n × (1 − keep_fraction))`, capped at `n − 1` (at least one value
/// is always kept). The product is computed with a 1e-9 tolerance so that
/// binary rounding does not lose a whole value (e.g. `10 × (1 − 0.9)` is
/// `0.999…` in floating point but counts as 1).
///
/// With `keep_fraction = 0.95`: n = 1 → drop 0; n = 19 → drop 0 (0.95);
/// n = 20 → drop 1; n = 100 → drop 5.
///
/// `None` when there is no finite value or `keep_fraction` is not in `(0, 1]`.
pub fn trimmed_mean_single_sided(values: &[f64], keep_fraction: f64) -> Option<f64> {
    if !(keep_fraction > 0.0 && keep_fraction <= 1.0) {
        return None;
    }
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.partial_cmp(b).expect("finite"));
    let n = v.len();
    let drop = ((n as f64 * (1.0 - keep_fraction) + 1e-9).floor() as usize).min(n - 1);
    let kept = &v[..n - drop];
    Some(kept.iter().sum::<f64>() / kept.len() as f64)
}

/// RPM of a set of RTT samples in ms: `60000 / trimmed_mean_single_sided(rtts, 0.95)`.
/// `None` when there is no finite sample or the trimmed mean is not positive.
pub fn rpm_from_rtts_ms(rtts_ms: &[f64]) -> Option<f64> {
    rpm_from_ms(trimmed_mean_single_sided(rtts_ms, RPM_KEEP_FRACTION)?)
}

/// A probe without a reply counts in the UDP-probe RPM as a round trip of
/// this long: the client waits at least this long (its drain after the last
/// scenario) for any reply, so a lost probe took at least this long.
pub const RPM_LOST_PROBE_MS: f64 = 3000.0;

/// The UDP-probe RPM: [`rpm_from_rtts_ms`] over every probe sent, a lost one
/// (`None`) counted as [`RPM_LOST_PROBE_MS`]. Loss thus lowers the figure
/// once it exceeds the 5% the trimmed mean drops. `None` without probes.
pub fn rpm_from_probes_ns(rtts_ns: &[Option<u64>]) -> Option<f64> {
    let ms: Vec<f64> = rtts_ns.iter().map(|r| r.map(|ns| ns as f64 / 1e6).unwrap_or(RPM_LOST_PROBE_MS)).collect();
    rpm_from_rtts_ms(&ms)
}

/// [`rpm_from_rtts_ms`] for RTTs in integer nanoseconds.
pub fn rpm_from_rtts_ns(rtts_ns: &[u64]) -> Option<f64> {
    let ms: Vec<f64> = rtts_ns.iter().map(|&ns| ns as f64 / 1e6).collect();
    rpm_from_rtts_ms(&ms)
}

/// Goodput per month in GB (10⁹ bytes): `bps / 8 × 2 592 000 s / 10⁹`.
/// The input is returned scaled as is (a NaN stays NaN, a negative value stays
/// negative): validate goodput before calling if it can be either.
pub fn gb_per_month(bps: f64) -> f64 {
    bps / 8.0 * SECONDS_PER_MONTH / 1e9
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn goodput_share_of_a_link() {
        // 10 Mbit/s of 1514 B frames carries at most 9.5640 Mbit/s of TCP payload
        assert!((goodput_share(9.564e6, 10e6).unwrap() - 1.0).abs() < 1e-4);
        assert!((goodput_share(3.05e6, 10e6).unwrap() - 0.3189).abs() < 1e-3);
        assert_eq!(goodput_share(1e6, 0.0), None);
    }

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn hz_and_rpm() {
        assert_eq!(hz_from_ms(500.0), Some(2.0)); // 1000/500
        assert_eq!(
            hz_from_ms(334.0).map(|h| (h * 1000.0).round()),
            Some(2994.0)
        ); // seed 003: 2 Hz ~ 334 ms
        assert_eq!(hz_from_ms(0.0), None);
        assert_eq!(hz_from_ms(-1.0), None);
        assert_eq!(hz_from_ms(f64::NAN), None);
        assert_eq!(hz_from_ms(f64::INFINITY), None);
        assert_eq!(rpm_from_ms(25.0), Some(2400.0)); // 60000/25
        assert_eq!(rpm_from_ms(1000.0), Some(60.0));
        assert_eq!(rpm_from_ms(0.0), None);
    }

    #[test]
    fn trimmed_mean_counts() {
        // n = 1: drop floor(0.05) = 0 -> the value itself
        assert_eq!(trimmed_mean_single_sided(&[42.0], 0.95), Some(42.0));
        // n = 19, values 1..=19: drop floor(0.95) = 0 -> mean = 10
        let v19: Vec<f64> = (1..=19).map(|i| i as f64).collect();
        assert_eq!(trimmed_mean_single_sided(&v19, 0.95), Some(10.0));
        // n = 20, values 1..=20: drop floor(1.0) = 1 (the 20) -> mean(1..=19) = 10
        let v20: Vec<f64> = (1..=20).map(|i| i as f64).collect();
        assert_eq!(trimmed_mean_single_sided(&v20, 0.95), Some(10.0));
        // n = 100, values 1..=100 shuffled: drop 5 (96..=100) -> mean(1..=95) = 48
        let mut v100: Vec<f64> = (1..=100).map(|i| ((i * 37) % 100 + 1) as f64).collect();
        v100.reverse();
        assert_eq!(trimmed_mean_single_sided(&v100, 0.95), Some(48.0));
        // the dropped side is the top: one huge outlier among 20 is removed
        let mut v = vec![10.0; 19];
        v.push(10_000.0);
        assert_eq!(trimmed_mean_single_sided(&v, 0.95), Some(10.0));
        // ... but a small outlier is kept: 19 x 10 and one 0 -> drop one 10 -> (18*10+0)/19
        let mut v = vec![10.0; 19];
        v.push(0.0);
        assert!(close(
            trimmed_mean_single_sided(&v, 0.95).unwrap(),
            180.0 / 19.0,
            1e-12
        ));
    }

    #[test]
    fn trimmed_mean_rounding_and_validation() {
        // 10 x (1 - 0.9) = 0.9999999999999998 in f64, must count as 1 dropped:
        // 1..=10, drop the 10 -> mean(1..=9) = 5
        let v10: Vec<f64> = (1..=10).map(|i| i as f64).collect();
        assert_eq!(trimmed_mean_single_sided(&v10, 0.9), Some(5.0));
        // keep 1.0 = plain mean: 5.5
        assert_eq!(trimmed_mean_single_sided(&v10, 1.0), Some(5.5));
        // tiny keep fraction still keeps one value (the smallest)
        assert_eq!(trimmed_mean_single_sided(&v10, 1e-12), Some(1.0));
        assert_eq!(trimmed_mean_single_sided(&v10, 0.0), None);
        assert_eq!(trimmed_mean_single_sided(&v10, 1.5), None);
        assert_eq!(trimmed_mean_single_sided(&v10, f64::NAN), None);
        assert_eq!(trimmed_mean_single_sided(&[], 0.95), None);
        // NaN ignored: [NaN, 4, 2] -> [2, 4], n = 2, drop 0 -> 3
        assert_eq!(
            trimmed_mean_single_sided(&[f64::NAN, 4.0, 2.0], 0.95),
            Some(3.0)
        );
    }

    #[test]
    fn rpm_from_rtts() {
        // constant 25 ms -> 60000/25 = 2400
        assert_eq!(rpm_from_rtts_ms(&[25.0; 50]), Some(2400.0));
        assert_eq!(rpm_from_rtts_ns(&[25_000_000; 50]), Some(2400.0));
        // 19 x 20 ms + one 1000 ms spike: spike trimmed -> 60000/20 = 3000
        let mut v = vec![20.0; 19];
        v.push(1000.0);
        assert_eq!(rpm_from_rtts_ms(&v), Some(3000.0));
        assert_eq!(rpm_from_rtts_ms(&[]), None);
        assert_eq!(rpm_from_rtts_ms(&[0.0]), None);
    }

    #[test]
    fn gb_month() {
        // 8e6 bit/s = 1e6 B/s; x 2 592 000 s = 2.592e12 B = 2592 GB
        assert!(close(gb_per_month(8e6), 2592.0, 1e-9));
        // 100 Mbit/s = 12.5e6 B/s x 2.592e6 s = 32 400 GB
        assert!(close(gb_per_month(100e6), 32_400.0, 1e-6));
        assert_eq!(gb_per_month(0.0), 0.0);
    }

    #[test]
    fn lost_probes_count_as_the_loss_threshold() {
        // 19 at 10 ms + 1 lost: n = 20 drops 1 (the lost one) -> 10 ms -> 6000 RPM.
        let mut v: Vec<Option<u64>> = vec![Some(10_000_000); 19];
        v.push(None);
        assert!((rpm_from_probes_ns(&v).unwrap() - 6000.0).abs() < 1e-9);
        // 18 + 2 lost: drop 1; (18 x 10 + 3000) / 19 = 167.37 ms -> 358.5 RPM.
        let mut w: Vec<Option<u64>> = vec![Some(10_000_000); 18];
        w.extend([None, None]);
        let want = 60000.0 / ((180.0 + 3000.0) / 19.0);
        assert!((rpm_from_probes_ns(&w).unwrap() - want).abs() < 1e-9);
        // All lost: 3 s each -> 20 RPM; no probes: none.
        assert!((rpm_from_probes_ns(&[None, None]).unwrap() - 20.0).abs() < 1e-9);
        assert_eq!(rpm_from_probes_ns(&[]), None);
    }
}
