//! The probe WebSocket of a browser test (`GET /api/ws?s=ID`), one per test,
//! on its own connection: the page's Web Worker sends `{"p":SEQ}` every
//! probe interval; the server answers at once with `{"p":SEQ,"t2":NS,"t3":NS}`
//! (its clock at arrival and at answer, ns since the test began) and keeps
//! both times for the result's one-way delays. Twice a second it also pushes
//! `{"server":[...]}`: each load flow's bytes and its socket's TCP_INFO
//! (cwnd, smoothed RTT, retransmits, delivery rate).
//!
//! Bounded: messages of at most 1 KiB, at most 4x the plan's probe rate
//! (over a second), the plan's probe count, and the test's lifetime.
use crate::session::{ProbeStamp, Session};
use crate::{query, refuse, Web};
use bloatlab_host::clock;
use bloatlab_rpm::server::{Body, ConnInfo};
use futures_util::{SinkExt, StreamExt};
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::json;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

const MAX_MESSAGE: usize = 1024;

fn header<'a>(req: &'a Request<Incoming>, name: &str) -> &'a str {
    req.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
}

pub(crate) fn upgrade(web: &Arc<Web>, mut req: Request<Incoming>, conn: ConnInfo) -> Response<Body> {
    let id = query(&req, "s").unwrap_or("");
    let s = match web.sessions.get(id, conn.peer.ip()) {
        Ok(s) => s,
        Err(e) => return refuse(StatusCode::NOT_FOUND, e),
    };
    let is_ws = header(&req, "upgrade").eq_ignore_ascii_case("websocket")
        && header(&req, "connection").split(',').any(|t| t.trim().eq_ignore_ascii_case("upgrade"));
    let key = header(&req, "sec-websocket-key").to_string();
    if !is_ws || key.is_empty() || header(&req, "sec-websocket-version") != "13" {
        return refuse(StatusCode::BAD_REQUEST, "/api/ws is a WebSocket (version 13)");
    }
    if s.ws_open.swap(true, Ordering::SeqCst) {
        return refuse(StatusCode::CONFLICT, "this test already has its probe WebSocket");
    }
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
    let on = hyper::upgrade::on(&mut req);
    let (web2, hold) = (web.clone(), conn.hold);
    tokio::spawn(async move {
        let _hold = hold; // the connection's quota permit, for as long as the socket lives
        let Ok(up) = on.await else {
            s.ws_open.store(false, Ordering::SeqCst);
            return;
        };
        let cfg = WebSocketConfig::default().max_message_size(Some(MAX_MESSAGE)).max_frame_size(Some(MAX_MESSAGE));
        let ws = WebSocketStream::from_raw_socket(TokioIo::new(up), Role::Server, Some(cfg)).await;
        let why = run(ws, &s, &web2).await;
        if let Some(why) = why {
            web2.log("web_probe_socket", json!({"client": conn.peer.to_string(), "id": s.id, "ended": why}));
        }
    });
    let mut r = Response::new(Empty::new().boxed());
    *r.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = r.headers_mut();
    h.insert(hyper::header::UPGRADE, "websocket".parse().unwrap());
    h.insert(hyper::header::CONNECTION, "Upgrade".parse().unwrap());
    h.insert("sec-websocket-accept", accept.parse().unwrap());
    r
}

/// The flows' server-side state now, for the page's live view.
fn server_state(s: &Session) -> serde_json::Value {
    let flows: Vec<serde_json::Value> = s
        .flows()
        .iter()
        .filter(|f| f.active.load(Ordering::Relaxed) > 0)
        .map(|f| {
            let i = f.tcp_info.lock().unwrap().last().copied();
            json!({
                "id": f.id,
                "direction": f.direction,
                "bytes": f.bytes.load(Ordering::Relaxed),
                "cwnd": i.map(|i| i.cwnd),
                "srtt_ms": i.map(|i| i.srtt_us as f64 / 1e3),
                "retransmits": i.map(|i| i.total_retrans),
                "delivery_bps": i.map(|i| i.delivery_rate_bps),
            })
        })
        .collect();
    json!({"server": flows})
}

/// Serve the probe socket until the page closes it or the test ends; an
/// abnormal end returns why (for the log).
async fn run<S>(ws: WebSocketStream<S>, s: &Arc<Session>, web: &Web) -> Option<String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let (mut tx, mut rx) = ws.split();
    let left = s.lifetime(web.cfg.idle_timeout).saturating_sub(s.began.elapsed());
    let end = tokio::time::sleep(left);
    tokio::pin!(end);
    let mut push = tokio::time::interval(Duration::from_millis(500));
    // at most 4x the plan's probe rate, counted over a second
    let per_second = (4.0 / s.plan.probe_interval.as_secs_f64()).ceil() as u32;
    let (mut window, mut seen) = (Instant::now(), 0u32);
    let close = |code: CloseCode, why: &str| Message::Close(Some(CloseFrame { code, reason: why.to_string().into() }));
    loop {
        if s.ended.load(Ordering::Relaxed) {
            let _ = tx.send(close(CloseCode::Normal, "the test ended")).await;
            return None;
        }
        tokio::select! {
            m = rx.next() => {
                let t2 = clock::now_ns();
                let text = match m {
                    Some(Ok(Message::Text(t))) => t,
                    Some(Ok(Message::Ping(_))) | Some(Ok(Message::Pong(_))) => continue,
                    Some(Ok(Message::Close(_))) | None => return None,
                    Some(Ok(_)) => {
                        let _ = tx.send(close(CloseCode::Unsupported, "probes are text messages")).await;
                        return Some("a binary message".into());
                    }
                    Some(Err(e)) => return Some(format!("{e}")),
                };
                if window.elapsed() >= Duration::from_secs(1) {
                    (window, seen) = (Instant::now(), 0);
                }
                seen += 1;
                if seen > per_second {
                    let why = format!("more than {per_second} probes in a second");
                    let _ = tx.send(close(CloseCode::Policy, &why)).await;
                    return Some(why);
                }
                let seq = serde_json::from_str::<serde_json::Value>(text.as_str()).ok().and_then(|v| v["p"].as_u64()).filter(|&v| v <= u32::MAX as u64);
                let Some(seq) = seq else {
                    let _ = tx.send(close(CloseCode::Invalid, "a probe is {\"p\":SEQ}")).await;
                    return Some("a malformed probe".into());
                };
                let t3 = clock::now_ns();
                if !s.probe(ProbeStamp { seq: seq as u32, t2, t3 }) {
                    let _ = tx.send(close(CloseCode::Policy, "the plan's probes are all sent")).await;
                    return Some("more probes than the plan sends".into());
                }
                let answer = json!({"p": seq, "t2": t2.saturating_sub(s.t0_ns), "t3": t3.saturating_sub(s.t0_ns)});
                if tx.send(Message::text(answer.to_string())).await.is_err() {
                    return None;
                }
            }
            _ = push.tick() => {
                if tx.send(Message::text(server_state(s).to_string())).await.is_err() {
                    return None;
                }
            }
            _ = &mut end => {
                let _ = tx.send(close(CloseCode::Normal, "the test's time is up")).await;
                return Some("the test's lifetime ended".into());
            }
        }
    }
}
