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

/// A `bloatlab server` on loopback with ephemeral ports; its browser-test URL.
struct Srv {
    child: Child,
    url: String,
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
    let mut url = String::new();
    for line in out.lines() {
        let line = line.unwrap();
        if let Some(rest) = line.strip_prefix("bloatlab server browser test at ") {
            url = rest.split(", ").next().unwrap().to_string();
            break;
        }
    }
    assert!(url.starts_with("http://127.0.0.1:"), "no browser-test URL printed: {url:?}");
    Srv { child, url, _dir: dir }
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
}
