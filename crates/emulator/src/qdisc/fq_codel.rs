//! FQ-CoDel, RFC 8290: packets are hashed by 5-tuple into `flows` queues
//! (default 1024), each with its own CoDel state; a deficit round robin with
//! `quantum` bytes (default 1514) serves two lists of active queues, new flows
//! first (sparse-flow priority). A new queue that uses up its quantum, or
//! empties, moves to the end of the old list. When the total packet count
//! exceeds `limit` (default 10240), the head packet of the queue holding the
//! most bytes is dropped.

use super::codel::{CodelSink, CodelVars};
use super::{Counters, DropReason, PacketQueue, Qdisc};
use crate::packet::{FlowKey, Packet};
use serde::Serialize;
use std::collections::VecDeque;

pub use bloatlab_model::FqCodelParams;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum List {
    None,
    New,
    Old,
}

/// Per-queue statistics reported in the emulator's counters.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FlowStats {
    /// Queue index the flow hashed into.
    pub bucket: usize,
    /// The 5-tuple of the first packet seen in this queue.
    pub flow: FlowKey,
    pub packets: u64,
    pub bytes: u64,
    pub dequeued: u64,
    pub dropped_aqm: u64,
    pub dropped_overflow: u64,
    pub ecn_marked: u64,
    /// Times the queue entered the new-flows list (became active).
    pub activations: u64,
    pub max_backlog_bytes: u64,
}

#[derive(Debug)]
struct Flow {
    q: PacketQueue,
    vars: CodelVars,
    deficit: i64,
    list: List,
    stats: Option<Box<FlowStats>>,
}

#[derive(Debug)]
pub struct FqCodel {
    pub params: FqCodelParams,
    flows: Vec<Flow>,
    new_flows: VecDeque<usize>,
    old_flows: VecDeque<usize>,
    backlog_pkts: usize,
    backlog_bytes: u64,
    maxpacket: u64,
    c: Counters,
    sink: CodelSink,
    /// Packets dequeued while their queue was on the new list.
    new_list_dequeues: u64,
}

impl FqCodel {
    pub fn new(params: FqCodelParams) -> FqCodel {
        let n = params.flows.max(1);
        let flows = (0..n)
            .map(|_| Flow { q: PacketQueue::new(), vars: CodelVars::default(), deficit: 0, list: List::None, stats: None })
            .collect();
        FqCodel {
            params,
            flows,
            new_flows: VecDeque::new(),
            old_flows: VecDeque::new(),
            backlog_pkts: 0,
            backlog_bytes: 0,
            maxpacket: 0,
            c: Counters::default(),
            sink: CodelSink::default(),
            new_list_dequeues: 0,
        }
    }

    /// The queue index a flow key hashes into.
    pub fn bucket(&self, key: &FlowKey) -> usize {
        (key.hash_with(self.params.seed) % self.flows.len() as u64) as usize
    }

    pub fn active_new(&self) -> usize {
        self.new_flows.len()
    }
    pub fn active_old(&self) -> usize {
        self.old_flows.len()
    }

    /// Per-queue statistics of every queue that ever saw a packet, most bytes first.
    pub fn flow_stats(&self) -> Vec<FlowStats> {
        let mut v: Vec<FlowStats> = self.flows.iter().filter_map(|f| f.stats.as_deref().cloned()).collect();
        v.sort_by_key(|s| std::cmp::Reverse(s.bytes));
        v
    }

    fn drop_from_fattest(&mut self) {
        let Some((idx, _)) = self.flows.iter().enumerate().max_by_key(|(_, f)| f.q.bytes()) else { return };
        let f = &mut self.flows[idx];
        if let Some(p) = f.q.pop() {
            self.backlog_pkts -= 1;
            self.backlog_bytes -= p.size();
            if let Some(s) = f.stats.as_mut() {
                s.dropped_overflow += 1;
            }
            self.c.note_drop(&p, DropReason::HeadDrop);
            self.sink.dropped.push((p, DropReason::HeadDrop));
        }
    }
}

impl Qdisc for FqCodel {
    fn enqueue(&mut self, pkt: Packet, _now: u64) {
        self.c.note_arrival(&pkt);
        let idx = self.bucket(&pkt.key);
        let quantum = self.params.quantum as i64;
        let f = &mut self.flows[idx];
        let st = f.stats.get_or_insert_with(|| Box::new(FlowStats { bucket: idx, flow: pkt.key, ..Default::default() }));
        st.packets += 1;
        st.bytes += pkt.size();
        if f.list == List::None {
            f.list = List::New;
            f.deficit = quantum;
            st.activations += 1;
            self.new_flows.push_back(idx);
        }
        self.maxpacket = self.maxpacket.max(pkt.size());
        self.backlog_pkts += 1;
        self.backlog_bytes += pkt.size();
        self.c.enqueued += 1;
        self.c.enqueued_bytes += pkt.size();
        f.q.push(pkt);
        st.max_backlog_bytes = st.max_backlog_bytes.max(f.q.bytes());
        if self.backlog_pkts > self.params.limit {
            self.drop_from_fattest();
        }
        self.c.note_backlog(self.backlog_pkts, self.backlog_bytes);
    }

    fn dequeue(&mut self, now: u64) -> Option<Packet> {
        let quantum = self.params.quantum as i64;
        loop {
            let (list, idx) = if let Some(&i) = self.new_flows.front() {
                (List::New, i)
            } else if let Some(&i) = self.old_flows.front() {
                (List::Old, i)
            } else {
                return None;
            };
            let f = &mut self.flows[idx];
            if f.deficit <= 0 {
                // quantum used up: replenish and go to the end of the old list
                f.deficit += quantum;
                match list {
                    List::New => self.new_flows.pop_front(),
                    _ => self.old_flows.pop_front(),
                };
                f.list = List::Old;
                self.old_flows.push_back(idx);
                continue;
            }
            let other = self.backlog_bytes - f.q.bytes();
            let (d0, db0, m0) = (self.sink.drops, self.sink.drop_bytes, self.sink.marks);
            let before_pkts = f.q.len();
            let before_bytes = f.q.bytes();
            let pkt = f.vars.dequeue(&self.params.codel, &mut f.q, other, self.maxpacket, now, &mut self.sink);
            let (drops, marks) = (self.sink.drops - d0, self.sink.marks - m0);
            self.backlog_pkts -= before_pkts - f.q.len();
            self.backlog_bytes -= before_bytes - f.q.bytes();
            self.c.dropped += drops;
            self.c.dropped_aqm += drops;
            self.c.dropped_bytes += self.sink.drop_bytes - db0;
            self.c.ecn_marked += marks;
            if let Some(s) = f.stats.as_mut() {
                s.dropped_aqm += drops;
                s.ecn_marked += marks;
            }
            match pkt {
                None => {
                    // queue empty: a new queue moves to the end of the old
                    // list (RFC 8290 4.2); an old queue becomes inactive.
                    match list {
                        List::New => {
                            self.new_flows.pop_front();
                            f.list = List::Old;
                            self.old_flows.push_back(idx);
                        }
                        _ => {
                            self.old_flows.pop_front();
                            f.list = List::None;
                        }
                    }
                    continue;
                }
                Some(p) => {
                    f.deficit -= p.size() as i64;
                    if let Some(s) = f.stats.as_mut() {
                        s.dequeued += 1;
                    }
                    if list == List::New {
                        self.new_list_dequeues += 1;
                    }
                    self.c.note_dequeue(&p);
                    return Some(p);
                }
            }
        }
    }

    fn backlog_packets(&self) -> usize {
        self.backlog_pkts
    }
    fn backlog_bytes(&self) -> u64 {
        self.backlog_bytes
    }
    fn counters(&self) -> &Counters {
        &self.c
    }
    fn take_dropped(&mut self, out: &mut Vec<(Packet, DropReason)>) {
        out.append(&mut self.sink.dropped);
    }
    fn kind(&self) -> &'static str {
        "fq_codel"
    }
    fn details(&self) -> serde_json::Value {
        let stats = self.flow_stats();
        let seen = stats.len();
        let top: Vec<&FlowStats> = stats.iter().take(64).collect();
        serde_json::json!({
            "target_ms": self.params.codel.target_ns as f64 / 1e6,
            "interval_ms": self.params.codel.interval_ns as f64 / 1e6,
            "ecn": self.params.codel.ecn,
            "flows": self.params.flows,
            "quantum": self.params.quantum,
            "limit_packets": self.params.limit,
            "new_flows_active": self.new_flows.len(),
            "old_flows_active": self.old_flows.len(),
            "new_list_dequeues": self.new_list_dequeues,
            "queues_used": seen,
            "per_flow": top,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;
    use bloatlab_model::CodelParams;

    fn fq() -> FqCodel {
        FqCodel::new(FqCodelParams { codel: CodelParams { ecn: false, ..Default::default() }, ..Default::default() })
    }

    #[test]
    fn flows_hash_to_distinct_buckets() {
        let q = fq();
        let a = sized(1, 0, 0, 100, 0);
        let b = sized(2, 0, 0, 100, 0);
        assert_ne!(q.bucket(&a.key), q.bucket(&b.key));
        assert_eq!(q.bucket(&a.key), q.bucket(&sized(1, 9, 5, 1500, 2).key));
    }

    /// A sparse flow's packet is dequeued ahead of a backlogged bulk flow.
    #[test]
    fn sparse_flow_goes_first() {
        let mut q = fq();
        for i in 0..100 {
            q.enqueue(pkt(1, i, 0), 0);
        }
        // serve the bulk flow for a while: it ends up on the old list
        for i in 0..10 {
            assert_eq!(q.dequeue(i * MS).unwrap().seq, i);
        }
        assert_eq!(q.active_old(), 1);
        q.enqueue(sized(2, 1000, 10 * MS, 100, 0), 10 * MS);
        assert_eq!(q.active_new(), 1);
        let p = q.dequeue(10 * MS).unwrap();
        assert_eq!(p.seq, 1000, "sparse packet first");
        assert_eq!(q.dequeue(11 * MS).unwrap().seq, 10);
        // the sparse queue emptied on the new list -> moved to the old list, then removed
        q.dequeue(12 * MS);
        assert_eq!(q.active_new(), 0);
        assert_eq!(q.active_old(), 1);
    }

    /// A new flow that keeps sending gets one quantum of priority, then joins
    /// the round robin at the end of the old list.
    #[test]
    fn new_flow_moves_to_old_list_after_quantum() {
        let mut q = fq();
        for i in 0..50 {
            q.enqueue(pkt(1, i, 0), 0);
        }
        q.dequeue(0); // deficit 1514 - 1500 = 14: still on the new list
        q.dequeue(0); // deficit -1486: moves to the old list at its next visit
        for i in 0..50 {
            q.enqueue(pkt(2, 100 + i, 0), 0);
        }
        // flow 2 is new: after flow 1 is moved to the old list, flow 2 is
        // served first for one quantum (two packets: 1514 -> 14 -> -1486)
        let order: Vec<u64> = (0..8).map(|_| q.dequeue(0).unwrap().seq).collect();
        assert_eq!(&order[..2], &[100, 101]);
        // then round robin, one 1500-byte packet per quantum each
        let f1 = order.iter().filter(|&&s| s < 100).count();
        let f2 = order.len() - f1;
        assert!(f1.abs_diff(f2) <= 2, "{order:?}");
    }

    /// DRR shares bytes, not packets: small-packet and big-packet flows get
    /// equal byte rates.
    #[test]
    fn drr_is_byte_fair() {
        let mut q = fq();
        for i in 0..3000 {
            q.enqueue(sized(1, i, 0, 1500, 0), 0);
            q.enqueue(sized(2, i, 0, 300, 0), 0);
            q.enqueue(sized(2, i, 0, 300, 0), 0);
            q.enqueue(sized(2, i, 0, 300, 0), 0);
        }
        let (mut b1, mut b2) = (0u64, 0u64);
        for _ in 0..3000 {
            let p = q.dequeue(0).unwrap();
            if p.key.sport == 1001 {
                b1 += p.size();
            } else {
                b2 += p.size();
            }
        }
        let ratio = b1 as f64 / b2 as f64;
        assert!((ratio - 1.0).abs() < 0.05, "{b1} {b2}");
    }

    #[test]
    fn overflow_drops_head_of_fattest_flow() {
        let mut q = FqCodel::new(FqCodelParams { limit: 10, ..Default::default() });
        for i in 0..8 {
            q.enqueue(pkt(1, i, 0), 0);
        }
        q.enqueue(sized(2, 100, 0, 100, 0), 0);
        q.enqueue(sized(2, 101, 0, 100, 0), 0);
        q.enqueue(sized(2, 102, 0, 100, 0), 0); // 11 > 10: drop head of flow 1
        let mut d = vec![];
        q.take_dropped(&mut d);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].0.seq, 0);
        assert_eq!(d[0].1, DropReason::HeadDrop);
        assert_eq!(q.backlog_packets(), 10);
        assert_eq!(q.backlog_bytes(), 7 * 1500 + 300);
        let st = q.flow_stats();
        assert_eq!(st[0].dropped_overflow, 1);
    }

    /// CoDel acts per flow: a bulk flow with a standing queue is dropped,
    /// a sparse flow through the same FQ-CoDel never is.
    #[test]
    fn codel_per_flow() {
        let mut q = fq();
        let mut t = 0;
        let mut seq = 0;
        let mut sparse_delays = vec![];
        // bulk arrives at 2 packets/ms, link drains 1 packet/ms; sparse packet every 20 ms
        for ms in 0..2000u64 {
            t = ms * MS;
            q.enqueue(pkt(1, seq, t), t);
            q.enqueue(pkt(1, seq + 1, t), t);
            seq += 2;
            if ms % 20 == 10 {
                q.enqueue(sized(2, 1_000_000 + ms, t, 100, 0), t);
            }
            if let Some(p) = q.dequeue(t) {
                if p.key.sport == 1002 {
                    sparse_delays.push(t - p.arrival_ns);
                }
            }
        }
        let _ = t;
        let st = q.flow_stats();
        let bulk = st.iter().find(|s| s.flow.sport == 1001).unwrap();
        let sparse = st.iter().find(|s| s.flow.sport == 1002).unwrap();
        assert!(bulk.dropped_aqm > 100, "bulk drops {}", bulk.dropped_aqm);
        assert_eq!(sparse.dropped_aqm, 0);
        assert_eq!(sparse_delays.len(), 100);
        assert!(sparse_delays.iter().all(|&d| d <= MS), "{sparse_delays:?}");
        assert!(sparse.activations >= 99);
    }
}
