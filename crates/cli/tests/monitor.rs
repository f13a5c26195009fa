//! `bloatlab monitor` against a real `bloatlab server` on loopback and a
//! target that refuses: every run is kept in the SQLite history (measured or
//! failed, with its reason), `bloatlab history` shows them, SIGTERM ends a
//! running test cleanly with exit status 0 and nothing lost, a restart
//! resumes the schedule, a locked database holds runs until it can take
//! them, and a bad config file is refused with the line at fault.
mod common;
use bloatlab_store::{sqlite::Sqlite, Query, Store};
use bloatlab_host::process::Signal;
use common::monitor::{closed_port, monitor, until};
use common::{exe, TestServer};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};




fn signal(child: &Child, sig: Signal) {
    assert!(bloatlab_host::process::signal_child(child, sig));
}

fn wait_exit(child: &mut Child, within: Duration) -> std::process::ExitStatus {
    let end = Instant::now() + within;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        assert!(Instant::now() < end, "the monitor did not exit within {within:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn history(args: &[&str]) -> String {
    let o = Command::new(exe()).arg("history").args(args).output().unwrap();
    assert!(o.status.success(), "history {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn the_monitor_keeps_every_run_history_shows_them_and_sigterm_loses_nothing() {
    let _g = common::serial();
    let srv = TestServer::start(&["--no-rpm", "--no-web"]);
    // its threads at rest: a test adds a control thread and one per flow
    let (rest, _) = srv.threads_and_fds();
    let live = srv.addr();
    let dead = format!("127.0.0.1:{}", closed_port());
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m.sqlite");
    let dbs = db.to_str().unwrap();
    let (mut child, rx) = monitor(&[&live, &dead, "--every", "2s", "--jitter", "0%", "--db", dbs, "--id", "t1"]);
    let mut seen = vec![];
    until(&rx, Duration::from_secs(10), &mut seen, |l| l.starts_with("bloatlab monitor t1: 2 target(s)"));
    // two measured runs of the live server, a failure of the dead one between
    for _ in 0..2 {
        until(&rx, Duration::from_secs(60), &mut seen, |l| l.contains(&format!(" {live} ")) && l.contains("idle") && l.contains("[run "));
    }
    assert!(seen.iter().any(|l| l.contains(&format!(" {dead} failed: ")) && l.contains("retry in 2s")), "{seen:#?}");
    // SIGTERM while the third run of the live server measures: once the
    // dead one has failed again and the server runs the live one's flows
    // (its threads above their count at rest)
    until(&rx, Duration::from_secs(30), &mut seen, |l| l.contains(&format!(" {dead} failed: ")));
    let t0 = Instant::now();
    while srv.threads_and_fds().0 < rest + 3 {
        assert!(t0.elapsed() < Duration::from_secs(30), "the third run did not begin: {seen:#?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    signal(&child, Signal::Term);
    let st = wait_exit(&mut child, Duration::from_secs(15));
    // the rest of its lines
    while let Ok(l) = rx.recv_timeout(Duration::from_millis(500)) {
        eprintln!("monitor: {l}");
        seen.push(l);
    }
    assert!(st.success(), "exit {st:?}; {seen:#?}");
    let stopped = seen.iter().find(|l| l.starts_with("stopped by SIGTERM")).unwrap_or_else(|| panic!("{seen:#?}"));
    let printed = seen.iter().filter(|l| l.contains("[run ")).count();
    assert!(stopped.contains(&format!("{printed} run(s) kept")), "{stopped} vs {printed} printed");

    // every run printed is in the database; the live ones are results with the monitor's fields
    let mut store = Sqlite::open_read(&db).unwrap();
    let rows = store.rows(&Query::default()).unwrap();
    assert_eq!(rows.len(), printed, "{rows:#?}");
    let lives: Vec<_> = rows.iter().filter(|r| r.target == live).collect();
    assert!(lives.len() >= 3, "{lives:#?}");
    assert!(lives.iter().take(2).all(|r| r.complete && r.failure.is_none() && r.added_ms.is_some() && r.grade.is_some()), "{lives:#?}");
    // the one SIGTERM cut short is kept, marked incomplete
    let last = lives.last().unwrap();
    assert!(!last.complete || last.failure.is_some(), "{last:?}");
    let r = store.result(lives[0].id).unwrap().unwrap();
    let m = r.monitor.as_ref().unwrap();
    assert_eq!((m.monitor_id.as_str(), m.target.as_str(), m.every_s, m.sequence), ("t1", live.as_str(), 2.0, 0));
    assert_eq!(r.headline.max_added_latency_ms, lives[0].added_ms);
    assert_eq!(r.metadata.command, ["monitor", live.as_str()]);
    let fails: Vec<_> = rows.iter().filter(|r| r.target == dead).collect();
    assert!(!fails.is_empty() && fails.iter().all(|r| r.failure.as_deref().is_some_and(|f| f.contains("refused"))), "{fails:#?}");

    // history: a row per run, failures with their reasons; per hour; CSV
    let t = history(&["--db", dbs]);
    assert!(t.contains(&live) && t.contains("Failures:") && t.contains("refused"), "{t}");
    let t = history(&["--db", dbs, "--target", &live, "--by", "hour"]);
    assert!(t.contains(&live) && t.contains("Per hour: medians") && !t.contains(&dead), "{t}");
    let csv = history(&["--db", dbs, "--csv", "--since", "1h"]);
    assert_eq!(csv.lines().count(), rows.len() + 1, "{csv}");
    assert_eq!(history(&["--db", dbs, "--since", "2000-01-01", "--until", "2000-01-02"]), "no runs in this range\n");
    // a target the database does not know by that name: the ones it does
    let o = Command::new(exe()).args(["history", "--db", dbs, "--target", "127.0.0.1"]).output().unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && e.contains("no runs of it in this range; the database has runs of") && e.contains(&live), "{e}");
    // the HTML page: three plots over time and the table
    let page = dir.path().join("h.html");
    history(&["--db", dbs, "--by", "hour", "--html", page.to_str().unwrap()]);
    let html = std::fs::read_to_string(&page).unwrap();
    assert_eq!(html.matches("<svg").count(), 3, "three plots");
    assert!(html.contains("<table class=\"history\">") && html.contains(&live) && html.contains("Loaded round trip per hour") && html.contains("smokeping-style"), "the table");
    // before and after a moment between the first two live runs
    let mid = (lives[0].started_unix_ns + lives[1].started_unix_ns) / 2 / 1_000_000_000;
    let t = history(&["--db", dbs, "--target", &live, "--compare", &bloatlab_model::units::UtcTime::from_unix_secs(mid as i64).rfc3339_secs()]);
    assert!(t.contains("before ") && t.contains("from ") && t.lines().any(|l| l.contains("change")), "{t}");

    // a restart resumes the schedule: the live server was tested within the hour
    let (mut child, rx) = monitor(&[&live, "--every", "1h", "--jitter", "0%", "--db", dbs, "--id", "t1"]);
    let mut seen = vec![];
    let l = until(&rx, Duration::from_secs(10), &mut seen, |l| l.starts_with(&format!("{live}: first run in")));
    assert!(l.contains(" in 59m") || l.contains(" in 58m"), "the schedule resumed: {l}");
    signal(&child, Signal::Int);
    assert!(wait_exit(&mut child, Duration::from_secs(10)).success());
    assert_eq!(Sqlite::open_read(&db).unwrap().rows(&Query::default()).unwrap().len(), rows.len());
}

#[test]
fn a_locked_database_holds_the_runs_until_it_takes_them() {
    let dead = format!("127.0.0.1:{}", closed_port());
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m.sqlite");
    let dbs = db.to_str().unwrap();
    let (mut child, rx) = monitor(&[&dead, "--every", "1s", "--jitter", "0%", "--db", dbs]);
    let mut seen = vec![];
    until(&rx, Duration::from_secs(10), &mut seen, |l| l.contains(" failed: "));
    // another process takes the write lock for 8 s
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.execute_batch("BEGIN EXCLUSIVE").unwrap();
    until(&rx, Duration::from_secs(20), &mut seen, |l| l.contains("the database refused a write") && l.contains("locked"));
    // held while the lock lasts: a second run joins the first
    until(&rx, Duration::from_secs(20), &mut seen, |l| l.contains("the database refused a write") && l.contains("; 2 run(s) held"));
    conn.execute_batch("COMMIT").unwrap();
    drop(conn);
    until(&rx, Duration::from_secs(20), &mut seen, |l| l.contains("held run(s) written"));
    signal(&child, Signal::Term);
    assert!(wait_exit(&mut child, Duration::from_secs(10)).success());
    while let Ok(l) = rx.recv_timeout(Duration::from_millis(300)) {
        seen.push(l);
    }
    let printed = seen.iter().filter(|l| l.contains("[run ")).count();
    let rows = Sqlite::open_read(&db).unwrap().rows(&Query::default()).unwrap();
    assert_eq!(rows.len(), printed, "{seen:#?}");
    assert!(rows.len() >= 3, "{seen:#?}");
}

#[test]
fn bad_input_is_refused_with_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("m.toml");
    let run = |args: &[&str]| {
        let o = Command::new(exe()).args(args).output().unwrap();
        assert!(!o.status.success(), "{args:?} was accepted");
        String::from_utf8_lossy(&o.stderr).to_string()
    };
    std::fs::write(&cfg, "target = [\"127.0.0.1:5201\"]\nevery = \"10m\"\njitter = \"80%\"\n").unwrap();
    let e = run(&["monitor", "--config", cfg.to_str().unwrap()]);
    assert!(e.contains("line 3") && e.contains("0% to 50%"), "{e}");
    std::fs::write(&cfg, "every = \"10m\"\n\nevry = \"5m\"\n").unwrap();
    let e = run(&["monitor", "--config", cfg.to_str().unwrap()]);
    assert!(e.contains("line 3") && e.contains("`evry` is not an option"), "{e}");
    std::fs::write(&cfg, "every = \"10m\"\ntarget = [\"a\", \n").unwrap();
    let e = run(&["monitor", "--config", cfg.to_str().unwrap()]);
    assert!(e.contains("line 2") || e.contains("line 3"), "a TOML error names its line: {e}");
    // the file's targets and the command line's: the command line wins
    std::fs::write(&cfg, "target = [\"127.0.0.1:1\"]\nevery = \"5s\"\n").unwrap();
    let e = run(&["monitor", "--config", cfg.to_str().unwrap(), "host:0"]);
    assert!(e.contains("not a port"), "{e}");
    assert!(run(&["monitor"]).contains("no target"));
    assert!(run(&["monitor", "h", "--every", "100ms"]).contains("under 1s"));
    assert!(run(&["monitor", "h", "h:9770"]).contains("given twice"));
    assert!(run(&["history", "--db", dir.path().join("none.sqlite").to_str().unwrap()]).contains("no such database"));
    let e = run(&["history", "--db", "x", "--since", "yesterday"]);
    assert!(e.contains("UTC date") && e.contains("12h, 7d"), "{e}");
}

/// The shipped systemd unit (dist/bloatlab-monitor.service) passes
/// `systemd-analyze verify` with this binary in its ExecStart, and its
/// command line is one `bloatlab monitor` accepts.
#[test]
fn the_systemd_unit_verifies_and_its_command_line_parses() {
    let Some(analyze) = ["/usr/bin/systemd-analyze", "/bin/systemd-analyze"].iter().map(std::path::Path::new).find(|p| p.is_file()) else {
        bloatlab_testkit::cannot_run("the_systemd_unit_verifies", "no systemd-analyze (apt-get install systemd)");
        return;
    };
    let unit = std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../dist/bloatlab-monitor.service")).unwrap();
    let exec = unit.lines().find_map(|l| l.strip_prefix("ExecStart=")).expect("an ExecStart line");
    let mut args = exec.split_whitespace();
    assert_eq!(args.next(), Some("/usr/local/bin/bloatlab"));
    let args: Vec<&str> = args.collect();
    assert_eq!(args[0], "monitor");
    // its flags parse: the only complaint is the config file this machine lacks
    let o = Command::new(exe()).args(&args).output().unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && e.contains("--config /etc/bloatlab/monitor.toml") && !e.contains("unexpected"), "{e}");
    // the unit with this binary in it verifies
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bloatlab-monitor.service");
    std::fs::write(&path, unit.replace("/usr/local/bin/bloatlab", exe())).unwrap();
    let o = Command::new(analyze).arg("verify").arg(&path).output().unwrap();
    let out = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    let ours: Vec<&str> = out.lines().filter(|l| l.contains("bloatlab-monitor")).collect();
    assert!(ours.is_empty(), "systemd-analyze verify: {out}");
}

/// A tiny webhook receiver: answers the first POST 500 (the monitor tries
/// again), the others 200; each body arrives on the channel.
fn receiver() -> (String, Receiver<serde_json::Value>) {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", l.local_addr().unwrap());
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for (n, s) in l.incoming().enumerate() {
            let Ok(mut s) = s else { continue };
            let mut buf = vec![];
            let mut b = [0u8; 4096];
            let body = loop {
                let Ok(k) = s.read(&mut b) else { break None };
                if k == 0 {
                    break None;
                }
                buf.extend_from_slice(&b[..k]);
                let text = String::from_utf8_lossy(&buf).to_string();
                if let Some((head, body)) = text.split_once("\r\n\r\n") {
                    let len: usize = head.lines().find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().parse().unwrap_or(0))).unwrap_or(0);
                    if body.len() >= len {
                        break Some(body[..len].to_string());
                    }
                }
            };
            let status = if n == 0 { "500 Internal Server Error" } else { "200 OK" };
            let _ = write!(s, "HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            if n > 0 {
                if let Some(b) = body {
                    let _ = tx.send(serde_json::from_str(&b).unwrap_or(serde_json::Value::String(b)));
                }
            }
        }
    });
    (url, rx)
}

/// The webhook: a target that fails two runs in a row posts `failing` (the
/// receiver's first answer is a 500: the monitor tries again), and once a
/// server answers there, two measured runs post `back`.
#[test]
fn a_webhook_hears_of_a_failing_target_and_of_its_return() {
    let _g = common::serial();
    let port = closed_port();
    let target = format!("127.0.0.1:{port}");
    let (url, hooks) = receiver();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m.sqlite");
    let (mut child, rx) = monitor(&[&target, "--every", "1s", "--jitter", "0%", "--db", db.to_str().unwrap(), "--alert-runs", "2", "--webhook", &url]);
    let mut seen = vec![];
    until(&rx, Duration::from_secs(20), &mut seen, |l| l.starts_with("ALERT bloatlab: ") && l.contains("failed 2 runs in a row"));
    let h = hooks.recv_timeout(Duration::from_secs(20)).expect("the failing alert, posted");
    assert_eq!(h["event"], "failing", "{h}");
    assert_eq!(h["target"], target.as_str());
    assert_eq!(h["runs"].as_array().unwrap().len(), 2, "{h}");
    assert!(h["runs"][1]["failure"].as_str().unwrap().contains("refused"), "{h}");
    assert!(h["text"].as_str().unwrap().starts_with(&format!("bloatlab: {target} failed 2 runs in a row")), "{h}");
    until(&rx, Duration::from_secs(20), &mut seen, |l| l == &format!("webhook: the failing alert for {target} delivered"));
    // a server comes up there: two measured runs later, `back`
    let mut srv = Command::new(exe())
        .args(["server", "--bind", "127.0.0.1", "--port", &port.to_string(), "--no-rpm", "--no-web", "--quiet"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    until(&rx, Duration::from_secs(80), &mut seen, |l| l.starts_with("ALERT ") && l.contains("measured again, 2 runs in a row"));
    let h = hooks.recv_timeout(Duration::from_secs(20)).expect("the back alert, posted");
    assert_eq!(h["event"], "back", "{h}");
    assert!(h["runs"][0]["added_ms"].is_number() && h["runs"][1]["grade"].is_string(), "{h}");
    signal(&child, Signal::Term);
    assert!(wait_exit(&mut child, Duration::from_secs(30)).success());
    let _ = srv.kill();
    let _ = srv.wait();
}

/// A data budget: the first run (its cost unknown) runs and says what a
/// month of them would move; the next ones would pass the budget and are
/// skipped, said so, and not recorded as runs.
#[test]
fn a_data_budget_is_shown_and_enforced() {
    let _g = common::serial();
    let srv = TestServer::start(&["--no-rpm", "--no-web"]);
    let live = srv.addr();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m.sqlite");
    let (mut child, rx) = monitor(&[&live, "--every", "1s", "--jitter", "0%", "--db", db.to_str().unwrap(), "--budget", "1MB/day"]);
    let mut seen = vec![];
    until(&rx, Duration::from_secs(10), &mut seen, |l| l == "data budget 1MB/day: 0 B used this day");
    until(&rx, Duration::from_secs(60), &mut seen, |l| l.starts_with(&format!("{live}: a run moved ")) && l.contains("a month"));
    until(&rx, Duration::from_secs(10), &mut seen, |l| l.starts_with("data budget 1MB/day: ") && l.contains("used this day") && !l.contains(": 0 B"));
    until(&rx, Duration::from_secs(10), &mut seen, |l| l.starts_with(&format!("{live}: run skipped: ")) && l.contains("(--budget 1MB/day)"));
    signal(&child, Signal::Term);
    assert!(wait_exit(&mut child, Duration::from_secs(10)).success());
    let rows = Sqlite::open_read(&db).unwrap().rows(&Query::default()).unwrap();
    assert_eq!(rows.len(), 1, "{rows:#?}");
    assert!(rows[0].bytes > 1_000_000, "{:?}", rows[0]);
}

#[test]
fn rpm_and_latency_only_targets_are_kept_as_runs_of_their_own() {
    let _g = common::serial();
    let srv = TestServer::start(&["--no-web"]);
    let rpm_url = srv.rpm_url.clone().expect("the server's RPM endpoints");
    let rpm = format!("{rpm_url}#pin-sha256={}", srv.rpm_sha256.clone().unwrap());
    let tcp = format!("tcp:{}", srv.addr());
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m.sqlite");
    let (mut child, rx) = monitor(&[&rpm, "ping:127.0.0.1", &tcp, "--every", "1h", "--jitter", "0%", "--round", "3s", "--probe-every", "100ms", "--db", db.to_str().unwrap(), "--id", "lat"]);
    let mut seen = vec![];
    let head = until(&rx, Duration::from_secs(10), &mut seen, |l| l.starts_with("bloatlab monitor lat: 3 target(s)"));
    assert!(head.contains("2 latency-only, a probe each every 100ms, kept per 3s round"), "{head}");
    // the RPM test (its stages take up to 8 s each), then rounds at rest
    until(&rx, Duration::from_secs(60), &mut seen, |l| l.contains(&rpm_url) && l.contains("RPM ") && l.contains("[run "));
    // (rounds that overlap the RPM test hold no pings or few: two whole ones after it)
    for _ in 0..4 {
        until(&rx, Duration::from_secs(30), &mut seen, |l| l.contains("ping:127.0.0.1 -: idle 0.") && l.contains("[run "));
    }
    signal(&child, Signal::Term);
    assert!(wait_exit(&mut child, Duration::from_secs(15)).success());
    while let Ok(l) = rx.recv_timeout(Duration::from_millis(500)) {
        seen.push(l);
    }
    let mut store = Sqlite::open_read(&db).unwrap();
    let rows = store.rows(&Query::default()).unwrap();
    // the RPM run: its result whole, its headline the stages' worst RPM and goodput
    let r = rows.iter().find(|r| r.target == rpm_url).unwrap_or_else(|| panic!("{rows:#?}"));
    let doc = store.result(r.id).unwrap().unwrap();
    let stages = &doc.rpm.as_ref().unwrap().stages;
    assert_eq!(stages.len(), 2);
    assert_eq!(r.rpm, stages.iter().filter_map(|s| s.rpm).reduce(f64::min));
    assert!(r.download_bps.unwrap() > 1e8 && r.upload_bps.unwrap() > 1e8 && r.bytes > 0, "{r:?}");
    assert_eq!(r.grade, None);
    let rpm_from = doc.metadata.start_unix_ns;
    let rpm_to = rpm_from + stages.iter().map(|s| (s.duration_s * 1e9) as u64).sum::<u64>();
    // latency-only rounds: the pings of 3 s at 100 ms, none sent while the RPM test loaded the line
    for t in ["ping:127.0.0.1", tcp.as_str()] {
        let mine: Vec<_> = rows.iter().filter(|r| r.target == t).collect();
        assert!(mine.len() >= 3, "{t}: {mine:#?}");
        let mut full = 0;
        for row in &mine {
            assert!(row.failure.is_none(), "{row:?}");
            let doc = store.result(row.id).unwrap().unwrap();
            let idle = doc.idle.as_ref().unwrap();
            let pings = &idle.pings[0];
            let t0 = doc.metadata.start_unix_ns;
            for s in &pings.samples {
                let at = t0 + s.t_ns;
                assert!(!(at > rpm_from + 500_000_000 && at < rpm_to), "{t}: a ping at {at} during the RPM test ({rpm_from}..{rpm_to})");
            }
            let sum = &idle.summary.pings[0];
            if doc.complete && !doc.metadata.probe_timestamps.contains("left out") {
                full += 1;
                assert!((27..=31).contains(&pings.samples.len()), "{t}: {} pings in a round", pings.samples.len());
                assert_eq!(sum.latency.lost, 0, "{t}: {sum:?}");
                assert_eq!(row.idle_ms, Some(sum.latency.p50_ms));
                assert!(sum.latency.p50_ms < 5.0, "{t}: {sum:?}");
            }
            assert_eq!(doc.monitor.as_ref().unwrap().every_s, 3.0);
        }
        assert!(full >= 2, "{t}: {full} whole rounds");
    }
    // history by target
    let h = history(&["--db", db.to_str().unwrap(), "--target", "ping:127.0.0.1"]);
    assert!(h.contains("ping:127.0.0.1") && !h.contains(&rpm_url) && !h.contains("tcp:"), "{h}");
}

#[test]
fn sigterm_during_an_rpm_test_stops_at_once_and_says_so() {
    let _g = common::serial();
    let srv = TestServer::start(&["--no-web"]);
    let rpm = format!("{}#pin-sha256={}", srv.rpm_url.clone().unwrap(), srv.rpm_sha256.clone().unwrap());
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m.sqlite");
    let (mut child, rx) = monitor(&[&rpm, "--every", "1h", "--db", db.to_str().unwrap(), "--jitter", "0%"]);
    let mut seen = vec![];
    until(&rx, Duration::from_secs(10), &mut seen, |l| l.contains("first run in 0s"));
    // the test is under way once the server has served its configuration
    // (that connection is closed 500 ms after its request, and logged)
    let t0 = Instant::now();
    while !srv.log().contains("\"event\":\"rpm_connection\"") {
        assert!(t0.elapsed() < Duration::from_secs(30), "the RPM test did not begin: {}", srv.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    let t0 = Instant::now();
    signal(&child, Signal::Term);
    assert!(wait_exit(&mut child, Duration::from_secs(10)).success());
    // its stages take up to 16 s: the stop did not wait for them
    assert!(t0.elapsed() < Duration::from_secs(3), "took {:?}", t0.elapsed());
    let rows = Sqlite::open_read(&db).unwrap().rows(&Query::default()).unwrap();
    assert_eq!(rows.len(), 1, "{rows:#?}");
    assert!(rows[0].failure.as_deref().is_some_and(|f| f.starts_with("interrupted")), "{rows:#?}");
}

#[test]
fn a_servers_udp_probes_are_a_latency_only_target_kept_across_its_sessions() {
    let _g = common::serial();
    // a server that allows 10 s per test: the probes run in sessions of
    // 5 s, then 7 s each, one after another on one time grid
    let srv = TestServer::start(&["--no-web", "--no-rpm", "--max-duration", "10s"]);
    let udp = format!("udp:{}", srv.addr());
    let dead = format!("udp:127.0.0.1:{}", closed_port());
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m.sqlite");
    let (mut child, rx) = monitor(&[&udp, &dead, "--round", "2s", "--probe-every", "100ms", "--db", db.to_str().unwrap(), "--id", "udp"]);
    let mut seen = vec![];
    let head = until(&rx, Duration::from_secs(10), &mut seen, |l| l.starts_with("bloatlab monitor udp: 2 target(s)"));
    assert!(head.contains("2 latency-only, a probe each every 100ms, kept per 2s round"), "{head}");
    // rounds through at least three sessions (about 20 s)
    for _ in 0..10 {
        until(&rx, Duration::from_secs(20), &mut seen, |l| l.contains(&format!(" {udp} -: idle 0.")) && l.contains("loss 0.0%") && l.contains("[run "));
    }
    let t0 = Instant::now();
    signal(&child, Signal::Term);
    assert!(wait_exit(&mut child, Duration::from_secs(15)).success());
    assert!(t0.elapsed() < Duration::from_secs(5), "the stop took {:?}", t0.elapsed());
    while let Ok(l) = rx.recv_timeout(Duration::from_millis(500)) {
        seen.push(l);
    }
    assert!(seen.iter().any(|l| l.contains(&format!(" {dead} failed: cannot connect to ")) && l.contains("connection refused")), "{seen:#?}");
    let mut store = Sqlite::open_read(&db).unwrap();
    let rows = store.rows(&Query { target: Some(udp.clone()), ..Default::default() }).unwrap();
    assert!(rows.len() >= 10, "{rows:#?}");
    let mut sent_at = vec![];
    let mut whole = 0;
    for row in &rows {
        assert!(row.failure.is_none(), "{row:?}");
        let doc = store.result(row.id).unwrap().unwrap();
        assert!(doc.metadata.probe_timestamps.contains("in probe-only sessions of at most 1m each") && !doc.metadata.probe_timestamps.contains("  "), "{}", doc.metadata.probe_timestamps);
        assert!(!doc.metadata.server.bloatlab_version.is_empty(), "the server as its session described it");
        let idle = doc.idle.as_ref().unwrap();
        let l = &idle.summary.latency;
        // every probe answered, its RTT and one-way delays measured
        assert_eq!(l.lost, 0, "{row:?}: {l:?}");
        assert!(l.p50_ms < 5.0, "{l:?}");
        assert!(idle.summary.owd_up_p50_ms.is_some() && idle.summary.owd_down_p50_ms.is_some(), "{:?}", idle.summary);
        assert_eq!(row.idle_ms, Some(l.p50_ms));
        assert_eq!(row.loss_pct, Some(0.0));
        assert_eq!(row.grade, None);
        if doc.complete {
            whole += 1;
            assert!((19..=21).contains(&l.sent), "{} probes in a 2 s round at 100 ms", l.sent);
        }
        sent_at.extend(idle.probes.iter().map(|p| doc.metadata.start_unix_ns + p.t_ns));
    }
    assert!(whole >= 9, "{whole} whole rounds");
    // one grid through the sessions: no probe twice, none missing where one
    // session hands over to the next
    sent_at.sort();
    for w in sent_at.windows(2) {
        let gap = (w[1] - w[0]) as f64 / 1e6;
        assert!((40.0..=160.0).contains(&gap), "{gap} ms between two probes");
    }
    let failed = store.rows(&Query { target: Some(dead.clone()), ..Default::default() }).unwrap();
    assert!(!failed.is_empty() && failed.iter().all(|r| r.failure.as_deref().is_some_and(|f| f.contains("connection refused"))), "{failed:#?}");
}
