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
    // a database of schema 1 (before loss_pct) is migrated on open
    pg.psql("ALTER TABLE bloatlab_runs DROP COLUMN loss_pct; DROP INDEX bloatlab_runs_once; UPDATE bloatlab_schema SET version = 1").unwrap();
    assert!(bloatlab_store::open_read(&db).err().unwrap().to_string().contains("schema 1, older"));
    drop(bloatlab_store::open(&db).unwrap());
    assert_eq!(pg.psql("SELECT version FROM bloatlab_schema").unwrap(), v);
    assert_eq!(pg.psql("SELECT count(*) FROM information_schema.columns WHERE table_name = 'bloatlab_runs' AND column_name = 'loss_pct'").unwrap(), "1");
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
