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
//! * [`config`]: [`TestConfig`], [`ServerConfig`] and the [`Job`] a lab hands
//!   a child process.
//! * [`options`]: every measurement option of `bloatlab test`, defined once
//!   ([`TEST_OPTIONS`]), and the [`TestOverrides`] a user sets over a front end's defaults.
//! * [`lab`]: [`LabConfig`] and its enums.
//! * [`secret`]: the shared [`Secret`] of an authenticated server.
//! * [`web`]: the browser test a server serves ([`WebServe`]) and what it runs ([`WebPlan`]).
//!
//! Pure: no I/O except reading a trace file a configuration names.
#![forbid(unsafe_code)]
/// `WORDS`, `name`, `Display` and `FromStr` of an enum spelled by fixed words.
#[macro_export]
macro_rules! words {
    ($t:ty, $what:literal, $($v:ident = $s:literal),*) => {
        impl $t {
            /// The words this value is spelled with.
            pub const WORDS: &'static [&'static str] = &[$($s),*];
            pub fn name(&self) -> &'static str {
                match self { $(Self::$v => $s),* }
            }
        }
        impl ::std::fmt::Display for $t {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.name())
            }
        }
        impl std::str::FromStr for $t {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s.trim().to_ascii_lowercase().as_str() {
                    $($s => Ok(Self::$v),)*
                    o => Err(format!("`{o}` is not {} ({})", $what, Self::WORDS.join(", "))),
                }
            }
        }
    };
}

pub mod config;
pub mod dscp;
pub mod fmt;
pub mod lab;
pub mod link;
pub mod options;
pub mod ping;
pub mod queue;
pub mod rate;
pub mod rpm;
pub mod scenario;
pub mod secret;
pub mod plan;
pub mod rpm_options;
pub mod server_options;
pub mod settle;
pub mod units;
pub mod monitor;
pub mod web;
pub mod tune;

pub use dscp::Dscp;
pub use config::{Family, Job, ServerConfig, TestConfig, UdpLoad, DEFAULT_PORT};
pub use options::{lab_option, test_option, Configurable, LabOption, LabOverrides, OptionDef, Overrides, TestOption, TestOverrides, LAB_OPTIONS, TEST_OPTIONS};
pub use lab::{Backend, LabConfig, OnOff, Placement, Shaper};
pub use queue::{analytic_queue_delay_ms, CodelParams, FqCodelParams, PieParams, QueueSpec, FRAME_BYTES, MTU};
pub use ping::{PingKind, PingTarget, DEFAULT_PING_INTERVAL};
pub use rate::{Rate, RateSpec};
pub use rpm::{normalize_sha256, RpmConfig, RpmDirection, RpmOffer, RpmServe, RpmTls, DEFAULT_RPM_PORT};
pub use rpm_options::RPM_OPTIONS;
pub use scenario::{Ramp, Scenario};
pub use secret::Secret;
pub use settle::{DrainRule, LoadedRule, PhaseLength, SettleRule, DRAIN_RULE, LOADED_RULE, SETTLE_RULE};
pub use monitor::{Budget, BudgetPeriod, Database, Jitter, MonitorConfig, MonitorTarget, DEFAULT_MONITOR_DB, MONITOR_OPTIONS};
pub use server_options::{ServerSetup, SERVER_OPTIONS, SERVER_SETUP_OPTIONS};
pub use tune::{TuneConfig, TuneShaper, TuneTarget, TuneTest, DEFAULT_TUNE_STATE_DIR, TUNE_OPTIONS};
pub use web::{HouseholdPlan, Profile, WebPlan, WebResults, WebServe, DEFAULT_WEB_PORT, HOUSEHOLD_PHASE};
