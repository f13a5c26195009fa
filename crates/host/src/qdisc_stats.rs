//! Qdisc statistics over rtnetlink (RTM_GETQDISC dump), the same numbers
//! `tc -s qdisc show` prints, without spawning a process per sample.
//! A socket opened inside a namespace stays bound to it.
use socket2::{Domain, Protocol, Socket, Type};
use std::io::Read;

type Result<T> = std::result::Result<T, String>;

const RTM_NEWQDISC: u16 = 36;
const RTM_GETQDISC: u16 = 38;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_DUMP: u16 = 0x300;
const TCA_KIND: u16 = 1;
const TCA_STATS: u16 = 3;
const TCA_STATS2: u16 = 7;
const TCA_STATS_BASIC: u16 = 1;
const TCA_STATS_QUEUE: u16 = 3;
const TC_H_ROOT: u32 = 0xFFFF_FFFF;

/// One qdisc as the kernel reports it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NlQdisc {
    pub ifindex: i32,
    pub handle: u32,
    pub parent: u32,
    pub kind: String,
    pub bytes: u64,
    pub packets: u64,
    pub drops: u64,
    pub overlimits: u64,
    pub requeues: u64,
    pub qlen: u64,
    pub backlog: u64,
}

impl NlQdisc {
    pub fn is_root(&self) -> bool {
        self.parent == TC_H_ROOT
    }
}

pub struct QdiscSock {
    sock: Socket,
    seq: u32,
}

fn u16_at(b: &[u8], i: usize) -> u16 {
    u16::from_ne_bytes([b[i], b[i + 1]])
}
fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_ne_bytes(b[i..i + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], i: usize) -> u64 {
    u64::from_ne_bytes(b[i..i + 8].try_into().unwrap())
}

/// Iterate netlink attributes: (type without flags, payload).
fn attrs(mut b: &[u8]) -> Vec<(u16, &[u8])> {
    let mut v = Vec::new();
    while b.len() >= 4 {
        let len = u16_at(b, 0) as usize;
        let ty = u16_at(b, 2) & 0x3fff;
        if len < 4 || len > b.len() {
            break;
        }
        v.push((ty, &b[4..len]));
        let adv = (len + 3) & !3;
        if adv >= b.len() {
            break;
        }
        b = &b[adv..];
    }
    v
}

/// Parse one RTM_NEWQDISC message body (after the nlmsghdr).
pub fn parse_qdisc(body: &[u8]) -> Option<NlQdisc> {
    if body.len() < 20 {
        return None;
    }
    let mut q = NlQdisc {
        ifindex: u32_at(body, 4) as i32,
        handle: u32_at(body, 8),
        parent: u32_at(body, 12),
        ..Default::default()
    };
    let mut have_stats2 = false;
    for (ty, p) in attrs(&body[20..]) {
        match ty {
            TCA_KIND => q.kind = String::from_utf8_lossy(p).trim_end_matches('\0').to_string(),
            TCA_STATS2 => {
                for (t2, p2) in attrs(p) {
                    match t2 {
                        TCA_STATS_BASIC if p2.len() >= 12 => {
                            q.bytes = u64_at(p2, 0);
                            q.packets = u32_at(p2, 8) as u64;
                            have_stats2 = true;
                        }
                        TCA_STATS_QUEUE if p2.len() >= 20 => {
                            q.qlen = u32_at(p2, 0) as u64;
                            q.backlog = u32_at(p2, 4) as u64;
                            q.drops = u32_at(p2, 8) as u64;
                            q.requeues = u32_at(p2, 12) as u64;
                            q.overlimits = u32_at(p2, 16) as u64;
                            have_stats2 = true;
                        }
                        _ => {}
                    }
                }
            }
            // struct tc_stats { u64 bytes; u32 packets, drops, overlimits, bps, pps, qlen, backlog; }
            TCA_STATS if !have_stats2 && p.len() >= 36 => {
                q.bytes = u64_at(p, 0);
                q.packets = u32_at(p, 8) as u64;
                q.drops = u32_at(p, 12) as u64;
                q.overlimits = u32_at(p, 16) as u64;
                q.qlen = u32_at(p, 28) as u64;
                q.backlog = u32_at(p, 32) as u64;
            }
            _ => {}
        }
    }
    Some(q)
}

impl QdiscSock {
    /// A NETLINK_ROUTE socket inside namespace `ns`.
    pub fn open_in(ns: &str) -> Result<QdiscSock> {
        let sock = crate::netns::in_netns(ns, || {
            let s = Socket::new(Domain::from(libc::AF_NETLINK), Type::RAW.cloexec(), Some(Protocol::from(libc::NETLINK_ROUTE)))
                .map_err(|e| format!("netlink socket: {e}"))?;
            s.set_read_timeout(Some(std::time::Duration::from_secs(1))).map_err(|e| format!("netlink socket: {e}"))?;
            Ok::<_, String>(s)
        })?;
        Ok(QdiscSock { sock, seq: 0 })
    }

    /// Dump every qdisc of the namespace.
    pub fn dump(&mut self) -> Result<Vec<NlQdisc>> {
        self.seq = self.seq.wrapping_add(1);
        let mut req = [0u8; 36];
        req[0..4].copy_from_slice(&36u32.to_ne_bytes());
        req[4..6].copy_from_slice(&RTM_GETQDISC.to_ne_bytes());
        req[6..8].copy_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
        req[8..12].copy_from_slice(&self.seq.to_ne_bytes());
        // tcmsg: all zero (AF_UNSPEC, every interface).
        // the kernel is an unconnected netlink socket's default destination
        self.sock.send(&req).map_err(|e| format!("netlink send: {e}"))?;
        let mut out = Vec::new();
        let mut buf = vec![0u8; 65536];
        loop {
            let n = (&self.sock).read(&mut buf).map_err(|e| format!("netlink recv: {e}"))?;
            let mut b = &buf[..n];
            while b.len() >= 16 {
                let len = u32_at(b, 0) as usize;
                let ty = u16_at(b, 4);
                let seq = u32_at(b, 8);
                if len < 16 || len > b.len() {
                    return Err("malformed netlink message".into());
                }
                if seq == self.seq {
                    match ty {
                        NLMSG_DONE => return Ok(out),
                        NLMSG_ERROR => {
                            let err = if len >= 20 { -(u32_at(b, 16) as i32) } else { 0 };
                            if err != 0 {
                                return Err(format!("netlink: {}", std::io::Error::from_raw_os_error(err)));
                            }
                        }
                        RTM_NEWQDISC => {
                            if let Some(q) = parse_qdisc(&b[16..len]) {
                                out.push(q);
                            }
                        }
                        _ => {}
                    }
                }
                let adv = (len + 3) & !3;
                if adv >= b.len() {
                    break;
                }
                b = &b[adv..];
            }
        }
    }
}

/// Interface index of `dev` inside namespace `ns`.
pub fn ifindex_in(ns: &str, dev: &str) -> Result<i32> {
    let name = dev.to_string();
    let nsname = ns.to_string();
    crate::netns::in_netns(ns, move || crate::sock::if_index(&name).map(|i| i as i32).map_err(|e| format!("no interface {name} in {nsname}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(ty: u16, payload: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&((4 + payload.len()) as u16).to_ne_bytes());
        v.extend_from_slice(&ty.to_ne_bytes());
        v.extend_from_slice(payload);
        while v.len() % 4 != 0 {
            v.push(0);
        }
        v
    }

    #[test]
    fn parses_a_qdisc_message() {
        let mut body = vec![0u8; 20];
        body[4..8].copy_from_slice(&7u32.to_ne_bytes());
        body[8..12].copy_from_slice(&0x0001_0000u32.to_ne_bytes());
        body[12..16].copy_from_slice(&TC_H_ROOT.to_ne_bytes());
        body.extend(attr(TCA_KIND, b"htb\0"));
        let mut basic = Vec::new();
        basic.extend_from_slice(&5038090u64.to_ne_bytes());
        basic.extend_from_slice(&3354u32.to_ne_bytes());
        basic.extend_from_slice(&0u32.to_ne_bytes());
        let mut queue = Vec::new();
        for x in [98u32, 148372, 6, 0, 3341] {
            queue.extend_from_slice(&x.to_ne_bytes());
        }
        let mut nested = attr(TCA_STATS_BASIC, &basic);
        nested.extend(attr(TCA_STATS_QUEUE, &queue));
        body.extend(attr(TCA_STATS2, &nested));
        let q = parse_qdisc(&body).unwrap();
        assert_eq!(q.ifindex, 7);
        assert!(q.is_root());
        assert_eq!(q.kind, "htb");
        assert_eq!((q.bytes, q.packets), (5038090, 3354));
        assert_eq!((q.qlen, q.backlog, q.drops, q.requeues, q.overlimits), (98, 148372, 6, 0, 3341));
        assert!(parse_qdisc(&[0u8; 10]).is_none());
    }
}
