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

/// RFC 3339 UTC rendering of Unix nanoseconds (second precision plus millis).
pub use bloatlab_units::rfc3339;

/// Convert a kernel CLOCK_REALTIME stamp (e.g. SO_TIMESTAMPNS) to this
/// process's clock: the two differ by however far NTP slewed realtime since
/// the anchor was taken, which is measured now and removed.
pub fn from_realtime(realtime_ns: u64) -> u64 {
    let now_rt = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
    let now = now_ns();
    (realtime_ns as i128 + now as i128 - now_rt as i128).max(0) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn rfc3339_known_instants() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        // 2026-11-22T05:58:16.250Z = 1795154296 s
        assert_eq!(rfc3339(1_795_327_096_250_000_000), "2026-11-22T05:58:16.250Z");
        // leap day 2024-02-29T12:00:00Z = 1709208000
        assert_eq!(rfc3339(1_709_208_000_000_000_000), "2024-02-29T12:00:00.000Z");
    }
    #[test]
    fn monotonic() {
        let a = now_ns();
        let b = now_ns();
        assert!(b >= a);
    }
}
