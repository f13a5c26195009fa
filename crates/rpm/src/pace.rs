//! Keep a load stream's data out of the endpoints' buffers: a
//! load-generating stream yields its next chunk only while its connection
//! holds less than [`AHEAD`] of its rate unsent (in HTTP/2, TLS and the
//! socket together, beyond what is in flight).
//!
//! A self probe (a small GET on a loaded connection) waits behind whatever
//! the connection's own buffers hold. Fixed buffers cost little on a fast
//! connection and a lot on a slow one: 64 KiB of TLS records is 0.4 ms at
//! 1.25 Gbit/s and 220 ms at 2.3 Mbit/s (a quarter of 10 Mbit/s), which a
//! 10 Mbit/s fq_codel link read as 166 RPM, a queue the link did not have.
//! Sized in time, at the connection's delivery rate, the endpoints add at
//! most a few milliseconds at any rate and the load still fills the path.
use std::time::Duration;

/// How much of its delivery rate a load connection may hold unsent.
pub const AHEAD: Duration = Duration::from_millis(5);
/// The least it may hold (a slow start, a stalled connection): one chunk.
pub const MIN_AHEAD: usize = 4 * 1024;
/// The most, and the largest chunk a load stream yields.
pub const MAX_CHUNK: usize = 64 * 1024;

/// Paces one load stream on one connection.
pub struct Pacer {
    sock: Option<socket2::Socket>,
    /// The TCP_NOTSENT_LOWAT last set on the socket.
    lowat: usize,
}

/// A sending socket's state, as the pacer reads it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SendState {
    /// Bytes in the socket not yet sent (tcpi_notsent_bytes).
    pub notsent: u64,
    /// The connection's delivery rate, bytes per second.
    pub rate: f64,
}

impl SendState {
    fn read(sock: &socket2::Socket) -> Option<SendState> {
        let (i, _) = bloatlab_host::sock::tcp_info(sock)?;
        Some(SendState { notsent: i.notsent_bytes as u64, rate: i.delivery_rate as f64 })
    }
}

/// What the pacer does next: yield a chunk of this many bytes, or wait.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Step {
    Chunk(usize),
    Wait(Duration),
}

/// The bytes a connection may hold unsent: [`AHEAD`] at its rate, at least
/// [`MIN_AHEAD`].
pub fn allowance(rate: f64) -> usize {
    ((rate * AHEAD.as_secs_f64()) as usize).clamp(MIN_AHEAD, MAX_CHUNK * 64)
}

/// The pacing rule, on its own for tests: a chunk goes when the socket
/// holds less than the allowance unsent; else wait about until it does.
pub fn step(s: SendState) -> Step {
    let allow = allowance(s.rate);
    let waiting = s.notsent as usize;
    if waiting < allow {
        return Step::Chunk(allow.clamp(MIN_AHEAD, MAX_CHUNK));
    }
    let excess = (waiting - allow + MIN_AHEAD) as f64;
    let secs = if s.rate > 0.0 { excess / s.rate } else { 0.005 };
    Step::Wait(Duration::from_secs_f64(secs.clamp(0.0005, 0.05)))
}

impl Pacer {
    /// A pacer on the connection's socket (a second handle, for TCP_INFO);
    /// without one, chunks of [`MAX_CHUNK`] go unpaced.
    pub fn new(sock: Option<socket2::Socket>) -> Pacer {
        Pacer { sock, lowat: 0 }
    }

    /// The next chunk's size, once the connection has room for it. The
    /// socket's TCP_NOTSENT_LOWAT follows the allowance (plus a chunk), so
    /// what the stream yields goes straight through HTTP/2 and TLS into the
    /// socket, where TCP_INFO sees it: the upper layers hold nothing.
    pub async fn next_chunk(&mut self) -> usize {
        loop {
            let Some(sock) = self.sock.as_ref() else { return MAX_CHUNK };
            let Some(s) = SendState::read(sock) else { return MAX_CHUNK };
            let lowat = allowance(s.rate) + MAX_CHUNK;
            if lowat.abs_diff(self.lowat) * 4 > self.lowat {
                let _ = bloatlab_engine::sys::set_notsent_lowat(sock, lowat as i32);
                self.lowat = lowat;
            }
            match step(s) {
                Step::Chunk(n) => return n,
                Step::Wait(d) => tokio::time::sleep(d).await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_allowance_is_time_at_the_connection_rate() {
        let at = |rate_bps: f64, notsent: u64| SendState { notsent, rate: rate_bps / 8.0 };
        // 2.3 Mbit/s: 5 ms is 1.4 kB, so the floor of 4 KiB holds
        assert_eq!(step(at(2.3e6, 0)), Step::Chunk(MIN_AHEAD));
        assert_eq!(step(at(2.3e6, 3000)), Step::Chunk(MIN_AHEAD), "3000 bytes waiting < 4096");
        match step(at(2.3e6, 14_000)) {
            // 9904 over: ~ (9904 + 4096) / 287500 B/s = 49 ms
            Step::Wait(d) => assert!(d >= Duration::from_millis(40) && d <= Duration::from_millis(50), "{d:?}"),
            s => panic!("{s:?}"),
        }
        // 10 Gbit/s: 5 ms is 6.25 MB (capped at 4 MiB): chunks of the largest size
        assert_eq!(step(at(10e9, 2_000_000)), Step::Chunk(MAX_CHUNK));
        assert_eq!(allowance(10e9 / 8.0), MAX_CHUNK * 64);
        // no rate yet (the connection's start): the floor, then short waits
        assert_eq!(step(at(0.0, 0)), Step::Chunk(MIN_AHEAD));
        assert_eq!(step(at(0.0, 10_000)), Step::Wait(Duration::from_millis(5)));
    }
}
