//! The control WebSocket of a browser test (`GET /api/ws?s=ID`), one per
//! test, on its own connection, opened by the page's probe worker. Four
//! times a second the server pushes
//! `{"server":[...],"arrived_up":N,"arrived_down":N,"t_ns":NS}`: each load
//! flow's bytes and its socket's TCP_INFO (cwnd, smoothed RTT, retransmits,
//! delivery rate), and the bytes that have arrived each way. The page sends
//! `{"cut":I}` when it ends loaded phase I before its cap (latency stopped
//! rising): that phase's upload streams are reset then. (The probes are
//! HTTP requests, [`crate::probe`], and a WebRTC data channel, [`crate::rtc`].)
//!
//! Bounded: messages of at most 1 KiB, at most twice the plan's probe rate
//! (bursts of 10 s: [`crate::session::ProbeBudget`]), and the test's
//! lifetime.
use crate::session::Session;
use crate::{query, refuse, Web};
use bloatlab_host::clock;
use bloatlab_serve::http::{Body, ConnInfo};
use futures_util::{SinkExt, StreamExt};
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::json;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

const MAX_MESSAGE: usize = 1024;

fn header<'a>(req: &'a Request<Incoming>, name: &str) -> &'a str {
    req.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
}

/// The WebSocket handshake's answer (101) for a valid upgrade request.
fn switching(req: &Request<Incoming>, path: &str) -> Result<Response<Body>, Response<Body>> {
    let is_ws = header(req, "upgrade").eq_ignore_ascii_case("websocket")
        && header(req, "connection").split(',').any(|t| t.trim().eq_ignore_ascii_case("upgrade"));
    let key = header(req, "sec-websocket-key").to_string();
    if !is_ws || key.is_empty() || header(req, "sec-websocket-version") != "13" {
        return Err(refuse(StatusCode::BAD_REQUEST, format!("{path} is a WebSocket (version 13)")));
    }
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
    let mut r = Response::new(Empty::new().boxed());
    *r.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = r.headers_mut();
    h.insert(hyper::header::UPGRADE, "websocket".parse().unwrap());
    h.insert(hyper::header::CONNECTION, "Upgrade".parse().unwrap());
    h.insert("sec-websocket-accept", accept.parse().unwrap());
    Ok(r)
}

/// `GET /api/ws?s=ID`: the control socket.
pub(crate) fn upgrade(web: &Arc<Web>, mut req: Request<Incoming>, conn: ConnInfo) -> Response<Body> {
    let id = query(&req, "s").unwrap_or("");
    let s = match web.sessions.get(id, conn.peer.ip()) {
        Ok(s) => s,
        Err(e) => return refuse(StatusCode::NOT_FOUND, e),
    };
    let answer = match switching(&req, "/api/ws") {
        Ok(r) => r,
        Err(r) => return r,
    };
    if s.ws_open.swap(true, Ordering::SeqCst) {
        return refuse(StatusCode::CONFLICT, "this test already has its control WebSocket");
    }
    let on = hyper::upgrade::on(&mut req);
    let (web2, hold, busy) = (web.clone(), conn.hold, conn.busy);
    tokio::spawn(async move {
        // the connection's quota permit, and its request in progress, for as long as the socket lives
        let _hold = (hold, busy);
        let Ok(up) = on.await else {
            s.ws_open.store(false, Ordering::SeqCst);
            return;
        };
        let cfg = WebSocketConfig::default().max_message_size(Some(MAX_MESSAGE)).max_frame_size(Some(MAX_MESSAGE));
        let ws = WebSocketStream::from_raw_socket(TokioIo::new(up), Role::Server, Some(cfg)).await;
        let why = run(ws, &s, &web2).await;
        if let Some(why) = why {
            web2.log("web_control_socket", json!({"client": conn.peer.to_string(), "id": s.id, "ended": why}));
        }
    });
    answer
}

/// Largest upload message, bytes.
pub const MAX_UPLOAD_MESSAGE: usize = 1 << 20;

/// `GET /api/upws?s=ID&f=N`: an upload stream as a WebSocket. A browser
/// streams a request body only over HTTP/2; a WebSocket carries the page's
/// data continuously over plain HTTP too (POSTs one after another pause a
/// round trip between them, which lets a bloated queue drain). The server
/// reads binary messages of at most 1 MiB and counts them to flow N.
pub(crate) fn upload(web: &Arc<Web>, mut req: Request<Incoming>, conn: ConnInfo) -> Response<Body> {
    let id = query(&req, "s").unwrap_or("");
    let s = match web.sessions.get(id, conn.peer.ip()) {
        Ok(s) => s,
        Err(e) => return refuse(StatusCode::NOT_FOUND, e),
    };
    let Some(f) = query(&req, "f").and_then(|f| f.parse::<u32>().ok()) else {
        return refuse(StatusCode::BAD_REQUEST, "f=N names the flow");
    };
    let answer = match switching(&req, "/api/upws") {
        Ok(r) => r,
        Err(r) => return r,
    };
    let flow = match s.flow(f, bloatlab_results::Direction::Up) {
        Ok(f) => f,
        Err(e) => return refuse(StatusCode::FORBIDDEN, e),
    };
    flow.attach(conn.sock.as_ref().and_then(|s| s.try_clone().ok()));
    let on = hyper::upgrade::on(&mut req);
    let deadline = tokio::time::Instant::now() + web.cfg.max_duration.min(s.lifetime(web.cfg.idle_timeout));
    let hold = (conn.hold, conn.busy);
    tokio::spawn(async move {
        let _hold = hold;
        let Ok(up) = on.await else { return };
        let cfg = WebSocketConfig::default().max_message_size(Some(MAX_UPLOAD_MESSAGE)).max_frame_size(Some(MAX_UPLOAD_MESSAGE));
        let ws = WebSocketStream::from_raw_socket(TokioIo::new(up), Role::Server, Some(cfg)).await;
        let (mut tx, mut rx) = ws.split();
        flow.active.fetch_add(1, Ordering::Relaxed);
        // When the page's phase ends (it says when, in a text message as the
        // phase begins), the connection is reset: the data still in the
        // browser's socket buffer (seconds of it at a bloated queue's rate)
        // is then dropped instead of loading the next phase.
        let mut until: Option<tokio::time::Instant> = None;
        let longest = s.plan.longest_phase() + Duration::from_secs(1);
        // the stream's phase: one that settles before its cap ends sooner
        // (the page says so on its probe socket)
        let mut phase: Option<u64> = None;
        loop {
            if s.ended.load(Ordering::Relaxed) {
                break;
            }
            let now = tokio::time::Instant::now();
            if until.is_some_and(|u| now >= u) || phase.is_some_and(|p| s.phase_cut(p)) {
                if let Some(sock) = flow.sock.lock().unwrap().take() {
                    let _ = sock.set_linger(Some(Duration::ZERO));
                }
                break;
            }
            // wake at least once a second to see whether the test ended
            let wake = deadline.min(now + Duration::from_secs(1)).min(until.unwrap_or(deadline));
            let next = tokio::select! {
                m = tokio::time::timeout_at(wake, rx.next()) => m,
                _ = s.next_cut() => continue,
            };
            match next {
                Ok(Some(Ok(Message::Binary(b)))) => flow.count(b.len() as u64),
                Ok(Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_)))) => {}
                Ok(Some(Ok(Message::Text(t)))) => {
                    let v = serde_json::from_str::<serde_json::Value>(t.as_str()).unwrap_or_default();
                    match v["until_ms"].as_f64() {
                        Some(ms) if ms.is_finite() && ms >= 0.0 => {
                            // a little after the page's own end of the phase
                            let left = Duration::from_secs_f64(ms / 1e3).min(longest) + Duration::from_millis(100);
                            until = Some(tokio::time::Instant::now() + left);
                            phase = v["phase"].as_u64();
                        }
                        _ => {
                            let reason = "upload data is binary; the one text message is {\"until_ms\":N,\"phase\":I}";
                            let _ = tx.send(Message::Close(Some(CloseFrame { code: CloseCode::Unsupported, reason: reason.into() }))).await;
                            break;
                        }
                    }
                }
                Ok(Some(Ok(Message::Close(_)))) | Ok(None) | Ok(Some(Err(_))) => break,
                Err(_) if tokio::time::Instant::now() < deadline => {}
                Err(_) if until.is_some_and(|u| tokio::time::Instant::now() >= u) => {}
                Err(_) => {
                    let _ = tx.send(Message::Close(Some(CloseFrame { code: CloseCode::Normal, reason: "cut at --max-duration".into() }))).await;
                    break;
                }
            }
        }
        flow.active.fetch_sub(1, Ordering::Relaxed);
        // the flow's handle on the socket too, so the connection closes now
        flow.sock.lock().unwrap().take();
    });
    answer
}

/// The flows' server-side state now, for the page's live view, and the
/// bytes that have arrived each way (all the test's flows): a download's
/// acknowledged + SACKed bytes from its socket's TCP_INFO, an upload's
/// received bytes (as `bloatlab test`'s live lines count them; the page's
/// own counts would read bursts: a browser hands an upload to its socket
/// buffer faster than the link carries it).
fn server_state(s: &Session) -> serde_json::Value {
    let all = s.flows();
    let mut arrived = [0u64; 2];
    for f in &all {
        match f.direction {
            bloatlab_results::Direction::Up => arrived[0] += f.bytes.load(Ordering::Relaxed),
            bloatlab_results::Direction::Down => {
                arrived[1] += f.tcp_info.lock().unwrap().last().map(|i| i.delivered_bytes()).unwrap_or(0);
            }
        }
    }
    let flows: Vec<serde_json::Value> = all
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
    json!({"server": flows, "t_ns": clock::now_ns().saturating_sub(s.t0_ns), "arrived_up": arrived[0], "arrived_down": arrived[1]})
}

/// After a refusal's Close frame: read and drop what the client still sends
/// (at most 2 s and 4 MiB) until its Close, so the reason reaches it. A
/// socket closed with unread data resets the connection, and a reset can
/// overtake the Close frame: the client then sees an error, not the reason.
async fn linger<R>(rx: &mut R)
where
    R: futures_util::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    let drain = async {
        let mut bytes = 0usize;
        while let Some(Ok(m)) = rx.next().await {
            bytes += m.len();
            if matches!(m, Message::Close(_)) || bytes > 4 << 20 {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(2), drain).await;
}

/// Serve the control socket until the page closes it or the test ends; an
/// abnormal end returns why (for the log).
async fn run<S>(ws: WebSocketStream<S>, s: &Arc<Session>, web: &Web) -> Option<String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let (mut tx, mut rx) = ws.split();
    let left = s.lifetime(web.cfg.idle_timeout).saturating_sub(s.began.elapsed());
    let end = tokio::time::sleep(left);
    tokio::pin!(end);
    let mut push = tokio::time::interval(Duration::from_millis(250));
    // at most twice the plan's probe rate, bursts of 10 s
    let mut budget = crate::session::ProbeBudget::new(&s.plan);
    let close = |code: CloseCode, why: &str| Message::Close(Some(CloseFrame { code, reason: why.to_string().into() }));
    loop {
        if s.ended.load(Ordering::Relaxed) {
            let _ = tx.send(close(CloseCode::Normal, "the test ended")).await;
            return None;
        }
        tokio::select! {
            m = rx.next() => {
                let text = match m {
                    Some(Ok(Message::Text(t))) => t,
                    Some(Ok(Message::Ping(_))) | Some(Ok(Message::Pong(_))) => continue,
                    Some(Ok(Message::Close(_))) | None => return None,
                    Some(Ok(_)) => {
                        let _ = tx.send(close(CloseCode::Unsupported, "the control socket takes text messages")).await;
                        linger(&mut rx).await;
                        return Some("a binary message".into());
                    }
                    Some(Err(e)) => return Some(format!("{e}")),
                };
                if !budget.take() {
                    let why = format!("more messages than {:.0} a second (bursts of 10 s allowed)", budget.rate());
                    let _ = tx.send(close(CloseCode::Policy, &why)).await;
                    linger(&mut rx).await;
                    return Some(why);
                }
                // the page ended a loaded phase early (latency stopped rising): its uploads end now
                let cut = serde_json::from_str::<serde_json::Value>(text.as_str()).ok().and_then(|v| v["cut"].as_u64());
                let Some(p) = cut else {
                    let _ = tx.send(close(CloseCode::Invalid, "a message is {\"cut\":PHASE} (probes are GET /api/probe)")).await;
                    linger(&mut rx).await;
                    return Some("a malformed message".into());
                };
                s.cut_uploads(p);
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
