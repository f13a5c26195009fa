//! Host facts and socket options: TCP_INFO, TCP_CONGESTION, buffers, MSS.
use bloatlab_results::{HostInfo, Side, TcpInfoSample};
use std::os::fd::AsRawFd;

fn read_trim(path: &str) -> String {
    bloatlab_host::read_trim(path).unwrap_or_default()
}

/// Facts about this host for the result metadata.
pub fn host_info() -> HostInfo {
    let mut os = String::new();
    // SAFETY: uname fills a caller-provided struct.
    unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut u) == 0 {
            let s = |f: &[libc::c_char]| {
                std::ffi::CStr::from_ptr(f.as_ptr()).to_string_lossy().into_owned()
            };
            os = format!("{} {}", s(&u.sysname), s(&u.machine));
        }
    }
    HostInfo {
        hostname: read_trim("/proc/sys/kernel/hostname"),
        kernel: read_trim("/proc/sys/kernel/osrelease"),
        os,
        bloatlab_version: env!("CARGO_PKG_VERSION").to_string(),
        default_cc: read_trim("/proc/sys/net/ipv4/tcp_congestion_control"),
        available_cc: available_cc(),
    }
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
    // SAFETY: valid fd, pointer/len of a byte slice.
    let r = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            cc.as_ptr() as *const libc::c_void,
            cc.len() as libc::socklen_t,
        )
    };
    if r != 0 {
        let e = std::io::Error::last_os_error();
        return Err(format!(
            "congestion control \"{cc}\" cannot be used on this host ({e}); available: {}",
            available_cc().join(" ")
        ));
    }
    Ok(())
}

pub fn get_cc(sock: &impl AsRawFd) -> String {
    let mut buf = [0u8; 32];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: buffer and length are valid.
    let r = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            buf.as_mut_ptr() as *mut libc::c_void,
            &mut len,
        )
    };
    if r != 0 {
        return String::new();
    }
    let s = &buf[..len as usize];
    String::from_utf8_lossy(s.split(|b| *b == 0).next().unwrap_or(&[])).into_owned()
}

fn getsockopt_int(sock: &impl AsRawFd, level: i32, opt: i32) -> Option<i32> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: int-sized option.
    let r = unsafe {
        libc::getsockopt(sock.as_raw_fd(), level, opt, &mut v as *mut _ as *mut libc::c_void, &mut len)
    };
    (r == 0).then_some(v)
}

/// TCP_NOTSENT_LOWAT: the socket accepts new data only while fewer than
/// `bytes` sit unsent in its buffer, so data written later (a small
/// response on a busy HTTP/2 connection) waits behind at most that much.
pub fn set_notsent_lowat(sock: &impl AsRawFd, bytes: i32) -> std::io::Result<()> {
    set_int(sock, libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT, bytes)
}

pub fn set_int(sock: &impl AsRawFd, level: i32, opt: i32, v: i32) -> std::io::Result<()> {
    // SAFETY: int-sized option.
    let r = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            level,
            opt,
            &v as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

pub fn mss(sock: &impl AsRawFd) -> u32 {
    getsockopt_int(sock, libc::IPPROTO_TCP, libc::TCP_MAXSEG).unwrap_or(0) as u32
}
pub fn sndbuf(sock: &impl AsRawFd) -> u32 {
    getsockopt_int(sock, libc::SOL_SOCKET, libc::SO_SNDBUF).unwrap_or(0) as u32
}
pub fn rcvbuf(sock: &impl AsRawFd) -> u32 {
    getsockopt_int(sock, libc::SOL_SOCKET, libc::SO_RCVBUF).unwrap_or(0) as u32
}

/// Linux `struct tcp_info` (include/uapi/linux/tcp.h) up to tcpi_snd_wnd.
/// Older kernels return a shorter struct; fields past the returned length stay 0.
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct RawTcpInfo {
    state: u8,
    ca_state: u8,
    retransmits: u8,
    probes: u8,
    backoff: u8,
    options: u8,
    wscale: u8,
    flags: u8,
    rto: u32,
    ato: u32,
    snd_mss: u32,
    rcv_mss: u32,
    unacked: u32,
    sacked: u32,
    lost: u32,
    retrans: u32,
    fackets: u32,
    last_data_sent: u32,
    last_ack_sent: u32,
    last_data_recv: u32,
    last_ack_recv: u32,
    pmtu: u32,
    rcv_ssthresh: u32,
    rtt: u32,
    rttvar: u32,
    snd_ssthresh: u32,
    snd_cwnd: u32,
    advmss: u32,
    reordering: u32,
    rcv_rtt: u32,
    rcv_space: u32,
    total_retrans: u32,
    pacing_rate: u64,
    max_pacing_rate: u64,
    bytes_acked: u64,
    bytes_received: u64,
    segs_out: u32,
    segs_in: u32,
    notsent_bytes: u32,
    min_rtt: u32,
    data_segs_in: u32,
    data_segs_out: u32,
    delivery_rate: u64,
    busy_time: u64,
    rwnd_limited: u64,
    sndbuf_limited: u64,
    delivered: u32,
    delivered_ce: u32,
    bytes_sent: u64,
    bytes_retrans: u64,
    dsack_dups: u32,
    reord_seen: u32,
    rcv_ooopack: u32,
    snd_wnd: u32,
}

/// TCP_INFO as the kernel filled it, and how many bytes it filled (older
/// kernels fill fewer fields; the rest stay 0).
fn raw_tcp_info(sock: &impl AsRawFd) -> Option<(RawTcpInfo, usize)> {
    let mut raw = RawTcpInfo::default();
    let mut len = std::mem::size_of::<RawTcpInfo>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `raw`.
    let r = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            &mut raw as *mut _ as *mut libc::c_void,
            &mut len,
        )
    };
    (r == 0).then_some((raw, len as usize))
}

/// Payload bytes this socket's TCP has received in sequence
/// (tcpi_bytes_received, Linux 4.1+): what crossed the network, whether or
/// not the application has read it yet. None where the kernel lacks it.
pub fn tcp_bytes_received(sock: &impl AsRawFd) -> Option<u64> {
    let (raw, len) = raw_tcp_info(sock)?;
    let end = std::mem::offset_of!(RawTcpInfo, bytes_received) + std::mem::size_of::<u64>();
    (len >= end).then_some(raw.bytes_received)
}

/// Payload bytes a sending socket's peer holds: cumulatively acknowledged
/// (tcpi_bytes_acked) plus the segments it has selectively acknowledged
/// beyond a hole (tcpi_sacked x MSS). Acknowledged bytes alone stall while
/// a loss is repaired and then jump by everything SACKed meanwhile (a
/// 1-second interval read 2.4 then 17.7 Mbit/s through a 10 Mbit/s link);
/// with the SACKed segments counted, delivery is counted when it happens.
pub fn tcp_bytes_delivered(sock: &impl AsRawFd) -> Option<u64> {
    let (raw, _) = raw_tcp_info(sock)?;
    Some(raw.bytes_acked + raw.sacked as u64 * raw.snd_mss as u64)
}

/// Read TCP_INFO; `t_ns` is filled by the caller's clock.
pub fn tcp_info(sock: &impl AsRawFd, t_ns: u64, side: Side) -> Option<TcpInfoSample> {
    let (raw, _) = raw_tcp_info(sock)?;
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

/// Ask for transparent huge pages behind `block` (madvise MADV_HUGEPAGE),
/// before its first touch; `block` must start on a page boundary. False
/// where the kernel has no THP or refuses; the memory is usable either way.
pub fn advise_huge_pages(block: &mut [u8]) -> bool {
    // SAFETY: the range is exactly the slice's own memory, and
    // MADV_HUGEPAGE changes how it is backed, never its contents.
    unsafe { libc::madvise(block.as_mut_ptr() as *mut libc::c_void, block.len(), libc::MADV_HUGEPAGE) == 0 }
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

/// `recv_stamped` with recvmsg(2) flags (e.g. MSG_DONTWAIT).
pub fn recv_stamped_flags(
    sock: &impl AsRawFd,
    buf: &mut [u8],
    flags: libc::c_int,
) -> std::io::Result<(usize, Option<std::net::SocketAddr>, Option<u64>)> {
    // SAFETY: every pointer handed to recvmsg points into locals that outlive the call,
    // with their true lengths; control-message parsing uses the libc CMSG helpers.
    unsafe {
        let mut storage = socket2::SockAddrStorage::zeroed();
        let mut iov = libc::iovec { iov_base: buf.as_mut_ptr() as *mut libc::c_void, iov_len: buf.len() };
        let mut control = [0u64; 16]; // 128 bytes, 8-aligned
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_name = storage.view_as::<libc::sockaddr_storage>() as *mut _ as *mut libc::c_void;
        msg.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = std::mem::size_of_val(&control) as _;
        let n = libc::recvmsg(sock.as_raw_fd(), &mut msg, flags);
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let mut ts = None;
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let t: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::timespec);
                ts = Some(t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64);
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
        let addr = socket2::SockAddr::new(storage, msg.msg_namelen).as_socket();
        Ok((n as usize, addr, ts))
    }
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
        // RawTcpInfo layout: offset of tcpi_total_retrans is 100 in the uapi header.
        assert_eq!(std::mem::offset_of!(RawTcpInfo, total_retrans), 100);
        assert_eq!(std::mem::offset_of!(RawTcpInfo, delivery_rate), 160);
        assert_eq!(std::mem::offset_of!(RawTcpInfo, snd_wnd), 228);
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
