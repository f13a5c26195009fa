//! The history in one SQLite file.
use crate::schema::{self, Dialect, Ty, Value};
use crate::{Outcome, Query, Run, RunRow, Store, StoreError};
use bloatlab_results::TestResult;
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{params, Connection, ErrorCode, OpenFlags, OptionalExtension, ToSql};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long a write waits for another writer before it is refused.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The schema version this build writes ([`crate::schema`]).
pub const SCHEMA_VERSION: i64 = schema::SCHEMA_VERSION;
const D: Dialect = Dialect::Sqlite;

pub struct Sqlite {
    conn: Connection,
    path: PathBuf,
}

fn error(path: &Path, e: rusqlite::Error) -> StoreError {
    let msg = format!("{}: {e}", path.display());
    match e.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy) | Some(ErrorCode::DatabaseLocked) => StoreError::Locked(BUSY_TIMEOUT.as_secs()),
        Some(ErrorCode::ReadOnly) => StoreError::ReadOnly(msg),
        Some(ErrorCode::DiskFull) => StoreError::Full(msg),
        _ => StoreError::Other(msg),
    }
}

impl Sqlite {
    /// Open (or create) the database at `path` for writing, migrated to
    /// this build's schema.
    pub fn open(path: &Path) -> Result<Sqlite, StoreError> {
        let conn = Connection::open(path).map_err(|e| error(path, e))?;
        let mut s = Sqlite { conn, path: path.to_path_buf() };
        s.setup(true)?;
        Ok(s)
    }

    /// Open an existing database to read (while a monitor writes it).
    pub fn open_read(path: &Path) -> Result<Sqlite, StoreError> {
        if !path.exists() {
            return Err(StoreError::Other(format!("{}: no such database", path.display())));
        }
        let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX).map_err(|e| error(path, e))?;
        let mut s = Sqlite { conn, path: path.to_path_buf() };
        s.setup(false)?;
        Ok(s)
    }

    fn setup(&mut self, write: bool) -> Result<(), StoreError> {
        let p = self.path.clone();
        let e = |e| error(&p, e);
        self.conn.busy_timeout(BUSY_TIMEOUT).map_err(e)?;
        let version: i64 = self.conn.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(e)?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::Newer(p.display().to_string(), version, SCHEMA_VERSION));
        }
        if !write {
            if version < SCHEMA_VERSION {
                return Err(StoreError::Other(format!(
                    "{}: schema {version}, older than this bloatlab's {SCHEMA_VERSION}; `bloatlab monitor --db` on it migrates it",
                    p.display()
                )));
            }
            return Ok(());
        }
        // WAL: readers (bloatlab history) never block the monitor's writes
        let mode: String = self.conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0)).map_err(e)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::Other(format!("{}: the database cannot use WAL (journal mode {mode})", p.display())));
        }
        self.conn.pragma_update(None, "synchronous", "NORMAL").map_err(e)?;
        if version == SCHEMA_VERSION {
            return Ok(());
        }
        let tx = self.conn.transaction().map_err(e)?;
        let existing: Vec<String> = {
            let mut st = tx.prepare(&format!("SELECT name FROM pragma_table_info('{}')", D.table())).map_err(e)?;
            let names = st.query_map([], |r| r.get::<_, String>(0)).map_err(e)?;
            names.collect::<Result<_, _>>().map_err(e)?
        };
        for m in schema::migration(D, version, &existing) {
            tx.execute_batch(&m).map_err(e)?;
        }
        tx.pragma_update(None, "user_version", SCHEMA_VERSION).map_err(e)?;
        tx.commit().map_err(e)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        match self {
            Value::Text(v) => v.to_sql(),
            Value::Int(v) => v.to_sql(),
            Value::Bool(v) => v.to_sql(),
            Value::Real(v) => v.to_sql(),
        }
    }
}

/// Column `i` of a row, as its type reads.
fn read(r: &rusqlite::Row, i: usize, t: Ty) -> rusqlite::Result<Value> {
    Ok(match t {
        Ty::Id | Ty::Int | Ty::Bytes => Value::Int(r.get(i)?),
        Ty::Text | Ty::TextNotNull => Value::Text(match r.get_ref(i)? {
            ValueRef::Null => None,
            _ => Some(r.get(i)?),
        }),
        Ty::Bool => Value::Bool(r.get(i)?),
        Ty::Real => Value::Real(r.get(i)?),
    })
}

impl Store for Sqlite {
    fn put(&mut self, run: &Run) -> Result<i64, StoreError> {
        let row = RunRow::of(run);
        let doc = match &run.outcome {
            Outcome::Measured(r) => Some(serde_json::to_string(r).map_err(|e| StoreError::Other(format!("the result: {e}")))?),
            Outcome::Failed(_) => None,
        };
        let values = schema::values(&row, doc);
        let params: Vec<&dyn ToSql> = values.iter().map(|v| v as &dyn ToSql).collect();
        // Stepped to its end: SQLite commits an INSERT ... RETURNING, and
        // runs the WAL's automatic checkpoint, only when the statement is
        // done (query_row stops at the row: the log then grew for ever).
        let e = |e| error(&self.path, e);
        let mut st = self.conn.prepare_cached(&schema::insert(D)).map_err(e)?;
        let mut rows = st.query(params.as_slice()).map_err(e)?;
        let id = rows.next().map_err(e)?.ok_or_else(|| StoreError::Other("the insert returned no id".into()))?.get(0).map_err(e)?;
        while rows.next().map_err(e)?.is_some() {}
        Ok(id)
    }

    fn rows(&mut self, q: &Query) -> Result<Vec<RunRow>, StoreError> {
        let e = |e| error(&self.path, e);
        let mut st = self.conn.prepare(&schema::select(D)).map_err(e)?;
        let since = q.since_unix_ns.unwrap_or(0).min(i64::MAX as u64) as i64;
        let until = q.until_unix_ns.unwrap_or(i64::MAX as u64).min(i64::MAX as u64) as i64;
        let types = schema::read_types();
        let rows = st
            .query_map(params![q.target, since, until], |r| {
                let v = types.iter().enumerate().map(|(i, t)| read(r, i, *t)).collect::<Result<Vec<_>, _>>()?;
                Ok(schema::from_values(v))
            })
            .map_err(e)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(e)
    }

    fn result(&mut self, id: i64) -> Result<Option<TestResult>, StoreError> {
        let doc: Option<Option<String>> =
            self.conn.query_row("SELECT result FROM runs WHERE id = ?1", [id], |r| r.get(0)).optional().map_err(|e| error(&self.path, e))?;
        match doc.flatten() {
            None => Ok(None),
            Some(d) => serde_json::from_str(&d).map(Some).map_err(|e| StoreError::Other(format!("{}: run {id}: {e}", self.path.display()))),
        }
    }

    fn bytes_since(&mut self, unix_ns: u64) -> Result<u64, StoreError> {
        let n: i64 = self
            .conn
            .query_row("SELECT COALESCE(SUM(bytes), 0) FROM runs WHERE started_unix_ns >= ?1", [unix_ns.min(i64::MAX as u64) as i64], |r| r.get(0))
            .map_err(|e| error(&self.path, e))?;
        Ok(n.max(0) as u64)
    }

    fn prune(&mut self, before_unix_ns: u64) -> Result<usize, StoreError> {
        self.conn
            .execute("DELETE FROM runs WHERE started_unix_ns < ?1", [before_unix_ns.min(i64::MAX as u64) as i64])
            .map_err(|e| error(&self.path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(added: f64) -> TestResult {
        let mut r: TestResult = serde_json::from_value(serde_json::json!({
            "schema": "bloatlab-result", "schema_version": 2, "complete": true,
            "metadata": serde_json::to_value(bloatlab_results::Metadata::default()).unwrap(),
            "scenarios": [], "headline": serde_json::to_value(bloatlab_results::Headline::default()).unwrap()
        }))
        .unwrap();
        r.headline.max_added_latency_ms = Some(added);
        r.headline.grade = Some("B".into());
        r
    }

    fn run(target: &str, t: u64, outcome: Outcome) -> Run {
        Run { monitor_id: "m".into(), target: target.into(), started_unix_ns: t, outcome }
    }

    #[test]
    fn runs_are_kept_listed_read_back_and_pruned() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.sqlite");
        let mut s = Sqlite::open(&path).unwrap();
        let a = s.put(&run("a:1", 10, Outcome::Measured(Box::new(result(42.5))))).unwrap();
        s.put(&run("b:1", 20, Outcome::Failed("connection refused".into()))).unwrap();
        s.put(&run("a:1", 30, Outcome::Measured(Box::new(result(7.0))))).unwrap();
        let all = s.rows(&Query::default()).unwrap();
        assert_eq!(all.len(), 3);
        assert_eq!((all[0].added_ms, all[0].grade.as_deref()), (Some(42.5), Some("B")));
        assert_eq!(all[1].failure.as_deref(), Some("connection refused"));
        let a_only = s.rows(&Query { target: Some("a:1".into()), since_unix_ns: Some(15), ..Default::default() }).unwrap();
        assert_eq!(a_only.iter().map(|r| r.started_unix_ns).collect::<Vec<_>>(), [30]);
        assert_eq!(s.result(a).unwrap().unwrap().headline.max_added_latency_ms, Some(42.5));
        // a reader beside the writer (WAL)
        let mut r = Sqlite::open_read(&path).unwrap();
        assert_eq!(r.rows(&Query::default()).unwrap().len(), 3);
        assert_eq!(s.prune(25).unwrap(), 2);
        assert_eq!(r.rows(&Query::default()).unwrap().len(), 1);
    }

    /// A monitor writes for months: the write-ahead log is checkpointed into
    /// the database as it goes (SQLite's automatic checkpoint at 1000
    /// pages), so neither file grows without bound.
    #[test]
    fn the_write_ahead_log_is_checkpointed_as_runs_are_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.sqlite");
        let mut s = Sqlite::open(&path).unwrap();
        let mut big = result(1.0);
        big.metadata.command = vec!["x".repeat(8192)];
        for i in 0..1500u64 {
            s.put(&run("a:1", i, Outcome::Measured(Box::new(big.clone())))).unwrap();
        }
        let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        let wal = size(&path.with_extension("sqlite-wal"));
        let main = size(&path);
        assert!(main > 4 << 20, "12 MB of runs written, the database file holds {main} bytes (the log {wal}): no checkpoint ran");
        assert!(wal < 6 << 20, "the write-ahead log grew to {wal} bytes");
    }

    #[test]
    fn readers_beside_a_writer_see_only_whole_runs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.sqlite");
        let mut w = Sqlite::open(&path).unwrap();
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|sc| {
            let readers: Vec<_> = (0..4)
                .map(|_| {
                    sc.spawn(|| {
                        let mut r = Sqlite::open_read(&path).unwrap();
                        let (mut last, mut reads) = (0, 0);
                        while !done.load(std::sync::atomic::Ordering::Relaxed) {
                            let rows = r.rows(&Query::default()).unwrap();
                            // runs only arrive, whole: each with its document
                            assert!(rows.len() >= last, "{} after {last}", rows.len());
                            if let Some(x) = rows.last() {
                                assert_eq!(r.result(x.id).unwrap().unwrap().headline.max_added_latency_ms, x.added_ms);
                            }
                            last = rows.len();
                            reads += 1;
                        }
                        (last, reads)
                    })
                })
                .collect();
            for i in 0..300u64 {
                w.put(&run("a:1", i, Outcome::Measured(Box::new(result(i as f64))))).unwrap();
            }
            done.store(true, std::sync::atomic::Ordering::Relaxed);
            for h in readers {
                let (last, reads) = h.join().unwrap();
                assert!(reads > 1 && last <= 300, "{reads} reads, {last} rows");
            }
        });
        assert_eq!(Sqlite::open_read(&path).unwrap().rows(&Query::default()).unwrap().len(), 300);
    }

    /// The schemas bloatlab wrote before the one column table (0.1's
    /// SQLite versions 1, 2 and 3), as they were.
    const LEGACY: &[&str] = &[
        "CREATE TABLE runs (
            id INTEGER PRIMARY KEY,
            monitor_id TEXT NOT NULL,
            target TEXT NOT NULL,
            started_unix_ns INTEGER NOT NULL,
            failure TEXT,
            complete INTEGER NOT NULL,
            incomplete_reason TEXT,
            idle_ms REAL,
            loaded_ms REAL,
            added_ms REAL,
            download_bps REAL,
            upload_bps REAL,
            rpm REAL,
            grade TEXT,
            result TEXT
        );
        CREATE INDEX runs_by_time ON runs (started_unix_ns);
        CREATE INDEX runs_by_target ON runs (target, started_unix_ns);",
        "ALTER TABLE runs ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0;",
        "ALTER TABLE runs ADD COLUMN loss_pct REAL;",
    ];

    #[test]
    fn databases_of_every_earlier_schema_are_migrated_in_place_and_keep_their_runs() {
        for old in 1..=LEGACY.len() {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("h.sqlite");
            {
                let c = Connection::open(&path).unwrap();
                for m in &LEGACY[..old] {
                    c.execute_batch(m).unwrap();
                }
                c.pragma_update(None, "user_version", old as i64).unwrap();
                c.execute("INSERT INTO runs (monitor_id, target, started_unix_ns, complete, added_ms, result) VALUES ('m', 'a:1', 5, 1, 12.5, NULL)", []).unwrap();
                // the same run written twice (a retried write, before runs were kept once)
                c.execute("INSERT INTO runs (monitor_id, target, started_unix_ns, complete, failure) VALUES ('m', 'a:1', 7, 0, 'x')", []).unwrap();
                c.execute("INSERT INTO runs (monitor_id, target, started_unix_ns, complete, failure) VALUES ('m', 'a:1', 7, 0, 'x')", []).unwrap();
            }
            // a reader refuses the old schema and says how to migrate it
            assert!(Sqlite::open_read(&path).err().unwrap().to_string().contains("migrates it"), "schema {old}");
            let mut s = Sqlite::open(&path).unwrap();
            let v: i64 = s.conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
            assert_eq!(v, SCHEMA_VERSION);
            let rows = s.rows(&Query::default()).unwrap();
            assert_eq!(rows.len(), 2, "schema {old}: the duplicate folded into its first row");
            assert_eq!((rows[0].added_ms, rows[0].bytes, rows[0].loss_pct), (Some(12.5), 0, None), "schema {old}");
            assert_eq!(rows[1].failure.as_deref(), Some("x"));
            let mut r = result(1.0);
            r.headline.loss_pct = Some(2.5);
            r.headline.bytes_moved = 1000;
            let id = s.put(&run("a:1", 10, Outcome::Measured(Box::new(r.clone())))).unwrap();
            // kept once: the same run again is the same row
            assert_eq!(s.put(&run("a:1", 10, Outcome::Measured(Box::new(r)))).unwrap(), id);
            let rows = s.rows(&Query::default()).unwrap();
            assert_eq!(rows.len(), 3);
            assert_eq!((rows[2].loss_pct, rows[2].bytes), (Some(2.5), 1000));
            assert_eq!(s.bytes_since(6).unwrap(), 1000);
            drop(s);
            // opened again: nothing to do, nothing changes
            assert_eq!(Sqlite::open(&path).unwrap().rows(&Query::default()).unwrap(), rows);
        }
    }

    #[test]
    fn a_newer_schema_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.sqlite");
        drop(Sqlite::open(&path).unwrap());
        Connection::open(&path).unwrap().pragma_update(None, "user_version", SCHEMA_VERSION + 1).unwrap();
        let e = Sqlite::open(&path).err().unwrap();
        assert!(matches!(e, StoreError::Newer(_, v, _) if v == SCHEMA_VERSION + 1), "{e}");
        assert!(e.to_string().contains("newer bloatlab"), "{e}");
    }

    #[test]
    fn a_read_only_database_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.sqlite");
        drop(Sqlite::open(&path).unwrap());
        // a reader cannot write: the error says read-only
        let mut r = Sqlite::open_read(&path).unwrap();
        let e = r.put(&run("a:1", 1, Outcome::Failed("x".into()))).unwrap_err();
        assert!(matches!(e, StoreError::ReadOnly(_)), "{e:?}");
    }
}
