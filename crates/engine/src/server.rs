//! `bloatlab server`: one TCP port for control and bulk data, UDP on the same
//! port number for probes. Blocking threads: a thread per connection and one
//! per UDP socket (see docs/engine.md for why).
use crate::conn::{self, ConnError};
use crate::flow::{self, Gate, RecvOutcome, Sampled};
use crate::sys;
use bloatlab_host::clock;
use bloatlab_results::{Direction, Side};
use bloatlab_wire::{
    self as wire, ClientMsg, FlowSpec, Handshake, HandshakeStatus, Limits, ServerFlowReport, ServerMsg,
    MAX_CLIENT_FRAME, PROTOCOL_VERSION,
};
use socket2::{Domain, Protocol, Socket, Type};
use std::collections::{HashMap, HashSet};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, RwLock};
use std::thread;
use std::time::{Duration, Instant};

/// The handshake and the first message must arrive, whole, within this.
const HELLO_DEADLINE: Duration = Duration::from_secs(5);
/// A control or request/response write may block this long (a peer that
/// stops reading); flows use the server's --idle-timeout.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

pub use bloatlab_model::ServerConfig;

struct Shared {
    cfg: ServerConfig,
    tests: Mutex<HashMap<u64, Arc<TestState>>>,
    live: RwLock<HashSet<u64>>,
    active: AtomicU32,
    served: AtomicU64,
}

struct TestState {
    sample_interval: Duration,
    socket_buffer: u32,
    cc: String,
    scenario: Mutex<Option<Arc<Scenario>>>,
    /// Clones of the RR sockets, shut down when the test ends.
    rr: Mutex<Vec<TcpStream>>,
    ended: AtomicBool,
}

struct Scenario {
    expected: HashMap<u32, Direction>,
    /// DSCP of each flow (absent = unmarked).
    marks: HashMap<u32, u8>,
    /// UDP flows' rates and datagram sizes.
    udp: HashMap<u32, wire::UdpParams>,
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
                Err(e) => return Err(format!("cannot listen on {b}: {e}")),
            }
        }
        cfg.binds = binds;
        let shared = Arc::new(Shared {
            cfg,
            tests: Mutex::new(HashMap::new()),
            live: RwLock::new(HashSet::new()),
            active: AtomicU32::new(0),
            served: AtomicU64::new(0),
        });
        let mut addrs = vec![];
        for (tcp, udp) in listeners {
            addrs.push(tcp.local_addr().map_err(|e| e.to_string())?);
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
        self.shared.active.load(Ordering::Relaxed)
    }
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

fn make_socket(addr: SocketAddr, ty: Type) -> std::io::Result<Socket> {
    let proto = if ty == Type::STREAM { Protocol::TCP } else { Protocol::UDP };
    let s = Socket::new(Domain::for_address(addr), ty, Some(proto))?;
    if addr.is_ipv6() {
        // Dual stack on [::] unless the user bound a specific v6 address.
        let unspecified = addr.ip().is_unspecified();
        s.set_only_v6(!unspecified)?;
    }
    if ty == Type::STREAM {
        s.set_reuse_address(true)?;
    }
    s.bind(&addr.into())?;
    Ok(s)
}

fn log(sh: &Shared, msg: &str) {
    if !sh.cfg.quiet {
        eprintln!("{} {msg}", bloatlab_model::units::rfc3339(clock::now_ns()));
    }
}

fn udp_loop(sock: UdpSocket, sh: Arc<Shared>) {
    // Larger than any valid probe, so an oversized datagram is seen as such and ignored.
    let mut buf = [0u8; 2048];
    // Receive times from the kernel where it stamps datagrams: a probe's
    // server time then excludes this thread's wake-up latency.
    sys::enable_rx_timestamps(&sock);
    loop {
        let (n, from, kts) = match sys::recv_stamped(&sock, &mut buf) {
            Ok((n, Some(from), kts)) => (n, from, kts),
            _ => continue,
        };
        let t_rx = kts.map(clock::from_realtime).unwrap_or_else(clock::now_ns);
        let pkt = &mut buf[..n];
        let answer = wire::answer_probe_in_place(pkt, t_rx, clock::now_ns(), |tok| {
            sh.live.read().map(|l| l.contains(&tok)).unwrap_or(false)
        });
        if let Some(len) = answer {
            let _ = sock.send_to(&pkt[..len], from);
        }
    }
}

fn accept_loop(l: TcpListener, sh: Arc<Shared>) {
    loop {
        match l.accept() {
            Ok((s, peer)) => {
                let sh = sh.clone();
                let _ = thread::Builder::new().name("conn".into()).spawn(move || handle_conn(s, peer, sh));
            }
            Err(_) => thread::sleep(Duration::from_millis(10)),
        }
    }
}

fn handle_conn(mut s: TcpStream, peer: SocketAddr, sh: Arc<Shared>) {
    let _ = s.set_nodelay(true);
    // A peer that stops reading cannot pin this thread on a write.
    let _ = s.set_write_timeout(Some(WRITE_TIMEOUT));
    // The handshake and the first message, whole, within HELLO_DEADLINE.
    let until = Instant::now() + HELLO_DEADLINE;
    let hs = match conn::read_handshake(&mut conn::Deadline::new(&s, until)) {
        Ok(h) => h,
        Err(ConnError::Closed) => return, // port scan / health check: nothing to log
        Err(ConnError::Timeout) => {
            log(&sh, &format!("rejected {peer}: no complete handshake within {} s", HELLO_DEADLINE.as_secs()));
            return;
        }
        Err(e) => {
            log(&sh, &format!("rejected {peer}: {e}"));
            return;
        }
    };
    let ok = hs.version == PROTOCOL_VERSION;
    let reply = Handshake {
        version: PROTOCOL_VERSION,
        status: if ok { HandshakeStatus::Ok as u8 } else { HandshakeStatus::VersionMismatch as u8 },
    };
    if conn::write_handshake(&mut s, reply).is_err() {
        return;
    }
    if !ok {
        log(&sh, &format!(
            "rejected {peer}: protocol version mismatch: client speaks version {}, this server speaks version {PROTOCOL_VERSION}",
            hs.version
        ));
        return;
    }
    let first: ClientMsg = match conn::recv(&mut conn::Deadline::new(&s, until), MAX_CLIENT_FRAME) {
        Ok(m) => m,
        Err(ConnError::Timeout) => {
            let msg = format!("the handshake and first message must arrive within {} s", HELLO_DEADLINE.as_secs());
            let _ = conn::send(&mut s, &ServerMsg::Error { message: msg.clone() });
            log(&sh, &format!("rejected {peer}: {msg}"));
            return;
        }
        Err(e) => {
            let _ = conn::send(&mut s, &ServerMsg::Error { message: format!("bad first message: {e}") });
            log(&sh, &format!("rejected {peer}: bad first message: {e}"));
            return;
        }
    };
    match first {
        ClientMsg::NewTest { .. } => control_session(s, peer, first, &sh),
        ClientMsg::JoinFlow { token, flow_id, direction } => flow_conn(s, peer, token, flow_id, direction, &sh),
        ClientMsg::JoinRr { token } => rr_conn(s, token, &sh),
        other => {
            let _ = conn::send(&mut s, &ServerMsg::Error {
                message: format!("expected new_test, join_flow or join_rr first, got {}", msg_name(&other)),
            });
        }
    }
}

fn msg_name(m: &ClientMsg) -> &'static str {
    match m {
        ClientMsg::NewTest { .. } => "new_test",
        ClientMsg::JoinFlow { .. } => "join_flow",
        ClientMsg::JoinRr { .. } => "join_rr",
        ClientMsg::StartScenario { .. } => "start_scenario",
        ClientMsg::Go => "go",
        ClientMsg::StopScenario => "stop_scenario",
        ClientMsg::EndTest { .. } => "end_test",
    }
}

fn find_test(sh: &Shared, token: u64) -> Option<Arc<TestState>> {
    sh.tests.lock().unwrap().get(&token).cloned()
}

fn refuse(s: &mut TcpStream, sh: &Shared, peer: SocketAddr, reason: String) {
    log(sh, &format!("refused test from {peer}: {reason}"));
    let _ = conn::send(s, &ServerMsg::Refused { reason });
}

fn control_session(mut s: TcpStream, peer: SocketAddr, first: ClientMsg, sh: &Shared) {
    let ClientMsg::NewTest { client, cc, planned_duration_ms, max_flows, sample_interval_ms, scenarios, socket_buffer } = first
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
    if let Err(e) = sys::set_cc(&s, &cc) {
        return refuse(&mut s, sh, peer, format!("server: {e}"));
    }
    let prev = sh.active.fetch_add(1, Ordering::SeqCst);
    if prev >= cfg.max_tests {
        sh.active.fetch_sub(1, Ordering::SeqCst);
        return refuse(&mut s, sh, peer, format!(
            "the server is busy: {prev} tests are running and it allows {} at once (server flag --max-tests); try again later",
            cfg.max_tests
        ));
    }
    let token: u64 = loop {
        let t = rand::random::<u64>();
        if t != 0 && !sh.tests.lock().unwrap().contains_key(&t) {
            break t;
        }
    };
    let test = Arc::new(TestState {
        sample_interval: Duration::from_millis(sample_interval_ms.clamp(10, 1000) as u64),
        socket_buffer,
        cc: if cc.is_empty() { sys::get_cc(&s) } else { cc.clone() },
        scenario: Mutex::new(None),
        rr: Mutex::new(vec![]),
        ended: AtomicBool::new(false),
    });
    sh.tests.lock().unwrap().insert(token, test.clone());
    sh.live.write().unwrap().insert(token);
    let started = std::time::Instant::now();
    // A probe-only session (a witness) stays silent on its control connection
    // for the whole test: it may, up to what it announced.
    let probe_only_timeout = (max_flows == 0).then(|| Duration::from_millis(planned_duration_ms) + cfg.idle_timeout);
    let accepted = ServerMsg::TestAccepted {
        token,
        server: sys::host_info(),
        limits: Limits { max_duration_ms: cfg.max_duration.as_millis() as u64, max_flows: cfg.max_flows, max_tests: cfg.max_tests },
        cc: test.cc.clone(),
    };
    let outcome = if conn::send(&mut s, &accepted).is_ok() {
        run_control(&mut s, &test, sh, started, probe_only_timeout)
    } else {
        Err("client went away before the test started".to_string())
    };
    // Cleanup whatever happened.
    test.ended.store(true, Ordering::SeqCst);
    sh.live.write().unwrap().remove(&token);
    sh.tests.lock().unwrap().remove(&token);
    if let Some(sc) = test.scenario.lock().unwrap().take() {
        stop_scenario(&sc);
    }
    for r in test.rr.lock().unwrap().drain(..) {
        flow::kill(&r);
    }
    sh.active.fetch_sub(1, Ordering::SeqCst);
    sh.served.fetch_add(1, Ordering::Relaxed);
    let secs = started.elapsed().as_secs_f64();
    let who = if client.hostname.is_empty() { String::new() } else { format!(" ({})", client.hostname) };
    match outcome {
        Ok(summary) => log(sh, &format!(
            "test {peer}{who} [{}] cc={} {secs:.1}s: {summary}",
            scenarios.join(","),
            test.cc
        )),
        Err(e) => log(sh, &format!("test {peer}{who} [{}] cc={} ended after {secs:.1}s: {e}", scenarios.join(","), test.cc)),
    }
}

/// A running flow sampler, owned by its test's control loop: its stop flag,
/// its thread (which returns one `FlowSamples` per sampled flow, holding
/// clones of the flows' sockets) and the sampled flows' ids in the thread's
/// order. Whatever ends the test (stop, a new scenario, disconnect, timeout,
/// protocol error), dropping it stops and joins the thread, which frees the
/// sockets and the samples.
struct RunningSampler {
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<Vec<flow::FlowSamples>>>,
    ids: Vec<u32>,
}

impl RunningSampler {
    fn start(list: Vec<Sampled>, interval: Duration) -> std::io::Result<RunningSampler> {
        let ids = list.iter().map(|f| f.id).collect();
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let thread = thread::Builder::new()
            .name("sampler".into())
            .spawn(move || flow::sample_loop(&list, interval, &st, Side::Server))?;
        Ok(RunningSampler { stop, thread: Some(thread), ids })
    }

    /// Stop and collect each sampled flow's samples by id.
    fn finish(mut self) -> HashMap<u32, flow::FlowSamples> {
        self.stop.store(true, Ordering::SeqCst);
        let v = self.thread.take().map(|h| h.join().unwrap_or_default()).unwrap_or_default();
        std::mem::take(&mut self.ids).into_iter().zip(v).collect()
    }
}

impl Drop for RunningSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.thread.take() {
            let _ = h.join();
        }
    }
}

/// The control loop of one test. Ok(summary line) when the client ended it.
fn run_control(
    s: &mut TcpStream,
    test: &Arc<TestState>,
    sh: &Shared,
    started: std::time::Instant,
    probe_only_timeout: Option<Duration>,
) -> Result<String, String> {
    let cfg = &sh.cfg;
    let mut timeout = probe_only_timeout.unwrap_or(cfg.idle_timeout);
    let mut sampler: Option<RunningSampler> = None;
    let hard_end = started + cfg.max_duration + Duration::from_secs(30);
    loop {
        if Instant::now() >= hard_end {
            return Err("test exceeded the server's --max-duration; stopped".into());
        }
        // Each message whole within the timeout, and none after the test's hard end.
        let until = (Instant::now() + timeout).min(hard_end);
        let msg: ClientMsg = match conn::recv(&mut conn::Deadline::new(s, until), MAX_CLIENT_FRAME) {
            Ok(m) => m,
            Err(ConnError::Timeout) if Instant::now() >= hard_end => {
                return Err("test exceeded the server's --max-duration; stopped".into())
            }
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
                    stop_scenario(&old);
                }
                let expected: HashMap<u32, Direction> = flows.iter().map(|f: &FlowSpec| (f.id, f.direction)).collect();
                let marks: HashMap<u32, u8> = flows.iter().filter(|f| f.dscp > 0).map(|f| (f.id, f.dscp)).collect();
                let udp: HashMap<u32, wire::UdpParams> = flows.iter().filter_map(|f| Some((f.id, f.udp?))).collect();
                if let Some(f) = flows.iter().find(|f| f.udp.is_some_and(|u| u.payload < wire::UDP_HEADER as u32 || u.payload > 65_000 || u.rate_bps == 0)) {
                    let _ = conn::send(s, &ServerMsg::Error { message: format!("flow {}: bad UDP rate or datagram size", f.id) });
                    return Err("bad UDP flow".into());
                }
                if let Some(f) = flows.iter().find(|f| f.dscp > 63) {
                    let _ = conn::send(s, &ServerMsg::Error { message: format!("flow {}: DSCP {} is out of range (0..63)", f.id, f.dscp) });
                    return Err("DSCP out of range".into());
                }
                *test.scenario.lock().unwrap() = Some(Arc::new(Scenario {
                    expected,
                    marks,
                    udp,
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
                let samples = sampler.take().map(RunningSampler::finish).unwrap_or_default();
                let outcomes = stop_scenario(&sc);
                let mut reports = vec![];
                for (id, dir) in sc.expected.iter() {
                    let smp = samples.get(id).cloned().unwrap_or_default();
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
                send_or_err(s, &ServerMsg::ScenarioReport { flows: reports })?;
            }
            ClientMsg::EndTest { summary, complete } => {
                let _ = conn::send(s, &ServerMsg::Bye);
                return Ok(if complete { summary } else { format!("{summary} (incomplete)") });
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
fn stop_scenario(sc: &Scenario) -> HashMap<u32, RecvOutcome> {
    sc.stop.store(true, Ordering::SeqCst);
    sc.gate.open();
    let joined: Vec<(u32, Joined)> = sc.joined.lock().unwrap().drain().collect();
    for (_, j) in &joined {
        flow::kill(&j.sock);
    }
    let mut out = HashMap::new();
    for (id, j) in joined {
        if let Ok(o) = j.done.recv_timeout(Duration::from_secs(5)) {
            out.insert(id, o);
        }
    }
    out
}

fn flow_conn(mut s: TcpStream, peer: SocketAddr, token: u64, id: u32, dir: Direction, sh: &Shared) {
    let Some(test) = find_test(sh, token) else {
        let _ = conn::send(&mut s, &ServerMsg::Error { message: "unknown or expired session token".into() });
        log(sh, &format!("rejected flow from {peer}: unknown session token"));
        return;
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
    if let Some((u, p)) = udp {
        let _keep = s; // the TCP connection controls the flow for its life
        let stats = match dir {
            Direction::Up => crate::udpflow::receive(&u, id, &counter, &sc.stop, false).stats(None, p.rate_bps as f64, p.payload),
            Direction::Down => {
                let limit = sh.cfg.idle_timeout + Duration::from_secs(30);
                let sent = crate::udpflow::serve_download(&u, id, p, &sc.gate, &sc.stop, limit);
                bloatlab_results::UdpStats { sent, target_bps: p.rate_bps as f64, payload_bytes: p.payload, ..Default::default() }
            }
        };
        let _ = tx.send(RecvOutcome { bytes: counter.load(Ordering::Relaxed), udp: Some(stats), ..Default::default() });
        return;
    }
    match dir {
        Direction::Up => {
            let o = flow::receive(s, &counter, &sc.stop);
            let _ = tx.send(o);
        }
        Direction::Down => {
            if sc.gate.wait(&sc.stop, sh.cfg.idle_timeout + Duration::from_secs(30)) {
                flow::send(s, &sc.stop);
            }
            let _ = tx.send(RecvOutcome::default());
        }
    }
}

fn rr_conn(mut s: TcpStream, token: u64, sh: &Shared) {
    let Some(test) = find_test(sh, token) else {
        let _ = conn::send(&mut s, &ServerMsg::Error { message: "unknown or expired session token".into() });
        return;
    };
    let _ = s.set_nodelay(true);
    let _ = sys::set_cc(&s, &test.cc);
    if let Ok(c) = s.try_clone() {
        test.rr.lock().unwrap().push(c);
    }
    if conn::send(&mut s, &ServerMsg::RrAccepted).is_err() {
        return;
    }
    conn::set_timeout(&s, None);
    let mut b = [0u8; wire::RR_SIZE];
    use std::io::{Read, Write};
    while !test.ended.load(Ordering::Relaxed) {
        if s.read_exact(&mut b).is_err() {
            return;
        }
        if wire::decode_rr(&b).is_err() || s.write_all(&b).is_err() {
            return;
        }
    }
}
