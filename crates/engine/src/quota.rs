//! Admission counters of a public server: a total and a per-source limit,
//! taken before any work is done for a peer and given back by dropping the
//! permit, on every path.
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// Who counts as one source: an IPv4 address, or an IPv6 /64 (one
/// subscriber's prefix; a host can pick any address inside it). IPv4-mapped
/// IPv6 addresses count as their IPv4 address.
pub fn source_of(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

/// Which limit refused a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    Total { limit: u32 },
    Source { limit: u32 },
}

#[derive(Debug)]
pub struct Quota {
    max_total: u32,
    max_per_source: u32,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    total: u32,
    /// Only sources holding a permit: the map never outgrows `max_total`.
    per: HashMap<IpAddr, u32>,
}

/// One unit of a [`Quota`]; dropping it gives the unit back.
#[derive(Debug)]
pub struct Permit {
    quota: Arc<Quota>,
    source: IpAddr,
}

impl Quota {
    pub fn new(max_total: u32, max_per_source: u32) -> Arc<Quota> {
        Arc::new(Quota { max_total, max_per_source, state: Mutex::new(State::default()) })
    }

    pub fn take(self: &Arc<Self>, ip: IpAddr) -> Result<Permit, Full> {
        let source = source_of(ip);
        let mut st = self.state.lock().unwrap();
        if st.total >= self.max_total {
            return Err(Full::Total { limit: self.max_total });
        }
        let n = st.per.entry(source).or_insert(0);
        if *n >= self.max_per_source {
            return Err(Full::Source { limit: self.max_per_source });
        }
        *n += 1;
        st.total += 1;
        Ok(Permit { quota: self.clone(), source })
    }

    pub fn total(&self) -> u32 {
        self.state.lock().unwrap().total
    }

    /// Sources currently holding permits.
    pub fn sources(&self) -> usize {
        self.state.lock().unwrap().per.len()
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut st = self.quota.state.lock().unwrap();
        st.total -= 1;
        if let Some(n) = st.per.get_mut(&self.source) {
            *n -= 1;
            if *n == 0 {
                st.per.remove(&self.source);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_group_v6_by_64_and_unmap_v4() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:bbbb::9".parse().unwrap();
        let c: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(source_of(a), source_of(b));
        assert_ne!(source_of(a), source_of(c));
        assert_eq!(source_of("::ffff:192.0.2.7".parse().unwrap()), "192.0.2.7".parse::<IpAddr>().unwrap());
        assert_eq!(source_of("192.0.2.7".parse().unwrap()), "192.0.2.7".parse::<IpAddr>().unwrap());
    }

    #[test]
    fn limits_per_source_and_total_and_permits_give_back() {
        let q = Quota::new(3, 2);
        let x: IpAddr = "192.0.2.1".parse().unwrap();
        let y: IpAddr = "192.0.2.2".parse().unwrap();
        let p1 = q.take(x).unwrap();
        let p2 = q.take(x).unwrap();
        assert_eq!(q.take(x).unwrap_err(), Full::Source { limit: 2 });
        let p3 = q.take(y).unwrap();
        assert_eq!(q.take(y).unwrap_err(), Full::Total { limit: 3 });
        assert_eq!((q.total(), q.sources()), (3, 2));
        drop(p1);
        let p4 = q.take(y).unwrap();
        drop((p2, p3, p4));
        assert_eq!((q.total(), q.sources()), (0, 0));
    }
}

/// How a server logs refusals under a flood: at most one line a second, each
/// carrying how many peers were refused since the previous line and the
/// latest one's address and reason. A count left over when the flood stops
/// is written by [`RefusalLog::due`] once its second is up, so the log's
/// counts always add up to every refusal.
#[derive(Debug, Default)]
pub struct RefusalLog {
    untold: u64,
    last_line: Option<std::time::Instant>,
    latest: Option<(std::net::SocketAddr, String)>,
}

/// One line to write: the latest refused peer, why, and how many since the
/// last line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusalLine {
    pub peer: std::net::SocketAddr,
    pub reason: String,
    pub refused: u64,
}

impl RefusalLog {
    /// Count a refusal; returns the line to write now, if one is due.
    pub fn note(&mut self, peer: std::net::SocketAddr, reason: String, now: std::time::Instant) -> Option<RefusalLine> {
        self.untold += 1;
        self.latest = Some((peer, reason));
        self.due(now)
    }

    /// The line to write now for refusals not yet logged, if a second has
    /// passed since the last line (call it periodically).
    pub fn due(&mut self, now: std::time::Instant) -> Option<RefusalLine> {
        if self.untold == 0 || self.last_line.is_some_and(|t| now.saturating_duration_since(t) < std::time::Duration::from_secs(1)) {
            return None;
        }
        let (peer, reason) = self.latest.take()?;
        self.last_line = Some(now);
        Some(RefusalLine { peer, reason, refused: std::mem::take(&mut self.untold) })
    }
}

#[cfg(test)]
mod refusal_log_tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn a_flood_is_one_line_a_second_and_the_leftover_count_is_flushed() {
        let p = |n: u16| std::net::SocketAddr::from(([192, 0, 2, 1], n));
        let t0 = Instant::now();
        let ms = |m: u64| t0 + Duration::from_millis(m);
        let mut l = RefusalLog::default();
        assert_eq!(l.due(t0), None, "nothing refused, nothing to say");
        // The first refusal is written at once.
        assert_eq!(l.note(p(1), "a".into(), ms(0)), Some(RefusalLine { peer: p(1), reason: "a".into(), refused: 1 }));
        // Five more within the second: counted, not written.
        for i in 0..5 {
            assert_eq!(l.note(p(2 + i), format!("b{i}"), ms(100 + 100 * i as u64)), None);
        }
        assert_eq!(l.due(ms(999)), None);
        // The flood stopped: the periodic check writes the five, naming the latest.
        assert_eq!(l.due(ms(1000)), Some(RefusalLine { peer: p(6), reason: "b4".into(), refused: 5 }));
        assert_eq!(l.due(ms(5000)), None, "each refusal is counted once");
        // A refusal a second or more after the last line is written at once.
        assert_eq!(l.note(p(9), "c".into(), ms(2000)), Some(RefusalLine { peer: p(9), reason: "c".into(), refused: 1 }));
    }
}
