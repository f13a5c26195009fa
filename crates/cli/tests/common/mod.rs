//! Shared helpers for the binary's integration tests.
#![allow(dead_code)]
pub mod monitor;

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};

/// Engine tests run loopback transfers at full speed: one at a time, so each
/// measures with the machine to itself (timing checks, probe schedules).
pub static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn exe() -> &'static str {
    env!("CARGO_BIN_EXE_bloatlab")
}

/// A `bloatlab server` on loopback with an ephemeral port; killed on drop.
pub struct TestServer {
    pub child: Child,
    pub port: u16,
    stderr_path: std::path::PathBuf,
    host: String,
    /// The RPM configuration URL the server printed (None with --no-rpm).
    pub rpm_url: Option<String>,
    /// The SHA-256 of the RPM certificate the server printed.
    pub rpm_sha256: Option<String>,
    _dir: tempfile::TempDir,
}

impl TestServer {
    pub fn start(extra: &[&str]) -> TestServer {
        Self::start_on("127.0.0.1", extra)
    }
    pub fn start_on(bind: &str, extra: &[&str]) -> TestServer {
        let dir = tempfile::tempdir().unwrap();
        let stderr_path = dir.path().join("server.log");
        let errf = std::fs::File::create(&stderr_path).unwrap();
        // The RPM endpoints on an ephemeral port too (tests run in parallel),
        // unless the test chose.
        let rpm_default: &[&str] = if extra.iter().any(|a| a.starts_with("--rpm-") || *a == "--no-rpm") { &[] } else { &["--rpm-port", "0"] };
        // the browser test on a port of its own too (tests run side by side)
        let web_default: &[&str] = if extra.iter().any(|a| a.starts_with("--web") || *a == "--no-web") { &[] } else { &["--web-port", "0"] };
        let mut child = Command::new(exe())
            .args(["server", "--bind", bind, "--port", "0"])
            .args(rpm_default)
            .args(web_default)
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(errf)
            .spawn()
            .expect("spawn bloatlab server");
        let mut line = String::new();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        out.read_line(&mut line).unwrap();
        // "bloatlab server RPM endpoints (...) at https://127.0.0.1:PORT/.well-known/nq; ..."
        let (rpm_url, rpm_sha256) = if extra.contains(&"--no-rpm") {
            (None, None)
        } else {
            let mut l2 = String::new();
            out.read_line(&mut l2).unwrap();
            (
                l2.split_whitespace().find(|w| w.starts_with("https://")).map(|w| w.trim_end_matches([';', ',']).to_string()),
                l2.split_once("SHA-256 ").map(|(_, f)| f.trim().to_string()),
            )
        };
        // "bloatlab server listening on 127.0.0.1:PORT (tcp+udp)"
        let port = line
            .split_whitespace()
            .find_map(|w| w.trim_end_matches(',').rsplit_once(':').and_then(|(_, p)| p.parse().ok()))
            .unwrap_or_else(|| panic!("no port in {line:?}"));
        TestServer { child, port, stderr_path, _dir: dir, host: bind.to_string(), rpm_url, rpm_sha256 }
    }
    pub fn addr(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
    pub fn log(&self) -> String {
        let mut s = String::new();
        std::fs::File::open(&self.stderr_path).unwrap().read_to_string(&mut s).unwrap();
        s
    }
}

impl TestServer {
    /// The server's threads and open descriptors, from /proc.
    pub fn threads_and_fds(&self) -> (usize, usize) {
        let pid = self.child.id();
        let n = |d: String| std::fs::read_dir(d).map(|r| r.count()).unwrap_or(0);
        (n(format!("/proc/{pid}/task")), n(format!("/proc/{pid}/fd")))
    }

    /// Wait until the server is back at `base` threads and descriptors (or
    /// `within` passed); returns what it has then.
    pub fn back_to(&self, base: (usize, usize), within: std::time::Duration) -> (usize, usize) {
        let t = std::time::Instant::now();
        loop {
            let now = self.threads_and_fds();
            if now == base || t.elapsed() > within {
                return now;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn run(args: &[&str]) -> std::process::Output {
    Command::new(exe()).args(args).output().expect("run bloatlab")
}
