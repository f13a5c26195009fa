//! `bloatlab monitor`: what it watches, how often, and where it keeps what
//! it measured ([`MonitorConfig`], whose options are defined once in
//! [`MONITOR_OPTIONS`]: the command line and the config file both read them).
use crate::options::{Arity, Configurable, OptionDef, Shape};
use crate::units::{fmt_duration, parse_duration};
use crate::{Scenario, TestConfig, DEFAULT_PORT};
use std::path::PathBuf;
use std::time::Duration;

/// Where results go when `--db` is not given.
pub const DEFAULT_MONITOR_DB: &str = "bloatlab-monitor.sqlite";

/// A target of the monitor: a bloatlab server (`HOST[:PORT]`), which gets
/// a short loaded test on the schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MonitorTarget {
    /// The host as given (a name, an IPv4 address, or an IPv6 address).
    pub host: String,
    pub port: u16,
}

impl MonitorTarget {
    pub fn parse(s: &str) -> Result<MonitorTarget, String> {
        let s = s.trim();
        let form = "a target is HOST or HOST:PORT (a bloatlab server; [v6addr]:port for IPv6)";
        if s.is_empty() {
            return Err(format!("an empty target; {form}"));
        }
        if s.contains('/') || s.contains(char::is_whitespace) {
            return Err(format!("`{s}`: {form}"));
        }
        let port = |p: &str| match p.parse::<u16>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!("`{s}`: `{p}` is not a port (1-65535); {form}")),
        };
        if let Some(rest) = s.strip_prefix('[') {
            let (h, after) = rest.split_once(']').ok_or_else(|| format!("`{s}`: no closing `]`; {form}"))?;
            let p = match after {
                "" => DEFAULT_PORT,
                a => port(a.strip_prefix(':').ok_or_else(|| format!("`{s}`: {form}"))?)?,
            };
            return Ok(MonitorTarget { host: h.to_string(), port: p });
        }
        match s.matches(':').count() {
            0 => Ok(MonitorTarget { host: s.to_string(), port: DEFAULT_PORT }),
            1 => {
                let (h, p) = s.split_once(':').unwrap();
                if h.is_empty() {
                    return Err(format!("`{s}`: no host; {form}"));
                }
                Ok(MonitorTarget { host: h.to_string(), port: port(p)? })
            }
            // a bare IPv6 address
            _ => Ok(MonitorTarget { host: s.to_string(), port: DEFAULT_PORT }),
        }
    }

    /// The target's name in results and history: `host:port` (`[v6]:port`).
    pub fn name(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
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
            if rest.is_empty() || rest.starts_with('/') && !rest.contains("host=") {
                return Err(format!("{}: a PostgreSQL URL names its host: postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE", Database::Postgres(t.into())));
            }
            return Ok(Database::Postgres(t.to_string()));
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
    /// An alert when the added latency is above this...
    pub alert_added: Duration,
    /// ...in this many runs in a row (and a recovery after as many under it).
    pub alert_runs: u32,
    /// Skip runs that would take the data used past this.
    pub budget: Option<Budget>,
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
            alert_added: Duration::from_millis(30),
            alert_runs: 3,
            budget: None,
        }
    }
}

/// The shortest interval between a target's runs (a run itself takes about 20 s).
pub const MIN_EVERY: Duration = Duration::from_secs(1);

impl MonitorConfig {
    /// The short loaded test a target gets (about 20 s, so it can run
    /// often): 2 s idle, then 5 s each of 4 downloads, 4 uploads, and both.
    pub fn test_config(&self, t: &MonitorTarget) -> TestConfig {
        TestConfig {
            server: if t.host.contains(':') { format!("[{}]", t.host) } else { t.host.clone() },
            port: t.port,
            scenarios: Scenario::parse_list("0u4d,4u0d,4u4d").expect("the monitor's scenarios parse"),
            duration: Duration::from_secs(5),
            idle: Duration::from_secs(2),
            pause: Duration::from_secs(1),
            command: vec!["monitor".into(), t.name()],
            secret: self.secret.clone(),
            ..TestConfig::default()
        }
    }

    /// Check what options alone cannot: at least one target.
    pub fn check(&self) -> Result<(), String> {
        if self.targets.is_empty() {
            return Err("no target: give one or more HOST[:PORT] (bloatlab servers)".into());
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

fn one<T: ToString>(v: T) -> Vec<String> {
    vec![v.to_string()]
}

/// Every option of `bloatlab monitor`, in `--help` order (the config file's
/// keys are the same names, `_` or `-`).
pub static MONITOR_OPTIONS: &[OptionDef<MonitorConfig>] = &[
    OptionDef {
        long: "target",
        short: None,
        value_name: "HOST[:PORT]",
        help: "A bloatlab server to test on the schedule (also given as the command's arguments); repeat for more",
        arity: Arity::Repeated,
        shape: Shape::Host,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["example.net:5201"],
        set: |c, s| Ok(c.targets.push(MonitorTarget::parse(s)?)),
        get: |c| c.targets.iter().map(|t| t.name()).collect(),
    },
    OptionDef {
        long: "every",
        short: None,
        value_name: "DURATION",
        help: "A loaded test of each target this often (about 20 s each, run one at a time) [default: 15m]",
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
        help: "Start each run up to this much later than due, at random: a share of --every or a duration [default: 10%]",
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
        help: "Where runs are kept: a SQLite file (created if missing) or a PostgreSQL database, postgres://USER[:PASSWORD]@HOST[:PORT]/DB (tables created if missing; many monitors may share one) [default: bloatlab-monitor.sqlite]",
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
        help: "This monitor's id in every result it keeps [default: the host name]",
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
        help: "Serve Prometheus metrics (OpenMetrics text) at http://ADDR:PORT/metrics, e.g. 127.0.0.1:9771 [default: off]",
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
        help: "POST a JSON alert to this http:// or https:// URL when a target's added latency is above --alert-added, or its runs fail, --alert-runs runs in a row, and again when it is back [default: off]",
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
        help: "Alert when the added latency under load is above this (the grade's A boundary by default) [default: 30ms]",
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
        help: "Runs in a row over --alert-added (or failing) before an alert, and under it (or measuring) before the all-clear [default: 3]",
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
        help: "The most data the tests may move per UTC day or calendar month (10GB/month, 500MB/day); a run that would pass it waits for the next period [default: none]",
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
        help: "Delete results older than this (0 = keep all) [default: 90d]",
        arity: Arity::Value,
        shape: Shape::Duration,
        choices: &[],
        requires: None,
        one_run_each: false,
        examples: &["7d", "0s"],
        set: |c, s| Ok(c.retention = parse_duration(s)?),
        get: |c| one(fmt_duration(c.retention)),
    },
];

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
        assert!(Database::parse("mysql://h/db").unwrap_err().contains("postgres:// URL"));
        assert!(Database::parse("").is_err());
    }
    use crate::options::Overrides;

    #[test]
    fn targets_parse_as_servers_with_their_ports() {
        let t = |s: &str| MonitorTarget::parse(s).map(|t| (t.host, t.port));
        assert_eq!(t("example.net"), Ok(("example.net".into(), DEFAULT_PORT)));
        assert_eq!(t("10.0.0.2:5300"), Ok(("10.0.0.2".into(), 5300)));
        assert_eq!(t("[::1]:5300"), Ok(("::1".into(), 5300)));
        assert_eq!(t("fe80::1"), Ok(("fe80::1".into(), DEFAULT_PORT)));
        assert!(t("host:0").unwrap_err().contains("not a port"));
        assert!(t("https://x/y").unwrap_err().contains("HOST or HOST:PORT"));
        assert_eq!(MonitorTarget::parse("[::1]:9").unwrap().name(), "[::1]:9");
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
    fn the_short_test_fits_in_about_20_seconds() {
        let c = MonitorConfig::default();
        let t = c.test_config(&MonitorTarget::parse("[::1]:9").unwrap());
        assert_eq!(t.server, "[::1]");
        let total = t.idle + (t.duration + t.pause) * t.scenarios.len() as u32;
        assert!(total <= Duration::from_secs(20), "{total:?}");
        assert!(c.check().unwrap_err().contains("no target"));
    }
}
