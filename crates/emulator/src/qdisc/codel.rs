//! CoDel, following the pseudocode of RFC 8289 section 5 (which is the Linux
//! variant of the re-entry rule): the sojourn time of the head packet is
//! compared with TARGET; once it has stayed above TARGET for INTERVAL, the
//! queue enters the dropping state and drops (or ECN-marks) at times spaced by
//! the control law `interval / sqrt(count)`.
//!
//! [`CodelVars`] is the per-queue state machine, shared with FQ-CoDel (one per
//! flow queue); [`Codel`] is the single-queue discipline.

use super::{Counters, DropReason, PacketQueue, Qdisc};
use crate::packet::Packet;

pub use bloatlab_model::CodelParams;

/// RFC 8289 `control_law`: `t + interval / sqrt(count)`.
pub fn control_law(t: u64, interval_ns: u64, count: u32) -> u64 {
    t + (interval_ns as f64 / (count.max(1) as f64).sqrt()) as u64
}

/// Where CoDel puts what it dropped and marked during one dequeue.
#[derive(Debug, Default)]
pub struct CodelSink {
    pub dropped: Vec<(Packet, DropReason)>,
    pub drops: u64,
    pub drop_bytes: u64,
    pub marks: u64,
}

impl CodelSink {
    fn drop(&mut self, p: Packet) {
        self.drops += 1;
        self.drop_bytes += p.size();
        self.dropped.push((p, DropReason::Aqm));
    }
}

/// Per-queue CoDel state (RFC 8289 variables).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct CodelVars {
    pub first_above_time: u64,
    pub drop_next: u64,
    pub count: u32,
    pub lastcount: u32,
    pub dropping: bool,
}

impl CodelVars {
    /// RFC 8289 `dodequeue`: pop the head and decide whether it is ok to drop.
    /// `other_backlog` is added to the queue's own bytes for the "bytes() <=
    /// maxpacket" test (FQ-CoDel passes the other flows' backlog, like Linux).
    fn dodequeue(
        &mut self,
        p: &CodelParams,
        q: &mut PacketQueue,
        other_backlog: u64,
        maxpacket: u64,
        now: u64,
    ) -> (Option<Packet>, bool) {
        let Some(pkt) = q.pop() else {
            self.first_above_time = 0;
            return (None, false);
        };
        let sojourn = now.saturating_sub(pkt.arrival_ns);
        let mut ok_to_drop = false;
        if sojourn < p.target_ns || q.bytes() + other_backlog <= maxpacket {
            self.first_above_time = 0;
        } else if self.first_above_time == 0 {
            self.first_above_time = now + p.interval_ns;
        } else if now >= self.first_above_time {
            ok_to_drop = true;
        }
        (Some(pkt), ok_to_drop)
    }

    /// RFC 8289 `dequeue`, with Linux's ECN handling: in place of a drop, an
    /// ECN-capable packet is marked CE and delivered.
    pub fn dequeue(
        &mut self,
        p: &CodelParams,
        q: &mut PacketQueue,
        other_backlog: u64,
        maxpacket: u64,
        now: u64,
        sink: &mut CodelSink,
    ) -> Option<Packet> {
        let (mut pkt, mut ok) = self.dodequeue(p, q, other_backlog, maxpacket, now);
        if pkt.is_none() {
            self.dropping = false;
            return None;
        }
        if self.dropping {
            if !ok {
                self.dropping = false;
            }
            while self.dropping && now >= self.drop_next {
                self.count = self.count.wrapping_add(1);
                let mut cur = pkt.take().expect("packet");
                if p.ecn && cur.mark_ce() {
                    sink.marks += 1;
                    self.drop_next = control_law(self.drop_next, p.interval_ns, self.count);
                    return Some(cur);
                }
                sink.drop(cur);
                (pkt, ok) = self.dodequeue(p, q, other_backlog, maxpacket, now);
                if !ok {
                    self.dropping = false;
                } else {
                    self.drop_next = control_law(self.drop_next, p.interval_ns, self.count);
                }
            }
        } else if ok {
            let mut cur = pkt.take().expect("packet");
            if p.ecn && cur.mark_ce() {
                sink.marks += 1;
                pkt = Some(cur);
            } else {
                sink.drop(cur);
                (pkt, _) = self.dodequeue(p, q, other_backlog, maxpacket, now);
            }
            self.dropping = true;
            let delta = self.count.wrapping_sub(self.lastcount);
            self.count = 1;
            if delta > 1 && (now as i64 - self.drop_next as i64) < 16 * p.interval_ns as i64 {
                self.count = delta;
            }
            self.drop_next = control_law(now, p.interval_ns, self.count);
            self.lastcount = self.count;
        }
        pkt
    }
}

/// Single-queue CoDel with a packet limit (Linux default 1000).
#[derive(Debug)]
pub struct Codel {
    pub params: CodelParams,
    limit: usize,
    maxpacket: u64,
    q: PacketQueue,
    vars: CodelVars,
    c: Counters,
    sink: CodelSink,
}

impl Codel {
    pub fn new(params: CodelParams, limit: usize) -> Codel {
        Codel {
            params,
            limit,
            maxpacket: 0,
            q: PacketQueue::new(),
            vars: CodelVars::default(),
            c: Counters::default(),
            sink: CodelSink::default(),
        }
    }
    pub fn vars(&self) -> &CodelVars {
        &self.vars
    }
}

impl Qdisc for Codel {
    fn enqueue(&mut self, pkt: Packet, _now: u64) {
        self.c.note_arrival(&pkt);
        if self.q.len() >= self.limit {
            self.c.note_drop(&pkt, DropReason::Overlimit);
            self.sink.dropped.push((pkt, DropReason::Overlimit));
            return;
        }
        self.maxpacket = self.maxpacket.max(pkt.size());
        self.c.note_enqueue(&pkt, self.q.len() + 1, self.q.bytes() + pkt.size());
        self.q.push(pkt);
    }
    fn dequeue(&mut self, now: u64) -> Option<Packet> {
        let before = (self.sink.drops, self.sink.drop_bytes, self.sink.marks);
        let out = self.vars.dequeue(&self.params, &mut self.q, 0, self.maxpacket, now, &mut self.sink);
        self.c.dropped += self.sink.drops - before.0;
        self.c.dropped_aqm += self.sink.drops - before.0;
        self.c.dropped_bytes += self.sink.drop_bytes - before.1;
        self.c.ecn_marked += self.sink.marks - before.2;
        if let Some(p) = &out {
            self.c.note_dequeue(p);
        }
        out
    }
    fn backlog_packets(&self) -> usize {
        self.q.len()
    }
    fn backlog_bytes(&self) -> u64 {
        self.q.bytes()
    }
    fn counters(&self) -> &Counters {
        &self.c
    }
    fn take_dropped(&mut self, out: &mut Vec<(Packet, DropReason)>) {
        out.append(&mut self.sink.dropped);
    }
    fn kind(&self) -> &'static str {
        "codel"
    }
    fn details(&self) -> serde_json::Value {
        serde_json::json!({
            "target_ms": self.params.target_ns as f64 / 1e6,
            "interval_ms": self.params.interval_ns as f64 / 1e6,
            "ecn": self.params.ecn,
            "limit_packets": self.limit,
            "count": self.vars.count,
            "lastcount": self.vars.lastcount,
            "dropping": self.vars.dropping,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;

    /// 1000 packets queued at t=0 and one dequeue per ms: CoDel must wait
    /// INTERVAL after the sojourn time first exceeds TARGET, then drop with
    /// spacing interval/sqrt(count).
    #[test]
    fn drop_spacing_follows_control_law() {
        let mut q = Codel::new(CodelParams { ecn: false, ..Default::default() }, 10_000);
        for i in 0..1000 {
            q.enqueue(pkt(0, i, 0), 0);
        }
        let mut drop_times = vec![];
        let mut dropped = vec![];
        for ms in 1..=900u64 {
            let before = q.counters().dropped;
            q.dequeue(ms * MS);
            let n = q.counters().dropped - before;
            for _ in 0..n {
                drop_times.push(ms);
            }
            q.take_dropped(&mut dropped);
        }
        // sojourn >= 5 ms first at t=5 ms -> first_above_time = 105 ms -> first drop at 105 ms.
        assert_eq!(drop_times[0], 105);
        // subsequent drops at ceil(drop_next), drop_next_k = drop_next_{k-1} + 100/sqrt(k)
        let mut next: f64 = 105.0 + 100.0;
        let mut expect = vec![105u64];
        let mut k = 1u32;
        while (next.ceil() as u64) <= 900 {
            expect.push(next.ceil() as u64);
            k += 1;
            next += 100.0 / (k as f64).sqrt();
        }
        assert_eq!(drop_times, expect, "drop schedule");
        assert!(dropped.iter().all(|(_, r)| *r == DropReason::Aqm));
        assert_eq!(q.vars().count as usize, expect.len());
        // spacing shrinks like 1/sqrt(count)
        let gaps: Vec<u64> = expect.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps[0] == 100 && gaps[1] >= 70 && gaps[1] <= 72 && gaps[2] >= 57 && gaps[2] <= 59, "{gaps:?}");
    }

    #[test]
    fn no_drop_below_target_or_with_one_packet() {
        let mut q = Codel::new(CodelParams::default(), 1000);
        // packets always dequeued 4 ms after arrival: below target forever
        for i in 0..500u64 {
            q.enqueue(pkt(0, i, i * MS), i * MS);
            q.enqueue(pkt(0, i, i * MS), i * MS);
            q.dequeue(i * MS + 4 * MS);
            q.dequeue(i * MS + 4 * MS);
        }
        assert_eq!(q.counters().dropped, 0);
        // one packet stuck for 1 s: above target, but backlog <= maxpacket -> never dropped
        let mut q = Codel::new(CodelParams::default(), 1000);
        q.enqueue(pkt(0, 0, 0), 0);
        for t in 0..10u64 {
            q.enqueue(pkt(0, t, t * 100 * MS), t * 100 * MS);
            assert!(q.dequeue(t * 100 * MS + 99 * MS).is_some());
        }
        assert_eq!(q.counters().dropped, 0);
    }

    #[test]
    fn ecn_capable_packets_are_marked_not_dropped() {
        let mut q = Codel::new(CodelParams::default(), 10_000);
        for i in 0..1000 {
            q.enqueue(sized(0, i, 0, 1500, 2), 0);
        }
        let mut marked = 0;
        for ms in 1..=400u64 {
            if let Some(p) = q.dequeue(ms * MS) {
                if p.ecn == crate::packet::Ecn::Ce {
                    marked += 1;
                }
            }
        }
        assert_eq!(q.counters().dropped, 0);
        assert!(marked >= 4, "{marked}");
        assert_eq!(q.counters().ecn_marked, marked);
        assert_eq!(q.counters().dequeued, 400);
    }

    /// Re-entering the dropping state soon after leaving it resumes at
    /// count - lastcount (RFC 8289 / Linux), not at 1.
    #[test]
    fn count_resumes_on_quick_reentry() {
        let mut q = Codel::new(CodelParams { ecn: false, ..Default::default() }, 100_000);
        for i in 0..2000 {
            q.enqueue(pkt(0, i, 0), 0);
        }
        let mut t = 0;
        while q.vars().count < 6 {
            t += MS;
            q.dequeue(t);
        }
        // drain the queue quickly: leaving the dropping state
        while q.backlog_packets() > 0 {
            q.dequeue(t);
        }
        assert!(q.dequeue(t).is_none());
        assert!(!q.vars().dropping);
        let count = q.vars().count;
        let lastcount = q.vars().lastcount;
        assert_eq!(lastcount, 1);
        assert!(count >= 6);
        // new standing queue shortly after
        for i in 0..2000 {
            q.enqueue(pkt(0, i, t), t);
        }
        let start = t;
        while !q.vars().dropping {
            t += MS;
            q.dequeue(t);
        }
        assert_eq!(t - start, 105 * MS);
        assert_eq!(q.vars().count, count - lastcount);
    }

    #[test]
    fn tail_drop_at_limit() {
        let mut q = Codel::new(CodelParams::default(), 5);
        for i in 0..7 {
            q.enqueue(pkt(0, i, 0), 0);
        }
        assert_eq!(q.counters().dropped_overlimit, 2);
        assert_eq!(q.backlog_packets(), 5);
    }
}
