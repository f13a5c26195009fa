//! bloatlab-store: the history `bloatlab monitor` keeps and `bloatlab
//! history` reads, behind one trait ([`Store`]).
//!
//! A run is a result document of `bloatlab test`'s schema (with its
//! `monitor` field) or a failure with its reason. Beside the document each
//! row keeps the headline numbers the result already holds (idle, loaded and
//! added latency, capacities, RPM, grade, loss, bytes) as columns, so
//! history queries need not parse documents: the row is
//! `results::history::RunRow`, a projection of the headline.
//!
//! Both backends are made from one column table and one migration history
//! ([`schema`]): their DDL, INSERT, SELECT and row reader, and the same
//! guarantee (a run is kept once: its monitor, target and start).
//!
//! PostgreSQL ([`postgres::Postgres`]): many monitors into one database,
//! the same columns and documents.
//!
//! SQLite ([`sqlite::Sqlite`]): one file, WAL (readers never block the
//! writer), a versioned schema (`PRAGMA user_version`) migrated forward on
//! open; a database written by a newer bloatlab is refused, not changed.
#![forbid(unsafe_code)]
use bloatlab_results::TestResult;

pub mod postgres;
pub mod schema;
pub mod sqlite;

use bloatlab_model::Database;

pub use bloatlab_results::history::{Outcome, Run, RunRow};

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
