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
}

impl Drop for Srv {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn server(extra: &[&str]) -> Srv {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(EXE)
        .args(["server", "--bind", "127.0.0.1", "--port", "0", "--rpm-port", "0", "--web-port", "0", "--quiet"])
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
    Srv { child, url: urls[0].clone(), https, _dir: dir }
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

/// A page's result: the CLI's schema with `client: browser`, UDP probes over
/// WebRTC, every phase with probes and goodput, and no request elsewhere.
fn check_result(v: &serde_json::Value, requests: &[String], base: &str) {
    let r: bloatlab_results::TestResult = serde_json::from_value(v.clone()).expect("the CLI's result schema");
    assert_eq!(r.client, bloatlab_results::ClientKind::Browser);
    assert!(r.metadata.probe_timestamps.starts_with("probes: a WebRTC data channel"), "{}", r.metadata.probe_timestamps);
    assert!(r.metadata.user_agent.as_deref().is_some_and(|u| u.contains("Chrome")));
    let idle = r.idle.as_ref().expect("an idle phase");
    assert!(idle.summary.latency.received >= 80, "{:?}", idle.summary.latency);
    let names: Vec<(u32, u32)> = r.scenarios.iter().map(|p| (p.uploads, p.downloads)).collect();
    assert_eq!(names.len(), 3, "{names:?}");
    assert!(names[0].0 == 0 && names[0].1 >= 4 && names[1].0 >= 4 && names[1].1 == 0 && names[2].0 >= 3 && names[2].1 >= 3, "{names:?}");
    for p in &r.scenarios {
        // >= 100 probes in each loaded phase, answered; TCP exchanges beside them
        assert!(p.summary.latency.received >= 100, "{}: {:?}", p.name, p.summary.latency);
        assert!(p.rr.len() >= 100, "{}: {} WebSocket exchanges", p.name, p.rr.len());
        assert!(p.summary.owd_up_p50_ms.is_some() && p.summary.owd_down_p50_ms.is_some(), "{}: one-way delays", p.name);
        if p.downloads > 0 {
            assert!(p.summary.download_bps > 1e8, "{}: {} bit/s down on loopback", p.name, p.summary.download_bps);
            assert!(p.flows.iter().any(|f| f.direction == bloatlab_results::Direction::Down && !f.tcp_info.is_empty()), "{}: the server's TCP_INFO", p.name);
        }
        if p.uploads > 0 {
            assert!(p.summary.upload_bps > 1e8, "{}: {} bit/s up on loopback", p.name, p.summary.upload_bps);
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
