//! The named test plans every front end runs ([`Profile`]: quick,
//! thorough, household) and the household test's traffic
//! ([`HouseholdPlan`]): the words a test's configuration and the browser
//! test's plan (`web::WebPlan`) both use.
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A named test plan (`web::WebPlan::of`): the browser test's modes, run the
/// same by `bloatlab test --profile` and the monitor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// About 20 s on a line that keeps its queue short: idle, download,
    /// upload, both, each loaded phase 5 s or until latency stopped rising
    /// (at most 15 s).
    #[default]
    Quick,
    /// About 45 s: the same phases, each 12 s or until latency stopped
    /// rising (at most 30 s).
    Thorough,
    /// About 27 s: idle, download, upload, then a game, a video call, a
    /// stream and a bulk update at once ([`HouseholdPlan`]), each judged.
    Household,
}

crate::words!(Profile, "a test profile", Quick = "quick", Thorough = "thorough", Household = "household");

/// The household test's traffic profiles, run at once in its `household`
/// phase, each as the application it stands for loads a line:
/// * a **game**: the UDP probe channel, one small message each
///   `game_interval` (50 Hz, a fast game's update rate), answered;
/// * a **video call**: a second unreliable, unordered WebRTC data channel
///   carrying a frame of `call_frame_bytes` each `1/call_fps` s up, which
///   the server sends back (the other side's video): 1.5 Mbit/s each way,
///   a 720p call;
/// * a **stream**: a video player fetching a segment of
///   `stream_segment_bytes` for each `stream_segment` of play (3 Mbit/s, a
///   720p stream), the next when it is due or when the last one arrived,
///   whichever is later;
/// * a **bulk update**: one download and one upload stream, as fast as
///   they go (a game or system update, a cloud backup).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HouseholdPlan {
    pub game_interval: Duration,
    pub call_fps: u32,
    pub call_frame_bytes: u32,
    pub stream_segment: Duration,
    pub stream_segment_bytes: u64,
}

impl Default for HouseholdPlan {
    fn default() -> HouseholdPlan {
        HouseholdPlan {
            game_interval: Duration::from_millis(20),
            call_fps: 30,
            call_frame_bytes: 6250,
            stream_segment: Duration::from_secs(4),
            stream_segment_bytes: 1_500_000,
        }
    }
}

impl HouseholdPlan {
    /// The call's rate each way, bits/s.
    pub fn call_bps(&self) -> f64 {
        self.call_fps as f64 * self.call_frame_bytes as f64 * 8.0
    }

    /// The stream's average rate, bits/s.
    pub fn stream_bps(&self) -> f64 {
        self.stream_segment_bytes as f64 * 8.0 / self.stream_segment.as_secs_f64()
    }

    /// Segments due within a phase of this length (one at each multiple of
    /// the segment's play time before its end).
    pub fn segments_in(&self, phase: Duration) -> u32 {
        let seg = self.stream_segment.as_nanos().max(1);
        phase.as_nanos().div_ceil(seg) as u32
    }

    /// `bloatlab test`'s call: each frame as this many UDP datagrams of
    /// [`HouseholdPlan::call_part_bytes`] (the page's data channel splits a
    /// frame into SCTP chunks of about this size).
    pub fn call_parts(&self) -> u32 {
        self.call_frame_bytes.div_ceil(CALL_PART_BYTES)
    }

    pub fn call_part_bytes(&self) -> u32 {
        self.call_frame_bytes.div_ceil(self.call_parts())
    }
}

/// The most bytes of a call frame one datagram carries (`bloatlab test`):
/// below any path's MTU, as WebRTC's SCTP chunks are.
pub const CALL_PART_BYTES: u32 = 1200;

/// The household phase's length: it holds three stream segments.
pub const HOUSEHOLD_LENGTH: Duration = Duration::from_secs(12);
