//! One clock for every timestamp a bloatlab process takes: Unix nanoseconds
//! read once from CLOCK_REALTIME at first use, then advanced by the monotonic
//! clock. Stamps are therefore comparable with other hosts' (offset only, no
//! steps from NTP adjustments during a test), and with other processes on the
//! same machine to within the realtime read error.
use std::sync::OnceLock;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

struct Anchor {
    unix_ns: u64,
    instant: Instant,
}

static ANCHOR: OnceLock<Anchor> = OnceLock::new();

fn anchor() -> &'static Anchor {
    ANCHOR.get_or_init(|| Anchor {
        unix_ns: SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0),
        instant: Instant::now(),
    })
}

/// Unix nanoseconds, monotonic within this process.
pub fn now_ns() -> u64 {
    let a = anchor();
    a.unix_ns + a.instant.elapsed().as_nanos() as u64
}

/// Sleep until the given `now_ns()` instant (returns at once if it passed).
pub fn sleep_until_ns(deadline: u64) {
    let now = now_ns();
    if deadline > now {
        std::thread::sleep(std::time::Duration::from_nanos(deadline - now));
    }
}


/// Convert a kernel CLOCK_REALTIME stamp (e.g. SO_TIMESTAMPNS) to this
/// process's clock: the two differ by however far NTP slewed realtime since
/// the anchor was taken, which is measured now and removed.
pub fn from_realtime(realtime_ns: u64) -> u64 {
    let now_rt = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
    let now = now_ns();
    (realtime_ns as i128 + now as i128 - now_rt as i128).max(0) as u64
}

/// CLOCK_MONOTONIC nanoseconds: for the emulator's release times, where a
/// raw monotonic read is all that is needed.
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime fills a caller-provided timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CPU time the calling thread has used, ns (CLOCK_THREAD_CPUTIME_ID).
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime fills a caller-provided timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The resolution of CLOCK_MONOTONIC, ns (clock_getres).
pub fn mono_resolution_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_getres fills a caller-provided timespec.
    unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn timespec(ns: u64) -> libc::timespec {
    libc::timespec { tv_sec: (ns / 1_000_000_000) as _, tv_nsec: (ns % 1_000_000_000) as libc::c_long }
}

/// Sleep until CLOCK_MONOTONIC reads `mono` ns (clock_nanosleep with
/// TIMER_ABSTIME: an absolute deadline, so no error accumulates); a signal
/// does not cut it short.
pub fn sleep_until_mono(mono: u64) {
    let ts = timespec(mono);
    loop {
        // SAFETY: a valid timespec; a null remainder is allowed with TIMER_ABSTIME.
        let r = unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &ts, std::ptr::null_mut()) };
        if r != libc::EINTR {
            break;
        }
    }
}

/// One relative nanosleep(2) of `ns` (a signal ends it early): the naive
/// pacer the pacing experiment measures against.
pub fn nanosleep(ns: u64) {
    let ts = timespec(ns);
    // SAFETY: a valid timespec; no remainder asked for.
    unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
}

/// CLOCK_REALTIME nanoseconds, read now (for file names and records, not intervals).
pub fn realtime_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

/// Within this, the clock readings just before and after a read are
/// trusted to stamp it; a wider gap means the thread was preempted between.
pub const STAMP_SPREAD_NS: u64 = 1_000_000;

/// A read (a counter, a statistics dump) with the instant it happened on
/// `now`'s clock: the readings just before and just after it, stamped at
/// their midpoint, and the read repeated (up to 4 times, the tightest kept)
/// while the two are more than [`STAMP_SPREAD_NS`] apart. Series of such
/// stamps give rates that a preempted sampler does not bend.
pub fn stamped<T>(now: fn() -> u64, mut read: impl FnMut() -> T) -> (u64, T) {
    let mut best: Option<(u64, u64, T)> = None;
    for _ in 0..4 {
        let a = now();
        let v = read();
        let b = now();
        let spread = b.saturating_sub(a);
        let tight = spread <= STAMP_SPREAD_NS;
        if best.as_ref().is_none_or(|x| spread < x.0) {
            best = Some((spread, a + spread / 2, v));
        }
        if tight {
            break;
        }
    }
    let (_, t, v) = best.expect("at least one read");
    (t, v)
}

/// Converts [`mono_ns`] stamps to Unix ns with one offset taken at creation.
#[derive(Debug, Clone, Copy)]
pub struct MonoToUnix {
    offset: i128,
}

impl MonoToUnix {
    pub fn new() -> MonoToUnix {
        let m = mono_ns();
        let u = realtime_ns();
        MonoToUnix { offset: u as i128 - m as i128 }
    }
    pub fn to_unix(&self, mono: u64) -> u64 {
        (mono as i128 + self.offset).max(0) as u64
    }
}

impl Default for MonoToUnix {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A clock this test moves by hand: each read below says how long it
    /// "took" (real sleeps overslept on a loaded CI host and made the
    /// tightest read a different one).
    static FAKE_NS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1_000_000_000);
    fn fake_now() -> u64 {
        FAKE_NS.load(std::sync::atomic::Ordering::SeqCst)
    }
    fn take(ns: u64) {
        FAKE_NS.fetch_add(ns, std::sync::atomic::Ordering::SeqCst);
    }

    #[test]
    fn a_read_is_stamped_between_its_clock_readings_and_retried_when_they_are_far_apart() {
        // A read that takes 5 ms (a preempted thread) the first time and
        // 0.4 ms after: the second read's value, stamped at its midpoint.
        let mut calls = 0u64;
        let start = fake_now();
        let (t, v) = stamped(fake_now, || {
            calls += 1;
            take(if calls == 1 { 5_000_000 } else { 400_000 });
            100 + calls
        });
        assert_eq!((v, calls), (102, 2), "the slow read was retried once");
        assert_eq!(t, start + 5_000_000 + 200_000, "stamped in the middle of the second read");
        // Always slow: 4 tries, the tightest (the third, 2 ms) kept.
        let mut calls = 0u64;
        let start = fake_now();
        let (t, v) = stamped(fake_now, || {
            calls += 1;
            take(if calls == 3 { 2_000_000 } else { 6_000_000 });
            calls
        });
        assert_eq!((v, calls), (3, 4));
        assert_eq!(t, start + 12_000_000 + 1_000_000);
        // A read within STAMP_SPREAD_NS is taken at once.
        let mut calls = 0u64;
        let _ = stamped(fake_now, || {
            calls += 1;
            take(STAMP_SPREAD_NS);
        });
        assert_eq!(calls, 1);
    }

    #[test]
    fn clocks_agree() {
        let c = MonoToUnix::new();
        let (u, n) = (c.to_unix(mono_ns()), now_ns());
        assert!(u.abs_diff(n) < 1_000_000_000, "{u} vs {n}");
        assert!(realtime_ns().abs_diff(n) < 1_000_000_000);
        assert!(from_realtime(realtime_ns()).abs_diff(now_ns()) < 100_000_000);
    }
    #[test]
    fn monotonic_and_advancing_with_real_time() {
        // never backwards over many reads, from two threads at once
        let run = || {
            let mut last = mono_ns();
            for _ in 0..200_000 {
                let t = mono_ns();
                assert!(t >= last, "the monotonic clock went back from {last} to {t}");
                last = t;
            }
        };
        let h = std::thread::spawn(run);
        run();
        h.join().unwrap();
        // and it advances by what a sleep took, as the realtime clock does
        let (m0, r0) = (mono_ns(), realtime_ns());
        std::thread::sleep(std::time::Duration::from_millis(50));
        let (dm, dr) = (mono_ns() - m0, realtime_ns().saturating_sub(r0));
        assert!((50_000_000..2_000_000_000).contains(&dm), "slept 50 ms, the monotonic clock moved {dm} ns");
        assert!(dm.abs_diff(dr) < 20_000_000, "monotonic {dm} ns vs realtime {dr} ns over the same sleep");
    }
}
