//! A UDP load flow's receiver statistics: distinct datagrams, loss against
//! what the sender says it sent, reordering, and RFC 3550 interarrival
//! jitter (the sender's and receiver's clock offset cancels out of it).
use bloatlab_results::{Direction, Flow, UdpStats, UdpSummary};

/// Fed each datagram as it arrives.
#[derive(Debug, Clone, Default)]
pub struct UdpReceiver {
    received: u64,
    bytes: u64,
    highest: Option<u64>,
    out_of_order: u64,
    /// Sequence numbers seen below the highest, for duplicate detection of late arrivals.
    late_seen: std::collections::HashSet<u64>,
    last_transit_ns: Option<i128>,
    /// RFC 3550 J, ns (fractional).
    jitter_ns: f64,
}

impl UdpReceiver {
    pub fn new() -> UdpReceiver {
        UdpReceiver::default()
    }

    /// A datagram `seq` sent at `send_ns` (sender clock) arrived at `recv_ns`
    /// (receiver clock) with `len` payload bytes. Duplicates are ignored.
    pub fn on_datagram(&mut self, seq: u64, send_ns: u64, recv_ns: u64, len: usize) {
        match self.highest {
            Some(h) if seq == h => return, // duplicate of the newest
            Some(h) if seq < h => {
                if !self.late_seen.insert(seq) {
                    return; // duplicate of a late one
                }
                self.out_of_order += 1;
            }
            _ => self.highest = Some(seq),
        }
        self.received += 1;
        self.bytes += len as u64;
        // RFC 3550 6.4.1: D(i,j) = (Rj - Ri) - (Sj - Si) = transit_j - transit_i; J += (|D| - J) / 16
        let transit = recv_ns as i128 - send_ns as i128;
        if let Some(prev) = self.last_transit_ns {
            let d = (transit - prev).unsigned_abs() as f64;
            self.jitter_ns += (d - self.jitter_ns) / 16.0;
        }
        self.last_transit_ns = Some(transit);
    }

    pub fn received(&self) -> u64 {
        self.received
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The statistics, with `sent` from the sender (None: highest sequence + 1).
    pub fn stats(&self, sent: Option<u64>, target_bps: f64, payload_bytes: u32) -> UdpStats {
        let sent = sent.unwrap_or_else(|| self.highest.map_or(0, |h| h + 1)).max(self.received);
        let lost = sent - self.received;
        UdpStats {
            target_bps,
            payload_bytes,
            sent,
            received: self.received,
            lost,
            loss_pct: if sent > 0 { lost as f64 * 100.0 / sent as f64 } else { 0.0 },
            out_of_order: self.out_of_order,
            jitter_ms: self.jitter_ns / 1e6,
        }
    }
}

/// A receiver's statistics completed with the sender's count of datagrams
/// sent (the receiver alone cannot see losses after its last arrival).
pub fn with_sent(receiver: UdpStats, sent: u64) -> UdpStats {
    let sent = sent.max(receiver.received);
    let lost = sent - receiver.received;
    UdpStats { sent, lost, loss_pct: if sent > 0 { lost as f64 * 100.0 / sent as f64 } else { 0.0 }, ..receiver }
}

/// Each direction's UDP load in a phase: its flows' statistics summed
/// (jitter: the largest), with the direction's goodput as what arrived.
/// Directions without UDP flows are left out.
pub fn direction_summaries(flows: &[Flow], received_bps: impl Fn(Direction) -> f64) -> Vec<UdpSummary> {
    [Direction::Up, Direction::Down]
        .into_iter()
        .filter_map(|d| {
            let fl: Vec<&UdpStats> = flows.iter().filter(|f| f.direction == d).filter_map(|f| f.udp.as_ref()).collect();
            if fl.is_empty() {
                return None;
            }
            let (sent, received, lost) = (fl.iter().map(|u| u.sent).sum::<u64>(), fl.iter().map(|u| u.received).sum(), fl.iter().map(|u| u.lost).sum::<u64>());
            Some(UdpSummary {
                direction: d,
                flows: fl.len() as u32,
                offered_bps: fl.iter().map(|u| u.target_bps).sum(),
                received_bps: received_bps(d),
                sent,
                received,
                lost,
                loss_pct: if sent > 0 { lost as f64 * 100.0 / sent as f64 } else { 0.0 },
                out_of_order: fl.iter().map(|u| u.out_of_order).sum(),
                jitter_ms: fl.iter().map(|u| u.jitter_ms).fold(0.0, f64::max),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_direction_sums_its_flows() {
        let u = |sent, received, jitter_ms| UdpStats { target_bps: 5e6, payload_bytes: 1000, sent, received, lost: sent - received, jitter_ms, ..Default::default() };
        let flow = |direction, udp| Flow { id: 0, direction, goodput: vec![], tcp_info: vec![], bytes: 0, max_gap_ns: 0, max_gap_at_ns: 0, dscp: 0, udp };
        let flows = vec![flow(Direction::Up, Some(u(100, 90, 0.5))), flow(Direction::Up, Some(u(100, 100, 1.5))), flow(Direction::Down, None)];
        let s = direction_summaries(&flows, |d| if d == Direction::Up { 9.5e6 } else { 0.0 });
        assert_eq!(s.len(), 1, "the TCP download has no UDP summary");
        assert_eq!((s[0].flows, s[0].sent, s[0].received, s[0].lost), (2, 200, 190, 10));
        assert_eq!((s[0].offered_bps, s[0].received_bps, s[0].loss_pct, s[0].jitter_ms), (10e6, 9.5e6, 5.0, 1.5));
    }

    #[test]
    fn loss_reordering_duplicates_and_jitter() {
        let mut r = UdpReceiver::new();
        // 10 datagrams sent 1 ms apart; #3 and #7 lost, #5 arrives after #6, #8 twice
        let t = |i: u64| i * 1_000_000;
        for (seq, extra_delay) in [(0, 0), (1, 0), (2, 0), (4, 0), (6, 0), (5, 2_000_000), (8, 0), (8, 0), (9, 0)] {
            r.on_datagram(seq, t(seq), t(seq) + 10_000_000 + extra_delay, 1400);
        }
        let s = r.stats(Some(10), 1e6, 1400);
        assert_eq!((s.sent, s.received, s.lost, s.out_of_order), (10, 8, 2, 1));
        assert!((s.loss_pct - 20.0).abs() < 1e-9);
        assert_eq!(r.bytes(), 8 * 1400);
        // transits: 10 ms everywhere but #5 (12 ms): |D| = 2 ms into and out of it
        // arrivals 0,1,2,4,6,5,8,9: |D| = 0,0,0,0,2,2,0 ms
        let mut j = 0.0f64;
        for d in [0.0, 0.0, 0.0, 0.0, 2e6, 2e6, 0.0] {
            j += (d - j) / 16.0;
        }
        assert!((s.jitter_ms - j / 1e6).abs() < 1e-12, "{} vs {}", s.jitter_ms, j / 1e6);
        // without the sender's count: highest + 1
        assert_eq!(r.stats(None, 1e6, 1400).sent, 10);
        assert_eq!(UdpReceiver::new().stats(None, 1e6, 1400).loss_pct, 0.0);
        // the sender sent 12: the last two were lost too
        let w = with_sent(r.stats(None, 1e6, 1400), 12);
        assert_eq!((w.sent, w.lost), (12, 4));
        assert!((w.loss_pct - 100.0 / 3.0).abs() < 1e-9);
        assert_eq!(with_sent(r.stats(None, 1e6, 1400), 3).lost, 0, "never negative");
    }
}
