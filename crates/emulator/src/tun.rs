//! TUN devices (`IFF_TUN | IFF_NO_PI`, non-blocking), opened through
//! `/dev/net/tun` with the `TUNSETIFF` ioctl. The device is not persistent:
//! it disappears, with every route through it, when the file descriptor is
//! closed (i.e. when the emulator exits, however it exits).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const IFF_TUN: libc::c_short = 0x0001;
const IFF_NO_PI: libc::c_short = 0x1000;

#[repr(C)]
struct IfReq {
    name: [u8; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

#[derive(Debug)]
pub struct Tun {
    fd: OwnedFd,
    name: String,
}

impl Tun {
    /// Create (or attach to) TUN device `name` in the calling thread's network namespace.
    pub fn open(name: &str) -> io::Result<Tun> {
        if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains('/') || name.contains(char::is_whitespace) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("invalid interface name \"{name}\" (1-15 characters)")));
        }
        let path = CString::new("/dev/net/tun").unwrap();
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC) };
        if fd < 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(e.kind(), format!("cannot open /dev/net/tun: {e} (is the tun module available, and are we root?)")));
        }
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut req = IfReq { name: [0; libc::IFNAMSIZ], flags: IFF_TUN | IFF_NO_PI, _pad: [0; 22] };
        req.name[..name.len()].copy_from_slice(name.as_bytes());
        let r = unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF as _, &mut req as *mut IfReq) };
        if r < 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(e.kind(), format!("TUNSETIFF {name}: {e}")));
        }
        let end = req.name.iter().position(|&b| b == 0).unwrap_or(libc::IFNAMSIZ);
        let name = String::from_utf8_lossy(&req.name[..end]).into_owned();
        Ok(Tun { fd, name })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Read one packet (non-blocking: `WouldBlock` when none is queued).
    pub fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr() as *mut libc::c_void, buf.len()) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }

    /// Write one packet (it enters the kernel as if received on this device).
    pub fn write(&self, pkt: &[u8]) -> io::Result<usize> {
        let n = unsafe { libc::write(self.fd.as_raw_fd(), pkt.as_ptr() as *const libc::c_void, pkt.len()) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
