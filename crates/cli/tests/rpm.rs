//! The IETF responsiveness (RPM) service and client, end to end on
//! loopback: bloatlab's client against bloatlab's server, the shared secret,
//! the server's bounds, and interop with goresponsiveness / goserver where
//! they are installed (skipped with the reason otherwise).
mod common;
use common::{run, serial, TestServer};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Short stages: 250 ms intervals, MAD 4, at most 4 s per stage.
const QUICK: &[&str] = &["-k", "-q", "--interval", "250ms", "--max-stage", "4s", "--probe-rate", "20"];

fn check_stage(s: &serde_json::Value, dir: &str) {
    assert_eq!(s["direction"], dir);
    let rpm = s["rpm"].as_f64().unwrap_or_else(|| panic!("no RPM in {s:#}"));
    let parts: Vec<f64> = ["tcp_foreign_ms", "tls_foreign_ms", "http_foreign_ms", "http_self_ms"]
        .iter()
        .map(|k| s[k].as_f64().unwrap_or_else(|| panic!("no {k}")))
        .collect();
    assert!(parts.iter().all(|&p| p > 0.0 && p < 5000.0), "{parts:?}");
    // The draft's formula, recomputed from the stage's own parts.
    let weighted = (parts[0] + parts[1] + parts[2]) / 6.0 + parts[3] / 2.0;
    assert!((rpm - 60000.0 / weighted).abs() < 1e-6 * rpm, "rpm {rpm} vs parts {parts:?}");
    assert!(s["goodput_bps"].as_f64().unwrap() > 1e6, "{}", s["goodput_bps"]);
    assert!(s["connections"].as_u64().unwrap() >= 1);
    let probes = s["probes"].as_array().unwrap();
    for kind in ["tcp_foreign", "tls_foreign", "http_foreign", "http_self"] {
        assert!(probes.iter().any(|p| p["kind"] == kind), "no {kind} probe");
    }
    let iv = s["intervals"].as_array().unwrap();
    assert!(iv.len() >= 4, "at least MAD intervals: {}", iv.len());
    assert!(["high", "low"].contains(&s["confidence"].as_str().unwrap()));
    if s["confidence"] == "low" {
        assert!(s["low_because"].as_str().unwrap().contains("not stable"), "{s:#}");
    }
}

#[test]
fn the_rpm_client_measures_the_rpm_server_and_the_server_lets_go_of_everything() {
    let _g = serial();
    let srv = TestServer::start(&[]);
    let url = srv.rpm_url.clone().expect("the server prints its RPM URL");
    let base = srv.threads_and_fds();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rpm.json");
    let mut args = vec!["rpm", &url, "--json", out.to_str().unwrap(), "--report"];
    args.extend_from_slice(QUICK);
    let o = run(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let html = std::fs::read_to_string(dir.path().join("rpm.html")).expect("--report writes rpm.html next to the JSON");
    assert!(html.contains("<svg") && html.contains("download RPM") && html.contains("upload RPM"));
    // `bloatlab report` recognises an RPM result too.
    std::fs::remove_file(dir.path().join("rpm.html")).unwrap();
    let o2 = run(&["report", out.to_str().unwrap(), "-q"]);
    assert!(o2.status.success(), "{}", String::from_utf8_lossy(&o2.stderr));
    assert!(dir.path().join("rpm.html").exists());
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(table.contains("download") && table.contains("upload") && table.contains("RPM"), "{table}");
    let r = json(&out);
    assert_eq!(r["method"]["specification"], "draft-ietf-ippm-responsiveness-08");
    assert_eq!(r["http_version"], "HTTP/2");
    assert_eq!(r["tls"]["verified"], false);
    assert_eq!(r["tls"]["certificate_sha256"].as_str().unwrap().len(), 95);
    let stages = r["stages"].as_array().unwrap();
    assert_eq!(stages.len(), 2);
    check_stage(&stages[0], "download");
    check_stage(&stages[1], "upload");
    // Every connection (load, probes, configuration) is closed and logged.
    let now = srv.back_to(base, Duration::from_secs(5));
    assert_eq!(now, base, "threads and fds after the RPM test: {now:?}, before {base:?}");
    let log = srv.log();
    let conns: Vec<serde_json::Value> =
        log.lines().filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()).filter(|v| v["event"] == "rpm_connection").collect();
    assert!(conns.iter().any(|c| c["bytes_down"].as_u64().unwrap_or(0) > 1_000_000), "a download connection logged");
    assert!(conns.iter().any(|c| c["bytes_up"].as_u64().unwrap_or(0) > 1_000_000), "an upload connection logged");
    assert!(conns.iter().all(|c| c["protocol"] == "h2" || c.get("protocol").is_none()), "{conns:?}");
}

#[test]
fn bloatlab_test_rpm_runs_the_method_against_the_same_server_pinning_the_announced_certificate() {
    let _g = serial();
    let srv = TestServer::start(&[]);
    let printed = srv.rpm_sha256.clone().expect("the server prints its certificate's SHA-256");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.json");
    let o = run(&["test", &srv.addr(), "-s", "1u0d", "-d", "1s", "--idle", "500ms", "--rpm=download", "-q", "--json", out.to_str().unwrap(), "--report"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = json(&out);
    assert_eq!(r["metadata"]["server_rpm"]["certificate_sha256"], printed.as_str(), "the server announced the certificate it printed");
    let rpm = &r["rpm"];
    assert_eq!(rpm["tls"]["certificate_sha256"], printed.as_str(), "the client met the announced certificate");
    assert_eq!(rpm["tls"]["verified"], true);
    assert_eq!(rpm["tls"]["pinned"], true);
    let stages = rpm["stages"].as_array().unwrap();
    assert_eq!(stages.len(), 1, "only the stage asked for");
    check_stage(&stages[0], "download");
    // The scenarios ran first, as usual.
    assert_eq!(r["scenarios"][0]["name"], "1u0d");
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(table.contains("IETF RPM: download") && table.contains("pinned by SHA-256"), "{table}");
    let html = std::fs::read_to_string(dir.path().join("t.html")).unwrap();
    assert!(html.contains("Responsiveness (IETF RPM)") && html.contains("download RPM"), "the report has the RPM section");
}

#[test]
fn bloatlab_test_rpm_against_a_server_without_rpm_fails_before_any_load() {
    let _g = serial();
    let srv = TestServer::start(&["--no-rpm"]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.json");
    let t = std::time::Instant::now();
    let o = run(&["test", &srv.addr(), "-s", "1u0d", "-d", "5s", "--rpm", "-q", "--json", out.to_str().unwrap()]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("--rpm") && e.contains("serves no RPM endpoints"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(4), "it refused after {:?}: the 5 s scenario ran", t.elapsed());
    assert!(!out.exists(), "no result was written");
    // `--rpm` takes its stages with `=`: a following HOST is not a stage.
    let o = run(&["test", "--rpm=sideways", &srv.addr()]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("not an RPM stage (download, upload, bidirectional)"), "{e}");
}

#[test]
fn a_pinned_certificate_is_the_only_one_accepted() {
    let _g = serial();
    let srv = TestServer::start(&[]);
    let url = srv.rpm_url.clone().unwrap();
    let right = srv.rpm_sha256.clone().unwrap();
    let mut wrong: Vec<char> = right.chars().collect();
    wrong[0] = if wrong[0] == '0' { '1' } else { '0' };
    let wrong: String = wrong.into_iter().collect();
    let o = run(&["rpm", &url, "-q", "--interval", "250ms", "--max-stage", "2s", "--pin-sha256", &wrong]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("not the pinned one") && e.contains(&right), "{e}");
    // The printed one in plain upper-case hex: accepted, and recorded as pinned.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let plain = right.replace(':', "").to_uppercase();
    let o = run(&["rpm", &url, "-q", "--interval", "250ms", "--max-stage", "2s", "--mad", "2", "--directions", "download", "--pin-sha256", &plain, "--json", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(json(&out)["tls"]["pinned"], true);
    // A pin and --insecure contradict each other.
    let o = run(&["rpm", &url, "-k", "--pin-sha256", &plain]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("--pin-sha256 and --insecure exclude each other"), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn an_unwritable_json_path_is_refused_before_measuring() {
    let o = run(&["rpm", "https://127.0.0.1:9", "-k", "--json", "/nonexistent-dir/x.json"]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("does not exist") && !e.contains("connect"), "{e}");
}

#[test]
fn without_insecure_a_self_signed_server_is_refused_with_the_reason() {
    let _g = serial();
    let srv = TestServer::start(&[]);
    let url = srv.rpm_url.clone().unwrap();
    let o = run(&["rpm", &url, "-q", "--interval", "250ms", "--max-stage", "2s"]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("TLS") && e.to_lowercase().contains("certificate") && e.contains("--insecure") && e.contains("--pin-sha256"), "{e}");
}

#[test]
fn a_server_with_a_secret_serves_rpm_only_under_the_path_the_secret_grants() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "a shared secret of some length\n").unwrap();
    let wrong = dir.path().join("wrong");
    std::fs::write(&wrong, "another secret of some length\n").unwrap();
    let srv = TestServer::start(&["--secret-file", secret.to_str().unwrap()]);
    let printed = srv.rpm_url.clone().unwrap();
    assert!(printed.contains("/nq-"), "the operator's URL carries the capability path: {printed}");
    let base_url = printed.split("/nq-").next().unwrap().to_string();
    // No secret: the server says what is missing.
    let o = run(&["rpm", &base_url, "-k", "-q", "--directions", "download", "--interval", "250ms", "--max-stage", "2s"]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("HTTP 403") && e.contains("shared secret"), "{e}");
    // The wrong secret: the same refusal.
    let o = run(&["rpm", &base_url, "-k", "-q", "--directions", "download", "--interval", "250ms", "--max-stage", "2s", "--secret-file", wrong.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("HTTP 403"));
    // The right one: a measurement, and the result does not show the path.
    let out = dir.path().join("r.json");
    let mut args = vec!["rpm", &base_url, "--directions", "download", "--secret-file", secret.to_str().unwrap(), "--json", out.to_str().unwrap()];
    args.extend_from_slice(QUICK);
    let o = run(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = json(&out);
    check_stage(&r["stages"][0], "download");
    let text = std::fs::read_to_string(&out).unwrap();
    let cap = &printed[printed.find("/nq-").unwrap()..printed.find("/.well-known").unwrap()];
    assert!(!text.contains(cap), "the result must not leak the capability path");
}

#[test]
fn the_rpm_endpoints_count_against_the_servers_per_source_limit() {
    let _g = serial();
    // Four silent TCP connections fill this source's quota of four (held up
    // to the 5 s TLS handshake deadline): every further connection from the
    // address is refused before any TLS work, and the client says so.
    let srv = TestServer::start(&["--max-conns-per-source", "4", "--max-flows", "2"]);
    let url = srv.rpm_url.clone().unwrap();
    let port: u16 = url.split(':').nth(2).unwrap().split('/').next().unwrap().parse().unwrap();
    let held: Vec<std::net::TcpStream> = (0..4).map(|_| std::net::TcpStream::connect(("127.0.0.1", port)).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(200));
    // A burst of refused connections within one second: one log line.
    for _ in 0..20 {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut b = [0u8; 1];
        // Refused = closed by the server at once, with nothing sent.
        assert!(matches!(std::io::Read::read(&mut s, &mut b), Ok(0) | Err(_)), "a connection over the quota was served");
    }
    let o = run(&["rpm", &url, "-k", "-q", "--interval", "250ms", "--max-stage", "2s", "--directions", "download"]);
    assert!(!o.status.success(), "the client measured through a full quota");
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("before the TLS handshake") && e.contains("refusing"), "the client says why it failed: {e}");
    drop(held);
    // The refusals after the first line are written once its second is up.
    std::thread::sleep(Duration::from_millis(1300));
    let log = srv.log();
    assert!(log.contains("\"rpm_refused\"") && log.contains("--max-conns-per-source"), "the server logs why it refused\n{log}");
    // At most one line a second, each counting the refusals since the last.
    let lines: Vec<serde_json::Value> =
        log.lines().filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()).filter(|v| v["event"] == "rpm_refused").collect();
    let total: u64 = lines.iter().map(|v| v["refused"].as_u64().unwrap()).sum();
    assert!(lines.len() <= 3, "{} refusal lines in about 2 s: not rate-limited\n{log}", lines.len());
    assert!(total >= 20, "{} refusals logged of at least 20\n{log}", total);
    // Once the holders are gone the same source is served again.
    let o = run(&["rpm", &url, "-k", "-q", "--directions", "download", "--interval", "250ms", "--max-stage", "2s", "--max-connections", "2"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// Four sources dripping silent TLS handshakes (480 at a time, more than the 256
/// handshake slots between them, each connection held to the 5 s deadline
/// and reopened) cannot lock out a fifth: it takes its share, each slot cut
/// from the biggest holder, and a real `bloatlab rpm` from it runs.
#[test]
fn handshake_slots_are_shared_fairly_among_sources() {
    let _g = serial();
    let srv = TestServer::start(&[]);
    let url = srv.rpm_url.clone().unwrap();
    let port: u16 = url.split(':').nth(2).unwrap().split('/').next().unwrap().parse().unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let drips: Vec<_> = (2..6)
        .map(|i| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let src: std::net::SocketAddr = format!("127.0.0.{i}:0").parse().unwrap();
                let to: std::net::SocketAddr = ("127.0.0.1".parse::<std::net::IpAddr>().unwrap(), port).into();
                let connect = || -> Option<std::net::TcpStream> {
                    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).ok()?;
                    s.bind(&src.into()).ok()?;
                    s.connect_timeout(&to.into(), Duration::from_secs(1)).ok()?;
                    let s: std::net::TcpStream = s.into();
                    s.set_nonblocking(true).ok()?;
                    Some(s)
                };
                let mut held: Vec<std::net::TcpStream> = vec![];
                let mut opened = 0u32;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    // drop the ones the server closed (refused or timed out), reopen up to 120
                    held.retain(|s| matches!(std::io::Read::read(&mut &*s, &mut [0u8; 64]), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock));
                    while held.len() < 120 {
                        match connect() {
                            Some(s) => {
                                held.push(s);
                                opened += 1;
                            }
                            None => break,
                        }
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                opened
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1500));
    let o = run(&["rpm", &url, "-k", "-q", "--directions", "download", "--interval", "250ms", "--max-stage", "3s", "--max-connections", "2"]);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let opened: u32 = drips.into_iter().map(|d| d.join().unwrap()).sum();
    assert!(opened >= 480, "the drip opened only {opened} connections");
    assert!(o.status.success(), "a fifth source was locked out: {}", String::from_utf8_lossy(&o.stderr));
    std::thread::sleep(Duration::from_millis(1200));
    let log = srv.log();
    // The slots were full meanwhile (the drip's own refusals say so; a cut
    // for the newcomer is logged in the same rate-limited refusal lines).
    assert!(log.contains("256 connections are in their TLS handshake"), "the handshake slots never filled\n{log}");
}

/// A peer tool: an env var naming it, else PATH, else ~/go/bin.
fn peer(env: &str, name: &str) -> Option<PathBuf> {
    if let Ok(p) = std::env::var(env) {
        return Some(PathBuf::from(p));
    }
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect()).unwrap_or_default();
    if let Some(h) = std::env::var_os("HOME") {
        dirs.push(PathBuf::from(h).join("go/bin"));
    }
    dirs.into_iter().map(|d| d.join(name)).find(|p| p.is_file())
}

#[test]
fn goresponsiveness_measures_the_bloatlab_rpm_server() {
    let Some(nq) = peer("BLOATLAB_GORESPONSIVENESS", "networkQuality").or_else(|| peer("BLOATLAB_GORESPONSIVENESS", "goresponsiveness")) else {
        bloatlab_testkit::cannot_run("goresponsiveness_measures_the_bloatlab_rpm_server", "goresponsiveness (networkQuality) is not installed (.ci/peers.sh builds it from ../shared/peers; or BLOATLAB_GORESPONSIVENESS=PATH)");
        return;
    };
    let _g = serial();
    let srv = TestServer::start(&[]);
    let url = srv.rpm_url.clone().unwrap();
    let port = url.split(':').nth(2).unwrap().split('/').next().unwrap().to_string();
    let o = Command::new(&nq)
        .args(["-config", "127.0.0.1", "-port", &port, "-path", ".well-known/nq", "-rpm.timeout", "8"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
    // Both stages carried load and produced a finite RPM.
    let through: Vec<&str> = text.lines().filter(|l| l.contains("Throughput:")).collect();
    assert_eq!(through.len(), 2, "{text}");
    for l in &through {
        assert!(!l.contains(" 0.000 Mbps"), "a stage carried nothing: {text}");
    }
    // The final RPM over both stages is finite, and so is each stage's,
    // except where goresponsiveness itself says the stage's responsiveness
    // did not stabilize: it then trims to the bucket bounds of its
    // responsiveness stabilizer, which are (0, 0) when no aggregate
    // completed (stabilizer/algorithm.go GetBounds), leaving no sample (NaN).
    let fin = text.lines().find(|l| l.starts_with("Final RPM:") && l.contains("Trimmed Mean")).unwrap_or_else(|| panic!("no final RPM: {text}"));
    assert!(!fin.contains("NaN") && !fin.contains("Inf"), "{text}");
    for stage in text.split("========").filter(|s| s.contains("Throughput:")) {
        let rpm = stage.lines().find(|l| l.contains("RPM:") && l.contains("Trimmed Mean")).unwrap_or_else(|| panic!("a stage without RPM: {text}"));
        let unstable = stage.lines().any(|l| l.contains("did not run to stability") && l.contains("responsiveness"));
        assert!(unstable || !(rpm.contains("NaN") || rpm.contains("Inf")), "{text}");
    }
    assert!(!srv.log().contains("\"rpm_refused\""), "{}", srv.log());
}

#[test]
fn the_bloatlab_rpm_client_measures_goserver() {
    let Some(gs) = peer("BLOATLAB_GOSERVER", "networkqualityd") else {
        bloatlab_testkit::cannot_run("the_bloatlab_rpm_client_measures_goserver", "goserver (networkqualityd) is not installed (.ci/peers.sh builds it from ../shared/peers; or BLOATLAB_GOSERVER=PATH)");
        return;
    };
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    // A free port for it: bind one, release it, hand it over.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port().to_string();
    let mut child = Command::new(&gs)
        .args(["-create-cert", "-listen-addr", "127.0.0.1", "-public-port", &port, "-config-name", "127.0.0.1"])
        .current_dir(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let up = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(100));
        std::net::TcpStream::connect(("127.0.0.1", port.parse::<u16>().unwrap())).is_ok()
    });
    assert!(up, "goserver did not start");
    let out = dir.path().join("r.json");
    let url = format!("https://127.0.0.1:{port}/.well-known/nq");
    let mut args = vec!["rpm", &url, "--json", out.to_str().unwrap()];
    args.extend_from_slice(QUICK);
    let o = run(&args);
    let _ = child.kill();
    let _ = child.wait();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = json(&out);
    check_stage(&r["stages"][0], "download");
    check_stage(&r["stages"][1], "upload");
}
