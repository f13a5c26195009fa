//! The runs table, once, for both backends: its columns (name, type, the
//! schema version that added it), from which each dialect's DDL, its
//! migrations, the INSERT, the SELECT and the row reader are made.
//!
//! One migration history: version N adds the columns and indexes whose
//! `since` is N. Every step is idempotent (a column is added only where it
//! is missing, an index only where it is not there), so a database of any
//! earlier bloatlab migrates in place: SQLite files of schemas 1-3 and
//! PostgreSQL databases of schemas 1-2 (whose numbering differed) alike.
//! Version 4 keeps a run once in both (a unique index on monitor, target
//! and start); duplicates an older SQLite file may hold (a write retried)
//! are the same run and are folded into its first row before the index is
//! made.
use crate::RunRow;

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

impl Dialect {
    /// The runs table's name.
    pub fn table(self) -> &'static str {
        match self {
            Dialect::Sqlite => "runs",
            Dialect::Postgres => "bloatlab_runs",
        }
    }

    fn sql_type(self, t: Ty) -> &'static str {
        match (self, t) {
            (Dialect::Sqlite, Ty::Id) => "INTEGER PRIMARY KEY",
            (Dialect::Postgres, Ty::Id) => "BIGSERIAL PRIMARY KEY",
            (_, Ty::Text) => "TEXT",
            (_, Ty::TextNotNull) => "TEXT NOT NULL",
            (Dialect::Sqlite, Ty::Int) => "INTEGER NOT NULL",
            (Dialect::Postgres, Ty::Int) => "BIGINT NOT NULL",
            (Dialect::Sqlite, Ty::Bytes) => "INTEGER NOT NULL DEFAULT 0",
            (Dialect::Postgres, Ty::Bytes) => "BIGINT NOT NULL DEFAULT 0",
            (Dialect::Sqlite, Ty::Bool) => "INTEGER NOT NULL",
            (Dialect::Postgres, Ty::Bool) => "BOOLEAN NOT NULL",
            (Dialect::Sqlite, Ty::Real) => "REAL",
            (Dialect::Postgres, Ty::Real) => "DOUBLE PRECISION",
        }
    }
}

/// A column's type, as both dialects spell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    Id,
    Text,
    TextNotNull,
    Int,
    /// A byte count, 0 for rows that predate it.
    Bytes,
    Bool,
    Real,
}

pub struct Column {
    pub name: &'static str,
    pub ty: Ty,
    /// The schema version that added it.
    pub since: i64,
}

const fn col(name: &'static str, ty: Ty, since: i64) -> Column {
    Column { name, ty, since }
}

/// The runs table: `id` first, then the row's figures in [`RunRow`]'s
/// order, the result document last.
pub const COLUMNS: &[Column] = &[
    col("id", Ty::Id, 1),
    col("monitor_id", Ty::TextNotNull, 1),
    col("target", Ty::TextNotNull, 1),
    col("started_unix_ns", Ty::Int, 1),
    col("failure", Ty::Text, 1),
    col("complete", Ty::Bool, 1),
    col("incomplete_reason", Ty::Text, 1),
    col("idle_ms", Ty::Real, 1),
    col("loaded_ms", Ty::Real, 1),
    col("added_ms", Ty::Real, 1),
    col("download_bps", Ty::Real, 1),
    col("upload_bps", Ty::Real, 1),
    col("rpm", Ty::Real, 1),
    col("grade", Ty::Text, 1),
    col("bytes", Ty::Bytes, 2),
    col("loss_pct", Ty::Real, 3),
    col("result", Ty::Text, 1),
];

/// An index on the runs table.
pub struct Index {
    /// Without the table's prefix ("by_time": `runs_by_time`, `bloatlab_runs_by_time`).
    pub name: &'static str,
    pub unique: bool,
    pub columns: &'static str,
    pub since: i64,
}

pub const INDEXES: &[Index] = &[
    Index { name: "by_time", unique: false, columns: "started_unix_ns", since: 1 },
    Index { name: "by_target", unique: false, columns: "target, started_unix_ns", since: 1 },
    Index { name: "once", unique: true, columns: "monitor_id, target, started_unix_ns", since: 4 },
];

/// The columns a run is written with (all but `id`), in order.
fn written() -> impl Iterator<Item = &'static Column> {
    COLUMNS.iter().filter(|c| c.ty != Ty::Id)
}

/// The columns a row is read from (all but `result`), in order.
fn read() -> impl Iterator<Item = &'static Column> {
    COLUMNS.iter().filter(|c| c.name != "result")
}

/// `CREATE TABLE IF NOT EXISTS` with every column.
pub fn create_table(d: Dialect) -> String {
    let cols: Vec<String> = COLUMNS.iter().map(|c| format!("{} {}", c.name, d.sql_type(c.ty))).collect();
    format!("CREATE TABLE IF NOT EXISTS {} ({})", d.table(), cols.join(", "))
}

/// The statement that adds `c` to a table made before it.
pub fn add_column(d: Dialect, c: &Column) -> String {
    format!("ALTER TABLE {} ADD COLUMN {} {}", d.table(), c.name, d.sql_type(c.ty))
}

/// `CREATE [UNIQUE] INDEX IF NOT EXISTS` for `i`.
pub fn create_index(d: Dialect, i: &Index) -> String {
    format!(
        "CREATE {}INDEX IF NOT EXISTS {}_{} ON {} ({})",
        if i.unique { "UNIQUE " } else { "" },
        d.table(),
        i.name,
        d.table(),
        i.columns
    )
}

/// Before the run-once index: fold duplicates of a run into its first row.
pub fn fold_duplicates(d: Dialect) -> String {
    let t = d.table();
    format!("DELETE FROM {t} WHERE id NOT IN (SELECT MIN(id) FROM {t} GROUP BY monitor_id, target, started_unix_ns)")
}

/// The migration to this build's schema from `version` (0: nothing yet)
/// whose table holds `existing` columns (none: no table yet), as
/// statements in order.
pub fn migration(d: Dialect, version: i64, existing: &[String]) -> Vec<String> {
    let mut out = vec![create_table(d)];
    if !existing.is_empty() {
        for c in COLUMNS.iter().filter(|c| !existing.iter().any(|e| e.eq_ignore_ascii_case(c.name))) {
            out.push(add_column(d, c));
        }
        if version < SCHEMA_VERSION {
            out.push(fold_duplicates(d));
        }
    }
    out.extend(INDEXES.iter().map(|i| create_index(d, i)));
    out
}

/// `INSERT` of one run (`$1`.. in [`values`]'s order; SQLite takes `$N`
/// too): a run already kept (its monitor, target and start) is not added
/// again; its id comes back either way.
pub fn insert(d: Dialect) -> String {
    let names: Vec<&str> = written().map(|c| c.name).collect();
    let params: Vec<String> = (1..=names.len()).map(|i| format!("${i}")).collect();
    format!(
        "INSERT INTO {} ({}) VALUES ({}) ON CONFLICT (monitor_id, target, started_unix_ns) DO UPDATE SET monitor_id = excluded.monitor_id RETURNING id",
        d.table(),
        names.join(", "),
        params.join(", ")
    )
}

/// `SELECT` of the rows a query picks: `$1` the target (NULL: all), `$2`
/// and `$3` the start's range; columns in [`from_values`]'s order.
pub fn select(d: Dialect) -> String {
    let names: Vec<&str> = read().map(|c| c.name).collect();
    format!(
        "SELECT {} FROM {} WHERE (CAST($1 AS TEXT) IS NULL OR target = $1) AND started_unix_ns >= $2 AND started_unix_ns < $3 ORDER BY started_unix_ns, id",
        names.join(", "),
        d.table()
    )
}

/// A value of a column, either dialect's.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Text(Option<String>),
    Int(i64),
    Bool(bool),
    Real(Option<f64>),
}

fn ns(v: u64) -> i64 {
    v.min(i64::MAX as u64) as i64
}

/// The values a run is written with, in [`insert`]'s order (`doc`: its
/// result document).
pub fn values(row: &RunRow, doc: Option<String>) -> Vec<Value> {
    written()
        .map(|c| match c.name {
            "monitor_id" => Value::Text(Some(row.monitor_id.clone())),
            "target" => Value::Text(Some(row.target.clone())),
            "started_unix_ns" => Value::Int(ns(row.started_unix_ns)),
            "failure" => Value::Text(row.failure.clone()),
            "complete" => Value::Bool(row.complete),
            "incomplete_reason" => Value::Text(row.incomplete_reason.clone()),
            "idle_ms" => Value::Real(row.idle_ms),
            "loaded_ms" => Value::Real(row.loaded_ms),
            "added_ms" => Value::Real(row.added_ms),
            "download_bps" => Value::Real(row.download_bps),
            "upload_bps" => Value::Real(row.upload_bps),
            "rpm" => Value::Real(row.rpm),
            "grade" => Value::Text(row.grade.clone()),
            "bytes" => Value::Int(ns(row.bytes)),
            "loss_pct" => Value::Real(row.loss_pct),
            "result" => Value::Text(doc.clone()),
            other => unreachable!("column {other} has no value"),
        })
        .collect()
}

/// The type each read column has, in [`select`]'s order.
pub fn read_types() -> Vec<Ty> {
    read().map(|c| c.ty).collect()
}

/// A row from its columns' values, in [`select`]'s order.
pub fn from_values(v: Vec<Value>) -> RunRow {
    let mut row = RunRow::default();
    for (c, v) in read().zip(v) {
        match (c.name, v) {
            ("id", Value::Int(x)) => row.id = x,
            ("monitor_id", Value::Text(x)) => row.monitor_id = x.unwrap_or_default(),
            ("target", Value::Text(x)) => row.target = x.unwrap_or_default(),
            ("started_unix_ns", Value::Int(x)) => row.started_unix_ns = x.max(0) as u64,
            ("failure", Value::Text(x)) => row.failure = x,
            ("complete", Value::Bool(x)) => row.complete = x,
            ("incomplete_reason", Value::Text(x)) => row.incomplete_reason = x,
            ("idle_ms", Value::Real(x)) => row.idle_ms = x,
            ("loaded_ms", Value::Real(x)) => row.loaded_ms = x,
            ("added_ms", Value::Real(x)) => row.added_ms = x,
            ("download_bps", Value::Real(x)) => row.download_bps = x,
            ("upload_bps", Value::Real(x)) => row.upload_bps = x,
            ("rpm", Value::Real(x)) => row.rpm = x,
            ("grade", Value::Text(x)) => row.grade = x,
            ("bytes", Value::Int(x)) => row.bytes = x.max(0) as u64,
            ("loss_pct", Value::Real(x)) => row.loss_pct = x,
            (name, v) => unreachable!("column {name} read as {v:?}"),
        }
    }
    row
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_goes_through_its_values_and_back() {
        let row = RunRow {
            id: 0,
            monitor_id: "m".into(),
            target: "h:1".into(),
            started_unix_ns: 5,
            failure: None,
            complete: true,
            incomplete_reason: Some("cut".into()),
            idle_ms: Some(1.0),
            loaded_ms: Some(2.0),
            added_ms: Some(1.0),
            download_bps: Some(3.0),
            upload_bps: None,
            rpm: Some(4.0),
            grade: Some("A".into()),
            bytes: 6,
            loss_pct: Some(0.5),
        };
        let mut v = values(&row, Some("{}".into()));
        assert_eq!(v.len(), COLUMNS.len() - 1);
        assert_eq!(v.pop(), Some(Value::Text(Some("{}".into()))), "the document is written last");
        // read back: the id first, no document
        let mut read = vec![Value::Int(9)];
        read.extend(v);
        let back = from_values(read);
        assert_eq!(back, RunRow { id: 9, ..row });
    }

    #[test]
    fn both_dialects_are_made_from_the_one_table() {
        for d in [Dialect::Sqlite, Dialect::Postgres] {
            let t = d.table();
            assert!(create_table(d).starts_with(&format!("CREATE TABLE IF NOT EXISTS {t} (id ")));
            assert_eq!(insert(d).matches('$').count(), COLUMNS.len() - 1);
            assert!(select(d).contains(&format!("FROM {t} WHERE")));
            // a table of schema 1 gets the columns added since, and the run-once index
            let v1: Vec<String> = COLUMNS.iter().filter(|c| c.since == 1).map(|c| c.name.to_string()).collect();
            let m = migration(d, 1, &v1);
            assert!(m.contains(&add_column(d, &COLUMNS[14])) && m.contains(&add_column(d, &COLUMNS[15])), "{m:?}");
            assert!(m.iter().any(|s| s.contains(&format!("UNIQUE INDEX IF NOT EXISTS {t}_once"))), "{m:?}");
            // a new database: one CREATE TABLE and the indexes
            assert_eq!(migration(d, 0, &[]).len(), 1 + INDEXES.len());
        }
        assert_eq!(COLUMNS.iter().map(|c| c.since).chain(INDEXES.iter().map(|i| i.since)).max(), Some(SCHEMA_VERSION));
        assert_eq!(INDEXES.iter().map(|i| i.since).max(), Some(SCHEMA_VERSION), "the last version is the run-once index");
    }
}
