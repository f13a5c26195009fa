//! One direction of the emulated link, as a discrete-event model with no I/O:
//!
//! ```text
//! arrive -> queue discipline -> serializer (fixed rate | mahimahi trace | unlimited)
//!        -> random loss ("lost on the wire") -> delay line (delay + jitter) -> release
//! ```
//!
//! Time is in nanoseconds on the caller's monotonic clock. The caller (the data
//! path, or a test) feeds arrivals with [`Link::arrive`] in time order, calls
//! [`Link::advance`] to run the serializer up to "now", sleeps until
//! [`Link::next_event`], and takes due packets with [`Link::pop_ready`].
//! The serializer dequeues from the discipline at the exact instant the link
//! becomes free (not when the thread happens to wake), so AQM sojourn times
//! and drop decisions are those of an ideal link.

use crate::config::{DirectionConfig, JitterDist, JitterSpec, LossSpec, RateSpec};
use crate::packet::Packet;
use crate::qdisc::{DropReason, Qdisc};
use crate::rng::Rng;
use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

enum Rate {
    Unlimited,
    Fixed { bps: u64, busy_until: u64 },
    Trace {
        /// opportunity offsets within one period, ns
        opps: Vec<u64>,
        period: u64,
        /// start of the current period
        base: u64,
        idx: usize,
        bytes_per_opp: u64,
        /// packet partly sent in earlier opportunities: (packet, start time, wire bytes left)
        in_flight: Option<(Packet, u64, u64)>,
    },
}

struct Held(Packet);
impl PartialEq for Held {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Held {}
impl PartialOrd for Held {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Held {
    // min-heap by (release time, sequence)
    fn cmp(&self, o: &Self) -> Ordering {
        (o.0.release_ns, o.0.seq).cmp(&(self.0.release_ns, self.0.seq))
    }
}

enum Loss {
    None,
    Bernoulli(f64),
    Ge { p: f64, r: f64, good: f64, bad: f64, in_bad: bool },
}

/// Logarithmic histogram with 8 sub-buckets per power of two (values in ns).
#[derive(Debug, Clone)]
pub struct LogHist {
    counts: Vec<u64>,
    pub n: u64,
    pub sum: u128,
    pub min: u64,
    pub max: u64,
}

impl Default for LogHist {
    fn default() -> Self {
        LogHist { counts: vec![0; 64 * 8], n: 0, sum: 0, min: u64::MAX, max: 0 }
    }
}

impl LogHist {
    fn index(v: u64) -> usize {
        if v < 8 {
            return v as usize;
        }
        let e = 63 - v.leading_zeros() as usize; // >= 3
        let sub = ((v >> (e - 3)) & 7) as usize;
        (e - 2) * 8 + sub
    }
    /// Lower bound of bucket `i`.
    fn lower(i: usize) -> u64 {
        if i < 8 {
            return i as u64;
        }
        let e = i / 8 + 2;
        let sub = (i % 8) as u64;
        (8 + sub) << (e - 3)
    }
    pub fn record(&mut self, v: u64) {
        let last = self.counts.len() - 1;
        self.counts[Self::index(v).min(last)] += 1;
        self.n += 1;
        self.sum += v as u128;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }
    /// Approximate quantile (bucket midpoint, within 6%); exact min/max at the ends.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.n == 0 {
            return 0;
        }
        let target = ((q * self.n as f64).ceil() as u64).clamp(1, self.n);
        let mut acc = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            acc += c;
            if acc >= target {
                let lo = Self::lower(i);
                let hi = Self::lower(i + 1);
                return ((lo + hi) / 2).clamp(self.min, self.max);
            }
        }
        self.max
    }
    pub fn mean(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.sum as f64 / self.n as f64
        }
    }
    /// Summary in microseconds plus the non-empty buckets `[lower_us, upper_us, count]`.
    pub fn to_json_us(&self) -> serde_json::Value {
        let us = |v: u64| v as f64 / 1e3;
        let buckets: Vec<serde_json::Value> = self
            .counts
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(i, &c)| serde_json::json!([us(Self::lower(i)), us(Self::lower(i + 1)), c]))
            .collect();
        serde_json::json!({
            "count": self.n,
            "min_us": if self.n > 0 { us(self.min) } else { 0.0 },
            "mean_us": self.mean() / 1e3,
            "p50_us": us(self.quantile(0.5)),
            "p90_us": us(self.quantile(0.9)),
            "p99_us": us(self.quantile(0.99)),
            "p999_us": us(self.quantile(0.999)),
            "max_us": us(self.max),
            "buckets_us": buckets,
        })
    }
}

/// Counters of the link outside the queue discipline.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct LinkCounters {
    /// Packets that finished serialization.
    pub transmitted: u64,
    pub transmitted_bytes: u64,
    /// Lost by the random loss model.
    pub lost: u64,
    pub lost_bytes: u64,
    /// Handed back by `pop_ready` (written out by the data path).
    pub delivered: u64,
    pub delivered_bytes: u64,
    /// Packets released later than their jitter draw because order is kept.
    pub jitter_held_for_order: u64,
    /// Packets discarded because the delay line held [`MAX_DELAY_LINE_BYTES`] of buffers.
    pub delay_line_overflow: u64,
}

/// Memory cap of the delay line (packet buffers), bytes.
pub const MAX_DELAY_LINE_BYTES: usize = 1 << 30;

pub struct Link {
    pub qdisc: Box<dyn Qdisc>,
    rate: Rate,
    delay_ns: u64,
    jitter: Option<JitterSpec>,
    loss: Loss,
    rng: Rng,
    overhead: u64,
    fifo_line: VecDeque<Packet>,
    heap_line: BinaryHeap<Held>,
    last_release: u64,
    pub counters: LinkCounters,
    /// Queue sojourn time (dequeue time - arrival time) of every dequeued packet, ns.
    pub sojourn: LogHist,
    garbage: Vec<(Packet, DropReason)>,
    lost: Vec<Packet>,
    interval_sojourn_max: u64,
    line_bytes: usize,
}

impl Link {
    /// `start_ns` is the time origin of a trace (its line "0" happens then).
    pub fn new(cfg: &DirectionConfig, seed: u64, start_ns: u64) -> Link {
        let rate = match &cfg.rate {
            RateSpec::Unlimited => Rate::Unlimited,
            RateSpec::Fixed { bps } => Rate::Fixed { bps: (*bps).max(1), busy_until: 0 },
            RateSpec::Trace { opportunities_ms, opportunity_bytes, .. } => Rate::Trace {
                opps: opportunities_ms.iter().map(|m| m * 1_000_000).collect(),
                period: opportunities_ms.last().copied().unwrap_or(1).max(1) * 1_000_000,
                base: start_ns,
                idx: 0,
                bytes_per_opp: (*opportunity_bytes).max(1) as u64,
                in_flight: None,
            },
        };
        let loss = match cfg.loss {
            LossSpec::None => Loss::None,
            LossSpec::Bernoulli { p } => Loss::Bernoulli(p),
            LossSpec::GilbertElliott { p, r, loss_good, loss_bad } => {
                Loss::Ge { p, r, good: loss_good, bad: loss_bad, in_bad: false }
            }
        };
        Link {
            qdisc: crate::qdisc::build(&cfg.queue, seed).expect("EmulatorConfig::validate refuses kernel qdiscs"),
            rate,
            delay_ns: cfg.delay_ns,
            jitter: cfg.jitter.clone().filter(|j| j.amount_ns > 0),
            loss,
            rng: Rng::new(seed ^ 0x5eed),
            overhead: cfg.overhead_bytes as u64,
            fifo_line: VecDeque::new(),
            heap_line: BinaryHeap::new(),
            last_release: 0,
            counters: LinkCounters::default(),
            sojourn: LogHist::default(),
            garbage: Vec::new(),
            lost: Vec::new(),
            interval_sojourn_max: 0,
            line_bytes: 0,
        }
    }

    fn note_sojourn(&mut self, v: u64) {
        self.sojourn.record(v);
        self.interval_sojourn_max = self.interval_sojourn_max.max(v);
    }

    /// Largest sojourn time since the last call, ns (0 if nothing was dequeued).
    pub fn take_interval_sojourn_max(&mut self) -> u64 {
        std::mem::take(&mut self.interval_sojourn_max)
    }

    fn reorders(&self) -> bool {
        self.jitter.as_ref().is_some_and(|j| j.reorder)
    }

    /// A packet arrived at `now` (calls must be in non-decreasing time order).
    pub fn arrive(&mut self, pkt: Packet, now: u64) {
        self.advance(now);
        self.qdisc.enqueue(pkt, now);
        self.qdisc.take_dropped(&mut self.garbage);
        match &mut self.rate {
            Rate::Unlimited => self.drain_unlimited(now),
            Rate::Fixed { busy_until, .. } => {
                if *busy_until <= now {
                    *busy_until = now;
                    self.advance_fixed(now);
                }
            }
            Rate::Trace { .. } => {}
        }
    }

    fn drain_unlimited(&mut self, now: u64) {
        while let Some(p) = self.qdisc.dequeue(now) {
            self.note_sojourn(now.saturating_sub(p.arrival_ns));
            self.transmitted(p, now);
        }
        self.qdisc.take_dropped(&mut self.garbage);
    }

    fn advance_fixed(&mut self, now: u64) {
        let Rate::Fixed { bps, mut busy_until } = self.rate else { return };
        while busy_until <= now {
            let Some(p) = self.qdisc.dequeue(busy_until) else { break };
            self.note_sojourn(busy_until.saturating_sub(p.arrival_ns));
            let bits = (p.size() + self.overhead) as u128 * 8;
            let tx = ((bits * 1_000_000_000 + bps as u128 / 2) / bps as u128) as u64;
            busy_until += tx.max(1);
            self.transmitted(p, busy_until);
        }
        self.qdisc.take_dropped(&mut self.garbage);
        if let Rate::Fixed { busy_until: b, .. } = &mut self.rate {
            *b = busy_until;
        }
    }

    fn advance_trace(&mut self, now: u64) {
        loop {
            let (t, has_work) = match &self.rate {
                Rate::Trace { opps, base, idx, in_flight, .. } => (base + opps[*idx], in_flight.is_some()),
                _ => return,
            };
            if t > now {
                break;
            }
            if !has_work && self.qdisc.backlog_packets() == 0 {
                // idle: opportunities up to now are wasted; skip them quickly
                if let Rate::Trace { opps, period, base, idx, .. } = &mut self.rate {
                    if now >= *base + 2 * *period {
                        *base += (now - *base) / *period * *period - *period;
                    }
                    while *base + opps[*idx] <= now {
                        *idx += 1;
                        if *idx == opps.len() {
                            *idx = 0;
                            *base += *period;
                        }
                    }
                }
                break;
            }
            self.serve_opportunity(t);
            if let Rate::Trace { opps, period, base, idx, .. } = &mut self.rate {
                *idx += 1;
                if *idx == opps.len() {
                    *idx = 0;
                    *base += *period;
                }
            }
        }
        self.qdisc.take_dropped(&mut self.garbage);
    }

    /// One delivery opportunity at `t`: up to `bytes_per_opp` bytes leave; a
    /// packet larger than what is left continues in the next opportunity (as mahimahi).
    fn serve_opportunity(&mut self, t: u64) {
        let Rate::Trace { bytes_per_opp, .. } = self.rate else { return };
        let mut budget = bytes_per_opp;
        while budget > 0 {
            let cur = match &mut self.rate {
                Rate::Trace { in_flight, .. } => in_flight.take(),
                _ => None,
            };
            let (p, start, left) = match cur {
                Some(x) => x,
                None => match self.qdisc.dequeue(t) {
                    Some(p) => {
                        self.note_sojourn(t.saturating_sub(p.arrival_ns));
                        let wire = p.size() + self.overhead;
                        (p, t, wire)
                    }
                    None => break,
                },
            };
            let take = left.min(budget);
            budget -= take;
            if take == left {
                let _ = start;
                self.transmitted(p, t);
            } else if let Rate::Trace { in_flight, .. } = &mut self.rate {
                *in_flight = Some((p, start, left - take));
            }
        }
    }

    /// Run the serializer up to `now`.
    pub fn advance(&mut self, now: u64) {
        match self.rate {
            Rate::Unlimited => self.drain_unlimited(now),
            Rate::Fixed { .. } => self.advance_fixed(now),
            Rate::Trace { .. } => self.advance_trace(now),
        }
    }

    fn lose(&mut self) -> bool {
        match &mut self.loss {
            Loss::None => false,
            Loss::Bernoulli(p) => {
                let p = *p;
                self.rng.chance(p)
            }
            Loss::Ge { p, r, good, bad, in_bad } => {
                let (p, r, good, bad) = (*p, *r, *good, *bad);
                let flip = if *in_bad { self.rng.chance(r) } else { self.rng.chance(p) };
                if flip {
                    *in_bad = !*in_bad;
                }
                let pl = if *in_bad { bad } else { good };
                self.rng.chance(pl)
            }
        }
    }

    /// The packet's last bit left the bottleneck at `t`.
    fn transmitted(&mut self, mut p: Packet, t: u64) {
        self.counters.transmitted += 1;
        self.counters.transmitted_bytes += p.size();
        if self.lose() {
            self.counters.lost += 1;
            self.counters.lost_bytes += p.size();
            self.lost.push(p);
            return;
        }
        let mut d = self.delay_ns as i64;
        if let Some(j) = &self.jitter {
            let a = j.amount_ns as f64;
            let x = match j.dist {
                JitterDist::Uniform => (self.rng.uniform() * 2.0 - 1.0) * a,
                JitterDist::Normal => self.rng.normal() * a,
            };
            d += x.round() as i64;
        }
        let want = t + d.max(0) as u64;
        if self.line_bytes + p.buf.len() > MAX_DELAY_LINE_BYTES {
            self.counters.delay_line_overflow += 1;
            self.lost.push(p);
            return;
        }
        self.line_bytes += p.buf.len();
        if self.reorders() {
            p.release_ns = want;
            self.heap_line.push(Held(p));
        } else {
            if want < self.last_release {
                self.counters.jitter_held_for_order += 1;
            }
            p.release_ns = want.max(self.last_release);
            self.last_release = p.release_ns;
            self.fifo_line.push_back(p);
        }
    }

    /// Earliest time something happens: a release from the delay line, or
    /// (with a backlog) the serializer's next dequeue or trace opportunity.
    pub fn next_event(&self) -> Option<u64> {
        let line = if self.reorders() { self.heap_line.peek().map(|h| h.0.release_ns) } else { self.fifo_line.front().map(|p| p.release_ns) };
        let ser = match &self.rate {
            Rate::Unlimited => None,
            Rate::Fixed { busy_until, .. } => (self.qdisc.backlog_packets() > 0).then_some(*busy_until),
            Rate::Trace { opps, base, idx, in_flight, .. } => {
                (in_flight.is_some() || self.qdisc.backlog_packets() > 0).then(|| base + opps[*idx])
            }
        };
        match (line, ser) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The next packet whose release time is <= `now`.
    pub fn pop_ready(&mut self, now: u64) -> Option<Packet> {
        let p = if self.reorders() {
            if self.heap_line.peek()?.0.release_ns <= now {
                self.heap_line.pop().map(|h| h.0)
            } else {
                None
            }
        } else if self.fifo_line.front()?.release_ns <= now {
            self.fifo_line.pop_front()
        } else {
            None
        };
        if let Some(p) = &p {
            self.line_bytes -= p.buf.len();
            self.counters.delivered += 1;
            self.counters.delivered_bytes += p.size();
        }
        p
    }

    /// Packets in the delay line (propagating).
    pub fn in_flight(&self) -> usize {
        self.fifo_line.len() + self.heap_line.len()
    }

    /// Hand over the packets discarded so far (queue drops and random losses)
    /// so their buffers can be reused.
    pub fn take_garbage(&mut self, out: &mut Vec<Packet>) {
        out.extend(self.garbage.drain(..).map(|(p, _)| p));
        out.append(&mut self.lost);
    }

    /// Queue drops with reasons since the last call (tests).
    pub fn take_drops(&mut self) -> Vec<(Packet, DropReason)> {
        std::mem::take(&mut self.garbage)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{QueueSpec, RateSpec};
    use crate::qdisc::testutil::*;

    fn cfg(rate: RateSpec, delay_ms: u64) -> DirectionConfig {
        DirectionConfig { rate, delay_ns: delay_ms * MS, queue: QueueSpec::Fifo { packets: 1000 }, ..Default::default() }
    }

    fn run(link: &mut Link, until: u64) -> Vec<(u64, u64)> {
        // event-driven: advance to each next event and collect (seq, release)
        let mut out = vec![];
        while let Some(t) = link.next_event() {
            if t > until {
                break;
            }
            link.advance(t);
            while let Some(p) = link.pop_ready(t) {
                out.push((p.seq, p.release_ns));
            }
        }
        out
    }

    #[test]
    fn fixed_rate_serializes_and_delays() {
        // 12 Mbit/s: a 1500-byte packet takes exactly 1 ms
        let mut l = Link::new(&cfg(RateSpec::Fixed { bps: 12_000_000 }, 10), 1, 0);
        for i in 0..10 {
            l.arrive(pkt(0, i, 0), 0);
        }
        let out = run(&mut l, u64::MAX);
        let want: Vec<(u64, u64)> = (0..10).map(|i| (i, (i + 1) * MS + 10 * MS)).collect();
        assert_eq!(out, want);
        // sojourn of the k-th packet = k ms
        assert_eq!(l.sojourn.n, 10);
        assert_eq!(l.sojourn.min, 0);
        assert_eq!(l.sojourn.max, 9 * MS);
        assert_eq!(l.counters.delivered, 10);
    }

    #[test]
    fn overhead_counts_on_the_wire() {
        let mut c = cfg(RateSpec::Fixed { bps: 12_000_000 }, 0);
        c.overhead_bytes = 300; // 1800 bytes on the wire = 1.2 ms
        let mut l = Link::new(&c, 1, 0);
        l.arrive(pkt(0, 0, 0), 0);
        l.arrive(pkt(0, 1, 0), 0);
        let out = run(&mut l, u64::MAX);
        assert_eq!(out, vec![(0, 1_200_000), (1, 2_400_000)]);
    }

    #[test]
    fn idle_link_starts_at_arrival() {
        let mut l = Link::new(&cfg(RateSpec::Fixed { bps: 12_000_000 }, 5), 1, 0);
        l.arrive(pkt(0, 0, 0), 0);
        let a = run(&mut l, u64::MAX);
        l.arrive(pkt(0, 1, 100 * MS), 100 * MS);
        let b = run(&mut l, u64::MAX);
        assert_eq!(a, vec![(0, 6 * MS)]);
        assert_eq!(b, vec![(1, 106 * MS)]);
    }

    #[test]
    fn unlimited_is_pure_delay() {
        let mut l = Link::new(&cfg(RateSpec::Unlimited, 20), 1, 0);
        for i in 0..5 {
            l.arrive(pkt(0, i, i * 100), i * 100);
        }
        let out = run(&mut l, u64::MAX);
        assert_eq!(out, (0..5).map(|i| (i, i * 100 + 20 * MS)).collect::<Vec<_>>());
    }

    #[test]
    fn tail_drop_when_rate_limited() {
        let mut c = cfg(RateSpec::Fixed { bps: 12_000_000 }, 0);
        c.queue = QueueSpec::Fifo { packets: 3 };
        let mut l = Link::new(&c, 1, 0);
        for i in 0..10 {
            l.arrive(pkt(0, i, 0), 0);
        }
        // first packet goes straight to the wire, 3 wait, 6 dropped
        let drops = l.take_drops();
        assert_eq!(drops.len(), 6);
        assert_eq!(run(&mut l, u64::MAX).len(), 4);
    }

    #[test]
    fn trace_opportunities() {
        // opportunities at 1, 2, 3 ms, period 3 ms -> one 1500 B packet per ms
        let r = RateSpec::Trace { path: "t".into(), opportunities_ms: vec![1, 2, 3], opportunity_bytes: 1500 };
        let mut l = Link::new(&cfg(r.clone(), 0), 1, 0);
        for i in 0..5 {
            l.arrive(pkt(0, i, 0), 0);
        }
        let out = run(&mut l, u64::MAX);
        assert_eq!(out, (0..5).map(|i| (i, (i + 1) * MS)).collect::<Vec<_>>());
        // small packets share an opportunity: three 500-byte packets per ms
        let mut l = Link::new(&cfg(r.clone(), 0), 1, 0);
        for i in 0..6 {
            l.arrive(sized(0, i, 0, 500, 0), 0);
        }
        let rel: Vec<u64> = run(&mut l, u64::MAX).iter().map(|x| x.1).collect();
        assert_eq!(rel, vec![MS, MS, MS, 2 * MS, 2 * MS, 2 * MS]);
        // a packet that arrives after idle time waits for the next opportunity
        let mut l = Link::new(&cfg(r, 0), 1, 0);
        l.arrive(pkt(0, 0, 7_500_000), 7_500_000);
        assert_eq!(run(&mut l, u64::MAX), vec![(0, 8 * MS)]);
    }

    #[test]
    fn trace_packet_larger_than_opportunity_spans_two() {
        let r = RateSpec::Trace { path: "t".into(), opportunities_ms: vec![1, 2, 3, 4], opportunity_bytes: 1000 };
        let mut l = Link::new(&cfg(r, 0), 1, 0);
        l.arrive(pkt(0, 0, 0), 0); // 1500 B: 1000 at 1 ms, 500 at 2 ms
        l.arrive(sized(0, 1, 0, 500, 0), 0); // rest of the 2 ms opportunity
        l.arrive(sized(0, 2, 0, 100, 0), 0); // 3 ms
        assert_eq!(run(&mut l, u64::MAX), vec![(0, 2 * MS), (1, 2 * MS), (2, 3 * MS)]);
    }

    #[test]
    fn bernoulli_and_gilbert_elliott_loss() {
        let mut c = cfg(RateSpec::Unlimited, 0);
        c.loss = LossSpec::Bernoulli { p: 0.1 };
        let mut l = Link::new(&c, 9, 0);
        for i in 0..100_000 {
            l.arrive(sized(0, i, i, 100, 0), i);
        }
        let rate = l.counters.lost as f64 / 100_000.0;
        assert!((rate - 0.1).abs() < 0.005, "{rate}");

        // GE: p=1%, r=20% -> stationary bad fraction 1/21, mean burst length 5
        c.loss = LossSpec::GilbertElliott { p: 0.01, r: 0.2, loss_good: 0.0, loss_bad: 1.0 };
        let mut l = Link::new(&c, 9, 0);
        let mut lost_flags = vec![];
        for i in 0..200_000u64 {
            let before = l.counters.lost;
            l.arrive(sized(0, i, i, 100, 0), i);
            lost_flags.push(l.counters.lost > before);
        }
        let rate = lost_flags.iter().filter(|&&x| x).count() as f64 / lost_flags.len() as f64;
        assert!((rate - c.loss.mean_loss()).abs() < 0.01, "{rate}");
        let mut bursts = vec![];
        let mut run_len = 0;
        for &f in &lost_flags {
            if f {
                run_len += 1;
            } else if run_len > 0 {
                bursts.push(run_len);
                run_len = 0;
            }
        }
        let mean_burst = bursts.iter().sum::<u64>() as f64 / bursts.len() as f64;
        assert!((mean_burst - 5.0).abs() < 0.5, "mean burst {mean_burst}");
    }

    #[test]
    fn jitter_keeps_order_unless_reordering() {
        let mut c = cfg(RateSpec::Unlimited, 20);
        c.jitter = Some(JitterSpec { amount_ns: 5 * MS, dist: JitterDist::Uniform, reorder: false });
        let mut l = Link::new(&c, 3, 0);
        for i in 0..2000 {
            l.arrive(sized(0, i, i * 100_000, 100, 0), i * 100_000);
        }
        let out = run(&mut l, u64::MAX);
        assert_eq!(out.len(), 2000);
        assert!(out.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1), "order kept");
        let delays: Vec<i64> = out.iter().map(|(s, r)| *r as i64 - (*s * 100_000) as i64).collect();
        assert!(delays.iter().all(|&d| d >= 15 * MS as i64));
        assert!(l.counters.jitter_held_for_order > 0);

        c.jitter = Some(JitterSpec { amount_ns: 5 * MS, dist: JitterDist::Uniform, reorder: true });
        let mut l = Link::new(&c, 3, 0);
        for i in 0..2000 {
            l.arrive(sized(0, i, i * 100_000, 100, 0), i * 100_000);
        }
        let out = run(&mut l, u64::MAX);
        assert_eq!(out.len(), 2000);
        assert!(out.windows(2).all(|w| w[0].1 <= w[1].1), "released in time order");
        let reordered = out.windows(2).filter(|w| w[1].0 < w[0].0).count();
        assert!(reordered > 100, "{reordered}");
        let delays: Vec<f64> = out.iter().map(|(s, r)| (*r as f64 - (*s * 100_000) as f64) / 1e6).collect();
        let mean = delays.iter().sum::<f64>() / delays.len() as f64;
        assert!((mean - 20.0).abs() < 0.3, "{mean}");
        assert!(delays.iter().all(|&d| (15.0..=25.0).contains(&d)));
    }

    #[test]
    fn log_hist_quantiles() {
        let mut h = LogHist::default();
        for v in 1..=10_000u64 {
            h.record(v * 1000);
        }
        let p50 = h.quantile(0.5) as f64;
        assert!((p50 / 5_000_000.0 - 1.0).abs() < 0.07, "{p50}");
        let p99 = h.quantile(0.99) as f64;
        assert!((p99 / 9_900_000.0 - 1.0).abs() < 0.07, "{p99}");
        assert_eq!(h.max, 10_000_000);
        for v in [0u64, 1, 7, 8, 9, 15, 16, 1000, u64::MAX / 4] {
            let i = LogHist::index(v);
            assert!(LogHist::lower(i) <= v && v < LogHist::lower(i + 1), "{v}");
        }
    }
}
