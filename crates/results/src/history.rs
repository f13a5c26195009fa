//! A run as the history keeps it (`bloatlab monitor`, `bloatlab history`):
//! the run ([`Run`]: its monitor, target, start and outcome) and its row
//! ([`RunRow`]), a plain projection of the result's headline: every figure
//! a row holds is computed where the result is made (`engine::summarize`),
//! never here.
use crate::TestResult;

/// One run of a target.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    pub monitor_id: String,
    pub target: String,
    /// When the run started, Unix ns.
    pub started_unix_ns: u64,
    pub outcome: Outcome,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// What was measured (a run cut short is kept too: `complete` says so).
    Measured(Box<TestResult>),
    /// Nothing was measured: why, in one line.
    Failed(String),
}

/// A run as history lists it: the result's headline, not its samples.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RunRow {
    /// The store's id of the run (0 before it is stored).
    pub id: i64,
    pub monitor_id: String,
    pub target: String,
    pub started_unix_ns: u64,
    /// The failure's reason; None when measured.
    pub failure: Option<String>,
    /// The result was complete (false: cut short, `incomplete_reason`).
    pub complete: bool,
    pub incomplete_reason: Option<String>,
    pub idle_ms: Option<f64>,
    pub loaded_ms: Option<f64>,
    pub added_ms: Option<f64>,
    /// None: no phase loaded that direction.
    pub download_bps: Option<f64>,
    pub upload_bps: Option<f64>,
    pub rpm: Option<f64>,
    pub grade: Option<String>,
    /// Bytes the run moved, both ways (0 for a failure).
    pub bytes: u64,
    /// Probes lost, percent (`Headline::loss_pct`).
    pub loss_pct: Option<f64>,
}

impl RunRow {
    /// The row of `run`: its result's headline, as it is.
    pub fn of(run: &Run) -> RunRow {
        let mut row = RunRow { monitor_id: run.monitor_id.clone(), target: run.target.clone(), started_unix_ns: run.started_unix_ns, ..Default::default() };
        match &run.outcome {
            Outcome::Failed(why) => row.failure = Some(why.clone()),
            Outcome::Measured(r) => {
                let h = &r.headline;
                row.complete = r.complete;
                row.incomplete_reason = r.incomplete_reason.clone();
                row.idle_ms = h.idle_latency_ms;
                row.loaded_ms = h.loaded_latency_ms;
                row.added_ms = h.max_added_latency_ms;
                row.download_bps = h.download_measured.then_some(h.download_capacity_bps);
                row.upload_bps = h.upload_measured.then_some(h.upload_capacity_bps);
                row.rpm = h.rpm;
                row.grade = h.grade.clone();
                row.bytes = h.bytes_moved;
                row.loss_pct = h.loss_pct;
            }
        }
        row
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Headline;

    #[test]
    fn a_row_is_the_headline_as_it_is() {
        let headline = Headline {
            idle_latency_ms: Some(1.5),
            loaded_latency_ms: Some(41.5),
            max_added_latency_ms: Some(40.0),
            download_capacity_bps: 9e6,
            download_measured: true,
            upload_capacity_bps: 0.0,
            rpm: Some(900.0),
            grade: Some("B".into()),
            loss_pct: Some(0.5),
            bytes_moved: 12345,
            ..Default::default()
        };
        let r = TestResult {
            schema: crate::SCHEMA_NAME.into(),
            schema_version: crate::SCHEMA_VERSION,
            complete: true,
            incomplete_reason: None,
            metadata: Default::default(),
            idle: None,
            scenarios: vec![],
            headline,
            lab: None,
            rpm: None,
            ramp: vec![],
            client: Default::default(),
            household: None,
            monitor: None,
        };
        let run = Run { monitor_id: "m".into(), target: "h:1".into(), started_unix_ns: 7, outcome: Outcome::Measured(Box::new(r)) };
        let row = RunRow::of(&run);
        assert_eq!((row.idle_ms, row.loaded_ms, row.added_ms), (Some(1.5), Some(41.5), Some(40.0)));
        assert_eq!((row.download_bps, row.upload_bps), (Some(9e6), None), "an unloaded direction has no capacity");
        assert_eq!((row.rpm, row.grade.as_deref(), row.loss_pct, row.bytes), (Some(900.0), Some("B"), Some(0.5), 12345));
        assert!(row.complete && row.failure.is_none());
        let failed = RunRow::of(&Run { outcome: Outcome::Failed("refused".into()), ..run });
        assert_eq!((failed.failure.as_deref(), failed.bytes, failed.complete), (Some("refused"), 0, false));
    }
}
