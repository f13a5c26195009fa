//! DSCP marking seen by the lab's router: `-- --dscp BE,BK,CS5,EF` marks each
//! direction's flows in turn (flent's RRUL classes), and the packets crossing
//! the router carry those marks both ways (captured with a packet socket in
//! the router's namespace).
mod lab_util;
use lab_util::*;
use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Count (protocol, dscp, direction) of TCP data packets and UDP datagrams
/// on the lab's port seen in namespace `ns` for `dur`; direction "up" = to
/// the server port.
fn capture(ns: &str, port: u16, dur: Duration) -> HashMap<(u8, u8, &'static str), u64> {
    let ns = ns.to_string();
    std::thread::spawn(move || {
        bloatlab_host::netns::enter(&ns).expect("enter the router namespace");
        use std::io::Read;
        let proto = socket2::Protocol::from(i32::from((libc::ETH_P_IP as u16).to_be()));
        let sock = socket2::Socket::new(socket2::Domain::PACKET, socket2::Type::DGRAM, Some(proto)).expect("packet socket");
        sock.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
        let mut counts = HashMap::new();
        let mut b = vec![0u8; 65536];
        let t = Instant::now();
        while t.elapsed() < dur {
            let n = (&sock).read(&mut b).unwrap_or(0);
            if n < 28 || b[0] >> 4 != 4 || (b[9] != 6 && b[9] != 17) {
                continue;
            }
            let ihl = usize::from(b[0] & 0xf) * 4;
            let total = usize::from(u16::from_be_bytes([b[2], b[3]]));
            let (sport, dport) = (u16::from_be_bytes([b[ihl], b[ihl + 1]]), u16::from_be_bytes([b[ihl + 2], b[ihl + 3]]));
            if b[9] == 6 {
                let tcp_hdr = usize::from(b[ihl + 12] >> 4) * 4;
                if n < 40 || total <= ihl + tcp_hdr {
                    continue; // no payload: an ACK
                }
            }
            let dir = if dport == port { "up" } else if sport == port { "down" } else { continue };
            *counts.entry((b[9], b[1] >> 2, dir)).or_insert(0) += 1;
        }
        counts
    })
    .join()
    .unwrap()
}

#[test]
fn router_sees_the_dscp_marks_of_every_class_both_ways() {
    if skip("router_sees_the_dscp_marks_of_every_class_both_ways") {
        return;
    }
    let id = unique_id();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("dscp.json");
    let child = Command::new(EXE)
        .args(["lab", "--rate", "20mbit", "--queue", "fifo:100", "--id", &id, "--quiet", "--json"])
        .arg(&json)
        .args(["--", "--scenarios", "4u4d", "--dscp", "BE,BK,CS5,EF", "--duration", "6s", "--idle", "1s"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_test_client(&id);
    std::thread::sleep(Duration::from_millis(2500)); // idle baseline and flow setup
    let counts = capture(&format!("blab-{id}-router"), 9770, Duration::from_secs(2));
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    eprintln!("packets by (protocol, dscp, direction) at the router: {counts:?}");
    for dscp in [0u8, 8, 40, 46] {
        for d in ["up", "down"] {
            let n = counts.get(&(6, dscp, d)).copied().unwrap_or(0);
            assert!(n >= 20, "only {n} {d} data packets with DSCP {dscp} crossed the router: {counts:?}");
            // each class's probes (the lab probes every 50 ms: ~40 in 2 s), answered in the same class
            let n = counts.get(&(17, dscp, d)).copied().unwrap_or(0);
            assert!(n >= 30, "only {n} {d} UDP probes with DSCP {dscp} crossed the router: {counts:?}");
        }
    }
    assert!(counts.keys().all(|(_, d, _)| [0, 8, 40, 46].contains(d)), "unexpected marks: {counts:?}");
    // the result records each flow's class
    let r = bloatlab_results::TestResult::read_file(&json).unwrap();
    let flows = &r.scenarios[0].flows;
    let mut marks: Vec<(String, u8)> = flows.iter().map(|f| (format!("{:?}", f.direction), f.dscp)).collect();
    marks.sort();
    assert_eq!(marks.iter().filter(|(_, d)| *d == 46).count(), 2, "{marks:?}");
    assert_eq!(marks.iter().filter(|(_, d)| *d == 0).count(), 2, "{marks:?}");
    // and each class's summary: its two flows (one each way) and its probes
    let classes = &r.scenarios[0].summary.classes;
    let names: Vec<&str> = classes.iter().map(|c| c.class.as_str()).collect();
    assert_eq!(names, ["BE", "BK", "CS5", "EF"]);
    for c in classes {
        assert_eq!((c.upload_flows, c.download_flows), (1, 1), "{c:?}");
        assert!(c.upload_bps > 1e6 && c.download_bps > 1e6, "{c:?}");
        // 6 s at the lab's 50 ms probe interval: 120 probes
        assert!(c.latency.received > 80 && c.latency.loss_pct < 20.0, "{c:?}");
        // a FIFO treats every class alike: each class waits behind the same queue
        let all = r.scenarios[0].summary.latency.p50_ms;
        assert!((c.latency.p50_ms - all).abs() < 0.3 * all + 2.0, "{} p50 {} ms against {all} ms", c.class, c.latency.p50_ms);
    }
}
