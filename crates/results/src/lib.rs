//! The bloatlab result document (schema `bloatlab-result`, version [`SCHEMA_VERSION`]).
//!
//! Every layer speaks this: the engine writes it, the lab adds its `lab`
//! section, recipes collect many of them, reports read them. It is documented
//! field by field in `docs/results.md`; a test in this crate checks that every
//! field name appears there.
//!
//! Conventions:
//! * times of raw samples are integer nanoseconds since the test start on the
//!   **client's** clock (`t_ns`), unless the field name says otherwise;
//! * durations / latencies of raw samples are integer nanoseconds (`*_ns`);
//! * summary numbers are floats in the unit their name says (`*_ms`, `*_bps`, `*_hz`).
#![forbid(unsafe_code)]
pub use bloatlab_model::QueueSpec;
pub mod history;
pub mod rpm;
pub use rpm::{RpmIdle, RpmInterval, RpmMethod, RpmProbe, RpmResult, RpmStage, RpmTlsInfo};
use serde::{Deserialize, Serialize};

pub const SCHEMA_NAME: &str = "bloatlab-result";
pub const SCHEMA_VERSION: u32 = 2;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TestResult {
    /// Always [`SCHEMA_NAME`].
    pub schema: String,
    /// [`SCHEMA_VERSION`] of the writer.
    pub schema_version: u32,
    /// False when the run was interrupted (Ctrl-C, server died, ...).
    pub complete: bool,
    /// Why the run is incomplete, one line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incomplete_reason: Option<String>,
    pub metadata: Metadata,
    /// The idle baseline phase (probes only, no load); absent if skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle: Option<Phase>,
    /// One entry per load scenario, in the order run.
    pub scenarios: Vec<Phase>,
    /// Seed 003's four headline numbers, over all scenarios.
    pub headline: Headline,
    /// Present when the run happened in `bloatlab lab`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lab: Option<LabInfo>,
    /// The IETF responsiveness method against the same server, run after
    /// the scenarios (`bloatlab test --rpm`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpm: Option<RpmResult>,
    /// `--scenarios auto`: per direction, the flows the ramp ran and where
    /// goodput stopped growing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ramp: Vec<RampResult>,
    /// What ran the test: `bloatlab test` (absent) or the browser test
    /// `bloatlab server` serves (`"browser"`).
    #[serde(default, skip_serializing_if = "ClientKind::is_cli")]
    pub client: ClientKind,
    /// The browser's household test: what its traffic profiles recorded in
    /// the phase they ran in at once (their verdicts: `metrics::household`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub household: Option<Household>,
    /// A run of `bloatlab monitor`: which monitor ran it, for which target,
    /// on what schedule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitor: Option<MonitorRun>,
}

/// What `bloatlab monitor` adds to each result it keeps.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct MonitorRun {
    /// The monitor's id (`--id`, the host name by default).
    pub monitor_id: String,
    /// The target as given (`HOST[:PORT]`).
    pub target: String,
    /// The schedule: a loaded test every this many seconds, started up to
    /// `jitter_s` later at random.
    pub every_s: f64,
    pub jitter_s: f64,
    /// When this run was due (Unix ns) and how many runs of this target the
    /// monitor had made before it in this process.
    pub due_unix_ns: u64,
    pub sequence: u64,
}

/// The household test (`client: "browser"`, mode `household`): a game, a
/// video call, a stream and a bulk update at once in one scenario (`phase`).
/// The game is that scenario's UDP `probes`; the bulk update its `flows`
/// (one stream each way, so its goodput is the update's, not the line's);
/// the call and the stream are recorded here.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Household {
    /// The scenario they ran in (its `name`, "household").
    pub phase: String,
    /// The game's send interval: the probe interval, ms.
    pub game_interval_ms: f64,
    pub call: CallRecord,
    pub stream: StreamRecord,
}

/// The video call: one frame up each `1/frames_per_second` s on an
/// unreliable, unordered WebRTC data channel, sent back by the server.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct CallRecord {
    pub frames_per_second: u32,
    /// Bytes of each frame, each way.
    pub frame_bytes: u32,
    /// One per frame sent, as a probe: `rtt_ns` the frame's round trip
    /// (null: lost; `server_rx_unix_ns` set: lost on the way back),
    /// one-way delays from the result's clock offset.
    pub frames: Vec<Probe>,
    /// Whether a lost frame tells which way it was lost (the page: the
    /// server records every frame it got; `bloatlab test`: a frame's parts
    /// come back only with their stamps, so a lost one is lost either way).
    #[serde(default = "yes")]
    pub lost_way_known: bool,
}

fn yes() -> bool {
    true
}

/// The stream: segments fetched in turn, each when due or when the last one
/// arrived, whichever is later.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct StreamRecord {
    /// Play time one segment holds, ms.
    pub segment_ms: f64,
    pub segment_bytes: u64,
    pub segments: Vec<Segment>,
}

/// One segment fetch.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
pub struct Segment {
    /// Request time, test clock ns.
    pub t_ns: u64,
    /// From the request to the first byte, ns (null: none arrived).
    pub first_byte_ns: Option<u64>,
    /// From the request to the last byte, ns (null: not complete when the phase ended).
    pub done_ns: Option<u64>,
    /// Bytes that arrived.
    pub bytes: u64,
}

/// The program that measured a result.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum ClientKind {
    /// `bloatlab test` (or a lab, a sweep, a recipe running it).
    #[default]
    Cli,
    /// The page `bloatlab server` serves, in a web browser.
    Browser,
}

impl ClientKind {
    pub fn is_cli(&self) -> bool {
        *self == ClientKind::Cli
    }
}

/// One direction of an auto-ramp (`--scenarios auto`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RampResult {
    pub direction: Direction,
    /// Each step as the ramp judged it, in run order.
    pub steps: Vec<RampStep>,
    /// The flows that filled the path: doubling them gained less than
    /// `growth`. None when the ramp reached its limit still growing, or
    /// was cut short.
    pub saturated_at: Option<u32>,
    /// The highest step goodput, bits/s.
    pub capacity_bps: f64,
    /// The threshold: doubling the flows must add at least this (relative).
    pub growth: f64,
    /// Why the ramp stopped, one line.
    pub stopped: String,
}

impl RampResult {
    /// One line: each step's goodput and why the ramp stopped, goodput
    /// written by `mbit` (bits/s to text with its unit), e.g. "Auto-ramp
    /// upload: 1 flow(s) 1.76 Mbit/s, 2 flow(s) 3.53 Mbit/s; saturated at ...".
    pub fn line(&self, mbit: impl Fn(f64) -> String) -> String {
        let dir = match self.direction {
            Direction::Up => "upload",
            Direction::Down => "download",
        };
        let steps: Vec<String> = self.steps.iter().map(|s| format!("{} flow(s) {}", s.flows, mbit(s.goodput_bps))).collect();
        format!("Auto-ramp {dir}: {}; {}", steps.join(", "), self.stopped)
    }
}

/// One ramp step: its scenario, and the goodput the ramp judged it by (the
/// steady-window goodput of the step's flows, measured as the step ended;
/// the scenario's summary has the full figures).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RampStep {
    pub scenario: String,
    pub flows: u32,
    pub goodput_bps: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Metadata {
    pub bloatlab_version: String,
    pub protocol_version: u16,
    /// RFC 3339 UTC wall-clock time of the test start (client clock).
    pub start_time: String,
    /// The same instant as Unix nanoseconds.
    pub start_unix_ns: u64,
    /// Command line that produced the result.
    pub command: Vec<String>,
    pub server_address: String,
    pub client: HostInfo,
    pub server: HostInfo,
    /// Congestion control requested for the load flows (both ends).
    pub cc: String,
    /// Scenario duration requested, seconds (with `until_settled_s`: the least).
    pub scenario_duration_s: f64,
    /// Scenarios ran on past `scenario_duration_s` until the probes' round
    /// trip stopped rising (`settle_rule`), at most this long, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until_settled_s: Option<f64>,
    /// The rule that says when a phase's latency stopped rising (each
    /// phase's `still_rising`, `settled_after_s`), in words.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub settle_rule: String,
    /// Which probes of a loaded phase its added latency is read from, in
    /// words (`model::LOADED_RULE`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub latency_rule: String,
    /// The named test plan run (`--profile`, the browser test's mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// Idle baseline duration requested, seconds (0 = none).
    pub idle_duration_s: f64,
    /// UDP probe interval, milliseconds.
    pub probe_interval_ms: f64,
    /// UDP probe size in bytes (UDP payload).
    pub probe_size: u32,
    /// Goodput / TCP_INFO sampling interval, milliseconds.
    pub sample_interval_ms: f64,
    /// The rule used to pick the steady part of a scenario for goodput summaries.
    pub trimming_rule: String,
    /// How one-way delay was obtained.
    pub clock_offset: ClockOffset,
    /// The scenarios requested, e.g. ["1u0d", "0u1d"].
    pub scenario_definitions: Vec<String>,
    /// Socket buffer sizes and MSS seen on the client's flows.
    pub socket: SocketInfo,
    /// Address of the witness host probed alongside the server, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub witness_address: Option<String>,
    /// How probe times were taken (kernel receive stamps or user-space clock reads).
    #[serde(default)]
    pub probe_timestamps: String,
    /// Hosts pinged alongside (--ping, --tcp-ping).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pings: Vec<PingInfo>,
    /// The RPM endpoints the server announced (port, certificate SHA-256);
    /// absent when it serves none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_rpm: Option<bloatlab_model::RpmOffer>,
    /// A browser test: the browser's User-Agent header.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_agent: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct HostInfo {
    pub hostname: String,
    /// `uname -r`.
    pub kernel: String,
    /// `uname -s` and machine, e.g. "Linux x86_64".
    pub os: String,
    pub bloatlab_version: String,
    /// net.ipv4.tcp_congestion_control.
    pub default_cc: String,
    /// net.ipv4.tcp_available_congestion_control.
    pub available_cc: Vec<String>,
}

impl HostInfo {
    /// What a server without `--disclose-host` sends: no name, kernel or OS.
    pub fn disclosed(&self) -> bool {
        !(self.hostname.is_empty() && self.kernel.is_empty() && self.os.is_empty())
    }

    /// "NAME — OS KERNEL", or a note that the server keeps them to itself.
    pub fn identity(&self) -> String {
        if self.disclosed() {
            format!("{} — {} {}", self.hostname, self.os, self.kernel)
        } else {
            "name, OS and kernel not disclosed (server without --disclose-host)".into()
        }
    }

    /// The kernel, or "not disclosed".
    pub fn kernel_or_note(&self) -> String {
        if self.disclosed() { self.kernel.clone() } else { "not disclosed".into() }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct SocketInfo {
    /// TCP_MAXSEG of the first load flow, bytes.
    pub mss: u32,
    /// SO_SNDBUF / SO_RCVBUF as reported by the kernel (doubled value), bytes; 0 = autotuned default untouched.
    pub sndbuf: u32,
    pub rcvbuf: u32,
    /// Whether the engine set buffer sizes (false = kernel autotuning).
    pub buffers_set: bool,
    /// Whether the TCP load receivers copied the data to user space; false =
    /// the kernel discarded it (MSG_TRUNC). Results from before this field
    /// copied.
    #[serde(default = "copied_before")]
    pub rx_copy: bool,
}

fn copied_before() -> bool {
    true
}

impl SocketInfo {
    /// What the TCP load receivers did with the data, for reports.
    pub fn receive_mode(&self) -> &'static str {
        if self.rx_copy {
            "copied to user space"
        } else {
            "discarded by the kernel (MSG_TRUNC)"
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct ClockOffset {
    /// Method, human readable.
    pub method: String,
    /// Server clock minus client clock at the test start, nanoseconds.
    pub offset_ns: i64,
    /// Estimated drift, parts per million (server relative to client).
    pub drift_ppm: f64,
    /// Uncertainty bound: half of the minimum RTT used, nanoseconds.
    pub uncertainty_ns: u64,
    /// Number of probe exchanges the estimate used.
    pub samples_used: u32,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// client -> server
    Up,
    /// server -> client
    Down,
}

bloatlab_model::words!(Direction, "a direction", Up = "up", Down = "down");

/// One phase of a test: the idle baseline or one load scenario.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Phase {
    /// "idle" or the scenario name, e.g. "4u4d".
    pub name: String,
    pub uploads: u32,
    pub downloads: u32,
    /// Phase start / end on the test clock, ns.
    pub start_ns: u64,
    pub end_ns: u64,
    pub flows: Vec<Flow>,
    /// UDP probes to the server, one per scheduled send.
    pub probes: Vec<Probe>,
    /// TCP request/response exchanges on their own connection.
    pub rr: Vec<RrSample>,
    /// UDP probes to the witness host, when one was given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub witness_probes: Vec<Probe>,
    /// Pings to other hosts (--ping, --tcp-ping), one series per target.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pings: Vec<PingSeries>,
    /// UDP probes marked with each `--dscp` class (to the server, answered
    /// in the same class), one series per distinct class.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub class_probes: Vec<ClassProbes>,
    pub summary: Summary,
}

/// The probes of one DSCP class within a phase.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct ClassProbes {
    pub dscp: u8,
    pub probes: Vec<Probe>,
}

/// One DSCP class during one phase (`--dscp`): its flows' goodput and its
/// probes' latency (`metrics::classes::class_summaries`), as flent's RRUL
/// reports each class.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct ClassSummary {
    pub dscp: u8,
    /// The class's name (BE, BK, CS5, EF, ...) or its number.
    pub class: String,
    pub upload_flows: u32,
    pub download_flows: u32,
    /// Steady goodput of the class's flows, bits/s (the phase's rule).
    pub upload_bps: f64,
    pub download_bps: f64,
    /// TCP retransmits of the class's flows.
    pub retransmits: u64,
    /// The class's marked UDP probes (RTT, loss).
    pub latency: LatencyStats,
    /// latency.p50 - the class's idle p50, ms.
    pub added_latency_ms: Option<f64>,
    /// One-way delay medians of the class's probes, ms.
    pub owd_up_p50_ms: Option<f64>,
    pub owd_down_p50_ms: Option<f64>,
}

/// The pings of one target within a phase.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct PingSeries {
    /// "icmp HOST" or "tcp HOST:PORT".
    pub target: String,
    pub samples: Vec<PingSample>,
}

/// One ping: sent at `t_ns` (test clock); its round trip, null = lost.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct PingSample {
    pub t_ns: u64,
    pub rtt_ns: Option<u64>,
}

/// A ping target's latency in a phase.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct PingSummary {
    pub target: String,
    pub latency: LatencyStats,
    /// latency.p50 - the same target's idle p50, ms.
    pub added_latency_ms: Option<f64>,
}

/// A ping target as run: what was asked, the address pinged, and how.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct PingInfo {
    pub target: String,
    pub address: String,
    /// "unprivileged ICMP socket", "raw ICMP socket" or "TCP connect".
    pub method: String,
    pub interval_ms: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Flow {
    pub id: u32,
    pub direction: Direction,
    /// Cumulative application bytes delivered at the receiver.
    pub goodput: Vec<GoodputSample>,
    /// TCP_INFO of the sending socket (client for up, server for down).
    pub tcp_info: Vec<TcpInfoSample>,
    /// Total bytes delivered at the receiver.
    pub bytes: u64,
    /// Longest gap between data arrivals at the receiver after the first byte, ns.
    pub max_gap_ns: u64,
    /// When the longest gap ended, test clock ns.
    pub max_gap_at_ns: u64,
    /// DSCP the flow's packets carried (`--dscp`); absent = unmarked.
    #[serde(default, skip_serializing_if = "is_zero_u8")]
    pub dscp: u8,
    /// A UDP flow at a target rate (`--udp`): what was sent and what arrived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpStats>,
}

/// A UDP load flow's delivery: sequence-numbered datagrams at a target rate.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
pub struct UdpStats {
    /// The sender's target rate (datagram payload bits per second).
    pub target_bps: f64,
    /// UDP payload of each datagram, bytes.
    pub payload_bytes: u32,
    /// Datagrams the sender sent, and the receiver received (distinct sequence numbers).
    pub sent: u64,
    pub received: u64,
    /// sent - received (never negative).
    pub lost: u64,
    /// lost / sent x 100.
    pub loss_pct: f64,
    /// Datagrams that arrived after a later one.
    pub out_of_order: u64,
    /// RFC 3550 interarrival jitter at the end of the flow, ms.
    pub jitter_ms: f64,
}

fn is_zero_u8(v: &u8) -> bool {
    *v == 0
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct GoodputSample {
    pub t_ns: u64,
    /// Cumulative bytes received by this flow at `t_ns`.
    pub bytes: u64,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
pub struct TcpInfoSample {
    pub t_ns: u64,
    /// "client" or "server": where the socket lives.
    #[serde(default)]
    pub side: Side,
    pub cwnd: u32,
    pub ssthresh: u32,
    pub srtt_us: u32,
    pub rttvar_us: u32,
    pub total_retrans: u32,
    pub lost: u32,
    pub unacked: u32,
    /// Segments the peer has selectively acknowledged beyond a hole (tcpi_sacked).
    #[serde(default)]
    pub sacked: u32,
    pub snd_mss: u32,
    /// bits per second
    pub delivery_rate_bps: u64,
    pub pacing_rate_bps: u64,
    pub bytes_acked: u64,
    pub busy_time_us: u64,
    pub rwnd_limited_us: u64,
    pub sndbuf_limited_us: u64,
    pub ca_state: u8,
}

impl TcpInfoSample {
    /// Payload bytes the peer holds: cumulatively acknowledged plus the
    /// segments it has selectively acknowledged beyond a hole (sacked x
    /// MSS). Acknowledged bytes alone stall while a loss is repaired and
    /// then jump by everything SACKed meanwhile (a 250 ms window read 33
    /// Mbit/s through a 10 Mbit/s link); counted this way, data counts when
    /// it arrives. For live rates; goodput is the receiver's count.
    pub fn delivered_bytes(&self) -> u64 {
        self.bytes_acked + self.sacked as u64 * self.snd_mss as u64
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    #[default]
    Client,
    Server,
}

/// One UDP probe. Lost probes stay in the list with `rtt_ns: null`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Probe {
    pub seq: u32,
    /// Client send time, test clock ns.
    pub t_ns: u64,
    /// Round-trip time minus the server's hold time, ns; null = lost.
    pub rtt_ns: Option<u64>,
    /// Server receive time, server clock, Unix ns (null = lost).
    #[serde(default)]
    pub server_rx_unix_ns: Option<u64>,
    /// One-way delays from the clock-offset estimate, ns (may be slightly
    /// negative within the offset uncertainty).
    #[serde(default)]
    pub owd_up_ns: Option<i64>,
    #[serde(default)]
    pub owd_down_ns: Option<i64>,
}

/// One TCP request/response exchange.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct RrSample {
    pub seq: u32,
    pub t_ns: u64,
    /// Time from request write to full reply read, ns. For an exchange still
    /// unanswered when the phase ended: the time it had been waiting.
    pub rtt_ns: u64,
    /// False when the reply had not arrived by the end of the phase.
    pub completed: bool,
}

/// Ping-style and percentile latency statistics, milliseconds.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
pub struct LatencyStats {
    pub sent: u32,
    pub received: u32,
    pub lost: u32,
    pub loss_pct: f64,
    pub min_ms: f64,
    pub avg_ms: f64,
    pub max_ms: f64,
    pub mdev_ms: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Summary {
    /// Sum over upload flows, steady part, bits/s.
    pub upload_bps: f64,
    pub download_bps: f64,
    /// Per flow, same order as `flows`, bits/s.
    pub flow_bps: Vec<f64>,
    /// Round-trip latency of the UDP probes to the server.
    pub latency: LatencyStats,
    /// `loaded_p50_ms` - idle p50, ms (null for the idle phase or without
    /// baseline).
    pub added_latency_ms: Option<f64>,
    /// The median round trip of the phase's loaded part, ms: its probes
    /// answered from `loaded_from_s` on (`metadata.latency_rule`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loaded_p50_ms: Option<f64>,
    /// Where the loaded part began, s from the phase's start: the ramp
    /// before it (the load filling the queue) is left out of
    /// `loaded_p50_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loaded_from_s: Option<f64>,
    /// The probes' round trip was still rising when the phase ended
    /// (`metrics::settle`, the rule in `model::SETTLE_RULE`): the queue had not
    /// shown its size, and `added_latency_ms` is a lower bound.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub still_rising: bool,
    /// When the round trip had stopped rising, s from the phase's start
    /// (null: it never did, or the phase was too short to tell).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settled_after_s: Option<f64>,
    /// Once latency had stopped rising: the highest one-second median round
    /// trip of the phase, ms (the level the queue rose to under this load).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settled_p50_ms: Option<f64>,
    /// A browser test: the most the page's probe thread ran late during the
    /// phase, ms (its 5 ms timer; absent: never more than 1 ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_lag_max_ms: Option<f64>,
    /// A browser test: probes whose answer the page itself may have held
    /// beyond 5 ms (`metrics::page`), left out of `latency` and every figure
    /// from it.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub page_delayed_probes: u32,
    /// UDP probes to the witness host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub witness_latency: Option<LatencyStats>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub witness_added_latency_ms: Option<f64>,
    /// Pings to other hosts, one per target.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pings: Vec<PingSummary>,
    pub owd_up_p50_ms: Option<f64>,
    pub owd_up_p99_ms: Option<f64>,
    pub owd_down_p50_ms: Option<f64>,
    pub owd_down_p99_ms: Option<f64>,
    /// Worst TCP request/response round trip (including loss recovery), ms.
    pub responsiveness_ms: Option<f64>,
    /// 1000 / responsiveness_ms.
    pub responsiveness_hz: Option<f64>,
    /// Longest arrival gap of the worst flow, ms.
    pub smoothness_ms: Option<f64>,
    pub smoothness_hz: Option<f64>,
    /// RPM of the UDP probes: 60000 / (95% single-sided trimmed mean RTT ms).
    pub rpm: Option<f64>,
    /// RPM of the TCP request/response exchanges, same aggregation.
    pub rr_rpm: Option<f64>,
    /// The TCP request/response exchanges' added latency: their median
    /// round trip over the phase's loaded part minus idle's, where each had
    /// at least 20 answers (`engine::summarize::RR_ADDED_MIN_ANSWERS`). A
    /// browser times them with its network stack's stamps, so against
    /// `added_latency_ms` they show the delay its own threads added to
    /// the UDP probes (`metrics::grade`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rr_added_latency_ms: Option<f64>,
    /// `added_latency_ms` minus `rr_added_latency_ms`, where both are: how
    /// much more the UDP probes read than the request/response exchanges.
    /// In a browser's result, the delay its own threads added to the UDP
    /// probes (the page's notes and `metrics::grade` read it); about 0 for
    /// `bloatlab test` through a FIFO.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp_over_rr_ms: Option<f64>,
    /// goodput x 30 days in GB (1e9 bytes).
    pub upload_gb_per_month: f64,
    pub download_gb_per_month: f64,
    /// Retransmits over the phase summed over sending sockets.
    pub retransmits: u64,
    /// What each of a lab's queues did during this phase (lab results only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub queues: Vec<PhaseQueue>,
    /// The UDP load (`--udp`) per direction that carried it (`metrics::udp::direction_summaries`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub udp: Vec<UdpSummary>,
    /// Per DSCP class (`--dscp`), in the order the classes were given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<ClassSummary>,
}

fn is_zero_u32(v: &u32) -> bool {
    *v == 0
}

/// One direction's UDP load flows during one phase.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct UdpSummary {
    pub direction: Direction,
    pub flows: u32,
    /// The senders' target rates summed (payload bits/s): what was offered.
    pub offered_bps: f64,
    /// The payload the receivers got, over the phase's steady part (bits/s):
    /// the direction's goodput.
    pub received_bps: f64,
    pub sent: u64,
    pub received: u64,
    pub lost: u64,
    /// lost / sent x 100.
    pub loss_pct: f64,
    pub out_of_order: u64,
    /// RFC 3550 jitter, the largest of the direction's flows, ms.
    pub jitter_ms: f64,
}

/// One lab queue during one phase (`metrics::queue::phase_queue`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct PhaseQueue {
    /// As the queue's series: "bottleneck-up", "bottleneck-down", "sender-local".
    pub role: String,
    pub location: String,
    pub qdisc: String,
    /// Packets dropped during the phase.
    pub drops: u64,
    /// The largest backlog sampled during the phase.
    pub max_backlog_packets: u64,
    pub max_backlog_bytes: u64,
    /// The rate the queue drained at while it held data (median of the
    /// sampled intervals that began and ended non-empty), bits/s.
    pub drain_bps: Option<f64>,
    /// max_backlog_bytes x 8 / drain_bps: the delay the largest backlog meant, ms.
    pub max_delay_ms: Option<f64>,
    /// Share of the configured rate the queue sent during the phase's
    /// steady part (the goodput window), percent.
    pub link_use_pct: Option<f64>,
}

/// Seed 003's headline: capacity both ways, worst responsiveness, worst smoothness.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Headline {
    /// Highest upload goodput over scenarios, bits/s.
    pub upload_capacity_bps: f64,
    pub download_capacity_bps: f64,
    /// Lowest responsiveness over loaded scenarios, Hz.
    pub link_responsiveness_hz: Option<f64>,
    /// Lowest smoothness over loaded scenarios, Hz.
    pub flow_smoothness_hz: Option<f64>,
    /// Idle p50 RTT and worst loaded p50 RTT, ms.
    pub idle_latency_ms: Option<f64>,
    pub loaded_latency_ms: Option<f64>,
    /// Largest added latency over scenarios, ms.
    pub max_added_latency_ms: Option<f64>,
    /// Lowest RPM over loaded scenarios.
    pub rpm: Option<f64>,
    /// The grade, A+ .. F (`metrics::grade`: the worst scenario's added
    /// latency, capped by lost goodput and probes); absent when ungraded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grade: Option<String>,
    /// Probes lost, percent: the worst loaded phase's; a latency-only
    /// round's own (its pings, or a server's UDP probes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_pct: Option<f64>,
    /// Bytes the test moved, both ways (its flows', an RPM run's stages').
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub bytes_moved: u64,
    /// A phase (or an RPM stage) loaded the download / upload: its
    /// capacity was measured (else the capacity's 0 means nothing).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub download_measured: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub upload_measured: bool,
}

fn is_zero_u64(v: &u64) -> bool {
    *v == 0
}

/// Added by `bloatlab lab`: the lab's full configuration and queue observations.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct LabInfo {
    /// "kernel" or "emulator".
    pub backend: String,
    /// The full lab configuration, resolved (rate, queue, placement, delay, ...).
    pub config: LabRecord,
    /// Kernel release of the machine running the lab.
    pub kernel: String,
    /// Queue disciplines this kernel offers / lacks, as probed.
    pub qdiscs_available: Vec<String>,
    pub qdiscs_missing: Vec<String>,
    /// Segmentation offloads (TSO/GSO/GRO) state on lab interfaces: "off" or "on".
    pub offloads: String,
    /// Namespaces and addresses used.
    pub hosts: Vec<LabHost>,
    /// Time series of queues (bottleneck, sender-local), sampled at the goodput cadence.
    pub queues: Vec<QueueSeries>,
    /// Emulator counters (present for backend "emulator").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emulator: Option<serde_json::Value>,
    /// Analytic maximum queueing delay of the bottleneck (limit x packet size x 8 / rate), ms, per direction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analytic_queue_delay_up_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analytic_queue_delay_down_ms: Option<f64>,
}

/// The resolved configuration a lab result was measured with (`lab.config`).
/// Every field has a default, so results of earlier versions still read.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(default)]
pub struct LabRecord {
    /// The lab's id (6 hex digits, in its namespace names).
    pub id: String,
    /// "kernel" or "emulator".
    pub backend: String,
    /// "router" or "local".
    pub placement: String,
    /// Rates as tables show them ("10mbit", "none", "trace NAME (12mbit mean)") and in bit/s (a trace's mean).
    pub rate_up: String,
    pub rate_down: String,
    pub rate_up_bps: Option<f64>,
    pub rate_down_bps: Option<f64>,
    pub trace_up: Option<std::path::PathBuf>,
    pub trace_down: Option<std::path::PathBuf>,
    /// The bottleneck queue's label (`fifo:100`, `up-fifo:100+down-fifo:10`, a --qdisc's text).
    pub queue: String,
    /// The queue of both directions (`queue` unless overridden), typed; null with a kernel --qdisc.
    #[serde(deserialize_with = "lenient")]
    pub queue_spec: Option<QueueSpec>,
    pub queue_up: Option<String>,
    pub queue_down: Option<String>,
    #[serde(deserialize_with = "lenient")]
    pub queue_up_spec: Option<QueueSpec>,
    #[serde(deserialize_with = "lenient")]
    pub queue_down_spec: Option<QueueSpec>,
    /// A kernel qdisc given with --qdisc, "KIND ARGS".
    pub qdisc: Option<String>,
    /// "htb" or "tbf".
    pub shaper: String,
    pub txqueuelen: Option<u32>,
    /// The bottleneck devices, "namespace/interface".
    pub bottleneck_up: Option<String>,
    pub bottleneck_down: Option<String>,
    /// "off" or "on".
    pub offloads: String,
    /// The congestion control the test's flows used.
    pub cc: String,
    pub tcp_mem_max: u64,
    pub ecn: Option<String>,
    pub delay_ms: Option<f64>,
    /// Jitter amount (uniform +/- or a normal standard deviation), ms;
    /// `jitter_model` spells the distribution as `--jitter` takes it.
    pub jitter_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter_model: Option<String>,
    /// Long-run loss probability per direction; `loss_model` spells the
    /// model as `--loss` takes it (e.g. a Gilbert-Elliott chain).
    pub loss: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_model: Option<String>,
    pub ip_version: u8,
    pub port: u16,
    /// The `bloatlab test` options given after `--`, as written.
    pub engine_args: Vec<String>,
    pub lab_command: Vec<String>,
    /// Settings the lab applied (sysctls per namespace, offloads per interface, ...).
    pub applied: serde_json::Value,
    /// Why a local bottleneck stays short for TCP (empty on the router).
    pub tsq_note: String,
    /// CPU the hypervisor took during the run, percent.
    pub cpu_steal_pct: Option<f64>,
    pub queue_sampler: Option<QueueSampler>,
    /// The emulator's configuration (backend "emulator").
    pub emulator: Option<EmulatorRecord>,
}

/// How the lab sampled its kernel queues.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct QueueSampler {
    pub method: String,
    pub interval_ms: f64,
}

/// The emulator's configuration as JSON and in words.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct EmulatorRecord {
    pub config: serde_json::Value,
    pub describe: String,
}

/// A queue spec, or None when the document holds one this version cannot
/// read (results written before the one queue model).
fn lenient<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<QueueSpec>, D::Error> {
    let v = Option::<serde_json::Value>::deserialize(d)?;
    Ok(v.and_then(|v| serde_json::from_value(v).ok()))
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct LabHost {
    pub role: String,
    pub netns: String,
    pub addresses: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct QueueSeries {
    /// e.g. "bottleneck-up", "bottleneck-down", "sender-local".
    pub role: String,
    /// namespace/interface, e.g. "blab-1a2b-router/r-srv".
    pub location: String,
    /// qdisc kind as the kernel (or emulator) names it, e.g. "pfifo".
    pub qdisc: String,
    pub samples: Vec<QueueSample>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
pub struct QueueSample {
    /// Test clock ns (client clock).
    pub t_ns: u64,
    pub backlog_packets: u64,
    pub backlog_bytes: u64,
    /// Cumulative counters since the qdisc was created.
    pub drops: u64,
    pub overlimits: u64,
    pub sent_packets: u64,
    pub sent_bytes: u64,
    #[serde(default)]
    pub requeues: u64,
}

impl TestResult {
    /// Parse a result document, checking name and version with clear errors.
    pub fn from_json(text: &str) -> Result<TestResult, String> {
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        match v.get("schema").and_then(|s| s.as_str()) {
            Some(SCHEMA_NAME) => {}
            Some(other) => return Err(format!("not a bloatlab result (schema \"{other}\")")),
            None => return Err("not a bloatlab result (no \"schema\" field)".into()),
        }
        let ver = v.get("schema_version").and_then(|s| s.as_u64()).unwrap_or(0);
        if ver as u32 > SCHEMA_VERSION {
            return Err(format!(
                "result schema version {ver} is newer than this bloatlab understands ({SCHEMA_VERSION}); upgrade bloatlab"
            ));
        }
        serde_json::from_value(v).map_err(|e| format!("malformed bloatlab result: {e}"))
    }

    pub fn read_file(path: &std::path::Path) -> Result<TestResult, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Self::from_json(&text).map_err(|e| format!("{}: {e}", path.display()))
    }
}

#[cfg(test)]
mod host_info_tests {
    use super::HostInfo;

    #[test]
    fn an_undisclosed_server_is_said_to_be_one() {
        let open = HostInfo { hostname: "lab-server".into(), os: "Linux x86_64".into(), kernel: "6.1.0".into(), ..Default::default() };
        assert_eq!(open.identity(), "lab-server — Linux x86_64 6.1.0");
        assert_eq!(open.kernel_or_note(), "6.1.0");
        let hidden = HostInfo { bloatlab_version: "0.1.0".into(), default_cc: "bbr".into(), ..Default::default() };
        assert!(!hidden.disclosed());
        assert!(hidden.identity().contains("not disclosed") && hidden.identity().contains("--disclose-host"));
        assert_eq!(hidden.kernel_or_note(), "not disclosed");
    }
}
