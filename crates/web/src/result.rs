//! The result of a browser test: what the page measured (its phases, the
//! bytes its download streams read, the send and answer times of its
//! probes) joined with what the server measured (the probes'
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
    /// `[seq, sent, answered or null, network-timed]` per HTTP (TCP)
    /// request/response probe: network-timed when the times are its
    /// Resource Timing entry's (`requestStart`, `responseStart`: stamped by
    /// the browser's network stack), else the probe worker's clock.
    pub rr_probes: Vec<(u32, f64, Option<f64>, bool)>,
    pub complete: bool,
    #[serde(default)]
    pub incomplete_reason: Option<String>,
    /// The household test's call: `[seq, sent, back or null]` per frame.
    #[serde(default)]
    pub call_frames: Vec<(u32, f64, Option<f64>)>,
    /// The household test's stream segments.
    #[serde(default)]
    pub segments: Vec<PageSegment>,
    /// The page's own timing (absent from pages before it was measured).
    #[serde(default)]
    pub page: Option<PageTiming>,
}

/// How the page timed its probes, and how late its probe thread ran.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PageTiming {
    /// The thread that sent the UDP probes and timed their answers:
    /// "worker" (the data channel handed to the probe worker) or "main"
    /// (a browser that cannot hand it over).
    pub probe_thread: String,
    /// `[due, late by]` (ms) of each tick of that thread's 5 ms timer that
    /// ran more than 1 ms late.
    pub lags: Vec<(f64, f64)>,
    /// The smallest step of `performance.now()` the page measured, ms.
    pub timer_step_ms: Option<f64>,
    /// The page was cross-origin isolated (finer timers).
    pub isolated: bool,
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
        let rr: Vec<(u32, f64, Option<f64>)> = self.rr_probes.iter().map(|&(q, t1, t4, _)| (q, t1, t4)).collect();
        for list in [&self.rtc_probes, &rr] {
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
        if let Some(p) = &self.page {
            if p.probe_thread != "worker" && p.probe_thread != "main" {
                return Err("page.probe_thread is `worker` or `main`".into());
            }
            // one tick each 5 ms at most, over the test and the time before it
            let most = (plan.max_total().as_secs_f64() * 1e3 + 120_000.0) / 5.0;
            if p.lags.len() as f64 > most {
                return Err(format!("{} late ticks; a 5 ms timer has at most {most:.0}", p.lags.len()));
            }
            if p.lags.iter().any(|(d, l)| !d.is_finite() || !l.is_finite() || *l < 0.0 || *l > 3.6e6) {
                return Err("page.lags holds a time that is not one".into());
            }
            if p.timer_step_ms.is_some_and(|s| !s.is_finite() || s <= 0.0 || s > 1000.0) {
                return Err("page.timer_step_ms is not a clock step".into());
            }
        }
        Ok(())
    }
}

/// How `metadata.probe_timestamps` says the UDP probes could not run, and
/// why: "(no WebRTC: REASON), so a lost packet ...".
const NO_WEBRTC: &str = "(no WebRTC: ";
const NO_WEBRTC_END: &str = "), so a lost packet";

/// Why a browser result's UDP probes could not run (the page fell back to
/// its HTTP probes), from its `metadata.probe_timestamps`.
pub fn no_webrtc(probe_timestamps: &str) -> Option<&str> {
    let from = probe_timestamps.find(NO_WEBRTC)? + NO_WEBRTC.len();
    let to = from + probe_timestamps.get(from..)?.find(NO_WEBRTC_END)?;
    probe_timestamps.get(from..to)
}

/// Each probe: the page's send and answer times, the server's arrival and
/// answer times. A probe the server has no record of counts as lost; one
/// the server got whose answer never came back keeps the server's times
/// (it was lost on the way back).
fn exchanges(list: &[(u32, f64, Option<f64>)], stamps: &[crate::session::ProbeStamp]) -> Vec<Exchange> {
    let mut v: Vec<Exchange> = list
        .iter()
        .map(|&(seq, t1, t4)| match (stamps.iter().find(|p| p.seq == seq), t4) {
            (Some(p), Some(t4)) => Exchange { t1: ns(t1), t2: p.t2, t3: p.t3, t4: ns(t4) },
            (Some(p), None) => Exchange { t1: ns(t1), t2: p.t2, t3: p.t3, t4: 0 },
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
            lost_way_known: true,
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
            let spec = FlowSpec { id: f.id, direction: f.direction, dscp: 0, udp: None, segment_bytes: 0 };
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
            // the page's call and stream are recorded below, from its report
            household: None,
        });
    }
    // The probes the page itself may have held beyond the bound (its probe
    // thread ran late just before it handled their answer) are left out of
    // the latency figures and counted per phase: never read as bufferbloat.
    let stalls: &[(f64, f64)] = rep.page.as_ref().map(|p| p.lags.as_slice()).unwrap_or(&[]);
    let held = |list: &[(u32, f64, Option<f64>)]| bloatlab_metrics::page::delayed(&list.iter().map(|&(_, t1, t4)| (t1, t4)).collect::<Vec<_>>(), stalls);
    let kept = |list: &[(u32, f64, Option<f64>)], marks: &[bool]| list.iter().zip(marks).filter(|(_, m)| !**m).map(|(p, _)| *p).collect::<Vec<_>>();
    // HTTP probes timed by the browser's network stack were never held by
    // the page's threads; those the worker timed itself may have been
    let rr_list: Vec<(u32, f64, Option<f64>)> = rep.rr_probes.iter().map(|&(q, t1, t4, _)| (q, t1, t4)).collect();
    let rr_held: Vec<bool> = held(&rr_list).into_iter().zip(&rep.rr_probes).map(|(m, p)| m && !p.3).collect();
    let rtc_held = held(&rep.rtc_probes);
    let rtc = exchanges(&kept(&rep.rtc_probes, &rtc_held), &s.rtc_stamps());
    let http = exchanges(&kept(&rr_list, &rr_held), &s.rr_stamps());
    // The UDP (WebRTC) probes are the result's probes, as `bloatlab test`'s
    // UDP probes; the HTTP probes its TCP request/response exchanges
    // (loss recovery included). Without WebRTC the HTTP probes stand in
    // for the UDP ones, and the metadata says so.
    let have_rtc = rtc.iter().any(|e| e.answered());
    let (probes, rr): (Vec<Exchange>, Vec<bloatlab_engine::probe::RrRecord>) = if have_rtc {
        let rr = http.iter().map(|e| (e.t1, if e.answered() { e.t4 - e.t1 } else { 0 }, e.answered())).collect();
        (rtc, rr)
    } else {
        (http, vec![])
    };
    let (graded_list, graded_held) = if have_rtc { (&rep.rtc_probes, &rtc_held) } else { (&rr_list, &rr_held) };
    let network_timed = rep.rr_probes.iter().filter(|p| p.2.is_some() && p.3).count();
    let rr_timing = format!(
        "{network_timed} of {} answered timed by the browser's network stack (Resource Timing: requestStart to responseStart), the rest by the probe worker's clock",
        rep.rr_probes.iter().filter(|p| p.2.is_some()).count()
    );
    let clock = match &rep.page {
        Some(p) => format!(
            "the browser's performance.now() at send and answer ({}, the page {}cross-origin isolated), the server's clock at arrival and answer; probes whose answer the page's probe thread may have held more than {} ms (it ran late just before handling it: metrics::page) are left out of the latency figures and counted per phase (page_delayed_probes: {} of {})",
            p.timer_step_ms.map(|s| format!("steps of {} us as measured", bloatlab_model::fmt::trim_num(s * 1e3))).unwrap_or_else(|| "its step not measured".into()),
            if p.isolated { "" } else { "not " },
            bloatlab_metrics::page::PAGE_DELAY_BOUND_MS,
            graded_held.iter().filter(|m| **m).count(),
            graded_list.len()
        ),
        None => "the browser's performance.now() at send and answer (its step and the page's own delay not measured by this page), the server's clock at arrival and answer".into(),
    };
    let thread = match rep.page.as_ref().map(|p| p.probe_thread.as_str()) {
        Some("main") => "the page's main thread (this browser cannot hand a data channel to a worker)",
        Some(_) => "the probe worker (the data channel handed over by the page)",
        None => "the page",
    };
    let probe_timestamps = if have_rtc {
        format!("probes: a WebRTC data channel (UDP, unordered, never retransmitted), sent and answered on {thread}; request/response: HTTP requests from the probe worker, one at a time, {rr_timing}; {clock}")
    } else {
        format!(
            "probes: HTTP requests from the probe worker, one at a time, {rr_timing} {NO_WEBRTC}{}{NO_WEBRTC_END} shows as a round trip stretched by TCP's loss recovery, not as a lost probe; {clock}",
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
    // the page's own delay per phase: how late its probe thread ran, probes left out
    let mut phases = r.idle.iter_mut().chain(r.scenarios.iter_mut());
    for ph in &rep.phases {
        let Some(p) = phases.next() else { break };
        p.summary.page_lag_max_ms = bloatlab_metrics::page::max_lag_ms(stalls, ph.start_ms, ph.end_ms);
        p.summary.page_delayed_probes = graded_list.iter().zip(graded_held.iter()).filter(|((_, t1, _), m)| **m && *t1 >= ph.start_ms && *t1 < ph.end_ms).count() as u32;
    }
    // a page that held too many of its own probes, or whose own delay
    // decided the letter, is not graded (metrics::grade)
    r.client = ClientKind::Browser;
    bloatlab_metrics::grade::record(&mut r);
    r.metadata.client = HostInfo::default();
    r.metadata.server_address = s.host.clone();
    r.metadata.user_agent = Some(s.user_agent.clone());
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::ProbeStamp;

    #[test]
    fn a_lost_probe_says_which_way_it_was_lost() {
        // 0 answered; 1 reached the server, its answer lost; 2 never reached it
        let list = [(0, 1000.0, Some(1010.0)), (1, 1020.0, None), (2, 1040.0, None)];
        let stamps = [ProbeStamp { seq: 0, t2: 1_005_000_000, t3: 1_005_000_100 }, ProbeStamp { seq: 1, t2: 1_025_000_000, t3: 1_025_000_100 }];
        let ex = exchanges(&list, &stamps);
        assert!(ex[0].answered() && ex[0].t2 == 1_005_000_000);
        assert!(!ex[1].answered() && ex[1].t2 == 1_025_000_000, "{:?}", ex[1]);
        assert!(!ex[2].answered() && ex[2].t2 == 0);
        let r: bloatlab_results::TestResult = serde_json::from_value(serde_json::json!({
            "schema": "bloatlab-result", "schema_version": 2, "complete": true,
            "metadata": serde_json::to_value(bloatlab_results::Metadata::default()).unwrap(),
            "scenarios": [], "headline": serde_json::to_value(bloatlab_results::Headline::default()).unwrap()
        }))
        .unwrap();
        let p = summarize::exchanges_on_clock(&ex, 0, u64::MAX, &r);
        let ways: Vec<(bool, bool)> = p.iter().map(|p| (p.rtt_ns.is_some(), p.server_rx_unix_ns.is_some())).collect();
        assert_eq!(ways, [(true, true), (false, true), (false, false)]);
    }
}
