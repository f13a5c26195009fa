//! A hyper connection driven within its limits: the first request must
//! come within [`Limits::first_request`], a connection with no request in
//! progress is closed [`Limits::idle`] after its last one ended, and none
//! lives longer than [`Limits::lifetime`]; each is closed gracefully (2 s
//! for hyper to finish) and the reason returned for the log. [`serve`]
//! builds the connection (HTTP/1.1, or HTTP/2 and HTTP/1.1 with HTTP/2's
//! bounds) and drives it; [`read_body`] reads a request's body within a
//! bound.
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A response body of every service (the RPM endpoints, the browser test).
pub type Body = http_body_util::combinators::BoxBody<bytes::Bytes, std::convert::Infallible>;

/// Requests a service does not answer itself go here: the RPM service's
/// paths outside its endpoints go to the browser test's pages and
/// endpoints, served on the same HTTPS port.
pub trait Fallback: Send + Sync + 'static {
    fn handle(&self, req: hyper::Request<hyper::body::Incoming>, conn: ConnInfo) -> Pin<Box<dyn Future<Output = hyper::Response<Body>> + Send>>;
}

/// The connection a request came in on.
pub struct ConnInfo {
    pub peer: std::net::SocketAddr,
    pub local: std::net::SocketAddr,
    /// A second handle on the connection's socket (TCP_INFO, pacing).
    pub sock: Option<socket2::Socket>,
    pub https: bool,
    /// Keeps the connection's quota permit while it is held: a request that
    /// takes the connection over (a WebSocket upgrade) holds it for as long
    /// as it lives.
    pub hold: Arc<dyn std::any::Any + Send + Sync>,
    /// Keeps the request counted as in progress while it is held (so the
    /// connection is not closed as idle under a WebSocket it was upgraded to).
    pub busy: Arc<dyn std::any::Any + Send + Sync>,
}

/// The host a client used (h2 `:authority`, HTTP/1.1 `Host`), if it is a
/// plain host[:port]; used in the configuration's URLs.
pub fn request_host(req: &hyper::Request<hyper::body::Incoming>) -> Option<String> {
    let h = req
        .uri()
        .authority()
        .map(|a| a.as_str().to_string())
        .or_else(|| req.headers().get(hyper::header::HOST).and_then(|v| v.to_str().ok()).map(str::to_string))?;
    let ok = !h.is_empty() && h.len() <= 255 && h.chars().all(|c| c.is_ascii_alphanumeric() || ".-:[]".contains(c));
    ok.then_some(h)
}

/// A connection's bounds.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The first request must have begun within this.
    pub first_request: Duration,
    /// Closed this long after its last request ended, none in progress.
    pub idle: Duration,
    /// Closed after this, whatever it is doing.
    pub lifetime: Duration,
}

/// Requests on one connection: how many began, how many are in progress,
/// when the last one ended. The service marks each request with
/// [`Activity::begin`] and holds the mark until its response has been sent.
#[derive(Debug)]
pub struct Activity {
    t0: Instant,
    requests: AtomicU64,
    active: AtomicU32,
    /// ms since `t0` at the last request's beginning or end
    last_ms: AtomicU64,
}

impl Default for Activity {
    fn default() -> Activity {
        Activity { t0: Instant::now(), requests: AtomicU64::new(0), active: AtomicU32::new(0), last_ms: AtomicU64::new(0) }
    }
}

/// A request in progress; dropping it ends it.
#[derive(Debug)]
pub struct InRequest(Arc<Activity>);

impl Activity {
    pub fn new() -> Arc<Activity> {
        Arc::new(Activity::default())
    }

    /// A request begins.
    pub fn begin(self: &Arc<Self>) -> InRequest {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.active.fetch_add(1, Ordering::Relaxed);
        self.touch();
        InRequest(self.clone())
    }

    /// Requests begun so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Since the connection began.
    pub fn elapsed(&self) -> Duration {
        self.t0.elapsed()
    }

    fn touch(&self) {
        self.last_ms.store(self.t0.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    /// Why the connection should close now under `limits`, if it should.
    fn expired(&self, limits: &Limits) -> Option<Ended> {
        if self.active.load(Ordering::Relaxed) > 0 {
            return None;
        }
        let quiet = (self.t0.elapsed().as_millis() as u64).saturating_sub(self.last_ms.load(Ordering::Relaxed));
        match self.requests() {
            0 if quiet >= limits.first_request.as_millis() as u64 => Some(Ended::NoRequest(limits.first_request)),
            n if n > 0 && quiet >= limits.idle.as_millis() as u64 => Some(Ended::Idle(limits.idle)),
            _ => None,
        }
    }
}

impl Drop for InRequest {
    fn drop(&mut self) {
        self.0.touch();
        self.0.active.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Why a connection ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    Closed,
    Error(String),
    NoRequest(Duration),
    Idle(Duration),
    Lifetime(Duration),
}

impl std::fmt::Display for Ended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ended::Closed => write!(f, "closed by the client"),
            Ended::Error(e) => write!(f, "connection error: {e}"),
            Ended::NoRequest(d) => write!(f, "no request within {}", secs_or_ms(*d)),
            Ended::Idle(d) => write!(f, "idle {} after its last request", secs_or_ms(*d)),
            Ended::Lifetime(d) => write!(f, "open longer than --max-duration + --idle-timeout ({} s)", d.as_secs()),
        }
    }
}

fn secs_or_ms(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

/// A hyper connection that can be asked to finish gracefully.
pub trait Graceful {
    fn graceful(self: Pin<&mut Self>);
}

impl<I, S> Graceful for hyper::server::conn::http1::UpgradeableConnection<I, S>
where
    S: hyper::service::HttpService<hyper::body::Incoming>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    S::ResBody: hyper::body::Body + 'static,
    <S::ResBody as hyper::body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    fn graceful(self: Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}

impl<I, S> Graceful for hyper::server::conn::http1::Connection<I, S>
where
    S: hyper::service::HttpService<hyper::body::Incoming>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    I: hyper::rt::Read + hyper::rt::Write + Unpin,
    S::ResBody: hyper::body::Body + 'static,
    <S::ResBody as hyper::body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    fn graceful(self: Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}

impl<I, S, E> Graceful for hyper_util::server::conn::auto::UpgradeableConnection<'_, I, S, E>
where
    S: hyper::service::HttpService<hyper::body::Incoming>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    S::ResBody: hyper::body::Body + Send + 'static,
    <S::ResBody as hyper::body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    E: hyper::rt::bounds::Http2ServerConnExec<S::Future, S::ResBody>,
{
    fn graceful(self: Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}

/// What a connection may speak.
#[derive(Debug, Clone, Copy)]
pub enum Protocols {
    /// HTTP/1.1 (with upgrades: WebSockets): the plain listeners.
    Http1,
    /// HTTP/2 or HTTP/1.1, whichever the connection opens with (after TLS,
    /// what ALPN chose), HTTP/2 within these bounds.
    Auto(H2),
}

/// HTTP/2's bounds on one connection.
#[derive(Debug, Clone, Copy)]
pub struct H2 {
    /// Streams open at once.
    pub max_streams: u32,
    /// The flow-control window granted, per stream and per connection
    /// (fixed, not adaptive).
    pub window: u32,
    /// Bytes buffered per stream towards the peer.
    pub send_buffer: usize,
    /// A PING this often; closed when one is not answered within `keepalive * 2`.
    pub keepalive: Duration,
}

/// Serve one connection with `svc` (which marks its requests in `act`)
/// until it ends or `limits` close it: request headers within
/// `limits.first_request`, keep-alive on.
pub async fn serve<I, S, B>(io: I, svc: S, protocols: Protocols, act: &Activity, limits: &Limits) -> Ended
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    S: hyper::service::Service<hyper::Request<hyper::body::Incoming>, Response = hyper::Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    use hyper_util::rt::{TokioExecutor, TokioTimer};
    match protocols {
        Protocols::Http1 => {
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.first_request)
                .keep_alive(true)
                .serve_connection(io, svc)
                .with_upgrades();
            tokio::pin!(conn);
            drive(conn, act, limits).await
        }
        Protocols::Auto(h2) => {
            let mut b = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            b.http1().timer(TokioTimer::new()).header_read_timeout(limits.first_request).keep_alive(true);
            b.http2()
                .timer(TokioTimer::new())
                .max_concurrent_streams(h2.max_streams)
                .keep_alive_interval(Some(h2.keepalive))
                .keep_alive_timeout(h2.keepalive * 2)
                .initial_stream_window_size(h2.window)
                .initial_connection_window_size(h2.window)
                .max_send_buf_size(h2.send_buffer);
            let conn = b.serve_connection_with_upgrades(io, svc);
            tokio::pin!(conn);
            drive(conn, act, limits).await
        }
    }
}

/// A request's whole body, at most `max` bytes; past that (or when the
/// body fails) the reason, naming `what` and the bound, for a 413 answer.
pub async fn read_body(body: hyper::body::Incoming, max: usize, what: &str) -> Result<bytes::Bytes, String> {
    use http_body_util::BodyExt;
    match http_body_util::Limited::new(body, max).collect().await {
        Ok(b) => Ok(b.to_bytes()),
        Err(e) => Err(format!("{what} could not be read (at most {}): {e}", size(max))),
    }
}

fn size(n: usize) -> String {
    if n >= 1 << 20 && n % (1 << 20) == 0 {
        format!("{} MiB", n >> 20)
    } else if n >= 1024 && n % 1024 == 0 {
        format!("{} KiB", n / 1024)
    } else {
        format!("{n} bytes")
    }
}

/// Drive `conn` until it ends or `limits` close it; `act` is the activity
/// its service marks.
pub async fn drive<C, E>(mut conn: Pin<&mut C>, act: &Activity, limits: &Limits) -> Ended
where
    C: Future<Output = Result<(), E>> + Graceful,
    E: std::fmt::Display,
{
    let lifetime = tokio::time::sleep(limits.lifetime);
    tokio::pin!(lifetime);
    let check = (limits.first_request.min(limits.idle) / 2).clamp(Duration::from_millis(50), Duration::from_millis(500));
    let mut tick = tokio::time::interval(check);
    let ended = loop {
        tokio::select! {
            r = conn.as_mut() => return match r {
                Ok(()) => Ended::Closed,
                Err(e) => Ended::Error(e.to_string()),
            },
            _ = &mut lifetime => break Ended::Lifetime(limits.lifetime),
            _ = tick.tick() => {
                if let Some(e) = act.expired(limits) {
                    break e;
                }
            }
        }
    };
    conn.as_mut().graceful();
    let _ = tokio::time::timeout(Duration::from_secs(2), conn.as_mut()).await;
    ended
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn activity_says_when_a_connection_has_been_quiet_too_long() {
        let limits = Limits { first_request: Duration::from_millis(40), idle: Duration::from_millis(80), lifetime: Duration::from_secs(9) };
        let a = Activity::new();
        assert_eq!(a.expired(&limits), None);
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(a.expired(&limits), Some(Ended::NoRequest(limits.first_request)));
        let r = a.begin();
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(a.expired(&limits), None, "a request in progress keeps it open");
        drop(r);
        assert_eq!(a.expired(&limits), None, "idle counts from the request's end");
        std::thread::sleep(Duration::from_millis(90));
        assert_eq!(a.expired(&limits), Some(Ended::Idle(limits.idle)));
        assert_eq!(a.requests(), 1);
        assert_eq!(Ended::Idle(Duration::from_millis(500)).to_string(), "idle 500 ms after its last request");
        assert_eq!(Ended::NoRequest(Duration::from_secs(5)).to_string(), "no request within 5 s");
    }

    #[test]
    fn a_body_bound_is_said_in_the_unit_it_was_set_in() {
        assert_eq!(size(4 << 20), "4 MiB");
        assert_eq!(size(64 * 1024), "64 KiB");
        assert_eq!(size(1000), "1000 bytes");
    }
}
