//! Reaching a peer: name resolution, and blocking framed I/O over a
//! TcpStream (handshake and control frames).
use bloatlab_wire::{self as wire, Handshake, WireError, HANDSHAKE_LEN};
use serde::{de::DeserializeOwned, Serialize};
use std::io::{Read, Write};
use bloatlab_model::Family;
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Resolve "host[:port]" into addresses of the wanted family.
pub fn resolve(spec: &str, default_port: u16, family: Family) -> Result<SocketAddr, String> {
    let (host, port) = bloatlab_model::config::split_host_port(spec, default_port)?;
    let addrs: Vec<SocketAddr> = (host.as_str(), port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve \"{spec}\": {e}"))?
        .collect();
    addrs
        .iter()
        .copied()
        .find(|a| match family {
            Family::Any => true,
            Family::V4 => a.is_ipv4(),
            Family::V6 => a.is_ipv6(),
        })
        .ok_or_else(|| format!("\"{spec}\" has no {} address", if family == Family::V4 { "IPv4" } else { "IPv6" }))
}

#[derive(Debug, thiserror::Error)]
pub enum ConnError {
    #[error("{0}")]
    Wire(#[from] WireError),
    #[error("connection closed by the peer")]
    Closed,
    #[error("timed out waiting for the peer")]
    Timeout,
    #[error("{0}")]
    Io(std::io::Error),
}

impl From<std::io::Error> for ConnError {
    fn from(e: std::io::Error) -> Self {
        match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => ConnError::Timeout,
            std::io::ErrorKind::UnexpectedEof
            | std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::BrokenPipe => ConnError::Closed,
            _ => ConnError::Io(e),
        }
    }
}

/// A TcpStream read against a deadline for a whole message, not per read:
/// each read may wait only for what is left until `until`, so a peer that
/// drips one byte at a time cannot hold the connection past it.
pub struct Deadline<'a> {
    s: &'a TcpStream,
    until: Instant,
}

impl<'a> Deadline<'a> {
    pub fn new(s: &'a TcpStream, until: Instant) -> Self {
        Deadline { s, until }
    }
}

impl Read for Deadline<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = self.until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            // Past the deadline, only bytes that already arrived count: a
            // peer that sent in time is not blamed for this thread starting
            // late on a loaded host, and a dripping peer gains nothing.
            self.s.set_nonblocking(true)?;
            let mut s = self.s;
            let r = s.read(buf);
            self.s.set_nonblocking(false)?;
            return match r {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Err(std::io::ErrorKind::TimedOut.into()),
                r => r,
            };
        }
        // At least 1 ms: a zero read timeout means "block forever".
        self.s.set_read_timeout(Some(left.max(Duration::from_millis(1))))?;
        let mut s = self.s;
        s.read(buf)
    }
}

/// Read exactly the handshake; returns what the peer sent (magic checked, version not).
pub fn read_handshake<R: Read>(s: &mut R) -> Result<Handshake, ConnError> {
    let mut buf = [0u8; HANDSHAKE_LEN];
    let mut have = 0;
    while have < HANDSHAKE_LEN {
        let n = s.read(&mut buf[have..])?;
        if n == 0 {
            if have == 0 {
                return Err(ConnError::Closed);
            }
            // Report what we got: non-bloatlab peers usually send a short banner.
            return Err(Handshake::decode(&buf[..have]).err().map(ConnError::Wire).unwrap_or(ConnError::Closed));
        }
        have += n;
        // Fail fast on a wrong magic, without waiting for 12 bytes.
        if let Err(e @ WireError::BadMagic(_)) = Handshake::decode(&buf[..have]) {
            return Err(e.into());
        }
    }
    Ok(Handshake::decode(&buf)?)
}

pub fn write_handshake(s: &mut TcpStream, h: Handshake) -> Result<(), ConnError> {
    s.write_all(&h.encode())?;
    Ok(())
}

pub fn send<T: Serialize>(s: &mut TcpStream, msg: &T) -> Result<(), ConnError> {
    s.write_all(&wire::encode_frame(msg))?;
    Ok(())
}

/// Read one frame of at most `max` bytes. Memory grows with the bytes that
/// arrive, not with the length the header announces.
pub fn recv<T: DeserializeOwned>(s: &mut impl Read, max: usize) -> Result<T, ConnError> {
    let mut hdr = [0u8; 4];
    s.read_exact(&mut hdr)?;
    let len = wire::frame_len(hdr, max)?;
    let mut full = Vec::with_capacity(4 + len.min(4096));
    full.extend_from_slice(&hdr);
    if Read::take(&mut *s, len as u64).read_to_end(&mut full)? < len {
        return Err(ConnError::Closed);
    }
    match wire::decode_frame::<T>(&full, max)? {
        Some((m, _)) => Ok(m),
        None => Err(ConnError::Closed),
    }
}

pub fn set_timeout(s: &TcpStream, t: Option<Duration>) {
    let _ = s.set_read_timeout(t);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::TcpListener;

    #[test]
    fn past_its_deadline_a_read_takes_only_what_already_arrived() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        let past = Instant::now() - Duration::from_secs(1);
        let mut buf = [0u8; 8];
        // Nothing there: timed out at once, not blocked.
        let t0 = Instant::now();
        let e = Deadline::new(&s, past).read(&mut buf).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::TimedOut);
        assert!(t0.elapsed() < Duration::from_millis(500));
        // Bytes sent in time are still read, and the socket blocks again afterwards.
        c.write_all(b"hello").unwrap();
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(Deadline::new(&s, past).read(&mut buf).unwrap(), 5);
        assert_eq!(&buf[..5], b"hello");
        s.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
        let e = (&s).read(&mut buf).unwrap_err();
        assert!(matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut), "{e:?}");
        // Before the deadline a read waits for data.
        let w = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            c.write_all(b"x").unwrap();
            c
        });
        assert_eq!(Deadline::new(&s, Instant::now() + Duration::from_secs(5)).read(&mut buf).unwrap(), 1);
        drop(w.join());
    }
}
