//! bloatlab's one typed model: the values every layer shares, each with one
//! definition and one parser, parsed once at the edge (the command line, a
//! recipe file) and passed typed everywhere inside.
//!
//! * [`units`]: durations, tc rates, byte sizes, probabilities, RFC 3339 times.
//! * [`rate`]: a link [`Rate`] and a direction's [`RateSpec`] (fixed, unlimited, mahimahi trace).
//! * [`queue`]: the bottleneck [`QueueSpec`] (fifo/bfifo/drophead, CoDel,
//!   FQ-CoDel, PIE with parameters, any kernel qdisc) and the analytic delay
//!   of a full queue ([`analytic_queue_delay_ms`], one frame-size rule).
//! * [`scenario`]: load scenarios `NuMd` ([`Scenario`], one grammar, one limit).
//! * [`config`]: [`TestConfig`], [`TestOverrides`], [`ServerConfig`] and the
//!   [`Job`] a lab hands a child process.
//! * [`lab`]: [`LabConfig`] and its enums.
//! * [`secret`]: the shared [`Secret`] of an authenticated server.
//!
//! Pure: no I/O except reading a trace file a configuration names.
pub mod config;
pub mod dscp;
pub mod lab;
pub mod ping;
pub mod queue;
pub mod rate;
pub mod rpm;
pub mod scenario;
pub mod secret;
pub mod units;

pub use dscp::Dscp;
pub use config::{Family, Job, ServerConfig, TestConfig, TestOverrides, UdpLoad, DEFAULT_PORT};
pub use lab::{Backend, LabConfig, OnOff, Placement, Shaper};
pub use queue::{analytic_queue_delay_ms, CodelParams, FqCodelParams, PieParams, QueueSpec, FRAME_BYTES, MTU};
pub use ping::{PingKind, PingTarget, DEFAULT_PING_INTERVAL};
pub use rate::{Rate, RateSpec};
pub use rpm::{normalize_sha256, RpmConfig, RpmDirection, RpmOffer, RpmServe, RpmTls, DEFAULT_RPM_PORT};
pub use scenario::{Ramp, Scenario};
pub use secret::Secret;
