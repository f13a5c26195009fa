//! The page's request/response probes (`GET /api/probe?s=ID&p=SEQ`): HTTP
//! requests from its probe worker, one at a time, each answered at once
//! with `{"p":SEQ,"t2":NS,"t3":NS}` (the server's clock at arrival and at
//! answer, ns since the test began; both kept for the result's one-way
//! delays). The page times each from its Resource Timing entry: the
//! browser's network stack stamps when the request went out and when the
//! answer's first byte came in, so neither the page's threads nor the
//! browser's hand-offs to them are in the round trip (a WebSocket's or a
//! data channel's message has no such stamps).
//!
//! Bounded: the session's probe budget ([`crate::session::ProbeBudget`]:
//! twice the plan's probe rate, bursts of 10 s), the plan's probe count,
//! and the connection quota every request is under.
use crate::session::ProbeStamp;
use crate::{json_response, query, refuse, Web};
use bloatlab_host::clock;
use bloatlab_serve::http::{Body, ConnInfo};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde_json::json;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// `GET /api/probe?s=ID&p=SEQ`: one probe.
pub(crate) fn answer(web: &Arc<Web>, req: &Request<Incoming>, conn: &ConnInfo) -> Response<Body> {
    let t2 = clock::now_ns();
    let s = match web.sessions.get(query(req, "s").unwrap_or(""), conn.peer.ip()) {
        Ok(s) => s,
        Err(e) => return refuse(StatusCode::NOT_FOUND, e),
    };
    if s.ended.load(Ordering::Relaxed) {
        return refuse(StatusCode::GONE, "the test ended");
    }
    let Some(seq) = query(req, "p").and_then(|p| p.parse::<u32>().ok()) else {
        return refuse(StatusCode::BAD_REQUEST, "a probe is GET /api/probe?s=ID&p=SEQ (SEQ a number up to 4294967295)");
    };
    {
        let mut b = s.rr_budget.lock().unwrap();
        if !b.take() {
            let why = format!("more probes than {:.0} a second (bursts of 10 s allowed)", b.rate());
            drop(b);
            web.log_refusal(conn.peer, format!("test {}: {why}", s.id));
            return refuse(StatusCode::TOO_MANY_REQUESTS, why);
        }
    }
    let t3 = clock::now_ns();
    if !s.rr_probe(ProbeStamp { seq, t2, t3 }) {
        return refuse(StatusCode::TOO_MANY_REQUESTS, "the plan's probes are all sent");
    }
    let mut r = json_response(StatusCode::OK, &json!({"p": seq, "t2": t2.saturating_sub(s.t0_ns), "t3": t3.saturating_sub(s.t0_ns)}));
    r.headers_mut().insert(hyper::header::CACHE_CONTROL, "no-store".parse().unwrap());
    // each probe on a connection of its own, closed after its answer: an
    // idle probe connection left in the browser's pool would be taken by
    // the page's next download or stream segment, which then skips the
    // handshake a new connection pays (as `bloatlab test`'s do: through
    // 2.4 s of FIFO the household stream then took the bulk download's
    // share, 21-26% where the CLI's kept 54-59%). Resource Timing's
    // requestStart comes after the handshake, so the round trip timed is
    // the request's alone.
    r.headers_mut().insert(hyper::header::CONNECTION, "close".parse().unwrap());
    r
}
