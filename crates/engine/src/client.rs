//! `bloatlab test`: the client side of a latency-under-load test.
use crate::conn::{self, ConnError};
use crate::flow::{self, Gate, RecvOutcome, Sampled};
use crate::probe::{Exchange, ProbeStream, RrProbe, RrRecord};
use crate::summarize::{self, RawHousehold, RawPhase, RawSegment};
use crate::sys;
use bloatlab_host::clock;
use bloatlab_results::{Direction, HostInfo, Side, SocketInfo, TestResult};
use bloatlab_wire::{self as wire, ClientMsg, FlowSpec, Handshake, HandshakeStatus, ServerMsg, MAX_SERVER_FRAME};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

pub use bloatlab_model::{Family, Scenario, TestConfig};

/// What the live display shows (the model's, so a lab can read it back).
pub use bloatlab_model::config::Live;

pub struct Outcome {
    /// Present once anything was measured.
    pub result: Option<TestResult>,
    /// One-line reason when the test failed or was interrupted.
    pub error: Option<String>,
    pub interrupted: bool,
}

/// Connect and handshake; clear messages for every way this goes wrong.
fn connect(addr: SocketAddr, cfg: &TestConfig, cc: &str) -> Result<TcpStream, String> {
    dial(addr, cfg, cc, For::NewTest).map_err(|e| match e {
        Dial::Busy(m) | Dial::Failed(m) => m,
    })
}

/// Whether `addr` is a bloatlab server that would take `cfg`'s test: the
/// handshake (and the secret, when given) as a test begins it, then the
/// connection closed. A busy server is one (its tests free it). Err says
/// what answered instead.
pub fn check_server(addr: SocketAddr, cfg: &TestConfig) -> Result<(), String> {
    match dial(addr, cfg, &cfg.cc, For::NewTest) {
        Ok(_) | Err(Dial::Busy(_)) => Ok(()),
        Err(Dial::Failed(m)) => Err(m),
    }
}

/// Why a connection was not made: the server said busy (a limit that frees
/// itself: connections in their handshake, connections, tests) or anything else.
enum Dial {
    Busy(String),
    Failed(String),
}

impl From<String> for Dial {
    fn from(m: String) -> Dial {
        Dial::Failed(m)
    }
}

/// How long a flow of an accepted test keeps retrying a server that says busy.
const BUSY_RETRY_FOR: Duration = Duration::from_secs(10);

/// What a connection is for: a new test (the peer may not be a bloatlab
/// server) or a flow of a test the server has accepted (it is one, so
/// silence or a wordless close means load, not a wrong peer).
#[derive(Clone, Copy, PartialEq)]
enum For {
    NewTest,
    Flow,
}

impl For {
    /// How long to wait for the server's handshake answer: 5 s for a new
    /// test; 20 s for a flow (200 tests starting at once kept new
    /// connections waiting over 5 s on a 2-core host).
    fn hello_wait(self) -> Duration {
        match self {
            For::NewTest => Duration::from_secs(5),
            For::Flow => Duration::from_secs(20),
        }
    }
}

fn dial(addr: SocketAddr, cfg: &TestConfig, cc: &str, purpose: For) -> Result<TcpStream, Dial> {
    let hello_wait = purpose.hello_wait();
    let sock = socket2::Socket::new(socket2::Domain::for_address(addr), socket2::Type::STREAM, Some(socket2::Protocol::TCP))
        .map_err(|e| format!("cannot create a socket: {e}"))?;
    sys::set_cc(&sock, cc)?;
    if cfg.socket_buffer > 0 {
        let _ = sock.set_send_buffer_size(cfg.socket_buffer as usize);
        let _ = sock.set_recv_buffer_size(cfg.socket_buffer as usize);
    }
    sock.connect_timeout(&addr.into(), cfg.connect_timeout).map_err(|e| match e.kind() {
        std::io::ErrorKind::ConnectionRefused => {
            format!("cannot connect to {addr}: connection refused (is `bloatlab server` running there?)")
        }
        std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => {
            format!("cannot connect to {addr}: no answer within {:.0} s", cfg.connect_timeout.as_secs_f64())
        }
        _ => format!("cannot connect to {addr}: {e}"),
    })?;
    let mut s: TcpStream = sock.into();
    s.set_nodelay(true).ok();
    conn::set_timeout(&s, Some(hello_wait));
    conn::write_handshake(&mut s, Handshake::ours()).map_err(|e| format!("{addr}: {e}"))?;
    let h = conn::read_handshake(&mut s).map_err(|e| match e {
        ConnError::Wire(wire::WireError::BadMagic(b)) => {
            Dial::Failed(format!("{addr} is not a bloatlab server (it answered {:?})", String::from_utf8_lossy(&b)))
        }
        ConnError::Timeout if purpose == For::NewTest => {
            Dial::Failed(format!("{addr} did not answer the bloatlab handshake within {} s: not a bloatlab server?", hello_wait.as_secs()))
        }
        ConnError::Timeout => {
            Dial::Failed(format!("{addr} did not answer a flow's bloatlab handshake within {} s: the server is overloaded", hello_wait.as_secs()))
        }
        // A server refusing more connections than it can explain (a flood of
        // them) closes the rest without a word: for a flow of an accepted
        // test that is a busy server, retried like one.
        ConnError::Closed if purpose == For::Flow => {
            Dial::Busy(format!("{addr} closed a flow's connection during the handshake without a reason (an overloaded server refuses that way)"))
        }
        ConnError::Closed => Dial::Failed(format!("{addr} closed the connection during the handshake: not a bloatlab server, or it refused us")),
        e => Dial::Failed(format!("{addr}: {e}")),
    })?;
    if h.version != wire::PROTOCOL_VERSION || h.status == HandshakeStatus::VersionMismatch as u8 {
        return Err(Dial::Failed(format!(
            "protocol version mismatch: this client speaks version {}, the server at {addr} speaks version {}; use the same bloatlab version on both ends",
            wire::PROTOCOL_VERSION,
            h.version
        )));
    }
    let mut nonce = [0u8; wire::NONCE_LEN];
    std::io::Read::read_exact(&mut s, &mut nonce).map_err(|e| format!("{addr}: the handshake ended early: {e}"))?;
    if h.status == HandshakeStatus::Busy as u8 {
        return Err(Dial::Busy(match conn::recv::<ServerMsg>(&mut s, MAX_SERVER_FRAME) {
            Ok(ServerMsg::Refused { reason }) => format!("the server at {addr} refused the connection: {reason}"),
            _ => format!("the server at {addr} is busy and refused the connection"),
        }));
    }
    if let Some(k) = &cfg.secret {
        let answer = wire::auth::answer_challenge(k, &nonce);
        conn::send(&mut s, &ClientMsg::Auth { answer }).map_err(|e| format!("{addr}: {e}"))?;
    }
    Ok(s)
}

fn expect(s: &mut TcpStream, what: &str) -> Result<ServerMsg, String> {
    match conn::recv::<ServerMsg>(s, MAX_SERVER_FRAME) {
        Ok(ServerMsg::Error { message }) => Err(format!("server error while waiting for {what}: {message}")),
        Ok(ServerMsg::Refused { reason }) => Err(format!("the server refused the test: {reason}")),
        Ok(m) => Ok(m),
        Err(ConnError::Closed) => Err(format!("the server closed the connection while we waited for {what}")),
        Err(ConnError::Timeout) => Err(format!("the server did not send {what} in time")),
        Err(e) => Err(format!("while waiting for {what}: {e}")),
    }
}

pub(crate) struct Session {
    pub(crate) ctl: TcpStream,
    pub(crate) token: u64,
    pub(crate) server: HostInfo,
    /// The longest test the server allows.
    pub(crate) max_duration: Duration,
    cc: String,
    /// The server requires the shared secret (and signs its probe replies).
    pub(crate) auth: bool,
    /// Its RPM endpoints, if it serves them.
    rpm: Option<bloatlab_model::RpmOffer>,
}

pub(crate) fn open_session(addr: SocketAddr, cfg: &TestConfig, max_flows: u32, planned_ms: u64) -> Result<Session, String> {
    let mut ctl = connect(addr, cfg, &cfg.cc)?;
    let msg = ClientMsg::NewTest {
        client: sys::host_info(),
        cc: cfg.cc.clone(),
        planned_duration_ms: planned_ms,
        max_flows,
        sample_interval_ms: cfg.sample_interval.as_millis() as u32,
        scenarios: cfg.scenarios.iter().map(|s| s.name()).collect(),
        socket_buffer: cfg.socket_buffer,
        rx_copy: cfg.rx_copy,
    };
    conn::send(&mut ctl, &msg).map_err(|e| format!("{addr}: {e}"))?;
    match expect(&mut ctl, "the test acceptance")? {
        ServerMsg::TestAccepted { token, server, cc, auth, rpm, limits } => {
            Ok(Session { ctl, token, server, max_duration: Duration::from_millis(limits.max_duration_ms), cc, auth, rpm: rpm.map(|b| *b) })
        }
        other => Err(format!("unexpected answer from the server: {other:?}")),
    }
}

fn join(addr: SocketAddr, cfg: &TestConfig, cc: &str, msg: ClientMsg) -> Result<TcpStream, String> {
    join_flow(addr, cfg, cc, msg).map(|(s, _)| s)
}

/// Join a flow; a UDP flow's answer carries the server's UDP port for it.
/// The test is already accepted, so a busy server (many clients starting at
/// once fill its handshake slots) is retried with growing, jittered pauses
/// for up to `BUSY_RETRY_FOR` before the refusal is reported.
fn join_flow(addr: SocketAddr, cfg: &TestConfig, cc: &str, msg: ClientMsg) -> Result<(TcpStream, Option<u16>), String> {
    let t0 = std::time::Instant::now();
    let mut pause = Duration::from_millis(20);
    let mut s = loop {
        match dial(addr, cfg, cc, For::Flow) {
            Ok(s) => break s,
            Err(Dial::Busy(_)) if t0.elapsed() + pause < BUSY_RETRY_FOR => {
                // Jitter from the clock's low bits spreads clients that were refused together.
                let jitter = Duration::from_nanos(clock::now_ns() % (pause.as_nanos() as u64 + 1));
                thread::sleep(pause + jitter);
                pause = (pause * 2).min(Duration::from_millis(500));
            }
            Err(Dial::Busy(m)) => return Err(format!("{m} (still busy after {:.0} s of retries)", t0.elapsed().as_secs_f64())),
            Err(Dial::Failed(m)) => return Err(m),
        }
    };
    conn::send(&mut s, &msg).map_err(|e| e.to_string())?;
    match expect(&mut s, "the flow acceptance")? {
        ServerMsg::FlowAccepted | ServerMsg::RrAccepted => Ok((s, None)),
        ServerMsg::UdpFlowAccepted { port } => Ok((s, Some(port))),
        other => Err(format!("unexpected answer from the server: {other:?}")),
    }
}

/// The IETF RPM stages a test plans after its scenarios (`--rpm`). A crate
/// above the engine runs them (`bloatlab_rpm::TestStages`: the engine
/// cannot depend on the crate that builds on it), inside the test's session,
/// against the endpoints the server offered at the address the test
/// reached. `live` gets one update per interval, as phase `first_phase`
/// onwards of `phases`.
pub trait RpmStages {
    fn run(
        &self,
        cfg: &TestConfig,
        offer: &bloatlab_model::RpmOffer,
        addr: SocketAddr,
        first_phase: usize,
        phases: usize,
        live: &mut dyn FnMut(&Live),
    ) -> Result<bloatlab_results::RpmResult, String>;
}

/// Run a whole test. `interrupt` is polled; `live` is called a few times a
/// second. The phases, in order: connect (the control session, the
/// witness's), start the probes, the idle baseline, the scenarios (a list
/// or a ramp), collect what the probes saw, the RPM stages (`--rpm`, run by
/// `rpm`), and close with the result.
pub fn run(cfg: &TestConfig, interrupt: &AtomicBool, live: &mut dyn FnMut(&Live), rpm: Option<&dyn RpmStages>) -> Outcome {
    let fail = |e: String| Outcome { result: None, error: Some(e), interrupted: false };
    if !cfg.rpm.is_empty() && rpm.is_none() {
        return fail("--rpm: this front end cannot run RPM stages".into());
    }
    let mut conns = match Connections::open(cfg) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let start_unix_ns = clock::now_ns();
    let probes = match Probes::start(cfg, &conns) {
        Ok(p) => p,
        Err(e) => return fail(e),
    };
    let mut m = Measured::default();
    let measured = cfg.max_scenarios() + usize::from(!cfg.idle.is_zero());
    let nphases = measured + cfg.rpm.len();
    measure_idle(cfg, interrupt, live, &probes, nphases, &mut m);
    measure_scenarios(cfg, &mut conns, interrupt, live, &probes, nphases, &mut m);
    if interrupt.load(Ordering::Relaxed) {
        m.interrupted = true;
    }
    let seen = probes.finish(cfg, m.interrupted);
    if let (Some(stages), Some(offer)) = (rpm.filter(|_| !cfg.rpm.is_empty()), conns.sess.rpm.clone()) {
        if m.error.is_none() && !m.interrupted {
            match stages.run(cfg, &offer, conns.addr, measured, nphases, live) {
                Ok(r) => m.rpm = Some(r),
                Err(e) => m.error = Some(format!("--rpm: {e}")),
            }
        }
    }
    conns.close(cfg, start_unix_ns, m, seen)
}

/// The test's connections: the control session with the server, and the
/// witness's probe-only session.
struct Connections {
    addr: SocketAddr,
    sess: Session,
    witness: Option<(SocketAddr, Session)>,
}

impl Connections {
    /// Check the configuration, reach the server and the witness, and
    /// have the test accepted (before any load: `--rpm` needs the server's
    /// RPM endpoints).
    fn open(cfg: &TestConfig) -> Result<Connections, String> {
        cfg.validate()?;
        // The senders' source block, faulted in now at this thread's priority:
        // a bulk (SCHED_IDLE) thread zeroing its 2 MiB huge page on a saturated
        // host would wait behind every other thread and hold up the whole test.
        flow::source();
        if !cfg.cc.is_empty() {
            if let Ok(t) = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None) {
                sys::set_cc(&t, &cfg.cc).map_err(|e| format!("client: {e}"))?;
            }
        }
        let addr = conn::resolve(&cfg.server, cfg.port, cfg.family)?;
        // Generous: flow setup and the final probe drain take time beyond the phases.
        let planned_ms = (cfg.idle + (cfg.phase_length().cap + cfg.pause_cap() + Duration::from_secs(2)) * cfg.max_scenarios() as u32
            + RPM_STAGE_MAX * cfg.rpm.len() as u32
            + Duration::from_secs(10))
        .as_millis() as u64;
        let mut sess = open_session(addr, cfg, cfg.max_flows(), planned_ms)?;
        if !cfg.rpm.is_empty() && sess.rpm.is_none() {
            let _ = conn::send(&mut sess.ctl, &ClientMsg::EndTest { summary: "cancelled: no RPM endpoints".into(), complete: false });
            return Err(format!(
                "--rpm: the server at {addr} serves no RPM endpoints (it runs with --no-rpm, or is an older bloatlab); drop --rpm, or run `bloatlab rpm URL` against an RPM server"
            ));
        }
        let witness = match &cfg.witness {
            Some(w) => {
                let waddr = conn::resolve(w, cfg.port, cfg.family).map_err(|e| format!("witness: {e}"))?;
                Some((waddr, open_session(waddr, cfg, 0, planned_ms).map_err(|e| format!("witness: {e}"))?))
            }
            None => None,
        };
        Ok(Connections { addr, sess, witness })
    }

    /// Build the result from what was measured and seen, and end the test
    /// on the server (and the witness).
    fn close(mut self, cfg: &TestConfig, start_unix_ns: u64, m: Measured, seen: Seen) -> Outcome {
        let complete = m.error.is_none() && !m.interrupted;
        let reason = if m.interrupted {
            // Ctrl-C is the user's; SIGTERM may be a service manager's stop
            let by = match bloatlab_host::signals::pending() {
                0 => "a stop request",
                sig => bloatlab_host::signals::name(sig),
            };
            Some(format!("interrupted by {by}; results cover what was measured until then"))
        } else {
            m.error.clone()
        };
        let meta_in = summarize::MetaIn {
            cfg,
            addr: self.addr,
            start_unix_ns,
            server: self.sess.server.clone(),
            cc: self.sess.cc.clone(),
            socket: m.socket_info,
            witness: self.witness.as_ref().map(|(a, _)| a.to_string()),
            probe_timestamps: seen.probe_timestamps,
            pings: seen.pings,
            server_rpm: self.sess.rpm.clone(),
        };
        let ex = summarize::Exchanges { server: &seen.exchanges, witness: &seen.witness_exchanges, classes: &seen.class_exchanges, rr: &seen.rr };
        let mut result = summarize::build_result(&meta_in, &m.phases, &ex, complete, reason.clone());
        result.ramp = m.ramp.map(RampState::results).unwrap_or_default();
        result.rpm = m.rpm;
        summarize::finish_headline(&mut result);
        let line = summarize::one_line(&result);
        let _ = conn::send(&mut self.sess.ctl, &ClientMsg::EndTest { summary: line.clone(), complete });
        conn::set_timeout(&self.sess.ctl, Some(Duration::from_secs(2)));
        let _ = conn::recv::<ServerMsg>(&mut self.sess.ctl, MAX_SERVER_FRAME);
        if let Some((_, mut ws)) = self.witness {
            let _ = conn::send(&mut ws.ctl, &ClientMsg::EndTest { summary: format!("witness for {line}"), complete });
        }
        Outcome { result: Some(result), error: if m.interrupted { reason } else { m.error }, interrupted: m.interrupted }
    }
}

/// What the phases measured so far.
#[derive(Default)]
struct Measured {
    phases: Vec<RawPhase>,
    error: Option<String>,
    interrupted: bool,
    socket_info: SocketInfo,
    ramp: Option<RampState>,
    rpm: Option<bloatlab_results::RpmResult>,
}

/// The longest an RPM stage may take (its configuration and connections
/// included), for the session's planned duration.
const RPM_STAGE_MAX: Duration = Duration::from_secs(25);

/// Every latency probe of the test, running from before the idle baseline
/// to after the last scenario.
struct Probes {
    server: ProbeStream,
    witness: Option<ProbeStream>,
    /// (DSCP, its marked stream) per `--dscp` class.
    class_streams: Vec<(u8, ProbeStream)>,
    pingers: Vec<crate::ping::Pinger>,
    rr: RrProbe,
}

/// What the probes saw, collected at the end.
struct Seen {
    exchanges: Vec<Exchange>,
    witness_exchanges: Vec<Exchange>,
    /// Per DSCP class (`--dscp`): its marked probes.
    class_exchanges: Vec<(u8, Vec<Exchange>)>,
    rr: Vec<RrRecord>,
    pings: Vec<(bloatlab_results::PingInfo, Vec<crate::ping::PingSample>)>,
    probe_timestamps: String,
}

impl Probes {
    /// Interleave the probe streams so they never share an instant (and so
    /// never queue behind each other in either host's stack): server probes
    /// at 0, witness probes at 1/4, the request/response probe at 1/2 and
    /// pings at 3/4 of the probe interval.
    fn start(cfg: &TestConfig, c: &Connections) -> Result<Probes, String> {
        let (addr, sess) = (c.addr, &c.sess);
        let iv = cfg.probe_interval.as_nanos() as u64;
        let first_due = clock::now_ns() + 1_000_000;
        let server = ProbeStream::start(addr, sess.token, 0, first_due, cfg.probe_interval, 1, cfg.probe_size, cfg.secret.clone(), sess.auth, 0)
            .map_err(|e| format!("cannot start UDP probes to {addr}: {e}"))?;
        let witness = match &c.witness {
            Some((waddr, ws)) => Some(
                ProbeStream::start(*waddr, ws.token, 1, first_due + iv / 4, cfg.probe_interval, 1, cfg.probe_size, cfg.secret.clone(), ws.auth, 0)
                    .map_err(|e| format!("cannot start UDP probes to the witness {waddr}: {e}"))?,
            ),
            None => None,
        };
        // One stream per DSCP class, marked, between the others' instants.
        let classes = bloatlab_model::Dscp::distinct(&cfg.dscp);
        let mut class_streams = vec![];
        for (k, d) in classes.iter().enumerate() {
            let offset = iv * (2 * k as u64 + 1) / (2 * classes.len() as u64) + iv / 32;
            let s = ProbeStream::start(addr, sess.token, 2 + k as u32, first_due + offset, cfg.probe_interval, 1, cfg.probe_size, cfg.secret.clone(), sess.auth, d.0)
                .map_err(|e| format!("cannot start UDP probes marked {d} to {addr}: {e}"))?;
            class_streams.push((d.0, s));
        }
        let mut pingers = vec![];
        for t in &cfg.pings {
            pingers.push(crate::ping::Pinger::start(t, cfg.ping_interval, first_due + iv * 3 / 4).map_err(|e| format!("--ping: {e}"))?);
        }
        let rr = join(addr, cfg, &sess.cc, ClientMsg::JoinRr { token: sess.token })
            .and_then(|s| RrProbe::start(s, first_due + iv / 2, cfg.probe_interval).map_err(|e| e.to_string()))
            .map_err(|e| format!("cannot open the request/response connection: {e}"))?;
        Ok(Probes { server, witness, class_streams, pingers, rr })
    }

    /// Stop the probes and collect their exchanges, after waiting for late
    /// replies (a bloated queue can hold seconds).
    fn finish(self, cfg: &TestConfig, interrupted: bool) -> Seen {
        let drain = Duration::from_secs(if interrupted { 1 } else { 3 });
        let (ks, us) = (self.server.kernel_stamped.clone(), self.server.user_stamped.clone());
        let (rks, rus) = (self.rr.kernel_stamped.clone(), self.rr.user_stamped.clone());
        let rr = self.rr.finish();
        let exchanges = self.server.finish(drain);
        let (ks, us) = (ks.load(Ordering::Relaxed), us.load(Ordering::Relaxed));
        let (rks, rus) = (rks.load(Ordering::Relaxed), rus.load(Ordering::Relaxed));
        let probe_timestamps = format!(
            "send: clock read just before send(); receive: kernel SO_TIMESTAMPNS stamps on {ks} of {} client replies (else a clock read \
             when the reply was collected, up to one probe interval late), and on the server where its kernel provides them; \
             the server's hold time (t3 - t2) is subtracted from every RTT; request/response: kernel stamps on {rks} of {} replies \
             (else a clock read as each reply arrived)",
            ks + us,
            rks + rus
        );
        let witness_exchanges = self.witness.map(|w| w.finish(Duration::from_millis(200))).unwrap_or_default();
        // The class streams ran as long as the server's: their late replies had the same drain.
        let class_exchanges = self.class_streams.into_iter().map(|(d, s)| (d, s.finish(Duration::from_millis(300)))).collect();
        // The pingers kept sending through the probes' drain, so the last
        // phase's pings have had that long to come back.
        let interval_ms = cfg.ping_interval.as_secs_f64() * 1e3;
        let pings = self
            .pingers
            .into_iter()
            .map(|p| {
                let info = bloatlab_results::PingInfo { target: p.target.label(), address: p.addr.to_string(), method: p.method.to_string(), interval_ms };
                (info, p.finish(Duration::from_millis(300)))
            })
            .collect();
        Seen { exchanges, witness_exchanges, class_exchanges, rr, pings, probe_timestamps }
    }
}

/// The idle baseline: probes only, no load.
fn measure_idle(cfg: &TestConfig, interrupt: &AtomicBool, live: &mut dyn FnMut(&Live), probes: &Probes, nphases: usize, m: &mut Measured) {
    if cfg.idle.is_zero() {
        return;
    }
    let start = clock::now_ns();
    let end = start + cfg.idle.as_nanos() as u64;
    while clock::now_ns() < end {
        if interrupt.load(Ordering::Relaxed) {
            m.interrupted = true;
            break;
        }
        live(&Live {
            phase: "idle".into(),
            phase_index: 0,
            phases: nphases,
            elapsed_s: (clock::now_ns() - start) as f64 / 1e9,
            phase_len_s: cfg.idle.as_secs_f64(),
            rtt_ms: probes.server.last_rtt_ns() as f64 / 1e6,
            ..Default::default()
        });
        thread::sleep(Duration::from_millis(50));
    }
    m.phases.push(RawPhase::idle(start, clock::now_ns()));
}

/// The scenarios: the given list, or a ramp choosing each next one from
/// the goodput of the last; a pause between them lets queues drain.
fn measure_scenarios(
    cfg: &TestConfig,
    c: &mut Connections,
    interrupt: &AtomicBool,
    live: &mut dyn FnMut(&Live),
    probes: &Probes,
    nphases: usize,
    m: &mut Measured,
) {
    m.ramp = cfg.ramp.map(RampState::new);
    for i in 0.. {
        if m.interrupted {
            break;
        }
        let next = match m.ramp.as_mut() {
            Some(r) => r.next(),
            None => cfg.scenarios.get(i).copied(),
        };
        let Some(sc) = next else { break };
        if i > 0 {
            pause(cfg, &probes.server, m, interrupt);
        }
        match run_scenario(c.addr, cfg, &mut c.sess, i, &sc, interrupt, &probes.server, nphases, live, &mut m.socket_info) {
            Ok((p, intr)) => {
                if let (Some(r), false) = (m.ramp.as_mut(), intr) {
                    r.record(&sc, &p);
                }
                m.phases.push(p);
                if intr {
                    m.interrupted = true;
                    break;
                }
            }
            Err(e) => {
                m.error = Some(format!("scenario {}: {e}", sc.name()));
                break;
            }
        }
    }
}

/// The pause before a scenario: `cfg.pause`, and with phases that run until
/// latency stopped rising (`--until-settled`, every profile) on until the
/// queue the last one left has drained back to the idle round trip
/// (`model::DRAIN_RULE`), at most its cap.
fn pause(cfg: &TestConfig, probes: &ProbeStream, m: &Measured, interrupt: &AtomicBool) {
    let start = clock::now_ns();
    let least = start + cfg.pause.as_nanos() as u64;
    let rule = bloatlab_model::DRAIN_RULE;
    let most = start + cfg.pause.max(rule.cap).as_nanos() as u64;
    let records = probes.records();
    // the idle baseline's median round trip, when there was one
    let idle = m.phases.first().filter(|p| p.name == "idle" && cfg.phase_length().adaptive()).and_then(|p| {
        let ex = records.lock().unwrap();
        let rtts: Vec<f64> = ex.iter().filter(|e| e.t1 >= p.start_unix_ns && e.t1 < p.end_unix_ns).filter_map(|e| e.rtt_ns()).map(|r| r as f64 / 1e6).collect();
        bloatlab_metrics::percentile(&rtts, 50.0)
    });
    loop {
        let now = clock::now_ns();
        if interrupt.load(Ordering::Relaxed) || now >= most {
            return;
        }
        if now >= least {
            let Some(idle) = idle else { return };
            let ex = records.lock().unwrap();
            let from = ex.partition_point(|e| e.t1 < start.saturating_sub(rule.cap.as_nanos() as u64));
            let samples: Vec<(u64, u64)> = ex[from..].iter().filter_map(|e| e.rtt_ns().map(|r| (e.t4, r))).collect();
            if bloatlab_metrics::settle::drained(&samples, now, idle, &rule) {
                return;
            }
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// A ramp in progress (`--scenarios auto`): per direction, the steps run
/// so far, and the directions finished.
struct RampState {
    cfg: bloatlab_model::Ramp,
    /// Directions to ramp, in order (true = upload).
    dirs: Vec<bool>,
    cur: usize,
    steps: Vec<bloatlab_results::RampStep>,
    done: Vec<bloatlab_results::RampResult>,
}

/// Why a ramp stopped at `flows`: doubling them to `doubled` gained less
/// than `growth` (as a fraction), or lost goodput.
fn saturated_why(flows: u32, doubled: u32, gain: f64, growth: f64) -> String {
    let change = if gain < 0.0 {
        format!("lost {:.1}% of the goodput", -gain * 100.0)
    } else {
        format!("added only {:.1}% goodput (less than {:.0}%)", gain * 100.0, growth * 100.0)
    };
    format!("saturated at {flows} flow(s): doubling them to {doubled} {change}")
}

impl RampState {
    fn new(cfg: bloatlab_model::Ramp) -> RampState {
        let dirs = [(cfg.up, true), (cfg.down, false)].iter().filter(|(on, _)| *on).map(|(_, up)| *up).collect();
        RampState { cfg, dirs, cur: 0, steps: vec![], done: vec![] }
    }

    /// The next scenario, or None when every direction is done.
    fn next(&mut self) -> Option<bloatlab_model::Scenario> {
        use bloatlab_metrics::ramp::{ramp_next, RampNext};
        loop {
            let up = *self.dirs.get(self.cur)?;
            let judged: Vec<(u32, f64)> = self.steps.iter().map(|s| (s.flows, s.goodput_bps)).collect();
            match ramp_next(&judged, self.cfg.growth, self.cfg.max_flows) {
                RampNext::Flows(n) => return Some(if up { bloatlab_model::Scenario::new(n, 0) } else { bloatlab_model::Scenario::new(0, n) }),
                RampNext::Saturated { flows, gain } => {
                    let why = saturated_why(flows, self.steps.last().map(|s| s.flows).unwrap_or(0), gain, self.cfg.growth);
                    self.finish(Some(flows), why);
                }
                RampNext::AtLimit { flows } => {
                    self.finish(None, format!("reached the limit of {flows} flows with goodput still growing by {:.0}% or more per doubling", self.cfg.growth * 100.0));
                }
            }
        }
    }

    fn record(&mut self, sc: &bloatlab_model::Scenario, p: &RawPhase) {
        let up = self.dirs[self.cur];
        self.steps.push(bloatlab_results::RampStep {
            scenario: sc.name(),
            flows: if up { sc.uploads } else { sc.downloads },
            goodput_bps: summarize::step_goodput_bps(p, up),
        });
    }

    fn finish(&mut self, saturated_at: Option<u32>, stopped: String) {
        let up = self.dirs[self.cur];
        let steps = std::mem::take(&mut self.steps);
        self.done.push(bloatlab_results::RampResult {
            direction: if up { Direction::Up } else { Direction::Down },
            capacity_bps: steps.iter().map(|s| s.goodput_bps).fold(0.0, f64::max),
            steps,
            saturated_at,
            growth: self.cfg.growth,
            stopped,
        });
        self.cur += 1;
    }

    /// Every direction that ran a step; one cut short (an error, Ctrl-C)
    /// says so.
    fn results(mut self) -> Vec<bloatlab_results::RampResult> {
        if !self.steps.is_empty() && self.cur < self.dirs.len() {
            self.finish(None, "cut short before goodput stopped growing (see the run's incomplete_reason)".into());
        }
        self.done
    }
}

#[allow(clippy::too_many_arguments)]
fn run_scenario(
    addr: SocketAddr,
    cfg: &TestConfig,
    sess: &mut Session,
    index: usize,
    sc: &Scenario,
    interrupt: &AtomicBool,
    probes: &ProbeStream,
    nphases: usize,
    live: &mut dyn FnMut(&Live),
    socket_info: &mut SocketInfo,
) -> Result<(RawPhase, bool), String> {
    let specs = announce_scenario(cfg, sess, index, sc)?;
    let socks = connect_flows(addr, cfg, sess, &specs)?;
    if let Some((s, _)) = socks.first() {
        *socket_info = SocketInfo { mss: sys::mss(s), sndbuf: sys::sndbuf(s), rcvbuf: sys::rcvbuf(s), buffers_set: cfg.socket_buffer > 0, rx_copy: cfg.rx_copy };
    }
    let household = cfg.household.filter(|_| cfg.is_household_phase(index));
    let flows = Flows::spawn(addr, cfg, &specs, socks, household)?;
    conn::send(&mut sess.ctl, &ClientMsg::Go).map_err(|e| format!("the server connection failed: {e}"))?;
    let start = clock::now_ns();
    flows.start_ns.store(start, Ordering::SeqCst);
    flows.gate.open();
    // The household's video call: each frame in parts, answered part by part.
    let call = match household {
        Some(h) => Some(
            ProbeStream::start(addr, sess.token, call_stream(cfg), start + cfg.probe_interval.as_nanos() as u64 / 8, Duration::from_secs(1) / h.call_fps, h.call_parts(), h.call_part_bytes() as usize, cfg.secret.clone(), sess.auth, 0)
                .map_err(|e| format!("cannot start the household test's call to {addr}: {e}"))?,
        ),
        None => None,
    };
    let segments = flows.segments.clone();
    let len = cfg.phase_length_of(index);
    let name = if household.is_some() { bloatlab_model::HOUSEHOLD_PHASE.to_string() } else { sc.name() };
    let records = probes.records();
    // Past the phase's minimum, it ends once the probes' round trip stopped rising.
    let settled = |now: u64| len.adaptive() && now.saturating_sub(start) >= len.min.as_nanos() as u64 && settled_since(&records.lock().unwrap(), start, now);
    let (samples, outcomes, end, interrupted) = flows.run(len, cfg.sample_interval, start, &settled, interrupt, &mut |now: u64, tot: &flow::Totals, rates: (f64, f64)| {
        let elapsed = Duration::from_nanos(now - start);
        live(&Live {
            phase: name.clone(),
            phase_index: index + usize::from(!cfg.idle.is_zero()),
            phases: nphases,
            elapsed_s: elapsed.as_secs_f64(),
            // the minimum, then (latency still rising) the cap
            phase_len_s: if elapsed < len.min { len.min } else { len.cap }.as_secs_f64(),
            up_bps: rates.0,
            down_bps: rates.1,
            rtt_ms: probes.last_rtt_ns() as f64 / 1e6,
            up_bytes: tot.up_bytes,
            down_bytes: tot.down_bytes,
        })
    });
    // the call's last frames back (a bloated queue can hold seconds)
    let frames = call.map(|c| c.finish(Duration::from_secs(3)));
    let report = server_report(sess)?;
    let raw = RawPhase {
        name,
        uploads: sc.uploads,
        downloads: sc.downloads,
        start_unix_ns: start,
        end_unix_ns: end,
        // the phase's flows are the load (the household's: the bulk update);
        // the stream's segments are recorded as segments, as the page's are
        flows: specs.iter().copied().zip(samples).zip(outcomes).filter(|((s, _), _)| s.segment_bytes == 0).map(|((s, smp), o)| (s, smp, o)).collect(),
        server_flows: report.into_iter().filter(|f| specs.iter().any(|s| s.id == f.id && s.segment_bytes == 0)).collect(),
        household: household.map(|plan| RawHousehold {
            plan,
            frames: summarize::call_frames(&frames.unwrap_or_default(), plan.call_parts() as usize),
            segments: std::mem::take(&mut *segments.lock().unwrap()),
        }),
    };
    Ok((raw, interrupted))
}

/// Tell the server the scenario's flows (direction, DSCP class, UDP rate)
/// and wait until it is ready for them.
fn announce_scenario(cfg: &TestConfig, sess: &mut Session, index: usize, sc: &Scenario) -> Result<Vec<FlowSpec>, String> {
    let mut specs = vec![];
    let mark = |i: u32| bloatlab_model::Dscp::for_flow(&cfg.dscp, i as usize).0;
    let udp = cfg.udp().map(|u| wire::UdpParams { rate_bps: u.rate_bps, payload: u.payload });
    for i in 0..sc.uploads {
        specs.push(FlowSpec { id: i, direction: Direction::Up, dscp: mark(i), udp, segment_bytes: 0 });
    }
    for i in 0..sc.downloads {
        specs.push(FlowSpec { id: sc.uploads + i, direction: Direction::Down, dscp: mark(i), udp, segment_bytes: 0 });
    }
    // the household's stream: a download connection per segment due in its phase
    if let Some(h) = cfg.household.filter(|_| cfg.is_household_phase(index)) {
        let first = sc.uploads + sc.downloads;
        for k in 0..h.segments_in(cfg.phase_length_of(index).cap) {
            specs.push(FlowSpec { id: first + k, direction: Direction::Down, dscp: 0, udp: None, segment_bytes: h.stream_segment_bytes });
        }
    }
    conn::set_timeout(&sess.ctl, Some(Duration::from_secs(30)));
    conn::send(&mut sess.ctl, &ClientMsg::StartScenario {
        index: index as u32,
        name: sc.name(),
        flows: specs.clone(),
        duration_ms: cfg.phase_length_of(index).cap.as_millis() as u64,
    })
    .map_err(|e| format!("the server connection failed: {e}"))?;
    match expect(&mut sess.ctl, "scenario readiness")? {
        ServerMsg::ScenarioReady => Ok(specs),
        other => Err(format!("unexpected answer from the server: {other:?}")),
    }
}

/// Connect every flow of the scenario, in parallel (sequential setup would
/// take many round trips); a UDP flow's answer carries its server port.
fn connect_flows(addr: SocketAddr, cfg: &TestConfig, sess: &Session, specs: &[FlowSpec]) -> Result<Vec<(TcpStream, Option<u16>)>, String> {
    let handles: Vec<_> = specs
        .iter()
        .map(|f| {
            let (cfg, cc, token, f) = (cfg.clone(), sess.cc.clone(), sess.token, *f);
            thread::spawn(move || join_flow(addr, &cfg, &cc, ClientMsg::JoinFlow { token, flow_id: f.id, direction: f.direction }))
        })
        .collect();
    let mut socks = vec![];
    for h in handles {
        socks.push(h.join().map_err(|_| "flow setup thread panicked".to_string())??);
    }
    Ok(socks)
}

/// A scenario's load flows: one thread each, held at `gate` until the
/// server has been told to go, and what the sampler reads of them.
struct Flows {
    sampled: Vec<Sampled>,
    threads: Vec<thread::JoinHandle<RecvOutcome>>,
    stop: Arc<AtomicBool>,
    gate: Arc<Gate>,
    /// When the phase began (set before the gate opens): the stream's schedule.
    start_ns: Arc<AtomicU64>,
    /// The household's stream segments, as they end.
    segments: Arc<Mutex<Vec<RawSegment>>>,
}

impl Flows {
    /// Mark each flow's sockets, open a UDP flow's datagram socket, and
    /// start each flow's thread (bulk priority: data yields to probes).
    fn spawn(addr: SocketAddr, cfg: &TestConfig, specs: &[FlowSpec], socks: Vec<(TcpStream, Option<u16>)>, household: Option<bloatlab_model::HouseholdPlan>) -> Result<Flows, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let gate = Arc::new(Gate::default());
        let start_ns = Arc::new(AtomicU64::new(0));
        let segments = Arc::new(Mutex::new(vec![]));
        let mut sampled = vec![];
        let mut threads = vec![];
        // the segments' turns: the first one's is given
        let (first_turn, mut turn) = std::sync::mpsc::channel::<()>();
        let _ = first_turn.send(());
        let mut k = 0;
        for (spec, (s, udp_port)) in specs.iter().zip(socks) {
            // A UDP flow: its datagrams go between our socket and the server's port for it.
            let usock = match (spec.udp, udp_port) {
                (Some(_), Some(port)) => {
                    let u = crate::udpflow::bind_near(addr, false).map_err(|e| format!("UDP flow {}: {e}", spec.id))?;
                    u.connect(SocketAddr::new(addr.ip(), port)).map_err(|e| format!("UDP flow {}: {e}", spec.id))?;
                    if spec.dscp > 0 {
                        sys::set_dscp(&u, spec.dscp).map_err(|e| format!("cannot mark flow {} with DSCP {}: {e}", spec.id, spec.dscp))?;
                    }
                    Some(u)
                }
                (Some(_), None) => return Err(format!("the server did not open a UDP port for flow {} (an older server?)", spec.id)),
                _ => None,
            };
            if spec.dscp > 0 {
                sys::set_dscp(&s, spec.dscp).map_err(|e| format!("cannot mark flow {} with DSCP {}: {e}", spec.id, spec.dscp))?;
            }
            let _ = s.set_nodelay(false);
            let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
            let _ = s.set_write_timeout(Some(Duration::from_millis(200)));
            let counter = Arc::new(AtomicU64::new(0));
            sampled.push(Sampled {
                id: spec.id,
                direction: spec.direction,
                receiving: spec.direction == Direction::Down,
                tcp: usock.is_none(),
                sock: s.try_clone().map_err(|e| e.to_string())?,
                counter: counter.clone(),
            });
            let (st, g, copy) = (stop.clone(), gate.clone(), cfg.rx_copy);
            let dir = spec.direction;
            let (id, params) = (spec.id, spec.udp);
            if let (Some(plan), true) = (household, spec.segment_bytes > 0) {
                let (next, after) = std::sync::mpsc::channel::<()>();
                let mine = std::mem::replace(&mut turn, after);
                let (start, out) = (start_ns.clone(), segments.clone());
                let n = k;
                k += 1;
                threads.push(thread::spawn(move || {
                    bloatlab_host::sched::make_current_thread_bulk();
                    if !g.wait(&st, Duration::from_secs(60)) {
                        return RecvOutcome::default();
                    }
                    let bytes = fetch_segment(s, n, plan, mine, next, &start, &counter, &st, &out);
                    RecvOutcome { bytes, ..Default::default() }
                }));
                continue;
            }
            if let (Some(u), Some(p)) = (usock, params) {
                threads.push(thread::spawn(move || {
                    bloatlab_host::sched::make_current_thread_bulk();
                    let _keep = s; // the flow's TCP connection stays open for its life
                    let stats = match dir {
                        Direction::Up => {
                            if !g.wait(&st, Duration::from_secs(60)) {
                                return RecvOutcome::default();
                            }
                            // The server's receipts: what arrived, for live lines.
                            let receipts = u.try_clone().ok().map(|r| {
                                let (st, c) = (st.clone(), counter.clone());
                                thread::spawn(move || crate::udpflow::read_receipts(&r, id, &c, &st))
                            });
                            let sent = crate::udpflow::send_paced(&u, id, p, &st);
                            if let Some(h) = receipts {
                                let _ = h.join();
                            }
                            bloatlab_results::UdpStats { sent, target_bps: p.rate_bps as f64, payload_bytes: p.payload, ..Default::default() }
                        }
                        Direction::Down => crate::udpflow::receive(&u, id, &counter, &st, crate::udpflow::Receiving::Download).stats(None, p.rate_bps as f64, p.payload),
                    };
                    RecvOutcome { bytes: counter.load(Ordering::Relaxed), udp: Some(stats), ..Default::default() }
                }));
                continue;
            }
            threads.push(thread::spawn(move || {
                // Bulk data yields to the probe and control threads.
                bloatlab_host::sched::make_current_thread_bulk();
                if !g.wait(&st, Duration::from_secs(60)) {
                    return RecvOutcome::default();
                }
                match dir {
                    Direction::Up => {
                        flow::send(s, &st);
                        RecvOutcome::default()
                    }
                    Direction::Down => flow::receive(s, &counter, &st, copy),
                }
            }));
        }
        Ok(Flows { sampled, threads, stop, gate, start_ns, segments })
    }

    /// Run the flows for the scenario's duration from `start`, sampling
    /// them; `show` gets each sampler pass (progress and interval lines
    /// follow the sampler: the bytes and the instant they were read
    /// together) with the rates over the last second (less at first).
    /// Returns the samples, each flow's outcome, the end time and whether
    /// the user interrupted.
    #[allow(clippy::type_complexity)]
    fn run(
        self,
        len: bloatlab_model::PhaseLength,
        sample_interval: Duration,
        start: u64,
        settled: &dyn Fn(u64) -> bool,
        interrupt: &AtomicBool,
        show: &mut dyn FnMut(u64, &flow::Totals, (f64, f64)),
    ) -> (Vec<flow::FlowSamples>, Vec<RecvOutcome>, u64, bool) {
        let sstop = Arc::new(flow::Stop::default());
        let kill_socks: Vec<TcpStream> = self.sampled.iter().filter_map(|s| s.sock.try_clone().ok()).collect();
        let (ss, iv) = (sstop.clone(), sample_interval);
        let latest = Arc::new(flow::Latest::default());
        let lt = latest.clone();
        let sampled = self.sampled;
        let sampler = thread::spawn(move || flow::sample_loop(&sampled, iv, &ss, Side::Client, Some(&lt)));
        let end = start + len.cap.as_nanos() as u64;
        let mut interrupted = false;
        // The live rates slide over the last second (a quarter second at
        // first): shorter windows read ACKs that a loaded reverse path
        // delivers in bunches (14 Mbit/s over 250 ms on a 10 Mbit/s link
        // with 2u2d, 9.9 over a second).
        let mut window: std::collections::VecDeque<(u64, u64, u64)> = std::collections::VecDeque::from([(start, 0, 0)]);
        let mut rates = (0.0, 0.0);
        let mut seen = 0;
        let mut pass = |tot: flow::Totals| {
            let (now, up, down) = (tot.t_ns.max(start), tot.up_bytes, tot.down_bytes);
            while window.len() > 1 && now - window[1].0 >= LIVE_WINDOW_NS {
                window.pop_front();
            }
            let first = window[0];
            if now - first.0 >= 250_000_000 {
                let dt = (now - first.0) as f64 / 1e9;
                rates = ((up.saturating_sub(first.1)) as f64 * 8.0 / dt, (down.saturating_sub(first.2)) as f64 * 8.0 / dt);
            }
            window.push_back((now, up, down));
            show(now, &tot, rates);
        };
        while clock::now_ns() < end {
            if interrupt.load(Ordering::Relaxed) {
                interrupted = true;
                break;
            }
            let left = Duration::from_nanos(end.saturating_sub(clock::now_ns()));
            let tot = latest.wait_newer(seen, left.min(Duration::from_millis(100)));
            if tot.seq == seen {
                continue;
            }
            seen = tot.seq;
            pass(tot);
            if settled(tot.t_ns) {
                break;
            }
        }
        let end = clock::now_ns();
        // Final sample at the end of the phase, then stop the flows at once.
        sstop.stop();
        let samples = sampler.join().unwrap_or_default();
        self.stop.store(true, Ordering::SeqCst);
        for s in &kill_socks {
            flow::kill(s);
        }
        // The final pass closes the phase's last interval.
        let tot = latest.wait_newer(seen, Duration::ZERO);
        if tot.seq > seen {
            pass(tot);
        }
        let outcomes: Vec<RecvOutcome> = self.threads.into_iter().map(|h| h.join().unwrap_or_default()).collect();
        (samples, outcomes, end, interrupted)
    }
}

/// Whether the round trip of the probes sent since `start` stopped rising
/// by `now` (`metrics::settle`, on the same samples the summary judges).
fn settled_since(ex: &[Exchange], start: u64, now: u64) -> bool {
    let from = ex.partition_point(|e| e.t1 < start);
    let samples: Vec<(u64, u64)> = ex[from..].iter().filter_map(|e| e.rtt_ns().map(|r| ((e.t1 + r).saturating_sub(start), r))).collect();
    bloatlab_metrics::settle::settle(&samples, now.saturating_sub(start), &bloatlab_model::SETTLE_RULE).settled
}

/// The household test's call frames: their own probe stream, the one after
/// the probes' (0) and the DSCP classes' (2...): the server answers up to 8
/// per test (`TestConfig::validate` leaves one for the call).
fn call_stream(cfg: &TestConfig) -> u32 {
    2 + bloatlab_model::Dscp::distinct(&cfg.dscp).len() as u32
}

/// The household test's stream: segment `k` (one connection each, connected
/// ahead) is requested when due, `k` segment play times into the phase, or
/// when segment `k - 1` arrived (or failed), whichever is later, as a video
/// player fetches. Its bytes count toward the phase's download as the
/// page's segments do.
#[allow(clippy::too_many_arguments)]
fn fetch_segment(
    mut s: TcpStream,
    k: u32,
    plan: bloatlab_model::HouseholdPlan,
    turn: std::sync::mpsc::Receiver<()>,
    next: std::sync::mpsc::Sender<()>,
    start_ns: &AtomicU64,
    counter: &AtomicU64,
    stop: &AtomicBool,
    out: &Mutex<Vec<RawSegment>>,
) -> u64 {
    use std::io::{Read, Write};
    // the previous segment's end (a closed channel: it ended without a word)
    loop {
        match turn.recv_timeout(Duration::from_millis(50)) {
            Ok(()) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) if stop.load(Ordering::Relaxed) => return 0,
            Err(_) => {}
        }
    }
    let due = start_ns.load(Ordering::SeqCst) + k as u64 * plan.stream_segment.as_nanos() as u64;
    crate::probe::sleep_until(due, stop);
    if stop.load(Ordering::Relaxed) {
        return 0;
    }
    let mut g = RawSegment { requested: clock::now_ns(), ..Default::default() };
    let mut buf = vec![0u8; 64 << 10];
    if s.write_all(&[1]).is_ok() {
        while g.bytes < plan.stream_segment_bytes && !stop.load(Ordering::Relaxed) {
            match s.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    g.first_byte.get_or_insert_with(clock::now_ns);
                    g.bytes += n as u64;
                    counter.fetch_add(n as u64, Ordering::Relaxed);
                }
                Err(e) if matches!(e.kind(), std::io::ErrorKind::Interrupted | std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(_) => break,
            }
        }
    }
    if g.bytes >= plan.stream_segment_bytes {
        g.done = Some(clock::now_ns());
    }
    out.lock().unwrap().push(g);
    let _ = next.send(());
    g.bytes
}

/// The live rates' window (progress lines), ns.
const LIVE_WINDOW_NS: u64 = 1_000_000_000;

/// Stop the scenario on the server and read its report (in chunks; parts
/// of one flow are appended by id).
fn server_report(sess: &mut Session) -> Result<Vec<wire::ServerFlowReport>, String> {
    conn::send(&mut sess.ctl, &ClientMsg::StopScenario).map_err(|e| format!("the server connection failed: {e}"))?;
    // The stop message may queue behind a bloated buffer: allow for it.
    conn::set_timeout(&sess.ctl, Some(Duration::from_secs(60)));
    let mut report = vec![];
    loop {
        match expect(&mut sess.ctl, "the scenario report")? {
            ServerMsg::ScenarioReportChunk { flows } => flows.into_iter().for_each(|f| wire::merge_report_part(&mut report, f)),
            ServerMsg::ScenarioReport { flows } => {
                flows.into_iter().for_each(|f| wire::merge_report_part(&mut report, f));
                return Ok(report);
            }
            other => return Err(format!("unexpected answer from the server: {other:?}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::saturated_why;

    #[test]
    fn a_ramp_says_what_the_doubling_did() {
        assert_eq!(saturated_why(2, 4, -0.092, 0.05), "saturated at 2 flow(s): doubling them to 4 lost 9.2% of the goodput");
        assert_eq!(saturated_why(1, 2, 0.02, 0.05), "saturated at 1 flow(s): doubling them to 2 added only 2.0% goodput (less than 5%)");
    }
}
