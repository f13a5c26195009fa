//! The browser test `bloatlab server` serves, in real headless Chromium on
//! loopback: the page runs the quick test and leaves its result in
//! `window.bloatlabResult`, a result of `bloatlab test`'s schema; it makes
//! no request but to the server; the server's limits hold for web clients.
mod common;
use bloatlab_testkit::chrome::{chromium, Chrome};
use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const EXE: &str = env!("CARGO_BIN_EXE_bloatlab");

/// A `bloatlab server` on loopback with ephemeral ports; its browser-test
/// URLs (plain HTTP, then HTTPS).
struct Srv {
    child: Child,
    url: String,
    https: String,
    _dir: tempfile::TempDir,
    /// One server and its browser at a time: two pages loading loopback
    /// on two cores measure each other (their own delay then decides the
    /// grade, and the page rightly refuses to give one).
    _one: std::sync::MutexGuard<'static, ()>,
}

static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl Drop for Srv {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn server(extra: &[&str]) -> Srv {
    let one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(EXE)
        .args(["server", "--bind", "127.0.0.1", "--port", "0", "--rpm-port", "0", "--web-port", "0"])
        .args(if std::env::var_os("BLOATLAB_WEB_LOG").is_some() { vec![] } else { vec!["--quiet"] })
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut urls = vec![];
    for line in out.lines() {
        let line = line.unwrap();
        if let Some(rest) = line.strip_prefix("bloatlab server browser test at ") {
            urls = rest.split(", ").map(str::to_string).collect();
            break;
        }
    }
    assert!(urls.first().is_some_and(|u| u.starts_with("http://127.0.0.1:")), "no browser-test URL printed: {urls:?}");
    let https = urls.iter().find(|u| u.starts_with("https://")).cloned().unwrap_or_default();
    Srv { child, url: urls[0].clone(), https, _dir: dir, _one: one }
}

#[test]
fn chromium_runs_the_quick_test_on_loopback() {
    let Some(bin) = chromium() else {
        bloatlab_testkit::cannot_run("browser test", "no chromium on PATH (apt-get install chromium)");
        return;
    };
    let srv = server(&[]);
    let chrome = Chrome::start(&bin, None, "127.0.0.1", 1280, 900).unwrap();
    let run = chrome
        .run(&format!("{}?autostart=1", srv.url), "window.bloatlabResult || (window.bloatlabError && {error: window.bloatlabError})", Duration::from_secs(40))
        .unwrap();
    let v = run.value.unwrap_or_else(|| panic!("no result within 40 s; console: {:#?}", run.console));
    assert!(v.get("error").is_none(), "the page failed: {v}\n{:#?}", run.console);
    eprintln!("{}", serde_json::to_string_pretty(&v["headline"]).unwrap());
    assert!(run.elapsed < Duration::from_secs(30), "{:?}", run.elapsed);
    check_result(&v, &run.requests, &srv.url);
}

/// A browser with WebRTC turned off (Firefox's `media.peerconnection.enabled`,
/// a privacy setting some users have) falls back to the WebSocket probes;
/// the result and the page say so and why, and the test is still graded.
#[test]
fn a_page_without_webrtc_falls_back_to_http_probes_and_says_so() {
    let test = "a_page_without_webrtc_falls_back_to_websocket_probes_and_says_so";
    let gecko = std::env::var_os("PATH").and_then(|p| std::env::split_paths(&p).map(|d| d.join("geckodriver")).find(|f| f.is_file())).or_else(|| {
        let f = std::path::Path::new(&std::env::var("HOME").unwrap_or_default()).join(".cargo/bin/geckodriver");
        f.is_file().then_some(f)
    });
    if gecko.is_none() || !std::path::Path::new("/usr/bin/firefox-esr").is_file() {
        bloatlab_testkit::cannot_run(test, "needs firefox-esr (apt-get install firefox-esr) and geckodriver (cargo install geckodriver)");
        return;
    }
    if !Command::new("python3").args(["-c", "import selenium"]).status().is_ok_and(|s| s.success()) {
        bloatlab_testkit::cannot_run(test, "python3 has no selenium (pip install selenium)");
        return;
    }
    let srv = server(&[]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let o = Command::new("python3")
        .arg(format!("{}/../../bench/web_page.py", env!("CARGO_MANIFEST_DIR")))
        .args(["firefox", &format!("{}?autostart=1", srv.url)])
        .arg(&out)
        .arg("90")
        .env("NO_WEBRTC", "1")
        .env("PATH", format!("{}:{}", std::env::var("PATH").unwrap_or_default(), gecko.unwrap().parent().unwrap().display()))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = bloatlab_results::TestResult::read_file(&out).unwrap();
    let how = &r.metadata.probe_timestamps;
    assert!(how.starts_with("probes: HTTP requests"), "{how}");
    let why = bloatlab_web::result::no_webrtc(how).unwrap_or_else(|| panic!("no reason given: {how}"));
    assert_eq!(why, "this browser offers no WebRTC");
    assert!(r.headline.grade.is_some(), "graded from the HTTP probes");
    assert!(r.scenarios.iter().all(|p| p.summary.latency.received > 0));
}

/// A tab sent to the background mid-test (the browser slows its timers)
/// ends with "the test was interrupted", never a grade, and posts no result.
#[test]
fn a_tab_sent_to_the_background_is_interrupted_not_graded() {
    let Some(bin) = chromium() else {
        bloatlab_testkit::cannot_run("browser test", "no chromium on PATH (apt-get install chromium)");
        return;
    };
    let srv = server(&[]);
    let chrome = Chrome::start(&bin, None, "127.0.0.1", 1280, 900).unwrap();
    // once the live view shows (the test runs), the tab "goes to the background"
    let expr = "(() => { const l = document.getElementById('live'); \
        if (!window.__hid && l && !l.hidden) { window.__hid = 1; \
          Object.defineProperty(document, 'hidden', { value: true, configurable: true }); \
          document.dispatchEvent(new Event('visibilitychange')); } \
        return (window.bloatlabError && {error: window.bloatlabError}) || (window.bloatlabResult && {graded: true}); })()";
    let run = chrome.run(&format!("{}?autostart=1", srv.url), expr, Duration::from_secs(40)).unwrap();
    let v = run.value.unwrap_or_else(|| panic!("nothing within 40 s; console: {:#?}", run.console));
    assert!(v.get("graded").is_none(), "a backgrounded test was graded: {v}");
    let e = v["error"].as_str().unwrap_or_default();
    assert!(e.starts_with("the test was interrupted: this tab went to the background"), "{e}");
    assert!(run.elapsed < Duration::from_secs(10), "it took {:?} to stop", run.elapsed);
    assert!(!run.requests.iter().any(|u| u.contains("/api/result?s=")), "a result was posted: {:?}", run.requests);
}

/// The household test on loopback: after the capacities, a game, a call, a
/// stream and a bulk update run at once; each records what it needs for its
/// verdict, and the page shows the verdicts the server computed.
#[test]
fn chromium_runs_the_household_test_on_loopback() {
    let Some(bin) = chromium() else {
        bloatlab_testkit::cannot_run("household browser test", "no chromium on PATH (apt-get install chromium)");
        return;
    };
    let srv = server(&[]);
    let chrome = Chrome::start(&bin, None, "127.0.0.1", 1280, 900).unwrap();
    let expr = "(window.bloatlabResult && {json: window.bloatlabResultJson, cards: [...document.querySelectorAll('#household .use')]
            .map(c => [c.querySelector('h3').firstChild.textContent.trim(), c.querySelector('.badge').textContent]),
            shown: !document.getElementById('household-box').hidden}) || (window.bloatlabError && {error: window.bloatlabError})";
    // BLOATLAB_WEB_SCREENSHOTS=DIR keeps a screenshot of the finished page
    let look = bloatlab_testkit::chrome::Look {
        screenshot: std::env::var_os("BLOATLAB_WEB_SCREENSHOTS").map(|d| std::path::Path::new(&d).join("web-household-loopback.png")),
        ..Default::default()
    };
    let run = chrome.run_with(&format!("{}?autostart=1&mode=household", srv.url), expr, Duration::from_secs(50), &look).unwrap();
    let v = run.value.unwrap_or_else(|| panic!("no result within 50 s; console: {:#?}", run.console));
    assert!(v.get("error").is_none(), "the page failed: {v}\n{:#?}", run.console);
    let r: bloatlab_results::TestResult = serde_json::from_str(v["json"].as_str().unwrap()).unwrap();
    if let Some(d) = std::env::var_os("BLOATLAB_KEEP_RESULTS") {
        std::fs::write(std::path::Path::new(&d).join("web-household-loopback.json"), v["json"].as_str().unwrap()).unwrap();
    }
    let plan = bloatlab_model::WebPlan::of(bloatlab_model::Profile::Household);
    let hp = plan.household.unwrap();
    assert_eq!(r.metadata.command, ["browser", "household"]);
    let names: Vec<&str> = r.scenarios.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names.len(), 3, "{names:?}");
    assert_eq!(names[2], "household", "{names:?}");
    let hh = &r.scenarios[2];
    assert_eq!((hh.uploads, hh.downloads), (1, 1), "the bulk update: one stream each way");
    assert!(hh.summary.download_bps > LOADED_BPS && hh.summary.upload_bps > LOADED_BPS, "{:?}", hh.summary);
    // the game: 50 updates a second for 12 s
    assert!(hh.summary.latency.sent >= 550 && hh.summary.latency.received >= 500, "{:?}", hh.summary.latency);
    let h = r.household.as_ref().expect("the household record");
    assert_eq!(h.phase, "household");
    // the call: 30 frames a second for 12 s, sent back; one-way delays from the result's offset
    let frames = &h.call.frames;
    let back = frames.iter().filter(|f| f.rtt_ns.is_some()).count();
    eprintln!("call: {} frames, {back} back; segments: {:?}", frames.len(), h.stream.segments);
    assert!(frames.len() >= 330 && frames.len() <= 370, "{} frames", frames.len());
    assert!(back as f64 >= 0.95 * frames.len() as f64, "{back} of {} frames back", frames.len());
    assert!(frames.iter().filter(|f| f.owd_up_ns.is_some() && f.owd_down_ns.is_some()).count() == back);
    assert!(frames.iter().all(|f| f.t_ns >= hh.start_ns && f.t_ns < hh.end_ns));
    // the stream: a segment each 4 s, each whole
    assert_eq!(h.stream.segments.len(), 3, "{:?}", h.stream.segments);
    for g in &h.stream.segments {
        assert_eq!(g.bytes, hp.stream_segment_bytes);
        assert!(g.first_byte_ns.unwrap() <= g.done_ns.unwrap() && g.done_ns.unwrap() < 2_000_000_000, "{g:?}");
    }
    // the page shows the server's verdicts, one card per profile
    let verdicts = bloatlab_metrics::household::household(&r);
    let want: Vec<(String, String)> =
        verdicts.iter().map(|u| (u.name.clone(), u.verdict.as_str().to_string())).collect();
    let shown: Vec<(String, String)> = serde_json::from_value(v["cards"].clone()).unwrap();
    assert_eq!(shown, want);
    assert_eq!(v["shown"], true);
    assert!(verdicts.iter().all(|u| u.verdict != bloatlab_metrics::uses::Verdict::Unknown), "{verdicts:#?}");
    // the stream has all it needs on loopback (the update's share there is
    // the two processes' CPU, not a line's: one upload stream from a
    // browser got 19-62% of what several did)
    assert_eq!(verdicts[2].verdict, bloatlab_metrics::uses::Verdict::Good, "{:#?}", verdicts[2]);
    let origin = srv.url.trim_end_matches('/');
    for u in &run.requests {
        assert!(u.starts_with(origin) || u.starts_with(&origin.replacen("http", "ws", 1)) || u.starts_with("blob:"), "a request elsewhere: {u}");
    }
}

/// A phase that loaded loopback carried at least this (bits/s). Loopback
/// speed is the two processes' CPU (a browser's upload got 94 Mbit/s to
/// 3.5 Gbit/s here, beside another test's Chromium or not): how fast is
/// for bench/, this checks that the load ran and was counted.
const LOADED_BPS: f64 = 10e6;

/// A page's result: the CLI's schema with `client: browser`, UDP probes over
/// WebRTC, every phase with probes and goodput, and no request elsewhere.
fn check_result(v: &serde_json::Value, requests: &[String], base: &str) {
    let r: bloatlab_results::TestResult = serde_json::from_value(v.clone()).expect("the CLI's result schema");
    assert_eq!(r.client, bloatlab_results::ClientKind::Browser);
    assert!(r.metadata.probe_timestamps.starts_with("probes: a WebRTC data channel"), "{}", r.metadata.probe_timestamps);
    // the channel ran in the probe worker; the clock's step was measured, the isolation told as it is
    assert!(r.metadata.probe_timestamps.contains("sent and answered on the probe worker"), "{}", r.metadata.probe_timestamps);
    assert!(r.metadata.probe_timestamps.contains("us as measured"), "{}", r.metadata.probe_timestamps);
    assert!(r.metadata.user_agent.as_deref().is_some_and(|u| u.contains("Chrome")));
    let idle = r.idle.as_ref().expect("an idle phase");
    assert!(idle.summary.latency.received >= 80, "{:?}", idle.summary.latency);
    let names: Vec<(u32, u32)> = r.scenarios.iter().map(|p| (p.uploads, p.downloads)).collect();
    assert_eq!(names.len(), 3, "{names:?}");
    assert!(names[0].0 == 0 && names[0].1 >= 4 && names[1].0 >= 4 && names[1].1 == 0 && names[2].0 >= 3 && names[2].1 >= 3, "{names:?}");
    for p in &r.scenarios {
        // >= 100 probes in each loaded phase, answered; TCP exchanges beside
        // them, one at a time (the next waits for the last answer: with
        // Chromium's own uploads beside it on two cores, 89 in one 5u0d
        // phase, 100-250 in most), at least one per 100 ms
        assert!(p.summary.latency.received >= 100, "{}: {:?}", p.name, p.summary.latency);
        assert!(p.rr.len() >= 50, "{}: {} HTTP exchanges", p.name, p.rr.len());
        assert!(p.summary.owd_up_p50_ms.is_some() && p.summary.owd_down_p50_ms.is_some(), "{}: one-way delays", p.name);
        if p.downloads > 0 {
            assert!(p.summary.download_bps > LOADED_BPS, "{}: {} bit/s down on loopback", p.name, p.summary.download_bps);
            assert!(p.flows.iter().any(|f| f.direction == bloatlab_results::Direction::Down && !f.tcp_info.is_empty()), "{}: the server's TCP_INFO", p.name);
        }
        if p.uploads > 0 {
            assert!(p.summary.upload_bps > LOADED_BPS, "{}: {} bit/s up on loopback", p.name, p.summary.upload_bps);
        }
    }
    assert!(r.headline.grade.is_some());
    let origin = base.trim_end_matches('/');
    let ws = origin.replacen("http", "ws", 1);
    for u in requests {
        assert!(u.starts_with(origin) || u.starts_with(&ws) || u.starts_with("blob:") || u.starts_with("data:"), "a request elsewhere: {u}");
    }
    assert!(requests.iter().any(|u| u.contains("/api/result?s=")), "{requests:?}");
}

/// On a phone-sized screen in dark mode the finished page fits its width
/// (tables scroll inside their boxes), and its text is at least 10 px.
#[test]
fn the_page_fits_a_phone_in_dark_mode() {
    let Some(bin) = chromium() else {
        bloatlab_testkit::cannot_run("browser test on a phone-sized screen", "no chromium on PATH (apt-get install chromium)");
        return;
    };
    let srv = server(&[]);
    let chrome = Chrome::start(&bin, None, "127.0.0.1", 390, 800).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let shot = dir.path().join("phone.png");
    let look = bloatlab_testkit::chrome::Look { dark: true, width: Some(390), screenshot: Some(shot.clone()) };
    let probe = "window.bloatlabResult && (() => {
        const small = [...document.querySelectorAll('body *')].filter(e => e.childElementCount === 0 && e.textContent.trim() && e.getClientRects().length
            && (e instanceof SVGElement ? e.getBoundingClientRect().height < 10 : parseFloat(getComputedStyle(e).fontSize) < 10))
            .map(e => e.tagName + ':' + e.textContent.trim().slice(0, 20));
        return {overflow: document.documentElement.scrollWidth - window.innerWidth, width: window.innerWidth, small, error: window.bloatlabError || null,
                dark: getComputedStyle(document.body).backgroundColor, grade: document.getElementById('grade').textContent};
    })()";
    let run = chrome.run_with(&format!("{}?autostart=1", srv.url), probe, Duration::from_secs(40), &look).unwrap();
    let v = run.value.unwrap_or_else(|| panic!("no result within 40 s; console: {:#?}", run.console));
    eprintln!("{v}");
    assert_eq!(v["width"], 390, "{v}");
    assert!(v["error"].is_null(), "{v}");
    assert!(v["overflow"].as_i64().unwrap() <= 0, "the page is wider than the phone: {v}");
    assert!(v["small"].as_array().unwrap().is_empty(), "text under 10 px: {v}");
    assert_eq!(v["dark"], "rgb(13, 17, 23)", "dark mode: {v}");
    assert!(["A+", "A", "B", "C", "D", "F"].contains(&v["grade"].as_str().unwrap()), "{v}");
    assert!(std::fs::metadata(&shot).unwrap().len() > 10_000, "a screenshot");
    if let Some(d) = std::env::var_os("BLOATLAB_WEB_SCREENSHOTS") {
        std::fs::copy(&shot, std::path::Path::new(&d).join("web-phone-dark.png")).unwrap();
    }
}

#[test]
fn chromium_runs_the_quick_test_over_https() {
    let Some(bin) = chromium() else {
        bloatlab_testkit::cannot_run("browser test over HTTPS", "no chromium on PATH (apt-get install chromium)");
        return;
    };
    let srv = server(&[]);
    assert!(srv.https.starts_with("https://127.0.0.1:"), "{}", srv.https);
    // the server's certificate is self-signed
    let chrome = Chrome::start_with(&bin, None, "127.0.0.1", 1280, 900, &["--ignore-certificate-errors"]).unwrap();
    let run = chrome
        .run(&format!("{}?autostart=1", srv.https), "window.bloatlabResult || (window.bloatlabError && {error: window.bloatlabError})", Duration::from_secs(40))
        .unwrap();
    let v = run.value.unwrap_or_else(|| panic!("no result within 40 s; console: {:#?}", run.console));
    assert!(v.get("error").is_none(), "the page failed: {v}\n{:#?}", run.console);
    check_result(&v, &run.requests, &srv.https);
}

/// One HTTP/1.1 request on its own connection: (status, body).
fn http(base: &str, method: &str, path: &str, body: &[u8]) -> (u16, String) {
    use std::io::{Read, Write};
    let addr = base.trim_start_matches("http://").trim_end_matches('/');
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
    s.write_all(head.as_bytes()).unwrap();
    let _ = s.write_all(body);
    let mut out = vec![];
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).to_string();
    let status = text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default())
}

fn session(base: &str) -> (u16, serde_json::Value) {
    let (st, body) = http(base, "POST", "/api/session?mode=quick", b"");
    (st, serde_json::from_str(&body).unwrap_or_default())
}

/// The web endpoints under abuse: floods of connections, tests beyond the
/// quota, aborted streams and sockets, oversized bodies and messages, probe
/// floods. Every refusal says why, and the server gives back what it took.
#[test]
fn the_web_endpoints_stay_bounded_under_abuse() {
    let srv = server(&["--max-tests", "2", "--max-tests-per-source", "2", "--max-conns-per-source", "24", "--max-flows", "8"]);
    let base = srv.url.trim_end_matches('/').to_string();
    let addr = base.trim_start_matches("http://").to_string();

    // 1. Page loads: 60 connections at once from one source; 24 are served,
    // the others closed at once; then every connection is given back.
    let conns: Vec<std::net::TcpStream> = (0..60).map(|_| std::net::TcpStream::connect(&addr).unwrap()).collect();
    // closed by the server: a read says end of stream (an open one would block)
    let closed = || {
        conns
            .iter()
            .filter(|c| {
                use std::io::Read;
                c.set_nonblocking(true).unwrap();
                let mut b = [0u8; 1];
                matches!((&**c).read(&mut b), Ok(0))
            })
            .count()
    };
    let t0 = std::time::Instant::now();
    while closed() < 36 && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let n = closed();
    assert!(n >= 30, "{n} of 60 connections closed at once (24 allowed per source)");
    drop(conns);
    // the units come back as the server sees the closes
    let t0 = std::time::Instant::now();
    let (st, page) = loop {
        let (st, page) = http(&base, "GET", "/", b"");
        if st == 200 || t0.elapsed() > Duration::from_secs(5) {
            break (st, page);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(st == 200 && page.contains("id=\"start\""), "{st}");

    // 2. Tests beyond the quota are refused with the reason.
    let (s1, a) = session(&base);
    let (s2, b) = session(&base);
    let (s3, c) = session(&base);
    assert_eq!((s1, s2), (200, 200), "{a} {b}");
    assert_eq!(s3, 503, "{c}");
    assert!(c["error"].as_str().is_some_and(|e| e.contains("--max-tests")), "{c}");
    let id = a["id"].as_str().unwrap().to_string();

    // 3. Load requests need a running test of the same source; stream
    // segments and a call belong to a household test only.
    let (st, e) = http(&base, "GET", "/api/down?s=0123&f=1", b"");
    assert_eq!(st, 404, "{e}");
    assert!(e.contains("no such test"), "{e}");
    let (st, e) = http(&base, "GET", &format!("/api/down?s={id}&f=40&bytes=1000"), b"");
    assert_eq!(st, 400, "{e}");
    assert!(e.contains("only the household test fetches segments"), "{e}");
    let (st, e) = http(&base, "POST", &format!("/api/rtc?s={id}&c=call"), b"{\"type\":\"offer\",\"sdp\":\"v=0\"}");
    assert_eq!(st, 400, "{e}");
    assert!(e.contains("only the household test has a call"), "{e}");
    let (st, e) = http(&base, "POST", &format!("/api/rtc?s={id}&c=video"), b"{}");
    assert_eq!(st, 400, "{e}");
    assert!(e.contains("`probe` or `call`"), "{e}");

    // 4. Aborted downloads: 8 streams cut after a few bytes; the test's
    // flows are bounded (64) and the connections come back.
    for f in 0..8 {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        write!(s, "GET /api/down?s={id}&f={f} HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
        let mut buf = [0u8; 4096];
        s.read_exact(&mut buf).unwrap();
        drop(s);
    }
    let (st, e) = http(&base, "POST", &format!("/api/up?s={id}&f=3"), b"xx");
    assert_eq!(st, 403, "{e}");
    assert!(e.contains("flow 3 is a download"), "a flow's id is its direction's: {e}");

    // 5. One control WebSocket per test; a message flood is cut with the
    // reason, as is a probe flood over HTTP (a malformed probe is refused).
    let url = format!("ws://{addr}/api/ws?s={id}");
    let (mut ws, _) = tungstenite::connect(url.as_str()).unwrap();
    match tungstenite::connect(url.as_str()) {
        Err(tungstenite::Error::Http(r)) => assert_eq!(r.status(), 409),
        other => panic!("a second control socket: {:?}", other.map(|_| ())),
    }
    let mut reason = String::new();
    for _ in 0..5000 {
        if ws.send(tungstenite::Message::text("{\"cut\":99}")).is_err() {
            break;
        }
    }
    loop {
        match ws.read() {
            Ok(tungstenite::Message::Close(Some(f))) => {
                reason = f.reason.to_string();
                break;
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    assert!(reason.contains("more messages than 100 a second"), "the flood was cut: {reason:?}");
    let (st, e) = http(&base, "GET", &format!("/api/probe?s={id}&p=x"), b"");
    assert_eq!(st, 400, "{e}");
    assert!(e.contains("a probe is GET /api/probe?s=ID&p=SEQ"), "{e}");
    let (st, e) = http(&base, "GET", "/api/probe?s=nosuchtest&p=1", b"");
    assert_eq!(st, 404, "{e}");
    let mut refused = None;
    for i in 0..2000 {
        let (st, e) = http(&base, "GET", &format!("/api/probe?s={id}&p={i}"), b"");
        if st != 200 {
            refused = Some((i, st, e));
            break;
        }
        assert!(e.contains(&format!("\"p\":{i}")), "a probe's answer names it: {e}");
    }
    let (i, st, e) = refused.expect("a probe flood is refused");
    assert_eq!(st, 429, "{e}");
    assert!(e.contains("more probes than 100 a second"), "{e}");
    // the budget holds 10 s of probes (500 at 20 ms), refilled at twice the rate
    assert!((500..700).contains(&i), "refused after {i} probes");

    // 6. An upload message over 1 MiB ends its stream.
    let (mut up, _) = tungstenite::connect(format!("ws://{addr}/api/upws?s={id}&f=20").as_str()).unwrap();
    if let tungstenite::stream::MaybeTlsStream::Plain(s) = up.get_ref() {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    }
    let t0 = std::time::Instant::now();
    let _ = up.send(tungstenite::Message::binary(vec![0u8; 2 << 20]));
    let mut ended = false;
    for _ in 0..100 {
        match up.read() {
            Ok(tungstenite::Message::Close(_)) | Err(_) => {
                ended = true;
                break;
            }
            Ok(_) => {}
        }
    }
    assert!(ended && t0.elapsed() < Duration::from_secs(5), "an oversized upload message ends the stream at once ({:?})", t0.elapsed());

    // 7. An oversized report is refused; a report that does not fit its test too.
    let (st, e) = http(&base, "POST", &format!("/api/result?s={id}"), &vec![b' '; 5 << 20]);
    assert_eq!(st, 413, "{e}");
    assert!(e.contains("the report could not be read (at most 4 MiB)"), "{e}");
    let (st, e) = http(&base, "POST", &format!("/api/result?s={id}"), b"{\"start_ms\":1}");
    assert_eq!(st, 400, "{e}");
    assert!(e.contains("not a browser test report"), "{e}");

    // 8. A result ends the test and gives its unit back: a third test begins.
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64() * 1e3;
    let rep = serde_json::json!({"start_ms": t, "phases": [{"name": "idle", "start_ms": t, "end_ms": t + 10.0}], "flows": [],
                                 "rtc_probes": [], "rr_probes": [], "complete": false, "incomplete_reason": "test"});
    let (st, e) = http(&base, "POST", &format!("/api/result?s={id}"), rep.to_string().as_bytes());
    assert_eq!(st, 200, "{e}");
    let (st, e) = session(&base);
    assert_eq!(st, 200, "{e}");
    // and the ended test's endpoints say so
    let (st, e) = http(&base, "GET", &format!("/api/down?s={id}&f=40"), b"");
    assert_eq!(st, 404, "{e}");
}

/// Start `bloatlab server` with `args`; (the lines it printed within 3 s, its stderr).
fn server_lines(args: &[&str]) -> (Vec<String>, String) {
    let web_port: &[&str] = if args.contains(&"--no-web") { &[] } else { &["--web-port", "0"] };
    let mut child = Command::new(EXE)
        .args(["server", "--bind", "127.0.0.1", "--port", "0", "--rpm-port", "0"])
        .args(web_port)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // its first line comes once it listens, with its signal handlers in
    // place: a SIGTERM then lets it print the rest and stop
    use std::io::{BufRead, Read};
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    assert!(bloatlab_host::process::signal_child(&child, bloatlab_host::process::Signal::Term));
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{o:?}");
    ((first + &rest).lines().map(str::to_string).collect(), String::from_utf8_lossy(&o.stderr).to_string())
}

/// A page cannot keep a secret: a server with --secret-file serves no page
/// unless --web-public says so, and says why; --no-web turns it off.
#[test]
fn the_page_is_off_with_a_secret_unless_asked_and_with_no_web() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "a shared secret of enough bytes").unwrap();
    let s = secret.to_str().unwrap();
    let url = |lines: &[String]| lines.iter().any(|l| l.starts_with("bloatlab server browser test at "));
    let (lines, err) = server_lines(&["--secret-file", s]);
    assert!(lines.iter().any(|l| l.starts_with("bloatlab server listening")), "{lines:?} {err}");
    assert!(!url(&lines), "{lines:?}");
    assert!(err.contains("a page cannot keep the --secret-file secret (--web-public serves it anyway)"), "{err}");
    let (lines, err) = server_lines(&["--secret-file", s, "--web-public"]);
    assert!(url(&lines), "{lines:?} {err}");
    let (lines, err) = server_lines(&["--no-web"]);
    assert!(!url(&lines) && lines.iter().any(|l| l.starts_with("bloatlab server listening")), "{lines:?} {err}");
    let out = Command::new(EXE).args(["server", "--secret-file", s, "--web-results", "/tmp/x"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--web-results: the browser test is off"), "{}", String::from_utf8_lossy(&out.stderr));
}

/// With --web-results the page gets a permalink; the kept result is the
/// page's, served at /api/results/ID, and `bloatlab report` and `bloatlab
/// compare` read the file the server kept.
#[test]
fn kept_results_get_a_permalink_that_the_report_tools_read() {
    let Some(bin) = chromium() else {
        bloatlab_testkit::cannot_run("kept browser results", "no chromium on PATH (apt-get install chromium)");
        return;
    };
    let keep = tempfile::tempdir().unwrap();
    let srv = server(&["--web-results", keep.path().to_str().unwrap()]);
    let chrome = Chrome::start(&bin, None, "127.0.0.1", 1280, 900).unwrap();
    let run = chrome
        .run(&format!("{}?autostart=1", srv.url), "window.bloatlabResult ? {r: window.bloatlabResult, text: window.bloatlabResultJson, link: window.bloatlabPermalink} : (window.bloatlabError && {error: window.bloatlabError})", Duration::from_secs(40))
        .unwrap();
    let v = run.value.unwrap_or_else(|| panic!("no result within 40 s; console: {:#?}", run.console));
    assert!(v.get("error").is_none(), "the page failed: {v}");
    let link = v["link"].as_str().unwrap_or_else(|| panic!("no permalink: {v}")).to_string();
    let id = link.strip_prefix("/r/").unwrap();
    let base = srv.url.trim_end_matches('/');
    let (st, body) = http(base, "GET", &format!("/api/results/{id}"), b"");
    assert_eq!(st, 200, "{body}");
    let kept: serde_json::Value = serde_json::from_str(&body).unwrap();
    // the kept result is the page's (floats compared as numbers: the page's
    // copy went through JavaScript's number formatting)
    // the page's download text is the kept document, exactly
    let text: serde_json::Value = serde_json::from_str(v["text"].as_str().unwrap()).unwrap();
    assert_eq!(text, kept["result"]);
    assert_eq!(std::fs::read_to_string(keep.path().join(format!("{id}.json"))).map(|t| serde_json::from_str::<serde_json::Value>(&t).unwrap()).unwrap(), text);
    for k in ["idle_latency_ms", "loaded_latency_ms", "max_added_latency_ms", "download_capacity_bps", "upload_capacity_bps", "rpm"] {
        let (a, b) = (kept["result"]["headline"][k].as_f64().unwrap(), v["r"]["headline"][k].as_f64().unwrap());
        assert!((a - b).abs() <= 1e-9 * a.abs().max(1.0), "{k}: kept {a}, page {b}");
    }
    assert_eq!(kept["verdict"]["grade"], v["r"]["headline"]["grade"]);
    let (st, page) = http(base, "GET", &link, b"");
    assert!(st == 200 && page.contains("id=\"start\""), "{st}");
    let file = keep.path().join(format!("{id}.json"));
    assert!(file.is_file());
    assert!(std::fs::read_dir(keep.path()).unwrap().flatten().all(|e| !e.file_name().to_string_lossy().ends_with(".source")), "no address kept");
    let out = Command::new(EXE).args(["report", "-q", "--no-images", "-o"]).arg(keep.path()).arg(&file).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let html = std::fs::read_to_string(keep.path().join(format!("{id}.html"))).unwrap();
    assert!(html.contains(v["r"]["headline"]["grade"].as_str().unwrap()));
    let out = Command::new(EXE).arg("compare").arg(&file).arg(&file).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let first = v["r"]["scenarios"][0]["name"].as_str().unwrap();
    assert!(text.contains(first) && text.contains("browser test to 127.0.0.1"), "{text}");
    assert!(!text.contains("cc default"), "the server's congestion control is recorded: {text}");
}
