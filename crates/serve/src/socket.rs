//! Listening sockets and what every accepted connection gets.
use socket2::{Domain, Protocol, SockRef, Socket, TcpKeepalive, Type};
use std::net::SocketAddr;
use std::time::Duration;

/// A peer's handshake (the bloatlab protocol's, TLS's) and first message
/// must arrive, whole, within this.
pub const HELLO_DEADLINE: Duration = Duration::from_secs(5);
/// TCP keepalive: first probe after this much silence, then every
/// KEEPALIVE_INTERVAL, KEEPALIVE_RETRIES times; TCP_USER_TIMEOUT bounds how
/// long sent data may stay unacknowledged. A peer that vanished without a
/// FIN or RST is noticed by the kernel within about 30 s.
const KEEPALIVE_IDLE: Duration = Duration::from_secs(10);
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(5);
const KEEPALIVE_RETRIES: u32 = 3;
const USER_TIMEOUT: Duration = Duration::from_secs(30);
/// Connections the kernel may hold waiting for accept.
const BACKLOG: i32 = 1024;

/// A bound socket: dual stack on `[::]` (a specific v6 address: v6 only),
/// SO_REUSEADDR for TCP.
pub fn make_socket(addr: SocketAddr, ty: Type) -> std::io::Result<Socket> {
    let proto = if ty == Type::STREAM { Protocol::TCP } else { Protocol::UDP };
    let s = Socket::new(Domain::for_address(addr), ty, Some(proto))?;
    if addr.is_ipv6() {
        s.set_only_v6(!addr.ip().is_unspecified())?;
    }
    if ty == Type::STREAM {
        s.set_reuse_address(true)?;
    }
    s.bind(&addr.into())?;
    Ok(s)
}

/// A non-blocking TCP listener on `addr` (for the runtime's accept loops).
pub fn listener(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    let s = make_socket(addr, Type::STREAM)?;
    s.listen(BACKLOG)?;
    s.set_nonblocking(true)?;
    Ok(s.into())
}

/// TCP keepalive and TCP_USER_TIMEOUT on an accepted connection: a peer
/// that vanished without a FIN or RST is noticed by the kernel within about
/// 30 s.
pub fn watch_peer(sr: &SockRef) {
    let ka = TcpKeepalive::new().with_time(KEEPALIVE_IDLE).with_interval(KEEPALIVE_INTERVAL).with_retries(KEEPALIVE_RETRIES);
    let _ = sr.set_tcp_keepalive(&ka);
    let _ = sr.set_tcp_user_timeout(Some(USER_TIMEOUT));
}
