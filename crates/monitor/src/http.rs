//! `--metrics ADDR:PORT`: the monitor's HTTP listener (hyper, HTTP/1.1):
//! `GET /metrics` is the exposition, anything else a 404 that says what is
//! served. Bounded for a port that may face a network: at most
//! [`MAX_CONNS`] connections at once (more are closed at once), 5 s to send
//! the request's headers, 30 s per connection.
use crate::metrics::Exposition;
use bytes::Bytes;
use http_body_util::Full;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

pub const MAX_CONNS: usize = 32;
const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
const CONN_LIFETIME: Duration = Duration::from_secs(30);
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

fn answer(exp: &Exposition, req: &Request<hyper::body::Incoming>) -> Response<Full<Bytes>> {
    let mut r = match (req.method(), req.uri().path()) {
        (&Method::GET, "/metrics") => {
            let mut r = Response::new(Full::new(Bytes::from(exp.encode())));
            r.headers_mut().insert(hyper::header::CONTENT_TYPE, CONTENT_TYPE.parse().unwrap());
            return r;
        }
        (_, "/metrics") => Response::new(Full::new(Bytes::from_static(b"only GET /metrics\n"))),
        _ => Response::new(Full::new(Bytes::from_static(b"bloatlab monitor serves GET /metrics (OpenMetrics text)\n"))),
    };
    *r.status_mut() = if req.uri().path() == "/metrics" { StatusCode::METHOD_NOT_ALLOWED } else { StatusCode::NOT_FOUND };
    r
}

/// Listen on `addr` and serve the exposition from a thread of its own;
/// the address bound (a port 0 becomes the one chosen).
pub fn serve(addr: SocketAddr, exp: Arc<Exposition>) -> Result<SocketAddr, String> {
    let l = std::net::TcpListener::bind(addr).map_err(|e| format!("--metrics {addr}: {e}"))?;
    l.set_nonblocking(true).map_err(|e| format!("--metrics {addr}: {e}"))?;
    let local = l.local_addr().map_err(|e| format!("--metrics {addr}: {e}"))?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| format!("--metrics: {e}"))?;
    std::thread::Builder::new()
        .name("metrics".into())
        .spawn(move || {
            rt.block_on(async move {
                let Ok(l) = tokio::net::TcpListener::from_std(l) else { return };
                let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNS));
                loop {
                    let Ok((sock, _)) = l.accept().await else { continue };
                    // over the bound: closed at once
                    let Ok(permit) = slots.clone().try_acquire_owned() else { continue };
                    let exp = exp.clone();
                    tokio::spawn(async move {
                        let svc = hyper::service::service_fn(move |req| {
                            let r = answer(&exp, &req);
                            async move { Ok::<_, Infallible>(r) }
                        });
                        let conn = hyper::server::conn::http1::Builder::new()
                            .timer(TokioTimer::new())
                            .header_read_timeout(HEADER_TIMEOUT)
                            .serve_connection(TokioIo::new(sock), svc);
                        let _ = tokio::time::timeout(CONN_LIFETIME, conn).await;
                        drop(permit);
                    });
                }
            })
        })
        .map_err(|e| format!("--metrics: {e}"))?;
    Ok(local)
}
