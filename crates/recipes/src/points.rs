//! The points of a recipe run and what each produced: the data the runner
//! writes and the tables and plots read.
use crate::pacing::PacingResult;
use crate::params::Value;
use crate::rows::Row;
use bloatlab_results::TestResult;
use serde::Serialize;

/// One run of one grid combination.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    /// 1-based position in run order.
    pub index: usize,
    /// 0-based index of the grid combination (same for all repetitions).
    pub combo: usize,
    /// 1-based repetition number.
    pub rep: u32,
    /// Swept parameters of this point, grid order.
    pub params: Vec<(String, String)>,
}

/// Outcome of one point.
#[derive(Debug, Clone)]
pub struct PointOutcome {
    pub point: Point,
    pub values: Vec<(String, Value)>,
    pub status: String,
    pub ok: bool,
    pub file: Option<String>,
    pub elapsed_s: f64,
    pub rows: Vec<Row>,
    pub lab: Option<TestResult>,
    pub pacing: Option<PacingResult>,
    /// Extra words for the progress line.
    pub detail: String,
}

impl PointOutcome {
    /// A point not run yet: no status, no rows, no result.
    pub fn new(point: Point, values: Vec<(String, Value)>) -> PointOutcome {
        PointOutcome {
            point,
            values,
            status: String::new(),
            ok: false,
            file: None,
            elapsed_s: 0.0,
            rows: vec![],
            lab: None,
            pacing: None,
            detail: String::new(),
        }
    }
}

