//! RPM interop through a lab bottleneck (10 Mbit/s, 100-packet FIFO, full
//! in 121 ms): goresponsiveness in the client namespace against the lab
//! server's RPM endpoints, and bloatlab's client against goserver in the
//! server namespace. Both must carry load at no more than the link's
//! payload rate (10 Mbit/s x 1448 / 1514 = 9.56 Mbit/s) and see the queue.
//! Skips, saying why, without root or without the peer tools (`go install`
//! of github.com/network-quality/goresponsiveness and .../goserver, or
//! BLOATLAB_GORESPONSIVENESS / BLOATLAB_GOSERVER).
mod lab_util;
use lab_util::*;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

fn peer(env: &str, names: &[&str]) -> Option<PathBuf> {
    if let Ok(p) = std::env::var(env) {
        return Some(PathBuf::from(p));
    }
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect()).unwrap_or_default();
    if let Some(h) = std::env::var_os("HOME") {
        dirs.push(PathBuf::from(h).join("go/bin"));
    }
    dirs.iter().flat_map(|d| names.iter().map(move |n| d.join(n))).find(|p| p.is_file())
}

/// Build lab `id` (10 Mbit/s, `queue`) without running a test and return
/// its server's address, read from the lab's printed commands.
fn kept_lab(id: &str, queue: &str) -> String {
    kept_lab_with_logs(id, queue).0
}

/// [`kept_lab`], and the folder of the lab's server logs.
fn kept_lab_with_logs(id: &str, queue: &str) -> (String, PathBuf) {
    let out = Command::new(EXE).args(["lab", "--no-run", "--id", id, "--rate", "10mbit", "--queue", queue]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    let logs = text
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("logs: "))
        .map(|d| PathBuf::from(d.trim()))
        .unwrap_or_else(|| panic!("no logs folder in the lab's output:\n{text}"));
    let server = text.lines()
        .find(|l| l.trim_start().starts_with("server ") && l.contains("ip netns exec"))
        .and_then(|l| l.rsplit('#').next())
        .and_then(|s| s.split_whitespace().next())
        .filter(|s| s.parse::<std::net::Ipv4Addr>().is_ok())
        .unwrap_or_else(|| panic!("no server address in the lab's output:\n{text}"))
        .to_string();
    (server, logs)
}

/// Bytes the lab server's RPM endpoints received from `client` on
/// connections that carried at least 1 MB, and how many such connections
/// (from its JSON log lines).
fn uploads_served(logs: &std::path::Path, client: &str) -> (u64, usize) {
    let text = std::fs::read_to_string(logs.join("server-server.stderr")).unwrap_or_default();
    let big: Vec<u64> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["event"] == "rpm_connection" && v["client"].as_str().is_some_and(|c| c.contains(client)))
        .filter_map(|v| v["bytes_up"].as_u64())
        .filter(|&b| b >= 1_000_000)
        .collect();
    (big.iter().sum(), big.len())
}

#[test]
fn rpm_peers_interoperate_through_a_lab_bottleneck() {
    if skip("rpm_peers_interoperate_through_a_lab_bottleneck") {
        return;
    }
    let (Some(nq), Some(gs)) = (peer("BLOATLAB_GORESPONSIVENESS", &["networkQuality", "goresponsiveness"]), peer("BLOATLAB_GOSERVER", &["networkqualityd"])) else {
        bloatlab_testkit::cannot_run("rpm_peers_interoperate_through_a_lab_bottleneck", "goresponsiveness and goserver are not both installed (.ci/peers.sh builds them; see crates/cli/tests/rpm.rs)");
        return;
    };
    guarded(|| {
        let id = unique_id();
        let _lab = KeptLab(id.clone());
        let (server, logs) = kept_lab_with_logs(&id, "fifo:100");
        let (client_ns, server_ns) = (format!("blab-{id}-client"), format!("blab-{id}-server"));
        let ceiling = 10e6 * 1448.0 / 1514.0;

        // goresponsiveness -> bloatlab's RPM endpoints on the lab server.
        let run_nq = || {
            let o = Command::new("ip")
                .args(["netns", "exec", &client_ns])
                .arg(&nq)
                .args(["-config", &server, "-port", "4043", "-path", ".well-known/nq", "-rpm.timeout", "8"])
                .stdin(Stdio::null())
                .output()
                .unwrap();
            let t = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
            eprintln!("goresponsiveness -> bloatlab:\n{t}");
            let mbps: Vec<f64> = t
                .lines()
                .filter(|l| l.contains("Throughput:"))
                .filter_map(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
                .collect();
            (t, mbps)
        };
        // goresponsiveness at this commit sometimes opens its upload
        // connections and then sends on only one of them: it reports "0
        // parallel connections" and 0 Mbps for the upload stage while
        // bloatlab's server log shows the others open the whole stage with no
        // request and one carrying the upload (seen in 11 of 24 runs here,
        // also with bloatlab's TLS-handshake and first-request limits raised
        // to 30 s). For such a run the server's own log must show the upload
        // served: at least 5 MB on a connection from the client.
        let (t, mbps) = run_nq();
        assert_eq!(mbps.len(), 2, "{t}");
        let mut mbps = mbps;
        if mbps[1] == 0.0 && t.contains("using 0 parallel connections") {
            let client_ip = Command::new("ip").args(["netns", "exec", &client_ns, "ip", "-4", "-o", "addr", "show", "eth0"]).output().unwrap();
            let client_ip = String::from_utf8_lossy(&client_ip.stdout).split_whitespace().nth(3).and_then(|a| a.split('/').next()).unwrap_or_default().to_string();
            // the server logs a connection when it ends: give the closes a moment
            let mut served = uploads_served(&logs, &client_ip);
            for _ in 0..20 {
                if served.0 >= 5_000_000 {
                    break;
                }
                std::thread::sleep(Duration::from_millis(500));
                served = uploads_served(&logs, &client_ip);
            }
            let (bytes, conns) = served;
            eprintln!("NOTE: goresponsiveness reported its upload stage as 0 connections; bloatlab's server log shows {bytes} bytes uploaded by {client_ip} on {conns} connection(s)");
            assert!(bytes >= 5_000_000, "the upload stage carried nothing by the server's log either ({bytes} bytes): {t}");
            mbps.pop();
        }
        // The download figure is what goresponsiveness received: at most the
        // link's payload rate. Its upload figure counts the bytes its uploads
        // hand to their sockets, which runs ahead of the link by what the
        // socket buffers hold (seen: 10.1 Mbit/s through this 9.56 Mbit/s
        // link with 7 connections): bounded loosely.
        for (m, bound) in mbps.iter().zip([1.05, 1.5]) {
            assert!(*m > 1.0 && *m * 1e6 <= ceiling * bound, "throughput {m} Mbit/s through a 10 Mbit/s link: {t}");
        }
        let fin = t.lines().find(|l| l.starts_with("Final RPM:") && l.contains("Trimmed Mean")).unwrap_or_else(|| panic!("no final RPM: {t}"));
        assert!(!fin.contains("NaN") && !fin.contains("Inf"), "{t}");

        // bloatlab rpm -> goserver in the server namespace.
        let dir = tempfile::tempdir().unwrap();
        let mut gsd = Command::new("ip")
            .args(["netns", "exec", &server_ns])
            .arg(&gs)
            .args(["-create-cert", "-listen-addr", &server, "-public-port", "4449", "-config-name", &server])
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_secs(2));
        let json = dir.path().join("r.json");
        let o = Command::new("ip")
            .args(["netns", "exec", &client_ns, EXE, "rpm"])
            .arg(format!("https://{server}:4449/config"))
            .args(["-k", "-q", "--max-stage", "12s", "--json"])
            .arg(&json)
            .output()
            .unwrap();
        let _ = gsd.kill();
        let _ = gsd.wait();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let full_ms = 100.0 * 1514.0 * 8.0 / 10e6 * 1e3;
        for s in r["stages"].as_array().unwrap() {
            let g = s["goodput_bps"].as_f64().unwrap();
            let rpm = s["rpm"].as_f64().unwrap_or_else(|| panic!("no RPM: {s:#}"));
            let self_ms = s["http_self_ms"].as_f64().unwrap();
            eprintln!("bloatlab -> goserver {}: {rpm:.0} RPM, {:.2} Mbit/s, self probe {self_ms:.1} ms (full queue {full_ms:.0} ms)", s["direction"], g / 1e6);
            assert!(g > 0.8 * ceiling && g <= ceiling * 1.02, "goodput {g} through a 10 Mbit/s link");
            // A self probe waits behind its own connection's load in the
            // FIFO: at least part of the queue, at most the full queue plus
            // the endpoints' socket buffers.
            assert!(self_ms > 0.25 * full_ms, "self probe {self_ms} ms: the loaded FIFO ({full_ms} ms) did not show");
            assert!(rpm < 60000.0 / (0.25 * full_ms / 2.0), "RPM {rpm} too high for a loaded {full_ms} ms FIFO");
        }
    });
}

/// bloatlab's own client against the lab server through a 1000-packet FIFO
/// (1.2 s full), where losses are repaired slowly: no interval's goodput may
/// read above what the link carries. Counting only cumulatively acknowledged
/// bytes once read 2.4 then 17.7 Mbit/s in consecutive intervals of an
/// upload through this link.
#[test]
fn rpm_goodput_stays_under_the_link_through_a_deep_fifo() {
    if skip("rpm_goodput_stays_under_the_link_through_a_deep_fifo") {
        return;
    }
    guarded(|| {
        let id = unique_id();
        let _lab = KeptLab(id.clone());
        let server = kept_lab(&id, "fifo:1000");
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("r.json");
        let o = Command::new("ip")
            .args(["netns", "exec", &format!("blab-{id}-client"), EXE, "rpm"])
            .arg(format!("https://{server}:4043"))
            .args(["-k", "-q", "--directions", "upload", "--max-stage", "16s", "--json"])
            .arg(&json)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let ceiling = 10e6 * 1448.0 / 1514.0;
        let s = &r["stages"][0];
        let iv: Vec<f64> = s["intervals"].as_array().unwrap().iter().map(|i| i["goodput_bps"].as_f64().unwrap() / 1e6).collect();
        eprintln!("upload intervals {iv:.2?} Mbit/s, stage {:.2}, RPM {}", s["goodput_bps"].as_f64().unwrap() / 1e6, s["rpm"]);
        // One interval may straddle a repaired loss; 5% over the link is
        // timing (the interval's edges), not delivery.
        assert!(iv.iter().all(|&g| g * 1e6 <= ceiling * 1.05), "an interval above the link: {iv:?}");
        assert!(s["goodput_bps"].as_f64().unwrap() <= ceiling * 1.02);
        // The full FIFO allows at most 60000 / 1211 ms = 50 RPM from the
        // queue alone; the foreign probes' handshakes cross it too.
        let rpm = s["rpm"].as_f64().unwrap();
        assert!(rpm < 150.0, "RPM {rpm} through a 1.2 s FIFO");
    });
}
