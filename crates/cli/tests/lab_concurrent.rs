//! Two labs at once do not interfere: each gets its own namespaces, and its
//! own rate; `cleanup` leaves running labs alone.
mod lab_util;
use bloatlab_results::TestResult;
use lab_util::*;
use std::process::{Command, Stdio};

#[test]
fn two_labs_at_once_do_not_interfere() {
    if skip("two_labs_at_once_do_not_interfere") {
        return;
    }
    guarded(move || {
        let dir = tempfile::tempdir().unwrap();
        let before = root_links();
        let labs = [(unique_id(), "5mbit", 5e6), (unique_id(), "20mbit", 20e6)];
        assert_ne!(labs[0].0, labs[1].0);
        let steal = StealMeter::start();
        let children: Vec<_> = labs
            .iter()
            .map(|(id, rate, _)| {
                Command::new(EXE)
                    .args(["lab", "--rate", rate, "--queue", "fifo:50", "--id", id, "--json"])
                    .arg(dir.path().join(format!("{id}.json")))
                    .args(["--", "--duration", "8s", "--idle", "1s"])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for (id, _, _) in &labs {
            wait_for_test_client(id);
        }
        // Both labs are running: cleanup must not touch them.
        let out = Command::new(EXE).args(["lab", "cleanup", "--id", &labs[0].0, "--id", &labs[1].0]).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(text.matches("left alone").count(), 2, "{text}");
        for (id, _, _) in &labs {
            assert_eq!(lab_namespaces(id).len(), 4);
        }
        for ((id, _, rate), ch) in labs.iter().zip(children) {
            let out = ch.wait_with_output().unwrap();
            assert!(out.status.success(), "lab {id}: {}", String::from_utf8_lossy(&out.stderr));
            let r = TestResult::read_file(&dir.path().join(format!("{id}.json"))).unwrap();
            let lab = r.lab.as_ref().unwrap();
            assert!(lab.hosts.iter().all(|h| h.netns.starts_with(&format!("blab-{id}-"))));
            let want = expected_goodput(*rate, r.metadata.socket.mss);
            let got = r.scenarios[0].summary.upload_bps;
            // Each bottleneck sends at its own rate, not the other lab's: the
            // frames it put on the wire are the tight check; application goodput
            // also moves with the loss-recovery timing of one cubic flow.
            let wire = wire_bps(&r, "bottleneck-up", 0);
            eprintln!("lab {id}: goodput {got:.0} bit/s (expected {want:.0}), bottleneck sent {wire:.0} bit/s");
            assert!((wire - rate).abs() / rate < steal.tol(0.03), "lab {id}: bottleneck sent {wire:.0} bit/s, rate {rate:.0}");
            assert!((got - want).abs() / want < steal.tol(0.08), "lab {id}: goodput {got:.0} vs {want:.0} bit/s");
            assert_gone(id, &before);
        }
    });
}
