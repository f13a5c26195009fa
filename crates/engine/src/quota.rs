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
