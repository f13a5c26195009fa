//! The RPM service of `bloatlab server`: HTTPS (ALPN h2, then http/1.1) on
//! its own port of every address the server binds, serving
//! `/.well-known/nq` (and `/config`), a 1-byte `/small`, an endless
//! `/large` and an upload sink `/slurp`, identity encoding only.
//!
//! Bounded like the bloatlab protocol (docs/server.md): a connection takes a
//! unit of the server's connection quota (total and per source) before any
//! work, the TLS handshake must finish within 5 s, a connection lives at
//! most --max-duration + --idle-timeout, must send its first request within
//! 5 s and is closed 500 ms after its last request ended, a download or upload stream ends at
//! --max-duration, HTTP/2 allows 32 streams at once. With a shared secret the
//! endpoints live under a path derived from it (`wire::rpm_path_prefix`).
//! One JSON log line per connection and per refusal.
use crate::nq::{self, NqConfig};
use bloatlab_serve::http::{Activity, InRequest, Limits, Protocols, H2};
use bloatlab_serve::tls::{HandshakeEnd, TlsGate};
use bloatlab_serve::{watch_peer, Log, Permit, Quota, HELLO_DEADLINE};
use bloatlab_model::{RpmServe, ServerConfig};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full as FullBody, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::json;
use socket2::SockRef;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpStream;

/// HTTP/2 streams one connection may have open at once.
pub const MAX_STREAMS: u32 = 32;
/// TLS handshakes in progress at once (the serving stack's fair slots).
pub use bloatlab_serve::tls::MAX_TLS_HANDSHAKING;
/// A connection that has served its requests and has none in progress is
/// closed after this long: clients open a fresh connection per foreign probe
/// (the draft's method), and some (goresponsiveness) keep every one of them
/// open until the test ends, which would fill the per-source quota within
/// two seconds at 100 probes per second.
pub const IDLE_AFTER_REQUEST: Duration = Duration::from_millis(500);
/// Unsent bytes a connection's socket may hold (TCP_NOTSENT_LOWAT): a small
/// response on a loaded HTTP/2 connection then waits behind this much, not
/// behind the socket's autotuned megabytes (responsiveness servers are
/// expected to keep this buffer small; goserver offers the same option).
pub const NOTSENT_LOWAT: i32 = 16 * 1024;
/// The HTTP/2 flow-control window a receiver grants, per stream and per
/// connection (fixed: an adaptive window grows with the queue it causes).
/// It bounds the data in flight towards a receiver, and so the queue an
/// upload's probe waits behind at the endpoints: at most this many bytes at
/// the connection's rate (1 MiB at 300 Mbit/s is 28 ms). It also caps one
/// connection at window / RTT (1 MiB at 50 ms is 168 Mbit/s); the method
/// adds connections until the path is full. Go's HTTP/2 server (goserver)
/// grants the same by default.
pub const H2_WINDOW: u32 = 1 << 20;
/// Data an HTTP/2 stream may hold ready to send (hyper's default: 1 MiB).
/// A load stream yields chunks only while its socket has room
/// ([`crate::pace`]); this keeps HTTP/2 from pulling more ahead of it, so
/// the connection's buffers hold a few ms of its rate at most. Measured on
/// loopback: 9.9 Gbit/s with it, 9.3-11.7 without.
pub const H2_SEND_BUFFER: usize = 16 * 1024;
/// The bytes the large object's chunks are cut from.
static FILL: [u8; crate::pace::MAX_CHUNK] = [b'x'; crate::pace::MAX_CHUNK];

use bloatlab_serve::http::{Body, ConnInfo, Fallback};

/// A running RPM service (its runtime lives as long as the process).
pub struct RpmServer {
    pub addrs: Vec<SocketAddr>,
    /// SHA-256 of the certificate it presents.
    pub fingerprint: String,
    /// The path prefix of the endpoints ("" for an open server).
    pub prefix: String,
    pub self_signed: bool,
    shared: Arc<Shared>,
}

struct Shared {
    log: Arc<Log>,
    max_duration: Duration,
    idle_timeout: Duration,
    prefix: String,
    public_name: Option<String>,
    conns: Arc<Quota>,
    tls: TlsGate,
    open: AtomicU32,
    served: AtomicU64,
    /// Where requests for other paths go.
    fallback: Option<Arc<dyn Fallback>>,
}

impl RpmServer {
    /// Bind `rpm.port` on every address of `cfg.binds` and serve on the
    /// process's runtime (`bloatlab_serve::runtime`); `conns` is the bloatlab server's
    /// connection quota, so both services share its limits.
    /// `fallback` answers every other path (the browser test).
    pub fn start(cfg: &ServerConfig, rpm: &RpmServe, conns: Arc<Quota>, fallback: Option<Arc<dyn Fallback>>) -> Result<RpmServer, String> {
        rpm.validate()?;
        let (tls, fingerprint) = bloatlab_serve::tls::server_config(&rpm.tls)?;
        let log = Log::new(cfg.quiet, "rpm_refused");
        let prefix = cfg.secret.as_ref().map(bloatlab_wire::rpm_path_prefix).unwrap_or_default();
        let mut std_listeners = vec![];
        for b in &cfg.binds {
            let addr = SocketAddr::new(b.ip(), rpm.port);
            let l = bloatlab_serve::listener(addr).map_err(|e| format!("RPM service: cannot listen on {addr}: {e}"))?;
            std_listeners.push(l);
        }
        let addrs: Vec<SocketAddr> = std_listeners.iter().filter_map(|l| l.local_addr().ok()).collect();
        let shared = Arc::new(Shared {
            log: log.clone(),
            max_duration: cfg.max_duration,
            idle_timeout: cfg.idle_timeout,
            prefix: prefix.clone(),
            public_name: rpm.public_name.clone(),
            conns,
            tls: TlsGate::new(tls, log),
            open: AtomicU32::new(0),
            served: AtomicU64::new(0),
            fallback,
        });
        let sh = shared.clone();
        bloatlab_serve::accept::serve_all(std_listeners, shared.conns.clone(), shared.log.clone(), move |tcp, peer, permit| admit(tcp, peer, permit, &sh))
            .map_err(|e| format!("RPM service: {e}"))?;
        Ok(RpmServer { addrs, fingerprint, prefix, self_signed: matches!(rpm.tls, bloatlab_model::RpmTls::SelfSigned { .. }), shared })
    }

    /// Connections open now.
    pub fn open_connections(&self) -> u32 {
        self.shared.open.load(Ordering::Relaxed)
    }

    /// Connections served since start.
    pub fn connections_served(&self) -> u64 {
        self.shared.served.load(Ordering::Relaxed)
    }

    /// The configuration URL for a client that reaches this server as `host`.
    pub fn config_url(&self, host: &str, port: u16) -> String {
        format!("https://{}:{port}{}{}", bracket(host), self.prefix, nq::WELL_KNOWN)
    }
}

fn bracket(host: &str) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_string()
    }
}

fn log(sh: &Shared, event: &str, fields: serde_json::Value) {
    sh.log.event(event, fields);
}

/// Admission after the connection quota: a TLS handshake slot
/// (`bloatlab_serve::tls`), then the connection's future.
fn admit(tcp: TcpStream, peer: SocketAddr, permit: Permit, sh: &Arc<Shared>) -> Result<impl std::future::Future<Output = ()> + Send + 'static, String> {
    let hs = sh.tls.admit(peer)?;
    let sh = sh.clone();
    Ok(async move {
        let _open = Open::new(&sh);
        // shared with a request that takes the connection over (a WebSocket)
        let hold: Arc<dyn std::any::Any + Send + Sync> = Arc::new(permit);
        serve_conn(tcp, peer, hs, &sh, hold).await
    })
}

/// A connection being served, counted in `open` until its task ends or is
/// aborted; then counted as served.
struct Open(Arc<Shared>);

impl Open {
    fn new(sh: &Arc<Shared>) -> Open {
        sh.open.fetch_add(1, Ordering::Relaxed);
        Open(sh.clone())
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
        self.0.served.fetch_add(1, Ordering::Relaxed);
    }
}

/// Per-connection counters, for the idle check and the log line.
struct ConnStats {
    /// Requests begun, in progress, the last one's end.
    act: Arc<Activity>,
    bytes_down: AtomicU64,
    bytes_up: AtomicU64,
    /// The connection's socket, for pacing its load streams ([`crate::pace`]).
    sock: Option<socket2::Socket>,
    /// The connection's quota permit and its addresses (for the fallback).
    hold: Option<Arc<dyn std::any::Any + Send + Sync>>,
    peer: Option<SocketAddr>,
    local: Option<SocketAddr>,
}

/// Marks a request in progress for as long as it lives (the body streams
/// hold one until they end or are dropped).
struct Active {
    st: Arc<ConnStats>,
    _req: InRequest,
}

impl Active {
    fn new(st: &Arc<ConnStats>) -> Active {
        Active { st: st.clone(), _req: st.act.begin() }
    }
}

async fn serve_conn(tcp: TcpStream, peer: SocketAddr, hs: bloatlab_serve::tls::Handshake, sh: &Arc<Shared>, hold: Arc<dyn std::any::Any + Send + Sync>) {
    let local = tcp.local_addr().ok();
    let _ = tcp.set_nodelay(true);
    let _ = bloatlab_engine::sys::set_notsent_lowat(&tcp, NOTSENT_LOWAT);
    watch_peer(&SockRef::from(&tcp));
    let act = Activity::new();
    // a second handle on the socket: the load streams pace themselves by its TCP_INFO
    let sock = SockRef::from(&tcp).try_clone().ok();
    let tls = match hs.run(tcp).await {
        Ok(s) => s,
        Err(HandshakeEnd::Failed(e)) => {
            // The peer's doing (a scanner, a client that gave up): not a refusal.
            log(sh, "rpm_connection", json!({"client": peer.to_string(), "ended": format!("TLS handshake failed: {e}")}));
            return;
        }
        // refusals, logged by the gate
        Err(HandshakeEnd::Deadline | HandshakeEnd::Cut) => return,
    };
    let alpn = bloatlab_serve::tls::alpn(&tls);
    let st = Arc::new(ConnStats { act: act.clone(), sock, hold: Some(hold), peer: Some(peer), local, bytes_down: AtomicU64::new(0), bytes_up: AtomicU64::new(0) });
    let svc = {
        let (sh, st) = (sh.clone(), st.clone());
        hyper::service::service_fn(move |req| {
            let (sh, st) = (sh.clone(), st.clone());
            async move { Ok::<_, Infallible>(handle(req, &sh, &st).await) }
        })
    };
    let limits = Limits { first_request: HELLO_DEADLINE, idle: IDLE_AFTER_REQUEST.min(sh.idle_timeout), lifetime: sh.max_duration + sh.idle_timeout };
    let h2 = H2 { max_streams: MAX_STREAMS, window: H2_WINDOW, send_buffer: H2_SEND_BUFFER, keepalive: Duration::from_secs(10) };
    let ended = bloatlab_serve::http::serve(TokioIo::new(tls), svc, Protocols::Auto(h2), &act, &limits).await;
    log(
        sh,
        "rpm_connection",
        json!({
            "client": peer.to_string(),
            "protocol": alpn,
            "requests": act.requests(),
            "bytes_down": st.bytes_down.load(Ordering::Relaxed),
            "bytes_up": st.bytes_up.load(Ordering::Relaxed),
            "seconds": (act.elapsed().as_secs_f64() * 1000.0).round() / 1000.0,
            "ended": ended.to_string(),
        }),
    );
}

fn text(status: StatusCode, msg: String) -> Response<Body> {
    let mut r = Response::new(FullBody::new(Bytes::from(msg + "\n")).boxed());
    *r.status_mut() = status;
    r.headers_mut().insert(hyper::header::CONTENT_TYPE, "text/plain; charset=utf-8".parse().unwrap());
    r
}

use bloatlab_serve::http::request_host;

async fn handle(req: Request<Incoming>, sh: &Arc<Shared>, st: &Arc<ConnStats>) -> Response<Body> {
    let active = Active::new(st);
    let full_path = req.uri().path().to_string();
    let path = if sh.prefix.is_empty() {
        full_path.as_str()
    } else {
        match full_path.strip_prefix(sh.prefix.as_str()) {
            Some(p) if p.starts_with('/') => p,
            _ if sh.fallback.is_some() => return fall_back(req, sh, st, active).await,
            _ => {
                return text(
                    StatusCode::FORBIDDEN,
                    "this server requires its shared secret: the RPM endpoints are under a path derived from it \
                     (bloatlab rpm --secret-file FILE, or the URL `bloatlab server` printed)"
                        .into(),
                )
            }
        }
    };
    let method = req.method().clone();
    let get = method == Method::GET || method == Method::HEAD;
    match path {
        nq::WELL_KNOWN | nq::LEGACY_CONFIG if get => {
            let host = sh.public_name.clone().or_else(|| request_host(&req)).unwrap_or_else(|| "localhost".into());
            let doc = NqConfig::for_base(&format!("https://{host}{}", sh.prefix));
            let mut r = Response::new(FullBody::new(Bytes::from(serde_json::to_vec_pretty(&doc).unwrap())).boxed());
            r.headers_mut().insert(hyper::header::CONTENT_TYPE, "application/json".parse().unwrap());
            r.headers_mut().insert(hyper::header::CACHE_CONTROL, "no-store".parse().unwrap());
            r
        }
        nq::SMALL if get => {
            st.bytes_down.fetch_add(1, Ordering::Relaxed);
            let mut r = Response::new(FullBody::new(Bytes::from_static(b"x")).boxed());
            r.headers_mut().insert(hyper::header::CONTENT_TYPE, "application/octet-stream".parse().unwrap());
            r.headers_mut().insert(hyper::header::CACHE_CONTROL, "no-store".parse().unwrap());
            r
        }
        nq::LARGE if get => {
            let body = if method == Method::HEAD {
                Empty::new().boxed()
            } else {
                // Endless until --max-duration; the client ends it by
                // resetting the stream or closing the connection.
                // Paced: the connection's buffers hold at most a few ms of
                // its rate, so a self probe's answer does not wait behind them.
                let deadline = Instant::now() + sh.max_duration;
                let pacer = crate::pace::Pacer::new(st.sock.as_ref().and_then(|s| s.try_clone().ok()));
                let state = (active, deadline, pacer);
                let stream = futures_util::stream::unfold(state, |(active, deadline, mut pacer)| async move {
                    let n = pacer.next_chunk().await;
                    if Instant::now() >= deadline {
                        return None;
                    }
                    active.st.bytes_down.fetch_add(n as u64, Ordering::Relaxed);
                    Some((Ok::<_, Infallible>(Frame::data(Bytes::from_static(&FILL[..n]))), (active, deadline, pacer)))
                });
                StreamBody::new(stream).boxed()
            };
            let mut r = Response::new(body);
            r.headers_mut().insert(hyper::header::CONTENT_TYPE, "application/octet-stream".parse().unwrap());
            r.headers_mut().insert(hyper::header::CACHE_CONTROL, "no-store".parse().unwrap());
            r
        }
        nq::UPLOAD if method == Method::POST || method == Method::PUT => {
            let deadline = tokio::time::Instant::now() + sh.max_duration;
            let mut body = req.into_body();
            let mut total = 0u64;
            let ended = loop {
                match tokio::time::timeout_at(deadline, body.frame()).await {
                    Ok(Some(Ok(f))) => {
                        if let Some(d) = f.data_ref() {
                            total += d.len() as u64;
                            st.bytes_up.fetch_add(d.len() as u64, Ordering::Relaxed);
                        }
                    }
                    Ok(None) => break "complete".to_string(),
                    Ok(Some(Err(e))) => break format!("the upload failed: {e}"),
                    Err(_) => break format!("cut at --max-duration ({} s)", sh.max_duration.as_secs_f64()),
                }
            };
            drop(active);
            // Cut or not, over HTTP/1.1 or HTTP/2, the answer is the same: 200
            // and the byte count. A cut request is answered while the client
            // still sends (RFC 9113 8.1: HTTP/2 then resets the stream with
            // NO_ERROR; HTTP/1.1 closes the connection after the answer).
            let answer = json!({"bytes": total, "ended": ended}).to_string();
            let mut r = Response::new(FullBody::new(Bytes::from(answer)).boxed());
            r.headers_mut().insert(hyper::header::CONTENT_TYPE, "application/json".parse().unwrap());
            r
        }
        nq::WELL_KNOWN | nq::LEGACY_CONFIG | nq::SMALL | nq::LARGE | nq::UPLOAD => {
            let allowed = if path == nq::UPLOAD { "POST, PUT" } else { "GET, HEAD" };
            let mut r = text(StatusCode::METHOD_NOT_ALLOWED, format!("{path} takes {allowed}, not {method}"));
            r.headers_mut().insert(hyper::header::ALLOW, allowed.parse().unwrap());
            r
        }
        _ if sh.fallback.is_some() => fall_back(req, sh, st, active).await,
        _ => text(
            StatusCode::NOT_FOUND,
            format!(
                "{full_path}: not here. This is a responsiveness (RPM) server: {}{} lists its endpoints ({} {} {})",
                sh.prefix,
                nq::WELL_KNOWN,
                nq::SMALL,
                nq::LARGE,
                nq::UPLOAD
            ),
        ),
    }
}

/// A request for the fallback: its response body keeps the request counted
/// as in progress (so an idle connection is not closed under a download).
async fn fall_back(req: Request<Incoming>, sh: &Arc<Shared>, st: &Arc<ConnStats>, active: Active) -> Response<Body> {
    let Some(fb) = sh.fallback.clone() else {
        return text(StatusCode::NOT_FOUND, "not here".into());
    };
    let active = Arc::new(active);
    let conn = ConnInfo {
        peer: st.peer.unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0))),
        local: st.local.unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0))),
        sock: st.sock.as_ref().and_then(|s| s.try_clone().ok()),
        https: true,
        hold: st.hold.clone().unwrap_or_else(|| Arc::new(())),
        busy: active.clone(),
    };
    let res = fb.handle(req, conn).await;
    let (parts, body) = res.into_parts();
    if hyper::body::Body::size_hint(&body).exact().is_some() {
        return Response::from_parts(parts, body);
    }
    let body = body.map_frame(move |f| {
        let _ = &active;
        f
    });
    Response::from_parts(parts, body.boxed())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bloatlab_model::RpmTls;

    /// An endless upload cut at --max-duration gets the same answer over
    /// HTTP/1.1 and HTTP/2: 200, the bytes received and why it ended.
    #[test]
    fn a_cut_upload_is_answered_alike_over_http1_and_http2() {
        let cfg = ServerConfig { binds: vec!["127.0.0.1:0".parse().unwrap()], max_duration: Duration::from_secs(1), quiet: true, ..Default::default() };
        let rpm = RpmServe { port: 0, public_name: None, tls: RpmTls::SelfSigned { names: vec!["127.0.0.1".into()] } };
        let srv = RpmServer::start(&cfg, &rpm, Quota::new(100, 100), None).unwrap();
        let addr = srv.addrs[0];
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        for h2 in [false, true] {
            let answer: serde_json::Value = rt.block_on(async {
                let mut tls = (*crate::tls::client_config(true, None, None).unwrap()).clone();
                tls.alpn_protocols = vec![if h2 { crate::tls::ALPN_H2.to_vec() } else { crate::tls::ALPN_H1.to_vec() }];
                let tcp = TcpStream::connect(addr).await.unwrap();
                let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
                let io = TokioIo::new(tokio_rustls::TlsConnector::from(Arc::new(tls)).connect(name, tcp).await.unwrap());
                // an endless body: 64 KiB chunks every 5 ms (~100 Mbit/s)
                let chunks = futures_util::stream::unfold((), |_| async {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    Some((Ok::<_, Infallible>(Frame::data(Bytes::from_static(&FILL))), ()))
                });
                let req = Request::post(format!("https://127.0.0.1{}", nq::UPLOAD)).body(BodyExt::boxed(StreamBody::new(chunks))).unwrap();
                let res = if h2 {
                    let (mut send, conn) = hyper::client::conn::http2::handshake(hyper_util::rt::TokioExecutor::new(), io).await.unwrap();
                    tokio::spawn(conn);
                    send.send_request(req).await.unwrap()
                } else {
                    let (mut send, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
                    tokio::spawn(conn);
                    send.send_request(req).await.unwrap()
                };
                assert_eq!(res.status(), StatusCode::OK, "h2={h2}");
                let body = res.into_body().collect().await.unwrap().to_bytes();
                serde_json::from_slice(&body).unwrap()
            });
            assert!(answer["bytes"].as_u64().unwrap() > 1_000_000, "h2={h2}: {answer}");
            assert_eq!(answer["ended"], "cut at --max-duration (1 s)", "h2={h2}: {answer}");
        }
    }
}
