//! `--metrics ADDR:PORT`: the monitor's HTTP listener (hyper, HTTP/1.1, on
//! the serving stack, `bloatlab_serve`): `GET /metrics` is the exposition,
//! anything else a 404 that says what is served. Bounded for a port that
//! may face a network: at most [`MAX_CONNS`] connections at once,
//! [`MAX_CONNS_PER_SOURCE`] from one address (more are closed at once, a
//! `metrics_refused` line says why), 5 s to send the request's headers,
//! 30 s per connection.
use crate::metrics::Exposition;
use bloatlab_serve::http::{Activity, Limits, Protocols};
use bloatlab_serve::{Log, Quota};
use bytes::Bytes;
use http_body_util::Full;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

pub const MAX_CONNS: u32 = 32;
pub const MAX_CONNS_PER_SOURCE: u32 = 8;
const LIMITS: Limits = Limits { first_request: bloatlab_serve::HELLO_DEADLINE, idle: Duration::from_secs(30), lifetime: Duration::from_secs(30) };
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

/// Listen on `addr` and serve the exposition on the process's runtime;
/// the address bound (a port 0 becomes the one chosen).
pub fn serve(addr: SocketAddr, exp: Arc<Exposition>) -> Result<SocketAddr, String> {
    let l = std::net::TcpListener::bind(addr).map_err(|e| format!("--metrics {addr}: {e}"))?;
    l.set_nonblocking(true).map_err(|e| format!("--metrics {addr}: {e}"))?;
    let local = l.local_addr().map_err(|e| format!("--metrics {addr}: {e}"))?;
    let admit = move |sock: tokio::net::TcpStream, _peer: SocketAddr, permit: bloatlab_serve::Permit| {
        let exp = exp.clone();
        Ok(async move {
            let act = Activity::new();
            let svc = {
                let act = act.clone();
                hyper::service::service_fn(move |req| {
                    let _req = act.begin();
                    let r = answer(&exp, &req);
                    async move { Ok::<_, Infallible>(r) }
                })
            };
            bloatlab_serve::http::serve(TokioIo::new(sock), svc, Protocols::Http1, &act, &LIMITS).await;
            drop(permit);
        })
    };
    bloatlab_serve::accept::serve_all(vec![l], Quota::new(MAX_CONNS, MAX_CONNS_PER_SOURCE), Log::new(false, "metrics_refused"), admit).map_err(|e| format!("--metrics {addr}: {e}"))?;
    Ok(local)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpStream;

    fn get(at: SocketAddr) -> std::io::Result<String> {
        let mut s = TcpStream::connect(at)?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")?;
        let mut out = String::new();
        s.read_to_string(&mut out)?;
        Ok(out)
    }

    #[test]
    fn one_address_gets_at_most_its_share_of_connections_and_they_come_back() {
        let at = serve("127.0.0.1:0".parse().unwrap(), Arc::new(Exposition::new())).unwrap();
        assert!(get(at).unwrap().starts_with("HTTP/1.1 200"));
        let held: Vec<TcpStream> = (0..MAX_CONNS_PER_SOURCE).map(|_| TcpStream::connect(at).unwrap()).collect();
        // accepted in order: the next one is over the share, closed unanswered
        let over = get(at);
        assert!(!over.as_ref().is_ok_and(|a| a.starts_with("HTTP/1.1 200")), "{over:?}");
        drop(held);
        // the units come back as the server sees the closes
        let t0 = std::time::Instant::now();
        while !get(at).is_ok_and(|a| a.starts_with("HTTP/1.1 200")) {
            assert!(t0.elapsed() < Duration::from_secs(5), "the connections' units did not come back");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
