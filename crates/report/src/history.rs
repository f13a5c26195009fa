//! `bloatlab history`: the runs a monitor kept, a row each or aggregated
//! per hour or day (its outputs: `export::history`). A run's numbers are its
//! result's headline as the store keeps it; an aggregate row's are the
//! medians of its runs' (Hyndman-Fan type 7, `metrics::percentile`) and the
//! worst added latency, loss and grade among them.
use crate::fmt::text_table;
use bloatlab_model::fmt::{int3, ms, rate};
use bloatlab_model::units::UtcTime;
use bloatlab_results::history::RunRow;

/// How runs are grouped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum By {
    Run,
    Hour,
    Day,
}

bloatlab_model::words!(By, "a grouping", Run = "run", Hour = "hour", Day = "day");

impl By {
    fn bucket_ns(self) -> u64 {
        match self {
            By::Run => 1,
            By::Hour => 3_600_000_000_000,
            By::Day => 86_400_000_000_000,
        }
    }
}

/// Runs of one target in one hour or day.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Bucket {
    pub start_unix_ns: u64,
    pub target: String,
    pub runs: usize,
    pub failed: usize,
    pub idle_ms: Option<f64>,
    /// The lowest and highest idle latency among the runs (a latency-only
    /// target's smokeping band).
    pub idle_min_ms: Option<f64>,
    pub idle_max_ms: Option<f64>,
    pub loaded_ms: Option<f64>,
    /// The lowest and highest loaded latency among the runs (a smokeping band).
    pub loaded_min_ms: Option<f64>,
    pub loaded_max_ms: Option<f64>,
    pub added_ms: Option<f64>,
    pub added_max_ms: Option<f64>,
    pub download_bps: Option<f64>,
    pub upload_bps: Option<f64>,
    pub rpm: Option<f64>,
    /// The highest probe loss among the runs, percent.
    pub loss_max_pct: Option<f64>,
    pub worst_grade: Option<String>,
}

/// Worse grades sort higher; a letter that is not a grade, highest.
fn grade_rank(g: &str) -> bloatlab_metrics::grade::Grade {
    bloatlab_metrics::grade::Grade::parse(g).unwrap_or(bloatlab_metrics::grade::Grade::Unknown)
}

fn median(v: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    let v: Vec<f64> = v.flatten().collect();
    bloatlab_metrics::percentile(&v, 50.0)
}

/// Group `rows` (oldest first) per target and hour or day (UTC).
pub fn aggregate(rows: &[RunRow], by: By) -> Vec<Bucket> {
    let size = by.bucket_ns();
    let mut out: Vec<Bucket> = vec![];
    let mut groups: Vec<(u64, String, Vec<&RunRow>)> = vec![];
    for r in rows {
        let start = r.started_unix_ns - r.started_unix_ns % size;
        match groups.iter_mut().find(|g| g.0 == start && g.1 == r.target) {
            Some(g) => g.2.push(r),
            None => groups.push((start, r.target.clone(), vec![r])),
        }
    }
    for (start, target, rs) in groups {
        out.push(summarize(start, target, &rs));
    }
    out.sort_by(|a, b| (a.start_unix_ns, &a.target).cmp(&(b.start_unix_ns, &b.target)));
    out
}

/// One bucket of runs: their medians, the worst added latency and grade.
fn summarize(start: u64, target: String, rs: &[&RunRow]) -> Bucket {
    let ok: Vec<&&RunRow> = rs.iter().filter(|r| r.failure.is_none()).collect();
    Bucket {
        start_unix_ns: start,
        target,
        runs: rs.len(),
        failed: rs.len() - ok.len(),
        idle_ms: median(ok.iter().map(|r| r.idle_ms)),
        idle_min_ms: ok.iter().filter_map(|r| r.idle_ms).reduce(f64::min),
        idle_max_ms: ok.iter().filter_map(|r| r.idle_ms).reduce(f64::max),
        loaded_ms: median(ok.iter().map(|r| r.loaded_ms)),
        loaded_min_ms: ok.iter().filter_map(|r| r.loaded_ms).fold(None, |a: Option<f64>, v| Some(a.map_or(v, |a| a.min(v)))),
        loaded_max_ms: ok.iter().filter_map(|r| r.loaded_ms).fold(None, |a: Option<f64>, v| Some(a.map_or(v, |a| a.max(v)))),
        added_ms: median(ok.iter().map(|r| r.added_ms)),
        added_max_ms: ok.iter().filter_map(|r| r.added_ms).fold(None, |a: Option<f64>, v| Some(a.map_or(v, |a| a.max(v)))),
        download_bps: median(ok.iter().map(|r| r.download_bps)),
        upload_bps: median(ok.iter().map(|r| r.upload_bps)),
        rpm: median(ok.iter().map(|r| r.rpm)),
        loss_max_pct: ok.iter().filter_map(|r| r.loss_pct).reduce(f64::max),
        worst_grade: ok.iter().filter_map(|r| r.grade.clone()).max_by_key(|g| grade_rank(g)),
    }
}

/// Each target's runs before `at` and from `at` on (`--compare WHEN`):
/// the same summary as a bucket, for both periods.
pub fn compare(rows: &[RunRow], at_unix_ns: u64) -> Vec<(Bucket, Bucket)> {
    let mut targets: Vec<&str> = rows.iter().map(|r| r.target.as_str()).collect();
    targets.sort();
    targets.dedup();
    targets
        .into_iter()
        .map(|t| {
            let before: Vec<&RunRow> = rows.iter().filter(|r| r.target == t && r.started_unix_ns < at_unix_ns).collect();
            let after: Vec<&RunRow> = rows.iter().filter(|r| r.target == t && r.started_unix_ns >= at_unix_ns).collect();
            let first = |v: &[&RunRow]| v.first().map(|r| r.started_unix_ns).unwrap_or(at_unix_ns);
            (summarize(first(&before), t.to_string(), &before), summarize(at_unix_ns, t.to_string(), &after))
        })
        .collect()
}

/// Before and after `at`, side by side, with the change of each median.
pub fn compare_table(rows: &[RunRow], at_unix_ns: u64) -> String {
    if rows.is_empty() {
        return "no runs in this range\n".into();
    }
    let at = UtcTime::from_unix_ns(at_unix_ns).rfc3339_secs();
    let mut t: Vec<Vec<String>> = vec![["Target", "Period", "Runs", "Failed", "Idle ms", "Loaded ms", "Added ms", "Worst added", "Down", "Up", "RPM", "Worst loss", "Worst grade"]
        .iter()
        .map(|s| s.to_string())
        .collect()];
    let diff = |a: Option<f64>, b: Option<f64>, f: fn(f64) -> String| match (a, b) {
        (Some(a), Some(b)) => f(b - a),
        _ => "-".into(),
    };
    let pct = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if a != 0.0 => bloatlab_model::fmt::pct_change(a, b),
        _ => "-".into(),
    };
    for (b, a) in compare(rows, at_unix_ns) {
        for (label, x) in [(format!("before {at}"), &b), (format!("from {at}"), &a)] {
            t.push([vec![x.target.clone(), label], bucket_cells(x)].concat());
        }
        t.push(vec![
            b.target.clone(),
            "change".into(),
            String::new(),
            String::new(),
            diff(b.idle_ms, a.idle_ms, signed_ms),
            diff(b.loaded_ms, a.loaded_ms, signed_ms),
            diff(b.added_ms, a.added_ms, signed_ms),
            diff(b.added_max_ms, a.added_max_ms, signed_ms),
            pct(b.download_bps, a.download_bps),
            pct(b.upload_bps, a.upload_bps),
            pct(b.rpm, a.rpm),
            diff(b.loss_max_pct, a.loss_max_pct, |d| format!("{d:+.1} pts")),
            String::new(),
        ]);
    }
    format!("{}\nMedians of each period's runs; change: after minus before (ms), or in percent.\n", text_table(&t))
}

/// A bucket's cells from "Runs" to "Worst grade" (the aggregated table and
/// the comparison share them).
fn bucket_cells(b: &Bucket) -> Vec<String> {
    vec![
        b.runs.to_string(),
        b.failed.to_string(),
        opt(b.idle_ms, ms),
        opt(b.loaded_ms, ms),
        opt(b.added_ms, signed_ms),
        opt(b.added_max_ms, signed_ms),
        opt(b.download_bps, rate),
        opt(b.upload_bps, rate),
        opt(b.rpm, int3),
        opt(b.loss_max_pct, loss),
        b.worst_grade.clone().unwrap_or_else(|| "-".into()),
    ]
}

fn loss(p: f64) -> String {
    format!("{p:.1}%")
}

fn opt(v: Option<f64>, f: fn(f64) -> String) -> String {
    v.map(f).unwrap_or_else(|| "-".into())
}

/// An added latency as the reports print it: `+12.3`, `-0.010` (a loaded
/// median under the idle one, within the probes' noise).
fn signed_ms(v: f64) -> String {
    bloatlab_model::fmt::signed(v)
}

pub(crate) fn time(ns: u64, by: By) -> String {
    let t = UtcTime::from_unix_ns(ns);
    match by {
        By::Run => t.rfc3339_secs(),
        By::Hour => format!("{:04}-{:02}-{:02}T{:02}Z", t.year, t.month, t.day, t.hour),
        By::Day => format!("{:04}-{:02}-{:02}", t.year, t.month, t.day),
    }
}

/// A run's grade; "-" for a run with nothing to grade (a latency-only
/// round, an RPM test: no added latency), "?" for one that could have had one.
fn grade_of(r: &RunRow) -> &str {
    match r.grade.as_deref() {
        Some(g) => g,
        None if r.added_ms.is_none() && r.loaded_ms.is_none() => "-",
        None => "?",
    }
}

/// One line of a run, as the monitor prints it when the run is kept: the
/// figures the run measured (a latency-only round: its idle latency and
/// loss; no "loaded -" or "RPM -").
pub fn run_line(r: &RunRow) -> String {
    if let Some(why) = &r.failure {
        return format!("{} {} failed: {why}", time(r.started_unix_ns, By::Run), r.target);
    }
    let mut parts = vec![];
    if let Some(v) = r.idle_ms {
        parts.push(format!("idle {} ms", ms(v)));
    }
    match (r.loaded_ms, r.added_ms) {
        (Some(l), Some(a)) => parts.push(format!("loaded {} ms ({} ms added)", ms(l), signed_ms(a))),
        (Some(l), None) => parts.push(format!("loaded {} ms", ms(l))),
        (None, Some(a)) => parts.push(format!("{} ms added", signed_ms(a))),
        (None, None) => {}
    }
    for (name, v, f) in [("down", r.download_bps, rate as fn(f64) -> String), ("up", r.upload_bps, rate), ("RPM", r.rpm, int3), ("loss", r.loss_pct, loss)] {
        if let Some(v) = v {
            parts.push(format!("{name} {}", f(v)));
        }
    }
    format!(
        "{} {} {}: {}{}",
        time(r.started_unix_ns, By::Run),
        r.target,
        grade_of(r),
        if parts.is_empty() { "nothing measured".to_string() } else { parts.join(", ") },
        if r.complete { String::new() } else { format!(" (incomplete: {})", r.incomplete_reason.as_deref().unwrap_or("cut short")) }
    )
}

/// The terminal table: a row per run (failures with their reason) or per
/// target and hour/day.
pub fn history_table(rows: &[RunRow], by: By) -> String {
    if rows.is_empty() {
        return "no runs in this range\n".into();
    }
    let (t, failures, note) = history_rows(rows, by);
    let mut s = text_table(&t);
    if !failures.is_empty() {
        s.push_str("\nFailures:\n");
        for f in failures {
            s.push_str(&format!("  {f}\n"));
        }
    }
    if let Some(n) = note {
        s.push('\n');
        s.push_str(&n);
        s.push('\n');
    }
    s
}

/// The table's rows (the first is the header), the failures' lines, and the
/// note under an aggregated table: shared by the terminal and the HTML.
pub(crate) fn history_rows(rows: &[RunRow], by: By) -> (Vec<Vec<String>>, Vec<String>, Option<String>) {
    let mut t: Vec<Vec<String>> = vec![];
    let mut failures = vec![];
    if by == By::Run {
        t.push(["Time (UTC)", "Target", "Idle ms", "Loaded ms", "Added ms", "Down", "Up", "RPM", "Loss", "Grade"].iter().map(|s| s.to_string()).collect());
        for r in rows {
            match &r.failure {
                Some(why) => {
                    t.push(vec![time(r.started_unix_ns, by), r.target.clone(), "-".into(), "-".into(), "-".into(), "-".into(), "-".into(), "-".into(), "-".into(), "failed".into()]);
                    failures.push(format!("{} {}: {why}", time(r.started_unix_ns, by), r.target));
                }
                None => t.push(vec![
                    time(r.started_unix_ns, by),
                    r.target.clone(),
                    opt(r.idle_ms, ms),
                    opt(r.loaded_ms, ms),
                    opt(r.added_ms, signed_ms),
                    opt(r.download_bps, rate),
                    opt(r.upload_bps, rate),
                    opt(r.rpm, int3),
                    opt(r.loss_pct, loss),
                    format!("{}{}", grade_of(r), if r.complete { "" } else { " (incomplete)" }),
                ]),
            }
        }
        return (t, failures, None);
    }
    t.push(
        ["Time (UTC)", "Target", "Runs", "Failed", "Idle ms", "Loaded ms", "Added ms", "Worst added", "Down", "Up", "RPM", "Worst loss", "Worst grade"]
            .iter()
            .map(|s| s.to_string())
            .collect(),
    );
    for b in aggregate(rows, by) {
        t.push([vec![time(b.start_unix_ns, by), b.target.clone()], bucket_cells(&b)].concat());
    }
    (t, failures, Some(format!("Per {}: medians of the runs' numbers; worst added latency, loss and grade among them.", by.name())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(t_s: u64, target: &str, added: Option<f64>, grade: &str) -> RunRow {
        RunRow {
            started_unix_ns: t_s * 1_000_000_000,
            target: target.into(),
            monitor_id: "m".into(),
            failure: added.is_none().then(|| "connection refused".into()),
            complete: true,
            idle_ms: added.map(|_| 1.0),
            loaded_ms: added.map(|a| 1.0 + a),
            added_ms: added,
            download_bps: added.map(|_| 9.4e6),
            upload_bps: added.map(|_| 9.3e6),
            rpm: added.map(|a| 60_000.0 / (1.0 + a)),
            grade: added.map(|_| grade.to_string()),
            ..Default::default()
        }
    }

    #[test]
    fn hours_hold_the_medians_and_the_worst_of_their_runs() {
        // 2026-11-20T10:00:00Z
        let h = 1_795_168_800;
        let rows = vec![
            row(h + 10, "a:1", Some(10.0), "A"),
            row(h + 900, "a:1", Some(500.0), "F"),
            row(h + 1800, "a:1", Some(20.0), "A"),
            row(h + 2000, "a:1", None, ""),
            row(h + 3700, "a:1", Some(3.0), "A+"),
            row(h + 20, "b:1", Some(40.0), "B"),
        ];
        let b = aggregate(&rows, By::Hour);
        assert_eq!(b.len(), 3);
        let first = &b[0];
        assert_eq!((first.target.as_str(), first.runs, first.failed), ("a:1", 4, 1));
        assert_eq!(first.added_ms, Some(20.0));
        assert_eq!(first.added_max_ms, Some(500.0));
        assert_eq!(first.worst_grade.as_deref(), Some("F"));
        assert_eq!(b[1].target, "b:1");
        assert_eq!(aggregate(&rows, By::Day).len(), 2);
        let t = history_table(&rows, By::Hour);
        assert!(t.contains("2026-11-20T10Z") && t.contains("+500"), "{t}");
        let t = history_table(&rows, By::Run);
        assert!(t.contains("Failures:\n  2026-11-20T10:33:20Z a:1: connection refused"), "{t}");
        let csv = crate::export::history::history_csv(&rows, By::Run);
        assert_eq!(csv.lines().count(), 7);
        assert!(csv.lines().nth(4).unwrap().contains(",connection refused,false,,"), "{csv}");
        // numbers to their resolution, without float noise
        let mut noisy = rows[0].clone();
        (noisy.idle_ms, noisy.added_ms, noisy.download_bps, noisy.rpm) = (Some(0.028964999999999998), Some(10.0), Some(9.4e6 + 0.4), Some(60_000.0 / 11.0));
        let line = crate::export::history::history_csv(&[noisy], By::Run).lines().nth(1).unwrap().to_string();
        assert!(line.contains(",0.028965,") && line.contains(",10,") && line.contains(",9400000,") && line.contains(",5454.545,"), "{line}");
        assert!(run_line(&rows[0]).contains("a:1 A: idle 1.00 ms, loaded 11.0 ms (+10.0 ms added)"), "{}", run_line(&rows[0]));
        // before and after 10:30: a:1 had 10, 500 (median 255) then 20, 3 (median 11.5)
        let c = compare(&rows, (h + 1800) * 1_000_000_000);
        assert_eq!(c.len(), 2);
        assert_eq!((c[0].0.added_ms, c[0].1.added_ms), (Some(255.0), Some(11.5)));
        assert_eq!((c[0].0.runs, c[0].1.runs, c[0].1.failed), (2, 3, 1));
        let t = compare_table(&rows, (h + 1800) * 1_000_000_000);
        let change = t.lines().find(|l| l.contains("a:1") && l.contains("change")).unwrap();
        assert!(change.contains("-244"), "{t}");
        // a latency-only round says what it measured, nothing else
        let round = RunRow { idle_ms: Some(12.5), loss_pct: Some(0.0), complete: true, started_unix_ns: h * 1_000_000_000, target: "ping:a".into(), ..Default::default() };
        assert_eq!(run_line(&round), "2026-11-20T10:00:00Z ping:a -: idle 12.5 ms, loss 0.0%");
        let mut below = rows[0].clone();
        below.added_ms = Some(-0.01);
        assert!(run_line(&below).contains("(-0.010 ms added)"), "{}", run_line(&below));
    }
}
