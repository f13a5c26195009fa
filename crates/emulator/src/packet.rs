//! Packets as the emulator sees them: raw IP bytes (no link header, as a TUN
//! device with `IFF_NO_PI` delivers them), the arrival time, and the fields the
//! queue disciplines need (flow key for FQ hashing, the ECN codepoint).
//!
//! Parsing never fails: a packet that is not IPv4/IPv6 (or is truncated) is
//! still queued and forwarded, with an "unknown" flow key and no ECN.

use serde::Serialize;
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

/// The ECN field of the IP header (RFC 3168).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ecn {
    NotEct,
    Ect1,
    Ect0,
    Ce,
}

impl Ecn {
    fn from_bits(b: u8) -> Ecn {
        match b & 3 {
            0 => Ecn::NotEct,
            1 => Ecn::Ect1,
            2 => Ecn::Ect0,
            _ => Ecn::Ce,
        }
    }
    /// True when a discipline may mark instead of drop (ECT(0), ECT(1) or already CE).
    pub fn capable(self) -> bool {
        self != Ecn::NotEct
    }
}

/// The 5-tuple of a packet (addresses stored as IPv6, IPv4 mapped).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FlowKey {
    pub version: u8,
    pub src: [u8; 16],
    pub dst: [u8; 16],
    pub proto: u8,
    pub sport: u16,
    pub dport: u16,
}

impl FlowKey {
    fn addr_string(version: u8, a: &[u8; 16]) -> String {
        if version == 4 {
            Ipv4Addr::new(a[12], a[13], a[14], a[15]).to_string()
        } else {
            Ipv6Addr::from(*a).to_string()
        }
    }
    pub fn proto_name(&self) -> String {
        match self.proto {
            6 => "tcp".into(),
            17 => "udp".into(),
            1 => "icmp".into(),
            58 => "icmpv6".into(),
            p => format!("proto{p}"),
        }
    }
    /// A stable 64-bit hash (FNV-1a over the tuple, then a seed mix).
    pub fn hash_with(&self, seed: u64) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ seed;
        let mut eat = |b: u8| {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        };
        for &b in self.src.iter().chain(self.dst.iter()) {
            eat(b);
        }
        eat(self.proto);
        for b in self.sport.to_be_bytes().into_iter().chain(self.dport.to_be_bytes()) {
            eat(b);
        }
        // final avalanche (splitmix64 finalizer)
        let mut z = h;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

impl fmt::Display for FlowKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.version == 0 {
            return write!(f, "non-ip");
        }
        let s = Self::addr_string(self.version, &self.src);
        let d = Self::addr_string(self.version, &self.dst);
        if self.proto == 6 || self.proto == 17 {
            if self.version == 6 {
                write!(f, "{} [{}]:{} > [{}]:{}", self.proto_name(), s, self.sport, d, self.dport)
            } else {
                write!(f, "{} {}:{} > {}:{}", self.proto_name(), s, self.sport, d, self.dport)
            }
        } else {
            write!(f, "{} {} > {}", self.proto_name(), s, d)
        }
    }
}

impl Serialize for FlowKey {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

/// A packet inside the emulator. `buf` is a pooled buffer; only `buf[..len]` is the packet.
#[derive(Debug)]
pub struct Packet {
    pub buf: Box<[u8]>,
    /// End of the frame in `buf`.
    pub len: usize,
    /// Start of the IP packet in `buf` (a virtio-net header precedes it when
    /// the TUN device passes offloaded packets; 0 otherwise).
    pub hdr: usize,
    /// Monotonic ns when the packet was read from the TUN device (or built, in tests).
    pub arrival_ns: u64,
    /// Monotonic ns when the packet must leave the emulator (set by the link).
    pub release_ns: u64,
    pub key: FlowKey,
    pub ecn: Ecn,
    /// Arbitrary tag (tests use it to identify packets; the datapath numbers packets).
    pub seq: u64,
}

impl Packet {
    /// Wrap the first `len` bytes of `buf`, parsing the IP header.
    pub fn new(buf: Box<[u8]>, len: usize, arrival_ns: u64) -> Packet {
        Packet::with_header(buf, 0, len, arrival_ns)
    }

    /// Wrap `buf[..len]` whose IP packet starts at `hdr`.
    pub fn with_header(buf: Box<[u8]>, hdr: usize, len: usize, arrival_ns: u64) -> Packet {
        let len = len.min(buf.len());
        let hdr = hdr.min(len);
        let (key, ecn) = parse(&buf[hdr..len]);
        Packet { buf, len, hdr, arrival_ns, release_ns: 0, key, ecn, seq: 0 }
    }

    /// Build a packet from bytes (tests, tools).
    pub fn from_bytes(data: &[u8], arrival_ns: u64) -> Packet {
        Packet::new(data.to_vec().into_boxed_slice(), data.len(), arrival_ns)
    }

    /// The IP packet.
    pub fn data(&self) -> &[u8] {
        &self.buf[self.hdr..self.len]
    }

    /// What is written back to the TUN device (header included).
    pub fn frame(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// Size in bytes (the IP packet).
    pub fn size(&self) -> u64 {
        (self.len - self.hdr) as u64
    }

    /// Set the CE codepoint if the packet is ECN-capable. Returns true when the
    /// packet now carries CE (it was ECT or already CE), false for Not-ECT.
    pub fn mark_ce(&mut self) -> bool {
        match self.ecn {
            Ecn::NotEct => false,
            Ecn::Ce => true,
            _ => {
                let d = &mut self.buf[self.hdr..self.len];
                match d[0] >> 4 {
                    4 if d.len() >= 20 => {
                        d[1] |= 3;
                        let ihl = ((d[0] & 0x0f) as usize * 4).min(d.len());
                        d[10] = 0;
                        d[11] = 0;
                        let c = ipv4_checksum(&d[..ihl]);
                        d[10..12].copy_from_slice(&c.to_be_bytes());
                    }
                    6 if d.len() >= 40 => {
                        d[1] |= 0x30;
                    }
                    _ => return false,
                }
                self.ecn = Ecn::Ce;
                true
            }
        }
    }
}

/// RFC 791 header checksum (the checksum field must be zero in `hdr`).
pub fn ipv4_checksum(hdr: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for c in hdr.chunks(2) {
        let w = if c.len() == 2 { u16::from_be_bytes([c[0], c[1]]) } else { (c[0] as u16) << 8 };
        sum += w as u32;
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

fn ports(proto: u8, l4: &[u8]) -> (u16, u16) {
    if (proto == 6 || proto == 17 || proto == 132 || proto == 136) && l4.len() >= 4 {
        (u16::from_be_bytes([l4[0], l4[1]]), u16::from_be_bytes([l4[2], l4[3]]))
    } else {
        (0, 0)
    }
}

/// Parse the flow key and ECN field of a raw IP packet.
pub fn parse(d: &[u8]) -> (FlowKey, Ecn) {
    let mut k = FlowKey::default();
    if d.is_empty() {
        return (k, Ecn::NotEct);
    }
    match d[0] >> 4 {
        4 if d.len() >= 20 => {
            k.version = 4;
            k.src[10] = 0xff;
            k.src[11] = 0xff;
            k.dst[10] = 0xff;
            k.dst[11] = 0xff;
            k.src[12..].copy_from_slice(&d[12..16]);
            k.dst[12..].copy_from_slice(&d[16..20]);
            k.proto = d[9];
            let ihl = (d[0] & 0x0f) as usize * 4;
            let frag_off = u16::from_be_bytes([d[6], d[7]]) & 0x1fff;
            if frag_off == 0 && ihl >= 20 && d.len() > ihl {
                (k.sport, k.dport) = ports(k.proto, &d[ihl..]);
            }
            (k, Ecn::from_bits(d[1]))
        }
        6 if d.len() >= 40 => {
            k.version = 6;
            k.src.copy_from_slice(&d[8..24]);
            k.dst.copy_from_slice(&d[24..40]);
            let ecn = Ecn::from_bits(d[1] >> 4);
            let mut next = d[6];
            let mut off = 40usize;
            // walk the common extension headers
            for _ in 0..8 {
                match next {
                    0 | 43 | 60 if d.len() >= off + 8 => {
                        next = d[off];
                        off += (d[off + 1] as usize + 1) * 8;
                    }
                    44 if d.len() >= off + 8 => {
                        let fo = u16::from_be_bytes([d[off + 2], d[off + 3]]) >> 3;
                        next = d[off];
                        off += 8;
                        if fo != 0 {
                            k.proto = next;
                            return (k, ecn);
                        }
                    }
                    _ => break,
                }
            }
            k.proto = next;
            if d.len() > off {
                (k.sport, k.dport) = ports(next, &d[off..]);
            }
            (k, ecn)
        }
        _ => (k, Ecn::NotEct),
    }
}

/// Test helpers: build IPv4 / IPv6 UDP or TCP packets.
pub mod build {
    use super::ipv4_checksum;

    /// IPv4 packet of total length `len` (>= 28) with protocol `proto`, ports and TOS ECN bits.
    pub fn ipv4(src: [u8; 4], dst: [u8; 4], proto: u8, sport: u16, dport: u16, ecn: u8, len: usize) -> Vec<u8> {
        let len = len.max(28);
        let mut p = vec![0u8; len];
        p[0] = 0x45;
        p[1] = ecn & 3;
        p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        p[8] = 64;
        p[9] = proto;
        p[12..16].copy_from_slice(&src);
        p[16..20].copy_from_slice(&dst);
        let c = ipv4_checksum(&p[..20]);
        p[10..12].copy_from_slice(&c.to_be_bytes());
        p[20..22].copy_from_slice(&sport.to_be_bytes());
        p[22..24].copy_from_slice(&dport.to_be_bytes());
        p
    }

    /// IPv6 packet of total length `len` (>= 48).
    pub fn ipv6(src: [u8; 16], dst: [u8; 16], proto: u8, sport: u16, dport: u16, ecn: u8, len: usize) -> Vec<u8> {
        let len = len.max(48);
        let mut p = vec![0u8; len];
        p[0] = 0x60;
        p[1] = (ecn & 3) << 4;
        p[4..6].copy_from_slice(&((len - 40) as u16).to_be_bytes());
        p[6] = proto;
        p[7] = 64;
        p[8..24].copy_from_slice(&src);
        p[24..40].copy_from_slice(&dst);
        p[40..42].copy_from_slice(&sport.to_be_bytes());
        p[42..44].copy_from_slice(&dport.to_be_bytes());
        p
    }

    /// A UDP/IPv4 packet of `len` bytes for flow number `flow` (source port 1000+flow).
    pub fn flow_v4(flow: u16, len: usize, ecn: u8) -> Vec<u8> {
        ipv4([10, 0, 0, 1], [10, 0, 1, 1], 17, 1000 + flow, 5001, ecn, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ipv4_udp() {
        let b = build::ipv4([10, 1, 2, 3], [10, 4, 5, 6], 17, 1234, 80, 2, 100);
        let (k, e) = parse(&b);
        assert_eq!(k.version, 4);
        assert_eq!(k.proto, 17);
        assert_eq!((k.sport, k.dport), (1234, 80));
        assert_eq!(e, Ecn::Ect0);
        assert_eq!(k.to_string(), "udp 10.1.2.3:1234 > 10.4.5.6:80");
    }

    #[test]
    fn parses_ipv6_tcp_with_ext_header() {
        let mut b = build::ipv6([0xfd; 16], [0xfe; 16], 60, 0, 0, 1, 120);
        // destination options header of 8 bytes, then TCP
        b[40] = 6;
        b[41] = 0;
        b[48..50].copy_from_slice(&443u16.to_be_bytes());
        b[50..52].copy_from_slice(&5555u16.to_be_bytes());
        let (k, e) = parse(&b);
        assert_eq!(k.version, 6);
        assert_eq!(k.proto, 6);
        assert_eq!((k.sport, k.dport), (443, 5555));
        assert_eq!(e, Ecn::Ect1);
    }

    #[test]
    fn ipv4_fragments_have_no_ports() {
        let mut b = build::ipv4([1, 1, 1, 1], [2, 2, 2, 2], 17, 1, 2, 0, 60);
        b[7] = 10; // fragment offset != 0
        let (k, _) = parse(&b);
        assert_eq!((k.sport, k.dport), (0, 0));
    }

    #[test]
    fn mark_ce_ipv4_fixes_checksum() {
        let b = build::ipv4([10, 0, 0, 1], [10, 0, 0, 2], 6, 1, 2, 2, 60);
        let mut p = Packet::from_bytes(&b, 0);
        assert!(p.mark_ce());
        assert_eq!(p.data()[1] & 3, 3);
        assert_eq!(p.ecn, Ecn::Ce);
        // a correct header sums to 0xffff, i.e. checksum over it is 0
        assert_eq!(ipv4_checksum(&p.data()[..20]), 0);
        let (_, e) = parse(p.data());
        assert_eq!(e, Ecn::Ce);
    }

    #[test]
    fn mark_ce_ipv6_and_not_ect() {
        let b = build::ipv6([1; 16], [2; 16], 17, 1, 2, 2, 60);
        let mut p = Packet::from_bytes(&b, 0);
        assert!(p.mark_ce());
        assert_eq!(parse(p.data()).1, Ecn::Ce);
        let b = build::ipv6([1; 16], [2; 16], 17, 1, 2, 0, 60);
        let mut p = Packet::from_bytes(&b, 0);
        assert!(!p.mark_ce());
        assert_eq!(parse(p.data()).1, Ecn::NotEct);
    }

    #[test]
    fn garbage_is_tolerated() {
        let (k, e) = parse(&[0xff, 1, 2]);
        assert_eq!(k.version, 0);
        assert_eq!(e, Ecn::NotEct);
        let p = Packet::from_bytes(&[], 0);
        assert_eq!(p.size(), 0);
    }
}
