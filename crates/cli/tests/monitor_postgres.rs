//! `bloatlab monitor --db postgres://...` against a real PostgreSQL server
//! the test starts (Debian's `postgresql`, initdb into a temporary
//! directory, password authentication): two monitors write into one
//! database at once, the server is stopped under them and started again
//! (their runs are held, then written: none lost), `bloatlab history`
//! reads the fleet's runs, a read-only database is refused with that
//! reason, and the password never appears in what the monitor prints.
mod common;
use bloatlab_host::process::Signal;
use bloatlab_model::Database;
use bloatlab_store::{Outcome, Query, Run, Store, StoreError};
use common::monitor::{closed_port, monitor, until};
use common::{exe, TestServer};
use std::process::{Child, Command};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};


fn server() -> Option<bloatlab_testkit::postgres::Server> {
    match bloatlab_testkit::postgres::Server::start() {
        Ok(s) => Some(s),
        Err(e) => {
            bloatlab_testkit::cannot_run("monitor_postgres", &e);
            None
        }
    }
}



fn stop(child: &mut Child, rx: &Receiver<String>, seen: &mut Vec<String>) {
    assert!(bloatlab_host::process::signal_child(child, Signal::Term));
    let end = Instant::now() + Duration::from_secs(30);
    let st = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < end, "the monitor did not exit");
        std::thread::sleep(Duration::from_millis(50));
    };
    while let Ok(l) = rx.recv_timeout(Duration::from_millis(500)) {
        eprintln!("monitor: {l}");
        seen.push(l);
    }
    assert!(st.success(), "exit {st:?}: {seen:#?}");
}

/// The PostgreSQL schemas bloatlab 0.1 wrote, as they were: version 1,
/// and what version 2 added.
const LEGACY_PG: &[&str] = &[
    "CREATE TABLE bloatlab_runs (
        id BIGSERIAL PRIMARY KEY,
        monitor_id TEXT NOT NULL,
        target TEXT NOT NULL,
        started_unix_ns BIGINT NOT NULL,
        failure TEXT,
        complete BOOLEAN NOT NULL,
        incomplete_reason TEXT,
        idle_ms DOUBLE PRECISION,
        loaded_ms DOUBLE PRECISION,
        added_ms DOUBLE PRECISION,
        download_bps DOUBLE PRECISION,
        upload_bps DOUBLE PRECISION,
        rpm DOUBLE PRECISION,
        grade TEXT,
        bytes BIGINT NOT NULL DEFAULT 0,
        result TEXT
    );
    CREATE INDEX bloatlab_runs_by_time ON bloatlab_runs (started_unix_ns);
    CREATE INDEX bloatlab_runs_by_target ON bloatlab_runs (target, started_unix_ns)",
    "ALTER TABLE bloatlab_runs ADD COLUMN loss_pct DOUBLE PRECISION;
    CREATE UNIQUE INDEX bloatlab_runs_once ON bloatlab_runs (monitor_id, target, started_unix_ns)",
];

fn failed_run(target: &str, t: u64, why: &str) -> Run {
    Run { monitor_id: "unit".into(), target: target.into(), started_unix_ns: t, outcome: Outcome::Failed(why.into()) }
}

#[test]
fn a_fleet_writes_into_one_postgres_and_loses_nothing_when_it_goes_away() {
    let _g = common::serial();
    let Some(mut pg) = server() else { return };
    let url = pg.url();
    let db = Database::parse(&url).unwrap();
    // eight monitors opening an empty database at once: one creates the
    // tables, none fails
    let opened: Vec<Result<(), String>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..8).map(|_| s.spawn(|| bloatlab_store::open(&db).map(drop).map_err(|e| e.to_string()))).collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(opened.iter().all(|r| r.is_ok()), "{opened:?}");
    let v = bloatlab_store::postgres::SCHEMA_VERSION.to_string();
    assert_eq!(pg.psql("SELECT version FROM bloatlab_schema").unwrap(), v);
    // databases of the schemas 0.1 wrote (its PostgreSQL numbering: 1,
    // then 2 with loss_pct and the run-once index) are migrated in place
    // and keep their runs
    for old in 1..=2 {
        pg.psql(&format!("DROP TABLE bloatlab_runs; DROP TABLE bloatlab_schema; {}", LEGACY_PG[..old].join(";"))).unwrap();
        pg.psql(&format!("CREATE TABLE bloatlab_schema (version INTEGER NOT NULL); INSERT INTO bloatlab_schema VALUES ({old})")).unwrap();
        pg.psql("INSERT INTO bloatlab_runs (monitor_id, target, started_unix_ns, complete, added_ms, bytes) VALUES ('m', 'a:1', 5, true, 12.5, 7)").unwrap();
        assert!(bloatlab_store::open_read(&db).err().unwrap().to_string().contains(&format!("schema {old}, older")));
        let mut st = bloatlab_store::open(&db).unwrap();
        assert_eq!(pg.psql("SELECT version FROM bloatlab_schema").unwrap(), v, "from schema {old}");
        assert_eq!(pg.psql("SELECT count(*) FROM pg_indexes WHERE indexname = 'bloatlab_runs_once'").unwrap(), "1", "from schema {old}");
        let rows = st.rows(&Query::default()).unwrap();
        assert_eq!((rows.len(), rows[0].added_ms, rows[0].bytes, rows[0].loss_pct), (1, Some(12.5), 7, None), "from schema {old}");
        let id = st.put(&failed_run("a:1", 9, "x")).unwrap();
        assert_eq!(st.put(&failed_run("a:1", 9, "x")).unwrap(), id, "a run is kept once");
        assert_eq!(st.rows(&Query::default()).unwrap().len(), 2);
    }
    pg.psql("DELETE FROM bloatlab_runs").unwrap();
    // a newer one is refused and left alone
    pg.psql("UPDATE bloatlab_schema SET version = 99").unwrap();
    assert!(bloatlab_store::open(&db).err().unwrap().to_string().contains("newer bloatlab"));
    assert_eq!(pg.psql("SELECT version FROM bloatlab_schema").unwrap(), "99");
    pg.psql(&format!("UPDATE bloatlab_schema SET version = {v}")).unwrap();
    // text PostgreSQL cannot hold (NUL) is kept, shown as U+FFFD
    let mut st = bloatlab_store::open(&db).unwrap();
    let id = st.put(&failed_run("x:1", 5, "bad\0byte")).unwrap();
    // the same run written again (its first answer lost): one row, its id
    assert_eq!(st.put(&failed_run("x:1", 5, "bad\0byte")).unwrap(), id);
    assert_eq!(st.rows(&Query::default()).unwrap().len(), 1);
    assert_eq!(st.rows(&Query::default()).unwrap().iter().find(|r| r.id == id).unwrap().failure.as_deref(), Some("bad\u{FFFD}byte"));
    assert_eq!(st.prune(6).unwrap(), 1);

    let srv = TestServer::start(&["--no-rpm", "--no-web"]);
    let live = srv.addr();
    let dead = format!("127.0.0.1:{}", closed_port());
    let (mut a, ra) = monitor(&[&live, &dead, "--every", "3s", "--jitter", "0%", "--db", &url, "--id", "fleet-a"]);
    let dead_b = format!("127.0.0.1:{}", closed_port());
    let (mut b, rb) = monitor(&[&dead_b, "--every", "2s", "--jitter", "0%", "--db", &url, "--id", "fleet-b"]);
    let (mut sa, mut sb) = (vec![], vec![]);
    let head = until(&ra, Duration::from_secs(15), &mut sa, |l| l.starts_with("bloatlab monitor fleet-a"));
    assert!(head.contains("postgres://bloatlab:***@127.0.0.1") && !head.contains(&pg.password), "{head}");
    // a measured run of the live server into PostgreSQL
    until(&ra, Duration::from_secs(60), &mut sa, |l| l.contains(&format!(" {live} ")) && l.contains("idle") && l.contains("[run "));
    until(&rb, Duration::from_secs(20), &mut sb, |l| l.contains(&format!(" {dead_b} failed: ")));
    // the database goes away under both monitors: their runs are held...
    pg.stop();
    until(&rb, Duration::from_secs(30), &mut sb, |l| l.contains("the database refused a write") && l.contains("cannot be reached"));
    until(&ra, Duration::from_secs(60), &mut sa, |l| l.contains("the database refused a write"));
    // ...and written when it is back
    pg.launch().unwrap();
    until(&rb, Duration::from_secs(30), &mut sb, |l| l.contains("held run(s) written"));
    until(&ra, Duration::from_secs(60), &mut sa, |l| l.contains("held run(s) written"));
    stop(&mut a, &ra, &mut sa);
    stop(&mut b, &rb, &mut sb);
    for seen in [&sa, &sb] {
        assert!(!seen.iter().any(|l| l.contains(&pg.password)), "the password was printed: {seen:#?}");
    }
    // every run either monitor said it kept is in the database
    let rows = bloatlab_store::open_read(&db).unwrap().rows(&Query::default()).unwrap();
    for (id, seen) in [("fleet-a", &sa), ("fleet-b", &sb)] {
        let stopped = seen.iter().find(|l| l.starts_with("stopped by SIGTERM")).unwrap_or_else(|| panic!("{seen:#?}"));
        let kept: usize = stopped.split_whitespace().zip(stopped.split_whitespace().skip(1)).find(|(_, w)| *w == "run(s)").map(|(n, _)| n.parse().unwrap()).unwrap();
        let printed = seen.iter().filter(|l| l.contains("[run ")).count();
        let stored = rows.iter().filter(|r| r.monitor_id == id).count();
        eprintln!("{id}: {printed} printed, {kept} kept, {stored} in PostgreSQL");
        assert_eq!((kept, stored), (printed, printed), "{id}");
    }
    let measured = rows.iter().find(|r| r.target == live && r.failure.is_none()).expect("a measured run");
    // the document and its row agree to the last digit
    let doc = bloatlab_store::open_read(&db).unwrap().result(measured.id).unwrap().unwrap();
    assert_eq!(doc.headline.max_added_latency_ms, measured.added_ms);
    assert_eq!(doc.monitor.as_ref().map(|m| m.monitor_id.as_str()), Some("fleet-a"));
    // `bloatlab history` reads the fleet, without the password
    let o = Command::new(exe()).args(["history", "--db", &url]).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(text.contains(&live) && text.contains(&dead_b) && text.contains("connection refused"), "{text}");
    let o = Command::new(exe()).args(["history", "--db", &url, "--target", &dead_b, "--csv"]).output().unwrap();
    let csv = String::from_utf8_lossy(&o.stdout);
    assert_eq!(csv.lines().count() - 1, rows.iter().filter(|r| r.target == dead_b).count(), "{csv}");

    // a read-only database: refused with that reason; reading goes on
    pg.psql("ALTER DATABASE postgres SET default_transaction_read_only = on").unwrap();
    let mut ro = bloatlab_store::postgres::Postgres::new(&url, "pg").unwrap();
    let e = ro.put(&failed_run("x:1", 7, "x")).unwrap_err();
    assert!(matches!(e, StoreError::ReadOnly(_)), "{e:?}");
    assert!(ro.rows(&Query::default()).unwrap().len() == rows.len());
    let o = Command::new(exe()).args(["monitor", &dead, "--db", &url, "--every", "2s"]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("read-only"), "{err}");
    pg.psql("BEGIN READ WRITE; ALTER DATABASE postgres SET default_transaction_read_only = off; COMMIT").unwrap();
    // a wrong password: refused with the server's word, the password not shown
    let bad = url.replace(&pg.password, "wrong-password");
    let o = Command::new(exe()).args(["history", "--db", &bad]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("password authentication failed") && !err.contains("wrong-password"), "{err}");
}
