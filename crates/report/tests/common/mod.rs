//! Deterministic fixture results for the report tests: a path with a 10 Mbit/s
//! uplink and 20 Mbit/s downlink, 20 ms base RTT, a bloated upload queue
//! (~200 ms) and a milder download queue (~60 ms); idle + 1u0d + 0u1d + 2u2d.
#![allow(dead_code)]
use bloatlab_results::*;

pub const START_UNIX_NS: u64 = 1_795_327_200_000_000_000; // 2026-11-22T06:00:00Z

struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 11) as f64) / ((1u64 << 53) as f64)
    }
}

pub struct Spec {
    pub idle_s: f64,
    pub scen_s: f64,
    pub scenarios: Vec<(u32, u32)>,
    pub probe_ms: u64,
    pub sample_ms: u64,
    pub lab: bool,
    pub witness: bool,
}

pub fn small_spec() -> Spec {
    Spec { idle_s: 2.0, scen_s: 3.0, scenarios: vec![(1, 0), (0, 1), (2, 2)], probe_ms: 20, sample_ms: 100, lab: true, witness: true }
}

/// The small result used by golden tests.
pub fn small() -> TestResult {
    build(&small_spec())
}

pub fn small_nolab() -> TestResult {
    build(&Spec { lab: false, witness: false, ..small_spec() })
}

/// A 32-flow (16 up + 16 down) 60 s test with 10 ms probes and 100 ms samples.
pub fn large() -> TestResult {
    build(&Spec { idle_s: 2.0, scen_s: 60.0, scenarios: vec![(16, 16)], probe_ms: 10, sample_ms: 100, lab: true, witness: true })
}

const UP_BPS: f64 = 10e6;
const DOWN_BPS: f64 = 20e6;
const BASE_OWD_MS: f64 = 10.0;

/// Queue delay (ms) of a direction `t` seconds into a loaded phase.
fn qdelay(peak_ms: f64, t: f64) -> f64 {
    if t < 0.0 {
        return 0.0;
    }
    if t < 0.8 {
        return peak_ms * t / 0.8;
    }
    // Reno-like sawtooth between 75% and 100% of the peak, period 0.7 s.
    let ph = ((t - 0.8) % 0.7) / 0.7;
    peak_ms * (1.0 - 0.25 * ph)
}

fn pct(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

fn stats(probes: &[Probe]) -> LatencyStats {
    let mut v: Vec<f64> = probes.iter().filter_map(|p| p.rtt_ns.map(|r| r as f64 / 1e6)).collect();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let sent = probes.len() as u32;
    let received = v.len() as u32;
    let avg = if v.is_empty() { 0.0 } else { v.iter().sum::<f64>() / v.len() as f64 };
    let mdev = if v.is_empty() { 0.0 } else { (v.iter().map(|x| (x - avg).powi(2)).sum::<f64>() / v.len() as f64).sqrt() };
    LatencyStats {
        sent,
        received,
        lost: sent - received,
        loss_pct: if sent == 0 { 0.0 } else { 100.0 * (sent - received) as f64 / sent as f64 },
        min_ms: v.first().copied().unwrap_or(0.0),
        avg_ms: avg,
        max_ms: v.last().copied().unwrap_or(0.0),
        mdev_ms: mdev,
        p50_ms: pct(&v, 0.5),
        p90_ms: pct(&v, 0.9),
        p99_ms: pct(&v, 0.99),
    }
}

fn r3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

pub fn build(spec: &Spec) -> TestResult {
    let mut rng = Lcg(42);
    let ms = 1_000_000u64;
    let s = 1_000_000_000u64;
    let mut phases: Vec<Phase> = vec![];
    let mut t = 0u64;
    let mut flow_id = 1u32;
    let mut queue_up: Vec<QueueSample> = vec![];
    let mut queue_down: Vec<QueueSample> = vec![];
    let (mut sent_up, mut sent_down, mut drops_up, mut drops_down) = (0u64, 0u64, 0u64, 0u64);
    let mut defs = vec![];
    let mut all = vec![("idle".to_string(), 0u32, 0u32, spec.idle_s)];
    for &(u, d) in &spec.scenarios {
        all.push((format!("{u}u{d}d"), u, d, spec.scen_s));
        defs.push(format!("{u}u{d}d"));
    }
    for (name, ups, downs, dur) in all {
        let start = t;
        let end = start + (dur * s as f64) as u64;
        let up_peak = if ups > 0 { 200.0 } else { 0.0 };
        let down_peak = if downs > 0 { 60.0 } else { 0.0 };
        let rel = |tn: u64| (tn.saturating_sub(start)) as f64 / s as f64;
        let mut probes = vec![];
        let mut wprobes = vec![];
        let mut seq = 0u32;
        let mut tp = start;
        while tp < end {
            let x = rel(tp);
            let qu = qdelay(up_peak, x);
            let qd = qdelay(down_peak, x);
            let j = (rng.next() - 0.5) * 2.0;
            let lost = (ups + downs > 0) && rng.next() < 0.02 || (ups + downs == 0 && seq == 37);
            let up = BASE_OWD_MS + qu + j * 0.3;
            let down = BASE_OWD_MS + qd + j * 0.3;
            probes.push(Probe {
                seq,
                t_ns: tp,
                rtt_ns: (!lost).then_some(((up + down) * 1e6) as u64),
                server_rx_unix_ns: (!lost).then(|| START_UNIX_NS + tp + (up * 1e6) as u64 + 1_500_000),
                owd_up_ns: (!lost).then_some((up * 1e6) as i64),
                owd_down_ns: (!lost).then_some((down * 1e6) as i64),
            });
            if spec.witness && seq.is_multiple_of(2) {
                let w = 1.0 + qu + j * 0.1;
                wprobes.push(Probe { seq: seq / 2, t_ns: tp, rtt_ns: Some((w * 1e6) as u64), server_rx_unix_ns: None, owd_up_ns: None, owd_down_ns: None });
            }
            seq += 1;
            tp += spec.probe_ms * ms;
        }
        // Request/response every 250 ms; one loss recovery per loaded phase.
        let mut rr = vec![];
        let mut tr = start;
        let mut rseq = 0;
        while tr < end {
            let x = rel(tr);
            let mut rtt = 2.0 * BASE_OWD_MS + qdelay(up_peak, x) + qdelay(down_peak, x) + 0.5;
            if ups + downs > 0 && rseq == 6 {
                rtt += 2.0 * rtt.max(200.0); // RTO-based recovery
            }
            let last = tr + 250 * ms >= end;
            rr.push(RrSample { seq: rseq, t_ns: tr, rtt_ns: (rtt * 1e6) as u64, completed: !(last && ups == 2) });
            rseq += 1;
            tr += 250 * ms;
        }
        // Flows.
        let mut flows = vec![];
        for (dir, count, link) in [(Direction::Up, ups, UP_BPS), (Direction::Down, downs, DOWN_BPS)] {
            for k in 0..count {
                let share = link * 0.95 / count as f64 * (1.0 + 0.08 * (k as f64 - (count as f64 - 1.0) / 2.0));
                let mut g = vec![];
                let mut info = vec![];
                let mut bytes = 0f64;
                let mut ts = start;
                let max_gap;
                let max_gap_at;
                while ts <= end {
                    let x = rel(ts);
                    let ramp = (x / 0.4).min(1.0);
                    let wob = 1.0 + 0.1 * (rng.next() - 0.5);
                    if ts > start {
                        bytes += share * ramp * wob * spec.sample_ms as f64 / 1000.0 / 8.0;
                    }
                    g.push(GoodputSample { t_ns: ts, bytes: bytes as u64 });
                    let rtt = 2.0 * BASE_OWD_MS + qdelay(up_peak, x) + qdelay(down_peak, x);
                    info.push(TcpInfoSample {
                        t_ns: ts,
                        side: if dir == Direction::Up { Side::Client } else { Side::Server },
                        cwnd: ((share * rtt / 1000.0 / 8.0 / 1448.0) as u32).max(2) + 2,
                        ssthresh: 40,
                        srtt_us: (rtt * 1000.0) as u32,
                        rttvar_us: 2000,
                        total_retrans: (x * 3.0) as u32,
                        lost: 0,
                        unacked: 10,
                        sacked: 0,
                        snd_mss: 1448,
                        delivery_rate_bps: (share * ramp) as u64,
                        pacing_rate_bps: (share * 1.2) as u64,
                        bytes_acked: bytes as u64,
                        busy_time_us: (x * 1e6) as u64,
                        rwnd_limited_us: 0,
                        sndbuf_limited_us: 0,
                        ca_state: 0,
                    });
                    ts += spec.sample_ms * ms;
                }
                if dir == Direction::Up && k == 0 {
                    max_gap = 310 * ms;
                    max_gap_at = start + 1_900 * ms;
                } else {
                    max_gap = 40 * ms + 10 * ms * k as u64;
                    max_gap_at = start + 1_000 * ms;
                }
                flows.push(Flow { id: flow_id, direction: dir, goodput: g, tcp_info: info, bytes: bytes as u64, max_gap_ns: max_gap, max_gap_at_ns: max_gap_at, dscp: 0, udp: None });
                flow_id += 1;
            }
        }
        // Lab queue samples.
        if spec.lab {
            let mut tq = start;
            while tq < end {
                let x = rel(tq);
                let qu = qdelay(up_peak, x);
                let qd = qdelay(down_peak, x);
                let bu = (qu / 1000.0 * UP_BPS / 8.0) as u64;
                let bd = (qd / 1000.0 * DOWN_BPS / 8.0) as u64;
                if ups > 0 {
                    sent_up += (UP_BPS * spec.sample_ms as f64 / 1000.0 / 8.0) as u64;
                }
                if downs > 0 {
                    sent_down += (DOWN_BPS * spec.sample_ms as f64 / 1000.0 / 8.0) as u64;
                }
                if x > 0.8 && ((x - 0.8) % 0.7) < 0.1 {
                    drops_up += if ups > 0 { 3 } else { 0 };
                    drops_down += if downs > 0 { 2 } else { 0 };
                }
                queue_up.push(QueueSample { t_ns: tq, backlog_packets: bu / 1514, backlog_bytes: bu, drops: drops_up, overlimits: 0, sent_packets: sent_up / 1514, sent_bytes: sent_up, requeues: 0 });
                queue_down.push(QueueSample { t_ns: tq, backlog_packets: bd / 1514, backlog_bytes: bd, drops: drops_down, overlimits: 0, sent_packets: sent_down / 1514, sent_bytes: sent_down, requeues: 0 });
                tq += spec.sample_ms * ms;
            }
        }
        let lat = stats(&probes);
        let mut ph = Phase { name, uploads: ups, downloads: downs, start_ns: start, end_ns: end, flows, probes, rr, witness_probes: wprobes, pings: vec![], class_probes: vec![], summary: Summary::default() };
        // Summary: steady part = after the first 1 s.
        let steady = |dir: Direction| -> f64 {
            ph.flows
                .iter()
                .filter(|f| f.direction == dir)
                .map(|f| {
                    let a = f.goodput.iter().find(|g| g.t_ns >= start + s).unwrap();
                    let b = f.goodput.last().unwrap();
                    (b.bytes - a.bytes) as f64 * 8.0 / ((b.t_ns - a.t_ns) as f64 / 1e9)
                })
                .sum()
        };
        let up_bps = r3(steady(Direction::Up));
        let down_bps = r3(steady(Direction::Down));
        let flow_bps: Vec<f64> = ph
            .flows
            .iter()
            .map(|f| {
                let a = f.goodput.iter().find(|g| g.t_ns >= start + s).unwrap();
                let b = f.goodput.last().unwrap();
                r3((b.bytes - a.bytes) as f64 * 8.0 / ((b.t_ns - a.t_ns) as f64 / 1e9))
            })
            .collect();
        let worst_rr = ph.rr.iter().map(|x| x.rtt_ns as f64 / 1e6).fold(0.0, f64::max);
        let worst_gap = ph.flows.iter().map(|f| f.max_gap_ns as f64 / 1e6).fold(0.0, f64::max);
        let mut owd_u: Vec<f64> = ph.probes.iter().filter_map(|p| p.owd_up_ns.map(|v| v as f64 / 1e6)).collect();
        let mut owd_d: Vec<f64> = ph.probes.iter().filter_map(|p| p.owd_down_ns.map(|v| v as f64 / 1e6)).collect();
        owd_u.sort_by(|a, b| a.partial_cmp(b).unwrap());
        owd_d.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let loaded = ups + downs > 0;
        ph.summary = Summary {
            pings: vec![],
            udp: vec![],
            classes: vec![],
            upload_bps: up_bps,
            download_bps: down_bps,
            flow_bps,
            latency: lat,
            added_latency_ms: None,
            loaded_p50_ms: None,
            loaded_from_s: None,
            witness_latency: spec.witness.then(|| stats(&ph.witness_probes)),
            witness_added_latency_ms: None,
            owd_up_p50_ms: Some(r3(pct(&owd_u, 0.5))),
            owd_up_p99_ms: Some(r3(pct(&owd_u, 0.99))),
            owd_down_p50_ms: Some(r3(pct(&owd_d, 0.5))),
            owd_down_p99_ms: Some(r3(pct(&owd_d, 0.99))),
            responsiveness_ms: Some(r3(worst_rr)),
            responsiveness_hz: Some(r3(1000.0 / worst_rr)),
            smoothness_ms: loaded.then_some(r3(worst_gap)),
            smoothness_hz: loaded.then_some(r3(1000.0 / worst_gap)),
            rpm: Some(r3(60000.0 / lat.avg_ms)),
            rr_rpm: Some(r3(60000.0 / worst_rr * 2.0)),
            rr_added_latency_ms: None,
            udp_over_rr_ms: None,
            upload_gb_per_month: r3(up_bps / 8.0 * 86400.0 * 30.0 / 1e9),
            download_gb_per_month: r3(down_bps / 8.0 * 86400.0 * 30.0 / 1e9),
            retransmits: if loaded { 9 * (ups + downs) as u64 } else { 0 },
            queues: vec![],
            still_rising: false,
            settled_after_s: None,
            settled_p50_ms: None,
            page_lag_max_ms: None,
            page_delayed_probes: 0,
        };
        phases.push(ph);
        t = end + 100 * ms;
    }
    let idle = phases.remove(0);
    let idle_p50 = idle.summary.latency.p50_ms;
    let idle_w50 = idle.summary.witness_latency.map(|w| w.p50_ms);
    for p in &mut phases {
        // the synthetic phases are level from their first second on
        p.summary.loaded_p50_ms = Some(p.summary.latency.p50_ms);
        p.summary.loaded_from_s = Some(1.0);
        p.summary.added_latency_ms = Some(r3(p.summary.latency.p50_ms - idle_p50));
        if let (Some(w), Some(i)) = (p.summary.witness_latency, idle_w50) {
            p.summary.witness_added_latency_ms = Some(r3(w.p50_ms - i));
        }
    }
    let fold_min = |it: &mut dyn Iterator<Item = f64>| it.fold(None, |a: Option<f64>, b| Some(a.map_or(b, |a| a.min(b))));
    let headline = Headline {
        upload_capacity_bps: phases.iter().map(|p| p.summary.upload_bps).fold(0.0, f64::max),
        download_capacity_bps: phases.iter().map(|p| p.summary.download_bps).fold(0.0, f64::max),
        link_responsiveness_hz: fold_min(&mut phases.iter().filter_map(|p| p.summary.responsiveness_hz)),
        flow_smoothness_hz: fold_min(&mut phases.iter().filter_map(|p| p.summary.smoothness_hz)),
        idle_latency_ms: Some(idle_p50),
        loaded_latency_ms: Some(phases.iter().map(|p| p.summary.latency.p50_ms).fold(0.0, f64::max)),
        max_added_latency_ms: Some(phases.iter().filter_map(|p| p.summary.added_latency_ms).fold(f64::MIN, f64::max)),
        rpm: fold_min(&mut phases.iter().filter_map(|p| p.summary.rpm)),
        ..Headline::default()
    };
    let lab = spec.lab.then(|| LabInfo {
        backend: "kernel".into(),
        config: bloatlab_results::LabRecord {
            rate_up: "10mbit".into(),
            rate_down: "20mbit".into(),
            queue: "fifo:1000".into(),
            queue_spec: Some(bloatlab_results::QueueSpec::Fifo { packets: 1000 }),
            placement: "router".into(),
            ..Default::default()
        },
        kernel: "6.1.0-test".into(),
        qdiscs_available: vec!["pfifo".into(), "bfifo".into(), "htb".into(), "tbf".into()],
        qdiscs_missing: vec!["fq_codel".into(), "cake".into(), "netem".into()],
        offloads: "off".into(),
        hosts: vec![
            LabHost { role: "client".into(), netns: "blab-fx-client".into(), addresses: vec!["10.77.1.2".into()] },
            LabHost { role: "router".into(), netns: "blab-fx-router".into(), addresses: vec!["10.77.1.1".into(), "10.77.2.1".into()] },
            LabHost { role: "server".into(), netns: "blab-fx-server".into(), addresses: vec!["10.77.2.2".into()] },
        ],
        queues: vec![
            QueueSeries { role: "bottleneck-up".into(), location: "blab-fx-router/r-srv".into(), qdisc: "pfifo".into(), samples: queue_up },
            QueueSeries { role: "bottleneck-down".into(), location: "blab-fx-router/r-cli".into(), qdisc: "pfifo".into(), samples: queue_down },
        ],
        emulator: None,
        analytic_queue_delay_up_ms: Some(1211.2),
        analytic_queue_delay_down_ms: Some(605.6),
    });
    let mut r = TestResult {
        schema: SCHEMA_NAME.into(),
        schema_version: SCHEMA_VERSION,
        complete: true,
        incomplete_reason: None,
        metadata: Metadata {
            pings: vec![],
            server_rpm: None,
            user_agent: None,
            bloatlab_version: "0.1.0".into(),
            protocol_version: 1,
            start_time: "2026-11-22T06:00:00Z".into(),
            start_unix_ns: START_UNIX_NS,
            command: vec!["bloatlab".into(), "test".into(), "10.77.2.2".into(), "--json".into(), "r.json".into()],
            server_address: "10.77.2.2:9770".into(),
            client: HostInfo { hostname: "client".into(), kernel: "6.1.0-test".into(), os: "Linux x86_64".into(), bloatlab_version: "0.1.0".into(), default_cc: "cubic".into(), available_cc: vec!["reno".into(), "cubic".into(), "bbr".into()] },
            server: HostInfo { hostname: "server".into(), kernel: "6.1.0-test".into(), os: "Linux x86_64".into(), bloatlab_version: "0.1.0".into(), default_cc: "cubic".into(), available_cc: vec!["reno".into(), "cubic".into()] },
            cc: "cubic".into(),
            scenario_duration_s: spec.scen_s,
            until_settled_s: None,
            settle_rule: String::new(),
            latency_rule: String::new(),
            profile: None,
            idle_duration_s: spec.idle_s,
            probe_interval_ms: spec.probe_ms as f64,
            probe_size: 64,
            sample_interval_ms: spec.sample_ms as f64,
            trimming_rule: "steady part = from 1 s after the scenario start to its end".into(),
            clock_offset: ClockOffset { method: "minimum-RTT probe exchanges, offset at the midpoint, drift by linear fit".into(), offset_ns: 1_500_000, drift_ppm: 0.4, uncertainty_ns: 10_000_000, samples_used: 12 },
            scenario_definitions: defs,
            socket: SocketInfo { mss: 1448, sndbuf: 0, rcvbuf: 0, buffers_set: false, rx_copy: false },
            witness_address: spec.witness.then(|| "10.77.1.3:9770".to_string()),
            probe_timestamps: "kernel SO_TIMESTAMPNS receive stamps".into(),
        },
        idle: Some(idle),
        scenarios: phases,
        headline,
        lab,
        rpm: None,
        ramp: vec![],
        client: Default::default(),
        household: None,
        monitor: None,
    };
    // each phase's queue figures, as the lab records them
    if let Some(lab) = r.lab.clone() {
        bloatlab_metrics::queue::phase_queues(&mut r, &lab);
    }
    // and its grade, as the engine and the lab record it
    bloatlab_metrics::grade::record(&mut r);
    r
}

/// [`small`] with every section the report can show: pings, DSCP classes,
/// an IETF RPM result with its plot and notes, and one late probe (5 s)
/// that must not flatten the box plot.
#[allow(dead_code)] // each test binary uses its own part of this module
pub fn everything() -> TestResult {
    use bloatlab_results::{ClassProbes, ClassSummary, LatencyStats, PingInfo, PingSample, PingSeries, PingSummary, RpmInterval, RpmProbe, RpmResult, RpmStage};
    let mut r = small();
    let last = r.scenarios.len() - 1;
    if let Some(p) = r.scenarios[last].probes.iter_mut().find(|p| p.rtt_ns.is_some()) {
        p.rtt_ns = Some(5_000_000_000);
    }
    r.metadata.pings = vec![PingInfo { target: "icmp 10.0.0.1".into(), address: "10.0.0.1".into(), method: "raw ICMP socket".into(), interval_ms: 100.0 }];
    let lat = |p50: f64| LatencyStats { sent: 50, received: 49, lost: 1, loss_pct: 2.0, p50_ms: p50, p99_ms: p50 + 5.0, ..Default::default() };
    for p in r.idle.iter_mut().chain(r.scenarios.iter_mut()) {
        let samples: Vec<PingSample> = p.probes.iter().map(|x| PingSample { t_ns: x.t_ns + 5_000_000, rtt_ns: x.rtt_ns.map(|v| v * 9 / 10) }).collect();
        p.pings = vec![PingSeries { target: "icmp 10.0.0.1".into(), samples }];
        p.summary.pings = vec![PingSummary { target: "icmp 10.0.0.1".into(), latency: lat(40.0), added_latency_ms: Some(20.0) }];
        let marked: Vec<Probe> = p.probes.iter().map(|x| Probe { rtt_ns: x.rtt_ns.map(|v| v / 4), ..*x }).collect();
        p.class_probes = vec![ClassProbes { dscp: 0, probes: p.probes.clone() }, ClassProbes { dscp: 46, probes: marked }];
        p.summary.classes = vec![
            ClassSummary { dscp: 0, class: "BE".into(), download_flows: p.downloads, download_bps: p.summary.download_bps, latency: lat(80.0), added_latency_ms: Some(60.0), ..Default::default() },
            ClassSummary { dscp: 46, class: "EF".into(), upload_flows: p.uploads, upload_bps: p.summary.upload_bps, latency: lat(20.0), added_latency_ms: Some(2.25), ..Default::default() },
        ];
        for f in p.flows.iter_mut().filter(|f| f.direction == Direction::Up) {
            f.dscp = 46;
        }
    }
    let mut x = RpmResult::default();
    x.method.specification = "draft-ietf-ippm-responsiveness-08".into();
    x.method.mad = 4;
    x.server_address = "10.0.0.2:4043".into();
    x.http_version = "HTTP/2".into();
    for (d, rpm) in [(bloatlab_model::RpmDirection::Download, 1234.0), (bloatlab_model::RpmDirection::Upload, 987.0)] {
        let intervals = (1..=10).map(|i| RpmInterval { t_s: i as f64, goodput_bps: 9.4e6 + 1e5 * (i % 3) as f64, moving_average_bps: 9.4e6, connections: 4, rpm: Some(rpm) }).collect();
        let kinds = ["tcp_foreign", "tls_foreign", "http_foreign", "http_self"];
        let probes = (0..400).map(|i| RpmProbe { t_s: i as f64 * 0.025, kind: kinds[i % 4].into(), rtt_ms: 20.0 + (i % 37) as f64 * 3.0 }).collect();
        x.stages.push(RpmStage {
            direction: d,
            rpm: Some(rpm),
            confidence: "high".into(),
            goodput_bps: 9.4e6,
            connections: 4,
            duration_s: 10.0,
            tcp_foreign_ms: Some(20.0),
            tls_foreign_ms: Some(40.0),
            http_foreign_ms: Some(25.0),
            http_self_ms: Some(60.0),
            round_trip_ms: Some(60000.0 / rpm),
            intervals,
            probes,
            ..Default::default()
        });
    }
    r.rpm = Some(x);
    r
}
