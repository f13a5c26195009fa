//! A real server and client on loopback: the engine end to end, and its
//! behaviour with bad peers and bad input.
mod common;
use bloatlab_results::{Direction, TestResult};
use common::*;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

fn short_test(srv: &TestServer, scenarios: &str, json: &std::path::Path) -> std::process::Output {
    run(&[
        "test", &srv.addr(), "--scenarios", scenarios, "--duration", "1.5s", "--idle", "1s", "--pause", "0.3s",
        "--quiet", "--json", json.to_str().unwrap(),
    ])
}

#[test]
fn loopback_matrix_measures_both_ways_and_json_is_complete() {
    let _serial = serial();
    let srv = TestServer::start(&["--disclose-host"]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let out = short_test(&srv, "1u0d,0u1d,2u2d", &json);
    assert!(out.status.success(), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    let r = TestResult::read_file(&json).unwrap();
    assert!(r.complete);
    assert_eq!(r.scenarios.len(), 3);
    let idle = r.idle.as_ref().expect("idle phase");
    // Probes every 10 ms: 1 s idle -> ~100, 1.5 s scenarios -> ~150 (tolerance 10%).
    let expect = |p: &bloatlab_results::Phase| ((p.end_ns - p.start_ns) as f64 / 10e6).round();
    for p in std::iter::once(idle).chain(r.scenarios.iter()) {
        let n = p.probes.len() as f64;
        assert!((n - expect(p)).abs() <= expect(p) * 0.1 + 1.0, "{}: {} probes, expected ~{}", p.name, n, expect(p));
        assert!(p.summary.latency.received as f64 >= n * 0.95, "{}: loss on loopback", p.name);
        assert!(!p.rr.is_empty(), "{}: no request/response samples", p.name);
    }
    let up = &r.scenarios[0];
    let down = &r.scenarios[1];
    assert!(up.summary.upload_bps > 1e8, "upload {}", up.summary.upload_bps);
    assert_eq!(up.summary.download_bps, 0.0);
    assert!(down.summary.download_bps > 1e8, "download {}", down.summary.download_bps);
    let both = &r.scenarios[2];
    assert!(both.summary.upload_bps > 0.0 && both.summary.download_bps > 0.0);
    assert_eq!(both.flows.iter().filter(|f| f.direction == Direction::Up).count(), 2);
    for f in &both.flows {
        assert!(f.goodput.len() >= 10, "goodput samples at <= 100 ms: {}", f.goodput.len());
        assert!(f.bytes > 0);
        assert!(!f.tcp_info.is_empty(), "tcp_info of the sending socket");
        // Goodput samples lie on the client's test clock, inside the run.
        let last = f.goodput.last().unwrap().t_ns;
        assert!(last >= both.start_ns && last < both.end_ns + 2_000_000_000, "{last} vs {}..{}", both.start_ns, both.end_ns);
    }
    assert!(both.summary.smoothness_hz.unwrap() > 0.0);
    assert!(both.summary.responsiveness_hz.unwrap() > 0.0);
    assert!(r.headline.upload_capacity_bps >= up.summary.upload_bps);
    assert!(r.metadata.clock_offset.method.contains("minimum"));
    assert!(r.metadata.clock_offset.offset_ns.abs() < 1_000_000, "same host: offset ~0");
    let some_owd = up.probes.iter().filter_map(|p| p.owd_up_ns).count();
    assert!(some_owd > 100);
    assert_eq!(r.metadata.client.kernel, r.metadata.server.kernel);
    assert!(!r.metadata.cc.is_empty() && r.metadata.socket.mss > 0);
    // The server logged one JSON line for the test, with what it carried.
    std::thread::sleep(Duration::from_millis(200));
    let lines: Vec<serde_json::Value> = srv.log().lines().map(|l| serde_json::from_str(l).expect("a JSON log line")).collect();
    let tests: Vec<_> = lines.iter().filter(|l| l["event"] == "test").collect();
    assert_eq!(tests.len(), 1, "{}", srv.log());
    let t = tests[0];
    assert_eq!(t["outcome"], "complete");
    assert_eq!(t["scenarios"], serde_json::json!(["1u0d", "0u1d", "2u2d"]));
    assert!(t["client"].as_str().unwrap().starts_with("127.0.0.1:"));
    // What the server counted lies within a few percent of what the client measured.
    let moved = |d: Direction| r.scenarios.iter().flat_map(|p| &p.flows).filter(|f| f.direction == d).map(|f| f.bytes).sum::<u64>() as f64;
    for (key, d) in [("bytes_up", Direction::Up), ("bytes_down", Direction::Down)] {
        let server = t[key].as_u64().unwrap() as f64;
        assert!(server >= moved(d) * 0.95 && server <= moved(d) * 1.3, "{key}: server {server}, client {}", moved(d));
    }
}

/// Every key that appears in a real result is documented in docs/results.md.
#[test]
fn every_json_field_is_documented() {
    let _serial = serial();
    let srv = TestServer::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let w = TestServer::start(&[]);
    let out = run(&[
        "test", &srv.addr(), "--scenarios", "1u1d", "--duration", "0.5s", "--idle", "0.3s", "--quiet", "--witness",
        &w.addr(), "--json", json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/results.md")).unwrap();
    let mut keys = std::collections::BTreeSet::new();
    fn walk(v: &serde_json::Value, keys: &mut std::collections::BTreeSet<String>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m {
                    keys.insert(k.clone());
                    walk(x, keys);
                }
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| walk(x, keys)),
            _ => {}
        }
    }
    walk(&v, &mut keys);
    let missing: Vec<_> = keys.iter().filter(|k| !docs.contains(&format!("`{k}`"))).collect();
    assert!(missing.is_empty(), "undocumented result fields: {missing:?}");
    assert!(v["scenarios"][0]["witness_probes"].as_array().map(|a| !a.is_empty()).unwrap_or(false));
}

#[test]
fn garbage_oversized_and_bad_tokens_are_rejected_and_others_still_served() {
    let _serial = serial();
    let srv = TestServer::start(&[]);
    // Garbage instead of a handshake.
    let mut s = TcpStream::connect(srv.addr()).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let mut buf = [0u8; 64];
    assert_eq!(s.read(&mut buf).unwrap_or(0), 0, "no answer to garbage");
    // A valid handshake, then an oversized frame length.
    let mut s = TcpStream::connect(srv.addr()).unwrap();
    s.write_all(&bloatlab_wire::Handshake::ours().encode()).unwrap();
    let mut hs = [0u8; bloatlab_wire::SERVER_HELLO_LEN];
    s.read_exact(&mut hs).unwrap();
    s.write_all(&u32::MAX.to_be_bytes()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let mut resp = vec![];
    let _ = s.read_to_end(&mut resp);
    assert!(String::from_utf8_lossy(&resp).contains("exceeds the limit"), "{:?}", String::from_utf8_lossy(&resp));
    // Truncated handshake then close.
    let mut s = TcpStream::connect(srv.addr()).unwrap();
    s.write_all(b"BLOAT").unwrap();
    drop(s);
    // A well-formed probe with a token of no live test: no reply.
    let u = UdpSocket::bind("127.0.0.1:0").unwrap();
    u.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
    let mut p = vec![0u8; 64];
    bloatlab_wire::Probe {
        kind: bloatlab_wire::ProbeKind::Request,
        token: 12345,
        seq: 0,
        stream: 0,
        client_send_ns: 1,
        server_recv_ns: 0,
        server_send_ns: 0,
    }
    .encode_into(&mut p)
    .unwrap();
    u.send_to(&p, srv.addr()).unwrap();
    u.send_to(&[0xAB; 300], srv.addr()).unwrap();
    assert!(u.recv(&mut [0u8; 2048]).is_err(), "a probe with a bad token got an answer");
    // Someone else's test still runs fine.
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let out = short_test(&srv, "1u1d", &json);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(TestResult::read_file(&json).unwrap().complete);
    let log = srv.log();
    assert!(log.contains("not a bloatlab peer"), "{log}");
}

#[test]
fn clear_errors_for_refused_unknown_and_foreign_servers() {
    let _serial = serial();
    // Nothing listening.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    drop(l);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("never.json");
    let out = run(&["test", &format!("127.0.0.1:{port}"), "--quiet", "--json", json.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("connection refused"), "{err}");
    assert_eq!(err.lines().count(), 1, "one-line reason: {err}");
    assert!(!json.exists(), "a test that never ran left {}", json.display());
    // A port out of range is said to be one, before anything is resolved or written.
    let out = run(&["test", "127.0.0.1:70000", "--json", json.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("`70000` is not a port (1-65535)"), "{err}");
    assert!(!json.exists());
    // Unknown host.
    let out = run(&["test", "no-such-host.invalid", "--quiet"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot resolve"), "{}", String::from_utf8_lossy(&out.stderr));
    // A server speaking another protocol.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let t = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let _ = s.write_all(b"SSH-2.0-OpenSSH_9.2\r\n");
        std::thread::sleep(Duration::from_millis(300));
    });
    let out = run(&["test", &addr.to_string(), "--quiet"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not a bloatlab server") && err.contains("SSH-2.0"), "{err}");
    t.join().unwrap();
    // A bloatlab server of another protocol version.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let t = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut b = [0u8; 12];
        s.read_exact(&mut b).unwrap();
        let _ = s.write_all(&bloatlab_wire::Handshake { version: 99, status: 1 }.encode());
    });
    let out = run(&["test", &addr.to_string(), "--quiet"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("version {}", bloatlab_wire::PROTOCOL_VERSION)) && err.contains("version 99"), "{err}");
    t.join().unwrap();
    // Bad arguments.
    let out = run(&["test", "127.0.0.1", "--scenarios", "40u0d"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("at most 32 flows per direction"));
    let out = run(&["test", "127.0.0.1", "--duration", "soon"]);
    assert!(!out.status.success());
}

#[test]
fn server_limits_refuse_with_a_reason() {
    let _serial = serial();
    let srv = TestServer::start(&["--max-flows", "2", "--max-duration", "20s"]);
    let out = run(&["test", &srv.addr(), "--scenarios", "2u2d", "--quiet"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("refused") && err.contains("at most 2"), "{err}");
    let out = run(&["test", &srv.addr(), "--scenarios", "1u0d", "--duration", "60s", "--quiet"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("at most 20 s"), "{err}");
}

#[test]
fn vanished_client_is_cleaned_up() {
    let _serial = serial();
    let srv = TestServer::start(&["--idle-timeout", "1s"]);
    let mut s = TcpStream::connect(srv.addr()).unwrap();
    s.write_all(&bloatlab_wire::Handshake::ours().encode()).unwrap();
    let mut hs = [0u8; bloatlab_wire::SERVER_HELLO_LEN];
    s.read_exact(&mut hs).unwrap();
    let msg = bloatlab_wire::ClientMsg::NewTest {
        client: Default::default(),
        cc: String::new(),
        planned_duration_ms: 5000,
        max_flows: 1,
        sample_interval_ms: 100,
        scenarios: vec!["1u0d".into()],
        socket_buffer: 0,
        rx_copy: false,
    };
    s.write_all(&bloatlab_wire::encode_frame(&msg)).unwrap();
    // Now say nothing: the server must give up within its idle timeout.
    let t = Instant::now();
    loop {
        if srv.log().contains("silent") {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(5), "server did not drop a silent client: {}", srv.log());
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn slow_drip_clients_are_dropped_at_the_hello_deadline() {
    let _serial = serial();
    let srv = TestServer::start(&[]);
    // Three clients send a valid handshake and first message one byte per
    // 700 ms: each read arrives well within any per-read timeout, but the
    // whole hello must be in within 5 s.
    let mut hello = bloatlab_wire::Handshake::ours().encode().to_vec();
    hello.extend(bloatlab_wire::encode_frame(&bloatlab_wire::ClientMsg::JoinRr { token: 7 }));
    let t0 = Instant::now();
    let drips: Vec<_> = (0..3)
        .map(|_| {
            let addr = srv.addr();
            let hello = hello.clone();
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(addr).unwrap();
                s.set_read_timeout(Some(Duration::from_millis(1))).unwrap();
                for b in hello {
                    if s.write_all(&[b]).is_err() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(700));
                    let mut buf = [0u8; 256];
                    match s.read(&mut buf) {
                        Ok(0) => break, // closed by the server
                        Ok(_) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::TimedOut => {}
                        Err(_) => break,
                    }
                }
                t0.elapsed()
            })
        })
        .collect();
    // Meanwhile a real test is served.
    let dir = tempfile::tempdir().unwrap();
    let out = short_test(&srv, "1u0d", &dir.path().join("r.json"));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for d in drips {
        let held = d.join().unwrap();
        assert!(held < Duration::from_millis(6500), "a slow-drip client was held {held:?}; log: {}", srv.log());
    }
    assert!(srv.log().contains("within 5 s"), "{}", srv.log());
}

#[test]
fn client_killed_mid_scenario_frees_everything() {
    let _serial = serial();
    let srv = TestServer::start(&["--idle-timeout", "2s"]);
    std::thread::sleep(Duration::from_millis(300));
    let base = srv.threads_and_fds();
    let mut child = std::process::Command::new(exe())
        .args(["test", &srv.addr(), "--scenarios", "8u8d", "--duration", "20s", "--idle", "0.5s", "--quiet"])
        .stderr(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the 16 flows have joined, then let the scenario (and the
    // server's sampler) run a moment before the client dies without a word.
    let t = Instant::now();
    while srv.threads_and_fds().1 < base.1 + 16 {
        assert!(t.elapsed() < Duration::from_secs(10), "flows never joined: {:?} vs {base:?}", srv.threads_and_fds());
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(1500));
    let busy = srv.threads_and_fds();
    child.kill().unwrap();
    child.wait().unwrap();
    // Within the idle timeout everything the test took is back: threads
    // (sampler, flows, control) and descriptors.
    let t = Instant::now();
    let now = srv.back_to(base, Duration::from_secs(8));
    eprintln!("server threads/fds: before {base:?}, mid-test {busy:?}, after the kill {now:?} ({:.1} s)", t.elapsed().as_secs_f64());
    assert!(busy.0 > base.0 + 16 && busy.1 >= base.1 + 16, "the test was running: {busy:?} vs {base:?}");
    assert_eq!(now, base, "threads and fds after a killed client; log: {}", srv.log());
    assert!(srv.log().contains("disconnected") || srv.log().contains("ended"), "{}", srv.log());
}

/// Read a child's interval lines (stdout) until one matches, within 30 s;
/// the rest of its stdout is drained in the background so it never blocks.
fn wait_for_line(child: &mut std::process::Child, want: impl Fn(&str) -> bool) -> Vec<String> {
    use std::io::BufRead;
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut seen = vec![];
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) => {
                let hit = want(&l);
                seen.push(l);
                if hit {
                    return seen;
                }
            }
            Err(_) => panic!("no such line within 30 s; the test printed {seen:?}"),
        }
    }
}

#[test]
fn server_dying_mid_test_leaves_a_partial_result() {
    let _serial = serial();
    let mut srv = TestServer::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let mut child = std::process::Command::new(exe())
        .args(["test", &srv.addr(), "--scenarios", "1u0d,0u1d,1u1d", "--duration", "1s", "--idle", "0.5s", "--pause", "0.2s"])
        .args(["--quiet", "--interval", "0.2s", "--json", json.to_str().unwrap()])
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // the event, not a guess at the time: the second scenario is carrying data
    let _lines = wait_for_line(&mut child, |l| l.contains("0u1d down"));
    srv.child.kill().unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("scenario"), "{err}");
    let r = TestResult::read_file(&json).unwrap();
    assert!(!r.complete);
    assert!(r.incomplete_reason.is_some());
    assert!(r.idle.is_some());
}

#[test]
fn interrupted_client_writes_what_it_measured() {
    let _serial = serial();
    let srv = TestServer::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let mut child = std::process::Command::new(exe())
        .args(["test", &srv.addr(), "--scenarios", "1u0d,0u1d", "--duration", "3s", "--idle", "0.5s"])
        .args(["--quiet", "--interval", "0.2s", "--json", json.to_str().unwrap()])
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // the event, not a guess at the time: the first scenario has carried data for a second
    // (an interval's edges follow the sampler: "0.81-1.00 s" as well as "0.80-1.00 s")
    let ends_after_1s = |l: &str| l.split_whitespace().find_map(|w| w.split_once('-')).and_then(|(_, e)| e.parse::<f64>().ok()).is_some_and(|e| e >= 1.0);
    let _lines = wait_for_line(&mut child, |l| l.contains("1u0d up") && ends_after_1s(l));
    bloatlab_host::process::signal_child(&child, bloatlab_host::process::Signal::Int);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", String::from_utf8_lossy(&out.stderr));
    let r = TestResult::read_file(&json).unwrap();
    assert!(!r.complete);
    assert!(r.incomplete_reason.as_deref().unwrap().contains("interrupted"));
    assert_eq!(r.scenarios.len(), 1, "the interrupted scenario is kept");
    assert!(r.scenarios[0].summary.upload_bps > 0.0);
}

#[test]
fn ipv6_loopback_works() {
    let _serial = serial();
    if std::net::UdpSocket::bind("[::1]:0").is_err() {
        bloatlab_testkit::cannot_run("ipv6_loopback_works", "this host has no IPv6 loopback");
        return;
    }
    let srv = TestServer::start_on("::1", &[]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let out = run(&["test", &srv.addr(), "-6", "--scenarios", "1u1d", "--duration", "0.5s", "--idle", "0.3s", "--quiet", "--json", json.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r = TestResult::read_file(&json).unwrap();
    assert!(r.metadata.server_address.starts_with("[::1]"));
    assert!(r.scenarios[0].summary.latency.received > 0);
    assert!(r.scenarios[0].summary.upload_bps > 0.0 && r.scenarios[0].summary.download_bps > 0.0);
}

/// A witness session is silent on its control connection for the whole test:
/// its probes must still be answered after the server's idle timeout.
#[test]
fn witness_probes_answered_for_the_whole_test() {
    let _serial = serial();
    let srv = TestServer::start(&[]);
    let w = TestServer::start(&["--idle-timeout", "1s"]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let out = run(&[
        "test", &srv.addr(), "--scenarios", "1u0d,0u1d,1u1d", "--duration", "1s", "--idle", "0.5s", "--pause", "0.2s",
        "--quiet", "--witness", &w.addr(), "--json", json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r = TestResult::read_file(&json).unwrap();
    let last = r.scenarios.last().unwrap();
    let wl = last.summary.witness_latency.expect("witness stats");
    assert!(wl.sent > 50 && wl.lost <= 2, "witness probes lost late in the test: {wl:?}");
}

/// `bloatlab test --report`: measure, then write the HTML report next to the JSON.
#[test]
fn test_with_report_writes_html_next_to_json() {
    let _serial = serial();
    let srv = TestServer::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let out = run(&[
        "test", &srv.addr(), "--scenarios", "1u1d", "--duration", "0.5s", "--idle", "0.3s", "--quiet", "--report",
        "--json", json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // The summary table went to stdout, with seed 003's headline and the clock line.
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("Upload Capacity") && table.contains("Clock offset"), "{table}");
    let html = std::fs::read_to_string(dir.path().join("run.html")).expect("run.html");
    assert!(html.contains("bloatlab report") && html.contains("<svg"));
    assert!(dir.path().join("run.timeseries.png").exists());
}

/// TCP load receivers let the kernel discard the data unless --rx-copy asks
/// them (both ends) to copy it as an application would; either way both
/// directions carry data, and the result and its text say which it was.
#[test]
fn receivers_discard_by_default_and_copy_on_request() {
    let _serial = serial();
    let srv = TestServer::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    for copy in [false, true] {
        let json = dir.path().join(format!("r{copy}.json"));
        let addr = srv.addr();
        let mut args = vec!["test", &addr, "--scenarios", "1u1d", "--duration", "1s", "--idle", "0", "-i", "0", "--json"];
        let path = json.to_str().unwrap().to_string();
        args.push(&path);
        if copy {
            args.push("--rx-copy");
        }
        let out = run(&args);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let r = TestResult::read_file(&json).unwrap();
        assert_eq!(r.metadata.socket.rx_copy, copy);
        let p = &r.scenarios[0];
        assert!(p.summary.upload_bps > 1e8 && p.summary.download_bps > 1e8, "copy={copy}: {:?}", p.summary);
        for f in &p.flows {
            assert!(f.bytes > 1_000_000, "copy={copy}: flow {} {:?} carried {} bytes", f.id, f.direction, f.bytes);
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let said = if copy { "TCP data copied to user space" } else { "TCP data discarded by the kernel (MSG_TRUNC)" };
        assert!(text.contains(said), "copy={copy}: {text}");
    }
}

/// iperf3-style interval lines: one per loaded direction per interval, on
/// stdout when it is not a terminal (here: a pipe), or in --logfile.
#[test]
fn interval_lines_and_logfile() {
    let _serial = serial();
    let srv = TestServer::start(&[]);
    let out = run(&["test", &srv.addr(), "--scenarios", "1u1d,0u1d", "--duration", "1.2s", "--idle", "0.3s", "--pause", "0.3s", "--interval", "400ms"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().filter(|l| l.starts_with('[')).collect();
    let count = |tag: &str| lines.iter().filter(|l| l.contains(tag)).count();
    // 1.2 s in 400 ms intervals: 3 per direction (a 4th when the last update falls past 1.2 s)
    assert!((3..=4).contains(&count("1u1d up")) && (3..=4).contains(&count("1u1d down")), "{text}");
    assert!((3..=4).contains(&count("0u1d down")) && count("0u1d up") == 0, "{text}");
    for l in &lines {
        assert!(l.contains(" s ") && l.contains("bit/s") && l.contains("rtt "), "{l}");
        // the rate is in the unit its size needs: Gbit/s on loopback
        let before: Vec<&str> = l.split("bit/s").next().unwrap().split_whitespace().collect();
        let (num, unit) = (before[before.len() - 2], before[before.len() - 1]);
        let scale = match unit { "G" => 1e9, "M" => 1e6, "k" => 1e3, _ => panic!("unit {unit}bit/s: {l}") };
        let bps = num.parse::<f64>().unwrap() * scale;
        assert!(bps > 10e6, "loopback interval at {bps} bit/s: {l}");
    }
    assert!(lines[0].contains("0.00-0.4"), "intervals start at the scenario's start: {}", lines[0]);
    // default when stdout is a pipe: one line per second
    let out = run(&["test", &srv.addr(), "--scenarios", "0u1d", "--duration", "2.2s", "--idle", "0"]);
    let n = String::from_utf8_lossy(&out.stdout).lines().filter(|l| l.starts_with("[  0u1d down]")).count();
    assert!((2..=3).contains(&n), "{n} default interval lines");
    // --interval 0: none; --logfile: the text goes to the file, nothing to stdout
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.log");
    let out = run(&["test", &srv.addr(), "--scenarios", "1u0d", "--duration", "1s", "--idle", "0", "--logfile", log.to_str().unwrap()]);
    assert!(out.status.success() && out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stdout));
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("[  1u0d up  ]") && logged.contains("Upload Capacity"), "{logged}");
    let out = run(&["test", &srv.addr(), "--scenarios", "1u0d", "--duration", "0.5s", "--idle", "0", "--interval", "0"]);
    assert!(!String::from_utf8_lossy(&out.stdout).lines().any(|l| l.starts_with('[')));
    let out = run(&["test", &srv.addr(), "--interval", "10ms"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("at least 100ms"));
}

/// UDP load on loopback: every flow records what it sent and what arrived,
/// the table shows it, and the delivered rate is the target.
#[test]
fn udp_load_flows_report_loss_and_jitter() {
    let _serial = serial();
    let srv = TestServer::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("udp.json");
    let out = run(&[
        "test", &srv.addr(), "--scenarios", "1u1d,2u0d", "--duration", "1.5s", "--idle", "0.3s", "--pause", "0.3s",
        "--udp", "20mbit", "--udp-size", "1000", "--dscp", "EF", "--interval", "500ms", "--json", json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("UDP load") && table.contains("Jitter ms"), "{table}");
    // Live lines show what arrived: an upload's from the server's receipts
    // (20 Mbit/s a flow; the first interval may miss one 100 ms receipt).
    let mut seen = 0;
    for l in table.lines().filter(|l| l.starts_with('[')) {
        let before: Vec<&str> = l.split("bit/s").next().unwrap().split_whitespace().collect();
        let (num, unit) = (before[before.len() - 2], before[before.len() - 1]);
        assert_eq!(unit, "M", "{l}");
        let mbps: f64 = num.parse().unwrap();
        let flows = if l.contains("2u0d up") { 2.0 } else { 1.0 };
        if !l.contains("-1.50 s") {
            assert!(mbps > 0.7 * 20.0 * flows && mbps < 1.3 * 20.0 * flows, "{l}");
        }
        seen += 1;
    }
    assert!(seen >= 8, "3 intervals in each of 1u1d up, 1u1d down, 2u0d up:\n{table}");
    // The summary names the UDP upload for what it is, and no TCP receive path.
    assert!(table.contains("Upload (UDP):") && !table.contains("Upload Capacity") && !table.contains("MSG_TRUNC"), "{table}");
    let r = TestResult::read_file(&json).unwrap();
    for p in &r.scenarios {
        for f in &p.flows {
            let u = f.udp.unwrap_or_else(|| panic!("{} flow {} has no UDP record", p.name, f.id));
            assert_eq!((u.target_bps, u.payload_bytes, f.dscp), (20e6, 1000, 46));
            // 1.5 s at 2500 datagrams/s
            assert!(u.sent > 3000 && u.sent < 4500, "{u:?}");
            assert!(u.loss_pct < 2.0 && u.received <= u.sent, "{u:?}");
            assert!(u.jitter_ms >= 0.0 && u.jitter_ms < 5.0, "{u:?}");
            assert_eq!(f.bytes, u.received * 1000, "payload bytes counted");
        }
        let per_flow = if p.uploads > 0 { p.summary.upload_bps / p.uploads as f64 } else { p.summary.download_bps };
        assert!((per_flow / 20e6 - 1.0).abs() < 0.1, "{}: {per_flow}", p.name);
    }
    // a bad datagram size is refused before anything runs
    let out = run(&["test", &srv.addr(), "--udp", "1mbit", "--udp-size", "20"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--udp-size"));
}

/// `--dscp`: each class gets its own marked probe stream, answered by the
/// server; the summary prints a row per phase and class, the JSON has it.
#[test]
fn dscp_classes_get_their_own_probes_and_rows() {
    let _serial = serial();
    let srv = TestServer::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("dscp.json");
    let out = run(&["test", &srv.addr(), "--scenarios", "2u2d", "--duration", "1.5s", "--idle", "0.5s", "--dscp", "BE,EF", "--interval", "0", "--json", json.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Per DSCP class (--dscp)"), "{text}");
    assert!(text.lines().any(|l| l.starts_with("2u2d") && l.contains(" EF ") && l.contains("1/1")), "{text}");
    let r = TestResult::read_file(&json).unwrap();
    let p = &r.scenarios[0];
    assert_eq!(p.class_probes.iter().map(|c| c.dscp).collect::<Vec<_>>(), [0, 46]);
    for c in &p.summary.classes {
        // 1.5 s every 10 ms
        assert!(c.latency.sent >= 140 && c.latency.received + 3 >= c.latency.sent, "{c:?}");
        assert!(c.upload_bps > 1e8 && c.download_bps > 1e8 && c.added_latency_ms.is_some(), "{c:?}");
    }
    assert_eq!(r.idle.as_ref().unwrap().summary.classes.len(), 2, "the idle baseline has the classes' idle latency");
    // the grade is in the result, the same letter the verdict prints
    let g = r.headline.grade.clone().expect("a graded result");
    assert!(text.contains(&format!("Verdict: {g} (")), "{g}: {text}");
    // more distinct classes than probe streams: refused before anything runs
    let out = run(&["test", &srv.addr(), "--dscp", "CS0,CS1,CS2,CS3,CS4,CS5,CS6,CS7"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("8 distinct DSCP classes; at most 7"), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn the_household_profile_runs_a_call_and_a_stream_beside_the_bulk_update_and_judges_each() {
    let _serial = serial();
    let srv = TestServer::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("h.json");
    let out = run(&["test", &srv.addr(), "--profile", "household", "--json", json.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    let r = TestResult::read_file(&json).unwrap();
    let names: Vec<&str> = r.scenarios.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["0u4d", "4u0d", "household"]);
    assert_eq!(r.metadata.profile.as_deref(), Some("household"));
    // the game is the probes, at the plan's 50 Hz
    assert_eq!(r.metadata.probe_interval_ms, 20.0);
    let p = &r.scenarios[2];
    let secs = (p.end_ns - p.start_ns) as f64 / 1e9;
    assert!((secs - 12.0).abs() < 0.5, "household phase {secs} s");
    // the phase's flows are the bulk update, one stream each way (the
    // stream's segments are recorded as segments, as the page's are)
    let dirs: Vec<Direction> = p.flows.iter().map(|f| f.direction).collect();
    assert_eq!(dirs, [Direction::Up, Direction::Down]);
    let h = r.household.as_ref().expect("the household record");
    assert_eq!(h.phase, "household");
    // 30 frames a second for 12 s, answered on loopback
    let frames = &h.call.frames;
    assert!((350..=362).contains(&frames.len()), "{} frames", frames.len());
    assert!(frames.iter().filter(|f| f.rtt_ns.is_some()).count() >= frames.len() * 98 / 100);
    assert!(!h.call.lost_way_known);
    // three 1.5 MB segments, the k-th requested k x 4 s into the phase
    assert_eq!(h.stream.segments.len(), 3, "{:?}", h.stream.segments);
    for (k, g) in h.stream.segments.iter().enumerate() {
        assert_eq!((g.bytes, g.done_ns.is_some()), (1_500_000, true), "segment {k}");
        let at = (g.t_ns - p.start_ns) as f64 / 1e9;
        assert!((at - 4.0 * k as f64).abs() < 0.3, "segment {k} requested at {at} s");
    }
    // one verdict per application, printed as the page shows them
    let v = bloatlab_metrics::household::household(&r);
    let names: Vec<&str> = v.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(names, ["game", "video call", "stream", "bulk update"]);
    for u in &v[..3] {
        assert_eq!(u.verdict, bloatlab_metrics::uses::Verdict::Good, "{}: {}", u.name, u.measured);
        assert!(text.contains(&u.measured), "{} not printed:\n{text}", u.measured);
    }
    assert!(!v[1].measured.contains("on the way back"), "{}", v[1].measured);
}
