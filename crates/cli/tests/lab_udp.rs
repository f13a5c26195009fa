//! UDP load through the lab's bottleneck: a flow offered at twice the link
//! rate loses the excess (analytic: delivered = link / on-wire datagram),
//! a flow at half the rate loses nothing.
mod lab_util;
use lab_util::*;
use std::process::Command;

fn udp_run(rate: &str) -> bloatlab_results::TestResult {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("udp.json");
    let out = Command::new(EXE)
        .args(["lab", "--rate", "10mbit", "--queue", "fifo:50", "--quiet", "--json"])
        .arg(&json)
        .args(["--", "--scenarios", "1u0d,0u1d", "--udp", rate, "--duration", "5s", "--idle", "1s"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    bloatlab_results::TestResult::read_file(&json).unwrap()
}

#[test]
fn udp_load_loses_what_the_link_cannot_carry() {
    if skip("udp_load_loses_what_the_link_cannot_carry") {
        return;
    }
    guarded(|| {
        let steal = StealMeter::start();
        // 1400 B of payload is a 1442 B frame (UDP 8 + IPv4 20 + Ethernet 14):
        // 10 Mbit/s carries 10e6 x 1400 / 1442 = 9.709 Mbit/s of payload.
        let carried = 10e6 * 1400.0 / 1442.0;
        let r = udp_run("20mbit");
        for p in &r.scenarios {
            let u = p.flows[0].udp.expect("a UDP flow records its delivery");
            let got = p.summary.upload_bps.max(p.summary.download_bps);
            let expect_loss = (1.0 - carried / 20e6) * 100.0;
            eprintln!("{} at 20 Mbit/s: got {:.2} Mbit/s, loss {:.1}% (analytic {expect_loss:.1}%), jitter {:.2} ms", p.name, got / 1e6, u.loss_pct, u.jitter_ms);
            assert!((got / carried - 1.0).abs() < steal.tol(0.05), "{}: {got} vs {carried}", p.name);
            assert!((u.loss_pct - expect_loss).abs() < steal.tol(0.05) * 100.0, "{}: loss {} vs {expect_loss}", p.name, u.loss_pct);
            assert!(u.sent > 8000 && u.received < u.sent, "{u:?}");
        }
        let r = udp_run("5mbit");
        for p in &r.scenarios {
            let u = p.flows[0].udp.unwrap();
            let got = p.summary.upload_bps.max(p.summary.download_bps);
            eprintln!("{} at 5 Mbit/s: got {:.2} Mbit/s, loss {:.2}%", p.name, got / 1e6, u.loss_pct);
            assert!((got / 5e6 - 1.0).abs() < steal.tol(0.05), "{}: {got}", p.name);
            assert!(u.loss_pct < 1.0, "{}: {u:?}", p.name);
        }
    });
}
