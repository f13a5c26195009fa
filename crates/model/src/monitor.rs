//! `bloatlab monitor`: what it watches, how often, and where it keeps what
//! it measured ([`MonitorConfig`], whose options are defined once in
//! [`MONITOR_OPTIONS`]: the command line and the config file both read them).
use crate::options::{one, Arity, Configurable, OptionDef, Shape};
use crate::units::{fmt_duration, parse_duration};
use crate::{PingKind, PingTarget, RpmConfig, TestConfig, DEFAULT_PORT};
use std::path::PathBuf;
use std::time::Duration;

/// Where results go when `--db` is not given.
pub const DEFAULT_MONITOR_DB: &str = "bloatlab-monitor.sqlite";

/// A target of the monitor. Loaded targets get a short loaded test on the
/// schedule, one at a time; latency-only targets are probed continuously
/// at a low rate, their probes kept as one run per round (smokeping-style).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MonitorTarget {
    /// A bloatlab server (`HOST[:PORT]`): `bloatlab test`'s short profile.
    Server {
        /// The host as given (a name, an IPv4 address, or an IPv6 address).
        host: String,
        port: u16,
    },
    /// An RPM server (`https://HOST[:PORT]/.well-known/nq`): the IETF
    /// responsiveness test, download then upload. A `#pin-sha256=HEX`
    /// fragment (never sent) pins the server's certificate.
    Rpm { url: String, pin_sha256: Option<String> },
    /// `ping:HOST` (ICMP echo) or `tcp:HOST:PORT` (TCP connect time): latency only.
    Ping(PingTarget),
    /// `udp:HOST[:PORT]`: a bloatlab server's UDP probes (RTT and one-way
    /// delays, in probe-only sessions): latency only.
    Probes { host: String, port: u16 },
}

const TARGET_FORMS: &str = "a target is HOST[:PORT] (a bloatlab server; [v6addr]:port for IPv6), https://HOST[:PORT]/.well-known/nq (an RPM server), ping:HOST, tcp:HOST:PORT or udp:HOST[:PORT] (latency only: ICMP, TCP connect, a bloatlab server's UDP probes)";

impl MonitorTarget {
    pub fn parse(s: &str) -> Result<MonitorTarget, String> {
        let s = s.trim();
        let form = TARGET_FORMS;
        if s.is_empty() {
            return Err(format!("an empty target; {form}"));
        }
        let lower = s.to_ascii_lowercase();
        if let Some(h) = lower.strip_prefix("ping:").map(|_| &s[5..]) {
            return PingTarget::icmp(h).map(MonitorTarget::Ping).map_err(|_| format!("`{s}`: ping:HOST takes a host name or IP address"));
        }
        if let Some(h) = lower.strip_prefix("tcp:").map(|_| &s[4..]) {
            return PingTarget::tcp(h).map(MonitorTarget::Ping).map_err(|e| format!("`{s}`: {}", e.split_once(": ").map(|x| x.1).unwrap_or(&e)));
        }
        if lower.starts_with("udp:") {
            let (host, port) = host_port(&s[4..]).map_err(|e| format!("`{s}`: {e}; udp:HOST[:PORT] names a bloatlab server"))?;
            return Ok(MonitorTarget::Probes { host, port });
        }
        if lower.starts_with("https://") || lower.starts_with("http://") {
            let (url, pin) = match s.split_once('#') {
                Some((u, f)) => {
                    let hex = f.strip_prefix("pin-sha256=").ok_or_else(|| format!("`{s}`: the only fragment an RPM target takes is #pin-sha256=HEX"))?;
                    let pin = crate::normalize_sha256(hex).ok_or_else(|| format!("`{s}`: {hex:?} is not a SHA-256 fingerprint"))?;
                    (u.to_string(), Some(pin))
                }
                None => (s.to_string(), None),
            };
            if url.contains(char::is_whitespace) || url.split_once("://").is_none_or(|(_, r)| r.is_empty() || r.starts_with('/')) {
                return Err(format!("`{s}`: an RPM server URL names its host: https://HOST[:PORT]/.well-known/nq"));
            }
            return Ok(MonitorTarget::Rpm { url, pin_sha256: pin });
        }
        if lower.contains("://") {
            return Err(format!("`{s}`: {form}"));
        }
        let (host, port) = host_port(s).map_err(|e| format!("{e}; {form}"))?;
        Ok(MonitorTarget::Server { host, port })
    }

    /// The target's name in results and history: `host:port` (`[v6]:port`),
    /// the RPM URL (without its pin), `ping:HOST`, `tcp:HOST:PORT`, `udp:HOST:PORT`.
    pub fn name(&self) -> String {
        match self {
            MonitorTarget::Server { host, port } if host.contains(':') => format!("[{host}]:{port}"),
            MonitorTarget::Server { host, port } => format!("{host}:{port}"),
            MonitorTarget::Probes { host, port } if host.contains(':') => format!("udp:[{host}]:{port}"),
            MonitorTarget::Probes { host, port } => format!("udp:{host}:{port}"),
            MonitorTarget::Rpm { url, .. } => url.clone(),
            MonitorTarget::Ping(p) => match p.kind {
                PingKind::Icmp => format!("ping:{}", p.host),
                PingKind::Tcp if p.host.contains(':') => format!("tcp:[{}]:{}", p.host, p.port),
                PingKind::Tcp => format!("tcp:{}:{}", p.host, p.port),
            },
        }
    }

    /// The host (no brackets) and port the target is reached at (an RPM
    /// URL's, 443 when it names none; an ICMP target's port is 0).
    pub fn address(&self) -> Result<(String, u16), String> {
        match self {
            MonitorTarget::Server { host, port } | MonitorTarget::Probes { host, port } => Ok((host.clone(), *port)),
            MonitorTarget::Ping(p) => Ok((p.host.clone(), p.port)),
            MonitorTarget::Rpm { url, .. } => {
                let rest = url.split_once("://").map(|x| x.1).unwrap_or(url);
                let auth = rest.split(['/', '?', '#']).next().unwrap_or("");
                let (h, p) = host_port(auth).map_err(|e| format!("{url}: {e}"))?;
                // host_port's default is bloatlab's; a URL without a port is HTTPS's
                let p = if auth.ends_with(']') || !auth.contains(':') || (auth.matches(':').count() > 1 && !auth.starts_with('[')) { 443 } else { p };
                Ok((h, p))
            }
        }
    }

    /// Probed continuously rather than tested on the schedule.
    pub fn latency_only(&self) -> bool {
        matches!(self, MonitorTarget::Ping(_) | MonitorTarget::Probes { .. })
    }

    /// The target as its command line gave it (pin included), for the config's round trip.
    pub fn spec(&self) -> String {
        match self {
            MonitorTarget::Rpm { url, pin_sha256: Some(p) } => format!("{url}#pin-sha256={p}"),
            t => t.name(),
        }
    }
}

/// `HOST[:PORT]` of a bloatlab server: the one grammar
/// ([`crate::config::split_host_port`]).
fn host_port(s: &str) -> Result<(String, u16), String> {
    crate::config::split_host_port(s, DEFAULT_PORT)
}

/// How much later than due a run may start, at random (so that monitors
/// started together do not load a shared line at the same moments).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Jitter {
    /// A share of the interval (`10%`).
    Share(f64),
    Fixed(Duration),
}

impl Jitter {
    pub fn parse(s: &str) -> Result<Jitter, String> {
        let s = s.trim();
        if let Some(p) = s.strip_suffix('%') {
            let v: f64 = p.trim().parse().map_err(|_| format!("`{s}` is not a share; a jitter is N% of --every (0-50%) or a duration"))?;
            if !(0.0..=50.0).contains(&v) {
                return Err(format!("jitter `{s}`: a share of --every is 0% to 50%"));
            }
            return Ok(Jitter::Share(v / 100.0));
        }
        parse_duration(s).map(Jitter::Fixed).map_err(|e| format!("{e}; or N% of --every"))
    }

    /// The most a run of a schedule of `every` may start late.
    pub fn of(&self, every: Duration) -> Duration {
        match *self {
            Jitter::Share(f) => every.mul_f64(f),
            Jitter::Fixed(d) => d.min(every / 2),
        }
    }

    pub fn name(&self) -> String {
        match *self {
            Jitter::Share(f) => format!("{}%", crate::fmt::trim_num(f * 100.0)),
            Jitter::Fixed(d) => fmt_duration(d),
        }
    }
}

/// How much data the monitor's tests may move, per UTC day or calendar
/// month (an ISP's cap is per month; a test through a gigabit line moves
/// gigabytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub bytes: u64,
    pub per: BudgetPeriod,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetPeriod {
    Day,
    Month,
}

const BYTE_UNITS: [(&str, u64); 9] = [
    ("tib", 1 << 40),
    ("gib", 1 << 30),
    ("mib", 1 << 20),
    ("kib", 1 << 10),
    ("tb", 1_000_000_000_000),
    ("gb", 1_000_000_000),
    ("mb", 1_000_000),
    ("kb", 1_000),
    ("b", 1),
];

impl Budget {
    /// `10GB/month`, `500MB/day`, `1TiB/month` (GB = 10^9 bytes, GiB = 2^30).
    pub fn parse(s: &str) -> Result<Budget, String> {
        let form = "a budget is SIZE/day or SIZE/month: 10GB/month, 500MB/day, 1TiB/month";
        let t = s.trim().to_ascii_lowercase();
        let (size, per) = t.split_once('/').ok_or_else(|| format!("`{s}`: {form}"))?;
        let per = match per.trim() {
            "day" | "d" => BudgetPeriod::Day,
            "month" | "mo" => BudgetPeriod::Month,
            p => return Err(format!("`{s}`: `{p}` is not day or month; {form}")),
        };
        let size = size.trim();
        let (num, mult) = BYTE_UNITS
            .iter()
            .find_map(|(u, m)| size.strip_suffix(u).map(|n| (n.trim(), *m)))
            .ok_or_else(|| format!("`{s}`: the size needs a unit (B, kB, MB, GB, TB, KiB, MiB, GiB, TiB); {form}"))?;
        let v: f64 = num.parse().map_err(|_| format!("`{s}`: `{num}` is not a number; {form}"))?;
        if !v.is_finite() || v <= 0.0 || v * mult as f64 >= u64::MAX as f64 {
            return Err(format!("`{s}`: the size must be above 0; {form}"));
        }
        Ok(Budget { bytes: (v * mult as f64).round() as u64, per })
    }

    pub fn name(&self) -> String {
        let size = [("TB", 1_000_000_000_000u64), ("GB", 1_000_000_000), ("MB", 1_000_000), ("kB", 1_000), ("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)]
            .iter()
            .find(|(_, m)| self.bytes >= *m && self.bytes % m == 0)
            .map(|(u, m)| format!("{}{u}", self.bytes / m))
            .unwrap_or_else(|| format!("{}B", self.bytes));
        format!("{size}/{}", self.period_name())
    }

    pub fn period_name(&self) -> &'static str {
        match self.per {
            BudgetPeriod::Day => "day",
            BudgetPeriod::Month => "month",
        }
    }

    /// The start of the period `unix_ns` falls in (UTC midnight, or the 1st of the month).
    pub fn window_start(&self, unix_ns: u64) -> u64 {
        let day_ns = 86_400_000_000_000u64;
        let days = (unix_ns / day_ns) as i64;
        let start_day = match self.per {
            BudgetPeriod::Day => days,
            BudgetPeriod::Month => {
                let (y, m, _) = crate::units::civil_from_days(days);
                crate::units::days_from_civil(y, m, 1)
            }
        };
        start_day as u64 * day_ns
    }
}

/// Where the monitor keeps its runs: a SQLite file (one monitor, the
/// default) or a PostgreSQL database (`postgres://` or `postgresql://`
/// URL: a fleet of monitors writing into one place).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Database {
    Sqlite(PathBuf),
    /// The connection URL as given (its password included: [`Database`]'s
    /// `Display` hides it).
    Postgres(String),
}

impl Database {
    pub fn parse(s: &str) -> Result<Database, String> {
        let t = s.trim();
        if t.is_empty() {
            return Err("an empty path".into());
        }
        let lower = t.to_ascii_lowercase();
        if lower.starts_with("postgres://") || lower.starts_with("postgresql://") {
            let rest = &t[t.find("://").unwrap() + 3..];
            // the host: after USER[:PASSWORD]@, before :PORT, /DATABASE or ?
            let authority = rest.split(['/', '?']).next().unwrap_or("");
            let host = authority.rsplit_once('@').map(|x| x.1).unwrap_or(authority);
            let host = if host.starts_with('[') { host } else { host.split(':').next().unwrap_or("") };
            if host.is_empty() && !rest.contains("host=") {
                return Err(format!("{}: a PostgreSQL URL names its host: postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE", Database::Postgres(t.into())));
            }
            return Ok(Database::Postgres(t.to_string()));
        }
        if lower.starts_with("postgres:") || lower.starts_with("postgresql:") {
            return Err(format!("{t:?}: a PostgreSQL URL starts with postgres:// (two slashes): postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE"));
        }
        if lower.contains("://") {
            return Err(format!("{t:?}: a database is a SQLite file's path or a postgres:// URL"));
        }
        Ok(Database::Sqlite(PathBuf::from(t)))
    }
}

impl std::fmt::Display for Database {
    /// The path, or the URL with its password shown as `***`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Database::Sqlite(p) => write!(f, "{}", p.display()),
            Database::Postgres(u) => {
                let scheme_end = u.find("://").map(|i| i + 3).unwrap_or(0);
                let (head, rest) = u.split_at(scheme_end);
                let (auth_host, tail) = match rest.find(['/', '?']) {
                    Some(i) => rest.split_at(i),
                    None => (rest, ""),
                };
                let auth_host = match auth_host.rsplit_once('@') {
                    Some((auth, host)) => match auth.split_once(':') {
                        Some((user, _)) => format!("{user}:***@{host}"),
                        None => format!("{auth}@{host}"),
                    },
                    None => auth_host.to_string(),
                };
                // a password given as a parameter is hidden too
                let tail: Vec<String> = tail
                    .split('&')
                    .map(|kv| match kv.split_once('=') {
                        Some((k, _)) if k.trim_start_matches('?').eq_ignore_ascii_case("password") => format!("{k}=***"),
                        _ => kv.to_string(),
                    })
                    .collect();
                write!(f, "{head}{auth_host}{}", tail.join("&"))
            }
        }
    }
}

/// Everything `bloatlab monitor` does.
#[derive(Debug, Clone, PartialEq)]
pub struct MonitorConfig {
    pub targets: Vec<MonitorTarget>,
    /// A loaded test of each target this often.
    pub every: Duration,
    pub jitter: Jitter,
    /// Where runs are kept.
    pub db: Database,
    /// The monitor's id in every result ("" = the host name).
    pub id: String,
    /// Results older than this are deleted (0 = kept forever).
    pub retention: Duration,
    /// The targets' shared secret (their --secret-file), read at the edge.
    pub secret: Option<crate::Secret>,
    /// Serve Prometheus metrics (`/metrics`) on this address.
    pub metrics: Option<std::net::SocketAddr>,
    /// POST alerts (JSON) here.
    pub webhook: Option<String>,
    /// An alert when the added latency reaches this...
    pub alert_added: Duration,
    /// ...in this many runs in a row (and a recovery after as many under it).
    pub alert_runs: u32,
    /// Skip runs that would take the data used past this.
    pub budget: Option<Budget>,
    /// Latency-only targets: a probe this often...
    pub probe_every: Duration,
    /// ...and their probes kept as one run per round.
    pub round: Duration,
    /// Also trust the CA certificates in this file for RPM targets.
    pub ca_file: Option<PathBuf>,
    /// Its PEM text, read at the edge.
    pub ca_pem: Option<String>,
}

impl Default for MonitorConfig {
    fn default() -> MonitorConfig {
        MonitorConfig {
            targets: vec![],
            every: Duration::from_secs(15 * 60),
            jitter: Jitter::Share(0.1),
            db: Database::Sqlite(PathBuf::from(DEFAULT_MONITOR_DB)),
            id: String::new(),
            retention: Duration::from_secs(90 * 86400),
            secret: None,
            metrics: None,
            webhook: None,
            // the A boundary of metrics::grade (checked there by monitor::metrics' tests)
            alert_added: Duration::from_millis(30),
            alert_runs: 3,
            budget: None,
            probe_every: Duration::from_secs(1),
            round: Duration::from_secs(5 * 60),
            ca_file: None,
            ca_pem: None,
        }
    }
}

/// The shortest interval between a target's runs (a run itself takes about 20 s).
pub const MIN_EVERY: Duration = Duration::from_secs(1);

impl MonitorConfig {
    /// The loaded test a target gets: the quick profile, as the browser
    /// test and `bloatlab test --profile quick` run it (about 20 s on a line
    /// that keeps its queue short: 2 s idle, then 4 downloads, 4 uploads and
    /// 3 + 3, each 5 s or on until latency stopped rising, at most 15 s).
    pub fn test_config(&self, host: &str, port: u16) -> TestConfig {
        let name = MonitorTarget::Server { host: host.to_string(), port }.name();
        let mut t = TestConfig {
            server: if host.contains(':') { format!("[{host}]") } else { host.to_string() },
            port,
            command: vec!["monitor".into(), name],
            secret: self.secret.clone(),
            ..TestConfig::default()
        };
        crate::web::WebPlan::of(crate::web::Profile::Quick).apply_to(&mut t).expect("the quick profile runs in `bloatlab test`");
        t
    }

    /// The sessions a `udp:HOST[:PORT]` target's probes run in: probes
    /// only (no scenarios, no flows), `--probe-every` apart.
    pub fn probe_config(&self, host: &str, port: u16) -> TestConfig {
        let name = MonitorTarget::Probes { host: host.to_string(), port }.name();
        TestConfig {
            server: if host.contains(':') { format!("[{host}]") } else { host.to_string() },
            port,
            scenarios: vec![],
            probe_interval: self.probe_every,
            command: vec!["monitor".into(), name],
            secret: self.secret.clone(),
            ..TestConfig::default()
        }
    }

    /// The RPM test an RPM target gets: download then upload, each stage
    /// at most 8 s (the draft's 1 s intervals, MAD 4), so the run takes
    /// about as long as a server target's.
    pub fn rpm_config(&self, url: &str, pin: Option<&str>) -> RpmConfig {
        RpmConfig {
            url: url.to_string(),
            max_stage: Duration::from_secs(8),
            pin_sha256: pin.map(str::to_string),
            ca_pem: self.ca_pem.clone(),
            secret: self.secret.clone(),
            ..RpmConfig::default()
        }
    }

    /// Check what options alone cannot: at least one target.
    pub fn check(&self) -> Result<(), String> {
        if self.targets.is_empty() {
            return Err(format!("no target: {TARGET_FORMS}"));
        }
        if self.targets.iter().any(|t| t.latency_only()) && self.round < self.probe_every * 2 {
            return Err(format!(
                "--round {} holds fewer than two probes at --probe-every {}",
                fmt_duration(self.round),
                fmt_duration(self.probe_every)
            ));
        }
        let mut names: Vec<String> = self.targets.iter().map(|t| t.name()).collect();
        names.sort();
        if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
            return Err(format!("target {} is given twice", w[0]));
        }
        Ok(())
    }
}

impl Configurable for MonitorConfig {
    const COMMAND: &'static str = "`bloatlab monitor`";
    fn options() -> &'static [OptionDef<MonitorConfig>] {
        MONITOR_OPTIONS
    }
}

/// Every option of `bloatlab monitor`, in `--help` order (the config file's
/// keys are the same names, `_` or `-`).
pub static MONITOR_OPTIONS: &[OptionDef<MonitorConfig>] = &[
    OptionDef {
        long: "target",
        short: None,
        value_name: "TARGET",
        doc: "A target (also given as the command's arguments; repeat for more): HOST[:PORT], a bloatlab server, or https://HOST[:PORT]/.well-known/nq, an RPM server (#pin-sha256=HEX pins its certificate), each tested on the schedule; ping:HOST, tcp:HOST:PORT or udp:HOST[:PORT] (a bloatlab server's UDP probes), latency only, probed every --probe-every",
        arity: Arity::Repeated,
        shape: Shape::Host,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["example.net:5201"],
        set: |c, s| Ok(c.targets.push(MonitorTarget::parse(s)?)),
        get: |c| c.targets.iter().map(|t| t.spec()).collect(),
    },
    OptionDef {
        long: "every",
        short: None,
        value_name: "DURATION",
        doc: "A loaded test of each target this often (about 20 s each, run one at a time)",
        arity: Arity::Value,
        shape: Shape::Duration,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["10s"],
        set: |c, s| {
            let d = parse_duration(s)?;
            if d < MIN_EVERY {
                return Err(format!("`{s}` is under {}", fmt_duration(MIN_EVERY)));
            }
            c.every = d;
            Ok(())
        },
        get: |c| one(fmt_duration(c.every)),
    },
    OptionDef {
        long: "jitter",
        short: None,
        value_name: "N%|DURATION",
        doc: "Start each run up to this much later than due, at random: a share of --every or a duration",
        arity: Arity::Value,
        shape: Shape::Word,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["0%", "30s"],
        set: |c, s| Ok(c.jitter = Jitter::parse(s)?),
        get: |c| one(c.jitter.name()),
    },
    OptionDef {
        long: "db",
        short: None,
        value_name: "PATH|URL",
        doc: "Where runs are kept: a SQLite file (created if missing) or a PostgreSQL database, postgres://USER[:PASSWORD]@HOST[:PORT]/DB (tables created if missing; many monitors may share one)",
        arity: Arity::Value,
        shape: Shape::File,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["m.sqlite", "postgres://bloatlab@db.example.net/fleet"],
        set: |c, s| Ok(c.db = Database::parse(s)?),
        get: |c| one(match &c.db {
            Database::Sqlite(p) => p.display().to_string(),
            Database::Postgres(u) => u.clone(),
        }),
    },
    OptionDef {
        long: "id",
        short: None,
        value_name: "NAME",
        doc: "This monitor's id in every result it keeps [default: the host name]",
        arity: Arity::Value,
        shape: Shape::Word,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["home-router"],
        set: |c, s| {
            if s.is_empty() || s.len() > 64 || !s.chars().all(|ch| ch.is_ascii_alphanumeric() || "-_.".contains(ch)) {
                return Err(format!("`{s}`: an id is 1-64 letters, digits, `-`, `_` or `.`"));
            }
            c.id = s.to_string();
            Ok(())
        },
        get: |c| if c.id.is_empty() { vec![] } else { one(&c.id) },
    },
    OptionDef {
        long: "metrics",
        short: None,
        value_name: "ADDR:PORT",
        doc: "Serve Prometheus metrics (OpenMetrics text) at http://ADDR:PORT/metrics, e.g. 127.0.0.1:9771 [default: off]",
        arity: Arity::Value,
        shape: Shape::Host,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["127.0.0.1:9771", "[::1]:9771"],
        set: |c, s| {
            if s == "off" {
                c.metrics = None;
                return Ok(());
            }
            let a: std::net::SocketAddr = s.parse().map_err(|_| format!("`{s}` is not ADDR:PORT (127.0.0.1:9771, [::]:9771, 0.0.0.0:9771)"))?;
            c.metrics = Some(a);
            Ok(())
        },
        get: |c| c.metrics.map(|a| one(a)).unwrap_or_default(),
    },
    OptionDef {
        long: "webhook",
        short: None,
        value_name: "URL",
        doc: "POST a JSON alert to this http:// or https:// URL when a target's added latency reaches --alert-added, or its runs fail, --alert-runs runs in a row, and again when it is back [default: off]",
        arity: Arity::Value,
        shape: Shape::Word,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["https://hooks.example.net/T0/B0/x"],
        set: |c, s| {
            if s == "off" {
                c.webhook = None;
                return Ok(());
            }
            let rest = s.strip_prefix("https://").or_else(|| s.strip_prefix("http://"));
            match rest {
                Some(r) if !r.is_empty() && !r.starts_with('/') && !s.contains(char::is_whitespace) => {
                    c.webhook = Some(s.to_string());
                    Ok(())
                }
                _ => Err(format!("`{s}` is not an http:// or https:// URL")),
            }
        },
        get: |c| c.webhook.iter().cloned().collect(),
    },
    OptionDef {
        long: "alert-added",
        short: None,
        value_name: "DURATION",
        doc: "Alert when the added latency under load reaches this (the grade's A boundary by default: a run at it grades B)",
        arity: Arity::Value,
        shape: Shape::Duration,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["60ms"],
        set: |c, s| Ok(c.alert_added = parse_duration(s)?),
        get: |c| one(fmt_duration(c.alert_added)),
    },
    OptionDef {
        long: "alert-runs",
        short: None,
        value_name: "N",
        doc: "Runs in a row over --alert-added (or failing) before an alert, and under it (or measuring) before the all-clear",
        arity: Arity::Value,
        shape: Shape::Int,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["2"],
        set: |c, s| match s.parse::<u32>() {
            Ok(n) if (1..=100).contains(&n) => {
                c.alert_runs = n;
                Ok(())
            }
            _ => Err(format!("`{s}` is not a number of runs (1-100)")),
        },
        get: |c| one(c.alert_runs),
    },
    OptionDef {
        long: "budget",
        short: None,
        value_name: "SIZE/day|SIZE/month",
        doc: "The most data the tests may move per UTC day or calendar month (10GB/month, 500MB/day); a run that would pass it waits for the next period [default: none]",
        arity: Arity::Value,
        shape: Shape::Word,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["10GB/month", "512MiB/day"],
        set: |c, s| {
            c.budget = if s == "off" { None } else { Some(Budget::parse(s)?) };
            Ok(())
        },
        get: |c| c.budget.map(|b| one(b.name())).unwrap_or_default(),
    },
    OptionDef {
        long: "retention",
        short: None,
        value_name: "DURATION",
        doc: "Delete results older than this (0 = keep all)",
        arity: Arity::Value,
        shape: Shape::Duration,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["7d", "0s"],
        set: |c, s| Ok(c.retention = parse_duration(s)?),
        get: |c| one(fmt_duration(c.retention)),
    },
    OptionDef {
        long: "probe-every",
        short: None,
        value_name: "DURATION",
        doc: "Latency-only targets (ping:, tcp:): one probe each this often, between the loaded tests",
        arity: Arity::Value,
        shape: Shape::Duration,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["5s"],
        set: |c, s| {
            let d = parse_duration(s)?;
            if d < MIN_PROBE_EVERY || d > MAX_PROBE_EVERY {
                return Err(format!("`{s}`: between {} and {}", fmt_duration(MIN_PROBE_EVERY), fmt_duration(MAX_PROBE_EVERY)));
            }
            c.probe_every = d;
            Ok(())
        },
        get: |c| one(fmt_duration(c.probe_every)),
    },
    OptionDef {
        long: "round",
        short: None,
        value_name: "DURATION",
        doc: "Latency-only targets: their probes kept as one run (median, spread, loss) per round, as smokeping does",
        arity: Arity::Value,
        shape: Shape::Duration,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["1m"],
        set: |c, s| {
            let d = parse_duration(s)?;
            if d < MIN_ROUND {
                return Err(format!("`{s}` is under {}", fmt_duration(MIN_ROUND)));
            }
            c.round = d;
            Ok(())
        },
        get: |c| one(fmt_duration(c.round)),
    },
    OptionDef {
        long: "ca-file",
        short: None,
        value_name: "FILE",
        doc: "RPM targets: also trust the CA certificate(s) in FILE (PEM) [default: the system's CAs]",
        arity: Arity::Value,
        shape: Shape::File,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["ca.pem"],
        set: |c, s| Ok(c.ca_file = Some(ca_file(s)?)),
        get: |c| c.ca_file.iter().map(|p| p.display().to_string()).collect(),
    },
];

/// A `--ca-file` (of `bloatlab rpm` and the monitor's RPM targets): a PEM
/// file's path, read where the command starts.
pub(crate) fn ca_file(s: &str) -> Result<PathBuf, String> {
    match s.is_empty() {
        true => Err("an empty path".into()),
        false => Ok(PathBuf::from(s)),
    }
}

/// Latency-only probes: at most 10 a second per target, at least one a minute.
pub const MIN_PROBE_EVERY: Duration = Duration::from_millis(100);
pub const MAX_PROBE_EVERY: Duration = Duration::from_secs(60);
/// The shortest round of a latency-only target.
pub const MIN_ROUND: Duration = Duration::from_secs(1);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_is_a_file_or_a_postgres_url_whose_password_is_never_shown() {
        assert_eq!(Database::parse("m.sqlite").unwrap(), Database::Sqlite("m.sqlite".into()));
        let d = Database::parse("postgres://mon:s3cret@db.example.net:5433/fleet?sslmode=require").unwrap();
        assert!(matches!(d, Database::Postgres(_)));
        assert_eq!(d.to_string(), "postgres://mon:***@db.example.net:5433/fleet?sslmode=require");
        let d = Database::parse("postgresql://db.example.net/fleet?user=mon&password=s3cret").unwrap();
        assert_eq!(d.to_string(), "postgresql://db.example.net/fleet?user=mon&password=***");
        assert_eq!(Database::parse("postgres://mon@h/db").unwrap().to_string(), "postgres://mon@h/db");
        assert!(Database::parse("postgres://").unwrap_err().contains("names its host"));
        assert!(Database::parse("postgres://nobody@").unwrap_err().contains("names its host"));
        assert!(Database::parse("postgres://nobody@:5432/db").unwrap_err().contains("names its host"));
        assert!(Database::parse("postgres:/localhost/db").unwrap_err().contains("two slashes"));
        assert!(Database::parse("postgres://[::1]:5432/db").is_ok());
        assert!(Database::parse("postgres:///db?host=/run/postgresql").is_ok());
        assert!(Database::parse("mysql://h/db").unwrap_err().contains("postgres:// URL"));
        assert!(Database::parse("").is_err());
    }
    use crate::options::Overrides;

    #[test]
    fn targets_parse_as_servers_rpm_servers_and_latency_only_hosts() {
        let t = |s: &str| {
            MonitorTarget::parse(s).and_then(|t| match t {
                MonitorTarget::Server { host, port } => Ok((host, port)),
                o => Err(format!("not a server: {o:?}")),
            })
        };
        assert_eq!(t("example.net"), Ok(("example.net".into(), DEFAULT_PORT)));
        assert_eq!(t("10.0.0.2:5300"), Ok(("10.0.0.2".into(), 5300)));
        assert_eq!(t("[::1]:5300"), Ok(("::1".into(), 5300)));
        assert_eq!(t("fe80::1"), Ok(("fe80::1".into(), DEFAULT_PORT)));
        assert!(t("host:0").unwrap_err().contains("not a port"));
        assert!(t("ftp://x/y").unwrap_err().contains("HOST[:PORT]"));
        assert_eq!(MonitorTarget::parse("[::1]:9").unwrap().name(), "[::1]:9");
        // RPM servers, a pin in the fragment
        let pin = "AB".repeat(32);
        let r = MonitorTarget::parse(&format!("https://nq.example.net:4043/.well-known/nq#pin-sha256={pin}")).unwrap();
        assert_eq!(r.name(), "https://nq.example.net:4043/.well-known/nq");
        assert!(matches!(&r, MonitorTarget::Rpm { pin_sha256: Some(_), .. }));
        assert_eq!(MonitorTarget::parse(&r.spec()).unwrap(), r);
        assert!(MonitorTarget::parse("https://h/.well-known/nq#x=1").unwrap_err().contains("#pin-sha256=HEX"));
        assert!(MonitorTarget::parse("https://h/nq#pin-sha256=zz").unwrap_err().contains("not a SHA-256"));
        assert!(MonitorTarget::parse("https:///nq").unwrap_err().contains("names its host"));
        // latency only
        let p = MonitorTarget::parse("ping:192.0.2.1").unwrap();
        assert!(p.latency_only() && p.name() == "ping:192.0.2.1");
        assert_eq!(MonitorTarget::parse("TCP:[2001:db8::1]:443").unwrap().name(), "tcp:[2001:db8::1]:443");
        assert!(MonitorTarget::parse("tcp:example.net").unwrap_err().contains("HOST:PORT"));
        assert!(MonitorTarget::parse("ping:").unwrap_err().contains("ping:HOST"));
        assert!(!MonitorTarget::parse("h:1").unwrap().latency_only());
        // a bloatlab server's UDP probes
        let u = MonitorTarget::parse("UDP:192.0.2.7").unwrap();
        assert!(u.latency_only());
        assert_eq!(u, MonitorTarget::Probes { host: "192.0.2.7".into(), port: DEFAULT_PORT });
        assert_eq!(u.name(), format!("udp:192.0.2.7:{DEFAULT_PORT}"));
        assert_eq!(MonitorTarget::parse("udp:[::1]:9").unwrap().name(), "udp:[::1]:9");
        assert_eq!(MonitorTarget::parse(&u.spec()).unwrap(), u);
        for bad in ["udp:", "udp:h:0", "udp:h:x", "udp:[::1", "udp:a/b"] {
            let e = MonitorTarget::parse(bad).unwrap_err();
            assert!(e.contains("udp:HOST[:PORT]") && e.starts_with(&format!("`{bad}`")), "{bad}: {e}");
        }
        // a round must hold probes
        let mut c = MonitorConfig { targets: vec![p], ..Default::default() };
        c.round = Duration::from_secs(1);
        assert!(c.check().unwrap_err().contains("fewer than two probes"));
    }

    #[test]
    fn every_option_reads_back_its_examples() {
        for o in MONITOR_OPTIONS {
            for &e in o.examples {
                let mut ov = Overrides::<MonitorConfig>::default();
                ov.set(o.long, e).unwrap();
                let mut c = MonitorConfig::default();
                ov.apply(&mut c).unwrap();
                assert_eq!(o.get(&c).last().map(String::as_str), Some(e), "--{}", o.long);
            }
        }
        let mut c = MonitorConfig::default();
        assert!(option_err(&mut c, "every", "500ms").contains("under 1s"));
        assert!(option_err(&mut c, "jitter", "80%").contains("0% to 50%"));
        assert!(option_err(&mut c, "id", "a b").contains("letters, digits"));
        assert_eq!(Jitter::Share(0.1).of(Duration::from_secs(600)), Duration::from_secs(60));
        assert_eq!(Jitter::Fixed(Duration::from_secs(600)).of(Duration::from_secs(60)), Duration::from_secs(30));
    }

    fn option_err(c: &mut MonitorConfig, name: &str, v: &str) -> String {
        crate::options::option::<MonitorConfig>(name).unwrap().set(c, v).unwrap_err()
    }

    #[test]
    fn budgets_parse_and_know_their_period() {
        let b = Budget::parse("10GB/month").unwrap();
        assert_eq!((b.bytes, b.per, b.name()), (10_000_000_000, BudgetPeriod::Month, "10GB/month".to_string()));
        assert_eq!(Budget::parse("1.5 GiB / day").unwrap().bytes, 1_610_612_736);
        assert!(Budget::parse("10GB").unwrap_err().contains("SIZE/day or SIZE/month"));
        assert!(Budget::parse("10/month").unwrap_err().contains("needs a unit"));
        assert!(Budget::parse("10GB/week").unwrap_err().contains("not day or month"));
        // 2026-11-20T10:00Z: the day began at midnight, the month on the 1st
        let t = 1_795_168_800_000_000_000u64;
        assert_eq!(Budget::parse("1GB/day").unwrap().window_start(t), 1_795_132_800_000_000_000);
        assert_eq!(b.window_start(t), crate::units::parse_utc_time("2026-11-01").unwrap());
    }

    #[test]
    fn the_short_test_is_the_quick_profile_and_fits_in_about_20_seconds() {
        let c = MonitorConfig::default();
        let t = c.test_config("::1", 9);
        assert_eq!(t.server, "[::1]");
        assert_eq!(t.profile, Some(crate::web::Profile::Quick));
        assert_eq!(crate::scenario::list_name(&t.scenarios), "0u4d,4u0d,3u3d");
        let total = t.idle + (t.duration + t.pause) * t.scenarios.len() as u32;
        assert!(total <= Duration::from_secs(20), "{total:?}");
        assert_eq!(t.until_settled, Some(Duration::from_secs(15)));
        assert!(c.check().unwrap_err().contains("no target"));
    }
}
