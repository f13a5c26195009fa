//! A tiny client -- router -- server topology in network namespaces for the
//! emulator's end-to-end tests and tools, plus in-process traffic helpers
//! (UDP echo/probes, a TCP bulk sender) that create their sockets inside the
//! namespaces by entering them from a helper thread.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use bloatlab_testkit::{guarded, StealMeter};

/// Serializes the end-to-end tests of one test binary (timing needs the CPU).
pub static SERIAL: Mutex<()> = Mutex::new(());

pub fn is_root() -> bool {
    bloatlab_host::is_root()
}

/// Why the environment cannot run namespace tests, if it cannot (a missing
/// root, TUN or iproute2 fails in strict mode; a starved VM is a skip).
pub fn skip_reason() -> Option<String> {
    let missing = |why: &str| bloatlab_testkit::cannot_run("emulator end-to-end test", why).then(|| why.to_string());
    if !is_root() {
        return missing("not root");
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        return missing("no /dev/net/tun");
    }
    match Command::new("ip").arg("-V").output() {
        Ok(o) if o.status.success() => {}
        _ => return missing("iproute2 (ip) not found"),
    }
    // The emulator can only keep time with the CPU it gets.
    bloatlab_testkit::starved().map(|p| format!("the hypervisor is taking {p:.0}% of this VM's CPU right now; timing checks would measure the VM"))
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(out.status.success(), "ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
}

fn ns_ip(ns: &str, args: &[&str]) {
    let mut v = vec!["-n", ns];
    v.extend_from_slice(args);
    ip(&v);
}

pub struct Topo {
    pub client: String,
    pub router: String,
    pub server: String,
    pub dir: tempfile::TempDir,
}

pub const CLIENT_V4: &str = "10.77.1.2";
pub const SERVER_V4: &str = "10.77.2.2";
pub const SERVER_V6: &str = "fd77:2::2";

impl Topo {
    /// client(c0) -- (r-cli)router(r-srv) -- (s0)server, IPv4 and IPv6.
    pub fn new() -> Topo {
        let tag = format!("{:x}", (std::process::id() as u64) << 16 ^ (Instant::now().elapsed().as_nanos() as u64 & 0xffff) ^ rand_tag());
        let p = format!("blemu-{}", &tag[tag.len().saturating_sub(6)..]);
        let t = Topo {
            client: format!("{p}-c"),
            router: format!("{p}-r"),
            server: format!("{p}-s"),
            dir: tempfile::tempdir().unwrap(),
        };
        for n in [&t.client, &t.router, &t.server] {
            ip(&["netns", "add", n]);
            ns_ip(n, &["link", "set", "lo", "up"]);
        }
        ip(&["link", "add", "c0", "netns", &t.client, "type", "veth", "peer", "name", "r-cli", "netns", &t.router]);
        ip(&["link", "add", "s0", "netns", &t.server, "type", "veth", "peer", "name", "r-srv", "netns", &t.router]);
        ns_ip(&t.client, &["addr", "add", "10.77.1.2/24", "dev", "c0"]);
        ns_ip(&t.client, &["-6", "addr", "add", "fd77:1::2/64", "dev", "c0", "nodad"]);
        ns_ip(&t.router, &["addr", "add", "10.77.1.1/24", "dev", "r-cli"]);
        ns_ip(&t.router, &["-6", "addr", "add", "fd77:1::1/64", "dev", "r-cli", "nodad"]);
        ns_ip(&t.router, &["addr", "add", "10.77.2.1/24", "dev", "r-srv"]);
        ns_ip(&t.router, &["-6", "addr", "add", "fd77:2::1/64", "dev", "r-srv", "nodad"]);
        ns_ip(&t.server, &["addr", "add", "10.77.2.2/24", "dev", "s0"]);
        ns_ip(&t.server, &["-6", "addr", "add", "fd77:2::2/64", "dev", "s0", "nodad"]);
        for (n, d) in [(&t.client, "c0"), (&t.router, "r-cli"), (&t.router, "r-srv"), (&t.server, "s0")] {
            ns_ip(n, &["link", "set", d, "up"]);
        }
        ns_ip(&t.client, &["route", "add", "default", "via", "10.77.1.1"]);
        ns_ip(&t.client, &["-6", "route", "add", "default", "via", "fd77:1::1"]);
        ns_ip(&t.server, &["route", "add", "default", "via", "10.77.2.1"]);
        ns_ip(&t.server, &["-6", "route", "add", "default", "via", "fd77:2::1"]);
        t
    }

    pub fn stats_path(&self) -> std::path::PathBuf {
        self.dir.path().join("emu.json")
    }
}

impl Drop for Topo {
    fn drop(&mut self) {
        for n in [&self.client, &self.router, &self.server] {
            let _ = Command::new("ip").args(["netns", "del", n]).output();
        }
    }
}

fn rand_tag() -> u64 {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    t.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 20
}

/// Run `f` in a thread that has entered network namespace `ns`.
pub fn in_ns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let ns = ns.to_string();
    std::thread::spawn(move || {
        bloatlab_host::netns::enter(&ns).expect("enter the namespace");
        f()
    })
    .join()
    .expect("ns thread")
}

/// A UDP echo server in namespace `ns` on `addr`; stops when the returned flag is set.
pub fn udp_echo(ns: &str, addr: &str) -> Arc<AtomicBool> {
    let a: SocketAddr = addr.parse().unwrap();
    let sock = in_ns(ns, move || UdpSocket::bind(a).expect("bind echo"));
    sock.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while !s2.load(Ordering::Relaxed) {
            if let Ok((n, from)) = sock.recv_from(&mut buf) {
                let _ = sock.send_to(&buf[..n], from);
            }
        }
    });
    stop
}

/// Probe RTT results: (send time since start, Some(rtt) or None for lost).
pub type Probes = Vec<(Duration, Option<Duration>)>;

/// Send `count` UDP probes from namespace `ns` to `dst` every `every`; each
/// probe waits for its echo up to `timeout` in a separate receiver thread.
pub fn udp_probes(ns: &str, dst: &str, count: usize, every: Duration, size: usize) -> Probes {
    let d: SocketAddr = dst.parse().unwrap();
    let bind: SocketAddr = if d.is_ipv6() { "[::]:0".parse().unwrap() } else { "0.0.0.0:0".parse().unwrap() };
    let sock = in_ns(ns, move || UdpSocket::bind(bind).expect("bind probe"));
    sock.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
    let recv = sock.try_clone().unwrap();
    let start = Instant::now();
    let results: Arc<Mutex<Vec<Option<Duration>>>> = Arc::new(Mutex::new(vec![None; count]));
    let done = Arc::new(AtomicBool::new(false));
    let (r2, d2) = (results.clone(), done.clone());
    let rx = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while !d2.load(Ordering::Relaxed) {
            if let Ok(n) = recv.recv(&mut buf) {
                if n >= 16 {
                    let seq = u64::from_be_bytes(buf[0..8].try_into().unwrap()) as usize;
                    let sent = u64::from_be_bytes(buf[8..16].try_into().unwrap());
                    let now = start.elapsed().as_nanos() as u64;
                    if seq < r2.lock().unwrap().len() {
                        r2.lock().unwrap()[seq] = Some(Duration::from_nanos(now - sent));
                    }
                }
            }
        }
    });
    let mut sends = vec![];
    let mut buf = vec![0u8; size.max(16)];
    for i in 0..count {
        let due = every * i as u32;
        let el = start.elapsed();
        if due > el {
            std::thread::sleep(due - el);
        }
        let t = start.elapsed();
        buf[0..8].copy_from_slice(&(i as u64).to_be_bytes());
        buf[8..16].copy_from_slice(&(t.as_nanos() as u64).to_be_bytes());
        sock.send_to(&buf, d).expect("send probe");
        sends.push(t);
    }
    std::thread::sleep(Duration::from_millis(1500).min(every * 10 + Duration::from_millis(1500)));
    done.store(true, Ordering::Relaxed);
    rx.join().unwrap();
    let r = results.lock().unwrap().clone();
    sends.into_iter().zip(r).collect()
}

pub fn median_ms(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.partial_cmp(b).unwrap());
    if s.is_empty() {
        return f64::NAN;
    }
    s[s.len() / 2]
}

pub fn rtts_ms(p: &Probes, from: Duration) -> Vec<f64> {
    p.iter().filter(|(t, _)| *t >= from).filter_map(|(_, r)| r.map(|d| d.as_secs_f64() * 1e3)).collect()
}

/// Bulk TCP transfer client -> server for `dur`, with congestion control `cc`.
/// Returns (receiver byte counts sampled every 100 ms, sender srtt samples in ms).
pub struct Bulk {
    pub samples: Vec<(Duration, u64)>,
    pub srtt_ms: Vec<(Duration, f64)>,
}

fn set_buf(sock: &impl std::os::fd::AsRawFd, opt: libc::c_int, bytes: usize) {
    bloatlab_host::sock::set_int(sock, libc::SOL_SOCKET, opt, bytes as i32).expect("setsockopt buffer");
}

/// `bufsize`: fixed SO_SNDBUF (sender) and SO_RCVBUF (receiver), None = autotuning.
pub fn tcp_bulk(client_ns: &str, server_ns: &str, server: &str, cc: &str, dur: Duration, bufsize: Option<usize>) -> Bulk {
    let a: SocketAddr = server.parse().unwrap();
    let listener = in_ns(server_ns, move || TcpListener::bind(a).expect("listen"));
    if let Some(b) = bufsize {
        set_buf(&listener, libc::SO_RCVBUF, b);
    }
    let received = Arc::new(AtomicU64::new(0));
    let r2 = received.clone();
    let acc = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().expect("accept");
        let mut buf = vec![0u8; 1 << 16];
        loop {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    r2.fetch_add(n as u64, Ordering::Relaxed);
                }
            }
        }
    });
    let mut stream = in_ns(client_ns, move || TcpStream::connect(a).expect("connect"));
    if let Some(b) = bufsize {
        set_buf(&stream, libc::SO_SNDBUF, b);
    }
    bloatlab_host::sock::set_tcp_congestion(&stream, cc).unwrap_or_else(|e| panic!("TCP_CONGESTION {cc}: {e}"));
    let stop = Arc::new(AtomicBool::new(false));
    let st2 = stop.clone();
    let probe = stream.try_clone().expect("a second handle on the stream");
    let writer = std::thread::spawn(move || {
        let buf = vec![0x5au8; 1 << 16];
        while !st2.load(Ordering::Relaxed) {
            if stream.write_all(&buf).is_err() {
                break;
            }
        }
        stream
    });
    let start = Instant::now();
    let mut samples = vec![];
    let mut srtt = vec![];
    while start.elapsed() < dur {
        std::thread::sleep(Duration::from_millis(100));
        samples.push((start.elapsed(), received.load(Ordering::Relaxed)));
        if let Some((info, _)) = bloatlab_host::sock::tcp_info(&probe) {
            srtt.push((start.elapsed(), info.rtt as f64 / 1e3));
        }
    }
    stop.store(true, Ordering::Relaxed);
    let _ = probe.shutdown(std::net::Shutdown::Both);
    let s = writer.join().unwrap();
    drop(s);
    let _ = acc.join();
    Bulk { samples, srtt_ms: srtt }
}

impl Bulk {
    /// Goodput in bits/s between two times.
    pub fn goodput_bps(&self, from: Duration, to: Duration) -> f64 {
        let at = |t: Duration| self.samples.iter().min_by_key(|(s, _)| s.abs_diff(t)).unwrap();
        let (t0, b0) = at(from);
        let (t1, b1) = at(to);
        (b1 - b0) as f64 * 8.0 / (*t1 - *t0).as_secs_f64()
    }
}
