//! The result of a browser test: what the page measured (its phases, the
//! bytes its download streams read, the send and answer times of its
//! WebSocket probes) joined with what the server measured (the probes'
//! arrival and answer times, upload bytes, TCP_INFO of the load
//! connections), built by the same code as `bloatlab test`'s result
//! (`engine::summarize::build_result`): one schema, one set of numbers.
use crate::session::Session;
use bloatlab_engine::flow::{FlowSamples, RecvOutcome};
use bloatlab_engine::probe::Exchange;
use bloatlab_engine::summarize::{self, build_result, Exchanges, MetaIn, RawPhase};
use bloatlab_model::HOUSEHOLD_PHASE;
use bloatlab_model::Scenario;
use bloatlab_results::{CallRecord, ClientKind, Direction, HostInfo, Household, Segment, SocketInfo, StreamRecord, TestResult};
use bloatlab_wire::{FlowSpec, ServerFlowReport};
use serde::Deserialize;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;

/// Largest report a page may post, bytes.
pub const MAX_REPORT_BYTES: usize = 4 << 20;

/// What the page measured. Times are Unix milliseconds on the browser's
/// clock (`performance.timeOrigin + performance.now()`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PageReport {
    pub start_ms: f64,
    pub phases: Vec<PagePhase>,
    pub flows: Vec<PageFlow>,
    /// `[seq, sent, answered or null]` per WebRTC (UDP) probe; empty when
    /// the browser could not open the channel (`rtc_error` says why).
    pub rtc_probes: Vec<(u32, f64, Option<f64>)>,
    #[serde(default)]
    pub rtc_error: Option<String>,
    /// `[seq, sent, answered or null]` per WebSocket (TCP) probe.
    pub ws_probes: Vec<(u32, f64, Option<f64>)>,
    pub complete: bool,
    #[serde(default)]
    pub incomplete_reason: Option<String>,
    /// The household test's call: `[seq, sent, back or null]` per frame.
    #[serde(default)]
    pub call_frames: Vec<(u32, f64, Option<f64>)>,
    /// The household test's stream segments.
    #[serde(default)]
    pub segments: Vec<PageSegment>,
}

/// One stream segment the page fetched (household test).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PageSegment {
    pub requested_ms: f64,
    /// The first and last byte's arrival (null: not yet when the phase ended).
    pub first_byte_ms: Option<f64>,
    pub done_ms: Option<f64>,
    pub bytes: u64,
}

/// The most segments a household phase can fetch (one each segment's play
/// time at most; a fast line fetches each when due, not sooner).
fn max_segments(plan: &bloatlab_model::WebPlan) -> usize {
    match plan.household {
        Some(h) => (plan.longest_phase().as_secs_f64() / h.stream_segment.as_secs_f64()).ceil() as usize + 1,
        None => 0,
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PagePhase {
    /// The plan's phase name ("idle", "download", "upload", "both").
    pub name: String,
    pub start_ms: f64,
    pub end_ms: f64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PageFlow {
    pub id: u32,
    pub direction: Direction,
    /// Index into `phases`.
    pub phase: usize,
    /// `[time, cumulative bytes read]`, download flows (the page's reads).
    #[serde(default)]
    pub samples: Vec<(f64, u64)>,
    /// Bytes read (download) or sent (upload) by the page.
    pub bytes: u64,
    /// Longest gap between reads after the first byte, and when it ended (download).
    #[serde(default)]
    pub max_gap_ms: f64,
    #[serde(default)]
    pub max_gap_at_ms: f64,
}

fn ns(ms: f64) -> u64 {
    (ms * 1e6).round().max(0.0) as u64
}

impl PageReport {
    /// Check the report against the session's plan before anything is built from it.
    pub fn validate(&self, s: &Session) -> Result<(), String> {
        let plan = &s.plan;
        let span = plan.max_total().as_secs_f64() * 1e3 + 60_000.0;
        let ok_t = |t: f64| t.is_finite() && t >= self.start_ms - 1000.0 && t <= self.start_ms + span;
        if !self.start_ms.is_finite() || self.start_ms <= 0.0 {
            return Err("start_ms is not a time".into());
        }
        if self.phases.len() > plan.phases.len() {
            return Err(format!("{} phases; the plan has {}", self.phases.len(), plan.phases.len()));
        }
        for (i, p) in self.phases.iter().enumerate() {
            if p.name != plan.phases[i].name {
                return Err(format!("phase {i} is `{}`; the plan's is `{}`", p.name, plan.phases[i].name));
            }
            if !ok_t(p.start_ms) || !ok_t(p.end_ms) || p.end_ms < p.start_ms {
                return Err(format!("phase `{}`: its times are outside the test", p.name));
            }
        }
        if self.flows.len() > crate::session::MAX_FLOWS as usize {
            return Err(format!("{} flows; a test has at most {}", self.flows.len(), crate::session::MAX_FLOWS));
        }
        let max_samples = (span / plan.sample_interval.as_secs_f64() / 1e3) as usize;
        for f in &self.flows {
            if f.phase >= self.phases.len() {
                return Err(format!("flow {} names phase {} of {}", f.id, f.phase, self.phases.len()));
            }
            if f.samples.len() > max_samples || f.samples.iter().any(|(t, _)| !ok_t(*t)) {
                return Err(format!("flow {}: its samples are too many or outside the test", f.id));
            }
            if !f.max_gap_ms.is_finite() || f.max_gap_ms < 0.0 {
                return Err(format!("flow {}: max_gap_ms is not a duration", f.id));
            }
        }
        for list in [&self.rtc_probes, &self.ws_probes] {
            if list.len() > s.max_probes() {
                return Err(format!("{} probes; the plan sends at most {}", list.len(), s.max_probes()));
            }
            if list.iter().any(|(_, t1, t4)| !ok_t(*t1) || t4.is_some_and(|t| !ok_t(t) || t < *t1)) {
                return Err("a probe's times are outside the test".into());
            }
        }
        if self.call_frames.len() > s.max_call_frames() {
            return Err(format!("{} call frames; the plan sends at most {}", self.call_frames.len(), s.max_call_frames()));
        }
        if self.call_frames.iter().any(|(_, t1, t4)| !ok_t(*t1) || t4.is_some_and(|t| !ok_t(t) || t < *t1)) {
            return Err("a call frame's times are outside the test".into());
        }
        if self.segments.len() > max_segments(plan) {
            return Err(format!("{} stream segments; the plan fetches at most {}", self.segments.len(), max_segments(plan)));
        }
        let most = plan.household.map(|h| h.stream_segment_bytes).unwrap_or(0);
        for g in &self.segments {
            let after = |t: Option<f64>| t.is_none_or(|t| ok_t(t) && t >= g.requested_ms);
            if !ok_t(g.requested_ms) || !after(g.first_byte_ms) || !after(g.done_ms) || g.bytes > most {
                return Err("a stream segment's times or size are outside the plan".into());
            }
        }
        if self.rtc_error.as_ref().is_some_and(|e| e.len() > 500) {
            return Err("rtc_error is too long".into());
        }
        Ok(())
    }
}

/// Each probe: the page's send and answer times, the server's arrival and
/// answer times. A probe the server has no record of counts as lost.
fn exchanges(list: &[(u32, f64, Option<f64>)], stamps: &[crate::session::ProbeStamp]) -> Vec<Exchange> {
    let mut v: Vec<Exchange> = list
        .iter()
        .map(|&(seq, t1, t4)| match (stamps.iter().find(|p| p.seq == seq), t4) {
            (Some(p), Some(t4)) => Exchange { t1: ns(t1), t2: p.t2, t3: p.t3, t4: ns(t4) },
            _ => Exchange { t1: ns(t1), t2: 0, t3: 0, t4: 0 },
        })
        .collect();
    v.sort_by_key(|e| e.t1);
    v
}

/// The household test's call and stream, on the test clock of `r`.
fn household(s: &Session, rep: &PageReport, r: &TestResult) -> Option<Household> {
    let h = s.plan.household?;
    let ph = rep.phases.iter().find(|p| p.name == HOUSEHOLD_PHASE)?;
    let t0 = ns(rep.start_ms);
    let frames = exchanges(&rep.call_frames, &s.call_stamps());
    let since = |a: f64, b: Option<f64>| b.map(|b| ns(b).saturating_sub(ns(a)));
    Some(Household {
        phase: HOUSEHOLD_PHASE.into(),
        game_interval_ms: h.game_interval.as_secs_f64() * 1e3,
        call: CallRecord {
            frames_per_second: h.call_fps,
            frame_bytes: h.call_frame_bytes,
            frames: summarize::exchanges_on_clock(&frames, ns(ph.start_ms), ns(ph.end_ms), r),
        },
        stream: StreamRecord {
            segment_ms: h.stream_segment.as_secs_f64() * 1e3,
            segment_bytes: h.stream_segment_bytes,
            segments: rep
                .segments
                .iter()
                .map(|g| Segment {
                    t_ns: ns(g.requested_ms).saturating_sub(t0),
                    first_byte_ns: since(g.requested_ms, g.first_byte_ms),
                    done_ns: since(g.requested_ms, g.done_ms),
                    bytes: g.bytes,
                })
                .collect(),
        },
    })
}

/// Build the result of session `s` from the page's report.
pub fn build(s: &Session, rep: &PageReport, server: HostInfo, local: SocketAddr, server_rpm: Option<bloatlab_model::RpmOffer>) -> TestResult {
    let srv_flows = s.flows();
    let mut raw = vec![];
    let mut scenarios = vec![];
    for (i, ph) in rep.phases.iter().enumerate() {
        let mine: Vec<&PageFlow> = rep.flows.iter().filter(|f| f.phase == i).collect();
        let ups = mine.iter().filter(|f| f.direction == Direction::Up).count() as u32;
        let downs = mine.iter().filter(|f| f.direction == Direction::Down).count() as u32;
        // A loaded phase is named by the streams it held, as `bloatlab test`
        // names a scenario, so `bloatlab compare` lines the two up.
        let name = match ph.name.as_str() {
            "idle" | HOUSEHOLD_PHASE => ph.name.clone(),
            _ => Scenario::new(ups, downs).name(),
        };
        if ph.name != "idle" {
            scenarios.push(Scenario::new(ups, downs));
        }
        let mut flows = vec![];
        let mut server_flows = vec![];
        for f in &mine {
            let spec = FlowSpec { id: f.id, direction: f.direction, dscp: 0, udp: None };
            let samples = FlowSamples {
                goodput: if f.direction == Direction::Down { f.samples.iter().map(|&(t, b)| (ns(t), b)).collect() } else { vec![] },
                tcp_info: vec![],
            };
            let out = RecvOutcome { bytes: f.bytes, max_gap_ns: ns(f.max_gap_ms), max_gap_at_ns: ns(f.max_gap_at_ms), udp: None };
            flows.push((spec, samples, out));
            if let Some(r) = srv_flows.iter().find(|r| r.id == f.id && r.direction == f.direction) {
                server_flows.push(ServerFlowReport {
                    id: r.id,
                    direction: r.direction,
                    goodput: r.goodput.lock().unwrap().clone(),
                    bytes: r.bytes.load(Ordering::Relaxed),
                    max_gap_ns: r.max_gap_ns.load(Ordering::Relaxed),
                    max_gap_at_unix_ns: r.max_gap_at_ns.load(Ordering::Relaxed),
                    tcp_info: r.tcp_info.lock().unwrap().clone(),
                    udp: None,
                });
            }
        }
        raw.push(RawPhase {
            name,
            uploads: ups,
            downloads: downs,
            start_unix_ns: ns(ph.start_ms),
            end_unix_ns: ns(ph.end_ms),
            flows,
            server_flows,
        });
    }
    let rtc = exchanges(&rep.rtc_probes, &s.rtc_stamps());
    let ws = exchanges(&rep.ws_probes, &s.ws_stamps());
    // The UDP (WebRTC) probes are the result's probes, as `bloatlab test`'s
    // UDP probes; the WebSocket probes its TCP request/response exchanges
    // (loss recovery included). Without WebRTC the WebSocket probes stand
    // in for the UDP ones, and the metadata says so.
    let have_rtc = rtc.iter().any(|e| e.answered());
    let (probes, rr): (Vec<Exchange>, Vec<bloatlab_engine::probe::RrRecord>) = if have_rtc {
        let rr = ws.iter().map(|e| (e.t1, if e.answered() { e.t4 - e.t1 } else { 0 }, e.answered())).collect();
        (rtc, rr)
    } else {
        (ws, vec![])
    };
    let probe_timestamps = if have_rtc {
        "probes: a WebRTC data channel (UDP, unordered, never retransmitted) from the page; request/response: WebSocket          messages on their own TCP connection from a Web Worker; the browser's performance.now() (5 us steps, the page          being cross-origin isolated) at send and answer, the server's clock at arrival and answer"
            .to_string()
    } else {
        format!(
            "probes: WebSocket messages on their own TCP connection from a Web Worker (no WebRTC: {}), so a lost packet              shows as a round trip stretched by TCP's loss recovery, not as a lost probe; the browser's performance.now()              at send and answer, the server's clock at arrival and answer",
            rep.rtc_error.as_deref().unwrap_or("the channel did not open")
        )
    };
    let cfg = s.plan.test_config(&s.host, scenarios);
    let socket = srv_flows
        .iter()
        .find_map(|f| f.tcp_info.lock().unwrap().first().map(|i| i.snd_mss))
        .map(|mss| SocketInfo { mss, sndbuf: 0, rcvbuf: 0, buffers_set: false, rx_copy: true })
        .unwrap_or(SocketInfo { rx_copy: true, ..Default::default() });
    let cc = srv_flows.iter().find_map(|f| f.cc.get().cloned()).unwrap_or_default();
    let mi = MetaIn {
        cfg: &cfg,
        addr: local,
        start_unix_ns: ns(rep.start_ms),
        server,
        cc,
        socket,
        witness: None,
        probe_timestamps,
        pings: vec![],
        server_rpm,
    };
    let ex = Exchanges { server: &probes, witness: &[], classes: &[], rr: &rr };
    let mut r = build_result(&mi, &raw, &ex, rep.complete, rep.incomplete_reason.clone().filter(|_| !rep.complete));
    r.household = household(s, rep, &r);
    r.client = ClientKind::Browser;
    r.metadata.client = HostInfo::default();
    r.metadata.server_address = s.host.clone();
    r.metadata.user_agent = Some(s.user_agent.clone());
    r
}
