//! Bulk flows (both ends use the same code) and the periodic sampler.
use crate::sys::{self, Received};
use bloatlab_host::clock;
use bloatlab_metrics::GapTracker;
use bloatlab_results::{Direction, Side, TcpInfoSample};
use socket2::SockRef;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

pub const BUF: usize = 128 * 1024;
/// A receiver's buffer. Smaller than the sender's: on loopback the
/// receiver's copy out of the socket dominates (`_copy_to_iter`), and with
/// 8 flows x 128 KiB of destination buffers it runs cache-cold, falls
/// behind, and its socket queue grows to 13-17 MB (iperf3's: 2-4 MB), which
/// makes the next copies colder still. 64 KiB: 8 uploads 23-36 Gbit/s
/// against 18-21 with 128 KiB, 1 flow 13-15 against 10-11 (AMD EPYC, 2
/// vCPUs, 3 alternating rounds each; docs/design.md).
pub const RECV_BUF: usize = 64 * 1024;

/// What a receiving flow measured.
#[derive(Debug, Clone, Copy, Default)]
pub struct RecvOutcome {
    pub bytes: u64,
    pub max_gap_ns: u64,
    pub max_gap_at_ns: u64,
    /// A UDP flow: what this end received (receiver) or sent (sender: `sent` only).
    pub udp: Option<bloatlab_results::UdpStats>,
}

/// A start signal every sender of a scenario waits on.
#[derive(Default)]
pub struct Gate {
    open: Mutex<bool>,
    cv: Condvar,
}

impl Gate {
    pub fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.cv.notify_all();
    }
    /// Wait until opened or `stop` is set; true = go.
    pub fn wait(&self, stop: &AtomicBool, limit: Duration) -> bool {
        let deadline = std::time::Instant::now() + limit;
        let mut g = self.open.lock().unwrap();
        while !*g {
            if stop.load(Ordering::Relaxed) || std::time::Instant::now() >= deadline {
                return false;
            }
            g = self.cv.wait_timeout(g, Duration::from_millis(20)).unwrap().0;
        }
        true
    }
}

/// How much a discarding receiver asks the kernel for per call. Nothing is
/// written to the buffer (MSG_TRUNC), so its size only sets the syscall rate.
const DISCARD_LEN: usize = 128 * 1024;

/// Read until EOF, error or stop; count bytes into `counter`; track arrival
/// gaps. `copy`: copy the data into a user-space buffer as an application
/// would; otherwise let the kernel discard it (`recv` with MSG_TRUNC, as
/// iperf3's `--skip-rx-copy`): the bytes are received, acknowledged and
/// counted alike, but the receiving host spends no CPU copying them. On
/// loopback that copy is a fifth of all CPU time (docs/design.md).
pub fn receive(s: TcpStream, counter: &AtomicU64, stop: &AtomicBool, copy: bool) -> RecvOutcome {
    let mut gaps = GapTracker::new();
    let mut total = 0u64;
    let mut on_data = |n: usize| {
        gaps.on_arrival(clock::now_ns());
        total += n as u64;
        counter.store(total, Ordering::Relaxed);
    };
    if copy {
        let (mut s, mut buf, mut at) = (s, vec![0u8; RECV_BUF], 0);
        // Each read fills the rest of the buffer and wraps around at its end
        // (as iperf3 fills its block): one flow on loopback moves ~25% more
        // than with a full-size read every time (36-40 vs 29-31 Gbit/s with
        // bbr, 4 rounds each; docs/design.md).
        read_loop(stop, &mut on_data, || {
            let n = s.read(&mut buf[at..])?;
            at = (at + n) % RECV_BUF;
            Ok(n)
        });
    } else {
        // Never written by the kernel under MSG_TRUNC, so never touched at all.
        let mut buf: Vec<u8> = Vec::with_capacity(DISCARD_LEN);
        let sock = SockRef::from(&s);
        read_loop(stop, &mut on_data, || sock.recv_with_flags(buf.spare_capacity_mut(), libc::MSG_TRUNC));
    }
    gaps.finish(clock::now_ns());
    RecvOutcome { bytes: total, max_gap_ns: gaps.max_gap_ns(), max_gap_at_ns: gaps.max_gap_at_ns(), udp: None }
}

/// Read with `read` until EOF, an error or `stop`; each read's byte count
/// goes to `on_data`. Timeouts and interrupts go on unless stopped.
fn read_loop(stop: &AtomicBool, on_data: &mut dyn FnMut(usize), mut read: impl FnMut() -> std::io::Result<usize>) {
    loop {
        match read() {
            Ok(0) => break,
            Ok(n) => on_data(n),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::Interrupted | std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(_) => break,
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
    }
}

/// Size and alignment of a transparent huge page on x86-64 and arm64 (4K pages).
const HUGE_PAGE: usize = 2 << 20;

/// What every sender of the process writes: [`BUF`] bytes of a fixed
/// non-zero pattern (nothing on the path can compress it to nothing), at
/// the start of a 2 MiB-aligned block advised as a transparent huge page
/// before its first touch, shared read-only by all senders.
///
/// The kernel's copy out of this buffer (`_copy_from_iter`) was the one
/// place where bloatlab's senders spent more per byte than iperf3's (26% of
/// samples at 36 Gbit/s against 18.5% at 43.9): with 4 KiB pages every
/// 128 KiB write walks 32 page translations, and in a VM each TLB miss is a
/// two-level walk. In one huge page, 8 uploads on loopback went from 36.2
/// to 46.8 Gbit/s (median of 6 alternating rounds; iperf3 --skip-rx-copy
/// 40.8; docs/design.md). Where the kernel gives no huge page the block is
/// ordinary memory of which only the first [`BUF`] bytes are ever touched.
/// The client and server call it once at normal priority before any flow:
/// first touched by a SCHED_IDLE sender on a saturated host, the 2 MiB
/// zeroing waited behind every other thread and stalled whole tests.
pub fn source() -> &'static [u8] {
    static SOURCE: std::sync::OnceLock<&'static [u8]> = std::sync::OnceLock::new();
    SOURCE.get_or_init(|| {
        // Twice the size so that an aligned block fits; zeroed memory this
        // large comes straight from mmap, untouched and so not yet resident.
        let all: &'static mut [u8] = Box::leak(vec![0u8; 2 * HUGE_PAGE].into_boxed_slice());
        let off = all.as_ptr().align_offset(HUGE_PAGE);
        let block = &mut all[off..off + HUGE_PAGE];
        sys::advise_huge_pages(block);
        for (i, b) in block[..BUF].iter_mut().enumerate() {
            *b = (i as u32).wrapping_mul(2654435761).to_be_bytes()[0];
        }
        &block[..BUF]
    })
}

/// Write until stop or error; returns the bytes written.
pub fn send(mut s: TcpStream, stop: &AtomicBool) -> u64 {
    let buf = source();
    let mut total = 0u64;
    while !stop.load(Ordering::Relaxed) {
        match s.write(buf) {
            Ok(0) => break,
            Ok(n) => total += n as u64,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => break,
        }
    }
    total
}

/// A stream segment, served: wait for the client's one-byte request, then
/// send exactly `n` bytes (counted in `counter` as they go) and no more.
/// Returns the bytes sent; a stop or a failed connection ends it early.
pub fn send_segment(mut s: TcpStream, n: u64, counter: &AtomicU64, stop: &AtomicBool) -> u64 {
    let mut req = [0u8; 1];
    loop {
        if stop.load(Ordering::Relaxed) {
            return 0;
        }
        match s.read(&mut req) {
            Ok(1) => break,
            Ok(_) => return 0,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::Interrupted | std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(_) => return 0,
        }
    }
    let buf = source();
    let mut total = 0u64;
    while total < n && !stop.load(Ordering::Relaxed) {
        let take = (n - total).min(buf.len() as u64) as usize;
        match s.write(&buf[..take]) {
            Ok(0) => break,
            Ok(k) => {
                total += k as u64;
                counter.fetch_add(k as u64, Ordering::Relaxed);
            }
            Err(e) if matches!(e.kind(), std::io::ErrorKind::Interrupted | std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(_) => break,
        }
    }
    total
}

/// Stop a flow from another thread: wakes blocked reads and writes.
pub fn kill(s: &TcpStream) {
    let _ = s.shutdown(Shutdown::Both);
}

/// A stop signal a sleeping thread hears at once. The sampler sleeps until
/// its next sample instead of polling a flag: every wake-up of a non-bulk
/// thread preempts a flow, and 4 threads waking every 5 ms cost one loopback
/// flow about a quarter of its goodput (docs/design.md).
#[derive(Default)]
pub struct Stop {
    set: Mutex<bool>,
    cv: Condvar,
}

impl Stop {
    pub fn stop(&self) {
        *self.set.lock().unwrap() = true;
        self.cv.notify_all();
    }
    pub fn is_set(&self) -> bool {
        *self.set.lock().unwrap()
    }
    /// Sleep until `deadline_ns` (a `clock::now_ns()` instant) or a stop;
    /// true when stopped.
    pub fn sleep_until_ns(&self, deadline_ns: u64) -> bool {
        let mut g = self.set.lock().unwrap();
        loop {
            if *g {
                return true;
            }
            let left = deadline_ns.saturating_sub(clock::now_ns());
            if left == 0 {
                return false;
            }
            g = self.cv.wait_timeout(g, Duration::from_nanos(left)).unwrap().0;
        }
    }
}

/// A scenario's byte totals as of the sampler's newest pass, at the instant
/// it read them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Totals {
    /// Passes so far (0 = none yet).
    pub seq: u64,
    /// `clock::now_ns()` at the end of the pass.
    pub t_ns: u64,
    /// Upload bytes: acknowledged (the sending end) or received (the receiving end).
    pub up_bytes: u64,
    pub down_bytes: u64,
}

/// The sampler's newest totals, for progress displays and interval lines.
/// Those used to read TCP_INFO of the sending sockets themselves every 50
/// ms: each read waits for the socket lock a sending thread holds, and both
/// pay a wake-up (~110 a second with 8 uploads), on top of the sampler's
/// own reads of the same values.
#[derive(Default)]
pub struct Latest {
    now: Mutex<Totals>,
    cv: Condvar,
}

impl Latest {
    fn publish(&self, t_ns: u64, up_bytes: u64, down_bytes: u64) {
        let mut g = self.now.lock().unwrap();
        *g = Totals { seq: g.seq + 1, t_ns, up_bytes, down_bytes };
        self.cv.notify_all();
    }

    /// The newest totals once a pass later than `seen` has published them,
    /// or whatever is newest after `timeout`.
    pub fn wait_newer(&self, seen: u64, timeout: Duration) -> Totals {
        let g = self.now.lock().unwrap();
        *self.cv.wait_timeout_while(g, timeout, |t| t.seq <= seen).unwrap().0
    }
}

/// The bytes that have reached a receiving socket, in sequence or held
/// out of order behind a hole, from its successive TCP_INFO readings. In-
/// sequence bytes alone stall while a loss is repaired and then jump by
/// everything held meanwhile (a 250 ms window read 45 Mbit/s through a 10
/// Mbit/s link). While no segment arrives out of order, every segment is in
/// sequence: the count is the in-sequence one, and the mean segment size is
/// learned. While segments arrive out of order, a hole is open: the count
/// adds the segments received since the last in-order reading at that size.
/// For live rates only; goodput is the in-sequence count.
#[derive(Debug, Default)]
pub struct Arrivals {
    last: Option<Received>,
    /// Data segments received (no wrap) and in-sequence bytes at the last
    /// reading with no out-of-order arrival.
    sync: (u64, u64),
    segs: u64,
    /// Mean payload of a segment, learned while in order.
    seg_bytes: f64,
    arrived: u64,
}

impl Arrivals {
    pub fn update(&mut self, r: Received) -> u64 {
        let Some(last) = self.last.replace(r) else {
            self.sync = (0, r.in_sequence);
            self.arrived = r.in_sequence;
            return r.in_sequence;
        };
        let new_segs = r.data_segs.wrapping_sub(last.data_segs) as u64;
        self.segs += new_segs;
        let estimate = if r.ooo_packets == last.ooo_packets {
            // every segment since the last reading arrived in order
            if new_segs > 0 && r.in_sequence > last.in_sequence {
                self.seg_bytes = (r.in_sequence - last.in_sequence) as f64 / new_segs as f64;
            }
            self.sync = (self.segs, r.in_sequence);
            r.in_sequence
        } else {
            let size = if self.seg_bytes > 0.0 { self.seg_bytes } else { r.rcv_mss as f64 };
            let since = (self.segs - self.sync.0) as f64 * size;
            r.in_sequence.max(self.sync.1 + since as u64)
        };
        // never backwards: a resync after an overestimate waits for the count
        self.arrived = self.arrived.max(estimate);
        self.arrived
    }
}

/// One flow as the sampler sees it.
pub struct Sampled {
    pub id: u32,
    pub direction: Direction,
    /// True when this end receives (count bytes), false when it sends
    /// (TCP_INFO; a UDP sender's `counter` holds the receiver's receipts).
    pub receiving: bool,
    /// A TCP flow (a UDP flow's sender has no TCP_INFO worth sampling).
    pub tcp: bool,
    pub sock: TcpStream,
    pub counter: Arc<AtomicU64>,
}

#[derive(Debug, Default, Clone)]
pub struct FlowSamples {
    pub goodput: Vec<(u64, u64)>,
    pub tcp_info: Vec<TcpInfoSample>,
}

/// Sample every `interval` until `stop`, then once more. Times are
/// `clock::now_ns()`. After each pass the totals per direction go to `latest`.
pub fn sample_loop(flows: &[Sampled], interval: Duration, stop: &Stop, side: Side, latest: Option<&Latest>) -> Vec<FlowSamples> {
    let mut out = vec![FlowSamples::default(); flows.len()];
    let mut arrivals: Vec<Arrivals> = (0..flows.len()).map(|_| Arrivals::default()).collect();
    let step = interval.as_nanos() as u64;
    let mut next = clock::now_ns();
    loop {
        let done = stop.is_set();
        let t = clock::now_ns();
        let mut totals = [0u64; 2];
        let mut add = |d: Direction, bytes: u64| totals[usize::from(d == Direction::Down)] += bytes;
        for (i, f) in flows.iter().enumerate() {
            if f.receiving {
                // A TCP receiver counts what its kernel received in
                // sequence, not what the application has read so far: a
                // reader that lags (a busy host, many flows) would move
                // bytes between sampling windows. The application's count
                // where the kernel has none (UDP, old kernels). Each read
                // carries its own instant (`clock::stamped`): one time for a
                // whole pass would be off by however long the pass took to
                // reach this flow, more so when the thread is preempted
                // midway through many flows.
                let mut arrived = 0;
                let s = clock::stamped(clock::now_ns, || match f.tcp.then(|| sys::tcp_received(&f.sock)).flatten() {
                    Some(r) => {
                        arrived = arrivals[i].update(r);
                        r.in_sequence
                    }
                    None => f.counter.load(Ordering::Relaxed),
                });
                // live totals count data when it arrives ([`Arrivals`])
                add(f.direction, arrived.max(s.1));
                out[i].goodput.push(s);
            } else if !f.tcp {
                // A UDP flow's sender: the receiver's newest receipt, for
                // the live totals only (the result takes the receiver's samples).
                add(f.direction, f.counter.load(Ordering::Relaxed));
            } else if let Some(info) = sys::tcp_info(&f.sock, t, side) {
                add(f.direction, info.delivered_bytes());
                out[i].tcp_info.push(info);
            }
        }
        if let Some(l) = latest {
            l.publish(clock::now_ns(), totals[0], totals[1]);
        }
        if done {
            break;
        }
        next += step;
        stop.sleep_until_ns(next);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every sender writes the one shared pattern block: huge-page aligned,
    /// incompressible, and what the peer receives byte for byte.
    #[test]
    fn senders_share_one_aligned_pattern_block() {
        let a = source();
        assert_eq!(a.as_ptr(), source().as_ptr(), "one block per process");
        assert_eq!(a.len(), BUF);
        assert_eq!(a.as_ptr() as usize % HUGE_PAGE, 0);
        let distinct: std::collections::HashSet<u8> = a.iter().copied().collect();
        assert!(distinct.len() > 200, "a pattern of {} byte values", distinct.len());
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut r, _) = l.accept().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let (st, c2) = (stop.clone(), c.try_clone().unwrap());
        let sender = std::thread::spawn(move || send(c2, &st));
        let mut got = vec![0u8; 2 * BUF + 1000];
        r.read_exact(&mut got).unwrap();
        stop.store(true, Ordering::Relaxed);
        kill(&c);
        drop(r);
        assert!(sender.join().unwrap() >= got.len() as u64);
        for (i, b) in got.iter().enumerate() {
            assert_eq!(*b, a[i % BUF], "byte {i}");
        }
    }

    /// Both receive paths count exactly the bytes the peer sent and end at
    /// its FIN; the discarding one without ever touching a user buffer.
    #[test]
    fn receivers_count_every_byte_copying_or_discarding() {
        for copy in [true, false] {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = l.local_addr().unwrap();
            let n = 5 * 1024 * 1024 + 123;
            let writer = std::thread::spawn(move || {
                let mut c = TcpStream::connect(addr).unwrap();
                let chunk = vec![7u8; 100_000];
                let mut left = n;
                while left > 0 {
                    let k = left.min(chunk.len());
                    c.write_all(&chunk[..k]).unwrap();
                    left -= k;
                }
            });
            let (s, _) = l.accept().unwrap();
            s.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
            let counter = AtomicU64::new(0);
            let o = receive(s, &counter, &AtomicBool::new(false), copy);
            writer.join().unwrap();
            assert_eq!(o.bytes, n as u64, "copy={copy}");
            assert_eq!(counter.load(Ordering::Relaxed), n as u64, "copy={copy}");
            assert!(o.max_gap_ns > 0, "copy={copy}: no arrival gap tracked");
        }
    }

    /// The newest totals wake a waiter at once; with nothing newer it gets
    /// what it saw after its timeout.
    #[test]
    fn latest_totals_wake_a_waiter_and_time_out_otherwise() {
        let l = Arc::new(Latest::default());
        let l2 = l.clone();
        let h = std::thread::spawn(move || l2.wait_newer(0, Duration::from_secs(10)));
        std::thread::sleep(Duration::from_millis(50));
        l.publish(123, 10, 20);
        let t = h.join().unwrap();
        assert_eq!(t, Totals { seq: 1, t_ns: 123, up_bytes: 10, down_bytes: 20 });
        let t0 = std::time::Instant::now();
        assert_eq!(l.wait_newer(1, Duration::from_millis(30)).seq, 1);
        assert!(t0.elapsed() >= Duration::from_millis(29));
    }

    /// A hole's held data counts as it arrives, not when the hole fills;
    /// in order, the count is the in-sequence one (loopback's varying
    /// segment sizes included).
    #[test]
    fn arrivals_count_held_data_when_it_arrives() {
        let r = |in_sequence: u64, data_segs: u32, ooo_packets: u32| Received { in_sequence, data_segs, ooo_packets, rcv_mss: 1448 };
        let mut a = Arrivals::default();
        assert_eq!(a.update(r(0, 0, 0)), 0);
        assert_eq!(a.update(r(14480, 10, 0)), 14480, "in order: the in-sequence count");
        // a segment is lost; 9 more arrive out of order, then 10 more
        assert_eq!(a.update(r(14480, 19, 9)), 14480 + 9 * 1448);
        assert_eq!(a.update(r(14480, 29, 19)), 14480 + 19 * 1448);
        // the retransmission fills the hole: everything is in sequence
        assert_eq!(a.update(r(14480 + 20 * 1448, 30, 19)), 14480 + 20 * 1448);
        assert_eq!(a.update(r(14480 + 30 * 1448, 40, 19)), 14480 + 30 * 1448);
        // loopback: segments of any size, always in order, never an estimate
        let mut a = Arrivals::default();
        let mut b = 0;
        for k in 1..100u32 {
            b += 65_483 - (k as u64 * 977) % 30_000;
            assert_eq!(a.update(Received { in_sequence: b, data_segs: k * 3, ooo_packets: 0, rcv_mss: 65_483 }), b);
        }
        // data_segs wraps
        let mut a = Arrivals::default();
        a.update(r(0, u32::MAX - 1, 0));
        assert_eq!(a.update(r(4 * 1448, 2, 0)), 4 * 1448);
        assert_eq!(a.update(r(4 * 1448, 5, 3)), 7 * 1448);
    }

    /// The sampler publishes each pass's totals per direction: bytes
    /// received by a receiving flow, bytes acknowledged for a sending one.
    #[test]
    fn the_sampler_publishes_totals_per_direction() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        c.write_all(&vec![1u8; 300_000]).unwrap();
        let mut got = vec![0u8; 300_000];
        s.read_exact(&mut got).unwrap();
        let flows = vec![
            Sampled { id: 0, direction: Direction::Up, receiving: false, tcp: true, sock: c.try_clone().unwrap(), counter: Arc::default() },
            Sampled { id: 1, direction: Direction::Down, receiving: true, tcp: true, sock: s.try_clone().unwrap(), counter: Arc::default() },
        ];
        let stop = Stop::default();
        stop.stop();
        let latest = Latest::default();
        let out = sample_loop(&flows, Duration::from_millis(10), &stop, Side::Client, Some(&latest));
        assert_eq!(out.len(), 2);
        let t = latest.wait_newer(0, Duration::ZERO);
        assert_eq!(t.seq, 1, "one pass after a stop");
        // The sender's 300,000 bytes were acked (tcpi_bytes_acked counts the
        // SYN too); the receiver's kernel received them.
        assert_eq!((t.up_bytes, t.down_bytes), (300_001, 300_000));
    }

    /// A stop ends a receiver whose peer keeps the connection open (its
    /// reads time out and see the flag).
    #[test]
    fn a_stop_ends_an_idle_receiver() {
        for copy in [true, false] {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let _c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
            let (s, _) = l.accept().unwrap();
            s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
            let stop = Arc::new(AtomicBool::new(false));
            let st = stop.clone();
            let h = std::thread::spawn(move || receive(s, &AtomicU64::new(0), &st, copy).bytes);
            std::thread::sleep(Duration::from_millis(150));
            assert!(!h.is_finished(), "copy={copy}: ended without a stop");
            stop.store(true, Ordering::Relaxed);
            let t0 = std::time::Instant::now();
            while !h.is_finished() {
                assert!(t0.elapsed() < Duration::from_secs(5), "copy={copy}: the stop was not seen");
                std::thread::sleep(Duration::from_millis(10));
            }
            assert_eq!(h.join().unwrap(), 0);
        }
    }

    #[test]
    fn a_stop_wakes_a_sleeper_at_once() {
        let s = Arc::new(Stop::default());
        let s2 = s.clone();
        let t0 = std::time::Instant::now();
        let h = std::thread::spawn(move || s2.sleep_until_ns(clock::now_ns() + 10_000_000_000));
        std::thread::sleep(Duration::from_millis(50));
        assert!(!s.is_set());
        s.stop();
        assert!(h.join().unwrap(), "the sleeper did not see the stop");
        assert!(t0.elapsed() < Duration::from_secs(5), "the sleeper slept on: {:?}", t0.elapsed());
        // A deadline in the past returns at once, not stopped.
        assert!(!Stop::default().sleep_until_ns(0));
        let t1 = std::time::Instant::now();
        assert!(!Stop::default().sleep_until_ns(clock::now_ns() + 30_000_000));
        assert!(t1.elapsed() >= Duration::from_millis(29), "woke early: {:?}", t1.elapsed());
    }
}
