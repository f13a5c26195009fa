//! When a loaded phase has shown the queue's size: the rule every front end
//! (`bloatlab test`, the browser test, the household test, the monitor)
//! applies to end a phase, and the result applies to say whether latency
//! was still rising when a phase ended (`metrics::settle` computes it).
//!
//! In the spirit of the IETF responsiveness draft's stability test: the
//! round trips of the phase's probes are cut into windows of `window` by
//! the time their answers arrived; each window's median is its level.
//! Latency has **stopped rising** once the last `hold` windows set no new
//! high: none of their medians exceeds the highest median before them by
//! more than `tolerance` (relative) plus `floor_ms`. A plateau and a
//! sawtooth (a queue that fills, drops and fills again) both pass; a queue
//! still filling sets a new high every window and does not.
use std::time::Duration;

/// The stability rule's parameters (one set for every front end).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SettleRule {
    /// Length of one window, by answer arrival time.
    pub window: Duration,
    /// Windows in a row that must set no new high.
    pub hold: u32,
    /// A new high is one above the earlier highest by more than this share...
    pub tolerance: f64,
    /// ...plus this many milliseconds (timer and scheduling noise on short paths).
    pub floor_ms: f64,
    /// A window with fewer answered probes has no level (and the rule waits).
    pub min_samples: usize,
}

/// The one rule.
pub const SETTLE_RULE: SettleRule = SettleRule { window: Duration::from_secs(1), hold: 3, tolerance: 0.05, floor_ms: 1.0, min_samples: 3 };

impl SettleRule {
    /// The rule in words, for help texts, documents and the result's metadata.
    pub fn describe(&self) -> String {
        format!(
            "a loaded phase has shown the queue's size once the median round trip of each of the last {} windows of {} s (probes by answer arrival) is within {:.0}% + {} ms of the highest median before them",
            self.hold,
            self.window.as_secs_f64(),
            self.tolerance * 100.0,
            self.floor_ms
        )
    }
}

/// Which of a loaded phase's probes are its loaded latency: those answered
/// from the first window (the [`SETTLE_RULE`]'s windows) whose median round
/// trip rose above the idle median at least `share` of the median rise of
/// it and the windows after it. The ramp while the load fills the queue is
/// left out, as goodput leaves out a flow's start (the responsiveness draft
/// measures once the load has reached working conditions): a deep queue
/// filling for 9 s of a 14 s phase otherwise reads half its size, and a
/// client that fills it more slowly (a browser's uploads) less than that.
/// A median of the later windows, so a few stalled windows at the end do
/// not make the figure. The phase's ping-style statistics (`latency`) keep
/// every probe.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoadedRule {
    pub share: f64,
}

/// The one loaded-latency rule.
pub const LOADED_RULE: LoadedRule = LoadedRule { share: 0.8 };

impl LoadedRule {
    pub fn describe(&self) -> String {
        format!(
            "added latency = loaded p50 - idle p50; a loaded phase's loaded p50 is the median round trip of its probes answered from the first {} s window whose median rose above the idle median at least {:.0}% of the median rise of it and the windows after it (the ramp while the load fills the queue left out)",
            SETTLE_RULE.window.as_secs_f64(),
            self.share * 100.0
        )
    }
}

/// When the queue a phase left behind has drained, so the next phase
/// starts from an empty queue: the pause between phases lasts at least its
/// length and then until the median round trip of the probes answered in
/// the last `window` is within `tolerance` + `floor_ms` of the idle
/// baseline's median, at most `cap` (a deep queue takes its full delay to
/// drain, and a browser's uploads stop only when the server hears of the
/// phase's end, through that very queue).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DrainRule {
    pub window: Duration,
    pub tolerance: f64,
    pub floor_ms: f64,
    pub min_samples: usize,
    pub cap: Duration,
}

/// The one drain rule.
pub const DRAIN_RULE: DrainRule = DrainRule { window: Duration::from_millis(500), tolerance: 0.10, floor_ms: 2.0, min_samples: 3, cap: Duration::from_secs(10) };

impl DrainRule {
    pub fn describe(&self) -> String {
        format!(
            "a pause between phases lasts until the median round trip of the probes answered in the last {} ms is within {:.0}% + {} ms of the idle median, at most {} s",
            self.window.as_millis(),
            self.tolerance * 100.0,
            self.floor_ms,
            self.cap.as_secs()
        )
    }
}

/// How long a loaded phase runs: at least `min`; then, when `cap` is
/// longer, on until latency stopped rising ([`SETTLE_RULE`]) or `cap`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PhaseLength {
    pub min: Duration,
    pub cap: Duration,
}

impl PhaseLength {
    /// A phase of fixed length.
    pub fn fixed(d: Duration) -> PhaseLength {
        PhaseLength { min: d, cap: d }
    }

    /// Whether the phase may run past `min`.
    pub fn adaptive(&self) -> bool {
        self.cap > self.min
    }
}
