//! The server's per-connection state machine driven by generated inputs
//! (proptest): each case opens up to four connections to a real in-process
//! server and plays a sequence of operations on them: valid and broken
//! handshakes, valid messages in any order (with the live session token, so
//! joins, scenarios and `go` reach deep states), garbage, oversize lengths,
//! half-closes, probes. After the case every connection is closed and the
//! server must be back to no open connections and no running test, and
//! still serve a proper session. The suite runs a few dozen cases;
//! `bench/fuzz.sh` runs many more (BLOATLAB_FUZZ_CASES).
use bloatlab_engine::server::{Server, ServerConfig};
use bloatlab_results::{Direction, HostInfo};
use bloatlab_wire::{self as wire, ClientMsg, FlowSpec, Handshake, Probe, ProbeKind, ServerMsg};
use proptest::prelude::*;
use proptest::test_runner::Config;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream, UdpSocket};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

fn cases(default: u32) -> Config {
    let n = std::env::var("BLOATLAB_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    Config { cases: n, failure_persistence: None, ..Config::default() }
}

/// One server for all cases (a case must leave it clean for the next).
fn server() -> &'static (Server, SocketAddr) {
    static S: OnceLock<(Server, SocketAddr)> = OnceLock::new();
    S.get_or_init(|| {
        let cfg = ServerConfig {
            binds: vec!["127.0.0.1:0".parse().unwrap()],
            max_duration: Duration::from_secs(20),
            max_flows: 4,
            max_tests: 2,
            idle_timeout: Duration::from_millis(500),
            quiet: true,
            max_conns: 64,
            max_conns_per_source: 32,
            ..Default::default()
        };
        let s = Server::start(cfg).unwrap();
        let a = s.addrs[0];
        (s, a)
    })
}

/// How often each server answer was seen (test_accepted, flow_accepted,
/// rr_accepted, scenario_ready, report, refused, error, other): the
/// generator must reach the deep states, not only the handshake.
static REACHED: std::sync::Mutex<[u64; 8]> = std::sync::Mutex::new([0; 8]);

fn reached_index(m: &ServerMsg) -> usize {
    match m {
        ServerMsg::TestAccepted { .. } => 0,
        ServerMsg::FlowAccepted | ServerMsg::UdpFlowAccepted { .. } => 1,
        ServerMsg::RrAccepted => 2,
        ServerMsg::ScenarioReady => 3,
        ServerMsg::ScenarioReport { .. } | ServerMsg::ScenarioReportChunk { .. } => 4,
        ServerMsg::Refused { .. } => 5,
        ServerMsg::Error { .. } => 6,
        _ => 7,
    }
}

#[derive(Debug, Clone)]
enum Op {
    /// Connect and send a valid handshake.
    Open(usize),
    /// Open connection `i` and send this message on it (a session, a join).
    OpenWith(usize, Msg),
    Connect(usize),
    Hello(usize),
    BadHello(usize, Vec<u8>),
    Msg(usize, Msg),
    Raw(usize, Vec<u8>),
    HugeLength(usize),
    HalfClose(usize),
    Close(usize),
    Probe(u32, u16, bool),
    Drain(usize),
}

/// A message, with the live token filled in when sent.
#[derive(Debug, Clone)]
enum Msg {
    NewTest { planned_ms: u64, max_flows: u32 },
    JoinFlow { id: u32, up: bool, live: bool },
    JoinRr { live: bool },
    Start { flows: Vec<(u32, bool)>, duration_ms: u64 },
    Go,
    Stop,
    End,
    Auth,
}

/// A case: most begin with a session and a scenario announced, and most of
/// those with some of the announced flows joining (so `go`, running flows and
/// reports have something to reach), then any operations.
fn case() -> impl Strategy<Value = Vec<Op>> {
    let flows = proptest::collection::vec((0u32..2, any::<bool>()), 0..3);
    (
        prop::bool::weighted(0.8),
        0u64..20_000,
        0u32..5,
        flows,
        0u64..3000,
        proptest::collection::vec(prop::bool::weighted(0.7), 2),
        proptest::collection::vec(op(), 1..40),
    )
        .prop_map(|(prefix, planned_ms, max_flows, flows, duration_ms, joins, ops)| {
            let mut v = vec![];
            if prefix {
                v.push(Op::OpenWith(0, Msg::NewTest { planned_ms, max_flows }));
                v.push(Op::Msg(0, Msg::Start { flows: flows.clone(), duration_ms }));
                for (k, ((id, up), join)) in flows.iter().zip(joins).enumerate() {
                    if join {
                        v.push(Op::OpenWith(1 + k, Msg::JoinFlow { id: *id, up: *up, live: true }));
                    }
                }
            }
            v.extend(ops);
            v
        })
}

fn op() -> impl Strategy<Value = Op> {
    let c = 0usize..4;
    let msg = prop_oneof![
        (0u64..30_000, 0u32..6).prop_map(|(planned_ms, max_flows)| Msg::NewTest { planned_ms, max_flows }),
        (0u32..5, any::<bool>(), any::<bool>()).prop_map(|(id, up, live)| Msg::JoinFlow { id, up, live }),
        any::<bool>().prop_map(|live| Msg::JoinRr { live }),
        (proptest::collection::vec((0u32..2, any::<bool>()), 0..3), 0u64..3000).prop_map(|(flows, duration_ms)| Msg::Start { flows, duration_ms }),
        Just(Msg::Go),
        Just(Msg::Stop),
        Just(Msg::End),
        Just(Msg::Auth),
    ];
    prop_oneof![
        4 => c.clone().prop_map(Op::Open),
        3 => (0usize..1, (0u64..30_000, 0u32..6).prop_map(|(planned_ms, max_flows)| Msg::NewTest { planned_ms, max_flows }))
            .prop_map(|(i, m)| Op::OpenWith(i, m)),
        4 => (1usize..4, (0u32..2, any::<bool>(), prop::bool::weighted(0.8)).prop_map(|(id, up, live)| Msg::JoinFlow { id, up, live }))
            .prop_map(|(i, m)| Op::OpenWith(i, m)),
        1 => (1usize..4, prop::bool::weighted(0.8).prop_map(|live| Msg::JoinRr { live })).prop_map(|(i, m)| Op::OpenWith(i, m)),
        6 => msg.clone().prop_map(|m| Op::Msg(0, m)),
        1 => c.clone().prop_map(Op::Connect),
        1 => c.clone().prop_map(Op::Hello),
        1 => (c.clone(), proptest::collection::vec(any::<u8>(), 0..20)).prop_map(|(i, b)| Op::BadHello(i, b)),
        3 => (c.clone(), msg).prop_map(|(i, m)| Op::Msg(i, m)),
        1 => (c.clone(), proptest::collection::vec(any::<u8>(), 0..64)).prop_map(|(i, b)| Op::Raw(i, b)),
        1 => c.clone().prop_map(Op::HugeLength),
        1 => c.clone().prop_map(Op::HalfClose),
        1 => c.clone().prop_map(Op::Close),
        1 => (any::<u32>(), 40u16..1600, any::<bool>()).prop_map(|(s, n, live)| Op::Probe(s, n, live)),
        1 => c.prop_map(Op::Drain),
    ]
}

struct Client {
    conns: Vec<Option<TcpStream>>,
    token: u64,
    udp: UdpSocket,
}

impl Client {
    fn conn(&mut self, i: usize) -> Option<&mut TcpStream> {
        self.conns[i].as_mut()
    }
    /// Read whatever arrived without waiting, and learn a session token.
    fn drain(&mut self, i: usize) {
        let Some(s) = self.conns[i].as_mut() else { return };
        let _ = s.set_read_timeout(Some(Duration::from_millis(5)));
        let mut buf = vec![0u8; 1 << 16];
        let mut got = vec![];
        while let Ok(n) = s.read(&mut buf) {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        // Frames after the 28-byte server hello, if any.
        let mut at = if got.len() >= wire::SERVER_HELLO_LEN && got.starts_with(&wire::MAGIC) { wire::SERVER_HELLO_LEN } else { 0 };
        while let Ok(Some((m, used))) = wire::decode_frame::<ServerMsg>(&got[at..], wire::MAX_SERVER_FRAME) {
            REACHED.lock().unwrap()[reached_index(&m)] += 1;
            if let ServerMsg::TestAccepted { token, .. } = m {
                self.token = token;
            }
            at += used;
        }
    }
}

fn send(c: &mut Client, i: usize, m: &Msg) {
    let token = c.token;
    let pick = |live: bool| if live { token } else { token ^ 0x5555 };
    let m = match m {
        Msg::NewTest { planned_ms, max_flows } => ClientMsg::NewTest {
            client: HostInfo::default(),
            cc: String::new(),
            planned_duration_ms: *planned_ms,
            max_flows: *max_flows,
            sample_interval_ms: 10,
            scenarios: vec!["fuzz".into()],
            socket_buffer: 0,
            // Both receive paths (copy and MSG_TRUNC discard).
            rx_copy: *max_flows % 2 == 1,
        },
        Msg::JoinFlow { id, up, live } => ClientMsg::JoinFlow {
            token: pick(*live),
            flow_id: *id,
            direction: if *up { Direction::Up } else { Direction::Down },
        },
        Msg::JoinRr { live } => ClientMsg::JoinRr { token: pick(*live) },
        Msg::Start { flows, duration_ms } => ClientMsg::StartScenario {
            index: 0,
            name: "fuzz".into(),
            flows: flows
                .iter()
                .map(|(id, up)| FlowSpec { id: *id, direction: if *up { Direction::Up } else { Direction::Down }, dscp: 0, udp: None, segment_bytes: 0 })
                .collect(),
            duration_ms: *duration_ms,
        },
        Msg::Go => ClientMsg::Go,
        Msg::Stop => ClientMsg::StopScenario,
        Msg::End => ClientMsg::EndTest { summary: "fuzz".into(), complete: false },
        Msg::Auth => ClientMsg::Auth { answer: "00".repeat(32) },
    };
    if let Some(s) = c.conn(i) {
        let _ = s.write_all(&wire::encode_frame(&m));
    }
    c.drain(i);
}

fn play(ops: &[Op]) {
    let (_, addr) = server();
    let mut c = Client { conns: vec![None, None, None, None], token: 0, udp: UdpSocket::bind("127.0.0.1:0").unwrap() };
    for op in ops {
        match op {
            Op::Open(i) => {
                c.conns[*i] = TcpStream::connect(addr).ok();
                if let Some(s) = c.conns[*i].as_mut() {
                    let _ = s.set_write_timeout(Some(Duration::from_millis(200)));
                    let _ = s.write_all(&Handshake::ours().encode());
                }
            }
            Op::Connect(i) => {
                c.conns[*i] = TcpStream::connect(addr).ok();
                if let Some(s) = c.conns[*i].as_ref() {
                    let _ = s.set_write_timeout(Some(Duration::from_millis(200)));
                }
            }
            Op::Hello(i) => {
                if let Some(s) = c.conn(*i) {
                    let _ = s.write_all(&Handshake::ours().encode());
                }
            }
            Op::BadHello(i, b) => {
                if let Some(s) = c.conn(*i) {
                    let mut h = Handshake::ours().encode().to_vec();
                    h.truncate(b.len().min(12));
                    h.extend_from_slice(b);
                    let _ = s.write_all(&h);
                }
            }
            Op::OpenWith(i, m) => {
                c.conns[*i] = TcpStream::connect(addr).ok();
                if let Some(s) = c.conns[*i].as_mut() {
                    let _ = s.set_write_timeout(Some(Duration::from_millis(200)));
                    let _ = s.write_all(&Handshake::ours().encode());
                }
                send(&mut c, *i, m);
            }
            Op::Msg(i, m) => send(&mut c, *i, m),
            Op::Raw(i, b) => {
                if let Some(s) = c.conn(*i) {
                    let _ = s.write_all(b);
                }
            }
            Op::HugeLength(i) => {
                if let Some(s) = c.conn(*i) {
                    let _ = s.write_all(&u32::MAX.to_be_bytes());
                }
            }
            Op::HalfClose(i) => {
                if let Some(s) = c.conn(*i) {
                    let _ = s.shutdown(Shutdown::Write);
                }
            }
            Op::Close(i) => c.conns[*i] = None,
            Op::Probe(seq, size, live) => {
                let mut b = vec![0x77u8; *size as usize];
                let p = Probe { kind: ProbeKind::Request, token: if *live { c.token } else { 1 }, seq: *seq, stream: 0, client_send_ns: 1, server_recv_ns: 0, server_send_ns: 0 };
                if p.encode_into(&mut b).is_ok() {
                    let _ = c.udp.send_to(&b, addr);
                }
                let _ = c.udp.set_read_timeout(Some(Duration::from_millis(2)));
                let mut r = [0u8; 2048];
                if let Ok((n, _)) = c.udp.recv_from(&mut r) {
                    assert!(n <= b.len(), "a {n}-byte reply to a {}-byte probe", b.len());
                    assert!(r[wire::PROBE_HEADER..n].iter().all(|&x| x == 0), "the reply carried request bytes");
                }
            }
            Op::Drain(i) => c.drain(*i),
        }
    }
    drop(c);
}

/// After every case: the server lets go of everything and still serves.
fn server_is_clean_and_serves() {
    let (srv, addr) = server();
    let t = Instant::now();
    while srv.open_connections() > 0 || srv.active_tests() > 0 {
        assert!(
            t.elapsed() < Duration::from_secs(8),
            "the server still holds {} connections and {} tests after the case",
            srv.open_connections(),
            srv.active_tests()
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(&Handshake::ours().encode()).unwrap();
    let mut hs = [0u8; wire::SERVER_HELLO_LEN];
    s.read_exact(&mut hs).unwrap();
    let m = ClientMsg::NewTest {
        client: HostInfo::default(),
        cc: String::new(),
        planned_duration_ms: 1000,
        max_flows: 1,
        sample_interval_ms: 100,
        scenarios: vec![],
        socket_buffer: 0,
        rx_copy: false,
    };
    s.write_all(&wire::encode_frame(&m)).unwrap();
    s.write_all(&wire::encode_frame(&ClientMsg::EndTest { summary: String::new(), complete: true })).unwrap();
    let mut got = vec![];
    let _ = s.read_to_end(&mut got);
    let mut at = 0;
    let mut msgs = vec![];
    while let Ok(Some((m, used))) = wire::decode_frame::<ServerMsg>(&got[at..], wire::MAX_SERVER_FRAME) {
        msgs.push(m);
        at += used;
    }
    assert!(matches!(msgs.as_slice(), [ServerMsg::TestAccepted { .. }, ServerMsg::Bye]), "{msgs:?}");
}

proptest! {
    #![proptest_config(cases(48))]

    #[test]
    fn the_server_survives_any_sequence_and_frees_everything(ops in case()) {
        play(&ops);
        server_is_clean_and_serves();
    }
}

/// Runs after (or beside) the property: the generated sequences reach past
/// the handshake into tests, joins and scenarios.
#[test]
fn the_generator_reaches_deep_states() {
    let mut runner = proptest::test_runner::TestRunner::new(Config { cases: 60, failure_persistence: None, ..Config::default() });
    runner
        .run(&case(), |ops| {
            play(&ops);
            server_is_clean_and_serves();
            Ok(())
        })
        .unwrap();
    let r = *REACHED.lock().unwrap();
    eprintln!("answers seen: accepted {} flow {} rr {} ready {} report {} refused {} error {}", r[0], r[1], r[2], r[3], r[4], r[5], r[6]);
    assert!(r[0] > 0 && r[1] > 0 && r[3] > 0 && r[6] > 0, "the generator stays shallow: {r:?}");
}
