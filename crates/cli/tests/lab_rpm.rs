//! IETF RPM through a 10 Mbit/s lab link, bloatlab's client against
//! bloatlab's server, against what the queue alone allows:
//! - fq_codel (the emulator's; AQM target 5 ms): >= 1000 RPM both ways.
//!   The self probes share their connection with the load, so this holds
//!   only when the endpoints keep their own buffers short (`rpm::pace`):
//!   before, 166 / 395 RPM, the self probes 719 / 301 ms behind the
//!   connection's own HTTP/2, TLS and socket buffers.
//! - fifo:1000 (1211 ms when full, 50 RPM): within 2x of 50.
//! - fifo:10: the result says how many foreign probes' handshakes were
//!   retransmitted (a SYN dropped at the full queue costs 1 s).
mod lab_util;
use lab_util::*;
use std::process::Command;

fn rpm_through(queue: &str) -> (serde_json::Value, String) {
    let id = unique_id();
    let _lab = KeptLab(id.clone());
    let out = Command::new(EXE).args(["lab", "--no-run", "--id", &id, "--rate", "10mbit", "--queue", queue]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let server = text
        .lines()
        .find(|l| l.trim_start().starts_with("server ") && l.contains("ip netns exec"))
        .and_then(|l| l.rsplit('#').next())
        .and_then(|s| s.split_whitespace().next())
        .unwrap_or_else(|| panic!("no server address:\n{text}"))
        .to_string();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("rpm.json");
    let o = Command::new("ip")
        .args(["netns", "exec", &format!("blab-{id}-client"), EXE, "rpm", &format!("https://{server}:4043"), "-k", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(o.status.success(), "{queue}: {}\n{printed}", String::from_utf8_lossy(&o.stderr));
    eprintln!("{queue}:\n{}", printed.lines().filter(|l| !l.starts_with(' ')).collect::<Vec<_>>().join("\n"));
    (serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap(), printed)
}

fn rpm_of(r: &serde_json::Value, dir: &str) -> f64 {
    r["stages"].as_array().unwrap().iter().find(|s| s["direction"] == dir).and_then(|s| s["rpm"].as_f64()).unwrap_or_else(|| panic!("no {dir} RPM: {r}"))
}

#[test]
fn rpm_reflects_the_queue_not_the_endpoints() {
    if skip("rpm_reflects_the_queue_not_the_endpoints") {
        return;
    }
    guarded(|| {
        let (r, _) = rpm_through("fq_codel");
        for dir in ["download", "upload"] {
            let rpm = rpm_of(&r, dir);
            assert!(rpm >= 1000.0, "fq_codel {dir}: {rpm} RPM (the AQM alone allows ~12000)");
        }
        let (r, _) = rpm_through("fifo:1000");
        for dir in ["download", "upload"] {
            let rpm = rpm_of(&r, dir);
            assert!((25.0..=100.0).contains(&rpm), "fifo:1000 {dir}: {rpm} RPM, the full queue alone allows 50");
        }
        let (r, printed) = rpm_through("fifo:10");
        let stages = r["stages"].as_array().unwrap();
        let retrans: u64 = stages.iter().map(|s| s["handshake_retransmits"].as_u64().unwrap()).sum();
        let foreign: u64 = stages.iter().map(|s| s["foreign_probes"].as_u64().unwrap()).sum();
        assert!(foreign > 100, "{foreign} foreign probes");
        if retrans > 0 {
            assert!(printed.contains("foreign probes had a handshake packet retransmitted"), "{printed}");
        }
        eprintln!("fifo:10: {retrans} of {foreign} foreign probes had a handshake packet retransmitted");
    });
}
