//! The data path: one thread per direction, each owning one TUN device and
//! one [`Link`]. A thread reads packets in batches (non-blocking reads until
//! the device is empty or `batch` packets were taken), stamps each with the
//! monotonic clock on arrival, runs the link model, and writes packets back
//! into the same TUN device when their release time comes (the kernel then
//! forwards them by the main routing table).
//!
//! Timer strategy (configurable, see [`TimerMode`]): by default the thread
//! sleeps in `ppoll` (woken early by arriving packets) until `spin_ns` before
//! the next deadline, with the thread's timer slack set to 1 ns, and then
//! spins. The lateness of every release (write time - release time) is
//! recorded and reported as `release_error`.

use crate::config::{DirectionConfig, TimerMode};
use crate::link::{LinkCounters, LogHist, Link};
use crate::packet::Packet;
use crate::qdisc::Counters;
use crate::tun::Tun;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};

pub use bloatlab_host::clock::{mono_ns, realtime_ns as unix_ns, MonoToUnix as Clock};

/// One time-series sample of a direction.
#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    /// Unix ns (convert to a result's test clock with `unix_ns - metadata.start_unix_ns`).
    pub t_unix_ns: u64,
    pub backlog_packets: u64,
    pub backlog_bytes: u64,
    /// Packets propagating in the delay line.
    pub in_flight: u64,
    /// Cumulative counters.
    pub enqueued: u64,
    pub dequeued: u64,
    pub dequeued_bytes: u64,
    pub dropped: u64,
    pub dropped_overlimit: u64,
    pub dropped_head: u64,
    pub dropped_aqm: u64,
    pub ecn_marked: u64,
    pub lost: u64,
    pub delivered: u64,
    /// Sojourn time of packets dequeued during the interval: max and mean, us.
    pub sojourn_max_us: f64,
    pub sojourn_mean_us: f64,
}

/// What a direction thread hands back when it stops.
#[derive(Debug)]
pub struct DirectionReport {
    pub name: String,
    pub tun: String,
    pub config: DirectionConfig,
    pub qdisc_kind: &'static str,
    pub qdisc: Counters,
    pub qdisc_details: serde_json::Value,
    pub link: LinkCounters,
    pub sojourn: LogHist,
    pub release_error: LogHist,
    pub samples: Vec<Sample>,
    pub packets_read: u64,
    pub bytes_read: u64,
    pub read_batches: u64,
    pub max_batch: u64,
    pub write_errors: u64,
    pub last_write_error: Option<String>,
    pub oversize_truncated: u64,
    pub backlog_packets_at_stop: u64,
    pub in_flight_at_stop: u64,
    pub cpu_ns: u64,
    /// Why the direction stopped on its own (a read error), if it did.
    pub fatal_error: Option<String>,
    /// Largest packet read (bytes of IP packet; > MTU means GSO packets passed through).
    pub max_packet: u64,
    /// Whether the TUN device passes offloaded packets.
    pub offload: bool,
    /// Deadlines that were slept to instead of spun to, because the spin budget was used up.
    pub spin_limited: u64,
    /// Why SCHED_FIFO could not be set, if it was asked for and failed.
    pub rt_error: Option<String>,
    /// Kernel counters of the TUN device at stop: (rx_packets, rx_drop, tx_packets, tx_drop).
    pub kernel_tun: Option<(u64, u64, u64, u64)>,
}

/// Knobs of a direction thread.
#[derive(Debug, Clone)]
pub struct RunOpts {
    pub timer: TimerMode,
    pub spin_ns: u64,
    pub batch: usize,
    pub sample_interval_ns: u64,
    /// Buffer size per packet (>= the device MTU).
    pub buf_size: usize,
    pub seed: u64,
    pub rt_priority: u32,
}

use bloatlab_host::clock::thread_cpu_ns;
use bloatlab_host::poll::{readable_now, wait_readable};

/// Spinning is limited to SPIN_MAX_PERCENT of every SPIN_WINDOW_NS (sleep-spin mode).
const SPIN_WINDOW_NS: u64 = 10_000_000;
const SPIN_MAX_PERCENT: u64 = 50;

/// Run one direction until `stop` is set. `name` is "up" or "down".
pub fn run_direction(name: &str, tun: Tun, cfg: DirectionConfig, opts: RunOpts, clock: Clock, stop: &AtomicBool) -> DirectionReport {
    // 1 ns timer slack: ppoll timeouts fire when asked, not up to 50 us later
    bloatlab_host::sched::set_current_thread_timer_slack(1);
    let mut rt_error = None;
    // a spinning real-time thread would starve its CPU (and then be throttled
    // by the kernel for tens of ms): never real-time in pure spin mode
    if opts.rt_priority > 0 && opts.timer != TimerMode::Spin {
        if let Err(e) = bloatlab_host::sched::make_current_thread_realtime(opts.rt_priority) {
            rt_error = Some(e.to_string());
        }
    }
    let cpu0 = thread_cpu_ns();
    let mut d = Datapath::new(&tun, &cfg, &opts, clock);
    loop {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        d.release_due(&tun);
        let got = d.read_batch(&tun);
        if d.fatal.is_some() {
            // the device is gone or broken: stop the whole emulator (it writes its statistics)
            stop.store(true, Ordering::SeqCst);
            break;
        }
        let now = d.advance();
        d.sample(now);
        if got > 0 {
            continue; // more may be waiting: read again before sleeping
        }
        d.wait(&tun);
    }
    let link = &d.link;
    DirectionReport {
        name: name.to_string(),
        tun: tun.name().to_string(),
        qdisc_kind: link.qdisc.kind(),
        qdisc: link.qdisc.counters().clone(),
        qdisc_details: link.qdisc.details(),
        link: link.counters.clone(),
        sojourn: link.sojourn.clone(),
        backlog_packets_at_stop: link.qdisc.backlog_packets() as u64,
        in_flight_at_stop: link.in_flight() as u64,
        config: cfg,
        release_error: d.release_error,
        samples: d.samples,
        packets_read: d.seq,
        bytes_read: d.bytes_read,
        read_batches: d.batches,
        max_batch: d.max_batch,
        write_errors: d.write_errors,
        last_write_error: d.last_write_error,
        oversize_truncated: d.truncated,
        cpu_ns: thread_cpu_ns() - cpu0,
        kernel_tun: bloatlab_host::proc_net_dev(tun.name()),
        rt_error,
        spin_limited: d.spin_limited,
        max_packet: d.max_packet,
        fatal_error: d.fatal,
        offload: tun.offload(),
    }
}

/// One direction's datapath between its TUN device and its [`Link`]: each
/// pass releases what is due, reads a batch of arrivals, runs the
/// serializer to now, samples, and waits for the next deadline or arrival.
struct Datapath {
    link: Link,
    opts: RunOpts,
    clock: Clock,
    /// Bytes of virtio-net header before each frame (offloads on).
    hdr: usize,
    buf_size: usize,
    /// Packet buffers to reuse.
    pool: Vec<Box<[u8]>>,
    garbage: Vec<Packet>,
    release_error: LogHist,
    samples: Vec<Sample>,
    next_sample: u64,
    seq: u64,
    bytes_read: u64,
    batches: u64,
    max_batch: u64,
    write_errors: u64,
    truncated: u64,
    last_write_error: Option<String>,
    max_packet: u64,
    fatal: Option<String>,
    /// Sojourn count and sum at the last sample (per-interval means).
    soj_n: u64,
    soj_sum: u128,
    spin_window_start: u64,
    spin_used: u64,
    spin_limited: u64,
}

impl Datapath {
    fn new(tun: &Tun, cfg: &DirectionConfig, opts: &RunOpts, clock: Clock) -> Datapath {
        let start = mono_ns();
        let hdr = if tun.offload() { crate::tun::VNET_HDR_LEN } else { 0 };
        let buf_size = if tun.offload() { 65536 + hdr + 64 } else { opts.buf_size };
        Datapath {
            link: Link::new(cfg, opts.seed, start),
            opts: opts.clone(),
            clock,
            hdr,
            buf_size,
            pool: (0..256).map(|_| vec![0u8; buf_size].into_boxed_slice()).collect(),
            garbage: Vec::new(),
            release_error: LogHist::default(),
            samples: Vec::new(),
            next_sample: start,
            seq: 0,
            bytes_read: 0,
            batches: 0,
            max_batch: 0,
            write_errors: 0,
            truncated: 0,
            last_write_error: None,
            max_packet: 0,
            fatal: None,
            soj_n: 0,
            soj_sum: 0,
            spin_window_start: 0,
            spin_used: 0,
            spin_limited: 0,
        }
    }

    /// 1. Write out the packets whose release time has come.
    #[inline]
    fn release_due(&mut self, tun: &Tun) {
        let mut now = mono_ns();
        while let Some(p) = self.link.pop_ready(now) {
            self.release_error.record(now.saturating_sub(p.release_ns));
            if let Err(e) = tun.write(p.frame()) {
                self.write_errors += 1;
                self.last_write_error = Some(e.to_string());
            }
            self.pool.push(p.buf);
            now = mono_ns();
        }
    }

    /// 2. Read up to a batch of arrivals into the link; how many came.
    #[inline]
    fn read_batch(&mut self, tun: &Tun) -> u64 {
        let mut got = 0u64;
        while (got as usize) < self.opts.batch {
            let mut buf = self.pool.pop().unwrap_or_else(|| vec![0u8; self.buf_size].into_boxed_slice());
            match tun.read(&mut buf) {
                Ok(n) => {
                    let t = mono_ns();
                    if n >= buf.len() {
                        self.truncated += 1;
                    }
                    self.bytes_read += n.saturating_sub(self.hdr) as u64;
                    let mut p = Packet::with_header(buf, self.hdr, n, t);
                    if p.size() > self.max_packet {
                        self.max_packet = p.size();
                    }
                    p.seq = self.seq;
                    self.seq += 1;
                    self.link.arrive(p, t);
                    got += 1;
                }
                Err(e) => {
                    self.pool.push(buf);
                    match e.kind() {
                        std::io::ErrorKind::Interrupted => continue,
                        std::io::ErrorKind::WouldBlock => {}
                        _ => self.fatal = Some(format!("reading {}: {e}", tun.name())),
                    }
                    break;
                }
            }
        }
        if got > 0 {
            self.batches += 1;
            self.max_batch = self.max_batch.max(got);
        }
        got
    }

    /// 3. Run the serializer to now and recycle the dropped packets' buffers.
    #[inline]
    fn advance(&mut self) -> u64 {
        let now = mono_ns();
        self.link.advance(now);
        self.link.take_garbage(&mut self.garbage);
        for p in self.garbage.drain(..) {
            self.pool.push(p.buf);
        }
        now
    }

    /// 4. A sample of the queue and link counters when one is due.
    #[inline]
    fn sample(&mut self, now: u64) {
        if now < self.next_sample {
            return;
        }
        let link = &mut self.link;
        let dn = link.sojourn.n - self.soj_n;
        let dsum = link.sojourn.sum - self.soj_sum;
        let imax = link.take_interval_sojourn_max();
        self.soj_n = link.sojourn.n;
        self.soj_sum = link.sojourn.sum;
        let c = link.qdisc.counters();
        self.samples.push(Sample {
            t_unix_ns: self.clock.to_unix(now),
            backlog_packets: link.qdisc.backlog_packets() as u64,
            backlog_bytes: link.qdisc.backlog_bytes(),
            in_flight: link.in_flight() as u64,
            enqueued: c.enqueued,
            dequeued: c.dequeued,
            dequeued_bytes: c.dequeued_bytes,
            dropped: c.dropped,
            dropped_overlimit: c.dropped_overlimit,
            dropped_head: c.dropped_head,
            dropped_aqm: c.dropped_aqm,
            ecn_marked: c.ecn_marked,
            lost: link.counters.lost,
            delivered: link.counters.delivered,
            sojourn_max_us: imax as f64 / 1e3,
            sojourn_mean_us: if dn > 0 { dsum as f64 / dn as f64 / 1e3 } else { 0.0 },
        });
        let interval = self.opts.sample_interval_ns;
        self.next_sample += interval;
        if self.next_sample <= now {
            self.next_sample = now + interval;
        }
    }

    /// 5. Wait for the next deadline or an arrival, as the timer mode says.
    #[inline]
    fn wait(&mut self, tun: &Tun) {
        let deadline = self.link.next_event().unwrap_or(u64::MAX).min(self.next_sample);
        let now = mono_ns();
        if deadline <= now {
            return;
        }
        let fd = tun.raw_fd();
        let remaining = (deadline - now).min(50_000_000);
        match self.opts.timer {
            TimerMode::Spin => {}
            TimerMode::Sleep => {
                wait_readable(fd, remaining);
            }
            TimerMode::SleepSpin => {
                if now >= self.spin_window_start + SPIN_WINDOW_NS {
                    self.spin_window_start = now;
                    self.spin_used = 0;
                }
                if remaining > self.opts.spin_ns {
                    wait_readable(fd, remaining - self.opts.spin_ns);
                } else if self.spin_used + remaining > SPIN_WINDOW_NS * SPIN_MAX_PERCENT / 100 {
                    // spin budget of this window used up: sleep the rest
                    self.spin_limited += 1;
                    wait_readable(fd, remaining);
                } else {
                    // spin to the deadline, leaving early if a packet arrives
                    let t0 = mono_ns();
                    while mono_ns() < deadline && !readable_now(fd) {
                        std::hint::spin_loop();
                    }
                    self.spin_used += mono_ns() - t0;
                }
            }
        }
    }
}

impl DirectionReport {
    /// The counters JSON of this direction (see docs/emulator.md).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "tun": self.tun,
            "config": self.config,
            "description": self.config.describe(),
            "qdisc": self.qdisc_kind,
            "queue": self.qdisc,
            "queue_details": self.qdisc_details,
            "link": self.link,
            "sojourn": self.sojourn.to_json_us(),
            "release_error": self.release_error.to_json_us(),
            "packets_read": self.packets_read,
            "bytes_read": self.bytes_read,
            "read_batches": self.read_batches,
            "max_batch": self.max_batch,
            "write_errors": self.write_errors,
            "last_write_error": self.last_write_error,
            "truncated_reads": self.oversize_truncated,
            "backlog_packets_at_stop": self.backlog_packets_at_stop,
            "in_flight_at_stop": self.in_flight_at_stop,
            "cpu_s": self.cpu_ns as f64 / 1e9,
            "rt_error": self.rt_error,
            "spin_limited": self.spin_limited,
            "offload": self.offload,
            "fatal_error": self.fatal_error,
            "max_packet_bytes": self.max_packet,
            "series": self.samples,
        })
    }

    /// The time series as a result-schema queue series (t_ns = Unix ns; see docs).
    pub fn queue_series(&self, location: &str) -> bloatlab_results::QueueSeries {
        bloatlab_results::QueueSeries {
            role: format!("bottleneck-{}", self.name),
            location: location.to_string(),
            qdisc: format!("{} (emulator)", self.qdisc_kind),
            samples: self
                .samples
                .iter()
                .map(|s| bloatlab_results::QueueSample {
                    t_ns: s.t_unix_ns,
                    backlog_packets: s.backlog_packets,
                    backlog_bytes: s.backlog_bytes,
                    drops: s.dropped,
                    overlimits: s.ecn_marked,
                    sent_packets: s.dequeued,
                    sent_bytes: s.dequeued_bytes,
                    requeues: 0,
                })
                .collect(),
        }
    }
}
