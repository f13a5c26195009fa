//! The IETF "Responsiveness under Working Conditions" method
//! (draft-ietf-ippm-responsiveness-08): the responsiveness formula over
//! foreign and self probes, and the stability test that decides when load
//! has reached working conditions.
//!
//! The draft's parameters and their defaults: MAD (moving average distance)
//! 4 intervals, ID (interval duration) 1 s, TMP (trimmed mean percentage) 95,
//! SDT (standard deviation tolerance) 5%, MNP (maximum parallel
//! load-generating connections) 16, MPS (maximum probes per second) 100.
use crate::rates::{trimmed_mean_single_sided, RPM_KEEP_FRACTION};

/// Moving average distance: intervals in a moving average, and moving
/// averages in a stability check.
pub const RPM_MAD: usize = 4;
/// Standard deviation tolerance: stable when the standard deviation of the
/// last [`RPM_MAD`] moving averages is at most this fraction of their mean.
pub const RPM_SDT: f64 = 0.05;
/// Most load-generating connections per direction.
pub const RPM_MNP: usize = 16;
/// Most probes per second.
pub const RPM_MPS: u32 = 100;

/// The four probe kinds of the draft: on a fresh connection (foreign) the
/// TCP handshake, the TLS handshake and the HTTP request/response; on a
/// load-generating connection (self) the HTTP request/response.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProbeRtts {
    pub tcp_foreign_ms: Vec<f64>,
    pub tls_foreign_ms: Vec<f64>,
    pub http_foreign_ms: Vec<f64>,
    pub http_self_ms: Vec<f64>,
}

/// The responsiveness of a set of probes and its parts (trimmed means, ms).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Responsiveness {
    pub rpm: f64,
    pub tcp_foreign_ms: f64,
    pub tls_foreign_ms: f64,
    pub http_foreign_ms: f64,
    pub http_self_ms: f64,
    /// The weighted mean round trip the RPM is 60000 / of.
    pub weighted_ms: f64,
}

impl ProbeRtts {
    pub fn extend(&mut self, other: &ProbeRtts) {
        self.tcp_foreign_ms.extend_from_slice(&other.tcp_foreign_ms);
        self.tls_foreign_ms.extend_from_slice(&other.tls_foreign_ms);
        self.http_foreign_ms.extend_from_slice(&other.http_foreign_ms);
        self.http_self_ms.extend_from_slice(&other.http_self_ms);
    }

    pub fn is_complete(&self) -> bool {
        !(self.tcp_foreign_ms.is_empty()
            || self.tls_foreign_ms.is_empty()
            || self.http_foreign_ms.is_empty()
            || self.http_self_ms.is_empty())
    }

    /// The draft's formula, each TM a 95% single-sided trimmed mean (the
    /// slowest 5% dropped):
    /// `RPM = 60000 / (1/6 (TM(tcp_f) + TM(tls_f) + TM(http_f)) + 1/2 TM(http_s))`.
    /// `None` unless every kind has at least one finite sample.
    pub fn responsiveness(&self) -> Option<Responsiveness> {
        let tm = |v: &[f64]| trimmed_mean_single_sided(v, RPM_KEEP_FRACTION);
        let (tcp, tls, http_f, http_s) =
            (tm(&self.tcp_foreign_ms)?, tm(&self.tls_foreign_ms)?, tm(&self.http_foreign_ms)?, tm(&self.http_self_ms)?);
        let weighted = (tcp + tls + http_f) / 6.0 + http_s / 2.0;
        if weighted.is_nan() || weighted <= 0.0 {
            return None;
        }
        Some(Responsiveness {
            rpm: 60_000.0 / weighted,
            tcp_foreign_ms: tcp,
            tls_foreign_ms: tls,
            http_foreign_ms: http_f,
            http_self_ms: http_s,
            weighted_ms: weighted,
        })
    }
}

/// The draft's stability test over per-interval values (aggregate goodput,
/// or responsiveness): each new value updates the moving average of the
/// last `mad` values; the series is stable once `mad` moving averages exist
/// and their (population) standard deviation is at most `sdt` times their
/// mean.
#[derive(Debug, Clone)]
pub struct Stability {
    mad: usize,
    sdt: f64,
    values: Vec<f64>,
    averages: Vec<f64>,
}

impl Stability {
    pub fn new(mad: usize, sdt: f64) -> Stability {
        Stability { mad: mad.max(1), sdt, values: vec![], averages: vec![] }
    }

    /// The draft's defaults ([`RPM_MAD`], [`RPM_SDT`]).
    pub fn draft() -> Stability {
        Stability::new(RPM_MAD, RPM_SDT)
    }

    /// Add one interval's value; returns the new moving average.
    pub fn push(&mut self, value: f64) -> f64 {
        self.values.push(value);
        let from = self.values.len().saturating_sub(self.mad);
        let window = &self.values[from..];
        let ma = window.iter().sum::<f64>() / window.len() as f64;
        self.averages.push(ma);
        ma
    }

    /// The latest moving average.
    pub fn moving_average(&self) -> Option<f64> {
        self.averages.last().copied()
    }

    pub fn intervals(&self) -> usize {
        self.values.len()
    }

    /// Standard deviation of the last `mad` moving averages relative to
    /// their mean (None until there are `mad` of them, or the mean is 0).
    pub fn relative_spread(&self) -> Option<f64> {
        if self.averages.len() < self.mad {
            return None;
        }
        let last = &self.averages[self.averages.len() - self.mad..];
        let mean = last.iter().sum::<f64>() / last.len() as f64;
        if mean.is_nan() || mean == 0.0 {
            return None;
        }
        let var = last.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / last.len() as f64;
        Some(var.sqrt() / mean.abs())
    }

    pub fn is_stable(&self) -> bool {
        self.relative_spread().is_some_and(|s| s <= self.sdt)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_formula_weights_foreign_parts_a_sixth_and_self_a_half() {
        // tcp 10, tls 20, http_f 30 -> (60)/6 = 10; http_s 40 -> 20; total 30 ms -> 2000 RPM.
        let p = ProbeRtts {
            tcp_foreign_ms: vec![10.0],
            tls_foreign_ms: vec![20.0],
            http_foreign_ms: vec![30.0],
            http_self_ms: vec![40.0],
        };
        let r = p.responsiveness().unwrap();
        assert_eq!(r.weighted_ms, 30.0);
        assert_eq!(r.rpm, 2000.0);
    }

    #[test]
    fn each_part_drops_its_slowest_five_percent() {
        // 20 self probes: 19 at 10 ms and one at 1000 ms; the 1000 is dropped.
        let mut s = vec![10.0; 19];
        s.push(1000.0);
        let p = ProbeRtts { tcp_foreign_ms: vec![6.0], tls_foreign_ms: vec![6.0], http_foreign_ms: vec![6.0], http_self_ms: s };
        let r = p.responsiveness().unwrap();
        assert_eq!(r.http_self_ms, 10.0);
        // 18/6 + 10/2 = 8 ms -> 7500 RPM.
        assert_eq!(r.rpm, 7500.0);
    }

    #[test]
    fn a_missing_kind_gives_no_responsiveness() {
        let p = ProbeRtts { tcp_foreign_ms: vec![1.0], tls_foreign_ms: vec![1.0], http_foreign_ms: vec![1.0], http_self_ms: vec![] };
        assert!(p.responsiveness().is_none());
        assert!(!p.is_complete());
    }

    #[test]
    fn stability_needs_mad_moving_averages_within_tolerance() {
        let mut s = Stability::new(4, 0.05);
        // A ramp: 10, 20, 30, 40 -> moving averages 10, 15, 20, 25: spread far above 5%.
        for v in [10.0, 20.0, 30.0, 40.0] {
            s.push(v);
        }
        assert_eq!(s.moving_average(), Some(25.0));
        assert!(!s.is_stable());
        // Flat at 100 afterwards: MAs 47.5 (20,30,40,100)... then 100 once the window is all 100s.
        for _ in 0..7 {
            s.push(100.0);
        }
        assert!(s.is_stable(), "spread {:?}", s.relative_spread());
    }

    #[test]
    fn stability_threshold_is_inclusive_and_relative() {
        // MAs (mad 1 = the values): 95, 105, 95, 105 -> mean 100, sd 5 -> 5%: stable at sdt 5%.
        let mut s = Stability::new(1, 0.05);
        for v in [95.0, 105.0, 95.0, 105.0] {
            s.push(v);
        }
        // mad 1 looks at the last single average: spread 0.
        assert_eq!(s.relative_spread(), Some(0.0));
        let mut s = Stability::new(4, 0.05);
        let mut t = Stability::new(4, 0.049);
        // Values chosen so the 4 MAs are exactly 95, 105, 95, 105: v1=95 (MA 95), v2=115 (MA 105),
        // v3=75 (MA 95), v4=135 (MA 105).
        for v in [95.0, 115.0, 75.0, 135.0] {
            s.push(v);
            t.push(v);
        }
        assert!((s.relative_spread().unwrap() - 0.05).abs() < 1e-12);
        assert!(s.is_stable());
        assert!(!t.is_stable());
    }

    #[test]
    fn too_few_intervals_are_never_stable() {
        let mut s = Stability::draft();
        for _ in 0..3 {
            s.push(50.0);
        }
        assert_eq!(s.relative_spread(), None);
        assert!(!s.is_stable());
        s.push(50.0);
        assert!(s.is_stable());
    }
}
