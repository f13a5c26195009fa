//! Display series derived from raw samples: per-flow and per-direction
//! goodput rates, latency series, CDFs, quantiles, queue backlog, and the
//! display-only thinning ([`thin_minmax`]).
//!
//! Nothing here feeds the summary statistics: tables print the numbers the
//! engine computed (`Phase.summary`, `headline`); plots use these helpers.
use bloatlab_results::{Direction, Flow, Phase, Probe, QueueSeries, TestResult};

/// A display series: (x, y) points, e.g. (t_s, value).
pub type Points = Vec<(f64, f64)>;

/// Nanoseconds on the test clock to seconds.
pub fn secs(t_ns: u64) -> f64 {
    t_ns as f64 / 1e9
}

/// All phases in time order: the idle baseline (if any) then the scenarios.
pub fn phases(r: &TestResult) -> Vec<&Phase> {
    let mut v: Vec<&Phase> = r.idle.iter().chain(r.scenarios.iter()).collect();
    v.sort_by_key(|p| p.start_ns);
    v
}

/// Loaded phases (the scenarios), in the order run.
pub fn loaded(r: &TestResult) -> impl Iterator<Item = &Phase> {
    r.scenarios.iter()
}

/// Time span of the test's phases on the test clock, seconds (0 .. the end
/// of the last phase): the time axes end where the measured data does, not
/// where a lab's queue sampler stopped (it samples on through an RPM stage
/// and the teardown). Without phases, the queue samples' end.
pub fn test_span_s(r: &TestResult) -> f64 {
    let end = phases(r).iter().map(|p| p.end_ns).max().filter(|&e| e > 0).unwrap_or_else(|| {
        r.lab.iter().flat_map(|l| l.queues.iter()).filter_map(|q| q.samples.last()).map(|s| s.t_ns).max().unwrap_or(0)
    });
    secs(end).max(1e-3)
}

/// Goodput rate of one flow between consecutive cumulative samples:
/// (t_s at the end of the interval, bits/s). Intervals of zero length are skipped.
pub fn flow_rate(flow: &Flow) -> Vec<(f64, f64)> {
    let mut out = Vec::with_capacity(flow.goodput.len());
    for w in flow.goodput.windows(2) {
        let (a, b) = (w[0], w[1]);
        if b.t_ns <= a.t_ns {
            continue;
        }
        let dt = (b.t_ns - a.t_ns) as f64 / 1e9;
        let db = b.bytes.saturating_sub(a.bytes) as f64;
        out.push((secs(b.t_ns), db * 8.0 / dt));
    }
    out
}

/// Cumulative bytes of a flow at time `t_ns`, linearly interpolated between
/// samples; 0 before the first sample (anchored at `start_ns`), the last value after.
fn cum_at(flow: &Flow, start_ns: u64, t_ns: u64) -> f64 {
    let g = &flow.goodput;
    if g.is_empty() {
        return 0.0;
    }
    if t_ns <= g[0].t_ns {
        let t0 = start_ns.min(g[0].t_ns);
        if g[0].t_ns == t0 || t_ns <= t0 {
            return if t_ns >= g[0].t_ns { g[0].bytes as f64 } else { 0.0 };
        }
        return g[0].bytes as f64 * (t_ns - t0) as f64 / (g[0].t_ns - t0) as f64;
    }
    let i = g.partition_point(|s| s.t_ns <= t_ns);
    if i >= g.len() {
        return g[g.len() - 1].bytes as f64;
    }
    let (a, b) = (g[i - 1], g[i]);
    let f = (t_ns - a.t_ns) as f64 / (b.t_ns - a.t_ns).max(1) as f64;
    a.bytes as f64 + f * (b.bytes as f64 - a.bytes as f64)
}

/// Summed goodput of one direction within a phase on a regular grid of
/// `step_ns` (flows' cumulative counters interpolated at the grid points):
/// (t_s at the end of each bin, bits/s). Empty when the phase has no flow that way.
pub fn direction_rate(phase: &Phase, dir: Direction, step_ns: u64) -> Vec<(f64, f64)> {
    summed_rate(phase, |f| f.direction == dir, step_ns)
}

/// [`direction_rate`] of the flows marked `dscp` only (`--dscp`).
pub fn class_rate(phase: &Phase, dir: Direction, dscp: u8, step_ns: u64) -> Vec<(f64, f64)> {
    summed_rate(phase, |f| f.direction == dir && f.dscp == dscp, step_ns)
}

fn summed_rate(phase: &Phase, which: impl Fn(&Flow) -> bool, step_ns: u64) -> Vec<(f64, f64)> {
    let flows: Vec<&Flow> = phase.flows.iter().filter(|f| which(f)).collect();
    if flows.is_empty() || phase.end_ns <= phase.start_ns {
        return vec![];
    }
    let step = step_ns.max(1_000_000);
    let last = flows
        .iter()
        .filter_map(|f| f.goodput.last().map(|s| s.t_ns))
        .max()
        .unwrap_or(phase.end_ns)
        .max(phase.start_ns);
    let mut out = Vec::new();
    let mut t = phase.start_ns;
    let mut prev: f64 = flows.iter().map(|f| cum_at(f, phase.start_ns, t)).sum();
    while t < last {
        let nt = (t + step).min(last);
        let cur: f64 = flows.iter().map(|f| cum_at(f, phase.start_ns, nt)).sum();
        let dt = (nt - t) as f64 / 1e9;
        if dt > 0.0 {
            out.push((secs(nt), (cur - prev).max(0.0) * 8.0 / dt));
        }
        prev = cur;
        t = nt;
    }
    out
}

/// Received probes as (t_s, rtt ms); lost probes as their send times.
pub fn probe_rtt(probes: &[Probe]) -> (Vec<(f64, f64)>, Vec<f64>) {
    let mut ok = Vec::with_capacity(probes.len());
    let mut lost = Vec::new();
    for p in probes {
        match p.rtt_ns {
            Some(r) => ok.push((secs(p.t_ns), r as f64 / 1e6)),
            None => lost.push(secs(p.t_ns)),
        }
    }
    (ok, lost)
}

/// One-way delays (up, down) as (t_s, ms).
pub fn probe_owd(probes: &[Probe]) -> (Points, Points) {
    let up = probes
        .iter()
        .filter_map(|p| p.owd_up_ns.map(|d| (secs(p.t_ns), d as f64 / 1e6)))
        .collect();
    let down = probes
        .iter()
        .filter_map(|p| p.owd_down_ns.map(|d| (secs(p.t_ns), d as f64 / 1e6)))
        .collect();
    (up, down)
}

/// Quantile of sorted data (q in 0..=1): `metrics::percentile_sorted`
/// (linear interpolation between closest ranks), NaN for no data.
pub fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    bloatlab_metrics::percentile_sorted(sorted, q.clamp(0.0, 1.0) * 100.0).unwrap_or(f64::NAN)
}

pub fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.retain(|x| x.is_finite());
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v
}

/// Empirical CDF over *all sent* probes: lost probes count as infinitely
/// late, so the curve ends at (1 - loss). Returns (ms, fraction) steps and
/// the loss fraction.
pub fn cdf(probes: &[&Probe]) -> (Vec<(f64, f64)>, f64) {
    let n = probes.len();
    if n == 0 {
        return (vec![], 0.0);
    }
    let v = sorted(probes.iter().filter_map(|p| p.rtt_ns.map(|r| r as f64 / 1e6)).collect());
    let lost = (n - v.len()) as f64 / n as f64;
    let mut out = Vec::with_capacity(v.len() * 2);
    for (i, x) in v.iter().enumerate() {
        out.push((*x, i as f64 / n as f64));
        out.push((*x, (i + 1) as f64 / n as f64));
    }
    (out, lost)
}

/// Five-number-ish summary for box plots (ms): p5, p25, p50, p75, p95, max, n.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BoxStats {
    pub p5: f64,
    pub p25: f64,
    pub p50: f64,
    pub p75: f64,
    pub p95: f64,
    pub max: f64,
    pub n: usize,
}

pub fn box_stats(values_ms: Vec<f64>) -> Option<BoxStats> {
    let s = sorted(values_ms);
    if s.is_empty() {
        return None;
    }
    Some(BoxStats {
        p5: quantile_sorted(&s, 0.05),
        p25: quantile_sorted(&s, 0.25),
        p50: quantile_sorted(&s, 0.50),
        p75: quantile_sorted(&s, 0.75),
        p95: quantile_sorted(&s, 0.95),
        max: *s.last().unwrap(),
        n: s.len(),
    })
}

/// Queue backlog over time: (t_s, packets) and (t_s, bytes).
pub fn queue_backlog(q: &QueueSeries) -> (Points, Points) {
    let p = q.samples.iter().map(|s| (secs(s.t_ns), s.backlog_packets as f64)).collect();
    let b = q.samples.iter().map(|s| (secs(s.t_ns), s.backlog_bytes as f64)).collect();
    (p, b)
}

/// Drops per second between consecutive samples: (t_s, drops/s).
pub fn queue_drop_rate(q: &QueueSeries) -> Vec<(f64, f64)> {
    q.samples
        .windows(2)
        .filter(|w| w[1].t_ns > w[0].t_ns)
        .map(|w| {
            let dt = (w[1].t_ns - w[0].t_ns) as f64 / 1e9;
            (secs(w[1].t_ns), w[1].drops.saturating_sub(w[0].drops) as f64 / dt)
        })
        .collect()
}

/// What a queue did over the whole test (`metrics::queue::phase_queue`
/// over the test's whole span): the report's per-queue lines.
pub fn queue_over_test(q: &QueueSeries) -> Option<bloatlab_results::PhaseQueue> {
    bloatlab_metrics::queue::phase_queue(q, 0, u64::MAX, None)
}

/// Display-only thinning: keeps at most about `max_points` points by taking,
/// in each of `max_points / 2` equal index buckets, the minimum and the
/// maximum (in time order), so spikes and dips stay visible. Series at or
/// under the limit are returned unchanged. Never used for statistics.
pub fn thin_minmax(pts: &[(f64, f64)], max_points: usize) -> Vec<(f64, f64)> {
    let max_points = max_points.max(4);
    if pts.len() <= max_points {
        return pts.to_vec();
    }
    let buckets = max_points / 2;
    let mut out = Vec::with_capacity(buckets * 2 + 2);
    let n = pts.len();
    for b in 0..buckets {
        let lo = b * n / buckets;
        let hi = ((b + 1) * n / buckets).min(n);
        if lo >= hi {
            continue;
        }
        let slice = &pts[lo..hi];
        let (mut imin, mut imax) = (0, 0);
        for (i, p) in slice.iter().enumerate() {
            if p.1 < slice[imin].1 {
                imin = i;
            }
            if p.1 > slice[imax].1 {
                imax = i;
            }
        }
        let (a, c) = if imin <= imax { (imin, imax) } else { (imax, imin) };
        out.push(slice[a]);
        if c != a {
            out.push(slice[c]);
        }
    }
    out
}

/// Thin a list of x positions (lost-probe markers) to at most `max` evenly chosen.
pub fn thin_xs(xs: &[f64], max: usize) -> Vec<f64> {
    if xs.len() <= max || max == 0 {
        return xs.to_vec();
    }
    (0..max).map(|i| xs[i * xs.len() / max]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bloatlab_results::GoodputSample;

    fn flow(id: u32, dir: Direction, pts: &[(u64, u64)]) -> Flow {
        Flow {
            id,
            direction: dir,
            goodput: pts.iter().map(|&(t, b)| GoodputSample { t_ns: t, bytes: b }).collect(),
            tcp_info: vec![],
            bytes: pts.last().map(|p| p.1).unwrap_or(0),
            max_gap_ns: 0,
            max_gap_at_ns: 0,
            dscp: 0,
            udp: None,
        }
    }

    #[test]
    fn rates_from_cumulative_bytes() {
        // 1.25 MB per 100 ms = 100 Mbit/s
        let f = flow(1, Direction::Up, &[(0, 0), (100_000_000, 1_250_000), (200_000_000, 2_500_000)]);
        let r = flow_rate(&f);
        assert_eq!(r.len(), 2);
        assert!((r[0].1 - 100e6).abs() < 1.0);
        let mut p = Phase { start_ns: 0, end_ns: 200_000_000, ..Default::default() };
        p.flows.push(f.clone());
        p.flows.push(flow(2, Direction::Up, &[(50_000_000, 0), (150_000_000, 625_000), (200_000_000, 937_500)]));
        let d = direction_rate(&p, Direction::Up, 100_000_000);
        assert_eq!(d.len(), 2);
        // flow 2: 50 Mbit/s from 50 ms; in the first bin it delivered 312.5 kB
        assert!((d[0].1 - (100e6 + 25e6)).abs() < 1e3, "{:?}", d);
        assert!((d[1].1 - 150e6).abs() < 1e3, "{:?}", d);
        assert!(direction_rate(&p, Direction::Down, 100_000_000).is_empty());
    }

    #[test]
    fn thinning_keeps_extremes() {
        let pts: Vec<(f64, f64)> = (0..10_000).map(|i| (i as f64, if i == 5_555 { 1e6 } else { (i % 7) as f64 })).collect();
        let t = thin_minmax(&pts, 500);
        assert!(t.len() <= 500);
        assert!(t.iter().any(|p| p.1 == 1e6));
        assert!(t.windows(2).all(|w| w[0].0 <= w[1].0));
        assert_eq!(thin_minmax(&pts[..100], 500).len(), 100);
    }

    #[test]
    fn cdf_counts_losses() {
        let ps: Vec<Probe> = (0..4)
            .map(|i| Probe {
                seq: i,
                t_ns: i as u64,
                rtt_ns: if i == 3 { None } else { Some((i as u64 + 1) * 1_000_000) },
                server_rx_unix_ns: None,
                owd_up_ns: None,
                owd_down_ns: None,
            })
            .collect();
        let refs: Vec<&Probe> = ps.iter().collect();
        let (c, lost) = cdf(&refs);
        assert_eq!(lost, 0.25);
        assert_eq!(c.last().unwrap(), &(3.0, 0.75));
        assert_eq!(quantile_sorted(&[1.0, 2.0, 3.0, 4.0], 0.5), 2.5);
    }
}
