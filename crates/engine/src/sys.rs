//! Host facts and socket options as the engine records them: TCP_INFO
//! samples, TCP_CONGESTION with its error message, buffers, MSS, DSCP (the
//! system calls are crates/host's).
use bloatlab_host::sock;
use bloatlab_results::{HostInfo, Side, TcpInfoSample};
use std::os::fd::AsRawFd;

pub use bloatlab_host::mem::advise_huge_pages;
pub use bloatlab_host::sock::{recv_stamped as recv_stamped_flags, set_int};

fn read_trim(path: &str) -> String {
    bloatlab_host::read_trim(path).unwrap_or_default()
}

/// Facts about this host for the result metadata.
pub fn host_info() -> HostInfo {
    let os = bloatlab_host::process::uname().map(|(os, machine)| format!("{os} {machine}")).unwrap_or_default();
    HostInfo {
        hostname: read_trim("/proc/sys/kernel/hostname"),
        kernel: read_trim("/proc/sys/kernel/osrelease"),
        os,
        bloatlab_version: env!("CARGO_PKG_VERSION").to_string(),
        default_cc: read_trim("/proc/sys/net/ipv4/tcp_congestion_control"),
        available_cc: available_cc(),
    }
}

/// What the server tells a client about itself.
pub fn disclosed_host_info(cfg: &bloatlab_model::ServerConfig) -> HostInfo {
    let mut h = host_info();
    if !cfg.allowed_cc.is_empty() {
        h.available_cc.retain(|c| cfg.allowed_cc.contains(c));
    }
    if !cfg.disclose_host {
        h.hostname.clear();
        h.kernel.clear();
        h.os.clear();
    }
    h
}

/// Mark a socket's packets with a DSCP (IPv4 TOS or IPv6 traffic class,
/// ECN bits left 0), for a flow of a priority class.
pub fn set_dscp<S: std::os::fd::AsFd>(sock: &S, dscp: u8) -> std::io::Result<()> {
    let s = socket2::SockRef::from(sock);
    let tos = u32::from(dscp) << 2;
    match s.local_addr()?.as_socket().ok_or_else(|| std::io::Error::other("not an IP socket"))? {
        std::net::SocketAddr::V4(_) => s.set_tos_v4(tos),
        std::net::SocketAddr::V6(a) if a.ip().to_ipv4_mapped().is_some() => s.set_tos_v4(tos),
        std::net::SocketAddr::V6(_) => s.set_tclass_v6(tos),
    }
}

pub fn available_cc() -> Vec<String> {
    read_trim("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

/// Set TCP_CONGESTION on a socket; a clear error names what is available.
pub fn set_cc(sock: &impl AsRawFd, cc: &str) -> Result<(), String> {
    if cc.is_empty() {
        return Ok(());
    }
    // Set even when the socket runs it already: skipping that made the
    // browser test through the lab read 20-30% less goodput and three
    // times the latency (lab_web.rs; why is not pinned down). A host that
    // cannot set it (qemu-user) while the socket runs it already is fine.
    if let Err(e) = sock::set_tcp_congestion(sock, cc) {
        if get_cc(sock) == cc {
            return Ok(());
        }
        return Err(format!(
            "congestion control \"{cc}\" cannot be used on this host ({e}); available: {}",
            available_cc().join(" ")
        ));
    }
    Ok(())
}

pub fn get_cc(sock: &impl AsRawFd) -> String {
    sock::tcp_congestion(sock).unwrap_or_default()
}

/// TCP_NOTSENT_LOWAT: the socket accepts new data only while fewer than
/// `bytes` sit unsent in its buffer, so data written later (a small
/// response on a busy HTTP/2 connection) waits behind at most that much.
pub fn set_notsent_lowat(sock: &impl AsRawFd, bytes: i32) -> std::io::Result<()> {
    set_int(sock, libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT, bytes)
}

pub fn mss(sock: &impl AsRawFd) -> u32 {
    sock::get_int(sock, libc::IPPROTO_TCP, libc::TCP_MAXSEG).unwrap_or(0) as u32
}
pub fn sndbuf(sock: &impl AsRawFd) -> u32 {
    sock::get_int(sock, libc::SOL_SOCKET, libc::SO_SNDBUF).unwrap_or(0) as u32
}
pub fn rcvbuf(sock: &impl AsRawFd) -> u32 {
    sock::get_int(sock, libc::SOL_SOCKET, libc::SO_RCVBUF).unwrap_or(0) as u32
}

use bloatlab_host::sock::TcpInfo;

/// What a receiving socket's TCP has received (its TCP_INFO counters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Received {
    /// In sequence (tcpi_bytes_received, Linux 4.1+): what crossed the
    /// network, whether or not the application has read it yet. Goodput.
    pub in_sequence: u64,
    /// Data segments received, in order or not (tcpi_data_segs_in, wraps).
    pub data_segs: u32,
    /// Segments received out of order (tcpi_rcv_ooopack, Linux 5.4+; 0 before).
    pub ooo_packets: u32,
    pub rcv_mss: u32,
}

/// A receiving socket's counts; None where the kernel lacks them.
pub fn tcp_received(sock: &impl AsRawFd) -> Option<Received> {
    let (raw, len) = sock::tcp_info(sock)?;
    let end = std::mem::offset_of!(TcpInfo, data_segs_in) + std::mem::size_of::<u32>();
    (len >= end).then_some(Received { in_sequence: raw.bytes_received, data_segs: raw.data_segs_in, ooo_packets: raw.rcv_ooopack, rcv_mss: raw.rcv_mss })
}

/// Payload bytes a sending socket's peer holds, counted when they arrive
/// ([`TcpInfoSample::delivered_bytes`]).
pub fn tcp_bytes_delivered(sock: &impl AsRawFd) -> Option<u64> {
    tcp_info(sock, 0, Side::Client).map(|i| i.delivered_bytes())
}

/// Read TCP_INFO; `t_ns` is filled by the caller's clock.
pub fn tcp_info(sock: &impl AsRawFd, t_ns: u64, side: Side) -> Option<TcpInfoSample> {
    let (raw, _) = sock::tcp_info(sock)?;
    Some(TcpInfoSample {
        t_ns,
        side,
        cwnd: raw.snd_cwnd,
        ssthresh: raw.snd_ssthresh,
        srtt_us: raw.rtt,
        rttvar_us: raw.rttvar,
        total_retrans: raw.total_retrans,
        lost: raw.lost,
        unacked: raw.unacked,
        sacked: raw.sacked,
        snd_mss: raw.snd_mss,
        delivery_rate_bps: raw.delivery_rate.saturating_mul(8),
        pacing_rate_bps: raw.pacing_rate.saturating_mul(8),
        bytes_acked: raw.bytes_acked,
        busy_time_us: raw.busy_time,
        rwnd_limited_us: raw.rwnd_limited,
        sndbuf_limited_us: raw.sndbuf_limited,
        ca_state: raw.ca_state,
    })
}

/// Ask the kernel to stamp received datagrams (SO_TIMESTAMPNS).
pub fn enable_rx_timestamps(sock: &impl AsRawFd) -> bool {
    set_int(sock, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1).is_ok()
}

/// recvmsg(2) returning the datagram length, its source address and the
/// kernel's receive time (CLOCK_REALTIME ns) when SO_TIMESTAMPNS is on.
pub fn recv_stamped(sock: &impl AsRawFd, buf: &mut [u8]) -> std::io::Result<(usize, Option<std::net::SocketAddr>, Option<u64>)> {
    recv_stamped_flags(sock, buf, 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn tcp_info_on_a_live_connection() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (_s, _) = l.accept().unwrap();
        let i = tcp_info(&c, 5, Side::Client).unwrap();
        assert_eq!(i.t_ns, 5);
        assert!(i.cwnd >= 1, "cwnd {}", i.cwnd);
        assert!(i.snd_mss > 0);
        assert!(mss(&c) > 0);
    }
    #[test]
    fn kernel_receive_stamps() {
        let a = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(enable_rx_timestamps(&b));
        let before = bloatlab_host::clock::now_ns();
        a.send_to(b"hello", b.local_addr().unwrap()).unwrap();
        let mut buf = [0u8; 64];
        let (n, from, ts) = recv_stamped(&b, &mut buf).unwrap();
        let after = bloatlab_host::clock::now_ns();
        assert_eq!((n, from), (5, Some(a.local_addr().unwrap())));
        let t = bloatlab_host::clock::from_realtime(ts.expect("SO_TIMESTAMPNS stamp"));
        // The stamp lies between send and receive, within the clocks' read error.
        assert!(t + 200_000 >= before && t <= after + 200_000, "{before} <= {t} <= {after}");
    }

    #[test]
    fn cc_errors_are_clear() {
        let s = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let e = set_cc(&s, "no-such-cc").unwrap_err();
        assert!(e.contains("no-such-cc") && e.contains("available"), "{e}");
        set_cc(&s, "reno").unwrap();
        assert_eq!(get_cc(&s), "reno");
    }
}
