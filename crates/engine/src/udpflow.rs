//! UDP load flows at a target rate (`--udp`, iperf3's `-u -b`): a paced
//! sender of sequence-numbered datagrams and a receiver that counts them.
//! Both ends use this code; the flow's TCP join connection stays open as
//! its control, the datagrams use a UDP socket the server opens per flow.
use crate::flow::Gate;
use bloatlab_host::clock;
use bloatlab_metrics::udp::UdpReceiver;
use bloatlab_wire::{UdpDatagram, UdpParams, UDP_HELLO_SEQ};
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// A UDP socket on the same address family (and, for a server, address) as `near`, port 0.
pub fn bind_near(near: SocketAddr, same_ip: bool) -> std::io::Result<UdpSocket> {
    let ip = if same_ip {
        near.ip()
    } else if near.is_ipv4() {
        std::net::Ipv4Addr::UNSPECIFIED.into()
    } else {
        std::net::Ipv6Addr::UNSPECIFIED.into()
    };
    UdpSocket::bind(SocketAddr::new(ip, 0))
}

/// Send `p.payload`-byte datagrams at `p.rate_bps` until `stop`; returns how
/// many were sent. Sleeps until shortly before each due time; after a stall
/// of over 100 ms it resumes at the rate instead of bursting to catch up.
pub fn send_paced(sock: &UdpSocket, flow_id: u32, p: UdpParams, stop: &AtomicBool) -> u64 {
    let iv = (p.payload as u64 * 8 * 1_000_000_000 / p.rate_bps.max(1)).max(1);
    let mut buf: Vec<u8> = (0..p.payload as usize).map(|i| (i as u32).wrapping_mul(2654435761).to_be_bytes()[0]).collect();
    let mut due = clock::now_ns();
    let mut seq = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let now = clock::now_ns();
        if now < due {
            let wait = due - now;
            if wait > 200_000 {
                std::thread::sleep(Duration::from_nanos(wait - 100_000));
            } else {
                std::thread::yield_now();
            }
            continue;
        }
        let d = UdpDatagram { flow_id, seq, send_ns: now };
        if d.encode(&mut buf).is_ok() && sock.send(&buf).is_ok() {
            seq += 1;
        }
        due += iv;
        if now > due + 100_000_000 {
            due = now;
        }
    }
    seq
}

/// Receive the flow's datagrams until `stop`, counting payload bytes into
/// `counter`. With `hello`, a connected socket tells the sender where to
/// send (a datagram with the hello sequence number) until data arrives.
pub fn receive(sock: &UdpSocket, flow_id: u32, counter: &AtomicU64, stop: &AtomicBool, hello: bool) -> UdpReceiver {
    let _ = sock.set_read_timeout(Some(Duration::from_millis(100)));
    let mut rx = UdpReceiver::new();
    let mut buf = vec![0u8; 65536];
    let mut hello_buf = [0u8; bloatlab_wire::UDP_HEADER];
    let mut last_hello = 0u64;
    while !stop.load(Ordering::Relaxed) {
        if hello && rx.received() == 0 && clock::now_ns().saturating_sub(last_hello) > 100_000_000 {
            let h = UdpDatagram { flow_id, seq: UDP_HELLO_SEQ, send_ns: clock::now_ns() };
            if h.encode(&mut hello_buf).is_ok() {
                let _ = sock.send(&hello_buf);
            }
            last_hello = clock::now_ns();
        }
        let n = match sock.recv(&mut buf) {
            Ok(n) => n,
            Err(_) => continue, // timeout (or an ICMP error): look at stop, say hello again
        };
        let t = clock::now_ns();
        match UdpDatagram::decode(&buf[..n]) {
            Ok(d) if d.flow_id == flow_id && d.seq != UDP_HELLO_SEQ => {
                rx.on_datagram(d.seq, d.send_ns, t, n);
                counter.store(rx.bytes(), Ordering::Relaxed);
            }
            _ => {} // not this flow's: ignored
        }
    }
    rx
}

/// The server's side of a download: wait (up to `limit`) for the client's
/// hello, connect to where it came from, then send once the gate opens.
pub fn serve_download(sock: &UdpSocket, flow_id: u32, p: UdpParams, gate: &Gate, stop: &AtomicBool, limit: Duration) -> u64 {
    let _ = sock.set_read_timeout(Some(Duration::from_millis(100)));
    let deadline = clock::now_ns() + limit.as_nanos() as u64;
    let mut buf = [0u8; 2048];
    let peer = loop {
        if stop.load(Ordering::Relaxed) || clock::now_ns() > deadline {
            return 0;
        }
        if let Ok((n, from)) = sock.recv_from(&mut buf) {
            if matches!(UdpDatagram::decode(&buf[..n]), Ok(d) if d.flow_id == flow_id && d.seq == UDP_HELLO_SEQ) {
                break from;
            }
        }
    };
    if sock.connect(peer).is_err() || !gate.wait(stop, limit) {
        return 0;
    }
    send_paced(sock, flow_id, p, stop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Loopback, 20 Mbit/s of 1000-byte datagrams for 0.5 s: about 1250
    /// datagrams, all delivered, rate within a few percent.
    #[test]
    fn paced_sender_and_receiver_on_loopback() {
        let rx_sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx_sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx_sock.connect(rx_sock.local_addr().unwrap()).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let counter = Arc::new(AtomicU64::new(0));
        let (s2, c2) = (stop.clone(), counter.clone());
        let rx = std::thread::spawn(move || receive(&rx_sock, 3, &c2, &s2, false));
        let p = UdpParams { rate_bps: 20_000_000, payload: 1000 };
        let (s3, t0) = (stop.clone(), std::time::Instant::now());
        let tx = std::thread::spawn(move || send_paced(&tx_sock, 3, p, &s3));
        std::thread::sleep(Duration::from_millis(500));
        stop.store(true, Ordering::SeqCst);
        let sent = tx.join().unwrap();
        let secs = t0.elapsed().as_secs_f64();
        let r = rx.join().unwrap();
        let rate = sent as f64 * 1000.0 * 8.0 / secs;
        assert!((rate / 20e6 - 1.0).abs() < 0.1, "sent at {rate} bit/s ({sent} in {secs} s)");
        let st = r.stats(Some(sent), 20e6, 1000);
        assert!(st.loss_pct < 5.0, "{st:?}");
        assert_eq!(counter.load(Ordering::Relaxed), st.received * 1000);
    }
}
