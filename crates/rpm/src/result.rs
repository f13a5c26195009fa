//! An RPM run as a result of `bloatlab test`'s schema ([`test_result`]):
//! what the monitor stores for an RPM target and what `bloatlab tune`
//! measures an RPM server with. Its `rpm` holds the whole RPM result
//! (stages, intervals, probes); its headline carries what the stages
//! measured (the worst stage's RPM, each direction's goodput). When the run
//! probed the idle line first (`RpmConfig::idle`) it also has phases: the
//! idle line and one per one-way stage, whose latency is the foreign TCP
//! handshakes' (SYN to SYN-ACK, a round trip through the line's queues
//! without TLS or HTTP), summarized, graded and judged for settling as any
//! test's phases are.
use bloatlab_engine::summarize;
use bloatlab_model::RpmDirection;
use bloatlab_results::{Headline, Metadata, Phase, Probe, RpmProbe, RpmResult, TestResult, SCHEMA_NAME, SCHEMA_VERSION};

/// The probe kind whose round trips are a phase's latency.
pub const LATENCY_PROBE: &str = "tcp_foreign";

/// `r` as a test result (see the module's text).
pub fn test_result(r: RpmResult) -> TestResult {
    let goodput = |d: RpmDirection| r.stages.iter().filter(|s| s.direction == d).map(|s| s.goodput_bps).fold(0.0, f64::max);
    let per_s = f64::from(r.method.probes_per_second.max(1));
    let metadata = Metadata {
        bloatlab_version: r.bloatlab_version.clone(),
        start_time: r.start_time.clone(),
        start_unix_ns: r.start_unix_ns,
        command: r.command.clone(),
        server_address: r.server_address.clone(),
        client: r.client.clone(),
        cc: r.cc.clone(),
        idle_duration_s: r.idle.as_ref().map(|i| i.duration_s).unwrap_or(0.0),
        probe_interval_ms: 1000.0 / per_s,
        settle_rule: bloatlab_model::SETTLE_RULE.describe(),
        latency_rule: bloatlab_model::LOADED_RULE.describe(),
        probe_timestamps: match &r.idle {
            Some(_) => format!(
                "no UDP probes: the IETF responsiveness method against {} ({}); a phase's latency is its foreign TCP handshakes (SYN to SYN-ACK), timed by the client's monotonic clock",
                r.url, r.method.specification
            ),
            None => format!("no UDP probes: the IETF responsiveness method against {} ({})", r.url, r.method.specification),
        },
        ..Metadata::default()
    };
    let (idle, scenarios) = match &r.idle {
        Some(i) => phases(&r, i),
        None => (None, vec![]),
    };
    let mut headline = if idle.is_some() { summarize::headline(idle.as_ref(), &scenarios) } else { Headline::default() };
    headline.download_capacity_bps = goodput(RpmDirection::Download);
    headline.upload_capacity_bps = goodput(RpmDirection::Upload);
    headline.rpm = r.stages.iter().filter_map(|s| s.rpm).reduce(f64::min);
    let mut t = TestResult {
        schema: SCHEMA_NAME.into(),
        schema_version: SCHEMA_VERSION,
        complete: true,
        incomplete_reason: None,
        metadata,
        idle,
        scenarios,
        headline,
        lab: None,
        rpm: Some(r),
        ramp: vec![],
        client: Default::default(),
        household: None,
        monitor: None,
    };
    summarize::finish_headline(&mut t);
    if t.idle.is_some() {
        bloatlab_metrics::grade::record(&mut t);
    }
    t
}

/// The idle phase and one phase per one-way stage (a bidirectional stage's
/// goodput is the two directions' sum: it stays in the `rpm` section).
fn phases(r: &RpmResult, idle: &bloatlab_results::RpmIdle) -> (Option<Phase>, Vec<Phase>) {
    let ns = |s: f64| (s.max(0.0) * 1e9).round() as u64;
    let phase = |name: &str, up: u32, down: u32, start_s: f64, dur_s: f64, probes: &[RpmProbe], failed: &[f64]| {
        let mut ps: Vec<(u64, Option<u64>)> = probes.iter().filter(|p| p.kind == LATENCY_PROBE).map(|p| (ns(start_s + p.t_s), Some(ns(p.rtt_ms / 1e3)))).collect();
        ps.extend(failed.iter().map(|&t| (ns(start_s + t), None)));
        ps.sort_by_key(|p| p.0);
        Phase {
            name: name.into(),
            uploads: up,
            downloads: down,
            start_ns: ns(start_s),
            end_ns: ns(start_s + dur_s),
            probes: ps.into_iter().enumerate().map(|(k, (t_ns, rtt_ns))| Probe { seq: k as u32, t_ns, rtt_ns, server_rx_unix_ns: None, owd_up_ns: None, owd_down_ns: None }).collect(),
            ..Default::default()
        }
    };
    let mut i = phase("idle", 0, 0, idle.start_s, idle.duration_s, &idle.probes, &idle.foreign_failed_s);
    i.summary = summarize::summarize_phase(&i, None, None, None);
    let idle_p50 = (i.summary.latency.received > 0).then_some(i.summary.latency.p50_ms);
    let scenarios = r
        .stages
        .iter()
        .filter(|s| s.direction != RpmDirection::Bidirectional)
        .map(|s| {
            let (up, down) = if s.direction == RpmDirection::Upload { (s.connections, 0) } else { (0, s.connections) };
            let mut p = phase(&format!("rpm {}", s.direction.name()), up, down, s.start_s, s.duration_s, &s.probes, &s.foreign_failed_s);
            p.summary = summarize::summarize_phase(&p, idle_p50, None, None);
            // the stage's goodput, as the method measured it (its moving
            // average at the end: no flow records here)
            match s.direction {
                RpmDirection::Upload => p.summary.upload_bps = s.goodput_bps,
                _ => p.summary.download_bps = s.goodput_bps,
            }
            p.summary.upload_gb_per_month = bloatlab_metrics::gb_per_month(p.summary.upload_bps);
            p.summary.download_gb_per_month = bloatlab_metrics::gb_per_month(p.summary.download_bps);
            p
        })
        .collect();
    (Some(i), scenarios)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bloatlab_results::{RpmIdle, RpmStage};

    fn probes(secs: f64, rtt: impl Fn(f64) -> f64) -> Vec<RpmProbe> {
        (0..(secs * 20.0) as usize)
            .flat_map(|k| {
                let t = k as f64 / 20.0;
                [RpmProbe { t_s: t, kind: "tcp_foreign".into(), rtt_ms: rtt(t) }, RpmProbe { t_s: t, kind: "http_self".into(), rtt_ms: 999.0 }]
            })
            .collect()
    }

    #[test]
    fn idle_probes_make_phases_with_added_latency_and_a_grade() {
        let mut r = RpmResult::default();
        r.method.probes_per_second = 20;
        r.idle = Some(RpmIdle { start_s: 0.0, duration_s: 2.0, probes: probes(2.0, |_| 10.0), foreign_failed_s: vec![1.0] });
        // download: the queue rises over 3 s to +250 ms and stays
        r.stages.push(RpmStage { direction: RpmDirection::Download, start_s: 2.0, duration_s: 8.0, goodput_bps: 9e6, connections: 4, rpm: Some(300.0), probes: probes(8.0, |t| 10.0 + (t / 3.0).min(1.0) * 250.0), ..Default::default() });
        r.stages.push(RpmStage { direction: RpmDirection::Upload, start_s: 10.0, duration_s: 8.0, goodput_bps: 2e6, connections: 2, rpm: Some(2000.0), probes: probes(8.0, |_| 12.0), ..Default::default() });
        r.stages.push(RpmStage { direction: RpmDirection::Bidirectional, start_s: 18.0, duration_s: 8.0, goodput_bps: 11e6, connections: 2, ..Default::default() });
        let t = test_result(r);
        let i = t.idle.as_ref().unwrap();
        assert_eq!((i.summary.latency.sent, i.summary.latency.received, i.summary.latency.p50_ms), (41, 40, 10.0), "the self probes are not latency; a failed handshake is a lost probe");
        assert_eq!(t.scenarios.len(), 2, "the bidirectional stage has no per-direction goodput: no phase");
        let (d, u) = (&t.scenarios[0], &t.scenarios[1]);
        assert_eq!((d.name.as_str(), d.downloads, d.uploads, d.summary.download_bps), ("rpm download", 4, 0, 9e6));
        assert_eq!((u.name.as_str(), u.uploads, u.summary.upload_bps), ("rpm upload", 2, 2e6));
        assert!((d.summary.added_latency_ms.unwrap() - 250.0).abs() < 1.0, "{:?}", d.summary.added_latency_ms);
        assert!(!d.summary.still_rising && d.summary.settled_after_s.is_some(), "{:?}", d.summary);
        assert!((u.summary.added_latency_ms.unwrap() - 2.0).abs() < 1e-9);
        assert_eq!(t.headline.idle_latency_ms, Some(10.0));
        assert_eq!((t.headline.download_capacity_bps, t.headline.upload_capacity_bps, t.headline.rpm), (9e6, 2e6, Some(300.0)));
        assert_eq!(t.headline.grade.as_deref(), Some("D"), "+250 ms under load: D (200..400)");
    }

    #[test]
    fn without_idle_probes_only_the_headline() {
        let mut r = RpmResult::default();
        r.stages.push(RpmStage { direction: RpmDirection::Download, goodput_bps: 9e6, rpm: Some(500.0), probes: probes(8.0, |_| 50.0), ..Default::default() });
        let t = test_result(r);
        assert!(t.idle.is_none() && t.scenarios.is_empty() && t.headline.grade.is_none());
        assert_eq!((t.headline.download_capacity_bps, t.headline.rpm), (9e6, Some(500.0)));
    }
}
