//! PIE, RFC 8033 (Proportional Integral controller Enhanced), with the
//! timestamp method of measuring queueing latency (RFC 8033 section 5.2's
//! "current_qdelay = now - packet.timestamp" at dequeue, as Linux does by
//! default), the drop-probability auto-tuning by ranges of section 4.2, the
//! burst allowance, and de-randomisation (section 5.1, `accu_prob`).
//!
//! The periodic update (every `tupdate`) is run lazily: every call first
//! performs the updates whose times have passed.

use super::{Counters, DropReason, PacketQueue, Qdisc};
use crate::packet::Packet;
use crate::rng::Rng;

pub use bloatlab_model::PieParams;

/// The RFC 8033 section 4.2 auto-tuning: the raw adjustment is scaled down
/// while the drop probability is small.
pub fn scale_adjustment(p: f64, drop_prob: f64) -> f64 {
    if drop_prob < 0.000001 {
        p / 2048.0
    } else if drop_prob < 0.00001 {
        p / 512.0
    } else if drop_prob < 0.0001 {
        p / 128.0
    } else if drop_prob < 0.001 {
        p / 32.0
    } else if drop_prob < 0.01 {
        p / 8.0
    } else if drop_prob < 0.1 {
        p / 2.0
    } else {
        p
    }
}

/// PIE state (RFC 8033 names).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct PieVars {
    pub drop_prob: f64,
    pub accu_prob: f64,
    pub burst_allowance_ns: u64,
    pub qdelay_old_ns: u64,
    pub current_qdelay_ns: u64,
    pub next_update_ns: u64,
    pub updates: u64,
}

#[derive(Debug)]
pub struct Pie {
    pub params: PieParams,
    vars: PieVars,
    q: PacketQueue,
    c: Counters,
    rng: Rng,
    dropped: Vec<(Packet, DropReason)>,
    mean_pktsize: u64,
    started: bool,
}

impl Pie {
    pub fn new(params: PieParams) -> Pie {
        let rng = Rng::new(params.seed);
        let vars = PieVars { burst_allowance_ns: params.max_burst_ns, ..Default::default() };
        Pie { params, vars, q: PacketQueue::new(), c: Counters::default(), rng, dropped: Vec::new(), mean_pktsize: 1500, started: false }
    }

    pub fn vars(&self) -> &PieVars {
        &self.vars
    }

    /// Run the periodic updates due by `now`.
    fn catch_up(&mut self, now: u64) {
        if !self.started {
            self.started = true;
            self.vars.next_update_ns = now + self.params.tupdate_ns;
            return;
        }
        let mut n = 0;
        while now >= self.vars.next_update_ns {
            self.calculate_drop_prob();
            self.vars.next_update_ns += self.params.tupdate_ns;
            n += 1;
            if n > 100_000 {
                self.vars.next_update_ns = now + self.params.tupdate_ns;
                break;
            }
        }
    }

    /// RFC 8033 `calculate_drop_prob()`.
    pub fn calculate_drop_prob(&mut self) {
        let v = &mut self.vars;
        let p = &self.params;
        // with the timestamp method an empty queue has no queueing delay
        if self.q.is_empty() {
            v.current_qdelay_ns = 0;
        }
        let cur = v.current_qdelay_ns as f64 / 1e9;
        let old = v.qdelay_old_ns as f64 / 1e9;
        let target = p.target_ns as f64 / 1e9;
        let mut adj = p.alpha * (cur - target) + p.beta * (cur - old);
        adj = scale_adjustment(adj, v.drop_prob);
        // cap drop adjustments
        if v.drop_prob >= 0.1 && adj > 0.02 {
            adj = 0.02;
        }
        v.drop_prob += adj;
        // exponentially decay drop prob when congestion goes away
        if v.current_qdelay_ns < p.target_ns / 2 && v.qdelay_old_ns < p.target_ns / 2 {
            v.drop_prob *= 0.98;
        }
        v.drop_prob = v.drop_prob.clamp(0.0, 1.0);
        // burst tolerance
        v.burst_allowance_ns = v.burst_allowance_ns.saturating_sub(p.tupdate_ns);
        if v.drop_prob == 0.0 && v.current_qdelay_ns < p.target_ns / 2 && v.qdelay_old_ns < p.target_ns / 2 {
            v.burst_allowance_ns = p.max_burst_ns;
        }
        v.qdelay_old_ns = v.current_qdelay_ns;
        v.updates += 1;
    }

    /// RFC 8033 `drop_early()`: true = drop (or mark).
    fn drop_early(&mut self, _pkt_size: u64) -> bool {
        let v = &mut self.vars;
        let p = &self.params;
        if v.burst_allowance_ns > 0 {
            return false;
        }
        if (v.qdelay_old_ns < p.target_ns / 2 && v.drop_prob < 0.2) || self.q.bytes() <= 2 * self.mean_pktsize {
            return false;
        }
        if !p.derandomize {
            return self.rng.chance(v.drop_prob);
        }
        if v.drop_prob == 0.0 {
            v.accu_prob = 0.0;
        }
        v.accu_prob += v.drop_prob;
        if v.accu_prob < 0.85 {
            return false;
        }
        if v.accu_prob >= 8.5 {
            v.accu_prob = 0.0;
            return true;
        }
        if self.rng.uniform() < v.drop_prob {
            v.accu_prob = 0.0;
            return true;
        }
        false
    }
}

impl Qdisc for Pie {
    fn enqueue(&mut self, mut pkt: Packet, now: u64) {
        self.catch_up(now);
        self.c.note_arrival(&pkt);
        if self.q.len() >= self.params.limit {
            self.vars.accu_prob = 0.0;
            self.c.note_drop(&pkt, DropReason::Overlimit);
            self.dropped.push((pkt, DropReason::Overlimit));
            return;
        }
        if self.drop_early(pkt.size()) {
            if self.params.ecn && self.vars.drop_prob <= 0.1 && pkt.mark_ce() {
                self.c.ecn_marked += 1;
            } else {
                self.vars.accu_prob = 0.0;
                self.c.note_drop(&pkt, DropReason::Aqm);
                self.dropped.push((pkt, DropReason::Aqm));
                return;
            }
        }
        // running mean of packet sizes (for the "2 * MEAN_PKTSIZE" safeguard)
        self.mean_pktsize = (self.mean_pktsize * 7 + pkt.size()) / 8;
        self.c.note_enqueue(&pkt, self.q.len() + 1, self.q.bytes() + pkt.size());
        self.q.push(pkt);
    }

    fn dequeue(&mut self, now: u64) -> Option<Packet> {
        self.catch_up(now);
        let p = self.q.pop()?;
        self.vars.current_qdelay_ns = now.saturating_sub(p.arrival_ns);
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
        "pie"
    }
    fn details(&self) -> serde_json::Value {
        serde_json::json!({
            "target_ms": self.params.target_ns as f64 / 1e6,
            "tupdate_ms": self.params.tupdate_ns as f64 / 1e6,
            "alpha": self.params.alpha,
            "beta": self.params.beta,
            "max_burst_ms": self.params.max_burst_ns as f64 / 1e6,
            "limit_packets": self.params.limit,
            "ecn": self.params.ecn,
            "drop_prob": self.vars.drop_prob,
            "burst_allowance_ms": self.vars.burst_allowance_ns as f64 / 1e6,
            "qdelay_ms": self.vars.current_qdelay_ns as f64 / 1e6,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;

    #[test]
    fn autotuning_ranges() {
        assert_eq!(scale_adjustment(2048.0, 0.0), 1.0);
        assert_eq!(scale_adjustment(512.0, 0.000005), 1.0);
        assert_eq!(scale_adjustment(128.0, 0.00005), 1.0);
        assert_eq!(scale_adjustment(32.0, 0.0005), 1.0);
        assert_eq!(scale_adjustment(8.0, 0.005), 1.0);
        assert_eq!(scale_adjustment(2.0, 0.05), 1.0);
        assert_eq!(scale_adjustment(1.0, 0.5), 1.0);
    }

    /// One update by hand: qdelay 30 ms, old 20 ms, prob 0.2 (no scaling):
    /// p = 0.125*(0.030-0.015) + 1.25*(0.030-0.020) = 0.014375.
    #[test]
    fn control_law_by_hand() {
        let mut q = Pie::new(PieParams::default());
        q.enqueue(pkt(0, 0, 0), 0);
        q.vars.drop_prob = 0.2;
        q.vars.current_qdelay_ns = 30_000_000;
        q.vars.qdelay_old_ns = 20_000_000;
        q.calculate_drop_prob();
        assert!((q.vars.drop_prob - 0.214375).abs() < 1e-12, "{}", q.vars.drop_prob);
        assert_eq!(q.vars.qdelay_old_ns, 30_000_000);
        // a big jump is capped at +0.02 once drop_prob >= 10%
        q.vars.current_qdelay_ns = 500_000_000;
        q.calculate_drop_prob();
        assert!((q.vars.drop_prob - 0.234375).abs() < 1e-12);
        // low probability: the adjustment is divided (here by 2048)
        q.vars.drop_prob = 0.0;
        q.vars.current_qdelay_ns = 30_000_000;
        q.vars.qdelay_old_ns = 30_000_000;
        q.calculate_drop_prob();
        assert!((q.vars.drop_prob - 0.125 * 0.015 / 2048.0).abs() < 1e-15);
    }

    #[test]
    fn decay_and_burst_allowance() {
        let mut q = Pie::new(PieParams::default());
        q.enqueue(pkt(0, 0, 0), 0);
        q.vars.drop_prob = 0.5;
        q.vars.burst_allowance_ns = 0;
        q.vars.current_qdelay_ns = 1_000_000;
        q.vars.qdelay_old_ns = 1_000_000;
        q.calculate_drop_prob();
        // p = 0.125*(0.001-0.015) + 0 = -0.00175 ; (0.5 - 0.00175) * 0.98
        assert!((q.vars.drop_prob - (0.5 - 0.00175) * 0.98).abs() < 1e-12);
        // burst allowance counts down by tupdate and refills only when idle-ish with prob 0
        let mut q = Pie::new(PieParams::default());
        q.enqueue(pkt(0, 0, 0), 0);
        q.vars.current_qdelay_ns = 20_000_000;
        q.vars.qdelay_old_ns = 20_000_000;
        q.calculate_drop_prob();
        assert_eq!(q.vars.burst_allowance_ns, 135_000_000);
    }

    /// A standing queue (arrivals at twice the service rate) drives the drop
    /// probability up after the 150 ms burst allowance, and PIE then holds the
    /// queueing delay near its 15 ms target.
    #[test]
    fn controls_a_standing_queue() {
        let mut q = Pie::new(PieParams { ecn: false, seed: 42, ..Default::default() });
        let mut delays = vec![];
        let mut first_drop_ms = None;
        let mut window = (0, 0);
        let mut seq = 0;
        // arrivals: 2 packets per ms; service: 1 packet per ms (12 Mbit/s)
        for ms in 0..10_000u64 {
            let t = ms * MS;
            for _ in 0..2 {
                q.enqueue(pkt(0, seq, t), t);
                seq += 1;
            }
            if first_drop_ms.is_none() && q.counters().dropped_aqm > 0 {
                first_drop_ms = Some(ms);
            }
            if ms == 5000 {
                window = (q.counters().arrivals, q.counters().dropped_aqm);
            }
            if let Some(p) = q.dequeue(t) {
                if ms >= 5000 {
                    delays.push((t - p.arrival_ns) as f64 / 1e6);
                }
            }
        }
        let first = first_drop_ms.unwrap();
        assert!(first >= 150, "no drops during the burst allowance, first at {first}");
        assert_eq!(q.counters().dropped_overlimit, 0, "the AQM, not the limit, controls the queue");
        let mean = delays.iter().sum::<f64>() / delays.len() as f64;
        assert!(mean > 5.0 && mean < 30.0, "mean queueing delay {mean} ms");
        // to hold the queue, half the arrivals must be dropped
        let c = q.counters();
        let frac = (c.dropped_aqm - window.1) as f64 / (c.arrivals - window.0) as f64;
        assert!((frac - 0.5).abs() < 0.02, "drop fraction {frac}");
    }

    #[test]
    fn ecn_marks_below_ten_percent() {
        let mut q = Pie::new(PieParams { seed: 3, ..Default::default() });
        // moderate overload: 11 arrivals per 10 packet services
        let mut seq = 0;
        for ms in 0..20_000u64 {
            let t = ms * MS;
            let n = if ms % 10 == 0 { 2 } else { 1 };
            for _ in 0..n {
                q.enqueue(sized(0, seq, t, 1500, 2), t);
                seq += 1;
            }
            q.dequeue(t);
        }
        assert!(q.counters().ecn_marked > 0);
        assert!(q.vars().drop_prob <= 0.1 || q.counters().dropped_aqm > 0);
        assert_eq!(q.counters().dropped_overlimit, 0);
    }
}
