//! Pings to any host while a test runs: ICMP echo and TCP connect time.
//!
//! ICMP uses an unprivileged ping socket (`SOCK_DGRAM`, `IPPROTO_ICMP` /
//! `IPPROTO_ICMPV6`) where `net.ipv4.ping_group_range` admits the user's
//! group, else a raw socket (root or CAP_NET_RAW). A TCP ping times
//! connect(): SYN to SYN-ACK, or to RST when nothing listens (a refusal is a
//! round trip too); the connection is closed at once. A request without an
//! answer within [`TCP_PING_TIMEOUT`] (TCP) or by the end of the drain
//! (ICMP) is lost.
use bloatlab_host::clock;
use bloatlab_model::{PingKind, PingTarget};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io::Read;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;

/// A TCP connect that takes longer counts as lost.
pub const TCP_PING_TIMEOUT: Duration = Duration::from_secs(3);
/// TCP connects in flight per target; a ping due while this many still wait
/// is recorded as lost without a connection (a path that slow is losing
/// them anyway) and threads stay bounded.
pub const MAX_TCP_IN_FLIGHT: usize = 32;
/// Bytes after the 8-byte ICMP header.
const ICMP_PAYLOAD: usize = 24;

/// One ping: when it was sent (clock ns) and its round trip (None = lost).
pub type PingSample = (u64, Option<u64>);

/// The pings sent, oldest first; `base` of them were taken already
/// ([`Pinger::take_settled`]), so ping number `n` (its ICMP sequence,
/// modulo 2^16) sits at `v[n - base]`.
#[derive(Default)]
struct Sent {
    base: usize,
    v: Vec<PingSample>,
}

/// A running pinger of one target.
pub struct Pinger {
    pub target: PingTarget,
    /// The address pinged.
    pub addr: IpAddr,
    /// "unprivileged ICMP socket", "raw ICMP socket" or "TCP connect".
    pub method: &'static str,
    /// Ends the sending.
    stop: Arc<AtomicBool>,
    /// Ends the ICMP receiver (after the drain).
    stop_rx: Arc<AtomicBool>,
    samples: Arc<Mutex<Sent>>,
    threads: Vec<JoinHandle<()>>,
    /// The ICMP socket (the sender's), to wake its receiver at the stop.
    wake: Option<Arc<Socket>>,
}

fn resolve(t: &PingTarget) -> Result<IpAddr, String> {
    crate::conn::resolve(&t.host, t.port.max(1), bloatlab_model::Family::Any).map(|a| a.ip()).map_err(|e| format!("{}: {e}", t.label()))
}

/// An ICMP socket: unprivileged where allowed, else raw.
fn icmp_socket(ip: IpAddr) -> Result<(Socket, bool), String> {
    let (dom, proto) = if ip.is_ipv4() { (Domain::IPV4, Protocol::ICMPV4) } else { (Domain::IPV6, Protocol::ICMPV6) };
    match Socket::new(dom, Type::DGRAM, Some(proto)) {
        Ok(s) => Ok((s, false)),
        Err(e1) => Socket::new(dom, Type::RAW, Some(proto)).map(|s| (s, true)).map_err(|e2| {
            format!(
                "cannot ping {ip}: unprivileged ICMP sockets are not allowed for this group (sysctl net.ipv4.ping_group_range; {e1}) \
                 and raw sockets need root or CAP_NET_RAW ({e2})"
            )
        }),
    }
}

/// The Internet checksum (RFC 1071).
fn checksum(b: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for c in b.chunks(2) {
        let w = if c.len() == 2 { u16::from_be_bytes([c[0], c[1]]) } else { u16::from_be_bytes([c[0], 0]) };
        sum += w as u32;
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// An echo request: type, code, checksum, identifier, sequence, payload.
fn echo_request(v4: bool, id: u16, seq: u16) -> Vec<u8> {
    let mut p = vec![0u8; 8 + ICMP_PAYLOAD];
    p[0] = if v4 { 8 } else { 128 };
    p[4..6].copy_from_slice(&id.to_be_bytes());
    p[6..8].copy_from_slice(&seq.to_be_bytes());
    p[8..8 + 8].copy_from_slice(b"bloatlab");
    if v4 {
        // The kernel fills it for ping sockets and ICMPv6; a raw IPv4 socket needs it.
        let c = checksum(&p);
        p[2..4].copy_from_slice(&c.to_be_bytes());
    }
    p
}

/// The (identifier, sequence) of an echo reply in `b` (raw IPv4 sockets
/// deliver the IP header first).
fn parse_reply(b: &[u8], v4: bool, raw: bool) -> Option<(u16, u16)> {
    let icmp = if v4 && raw {
        let ihl = (*b.first()? & 0x0f) as usize * 4;
        b.get(ihl..)?
    } else {
        b
    };
    let reply_type = if v4 { 0 } else { 129 };
    if icmp.len() < 8 || icmp[0] != reply_type || icmp[1] != 0 {
        return None;
    }
    Some((u16::from_be_bytes([icmp[4], icmp[5]]), u16::from_be_bytes([icmp[6], icmp[7]])))
}

static NEXT_ID: AtomicU32 = AtomicU32::new(0);

/// Sleep until `due` (clock ns) or until woken to stop: a sender parks, and
/// [`Pinger::finish`] (or a drop) unparks it, so a slow schedule (a probe a
/// minute) neither delays the stop nor wakes the thread in between.
fn park_until(due: u64, stop: &AtomicBool) {
    loop {
        let now = clock::now_ns();
        if now >= due || stop.load(Ordering::Relaxed) {
            return;
        }
        thread::park_timeout(Duration::from_nanos(due - now));
    }
}

impl Pinger {
    /// Start pinging `t` every `interval` from `first_due` (clock ns).
    pub fn start(t: &PingTarget, interval: Duration, first_due: u64) -> Result<Pinger, String> {
        let addr = resolve(t)?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop_rx = Arc::new(AtomicBool::new(false));
        let samples: Arc<Mutex<Sent>> = Arc::new(Mutex::new(Sent::default()));
        let iv = interval.as_nanos() as u64;
        let mut threads = vec![];
        let mut wake: Option<Arc<Socket>> = None;
        let method;
        match t.kind {
            PingKind::Icmp => {
                let (sock, raw) = icmp_socket(addr)?;
                method = if raw { "raw ICMP socket" } else { "unprivileged ICMP socket" };
                let dst = SockAddr::from(SocketAddr::new(addr, 0));
                // Replies from this host only (raw sockets filter by the connected address too).
                sock.connect(&dst).map_err(|e| format!("{}: {e}", t.label()))?;
                // The receiver blocks in read: a stop shuts the socket's
                // reading down, which wakes it (the timeout is a backstop).
                sock.set_read_timeout(Some(Duration::from_secs(1))).map_err(|e| e.to_string())?;
                let rx = sock.try_clone().map_err(|e| e.to_string())?;
                let sock = Arc::new(sock);
                wake = Some(sock.clone());
                // Raw sockets see every echo reply: an identifier of our own picks ours.
                let id = (std::process::id() as u16) ^ (NEXT_ID.fetch_add(1, Ordering::Relaxed) as u16).wrapping_mul(0x9e37);
                let v4 = addr.is_ipv4();
                let (st, sm) = (stop.clone(), samples.clone());
                threads.push(thread::Builder::new().name("ping-tx".into()).spawn(move || {
                    let mut due = first_due;
                    let mut seq: u32 = 0;
                    while !st.load(Ordering::Relaxed) {
                        park_until(due, &st);
                        if st.load(Ordering::Relaxed) {
                            break;
                        }
                        let pkt = echo_request(v4, id, seq as u16);
                        let t0 = clock::now_ns();
                        sm.lock().unwrap().v.push((t0, None));
                        // A send error (no route, ICMP unreachable reported) leaves the ping lost.
                        let _ = sock.send(&pkt);
                        seq += 1;
                        due += iv;
                        let now = clock::now_ns();
                        if due < now {
                            due = now;
                        }
                    }
                }).map_err(|e| e.to_string())?);
                let (st, sm) = (stop_rx.clone(), samples.clone());
                threads.push(thread::Builder::new().name("ping-rx".into()).spawn(move || {
                    let mut buf = [0u8; 1500];
                    loop {
                        match (&rx).read(&mut buf) {
                            Ok(0) if st.load(Ordering::Relaxed) => break,
                            Ok(n) => {
                                let t1 = clock::now_ns();
                                let b: &[u8] = &buf[..n];
                                let Some((rid, rseq)) = parse_reply(b, v4, raw) else { continue };
                                if raw && rid != id {
                                    continue;
                                }
                                let mut s = sm.lock().unwrap();
                                let base = s.base;
                                // The newest request with this 16-bit sequence.
                                let idx = (0..s.v.len()).rev().find(|&i| (base + i) as u16 == rseq);
                                if let Some(i) = idx {
                                    if s.v[i].1.is_none() {
                                        s.v[i].1 = Some(t1.saturating_sub(s.v[i].0));
                                    }
                                }
                            }
                            Err(_) => {
                                if st.load(Ordering::Relaxed) {
                                    break;
                                }
                            }
                        }
                    }
                }).map_err(|e| e.to_string())?);
            }
            PingKind::Tcp => {
                method = "TCP connect";
                let dst = SocketAddr::new(addr, t.port);
                let (st, sm) = (stop.clone(), samples.clone());
                threads.push(thread::Builder::new().name("tcp-ping".into()).spawn(move || {
                    let mut due = first_due;
                    let mut attempts: Vec<JoinHandle<()>> = vec![];
                    while !st.load(Ordering::Relaxed) {
                        park_until(due, &st);
                        if st.load(Ordering::Relaxed) {
                            break;
                        }
                        let t0 = clock::now_ns();
                        let i = {
                            let mut s = sm.lock().unwrap();
                            s.v.push((t0, None));
                            s.base + s.v.len() - 1
                        };
                        attempts.retain(|h| !h.is_finished());
                        if attempts.len() >= MAX_TCP_IN_FLIGHT {
                            due += iv;
                            continue;
                        }
                        let sm2 = sm.clone();
                        // One short-lived thread per attempt: at most
                        // TCP_PING_TIMEOUT / interval run at once.
                        if let Ok(h) = thread::Builder::new().name("tcp-ping-1".into()).spawn(move || {
                            let r = TcpStream::connect_timeout(&dst, TCP_PING_TIMEOUT);
                            let t1 = clock::now_ns();
                            let answered = match r {
                                Ok(_) => true,
                                Err(e) => e.kind() == std::io::ErrorKind::ConnectionRefused,
                            };
                            if answered {
                                let mut s = sm2.lock().unwrap();
                                let base = s.base;
                                if let Some(x) = i.checked_sub(base).and_then(|k| s.v.get_mut(k)) {
                                    x.1 = Some(t1.saturating_sub(t0));
                                }
                            }
                        }) {
                            attempts.push(h);
                        }
                        attempts.retain(|h| !h.is_finished());
                        due += iv;
                        let now = clock::now_ns();
                        if due < now {
                            due = now;
                        }
                    }
                    for h in attempts {
                        let _ = h.join();
                    }
                }).map_err(|e| e.to_string())?);
            }
        }
        Ok(Pinger { target: t.clone(), addr, method, stop, stop_rx, samples, threads, wake })
    }

    /// Stop sending, wait `drain` for late ICMP replies (TCP attempts end by
    /// their own timeout), and return every ping.
    pub fn finish(mut self, drain: Duration) -> Vec<PingSample> {
        self.stop.store(true, Ordering::Relaxed);
        self.threads.iter().for_each(|h| h.thread().unpark());
        if self.target.kind == PingKind::Icmp {
            let until = clock::now_ns() + drain.as_nanos() as u64;
            while clock::now_ns() < until && self.samples.lock().unwrap().v.iter().any(|s| s.1.is_none()) {
                thread::sleep(Duration::from_millis(20));
            }
        }
        self.stop_rx.store(true, Ordering::Relaxed);
        self.wake_receiver();
        for h in std::mem::take(&mut self.threads) {
            let _ = h.join();
        }
        let v = std::mem::take(&mut self.samples.lock().unwrap().v);
        v
    }

    /// The pings sent before `before` (clock ns), taken out: a pinger that
    /// runs for days hands its samples over in rounds and holds only the
    /// newest. A ping still unanswered then is lost (`before` should lie
    /// a timeout in the past: [`TCP_PING_TIMEOUT`] for TCP).
    pub fn take_settled(&self, before: u64) -> Vec<PingSample> {
        let mut s = self.samples.lock().unwrap();
        let n = s.v.iter().take_while(|x| x.0 < before).count();
        s.base += n;
        s.v.drain(..n).collect()
    }
}

/// A pinger dropped without `finish` (a test that failed early) stops its
/// threads all the same; they end within one read timeout or connect attempt.
impl Pinger {
    fn wake_receiver(&self) {
        if let Some(s) = &self.wake {
            let _ = s.shutdown(std::net::Shutdown::Read);
        }
    }
}

impl Drop for Pinger {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.stop_rx.store(true, Ordering::Relaxed);
        self.threads.iter().for_each(|h| h.thread().unpark());
        self.wake_receiver();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checksum_is_rfc1071s() {
        // RFC 1071's example words 0001 f203 f4f5 f6f7 sum to ddf2 (before the complement).
        assert_eq!(checksum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]), !0xddf2);
        // A packet with its checksum filled in sums to zero.
        let p = echo_request(true, 0x1234, 7);
        assert_eq!(checksum(&p), 0);
    }

    #[test]
    fn replies_are_parsed_with_and_without_the_ip_header() {
        let mut reply = echo_request(true, 0xabcd, 42);
        reply[0] = 0;
        assert_eq!(parse_reply(&reply, true, false), Some((0xabcd, 42)));
        let mut ip = vec![0x45u8; 20];
        ip.extend_from_slice(&reply);
        assert_eq!(parse_reply(&ip, true, true), Some((0xabcd, 42)));
        // A request is not a reply; IPv6 replies are type 129.
        assert_eq!(parse_reply(&echo_request(true, 1, 1), true, false), None);
        let mut r6 = echo_request(false, 5, 6);
        r6[0] = 129;
        assert_eq!(parse_reply(&r6, false, false), Some((5, 6)));
        assert_eq!(parse_reply(&[0, 0], true, false), None);
    }

    #[test]
    fn a_tcp_ping_to_a_listener_and_to_a_closed_port_both_measure_a_round_trip() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let t = PingTarget::tcp(&format!("127.0.0.1:{port}")).unwrap();
        let p = Pinger::start(&t, Duration::from_millis(20), clock::now_ns()).unwrap();
        thread::sleep(Duration::from_millis(200));
        let s = p.finish(Duration::from_millis(100));
        assert!(s.len() >= 5, "{s:?}");
        assert!(s.iter().all(|x| x.1.is_some_and(|r| r < 1_000_000_000)), "{s:?}");
        drop(l);
        // Nothing listens now: RST answers, still a round trip.
        let p = Pinger::start(&t, Duration::from_millis(20), clock::now_ns()).unwrap();
        thread::sleep(Duration::from_millis(100));
        let s = p.finish(Duration::from_millis(100));
        assert!(!s.is_empty() && s.iter().all(|x| x.1.is_some()), "{s:?}");
    }

    #[test]
    fn an_icmp_ping_to_loopback_is_answered_or_says_why_it_cannot_run() {
        let t = PingTarget::icmp("127.0.0.1").unwrap();
        match Pinger::start(&t, Duration::from_millis(20), clock::now_ns()) {
            Ok(p) => {
                thread::sleep(Duration::from_millis(200));
                let s = p.finish(Duration::from_millis(200));
                assert!(s.len() >= 5);
                assert!(s.iter().filter(|x| x.1.is_some()).count() >= s.len() - 1, "{s:?}");
            }
            Err(e) => {
                // Neither socket kind is allowed (not root, ping_group_range closed).
                assert!(e.contains("ping_group_range") && e.contains("raw sockets need root"), "{e}");
                bloatlab_testkit::cannot_run("an_icmp_ping_to_loopback_is_answered", &e);
            }
        }
    }

    #[test]
    fn rounds_taken_out_keep_every_ping_once_and_a_slow_pinger_stops_at_once() {
        let t = PingTarget::icmp("127.0.0.1").unwrap();
        let Ok(p) = Pinger::start(&t, Duration::from_millis(10), clock::now_ns()) else {
            bloatlab_testkit::cannot_run("rounds_taken_out", "no ICMP socket");
            return;
        };
        let mut all = vec![];
        for _ in 0..3 {
            thread::sleep(Duration::from_millis(100));
            // what was sent up to 20 ms ago: answered by now on loopback
            all.extend(p.take_settled(clock::now_ns() - 20_000_000));
        }
        all.extend(p.finish(Duration::from_millis(200)));
        // in order, none twice, all answered (the sequence numbers still
        // find their pings after the first rounds were taken out)
        assert!(all.len() >= 20 && all.windows(2).all(|w| w[0].0 < w[1].0), "{all:?}");
        assert!(all.iter().filter(|x| x.1.is_some()).count() >= all.len() - 1, "{all:?}");
        // a ping a minute: the stop does not wait for the next one, nor the receiver's timeout
        for t in [PingTarget::icmp("127.0.0.1").unwrap(), PingTarget::tcp("127.0.0.1:9").unwrap()] {
            let p = Pinger::start(&t, Duration::from_secs(60), clock::now_ns()).unwrap();
            thread::sleep(Duration::from_millis(50));
            let t0 = std::time::Instant::now();
            let s = p.finish(Duration::from_millis(100));
            assert_eq!(s.len(), 1);
            assert!(t0.elapsed() < Duration::from_millis(600), "{:?}: finish took {:?}", t.kind, t0.elapsed());
        }
    }
}
