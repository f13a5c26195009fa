//! The plain-HTTP listener (HTTP/1.1): every connection takes a unit of the
//! server's connection quota (total and per source) before any work, must
//! send its request headers within 5 s, lives at most --max-duration +
//! --idle-timeout and is closed after --idle-timeout without a request in
//! progress. A refused connection is closed at once; the log says why.
use crate::{Web, route};
use bloatlab_engine::server::{watch_peer, HELLO_DEADLINE};
use bloatlab_rpm::server::ConnInfo;
use hyper_util::rt::{TokioIo, TokioTimer};
use socket2::SockRef;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;

pub(crate) async fn accept_loop(l: TcpListener, web: Arc<Web>) {
    loop {
        let (tcp, peer) = match l.accept().await {
            Ok(x) => x,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let permit = match web.conns.take(peer.ip()) {
            Ok(p) => p,
            Err(f) => {
                web.log_refusal(peer, bloatlab_rpm::server::full_reason(f, "connections"));
                continue;
            }
        };
        let w = web.clone();
        tokio::spawn(async move {
            let hold: Arc<dyn std::any::Any + Send + Sync> = Arc::new(permit);
            serve(tcp, peer, w, hold).await;
        });
    }
}

/// Requests in progress on a connection, and when the last one ended.
struct Activity {
    active: AtomicU32,
    last_ms: AtomicU64,
    t0: Instant,
}

struct InProgress(Arc<Activity>);

impl Drop for InProgress {
    fn drop(&mut self) {
        self.0.last_ms.store(self.0.t0.elapsed().as_millis() as u64, Ordering::Relaxed);
        self.0.active.fetch_sub(1, Ordering::Relaxed);
    }
}

async fn serve(tcp: tokio::net::TcpStream, peer: std::net::SocketAddr, web: Arc<Web>, hold: Arc<dyn std::any::Any + Send + Sync>) {
    let _ = tcp.set_nodelay(true);
    watch_peer(&SockRef::from(&tcp));
    let local = tcp.local_addr().unwrap_or(peer);
    let sock = SockRef::from(&tcp).try_clone().ok();
    let act = Arc::new(Activity { active: AtomicU32::new(0), last_ms: AtomicU64::new(0), t0: Instant::now() });
    let svc = {
        let (web, act, hold) = (web.clone(), act.clone(), hold.clone());
        let sock = sock.as_ref().and_then(|s| s.try_clone().ok());
        hyper::service::service_fn(move |req| {
            let (web, act, hold) = (web.clone(), act.clone(), hold.clone());
            let sock = sock.as_ref().and_then(|s| s.try_clone().ok());
            async move {
                act.active.fetch_add(1, Ordering::Relaxed);
                let guard = Arc::new(InProgress(act.clone()));
                let conn = ConnInfo { peer, local, sock, https: false, hold, busy: guard.clone() };
                let res = route(&web, req, conn).await;
                // a streamed body keeps the request in progress until it has
                // been sent (one of known length goes at once, with its length)
                let (parts, body) = res.into_parts();
                if hyper::body::Body::size_hint(&body).exact().is_some() {
                    return Ok::<_, Infallible>(hyper::Response::from_parts(parts, body));
                }
                let body = http_body_util::BodyExt::map_frame(body, move |f| {
                    let _ = &guard;
                    f
                });
                Ok::<_, Infallible>(hyper::Response::from_parts(parts, http_body_util::BodyExt::boxed(body)))
            }
        })
    };
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HELLO_DEADLINE)
        .keep_alive(true)
        .serve_connection(TokioIo::new(tcp), svc)
        .with_upgrades();
    tokio::pin!(conn);
    let lifetime = tokio::time::sleep(web.cfg.max_duration + web.cfg.idle_timeout);
    tokio::pin!(lifetime);
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    let idle_ms = web.cfg.idle_timeout.as_millis() as u64;
    loop {
        tokio::select! {
            _ = conn.as_mut() => break,
            _ = &mut lifetime => {
                conn.as_mut().graceful_shutdown();
                let _ = tokio::time::timeout(Duration::from_secs(2), conn.as_mut()).await;
                break;
            }
            _ = tick.tick() => {
                let now = act.t0.elapsed().as_millis() as u64;
                if act.active.load(Ordering::Relaxed) == 0 && now.saturating_sub(act.last_ms.load(Ordering::Relaxed)) >= idle_ms {
                    conn.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(Duration::from_secs(2), conn.as_mut()).await;
                    break;
                }
            }
        }
    }
    drop(hold);
}
