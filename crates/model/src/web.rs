//! The browser test `bloatlab server` serves: where it listens, where it
//! keeps results, and what a test runs ([`WebPlan`], one definition the
//! server sends the page and records in every result).
use crate::config::TestConfig;
pub use crate::plan::{HouseholdPlan, Profile, CALL_PART_BYTES, HOUSEHOLD_LENGTH};
use crate::scenario::Scenario;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

/// Plain-HTTP port of the browser test.
pub const DEFAULT_WEB_PORT: u16 = 9780;

/// The browser test of a server: plain HTTP on `port` of every bound
/// address, and the same pages on the HTTPS (RPM) port when that is served.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WebServe {
    /// 0 = an ephemeral port.
    pub port: u16,
    /// Keep finished results and give each a permalink (`--web-results`).
    #[serde(default)]
    pub results: Option<WebResults>,
}

/// Where and how many results the server keeps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WebResults {
    pub dir: PathBuf,
    /// The most results kept; the oldest go first.
    pub max_count: u32,
    /// The most bytes all kept results may take; the oldest go first.
    pub max_bytes: u64,
    /// Results one source may store per hour.
    pub per_source_per_hour: u32,
    /// Record the client's address in each stored result (off by default).
    pub keep_addresses: bool,
}

impl WebResults {
    pub fn new(dir: PathBuf) -> WebResults {
        WebResults { dir, max_count: 10_000, max_bytes: 1 << 30, per_source_per_hour: 30, keep_addresses: false }
    }
}

/// One phase of a browser test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WebPhase {
    /// "idle", "download", "upload", "both" or "household".
    pub name: &'static str,
    pub download: bool,
    pub upload: bool,
    /// At least this long...
    pub duration: Duration,
    /// ...and, when longer, on until latency stopped rising
    /// ([`crate::SETTLE_RULE`]), at most this long.
    pub cap: Duration,
}

impl WebPhase {
    pub fn length(&self) -> crate::PhaseLength {
        crate::PhaseLength { min: self.duration, cap: self.cap }
    }
}

/// Everything a browser test does, sent to the page as JSON (durations in
/// milliseconds) and recorded in the result's metadata.
#[derive(Debug, Clone, PartialEq)]
pub struct WebPlan {
    pub mode: Profile,
    pub phases: Vec<WebPhase>,
    /// Quiet time between phases, so the queue drains.
    pub pause: Duration,
    /// Probes, one every this long: the UDP ones, and the HTTP ones where
    /// the last answer came in time.
    pub probe_interval: Duration,
    /// How often the page and the server record byte counts and TCP_INFO.
    pub sample_interval: Duration,
    /// Load streams start at this many per loaded direction (all at once, as
    /// `bloatlab test` starts a scenario's flows)...
    pub start_streams: u32,
    /// ...and, from `ramp_from` on (slow start is over by then on a path
    /// they fill, so growth means room, not slow start), add one each
    /// `ramp_step` while the direction's goodput grew by more than
    /// `ramp_growth` over the step, up to `max_streams` (a browser opens at
    /// most 6 HTTP/1.1 connections to a server and the page's HTTP probes
    /// hold one: with all six downloading, a probe would wait for a
    /// connection, and a sixth download took the probes' own; a phase
    /// loading both ways gives each direction 3). Once it stops growing,
    /// the load is held: never backed off because latency rose.
    pub max_streams: u32,
    pub ramp_from: Duration,
    pub ramp_step: Duration,
    pub ramp_growth: f64,
    /// The ramp also stops once a queue builds: the median round trip of the
    /// probes answered over the last step above idle's by more than this,
    /// ms. The line is full then, and more goodput a step is the streams'
    /// slow start into that queue, not room (through a 1.2 s FIFO the page
    /// added a fifth download stream in some runs, and read 8.6-8.95 Mbit/s
    /// where the CLI's four read 9.49).
    pub ramp_queue_ms: f64,
    /// The ramp ends by this share of a loaded phase (the steady part the
    /// goodput is measured over begins after it: `metrics::DEFAULT_TRIM_START`).
    pub ramp_until: f64,
    /// The household test's profiles (mode `household`): they run in the
    /// phase named "household", whose bulk update is one stream each way.
    pub household: Option<HouseholdPlan>,
}

/// A browser test: a stall of the page's probe thread longer than this,
/// ms, marks the probes whose answer it may have held; they are left out of
/// the latency figures (`metrics::page`).
pub const PAGE_DELAY_BOUND_MS: f64 = 5.0;

/// The name of the household test's phase.
pub const HOUSEHOLD_PHASE: &str = "household";

impl WebPlan {
    pub fn of(mode: Profile) -> WebPlan {
        let s = Duration::from_secs;
        let loaded = |d: Duration, cap: Duration| {
            let idle = if d > s(5) { s(4) } else { s(2) };
            vec![
                WebPhase { name: "idle", download: false, upload: false, duration: idle, cap: idle },
                WebPhase { name: "download", download: true, upload: false, duration: d, cap },
                WebPhase { name: "upload", download: false, upload: true, duration: d, cap },
                WebPhase { name: "both", download: true, upload: true, duration: d, cap },
            ]
        };
        let phases = match mode {
            Profile::Quick => loaded(s(5), s(15)),
            Profile::Thorough => loaded(s(12), s(30)),
            // the capacities first (the bulk update's share is judged by
            // them), then the household: 12 s hold three stream segments
            Profile::Household => {
                let mut p = loaded(s(5), s(15));
                p.truncate(3);
                p.push(WebPhase { name: HOUSEHOLD_PHASE, download: true, upload: true, duration: HOUSEHOLD_LENGTH, cap: HOUSEHOLD_LENGTH });
                p
            }
        };
        let household = (mode == Profile::Household).then(HouseholdPlan::default);
        WebPlan {
            mode,
            phases,
            pause: Duration::from_secs(1),
            probe_interval: Duration::from_millis(20),
            sample_interval: Duration::from_millis(100),
            start_streams: 4,
            max_streams: 5,
            ramp_from: Duration::from_millis(500),
            ramp_step: Duration::from_millis(250),
            ramp_growth: 0.1,
            ramp_queue_ms: 5.0,
            ramp_until: 0.2,
            household,
        }
    }

    /// The whole test, pauses included, when every phase settles at once
    /// (a line that keeps its queue short).
    pub fn total(&self) -> Duration {
        let phases: Duration = self.phases.iter().map(|p| p.duration).sum();
        phases + self.pause * self.phases.len().saturating_sub(1) as u32
    }

    /// The whole test when every phase runs to its cap and every pause
    /// waits its longest for the queue to drain (what bounds a session).
    pub fn max_total(&self) -> Duration {
        let phases: Duration = self.phases.iter().map(|p| p.cap.max(p.duration)).sum();
        let adaptive = self.phases.iter().any(|p| p.length().adaptive());
        let pause = if adaptive { self.pause.max(crate::DRAIN_RULE.cap) } else { self.pause };
        phases + pause * self.phases.len().saturating_sub(1) as u32
    }

    /// The longest loaded phase at its cap (what a server's --max-duration must allow).
    pub fn longest_phase(&self) -> Duration {
        self.phases.iter().map(|p| p.cap.max(p.duration)).max().unwrap_or_default()
    }

    /// The loaded phases as `bloatlab test` runs them: each phase's first
    /// streams as a scenario (`0u4d`, `4u0d`, `3u3d`; the CLI does not ramp
    /// its flows), the plan's idle, pause and phase lengths. The household
    /// plan's last scenario is its household phase (`1u1d`, the bulk
    /// update), beside which the engine runs the call and the stream, with
    /// probes at the game's interval.
    pub fn apply_to(&self, t: &mut TestConfig) -> Result<(), String> {
        let loaded: Vec<&WebPhase> = self.phases.iter().filter(|p| p.download || p.upload).collect();
        t.scenarios = loaded
            .iter()
            .map(|p| {
                let n = self.start_streams.min(self.max_streams_in(p));
                Scenario::new(if p.upload { n } else { 0 }, if p.download { n } else { 0 })
            })
            .collect();
        t.household = self.household;
        if let Some(h) = self.household {
            t.probe_interval = h.game_interval;
        }
        t.ramp = None;
        t.idle = self.phases.iter().find(|p| p.name == "idle").map(|p| p.duration).unwrap_or_default();
        let first = loaded.first().ok_or("a profile without a loaded phase")?;
        t.duration = first.duration;
        t.until_settled = first.length().adaptive().then_some(first.cap);
        t.pause = self.pause;
        t.profile = Some(self.mode);
        Ok(())
    }

    /// Streams per direction a phase may ramp to.
    pub fn max_streams_in(&self, p: &WebPhase) -> u32 {
        if p.name == HOUSEHOLD_PHASE {
            1
        } else if p.download && p.upload {
            self.max_streams.div_ceil(2)
        } else {
            self.max_streams
        }
    }

    /// The plan as the page reads it (milliseconds).
    pub fn to_json_value(&self) -> PlanDoc {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        PlanDoc {
            mode: self.mode,
            phases: self
                .phases
                .iter()
                .map(|p| PhaseDoc {
                    name: p.name.into(),
                    download: p.download,
                    upload: p.upload,
                    duration_ms: ms(p.duration),
                    cap_ms: ms(p.cap.max(p.duration)),
                    max_streams: self.max_streams_in(p),
                })
                .collect(),
            pause_ms: ms(self.pause),
            probe_interval_ms: ms(self.probe_interval),
            sample_interval_ms: ms(self.sample_interval),
            start_streams: self.start_streams,
            ramp_from_ms: ms(self.ramp_from),
            ramp_step_ms: ms(self.ramp_step),
            ramp_growth: self.ramp_growth,
            ramp_queue_ms: self.ramp_queue_ms,
            ramp_until: self.ramp_until,
            total_ms: ms(self.total()),
            drain: DrainDoc {
                window_ms: ms(crate::DRAIN_RULE.window),
                tolerance: crate::DRAIN_RULE.tolerance,
                floor_ms: crate::DRAIN_RULE.floor_ms,
                min_samples: crate::DRAIN_RULE.min_samples,
                cap_ms: ms(self.pause.max(crate::DRAIN_RULE.cap)),
            },
            max_total_ms: ms(self.max_total()),
            page_delay_bound_ms: PAGE_DELAY_BOUND_MS,
            settle: SettleDoc {
                window_ms: ms(crate::SETTLE_RULE.window),
                hold: crate::SETTLE_RULE.hold,
                tolerance: crate::SETTLE_RULE.tolerance,
                floor_ms: crate::SETTLE_RULE.floor_ms,
                min_samples: crate::SETTLE_RULE.min_samples,
            },
            household: self.household.map(|h| HouseholdDoc {
                game_interval_ms: ms(h.game_interval),
                call_fps: h.call_fps,
                call_frame_bytes: h.call_frame_bytes,
                stream_segment_ms: ms(h.stream_segment),
                stream_segment_bytes: h.stream_segment_bytes,
            }),
        }
    }

    /// The test configuration a browser test's result records (`metadata`):
    /// the scenarios as the streams ran (`scenarios`), the plan's times.
    pub fn test_config(&self, server: &str, scenarios: Vec<Scenario>) -> TestConfig {
        let loaded = self.phases.iter().find(|p| p.name != "idle" && p.name != HOUSEHOLD_PHASE);
        let idle = self.phases.iter().find(|p| p.name == "idle");
        TestConfig {
            server: server.into(),
            scenarios,
            duration: loaded.map(|p| p.duration).unwrap_or_default(),
            until_settled: loaded.filter(|p| p.length().adaptive()).map(|p| p.cap),
            profile: Some(self.mode),
            idle: idle.map(|p| p.duration).unwrap_or_default(),
            pause: self.pause,
            probe_interval: self.probe_interval,
            sample_interval: self.sample_interval,
            command: vec!["browser".into(), self.mode.name().into()],
            ..TestConfig::default()
        }
    }
}

/// [`WebPlan`] as JSON for the page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanDoc {
    pub mode: Profile,
    pub phases: Vec<PhaseDoc>,
    pub pause_ms: f64,
    pub probe_interval_ms: f64,
    pub sample_interval_ms: f64,
    pub start_streams: u32,
    pub ramp_from_ms: f64,
    pub ramp_step_ms: f64,
    pub ramp_growth: f64,
    pub ramp_queue_ms: f64,
    pub ramp_until: f64,
    pub total_ms: f64,
    /// Every phase at its cap.
    pub max_total_ms: f64,
    /// When a phase's latency stopped rising ([`crate::SETTLE_RULE`]).
    pub settle: SettleDoc,
    /// [`PAGE_DELAY_BOUND_MS`].
    pub page_delay_bound_ms: f64,
    /// When a pause has let the queue drain ([`crate::DRAIN_RULE`]).
    pub drain: DrainDoc,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub household: Option<HouseholdDoc>,
}

/// [`crate::SettleRule`] as JSON for the page, which applies it live to end
/// a loaded phase (the result judges each phase by `metrics::settle`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SettleDoc {
    pub window_ms: f64,
    pub hold: u32,
    pub tolerance: f64,
    pub floor_ms: f64,
    pub min_samples: usize,
}

/// [`crate::DrainRule`] as JSON for the page, which waits in each pause
/// (after `pause_ms`) until the queue has drained, at most `cap_ms`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DrainDoc {
    pub window_ms: f64,
    pub tolerance: f64,
    pub floor_ms: f64,
    pub min_samples: usize,
    pub cap_ms: f64,
}

/// [`HouseholdPlan`] as JSON for the page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HouseholdDoc {
    pub game_interval_ms: f64,
    pub call_fps: u32,
    pub call_frame_bytes: u32,
    pub stream_segment_ms: f64,
    pub stream_segment_bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseDoc {
    pub name: String,
    pub download: bool,
    pub upload: bool,
    /// At least this long, then until latency stopped rising, at most `cap_ms`.
    pub duration_ms: f64,
    pub cap_ms: f64,
    pub max_streams: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quick_test_fits_in_20_seconds_and_loads_each_way_then_both() {
        let p = WebPlan::of(Profile::Quick);
        assert!(p.total() <= Duration::from_secs(20), "{:?}", p.total());
        let names: Vec<&str> = p.phases.iter().map(|p| p.name).collect();
        assert_eq!(names, ["idle", "download", "upload", "both"]);
        // >= 100 probes in the steady part of each loaded phase
        for ph in p.phases.iter().filter(|p| p.name != "idle") {
            let steady = ph.duration.as_secs_f64() * (1.0 - p.ramp_until - 0.05);
            assert!(steady / p.probe_interval.as_secs_f64() >= 100.0, "{}", ph.name);
        }
        assert_eq!(p.max_streams_in(&p.phases[3]), 3);
        // the downloads leave the HTTP probes one of a browser's 6 connections
        assert_eq!(p.max_streams_in(&p.phases[1]), 5);
        assert!(WebPlan::of(Profile::Thorough).total() > p.total());
        // each loaded phase may run on to 15 s while latency still rises
        assert!(p.phases[1..].iter().all(|ph| ph.cap == Duration::from_secs(15) && ph.length().adaptive()));
        // ...and each pause up to 10 s while the queue drains
        assert_eq!(p.max_total(), Duration::from_secs(2 + 45 + 30));
        assert_eq!(p.longest_phase(), Duration::from_secs(15));
        assert_eq!("thorough".parse::<Profile>().unwrap(), Profile::Thorough);
    }

    #[test]
    fn the_cli_runs_a_profile_as_the_page_does_its_first_streams() {
        let mut t = TestConfig::default();
        WebPlan::of(Profile::Quick).apply_to(&mut t).unwrap();
        assert_eq!(crate::scenario::list_name(&t.scenarios), "0u4d,4u0d,3u3d");
        assert_eq!((t.idle, t.duration, t.until_settled, t.pause), (Duration::from_secs(2), Duration::from_secs(5), Some(Duration::from_secs(15)), Duration::from_secs(1)));
        assert_eq!(t.profile, Some(Profile::Quick));
        t.validate().unwrap();
        let mut t = TestConfig::default();
        WebPlan::of(Profile::Thorough).apply_to(&mut t).unwrap();
        assert_eq!((t.duration, t.until_settled), (Duration::from_secs(12), Some(Duration::from_secs(30))));
        // the household: capacity phases, then its own, 12 s, the game at 50 Hz
        let mut t = TestConfig::default();
        WebPlan::of(Profile::Household).apply_to(&mut t).unwrap();
        assert_eq!(crate::scenario::list_name(&t.scenarios), "0u4d,4u0d,1u1d");
        assert_eq!(t.probe_interval, Duration::from_millis(20));
        assert!(!t.is_household_phase(1) && t.is_household_phase(2));
        assert_eq!(t.phase_length_of(2), crate::PhaseLength { min: HOUSEHOLD_LENGTH, cap: HOUSEHOLD_LENGTH });
        assert_eq!(t.phase_length_of(0), t.phase_length());
        // 1u1d and three segments
        assert_eq!(t.max_flows(), 5);
        t.validate().unwrap();
        // the call takes a probe stream: 6 DSCP classes leave it one, 7 none
        t.dscp = crate::Dscp::parse_list("CS1,CS2,CS3,CS4,CS5,EF").unwrap();
        t.validate().unwrap();
        t.dscp = crate::Dscp::parse_list("CS1,CS2,CS3,CS4,CS5,EF,AF41").unwrap();
        let e = t.validate().unwrap_err();
        assert!(e.contains("leave no probe stream for its call; at most 6"), "{e}");
    }

    #[test]
    fn the_call_goes_in_datagrams_below_any_mtu_and_the_stream_in_its_segments() {
        let h = HouseholdPlan::default();
        assert_eq!((h.call_parts(), h.call_part_bytes()), (6, 1042));
        assert!(h.call_parts() * h.call_part_bytes() >= h.call_frame_bytes);
        assert_eq!(h.segments_in(HOUSEHOLD_LENGTH), 3);
        assert_eq!(h.segments_in(Duration::from_millis(12_001)), 4);
    }

    #[test]
    fn the_household_test_measures_capacity_then_runs_its_profiles_at_once() {
        let p = WebPlan::of(Profile::Household);
        let names: Vec<&str> = p.phases.iter().map(|p| p.name).collect();
        assert_eq!(names, ["idle", "download", "upload", HOUSEHOLD_PHASE]);
        assert!(p.total() <= Duration::from_secs(30), "{:?}", p.total());
        let h = p.household.unwrap();
        // the game is the probe channel
        assert_eq!(h.game_interval, p.probe_interval);
        assert_eq!(h.call_bps(), 1.5e6);
        assert_eq!(h.stream_bps(), 3e6);
        // one bulk stream each way, and at least three segments' time
        assert_eq!(p.max_streams_in(&p.phases[3]), 1);
        assert!(p.phases[3].duration >= h.stream_segment * 3);
        assert!(WebPlan::of(Profile::Quick).household.is_none());
        assert_eq!(p.to_json_value().household.unwrap().call_frame_bytes, 6250);
    }
}
