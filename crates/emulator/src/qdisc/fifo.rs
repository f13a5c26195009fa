//! FIFO queues: droptail by packets (`pfifo`), droptail by bytes (`bfifo`),
//! and drop-head by packets (`drophead`, like the kernel's `pfifo_head_drop`),
//! all one [`Fifo`].

use super::{Counters, DropReason, PacketQueue, Qdisc};
use crate::packet::Packet;

/// What a droptail FIFO counts against its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// At most this many packets (`pfifo`).
    Packets(usize),
    /// At most this many bytes: a packet is accepted only when the backlog
    /// plus its size stays within the limit (the kernel's `bfifo` rule).
    Bytes(u64),
}

/// FIFO limited by packets or bytes. When full it refuses the arrival
/// (droptail: `pfifo`, `bfifo`) or, as `drophead` (the kernel's
/// `pfifo_head_drop`), discards the oldest packets to make room for it.
#[derive(Debug)]
pub struct Fifo {
    limit: Limit,
    head_drop: bool,
    q: PacketQueue,
    c: Counters,
    dropped: Vec<(Packet, DropReason)>,
}

impl Fifo {
    /// A droptail FIFO of at most `limit` packets.
    pub fn new(limit: usize) -> Fifo {
        Self::with_limit(Limit::Packets(limit))
    }
    /// A droptail FIFO of at most `limit_bytes` bytes.
    pub fn bytes(limit_bytes: u64) -> Fifo {
        Self::with_limit(Limit::Bytes(limit_bytes))
    }
    /// A droptail FIFO.
    pub fn with_limit(limit: Limit) -> Fifo {
        Fifo { limit, head_drop: false, q: PacketQueue::new(), c: Counters::default(), dropped: Vec::new() }
    }
    /// A FIFO of at most `limit` packets that, when full, discards the packet
    /// at the head (the oldest) and accepts the arrival.
    pub fn drophead(limit: usize) -> Fifo {
        Fifo { head_drop: true, ..Self::new(limit) }
    }
    fn full_for(&self, pkt: &Packet) -> bool {
        match self.limit {
            Limit::Packets(n) => self.q.len() >= n,
            Limit::Bytes(b) => self.q.bytes() + pkt.size() > b,
        }
    }
    fn discard(&mut self, pkt: Packet, why: DropReason) {
        self.c.note_drop(&pkt, why);
        self.dropped.push((pkt, why));
    }
}

impl Qdisc for Fifo {
    fn enqueue(&mut self, pkt: Packet, _now: u64) {
        self.c.note_arrival(&pkt);
        if self.head_drop {
            // room is made by dropping from the head, unless no packet could ever fit
            let fits_alone = match self.limit {
                Limit::Packets(n) => n > 0,
                Limit::Bytes(b) => pkt.size() <= b,
            };
            while fits_alone && self.full_for(&pkt) {
                let old = self.q.pop().expect("a full queue has a head");
                self.discard(old, DropReason::HeadDrop);
            }
        }
        if self.full_for(&pkt) {
            self.discard(pkt, DropReason::Overlimit);
            return;
        }
        self.c.note_enqueue(&pkt, self.q.len() + 1, self.q.bytes() + pkt.size());
        self.q.push(pkt);
    }
    fn dequeue(&mut self, _now: u64) -> Option<Packet> {
        let p = self.q.pop()?;
        self.c.note_dequeue(&p);
        Some(p)
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
        out.append(&mut self.dropped);
    }
    fn kind(&self) -> &'static str {
        match (self.head_drop, self.limit) {
            (true, _) => "drophead",
            (false, Limit::Packets(_)) => "pfifo",
            (false, Limit::Bytes(_)) => "bfifo",
        }
    }
    fn details(&self) -> serde_json::Value {
        match self.limit {
            Limit::Packets(n) => serde_json::json!({ "limit_packets": n }),
            Limit::Bytes(b) => serde_json::json!({ "limit_bytes": b }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;

    fn drain(q: &mut dyn Qdisc) -> Vec<u64> {
        let mut v = vec![];
        while let Some(p) = q.dequeue(0) {
            v.push(p.seq);
        }
        v
    }

    #[test]
    fn pfifo_drops_tail_at_limit() {
        let mut q = Fifo::new(3);
        for i in 0..5 {
            q.enqueue(pkt(0, i, 0), 0);
        }
        assert_eq!(q.backlog_packets(), 3);
        assert_eq!(q.backlog_bytes(), 4500);
        let mut d = vec![];
        q.take_dropped(&mut d);
        assert_eq!(d.iter().map(|(p, _)| p.seq).collect::<Vec<_>>(), vec![3, 4]);
        assert!(d.iter().all(|(_, r)| *r == DropReason::Overlimit));
        assert_eq!(drain(&mut q), vec![0, 1, 2]);
        let c = q.counters();
        assert_eq!((c.arrivals, c.enqueued, c.dequeued, c.dropped, c.dropped_overlimit), (5, 3, 3, 2, 2));
        assert_eq!(c.max_backlog_packets, 3);
    }

    #[test]
    fn bfifo_drops_exactly_at_byte_limit() {
        // limit 3000 bytes: two 1500-byte packets fit exactly, the third does not
        let mut q = Fifo::bytes(3000);
        q.enqueue(pkt(0, 0, 0), 0);
        q.enqueue(pkt(0, 1, 0), 0);
        assert_eq!(q.backlog_bytes(), 3000);
        q.enqueue(pkt(0, 2, 0), 0);
        assert_eq!(q.backlog_packets(), 2);
        assert_eq!(q.counters().dropped_overlimit, 1);
        // a 100-byte packet does not fit either (3000 + 100 > 3000)...
        q.enqueue(sized(0, 3, 0, 100, 0), 0);
        assert_eq!(q.counters().dropped_overlimit, 2);
        // ...but after one departure, 1500 + 100 + 1400 = 3000 fits exactly
        q.dequeue(0);
        q.enqueue(sized(0, 4, 0, 100, 0), 0);
        q.enqueue(sized(0, 5, 0, 1400, 0), 0);
        assert_eq!(q.backlog_bytes(), 3000);
        q.enqueue(sized(0, 6, 0, 28, 0), 0);
        assert_eq!(q.counters().dropped_overlimit, 3);
        assert_eq!(drain(&mut q), vec![1, 4, 5]);
    }

    #[test]
    fn drophead_discards_oldest() {
        let mut q = Fifo::drophead(3);
        for i in 0..5 {
            q.enqueue(pkt(0, i, 0), 0);
        }
        let mut d = vec![];
        q.take_dropped(&mut d);
        assert_eq!(d.iter().map(|(p, _)| p.seq).collect::<Vec<_>>(), vec![0, 1]);
        assert!(d.iter().all(|(_, r)| *r == DropReason::HeadDrop));
        assert_eq!(drain(&mut q), vec![2, 3, 4]);
        assert_eq!(q.counters().dropped_head, 2);
        assert_eq!((q.counters().arrivals, q.counters().enqueued, q.counters().dequeued), (5, 5, 3));
        assert_eq!(q.counters().max_backlog_packets, 3);
        // a drophead queue that can hold nothing refuses, like the kernel's
        let mut z = Fifo::drophead(0);
        z.enqueue(pkt(0, 9, 0), 0);
        assert_eq!((z.counters().dropped_overlimit, z.backlog_packets()), (1, 0));
        let kinds: Vec<&str> = [Fifo::new(1), Fifo::bytes(1500), Fifo::drophead(1)].iter().map(|q| q.kind()).collect();
        assert_eq!(kinds, ["pfifo", "bfifo", "drophead"]);
    }
}
