//! The search for the shaper rate of one direction.
//!
//! A shaper moves the queue from the line's bottleneck (a modem's FIFO)
//! into the router, where its AQM keeps it short, only while it is slower
//! than the bottleneck; a shaper at or above the line's rate leaves the
//! queue where it was. The search finds the highest rate whose added
//! latency under load stays within the target, by bisection:
//!
//! 1. The line is measured unshaped: its goodput `C` and added latency. A
//!    line within the target is left alone ([`Outcome::NotBloated`]).
//! 2. The low end, [`LOW_SHARE`] of the line's rate, is tried first: a
//!    shaper there must hold the target (measured up to [`LOW_TRIES`]
//!    times), or the queue is not where the shaper can take it
//!    ([`Outcome::NotControllable`]).
//! 3. The high end starts above the line's rate (`C` over the goodput a
//!    wire bit carries, [`WIRE_EFFICIENCY`], times [`HIGH_SHARE`]: a line
//!    whose queue overflowed spends part of its rate on retransmissions,
//!    so its unshaped goodput under-reads it); each step tries the middle
//!    of the interval and keeps the half that holds the target's boundary, until
//!    the interval is narrower than [`RESOLUTION`] of the line's rate or
//!    the budget (steps, time, bytes) is spent.
//! 4. The answer is the highest rate tried that held the target.
//!
//! A step holds when its added latency is within the target plus
//! [`packet_ms`] at the step's rate: a probe may arrive just as a
//! full-size packet starts onto the wire, and no queue can spare it that
//! wait (13.8 ms at 877 kbit/s, 0.6 ms at 20 Mbit/s). A step whose latency
//! was still rising when it ended does not hold.
//!
//! Rates here are shaper rates: bits on the wire, Ethernet header
//! included, as HTB and cake count them.
use serde::{Deserialize, Serialize};

/// The shaper's rate at the low end, as a share of the line's rate.
pub const LOW_SHARE: f64 = 0.5;
/// The shaper's rate at the high end, as a share of the line's rate read
/// from its unshaped goodput (which under-reads a bloated line).
pub const HIGH_SHARE: f64 = 1.2;
/// How many times the low end is measured before a direction whose low
/// end did not hold is called not controllable (a 100 Mbit/s lab line once
/// read +8.55 ms there, in a run where it read +0.2 ms before and after).
pub const LOW_TRIES: u32 = 2;
/// The search stops when its interval is narrower than this share of the
/// line's rate.
pub const RESOLUTION: f64 = 0.02;
/// The time a full-size Ethernet frame (1514 bytes) takes on the wire at
/// `rate_bps`, ms: what a shaper at that rate adds at the least.
pub fn packet_ms(rate_bps: f64) -> f64 {
    if rate_bps > 0.0 {
        1514.0 * 8.0 / rate_bps * 1e3
    } else {
        0.0
    }
}

/// Whether a step holds the target: its added latency within `target_ms`
/// plus one full-size packet's time at `rate_bps` (the shaper's, or the
/// wire rate a goodput stands for), and not still rising at its end.
pub fn holds(target_ms: f64, added_ms: f64, rate_bps: f64, still_rising: bool) -> bool {
    !still_rising && added_ms <= target_ms + packet_ms(rate_bps)
}

/// Goodput per wire bit of full-size TCP segments over Ethernet (1448 of
/// 1514 bytes with timestamps).
pub const WIRE_EFFICIENCY: f64 = 1448.0 / 1514.0;

/// What one short loaded test at a shaper rate measured.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// The shaper's rate, bit/s (None: unshaped, the line as it is).
    pub rate_bps: Option<f64>,
    /// Goodput in the searched direction, bit/s.
    pub goodput_bps: f64,
    /// Added latency under that load, ms (loaded p50 - idle p50).
    pub added_ms: f64,
    /// Latency was still rising when the step ended: a queue was still
    /// filling, so the step did not hold the target whatever it read.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub still_rising: bool,
    /// Whether it held the target.
    pub held: bool,
}

/// Limits on the search (each step is one loaded test). A step is not
/// begun when another like the last one would pass a limit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget {
    pub steps: u32,
    pub seconds: f64,
    pub bytes: f64,
}

impl Budget {
    pub fn steps(n: u32) -> Budget {
        Budget { steps: n, seconds: f64::INFINITY, bytes: f64::INFINITY }
    }
}

/// How a search ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// The unshaped line already held the target: nothing to do.
    NotBloated { added_ms: f64 },
    /// Even at the low end the target was not held: the queue is not one a
    /// shaper here can take over (another bottleneck, or the host itself).
    NotControllable { rate_bps: f64, added_ms: f64 },
    /// The highest rate tried that held the target; `exact` when the
    /// interval closed, false when the budget ended the search first.
    Found { rate_bps: f64, goodput_bps: f64, added_ms: f64, share_of_line: f64, exact: bool },
}

/// One direction's search: ask [`Search::next`] for the rate to try,
/// measure it, give the result to [`Search::record`], until `next` says
/// `None`; then [`Search::outcome`].
#[derive(Debug, Clone)]
pub struct Search {
    target_ms: f64,
    budget: Budget,
    line: Step,
    /// The interval: highest rate that held, lowest that did not.
    lo: Option<Step>,
    /// Low-end steps that did not hold (the low end is measured again once).
    low_misses: u32,
    hi: f64,
    steps: Vec<Step>,
    /// Spent so far, and by the last step: (seconds, bytes).
    spent: (f64, f64),
    last: (f64, f64),
    done: Option<Outcome>,
}

impl Search {
    /// Start from the unshaped line's measurement (`line.rate_bps` None).
    pub fn new(line_goodput_bps: f64, line_added_ms: f64, target_ms: f64, budget: Budget) -> Search {
        let line = Step { rate_bps: None, goodput_bps: line_goodput_bps, added_ms: line_added_ms, still_rising: false, held: line_added_ms <= target_ms };
        let done = line.held.then_some(Outcome::NotBloated { added_ms: line_added_ms });
        Search { target_ms, budget, line, lo: None, low_misses: 0, hi: line_goodput_bps / WIRE_EFFICIENCY * HIGH_SHARE, steps: vec![], spent: (0.0, 0.0), last: (0.0, 0.0), done }
    }

    /// The line's rate as the shaper counts it.
    pub fn line_rate_bps(&self) -> f64 {
        self.line.goodput_bps / WIRE_EFFICIENCY
    }

    /// The next rate to try, bit/s; None when the search is over.
    pub fn next(&self) -> Option<f64> {
        if self.done.is_some() || self.steps.len() as u32 >= self.budget.steps {
            return None;
        }
        if self.spent.0 + self.last.0 > self.budget.seconds || self.spent.1 + self.last.1 > self.budget.bytes {
            return None;
        }
        let line = self.line_rate_bps();
        match self.lo {
            // the low end first
            None => Some(line * LOW_SHARE),
            Some(lo) => {
                let lo = lo.rate_bps.unwrap_or(0.0);
                (self.hi - lo > RESOLUTION * line).then(|| (lo + self.hi) / 2.0)
            }
        }
    }

    /// What the test at `rate_bps` measured (`still_rising`: latency had
    /// not stopped rising by the step's end), and what it cost.
    pub fn record(&mut self, rate_bps: f64, goodput_bps: f64, added_ms: f64, still_rising: bool, cost: (f64, f64)) {
        let held = holds(self.target_ms, added_ms, rate_bps, still_rising);
        let s = Step { rate_bps: Some(rate_bps), goodput_bps, added_ms, still_rising, held };
        self.steps.push(s);
        self.spent = (self.spent.0 + cost.0, self.spent.1 + cost.1);
        self.last = cost;
        if self.lo.is_none() && !s.held {
            // one disturbed step (the machine busy, a burst of losses) must
            // not leave a bloated direction alone: the low end is measured
            // once more before the queue is called not this router's
            self.low_misses += 1;
            if self.low_misses >= LOW_TRIES {
                self.done = Some(Outcome::NotControllable { rate_bps, added_ms });
            }
            return;
        }
        if s.held {
            if self.lo.is_none_or(|l| l.rate_bps < s.rate_bps) {
                self.lo = Some(s);
            }
        } else if rate_bps < self.hi {
            self.hi = rate_bps;
        }
    }

    /// The unshaped line as measured.
    pub fn line(&self) -> Step {
        self.line
    }

    /// Every test so far, in order.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// How the search ended (or stands, if asked before its end).
    pub fn outcome(&self) -> Option<Outcome> {
        if let Some(d) = &self.done {
            return Some(d.clone());
        }
        let lo = self.lo?;
        Some(Outcome::Found {
            rate_bps: lo.rate_bps.unwrap_or(0.0),
            goodput_bps: lo.goodput_bps,
            added_ms: lo.added_ms,
            share_of_line: if self.line.goodput_bps > 0.0 { lo.goodput_bps / self.line.goodput_bps } else { 0.0 },
            exact: self.hi - lo.rate_bps.unwrap_or(0.0) <= RESOLUTION * self.line_rate_bps(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A line of `rate` bit/s whose bottleneck FIFO holds `fifo_ms` when
    /// full, behind a shaper with an AQM: below the line's rate the
    /// shaper's queue is the one that fills (a few ms), at or above it the
    /// line's FIFO fills; goodput is the slower rate's payload share.
    fn line(rate: f64, fifo_ms: f64) -> impl Fn(f64) -> (f64, f64) {
        move |shaped: f64| {
            let goodput = shaped.min(rate) * WIRE_EFFICIENCY;
            // within 1% of the line's rate the shaper no longer keeps the
            // line's queue empty (bursts pass it)
            let added = if shaped < rate * 0.99 { 2.0 } else { fifo_ms };
            (goodput, added)
        }
    }

    fn run(rate: f64, fifo_ms: f64, budget: u32) -> (Search, Option<Outcome>) {
        let l = line(rate, fifo_ms);
        let (g, a) = (rate * WIRE_EFFICIENCY, fifo_ms);
        let mut s = Search::new(g, a, 5.0, Budget::steps(budget));
        while let Some(r) = s.next() {
            let (g, a) = l(r);
            s.record(r, g, a, false, (10.0, g * 10.0 / 8.0));
        }
        let o = s.outcome();
        (s, o)
    }

    #[test]
    fn a_bloated_line_is_shaped_just_below_its_rate_in_a_few_steps() {
        let (s, o) = run(20e6, 1200.0, 10);
        let Some(Outcome::Found { rate_bps, share_of_line, exact, .. }) = o else { panic!("{o:?}") };
        // within the resolution below the point where the shaper lets go
        assert!(rate_bps < 20e6 * 0.99 && rate_bps > 20e6 * (0.99 - 2.0 * RESOLUTION), "{rate_bps}");
        assert!(share_of_line > 0.95, "{share_of_line}");
        assert!(exact);
        // the low end, then bisection: 1 + log2(0.7 / 0.02) steps
        assert!(s.steps().len() <= 7, "{:?}", s.steps());
        assert!(s.steps()[0].rate_bps == Some(s.line_rate_bps() * LOW_SHARE));
    }

    #[test]
    fn a_step_whose_latency_still_rose_does_not_hold_however_low_it_read() {
        let mut s = Search::new(20e6, 900.0, 5.0, Budget::steps(10));
        let r = s.next().unwrap();
        s.record(r, r * WIRE_EFFICIENCY, 1.0, false, (10.0, 0.0));
        let r2 = s.next().unwrap();
        // a FIFO filling slowly: the median read low, the end did not
        s.record(r2, r2 * WIRE_EFFICIENCY, 3.0, true, (10.0, 0.0));
        assert!(!s.steps()[1].held);
        let Some(Outcome::Found { rate_bps, .. }) = s.outcome() else { panic!() };
        assert_eq!(rate_bps, r);
    }

    #[test]
    fn a_line_whose_unshaped_goodput_under_read_it_is_still_shaped_near_its_rate() {
        // 5 Mbit/s, but the bloated test read 4.0 Mbit/s of goodput (80%)
        let l = line(5e6, 1000.0);
        let mut s = Search::new(4.0e6, 1000.0, 5.0, Budget::steps(20));
        while let Some(r) = s.next() {
            let (g, a) = l(r);
            s.record(r, g, a, false, (10.0, 0.0));
        }
        let Some(Outcome::Found { rate_bps, .. }) = s.outcome() else { panic!() };
        assert!(rate_bps > 5e6 * 0.93 && rate_bps < 5e6 * 0.99, "{rate_bps}");
    }

    #[test]
    fn a_slow_line_is_allowed_one_packets_time_on_the_wire() {
        // 1.68 Mbit/s of upload goodput: at half of it a probe waits up to
        // 13.8 ms behind a full-size packet
        let mut s = Search::new(1.68e6, 1140.0, 5.0, Budget::steps(10));
        let r = s.next().unwrap();
        assert!((packet_ms(r) - 13.8).abs() < 0.1, "{}", packet_ms(r));
        s.record(r, r * WIRE_EFFICIENCY, 7.78, false, (10.0, 0.0));
        assert!(s.steps()[0].held);
        assert!(s.next().is_some());
        assert!((packet_ms(20e6) - 0.6056).abs() < 1e-3);
    }

    #[test]
    fn a_line_that_holds_the_target_is_left_alone() {
        let mut s = Search::new(95e6, 3.1, 5.0, Budget::steps(10));
        assert_eq!(s.next(), None);
        assert_eq!(s.outcome(), Some(Outcome::NotBloated { added_ms: 3.1 }));
        // nothing to record
        s.record(50e6, 47e6, 1.0, false, (10.0, 1e7));
        assert_eq!(s.outcome(), Some(Outcome::NotBloated { added_ms: 3.1 }));
    }

    #[test]
    fn a_queue_the_shaper_cannot_take_is_said_so_after_the_low_end_failed_twice() {
        let (s, o) = run(10e6, 600.0, 10);
        assert!(matches!(o, Some(Outcome::Found { .. })));
        // the same line with a bottleneck the shaper does not control
        let mut s2 = Search::new(s.line.goodput_bps, 600.0, 5.0, Budget::steps(10));
        let r = s2.next().unwrap();
        s2.record(r, r * WIRE_EFFICIENCY, 580.0, false, (10.0, 1e7));
        // measured once more
        assert_eq!(s2.next(), Some(r));
        s2.record(r, r * WIRE_EFFICIENCY, 575.0, false, (10.0, 1e7));
        assert_eq!(s2.next(), None);
        assert_eq!(s2.outcome(), Some(Outcome::NotControllable { rate_bps: r, added_ms: 575.0 }));
        // a low end disturbed once, then held: the search goes on
        let mut s3 = Search::new(s.line.goodput_bps, 600.0, 5.0, Budget::steps(10));
        let r = s3.next().unwrap();
        s3.record(r, r * WIRE_EFFICIENCY, 8.55, false, (10.0, 1e7));
        s3.record(r, r * WIRE_EFFICIENCY, 2.0, false, (10.0, 1e7));
        assert!(s3.next().is_some_and(|n| n > r), "{:?}", s3.next());
    }

    #[test]
    fn a_spent_budget_ends_the_search_with_the_best_rate_so_far() {
        let (s, o) = run(100e6, 120.0, 3);
        assert_eq!(s.steps().len(), 3);
        let Some(Outcome::Found { rate_bps, exact, .. }) = o else { panic!("{o:?}") };
        assert!(!exact);
        // 50%, 85%, then 102.5% (too high) of the line's rate
        assert!((rate_bps / s.line_rate_bps() - 0.85).abs() < 1e-9, "{rate_bps}");
    }

    #[test]
    fn time_and_bytes_bound_the_search_before_a_step_would_pass_them() {
        // 10 s a step: a 35 s budget allows three (a fourth would end at 40 s)
        let l = line(20e6, 1200.0);
        let mut s = Search::new(20e6 * WIRE_EFFICIENCY, 1200.0, 5.0, Budget { steps: 100, seconds: 35.0, bytes: f64::INFINITY });
        while let Some(r) = s.next() {
            let (g, a) = l(r);
            s.record(r, g, a, false, (10.0, 0.0));
        }
        assert_eq!(s.steps().len(), 3);
        // 25 MB a step: a 60 MB budget allows two
        let mut s = Search::new(20e6 * WIRE_EFFICIENCY, 1200.0, 5.0, Budget { steps: 100, seconds: f64::INFINITY, bytes: 60e6 });
        while let Some(r) = s.next() {
            let (g, a) = l(r);
            s.record(r, g, a, false, (10.0, 25e6));
        }
        assert_eq!(s.steps().len(), 2);
        assert!(matches!(s.outcome(), Some(Outcome::Found { exact: false, .. })));
    }
}
