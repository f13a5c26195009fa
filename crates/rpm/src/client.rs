//! `bloatlab rpm URL`: responsiveness under working conditions as
//! draft-ietf-ippm-responsiveness-08 defines it.
//!
//! Per stage (download, upload, or both at once): one load-generating
//! connection (HTTP/2 over TLS, an endless GET of the large object or an
//! endless POST to the upload sink) is added every interval while the
//! aggregate goodput is not yet stable, up to the maximum; probe rounds run
//! the whole time, each a foreign probe (a fresh connection: TCP handshake,
//! TLS handshake, GET of the small object) and a self probe (GET of the
//! small object on a load-generating connection). The stage ends when goodput
//! and responsiveness are both stable (high confidence) or at its time limit
//! (low confidence); its RPM uses the probes of the last MAD intervals.
use crate::nq::{Endpoints, NqConfig};
use crate::tls;
use bloatlab_metrics::{ProbeRtts, Stability};
use bloatlab_model::{RpmConfig, RpmDirection};
use bloatlab_results::{RpmIdle, RpmInterval, RpmMethod, RpmProbe, RpmResult, RpmStage, RpmTlsInfo};
use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Empty, StreamBody};
use hyper::body::Frame;
use hyper::{Method, Request, StatusCode, Uri};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use rustls::pki_types::ServerName;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio_rustls::TlsConnector;

type Body = BoxBody<Bytes, Infallible>;

/// A connection attempt (TCP or TLS) or a probe's request gives up after this.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(10);
/// Probe rounds in flight at once; a round due while this many are still
/// running is not started (and counted as failed). Each holds a fresh
/// connection, so with a loaded queue (a lost SYN waits a 1 s timeout) the
/// rounds pile up: this many, plus two directions of `--max-connections`
/// (at most 16 each by default), stays within a bloatlab server's default
/// 160 connections per source, which would otherwise refuse a load
/// connection and end the run (seen through a 10-packet FIFO).
pub const MAX_ROUNDS_IN_FLIGHT: u32 = 100;
static FILL: [u8; crate::pace::MAX_CHUNK] = [b'x'; crate::pace::MAX_CHUNK];

pub const SPECIFICATION: &str = "draft-ietf-ippm-responsiveness-08";
pub const FORMULA: &str =
    "RPM = 60000 / (1/6 (TM(tcp_foreign) + TM(tls_foreign) + TM(http_foreign)) + 1/2 TM(http_self)), TM = 95% single-sided trimmed mean (slowest 5% dropped), ms";

/// Where to connect and how to speak TLS.
#[derive(Clone)]
struct Target {
    addr: SocketAddr,
    authority: String,
    server_name: ServerName<'static>,
    tls: Arc<rustls::ClientConfig>,
}

struct Opened {
    sender: hyper::client::conn::http2::SendRequest<Body>,
    /// A second handle on the TCP socket, for TCP_INFO.
    sock: Option<socket2::Socket>,
    driver: JoinHandle<()>,
    tcp_ms: f64,
    tls_ms: f64,
    /// Packets retransmitted during the TCP and TLS handshakes.
    handshake_retransmits: u32,
    info: RpmTlsInfo,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// How the server's certificate is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verified {
    /// Against the CA store (and --ca-file).
    Ca,
    /// By its SHA-256 (--pin-sha256).
    Pinned,
    /// Not at all (--insecure).
    No,
}

/// A failed TLS handshake, said so a user can act on it: a certificate no
/// CA here vouches for (a self-signed server) names the two ways through.
fn tls_error(authority: &str, e: &str) -> String {
    let untrusted = ["UnknownIssuer", "invalid peer certificate", "NotValidForName", "Expired"].iter().any(|k| e.contains(k));
    if untrusted {
        format!(
            "TLS with {authority}: the server's certificate is not one this machine trusts ({e}); for a self-signed \
             server (bloatlab server makes one) pin it with --pin-sha256 HEX, the SHA-256 the server prints at start, \
             or skip verification with --insecure"
        )
    } else {
        format!("TLS with {authority}: {e}")
    }
}

/// TCP connect, TLS handshake (each timed), then HTTP/2.
async fn open(t: &Target, verified: Verified) -> Result<Opened, String> {
    let a = Instant::now();
    let tcp = tokio::time::timeout(PROBE_TIMEOUT, TcpStream::connect(t.addr))
        .await
        .map_err(|_| format!("no TCP connection to {} within {} s", t.addr, PROBE_TIMEOUT.as_secs()))?
        .map_err(|e| format!("cannot connect to {}: {e}", t.addr))?;
    let tcp_ms = ms(a.elapsed());
    let _ = tcp.set_nodelay(true);
    // As the server does: an upload's self probe waits behind at most this
    // much of the connection's own unsent data.
    let _ = bloatlab_engine::sys::set_notsent_lowat(&tcp, crate::server::NOTSENT_LOWAT);
    let sock = socket2::SockRef::from(&tcp).try_clone().ok();
    let b = Instant::now();
    let tls = tokio::time::timeout(PROBE_TIMEOUT, TlsConnector::from(t.tls.clone()).connect(t.server_name.clone(), tcp))
        .await
        .map_err(|_| format!("no TLS handshake with {} within {} s", t.addr, PROBE_TIMEOUT.as_secs()))?
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof || e.kind() == std::io::ErrorKind::ConnectionReset {
                // What a server's admission control does before any TLS:
                // there is no channel yet to say why.
                format!("{} closed the connection before the TLS handshake ({e}): the server may be refusing this address (a connection limit; its log says why)", t.authority)
            } else {
                tls_error(&t.authority, &e.to_string())
            }
        })?;
    let tls_ms = ms(b.elapsed());
    let handshake_retransmits = sock.as_ref().and_then(|s| bloatlab_engine::sys::tcp_info(s, 0, bloatlab_results::Side::Client)).map_or(0, |i| i.total_retrans);
    let c = tls.get_ref().1;
    if c.alpn_protocol() != Some(tls::ALPN_H2) {
        return Err(format!(
            "{} does not speak HTTP/2 (ALPN {}): self probes share the load-generating connections, which needs HTTP/2",
            t.authority,
            c.alpn_protocol().map(|p| String::from_utf8_lossy(p).into_owned()).unwrap_or_else(|| "none".into())
        ));
    }
    let info = RpmTlsInfo {
        version: c.protocol_version().map(|v| format!("{v:?}")).unwrap_or_default(),
        cipher: c.negotiated_cipher_suite().map(|s| format!("{:?}", s.suite())).unwrap_or_default(),
        certificate_sha256: c.peer_certificates().and_then(|v| v.first()).map(tls::fingerprint).unwrap_or_default(),
        verified: verified != Verified::No,
        pinned: verified == Verified::Pinned,
    };
    let (sender, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .timer(TokioTimer::new())
        // As the server: a fixed window bounds what waits at this end.
        .initial_stream_window_size(crate::server::H2_WINDOW)
        .initial_connection_window_size(crate::server::H2_WINDOW)
        .max_send_buf_size(crate::server::H2_SEND_BUFFER)
        .keep_alive_interval(Duration::from_secs(10))
        .keep_alive_timeout(Duration::from_secs(20))
        .handshake(TokioIo::new(tls))
        .await
        .map_err(|e| format!("HTTP/2 with {}: {e}", t.authority))?;
    let driver = tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(Opened { sender, sock, driver, tcp_ms, tls_ms, handshake_retransmits, info })
}

fn request(method: Method, url: &str, body: Body) -> Result<Request<Body>, String> {
    Request::builder()
        .method(method)
        .uri(url)
        .header(hyper::header::USER_AGENT, concat!("bloatlab/", env!("CARGO_PKG_VERSION")))
        .header(hyper::header::ACCEPT_ENCODING, "identity")
        .body(body)
        .map_err(|e| format!("{url}: {e}"))
}

/// GET `url` and read the whole body; the time from sending to the last byte.
async fn fetch(sender: &mut hyper::client::conn::http2::SendRequest<Body>, url: &str) -> Result<(f64, Bytes), String> {
    let t = Instant::now();
    let fut = async {
        sender.ready().await.map_err(|e| format!("{url}: {e}"))?;
        let resp = sender.send_request(request(Method::GET, url, Empty::new().boxed())?).await.map_err(|e| format!("{url}: {e}"))?;
        let status = resp.status();
        let body = resp.into_body().collect().await.map_err(|e| format!("{url}: {e}"))?.to_bytes();
        if status != StatusCode::OK {
            return Err(format!("{url}: HTTP {status}: {}", String::from_utf8_lossy(&body[..body.len().min(300)]).trim()));
        }
        Ok(body)
    };
    let body = tokio::time::timeout(PROBE_TIMEOUT, fut).await.map_err(|_| format!("{url}: no answer within {} s", PROBE_TIMEOUT.as_secs()))??;
    Ok((ms(t.elapsed()), body))
}

/// One load-generating connection.
struct Load {
    sender: hyper::client::conn::http2::SendRequest<Body>,
    tasks: Vec<JoinHandle<()>>,
}

/// The upload connections' sockets and what their peer held when each load
/// started, registered as soon as a connection is up: upload goodput is
/// what the server's TCP received (acknowledged, cumulatively or selectively:
/// `sys::tcp_bytes_delivered`; TLS and HTTP/2 framing included, about
/// 0.2%), not what was handed to the stack.
#[derive(Default)]
struct Uploads(Mutex<Vec<(socket2::Socket, u64)>>);

impl Uploads {
    fn total(&self) -> u64 {
        self.0.lock().unwrap().iter().map(|(s, base)| bytes_delivered(s).saturating_sub(*base)).sum()
    }
}

fn bytes_delivered(s: &socket2::Socket) -> u64 {
    bloatlab_engine::sys::tcp_bytes_delivered(s).unwrap_or(0)
}



impl Drop for Load {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

async fn start_load(
    t: Target,
    ep: Endpoints,
    download: bool,
    counter: Arc<AtomicU64>,
    uploads: Arc<Uploads>,
    failed: Arc<AtomicBool>,
    verified: Verified,
) -> Result<Load, String> {
    let o = open(&t, verified).await?;
    // an upload paces itself by its socket's TCP_INFO (crate::pace)
    let pacer = crate::pace::Pacer::new(if download { None } else { o.sock.as_ref().and_then(|s| s.try_clone().ok()) });
    if let (false, Some(sock)) = (download, o.sock) {
        let base = bytes_delivered(&sock);
        uploads.0.lock().unwrap().push((sock, base));
    }
    let mut sender = o.sender.clone();
    let url = if download { ep.large.clone() } else { ep.upload.clone() };
    let work = tokio::spawn(async move {
        let r: Result<(), String> = async {
            sender.ready().await.map_err(|e| e.to_string())?;
            if download {
                let resp = sender.send_request(request(Method::GET, &url, Empty::new().boxed())?).await.map_err(|e| e.to_string())?;
                if resp.status() != StatusCode::OK {
                    return Err(format!("{url}: HTTP {}", resp.status()));
                }
                let mut body = resp.into_body();
                while let Some(f) = body.frame().await {
                    let f = f.map_err(|e| e.to_string())?;
                    if let Some(d) = f.data_ref() {
                        counter.fetch_add(d.len() as u64, Ordering::Relaxed);
                    }
                }
            } else {
                let stream = futures_util::stream::unfold(pacer, |mut pacer| async move {
                    let n = pacer.next_chunk().await;
                    Some((Ok::<_, Infallible>(Frame::data(Bytes::from_static(&FILL[..n]))), pacer))
                });
                let resp = sender.send_request(request(Method::POST, &url, StreamBody::new(stream).boxed())?).await.map_err(|e| e.to_string())?;
                if resp.status() != StatusCode::OK {
                    return Err(format!("{url}: HTTP {}", resp.status()));
                }
            }
            Ok(())
        }
        .await;
        if r.is_err() {
            failed.store(true, Ordering::Relaxed);
        }
    });
    Ok(Load { sender: o.sender, tasks: vec![o.driver, work] })
}

/// Probe samples of a stage, with their start times.
#[derive(Default)]
struct Probes {
    samples: Vec<RpmProbe>,
    /// When each sample's round completed, seconds from the stage's start.
    done_s: Vec<f64>,
    failed: u32,
    errors: Vec<String>,
    /// Foreign probes completed, and how many of them had a handshake
    /// packet retransmitted.
    foreign: u32,
    retransmitted: u32,
    /// Why additional load-generating connections could not be opened.
    open_failed: Vec<String>,
    /// Start times of the rounds whose foreign probe failed.
    foreign_failed_s: Vec<f64>,
}

/// One probe round: a foreign probe on a fresh connection and a self probe
/// on a load-generating connection, at once.
async fn probe_round(
    t: Target,
    small: String,
    self_sender: Option<hyper::client::conn::http2::SendRequest<Body>>,
    stage_start: Instant,
    out: Arc<Mutex<Probes>>,
    verified: Verified,
) {
    let t_s = stage_start.elapsed().as_secs_f64();
    let foreign = async {
        let mut o = open(&t, verified).await?;
        let (http_ms, body) = fetch(&mut o.sender, &small).await?;
        o.driver.abort();
        if body.len() != 1 {
            return Err(format!("{small}: the small object has {} bytes, not 1", body.len()));
        }
        Ok::<_, String>((o.tcp_ms, o.tls_ms, http_ms, o.handshake_retransmits))
    };
    let selfp = async {
        match self_sender {
            Some(mut s) => fetch(&mut s, &small).await.map(|(m, _)| Some(m)),
            None => Ok(None),
        }
    };
    let (f, s) = tokio::join!(foreign, selfp);
    let done = stage_start.elapsed().as_secs_f64();
    let mut got: Vec<(&str, f64)> = vec![];
    let mut errs: Vec<String> = vec![];
    match f {
        Ok((tcp, tl, http, retrans)) => {
            got.extend([("tcp_foreign", tcp), ("tls_foreign", tl), ("http_foreign", http)]);
            let mut p = out.lock().unwrap();
            p.foreign += 1;
            p.retransmitted += u32::from(retrans > 0);
        }
        Err(e) => {
            out.lock().unwrap().foreign_failed_s.push(t_s);
            errs.push(e);
        }
    }
    match s {
        Ok(Some(m)) => got.push(("http_self", m)),
        Ok(None) => {}
        Err(e) => errs.push(e),
    }
    let mut p = out.lock().unwrap();
    for (kind, rtt_ms) in got {
        p.samples.push(RpmProbe { t_s, kind: kind.into(), rtt_ms });
        p.done_s.push(done);
    }
    p.failed += errs.len() as u32;
    for e in errs {
        if p.errors.len() < 5 {
            p.errors.push(e);
        }
    }
}

/// The samples whose time (`at`: each one's start or completion) is in [from_s, to_s).
fn rtts(samples: &[RpmProbe], at: &[f64], from_s: f64, to_s: f64) -> ProbeRtts {
    let mut r = ProbeRtts::default();
    for (p, _) in samples.iter().zip(at).filter(|(_, &t)| t >= from_s && t < to_s) {
        match p.kind.as_str() {
            "tcp_foreign" => r.tcp_foreign_ms.push(p.rtt_ms),
            "tls_foreign" => r.tls_foreign_ms.push(p.rtt_ms),
            "http_foreign" => r.http_foreign_ms.push(p.rtt_ms),
            _ => r.http_self_ms.push(p.rtt_ms),
        }
    }
    r
}

/// Where a stage stands at the end of one interval.
#[derive(Debug, Clone, PartialEq)]
pub struct StageProgress {
    pub direction: RpmDirection,
    /// Seconds since the stage started, and the most it may take.
    pub t_s: f64,
    pub max_s: f64,
    /// The interval's aggregate goodput and its moving average, bits/s.
    pub goodput_bps: f64,
    pub moving_average_bps: f64,
    pub connections: u32,
    /// The interval's responsiveness, once a probe round completed.
    pub rpm: Option<f64>,
}

impl StageProgress {
    /// One line for a terminal.
    pub fn line(&self) -> String {
        format!(
            "{:>13} {:>5.1} s  {:>12} (avg {:>12})  {:>2} conn  {}",
            self.direction.name(),
            self.t_s,
            bloatlab_model::fmt::rate(self.goodput_bps),
            bloatlab_model::fmt::rate(self.moving_average_bps),
            self.connections,
            self.rpm.map(|r| format!("{} RPM", bloatlab_model::fmt::int3(r))).unwrap_or_else(|| "no complete probe round yet".into())
        )
    }
}

/// Called once per interval of every stage.
pub type Progress<'a> = &'a (dyn Fn(&StageProgress) + Sync);

/// One stage's load and probes while it runs: the load-generating
/// connections (open and opening), the probe rounds in flight, and what
/// they counted.
struct StageRun<'a> {
    cfg: &'a RpmConfig,
    t: &'a Target,
    ep: &'a Endpoints,
    verified: Verified,
    start: Instant,
    /// Per connection added: downloads (true) and/or uploads (false).
    kinds: Vec<bool>,
    counter: Arc<AtomicU64>,
    uploads: Arc<Uploads>,
    failed: Arc<AtomicBool>,
    probes: Arc<Mutex<Probes>>,
    in_flight: Arc<AtomicU32>,
    loads: Vec<Load>,
    /// Connections being opened: the interval clock does not wait for their
    /// handshakes (through a bloated queue they take seconds).
    pending: Vec<JoinHandle<Result<Load, String>>>,
    rounds: Vec<JoinHandle<()>>,
    round_no: usize,
    next_round: Instant,
}

impl<'a> StageRun<'a> {
    /// Open the first load-generating connection(s).
    async fn open(cfg: &'a RpmConfig, t: &'a Target, ep: &'a Endpoints, dir: RpmDirection, verified: Verified) -> Result<StageRun<'a>, String> {
        let kinds: Vec<bool> = match dir {
            RpmDirection::Download => vec![true],
            RpmDirection::Upload => vec![false],
            RpmDirection::Bidirectional => vec![true, false],
        };
        let start = Instant::now();
        let mut s = StageRun {
            cfg,
            t,
            ep,
            verified,
            start,
            kinds,
            counter: Arc::new(AtomicU64::new(0)),
            uploads: Arc::new(Uploads::default()),
            failed: Arc::new(AtomicBool::new(false)),
            probes: Arc::new(Mutex::new(Probes::default())),
            in_flight: Arc::new(AtomicU32::new(0)),
            loads: vec![],
            pending: vec![],
            rounds: vec![],
            round_no: 0,
            next_round: start,
        };
        for k in s.kinds.clone() {
            let l = start_load(t.clone(), ep.clone(), k, s.counter.clone(), s.uploads.clone(), s.failed.clone(), verified).await?;
            s.loads.push(l);
        }
        Ok(s)
    }

    /// Load-generating connections open, per direction loaded.
    fn connections(&self) -> u32 {
        (self.loads.len() / self.kinds.len()) as u32
    }

    /// Start one more connection per direction (up to MNP) unless some are still opening.
    fn add_connections(&mut self) {
        if !self.pending.is_empty() || self.connections() >= self.cfg.max_connections {
            return;
        }
        for &k in &self.kinds {
            let (t, ep, c, u, f) = (self.t.clone(), self.ep.clone(), self.counter.clone(), self.uploads.clone(), self.failed.clone());
            self.pending.push(tokio::spawn(start_load(t, ep, k, c, u, f, self.verified)));
        }
    }

    /// Connections whose handshakes finished join the load.
    async fn adopt_opened(&mut self) -> Result<(), String> {
        for h in std::mem::take(&mut self.pending) {
            if h.is_finished() {
                // One more connection that could not be opened (through a
                // full small queue a handshake can outlast the server's 5 s)
                // does not end the stage: it goes on with those it has and
                // tries again at the next interval; the result says so.
                match h.await.map_err(|e| e.to_string()).and_then(|r| r) {
                    Ok(l) => self.loads.push(l),
                    Err(e) => self.probes.lock().unwrap().open_failed.push(e),
                }
            } else {
                self.pending.push(h);
            }
        }
        Ok(())
    }

    /// Probe rounds at the configured rate until `until`, each a foreign
    /// probe and a self probe on the next load-generating connection.
    async fn probe_until(&mut self, until: Instant) {
        let round_every = Duration::from_secs_f64(1.0 / self.cfg.probes_per_second as f64);
        while self.next_round < until {
            tokio::time::sleep_until(self.next_round.into()).await;
            self.next_round += round_every;
            if self.in_flight.load(Ordering::Relaxed) >= MAX_ROUNDS_IN_FLIGHT {
                self.probes.lock().unwrap().failed += 1;
                continue;
            }
            let self_sender = if self.loads.is_empty() { None } else { Some(self.loads[self.round_no % self.loads.len()].sender.clone()) };
            self.round_no += 1;
            let (tt, small, out, fl, start, verified) = (self.t.clone(), self.ep.small.clone(), self.probes.clone(), self.in_flight.clone(), self.start, self.verified);
            fl.fetch_add(1, Ordering::Relaxed);
            self.rounds.push(tokio::spawn(async move {
                probe_round(tt, small, self_sender, start, out, verified).await;
                fl.fetch_sub(1, Ordering::Relaxed);
            }));
            self.rounds.retain(|h| !h.is_finished());
        }
    }

    /// Bytes the load carried so far (both directions).
    fn bytes(&self) -> u64 {
        self.counter.load(Ordering::Relaxed) + self.uploads.total()
    }

    /// The responsiveness of the probe rounds that completed in [from_s, end_s).
    fn interval_rpm(&self, from_s: f64, end_s: f64) -> Option<f64> {
        let p = self.probes.lock().unwrap();
        rtts(&p.samples, &p.done_s, from_s, end_s).responsiveness().map(|r| r.rpm)
    }

    /// End the stage: stop opening connections, let the rounds still running
    /// finish under the same load (a slow probe dropped now would make the
    /// result look better than the network is), close the load. Returns the
    /// connections used and the probes (a round still running after the
    /// wait counts as failed, not as absent).
    async fn finish(mut self) -> (u32, Probes) {
        for h in self.pending.drain(..) {
            h.abort();
        }
        let wait_until = Instant::now() + PROBE_TIMEOUT + Duration::from_secs(1);
        let mut unfinished = 0u32;
        for mut h in std::mem::take(&mut self.rounds) {
            let left = wait_until.saturating_duration_since(Instant::now());
            if tokio::time::timeout(left, &mut h).await.is_err() {
                h.abort();
                unfinished += 1;
            }
        }
        let connections = self.connections();
        self.loads.clear();
        self.uploads.0.lock().unwrap().clear();
        let mut p = std::mem::take(&mut *self.probes.lock().unwrap());
        p.failed += unfinished;
        (connections, p)
    }
}

/// One stage of the draft's method: add load-generating connections until
/// goodput is stable, probe throughout, and stop once goodput and
/// responsiveness are both stable (or at the stage's time limit).
async fn stage(cfg: &RpmConfig, t: &Target, ep: &Endpoints, dir: RpmDirection, verified: Verified, progress: Progress<'_>, run_start: Instant) -> Result<RpmStage, String> {
    let mut run = StageRun::open(cfg, t, ep, dir, verified).await?;
    let start = run.start;
    let id = cfg.interval;
    let mut goodput = Stability::new(cfg.mad as usize, cfg.sdt);
    let mut resp = Stability::new(cfg.mad as usize, cfg.sdt);
    let mut intervals: Vec<RpmInterval> = vec![];
    let (mut last_bytes, mut last_tick, mut next_tick) = (0u64, start, start + id);
    let stable = loop {
        run.probe_until(next_tick).await;
        tokio::time::sleep_until(next_tick.into()).await;
        next_tick += id;
        if run.failed.load(Ordering::Relaxed) {
            return Err(format!("a load-generating connection of the {} stage failed (the server closed or refused it)", dir.name()));
        }
        let (bytes, now) = (run.bytes(), Instant::now());
        let end_s = (now - start).as_secs_f64();
        let inst = bytes.saturating_sub(last_bytes) as f64 * 8.0 / (now - last_tick).as_secs_f64();
        let from_s = (last_tick - start).as_secs_f64();
        (last_bytes, last_tick) = (bytes, now);
        run.adopt_opened().await?;
        let ma = goodput.push(inst);
        let rpm = run.interval_rpm(from_s, end_s);
        if let Some(r) = rpm {
            resp.push(r);
        }
        let connections = run.connections();
        intervals.push(RpmInterval { t_s: end_s, goodput_bps: inst, moving_average_bps: ma, connections, rpm });
        progress(&StageProgress { direction: dir, t_s: end_s, max_s: cfg.max_stage.as_secs_f64(), goodput_bps: inst, moving_average_bps: ma, connections, rpm });
        if goodput.is_stable() && resp.is_stable() {
            break true;
        }
        if start.elapsed() + Duration::from_millis(1) >= cfg.max_stage {
            break false;
        }
        if !goodput.is_stable() {
            run.add_connections();
        }
    };
    let (connections, p) = run.finish().await;
    let mut st = stage_result(cfg, dir, Outcome { stable, goodput, resp, intervals, connections, duration_s: start.elapsed().as_secs_f64() }, p)?;
    st.start_s = start.saturating_duration_since(run_start).as_secs_f64();
    Ok(st)
}

/// The idle line before the stages (`cfg.idle`): probe rounds at the
/// configured rate, foreign probes only, and every round waited for.
async fn idle_stage(cfg: &RpmConfig, t: &Target, ep: &Endpoints, verified: Verified, run_start: Instant) -> Result<RpmIdle, String> {
    let out = Arc::new(Mutex::new(Probes::default()));
    let start = Instant::now();
    let every = Duration::from_secs_f64(1.0 / cfg.probes_per_second as f64);
    let mut rounds = vec![];
    let mut next = start;
    while next < start + cfg.idle {
        tokio::time::sleep_until(next.into()).await;
        next += every;
        rounds.push(tokio::spawn(probe_round(t.clone(), ep.small.clone(), None, start, out.clone(), verified)));
    }
    let duration_s = start.elapsed().as_secs_f64();
    let wait_until = Instant::now() + PROBE_TIMEOUT + Duration::from_secs(1);
    for mut h in rounds {
        if tokio::time::timeout(wait_until.saturating_duration_since(Instant::now()), &mut h).await.is_err() {
            h.abort();
        }
    }
    let p = std::mem::take(&mut *out.lock().unwrap());
    if p.samples.is_empty() {
        return Err(format!("no probe of the idle line completed: {}", p.errors.first().cloned().unwrap_or_else(|| "none was started".into())));
    }
    Ok(RpmIdle { start_s: start.saturating_duration_since(run_start).as_secs_f64(), duration_s, probes: p.samples, foreign_failed_s: p.foreign_failed_s })
}

/// How a stage's loop ended.
struct Outcome {
    stable: bool,
    goodput: Stability,
    resp: Stability,
    intervals: Vec<RpmInterval>,
    connections: u32,
    duration_s: f64,
}

/// The stage's result: the RPM of the probes of the last MAD intervals,
/// and why confidence is low when it is.
fn stage_result(cfg: &RpmConfig, dir: RpmDirection, o: Outcome, p: Probes) -> Result<RpmStage, String> {
    let end_s = o.intervals.last().map(|i| i.t_s).unwrap_or(0.0);
    let window_from = end_s - (cfg.mad as f64) * cfg.interval.as_secs_f64();
    let starts: Vec<f64> = p.samples.iter().map(|s| s.t_s).collect();
    let r = rtts(&p.samples, &starts, window_from, f64::INFINITY).responsiveness();
    if r.is_none() && p.samples.is_empty() {
        return Err(format!(
            "no probe of the {} stage completed: {}",
            dir.name(),
            p.errors.first().cloned().unwrap_or_else(|| "none was started".into())
        ));
    }
    let low_because = (!o.stable).then(|| {
        let mut parts = vec![];
        if !o.goodput.is_stable() {
            parts.push("goodput");
        }
        if !o.resp.is_stable() {
            parts.push("responsiveness");
        }
        format!("{} not stable within {} s", parts.join(" and "), cfg.max_stage.as_secs_f64())
    });
    Ok(RpmStage {
        direction: dir,
        rpm: r.map(|r| r.rpm),
        confidence: if o.stable { "high".into() } else { "low".into() },
        low_because,
        goodput_stable: o.goodput.is_stable(),
        responsiveness_stable: o.resp.is_stable(),
        goodput_bps: o.goodput.moving_average().unwrap_or(0.0),
        connections: o.connections,
        duration_s: o.duration_s,
        tcp_foreign_ms: r.map(|r| r.tcp_foreign_ms),
        tls_foreign_ms: r.map(|r| r.tls_foreign_ms),
        http_foreign_ms: r.map(|r| r.http_foreign_ms),
        http_self_ms: r.map(|r| r.http_self_ms),
        round_trip_ms: r.map(|r| r.weighted_ms),
        probes_failed: p.failed,
        handshake_retransmits: p.retransmitted,
        foreign_probes: p.foreign,
        connections_failed: p.open_failed.len() as u32,
        connection_error: p.open_failed.first().cloned(),
        intervals: o.intervals,
        probes: p.samples,
        foreign_failed_s: p.foreign_failed_s,
        start_s: 0.0,
    })
}

/// Split an https URL; an empty path or "/" means the well-known path.
fn parse_url(url: &str, secret_prefix: &str) -> Result<(Uri, String, u16, String), String> {
    let uri: Uri = url.parse().map_err(|e| format!("{url:?}: not a URL ({e})"))?;
    if uri.scheme_str() != Some("https") {
        return Err(format!("{url}: an RPM server URL is https:// (the probes time the TLS handshake)"));
    }
    let host = uri.host().ok_or_else(|| format!("{url}: no host"))?.trim_matches(|c| c == '[' || c == ']').to_string();
    let port = uri.port_u16().unwrap_or(443);
    let path = match uri.path() {
        "" | "/" => format!("{secret_prefix}{}", crate::nq::WELL_KNOWN),
        p => p.to_string(),
    };
    Ok((uri, host, port, path))
}

/// Run every stage of `cfg`; `command` is recorded in the result.
pub fn run(cfg: &RpmConfig, command: Vec<String>, progress: Progress<'_>) -> Result<RpmResult, String> {
    run_until(cfg, command, progress, &AtomicBool::new(false))
}

/// [`run`], abandoned when `stop` is set (checked every 100 ms): Err says
/// so, and every connection is closed as the runtime goes.
pub fn run_until(cfg: &RpmConfig, command: Vec<String>, progress: Progress<'_>, stop: &AtomicBool) -> Result<RpmResult, String> {
    cfg.validate()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("rpm-client")
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a runtime: {e}"))?;
    let out = rt.block_on(async {
        tokio::select! {
            r = run_async(cfg, command, progress) => r,
            _ = async {
                while !stop.load(Ordering::Relaxed) {
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
            } => Err("interrupted: stopped during the RPM test (nothing kept of it)".to_string()),
        }
    });
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    out
}

/// The server of `cfg`, reached: its configuration fetched and checked.
struct Reached {
    target: Target,
    ep: Endpoints,
    verified: Verified,
    /// The configuration connection's TLS.
    info: RpmTlsInfo,
    prefix: String,
}

/// Whether `cfg`'s URL leads to an RPM server: its configuration fetched
/// and its endpoints checked, as a test starts (no load). Err says why not.
pub fn check(cfg: &RpmConfig) -> Result<(), String> {
    cfg.validate()?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| format!("cannot start a runtime: {e}"))?;
    let r = rt.block_on(async { tokio::time::timeout(PROBE_TIMEOUT * 2, reach(cfg)).await.map_err(|_| format!("{}: no answer within {} s", cfg.url, (PROBE_TIMEOUT * 2).as_secs()))? });
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    r.map(|_| ())
}

async fn reach(cfg: &RpmConfig) -> Result<Reached, String> {
    let prefix = cfg.secret.as_ref().map(bloatlab_wire::rpm_path_prefix).unwrap_or_default();
    let (_, host, port, path) = parse_url(&cfg.url, &prefix)?;
    let tls_cfg = tls::client_config(cfg.insecure, cfg.ca_pem.as_deref(), cfg.pin_sha256.as_deref())?;
    let resolve = |h: String, p: u16| async move {
        tokio::net::lookup_host((h.as_str(), p))
            .await
            .map_err(|e| format!("cannot resolve {h}: {e}"))?
            .next()
            .ok_or_else(|| format!("{h} has no address"))
    };
    let connect_host = cfg.connect_to.clone().unwrap_or_else(|| host.clone());
    let addr = resolve(connect_host, port).await?;
    let server_name = ServerName::try_from(host.clone()).map_err(|e| format!("{host}: {e}"))?;
    let authority = if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") };
    let target = Target { addr, authority: authority.clone(), server_name, tls: tls_cfg };
    let verified = if cfg.pin_sha256.is_some() {
        Verified::Pinned
    } else if cfg.insecure {
        Verified::No
    } else {
        Verified::Ca
    };
    // The configuration, on a connection of its own.
    let config_url = format!("https://{authority}{path}");
    let mut o = open(&target, verified).await?;
    let (_, text) = fetch(&mut o.sender, &config_url).await?;
    o.driver.abort();
    let (doc, ep) = NqConfig::parse(&text, &config_url)?;
    // The endpoints must be on the server the configuration came from, or
    // on its test_endpoint: this client connects to one address.
    let mut target = target;
    if let Some(te) = doc.test_endpoint.as_deref().filter(|_| cfg.connect_to.is_none()) {
        target.addr = resolve(te.to_string(), port).await?;
    }
    for u in [&ep.small, &ep.large, &ep.upload] {
        let (_, h, p, _) = parse_url(u, "")?;
        if h != host || p != port {
            return Err(format!(
                "{config_url}: endpoint {u} is on another server ({h}:{p}); bloatlab rpm measures one server (give its configuration URL)"
            ));
        }
    }
    Ok(Reached { target, ep, verified, info: o.info, prefix })
}

async fn run_async(cfg: &RpmConfig, command: Vec<String>, progress: Progress<'_>) -> Result<RpmResult, String> {
    let Reached { target, ep, verified, info, prefix } = reach(cfg).await?;
    let start_unix_ns = bloatlab_host::clock::realtime_ns();
    let run_start = Instant::now();
    let idle = if cfg.idle.is_zero() { None } else { Some(idle_stage(cfg, &target, &ep, verified, run_start).await?) };
    let mut stages = vec![];
    for &d in &cfg.directions {
        stages.push(stage(cfg, &target, &ep, d, verified, progress, run_start).await?);
    }
    let shown_url = if prefix.is_empty() { cfg.url.clone() } else { cfg.url.replace(&prefix, "/nq-…") };
    Ok(RpmResult {
        bloatlab_version: env!("CARGO_PKG_VERSION").into(),
        start_time: bloatlab_model::units::rfc3339(start_unix_ns),
        start_unix_ns,
        command,
        url: shown_url,
        server_address: target.addr.to_string(),
        http_version: "HTTP/2".into(),
        tls: info,
        client: bloatlab_engine::sys::host_info(),
        cc: bloatlab_host::read_trim("/proc/sys/net/ipv4/tcp_congestion_control").unwrap_or_default(),
        method: RpmMethod {
            specification: SPECIFICATION.into(),
            interval_s: cfg.interval.as_secs_f64(),
            mad: cfg.mad,
            sdt: cfg.sdt,
            max_connections: cfg.max_connections,
            probes_per_second: cfg.probes_per_second,
            max_stage_s: cfg.max_stage.as_secs_f64(),
            formula: FORMULA.into(),
        },
        idle,
        stages,
    })
}

#[cfg(test)]
mod tests {

    #[test]
    fn an_untrusted_certificate_names_the_two_ways_through() {
        let e = super::tls_error("h:4043", "invalid peer certificate: UnknownIssuer");
        assert!(e.contains("UnknownIssuer") && e.contains("--pin-sha256") && e.contains("--insecure"), "{e}");
        assert_eq!(super::tls_error("h:4043", "unexpected message"), "TLS with h:4043: unexpected message");
    }
    use super::*;

    #[test]
    fn urls_default_to_the_well_known_path_and_must_be_https() {
        let (_, h, p, path) = parse_url("https://example.test:4043", "").unwrap();
        assert_eq!((h.as_str(), p, path.as_str()), ("example.test", 4043, "/.well-known/nq"));
        let (_, h, p, path) = parse_url("https://[::1]/", "/nq-ab").unwrap();
        assert_eq!((h.as_str(), p, path.as_str()), ("::1", 443, "/nq-ab/.well-known/nq"));
        let (_, _, _, path) = parse_url("https://h:1/config", "").unwrap();
        assert_eq!(path, "/config");
        assert!(parse_url("http://h/", "").unwrap_err().contains("is https://"));
        assert!(parse_url("not a url", "").is_err());
    }

    #[test]
    fn probes_are_grouped_by_kind_within_a_window() {
        let s = |t_s: f64, kind: &str, rtt_ms: f64| RpmProbe { t_s, kind: kind.into(), rtt_ms };
        let v = vec![s(0.5, "tcp_foreign", 1.0), s(1.5, "tcp_foreign", 2.0), s(1.6, "http_self", 3.0), s(2.0, "tls_foreign", 4.0)];
        let starts: Vec<f64> = v.iter().map(|p| p.t_s).collect();
        let r = rtts(&v, &starts, 1.0, 2.0);
        assert_eq!(r.tcp_foreign_ms, vec![2.0]);
        assert_eq!(r.http_self_ms, vec![3.0]);
        assert!(r.tls_foreign_ms.is_empty());
    }
}
