//! The page's load: download streams (an endless body written as fast as
//! the socket takes it, as `bloatlab test`'s server sends: the page's probes
//! have their own connection, so the load's own buffers delay nothing
//! measured; pacing the writes, as the RPM service must for its self probes,
//! would keep slow start application-limited and fill the path later than
//! the CLI does) and upload sinks (a body read and counted, answered with its
//! byte count). Each request names its test and flow; the server counts
//! the flow's bytes and samples its socket's TCP_INFO. A stream ends when
//! the page aborts it, when the test ends, or at --max-duration.
use crate::session::FlowRec;
use crate::{query, refuse, Web};
use bloatlab_results::Direction;
use bloatlab_serve::http::{Body, ConnInfo};
use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response, StatusCode};
use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

static FILL: [u8; 64 * 1024] = [b'x'; 64 * 1024];

/// The flow a load request names (`s=ID&f=N`), with its connection's socket attached.
fn flow_of(web: &Web, req: &Request<Incoming>, conn: &ConnInfo, dir: Direction) -> Result<(Arc<crate::session::Session>, Arc<FlowRec>), Response<Body>> {
    let id = query(req, "s").unwrap_or("");
    let s = web.sessions.get(id, conn.peer.ip()).map_err(|e| refuse(StatusCode::NOT_FOUND, e))?;
    let f: u32 = query(req, "f").and_then(|f| f.parse().ok()).ok_or_else(|| refuse(StatusCode::BAD_REQUEST, "f=N names the flow"))?;
    let flow = s.flow(f, dir).map_err(|e| refuse(StatusCode::FORBIDDEN, e))?;
    flow.attach(conn.sock.as_ref().and_then(|s| s.try_clone().ok()));
    Ok((s, flow))
}

/// Marks a flow as being served while it lives.
struct Serving(Arc<FlowRec>);

impl Serving {
    fn new(f: &Arc<FlowRec>) -> Serving {
        f.active.fetch_add(1, Ordering::Relaxed);
        Serving(f.clone())
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        // the flow's handle on the socket goes with its last request, so the
        // connection closes when its stream does
        if self.0.active.fetch_sub(1, Ordering::Relaxed) == 1 {
            self.0.sock.lock().unwrap().take();
        }
    }
}

/// `GET /api/down?s=ID&f=N[&bytes=B]`: endless, or (the household test's
/// stream segments) `B` bytes, at most the plan's segment size.
pub(crate) fn download(web: &Arc<Web>, req: &Request<Incoming>, conn: ConnInfo) -> Response<Body> {
    let (s, flow) = match flow_of(web, req, &conn, Direction::Down) {
        Ok(x) => x,
        Err(r) => return r,
    };
    let limit = match query(req, "bytes") {
        None => None,
        Some(b) => {
            let most = s.plan.household.map(|h| h.stream_segment_bytes).unwrap_or(0);
            match b.parse::<u64>() {
                Ok(n) if n > 0 && n <= most => Some(n),
                _ if most == 0 => return refuse(StatusCode::BAD_REQUEST, "bytes=N: only the household test fetches segments"),
                _ => return refuse(StatusCode::BAD_REQUEST, format!("bytes=N: a segment is 1 to {most} bytes")),
            }
        }
    };
    let deadline = Instant::now() + web.cfg.max_duration.min(s.lifetime(web.cfg.idle_timeout));
    let state = (Serving::new(&flow), s, deadline, limit.unwrap_or(u64::MAX));
    let stream = futures_util::stream::unfold(state, |(serving, s, deadline, left)| async move {
        if left == 0 || Instant::now() >= deadline || s.ended.load(Ordering::Relaxed) {
            return None;
        }
        let n = left.min(FILL.len() as u64);
        serving.0.count(n);
        Some((Ok::<_, Infallible>(Frame::data(Bytes::from_static(&FILL[..n as usize]))), (serving, s, deadline, left - n)))
    });
    let mut r = Response::new(StreamBody::new(stream).boxed());
    if let Some(n) = limit {
        r.headers_mut().insert(hyper::header::CONTENT_LENGTH, n.into());
    }
    r.headers_mut().insert(hyper::header::CONTENT_TYPE, "application/octet-stream".parse().unwrap());
    r.headers_mut().insert(hyper::header::CACHE_CONTROL, "no-store".parse().unwrap());
    crate::secure(r)
}

/// `POST /api/up?s=ID&f=N`: read and count the body; answer `{"bytes":N,"ended":...}`.
pub(crate) async fn upload(web: &Arc<Web>, req: Request<Incoming>, conn: ConnInfo) -> Response<Body> {
    let (s, flow) = match flow_of(web, &req, &conn, Direction::Up) {
        Ok(x) => x,
        Err(r) => return r,
    };
    let serving = Serving::new(&flow);
    let deadline = tokio::time::Instant::now() + web.cfg.max_duration.min(s.lifetime(web.cfg.idle_timeout));
    let mut body = req.into_body();
    let mut total = 0u64;
    let ended = loop {
        if s.ended.load(Ordering::Relaxed) {
            break "the test ended".to_string();
        }
        match tokio::time::timeout_at(deadline, body.frame()).await {
            Ok(Some(Ok(f))) => {
                if let Some(d) = f.data_ref() {
                    total += d.len() as u64;
                    serving.0.count(d.len() as u64);
                }
            }
            Ok(None) => break "complete".to_string(),
            Ok(Some(Err(e))) => break format!("the upload failed: {e}"),
            Err(_) => break format!("cut at --max-duration ({} s)", web.cfg.max_duration.as_secs_f64()),
        }
    };
    drop(serving);
    crate::json_response(StatusCode::OK, &serde_json::json!({"bytes": total, "ended": ended}))
}
