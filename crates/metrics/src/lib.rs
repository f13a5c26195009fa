//! bloatlab-metrics: the pure statistics behind every number bloatlab reports.
//!
//! No I/O, no clocks, no randomness: every function maps input samples to a
//! number by a rule written down here and in `docs/metrics.md`. The rules
//! follow the binding definitions in the design notes ("Numbers and their
//! definitions"):
//!
//! * [`percentile_sorted`] / [`percentile`]: Hyndman–Fan type 7 (numpy's default);
//! * [`ping_stats`]: ping(8)'s min/avg/max/mdev (population standard deviation);
//! * [`latency_stats_ns`]: the probe summary, lost probes counted, never dropped;
//! * [`hz_from_ms`], [`rpm_from_ms`], [`rpm_from_rtts_ms`],
//!   [`trimmed_mean_single_sided`]: responsiveness units and the IETF RPM
//!   draft's 95% single-sided trimmed mean;
//! * [`ProbeRtts::responsiveness`], [`Stability`]: the IETF responsiveness
//!   draft's formula over foreign and self probes and its stability test;
//! * [`gb_per_month`]: goodput × 30 days in GB (10⁹ bytes);
//! * [`rate_series`], [`steady_goodput_bps`], [`TRIMMING_RULE`]: goodput;
//! * [`GapTracker`], [`smoothness`], [`responsiveness`]: seed 003's Hz numbers;
//! * [`estimate_clock_offset`], [`OffsetEstimate`]: clock offset, drift and
//!   one-way delays from NTP-style exchanges.
//!
//! Conventions: raw times and durations are integer nanoseconds, summaries are
//! `f64` in the unit their name says. Non-finite inputs (NaN, ±∞) in `f64`
//! sample slices are ignored by every function that takes such a slice.
#![forbid(unsafe_code)]

mod clock;
mod goodput;
pub mod classes;
pub mod grade;
pub mod household;
pub mod page;
pub mod queue;
pub mod settle;
pub mod ramp;
pub mod udp;
pub mod uses;
pub mod verdict;
mod rates;
mod responsiveness;
mod rpm;
mod stats;

pub use clock::{
    estimate_clock_offset, ntp_offset_delay, Exchange, OffsetEstimate, CLOCK_MAX_WINDOWS,
    CLOCK_MIN_DRIFT_SPAN_NS, CLOCK_MIN_PER_WINDOW, CLOCK_QUEUED_TOLERANCE_NS,
};
pub use goodput::{
    bytes_moved, rate_series, steady_goodput, steady_goodput_bps, trimming_rule, SteadyGoodput,
    DEFAULT_TRIM_END, DEFAULT_TRIM_START, MIN_WINDOW_SAMPLES, TRIMMING_RULE,
};
pub use rates::{
    gb_per_month, goodput_share, hz_from_ms, rpm_from_ms, rpm_from_probes_ns, rpm_from_rtts_ms, rpm_from_rtts_ns,
    trimmed_mean_single_sided, RPM_KEEP_FRACTION, RPM_LOST_PROBE_MS, SECONDS_PER_MONTH, TCP_PAYLOAD_PER_FRAME,
};
pub use responsiveness::{responsiveness, smoothness, GapTracker};
pub use rpm::{ProbeRtts, Responsiveness, Stability, RPM_MAD, RPM_MNP, RPM_MPS, RPM_SDT};
pub use stats::{
    added_latency_ms, latency_stats_ns, mean, percentile, percentile_sorted, ping_stats, PingStats,
};
