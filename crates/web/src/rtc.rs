//! UDP latency probes for the browser: a WebRTC data channel, unordered and
//! never retransmitted (`maxRetransmits: 0`), between the page and the
//! server (str0m, ICE-lite, one UDP port: the web port's number). A probe
//! lost in a full queue is lost, as `bloatlab test`'s UDP probes are, not a
//! round trip stretched by TCP's loss recovery: through a 10-packet FIFO
//! that drops a quarter of the packets, TCP probes stalled for
//! seconds behind retransmission timeouts while the queue held 12 ms.
//!
//! Signalling: `POST /api/rtc?s=ID` with the page's offer; the answer names
//! one host candidate, the address the page reached the server at. One peer
//! per test; a peer ends with its test. Each local address the page reached
//! gets a UDP socket and a thread that drives its peers (bounded by the
//! server's addresses).
use crate::session::{ProbeStamp, Session};
use bloatlab_host::clock;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use str0m::change::{SdpAnswer, SdpOffer};
use str0m::net::{Protocol, Receive};
use str0m::channel::{ChannelConfig, Reliability};
use str0m::{Candidate, Event, Input, Output, Rtc};
use str0m::channel::ChannelId;

/// Largest probe message, bytes.
const MAX_MESSAGE: usize = 1024;
/// The SCTP stream id of the probe channel (negotiated: the page opens it with this id).
pub const PROBE_CHANNEL: u16 = 0;
/// The household test's video call: frames the server sends back as they
/// came, on a peer connection of its own (one SCTP association carries its
/// channels' messages through one congestion window: the probes would wait
/// behind the call's frames in the browser).
pub const CALL_CHANNEL: u16 = 1;

/// What a peer connection carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Probe,
    Call,
}

struct NewPeer {
    rtc: Rtc,
    session: Arc<Session>,
    channel: ChannelId,
    kind: Kind,
}

/// The WebRTC side of the browser test: one driver per local address.
pub struct Rtcs {
    /// The UDP port: the web port's number, known once it is bound.
    port: std::sync::atomic::AtomicU16,
    drivers: Mutex<HashMap<IpAddr, Sender<NewPeer>>>,
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is.
pub fn unmapped(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
        v4 => v4,
    }
}

impl Rtcs {
    pub fn new(port: u16) -> Rtcs {
        static CRYPTO: std::sync::Once = std::sync::Once::new();
        CRYPTO.call_once(|| str0m::crypto::from_feature_flags().install_process_default());
        Rtcs { port: port.into(), drivers: Mutex::new(HashMap::new()) }
    }

    /// The port, once the web listener has one (an ephemeral --web-port 0).
    pub fn set_port(&self, port: u16) {
        self.port.store(port, Ordering::Relaxed);
    }

    /// The driver of local address `ip`, started on first use.
    fn driver(&self, ip: IpAddr) -> Result<Sender<NewPeer>, String> {
        let mut d = self.drivers.lock().unwrap();
        if let Some(tx) = d.get(&ip) {
            return Ok(tx.clone());
        }
        let addr = SocketAddr::new(ip, self.port.load(Ordering::Relaxed));
        let sock = UdpSocket::bind(addr).map_err(|e| format!("WebRTC probes: cannot bind UDP {addr}: {e}"))?;
        let (tx, rx) = channel();
        std::thread::Builder::new()
            .name("web-rtc".into())
            .spawn(move || drive(sock, addr, rx))
            .map_err(|e| format!("WebRTC probes: cannot start a thread: {e}"))?;
        d.insert(ip, tx.clone());
        Ok(tx)
    }

    /// Answer the page's offer for session `s`, which reached the server at `local`.
    pub fn answer(&self, s: &Arc<Session>, local: IpAddr, offer: SdpOffer, kind: Kind) -> Result<SdpAnswer, String> {
        match kind {
            Kind::Call if s.plan.household.is_none() => return Err("only the household test has a call".into()),
            Kind::Call if s.rtc_call_open.swap(true, Ordering::SeqCst) => return Err("this test already has its call".into()),
            Kind::Probe if s.rtc_open.swap(true, Ordering::SeqCst) => return Err("this test already has its WebRTC probe channel".into()),
            _ => {}
        }
        let ip = unmapped(local);
        let tx = self.driver(ip)?;
        let mut rtc = Rtc::builder().set_ice_lite(true).build(Instant::now());
        let cand = Candidate::host(SocketAddr::new(ip, self.port.load(Ordering::Relaxed)), "udp").map_err(|e| format!("WebRTC probes: {e}"))?;
        rtc.add_local_candidate(cand);
        let answer = rtc.sdp_api().accept_offer(offer).map_err(|e| format!("the WebRTC offer was refused: {e}"))?;
        // The channel is negotiated out of band (the page opens the same id):
        // str0m applies a channel's reliability to its own sending only then,
        // and the answers must be as unreliable as the probes (a reliable
        // answer lost at a full queue held every later one for seconds).
        let unreliable = |label: &str, id: u16| ChannelConfig {
            label: label.into(),
            ordered: false,
            reliability: Reliability::MaxRetransmits { retransmits: 0 },
            negotiated: Some(id),
            protocol: String::new(),
        };
        let channel = match kind {
            Kind::Probe => rtc.direct_api().create_data_channel(unreliable("probe", PROBE_CHANNEL)),
            Kind::Call => rtc.direct_api().create_data_channel(unreliable("call", CALL_CHANNEL)),
        };
        tx.send(NewPeer { rtc, session: s.clone(), channel, kind }).map_err(|_| "WebRTC probes: the driver stopped".to_string())?;
        Ok(answer)
    }
}

struct Peer {
    rtc: Rtc,
    session: Arc<Session>,
    /// Arrival of the datagram being handled (server Unix ns).
    rx_ns: u64,
    budget: crate::session::ProbeBudget,
    channel: ChannelId,
    kind: Kind,
    /// A call frame's size.
    frame_bytes: usize,
}

fn drive(sock: UdpSocket, local: SocketAddr, rx: Receiver<NewPeer>) {
    let mut peers: Vec<Peer> = vec![];
    let mut buf = vec![0u8; 2048];
    loop {
        while let Ok(p) = rx.try_recv() {
            let (budget, frame_bytes) = match (p.kind, p.session.plan.household) {
                (Kind::Call, Some(h)) => (crate::session::ProbeBudget::per_second(h.call_fps as f64), h.call_frame_bytes as usize),
                _ => (crate::session::ProbeBudget::new(&p.session.plan), 0),
            };
            peers.push(Peer { rtc: p.rtc, session: p.session, rx_ns: 0, budget, channel: p.channel, kind: p.kind, frame_bytes });
        }
        for p in peers.iter_mut() {
            if p.session.ended.load(Ordering::Relaxed) {
                p.rtc.disconnect();
            }
        }
        peers.retain(|p| p.rtc.is_alive());
        let mut timeout = Instant::now() + Duration::from_millis(100);
        for p in peers.iter_mut() {
            timeout = timeout.min(poll(p, &sock));
        }
        let wait = timeout.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
        let _ = sock.set_read_timeout(Some(wait));
        if let Ok((n, source)) = sock.recv_from(&mut buf) {
            let t = clock::now_ns();
            let source = SocketAddr::new(unmapped(source.ip()), source.port());
            if n <= buf.len() {
                if let Ok(contents) = buf[..n].try_into() {
                    let input = Input::Receive(Instant::now(), Receive { proto: Protocol::Udp, source, destination: local, contents });
                    if let Some(p) = peers.iter_mut().find(|p| p.rtc.accepts(&input)) {
                        p.rx_ns = t;
                        if p.rtc.handle_input(input).is_err() {
                            p.rtc.disconnect();
                        }
                    }
                }
            }
        }
        let now = Instant::now();
        for p in peers.iter_mut() {
            if p.rtc.handle_input(Input::Timeout(now)).is_err() {
                p.rtc.disconnect();
            }
        }
    }
}

/// Run a peer until it wants a timeout: send what it transmits, answer probes.
fn poll(p: &mut Peer, sock: &UdpSocket) -> Instant {
    loop {
        if !p.rtc.is_alive() {
            return Instant::now();
        }
        match p.rtc.poll_output() {
            Ok(Output::Timeout(t)) => return t,
            Ok(Output::Transmit(t)) => {
                let _ = sock.send_to(&t.contents, t.destination);
            }
            Ok(Output::Event(Event::ChannelData(d))) => {
                if d.id != p.channel {
                    p.rtc.disconnect();
                    continue;
                }
                if p.kind == Kind::Call {
                    call_frame(&p.session, p.rx_ns, d.id, &mut p.budget, p.frame_bytes, &d.data, &mut p.rtc);
                    continue;
                }
                if d.data.len() > MAX_MESSAGE {
                    p.rtc.disconnect();
                    continue;
                }
                if !p.budget.take() {
                    continue; // over the rate: not answered, counted lost
                }
                let seq = serde_json::from_slice::<serde_json::Value>(&d.data).ok().and_then(|v| v["p"].as_u64()).filter(|&v| v <= u32::MAX as u64);
                let Some(seq) = seq else { continue };
                let t3 = clock::now_ns();
                if !p.session.rtc_probe(ProbeStamp { seq: seq as u32, t2: p.rx_ns, t3 }) {
                    continue;
                }
                let answer = serde_json::json!({"p": seq, "t2": p.rx_ns.saturating_sub(p.session.t0_ns), "t3": t3.saturating_sub(p.session.t0_ns)});
                if let Some(mut ch) = p.rtc.channel(d.id) {
                    let _ = ch.write(false, answer.to_string().as_bytes());
                }
            }
            Ok(Output::Event(_)) => {}
            Err(_) => {
                p.rtc.disconnect();
                return Instant::now();
            }
        }
    }
}

/// A video-call frame of the household test: its first 4 bytes are its
/// number (big-endian); recorded and sent back whole, as the other side's
/// video. Frames of another size than the plan's, or beyond twice its
/// frame rate, are dropped (counted lost).
fn call_frame(s: &Session, rx_ns: u64, id: ChannelId, budget: &mut crate::session::ProbeBudget, size: usize, data: &[u8], rtc: &mut Rtc) {
    if data.len() != size || size < 4 || !budget.take() {
        return;
    }
    let seq = u32::from_be_bytes([data[0], data[1], data[2], data[3]]);
    let t3 = clock::now_ns();
    if !s.call_frame(ProbeStamp { seq, t2: rx_ns, t3 }) {
        return;
    }
    if let Some(mut ch) = rtc.channel(id) {
        let _ = ch.write(true, data);
    }
}
