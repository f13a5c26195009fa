//! Isochronous UDP probes and the sequential TCP request/response probe.
//! Each runs on its own threads with blocking sockets, so a reply is
//! timestamped as soon as the kernel hands it over (no async scheduler delay).
use bloatlab_host::clock;
use bloatlab_model::Secret;
use bloatlab_wire::{self as wire, Probe, ProbeKind};
use std::io::{Read, Write};
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
    stop_recv: Arc<AtomicBool>,
    last_rtt_ns: Arc<AtomicU64>,
    /// Replies stamped by the kernel (SO_TIMESTAMPNS) / by a clock read after recv.
    pub kernel_stamped: Arc<AtomicU64>,
    pub user_stamped: Arc<AtomicU64>,
    sender: Option<JoinHandle<()>>,
    receiver: Option<JoinHandle<()>>,
}

impl ProbeStream {
    /// Probe k is due at `first_due_ns + k x interval` (`clock::now_ns()` time base).
    /// With `secret` every request carries its HMAC; with `verify` too, a
    /// reply counts only with the server's valid HMAC (an authenticated
    /// server signs its replies).
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        target: SocketAddr,
        token: u64,
        stream: u32,
        first_due_ns: u64,
        interval: Duration,
        size: usize,
        secret: Option<Secret>,
        verify: bool,
    ) -> std::io::Result<ProbeStream> {
        let verify = if verify { secret.clone() } else { None };
        let bind: SocketAddr = if target.is_ipv6() { "[::]:0".parse().unwrap() } else { "0.0.0.0:0".parse().unwrap() };
        let sock = UdpSocket::bind(bind)?;
        sock.connect(target)?;
        sock.set_read_timeout(Some(Duration::from_millis(20)))?;
        let rsock = sock.try_clone()?;
        crate::sys::enable_rx_timestamps(&rsock);
        let records = Arc::new(Mutex::new(Vec::<Exchange>::with_capacity(4096)));
        let stop_send = Arc::new(AtomicBool::new(false));
        let stop_recv = Arc::new(AtomicBool::new(false));
        let last_rtt_ns = Arc::new(AtomicU64::new(0));
        let (rec, ss) = (records.clone(), stop_send.clone());
        let sender = thread::Builder::new().name("probe-tx".into()).spawn(move || {
            let step = interval.as_nanos() as u64;
            let mut buf = vec![0u8; size];
            let start = first_due_ns;
            let mut seq: u32 = 0;
            while !ss.load(Ordering::Relaxed) {
                let due = start + seq as u64 * step;
                // Sleep in slices so a stop is seen quickly even with long intervals.
                while clock::now_ns() < due && !ss.load(Ordering::Relaxed) {
                    let left = due.saturating_sub(clock::now_ns()).min(20_000_000);
                    thread::sleep(Duration::from_nanos(left));
                }
                if ss.load(Ordering::Relaxed) {
                    break;
                }
                let t1 = clock::now_ns();
                let p = Probe { kind: ProbeKind::Request, token, seq, stream, client_send_ns: t1, server_recv_ns: 0, server_send_ns: 0 };
                p.encode_into(&mut buf).expect("size >= header checked by the caller");
                if let Some(k) = &secret {
                    wire::sign_probe(&mut buf, k).expect("size >= 64 checked by the config");
                }
                rec.lock().unwrap().push(Exchange { t1, ..Default::default() });
                // A send error (e.g. ICMP unreachable reported) counts as a lost probe.
                let _ = sock.send(&buf);
                seq = seq.wrapping_add(1);
            }
        })?;
        let (rec, sr, last) = (records.clone(), stop_recv.clone(), last_rtt_ns.clone());
        let kernel_stamped = Arc::new(AtomicU64::new(0));
        let user_stamped = Arc::new(AtomicU64::new(0));
        let (ks, us) = (kernel_stamped.clone(), user_stamped.clone());
        let receiver = thread::Builder::new().name("probe-rx".into()).spawn(move || {
            let mut buf = [0u8; 2048];
            while !sr.load(Ordering::Relaxed) {
                let (n, kts) = match crate::sys::recv_stamped(&rsock, &mut buf) {
                    Ok((n, _, kts)) => (n, kts),
                    Err(_) => continue,
                };
                // The kernel's receive stamp when available (no wake-up latency).
                let t4 = kts.map(clock::from_realtime).unwrap_or_else(clock::now_ns);
                if kts.is_some() { &ks } else { &us }.fetch_add(1, Ordering::Relaxed);
                let Ok(p) = Probe::decode(&buf[..n]) else { continue };
                if p.kind != ProbeKind::Reply || p.token != token || p.stream != stream {
                    continue;
                }
                if verify.as_ref().is_some_and(|k| !wire::probe_signed(&buf[..n], k)) {
                    continue;
                }
                let mut r = rec.lock().unwrap();
                if let Some(e) = r.get_mut(p.seq as usize) {
                    if !e.answered() && e.t1 == p.client_send_ns {
                        e.t2 = p.server_recv_ns;
                        e.t3 = p.server_send_ns;
                        e.t4 = t4;
                        if let Some(rtt) = e.rtt_ns() {
                            last.store(rtt, Ordering::Relaxed);
                        }
                    }
                }
            }
        })?;
        Ok(ProbeStream {
            records,
            stop_send,
            stop_recv,
            last_rtt_ns,
            kernel_stamped,
            user_stamped,
            sender: Some(sender),
            receiver: Some(receiver),
        })
    }

    /// Latest measured RTT (for progress display), ns; 0 = none yet.
    pub fn last_rtt_ns(&self) -> u64 {
        self.last_rtt_ns.load(Ordering::Relaxed)
    }

    /// Stop sending, wait up to `drain` for outstanding replies, and return every exchange.
    pub fn finish(mut self, drain: Duration) -> Vec<Exchange> {
        self.stop_send.store(true, Ordering::SeqCst);
        if let Some(h) = self.sender.take() {
            let _ = h.join();
        }
        let deadline = clock::now_ns() + drain.as_nanos() as u64;
        while clock::now_ns() < deadline {
            if self.records.lock().unwrap().iter().all(|e| e.answered()) {
                break;
            }
            thread::sleep(Duration::from_millis(10));
        }
        self.stop_recv.store(true, Ordering::SeqCst);
        if let Some(h) = self.receiver.take() {
            let _ = h.join();
        }
        std::mem::take(&mut *self.records.lock().unwrap())
    }
}

/// One request/response exchange: (request time unix ns, duration ns, completed).
pub type RrRecord = (u64, u64, bool);

pub struct RrProbe {
    records: Arc<Mutex<Vec<RrRecord>>>,
    stop: Arc<AtomicBool>,
    sock: TcpStream,
    handle: Option<JoinHandle<()>>,
}

impl RrProbe {
    /// `sock` has completed the JoinRr exchange. Requests go out every
    /// `interval`, or right after the previous reply when that took longer.
    /// The first request is due at `first_due_ns` (`clock::now_ns()` time base).
    pub fn start(sock: TcpStream, first_due_ns: u64, interval: Duration) -> std::io::Result<RrProbe> {
        let mut s = sock.try_clone()?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(Duration::from_millis(20)))?;
        let records = Arc::new(Mutex::new(Vec::with_capacity(4096)));
        let stop = Arc::new(AtomicBool::new(false));
        let (rec, st) = (records.clone(), stop.clone());
        let handle = thread::Builder::new().name("rr".into()).spawn(move || {
            let step = interval.as_nanos() as u64;
            // Keep the phase of the schedule but skip slots already past.
            let now = clock::now_ns();
            let mut next = if first_due_ns >= now || step == 0 {
                first_due_ns
            } else {
                first_due_ns + (now - first_due_ns).div_ceil(step) * step
            };
            let mut seq = 0u32;
            'outer: while !st.load(Ordering::Relaxed) {
                while clock::now_ns() < next && !st.load(Ordering::Relaxed) {
                    thread::sleep(Duration::from_nanos(next.saturating_sub(clock::now_ns()).min(20_000_000)));
                }
                if st.load(Ordering::Relaxed) {
                    break;
                }
                let t = clock::now_ns();
                if s.write_all(&wire::encode_rr(seq)).is_err() {
                    break;
                }
                let mut b = [0u8; wire::RR_SIZE];
                let mut have = 0;
                while have < b.len() {
                    match s.read(&mut b[have..]) {
                        Ok(0) => {
                            rec.lock().unwrap().push((t, clock::now_ns() - t, false));
                            break 'outer;
                        }
                        Ok(n) => have += n,
                        Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut | std::io::ErrorKind::Interrupted) => {
                            if st.load(Ordering::Relaxed) {
                                rec.lock().unwrap().push((t, clock::now_ns() - t, false));
                                break 'outer;
                            }
                        }
                        Err(_) => {
                            rec.lock().unwrap().push((t, clock::now_ns() - t, false));
                            break 'outer;
                        }
                    }
                }
                let done = clock::now_ns();
                rec.lock().unwrap().push((t, done - t, true));
                seq = seq.wrapping_add(1);
                next = (next + step).max(done);
            }
        })?;
        Ok(RrProbe { records, stop, sock, handle: Some(handle) })
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
