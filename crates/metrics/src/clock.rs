//! Clock offset and drift between client and server from NTP-style probe
//! exchanges, and the one-way delays that follow from it.
//!
//! One exchange is `(t1, t2, t3, t4)` in nanoseconds: `t1` client send and `t4`
//! client receive on the client's clock, `t2` server receive and `t3` server
//! send on the server's clock. Per exchange (RFC 5905):
//!
//! * offset `θ = ((t2 − t1) + (t3 − t4)) / 2` (server minus client),
//! * delay  `δ = (t4 − t1) − (t3 − t2)` (the round trip minus the server's hold).
//!
//! `θ` is exact when the two one-way delays are equal and off by half their
//! difference otherwise; the exchange with the smallest `δ` had the least
//! queueing, so the symmetric-path assumption holds best for it, and its error
//! is bounded by `δ / 2`.

use serde::{Deserialize, Serialize};

/// At most this many time windows.
pub const CLOCK_MAX_WINDOWS: usize = 10;
/// Windows get at least this many exchanges on average (`windows = clamp(n / 5, 1, 10)`).
pub const CLOCK_MIN_PER_WINDOW: usize = 5;
/// Drift is only fitted when the used window minima span at least this long
/// (client clock); shorter spans give drift 0 (a fit over a short span would
/// mostly measure jitter and extrapolate it).
pub const CLOCK_MIN_DRIFT_SPAN_NS: i64 = 1_000_000_000;
/// A window whose minimum delay exceeds the best delay of all exchanges by
/// more than `max(CLOCK_QUEUED_TOLERANCE_NS, best / 10)` was queued throughout
/// and is left out of the fit.
pub const CLOCK_QUEUED_TOLERANCE_NS: u64 = 500_000;

/// One NTP-style exchange `(t1, t2, t3, t4)`, ns: client send, server receive,
/// server send, client receive (each on its own host's clock).
pub type Exchange = (i64, i64, i64, i64);

/// `(θ, δ)` of one exchange: offset (server − client) in ns, possibly a half
/// nanosecond, and delay in ns. `None` for an impossible exchange: a reply
/// before the request (`t4 < t1`), a server send before its receive
/// (`t3 < t2`), or a negative delay (the server held it longer than the round
/// trip took), or values overflowing i64.
pub fn ntp_offset_delay(t1: i64, t2: i64, t3: i64, t4: i64) -> Option<(f64, i64)> {
    let (t1, t2, t3, t4) = (t1 as i128, t2 as i128, t3 as i128, t4 as i128);
    if t4 < t1 || t3 < t2 {
        return None;
    }
    let delay = (t4 - t1) - (t3 - t2);
    if delay < 0 {
        return None;
    }
    let offset2 = (t2 - t1) + (t3 - t4);
    Some((offset2 as f64 / 2.0, i64::try_from(delay).ok()?))
}

/// Result of [`estimate_clock_offset`]: `offset(t) = offset_at_t0_ns + drift × (t − t0_ns)`,
/// server clock minus client clock at client time `t`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OffsetEstimate {
    /// Offset (server − client) at `t0_ns`, ns.
    pub offset_at_t0_ns: f64,
    /// Reference time on the client clock: the first valid exchange's `t1`.
    pub t0_ns: i64,
    /// Server clock rate relative to the client's, minus one, in ppm
    /// (positive: the server clock runs fast).
    pub drift_ppm: f64,
    /// Smallest delay δ of all valid exchanges, ns; the offset's uncertainty
    /// bound is half of it.
    pub min_delay_ns: u64,
    /// Valid exchanges considered.
    pub samples_used: u32,
    /// Time windows the exchanges were split into.
    pub windows: u32,
    /// Window minima used in the fit (queued windows rejected).
    pub windows_used: u32,
    /// How the estimate was obtained, human readable.
    pub method: String,
}

impl OffsetEstimate {
    /// Estimated offset (server − client), ns, at client time `t_client_ns`.
    pub fn offset_at(&self, t_client_ns: i64) -> f64 {
        let dt = (t_client_ns as i128 - self.t0_ns as i128) as f64;
        self.offset_at_t0_ns + self.drift_ppm * 1e-6 * dt
    }

    /// One-way delay client → server: `t2 − (t1 + offset(t1))`, ns, rounded.
    /// May be slightly negative within the uncertainty.
    pub fn owd_up_ns(&self, t1: i64, t2: i64) -> i64 {
        ((t2 as i128 - t1 as i128) as f64 - self.offset_at(t1)).round() as i64
    }

    /// One-way delay server → client: `(t4 + offset(t4)) − t3`, ns, rounded.
    pub fn owd_down_ns(&self, t3: i64, t4: i64) -> i64 {
        ((t4 as i128 - t3 as i128) as f64 + self.offset_at(t4)).round() as i64
    }

    /// Uncertainty bound of the offset: half the minimum delay, ns.
    pub fn uncertainty_ns(&self) -> u64 {
        self.min_delay_ns / 2
    }

    /// The result document's `metadata.clock_offset`, with the offset given at
    /// `test_start_client_ns` (client clock, same time base as the exchanges).
    pub fn to_clock_offset(&self, test_start_client_ns: i64) -> bloatlab_results::ClockOffset {
        bloatlab_results::ClockOffset {
            method: self.method.clone(),
            offset_ns: self.offset_at(test_start_client_ns).round() as i64,
            drift_ppm: self.drift_ppm,
            uncertainty_ns: self.uncertainty_ns(),
            samples_used: self.samples_used,
        }
    }
}

/// Estimate clock offset and drift from NTP-style exchanges `(t1, t2, t3, t4)`.
///
/// 1. Exchanges rejected by [`ntp_offset_delay`] are ignored; `None` if none is left.
/// 2. The valid exchanges, in `t1` order, are split into `W = clamp(n / 5, 1, 10)`
///    windows of equal duration over `[first t1, last t1]`; empty windows are skipped.
/// 3. In each window the exchange with the minimum δ is taken (earliest on a
///    tie); its θ is attributed to the exchange's midpoint `(t1 + t4) / 2`.
/// 4. Window minima whose δ exceeds the overall minimum δ by more than
///    `max(0.5 ms, min δ / 10)` are dropped (that window was queued throughout,
///    e.g. under load, and its θ is biased by half the queueing asymmetry).
/// 5. If the remaining minima span at least 1 s, `θ(t) = a + b (t − t0)` is
///    fitted by least squares and `drift = b`; otherwise drift is 0 and the
///    offset is the θ of the overall minimum-δ exchange.
pub fn estimate_clock_offset(exchanges: &[Exchange]) -> Option<OffsetEstimate> {
    struct Ex {
        t1: i64,
        mid: i128,
        theta: f64,
        delay: i64,
    }
    let mut valid: Vec<Ex> = exchanges
        .iter()
        .filter_map(|&(t1, t2, t3, t4)| {
            let (theta, delay) = ntp_offset_delay(t1, t2, t3, t4)?;
            Some(Ex {
                t1,
                mid: (t1 as i128 + t4 as i128) / 2,
                theta,
                delay,
            })
        })
        .collect();
    if valid.is_empty() {
        return None;
    }
    valid.sort_by_key(|e| e.t1);
    let n = valid.len();
    let t0 = valid[0].t1;
    let span = valid[n - 1].t1 as i128 - t0 as i128;
    let windows = if span == 0 {
        1
    } else {
        (n / CLOCK_MIN_PER_WINDOW).clamp(1, CLOCK_MAX_WINDOWS)
    };

    // minimum-delay exchange per window
    let mut best: Vec<Option<usize>> = vec![None; windows];
    for (i, e) in valid.iter().enumerate() {
        let k = ((e.t1 as i128 - t0 as i128) * windows as i128 / (span + 1)) as usize;
        let k = k.min(windows - 1);
        match best[k] {
            Some(j) if valid[j].delay <= e.delay => {}
            _ => best[k] = Some(i),
        }
    }
    let minima: Vec<usize> = best.into_iter().flatten().collect();
    let global = *minima
        .iter()
        .min_by_key(|&&i| (valid[i].delay, valid[i].t1))
        .expect("at least one window");
    let min_delay = valid[global].delay as u64;
    let tolerance = CLOCK_QUEUED_TOLERANCE_NS.max(min_delay / 10);
    let used: Vec<usize> = minima
        .iter()
        .copied()
        .filter(|&i| valid[i].delay as u64 <= min_delay + tolerance)
        .collect();

    let xs: Vec<f64> = used
        .iter()
        .map(|&i| (valid[i].mid - t0 as i128) as f64)
        .collect();
    let ys: Vec<f64> = used.iter().map(|&i| valid[i].theta).collect();
    let fit_span = xs.iter().cloned().fold(f64::NEG_INFINITY, f64::max)
        - xs.iter().cloned().fold(f64::INFINITY, f64::min);

    let (a, b, how) = if used.len() >= 2 && fit_span >= CLOCK_MIN_DRIFT_SPAN_NS as f64 {
        let m = used.len() as f64;
        let xm = xs.iter().sum::<f64>() / m;
        let ym = ys.iter().sum::<f64>() / m;
        let sxy: f64 = xs.iter().zip(&ys).map(|(x, y)| (x - xm) * (y - ym)).sum();
        let sxx: f64 = xs.iter().map(|x| (x - xm) * (x - xm)).sum();
        let b = sxy / sxx;
        (
            ym - b * xm,
            b,
            format!("least-squares drift fit over {:.1} s", fit_span / 1e9),
        )
    } else {
        (
            valid[global].theta,
            0.0,
            format!(
                "drift not fitted (window minima span {:.3} s < {} s), offset of the single best exchange",
                fit_span.max(0.0) / 1e9,
                CLOCK_MIN_DRIFT_SPAN_NS / 1_000_000_000
            ),
        )
    };
    let method = format!(
        "NTP-style offset ((t2-t1)+(t3-t4))/2 from the minimum-RTT probe exchange in each of {} time windows \
({} used; windows whose minimum RTT exceeded the best by more than {:.1} us rejected as queued), {}; \
assumes symmetric paths at minimum RTT, uncertainty +/- {:.1} us (half the minimum RTT of {:.1} us)",
        minima.len(),
        used.len(),
        tolerance as f64 / 1e3,
        how,
        (min_delay / 2) as f64 / 1e3,
        min_delay as f64 / 1e3
    );
    Some(OffsetEstimate {
        offset_at_t0_ns: a,
        t0_ns: t0,
        drift_ppm: b * 1e6,
        min_delay_ns: min_delay,
        samples_used: u32::try_from(n).unwrap_or(u32::MAX),
        windows: minima.len() as u32,
        windows_used: used.len() as u32,
        method,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: i64 = 1_000;
    const MS: i64 = 1_000_000;
    const S: i64 = 1_000_000_000;

    /// Exchange with a constant offset: up/down one-way delays, server hold.
    fn ex(t1: i64, up: i64, down: i64, hold: i64, offset: i64) -> Exchange {
        let t2 = t1 + up + offset;
        let t3 = t2 + hold;
        let t4 = t1 + up + hold + down;
        (t1, t2, t3, t4)
    }

    #[test]
    fn single_exchange_hand_computed() {
        // t1 = 0, t2 = 5 000 100, t3 = 5 000 150, t4 = 250:
        // θ = ((5 000 100 − 0) + (5 000 150 − 250)) / 2 = (5 000 100 + 4 999 900) / 2 = 5 000 000
        // δ = (250 − 0) − (5 000 150 − 5 000 100) = 250 − 50 = 200
        assert_eq!(
            ntp_offset_delay(0, 5_000_100, 5_000_150, 250),
            Some((5_000_000.0, 200))
        );
        // asymmetric: up 300, down 100, offset 0 -> θ = (300 − 100)/2 = 100 (the known bias)
        let (a, b, c, d) = ex(0, 300, 100, 0, 0);
        assert_eq!(ntp_offset_delay(a, b, c, d), Some((100.0, 400)));
        // invalid exchanges
        assert_eq!(ntp_offset_delay(10, 0, 0, 5), None); // t4 < t1
        assert_eq!(ntp_offset_delay(0, 10, 5, 20), None); // t3 < t2
        assert_eq!(ntp_offset_delay(0, 0, 100, 50), None); // hold 100 > rtt 50

        let e = estimate_clock_offset(&[(0, 5_000_100, 5_000_150, 250)]).unwrap();
        assert_eq!(e.offset_at_t0_ns, 5_000_000.0);
        assert_eq!(
            (e.t0_ns, e.drift_ppm, e.min_delay_ns, e.samples_used),
            (0, 0.0, 200, 1)
        );
        assert_eq!(e.uncertainty_ns(), 100);
        // one-way: up = t2 − (t1 + θ) = 5 000 100 − 5 000 000 = 100; down = (250 + 5 000 000) − 5 000 150 = 100
        assert_eq!(e.owd_up_ns(0, 5_000_100), 100);
        assert_eq!(e.owd_down_ns(5_000_150, 250), 100);
        assert!(estimate_clock_offset(&[]).is_none());
        assert!(estimate_clock_offset(&[(10, 0, 0, 5)]).is_none());
    }

    #[test]
    fn two_window_drift_hand_computed() {
        // 10 exchanges -> W = 10/5 = 2 windows over t1 in [0, 10 s − 50 us + 4 ms].
        // Window 0 minimum: t1 = 0, up = down = 50 us, offset 1 ms:
        //   θ = 1 000 000, δ = 100 000, midpoint 50 000.
        // Window 1 minimum: t1 = 10 s − 50 us, offset 1.1 ms: θ = 1 100 000, midpoint 10 s.
        // The others carry 2 ms..5 ms of upstream queueing (δ larger, θ biased upward).
        // Fit through (50 000, 1e6) and (1e10, 1.1e6):
        //   b = 100 000 / (1e10 − 50 000) = 1.000 000 5e-5 -> 10.000 005 ppm
        //   a = 1e6 − b * 50 000 = 999 999.499 999 975
        // (server hold 0 so that the midpoint is t1 + 50 us exactly)
        let mut v = vec![ex(0, 50 * US, 50 * US, 0, MS)];
        let t = 10 * S - 50 * US;
        v.push(ex(t, 50 * US, 50 * US, 0, 1_100 * US));
        for i in 1..5 {
            v.push(ex(i * MS, 50 * US + (i + 1) * MS, 50 * US, 0, MS));
            v.push(ex(
                t + i * MS,
                50 * US + (i + 1) * MS,
                50 * US,
                0,
                1_100 * US,
            ));
        }
        let e = estimate_clock_offset(&v).unwrap();
        assert_eq!((e.samples_used, e.windows, e.windows_used), (10, 2, 2));
        assert_eq!(e.min_delay_ns, 100_000);
        let b = 100_000.0 / (1e10 - 50_000.0);
        assert!(
            (e.drift_ppm - b * 1e6).abs() < 1e-9,
            "drift {}",
            e.drift_ppm
        );
        assert!(
            (e.offset_at_t0_ns - (1e6 - b * 50_000.0)).abs() < 1e-6,
            "a {}",
            e.offset_at_t0_ns
        );
        assert!((e.offset_at(10 * S - 50 * US + 50 * US) - 1_100_000.0).abs() < 1e-6);
        assert!(e.method.contains("least-squares drift fit"), "{}", e.method);
    }

    #[test]
    fn short_span_no_drift() {
        // 10 exchanges within 9 ms: 2 windows but span < 1 s -> drift 0,
        // offset = θ of the best exchange. Best: i = 3, up = down = 40 us, offset −2 ms.
        let mut v: Vec<_> = (0..10)
            .map(|i| ex(i * MS, 100 * US + i * US, 60 * US, 5 * US, -2 * MS))
            .collect();
        v[3] = ex(3 * MS, 40 * US, 40 * US, 5 * US, -2 * MS);
        let e = estimate_clock_offset(&v).unwrap();
        assert_eq!(e.drift_ppm, 0.0);
        assert_eq!(e.offset_at_t0_ns, -2_000_000.0);
        assert_eq!(e.min_delay_ns, 80_000);
        assert!(e.method.contains("drift not fitted"), "{}", e.method);
    }

    /// Deterministic pseudo-random numbers in [0, 1) (64-bit LCG, upper bits).
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self) -> f64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (self.0 >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    /// Known truth: server = client + 5 ms + 20 ppm × (client − C0); both clocks
    /// on Unix-epoch scale (beyond f64's integer precision, so the code must
    /// subtract before converting). 2000 exchanges every 10 ms over 20 s.
    /// Symmetric base paths of 250 us each way with 0..2 us independent jitter;
    /// 60% of exchanges get 0..30 ms of upstream-only queueing, 20% get
    /// downstream-only queueing; window 4 (8..10 s) is fully queued upstream
    /// (>= 5 ms) and must be rejected.
    fn synthetic(loaded_window: bool) -> (Vec<Exchange>, i64, impl Fn(f64) -> f64) {
        const C0: i64 = 1_763_800_000_000_000_000;
        let theta = |c: f64| 5e6 + 20e-6 * c; // c = client time − C0, ns
        let mut rng = Lcg(42);
        let mut v = Vec::new();
        for k in 0..2000i64 {
            let rel = k * 10 * MS;
            let mut up = 250_000.0 + 2_000.0 * rng.next();
            let mut down = 250_000.0 + 2_000.0 * rng.next();
            let r = rng.next();
            if r < 0.6 {
                up += 30e6 * rng.next();
            } else if r < 0.8 {
                down += 30e6 * rng.next();
            }
            if loaded_window && (8 * S..10 * S).contains(&rel) {
                up += 5e6 + 20e6 * rng.next();
            }
            let hold = 20_000.0;
            let ca = rel as f64 + up; // client time of server receive
            let s2 = ca + theta(ca); // its server-clock stamp (relative to C0)
            let cs = ca + hold / (1.0 + 20e-6); // client time of server send
            let t2 = C0 + s2.round() as i64;
            let t3 = C0 + (s2 + hold).round() as i64;
            let t4 = C0 + (cs + down).round() as i64;
            v.push((C0 + rel, t2, t3, t4));
        }
        (v, C0, theta)
    }

    #[test]
    fn recovers_known_offset_and_drift() {
        for loaded in [false, true] {
            let (v, c0, theta) = synthetic(loaded);
            let e = estimate_clock_offset(&v).unwrap();
            assert_eq!(e.t0_ns, c0);
            assert_eq!(e.samples_used, 2000);
            assert_eq!(e.windows, 10);
            assert_eq!(e.windows_used, if loaded { 9 } else { 10 }, "{}", e.method);
            assert!(
                (e.drift_ppm - 20.0).abs() < 1.0,
                "drift {} ppm",
                e.drift_ppm
            );
            for rel in [0, 5 * S, 10 * S, 20 * S] {
                let err = e.offset_at(c0 + rel) - theta(rel as f64);
                assert!(
                    err.abs() < 1_000.0,
                    "loaded={loaded} offset error {err} ns at {rel}"
                );
            }
            assert!(
                e.min_delay_ns >= 500_000 && e.min_delay_ns < 505_000,
                "{}",
                e.min_delay_ns
            );
            // one-way delays of a queued exchange are recovered within 1 us:
            // k = 1000 (10 s): recompute its truth from the same generator
            let (t1, t2, t3, t4) = v[1000];
            // the client time of the server receive, c, satisfies c + θ(c) = t2 − C0,
            // i.e. c = (t2 − C0 − 5e6) / (1 + 20e-6); true up delay = c − (t1 − C0)
            let c_arr = ((t2 - c0) as f64 - 5e6) / (1.0 + 20e-6);
            assert!((c_arr + theta(c_arr) - (t2 - c0) as f64).abs() < 1e-3);
            let up_true = c_arr - (t1 - c0) as f64;
            let up_est = e.owd_up_ns(t1, t2) as f64;
            assert!(
                (up_est - up_true).abs() < 1_000.0,
                "up {up_est} vs {up_true}"
            );
            // down: client time of server send cs = c_arr + hold/(1+d); down = t4 − cs
            let cs = c_arr + 20_000.0 / (1.0 + 20e-6);
            let down_true = (t4 - c0) as f64 - cs;
            let down_est = e.owd_down_ns(t3, t4) as f64;
            assert!(
                (down_est - down_true).abs() < 1_000.0,
                "down {down_est} vs {down_true}"
            );
            let co = e.to_clock_offset(c0);
            assert!((co.offset_ns - 5_000_000).abs() < 1_000);
            assert_eq!(co.uncertainty_ns, e.min_delay_ns / 2);
            assert_eq!(co.samples_used, 2000);
        }
    }

    #[test]
    fn naive_min_would_be_wrong_without_windows() {
        // Sanity check that the synthetic test can fail: the plain average of θ
        // over all exchanges is far off (queueing bias of several ms).
        let (v, _, _) = synthetic(false);
        let avg: f64 = v
            .iter()
            .map(|&(a, b, c, d)| ntp_offset_delay(a, b, c, d).unwrap().0)
            .sum::<f64>()
            / v.len() as f64;
        let truth_mid = 5e6 + 20e-6 * 10e9;
        assert!((avg - truth_mid).abs() > 1e6, "avg {avg}");
    }
}
