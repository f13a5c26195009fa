//! When each loaded target runs: its slot (due every `--every`, started up
//! to `--jitter` late at random), resumed from the store's last run, moved
//! on by a run's end (on schedule, or sooner after a failure with backoff),
//! and the data budget's use over its period. Pure: every method is given
//! the time (Unix ns on `host::clock`'s clock), and the jitter comes from a
//! draw the caller hands in, so a day of schedule is tested in
//! milliseconds.
use bloatlab_model::{Budget, MonitorTarget};
use std::time::Duration;

/// The first retry after a failure; each next one doubles, up to `--every`.
pub const FIRST_RETRY: Duration = Duration::from_secs(30);

/// The backoff after `failures` failures in a row.
pub fn retry_after(failures: u32, every: Duration) -> Duration {
    let d = FIRST_RETRY.saturating_mul(1u32 << failures.saturating_sub(1).min(16));
    d.min(every)
}

/// One loaded target's place in the schedule.
#[derive(Debug, Clone)]
pub struct Slot {
    pub target: MonitorTarget,
    pub name: String,
    /// Unix ns the next run is due (before jitter) and starts (after).
    pub due_ns: u64,
    pub start_ns: u64,
    /// Failures in a row.
    pub failures: u32,
    /// Runs begun here.
    pub runs: u64,
    /// What its last measured run moved (the next one's estimate for the budget).
    pub last_bytes: Option<u64>,
}

/// Draws a jitter in `0..=max` ns.
pub type Draw = Box<dyn FnMut(u64) -> u64>;

/// The loaded targets' slots.
pub struct Schedule {
    every_ns: u64,
    jitter_ns: u64,
    draw: Draw,
    slots: Vec<Slot>,
}

impl Schedule {
    pub fn new(every: Duration, jitter: Duration, draw: Draw) -> Schedule {
        Schedule { every_ns: every.as_nanos() as u64, jitter_ns: jitter.as_nanos() as u64, draw, slots: vec![] }
    }

    fn jitter(&mut self) -> u64 {
        if self.jitter_ns > 0 {
            (self.draw)(self.jitter_ns).min(self.jitter_ns)
        } else {
            0
        }
    }

    /// Add a target at `now`: due `every` after its last run (`last_run_ns`,
    /// from the store) when that was within `every`, else now. Returns how
    /// long until its first run.
    pub fn add(&mut self, target: MonitorTarget, last_run_ns: Option<u64>, last_bytes: Option<u64>, now: u64) -> Duration {
        let last = last_run_ns.filter(|&t| t + self.every_ns > now);
        let due = last.map(|l| l + self.every_ns).unwrap_or(now).max(now);
        let start = due + self.jitter();
        self.slots.push(Slot { name: target.name(), target, due_ns: due, start_ns: start, failures: 0, runs: 0, last_bytes });
        Duration::from_nanos(start - now)
    }

    /// The slot that starts first, and when.
    pub fn next(&self) -> Option<(usize, u64)> {
        self.slots.iter().enumerate().min_by_key(|(_, s)| s.start_ns).map(|(i, s)| (i, s.start_ns))
    }

    pub fn slot(&self, i: usize) -> &Slot {
        &self.slots[i]
    }

    /// Slot `i`'s run is left out (the budget): its next is one period on.
    pub fn skip(&mut self, i: usize) {
        let j = self.jitter();
        let s = &mut self.slots[i];
        s.due_ns += self.every_ns;
        s.start_ns = s.due_ns + j;
    }

    /// Slot `i`'s run begins: (when it was due, its sequence number).
    pub fn begin(&mut self, i: usize) -> (u64, u64) {
        let s = &mut self.slots[i];
        s.runs += 1;
        (s.due_ns, s.runs - 1)
    }

    /// Slot `i`'s run ended at `end` (`failed`, having moved `bytes`): its
    /// next run is one period after the last was due (never in the past),
    /// or, after a failure, the backoff from now (no jitter). Returns the
    /// retry's delay after a failure.
    pub fn end(&mut self, i: usize, end: u64, failed: bool, bytes: u64) -> Option<Duration> {
        let every = Duration::from_nanos(self.every_ns);
        let j = self.jitter();
        let s = &mut self.slots[i];
        let retry = if failed {
            s.failures += 1;
            Some(retry_after(s.failures, every))
        } else {
            s.failures = 0;
            None
        };
        s.due_ns = match retry {
            Some(r) => end + r.as_nanos() as u64,
            None => (s.due_ns + self.every_ns).max(end),
        };
        s.start_ns = s.due_ns + if retry.is_none() { j } else { 0 };
        if bytes > 0 {
            s.last_bytes = Some(bytes);
        }
        retry
    }
}

/// The data budget's use in its current period.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BudgetUse {
    /// Unix ns the period began.
    pub start_ns: u64,
    pub used: u64,
}

impl BudgetUse {
    /// Whether a run estimated to move `estimate` fits `b` at `now` (a new
    /// period starts from zero).
    pub fn allows(&mut self, b: &Budget, now: u64, estimate: u64) -> bool {
        let w = b.window_start(now);
        if w != self.start_ns {
            *self = BudgetUse { start_ns: w, used: 0 };
        }
        self.used.saturating_add(estimate) <= b.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn target(n: u16) -> MonitorTarget {
        MonitorTarget::Server { host: "192.0.2.1".into(), port: n }
    }

    /// A schedule whose jitter draws come from a simple LCG (deterministic).
    fn schedule(every_s: u64, jitter_s: u64) -> Schedule {
        let mut x = 12345u64;
        Schedule::new(
            Duration::from_secs(every_s),
            Duration::from_secs(jitter_s),
            Box::new(move |max| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (x >> 11) % (max + 1)
            }),
        )
    }

    #[test]
    fn a_day_at_five_minutes_runs_288_times_each_within_its_jitter() {
        let day0 = 1_800_000_000 * S;
        let mut s = schedule(300, 30);
        for p in 1..=3 {
            s.add(target(p), None, None, day0);
        }
        let mut now = day0;
        let mut starts: Vec<Vec<(u64, u64)>> = vec![vec![]; 3];
        while let Some((i, start)) = s.next() {
            if start >= day0 + 86_400 * S {
                break;
            }
            now = now.max(start);
            let (due, seq) = s.begin(i);
            assert_eq!(seq as usize, starts[i].len());
            assert!(now >= due && now - due <= 30 * S + 20 * S * 3, "slot {i} started {} s after it was due", (now - due) / S);
            starts[i].push((due, now));
            // a test takes 20 s; one at a time
            now += 20 * S;
            assert_eq!(s.end(i, now, false, 1_000_000), None);
        }
        for (i, v) in starts.iter().enumerate() {
            assert_eq!(v.len(), 288, "slot {i}");
            // due exactly every 5 minutes: lateness never accumulates
            assert!(v.windows(2).all(|w| w[1].0 - w[0].0 == 300 * S), "slot {i}");
        }
        // jitter spreads the starts over the window, not all at its edge
        let late: Vec<u64> = starts[0].iter().map(|(d, st)| (st - d) / S).collect();
        assert!(late.iter().any(|&l| l < 10) && late.iter().any(|&l| l > 20), "{late:?}");
    }

    #[test]
    fn failures_back_off_doubling_up_to_every_and_a_success_resets() {
        let mut s = schedule(600, 0);
        s.add(target(1), None, None, 0);
        let mut now = 0;
        let mut retries = vec![];
        for _ in 0..6 {
            let (i, start) = s.next().unwrap();
            now = now.max(start);
            s.begin(i);
            now += S;
            retries.push(s.end(i, now, true, 0).unwrap().as_secs());
            assert_eq!(s.slot(i).start_ns, now + retries.last().unwrap() * S, "a retry has no jitter");
        }
        assert_eq!(retries, [30, 60, 120, 240, 480, 600]);
        assert_eq!(retry_after(1, Duration::from_secs(10)), Duration::from_secs(10), "never longer than --every");
        assert_eq!(retry_after(u32::MAX, Duration::from_secs(600)), Duration::from_secs(600));
        let (i, start) = s.next().unwrap();
        s.begin(i);
        assert_eq!(s.end(i, start + S, false, 5), None);
        assert_eq!(s.slot(i).failures, 0);
        assert_eq!(s.slot(i).due_ns, start + 600 * S, "after a retry that succeeds, the next run is one period after it");
        assert_eq!(s.slot(i).last_bytes, Some(5));
    }

    #[test]
    fn a_restart_resumes_from_the_last_run() {
        let mut s = schedule(300, 0);
        let now = 1000 * S;
        assert_eq!(s.add(target(1), Some(now - 100 * S), None, now), Duration::from_secs(200), "ran 100 s ago: 200 s to go");
        assert_eq!(s.add(target(2), Some(now - 400 * S), None, now), Duration::ZERO, "ran longer ago than --every: now");
        assert_eq!(s.add(target(3), None, Some(7), now), Duration::ZERO);
        assert_eq!(s.next().map(|(i, _)| s.slot(i).name.clone()).as_deref(), Some("192.0.2.1:2"));
        assert_eq!(s.slot(2).last_bytes, Some(7));
    }

    #[test]
    fn a_late_run_is_due_again_from_its_end_not_in_the_past() {
        let mut s = schedule(60, 0);
        s.add(target(1), None, None, 0);
        s.begin(0);
        // the test ran 150 s (a slow line): the next is due at its end, not 60 s ago
        s.end(0, 150 * S, false, 0);
        assert_eq!(s.slot(0).due_ns, 150 * S);
    }

    #[test]
    fn the_budget_skips_a_period_and_starts_again_in_the_next() {
        let b = Budget::parse("1MB/day").unwrap();
        let day = 86_400 * S;
        let t0 = 20_000 * day + 3600 * S;
        let mut u = BudgetUse { start_ns: b.window_start(t0), used: 0 };
        assert!(u.allows(&b, t0, 600_000));
        u.used += 600_000;
        assert!(!u.allows(&b, t0 + S, 600_000), "1.2 MB would pass 1 MB");
        assert!(u.allows(&b, t0 + S, 400_000));
        // the next day starts from zero
        assert!(u.allows(&b, t0 + day, 600_000));
        assert_eq!(u.used, 0);
        let mut s = schedule(3600, 0);
        s.add(target(1), None, None, t0);
        s.skip(0);
        assert_eq!(s.slot(0).start_ns, t0 + 3600 * S, "a skipped run's slot moves one period on");
    }
}
