//! bloatlab's browser test: the page `bloatlab server` serves (plain HTTP on
//! its web port, and on its HTTPS port beside the RPM endpoints) and the
//! endpoints the page measures with:
//!
//! | path | what |
//! |---|---|
//! | `GET /`, `/r/ID` | the page (a permalink shows a kept result) |
//! | `GET /app.js`, `/worker.js`, `/style.css`, `/icon.svg` | its parts |
//! | `GET /api/plan?mode=M` | the test plan ([`bloatlab_model::WebPlan`]) and the server's limits |
//! | `POST /api/session?mode=M` | begin a test: takes a unit of the tests quota |
//! | `POST /api/rtc?s=ID[&c=call]` | the WebRTC probe channel (or the household test's call, on a connection of its own): the page's offer in, the answer out ([`rtc`]) |
//! | `GET /api/ws?s=ID` | the page's control socket (server TCP_INFO pushed, the page's phase cuts) |
//! | `GET /api/probe?s=ID&p=SEQ` | a request/response probe, answered with the server's times ([`probe`]) |
//! | `GET /api/down?s=ID&f=N[&bytes=B]` | a download stream (endless until the test ends), or a household test's stream segment of B bytes |
//! | `GET /api/upws?s=ID&f=N` | an upload stream (a WebSocket of binary messages, counted) |
//! | `POST /api/up?s=ID&f=N` | an upload sink (answers the bytes it read) |
//! | `POST /api/result?s=ID` | end the test: the page's measurements in, the result out |
//! | `GET /api/results/ID` | a kept result (`--web-results`) |
//!
//! Every refusal is a JSON `{"error": "..."}` with a status the page shows.
//! Limits: the server's connection quota (total and per source) for every
//! connection, its tests quota for every test, --max-duration for every
//! stream; see [`session`] and docs/web.md.
#![forbid(unsafe_code)]
pub mod assets;
mod http;
mod load;
mod probe;
pub mod result;
pub mod rtc;
pub mod session;
pub mod store;
mod ws;

use bloatlab_serve::{Full, Log, Quota};
use bloatlab_model::{ServerConfig, Profile, WebPlan, WebServe};
use bloatlab_serve::http::{Body, ConnInfo, Fallback};
use bytes::Bytes;
use http_body_util::{BodyExt, Full as FullBody};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use serde_json::json;
use session::Sessions;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The browser test's shared state: configuration, sessions, kept results.
pub struct Web {
    cfg: ServerConfig,
    sessions: Sessions,
    tests: Arc<Quota>,
    conns: Arc<Quota>,
    store: Option<store::Store>,
    /// Its events, and refusals (`web_refused`) at most one line a second.
    log: Arc<Log>,
    server_rpm: Mutex<Option<bloatlab_model::RpmOffer>>,
    rtcs: rtc::Rtcs,
}

/// A running plain-HTTP listener of the browser test.
pub struct WebServer {
    pub addrs: Vec<SocketAddr>,
    pub web: Arc<Web>,
}

impl Web {
    /// The browser test of a server with configuration `cfg`, sharing its
    /// connection and tests quotas.
    pub fn new(cfg: &ServerConfig, serve: &WebServe, conns: Arc<Quota>, tests: Arc<Quota>) -> Result<Arc<Web>, String> {
        let store = serve.results.clone().map(store::Store::open).transpose()?;
        Ok(Arc::new(Web {
            cfg: cfg.clone(),
            sessions: Sessions::default(),
            tests,
            conns,
            store,
            log: Log::new(cfg.quiet, "web_refused"),
            server_rpm: Mutex::new(None),
            rtcs: rtc::Rtcs::new(serve.port),
        }))
    }

    /// Results record the RPM endpoints the server offers.
    pub fn offer_rpm(&self, offer: bloatlab_model::RpmOffer) {
        *self.server_rpm.lock().unwrap() = Some(offer);
    }

    /// The handler the HTTPS (RPM) service passes other paths to.
    pub fn fallback(self: &Arc<Self>) -> Arc<dyn Fallback> {
        Arc::new(Routes(self.clone()))
    }

    /// Tests running now.
    pub fn active_tests(&self) -> usize {
        self.sessions.len()
    }

    /// Results kept (`--web-results`).
    pub fn kept_results(&self) -> usize {
        self.store.as_ref().map_or(0, |s| s.count())
    }

    fn log(&self, event: &str, fields: serde_json::Value) {
        self.log.event(event, fields);
    }

    /// At most one `web_refused` line a second, with how many since the last.
    fn log_refusal(&self, peer: SocketAddr, reason: String) {
        self.log.refused(peer, reason);
    }

    /// Housekeeping every 250 ms: expire sessions.
    async fn housekeeping(self: Arc<Self>) {
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        loop {
            tick.tick().await;
            for s in self.sessions.expire(self.cfg.idle_timeout) {
                self.log("web_test", json!({"client": s.source.to_string(), "id": s.id, "ended": "expired: no result within the plan's length + --idle-timeout"}));
            }
        }
    }
}

struct Routes(Arc<Web>);

impl Fallback for Routes {
    fn handle(&self, req: Request<Incoming>, conn: ConnInfo) -> std::pin::Pin<Box<dyn std::future::Future<Output = Response<Body>> + Send>> {
        let web = self.0.clone();
        Box::pin(async move { route(&web, req, conn).await })
    }
}

impl WebServer {
    /// Listen on `port` of every address the server binds and serve on the
    /// process's runtime (`bloatlab_serve::runtime`).
    pub fn start(web: Arc<Web>, port: u16) -> Result<WebServer, String> {
        let mut listeners = vec![];
        for b in &web.cfg.binds {
            let addr = SocketAddr::new(b.ip(), port);
            listeners.push(bloatlab_serve::listener(addr).map_err(|e| format!("browser test: cannot listen on {addr}: {e}"))?);
        }
        let addrs: Vec<SocketAddr> = listeners.iter().filter_map(|l| l.local_addr().ok()).collect();
        if let Some(a) = addrs.first() {
            web.rtcs.set_port(a.port());
        }
        let w = web.clone();
        bloatlab_serve::accept::serve_all(listeners, web.conns.clone(), web.log.clone(), move |tcp, peer, permit| Ok(http::serve(tcp, peer, w.clone(), Arc::new(permit))))
            .map_err(|e| format!("browser test: {e}"))?;
        bloatlab_serve::runtime::spawn(web.clone().housekeeping()).map_err(|e| format!("browser test: {e}"))?;
        Ok(WebServer { addrs, web })
    }
}

/// A JSON answer.
pub(crate) fn json_response(status: StatusCode, v: &serde_json::Value) -> Response<Body> {
    let mut r = Response::new(FullBody::new(Bytes::from(serde_json::to_vec(v).unwrap())).boxed());
    *r.status_mut() = status;
    r.headers_mut().insert(hyper::header::CONTENT_TYPE, "application/json".parse().unwrap());
    r.headers_mut().insert(hyper::header::CACHE_CONTROL, "no-store".parse().unwrap());
    secure(r)
}

/// A refusal the page shows: `{"error": reason}`.
pub(crate) fn refuse(status: StatusCode, reason: impl Into<String>) -> Response<Body> {
    json_response(status, &json!({"error": reason.into()}))
}

/// The headers every answer carries: only this origin may load or frame it,
/// and the page is cross-origin isolated.
pub(crate) fn secure(mut r: Response<Body>) -> Response<Body> {
    let h = r.headers_mut();
    for (k, v) in [
        ("content-security-policy", assets::CSP),
        ("x-content-type-options", "nosniff"),
        ("referrer-policy", "no-referrer"),
        ("cross-origin-opener-policy", "same-origin"),
        ("cross-origin-embedder-policy", "require-corp"),
        ("cross-origin-resource-policy", "same-origin"),
    ] {
        h.insert(k, v.parse().unwrap());
    }
    r
}

fn query<'a>(req: &'a Request<Incoming>, key: &str) -> Option<&'a str> {
    req.uri().query()?.split('&').find_map(|kv| kv.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
}

fn mode_of(req: &Request<Incoming>) -> Result<Profile, String> {
    query(req, "mode").map(|m| m.parse::<Profile>()).unwrap_or(Ok(Profile::Quick))
}

fn full_reason(f: Full) -> String {
    match f {
        Full::Total { limit } => format!("the server is busy: {limit} tests are running (--max-tests); try again in a minute"),
        Full::Source { limit } => format!("your address already runs {limit} tests (--max-tests-per-source)"),
    }
}

/// The host the browser reached us as (its Host header, if plain: the RPM
/// service's rule), else the address it connected to.
fn host_of(req: &Request<Incoming>, local: SocketAddr) -> String {
    bloatlab_serve::http::request_host(req).unwrap_or_else(|| local.to_string())
}

fn page(index: &'static str) -> Response<Body> {
    let mut r = Response::new(FullBody::new(Bytes::from_static(index.as_bytes())).boxed());
    r.headers_mut().insert(hyper::header::CONTENT_TYPE, "text/html; charset=utf-8".parse().unwrap());
    r.headers_mut().insert(hyper::header::CACHE_CONTROL, "no-cache".parse().unwrap());
    secure(r)
}

async fn route(web: &Arc<Web>, req: Request<Incoming>, conn: ConnInfo) -> Response<Body> {
    let path = req.uri().path().to_string();
    let method = req.method().clone();
    let get = method == Method::GET || method == Method::HEAD;
    match path.as_str() {
        "/" | "/index.html" if get => page(assets::INDEX),
        p if get && p.starts_with("/r/") && store::valid_id(&p[3..]) => page(assets::INDEX),
        "/favicon.ico" if get => {
            let mut r = Response::new(http_body_util::Empty::new().boxed());
            *r.status_mut() = StatusCode::NO_CONTENT;
            secure(r)
        }
        p if get && assets::ASSETS.iter().any(|a| a.path == p) => {
            let a = assets::ASSETS.iter().find(|a| a.path == p).unwrap();
            let mut r = Response::new(FullBody::new(Bytes::from_static(a.body.as_bytes())).boxed());
            r.headers_mut().insert(hyper::header::CONTENT_TYPE, a.content_type.parse().unwrap());
            r.headers_mut().insert(hyper::header::CACHE_CONTROL, "no-cache".parse().unwrap());
            secure(r)
        }
        "/api/plan" if get => match mode_of(&req) {
            Ok(m) => json_response(StatusCode::OK, &plan_doc(web, m)),
            Err(e) => refuse(StatusCode::BAD_REQUEST, e),
        },
        "/api/session" if method == Method::POST => begin(web, &req, &conn),
        "/api/ws" if get => ws::upgrade(web, req, conn),
        "/api/probe" if get => probe::answer(web, &req, &conn),
        "/api/upws" if get => ws::upload(web, req, conn),
        "/api/rtc" if method == Method::POST => rtc_offer(web, req, conn).await,
        "/api/down" if get => load::download(web, &req, conn),
        "/api/up" if method == Method::POST => load::upload(web, req, conn).await,
        "/api/result" if method == Method::POST => finish(web, req, conn).await,
        p if get && p.starts_with("/api/results/") => kept(web, &p["/api/results/".len()..]),
        _ => refuse(StatusCode::NOT_FOUND, format!("{method} {path}: not here (this is a bloatlab server's browser test: open / )")),
    }
}

/// The plan the page runs, the grade scale and the server's limits.
fn plan_doc(web: &Web, mode: Profile) -> serde_json::Value {
    let plan = WebPlan::of(mode);
    json!({
        "plan": plan.to_json_value(),
        "modes": Profile::WORDS,
        // the grade's one table (metrics::grade) and its badge colours (report)
        "grades": bloatlab_metrics::grade::Grade::LETTERS
            .iter()
            .map(|g| json!({
                "letter": g.as_str(),
                "under_ms": bloatlab_metrics::grade::GRADE_THRESHOLDS_MS.iter().find(|(x, _)| x == g).map(|(_, ms)| *ms),
                "color": bloatlab_report::grade_color(*g),
            }))
            .collect::<Vec<_>>(),
        "grade_scale": bloatlab_report::scale_words(),
        "server": {
            "bloatlab_version": env!("CARGO_PKG_VERSION"),
            "max_duration_s": web.cfg.max_duration.as_secs_f64(),
            "keeps_results": web.store.is_some(),
        },
    })
}

fn user_agent(req: &Request<Incoming>) -> String {
    let ua = req.headers().get(hyper::header::USER_AGENT).and_then(|v| v.to_str().ok()).unwrap_or("");
    ua.chars().take(512).collect()
}

/// `POST /api/session`: a test begins if the tests quota has room and the
/// plan fits --max-duration.
fn begin(web: &Arc<Web>, req: &Request<Incoming>, conn: &ConnInfo) -> Response<Body> {
    let mode = match mode_of(req) {
        Ok(m) => m,
        Err(e) => return refuse(StatusCode::BAD_REQUEST, e),
    };
    let plan = WebPlan::of(mode);
    if plan.max_total() > web.cfg.max_duration {
        let reason = format!(
            "the {mode} test takes up to {} s (its phases run on while latency rises); this server allows tests of at most {} s (--max-duration)",
            plan.max_total().as_secs(),
            web.cfg.max_duration.as_secs()
        );
        web.log_refusal(conn.peer, reason.clone());
        return refuse(StatusCode::FORBIDDEN, reason);
    }
    let permit = match web.tests.take(conn.peer.ip()) {
        Ok(p) => p,
        Err(f) => {
            let reason = full_reason(f);
            web.log_refusal(conn.peer, reason.clone());
            return refuse(StatusCode::SERVICE_UNAVAILABLE, reason);
        }
    };
    let s = web.sessions.begin(permit, conn.peer.ip(), plan, user_agent(req), host_of(req, conn.local));
    // the server's half of the measurements: byte counts and TCP_INFO
    let (sess, every) = (s.clone(), s.plan.sample_interval);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        while !sess.ended.load(std::sync::atomic::Ordering::Relaxed) {
            tick.tick().await;
            sess.sample();
        }
    });
    web.log("web_test", json!({"client": conn.peer.to_string(), "id": s.id, "mode": mode.name(), "began": true}));
    json_response(StatusCode::OK, &json!({"id": s.id, "plan": s.plan.to_json_value()}))
}

/// `POST /api/result`: the page's measurements in; the test ends and its
/// result (with what it means for everyday uses, and a permalink when the
/// server keeps results) goes back.
async fn finish(web: &Arc<Web>, req: Request<Incoming>, conn: ConnInfo) -> Response<Body> {
    let id = query(&req, "s").unwrap_or("").to_string();
    let s = match web.sessions.get(&id, conn.peer.ip()) {
        Ok(s) => s,
        Err(e) => return refuse(StatusCode::NOT_FOUND, e),
    };
    let body = match bloatlab_serve::http::read_body(req.into_body(), result::MAX_REPORT_BYTES, "the report").await {
        Ok(b) => b,
        Err(e) => return refuse(StatusCode::PAYLOAD_TOO_LARGE, e),
    };
    let rep: result::PageReport = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return refuse(StatusCode::BAD_REQUEST, format!("the report is not a browser test report: {e}")),
    };
    if let Err(e) = rep.validate(&s) {
        return refuse(StatusCode::BAD_REQUEST, format!("the report does not fit the test: {e}"));
    }
    web.sessions.finish(&id);
    let server = bloatlab_engine::sys::disclosed_host_info(&web.cfg);
    let rpm = web.server_rpm.lock().unwrap().clone();
    let r = result::build(&s, &rep, server, conn.local, rpm);
    let text = serde_json::to_vec(&r).unwrap();
    let (permalink, kept) = match &web.store {
        Some(st) => match st.save(&text, conn.peer.ip()) {
            Ok(id) => (Some(format!("/r/{id}")), None),
            Err(e) => (None, Some(e)),
        },
        None => (None, None),
    };
    web.log(
        "web_test",
        json!({"client": conn.peer.to_string(), "id": s.id, "ended": if rep.complete { "complete" } else { "incomplete" },
               "grade": r.headline.grade, "seconds": (s.began.elapsed().as_secs_f64() * 1000.0).round() / 1000.0}),
    );
    let mut answer = answer_of(&r);
    answer["permalink"] = json!(permalink);
    answer["not_kept"] = json!(kept);
    json_response(StatusCode::OK, &answer)
}

/// What the page shows of a result: the result itself, the CLI's verdict
/// on it (`report::verdict`: grade, the sentence, the worst scenario) and
/// what it means for everyday uses (`metrics::uses`), and the household
/// test's verdicts (`metrics::household`).
fn answer_of(r: &bloatlab_results::TestResult) -> serde_json::Value {
    let v = bloatlab_report::verdict(r);
    json!({
        "result": r,
        // the same document as text: Unix-nanosecond integers exceed what a
        // JavaScript number holds exactly, so the page offers this for download
        "result_json": serde_json::to_string_pretty(r).unwrap(),
        "verdict": {"grade": v.grade.as_str(), "sentence": v.sentence, "line": v.line(), "worst_scenario": v.worst_scenario},
        "uses": bloatlab_metrics::uses::uses(r),
        // the household test's profiles, each judged (empty for the others)
        "household": bloatlab_metrics::household::household(r),
        // every figure the page shows of the result, formatted by the CLI's
        // formatter (the page formats none of them itself)
        "view": view_of(r),
    })
}

/// A loaded phase as the page names it: "Download · 4 streams", "Both ways
/// · 3↓ 3↑", "Household · bulk 1↓ 1↑".
fn phase_label(p: &bloatlab_results::Phase) -> String {
    if p.name == bloatlab_model::HOUSEHOLD_PHASE {
        return format!("Household · bulk {}↓ {}↑", p.downloads, p.uploads);
    }
    match (p.uploads, p.downloads) {
        (u, d) if u > 0 && d > 0 => format!("Both ways · {d}↓ {u}↑"),
        (u, _) if u > 0 => format!("Upload · {u} streams"),
        (_, d) => format!("Download · {d} streams"),
    }
}

/// The result's figures as the page shows them, each through
/// `model::fmt` (the CLI's formatter): the headline, the phase table, the
/// server's TCP state per phase and the browser's own delay.
fn view_of(r: &bloatlab_results::TestResult) -> serde_json::Value {
    use bloatlab_model::fmt;
    let ms = |v: Option<f64>| v.map(|v| format!("{} ms", fmt::ms(v))).unwrap_or_else(|| "-".into());
    let added = |v: Option<f64>| v.map(|v| format!("{} ms", fmt::signed(v))).unwrap_or_else(|| "-".into());
    let rate = |v: f64| if v > 0.0 { fmt::rate(v) } else { "-".into() };
    let h = &r.headline;
    let headline = vec![
        ("Idle latency", ms(h.idle_latency_ms)),
        ("Loaded latency", ms(h.loaded_latency_ms)),
        ("Added latency", added(h.max_added_latency_ms)),
        ("Download", rate(h.download_capacity_bps)),
        ("Upload", rate(h.upload_capacity_bps)),
        ("RPM", h.rpm.map(fmt::int3).unwrap_or_else(|| "-".into())),
    ];
    let row = |label: String, p: &bloatlab_results::Phase| {
        let s = &p.summary;
        let l = &s.latency;
        let mut good = vec![];
        if p.downloads > 0 {
            good.push(format!("{} ↓", rate(s.download_bps)));
        }
        if p.uploads > 0 {
            good.push(format!("{} ↑", rate(s.upload_bps)));
        }
        let rising = if s.still_rising { " (still rising)" } else { "" };
        let (p50, p90, p99) = if l.received > 0 { (Some(l.p50_ms), Some(l.p90_ms), Some(l.p99_ms)) } else { (None, None, None) };
        vec![
            label,
            ms(p50),
            ms(p90),
            ms(p99),
            format!("{}{rising}", added(s.added_latency_ms)),
            if good.is_empty() { "-".into() } else { good.join(", ") },
            format!("{} ↑ {} ↓", ms(s.owd_up_p50_ms), ms(s.owd_down_p50_ms)),
            format!("{} of {}", l.lost, l.sent),
        ]
    };
    let mut rows = vec![];
    if let Some(i) = &r.idle {
        rows.push(row("Idle".into(), i));
    }
    for p in &r.scenarios {
        rows.push(row(phase_label(p), p));
    }
    let span = |v: Vec<f64>, f: &dyn Fn(f64) -> String| match (v.iter().cloned().reduce(f64::min), v.iter().cloned().reduce(f64::max)) {
        (Some(a), Some(b)) if a == b => f(a),
        (Some(a), Some(b)) => format!("{} to {}", f(a), f(b)),
        _ => "-".into(),
    };
    let server: Vec<Vec<String>> = r
        .scenarios
        .iter()
        .map(|p| {
            let last: Vec<&bloatlab_results::TcpInfoSample> =
                p.flows.iter().filter(|f| f.direction == bloatlab_results::Direction::Down).filter_map(|f| f.tcp_info.last()).collect();
            vec![
                phase_label(p),
                span(last.iter().map(|x| x.cwnd as f64).collect(), &|v| format!("{v:.0}")),
                if last.is_empty() { "-".into() } else { span(last.iter().map(|x| x.srtt_us as f64 / 1e3).collect(), &|v| format!("{} ms", fmt::ms(v))) },
                if last.is_empty() { "-".into() } else { p.summary.retransmits.to_string() },
            ]
        })
        .collect();
    // the browser's own delay, as the result measured it (never read as bufferbloat)
    let all: Vec<&bloatlab_results::Phase> = r.idle.iter().chain(r.scenarios.iter()).collect();
    let lag = all.iter().filter_map(|p| p.summary.page_lag_max_ms).fold(None, |a: Option<f64>, v| Some(a.map_or(v, |a| a.max(v))));
    let held: u32 = all.iter().map(|p| p.summary.page_delayed_probes).sum();
    let rising: Vec<String> = r.scenarios.iter().filter(|p| p.summary.still_rising).map(phase_label).collect();
    let mut notes = String::new();
    if let Some(why) = crate::result::no_webrtc(&r.metadata.probe_timestamps) {
        notes.push_str(&format!(
            "The UDP probes could not run ({why}): the latency figures come from the HTTP probes, where a lost packet shows as a longer round trip, not as a loss. "
        ));
    }
    if let Some(lag) = lag {
        let bound = fmt::trim_num(bloatlab_metrics::page::PAGE_DELAY_BOUND_MS);
        let held = match held {
            0 => format!("it held no probe over {bound} ms"),
            1 => format!("1 probe it may have held over {bound} ms was left out of the figures"),
            n => format!("{n} probes it may have held over {bound} ms were left out of the figures"),
        };
        notes.push_str(&format!("Your browser added up to {} ms of its own delay (its probe timer ran that late); {held}. ", fmt::ms(lag)));
    }
    // what the browser added beyond its probe timer's stalls: its UDP
    // probes against its HTTP probes, which its network stack timed
    let own = r.scenarios.iter().filter_map(|p| Some((p, p.summary.udp_over_rr_ms?))).max_by(|a, b| a.1.total_cmp(&b.1));
    if let Some((p, d)) = own.filter(|(_, d)| *d >= 1.0) {
        notes.push_str(&format!(
            "In {} the UDP probes read {} ms more added latency than the HTTP probes, which the browser's network stack timed: that much is the browser's own delay, not the line's. ",
            phase_label(p),
            fmt::ms(d)
        ));
    }
    if !rising.is_empty() {
        notes.push_str(&format!(
            "Still rising when the phase ended (the queue had not shown its size; its added latency is at least the figure shown): {}.",
            rising.join(", ")
        ));
    }
    json!({
        "headline": headline,
        "phases": {"head": ["Phase", "p50", "p90", "p99", "Added", "Goodput", "One-way (p50)", "Lost"], "rows": rows},
        "server": {"head": ["Phase", "cwnd (segments)", "Smoothed RTT", "Retransmits"], "rows": server},
        "notes": notes.trim(),
    })
}

/// `POST /api/rtc`: the page's WebRTC offer in, the server's answer out.
async fn rtc_offer(web: &Arc<Web>, req: Request<Incoming>, conn: ConnInfo) -> Response<Body> {
    let id = query(&req, "s").unwrap_or("").to_string();
    // `c=call`: the household test's video call, on a connection of its own
    let kind = match query(&req, "c") {
        None | Some("probe") => rtc::Kind::Probe,
        Some("call") => rtc::Kind::Call,
        Some(c) => return refuse(StatusCode::BAD_REQUEST, format!("c={c}: a channel is `probe` or `call`")),
    };
    let s = match web.sessions.get(&id, conn.peer.ip()) {
        Ok(s) => s,
        Err(e) => return refuse(StatusCode::NOT_FOUND, e),
    };
    if kind == rtc::Kind::Call && s.plan.household.is_none() {
        return refuse(StatusCode::BAD_REQUEST, "only the household test has a call");
    }
    let body = match bloatlab_serve::http::read_body(req.into_body(), 64 * 1024, "the offer").await {
        Ok(b) => b,
        Err(e) => return refuse(StatusCode::PAYLOAD_TOO_LARGE, e),
    };
    let offer: str0m::change::SdpOffer = match serde_json::from_slice(&body) {
        Ok(o) => o,
        Err(e) => return refuse(StatusCode::BAD_REQUEST, format!("not a WebRTC offer: {e}")),
    };
    match web.rtcs.answer(&s, conn.local.ip(), offer, kind) {
        Ok(a) => json_response(StatusCode::OK, &serde_json::to_value(&a).unwrap()),
        Err(e) => refuse(StatusCode::SERVICE_UNAVAILABLE, e),
    }
}

/// `GET /api/results/ID`: a kept result, with its uses.
fn kept(web: &Web, id: &str) -> Response<Body> {
    let Some(st) = &web.store else {
        return refuse(StatusCode::NOT_FOUND, "this server keeps no results (bloatlab server --web-results DIR)");
    };
    let Some(text) = st.load(id) else {
        return refuse(StatusCode::NOT_FOUND, format!("no result {id} here (results are kept while the server's bounds allow)"));
    };
    match bloatlab_results::TestResult::from_json(&String::from_utf8_lossy(&text)) {
        Ok(r) => {
            let mut answer = answer_of(&r);
            answer["permalink"] = json!(format!("/r/{id}"));
            json_response(StatusCode::OK, &answer)
        }
        Err(e) => refuse(StatusCode::INTERNAL_SERVER_ERROR, format!("result {id} cannot be read: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bloatlab_results::{Phase, TestResult};

    fn result() -> TestResult {
        let mut r: TestResult = serde_json::from_value(json!({
            "schema": "bloatlab-result", "schema_version": 2, "complete": true,
            "metadata": serde_json::to_value(bloatlab_results::Metadata::default()).unwrap(),
            "scenarios": [], "headline": serde_json::to_value(bloatlab_results::Headline::default()).unwrap()
        }))
        .unwrap();
        let mut idle = Phase { name: "idle".into(), ..Default::default() };
        idle.summary.latency.received = 100;
        idle.summary.latency.sent = 100;
        idle.summary.latency.p50_ms = 0.5;
        r.idle = Some(idle);
        let mut down = Phase { name: "0u4d".into(), downloads: 4, ..Default::default() };
        down.summary.latency.received = 250;
        down.summary.latency.sent = 252;
        down.summary.latency.lost = 2;
        down.summary.latency.p50_ms = 0.4999;
        down.summary.added_latency_ms = Some(-0.0001);
        down.summary.download_bps = 9.412e6;
        down.summary.still_rising = true;
        down.summary.page_lag_max_ms = Some(3.62);
        down.summary.page_delayed_probes = 1;
        r.scenarios.push(down);
        r.scenarios.push(Phase { name: "3u3d".into(), uploads: 3, downloads: 3, ..Default::default() });
        r.headline.max_added_latency_ms = Some(-0.0001);
        r.headline.download_capacity_bps = 9.412e6;
        r.headline.rpm = Some(3431726.0);
        r
    }

    #[test]
    fn the_page_shows_figures_the_cli_formatter_made() {
        let v = view_of(&result());
        let head: Vec<(String, String)> = serde_json::from_value(v["headline"].clone()).unwrap();
        let get = |k: &str| head.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()).unwrap();
        // the CLI prints 0 where a second formatter printed "-0.000 ms"
        assert_eq!(get("Added latency"), format!("{} ms", bloatlab_model::fmt::signed(-0.0001)));
        assert!(!get("Added latency").contains("-0.000"), "{}", get("Added latency"));
        assert_eq!(get("Download"), "9.41 Mbit/s");
        assert_eq!(get("Upload"), "-");
        assert_eq!(get("RPM"), "3430000");
        let rows: Vec<Vec<String>> = serde_json::from_value(v["phases"]["rows"].clone()).unwrap();
        assert_eq!(rows[0][0], "Idle");
        assert_eq!(rows[1][0], "Download · 4 streams");
        assert!(rows[1][4].ends_with("(still rising)"), "{:?}", rows[1]);
        assert_eq!(rows[1][7], "2 of 252");
        assert_eq!(rows[2][0], "Both ways · 3↓ 3↑");
        // nothing received: no figures, not zeros
        assert_eq!(rows[2][1], "-");
        let notes = v["notes"].as_str().unwrap();
        assert!(notes.contains("up to 3.62 ms of its own delay") && notes.contains("; 1 probe it may have held over 5 ms was left out of the figures."), "{notes}");
        let mut r = result();
        r.scenarios[0].summary.page_delayed_probes = 0;
        let notes = view_of(&r)["notes"].as_str().unwrap().to_string();
        assert!(notes.contains("(its probe timer ran that late); it held no probe over 5 ms."), "{notes}");
        assert!(notes.contains("Still rising when the phase ended") && notes.contains("Download · 4 streams"), "{notes}");
        assert!(!notes.contains("UDP probes"), "{notes}");
        // UDP probes the browser delayed, against its network-timed HTTP probes
        let mut r = result();
        r.scenarios[0].summary.added_latency_ms = Some(6.1);
        r.scenarios[0].summary.rr_added_latency_ms = Some(1.3);
        r.scenarios[0].summary.udp_over_rr_ms = Some(4.8);
        let notes = view_of(&r)["notes"].as_str().unwrap().to_string();
        assert!(notes.contains("In Download · 4 streams the UDP probes read 4.80 ms more added latency than the HTTP probes, which the browser's network stack timed"), "{notes}");
        // probes that fell back to WebSockets: the page says so and why
        let mut r = result();
        r.metadata.probe_timestamps = "probes: HTTP requests from the probe worker, one at a time, 5 of 5 answered timed by the browser's network stack (no WebRTC: the probe channel did not open within 5 s (UDP to the server blocked?)), so a lost packet shows as a round trip stretched by TCP's loss recovery, not as a lost probe; send: x (a), b".into();
        assert_eq!(crate::result::no_webrtc(&r.metadata.probe_timestamps), Some("the probe channel did not open within 5 s (UDP to the server blocked?)"));
        let notes = view_of(&r)["notes"].as_str().unwrap().to_string();
        assert!(notes.starts_with("The UDP probes could not run (the probe channel did not open within 5 s (UDP to the server blocked?)): the latency figures come from the HTTP probes"), "{notes}");
    }
}
