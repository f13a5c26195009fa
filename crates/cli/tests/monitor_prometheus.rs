//! `bloatlab monitor --metrics` scraped by a real Prometheus (Debian's
//! `prometheus`): the series arrive labelled by target (and direction),
//! every query of the shipped Grafana dashboard (dashboards/bloatlab.json)
//! returns data from that Prometheus, and the shipped alert rules pass
//! `promtool check rules` and their unit tests (`promtool test rules`).
mod common;
use bloatlab_host::process::Signal;
use common::{exe, TestServer};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn tool(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join(name)).find(|p| p.is_file())
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// GET http://addr/path: (status, content type, body).
fn get(addr: &str, path: &str) -> (u16, String, String) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").unwrap();
    let mut raw = vec![];
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8_lossy(&raw).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let ctype = head.lines().find_map(|l| l.to_ascii_lowercase().strip_prefix("content-type:").map(|v| v.trim().to_string())).unwrap_or_default();
    let body = if head.to_ascii_lowercase().contains("transfer-encoding: chunked") { dechunk(body) } else { body.to_string() };
    (status, ctype, body)
}

fn dechunk(mut b: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = b.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        b = &rest[n + 2..];
    }
    out
}

fn encode(q: &str) -> String {
    q.bytes().map(|b| if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") }).collect()
}

/// A Prometheus instant query: the result vector.
fn query(prom: &str, q: &str) -> Vec<serde_json::Value> {
    let (st, _, body) = get(prom, &format!("/api/v1/query?query={}", encode(q)));
    assert_eq!(st, 200, "{q}: {body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["status"], "success", "{q}: {body}");
    v["data"]["result"].as_array().cloned().unwrap_or_default()
}

struct Killed(Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn prometheus_scrapes_the_monitor_and_the_dashboard_and_rules_hold() {
    let (Some(prometheus), Some(promtool)) = (tool("prometheus"), tool("promtool")) else {
        bloatlab_testkit::cannot_run("prometheus_scrapes_the_monitor", "no prometheus/promtool on PATH (apt-get install prometheus)");
        return;
    };
    let _g = common::serial();
    // the alert rules: valid, and their unit tests pass
    let dash = repo().join("dashboards");
    for args in [&["check", "rules", "bloatlab-alerts.yml"][..], &["test", "rules", "bloatlab-alerts.test.yml"]] {
        let o = Command::new(&promtool).args(args).current_dir(&dash).output().unwrap();
        assert!(o.status.success(), "promtool {args:?}: {}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    }

    let srv = TestServer::start(&["--no-rpm", "--no-web"]);
    let live = srv.addr();
    let dead = format!("127.0.0.1:{}", free_port());
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m.sqlite");
    let mport = free_port();
    let maddr = format!("127.0.0.1:{mport}");
    let mut mon = Command::new(exe())
        .args(["monitor", &live, &dead, "ping:127.0.0.1", "--every", "25s", "--jitter", "0%", "--round", "1s", "--probe-every", "100ms", "--db", db.to_str().unwrap(), "--metrics", &maddr])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let out = BufReader::new(mon.stdout.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in out.lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let mon = Killed(mon);

    // Prometheus scraping it every second
    let pport = free_port();
    let prom = format!("127.0.0.1:{pport}");
    let cfg = dir.path().join("prometheus.yml");
    std::fs::write(&cfg, format!("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: bloatlab\n    static_configs:\n      - targets: ['{maddr}']\n")).unwrap();
    let p = Command::new(&prometheus)
        .arg(format!("--config.file={}", cfg.display()))
        .arg(format!("--storage.tsdb.path={}", dir.path().join("tsdb").display()))
        .arg(format!("--web.listen-address={prom}"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("prometheus.log")).unwrap())
        .spawn()
        .unwrap();
    let _p = Killed(p);

    // two measured runs of the live server (a failure of the dead one between);
    // a loaded test takes about 20 s: every 25 s leaves the line at rest
    // between them, for latency-only rounds with pings in it (the rounds
    // wholly within a loaded test are not kept, and the monitor says so)
    let end = Instant::now() + Duration::from_secs(100);
    let mut measured = 0;
    let mut pinged = false;
    let mut left_out = false;
    let mut lines = vec![];
    while measured < 2 || !pinged || !left_out {
        let l = rx.recv_timeout(end.saturating_duration_since(Instant::now())).unwrap_or_else(|_| panic!("no runs: {lines:#?}"));
        eprintln!("monitor: {l}");
        if l.contains(&format!(" {live} ")) && l.contains("idle") {
            measured += 1;
        }
        pinged |= l.contains("ping:127.0.0.1 -: idle 0.");
        // (the rounds within the first loaded test, in one line)
        left_out |= l.contains(" ping:127.0.0.1 1") && l.contains(" round(s) to ") && l.contains(" not kept: 1") && l.contains("0 probe(s) went out while a loaded test of this monitor ran, fewer than 2 outside one");
        lines.push(l);
    }
    assert!(lines.iter().any(|l| l == &format!("Prometheus metrics at http://{maddr}/metrics")), "{lines:#?}");

    // the exposition itself: OpenMetrics text, labelled by target
    let (st, ctype, body) = get(&maddr, "/metrics");
    assert_eq!(st, 200);
    assert!(ctype.starts_with("application/openmetrics-text"), "{ctype}");
    assert!(body.ends_with("# EOF\n"), "{body}");
    for want in [
        format!("bloatlab_up{{target=\"{live}\"}} 1"),
        format!("bloatlab_up{{target=\"{dead}\"}} 0"),
        format!("bloatlab_goodput_bits_per_second{{target=\"{live}\",direction=\"download\"}}"),
        format!("bloatlab_failures_total{{target=\"{dead}\",reason=\"refused\"}}"),
        "# TYPE bloatlab_added_latency_seconds gauge".to_string(),
        "bloatlab_build_info{version=".to_string(),
        // the latency-only target: its rounds' median and loss
        "bloatlab_idle_latency_seconds{target=\"ping:127.0.0.1\"} ".to_string(),
        "bloatlab_up{target=\"ping:127.0.0.1\"} 1".to_string(),
    ] {
        assert!(body.contains(&want), "no `{want}` in:\n{body}");
    }
    assert_eq!(get(&maddr, "/").0, 404);

    // Prometheus has the series: wait for a scrape after the second run
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = query(&prom, &format!("bloatlab_runs_total{{target=\"{live}\"}}"));
        if r.first().and_then(|s| s["value"][1].as_str()).and_then(|v| v.parse::<f64>().ok()).is_some_and(|v| v >= 2.0) {
            break;
        }
        assert!(Instant::now() < deadline, "Prometheus did not scrape the monitor: {r:?}");
        std::thread::sleep(Duration::from_millis(500));
    }
    let added = query(&prom, "bloatlab_added_latency_seconds");
    assert_eq!(added.len(), 1, "{added:?}");
    assert_eq!(added[0]["metric"]["target"], live.as_str());
    let v: f64 = added[0]["value"][1].as_str().unwrap().parse().unwrap();
    let row = &mut bloatlab_store::sqlite::Sqlite::open_read(&db).unwrap();
    use bloatlab_store::Store;
    let rows = row.rows(&bloatlab_store::Query { target: Some(live.clone()), ..Default::default() }).unwrap();
    // the gauge is the last measured run's number, in seconds
    let last = rows.iter().rev().find(|r| r.failure.is_none()).unwrap();
    assert!((v - last.added_ms.unwrap() / 1e3).abs() < 1e-9, "{v} vs {:?} ms", last.added_ms);

    // every query of the dashboard returns data (its variables as Grafana
    // would fill them: all targets, an hour's range)
    let d: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dash.join("bloatlab.json")).unwrap()).unwrap();
    let mut n = 0;
    for panel in d["panels"].as_array().unwrap() {
        for t in panel["targets"].as_array().unwrap() {
            let expr = t["expr"].as_str().unwrap().replace("$target", ".*").replace("$__rate_interval", "1m").replace("$__range", "1h");
            let r = query(&prom, &expr);
            assert!(!r.is_empty(), "panel {:?}: `{expr}` returned nothing", panel["title"]);
            n += 1;
        }
    }
    assert!(n >= 10, "{n} panel queries");
    // the dashboard's target variable lists both targets
    let (st, _, body) = get(&prom, "/api/v1/label/target/values");
    assert_eq!(st, 200);
    assert!(body.contains(&live) && body.contains(&dead), "{body}");

    let mut mon = mon;
    assert!(bloatlab_host::process::signal_child(&mon.0, Signal::Term));
    let end = Instant::now() + Duration::from_secs(15);
    let st = loop {
        if let Some(s) = mon.0.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < end, "the monitor did not stop");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(st.success(), "{st:?}");
}
