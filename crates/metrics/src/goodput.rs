//! Goodput: per-interval rate series and the steady-state summary of a phase.

use serde::{Deserialize, Serialize};

/// Default fraction of a phase's duration skipped at its start (slow start).
pub const DEFAULT_TRIM_START: f64 = 0.2;

/// Bytes a test's flows moved in direction `d`: each flow's receiver's count,
/// summed over the scenarios (what the test cost the line, for a data budget).
pub fn bytes_moved(r: &bloatlab_results::TestResult, d: bloatlab_results::Direction) -> u64 {
    let flows: u64 = r.scenarios.iter().flat_map(|p| p.flows.iter()).filter(|f| f.direction == d).map(|f| f.bytes).sum();
    flows + r.rpm.as_ref().map_or(0, |x| rpm_bytes(x, d))
}

/// What an RPM test's stages moved one way: each interval's goodput over
/// its length (the stages count no bytes; their goodput is what arrived),
/// a bidirectional stage's goodput split evenly between the two ways.
fn rpm_bytes(r: &bloatlab_results::RpmResult, d: bloatlab_results::Direction) -> u64 {
    use bloatlab_model::RpmDirection as R;
    let id = r.method.interval_s;
    r.stages
        .iter()
        .map(|s| {
            let share = match (s.direction, d) {
                (R::Download, bloatlab_results::Direction::Down) | (R::Upload, bloatlab_results::Direction::Up) => 1.0,
                (R::Bidirectional, _) => 0.5,
                _ => 0.0,
            };
            s.intervals.iter().map(|i| i.goodput_bps * id / 8.0).sum::<f64>() * share
        })
        .sum::<f64>() as u64
}
/// Default fraction of a phase's duration skipped at its end (shutdown).
pub const DEFAULT_TRIM_END: f64 = 0.05;
/// Fewest goodput samples the trimmed window must contain; below this the
/// whole-phase average is used.
pub const MIN_WINDOW_SAMPLES: usize = 2;

/// The default steady-state rule in words (equal to
/// `trimming_rule(DEFAULT_TRIM_START, DEFAULT_TRIM_END)`); results carry it in
/// `metadata.trimming_rule`.
pub const TRIMMING_RULE: &str = "steady part = the phase without its first 20% and last 5% of its duration; \
goodput = bytes delivered in that window (cumulative byte count interpolated linearly at the window edges) \
x 8 / window length; if the window holds fewer than 2 goodput samples, the whole-phase average is used";

/// The rule in words for any trim fractions (same wording as [`TRIMMING_RULE`]).
pub fn trimming_rule(trim_start: f64, trim_end: f64) -> String {
    format!(
        "steady part = the phase without its first {}% and last {}% of its duration; \
goodput = bytes delivered in that window (cumulative byte count interpolated linearly at the window edges) \
x 8 / window length; if the window holds fewer than {} goodput samples, the whole-phase average is used",
        pct(trim_start),
        pct(trim_end),
        MIN_WINDOW_SAMPLES
    )
}

fn pct(f: f64) -> String {
    let p = (sanitize_trim(f) * 100.0 * 1e6).round() / 1e6;
    format!("{p}")
}

fn sanitize_trim(f: f64) -> f64 {
    if f.is_nan() {
        0.0
    } else {
        f.clamp(0.0, 1.0)
    }
}

/// Goodput time series from cumulative `(t_ns, bytes)` samples: for each pair of
/// consecutive samples, `(bytes₁ − bytes₀) × 8 / (t₁ − t₀)` in bits/s, stamped
/// at the interval end `t₁`.
///
/// Samples should be in time order. A sample whose time is not after the
/// previous kept sample is skipped (no zero-length interval, no division by
/// zero). A decrease of the cumulative count (which a correct counter never
/// shows) gives a rate of 0 for that interval rather than a negative one.
pub fn rate_series(samples: &[(u64, u64)]) -> Vec<(u64, f64)> {
    let mut out = Vec::with_capacity(samples.len().saturating_sub(1));
    let mut iter = samples.iter();
    let Some(&(mut t0, mut b0)) = iter.next() else {
        return out;
    };
    for &(t, b) in iter {
        if t <= t0 {
            continue;
        }
        let bits = b.saturating_sub(b0) as f64 * 8.0;
        out.push((t, bits * 1e9 / (t - t0) as f64));
        t0 = t;
        b0 = b;
    }
    out
}

/// The steady-state goodput of a phase and how it was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SteadyGoodput {
    /// Bits per second.
    pub bps: f64,
    /// The window actually measured, ns (same clock as the samples).
    pub window_start_ns: u64,
    pub window_end_ns: u64,
    /// True when the trimmed window was unusable and the whole-phase average
    /// was used.
    pub whole_phase: bool,
    /// Samples (inclusive) inside the measured window.
    pub samples_in_window: usize,
}

/// Cumulative byte curve: sorted, deduplicated in time (last value wins).
struct Curve(Vec<(u64, u64)>);

impl Curve {
    fn new(samples: &[(u64, u64)]) -> Curve {
        let mut v = samples.to_vec();
        v.sort_by_key(|s| s.0); // stable: equal times keep their order
        let mut out: Vec<(u64, u64)> = Vec::with_capacity(v.len());
        for s in v {
            match out.last_mut() {
                Some(last) if last.0 == s.0 => *last = s,
                _ => out.push(s),
            }
        }
        Curve(out)
    }

    /// Bytes at `t`, linear interpolation; clamped to the sampled span.
    fn at(&self, t: u64) -> f64 {
        let v = &self.0;
        let i = v.partition_point(|s| s.0 <= t);
        if i == 0 {
            return v[0].1 as f64;
        }
        if i == v.len() {
            return v[v.len() - 1].1 as f64;
        }
        let (ta, ba) = v[i - 1];
        let (tb, bb) = v[i];
        let f = (t - ta) as f64 / (tb - ta) as f64;
        ba as f64 + f * (bb as f64 - ba as f64)
    }

    fn count_in(&self, a: u64, b: u64) -> usize {
        self.0.iter().filter(|s| s.0 >= a && s.0 <= b).count()
    }

    fn span(&self) -> (u64, u64) {
        (self.0[0].0, self.0[self.0.len() - 1].0)
    }

    fn rate(&self, a: u64, b: u64) -> f64 {
        (self.at(b) - self.at(a)).max(0.0) * 8.0 * 1e9 / (b - a) as f64
    }
}

/// Steady-state goodput of one phase, see [`steady_goodput_bps`]. `None` when no
/// window of positive length with sample coverage exists (no samples, a single
/// sample, a zero-length phase, or samples entirely outside the phase).
pub fn steady_goodput(
    samples: &[(u64, u64)],
    phase_start_ns: u64,
    phase_end_ns: u64,
    trim_start: f64,
    trim_end: f64,
) -> Option<SteadyGoodput> {
    if samples.is_empty() || phase_end_ns <= phase_start_ns {
        return None;
    }
    let curve = Curve::new(samples);
    let (first, last) = curve.span();
    let dur = (phase_end_ns - phase_start_ns) as f64;
    let (ts, te) = (sanitize_trim(trim_start), sanitize_trim(trim_end));

    if ts + te < 1.0 {
        let ws = phase_start_ns + (ts * dur).round() as u64;
        let we = phase_end_ns - (te * dur).round() as u64;
        let (a, b) = (ws.max(first), we.min(last));
        if b > a {
            let n = curve.count_in(a, b);
            if n >= MIN_WINDOW_SAMPLES {
                return Some(SteadyGoodput {
                    bps: curve.rate(a, b),
                    window_start_ns: a,
                    window_end_ns: b,
                    whole_phase: false,
                    samples_in_window: n,
                });
            }
        }
    }
    let (a, b) = (phase_start_ns.max(first), phase_end_ns.min(last));
    (b > a).then(|| SteadyGoodput {
        bps: curve.rate(a, b),
        window_start_ns: a,
        window_end_ns: b,
        whole_phase: true,
        samples_in_window: curve.count_in(a, b),
    })
}

/// Steady-state goodput of a phase, bits/s, from cumulative `(t_ns, bytes)`
/// samples of one flow (or of a summed direction).
///
/// Rule: drop the first `trim_start` and the last `trim_end` fraction of the
/// phase's duration `[phase_start_ns, phase_end_ns]`; goodput = bytes delivered
/// in the remaining window × 8 / its length, with the cumulative byte curve
/// interpolated linearly at the window edges. The window is clipped to the
/// time span the samples cover (no extrapolation).
///
/// Fallback: when the trimmed window holds fewer than [`MIN_WINDOW_SAMPLES`]
/// samples (short phases, sparse samples) or the trims leave nothing
/// (`trim_start + trim_end >= 1`), the whole-phase average is returned
/// (same formula over the phase clipped to the sampled span). Trim fractions
/// are clamped to `[0, 1]`, NaN counts as 0.
///
/// Returns `0.0` when nothing can be measured (no samples, one sample, empty
/// phase); use [`steady_goodput`] to tell that apart from a real 0.
pub fn steady_goodput_bps(
    samples: &[(u64, u64)],
    phase_start_ns: u64,
    phase_end_ns: u64,
    trim_start: f64,
    trim_end: f64,
) -> f64 {
    steady_goodput(samples, phase_start_ns, phase_end_ns, trim_start, trim_end)
        .map_or(0.0, |s| s.bps)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const S: u64 = 1_000_000_000;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol * b.abs().max(1.0)
    }

    #[test]
    fn rule_text_matches_defaults() {
        assert_eq!(
            trimming_rule(DEFAULT_TRIM_START, DEFAULT_TRIM_END),
            TRIMMING_RULE
        );
        assert!(trimming_rule(0.1, 0.0).contains("first 10% and last 0%"));
    }

    #[test]
    fn rate_series_hand_computed() {
        // 0 B at 0, 125 000 B at 100 ms, 250 000 B at 200 ms, 250 000 at 300 ms
        // interval rates: 125000*8/0.1 s = 10 Mbit/s, 10 Mbit/s, 0
        let s = [
            (0, 0),
            (100 * MS, 125_000),
            (200 * MS, 250_000),
            (300 * MS, 250_000),
        ];
        let r = rate_series(&s);
        assert_eq!(r, vec![(100 * MS, 10e6), (200 * MS, 10e6), (300 * MS, 0.0)]);
        // duplicate time skipped; decrease -> 0
        let s = [(0, 0), (0, 10), (50 * MS, 10_000), (100 * MS, 5_000)];
        // 10000 B - 0 B over 50 ms = 80000 bit / 0.05 s = 1.6 Mbit/s; then decrease -> 0
        assert_eq!(rate_series(&s), vec![(50 * MS, 1.6e6), (100 * MS, 0.0)]);
        assert!(rate_series(&[]).is_empty());
        assert!(rate_series(&[(5, 5)]).is_empty());
    }

    /// Slow start then steady: 0..2 s at 2 Mbit/s, 2..10 s at 10 Mbit/s,
    /// sampled every 100 ms.
    fn ramp() -> Vec<(u64, u64)> {
        (0..=100u64)
            .map(|i| {
                let t = i * 100 * MS;
                let b = if t <= 2 * S {
                    // 2 Mbit/s = 250 000 B/s -> 25 000 B per 100 ms
                    i * 25_000
                } else {
                    // 500 000 B at 2 s, then 10 Mbit/s = 1 250 000 B/s -> 125 000 per 100 ms
                    500_000 + (i - 20) * 125_000
                };
                (t, b)
            })
            .collect()
    }

    #[test]
    fn steady_goodput_known_curve() {
        let s = ramp();
        // default trims on a 10 s phase: window [2 s, 9.5 s] -> pure steady part = 10 Mbit/s
        let g = steady_goodput(&s, 0, 10 * S, DEFAULT_TRIM_START, DEFAULT_TRIM_END).unwrap();
        assert!(!g.whole_phase);
        assert_eq!((g.window_start_ns, g.window_end_ns), (2 * S, 9_500 * MS));
        assert!(close(g.bps, 10e6, 1e-12));
        assert_eq!(g.samples_in_window, 76); // samples at 2.0, 2.1, ..., 9.5 s
                                             // no trim: whole phase = (500 000 + 8 * 1 250 000) B * 8 / 10 s = 84e6 bit / 10 s = 8.4 Mbit/s
        assert!(close(
            steady_goodput_bps(&s, 0, 10 * S, 0.0, 0.0),
            8.4e6,
            1e-12
        ));
        // trim 10% start: window [1 s, 10 s]: bytes 250 000 (1..2 s) + 10 000 000 = 10.25e6 B
        // -> 82e6 bit / 9 s = 9.1111 Mbit/s
        assert!(close(
            steady_goodput_bps(&s, 0, 10 * S, 0.1, 0.0),
            82e6 / 9.0,
            1e-12
        ));
    }

    #[test]
    fn steady_goodput_interpolates_edges() {
        // samples every 1 s; 1 000 000 B/s steady except nothing from 4 s to 5 s
        let s: Vec<(u64, u64)> = vec![
            (0, 0),
            (S, 1_000_000),
            (2 * S, 2_000_000),
            (3 * S, 3_000_000),
            (4 * S, 4_000_000),
            (5 * S, 4_000_000),
            (6 * S, 5_000_000),
        ];
        // phase [0, 6 s], trims 0.25 / 0.25 -> window [1.5 s, 4.5 s]
        // B(1.5) = 1 500 000, B(4.5) = 4 000 000 -> 2 500 000 B in 3 s -> 20e6 bit / 3 s = 6.667 Mbit/s
        let g = steady_goodput(&s, 0, 6 * S, 0.25, 0.25).unwrap();
        assert_eq!(
            (g.window_start_ns, g.window_end_ns),
            (1_500 * MS, 4_500 * MS)
        );
        assert_eq!(g.samples_in_window, 3);
        assert!(close(g.bps, 20e6 / 3.0, 1e-12));
    }

    #[test]
    fn steady_goodput_short_phase_falls_back() {
        // 300 ms phase, samples at 0, 100, 200, 300 ms: 0, 50 000, 150 000, 200 000 B
        let s = [
            (0, 0),
            (100 * MS, 50_000),
            (200 * MS, 150_000),
            (300 * MS, 200_000),
        ];
        // window [60 ms, 285 ms] holds 2 samples (100, 200) -> trimmed:
        // B(60) = 30 000, B(285) = 150 000 + 0.85*50 000 = 192 500 -> 162 500 B in 225 ms
        // = 1 300 000 bit / 0.225 s = 5.7778 Mbit/s
        let g = steady_goodput(&s, 0, 300 * MS, 0.2, 0.05).unwrap();
        assert!(!g.whole_phase);
        assert!(close(g.bps, 1.3e6 / 0.225, 1e-9));
        // trims 0.4 / 0.4 -> window [120, 180] ms holds no sample -> whole phase:
        // 200 000 B over 0.3 s = 1.6e6 bit / 0.3 s = 5.3333 Mbit/s
        let g = steady_goodput(&s, 0, 300 * MS, 0.4, 0.4).unwrap();
        assert!(g.whole_phase);
        assert!(close(g.bps, 1.6e6 / 0.3, 1e-12));
        // trims summing to >= 1 -> whole phase
        assert!(
            steady_goodput(&s, 0, 300 * MS, 0.6, 0.6)
                .unwrap()
                .whole_phase
        );
        // NaN trims count as 0 -> whole phase average too (all 4 samples in window)
        assert!(close(
            steady_goodput_bps(&s, 0, 300 * MS, f64::NAN, f64::NAN),
            1.6e6 / 0.3,
            1e-12
        ));
        // two samples only, 200 ms apart, 1 s phase: window [200, 950] has 1 sample -> whole phase
        // clipped to the sampled span [0, 200 ms]: 100 000 B -> 0.8e6 bit / 0.2 s = 4 Mbit/s
        let g = steady_goodput(&[(0, 0), (200 * MS, 100_000)], 0, S, 0.2, 0.05).unwrap();
        assert!(g.whole_phase);
        assert_eq!((g.window_start_ns, g.window_end_ns), (0, 200 * MS));
        assert!(close(g.bps, 4e6, 1e-12));
    }

    #[test]
    fn steady_goodput_nothing_measurable() {
        assert_eq!(steady_goodput_bps(&[], 0, S, 0.2, 0.05), 0.0);
        assert_eq!(steady_goodput(&[(5, 100)], 0, S, 0.2, 0.05), None);
        assert_eq!(steady_goodput(&[(0, 0), (S, 10)], S, S, 0.2, 0.05), None);
        // samples entirely after the phase
        assert_eq!(
            steady_goodput(&[(2 * S, 0), (3 * S, 10)], 0, S, 0.2, 0.05),
            None
        );
        // a stalled flow is a real 0, not None
        let g = steady_goodput(&[(0, 500), (S / 2, 500), (S, 500)], 0, S, 0.0, 0.0).unwrap();
        assert_eq!(g.bps, 0.0);
    }

    #[test]
    fn steady_goodput_unsorted_and_absolute_clock() {
        // same ramp on a clock offset by 1 000 s, shuffled order -> same answer
        let base = 1_000 * S;
        let mut s: Vec<(u64, u64)> = ramp().into_iter().map(|(t, b)| (t + base, b)).collect();
        s.reverse();
        let bps = steady_goodput_bps(
            &s,
            base,
            base + 10 * S,
            DEFAULT_TRIM_START,
            DEFAULT_TRIM_END,
        );
        assert!(close(bps, 10e6, 1e-12));
    }
}
