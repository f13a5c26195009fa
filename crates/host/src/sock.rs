//! Socket options and calls that std and socket2 do not offer: integer
//! options by level and number, TCP_CONGESTION, TCP_INFO, kernel receive
//! stamps (recvmsg with SO_TIMESTAMPNS), interface indexes.
use std::os::fd::AsRawFd;

/// An integer socket option.
pub fn get_int(sock: &impl AsRawFd, level: i32, opt: i32) -> Option<i32> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: an int-sized option into an int with its true length.
    let r = unsafe { libc::getsockopt(sock.as_raw_fd(), level, opt, &mut v as *mut _ as *mut libc::c_void, &mut len) };
    (r == 0).then_some(v)
}

/// Set an integer socket option.
pub fn set_int(sock: &impl AsRawFd, level: i32, opt: i32, v: i32) -> std::io::Result<()> {
    // SAFETY: an int-sized option from an int with its true length.
    let r = unsafe {
        libc::setsockopt(sock.as_raw_fd(), level, opt, &v as *const _ as *const libc::c_void, std::mem::size_of::<libc::c_int>() as libc::socklen_t)
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Bytes waiting in a socket's receive queue, not yet read (SIOCINQ/FIONREAD).
pub fn unread(sock: &impl AsRawFd) -> Option<u64> {
    let mut v: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int through the pointer given.
    let r = unsafe { libc::ioctl(sock.as_raw_fd(), libc::FIONREAD, &mut v as *mut libc::c_int) };
    (r == 0 && v >= 0).then_some(v as u64)
}

/// Set TCP_CONGESTION.
pub fn set_tcp_congestion(sock: &impl AsRawFd, name: &str) -> std::io::Result<()> {
    // SAFETY: pointer and length of a byte slice that outlives the call.
    let r = unsafe {
        libc::setsockopt(sock.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_CONGESTION, name.as_ptr() as *const libc::c_void, name.len() as libc::socklen_t)
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The socket's TCP_CONGESTION.
pub fn tcp_congestion(sock: &impl AsRawFd) -> Option<String> {
    let mut buf = [0u8; 32];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: buffer and its true length.
    let r = unsafe { libc::getsockopt(sock.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_CONGESTION, buf.as_mut_ptr() as *mut libc::c_void, &mut len) };
    if r != 0 {
        return None;
    }
    let s = &buf[..(len as usize).min(buf.len())];
    Some(String::from_utf8_lossy(s.split(|b| *b == 0).next().unwrap_or(&[])).into_owned())
}

/// Set a buffer size past the sysctl limit where privileged
/// (SO_SNDBUFFORCE / SO_RCVBUFFORCE), else as far as the limit allows.
pub fn set_buffer_forced(sock: &impl AsRawFd, receive: bool, bytes: i32) -> std::io::Result<()> {
    let (force, plain) = if receive { (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF) } else { (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF) };
    set_int(sock, libc::SOL_SOCKET, force, bytes).or_else(|_| set_int(sock, libc::SOL_SOCKET, plain, bytes))
}

/// The index of network interface `name` in the calling thread's namespace.
pub fn if_index(name: &str) -> std::io::Result<u32> {
    let c = std::ffi::CString::new(name).map_err(|_| std::io::Error::other("an interface name with a NUL byte"))?;
    // SAFETY: a valid NUL-terminated string.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        return Err(std::io::Error::other(format!("no interface {name}")));
    }
    Ok(i)
}

/// Linux `struct tcp_info` (include/uapi/linux/tcp.h) up to tcpi_snd_wnd.
/// Older kernels return a shorter struct; fields past the returned length stay 0.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct TcpInfo {
    pub state: u8,
    pub ca_state: u8,
    pub retransmits: u8,
    pub probes: u8,
    pub backoff: u8,
    pub options: u8,
    pub wscale: u8,
    pub flags: u8,
    pub rto: u32,
    pub ato: u32,
    pub snd_mss: u32,
    pub rcv_mss: u32,
    pub unacked: u32,
    pub sacked: u32,
    pub lost: u32,
    pub retrans: u32,
    pub fackets: u32,
    pub last_data_sent: u32,
    pub last_ack_sent: u32,
    pub last_data_recv: u32,
    pub last_ack_recv: u32,
    pub pmtu: u32,
    pub rcv_ssthresh: u32,
    pub rtt: u32,
    pub rttvar: u32,
    pub snd_ssthresh: u32,
    pub snd_cwnd: u32,
    pub advmss: u32,
    pub reordering: u32,
    pub rcv_rtt: u32,
    pub rcv_space: u32,
    pub total_retrans: u32,
    pub pacing_rate: u64,
    pub max_pacing_rate: u64,
    pub bytes_acked: u64,
    pub bytes_received: u64,
    pub segs_out: u32,
    pub segs_in: u32,
    pub notsent_bytes: u32,
    pub min_rtt: u32,
    pub data_segs_in: u32,
    pub data_segs_out: u32,
    pub delivery_rate: u64,
    pub busy_time: u64,
    pub rwnd_limited: u64,
    pub sndbuf_limited: u64,
    pub delivered: u32,
    pub delivered_ce: u32,
    pub bytes_sent: u64,
    pub bytes_retrans: u64,
    pub dsack_dups: u32,
    pub reord_seen: u32,
    pub rcv_ooopack: u32,
    pub snd_wnd: u32,
}

/// TCP_INFO as the kernel filled it, and how many bytes it filled (older
/// kernels fill fewer fields; the rest stay 0).
pub fn tcp_info(sock: &impl AsRawFd) -> Option<(TcpInfo, usize)> {
    let mut raw = TcpInfo::default();
    let mut len = std::mem::size_of::<TcpInfo>() as libc::socklen_t;
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

/// One received datagram (or stream read) and what the kernel said about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received {
    pub len: usize,
    pub from: Option<std::net::SocketAddr>,
    /// The kernel's receive time (CLOCK_REALTIME ns) when SO_TIMESTAMPNS is on.
    pub stamp_ns: Option<u64>,
    /// The IPv4 TOS / IPv6 traffic-class byte when [`enable_recv_tos`] is on.
    pub tos: Option<u8>,
}

/// recvmsg(2) with `flags` (e.g. MSG_DONTWAIT), returning the datagram
/// length, its source address and the kernel's receive time (CLOCK_REALTIME
/// ns) when SO_TIMESTAMPNS is on.
pub fn recv_stamped(
    sock: &impl AsRawFd,
    buf: &mut [u8],
    flags: libc::c_int,
) -> std::io::Result<(usize, Option<std::net::SocketAddr>, Option<u64>)> {
    recv_meta(sock, buf, flags).map(|r| (r.len, r.from, r.stamp_ns))
}

/// recvmsg(2) with `flags`: the datagram and its control messages (receive
/// stamp, TOS / traffic class).
pub fn recv_meta(sock: &impl AsRawFd, buf: &mut [u8], flags: libc::c_int) -> std::io::Result<Received> {
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
        let (mut ts, mut tos) = (None, None);
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            let (level, kind) = ((*c).cmsg_level, (*c).cmsg_type);
            if level == libc::SOL_SOCKET && kind == libc::SCM_TIMESTAMPNS {
                let t: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::timespec);
                ts = Some(t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64);
            } else if level == libc::IPPROTO_IP && kind == libc::IP_TOS {
                tos = Some(*libc::CMSG_DATA(c));
            } else if level == libc::IPPROTO_IPV6 && kind == libc::IPV6_TCLASS {
                tos = Some(std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::c_int) as u8);
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
        let from = socket2::SockAddr::new(storage, msg.msg_namelen).as_socket();
        Ok(Received { len: n as usize, from, stamp_ns: ts, tos })
    }
}

/// Ask the kernel for each datagram's TOS / traffic-class byte
/// (IP_RECVTOS, and IPV6_RECVTCLASS on an IPv6 socket), for [`recv_meta`].
pub fn enable_recv_tos(sock: &impl AsRawFd) -> std::io::Result<()> {
    let v4 = set_int(sock, libc::IPPROTO_IP, libc::IP_RECVTOS, 1);
    let v6 = set_int(sock, libc::IPPROTO_IPV6, libc::IPV6_RECVTCLASS, 1);
    v4.or(v6)
}

/// sendmsg(2) of one datagram to `to` with the TOS / traffic-class byte
/// `tos` for this datagram only (an IP_TOS or IPV6_TCLASS control
/// message): a server answers each client in the client's own class.
pub fn send_to_with_tos(sock: &impl AsRawFd, buf: &[u8], to: std::net::SocketAddr, tos: u8) -> std::io::Result<usize> {
    let addr = socket2::SockAddr::from(to);
    // A v4-mapped address on a dual-stack socket leaves as IPv4: IP_TOS.
    let v6 = matches!(to, std::net::SocketAddr::V6(a) if a.ip().to_ipv4_mapped().is_none());
    // SAFETY: the message points at `buf`, `addr` and `control`, all alive
    // for the call, with their true lengths; the control message is built
    // with the libc CMSG helpers inside a buffer sized by CMSG_SPACE.
    unsafe {
        let mut iov = libc::iovec { iov_base: buf.as_ptr() as *mut libc::c_void, iov_len: buf.len() };
        let mut control = [0u64; 4]; // 32 bytes >= CMSG_SPACE(sizeof(int))
        let space = libc::CMSG_SPACE(std::mem::size_of::<libc::c_int>() as u32) as usize;
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_name = addr.as_ptr() as *mut libc::c_void;
        msg.msg_namelen = addr.len();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = space as _;
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = if v6 { libc::IPPROTO_IPV6 } else { libc::IPPROTO_IP };
        (*c).cmsg_type = if v6 { libc::IPV6_TCLASS } else { libc::IP_TOS };
        (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<libc::c_int>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut libc::c_int, libc::c_int::from(tos));
        let n = libc::sendmsg(sock.as_raw_fd(), &msg, 0);
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(n as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_info_layout_and_a_live_connection() {
        // offsets of the uapi header
        assert_eq!(std::mem::offset_of!(TcpInfo, total_retrans), 100);
        assert_eq!(std::mem::offset_of!(TcpInfo, delivery_rate), 160);
        assert_eq!(std::mem::offset_of!(TcpInfo, snd_wnd), 228);
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (_s, _) = l.accept().unwrap();
        let (i, len) = tcp_info(&c).unwrap();
        assert!(i.snd_cwnd >= 1 && i.snd_mss > 0 && len >= 104, "{i:?} {len}");
        assert!(get_int(&c, libc::IPPROTO_TCP, libc::TCP_MAXSEG).unwrap() > 0);
        set_tcp_congestion(&c, "reno").unwrap();
        assert_eq!(tcp_congestion(&c).as_deref(), Some("reno"));
        assert!(set_tcp_congestion(&c, "no-such-cc").is_err());
        assert_eq!(if_index("lo").unwrap(), 1);
        assert!(if_index("no-such-if0").is_err());
    }

    /// A datagram's TOS byte comes with it, and a reply can carry one of its
    /// own without marking the socket (IPv4 and IPv6).
    #[test]
    fn tos_is_received_and_sent_per_datagram() {
        for (a, b) in [("127.0.0.1:0", "127.0.0.1:0"), ("[::1]:0", "[::1]:0")] {
            let (Ok(x), Ok(y)) = (std::net::UdpSocket::bind(a), std::net::UdpSocket::bind(b)) else { continue };
            enable_recv_tos(&x).unwrap();
            enable_recv_tos(&y).unwrap();
            let mut buf = [0u8; 64];
            y.send_to(b"plain", x.local_addr().unwrap()).unwrap();
            let r = recv_meta(&x, &mut buf, 0).unwrap();
            assert_eq!((r.len, r.from, r.tos), (5, Some(y.local_addr().unwrap()), Some(0)), "{a}");
            // EF (46) in the upper six bits
            send_to_with_tos(&x, b"marked", y.local_addr().unwrap(), 46 << 2).unwrap();
            let r = recv_meta(&y, &mut buf, 0).unwrap();
            assert_eq!((r.len, r.tos), (6, Some(46 << 2)), "{a}");
            // the socket itself stays unmarked
            x.send_to(b"after", y.local_addr().unwrap()).unwrap();
            assert_eq!(recv_meta(&y, &mut buf, 0).unwrap().tos, Some(0), "{a}");
        }
    }
}
