//! Waiting for a descriptor to become readable (poll/ppoll with a
//! nanosecond timeout), for the emulator's datapath.
use std::os::fd::RawFd;

/// True if `fd` has data waiting now.
#[inline]
pub fn readable_now(fd: RawFd) -> bool {
    let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd, no waiting.
    unsafe { libc::poll(&mut pfd, 1, 0) > 0 }
}

/// Wait at most `timeout_ns` for `fd` to become readable; true if it is.
#[inline]
pub fn wait_readable(fd: RawFd, timeout_ns: u64) -> bool {
    let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    let ts = libc::timespec { tv_sec: (timeout_ns / 1_000_000_000) as _, tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long };
    // SAFETY: one valid pollfd and a valid timespec; no signal mask change.
    unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) > 0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_datagram_makes_a_socket_readable() {
        let a = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(!readable_now(b.as_raw_fd()));
        let t = std::time::Instant::now();
        assert!(!wait_readable(b.as_raw_fd(), 20_000_000));
        assert!(t.elapsed() >= std::time::Duration::from_millis(19));
        a.send_to(b"x", b.local_addr().unwrap()).unwrap();
        assert!(wait_readable(b.as_raw_fd(), 1_000_000_000));
        assert!(readable_now(b.as_raw_fd()));
    }
}
