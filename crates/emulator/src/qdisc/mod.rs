//! Queue disciplines. Each is a pure state machine driven by the caller's
//! clock: `enqueue(pkt, now)` and `dequeue(now)` with `now` in nanoseconds
//! (any monotonic origin). Packets a discipline discards are kept in an
//! internal list that the caller drains with [`Qdisc::take_dropped`] (the data
//! path recycles their buffers; tests inspect them).
//!
//! Available: droptail FIFO by packets ([`fifo::Fifo`]) and by bytes
//! ([`fifo::Fifo::bytes`]), drop-head FIFO ([`fifo::Fifo::drophead`]), CoDel (RFC 8289,
//! [`codel::Codel`]), FQ-CoDel (RFC 8290, [`fq_codel::FqCodel`]) and PIE
//! (RFC 8033, [`pie::Pie`]).

pub mod codel;
pub mod fifo;
pub mod fq_codel;
pub mod pie;

use crate::packet::Packet;
use serde::Serialize;

/// Why a packet was discarded by a queue discipline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DropReason {
    /// Arriving packet refused: the queue was at its limit (droptail).
    Overlimit,
    /// Packet at the head discarded to make room (drophead; FQ-CoDel's fattest-flow drop).
    HeadDrop,
    /// Dropped by the AQM control law (CoDel / FQ-CoDel dequeue, PIE early drop).
    Aqm,
}

/// Cumulative counters every discipline keeps.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Counters {
    /// Packets/bytes offered to `enqueue`.
    pub arrivals: u64,
    pub arrival_bytes: u64,
    /// Packets/bytes accepted into the queue.
    pub enqueued: u64,
    pub enqueued_bytes: u64,
    /// Packets/bytes handed out by `dequeue`.
    pub dequeued: u64,
    pub dequeued_bytes: u64,
    /// Total drops and drops by reason.
    pub dropped: u64,
    pub dropped_bytes: u64,
    pub dropped_overlimit: u64,
    pub dropped_head: u64,
    pub dropped_aqm: u64,
    /// Packets marked CE instead of being dropped.
    pub ecn_marked: u64,
    /// Largest backlog seen (packets / bytes).
    pub max_backlog_packets: u64,
    pub max_backlog_bytes: u64,
}

impl Counters {
    /// A packet was offered to `enqueue`.
    pub fn note_arrival(&mut self, p: &Packet) {
        self.arrivals += 1;
        self.arrival_bytes += p.size();
    }
    /// A packet was accepted; `pkts`/`bytes` is the backlog with it.
    pub fn note_enqueue(&mut self, p: &Packet, pkts: usize, bytes: u64) {
        self.enqueued += 1;
        self.enqueued_bytes += p.size();
        self.note_backlog(pkts, bytes);
    }
    /// A packet was handed out by `dequeue`.
    pub fn note_dequeue(&mut self, p: &Packet) {
        self.dequeued += 1;
        self.dequeued_bytes += p.size();
    }
    pub fn note_drop(&mut self, p: &Packet, why: DropReason) {
        self.dropped += 1;
        self.dropped_bytes += p.size();
        match why {
            DropReason::Overlimit => self.dropped_overlimit += 1,
            DropReason::HeadDrop => self.dropped_head += 1,
            DropReason::Aqm => self.dropped_aqm += 1,
        }
    }
    pub fn note_backlog(&mut self, pkts: usize, bytes: u64) {
        self.max_backlog_packets = self.max_backlog_packets.max(pkts as u64);
        self.max_backlog_bytes = self.max_backlog_bytes.max(bytes);
    }
}

/// The interface of all queue disciplines.
pub trait Qdisc: Send {
    /// Offer a packet that arrived at `now`. The discipline queues it, or drops
    /// it (or another packet) and records why.
    fn enqueue(&mut self, pkt: Packet, now: u64);
    /// The packet to transmit at `now`, if any. AQMs may drop or mark here.
    fn dequeue(&mut self, now: u64) -> Option<Packet>;
    fn backlog_packets(&self) -> usize;
    fn backlog_bytes(&self) -> u64;
    fn counters(&self) -> &Counters;
    /// Move the packets discarded since the last call into `out`, with reasons.
    fn take_dropped(&mut self, out: &mut Vec<(Packet, DropReason)>);
    /// Short kind name ("pfifo", "bfifo", "drophead", "codel", "fq_codel", "pie").
    fn kind(&self) -> &'static str;
    /// Discipline-specific state for the stats (CoDel count, PIE drop probability, FQ flows...).
    fn details(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
}

/// A FIFO of packets with a running byte count (building block).
#[derive(Debug, Default)]
pub struct PacketQueue {
    q: std::collections::VecDeque<Packet>,
    bytes: u64,
}

impl PacketQueue {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn push(&mut self, p: Packet) {
        self.bytes += p.size();
        self.q.push_back(p);
    }
    pub fn pop(&mut self) -> Option<Packet> {
        let p = self.q.pop_front()?;
        self.bytes -= p.size();
        Some(p)
    }
    pub fn front(&self) -> Option<&Packet> {
        self.q.front()
    }
    pub fn len(&self) -> usize {
        self.q.len()
    }
    pub fn is_empty(&self) -> bool {
        self.q.is_empty()
    }
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

/// Build the discipline a [`bloatlab_model::QueueSpec`] names. `seed`
/// perturbs FQ hashing and PIE's random drops. Kernel qdiscs are refused
/// (the emulator only runs its own).
pub fn build(q: &bloatlab_model::QueueSpec, seed: u64) -> Result<Box<dyn Qdisc>, String> {
    use bloatlab_model::QueueSpec as Q;
    Ok(match q {
        Q::Fifo { packets } => Box::new(fifo::Fifo::new(*packets as usize)),
        Q::Bfifo { bytes } => Box::new(fifo::Fifo::bytes(*bytes)),
        Q::Drophead { packets } => Box::new(fifo::Fifo::drophead(*packets as usize)),
        Q::Codel { params, limit } => Box::new(codel::Codel::new(params.clone(), *limit as usize)),
        Q::FqCodel { params } => {
            let mut p = params.clone();
            if p.seed == 0 {
                p.seed = seed;
            }
            Box::new(fq_codel::FqCodel::new(p))
        }
        Q::Pie { params } => {
            let mut p = params.clone();
            p.seed ^= seed;
            Box::new(pie::Pie::new(p))
        }
        Q::Kernel { qdisc, .. } => return Err(format!("`{qdisc}` is a kernel qdisc, not one of the emulator's")),
    })
}

#[cfg(test)]
pub(crate) mod testutil {
    use crate::packet::{build, Packet};
    /// A 1500-byte UDP/IPv4 packet of flow `flow`, tagged `seq`.
    pub fn pkt(flow: u16, seq: u64, now: u64) -> Packet {
        sized(flow, seq, now, 1500, 0)
    }
    pub fn sized(flow: u16, seq: u64, now: u64, len: usize, ecn: u8) -> Packet {
        let mut p = Packet::from_bytes(&build::flow_v4(flow, len, ecn), now);
        p.seq = seq;
        p
    }
    pub const MS: u64 = 1_000_000;
}

