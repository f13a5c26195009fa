//! UDP load flows at a target rate (`--udp`, iperf3's `-u -b`): a paced
//! sender of sequence-numbered datagrams and a receiver that counts them.
//! Both ends use this code; the flow's TCP join connection stays open as
//! its control, the datagrams use a UDP socket the server opens per flow.
use crate::flow::Gate;
use bloatlab_host::clock;
use bloatlab_metrics::udp::UdpReceiver;
use bloatlab_wire::{UdpDatagram, UdpParams, UdpReceipt, UDP_HELLO_SEQ, UDP_RECEIPT_SEQ};
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

/// Which end of a flow a receiver is, and so what it tells the sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Receiving {
    /// A download's client on a connected socket: it says hello (a datagram
    /// with the hello sequence number) until data arrives, so the server
    /// learns where to send.
    Download,
    /// An upload's server: every [`RECEIPT_EVERY`] it sends the newest
    /// sender a receipt of the payload bytes received so far, which the
    /// client's live lines show (it has no other view of what arrived).
    Upload,
}

/// How often an upload's receiver sends a receipt.
pub const RECEIPT_EVERY: Duration = Duration::from_millis(100);

/// Receive the flow's datagrams until `stop`, counting payload bytes into `counter`.
pub fn receive(sock: &UdpSocket, flow_id: u32, counter: &AtomicU64, stop: &AtomicBool, role: Receiving) -> UdpReceiver {
    let _ = sock.set_read_timeout(Some(Duration::from_millis(50)));
    let mut rx = UdpReceiver::new();
    let mut buf = vec![0u8; 65536];
    let mut hello_buf = [0u8; bloatlab_wire::UDP_HEADER];
    let mut last_sent = 0u64;
    let mut sender: Option<SocketAddr> = None;
    let every = RECEIPT_EVERY.as_nanos() as u64;
    while !stop.load(Ordering::Relaxed) {
        let now = clock::now_ns();
        match role {
            Receiving::Download if rx.received() == 0 && now.saturating_sub(last_sent) > 100_000_000 => {
                let h = UdpDatagram { flow_id, seq: UDP_HELLO_SEQ, send_ns: now };
                if h.encode(&mut hello_buf).is_ok() {
                    let _ = sock.send(&hello_buf);
                }
                last_sent = now;
            }
            Receiving::Upload if now.saturating_sub(last_sent) >= every => {
                if let Some(to) = sender {
                    let r = UdpReceipt { flow_id, send_ns: now, received_bytes: rx.bytes() };
                    let _ = sock.send_to(&r.encode(), to);
                }
                last_sent = now;
            }
            _ => {}
        }
        let (n, from) = match sock.recv_from(&mut buf) {
            Ok(x) => x,
            Err(_) => continue, // timeout (or an ICMP error): look at stop, say hello or send a receipt
        };
        let t = clock::now_ns();
        match UdpDatagram::decode(&buf[..n]) {
            Ok(d) if d.flow_id == flow_id && d.seq < UDP_RECEIPT_SEQ => {
                rx.on_datagram(d.seq, d.send_ns, t, n);
                counter.store(rx.bytes(), Ordering::Relaxed);
                sender = Some(from);
            }
            _ => {} // not this flow's data: ignored
        }
    }
    rx
}

/// An upload's sender side: read the receiver's receipts from `sock` (a
/// clone of the sending socket) until `stop`, keeping the newest count in
/// `received` (the bytes the server has received, for live lines).
pub fn read_receipts(sock: &UdpSocket, flow_id: u32, received: &AtomicU64, stop: &AtomicBool) {
    let _ = sock.set_read_timeout(Some(Duration::from_millis(100)));
    let mut buf = [0u8; 2048];
    while !stop.load(Ordering::Relaxed) {
        if let Ok(n) = sock.recv(&mut buf) {
            if let Ok(r) = UdpReceipt::decode(&buf[..n]) {
                if r.flow_id == flow_id {
                    received.fetch_max(r.received_bytes, Ordering::Relaxed);
                }
            }
        }
    }
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
        let rx = std::thread::spawn(move || receive(&rx_sock, 3, &c2, &s2, Receiving::Upload));
        // the sender learns from receipts what arrived
        let (rs, s4, got) = (tx_sock.try_clone().unwrap(), stop.clone(), Arc::new(AtomicU64::new(0)));
        let g2 = got.clone();
        let receipts = std::thread::spawn(move || read_receipts(&rs, 3, &g2, &s4));
        let p = UdpParams { rate_bps: 20_000_000, payload: 1000 };
        let (s3, t0) = (stop.clone(), std::time::Instant::now());
        let tx = std::thread::spawn(move || send_paced(&tx_sock, 3, p, &s3));
        std::thread::sleep(Duration::from_millis(500));
        let receipted = got.load(Ordering::Relaxed);
        let received = counter.load(Ordering::Relaxed);
        assert!(receipted > 0 && receipted <= received, "receipts said {receipted} of {received} bytes");
        assert!(receipted as f64 >= received as f64 - 20e6 / 8.0 * 0.3, "a receipt is at most ~100 ms old: {receipted} of {received}");
        stop.store(true, Ordering::SeqCst);
        receipts.join().unwrap();
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
