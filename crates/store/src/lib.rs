//! bloatlab-store: the history `bloatlab monitor` keeps and `bloatlab
//! history` reads, behind one trait ([`Store`]).
//!
//! A run is a result document of `bloatlab test`'s schema (with its
//! `monitor` field) or a failure with its reason. Beside the document each
//! row keeps the headline numbers the result already holds (idle, loaded and
//! added latency, capacities, RPM, grade) as columns, so history queries
//! need not parse documents; they are copied from the result, never
//! computed here.
//!
//! PostgreSQL ([`postgres::Postgres`]): many monitors into one database,
//! the same columns and documents.
//!
//! SQLite ([`sqlite::Sqlite`]): one file, WAL (readers never block the
//! writer), a versioned schema (`PRAGMA user_version`) migrated forward on
//! open; a database written by a newer bloatlab is refused, not changed.
#![forbid(unsafe_code)]
use bloatlab_results::{Direction, TestResult};

pub mod postgres;
pub mod sqlite;

use bloatlab_model::Database;

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
    pub download_bps: Option<f64>,
    pub upload_bps: Option<f64>,
    pub rpm: Option<f64>,
    pub grade: Option<String>,
    /// Bytes the run's flows moved, both ways (0 for a failure).
    pub bytes: u64,
    /// Probes lost, percent: a latency-only round's pings; a loaded test's
    /// UDP probes in its worst loaded phase.
    pub loss_pct: Option<f64>,
}

impl RunRow {
    /// The row of `run`: the headline numbers of its result, as they are.
    pub fn of(run: &Run) -> RunRow {
        let mut row = RunRow { monitor_id: run.monitor_id.clone(), target: run.target.clone(), started_unix_ns: run.started_unix_ns, ..Default::default() };
        match &run.outcome {
            Outcome::Failed(why) => row.failure = Some(why.clone()),
            Outcome::Measured(r) => {
                let h = &r.headline;
                let bps = |v: f64, loaded: bool| loaded.then_some(v);
                row.complete = r.complete;
                row.incomplete_reason = r.incomplete_reason.clone();
                // a latency-only round has no UDP probes: its pings' median
                // is the line's idle latency
                row.idle_ms = h.idle_latency_ms.or_else(|| {
                    let idle = r.idle.as_ref()?;
                    (idle.summary.latency.received == 0).then_some(())?;
                    idle.summary.pings.first().filter(|p| p.latency.received > 0).map(|p| p.latency.p50_ms)
                });
                row.loaded_ms = h.loaded_latency_ms;
                row.added_ms = h.max_added_latency_ms;
                // measured when a scenario (or an RPM stage) loaded that direction
                use bloatlab_model::RpmDirection as D;
                let stage = |d: D| r.scenarios.is_empty() && r.rpm.as_ref().is_some_and(|x| x.stages.iter().any(|s| s.direction == d));
                row.download_bps = bps(h.download_capacity_bps, r.scenarios.iter().any(|p| p.downloads > 0) || stage(D::Download));
                row.upload_bps = bps(h.upload_capacity_bps, r.scenarios.iter().any(|p| p.uploads > 0) || stage(D::Upload));
                row.rpm = h.rpm;
                let round = r.idle.as_ref().filter(|i| i.summary.latency.sent == 0).and_then(|i| i.summary.pings.first()).filter(|p| p.latency.sent > 0);
                row.loss_pct = match round {
                    Some(p) => Some(p.latency.loss_pct),
                    // a latency-only round of a server's UDP probes
                    None if r.scenarios.is_empty() => r.idle.as_ref().filter(|i| i.summary.latency.sent > 0).map(|i| i.summary.latency.loss_pct),
                    None => r.scenarios.iter().filter(|p| p.summary.latency.sent > 0).map(|p| p.summary.latency.loss_pct).reduce(f64::max),
                };
                row.grade = h.grade.clone();
                row.bytes = bloatlab_metrics::bytes_moved(r, Direction::Down) + bloatlab_metrics::bytes_moved(r, Direction::Up);
            }
        }
        row
    }
}

/// Which runs to list.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Query {
    pub target: Option<String>,
    /// Runs started at or after (Unix ns).
    pub since_unix_ns: Option<u64>,
    /// Runs started before (Unix ns).
    pub until_unix_ns: Option<u64>,
}

/// Why the store refused: each kind says what to do about it, and a
/// monitor keeps the runs it could not write and tries again.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("the database is locked by another process (still busy after {0} s)")]
    Locked(u64),
    #[error("the database is read-only: {0}")]
    ReadOnly(String),
    #[error("the disk holding the database is full: {0}")]
    Full(String),
    #[error("{0} was written by a newer bloatlab (schema {1}; this one knows up to {2}): not changed")]
    Newer(String, i64, i64),
    #[error("the database server cannot be reached: {0}")]
    Unreachable(String),
    #[error("{0}")]
    Other(String),
}

/// The history of runs.
pub trait Store {
    /// Keep `run`; its row id.
    fn put(&mut self, run: &Run) -> Result<i64, StoreError>;
    /// The runs `q` selects, oldest first.
    fn rows(&mut self, q: &Query) -> Result<Vec<RunRow>, StoreError>;
    /// The result document of run `id` (None: a failure, or no such run).
    fn result(&mut self, id: i64) -> Result<Option<TestResult>, StoreError>;
    /// Delete runs started before `unix_ns`; how many went.
    fn prune(&mut self, before_unix_ns: u64) -> Result<usize, StoreError>;
    /// Bytes the runs started at or after `unix_ns` moved (a data budget's use).
    fn bytes_since(&mut self, unix_ns: u64) -> Result<u64, StoreError>;
}

/// Open `db` to write (created or migrated as needed).
pub fn open(db: &Database) -> Result<Box<dyn Store>, StoreError> {
    Ok(match db {
        Database::Sqlite(p) => Box::new(sqlite::Sqlite::open(p)?),
        Database::Postgres(url) => Box::new(postgres::Postgres::open(url, &db.to_string())?),
    })
}

/// Open `db` to read (it must exist, with this build's schema).
pub fn open_read(db: &Database) -> Result<Box<dyn Store>, StoreError> {
    Ok(match db {
        Database::Sqlite(p) => Box::new(sqlite::Sqlite::open_read(p)?),
        Database::Postgres(url) => Box::new(postgres::Postgres::open_read(url, &db.to_string())?),
    })
}
