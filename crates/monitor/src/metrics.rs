//! The monitor's Prometheus exposition: `/metrics` in the OpenMetrics text
//! format (prometheus-client), one series per target (and direction), in
//! base units. Every value is read from a kept run (its result's headline,
//! its phases), never measured again.
//!
//! | metric | type | labels | what |
//! |---|---|---|---|
//! | `bloatlab_up` | gauge | target | 1: the last run measured; 0: it failed |
//! | `bloatlab_idle_latency_seconds` | gauge | target | the last run's idle median round trip |
//! | `bloatlab_loaded_latency_seconds` | gauge | target | its worst loaded median round trip |
//! | `bloatlab_added_latency_seconds` | gauge | target | loaded minus idle (the grade's number) |
//! | `bloatlab_added_latency_histogram_seconds` | histogram | target | every run's added latency, buckets at the grade boundaries |
//! | `bloatlab_goodput_bits_per_second` | gauge | target, direction | the last run's capacity each way |
//! | `bloatlab_rpm` | gauge | target | its UDP-probe responsiveness, round trips per minute |
//! | `bloatlab_probe_loss_ratio` | gauge | target | probes lost, 0-1: the worst loaded phase's UDP probes, a latency-only round's pings |
//! | `bloatlab_grade` | gauge | target | the grade as a number: 0 A+, 1 A, 2 B, 3 C, 4 D, 5 F |
//! | `bloatlab_last_run_timestamp_seconds`, `bloatlab_last_success_timestamp_seconds` | gauge | target | Unix time |
//! | `bloatlab_runs_total` | counter | target | runs since the monitor started |
//! | `bloatlab_failures_total` | counter | target, reason | failed runs: refused, timeout, busy, unreachable, auth, interrupted, other |
//! | `bloatlab_bytes_total` | counter | target, direction | bytes the tests moved (their flows' bytes) |
//! | `bloatlab_pending_runs` | gauge | | runs held while the database refuses |
//! | `bloatlab_budget_bytes`, `bloatlab_budget_used_bytes` | gauge | period | the data budget and what the tests moved in its current period |
//! | `bloatlab_skipped_runs_total` | counter | target | runs not started: they would have passed the budget |
//! | `bloatlab_build_info` | info | version | 1 |
use bloatlab_metrics::grade::{Grade, GRADE_THRESHOLDS_MS};
use bloatlab_results::Direction;
use bloatlab_store::{Outcome, Run, RunRow};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

type Labels = Vec<(String, String)>;
type G = Family<Labels, Gauge<f64, AtomicU64>>;
type C = Family<Labels, Counter>;

/// Added-latency buckets, seconds: the grade's boundaries
/// (`metrics::grade::GRADE_THRESHOLDS_MS`: `le="0.03"` holds the runs graded
/// A or better) and 1, 2 and 5 s beyond.
pub fn added_buckets() -> Vec<f64> {
    GRADE_THRESHOLDS_MS.iter().map(|(_, ms)| ms / 1e3).chain([1.0, 2.0, 5.0]).collect()
}

fn added_histogram() -> Histogram {
    Histogram::new(added_buckets())
}

/// The value a run's added latency (s) is observed as: itself, except that
/// a run exactly on a grade boundary goes to the bucket above it, as the
/// grade does (a bound is the first value of the next letter, and a
/// Prometheus bucket counts values up to and including its `le`).
pub fn observed(added_s: f64) -> f64 {
    if added_buckets().contains(&added_s) {
        // the next float above it (the buckets are positive and finite)
        f64::from_bits(added_s.to_bits() + 1)
    } else {
        added_s
    }
}

/// The reason classes of [`failure_reason`], each exposed at 0 from the
/// start (a panel reads 0 failures, not "No data").
pub const FAILURE_REASONS: [&str; 7] = ["interrupted", "refused", "timeout", "auth", "busy", "unreachable", "other"];

pub struct Exposition {
    registry: Registry,
    up: G,
    idle: G,
    loaded: G,
    added: G,
    added_hist: Family<Labels, Histogram, fn() -> Histogram>,
    goodput: G,
    rpm: G,
    loss: G,
    grade: G,
    last_run: G,
    last_success: G,
    runs: C,
    failures: C,
    bytes: C,
    pending: Gauge<i64>,
    budget: Family<Labels, Gauge<i64>>,
    budget_used: Family<Labels, Gauge<i64>>,
    skipped: C,
}

/// The reason class of a failure, for `bloatlab_failures_total`.
pub fn failure_reason(why: &str) -> &'static str {
    let w = why.to_ascii_lowercase();
    if w.contains("interrupted") || w.contains("sigterm") || w.contains("sigint") {
        "interrupted"
    } else if w.contains("refused") {
        "refused"
    } else if w.contains("timed out") || w.contains("timeout") {
        "timeout"
    } else if w.contains("secret") || w.contains("authenticat") || w.contains("challenge") {
        "auth"
    } else if w.contains("busy") || w.contains("limit") || w.contains("--max-") {
        "busy"
    } else if w.contains("resolve") || w.contains("unreachable") || w.contains("no route") || w.contains("lookup") {
        "unreachable"
    } else {
        "other"
    }
}

fn target(t: &str) -> Labels {
    vec![("target".into(), t.into())]
}

fn target_dir(t: &str, d: &str) -> Labels {
    vec![("target".into(), t.into()), ("direction".into(), d.into())]
}

impl Exposition {
    pub fn new() -> Exposition {
        let mut registry = Registry::default();
        let g = |r: &mut Registry, name: &str, help: &str| {
            let f = G::default();
            r.register(name, help, f.clone());
            f
        };
        let c = |r: &mut Registry, name: &str, help: &str| {
            let f = C::default();
            r.register(name, help, f.clone());
            f
        };
        let up = g(&mut registry, "bloatlab_up", "1 when the target's last run measured, 0 when it failed");
        let idle = g(&mut registry, "bloatlab_idle_latency_seconds", "The last measured run's idle median round trip");
        let loaded = g(&mut registry, "bloatlab_loaded_latency_seconds", "The last measured run's worst loaded median round trip");
        let added = g(&mut registry, "bloatlab_added_latency_seconds", "The last measured run's added latency under load (loaded minus idle median)");
        let added_hist = Family::<Labels, Histogram, fn() -> Histogram>::new_with_constructor(added_histogram as fn() -> Histogram);
        registry.register(
            "bloatlab_added_latency_histogram_seconds",
            "Every run's added latency under load (buckets at the grade boundaries)",
            added_hist.clone(),
        );
        let goodput = g(&mut registry, "bloatlab_goodput_bits_per_second", "The last measured run's goodput (capacity) each way");
        let rpm = g(&mut registry, "bloatlab_rpm", "The last measured run's UDP-probe responsiveness, round trips per minute");
        let loss = g(&mut registry, "bloatlab_probe_loss_ratio", "Probes lost in the last measured run, 0 to 1: its worst loaded phase's UDP probes, or a latency-only round's pings");
        let grade = g(&mut registry, "bloatlab_grade", "The last measured run's grade: 0 A+, 1 A, 2 B, 3 C, 4 D, 5 F");
        let last_run = g(&mut registry, "bloatlab_last_run_timestamp_seconds", "When the target's last run started, Unix time");
        let last_success = g(&mut registry, "bloatlab_last_success_timestamp_seconds", "When the target's last measured run started, Unix time");
        let runs = c(&mut registry, "bloatlab_runs", "Runs since the monitor started");
        let failures = c(&mut registry, "bloatlab_failures", "Failed runs since the monitor started, by reason");
        let bytes = c(&mut registry, "bloatlab_bytes", "Bytes the loaded tests moved since the monitor started");
        let budget = Family::<Labels, Gauge<i64>>::default();
        registry.register("bloatlab_budget_bytes", "The data budget (--budget) per period", budget.clone());
        let budget_used = Family::<Labels, Gauge<i64>>::default();
        registry.register("bloatlab_budget_used_bytes", "Data the tests moved in the budget's current period", budget_used.clone());
        let skipped = c(&mut registry, "bloatlab_skipped_runs", "Runs not started because they would pass the data budget");
        let pending = Gauge::<i64>::default();
        registry.register("bloatlab_pending_runs", "Runs held while the database refuses writes", pending.clone());
        registry.register("bloatlab_build", "bloatlab's version", Info::new(vec![("version".to_string(), env!("CARGO_PKG_VERSION").to_string())]));
        Exposition { registry, up, idle, loaded, added, added_hist, goodput, rpm, loss, grade, last_run, last_success, runs, failures, bytes, pending, budget, budget_used, skipped }
    }

    /// A loaded target's counters and its added-latency histogram, at 0
    /// from the monitor's start: Prometheus's `increase()` then counts the
    /// first run too (a series that first appears at 1 has not increased),
    /// so the alert can fire on the run that makes its count.
    pub fn prime(&self, target_name: &str) {
        let t = target(target_name);
        drop(self.added_hist.get_or_create(&t));
        drop(self.runs.get_or_create(&t));
        for r in FAILURE_REASONS {
            drop(self.failures.get_or_create(&vec![("target".into(), target_name.into()), ("reason".into(), r.into())]));
        }
    }

    /// The gauges of a run's row (at start: each target's last run in the database).
    pub fn show_row(&self, r: &RunRow) {
        let t = target(&r.target);
        let secs = r.started_unix_ns as f64 / 1e9;
        self.last_run.get_or_create(&t).set(secs);
        self.up.get_or_create(&t).set(if r.failure.is_none() { 1.0 } else { 0.0 });
        if r.failure.is_some() {
            return;
        }
        self.last_success.get_or_create(&t).set(secs);
        let set = |g: &G, l: &Labels, v: Option<f64>, scale: f64| match v {
            Some(v) => {
                g.get_or_create(l).set(v * scale);
            }
            None => {
                g.remove(l);
            }
        };
        set(&self.idle, &t, r.idle_ms, 1e-3);
        set(&self.loaded, &t, r.loaded_ms, 1e-3);
        set(&self.added, &t, r.added_ms, 1e-3);
        set(&self.rpm, &t, r.rpm, 1.0);
        set(&self.goodput, &target_dir(&r.target, "download"), r.download_bps, 1.0);
        set(&self.goodput, &target_dir(&r.target, "upload"), r.upload_bps, 1.0);
        set(&self.grade, &t, r.grade.as_deref().and_then(Grade::parse).and_then(|g| Grade::LETTERS.iter().position(|x| *x == g)).map(|i| i as f64), 1.0);
    }

    /// A run just kept: its gauges, and the counters.
    pub fn record(&self, run: &Run) {
        let row = RunRow::of(run);
        self.show_row(&row);
        let t = target(&run.target);
        self.runs.get_or_create(&t).inc();
        match &run.outcome {
            Outcome::Failed(why) => {
                self.failures.get_or_create(&vec![("target".into(), run.target.clone()), ("reason".into(), failure_reason(why).into())]).inc();
            }
            Outcome::Measured(r) => {
                if let Some(a) = row.added_ms {
                    self.added_hist.get_or_create(&t).observe(observed(a / 1e3));
                }
                match row.loss_pct.map(|p| p / 100.0) {
                    Some(l) => {
                        self.loss.get_or_create(&t).set(l);
                    }
                    None => {
                        self.loss.remove(&t);
                    }
                }
                for (d, name) in [(Direction::Down, "download"), (Direction::Up, "upload")] {
                    self.bytes.get_or_create(&target_dir(&run.target, name)).inc_by(bloatlab_metrics::bytes_moved(r, d));
                }
            }
        }
    }

    pub fn show_budget(&self, b: &bloatlab_model::Budget, used: u64) {
        let l = vec![("period".to_string(), b.period_name().to_string())];
        self.budget.get_or_create(&l).set(b.bytes.min(i64::MAX as u64) as i64);
        self.budget_used.get_or_create(&l).set(used.min(i64::MAX as u64) as i64);
    }

    pub fn skipped(&self, t: &str) {
        self.skipped.get_or_create(&target(t)).inc();
    }

    pub fn set_pending(&self, n: usize) {
        self.pending.set(n as i64);
    }

    /// The exposition, OpenMetrics text.
    pub fn encode(&self) -> String {
        let mut s = String::new();
        encode(&mut s, &self.registry).expect("encoding to a String does not fail");
        s
    }
}

impl Default for Exposition {
    fn default() -> Exposition {
        Exposition::new()
    }
}

/// The worst loaded phase's probe loss, 0-1 (the phases' own summaries).


#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_classed_by_their_reason() {
        assert_eq!(failure_reason("cannot connect to 1.2.3.4:9770: connection refused (is `bloatlab server` running there?)"), "refused");
        assert_eq!(failure_reason("connect to x: timed out after 5 s"), "timeout");
        assert_eq!(failure_reason("the server is busy: --max-tests 4 reached"), "busy");
        assert_eq!(failure_reason("cannot resolve nowhere.invalid"), "unreachable");
        assert_eq!(failure_reason("interrupted by SIGTERM"), "interrupted");
        assert_eq!(failure_reason("something else"), "other");
    }

    #[test]
    fn a_loaded_target_starts_at_zero_and_a_run_on_a_boundary_takes_the_next_letter() {
        let e = Exposition::new();
        e.prime("a:1");
        let s = e.encode();
        assert!(s.contains("bloatlab_added_latency_histogram_seconds_count{target=\"a:1\"} 0"), "{s}");
        assert!(s.contains("bloatlab_runs_total{target=\"a:1\"} 0"), "{s}");
        for r in FAILURE_REASONS {
            assert!(s.contains(&format!("bloatlab_failures_total{{target=\"a:1\",reason=\"{r}\"}} 0")), "{s}");
        }
        // every reason failure_reason gives is primed
        for why in ["refused", "timed out", "busy", "cannot resolve", "interrupted", "secret", "x"] {
            assert!(FAILURE_REASONS.contains(&failure_reason(why)), "{why}");
        }
        // the buckets are the grade's boundaries; exactly 30 ms is a B, so
        // not in le="0.03", as the grade says
        assert_eq!(&added_buckets()[..5], &[0.005, 0.03, 0.06, 0.2, 0.4]);
        for (g, ms) in GRADE_THRESHOLDS_MS {
            assert!(observed(ms / 1e3) > ms / 1e3);
            assert!(Grade::from_added_ms(ms) > g);
        }
        assert_eq!(observed(0.0123), 0.0123);
    }

    #[test]
    fn the_alert_default_is_the_a_boundary() {
        let a = GRADE_THRESHOLDS_MS.iter().find(|(g, _)| *g == Grade::A).unwrap().1;
        assert_eq!(bloatlab_model::MonitorConfig::default().alert_added.as_secs_f64() * 1e3, a);
    }

    /// The shipped dashboard and alert rules agree with the grade's one
    /// table: the alert's bucket is the A boundary and its words say it,
    /// the grade panel maps 0..5 to the letters and states the scale.
    #[test]
    fn the_dashboards_derive_from_the_grade_table() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../dashboards");
        let a_ms = GRADE_THRESHOLDS_MS.iter().find(|(g, _)| *g == Grade::A).unwrap().1;
        let rules = std::fs::read_to_string(dir.join("bloatlab-alerts.yml")).unwrap();
        let rules_only: String = rules.lines().filter(|l| !l.trim_start().starts_with('#')).collect::<Vec<_>>().join("\n");
        let les: Vec<f64> = rules_only.split("le=\"").skip(1).map(|r| r.split('"').next().unwrap().parse().unwrap()).collect();
        assert_eq!(les, [a_ms / 1e3], "the alert's bucket");
        assert!(added_buckets().contains(&les[0]));
        assert!(rules.contains(&format!("added more than {} ms of latency", bloatlab_model::fmt::trim_num(a_ms))), "{rules}");
        let tests = std::fs::read_to_string(dir.join("bloatlab-alerts.test.yml")).unwrap();
        assert!(tests.contains(&format!("le=\"{}\"", les[0])) && tests.contains(&format!("added more than {} ms", bloatlab_model::fmt::trim_num(a_ms))));
        let board: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("bloatlab.json")).unwrap()).unwrap();
        let panel = board["panels"].as_array().unwrap().iter().find(|p| p["targets"][0]["expr"].as_str().is_some_and(|e| e.starts_with("bloatlab_grade"))).unwrap();
        let map = &panel["fieldConfig"]["defaults"]["mappings"][0]["options"];
        for (i, g) in Grade::LETTERS.iter().enumerate() {
            assert_eq!(map[i.to_string()]["text"], g.as_str(), "grade {i}");
        }
        assert!(panel["description"].as_str().unwrap().contains(&format!("({})", bloatlab_metrics::grade::scale_words())), "{}", panel["description"]);
    }

    #[test]
    fn a_failed_run_reads_down_and_counts_its_reason() {
        let e = Exposition::new();
        e.record(&Run { monitor_id: "m".into(), target: "a:1".into(), started_unix_ns: 2_000_000_000, outcome: Outcome::Failed("connection refused".into()) });
        let s = e.encode();
        assert!(s.contains("bloatlab_up{target=\"a:1\"} 0"), "{s}");
        assert!(s.contains("bloatlab_failures_total{target=\"a:1\",reason=\"refused\"} 1"), "{s}");
        assert!(s.contains("bloatlab_runs_total{target=\"a:1\"} 1"), "{s}");
        assert!(s.contains("bloatlab_last_run_timestamp_seconds{target=\"a:1\"} 2.0"), "{s}");
        assert!(s.contains("bloatlab_build_info{version=\""), "{s}");
        assert!(s.ends_with("# EOF\n"), "{s}");
    }
}
