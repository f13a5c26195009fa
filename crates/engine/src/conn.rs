//! Blocking framed I/O over a TcpStream: handshake and control frames.
use bloatlab_wire::{self as wire, Handshake, WireError, HANDSHAKE_LEN};
use serde::{de::DeserializeOwned, Serialize};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

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

/// Read exactly the handshake; returns what the peer sent (magic checked, version not).
pub fn read_handshake(s: &mut TcpStream) -> Result<Handshake, ConnError> {
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

pub fn recv<T: DeserializeOwned>(s: &mut TcpStream, max: usize) -> Result<T, ConnError> {
    let mut hdr = [0u8; 4];
    s.read_exact(&mut hdr)?;
    let len = wire::frame_len(hdr, max)?;
    let mut body = vec![0u8; len];
    s.read_exact(&mut body)?;
    let mut full = Vec::with_capacity(4 + len);
    full.extend_from_slice(&hdr);
    full.extend_from_slice(&body);
    match wire::decode_frame::<T>(&full, max)? {
        Some((m, _)) => Ok(m),
        None => Err(ConnError::Closed),
    }
}

pub fn set_timeout(s: &TcpStream, t: Option<Duration>) {
    let _ = s.set_read_timeout(t);
}
