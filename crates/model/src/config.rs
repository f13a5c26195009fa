//! The configurations processes exchange: what `bloatlab test` runs
//! ([`TestConfig`]; its options are defined in [`crate::options`]), what `bloatlab server` serves ([`ServerConfig`]), and
//! the [`Job`] a lab hands a child process in its namespace. All serde; each
//! checks itself with `validate` before anything runs.
use crate::dscp::Dscp;
use crate::scenario::Scenario;
use crate::secret::Secret;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// The TCP and UDP port of a bloatlab server.
pub const DEFAULT_PORT: u16 = 9770;
/// UDP probe sizes: the 48-byte header at least, one unfragmented datagram at most.
pub const PROBE_MIN_BYTES: usize = 48;
pub const PROBE_MAX_BYTES: usize = 1472;
/// With a shared secret a probe carries a 16-byte HMAC after the header.
pub const PROBE_AUTH_MIN_BYTES: usize = 64;
/// `bloatlab test`'s default scenario matrix.
pub const DEFAULT_SCENARIOS: &str = "0u1d,1u0d,1u1d,0u4d,4u0d,4u4d,16u16d";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    #[default]
    Any,
    V4,
    V6,
}

/// Everything one `bloatlab test` run does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestConfig {
    /// "host", "host:port", "[v6]:port" or "v6".
    pub server: String,
    pub port: u16,
    pub family: Family,
    pub scenarios: Vec<Scenario>,
    pub duration: Duration,
    pub idle: Duration,
    /// Pause between scenarios so the bottleneck queue drains.
    pub pause: Duration,
    pub probe_interval: Duration,
    pub probe_size: usize,
    pub sample_interval: Duration,
    /// Congestion control of the load flows on both ends; empty = each host's default.
    pub cc: String,
    /// SO_SNDBUF/SO_RCVBUF of the load flows on both ends, bytes; 0 = autotuning.
    pub socket_buffer: u32,
    /// TCP load receivers (both ends) copy the data to user space as an
    /// application would; false = the kernel discards it (MSG_TRUNC).
    #[serde(default)]
    pub rx_copy: bool,
    pub witness: Option<String>,
    /// DSCP classes of the load flows: each direction's flows take them in
    /// turn (flow i gets `dscp[i % n]`); empty = unmarked.
    #[serde(default)]
    pub dscp: Vec<Dscp>,
    /// UDP load instead of bulk TCP: every load flow sends datagrams at this
    /// target rate, bits/s of payload (iperf3's `-u -b`).
    #[serde(default)]
    pub udp_rate_bps: Option<u64>,
    /// Payload of each UDP load datagram, bytes (with `udp_rate_bps`).
    #[serde(default = "default_udp_size")]
    pub udp_size: u32,
    /// The command line, recorded in the result.
    pub command: Vec<String>,
    pub connect_timeout: Duration,
    /// The server's shared secret (`--secret-file`): answer its challenge and
    /// sign the probes.
    #[serde(default)]
    pub secret: Option<Secret>,
    /// Hosts probed by ICMP echo or TCP connect while the test runs.
    #[serde(default)]
    pub pings: Vec<crate::PingTarget>,
    /// How often each of `pings` is probed.
    #[serde(default = "default_ping_interval")]
    pub ping_interval: Duration,
    /// After the scenarios, the IETF responsiveness method against the
    /// server's RPM endpoints, these stages (`--rpm`); empty = not run.
    #[serde(default)]
    pub rpm: Vec<crate::RpmDirection>,
    /// `--scenarios auto`: ramp the flows per direction instead of running
    /// `scenarios` (which is then empty).
    #[serde(default)]
    pub ramp: Option<crate::scenario::Ramp>,
    /// Run each scenario at least `duration` and then on until the probes'
    /// round trip stopped rising (`SETTLE_RULE`), at most this long
    /// (`--until-settled`); None = every scenario lasts `duration`.
    #[serde(default)]
    pub until_settled: Option<Duration>,
    /// The named test plan these settings came from (`--profile`), if any.
    #[serde(default)]
    pub profile: Option<crate::plan::Profile>,
    /// The household test's applications (`--profile household`): a video
    /// call and a stream run beside the last scenario's flows (one each
    /// way: the bulk update), whose probes are the game, for
    /// [`crate::plan::HOUSEHOLD_LENGTH`]. Derived from `profile`, not stored.
    #[serde(skip)]
    pub household: Option<crate::plan::HouseholdPlan>,
}

fn default_udp_size() -> u32 {
    UDP_PAYLOAD_DEFAULT
}

fn default_ping_interval() -> Duration {
    crate::DEFAULT_PING_INTERVAL
}

impl Default for TestConfig {
    fn default() -> Self {
        TestConfig {
            server: "127.0.0.1".into(),
            port: DEFAULT_PORT,
            family: Family::Any,
            scenarios: Scenario::parse_list(DEFAULT_SCENARIOS).expect("default scenarios parse"),
            duration: Duration::from_secs(5),
            idle: Duration::from_secs(2),
            pause: Duration::from_millis(1000),
            probe_interval: Duration::from_millis(10),
            probe_size: 64,
            sample_interval: Duration::from_millis(100),
            cc: String::new(),
            socket_buffer: 0,
            rx_copy: false,
            witness: None,
            dscp: vec![],
            udp_rate_bps: None,
            udp_size: UDP_PAYLOAD_DEFAULT,
            command: vec![],
            connect_timeout: Duration::from_secs(5),
            secret: None,
            pings: vec![],
            ping_interval: crate::DEFAULT_PING_INTERVAL,
            rpm: vec![],
            ramp: None,
            until_settled: None,
            profile: None,
            household: None,
        }
    }
}

/// A congestion control name as the kernel spells them (letters, digits, `_`); empty = default.
pub fn check_cc(cc: &str) -> Result<(), String> {
    if !cc.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(format!("`{cc}` is not a congestion control name (e.g. cubic, bbr, reno)"));
    }
    Ok(())
}

/// UDP load: each flow sends `payload`-byte datagrams at `rate_bps` (payload bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct UdpLoad {
    pub rate_bps: u64,
    pub payload: u32,
}

/// Datagram payloads a UDP flow may use: the 24-byte header at least, one
/// unfragmented IPv4 datagram at most.
pub const UDP_PAYLOAD_MIN: u32 = 64;
pub const UDP_PAYLOAD_MAX: u32 = 1472;
pub const UDP_PAYLOAD_DEFAULT: u32 = 1400;

impl UdpLoad {
    pub fn validate(&self) -> Result<(), String> {
        if !(UDP_PAYLOAD_MIN..=UDP_PAYLOAD_MAX).contains(&self.payload) {
            return Err(format!("--udp-size must be {UDP_PAYLOAD_MIN}..{UDP_PAYLOAD_MAX} bytes"));
        }
        if self.rate_bps < 8 * self.payload as u64 {
            return Err("--udp rate is below one datagram per second".into());
        }
        if self.rate_bps > 100_000_000_000 {
            return Err("--udp rate is above 100gbit per flow".into());
        }
        Ok(())
    }

    /// Nanoseconds between datagrams.
    pub fn interval_ns(&self) -> u64 {
        (self.payload as u64 * 8 * 1_000_000_000 / self.rate_bps).max(1)
    }
}

/// A port: 1-65535 (0 is no server's), one wording everywhere.
pub fn parse_port(p: &str) -> Result<u16, String> {
    match p.trim().parse::<u64>() {
        Ok(n) if (1..=65535).contains(&n) => Ok(n as u16),
        _ => Err(format!("`{p}` is not a port (1-65535)")),
    }
}

/// Split a server spelling into host and port: `host`, `host:port`, an IPv6
/// address, `[v6]`, `[v6]:port`. A port must be 1..65535.
///
/// The one grammar of a host and port: servers (`test`, `tune`), monitor
/// targets and `--tcp-ping`s all read it here.
pub fn split_host_port(spec: &str, default_port: u16) -> Result<(String, u16), String> {
    let s = spec.trim();
    if s.is_empty() {
        return Err("empty host name".into());
    }
    if s.contains(char::is_whitespace) || s.contains('/') {
        return Err(format!("\"{spec}\" is not HOST[:PORT]"));
    }
    let port = |p: &str| -> Result<u16, String> { parse_port(p).map_err(|e| format!("\"{spec}\": {e}")) };
    if s.parse::<std::net::Ipv6Addr>().is_ok() {
        return Ok((s.to_string(), default_port));
    }
    if let Some(rest) = s.strip_prefix('[') {
        let (addr, after) = rest.split_once(']').ok_or_else(|| format!("\"{spec}\": `[` without `]`"))?;
        if addr.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(format!("\"{spec}\": `{addr}` is not an IPv6 address"));
        }
        return match after.strip_prefix(':') {
            Some(p) => Ok((addr.to_string(), port(p)?)),
            None if after.is_empty() => Ok((addr.to_string(), default_port)),
            None => Err(format!("\"{spec}\": unexpected `{after}` after the address")),
        };
    }
    match s.rsplit_once(':') {
        Some((h, p)) if !h.is_empty() && !h.contains(':') => Ok((h.to_string(), port(p)?)),
        Some(_) => Err(format!("\"{spec}\" is neither host[:port] nor an IPv6 address")),
        None => Ok((s.to_string(), default_port)),
    }
}

impl TestConfig {
    /// Check every value before anything is connected or written. Messages
    /// name the command-line option.
    pub fn validate(&self) -> Result<(), String> {
        match &self.ramp {
            Some(r) => r.validate().map_err(|e| format!("--scenarios {}: {e}", r.name()))?,
            None if self.scenarios.is_empty() => return Err("--scenarios: no scenarios given".into()),
            None => {}
        }
        if self.household.is_some() {
            if self.ramp.is_some() {
                return Err("--profile household runs its own phases: drop --scenarios auto".into());
            }
            // the server answers 8 probe streams: the probes, each class's, the call
            let classes = crate::Dscp::distinct(&self.dscp).len();
            if classes + 2 > 8 {
                return Err(format!("--profile household: {classes} distinct DSCP classes leave no probe stream for its call; at most 6"));
            }
        }
        if self.duration < Duration::from_millis(200) {
            return Err("--duration must be at least 200ms".into());
        }
        if self.duration > Duration::from_secs(86_400) || self.idle > Duration::from_secs(86_400) || self.pause > Duration::from_secs(3600) {
            return Err("--duration and --idle must be at most 1 day, --pause at most 1 hour".into());
        }
        if let Some(cap) = self.until_settled {
            if cap < self.duration {
                return Err(format!(
                    "--until-settled {} is shorter than --duration {}: a scenario runs at least --duration, then on until latency stopped rising, at most --until-settled",
                    crate::units::fmt_duration(cap),
                    crate::units::fmt_duration(self.duration)
                ));
            }
            if cap > Duration::from_secs(3600) {
                return Err("--until-settled must be at most 1 hour".into());
            }
        }
        if self.probe_interval < Duration::from_micros(100) || self.probe_interval > Duration::from_secs(10) {
            return Err("--probe-interval must be between 100us and 10s".into());
        }
        if self.sample_interval < Duration::from_millis(10) || self.sample_interval > Duration::from_secs(1) {
            return Err("--sample-interval must be between 10ms and 1s".into());
        }
        if !(PROBE_MIN_BYTES..=PROBE_MAX_BYTES).contains(&self.probe_size) {
            return Err(format!("--probe-size must be {PROBE_MIN_BYTES}..{PROBE_MAX_BYTES} bytes"));
        }
        if self.secret.is_some() && self.probe_size < PROBE_AUTH_MIN_BYTES {
            return Err(format!(
                "--probe-size {} leaves no room for the probe's HMAC: with --secret-file probes are at least {PROBE_AUTH_MIN_BYTES} bytes",
                self.probe_size
            ));
        }
        if self.socket_buffer > i32::MAX as u32 / 2 {
            return Err("--socket-buffer is too large (at most 1 GiB)".into());
        }
        check_cc(&self.cc).map_err(|e| format!("--cc: {e}"))?;
        match self.udp() {
            Some(u) => u.validate()?,
            None if self.udp_size != UDP_PAYLOAD_DEFAULT => return Err("--udp-size needs --udp (the rate of the UDP load)".into()),
            None => {}
        }
        split_host_port(&self.server, self.port)?;
        if let Some(w) = &self.witness {
            split_host_port(w, self.port).map_err(|e| format!("--witness: {e}"))?;
        }
        if self.pings.len() > 8 {
            return Err(format!("--ping / --tcp-ping: at most 8 targets ({} given)", self.pings.len()));
        }
        if !self.pings.is_empty() && (self.ping_interval < Duration::from_millis(10) || self.ping_interval > Duration::from_secs(10)) {
            return Err("--ping-interval must be between 10ms and 10s".into());
        }
        Ok(())
    }

    /// The UDP load, when the test sends UDP instead of TCP.
    pub fn udp(&self) -> Option<UdpLoad> {
        self.udp_rate_bps.map(|rate_bps| UdpLoad { rate_bps, payload: self.udp_size })
    }

    /// Longest scenario, in flows (a ramp's largest step).
    pub fn max_flows(&self) -> u32 {
        let ramp = self.ramp.map(|r| r.max_flows).unwrap_or(0);
        let segments = self.household.map(|h| h.segments_in(crate::plan::HOUSEHOLD_LENGTH)).unwrap_or(0);
        let last = self.scenarios.len().saturating_sub(1);
        self.scenarios.iter().enumerate().map(|(i, s)| s.flows() + if i == last { segments } else { 0 }).max().unwrap_or(0).max(ramp)
    }

    /// How long one scenario may run (`until_settled`, else `duration`).
    pub fn phase_length(&self) -> crate::PhaseLength {
        crate::PhaseLength { min: self.duration, cap: self.until_settled.unwrap_or(self.duration).max(self.duration) }
    }

    /// Whether scenario `index` is the household test's phase (the last,
    /// with `household`).
    pub fn is_household_phase(&self, index: usize) -> bool {
        self.household.is_some() && self.ramp.is_none() && index + 1 == self.scenarios.len()
    }

    /// How long scenario `index` may run: the household phase its fixed
    /// length, the others [`TestConfig::phase_length`].
    pub fn phase_length_of(&self, index: usize) -> crate::PhaseLength {
        if self.is_household_phase(index) {
            crate::PhaseLength { min: crate::plan::HOUSEHOLD_LENGTH, cap: crate::plan::HOUSEHOLD_LENGTH }
        } else {
            self.phase_length()
        }
    }

    /// The longest pause between scenarios: `pause`, or with phases that run
    /// until latency stopped rising, until the queue drained (`DRAIN_RULE`).
    pub fn pause_cap(&self) -> Duration {
        if self.phase_length().adaptive() {
            self.pause.max(crate::DRAIN_RULE.cap)
        } else {
            self.pause
        }
    }

    /// The most scenarios this test can run.
    pub fn max_scenarios(&self) -> usize {
        self.ramp.map(|r| r.max_steps()).unwrap_or(self.scenarios.len())
    }
}

/// What `bloatlab server` serves, and its limits (docs/server.md lists them
/// with their defaults).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ServerConfig {
    /// Addresses to bind (port 0 = pick one; TCP and UDP share it); empty = `[::]:9770`.
    pub binds: Vec<SocketAddr>,
    pub max_duration: Duration,
    pub max_flows: u32,
    pub max_tests: u32,
    /// How long a control connection may stay silent beyond the scenario it runs.
    pub idle_timeout: Duration,
    pub quiet: bool,
    /// Open TCP connections of any kind at once, checked before a thread is
    /// given to a connection.
    pub max_conns: u32,
    /// Open connections from one source (an IPv4 address or an IPv6 /64).
    pub max_conns_per_source: u32,
    /// Tests (witness sessions included) from one source at once.
    pub max_tests_per_source: u32,
    /// Require this shared secret (HMAC-SHA256 challenge on every connection,
    /// an HMAC on every UDP probe); None = open server.
    pub secret: Option<Secret>,
    /// Tell clients the server's hostname and kernel (off: only the bloatlab
    /// version and the congestion controls it offers).
    pub disclose_host: bool,
    /// Congestion controls clients may ask for; empty = any the kernel allows.
    pub allowed_cc: Vec<String>,
    /// Largest SO_SNDBUF/SO_RCVBUF a client may ask for, bytes (0 = clients may
    /// not set buffers; the kernel's autotuning always applies).
    pub max_socket_buffer: u32,
    /// Also serve the IETF responsiveness (RPM) endpoints over HTTPS.
    pub rpm: Option<crate::RpmServe>,
    /// Also serve the browser test (plain HTTP, and on the HTTPS port when
    /// the RPM endpoints are served).
    #[serde(default)]
    pub web: Option<crate::WebServe>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            binds: vec![],
            max_duration: Duration::from_secs(300),
            max_flows: 64,
            max_tests: 8,
            idle_timeout: Duration::from_secs(15),
            quiet: false,
            max_conns: 1024,
            max_conns_per_source: 160,
            max_tests_per_source: 4,
            secret: None,
            disclose_host: false,
            allowed_cc: vec![],
            max_socket_buffer: 64 << 20,
            rpm: None,
            web: None,
        }
    }
}

impl ServerConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.max_flows == 0 || self.max_tests == 0 {
            return Err("--max-flows and --max-tests must be at least 1".into());
        }
        if self.max_duration.is_zero() || self.idle_timeout.is_zero() {
            return Err("--max-duration and --idle-timeout must be greater than 0".into());
        }
        if self.max_conns == 0 || self.max_conns_per_source == 0 || self.max_tests_per_source == 0 {
            return Err("--max-conns, --max-conns-per-source and --max-tests-per-source must be at least 1".into());
        }
        // One test needs its control connection, one request/response
        // connection and its flows.
        let per_test = self.max_flows.saturating_add(2);
        if self.max_conns_per_source < per_test {
            return Err(format!(
                "--max-conns-per-source {} cannot hold one test of --max-flows {} (it needs {per_test}: the flows, the control and the request/response connections)",
                self.max_conns_per_source, self.max_flows
            ));
        }
        if self.max_conns < self.max_conns_per_source {
            return Err(format!("--max-conns {} is below --max-conns-per-source {}", self.max_conns, self.max_conns_per_source));
        }
        for cc in &self.allowed_cc {
            if cc.is_empty() {
                return Err("--allow-cc: an empty name".into());
            }
            check_cc(cc).map_err(|e| format!("--allow-cc: {e}"))?;
        }
        if let Some(r) = &self.rpm {
            r.validate()?;
        }
        if let Some(w) = &self.web {
            if let Some(r) = &self.rpm {
                if w.port != 0 && w.port == r.port {
                    return Err(format!("--web-port {} is the RPM port too (--rpm-port): the browser test is served on both, plain HTTP on --web-port", w.port));
                }
            }
        }
        Ok(())
    }
}

/// Work a lab hands a `bloatlab` child process inside one of its namespaces,
/// as a JSON file (`bloatlab job FILE`): a typed configuration, never an
/// argument list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "job", rename_all = "snake_case")]
pub enum Job {
    /// Serve tests; print the "listening" line on stdout once bound.
    Server { config: ServerConfig },
    /// Run one test and write its result JSON to `json` (also when it ends
    /// early); with `progress`, keep a [`Live`] status there (JSON, replaced
    /// a few times a second) for the lab's progress display.
    Test {
        config: Box<TestConfig>,
        json: PathBuf,
        quiet: bool,
        #[serde(default)]
        progress: Option<PathBuf>,
    },
    /// Run the IETF responsiveness method against an RPM server and write
    /// its result, as a result of the test schema
    /// (`bloatlab_rpm::result::test_result`), to `json`.
    Rpm { config: Box<crate::RpmConfig>, json: PathBuf },
}

/// What a running test is doing: for progress displays and interval lines.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Live {
    pub phase: String,
    pub phase_index: usize,
    pub phases: usize,
    pub elapsed_s: f64,
    pub phase_len_s: f64,
    pub up_bps: f64,
    pub down_bps: f64,
    pub rtt_ms: f64,
    /// Bytes carried so far in this phase (upload: acknowledged by the
    /// server; download: received), for interval reports.
    pub up_bytes: u64,
    pub down_bytes: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate() {
        let t = TestConfig::default();
        t.validate().unwrap();
        assert_eq!(t.scenarios.len(), 7);
        assert_eq!(t.max_flows(), 32);
        let t = TestConfig { udp_size: 200, ..Default::default() };
        assert!(t.validate().unwrap_err().contains("--udp-size needs --udp"));
        let t = TestConfig { udp_size: 200, udp_rate_bps: Some(1_000_000), ..Default::default() };
        assert_eq!(t.udp(), Some(UdpLoad { rate_bps: 1_000_000, payload: 200 }));
    }

    #[test]
    fn bad_values_name_their_option() {
        let bad = |f: &dyn Fn(&mut TestConfig)| {
            let mut t = TestConfig::default();
            f(&mut t);
            t.validate().unwrap_err()
        };
        assert!(bad(&|t| t.duration = Duration::from_millis(10)).contains("--duration"));
        assert!(bad(&|t| t.probe_interval = Duration::from_secs(60)).contains("--probe-interval"));
        assert!(bad(&|t| t.sample_interval = Duration::from_millis(1)).contains("--sample-interval"));
        assert!(bad(&|t| t.probe_size = 20).contains("--probe-size"));
        assert!(bad(&|t| t.cc = "cu bic".into()).contains("--cc"));
        assert!(bad(&|t| t.scenarios.clear()).contains("--scenarios"));
        assert!(ServerConfig { max_tests: 0, ..Default::default() }.validate().is_err());
    }

    #[test]
    fn hosts_and_ports() {
        let ok = |s: &str| split_host_port(s, 9770).unwrap();
        assert_eq!(ok("example.net"), ("example.net".into(), 9770));
        assert_eq!(ok("127.0.0.1:80"), ("127.0.0.1".into(), 80));
        assert_eq!(ok("::1"), ("::1".into(), 9770));
        assert_eq!(ok("[::1]"), ("::1".into(), 9770));
        assert_eq!(ok("[fd00::2]:9000"), ("fd00::2".into(), 9000));
        let bad = |s: &str| split_host_port(s, 9770).unwrap_err();
        assert!(bad("127.0.0.1:70000").contains("`70000` is not a port (1-65535)"), "{}", bad("127.0.0.1:70000"));
        assert!(bad("h:0").contains("is not a port (1-65535)"));
        assert!(bad("foo:bar:baz").contains("neither host[:port] nor an IPv6 address"));
        assert!(bad("h/x").contains("not HOST[:PORT]"));
        assert!(bad("h:http").contains("`http` is not a port (1-65535)"));
        assert!(bad("[::1]:99999").contains("is not a port (1-65535)"));
        assert!(bad("[::1").contains("without"));
        assert!(bad("[x]:1").contains("not an IPv6 address"));
        assert!(bad("").contains("empty"));
        let t = TestConfig { server: "127.0.0.1:70000".into(), ..Default::default() };
        assert!(t.validate().unwrap_err().contains("is not a port (1-65535)"));
    }

    #[test]
    fn jobs_round_trip() {
        let j = Job::Test { config: Box::default(), json: "/tmp/r.json".into(), quiet: true, progress: Some("/tmp/p.json".into()) };
        let s = serde_json::to_string(&j).unwrap();
        assert!(s.starts_with("{\"job\":\"test\""), "{s}");
        assert_eq!(serde_json::from_str::<Job>(&s).unwrap(), j);
        let j = Job::Server { config: ServerConfig { binds: vec!["[::]:9770".parse().unwrap()], ..Default::default() } };
        assert_eq!(serde_json::from_str::<Job>(&serde_json::to_string(&j).unwrap()).unwrap(), j);
    }
}
