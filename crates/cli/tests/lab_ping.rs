//! --ping / --tcp-ping through the lab: hosts that run no bloatlab server
//! (the router) answer ICMP echo and TCP SYNs (with RST: nothing listens),
//! and under a download their replies wait in the bottleneck queue, which
//! holds 100 x 1514 B x 8 / 10 Mbit/s = 121 ms when full.
mod lab_util;
use lab_util::*;

#[test]
fn pings_to_a_host_without_bloatlab_see_the_download_queue() {
    if skip("pings_to_a_host_without_bloatlab_see_the_download_queue") {
        return;
    }
    guarded(|| {
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("ping.json");
        let r = run_lab(
            &json,
            &["--rate", "10mbit", "--queue", "fifo:100"],
            &["--scenarios", "1u0d,0u1d", "--duration", "6s", "--idle", "2s", "--ping", "router", "--tcp-ping", "router:9", "--ping", "witness", "--ping-interval", "50ms"],
        );
        let analytic = 100.0 * 1514.0 * 8.0 / 10e6 * 1000.0;
        assert_eq!(r.metadata.pings.len(), 3, "{:?}", r.metadata.pings);
        assert!(r.metadata.pings[0].address.starts_with("10."), "the role name became the router's address: {:?}", r.metadata.pings[0]);
        // --ping targets first, then --tcp-ping ones.
        assert_eq!(r.metadata.pings[2].method, "TCP connect");
        assert!(r.metadata.pings[2].target.starts_with("tcp 10.") && r.metadata.pings[2].target.ends_with(":9"), "{:?}", r.metadata.pings[2]);
        let idle = r.idle.as_ref().unwrap();
        for s in &idle.summary.pings {
            eprintln!("idle {}: p50 {:.2} ms, lost {}", s.target, s.latency.p50_ms, s.latency.lost);
            assert!(s.latency.received >= 30 && s.latency.p50_ms < 5.0, "{s:?}");
        }
        let down = r.scenarios.iter().find(|p| p.name == "0u1d").unwrap();
        let up = r.scenarios.iter().find(|p| p.name == "1u0d").unwrap();
        for (i, s) in down.summary.pings.iter().enumerate() {
            let added = s.added_latency_ms.unwrap();
            eprintln!("0u1d {}: added {added:.1} ms (analytic full queue {analytic:.1} ms), loss {:.1}%", s.target, s.latency.loss_pct);
            // The replies cross the download queue, full most of the time.
            assert!(added > 0.5 * analytic && added < 1.3 * analytic, "{s:?}");
            assert_eq!(down.pings[i].target, s.target);
            assert!(down.pings[i].samples.len() >= 100, "raw samples kept");
        }
        // Pinging the router under an upload: neither request nor reply
        // crosses the upload queue (it is on the router's far side).
        let router = up.summary.pings.iter().find(|s| s.target.starts_with("icmp 10.") && !s.target.ends_with(".3")).unwrap();
        assert!(router.added_latency_ms.unwrap().abs() < 5.0, "{router:?}");
    });
}
