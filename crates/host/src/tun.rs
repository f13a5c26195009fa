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
const IFF_VNET_HDR: libc::c_short = 0x4000;
const TUNSETOFFLOAD: libc::c_ulong = 0x4004_54d0;
const TUN_F_CSUM: libc::c_ulong = 0x01;
const TUN_F_TSO4: libc::c_ulong = 0x02;
const TUN_F_TSO6: libc::c_ulong = 0x04;
const TUN_F_TSO_ECN: libc::c_ulong = 0x08;
const TUN_F_USO4: libc::c_ulong = 0x20;
const TUN_F_USO6: libc::c_ulong = 0x40;

/// Size of the virtio-net header that precedes packets with `IFF_VNET_HDR`.
pub const VNET_HDR_LEN: usize = 10;

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
    vnet: bool,
}

impl Tun {
    /// Create (or attach to) TUN device `name` in the calling thread's network namespace.
    pub fn open(name: &str) -> io::Result<Tun> {
        Tun::open_with(name, false)
    }

    /// With `offload`, the device accepts segmentation offloads (TSO/USO and
    /// checksum offload): the kernel hands over GSO packets of up to 64 KB, each
    /// preceded by a virtio-net header ([`VNET_HDR_LEN`] bytes) that must be
    /// written back with it.
    pub fn open_with(name: &str, offload: bool) -> io::Result<Tun> {
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
        let flags = IFF_TUN | IFF_NO_PI | if offload { IFF_VNET_HDR } else { 0 };
        let mut req = IfReq { name: [0; libc::IFNAMSIZ], flags, _pad: [0; 22] };
        req.name[..name.len()].copy_from_slice(name.as_bytes());
        let r = unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF as _, &mut req as *mut IfReq) };
        if r < 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(e.kind(), format!("TUNSETIFF {name}: {e}")));
        }
        let end = req.name.iter().position(|&b| b == 0).unwrap_or(libc::IFNAMSIZ);
        let name = String::from_utf8_lossy(&req.name[..end]).into_owned();
        if offload {
            let base = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN;
            // UDP segmentation offload needs Linux 6.2; fall back without it
            let r = unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETOFFLOAD as _, base | TUN_F_USO4 | TUN_F_USO6) };
            if r < 0 && unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETOFFLOAD as _, base) } < 0 {
                let e = io::Error::last_os_error();
                return Err(io::Error::new(e.kind(), format!("TUNSETOFFLOAD {name}: {e}")));
            }
        }
        Ok(Tun { fd, name, vnet: offload })
    }

    /// True when packets carry a virtio-net header.
    #[inline]
    pub fn offload(&self) -> bool {
        self.vnet
    }

    #[inline]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Read one packet (non-blocking: `WouldBlock` when none is queued).
    #[inline]
    pub fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr() as *mut libc::c_void, buf.len()) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }

    /// Write one packet (it enters the kernel as if received on this device).
    #[inline]
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
