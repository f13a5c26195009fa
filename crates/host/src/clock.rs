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

/// CLOCK_REALTIME nanoseconds, read now (for file names and records, not intervals).
pub fn realtime_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
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
    #[test]
    fn clocks_agree() {
        let c = MonoToUnix::new();
        let (u, n) = (c.to_unix(mono_ns()), now_ns());
        assert!(u.abs_diff(n) < 1_000_000_000, "{u} vs {n}");
        assert!(realtime_ns().abs_diff(n) < 1_000_000_000);
        assert!(from_realtime(realtime_ns()).abs_diff(now_ns()) < 100_000_000);
    }
    #[test]
    fn monotonic() {
        let a = now_ns();
        let b = now_ns();
        assert!(b >= a);
    }
}
