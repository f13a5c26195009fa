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

/// Why a peer was refused by a connection quota, for its log line (`what`:
/// "connections").
pub fn full_reason(f: Full, what: &str) -> String {
    match f {
        Full::Total { limit } => format!("the server is busy: {limit} {what} open (--max-conns)"),
        Full::Source { limit } => format!("your address already has {limit} {what} open (--max-conns-per-source)"),
    }
}

/// Slots shared fairly among sources (TLS handshakes in progress): any
/// source may take a free slot; when all are taken, a source holding less
/// than its fair share (the slots / the sources that want them) takes one
/// from the source holding the most, whose oldest holder is cut (its
/// `cut` action runs). A few sources dripping slow handshakes can then
/// hold at most their share, never every slot.
pub struct FairSlots {
    max: u32,
    state: Mutex<FairState>,
}

type Cut = Box<dyn FnOnce() + Send>;

#[derive(Default)]
struct FairState {
    total: u32,
    next_id: u64,
    /// Each source's holders, oldest first: (id, the action that cuts it).
    per: HashMap<IpAddr, std::collections::VecDeque<(u64, Option<Cut>)>>,
}

/// One [`FairSlots`] slot; dropping it gives the slot back (unless it was
/// cut, which gave it to another source already).
pub struct Slot {
    slots: Arc<FairSlots>,
    source: IpAddr,
    id: u64,
}

/// What [`FairSlots::take`] did to make room: the source it cut one holder of.
pub type CutFrom = Option<IpAddr>;

impl FairSlots {
    pub fn new(max: u32) -> Arc<FairSlots> {
        Arc::new(FairSlots { max, state: Mutex::new(FairState::default()) })
    }

    /// A slot for `ip`, cutting another source's oldest holder when all are
    /// taken and `ip` holds less than its share; `Full::Total` when it does not.
    pub fn take(self: &Arc<Self>, ip: IpAddr) -> Result<(Slot, CutFrom), Full> {
        let source = source_of(ip);
        let mut cut: Option<(IpAddr, Cut)> = None;
        let mut cut_from = None;
        {
            let mut st = self.state.lock().unwrap();
            if st.total >= self.max {
                let mine = st.per.get(&source).map_or(0, |v| v.len()) as u32;
                let wanting = st.per.len() as u32 + u32::from(!st.per.contains_key(&source));
                let share = (self.max / wanting.max(1)).max(1);
                let (big, held) = st.per.iter().map(|(k, v)| (*k, v.len() as u32)).max_by_key(|(_, n)| *n).unwrap_or((source, 0));
                if mine + 1 > share || big == source || held <= mine + 1 {
                    return Err(Full::Total { limit: self.max });
                }
                let q = st.per.get_mut(&big).expect("the biggest holder");
                let (_, action) = q.pop_front().expect("a holder");
                if q.is_empty() {
                    st.per.remove(&big);
                }
                st.total -= 1;
                cut_from = Some(big);
                if let Some(a) = action {
                    cut = Some((big, a));
                }
            }
            st.total += 1;
            st.next_id += 1;
            let id = st.next_id;
            st.per.entry(source).or_default().push_back((id, None));
            drop(st);
            if let Some((_, a)) = cut {
                a();
            }
            Ok((Slot { slots: self.clone(), source, id }, cut_from))
        }
    }

    /// What cutting this slot's holder does (e.g. abort its task).
    pub fn on_cut(&self, slot: &Slot, cut: Cut) {
        let mut st = self.state.lock().unwrap();
        if let Some(e) = st.per.get_mut(&slot.source).and_then(|q| q.iter_mut().find(|(i, _)| *i == slot.id)) {
            e.1 = Some(cut);
        }
    }

    pub fn total(&self) -> u32 {
        self.state.lock().unwrap().total
    }

    /// Slots `ip`'s source holds.
    pub fn held_by(&self, ip: IpAddr) -> u32 {
        self.state.lock().unwrap().per.get(&source_of(ip)).map_or(0, |q| q.len() as u32)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut st = self.slots.state.lock().unwrap();
        let Some(q) = st.per.get_mut(&self.source) else { return };
        let Some(i) = q.iter().position(|(id, _)| *id == self.id) else { return }; // cut: already given away
        q.remove(i);
        if q.is_empty() {
            st.per.remove(&self.source);
        }
        st.total -= 1;
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

    /// Four sources fill every slot; a fifth still gets its share, each
    /// slot it takes cut from the biggest holder (whose cut action runs),
    /// and never beyond its share.
    #[test]
    fn fair_slots_give_a_newcomer_its_share() {
        use std::sync::atomic::{AtomicU32, Ordering};
        let f = FairSlots::new(8);
        let cuts = Arc::new(AtomicU32::new(0));
        let ip = |i: u8| -> IpAddr { format!("192.0.2.{i}").parse().unwrap() };
        let mut held = vec![];
        for i in 0..8u8 {
            let (s, cut) = f.take(ip(1 + i % 4)).unwrap();
            assert_eq!(cut, None);
            let c = cuts.clone();
            f.on_cut(&s, Box::new(move || { c.fetch_add(1, Ordering::SeqCst); }));
            held.push(s);
        }
        assert_eq!(f.total(), 8);
        // a holder of 2 may not take from another holder of 2
        assert_eq!(f.take(ip(1)).err(), Some(Full::Total { limit: 8 }));
        // the newcomer: share 8 / 5 = 1
        let (n1, cut) = f.take(ip(9)).unwrap();
        assert!(cut.is_some() && cuts.load(Ordering::SeqCst) == 1, "{cut:?}");
        assert_eq!((f.total(), f.held_by(ip(9))), (8, 1));
        assert_eq!(f.take(ip(9)).err(), Some(Full::Total { limit: 8 }), "beyond its share");
        // the cut slot's own drop gives nothing back twice
        drop(held);
        assert_eq!(f.total(), 1);
        drop(n1);
        assert_eq!(f.total(), 0);
        // a lone source takes every free slot
        let all: Vec<_> = (0..8).map(|_| f.take(ip(1)).unwrap().0).collect();
        assert_eq!(f.take(ip(1)).err(), Some(Full::Total { limit: 8 }));
        drop(all);
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
