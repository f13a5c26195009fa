//! Isochronous UDP probes and the sequential TCP request/response probe.
//! Each runs on its own thread and takes replies with the kernel's receive
//! stamp (SO_TIMESTAMPNS), so neither waits on an async scheduler and each
//! wakes once per exchange.
use bloatlab_host::clock;
use bloatlab_model::Secret;
use bloatlab_wire::{self as wire, Probe, ProbeKind};
use std::io::Write;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;

/// One probe exchange, all Unix ns: t1/t4 client clock, t2/t3 server clock (0 = not yet).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Exchange {
    pub t1: u64,
    pub t2: u64,
    pub t3: u64,
    pub t4: u64,
}

impl Exchange {
    pub fn answered(&self) -> bool {
        self.t4 != 0
    }
    /// RTT minus the server's hold time.
    pub fn rtt_ns(&self) -> Option<u64> {
        self.answered().then(|| (self.t4 - self.t1).saturating_sub(self.t3.saturating_sub(self.t2)))
    }
}

pub struct ProbeStream {
    records: Arc<Mutex<Vec<Exchange>>>,
    stop_send: Arc<AtomicBool>,
    /// How long to keep collecting replies after the last probe, ns (set by `finish`).
    drain_ns: Arc<AtomicU64>,
    last_rtt_ns: Arc<AtomicU64>,
    /// Replies stamped by the kernel (SO_TIMESTAMPNS) / by a clock read when collected.
    pub kernel_stamped: Arc<AtomicU64>,
    pub user_stamped: Arc<AtomicU64>,
    worker: Option<JoinHandle<()>>,
}

/// What the probe thread needs to match a reply to its request.
struct Matcher {
    token: u64,
    stream: u32,
    verify: Option<Secret>,
    records: Arc<Mutex<Vec<Exchange>>>,
    last_rtt_ns: Arc<AtomicU64>,
    kernel_stamped: Arc<AtomicU64>,
    user_stamped: Arc<AtomicU64>,
}

impl Matcher {
    /// Record one received datagram (`kts`: the kernel's receive stamp).
    fn on_reply(&self, d: &[u8], kts: Option<u64>) {
        // The kernel's receive stamp: exact however late the reply is collected.
        let t4 = kts.map(clock::from_realtime).unwrap_or_else(clock::now_ns);
        if kts.is_some() { &self.kernel_stamped } else { &self.user_stamped }.fetch_add(1, Ordering::Relaxed);
        let Ok(p) = Probe::decode(d) else { return };
        if p.kind != ProbeKind::Reply || p.token != self.token || p.stream != self.stream {
            return;
        }
        if self.verify.as_ref().is_some_and(|k| !wire::probe_signed(d, k)) {
            return;
        }
        let mut r = self.records.lock().unwrap();
        if let Some(e) = r.get_mut(p.seq as usize) {
            if !e.answered() && e.t1 == p.client_send_ns {
                e.t2 = p.server_recv_ns;
                e.t3 = p.server_send_ns;
                e.t4 = t4;
                if let Some(rtt) = e.rtt_ns() {
                    self.last_rtt_ns.store(rtt, Ordering::Relaxed);
                }
            }
        }
    }

    fn all_answered(&self) -> bool {
        self.records.lock().unwrap().iter().all(|e| e.answered())
    }
}

impl ProbeStream {
    /// Probe k is due at `first_due_ns + k x interval` (`clock::now_ns()` time base).
    /// With `secret` every request carries its HMAC; with `verify` too, a
    /// reply counts only with the server's valid HMAC (an authenticated
    /// server signs its replies).
    ///
    /// One thread sends and receives: it wakes once per probe, collects
    /// the replies that arrived meanwhile (each carries the kernel's receive
    /// stamp, so collecting late costs no precision) and sends the next
    /// probe. A thread blocked on the socket instead wakes once more per
    /// probe, and on a host whose CPUs the load saturates every wake-up
    /// preempts a flow (docs/design.md).
    /// Every probe is marked with DSCP `dscp` (0: unmarked; the server
    /// answers in the same class). `burst` probes go at each instant,
    /// numbered in turn (1: one; a video call's frame is its parts).
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        target: SocketAddr,
        token: u64,
        stream: u32,
        first_due_ns: u64,
        interval: Duration,
        burst: u32,
        size: usize,
        secret: Option<Secret>,
        verify: bool,
        dscp: u8,
    ) -> std::io::Result<ProbeStream> {
        let verify = if verify { secret.clone() } else { None };
        let bind: SocketAddr = if target.is_ipv6() { "[::]:0".parse().unwrap() } else { "0.0.0.0:0".parse().unwrap() };
        let sock = UdpSocket::bind(bind)?;
        sock.connect(target)?;
        if dscp > 0 {
            crate::sys::set_dscp(&sock, dscp)?;
        }
        sock.set_read_timeout(Some(Duration::from_millis(20)))?;
        crate::sys::enable_rx_timestamps(&sock);
        let m = Matcher {
            token,
            stream,
            verify,
            records: Arc::new(Mutex::new(Vec::<Exchange>::with_capacity(4096))),
            last_rtt_ns: Arc::new(AtomicU64::new(0)),
            kernel_stamped: Arc::new(AtomicU64::new(0)),
            user_stamped: Arc::new(AtomicU64::new(0)),
        };
        let stop_send = Arc::new(AtomicBool::new(false));
        let drain_ns = Arc::new(AtomicU64::new(0));
        let out = ProbeStream {
            records: m.records.clone(),
            stop_send: stop_send.clone(),
            drain_ns: drain_ns.clone(),
            last_rtt_ns: m.last_rtt_ns.clone(),
            kernel_stamped: m.kernel_stamped.clone(),
            user_stamped: m.user_stamped.clone(),
            worker: None,
        };
        let ss = stop_send;
        let worker = thread::Builder::new().name("probe".into()).spawn(move || {
            let step = interval.as_nanos() as u64;
            let mut buf = vec![0u8; size];
            let mut rbuf = [0u8; 2048];
            // Every datagram waiting now, without blocking.
            let collect = |rbuf: &mut [u8]| {
                // Bounded: a stream of ICMP errors cannot hold the thread.
                for _ in 0..100_000 {
                    match crate::sys::recv_stamped_flags(&sock, rbuf, libc::MSG_DONTWAIT) {
                        Ok((n, _, kts)) => m.on_reply(&rbuf[..n], kts),
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                        // An ICMP error reported on the socket: that probe is lost.
                        Err(_) => {}
                    }
                }
            };
            let start = first_due_ns;
            let burst = burst.max(1);
            let mut seq: u32 = 0;
            let mut k: u64 = 0;
            while !ss.load(Ordering::Relaxed) {
                let due = start + k * step;
                k += 1;
                sleep_until(due, &ss);
                collect(&mut rbuf);
                if ss.load(Ordering::Relaxed) {
                    break;
                }
                for _ in 0..burst {
                    let t1 = clock::now_ns();
                    let p = Probe { kind: ProbeKind::Request, token, seq, stream, client_send_ns: t1, server_recv_ns: 0, server_send_ns: 0 };
                    p.encode_into(&mut buf).expect("size >= header checked by the caller");
                    if let Some(k) = &secret {
                        wire::sign_probe(&mut buf, k).expect("size >= 64 checked by the config");
                    }
                    m.records.lock().unwrap().push(Exchange { t1, ..Default::default() });
                    // A send error (e.g. ICMP unreachable reported) counts as a lost probe.
                    let _ = sock.send(&buf);
                    seq = seq.wrapping_add(1);
                }
            }
            // Late replies (a bloated queue can hold seconds): block on the
            // socket until all are in or the drain time is over.
            let deadline = clock::now_ns() + drain_ns.load(Ordering::SeqCst);
            while !m.all_answered() && clock::now_ns() < deadline {
                if let Ok((n, _, kts)) = crate::sys::recv_stamped(&sock, &mut rbuf) {
                    m.on_reply(&rbuf[..n], kts);
                }
            }
        })?;
        Ok(ProbeStream { worker: Some(worker), ..out })
    }

    /// The exchanges so far, shared with the stream (a copy may be taken while it runs).
    pub(crate) fn records(&self) -> Arc<Mutex<Vec<Exchange>>> {
        self.records.clone()
    }

    /// Latest measured RTT (for progress display), ns; 0 = none yet.
    pub fn last_rtt_ns(&self) -> u64 {
        self.last_rtt_ns.load(Ordering::Relaxed)
    }

    /// Stop sending, wait up to `drain` for outstanding replies, and return every exchange.
    pub fn finish(mut self, drain: Duration) -> Vec<Exchange> {
        self.stop(drain);
        std::mem::take(&mut *self.records.lock().unwrap())
    }

    /// Stop sending and wait up to `drain` for outstanding replies; the
    /// exchanges stay in [`ProbeStream::records`].
    pub(crate) fn stop(&mut self, drain: Duration) {
        self.drain_ns.store(drain.as_nanos() as u64, Ordering::SeqCst);
        self.stop_send.store(true, Ordering::SeqCst);
        if let Some(h) = self.worker.take() {
            let _ = h.join();
        }
    }
}

/// Sleep until `due_ns` (`clock::now_ns()` time base), in slices of at most
/// 20 ms so that a stop is seen quickly even with long intervals.
pub(crate) fn sleep_until(due_ns: u64, stop: &AtomicBool) {
    while clock::now_ns() < due_ns && !stop.load(Ordering::Relaxed) {
        thread::sleep(Duration::from_nanos(due_ns.saturating_sub(clock::now_ns()).min(20_000_000)));
    }
}

/// One request/response exchange: (request time unix ns, duration ns, completed).
pub type RrRecord = (u64, u64, bool);

pub struct RrProbe {
    records: Arc<Mutex<Vec<RrRecord>>>,
    stop: Arc<AtomicBool>,
    /// Replies whose arrival time is the kernel's receive stamp (SO_TIMESTAMPNS
    /// on the TCP socket) / a clock read when the reply was read.
    pub kernel_stamped: Arc<AtomicU64>,
    pub user_stamped: Arc<AtomicU64>,
    sock: TcpStream,
    handle: Option<JoinHandle<()>>,
}

/// How reading one reply ended.
enum Reply {
    /// Complete; the time its last byte arrived, and whether the kernel stamped it.
    Done(u64, bool),
    /// Not all of it yet (only when not waiting).
    Pending,
    /// EOF, an error, or a stop while waiting.
    Failed,
}

/// The request/response thread's socket and what it has read of the current reply.
struct RrReader {
    s: TcpStream,
    buf: [u8; wire::RR_SIZE],
    have: usize,
}

impl RrReader {
    /// Read the rest of the current reply: without blocking (`wait` false),
    /// or until it is complete, the socket fails or `stop` is set.
    fn read(&mut self, wait: bool, stop: &AtomicBool) -> Reply {
        let flags = if wait { 0 } else { libc::MSG_DONTWAIT };
        while self.have < self.buf.len() {
            match crate::sys::recv_stamped_flags(&self.s, &mut self.buf[self.have..], flags) {
                Ok((0, _, _)) => return Reply::Failed,
                Ok((n, _, kts)) => {
                    self.have += n;
                    if self.have == self.buf.len() {
                        self.have = 0;
                        return match kts {
                            Some(k) => Reply::Done(clock::from_realtime(k), true),
                            None => Reply::Done(clock::now_ns(), false),
                        };
                    }
                }
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut | std::io::ErrorKind::Interrupted) => {
                    if !wait {
                        return Reply::Pending;
                    }
                    if stop.load(Ordering::Relaxed) {
                        return Reply::Failed;
                    }
                }
                Err(_) => return Reply::Failed,
            }
        }
        Reply::Pending
    }
}

impl RrProbe {
    /// `sock` has completed the JoinRr exchange. Requests go out every
    /// `interval`, or right after the previous reply when that took longer.
    /// The first request is due at `first_due_ns` (`clock::now_ns()` time base).
    ///
    /// The thread wakes once per exchange when replies come back within the
    /// interval: at each due time it first collects the previous reply, whose
    /// arrival time is the kernel's receive stamp (SO_TIMESTAMPNS works on
    /// TCP too), then sends the next request. Only a reply still missing at
    /// the next due time is waited for, so the next request follows it at
    /// once. Where the kernel does not stamp (the first reply tells), the
    /// thread waits for every reply as it arrives and reads the clock then.
    pub fn start(sock: TcpStream, first_due_ns: u64, interval: Duration) -> std::io::Result<RrProbe> {
        let s = sock.try_clone()?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(Duration::from_millis(20)))?;
        let mut lazy = crate::sys::enable_rx_timestamps(&s);
        let records = Arc::new(Mutex::new(Vec::with_capacity(4096)));
        let stop = Arc::new(AtomicBool::new(false));
        let (kernel_stamped, user_stamped) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let (rec, st, ks, us) = (records.clone(), stop.clone(), kernel_stamped.clone(), user_stamped.clone());
        let handle = thread::Builder::new().name("rr".into()).spawn(move || {
            let step = interval.as_nanos() as u64;
            // Keep the phase of the schedule but skip slots already past.
            let now = clock::now_ns();
            let mut next = if first_due_ns >= now || step == 0 {
                first_due_ns
            } else {
                first_due_ns + (now - first_due_ns).div_ceil(step) * step
            };
            let mut r = RrReader { s, buf: [0u8; wire::RR_SIZE], have: 0 };
            // Record the exchange sent at `t`; Some(kernel-stamped) when it completed.
            let finish = |r: &mut RrReader, t: u64, wait: bool| match r.read(wait, &st) {
                Reply::Done(t4, kernel) => {
                    if kernel { &ks } else { &us }.fetch_add(1, Ordering::Relaxed);
                    rec.lock().unwrap().push((t, t4.saturating_sub(t), true));
                    Some(kernel)
                }
                Reply::Pending | Reply::Failed => {
                    rec.lock().unwrap().push((t, clock::now_ns() - t, false));
                    None
                }
            };
            let mut seq = 0u32;
            // The request in flight: its send time.
            let mut sent: Option<u64> = None;
            let mut first = true;
            loop {
                // Eager (no kernel stamps, or the first reply, which tells):
                // wait on the reply now. Lazy: at the next due time.
                let eager = sent.is_some() && (!lazy || first);
                if !eager {
                    sleep_until(next, &st);
                }
                let stopping = st.load(Ordering::Relaxed);
                if let Some(t) = sent.take() {
                    // Wait for a reply not in yet, unless stopping.
                    let Some(kernel) = finish(&mut r, t, !stopping) else { break };
                    // A late reply is followed at once.
                    next = next.max(clock::now_ns());
                    if first {
                        lazy &= kernel;
                        first = false;
                    }
                    if eager {
                        continue;
                    }
                }
                if stopping {
                    break;
                }
                let t = clock::now_ns();
                if r.s.write_all(&wire::encode_rr(seq)).is_err() {
                    break;
                }
                sent = Some(t);
                seq = seq.wrapping_add(1);
                next += step;
            }
        })?;
        Ok(RrProbe { records, stop, kernel_stamped, user_stamped, sock, handle: Some(handle) })
    }

    pub fn finish(mut self) -> Vec<RrRecord> {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
        let _ = self.sock.shutdown(std::net::Shutdown::Both);
        std::mem::take(&mut *self.records.lock().unwrap())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::TcpListener;

    /// An echo peer that holds request `late` for `late_ms` and every other one for 2 ms.
    fn echo_peer(late: u32, late_ms: u64) -> (SocketAddr, JoinHandle<()>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let h = thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut b = [0u8; wire::RR_SIZE];
            while s.read_exact(&mut b).is_ok() {
                let seq = wire::decode_rr(&b).unwrap();
                thread::sleep(Duration::from_millis(if seq == late { late_ms } else { 2 }));
                if s.write_all(&b).is_err() {
                    return;
                }
            }
        });
        (addr, h)
    }

    #[test]
    fn request_response_times_come_from_kernel_stamps_and_late_replies_are_followed_at_once() {
        let (addr, peer) = echo_peer(4, 130);
        let sock = TcpStream::connect(addr).unwrap();
        let iv = Duration::from_millis(50);
        let rr = RrProbe::start(sock, clock::now_ns() + 1_000_000, iv).unwrap();
        thread::sleep(Duration::from_millis(700));
        let (ks, us) = (rr.kernel_stamped.clone(), rr.user_stamped.clone());
        let recs = rr.finish();
        peer.join().unwrap();
        let done: Vec<_> = recs.iter().filter(|r| r.2).collect();
        assert!(done.len() >= 8, "{recs:?}");
        // Loopback TCP carries SO_TIMESTAMPNS stamps: every reply after the
        // first was collected lazily, at the next due time.
        assert_eq!(ks.load(Ordering::Relaxed), done.len() as u64, "{recs:?}");
        assert_eq!(us.load(Ordering::Relaxed), 0);
        for (i, r) in recs.iter().enumerate() {
            if !r.2 {
                assert_eq!(i, recs.len() - 1, "only the exchange in flight at the stop may be incomplete: {recs:?}");
                continue;
            }
            let ms = r.1 as f64 / 1e6;
            if i == 4 {
                assert!((130.0..200.0).contains(&ms), "late reply {ms} ms: {recs:?}");
            } else {
                // Collected up to 50 ms later, timed by the kernel's stamp: near the peer's 2 ms.
                assert!((2.0..25.0).contains(&ms), "reply {i}: {ms} ms: {recs:?}");
            }
        }
        // On schedule 50 ms apart, except that the request after the late
        // reply goes right after it rather than at the next slot.
        let gap = |i: usize| (recs[i + 1].0 - recs[i].0) as f64 / 1e6;
        assert!((30.0..70.0).contains(&gap(1)), "{recs:?}");
        let after_late = (recs[5].0 - (recs[4].0 + recs[4].1)) as f64 / 1e6;
        assert!(after_late < 15.0, "the request after the late reply waited {after_late} ms: {recs:?}");
    }
}
