//! The history in a PostgreSQL database: a fleet of monitors writing into
//! one place (each run carries its monitor's id).
//!
//! The tables are created and migrated on open by the first monitor that
//! needs it (under an advisory lock, so monitors starting together do not
//! race); a database written by a newer bloatlab is refused, not changed.
//! A connection that drops is opened again at the next write, and what the
//! server refuses (read-only, full, unreachable) comes back as a
//! [`StoreError`] so the monitor holds the run and tries again. A write is
//! idempotent (a run is its monitor, target and start): one retried after
//! its commit's answer was lost finds its row and adds none.
//!
//! TLS: `sslmode=disable` never, `prefer` (the default) when the server
//! offers it, `require` always; the server's certificate is verified
//! against the system's CAs and, where the URL names one,
//! `sslrootcert=FILE` (PEM). Every query is bounded: `connect_timeout`
//! (10 s unless the URL says), a 30 s `statement_timeout`, and a
//! `tcp_user_timeout` of 30 s for a server that vanishes mid-write.
use crate::schema::{self, Dialect, Ty, Value};
use crate::{Outcome, Query, Run, RunRow, Store, StoreError};
use bloatlab_results::TestResult;
use postgres::error::SqlState;
use postgres::{Client, Config};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

/// The schema version this build writes ([`crate::schema`]).
pub const SCHEMA_VERSION: i32 = schema::SCHEMA_VERSION as i32;
const D: Dialect = Dialect::Postgres;

/// The advisory lock that serialises migrations ("bloatlab" in ASCII).
const MIGRATION_LOCK: i64 = 0x626c_6f61_746c_6162;

pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
pub const STATEMENT_TIMEOUT: Duration = Duration::from_secs(30);

pub struct Postgres {
    config: Config,
    tls: Option<tokio_postgres_rustls::MakeRustlsConnect>,
    /// The URL with its password hidden, for messages.
    shown: String,
    client: Option<Client>,
}

fn error(shown: &str, e: postgres::Error) -> StoreError {
    if let Some(db) = e.as_db_error() {
        let msg = format!("{shown}: {}", db.message());
        let code = db.code();
        return if *code == SqlState::READ_ONLY_SQL_TRANSACTION {
            StoreError::ReadOnly(msg)
        } else if *code == SqlState::DISK_FULL || *code == SqlState::INSUFFICIENT_RESOURCES || *code == SqlState::OUT_OF_MEMORY {
            StoreError::Full(msg)
        } else if *code == SqlState::LOCK_NOT_AVAILABLE || *code == SqlState::T_R_DEADLOCK_DETECTED {
            StoreError::Locked(STATEMENT_TIMEOUT.as_secs())
        } else {
            StoreError::Other(msg)
        };
    }
    // no answer from the server: it is down, unreachable, or went away
    let mut why = e.to_string();
    let mut src = std::error::Error::source(&e);
    while let Some(s) = src {
        why = format!("{why}: {s}");
        src = s.source();
    }
    StoreError::Unreachable(format!("{shown}: {why}"))
}

/// NUL cannot be stored in PostgreSQL text: shown as U+FFFD.
fn text(s: &str) -> String {
    s.replace('\0', "\u{FFFD}")
}

fn tls_config(ca_file: Option<&str>) -> Result<rustls::ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
    if let Some(f) = ca_file {
        use rustls::pki_types::{pem::PemObject, CertificateDer};
        let pem = std::fs::read(f).map_err(|e| format!("sslrootcert={f}: {e}"))?;
        let certs: Vec<CertificateDer<'static>> =
            CertificateDer::pem_slice_iter(&pem).collect::<Result<_, _>>().map_err(|e| format!("sslrootcert={f}: not PEM certificates ({e})"))?;
        if certs.is_empty() {
            return Err(format!("sslrootcert={f}: no CERTIFICATE block in the file"));
        }
        for c in certs {
            roots.add(c).map_err(|e| format!("sslrootcert={f}: {e}"))?;
        }
    }
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

impl Postgres {
    /// The connection `url` describes (not yet opened): `sslrootcert=FILE`
    /// is taken out of it for rustls, the rest is tokio-postgres's.
    pub fn new(url: &str, shown: &str) -> Result<Postgres, StoreError> {
        let (base, query) = url.split_once('?').unwrap_or((url, ""));
        let mut ca = None;
        let mut rest = vec![];
        for kv in query.split('&').filter(|kv| !kv.is_empty()) {
            match kv.split_once('=') {
                Some(("sslrootcert", v)) => ca = Some(v.to_string()),
                _ => rest.push(kv),
            }
        }
        let url = if rest.is_empty() { base.to_string() } else { format!("{base}?{}", rest.join("&")) };
        let mut config = Config::from_str(&url).map_err(|e| StoreError::Other(format!("{shown}: {e}")))?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        config.tcp_user_timeout(STATEMENT_TIMEOUT);
        config.keepalives_idle(Duration::from_secs(60));
        if config.get_application_name().is_none() {
            config.application_name("bloatlab monitor");
        }
        let tls = match config.get_ssl_mode() {
            postgres::config::SslMode::Disable => None,
            _ => Some(tokio_postgres_rustls::MakeRustlsConnect::new(tls_config(ca.as_deref()).map_err(|e| StoreError::Other(format!("{shown}: {e}")))?)),
        };
        Ok(Postgres { config, tls, shown: shown.to_string(), client: None })
    }

    /// Open the database to write: connected, its tables created or
    /// migrated to this build's schema.
    pub fn open(url: &str, shown: &str) -> Result<Postgres, StoreError> {
        let mut p = Postgres::new(url, shown)?;
        p.migrate()?;
        Ok(p)
    }

    /// Open the database to read: its schema must be this build's.
    pub fn open_read(url: &str, shown: &str) -> Result<Postgres, StoreError> {
        let mut p = Postgres::new(url, shown)?;
        let v = p.version()?;
        if v > SCHEMA_VERSION {
            return Err(StoreError::Newer(p.shown.clone(), v as i64, SCHEMA_VERSION as i64));
        }
        if v < SCHEMA_VERSION {
            return Err(StoreError::Other(format!(
                "{}: {}; `bloatlab monitor --db` on it creates or migrates the tables",
                p.shown,
                if v == 0 { "no bloatlab tables".to_string() } else { format!("schema {v}, older than this bloatlab's {SCHEMA_VERSION}") }
            )));
        }
        Ok(p)
    }

    /// The live connection, opened again if it dropped.
    fn client(&mut self) -> Result<&mut Client, StoreError> {
        if self.client.as_ref().is_some_and(|c| c.is_closed()) {
            self.client = None;
        }
        if self.client.is_none() {
            let c = match &self.tls {
                Some(t) => self.config.connect(t.clone()),
                None => self.config.connect(postgres::NoTls),
            };
            let mut c = c.map_err(|e| error(&self.shown, e))?;
            c.batch_execute(&format!("SET statement_timeout = {}", STATEMENT_TIMEOUT.as_millis())).map_err(|e| error(&self.shown, e))?;
            self.client = Some(c);
        }
        Ok(self.client.as_mut().unwrap())
    }

    /// Run `f` on the connection; a connection lost on the way is dropped
    /// (the next call opens another).
    fn with<T>(&mut self, f: impl FnOnce(&mut Client) -> Result<T, postgres::Error>) -> Result<T, StoreError> {
        let shown = self.shown.clone();
        let c = self.client()?;
        match f(c) {
            Ok(v) => Ok(v),
            Err(e) => {
                if e.as_db_error().is_none() || self.client.as_ref().is_some_and(|c| c.is_closed()) {
                    self.client = None;
                }
                Err(error(&shown, e))
            }
        }
    }

    /// The schema version in the database (0: no bloatlab tables yet).
    fn version(&mut self) -> Result<i32, StoreError> {
        self.with(|c| {
            let exists: bool = c.query_one("SELECT to_regclass('bloatlab_schema') IS NOT NULL", &[])?.get(0);
            if !exists {
                return Ok(0);
            }
            Ok(c.query_opt("SELECT version FROM bloatlab_schema", &[])?.map(|r| r.get(0)).unwrap_or(0))
        })
    }

    fn migrate(&mut self) -> Result<(), StoreError> {
        let shown = self.shown.clone();
        let v = self.with(|c| {
            let mut tx = c.transaction()?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])?;
            tx.batch_execute("CREATE TABLE IF NOT EXISTS bloatlab_schema (version INTEGER NOT NULL)")?;
            let v: i32 = tx.query_opt("SELECT version FROM bloatlab_schema", &[])?.map(|r| r.get(0)).unwrap_or(0);
            if v > SCHEMA_VERSION {
                return Ok(v);
            }
            if v < SCHEMA_VERSION {
                let existing: Vec<String> = tx
                    .query("SELECT column_name::TEXT FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1", &[&D.table()])?
                    .iter()
                    .map(|r| r.get(0))
                    .collect();
                for m in schema::migration(D, v as i64, &existing) {
                    tx.batch_execute(&m)?;
                }
            }
            if v == 0 {
                tx.execute("INSERT INTO bloatlab_schema (version) VALUES ($1)", &[&SCHEMA_VERSION])?;
            } else if v < SCHEMA_VERSION {
                tx.execute("UPDATE bloatlab_schema SET version = $1", &[&SCHEMA_VERSION])?;
            }
            tx.commit()?;
            Ok(v)
        })?;
        if v > SCHEMA_VERSION {
            return Err(StoreError::Newer(shown, v as i64, SCHEMA_VERSION as i64));
        }
        Ok(())
    }

    /// The URL, password hidden.
    pub fn shown(&self) -> &str {
        &self.shown
    }
}

fn ns(v: u64) -> i64 {
    v.min(i64::MAX as u64) as i64
}

impl postgres::types::ToSql for Value {
    fn to_sql(&self, ty: &postgres::types::Type, out: &mut bytes::BytesMut) -> Result<postgres::types::IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match self {
            Value::Text(v) => v.to_sql(ty, out),
            Value::Int(v) => v.to_sql(ty, out),
            Value::Bool(v) => v.to_sql(ty, out),
            Value::Real(v) => v.to_sql(ty, out),
        }
    }

    fn accepts(ty: &postgres::types::Type) -> bool {
        <String as postgres::types::ToSql>::accepts(ty) || <i64 as postgres::types::ToSql>::accepts(ty) || <bool as postgres::types::ToSql>::accepts(ty) || <f64 as postgres::types::ToSql>::accepts(ty)
    }

    postgres::types::to_sql_checked!();
}

/// Column `i` of a row, as its type reads.
fn read(r: &postgres::Row, i: usize, t: Ty) -> Value {
    match t {
        Ty::Id | Ty::Int | Ty::Bytes => Value::Int(r.get(i)),
        Ty::Text | Ty::TextNotNull => Value::Text(r.get(i)),
        Ty::Bool => Value::Bool(r.get(i)),
        Ty::Real => Value::Real(r.get(i)),
    }
}

impl Store for Postgres {
    fn put(&mut self, run: &Run) -> Result<i64, StoreError> {
        let mut row = RunRow::of(run);
        let doc = match &run.outcome {
            Outcome::Measured(r) => Some(serde_json::to_string(r).map_err(|e| StoreError::Other(format!("the result: {e}")))?),
            Outcome::Failed(_) => None,
        };
        // NUL cannot be stored in PostgreSQL text
        for t in [&mut row.monitor_id, &mut row.target] {
            *t = text(t);
        }
        for t in [&mut row.failure, &mut row.incomplete_reason, &mut row.grade].into_iter().flatten() {
            *t = text(t);
        }
        let values = schema::values(&row, doc);
        self.with(|c| {
            let params: Vec<&(dyn postgres::types::ToSql + Sync)> = values.iter().map(|v| v as &(dyn postgres::types::ToSql + Sync)).collect();
            Ok(c.query_one(&schema::insert(D), &params)?.get(0))
        })
    }

    fn rows(&mut self, q: &Query) -> Result<Vec<RunRow>, StoreError> {
        let since = ns(q.since_unix_ns.unwrap_or(0));
        let until = ns(q.until_unix_ns.unwrap_or(u64::MAX));
        let target = q.target.clone();
        let types = schema::read_types();
        self.with(|c| {
            let rows = c.query(&schema::select(D), &[&target, &since, &until])?;
            Ok(rows.iter().map(|r| schema::from_values(types.iter().enumerate().map(|(i, t)| read(r, i, *t)).collect())).collect())
        })
    }

    fn result(&mut self, id: i64) -> Result<Option<TestResult>, StoreError> {
        let doc: Option<Option<String>> = self.with(|c| Ok(c.query_opt("SELECT result FROM bloatlab_runs WHERE id = $1", &[&id])?.map(|r| r.get(0))))?;
        match doc.flatten() {
            None => Ok(None),
            Some(d) => serde_json::from_str(&d).map(Some).map_err(|e| StoreError::Other(format!("{}: run {id}: {e}", self.shown))),
        }
    }

    fn prune(&mut self, before_unix_ns: u64) -> Result<usize, StoreError> {
        let before = ns(before_unix_ns);
        self.with(|c| Ok(c.execute("DELETE FROM bloatlab_runs WHERE started_unix_ns < $1", &[&before])? as usize))
    }

    fn bytes_since(&mut self, unix_ns: u64) -> Result<u64, StoreError> {
        let since = ns(unix_ns);
        let n: i64 =
            self.with(|c| Ok(c.query_one("SELECT COALESCE(SUM(bytes), 0)::BIGINT FROM bloatlab_runs WHERE started_unix_ns >= $1", &[&since])?.get(0)))?;
        Ok(n.max(0) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_checked_before_any_connection_and_its_password_stays_hidden() {
        let e = Postgres::new("postgres://u:pw@h/db?nonsense=1", "postgres://u:***@h/db?nonsense=1").err().unwrap();
        assert!(e.to_string().contains("***") && !e.to_string().contains("pw@"), "{e}");
        let e = Postgres::new("postgres://h/db?sslmode=require&sslrootcert=/nonexistent.pem", "x").err().unwrap();
        assert!(e.to_string().contains("sslrootcert=/nonexistent.pem"), "{e}");
        let p = Postgres::new("postgres://h/db?sslmode=disable", "x").unwrap();
        assert!(p.tls.is_none());
        assert_eq!(p.config.get_connect_timeout(), Some(&CONNECT_TIMEOUT));
        // nothing listens on port 1: unreachable, said with the address
        let mut p = Postgres::new("postgres://u@127.0.0.1:1/db?sslmode=disable&connect_timeout=2", "pg@127.0.0.1:1").unwrap();
        let e = p.bytes_since(0).unwrap_err();
        assert!(matches!(e, StoreError::Unreachable(_)) && e.to_string().contains("pg@127.0.0.1:1"), "{e}");
    }
}
