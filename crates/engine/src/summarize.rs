//! Turn raw measurements into the result document: time bases, phases,
//! summaries (via bloatlab-metrics), headline numbers.
use bloatlab_model::TestConfig;
use crate::flow::{FlowSamples, RecvOutcome};
use crate::probe::{Exchange, RrRecord};
use bloatlab_metrics as m;
use bloatlab_results::{
    ClockOffset, Direction, Flow, GoodputSample, Headline, HostInfo, Metadata, Phase, PingInfo, PingSample, PingSeries,
    PingSummary, Probe, RrSample, SocketInfo, Summary, TcpInfoSample, TestResult, SCHEMA_NAME, SCHEMA_VERSION,
};
use bloatlab_wire::{FlowSpec, ServerFlowReport, PROTOCOL_VERSION};
use std::net::SocketAddr;

/// One phase as measured, before time-base conversion. Client times are Unix ns.
pub struct RawPhase {
    pub name: String,
    pub uploads: u32,
    pub downloads: u32,
    pub start_unix_ns: u64,
    pub end_unix_ns: u64,
    /// Client side: (spec, samples, receive outcome).
    pub flows: Vec<(FlowSpec, FlowSamples, RecvOutcome)>,
    /// What the server measured (server-clock Unix ns).
    pub server_flows: Vec<ServerFlowReport>,
    /// The household test's call and stream, when this was its phase.
    pub household: Option<RawHousehold>,
}

/// What the household test's applications recorded in their phase
/// (`bloatlab test --profile household`; the game is the phase's probes
/// and the bulk update its flows).
#[derive(Debug, Clone, Default)]
pub struct RawHousehold {
    pub plan: bloatlab_model::HouseholdPlan,
    /// Each call frame as one exchange: its first part sent, its last part
    /// back (unanswered when any part was lost).
    pub frames: Vec<Exchange>,
    pub segments: Vec<RawSegment>,
}

/// One stream segment's fetch, client-clock Unix ns.
#[derive(Debug, Clone, Copy, Default)]
pub struct RawSegment {
    pub requested: u64,
    pub first_byte: Option<u64>,
    pub done: Option<u64>,
    pub bytes: u64,
}

/// A call's part exchanges, `parts` per frame in turn, as one exchange per
/// frame: the first part's send, the last part's arrival and answer at the
/// server and back (a frame with any part unanswered is lost).
pub fn call_frames(parts: &[Exchange], per_frame: usize) -> Vec<Exchange> {
    parts
        .chunks(per_frame.max(1))
        .filter(|c| c.len() == per_frame.max(1))
        .map(|c| {
            let t1 = c[0].t1;
            if c.iter().all(|e| e.answered()) {
                Exchange { t1, t2: c.iter().map(|e| e.t2).max().unwrap_or(0), t3: c.iter().map(|e| e.t3).max().unwrap_or(0), t4: c.iter().map(|e| e.t4).max().unwrap_or(0) }
            } else {
                Exchange { t1, ..Default::default() }
            }
        })
        .collect()
}

impl RawPhase {
    pub fn idle(start: u64, end: u64) -> RawPhase {
        RawPhase {
            name: "idle".into(),
            uploads: 0,
            downloads: 0,
            start_unix_ns: start,
            end_unix_ns: end,
            flows: vec![],
            server_flows: vec![],
            household: None,
        }
    }
}

pub struct MetaIn<'a> {
    pub cfg: &'a TestConfig,
    pub addr: SocketAddr,
    pub start_unix_ns: u64,
    pub server: HostInfo,
    pub cc: String,
    pub socket: SocketInfo,
    pub witness: Option<String>,
    pub probe_timestamps: String,
    /// Pings to other hosts: each target as run and every ping.
    pub pings: Vec<(PingInfo, Vec<crate::ping::PingSample>)>,
    pub server_rpm: Option<bloatlab_model::RpmOffer>,
}

/// A ramp step's goodput in one direction, as the step ends: the sum of its
/// flows' steady-window goodput, each over its own samples' span (upload
/// flows are measured on the server's clock, which needs no offset for a
/// rate). The ramp's decision input; the final summary recomputes it.
pub fn step_goodput_bps(p: &RawPhase, up: bool) -> f64 {
    let steady = |g: &[(u64, u64)], start: u64, end: u64| m::steady_goodput_bps(g, start, end, m::DEFAULT_TRIM_START, m::DEFAULT_TRIM_END);
    if up {
        p.server_flows
            .iter()
            .filter(|f| f.direction == Direction::Up && f.goodput.len() >= 2)
            .map(|f| steady(&f.goodput, f.goodput[0].0, f.goodput[f.goodput.len() - 1].0))
            .sum()
    } else {
        p.flows
            .iter()
            .filter(|(spec, _, _)| spec.direction == Direction::Down)
            .map(|(_, s, _)| steady(&s.goodput, p.start_unix_ns, p.end_unix_ns))
            .sum()
    }
}

fn rel(t: u64, start: u64) -> u64 {
    t.saturating_sub(start)
}

/// Server clock -> client clock, using the offset estimate (identity without one).
fn to_client(t_server: u64, est: Option<&m::OffsetEstimate>) -> u64 {
    match est {
        // offset(t) is a function of client time; one fixed-point step is plenty (drift is ppm).
        Some(e) => {
            let guess = t_server as i64 - e.offset_at(t_server as i64).round() as i64;
            (t_server as i64 - e.offset_at(guess).round() as i64).max(0) as u64
        }
        None => t_server,
    }
}

fn probes_in(ex: &[Exchange], start: u64, end: u64, t0: u64, est: Option<&m::OffsetEstimate>) -> Vec<Probe> {
    ex.iter()
        .enumerate()
        .filter(|(_, e)| e.t1 >= start && e.t1 < end)
        .map(|(i, e)| {
            // the server's times: of every answered probe, and of one whose
            // answer was lost on the way back where the server says it got it
            let reached = e.t2 != 0;
            let owd = e.answered().then_some(()).and(est);
            Probe {
                seq: i as u32,
                t_ns: rel(e.t1, t0),
                rtt_ns: e.rtt_ns(),
                server_rx_unix_ns: reached.then_some(e.t2),
                owd_up_ns: reached.then_some(()).and(est).map(|o| o.owd_up_ns(e.t1 as i64, e.t2 as i64)),
                owd_down_ns: owd.map(|o| o.owd_down_ns(e.t3 as i64, e.t4 as i64)),
            }
        })
        .collect()
}

/// Exchanges of another stream than the probes (the household test's call
/// frames) sent within [start, end) on the test clock of `r`, with one-way
/// delays from the clock offset `r` records (the probes' estimate, not a
/// second one).
pub fn exchanges_on_clock(ex: &[Exchange], start: u64, end: u64, r: &TestResult) -> Vec<Probe> {
    let co = &r.metadata.clock_offset;
    let t0 = r.metadata.start_unix_ns;
    let est = (co.samples_used > 0).then(|| m::OffsetEstimate {
        offset_at_t0_ns: co.offset_ns as f64,
        t0_ns: t0 as i64,
        drift_ppm: co.drift_ppm,
        min_delay_ns: co.uncertainty_ns * 2,
        samples_used: co.samples_used,
        windows: 0,
        windows_used: 0,
        method: co.method.clone(),
    });
    probes_in(ex, start, end, t0, est.as_ref())
}

fn witness_in(ex: &[Exchange], start: u64, end: u64, t0: u64) -> Vec<Probe> {
    ex.iter()
        .enumerate()
        .filter(|(_, e)| e.t1 >= start && e.t1 < end)
        .map(|(i, e)| Probe {
            seq: i as u32,
            t_ns: rel(e.t1, t0),
            rtt_ns: e.rtt_ns(),
            server_rx_unix_ns: None,
            owd_up_ns: None,
            owd_down_ns: None,
        })
        .collect()
}

/// Each target's pings sent within [start, end).
fn pings_in(pings: &[(PingInfo, Vec<crate::ping::PingSample>)], start: u64, end: u64, t0: u64) -> Vec<PingSeries> {
    pings
        .iter()
        .map(|(info, v)| PingSeries {
            target: info.target.clone(),
            samples: v.iter().filter(|x| x.0 >= start && x.0 < end).map(|x| PingSample { t_ns: rel(x.0, t0), rtt_ns: x.1 }).collect(),
        })
        .collect()
}

/// Each ping target's latency in a phase, and what the load added to it
/// (against the same target's idle p50).
pub fn ping_summaries(p: &Phase, idle: Option<&Phase>) -> Vec<PingSummary> {
    p.pings
        .iter()
        .map(|ps| {
            let rtts: Vec<Option<u64>> = ps.samples.iter().map(|x| x.rtt_ns).collect();
            let latency = m::latency_stats_ns(&rtts);
            let idle_p50 = idle
                .and_then(|i| i.summary.pings.iter().find(|q| q.target == ps.target))
                .filter(|q| q.latency.received > 0)
                .map(|q| q.latency.p50_ms);
            // the loaded part's median, as the phase's own probes (model::LOADED_RULE)
            let from = p.start_ns + p.summary.loaded_from_s.map_or(0, |s| (s * 1e9) as u64);
            let loaded: Vec<f64> = ps.samples.iter().filter_map(|x| x.rtt_ns.filter(|r| x.t_ns + r >= from)).map(|r| r as f64 / 1e6).collect();
            let added = if p.name == "idle" || latency.received == 0 { None } else { m::added_latency_ms(pct(&loaded, 50.0).or(Some(latency.p50_ms)), idle_p50) };
            PingSummary { target: ps.target.clone(), latency, added_latency_ms: added }
        })
        .collect()
}

fn pct(v: &[f64], p: f64) -> Option<f64> {
    m::percentile(v, p)
}

/// What the settle rule reads of a phase's probes: (answer arrival ns from
/// `start_ns`, round trip ns) of the answered ones.
pub fn settle_samples(probes: &[Probe], start_ns: u64) -> Vec<(u64, u64)> {
    probes.iter().filter_map(|x| x.rtt_ns.map(|r| ((x.t_ns + r).saturating_sub(start_ns), r))).collect()
}

/// The median round trip, ms, of `probes` answered `from_ns` or more after
/// `start_ns` (None: none was).
fn loaded_p50_ms(probes: &[Probe], start_ns: u64, from_ns: u64) -> Option<f64> {
    let v: Vec<f64> = settle_samples(probes, start_ns).into_iter().filter(|&(at, _)| at >= from_ns).map(|(_, r)| r as f64 / 1e6).collect();
    pct(&v, 50.0)
}

/// The fewest answered request/response exchanges a phase's
/// `rr_added_latency_ms` rests on, in the phase's loaded part and in idle.
pub const RR_ADDED_MIN_ANSWERS: usize = 20;

/// The median round trip, ms, of the request/response exchanges answered
/// `from_ns` or more after `start_ns`, where at least
/// [`RR_ADDED_MIN_ANSWERS`] were.
pub fn rr_p50_ms(rr: &[RrSample], start_ns: u64, from_ns: u64) -> Option<f64> {
    let v: Vec<f64> = rr.iter().filter(|r| r.completed && (r.t_ns + r.rtt_ns).saturating_sub(start_ns) >= from_ns).map(|r| r.rtt_ns as f64 / 1e6).collect();
    if v.len() < RR_ADDED_MIN_ANSWERS {
        return None;
    }
    pct(&v, 50.0)
}

/// Summary of one phase (pure: everything comes from the phase's samples),
/// against idle's median round trips: the UDP probes', the witness's and
/// the request/response exchanges'.
pub fn summarize_phase(p: &Phase, idle_p50_ms: Option<f64>, idle_witness_p50_ms: Option<f64>, idle_rr_p50_ms: Option<f64>) -> Summary {
    let mut s = Summary::default();
    for f in &p.flows {
        let samples: Vec<(u64, u64)> = f.goodput.iter().map(|g| (g.t_ns, g.bytes)).collect();
        let bps = m::steady_goodput_bps(&samples, p.start_ns, p.end_ns, m::DEFAULT_TRIM_START, m::DEFAULT_TRIM_END);
        s.flow_bps.push(bps);
        match f.direction {
            Direction::Up => s.upload_bps += bps,
            Direction::Down => s.download_bps += bps,
        }
        if let (Some(a), Some(b)) = (f.tcp_info.first(), f.tcp_info.last()) {
            s.retransmits += b.total_retrans.saturating_sub(a.total_retrans) as u64;
        }
    }
    let (up, down) = (s.upload_bps, s.download_bps);
    s.udp = m::udp::direction_summaries(&p.flows, |d| if d == Direction::Up { up } else { down });
    let rtts: Vec<Option<u64>> = p.probes.iter().map(|x| x.rtt_ns).collect();
    s.latency = m::latency_stats_ns(&rtts);
    let received = s.latency.received > 0;
    // the loaded part: probes answered from `loaded_from` (ns from the
    // phase's start) on, the ramp before it left out (model::LOADED_RULE)
    let mut loaded_from = 0u64;
    if p.name != "idle" {
        let rule = &bloatlab_model::SETTLE_RULE;
        let st = m::settle::settle(&settle_samples(&p.probes, p.start_ns), p.end_ns.saturating_sub(p.start_ns), rule);
        (s.still_rising, s.settled_after_s, s.settled_p50_ms) = (st.still_rising, st.settled_after_s, st.settled_level_ms);
        let k = m::settle::loaded_from(&st.window_p50_ms, idle_p50_ms, &bloatlab_model::LOADED_RULE);
        loaded_from = k as u64 * rule.window.as_nanos() as u64;
        if received {
            s.loaded_from_s = Some(loaded_from as f64 / 1e9);
            s.loaded_p50_ms = loaded_p50_ms(&p.probes, p.start_ns, loaded_from).or(Some(s.latency.p50_ms));
            s.added_latency_ms = m::added_latency_ms(s.loaded_p50_ms, idle_p50_ms);
        }
        s.rr_added_latency_ms = m::added_latency_ms(rr_p50_ms(&p.rr, p.start_ns, loaded_from), idle_rr_p50_ms);
        s.udp_over_rr_ms = s.added_latency_ms.zip(s.rr_added_latency_ms).map(|(udp, rr)| udp - rr);
    }
    if !p.witness_probes.is_empty() {
        let w: Vec<Option<u64>> = p.witness_probes.iter().map(|x| x.rtt_ns).collect();
        let ws = m::latency_stats_ns(&w);
        if p.name != "idle" && ws.received > 0 {
            let loaded = loaded_p50_ms(&p.witness_probes, p.start_ns, loaded_from).unwrap_or(ws.p50_ms);
            s.witness_added_latency_ms = m::added_latency_ms(Some(loaded), idle_witness_p50_ms);
        }
        s.witness_latency = Some(ws);
    }
    let up: Vec<f64> = p.probes.iter().filter_map(|x| x.owd_up_ns).map(|v| v as f64 / 1e6).collect();
    let down: Vec<f64> = p.probes.iter().filter_map(|x| x.owd_down_ns).map(|v| v as f64 / 1e6).collect();
    s.owd_up_p50_ms = pct(&up, 50.0);
    s.owd_up_p99_ms = pct(&up, 99.0);
    s.owd_down_p50_ms = pct(&down, 50.0);
    s.owd_down_p99_ms = pct(&down, 99.0);
    let rr: Vec<(u64, bool)> = p.rr.iter().map(|r| (r.rtt_ns, r.completed)).collect();
    if let Some((ms, hz)) = m::responsiveness(&rr) {
        s.responsiveness_ms = Some(ms);
        s.responsiveness_hz = Some(hz);
    }
    // A flow that received nothing in the whole phase was stalled for all of it.
    let phase_len = p.end_ns.saturating_sub(p.start_ns);
    if let Some(worst) = p.flows.iter().map(|f| if f.bytes == 0 { phase_len } else { f.max_gap_ns }).max() {
        if worst > 0 {
            let (ms, hz) = m::smoothness(worst);
            s.smoothness_ms = Some(ms);
            s.smoothness_hz = hz;
        }
    }
    // UDP-probe RPM: every probe sent, a lost one counted at the loss threshold.
    s.rpm = m::rpm_from_probes_ns(&rtts);
    let rr_all: Vec<Option<u64>> = p.rr.iter().map(|r| r.completed.then_some(r.rtt_ns)).collect();
    s.rr_rpm = m::rpm_from_probes_ns(&rr_all);
    s.upload_gb_per_month = m::gb_per_month(s.upload_bps);
    s.download_gb_per_month = m::gb_per_month(s.download_bps);
    s
}

/// Headline numbers over the scenarios (seed 003's four, plus latency).
pub fn headline(idle: Option<&Phase>, scenarios: &[Phase]) -> Headline {
    let minf = |it: &mut dyn Iterator<Item = f64>| it.fold(None, |a: Option<f64>, v| Some(a.map_or(v, |a| a.min(v))));
    let maxf = |it: &mut dyn Iterator<Item = f64>| it.fold(None, |a: Option<f64>, v| Some(a.map_or(v, |a| a.max(v))));
    Headline {
        upload_capacity_bps: maxf(&mut scenarios.iter().map(|p| p.summary.upload_bps)).unwrap_or(0.0),
        download_capacity_bps: maxf(&mut scenarios.iter().map(|p| p.summary.download_bps)).unwrap_or(0.0),
        link_responsiveness_hz: minf(&mut scenarios.iter().filter_map(|p| p.summary.responsiveness_hz)),
        flow_smoothness_hz: minf(&mut scenarios.iter().filter_map(|p| p.summary.smoothness_hz)),
        idle_latency_ms: idle.filter(|p| p.summary.latency.received > 0).map(|p| p.summary.latency.p50_ms),
        loaded_latency_ms: maxf(&mut scenarios.iter().filter(|p| p.summary.latency.received > 0).map(|p| p.summary.loaded_p50_ms.unwrap_or(p.summary.latency.p50_ms))),
        max_added_latency_ms: maxf(&mut scenarios.iter().filter_map(|p| p.summary.added_latency_ms)),
        rpm: minf(&mut scenarios.iter().filter_map(|p| p.summary.rpm)),
        // graded once the result is whole (build_result, a lab's run);
        // loss, bytes and the loaded directions over the whole result
        // (finish_headline)
        ..Headline::default()
    }
}

/// Every probe exchange of a test, by stream.
pub struct Exchanges<'a> {
    /// UDP probes to the server.
    pub server: &'a [Exchange],
    pub witness: &'a [Exchange],
    /// Per DSCP class: its marked UDP probes to the server.
    pub classes: &'a [(u8, Vec<Exchange>)],
    pub rr: &'a [RrRecord],
}

/// The whole result of a test from what its phases gathered: the clock
/// offset from the probe exchanges, each phase's samples on the test clock,
/// every phase's summary (against the idle baseline), the headline and its
/// grade, and the metadata.
pub fn build_result(mi: &MetaIn, raw: &[RawPhase], ex: &Exchanges, complete: bool, reason: Option<String>) -> TestResult {
    let t0 = mi.start_unix_ns;
    let (est, clock_offset) = clock_offset(ex.server, t0);
    let phases: Vec<Phase> = raw.iter().map(|r| phase_of(r, mi, ex, est.as_ref(), t0)).collect();
    let (idle, scenarios) = summarize_phases(phases);
    let mut r = TestResult {
        schema: SCHEMA_NAME.into(),
        schema_version: SCHEMA_VERSION,
        complete,
        incomplete_reason: reason,
        metadata: metadata(mi, clock_offset),
        headline: headline(idle.as_ref(), &scenarios),
        idle,
        scenarios,
        lab: None,
        rpm: None,
        ramp: vec![],
        client: Default::default(),
        household: None,
        monitor: None,
    };
    r.household = raw.iter().find_map(|p| p.household.as_ref().map(|h| household(p, h, &r)));
    finish_headline(&mut r);
    m::grade::record(&mut r);
    r
}

/// The headline's figures over the whole result, each computed here once
/// (the history's rows are their projection, `results::history::RunRow`):
/// a latency-only round's idle latency from its pings, the probes lost,
/// the bytes moved both ways, which directions were loaded. Call it again
/// after adding an RPM run to `r`.
pub fn finish_headline(r: &mut TestResult) {
    // a latency-only round has no UDP probes: its pings' median is the
    // line's idle latency
    if r.headline.idle_latency_ms.is_none() {
        r.headline.idle_latency_ms = r
            .idle
            .as_ref()
            .filter(|i| i.summary.latency.received == 0)
            .and_then(|i| i.summary.pings.first())
            .filter(|p| p.latency.received > 0)
            .map(|p| p.latency.p50_ms);
    }
    let round = r.idle.as_ref().filter(|i| i.summary.latency.sent == 0).and_then(|i| i.summary.pings.first()).filter(|p| p.latency.sent > 0);
    r.headline.loss_pct = match round {
        Some(p) => Some(p.latency.loss_pct),
        // a latency-only round of a server's UDP probes
        None if r.scenarios.is_empty() => r.idle.as_ref().filter(|i| i.summary.latency.sent > 0).map(|i| i.summary.latency.loss_pct),
        None => r.scenarios.iter().filter(|p| p.summary.latency.sent > 0).map(|p| p.summary.latency.loss_pct).reduce(f64::max),
    };
    r.headline.bytes_moved = m::bytes_moved(r, Direction::Down) + m::bytes_moved(r, Direction::Up);
    // loaded when a scenario (or, without scenarios, an RPM stage) loaded that direction
    use bloatlab_model::RpmDirection as D;
    let stage = |d: D| r.scenarios.is_empty() && r.rpm.as_ref().is_some_and(|x| x.stages.iter().any(|s| s.direction == d));
    r.headline.download_measured = r.scenarios.iter().any(|p| p.downloads > 0) || stage(D::Download);
    r.headline.upload_measured = r.scenarios.iter().any(|p| p.uploads > 0) || stage(D::Upload);
}

/// The household test's record, on the test clock of `r`.
fn household(p: &RawPhase, h: &RawHousehold, r: &TestResult) -> bloatlab_results::Household {
    let t0 = r.metadata.start_unix_ns;
    let since = |a: u64, b: Option<u64>| b.map(|b| b.saturating_sub(a));
    bloatlab_results::Household {
        phase: p.name.clone(),
        game_interval_ms: r.metadata.probe_interval_ms,
        call: bloatlab_results::CallRecord {
            frames_per_second: h.plan.call_fps,
            frame_bytes: h.plan.call_frame_bytes,
            frames: exchanges_on_clock(&h.frames, p.start_unix_ns, p.end_unix_ns, r),
            // a lost frame's parts never came back: which way they were lost is not known
            lost_way_known: false,
        },
        stream: bloatlab_results::StreamRecord {
            segment_ms: h.plan.stream_segment.as_secs_f64() * 1e3,
            segment_bytes: h.plan.stream_segment_bytes,
            segments: h
                .segments
                .iter()
                .map(|g| bloatlab_results::Segment { t_ns: rel(g.requested, t0), first_byte_ns: since(g.requested, g.first_byte), done_ns: since(g.requested, g.done), bytes: g.bytes })
                .collect(),
        },
    }
}

/// The server's clock against the client's, from the answered probes.
fn clock_offset(ex: &[Exchange], t0: u64) -> (Option<m::OffsetEstimate>, ClockOffset) {
    let ntp: Vec<m::Exchange> = ex
        .iter()
        .filter(|e| e.answered())
        .map(|e| (e.t1 as i64, e.t2 as i64, e.t3 as i64, e.t4 as i64))
        .collect();
    let est = m::estimate_clock_offset(&ntp);
    let clock_offset = match &est {
        Some(e) => e.to_clock_offset(t0 as i64),
        None => ClockOffset {
            method: "no probe was answered: no clock offset estimate, no one-way delays".into(),
            ..Default::default()
        },
    };
    (est, clock_offset)
}

/// One phase's samples on the test clock (its summary comes later, with the idle baseline's).
fn phase_of(r: &RawPhase, mi: &MetaIn, ex: &Exchanges, est: Option<&m::OffsetEstimate>, t0: u64) -> Phase {
    let (start, end) = (r.start_unix_ns, r.end_unix_ns);
    Phase {
        name: r.name.clone(),
        uploads: r.uploads,
        downloads: r.downloads,
        start_ns: rel(start, t0),
        end_ns: rel(end, t0),
        flows: r.flows.iter().map(|(spec, smp, out)| flow_of(spec, smp, out, r.server_flows.iter().find(|f| f.id == spec.id), est, t0)).collect(),
        probes: probes_in(ex.server, start, end, t0, est),
        rr: ex
            .rr
            .iter()
            .enumerate()
            .filter(|(_, x)| x.0 >= start && x.0 < end)
            .map(|(i, x)| RrSample { seq: i as u32, t_ns: rel(x.0, t0), rtt_ns: x.1, completed: x.2 })
            .collect(),
        witness_probes: witness_in(ex.witness, start, end, t0),
        pings: pings_in(&mi.pings, start, end, t0),
        class_probes: ex.classes.iter().map(|(d, cx)| bloatlab_results::ClassProbes { dscp: *d, probes: probes_in(cx, start, end, t0, est) }).collect(),
        summary: Summary::default(),
    }
}

/// One flow from both ends' view: its receiver's goodput and gaps (the
/// server's for an upload, on the client's clock), its sender's TCP_INFO.
fn flow_of(spec: &FlowSpec, smp: &FlowSamples, out: &RecvOutcome, srv: Option<&ServerFlowReport>, est: Option<&m::OffsetEstimate>, t0: u64) -> Flow {
    let conv = |t: u64| rel(to_client(t, est), t0);
    let own_info = || smp.tcp_info.iter().map(|i| TcpInfoSample { t_ns: rel(i.t_ns, t0), ..*i }).collect();
    let (goodput, bytes, gap, gap_at, tcp_info): (Vec<GoodputSample>, u64, u64, u64, Vec<TcpInfoSample>) = match spec.direction {
        Direction::Down => (
            smp.goodput.iter().map(|&(t, b)| GoodputSample { t_ns: rel(t, t0), bytes: b }).collect(),
            out.bytes,
            out.max_gap_ns,
            rel(out.max_gap_at_ns, t0),
            srv.map(|s| s.tcp_info.iter().map(|i| TcpInfoSample { t_ns: conv(i.t_ns), ..*i }).collect()).unwrap_or_default(),
        ),
        Direction::Up => match srv {
            Some(s) => (
                s.goodput.iter().map(|&(t, b)| GoodputSample { t_ns: conv(t), bytes: b }).collect(),
                s.bytes,
                s.max_gap_ns,
                conv(s.max_gap_at_unix_ns),
                own_info(),
            ),
            None => (vec![], 0, 0, 0, own_info()),
        },
    };
    // A UDP flow: the receiver's statistics. An upload's sender (this
    // client) stopped at the phase end, so its count completes them; a
    // download's sender (the server) sends until it hears the stop,
    // after this receiver stopped, so the receiver's own view (highest
    // sequence + 1) counts its losses.
    let udp = match spec.direction {
        Direction::Up => match (srv.and_then(|s| s.udp), out.udp) {
            (Some(r), Some(s)) => Some(m::udp::with_sent(r, s.sent)),
            (r, s) => r.or(s),
        },
        Direction::Down => out.udp,
    };
    Flow { id: spec.id, direction: spec.direction, goodput, tcp_info, bytes, max_gap_ns: gap, max_gap_at_ns: gap_at, dscp: spec.dscp, udp }
}

/// Every phase's summary: the idle baseline first, then each scenario
/// against it. Returns (idle, scenarios).
fn summarize_phases(phases: Vec<Phase>) -> (Option<Phase>, Vec<Phase>) {
    let (idle, scenarios): (Vec<Phase>, Vec<Phase>) = phases.into_iter().partition(|p| p.name == "idle");
    let mut idle = idle.into_iter().next();
    if let Some(i) = idle.as_mut() {
        i.summary = summarize_phase(i, None, None, None);
        i.summary.pings = ping_summaries(i, None);
    }
    let idle_p50 = idle.as_ref().filter(|i| i.summary.latency.received > 0).map(|i| i.summary.latency.p50_ms);
    let idle_w = idle
        .as_ref()
        .and_then(|i| i.summary.witness_latency)
        .filter(|w| w.received > 0)
        .map(|w| w.p50_ms);
    let idle_rr = idle.as_ref().and_then(|i| rr_p50_ms(&i.rr, i.start_ns, 0));
    let name = |d: u8| bloatlab_model::Dscp(d).to_string();
    if let Some(i) = idle.as_mut() {
        i.summary.classes = m::classes::class_summaries(i, &i.summary.flow_bps, &|_| None, &name);
    }
    let idle_class = |d: u8| {
        let c = idle.as_ref()?.summary.classes.iter().find(|c| c.dscp == d)?;
        (c.latency.received > 0).then_some(c.latency.p50_ms)
    };
    let scenarios = scenarios
        .into_iter()
        .map(|mut p| {
            p.summary = summarize_phase(&p, idle_p50, idle_w, idle_rr);
            p.summary.pings = ping_summaries(&p, idle.as_ref());
            p.summary.classes = m::classes::class_summaries(&p, &p.summary.flow_bps, &idle_class, &name);
            p
        })
        .collect();
    (idle, scenarios)
}

/// The conditions of the test: versions, hosts, configuration, clocks.
fn metadata(mi: &MetaIn, clock_offset: ClockOffset) -> Metadata {
    let cfg = mi.cfg;
    let t0 = mi.start_unix_ns;
    Metadata {
        bloatlab_version: env!("CARGO_PKG_VERSION").into(),
        protocol_version: PROTOCOL_VERSION,
        start_time: bloatlab_model::units::rfc3339(t0),
        start_unix_ns: t0,
        command: cfg.command.clone(),
        server_address: mi.addr.to_string(),
        client: crate::sys::host_info(),
        server: mi.server.clone(),
        cc: mi.cc.clone(),
        scenario_duration_s: cfg.duration.as_secs_f64(),
        until_settled_s: cfg.phase_length().adaptive().then(|| cfg.phase_length().cap.as_secs_f64()),
        settle_rule: if cfg.phase_length().adaptive() {
            format!("{}; {}", bloatlab_model::SETTLE_RULE.describe(), bloatlab_model::DRAIN_RULE.describe())
        } else {
            bloatlab_model::SETTLE_RULE.describe()
        },
        latency_rule: bloatlab_model::LOADED_RULE.describe(),
        profile: cfg.profile.map(|p| p.name().to_string()),
        idle_duration_s: cfg.idle.as_secs_f64(),
        probe_interval_ms: cfg.probe_interval.as_secs_f64() * 1e3,
        probe_size: cfg.probe_size as u32,
        sample_interval_ms: cfg.sample_interval.as_secs_f64() * 1e3,
        trimming_rule: m::TRIMMING_RULE.into(),
        clock_offset,
        scenario_definitions: cfg.scenarios.iter().map(|s| s.name()).collect(),
        socket: mi.socket.clone(),
        witness_address: mi.witness.clone(),
        probe_timestamps: mi.probe_timestamps.clone(),
        pings: mi.pings.iter().map(|(i, _)| i.clone()).collect(),
        server_rpm: mi.server_rpm.clone(),
        user_agent: None,
    }
}

/// One line for logs: "up 9.41 Mbit/s, down 0.00 Mbit/s, idle 0.1 ms, loaded 1210.3 ms, ...".
pub fn one_line(r: &TestResult) -> String {
    let h = &r.headline;
    use bloatlab_model::fmt;
    let f = |v: Option<f64>, unit: &str| v.map(|v| format!("{} {unit}", fmt::ms(v))).unwrap_or_else(|| "n/a".into());
    format!(
        "up {}, down {}, idle rtt {}, loaded rtt {}, responsiveness {}, smoothness {}",
        fmt::rate(h.upload_capacity_bps),
        fmt::rate(h.download_capacity_bps),
        f(h.idle_latency_ms, "ms"),
        f(h.loaded_latency_ms, "ms"),
        f(h.link_responsiveness_hz, "Hz"),
        f(h.flow_smoothness_hz, "Hz"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use bloatlab_results::LatencyStats;

    fn phase_with(name: &str, rtts_ms: &[Option<f64>]) -> Phase {
        Phase {
            name: name.into(),
            start_ns: 0,
            end_ns: 1_000_000_000,
            probes: rtts_ms
                .iter()
                .enumerate()
                .map(|(i, r)| Probe {
                    seq: i as u32,
                    t_ns: i as u64 * 10_000_000,
                    rtt_ns: r.map(|v| (v * 1e6) as u64),
                    server_rx_unix_ns: None,
                    owd_up_ns: None,
                    owd_down_ns: None,
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn added_latency_and_loss_are_counted() {
        let idle = phase_with("idle", &[Some(1.0), Some(2.0), Some(3.0)]);
        let s = summarize_phase(&idle, None, None, None);
        assert_eq!(s.latency.p50_ms, 2.0);
        assert_eq!(s.added_latency_ms, None);
        let loaded = phase_with("1u0d", &[Some(100.0), None, Some(102.0), Some(104.0)]);
        let s2 = summarize_phase(&loaded, Some(2.0), None, None);
        // received 100, 102, 104: p50 = 102, added = 100; 1 of 4 lost = 25%.
        assert_eq!(s2.added_latency_ms, Some(100.0));
        assert_eq!((s2.latency.sent, s2.latency.lost), (4, 1));
        assert!((s2.latency.loss_pct - 25.0).abs() < 1e-9);
        // UDP RPM of 100/102/104 ms and one lost probe counted as 3000 ms:
        // n=4 keeps all 4 (floor(4*0.05)=0 dropped); mean 826.5 -> 60000/826.5.
        assert!((s2.rpm.unwrap() - 60000.0 / 826.5).abs() < 1e-6);
    }

    #[test]
    fn request_response_added_latency_and_the_udp_probes_excess_over_it() {
        let rr = |ms: f64, n: usize| -> Vec<bloatlab_results::RrSample> {
            (0..n).map(|i| bloatlab_results::RrSample { seq: i as u32, t_ns: i as u64 * 10_000_000, rtt_ns: (ms * 1e6) as u64, completed: true }).collect()
        };
        // a browser's: UDP probes +6 ms (its threads' delay in them), its
        // network-timed HTTP probes +1.5 ms over their idle 10 ms
        let mut loaded = phase_with("3u3d", &[Some(8.0); 30]);
        loaded.rr = rr(11.5, 30);
        let s = summarize_phase(&loaded, Some(2.0), None, Some(10.0));
        assert_eq!((s.added_latency_ms, s.rr_added_latency_ms, s.udp_over_rr_ms), (Some(6.0), Some(1.5), Some(4.5)));
        // fewer than RR_ADDED_MIN_ANSWERS exchanges: neither figure
        loaded.rr = rr(11.5, RR_ADDED_MIN_ANSWERS - 1);
        let s = summarize_phase(&loaded, Some(2.0), None, Some(10.0));
        assert_eq!((s.rr_added_latency_ms, s.udp_over_rr_ms), (None, None));
    }

    #[test]
    fn headline_takes_best_capacity_and_worst_responsiveness() {
        let mut a = Phase { name: "1u0d".into(), ..Default::default() };
        a.summary = Summary { upload_bps: 9e6, responsiveness_hz: Some(5.0), smoothness_hz: Some(20.0), ..Default::default() };
        let mut b = Phase { name: "0u1d".into(), ..Default::default() };
        b.summary = Summary {
            download_bps: 50e6,
            upload_bps: 1e6,
            responsiveness_hz: Some(2.0),
            smoothness_hz: Some(30.0),
            latency: LatencyStats { received: 1, p50_ms: 40.0, ..Default::default() },
            ..Default::default()
        };
        let h = headline(None, &[a, b]);
        assert_eq!(h.upload_capacity_bps, 9e6);
        assert_eq!(h.download_capacity_bps, 50e6);
        assert_eq!(h.link_responsiveness_hz, Some(2.0));
        assert_eq!(h.flow_smoothness_hz, Some(20.0));
        assert_eq!(h.loaded_latency_ms, Some(40.0));
    }

    #[test]
    fn server_times_convert_with_offset() {
        let est = m::OffsetEstimate {
            offset_at_t0_ns: 5_000_000.0,
            t0_ns: 0,
            drift_ppm: 0.0,
            min_delay_ns: 0,
            samples_used: 1,
            windows: 1,
            windows_used: 1,
            method: String::new(),
        };
        assert_eq!(to_client(1_005_000_000, Some(&est)), 1_000_000_000);
        assert_eq!(to_client(7, None), 7);
    }
}
