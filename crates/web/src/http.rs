//! The plain-HTTP listener (HTTP/1.1), on the serving stack
//! (`bloatlab_serve`): every connection takes a unit of the server's
//! connection quota (total and per source) before any work, must send its
//! request headers within 5 s, lives at most --max-duration +
//! --idle-timeout and is closed after --idle-timeout without a request in
//! progress. A refused connection is closed at once; the log says why.
use crate::{route, Web};
use bloatlab_serve::http::ConnInfo;
use bloatlab_serve::http::{Activity, Limits, Protocols};
use bloatlab_serve::{watch_peer, HELLO_DEADLINE};
use hyper_util::rt::TokioIo;
use socket2::SockRef;
use std::convert::Infallible;
use std::sync::Arc;

pub(crate) async fn serve(tcp: tokio::net::TcpStream, peer: std::net::SocketAddr, web: Arc<Web>, hold: Arc<dyn std::any::Any + Send + Sync>) {
    let _ = tcp.set_nodelay(true);
    watch_peer(&SockRef::from(&tcp));
    let local = tcp.local_addr().unwrap_or(peer);
    let sock = SockRef::from(&tcp).try_clone().ok();
    let act = Activity::new();
    let svc = {
        let (web, act, hold) = (web.clone(), act.clone(), hold.clone());
        let sock = sock.as_ref().and_then(|s| s.try_clone().ok());
        hyper::service::service_fn(move |req| {
            let (web, act, hold) = (web.clone(), act.clone(), hold.clone());
            let sock = sock.as_ref().and_then(|s| s.try_clone().ok());
            async move {
                let guard = Arc::new(act.begin());
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
    let limits = Limits { first_request: HELLO_DEADLINE, idle: web.cfg.idle_timeout, lifetime: web.cfg.max_duration + web.cfg.idle_timeout };
    bloatlab_serve::http::serve(TokioIo::new(tcp), svc, Protocols::Http1, &act, &limits).await;
    drop(hold);
}
