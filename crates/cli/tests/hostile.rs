//! The server facing hostile clients on loopback: connection floods, a
//! client that stops reading, wrong and missing secrets, forged and replayed
//! probes, tokens used from another address, a second request/response
//! connection, a test that overstays its deadline. After each, the server
//! still serves a real test and returns to its baseline of threads and
//! descriptors. (Garbage, oversize frames, slow drips and a client killed
//! after `go` are in engine.rs.)
mod common;
use bloatlab_model::Secret;
use bloatlab_wire::{self as wire, ClientMsg, Handshake, Probe, ProbeKind, ServerMsg};
use common::*;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

fn real_test_passes(srv: &TestServer, extra: &[&str]) {
    let addr = srv.addr();
    let mut args = vec!["test", &addr, "-s", "1u1d", "-d", "1s", "--idle", "0.5s", "--pause", "0.2s", "--quiet"];
    args.extend_from_slice(extra);
    let out = run(&args);
    assert!(out.status.success(), "a real test failed beside the hostile clients: {}", String::from_utf8_lossy(&out.stderr));
}

/// A TCP connection from a chosen loopback address (127.0.0.x is a
/// different source to the server).
fn connect_from(src: &str, to: &str) -> std::io::Result<TcpStream> {
    let to: SocketAddr = to.parse().unwrap();
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    s.bind(&SocketAddr::new(src.parse().unwrap(), 0).into())?;
    s.connect_timeout(&to.into(), Duration::from_secs(3))?;
    Ok(s.into())
}

fn recv_msg(s: &mut TcpStream) -> Result<ServerMsg, bloatlab_engine::conn::ConnError> {
    bloatlab_engine::conn::recv(s, wire::MAX_SERVER_FRAME)
}

/// Handshake (answering the challenge with `secret`), then `first`; the reply.
fn hello(s: &mut TcpStream, secret: Option<&Secret>, first: &ClientMsg) -> Result<ServerMsg, bloatlab_engine::conn::ConnError> {
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.write_all(&Handshake::ours().encode())?;
    let mut hs = [0u8; wire::SERVER_HELLO_LEN];
    s.read_exact(&mut hs)?;
    let h = Handshake::decode(&hs).unwrap();
    if h.status == wire::HandshakeStatus::Busy as u8 {
        return recv_msg(s);
    }
    if let Some(k) = secret {
        let nonce: [u8; wire::NONCE_LEN] = hs[wire::HANDSHAKE_LEN..].try_into().unwrap();
        s.write_all(&wire::encode_frame(&ClientMsg::Auth { answer: wire::auth::answer_challenge(k, &nonce) }))?;
    }
    s.write_all(&wire::encode_frame(first))?;
    recv_msg(s)
}

fn new_test(planned_ms: u64, max_flows: u32) -> ClientMsg {
    ClientMsg::NewTest {
        client: Default::default(),
        cc: String::new(),
        planned_duration_ms: planned_ms,
        max_flows,
        sample_interval_ms: 100,
        scenarios: vec!["probe".into()],
        socket_buffer: 0,
        rx_copy: false,
    }
}

fn secret_file(dir: &std::path::Path, text: &str) -> (std::path::PathBuf, Secret) {
    let p = dir.join(format!("secret-{}", text.len()));
    std::fs::write(&p, format!("{text}\n")).unwrap();
    (p, Secret::from_file_contents(text.as_bytes(), "t").unwrap())
}

#[test]
fn connection_floods_are_capped_per_source_before_any_thread() {
    let _serial = serial();
    let srv = TestServer::start(&["--max-conns", "300", "--max-conns-per-source", "100", "--max-flows", "8"]);
    std::thread::sleep(Duration::from_millis(200));
    let base = srv.threads_and_fds();
    // 400 silent connections from one source: 100 are admitted (and wait
    // for their handshake deadline), the rest are told why they are refused.
    let mut held = vec![];
    for _ in 0..400 {
        held.push(connect_from("127.0.0.2", &srv.addr()).unwrap());
    }
    std::thread::sleep(Duration::from_millis(500));
    let (threads, _) = srv.threads_and_fds();
    assert!(threads <= base.0 + 100, "{threads} threads for 100 admitted connections (baseline {})", base.0);
    let mut refused = 0;
    let mut reason = String::new();
    for s in held.iter_mut().skip(100) {
        s.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
        let mut b = vec![];
        let _ = s.read_to_end(&mut b);
        if b.len() > wire::SERVER_HELLO_LEN && b[10] == wire::HandshakeStatus::Busy as u8 {
            refused += 1;
            reason = String::from_utf8_lossy(&b[wire::SERVER_HELLO_LEN + 4..]).into_owned();
        }
    }
    // The refusal queue and the lingering sockets are bounded (256 each): a
    // few may be closed without a word.
    assert!(refused >= 200, "only {refused} of 300 refused connections were told why");
    assert!(reason.contains("--max-conns-per-source") && reason.contains("100 open connections"), "{reason}");
    // Another source is still served while the flood holds its 100.
    real_test_passes(&srv, &[]);
    // The flooder gets nothing more, even with a proper client.
    let mut s = connect_from("127.0.0.2", &srv.addr()).unwrap();
    match hello(&mut s, None, &new_test(5000, 1)) {
        Ok(ServerMsg::Refused { reason }) => assert!(reason.contains("per source"), "{reason}"),
        other => panic!("a 101st connection from the flooding source: {other:?}"),
    }
    drop(held);
    let now = srv.back_to(base, Duration::from_secs(8));
    assert_eq!(now, base, "threads/fds after the flood (baseline {base:?})");
    assert!(srv.log().contains("\"event\":\"busy\""), "{}", srv.log());
}

#[test]
fn secrets_are_checked_on_every_connection_with_reasons() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let (good, key) = secret_file(dir.path(), "correct horse battery staple");
    let (bad, _) = secret_file(dir.path(), "incorrect horse battery staple");
    let srv = TestServer::start(&["--secret-file", good.to_str().unwrap()]);
    let base = srv.threads_and_fds();
    real_test_passes(&srv, &["--secret-file", good.to_str().unwrap()]);
    let out = run(&["test", &srv.addr(), "-s", "1u0d", "-d", "1s", "--quiet", "--secret-file", bad.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("authentication failed") && err.contains("does not match"), "{err}");
    let out = run(&["test", &srv.addr(), "-s", "1u0d", "-d", "1s", "--quiet"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("requires a shared secret") && err.contains("--secret-file"), "{err}");
    // A join with a live token but no answer to the challenge is refused too.
    let mut ctl = TcpStream::connect(srv.addr()).unwrap();
    let ServerMsg::TestAccepted { token, auth, server, .. } = hello(&mut ctl, Some(&key), &new_test(5000, 1)).unwrap() else { panic!() };
    assert!(auth);
    // Not disclosed without --disclose-host.
    assert!(server.hostname.is_empty() && server.kernel.is_empty() && !server.bloatlab_version.is_empty(), "{server:?}");
    let mut j = TcpStream::connect(srv.addr()).unwrap();
    assert!(matches!(hello(&mut j, None, &ClientMsg::JoinRr { token }), Ok(ServerMsg::Refused { .. })));
    let mut j = TcpStream::connect(srv.addr()).unwrap();
    assert!(matches!(hello(&mut j, Some(&key), &ClientMsg::JoinRr { token }), Ok(ServerMsg::RrAccepted)));
    // A short secret file is refused at the edge, on both sides.
    let short = dir.path().join("short");
    std::fs::write(&short, "hunter2\n").unwrap();
    let out = run(&["server", "--secret-file", short.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("use at least 16"), "{}", String::from_utf8_lossy(&out.stderr));
    let out = run(&["test", "127.0.0.1", "--secret-file", "/nonexistent/secret"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--secret-file /nonexistent/secret: No such file"));
    drop((ctl, j));
    assert_eq!(srv.back_to(base, Duration::from_secs(5)), base);
}

fn probe(token: u64, seq: u32, size: usize, key: Option<&Secret>) -> Vec<u8> {
    let mut b = vec![0xA5u8; size];
    Probe { kind: ProbeKind::Request, token, seq, stream: 0, client_send_ns: 1_000 + seq as u64, server_recv_ns: 0, server_send_ns: 0 }
        .encode_into(&mut b)
        .unwrap();
    if let Some(k) = key {
        wire::sign_probe(&mut b, k).unwrap();
    }
    b
}

fn answered(u: &UdpSocket, to: &str, pkt: &[u8]) -> Option<Vec<u8>> {
    u.send_to(pkt, to).unwrap();
    let mut b = [0u8; 2048];
    match u.recv_from(&mut b) {
        Ok((n, _)) => Some(b[..n].to_vec()),
        Err(_) => None,
    }
}

#[test]
fn probes_forged_replayed_or_from_elsewhere_get_no_reply() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let (file, key) = secret_file(dir.path(), "0123456789abcdef0123");
    let other = Secret::from_file_contents(b"not the server's secret", "t").unwrap();
    for authed in [false, true] {
        let srv = if authed { TestServer::start(&["--secret-file", file.to_str().unwrap()]) } else { TestServer::start(&[]) };
        let k = authed.then_some(&key);
        let mut ctl = TcpStream::connect(srv.addr()).unwrap();
        let ServerMsg::TestAccepted { token, .. } = hello(&mut ctl, k, &new_test(10_000, 0)).unwrap() else { panic!() };
        let u = UdpSocket::bind("127.0.0.1:0").unwrap();
        u.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
        let to = srv.addr();
        // A proper probe: a reply as long as the request, carrying none of its bytes past the header.
        let req = probe(token, 0, 200, k);
        let rep = answered(&u, &to, &req).expect("a proper probe is answered");
        assert_eq!(rep.len(), 200);
        let tail = if authed { &rep[64..] } else { &rep[48..] };
        assert!(tail.iter().all(|&b| b == 0), "the reply echoed the request's padding");
        if authed {
            assert!(wire::probe_signed(&rep, &key), "the reply is signed");
        }
        // Replayed: no second answer.
        assert!(answered(&u, &to, &req).is_none(), "a replayed probe was answered (auth {authed})");
        // A fresh sequence number is answered again.
        assert!(answered(&u, &to, &probe(token, 1, 64, k)).is_some());
        // Another address with the live token (and, with auth, a valid signature): nothing.
        let u2 = UdpSocket::bind("127.0.0.3:0").unwrap();
        u2.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
        assert!(answered(&u2, &to, &probe(token, 2, 64, k)).is_none(), "a probe from another source was answered");
        if authed {
            // Unsigned, signed with another secret, or forged after signing: nothing.
            assert!(answered(&u, &to, &probe(token, 3, 64, None)).is_none());
            assert!(answered(&u, &to, &probe(token, 4, 64, Some(&other))).is_none());
            let mut forged = probe(token, 5, 64, k);
            forged[20] ^= 1;
            assert!(answered(&u, &to, &forged).is_none());
        }
        // A join with the token from another source is refused.
        let mut j = connect_from("127.0.0.3", &to).unwrap();
        match hello(&mut j, k, &ClientMsg::JoinRr { token }) {
            Ok(ServerMsg::Error { message }) => assert!(message.contains("another source"), "{message}"),
            other => panic!("join from another source: {other:?}"),
        }
        // The test's one request/response connection; a second is refused.
        let mut rr = TcpStream::connect(&to).unwrap();
        assert!(matches!(hello(&mut rr, k, &ClientMsg::JoinRr { token }), Ok(ServerMsg::RrAccepted)));
        let mut rr2 = TcpStream::connect(&to).unwrap();
        match hello(&mut rr2, k, &ClientMsg::JoinRr { token }) {
            Ok(ServerMsg::Error { message }) => assert!(message.contains("already has"), "{message}"),
            other => panic!("second rr: {other:?}"),
        }
    }
}

#[test]
fn a_client_that_stops_reading_or_overstays_is_ended_and_freed() {
    let _serial = serial();
    let srv = TestServer::start(&["--idle-timeout", "1s"]);
    std::thread::sleep(Duration::from_millis(200));
    let base = srv.threads_and_fds();
    let to = srv.addr();
    // Opens a download, says go, then never reads the flow nor the control connection.
    let mut ctl = TcpStream::connect(&to).unwrap();
    let ServerMsg::TestAccepted { token, .. } = hello(&mut ctl, None, &new_test(4_000, 1)).unwrap() else { panic!() };
    let flows = vec![wire::FlowSpec { id: 0, direction: bloatlab_results::Direction::Down, dscp: 0, udp: None, segment_bytes: 0 }];
    ctl.write_all(&wire::encode_frame(&ClientMsg::StartScenario { index: 0, name: "0u1d".into(), flows, duration_ms: 1000 }))
        .unwrap();
    assert!(matches!(recv_msg(&mut ctl), Ok(ServerMsg::ScenarioReady)));
    let mut f = TcpStream::connect(&to).unwrap();
    let j = ClientMsg::JoinFlow { token, flow_id: 0, direction: bloatlab_results::Direction::Down };
    assert!(matches!(hello(&mut f, None, &j), Ok(ServerMsg::FlowAccepted)));
    ctl.write_all(&wire::encode_frame(&ClientMsg::Go)).unwrap();
    let t0 = Instant::now();
    // The server gives up after the scenario plus its idle timeout (2 s),
    // well before the test's own deadline (4 s + 1 s).
    let now = srv.back_to(base, Duration::from_secs(6));
    let held = t0.elapsed();
    assert_eq!(now, base, "threads/fds while the client still holds its unread sockets");
    assert!(held < Duration::from_secs(4), "held {held:?}");
    assert!(srv.log().contains("silent"), "{}", srv.log());
    drop((ctl, f));
    // A test that keeps talking past its announced length is ended at its
    // deadline (announced 1 s + idle timeout 1 s).
    let mut ctl = TcpStream::connect(&to).unwrap();
    assert!(matches!(hello(&mut ctl, None, &new_test(1_000, 1)).unwrap(), ServerMsg::TestAccepted { .. }));
    let t0 = Instant::now();
    let mut i = 0;
    let ended = loop {
        let m = ClientMsg::StartScenario { index: i, name: "0u0d".into(), flows: vec![], duration_ms: 100 };
        if ctl.write_all(&wire::encode_frame(&m)).is_err() {
            break t0.elapsed();
        }
        match recv_msg(&mut ctl) {
            Ok(ServerMsg::ScenarioReady) => {}
            _ => break t0.elapsed(),
        }
        i += 1;
        std::thread::sleep(Duration::from_millis(200));
        assert!(t0.elapsed() < Duration::from_secs(6), "the test outlived its deadline");
    };
    assert!(ended >= Duration::from_millis(1800) && ended < Duration::from_millis(3000), "ended after {ended:?}");
    std::thread::sleep(Duration::from_millis(200));
    assert!(srv.log().contains("reached its deadline"), "{}", srv.log());
    real_test_passes(&srv, &[]);
    drop(ctl);
    assert_eq!(srv.back_to(base, Duration::from_secs(3)), base);
}

#[test]
fn a_flood_of_forged_probes_and_garbage_datagrams_does_not_stop_a_real_test() {
    let _serial = serial();
    let srv = TestServer::start(&[]);
    std::thread::sleep(Duration::from_millis(200));
    let base = srv.threads_and_fds();
    let to = srv.addr();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let st = stop.clone();
    let flood = std::thread::spawn(move || {
        let u = UdpSocket::bind("127.0.0.5:0").unwrap();
        let mut sent = 0u64;
        let mut seq = 0u32;
        while !st.load(std::sync::atomic::Ordering::Relaxed) {
            // Well-formed probes for tokens that were never issued, and noise.
            let p = probe(0x1234_5678_0000_0000 | seq as u64, seq, 64, None);
            let _ = u.send_to(&p, &to);
            let _ = u.send_to(&[0x42u8; 1400], &to);
            seq = seq.wrapping_add(1);
            sent += 2;
            if sent.is_multiple_of(64) {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        sent
    });
    std::thread::sleep(Duration::from_millis(300));
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let out = run(&["test", &srv.addr(), "-s", "1u1d", "-d", "1.5s", "--idle", "0.5s", "--quiet", "--json", json.to_str().unwrap()]);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let sent = flood.join().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(sent > 10_000, "the flood sent only {sent} datagrams");
    let r = bloatlab_results::TestResult::read_file(&json).unwrap();
    assert!(r.complete);
    assert_eq!(srv.back_to(base, Duration::from_secs(3)), base);
}

/// Many clients starting at once fill the server's connection slots; a test
/// the server has accepted keeps retrying its flow connections while the
/// server says busy, instead of failing. Here 4 silent connections hold 4 of
/// the source's 8 slots until their 5 s handshake deadline, and a 2u2d test
/// (control, request/response and 4 flows: 6 connections) from the same
/// source gets 2 of its flows refused at first.
#[test]
fn an_accepted_test_retries_flows_a_busy_server_refused() {
    let _serial = serial();
    let srv = TestServer::start(&["--max-conns-per-source", "8", "--max-flows", "4"]);
    let held: Vec<TcpStream> = (0..4).map(|_| connect_from("127.0.0.1", &srv.addr()).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(200));
    let addr = srv.addr();
    let t0 = Instant::now();
    let out = run(&["test", &addr, "-s", "2u2d", "-d", "1s", "--idle", "0.2s", "--quiet"]);
    let took = t0.elapsed();
    assert!(out.status.success(), "the test failed instead of retrying: {}", String::from_utf8_lossy(&out.stderr));
    let log = srv.log();
    assert!(log.contains("\"event\":\"busy\"") && log.contains("per source"), "no flow was refused busy, so nothing was retried: {log}");
    assert!(took > Duration::from_secs(3), "the test finished in {took:?}: the held slots were never in the way");
    drop(held);
}

#[test]
fn a_stream_segment_is_a_bounded_tcp_download_or_refused_with_the_reason() {
    let _serial = serial();
    let srv = TestServer::start(&[]);
    let to = srv.addr();
    let down = bloatlab_results::Direction::Down;
    let bad = [
        wire::FlowSpec { id: 0, direction: down, dscp: 0, udp: None, segment_bytes: wire::MAX_SEGMENT_BYTES + 1 },
        wire::FlowSpec { id: 0, direction: bloatlab_results::Direction::Up, dscp: 0, udp: None, segment_bytes: 1000 },
        wire::FlowSpec { id: 0, direction: down, dscp: 0, udp: Some(wire::UdpParams { rate_bps: 1_000_000, payload: 1000 }), segment_bytes: 1000 },
    ];
    for spec in bad {
        let mut ctl = TcpStream::connect(&to).unwrap();
        assert!(matches!(hello(&mut ctl, None, &new_test(4_000, 1)).unwrap(), ServerMsg::TestAccepted { .. }));
        ctl.write_all(&wire::encode_frame(&ClientMsg::StartScenario { index: 0, name: "household".into(), flows: vec![spec], duration_ms: 1000 }))
            .unwrap();
        match recv_msg(&mut ctl) {
            Ok(ServerMsg::Error { message }) => assert!(message.contains("a stream segment is a TCP download of 1 to 16777216 bytes"), "{message}"),
            other => panic!("{spec:?}: {other:?}"),
        }
    }
    // A good one: nothing until asked, then exactly its bytes, then the end.
    let mut ctl = TcpStream::connect(&to).unwrap();
    let ServerMsg::TestAccepted { token, .. } = hello(&mut ctl, None, &new_test(4_000, 1)).unwrap() else { panic!() };
    let flows = vec![wire::FlowSpec { id: 0, direction: down, dscp: 0, udp: None, segment_bytes: 300_000 }];
    ctl.write_all(&wire::encode_frame(&ClientMsg::StartScenario { index: 0, name: "household".into(), flows, duration_ms: 2000 })).unwrap();
    assert!(matches!(recv_msg(&mut ctl), Ok(ServerMsg::ScenarioReady)));
    let mut f = TcpStream::connect(&to).unwrap();
    assert!(matches!(hello(&mut f, None, &ClientMsg::JoinFlow { token, flow_id: 0, direction: down }), Ok(ServerMsg::FlowAccepted)));
    ctl.write_all(&wire::encode_frame(&ClientMsg::Go)).unwrap();
    f.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    let mut buf = vec![0u8; 1 << 16];
    assert!(f.read(&mut buf).is_err(), "a segment sent before it was asked for");
    f.write_all(&[1]).unwrap();
    f.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut got = 0;
    while let Ok(n) = f.read(&mut buf) {
        if n == 0 {
            break;
        }
        got += n;
        if got >= 300_000 {
            // nothing beyond it
            f.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
        }
    }
    assert_eq!(got, 300_000);
}
