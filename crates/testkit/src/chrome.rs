//! Headless Chromium driven over the DevTools protocol, for tests of the
//! browser page: start it (optionally inside a network namespace), open a
//! URL, wait for a JavaScript expression to yield, and list every request
//! the page made. Anything not addressed to the allowed host goes to a
//! closed loopback proxy, so a stray third-party request fails and shows.
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The Chromium binary on PATH, if any.
pub fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"]
        .iter()
        .find_map(|n| std::env::split_paths(&path).map(|d| d.join(n)).find(|p| p.is_file()))
}

/// The flags every headless run of the suite uses: no sandbox (root), no
/// GPU, nothing in the background, and anything that would leave the
/// machine sent to a closed loopback port.
pub const HEADLESS_FLAGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--no-pings",
    "--disable-breakpad",
    "--hide-scrollbars",
    "--proxy-server=127.0.0.1:9",
];

/// A running headless Chromium.
pub struct Chrome {
    child: Child,
    _profile: tempfile_dir::Dir,
    port: u16,
    netns: Option<String>,
}

/// How to look at a page: its color scheme, and where to save a full-page
/// screenshot once it is done.
#[derive(Debug, Clone, Default)]
pub struct Look {
    pub dark: bool,
    pub screenshot: Option<PathBuf>,
    /// Viewport width for the screenshot (a phone: 390), or the window's.
    pub width: Option<u32>,
}

/// What a page did.
#[derive(Debug, Clone)]
pub struct PageRun {
    /// The expression's value (JSON), or None on timeout.
    pub value: Option<serde_json::Value>,
    /// Every URL the page requested, in order.
    pub requests: Vec<String>,
    pub elapsed: Duration,
    /// Console messages and exceptions, for a failure's message.
    pub console: Vec<String>,
}

mod tempfile_dir {
    /// A temporary directory removed on drop (no extra crate).
    pub struct Dir(pub std::path::PathBuf);
    impl Dir {
        pub fn new() -> Dir {
            use std::sync::atomic::{AtomicU32, Ordering};
            static N: AtomicU32 = AtomicU32::new(0);
            let p = std::env::temp_dir().join(format!("bloatlab-chrome-{}-{}", std::process::id(), N.fetch_add(1, Ordering::SeqCst)));
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir_all(&p).expect("create a Chromium profile directory");
            Dir(p)
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

impl Chrome {
    /// Start Chromium (in network namespace `netns` when given) at
    /// `width`x`height`; `allow_host` is the one host it may reach directly.
    pub fn start(bin: &std::path::Path, netns: Option<&str>, allow_host: &str, width: u32, height: u32) -> Result<Chrome, String> {
        Chrome::start_with(bin, netns, allow_host, width, height, &[])
    }

    /// [`Chrome::start`] with extra command-line flags (e.g.
    /// `--ignore-certificate-errors` for a self-signed server).
    pub fn start_with(bin: &std::path::Path, netns: Option<&str>, allow_host: &str, width: u32, height: u32, extra: &[&str]) -> Result<Chrome, String> {
        let profile = tempfile_dir::Dir::new();
        let mut c = match netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]).arg(bin);
                c
            }
            None => Command::new(bin),
        };
        c.args(HEADLESS_FLAGS)
        .args(["--remote-debugging-port=0", "--remote-allow-origins=*"])
        // the one host it may reach
        .arg(format!("--proxy-bypass-list={allow_host}"))
        .arg(format!("--window-size={width},{height}"))
        .arg(format!("--user-data-dir={}", profile.0.display()))
        .args(extra)
        .arg("about:blank")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        // Chromium is a family of processes: in a group of their own, so
        // ending the browser ends them all (renderers left running a test
        // page would load the machine for the tests after), and gone with
        // this process however it ends.
        std::os::unix::process::CommandExt::process_group(&mut c, 0);
        bloatlab_host::process::die_with_parent(&mut c, bloatlab_host::process::Signal::Kill);
        let child = c.spawn().map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
        let file = profile.0.join("DevToolsActivePort");
        let t0 = Instant::now();
        let port = loop {
            if let Some(p) = std::fs::read_to_string(&file).ok().and_then(|s| s.lines().next().and_then(|l| l.trim().parse::<u16>().ok())) {
                break p;
            }
            if t0.elapsed() > Duration::from_secs(30) {
                return Err("Chromium did not open its DevTools port within 30 s".into());
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        Ok(Chrome { child, _profile: profile, port, netns: netns.map(str::to_string) })
    }

    /// Open `url` and poll `expr` (a JavaScript expression) every 250 ms
    /// until it yields something other than null/undefined, or `timeout`.
    pub fn run(&self, url: &str, expr: &str, timeout: Duration) -> Result<PageRun, String> {
        self.run_with(url, expr, timeout, &Look::default())
    }

    /// [`Chrome::run`], then (once the expression yielded) a full-page
    /// screenshot as `look` says.
    pub fn run_with(&self, url: &str, expr: &str, timeout: Duration, look: &Look) -> Result<PageRun, String> {
        let (port, url, expr, look) = (self.port, url.to_string(), expr.to_string(), look.clone());
        let go = move || cdp_run(port, &url, &expr, timeout, &look);
        match &self.netns {
            Some(ns) => bloatlab_host::netns::in_netns(ns, go),
            None => go(),
        }
    }
}

impl Drop for Chrome {
    fn drop(&mut self) {
        bloatlab_host::process::signal_group(self.child.id(), bloatlab_host::process::Signal::Kill);
        let _ = self.child.wait();
    }
}

fn http_get(port: u16, path: &str) -> Result<String, String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("DevTools port: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(5))).map_err(|e| e.to_string())?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n").map_err(|e| e.to_string())?;
    let mut buf = vec![];
    let mut chunk = [0u8; 8192];
    // read the headers, then Content-Length bytes of body
    loop {
        let n = s.read(&mut chunk).map_err(|e| format!("DevTools {path}: {e}"))?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf).to_string();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let len = head.lines().find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").and_then(|v| v.trim().parse::<usize>().ok()));
            if len.is_some_and(|len| body.len() >= len) {
                return Ok(body.to_string());
            }
        }
    }
    let text = String::from_utf8_lossy(&buf).to_string();
    Ok(text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default())
}

/// The next DevTools message, or None when none came within the read timeout.
fn next_message<S: std::io::Read + std::io::Write>(ws: &mut tungstenite::WebSocket<S>) -> Result<Option<serde_json::Value>, String> {
    match ws.read() {
        Ok(tungstenite::Message::Text(t)) => Ok(Some(serde_json::from_str(t.as_str()).unwrap_or_default())),
        Ok(_) => Ok(None),
        Err(tungstenite::Error::Io(e)) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => Ok(None),
        Err(e) => Err(format!("DevTools: {e}")),
    }
}

fn cdp_run(port: u16, url: &str, expr: &str, timeout: Duration, look: &Look) -> Result<PageRun, String> {
    // the page target may take a moment to appear
    let mut list = serde_json::Value::Null;
    for _ in 0..40 {
        list = serde_json::from_str(&http_get(port, "/json/list")?).unwrap_or_default();
        if list.as_array().is_some_and(|a| a.iter().any(|t| t["type"] == "page")) {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let ws_url = list
        .as_array()
        .and_then(|a| a.iter().find(|t| t["type"] == "page"))
        .and_then(|t| t["webSocketDebuggerUrl"].as_str())
        .ok_or("no page target in Chromium")?
        .to_string();
    let (mut ws, _) = tungstenite::connect(ws_url.as_str()).map_err(|e| format!("DevTools WebSocket: {e}"))?;
    if let tungstenite::stream::MaybeTlsStream::Plain(s) = ws.get_ref() {
        let _ = s.set_read_timeout(Some(Duration::from_millis(250)));
    }
    let mut id = 0u64;
    let mut send = |ws: &mut tungstenite::WebSocket<_>, method: &str, params: serde_json::Value| -> Result<u64, String> {
        id += 1;
        ws.send(tungstenite::Message::text(serde_json::json!({"id": id, "method": method, "params": params}).to_string())).map_err(|e| e.to_string())?;
        Ok(id)
    };
    send(&mut ws, "Network.enable", serde_json::json!({}))?;
    if look.dark {
        send(&mut ws, "Emulation.setEmulatedMedia", serde_json::json!({"features": [{"name": "prefers-color-scheme", "value": "dark"}]}))?;
    }
    if let Some(w) = look.width {
        send(&mut ws, "Emulation.setDeviceMetricsOverride", serde_json::json!({"width": w, "height": 800, "deviceScaleFactor": 2, "mobile": true}))?;
    }
    send(&mut ws, "Runtime.enable", serde_json::json!({}))?;
    send(&mut ws, "Page.navigate", serde_json::json!({"url": url}))?;
    let t0 = Instant::now();
    let mut run = PageRun { value: None, requests: vec![], elapsed: Duration::ZERO, console: vec![] };
    let mut pending: Option<u64> = None;
    let mut last_poll = Instant::now() - Duration::from_secs(1);
    while t0.elapsed() < timeout {
        if pending.is_none() && last_poll.elapsed() >= Duration::from_millis(250) {
            let q = format!("(() => {{ const v = ({expr}); return v === undefined || v === null ? null : JSON.stringify(v); }})()");
            pending = Some(send(&mut ws, "Runtime.evaluate", serde_json::json!({"expression": q, "returnByValue": true}))?);
            last_poll = Instant::now();
        }
        let Some(v) = next_message(&mut ws)? else { continue };
        match v["method"].as_str() {
            Some("Network.requestWillBeSent") => run.requests.push(v["params"]["request"]["url"].as_str().unwrap_or("").to_string()),
            Some("Runtime.consoleAPICalled") => run.console.push(format!("console: {}", v["params"]["args"])),
            Some("Runtime.exceptionThrown") => run.console.push(format!("exception: {}", v["params"]["exceptionDetails"])),
            _ => {}
        }
        if pending.is_some() && v["id"].as_u64() == pending {
            pending = None;
            if let Some(s) = v["result"]["result"]["value"].as_str() {
                run.value = serde_json::from_str(s).ok();
                break;
            }
        }
    }
    run.elapsed = t0.elapsed();
    if let (Some(path), Some(_)) = (&look.screenshot, &run.value) {
        std::thread::sleep(Duration::from_millis(500)); // the last paint
        let id = send(&mut ws, "Page.captureScreenshot", serde_json::json!({"format": "png", "captureBeyondViewport": true}))?;
        let t1 = Instant::now();
        loop {
            if t1.elapsed() > Duration::from_secs(20) {
                return Err("no screenshot within 20 s".into());
            }
            let Some(v) = next_message(&mut ws)? else { continue };
            if v["id"].as_u64() == Some(id) {
                let data = v["result"]["data"].as_str().ok_or("no screenshot data")?;
                std::fs::write(path, base64::Engine::decode(&base64::engine::general_purpose::STANDARD, data).map_err(|e| format!("screenshot: {e}"))?).map_err(|e| format!("{}: {e}", path.display()))?;
                break;
            }
        }
    }
    let _ = ws.close(None);
    Ok(run)
}

