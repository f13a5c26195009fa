//! `bloatlab server`: one TCP port for control and bulk data, UDP on the same
//! port number for probes. Blocking threads, bounded: a connection gets a
//! thread only after the admission counters ([`crate::quota`]) took it, so
//! threads, sockets and memory are capped by the limits in [`ServerConfig`]
//! (docs/server.md lists them). Every test has one owner, its control
//! thread, whose exit releases the test's flows, sampler, request/response
//! connection and probe token whatever ended it.
use crate::conn::{self, ConnError};
use crate::flow::{self, Gate, RecvOutcome, Sampled};
use bloatlab_serve::quota::{self, Full, Permit, Quota};
use bloatlab_serve::{make_socket, watch_peer, Log, HELLO_DEADLINE};
use crate::sys;
use bloatlab_host::clock;
use bloatlab_results::{Direction, Side};
use bloatlab_wire::{
    self as wire, ClientMsg, FlowSpec, Handshake, HandshakeStatus, Limits, ReplayWindow, ServerFlowReport, ServerMsg,
    MAX_CLIENT_FRAME, NONCE_LEN, PROTOCOL_VERSION,
};
use serde_json::json;
use socket2::{SockRef, Type};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, RwLock};
use std::thread;
use std::time::{Duration, Instant};

/// A control or request/response write may block this long (a peer that
/// stops reading); flows use the server's --idle-timeout.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections still in their handshake, from all sources together (each
/// holds a thread for at most [`HELLO_DEADLINE`]).
pub const MAX_HANDSHAKING: u32 = 256;
/// Connections refused as busy wait here for their refusal to be written;
/// past this they are closed without one.
const REFUSAL_QUEUE: usize = 256;
/// A refused connection stays open this long for the peer to read why, and
/// at most this many wait at once.
const LINGER: Duration = Duration::from_secs(1);
const LINGERING: usize = 256;
/// Receive buffer asked for the probe socket.
const PROBE_RCVBUF: usize = 4 << 20;
/// Probe streams one test may use (server probes, witness probes, ...).
const MAX_PROBE_STREAMS: usize = 8;

pub use bloatlab_model::ServerConfig;

struct Shared {
    cfg: ServerConfig,
    tests: Mutex<HashMap<u64, Arc<TestState>>>,
    /// Live probe tokens: the source each is bound to and its replay windows.
    live: RwLock<HashMap<u64, LiveToken>>,
    /// Open connections, any kind (total and per source).
    conns: Arc<Quota>,
    /// Connections still in their handshake.
    handshaking: Arc<Quota>,
    /// Running tests, witness sessions included.
    tests_quota: Arc<Quota>,
    served: AtomicU64,
    /// Its events, and refusals (`busy`) at most one line a second.
    log: Arc<Log>,
    refusals: mpsc::SyncSender<(TcpStream, SocketAddr, String)>,
    /// The RPM service of the same process: its listening addresses and its
    /// certificate's SHA-256, told to accepted tests.
    rpm: std::sync::OnceLock<(Vec<SocketAddr>, String)>,
}

struct LiveToken {
    source: IpAddr,
    windows: Mutex<Vec<(u32, ReplayWindow)>>,
}

struct TestState {
    source: IpAddr,
    sample_interval: Duration,
    socket_buffer: u32,
    /// TCP load receivers copy to user space (else MSG_TRUNC discards).
    rx_copy: bool,
    cc: String,
    /// Nothing of this test outlives this instant.
    hard_end: Instant,
    scenario: Mutex<Option<Arc<Scenario>>>,
    /// Clone of the request/response socket, shut down when the test ends.
    rr: Mutex<Option<TcpStream>>,
    ended: AtomicBool,
    bytes_up: AtomicU64,
    bytes_down: AtomicU64,
}

struct Scenario {
    expected: HashMap<u32, Direction>,
    /// DSCP of each flow (absent = unmarked).
    marks: HashMap<u32, u8>,
    /// UDP flows' rates and datagram sizes.
    udp: HashMap<u32, wire::UdpParams>,
    /// Stream segments' sizes (the household test's player).
    segments: HashMap<u32, u64>,
    joined: Mutex<HashMap<u32, Joined>>,
    gate: Gate,
    stop: AtomicBool,
}

struct Joined {
    direction: Direction,
    /// A TCP flow (false: a UDP flow, whose TCP connection only controls it).
    tcp: bool,
    sock: TcpStream,
    counter: Arc<AtomicU64>,
    done: mpsc::Receiver<RecvOutcome>,
}

/// A running server; dropping it does not stop the threads (they live for the process).
pub struct Server {
    pub addrs: Vec<SocketAddr>,
    shared: Arc<Shared>,
}

impl Server {
    /// Bind every address (TCP + UDP) and start serving in background threads.
    pub fn start(mut cfg: ServerConfig) -> Result<Server, String> {
        // The senders' source block, faulted in at normal priority before
        // any bulk thread needs it (see `flow::source` and client::run).
        flow::source();
        let mut binds = cfg.binds.clone();
        if binds.is_empty() {
            binds.push(SocketAddr::from(([0u16; 8], wire::DEFAULT_PORT)));
        }
        let mut listeners = vec![];
        for b in &binds {
            match bind_pair(*b) {
                Ok(p) => listeners.push(p),
                Err(e) if b.is_ipv6() && b.ip().is_unspecified() => {
                    // No IPv6 on this host: fall back to IPv4 only.
                    let v4 = SocketAddr::from(([0, 0, 0, 0], b.port()));
                    listeners.push(bind_pair(v4).map_err(|e2| format!("cannot listen on {b} ({e}) nor {v4} ({e2})"))?);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
                    return Err(format!("cannot listen on {b}: {e}: another bloatlab server (or another program) has this port, TCP or UDP (--port chooses another; `ss -tulpn 'sport = :{}'` shows who)", b.port()))
                }
                Err(e) => return Err(format!("cannot listen on {b}: {e}")),
            }
        }
        cfg.binds = binds;
        let (refusals, refusal_rx) = mpsc::sync_channel(REFUSAL_QUEUE);
        let shared = Arc::new(Shared {
            conns: Quota::new(cfg.max_conns, cfg.max_conns_per_source),
            handshaking: Quota::new(MAX_HANDSHAKING, MAX_HANDSHAKING),
            tests_quota: Quota::new(cfg.max_tests, cfg.max_tests_per_source),
            log: Log::new(cfg.quiet, "busy"),
            cfg,
            tests: Mutex::new(HashMap::new()),
            live: RwLock::new(HashMap::new()),
            served: AtomicU64::new(0),
            refusals,
            rpm: std::sync::OnceLock::new(),
        });
        let sh = shared.clone();
        thread::Builder::new()
            .name("refuser".into())
            .spawn(move || refuser(refusal_rx, sh))
            .map_err(|e| format!("cannot start a thread: {e}"))?;
        let mut addrs = vec![];
        for (tcp, udp) in listeners {
            addrs.push(tcp.local_addr().map_err(|e| e.to_string())?);
            // Room for ~5000 probes (200 clients' 10 ms probes for 250 ms)
            // while the UDP thread waits for a CPU; the kernel caps it at
            // net.core.rmem_max.
            let _ = SockRef::from(&udp).set_recv_buffer_size(PROBE_RCVBUF);
            let sh = shared.clone();
            thread::Builder::new().name("udp".into()).spawn(move || udp_loop(udp, sh)).unwrap();
            let sh = shared.clone();
            thread::Builder::new().name("accept".into()).spawn(move || accept_loop(tcp, sh)).unwrap();
        }
        Ok(Server { addrs, shared })
    }

    pub fn tests_served(&self) -> u64 {
        self.shared.served.load(Ordering::Relaxed)
    }
    pub fn active_tests(&self) -> u32 {
        self.shared.tests_quota.total()
    }
    /// Open TCP connections of any kind.
    pub fn open_connections(&self) -> u32 {
        self.shared.conns.total()
    }
    /// The tests quota (--max-tests, --max-tests-per-source), shared with
    /// the browser test: a page's test takes a unit for as long as it runs.
    pub fn tests_quota(&self) -> Arc<Quota> {
        self.shared.tests_quota.clone()
    }

    /// The connection counters (total and per source), for other services
    /// of the same server to take their connections from.
    pub fn connection_quota(&self) -> Arc<Quota> {
        self.shared.conns.clone()
    }
    /// Tell accepted tests about the RPM endpoints this process serves (set
    /// once, when they listen).
    pub fn offer_rpm(&self, addrs: Vec<SocketAddr>, certificate_sha256: String) {
        let _ = self.shared.rpm.set((addrs, certificate_sha256));
    }
}

/// The RPM port for a test that reached us at `local`: the RPM listener on
/// the same address, else on the wildcard of its family, else the first.
fn rpm_offer(sh: &Shared, local: Option<SocketAddr>) -> Option<bloatlab_model::RpmOffer> {
    let (addrs, fp) = sh.rpm.get()?;
    let pick = local
        .and_then(|l| {
            addrs.iter().find(|a| a.ip() == l.ip()).or_else(|| addrs.iter().find(|a| a.ip().is_unspecified() && a.is_ipv4() == l.is_ipv4()))
        })
        .or(addrs.first())?;
    Some(bloatlab_model::RpmOffer { port: pick.port(), certificate_sha256: fp.clone() })
}

/// Bind TCP, then UDP on the same port (retrying with a new ephemeral port if
/// port 0 was asked and UDP's twin is taken).
fn bind_pair(addr: SocketAddr) -> std::io::Result<(TcpListener, UdpSocket)> {
    for _ in 0..20 {
        let tcp = make_socket(addr, Type::STREAM)?;
        let port = tcp.local_addr()?.as_socket().map(|a| a.port()).unwrap_or(0);
        let mut uaddr = addr;
        uaddr.set_port(port);
        match make_socket(uaddr, Type::DGRAM) {
            Ok(udp) => {
                tcp.listen(1024)?;
                return Ok((tcp.into(), udp.into()));
            }
            Err(e) if addr.port() == 0 && e.kind() == std::io::ErrorKind::AddrInUse => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::new(std::io::ErrorKind::AddrInUse, "no free port for both TCP and UDP"))
}

/// One JSON line on stderr per event (docs/server.md): `time`, `event` and
/// the event's fields.
fn log(sh: &Shared, event: &str, fields: serde_json::Value) {
    sh.log.event(event, fields);
}

fn udp_loop(sock: UdpSocket, sh: Arc<Shared>) {
    // Larger than any valid probe, so an oversized datagram is seen as such and ignored.
    let mut buf = [0u8; 2048];
    // Receive times from the kernel where it stamps datagrams: a probe's
    // server time then excludes this thread's wake-up latency.
    sys::enable_rx_timestamps(&sock);
    // Each probe's DSCP, so its answer travels back in the same class (a
    // router's priority queue treats both directions of a marked probe alike).
    let mirror = bloatlab_host::sock::enable_recv_tos(&sock).is_ok();
    loop {
        let (n, from, kts, tos) = match bloatlab_host::sock::recv_meta(&sock, &mut buf, 0) {
            Ok(r) => match r.from {
                Some(from) => (r.len, from, r.stamp_ns, r.tos.unwrap_or(0) & 0xfc),
                None => continue,
            },
            _ => continue,
        };
        let t_rx = kts.map(clock::from_realtime).unwrap_or_else(clock::now_ns);
        let pkt = &mut buf[..n];
        let answer = wire::answer_probe_in_place(pkt, t_rx, clock::now_ns(), sh.cfg.secret.as_ref(), |p| {
            admit_probe(&sh, p, from.ip())
        });
        if let Some(len) = answer {
            let _ = if mirror && tos != 0 { bloatlab_host::sock::send_to_with_tos(&sock, &pkt[..len], from, tos) } else { sock.send_to(&pkt[..len], from) };
        }
    }
}

/// A probe is answered once, for a live test, from the source that opened it.
fn admit_probe(sh: &Shared, p: &wire::Probe, from: IpAddr) -> bool {
    let live = sh.live.read().unwrap();
    let Some(t) = live.get(&p.token) else { return false };
    if quota::source_of(from) != t.source {
        return false;
    }
    let mut w = t.windows.lock().unwrap();
    if let Some((_, win)) = w.iter_mut().find(|(s, _)| *s == p.stream) {
        return win.accept(p.seq);
    }
    if w.len() >= MAX_PROBE_STREAMS {
        return false;
    }
    let mut win = ReplayWindow::default();
    win.accept(p.seq);
    w.push((p.stream, win));
    true
}

fn accept_loop(l: TcpListener, sh: Arc<Shared>) {
    // Admission before any thread or buffer is given to the peer: the
    // serving stack's accept loop and connection quota, then the handshake
    // slots; a refused peer is told why by the refuser.
    bloatlab_serve::accept::accept_blocking(
        l,
        sh.conns.clone(),
        |f| match f {
            Full::Total { limit } => format!("the server is at its limit of {limit} open connections (server flag --max-conns); try again later"),
            Full::Source { limit } => format!("your address already has {limit} open connections to this server, its limit per source (server flag --max-conns-per-source)"),
        },
        |s, peer, reason| refuse_busy(&sh, s, peer, reason),
        |s, peer, conn| {
            let hello = match sh.handshaking.take(peer.ip()) {
                Ok(p) => p,
                Err(_) => return Err((s, format!("the server has {MAX_HANDSHAKING} connections in their handshake; try again later"))),
            };
            let sh2 = sh.clone();
            if let Err(e) = thread::Builder::new().name("conn".into()).spawn(move || handle_conn(s, peer, sh2, conn, hello)) {
                log(&sh, "rejected", json!({"client": peer.to_string(), "reason": format!("cannot start a thread: {e}")}));
            }
            Ok(())
        },
    )
}

/// Hand a connection refused at admission to the refuser thread, which tells
/// the peer why; when even its queue is full, close it without a word.
fn refuse_busy(sh: &Shared, s: TcpStream, peer: SocketAddr, reason: String) {
    let _ = sh.refusals.try_send((s, peer, reason));
}

/// Write each refused connection its reason (a busy handshake then a
/// `refused` frame, without blocking: it fits an empty send buffer), close
/// our side, and keep the socket up to [`LINGER`] so the peer can read the
/// reason before the close (closing with the peer's unread bytes would send
/// a reset that may destroy it). One thread; at most [`LINGERING`] sockets
/// wait, the oldest is closed first; the log gets at most one line a second
/// with the count ([`bloatlab_serve::Log::refused`]).
fn refuser(rx: mpsc::Receiver<(TcpStream, SocketAddr, String)>, sh: Arc<Shared>) {
    let mut waiting: std::collections::VecDeque<(Instant, TcpStream)> = Default::default();
    let close = |s: TcpStream| {
        let mut sink = [0u8; 512];
        while matches!((&s).read(&mut sink), Ok(n) if n > 0) {}
    };
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok((s, peer, reason)) => {
                let hs = Handshake { version: PROTOCOL_VERSION, status: HandshakeStatus::Busy as u8 };
                let mut out = hs.encode_server(&[0; NONCE_LEN]).to_vec();
                out.extend(wire::encode_frame(&ServerMsg::Refused { reason: reason.clone() }));
                if s.set_nonblocking(true).is_ok() && (&s).write_all(&out).is_ok() {
                    let _ = s.shutdown(std::net::Shutdown::Write);
                    waiting.push_back((Instant::now(), s));
                    if waiting.len() > LINGERING {
                        if let Some((_, old)) = waiting.pop_front() {
                            close(old);
                        }
                    }
                }
                sh.log.refused(peer, reason);
            }
            Err(mpsc::RecvTimeoutError::Timeout) => sh.log.flush(),
            Err(mpsc::RecvTimeoutError::Disconnected) => return,
        }
        while waiting.front().is_some_and(|(t, _)| t.elapsed() >= LINGER) {
            if let Some((_, s)) = waiting.pop_front() {
                close(s);
            }
        }
    }
}

fn tune_accepted(s: &TcpStream) {
    let _ = s.set_nodelay(true);
    // A peer that stops reading cannot pin this thread on a write.
    let _ = s.set_write_timeout(Some(WRITE_TIMEOUT));
    watch_peer(&SockRef::from(s));
}

fn handle_conn(mut s: TcpStream, peer: SocketAddr, sh: Arc<Shared>, _conn: Permit, hello: Permit) {
    tune_accepted(&s);
    let reject = |reason: String| log(&sh, "rejected", json!({"client": peer.to_string(), "reason": reason}));
    // The handshake, authentication and first message, whole, within HELLO_DEADLINE.
    let until = Instant::now() + HELLO_DEADLINE;
    let hs = match conn::read_handshake(&mut conn::Deadline::new(&s, until)) {
        Ok(h) => h,
        Err(ConnError::Closed) => return, // port scan / health check: nothing to log
        Err(ConnError::Timeout) => return reject(format!("no complete handshake within {} s", HELLO_DEADLINE.as_secs())),
        Err(e) => return reject(e.to_string()),
    };
    let ok = hs.version == PROTOCOL_VERSION;
    let reply = Handshake {
        version: PROTOCOL_VERSION,
        status: if ok { HandshakeStatus::Ok as u8 } else { HandshakeStatus::VersionMismatch as u8 },
    };
    let nonce: [u8; NONCE_LEN] = rand::random();
    if s.write_all(&reply.encode_server(&nonce)).is_err() {
        return;
    }
    if !ok {
        return reject(format!(
            "protocol version mismatch: client speaks version {}, this server speaks version {PROTOCOL_VERSION}",
            hs.version
        ));
    }
    let read_first = |s: &TcpStream| conn::recv::<ClientMsg>(&mut conn::Deadline::new(s, until), MAX_CLIENT_FRAME);
    let mut first = read_first(&s);
    let mut authenticated = false;
    if let Ok(ClientMsg::Auth { answer }) = &first {
        if let Some(k) = &sh.cfg.secret {
            if !wire::auth::check_answer(k, &nonce, answer) {
                let reason = "authentication failed: the client's shared secret (--secret-file) does not match this server's";
                let _ = conn::send(&mut s, &ServerMsg::Refused { reason: reason.into() });
                return reject(reason.into());
            }
            authenticated = true;
        }
        first = read_first(&s);
    }
    let first = match first {
        Ok(m) => m,
        Err(ConnError::Timeout) => {
            let msg = format!("the handshake and first message must arrive within {} s", HELLO_DEADLINE.as_secs());
            let _ = conn::send(&mut s, &ServerMsg::Error { message: msg.clone() });
            return reject(msg);
        }
        Err(ConnError::Closed) => return,
        Err(e) => {
            let _ = conn::send(&mut s, &ServerMsg::Error { message: format!("bad first message: {e}") });
            return reject(format!("bad first message: {e}"));
        }
    };
    if sh.cfg.secret.is_some() && !authenticated {
        let reason = "this server requires a shared secret: run bloatlab test with --secret-file (the server's --secret-file)";
        let _ = conn::send(&mut s, &ServerMsg::Refused { reason: reason.into() });
        return reject("no authentication (the server has --secret-file)".into());
    }
    drop(hello);
    match first {
        ClientMsg::NewTest { .. } => control_session(s, peer, first, &sh),
        ClientMsg::JoinFlow { token, flow_id, direction } => flow_conn(s, peer, token, flow_id, direction, &sh),
        ClientMsg::JoinRr { token } => rr_conn(s, peer, token, &sh),
        other => {
            let _ = conn::send(&mut s, &ServerMsg::Error {
                message: format!("expected new_test, join_flow or join_rr first, got {}", msg_name(&other)),
            });
        }
    }
}

fn msg_name(m: &ClientMsg) -> &'static str {
    match m {
        ClientMsg::Auth { .. } => "auth",
        ClientMsg::NewTest { .. } => "new_test",
        ClientMsg::JoinFlow { .. } => "join_flow",
        ClientMsg::JoinRr { .. } => "join_rr",
        ClientMsg::StartScenario { .. } => "start_scenario",
        ClientMsg::Go => "go",
        ClientMsg::StopScenario => "stop_scenario",
        ClientMsg::EndTest { .. } => "end_test",
    }
}

/// The test a join names, if it is live and was opened from the joining source.
fn find_test(sh: &Shared, token: u64, peer: SocketAddr) -> Result<Arc<TestState>, String> {
    let t = sh.tests.lock().unwrap().get(&token).cloned().ok_or("unknown or expired session token")?;
    if t.source != quota::source_of(peer.ip()) {
        return Err("this session token belongs to another source address".into());
    }
    Ok(t)
}

fn refuse(s: &mut TcpStream, sh: &Shared, peer: SocketAddr, reason: String) {
    log(sh, "refused", json!({"client": peer.to_string(), "reason": reason}));
    let _ = conn::send(s, &ServerMsg::Refused { reason });
}

fn control_session(mut s: TcpStream, peer: SocketAddr, first: ClientMsg, sh: &Shared) {
    let ClientMsg::NewTest { client, cc, planned_duration_ms, max_flows, sample_interval_ms, scenarios, socket_buffer, rx_copy } = first
    else {
        return;
    };
    let cfg = &sh.cfg;
    if planned_duration_ms > cfg.max_duration.as_millis() as u64 {
        return refuse(&mut s, sh, peer, format!(
            "the test would run {:.0} s; this server allows at most {:.0} s per test (server flag --max-duration)",
            planned_duration_ms as f64 / 1000.0,
            cfg.max_duration.as_secs_f64()
        ));
    }
    if max_flows > cfg.max_flows {
        return refuse(&mut s, sh, peer, format!(
            "the test uses up to {max_flows} flows; this server allows at most {} per test (server flag --max-flows)",
            cfg.max_flows
        ));
    }
    if !cc.is_empty() && !cfg.allowed_cc.is_empty() && !cfg.allowed_cc.contains(&cc) {
        return refuse(&mut s, sh, peer, format!(
            "this server does not offer congestion control {cc} (it offers {}; server flag --allow-cc)",
            cfg.allowed_cc.join(", ")
        ));
    }
    if socket_buffer > cfg.max_socket_buffer {
        return refuse(&mut s, sh, peer, if cfg.max_socket_buffer == 0 {
            "this server does not let clients set socket buffers (server flag --max-socket-buffer 0); leave --socket-buffer out".to_string()
        } else {
            format!("--socket-buffer {socket_buffer} exceeds this server's limit of {} bytes (server flag --max-socket-buffer)", cfg.max_socket_buffer)
        });
    }
    if let Err(e) = sys::set_cc(&s, &cc) {
        return refuse(&mut s, sh, peer, format!("server: {e}"));
    }
    let _slot = match sh.tests_quota.take(peer.ip()) {
        Ok(p) => p,
        Err(Full::Total { limit }) => {
            return refuse(&mut s, sh, peer, format!(
                "the server is busy: it runs {limit} tests at once, its limit (server flag --max-tests); try again later"
            ))
        }
        Err(Full::Source { limit }) => {
            return refuse(&mut s, sh, peer, format!(
                "your address already runs {limit} tests on this server (witness sessions count), its limit per source (server flag --max-tests-per-source)"
            ))
        }
    };
    let token: u64 = loop {
        let t = rand::random::<u64>();
        if t != 0 && !sh.tests.lock().unwrap().contains_key(&t) {
            break t;
        }
    };
    let started = Instant::now();
    // Nothing of the test outlives what it announced (within the server's
    // limit) plus the idle timeout: a timer every blocking wait of the test
    // observes.
    let planned = Duration::from_millis(planned_duration_ms).min(cfg.max_duration);
    let source = quota::source_of(peer.ip());
    let test = Arc::new(TestState {
        source,
        sample_interval: Duration::from_millis(sample_interval_ms.clamp(10, 1000) as u64),
        socket_buffer,
        rx_copy,
        cc: if cc.is_empty() { sys::get_cc(&s) } else { cc.clone() },
        hard_end: started + planned + cfg.idle_timeout,
        scenario: Mutex::new(None),
        rr: Mutex::new(None),
        ended: AtomicBool::new(false),
        bytes_up: AtomicU64::new(0),
        bytes_down: AtomicU64::new(0),
    });
    sh.tests.lock().unwrap().insert(token, test.clone());
    sh.live.write().unwrap().insert(token, LiveToken { source, windows: Mutex::new(vec![]) });
    // A probe-only session (a witness) stays silent on its control connection
    // for the whole test: it may, up to what it announced.
    let probe_only = max_flows == 0;
    let accepted = ServerMsg::TestAccepted {
        token,
        server: sys::disclosed_host_info(cfg),
        limits: Limits { max_duration_ms: cfg.max_duration.as_millis() as u64, max_flows: cfg.max_flows, max_tests: cfg.max_tests },
        cc: test.cc.clone(),
        auth: cfg.secret.is_some(),
        rpm: rpm_offer(sh, s.local_addr().ok()).map(Box::new),
    };
    let outcome = if conn::send(&mut s, &accepted).is_ok() {
        run_control(&mut s, &test, sh, probe_only)
    } else {
        Err("client went away before the test started".to_string())
    };
    // Cleanup whatever happened.
    test.ended.store(true, Ordering::SeqCst);
    sh.live.write().unwrap().remove(&token);
    sh.tests.lock().unwrap().remove(&token);
    if let Some(sc) = test.scenario.lock().unwrap().take() {
        stop_scenario(&sc, &test);
    }
    if let Some(r) = test.rr.lock().unwrap().take() {
        flow::kill(&r);
    }
    sh.served.fetch_add(1, Ordering::Relaxed);
    let (ok, summary, reason) = match outcome {
        Ok((summary, complete)) => (complete, summary, if complete { "client ended the test" } else { "client ended the test early" }.to_string()),
        Err(e) => (false, String::new(), e),
    };
    log(sh, "test", json!({
        "client": peer.to_string(),
        "client_version": client.bloatlab_version,
        "scenarios": scenarios,
        "witness": probe_only,
        "cc": test.cc,
        "authenticated": cfg.secret.is_some(),
        "seconds": (started.elapsed().as_secs_f64() * 10.0).round() / 10.0,
        "bytes_up": test.bytes_up.load(Ordering::Relaxed),
        "bytes_down": test.bytes_down.load(Ordering::Relaxed),
        "outcome": if ok { "complete" } else { "incomplete" },
        "ended_because": reason,
        "summary": summary,
    }));
}

/// A running flow sampler, owned by its test's control loop: its stop flag,
/// its thread (which returns one `FlowSamples` per sampled flow, holding
/// clones of the flows' sockets) and the sampled flows' ids in the thread's
/// order. Whatever ends the test (stop, a new scenario, disconnect, timeout,
/// protocol error), dropping it stops and joins the thread, which frees the
/// sockets and the samples.
struct RunningSampler {
    stop: Arc<flow::Stop>,
    thread: Option<thread::JoinHandle<Vec<flow::FlowSamples>>>,
    ids: Vec<u32>,
}

impl RunningSampler {
    fn start(list: Vec<Sampled>, interval: Duration) -> std::io::Result<RunningSampler> {
        let ids = list.iter().map(|f| f.id).collect();
        let stop = Arc::new(flow::Stop::default());
        let st = stop.clone();
        let thread = thread::Builder::new()
            .name("sampler".into())
            .spawn(move || flow::sample_loop(&list, interval, &st, Side::Server, None))?;
        Ok(RunningSampler { stop, thread: Some(thread), ids })
    }

    /// Stop and collect each sampled flow's samples by id.
    fn finish(mut self) -> HashMap<u32, flow::FlowSamples> {
        self.stop.stop();
        let v = self.thread.take().map(|h| h.join().unwrap_or_default()).unwrap_or_default();
        std::mem::take(&mut self.ids).into_iter().zip(v).collect()
    }
}

impl Drop for RunningSampler {
    fn drop(&mut self) {
        self.stop.stop();
        if let Some(h) = self.thread.take() {
            let _ = h.join();
        }
    }
}

/// The control loop of one test. Ok((client's summary, complete)) when the client ended it.
fn run_control(s: &mut TcpStream, test: &Arc<TestState>, sh: &Shared, probe_only: bool) -> Result<(String, bool), String> {
    let cfg = &sh.cfg;
    let hard_end = test.hard_end;
    let deadline_hit = || "the test reached its deadline (its announced length, at most --max-duration, plus --idle-timeout): stopped".to_string();
    let mut timeout = if probe_only { hard_end.saturating_duration_since(Instant::now()) } else { cfg.idle_timeout };
    let mut sampler: Option<RunningSampler> = None;
    loop {
        if Instant::now() >= hard_end {
            return Err(deadline_hit());
        }
        // Each message whole within the timeout, and none after the test's hard end.
        let until = (Instant::now() + timeout).min(hard_end);
        let msg: ClientMsg = match conn::recv(&mut conn::Deadline::new(s, until), MAX_CLIENT_FRAME) {
            Ok(m) => m,
            Err(ConnError::Timeout) if Instant::now() >= hard_end => return Err(deadline_hit()),
            Err(ConnError::Timeout) => {
                return Err(format!("client silent for {:.0} s (no complete message): gave up on it", timeout.as_secs_f64()))
            }
            Err(ConnError::Closed) => return Err("client disconnected mid-test".into()),
            Err(e) => {
                let _ = conn::send(s, &ServerMsg::Error { message: e.to_string() });
                return Err(format!("protocol error: {e}"));
            }
        };
        match msg {
            ClientMsg::StartScenario { flows, duration_ms, .. } => {
                if flows.len() as u32 > cfg.max_flows {
                    let _ = conn::send(s, &ServerMsg::Error { message: format!("{} flows exceed the server's limit of {}", flows.len(), cfg.max_flows) });
                    return Err("too many flows".into());
                }
                if duration_ms > cfg.max_duration.as_millis() as u64 {
                    let _ = conn::send(s, &ServerMsg::Error { message: "scenario longer than the server's --max-duration".into() });
                    return Err("scenario too long".into());
                }
                // A new scenario ends the previous one and its sampler.
                drop(sampler.take());
                if let Some(old) = test.scenario.lock().unwrap().take() {
                    stop_scenario(&old, test);
                }
                let expected: HashMap<u32, Direction> = flows.iter().map(|f: &FlowSpec| (f.id, f.direction)).collect();
                let marks: HashMap<u32, u8> = flows.iter().filter(|f| f.dscp > 0).map(|f| (f.id, f.dscp)).collect();
                let udp: HashMap<u32, wire::UdpParams> = flows.iter().filter_map(|f| Some((f.id, f.udp?))).collect();
                if let Some(f) = flows.iter().find(|f| f.udp.is_some_and(|u| u.payload < wire::UDP_HEADER as u32 || u.payload > 65_000 || u.rate_bps == 0)) {
                    let _ = conn::send(s, &ServerMsg::Error { message: format!("flow {}: bad UDP rate or datagram size", f.id) });
                    return Err("bad UDP flow".into());
                }
                if let Some(f) = flows.iter().find(|f| f.segment_bytes > 0 && (f.udp.is_some() || f.direction != Direction::Down || f.segment_bytes > wire::MAX_SEGMENT_BYTES)) {
                    let _ = conn::send(s, &ServerMsg::Error {
                        message: format!("flow {}: a stream segment is a TCP download of 1 to {} bytes", f.id, wire::MAX_SEGMENT_BYTES),
                    });
                    return Err("bad stream segment".into());
                }
                let segments: HashMap<u32, u64> = flows.iter().filter(|f| f.segment_bytes > 0).map(|f| (f.id, f.segment_bytes)).collect();
                if let Some(f) = flows.iter().find(|f| f.dscp > 63) {
                    let _ = conn::send(s, &ServerMsg::Error { message: format!("flow {}: DSCP {} is out of range (0..63)", f.id, f.dscp) });
                    return Err("DSCP out of range".into());
                }
                *test.scenario.lock().unwrap() = Some(Arc::new(Scenario {
                    expected,
                    marks,
                    udp,
                    segments,
                    joined: Mutex::new(HashMap::new()),
                    gate: Gate::default(),
                    stop: AtomicBool::new(false),
                }));
                timeout = cfg.idle_timeout + Duration::from_millis(duration_ms);
                send_or_err(s, &ServerMsg::ScenarioReady)?;
            }
            ClientMsg::Go => {
                let sc = test.scenario.lock().unwrap().clone().ok_or("go without a scenario")?;
                let joined = sc.joined.lock().unwrap();
                if joined.len() != sc.expected.len() {
                    let _ = conn::send(s, &ServerMsg::Error {
                        message: format!("go with {} of {} flows connected", joined.len(), sc.expected.len()),
                    });
                    return Err("go before all flows joined".into());
                }
                if sampler.is_some() {
                    let _ = conn::send(s, &ServerMsg::Error { message: "a second go for the same scenario".into() });
                    return Err("second go".into());
                }
                let mut list = vec![];
                for (id, j) in joined.iter() {
                    list.push(Sampled {
                        id: *id,
                        direction: j.direction,
                        receiving: j.direction == Direction::Up,
                        tcp: j.tcp,
                        sock: j.sock.try_clone().map_err(|e| e.to_string())?,
                        counter: j.counter.clone(),
                    });
                }
                drop(joined);
                sampler = Some(RunningSampler::start(list, test.sample_interval).map_err(|e| format!("cannot start the sampler: {e}"))?);
                sc.gate.open();
            }
            ClientMsg::StopScenario => {
                let sc = test.scenario.lock().unwrap().take().ok_or("stop without a scenario")?;
                let mut samples = sampler.take().map(RunningSampler::finish).unwrap_or_default();
                let outcomes = stop_scenario(&sc, test);
                let mut reports = vec![];
                for (id, dir) in sc.expected.iter() {
                    let smp = samples.remove(id).unwrap_or_default();
                    let o = outcomes.get(id).copied().unwrap_or_default();
                    reports.push(ServerFlowReport {
                        id: *id,
                        direction: *dir,
                        goodput: smp.goodput,
                        bytes: o.bytes,
                        max_gap_ns: o.max_gap_ns,
                        max_gap_at_unix_ns: o.max_gap_at_ns,
                        tcp_info: smp.tcp_info,
                        udp: o.udp,
                    });
                }
                reports.sort_by_key(|r| r.id);
                timeout = cfg.idle_timeout;
                // In bounded chunks: a long many-flow scenario's samples
                // never have to fit one frame.
                for frame in wire::chunk_report(reports, wire::REPORT_CHUNK_SAMPLES) {
                    send_or_err(s, &frame)?;
                }
            }
            ClientMsg::EndTest { summary, complete } => {
                let _ = conn::send(s, &ServerMsg::Bye);
                return Ok((summary, complete));
            }
            other => {
                let _ = conn::send(s, &ServerMsg::Error { message: format!("unexpected {} on a control connection", msg_name(&other)) });
                return Err(format!("unexpected {}", msg_name(&other)));
            }
        }
    }
}

fn send_or_err(s: &mut TcpStream, m: &ServerMsg) -> Result<(), String> {
    conn::send(s, m).map_err(|e| format!("cannot reach the client: {e}"))
}

/// Stop every flow of a scenario and collect what the receiving ones measured.
fn stop_scenario(sc: &Scenario, test: &TestState) -> HashMap<u32, RecvOutcome> {
    sc.stop.store(true, Ordering::SeqCst);
    sc.gate.open();
    let joined: Vec<(u32, Joined)> = sc.joined.lock().unwrap().drain().collect();
    for (_, j) in &joined {
        flow::kill(&j.sock);
    }
    let mut out = HashMap::new();
    for (id, j) in joined {
        if let Ok(o) = j.done.recv_timeout(Duration::from_secs(5)) {
            if j.direction == Direction::Up {
                test.bytes_up.fetch_add(o.bytes, Ordering::Relaxed);
            }
            out.insert(id, o);
        }
    }
    out
}

fn flow_conn(mut s: TcpStream, peer: SocketAddr, token: u64, id: u32, dir: Direction, sh: &Shared) {
    let test = match find_test(sh, token, peer) {
        Ok(t) => t,
        Err(e) => {
            let _ = conn::send(&mut s, &ServerMsg::Error { message: e.clone() });
            return log(sh, "rejected", json!({"client": peer.to_string(), "reason": format!("flow: {e}")}));
        }
    };
    let Some(sc) = test.scenario.lock().unwrap().clone() else {
        let _ = conn::send(&mut s, &ServerMsg::Error { message: "no scenario is starting".into() });
        return;
    };
    if sc.expected.get(&id) != Some(&dir) || sc.joined.lock().unwrap().contains_key(&id) {
        let _ = conn::send(&mut s, &ServerMsg::Error { message: format!("flow {id} was not announced or already joined") });
        return;
    }
    let _ = s.set_nodelay(false);
    if let Some(d) = sc.marks.get(&id) {
        if let Err(e) = sys::set_dscp(&s, *d) {
            let _ = conn::send(&mut s, &ServerMsg::Error { message: format!("server: cannot mark flow {id} with DSCP {d}: {e}") });
            return;
        }
    }
    if let Err(e) = sys::set_cc(&s, &test.cc) {
        let _ = conn::send(&mut s, &ServerMsg::Error { message: format!("server: {e}") });
        return;
    }
    // (Larger than --max-socket-buffer was refused with the test.)
    if test.socket_buffer > 0 {
        let _ = sys::set_int(&s, libc::SOL_SOCKET, libc::SO_SNDBUF, test.socket_buffer as i32);
        let _ = sys::set_int(&s, libc::SOL_SOCKET, libc::SO_RCVBUF, test.socket_buffer as i32);
    }
    // A vanished client must not pin this thread forever.
    conn::set_timeout(&s, Some(sh.cfg.idle_timeout));
    let _ = s.set_write_timeout(Some(sh.cfg.idle_timeout));
    let (tx, rx) = mpsc::channel();
    let counter = Arc::new(AtomicU64::new(0));
    let clone = match s.try_clone() {
        Ok(c) => c,
        Err(_) => return,
    };
    // A UDP flow: a UDP socket of its own on the address the client reached us at.
    let udp = match sc.udp.get(&id) {
        Some(p) => {
            let sock = s.local_addr().and_then(|a| crate::udpflow::bind_near(a, true));
            let sock = match sock {
                Ok(u) => u,
                Err(e) => {
                    let _ = conn::send(&mut s, &ServerMsg::Error { message: format!("server: cannot open a UDP socket for flow {id}: {e}") });
                    return;
                }
            };
            if let Some(d) = sc.marks.get(&id) {
                let _ = sys::set_dscp(&sock, *d);
            }
            Some((sock, *p))
        }
        None => None,
    };
    sc.joined.lock().unwrap().insert(id, Joined { direction: dir, tcp: udp.is_none(), sock: clone, counter: counter.clone(), done: rx });
    let accepted = match &udp {
        Some((u, _)) => ServerMsg::UdpFlowAccepted { port: u.local_addr().map(|a| a.port()).unwrap_or(0) },
        None => ServerMsg::FlowAccepted,
    };
    if conn::send(&mut s, &accepted).is_err() {
        return;
    }
    // Bulk data yields to the probe, control and handshake threads.
    bloatlab_host::sched::make_current_thread_bulk();
    if let Some((u, p)) = udp {
        let _keep = s; // the TCP connection controls the flow for its life
        let stats = match dir {
            Direction::Up => crate::udpflow::receive(&u, id, &counter, &sc.stop, crate::udpflow::Receiving::Upload).stats(None, p.rate_bps as f64, p.payload),
            Direction::Down => {
                let limit = sh.cfg.idle_timeout + Duration::from_secs(30);
                let sent = crate::udpflow::serve_download(&u, id, p, &sc.gate, &sc.stop, limit);
                test.bytes_down.fetch_add(sent * p.payload as u64, Ordering::Relaxed);
                bloatlab_results::UdpStats { sent, target_bps: p.rate_bps as f64, payload_bytes: p.payload, ..Default::default() }
            }
        };
        let _ = tx.send(RecvOutcome { bytes: counter.load(Ordering::Relaxed), udp: Some(stats), ..Default::default() });
        return;
    }
    match dir {
        Direction::Up => {
            let o = flow::receive(s, &counter, &sc.stop, test.rx_copy);
            let _ = tx.send(o);
        }
        Direction::Down => {
            if sc.gate.wait(&sc.stop, sh.cfg.idle_timeout + Duration::from_secs(30)) {
                let sent = match sc.segments.get(&id) {
                    Some(&n) => flow::send_segment(s, n, &counter, &sc.stop),
                    None => flow::send(s, &sc.stop),
                };
                test.bytes_down.fetch_add(sent, Ordering::Relaxed);
            }
            let _ = tx.send(RecvOutcome::default());
        }
    }
}

/// The test's one request/response connection: echo fixed-size messages
/// until the test ends (its control thread shuts this socket down) or its
/// deadline passes.
fn rr_conn(mut s: TcpStream, peer: SocketAddr, token: u64, sh: &Shared) {
    let test = match find_test(sh, token, peer) {
        Ok(t) => t,
        Err(e) => {
            let _ = conn::send(&mut s, &ServerMsg::Error { message: e.clone() });
            return log(sh, "rejected", json!({"client": peer.to_string(), "reason": format!("request/response: {e}")}));
        }
    };
    {
        let mut slot = test.rr.lock().unwrap();
        if slot.is_some() || test.ended.load(Ordering::SeqCst) {
            let _ = conn::send(&mut s, &ServerMsg::Error { message: "this test already has its request/response connection".into() });
            return;
        }
        match s.try_clone() {
            Ok(c) => *slot = Some(c),
            Err(_) => return,
        }
    }
    let _ = s.set_nodelay(true);
    let _ = sys::set_cc(&s, &test.cc);
    if conn::send(&mut s, &ServerMsg::RrAccepted).is_err() {
        return;
    }
    let mut b = [0u8; wire::RR_SIZE];
    while !test.ended.load(Ordering::Relaxed) {
        if conn::Deadline::new(&s, test.hard_end).read_exact(&mut b).is_err() {
            return;
        }
        if wire::decode_rr(&b).is_err() || s.write_all(&b).is_err() {
            return;
        }
    }
}
