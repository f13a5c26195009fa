//! The result of `bloatlab rpm`: the IETF responsiveness method's stages,
//! their per-interval series and every probe, with the conditions they ran in.
use crate::HostInfo;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct RpmResult {
    pub bloatlab_version: String,
    /// RFC 3339 UTC wall-clock time of the start.
    pub start_time: String,
    pub start_unix_ns: u64,
    pub command: Vec<String>,
    /// The configuration URL asked for (a secret path prefix shown as `/nq-…`).
    pub url: String,
    /// The address connected to, and the HTTP version of the load connections.
    pub server_address: String,
    pub http_version: String,
    pub tls: RpmTlsInfo,
    pub client: HostInfo,
    /// The client's congestion control (its kernel's default).
    pub cc: String,
    pub method: RpmMethod,
    /// Probe rounds on the idle line before the stages (`RpmConfig::idle`):
    /// the baseline the stages' added latency is measured against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle: Option<RpmIdle>,
    pub stages: Vec<RpmStage>,
}

/// The idle line: foreign probes only (no load, so no self probes).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct RpmIdle {
    /// Seconds from the run's start (0: the idle probes come first).
    pub start_s: f64,
    pub duration_s: f64,
    /// `t_s` from the idle stage's start.
    pub probes: Vec<RpmProbe>,
    /// Start times of the rounds whose foreign probe failed, s from the
    /// idle stage's start.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub foreign_failed_s: Vec<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct RpmTlsInfo {
    pub version: String,
    pub cipher: String,
    /// SHA-256 of the server's certificate, hex with colons.
    pub certificate_sha256: String,
    /// False with --insecure: the certificate was not checked.
    pub verified: bool,
    /// Checked by its SHA-256 (--pin-sha256, or `bloatlab test --rpm`,
    /// which pins what its server announced) rather than by a CA.
    #[serde(default)]
    pub pinned: bool,
}

/// The method and its parameters, as run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct RpmMethod {
    pub specification: String,
    pub interval_s: f64,
    pub mad: u32,
    pub sdt: f64,
    pub max_connections: u32,
    pub probes_per_second: u32,
    pub max_stage_s: f64,
    pub formula: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct RpmStage {
    /// download, upload or bidirectional.
    pub direction: bloatlab_model::RpmDirection,
    /// When the stage started, seconds from the run's start (its idle
    /// probes' start, when there are any).
    #[serde(default)]
    pub start_s: f64,
    /// Responsiveness over the probes of the last MAD intervals.
    pub rpm: Option<f64>,
    /// "high": goodput and responsiveness both stable; "low": the stage hit
    /// its time limit first (`low_because` says which was not stable).
    pub confidence: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub low_because: Option<String>,
    pub goodput_stable: bool,
    pub responsiveness_stable: bool,
    /// Moving-average aggregate goodput at the end, bits/s.
    pub goodput_bps: f64,
    pub connections: u32,
    pub duration_s: f64,
    /// The four trimmed means (ms) the RPM is made of.
    pub tcp_foreign_ms: Option<f64>,
    pub tls_foreign_ms: Option<f64>,
    pub http_foreign_ms: Option<f64>,
    pub http_self_ms: Option<f64>,
    /// The weighted round trip the RPM is 60000 / of: 1/6 of the three
    /// foreign means plus 1/2 of the self mean (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round_trip_ms: Option<f64>,
    /// Probe rounds that failed (a connection refused or reset, a timeout).
    pub probes_failed: u32,
    /// Foreign probes whose TCP or TLS handshake had a packet retransmitted
    /// (a drop, usually at a full queue): their tcp_f / tls_f include a
    /// retransmission timeout (1 s for a SYN), loss recovery, not queueing.
    #[serde(default)]
    pub handshake_retransmits: u32,
    /// Foreign probes completed in the stage.
    #[serde(default)]
    pub foreign_probes: u32,
    /// Additional load-generating connections that could not be opened (the
    /// stage went on with the others), and the first one's reason.
    #[serde(default)]
    pub connections_failed: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_error: Option<String>,
    pub intervals: Vec<RpmInterval>,
    pub probes: Vec<RpmProbe>,
    /// Start times of the rounds whose foreign probe failed (a refused or
    /// timed-out handshake), s from the stage's start.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub foreign_failed_s: Vec<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct RpmInterval {
    /// End of the interval, seconds from the stage's start.
    pub t_s: f64,
    /// Instantaneous aggregate goodput over the interval, bits/s.
    pub goodput_bps: f64,
    pub moving_average_bps: f64,
    /// Load-generating connections open during the interval.
    pub connections: u32,
    /// Responsiveness of this interval's probes alone.
    pub rpm: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct RpmProbe {
    /// When the probe started, seconds from the stage's start.
    pub t_s: f64,
    /// tcp_foreign, tls_foreign, http_foreign or http_self.
    pub kind: String,
    pub rtt_ms: f64,
}
