//! `bloatlab lab` against analytic truth: a 10 Mbit/s bottleneck with a
//! 100-packet FIFO, then a 10-packet FIFO, one cubic upload each.
mod lab_util;
use bloatlab_results::{QueueSeries, TestResult};
use lab_util::*;
use std::process::Command;

fn bottleneck_up(r: &TestResult) -> &QueueSeries {
    r.lab.as_ref().unwrap().queues.iter().find(|q| q.role == "bottleneck-up").expect("bottleneck-up series")
}

#[test]
fn lab_fifo_100_then_10_matches_analytic_queue_delay() {
    if skip("lab_fifo_100_then_10_matches_analytic_queue_delay") {
        return;
    }
    guarded(move || {
        let dir = tempfile::tempdir().unwrap();
        let id = unique_id();
        let links_before = root_links();
        let json = dir.path().join("r.json");
        let steal = StealMeter::start();
        let out = Command::new(EXE)
            .args(["lab", "--rate", "10mbit", "--queue", "fifo:100,fifo:10", "--id", &id, "--json"])
            .arg(&json)
            .args(["--", "--scenarios", "1u0d", "--duration", "10s", "--idle", "2s"])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        eprintln!("{stderr}{stdout}");
        assert!(out.status.success(), "bloatlab lab failed: {stderr}");
        assert_gone(&id, &links_before);
        assert!(stdout.contains("analytic") && stdout.contains("fifo:100") && stdout.contains("fifo:10"), "table: {stdout}");

        let big = TestResult::read_file(&dir.path().join("r.fifo-100.json")).unwrap();
        let small = TestResult::read_file(&dir.path().join("r.fifo-10.json")).unwrap();
        for r in [&big, &small] {
            assert!(r.complete);
            let lab = r.lab.as_ref().expect("lab section");
            assert_eq!(lab.backend, "kernel");
            assert_eq!(lab.offloads, "off");
            assert_eq!(lab.hosts.len(), 4);
            assert!(!lab.kernel.is_empty());
            assert!(lab.qdiscs_available.iter().any(|q| q == "htb"));
            assert_eq!(lab.config.cc, "cubic");
            assert_eq!(lab.config.placement, "router");
            assert_eq!(r.metadata.cc, "cubic");
            assert!(r.metadata.witness_address.is_some());
            let q = bottleneck_up(r);
            assert!(q.samples.len() > 50, "queue samples: {}", q.samples.len());
            // The bottleneck enforces its rate: while it has a backlog it sends at
            // 10 Mbit/s (within 3%), whatever the sending host does.
            let (busy_rate, busy) = backlogged_rate(r, "bottleneck-up", 0);
            assert!((busy_rate - 10e6).abs() / 10e6 < steal.tol(0.03), "bottleneck sent {busy_rate:.0} bit/s while backlogged");
            // One bulk upload keeps it busy: frames on the wire at >= 90% of the rate.
            let wire = wire_bps(r, "bottleneck-up", 0);
            assert!(wire > (1.0 - steal.tol(0.1)) * 10e6 && busy > 1.0 - steal.tol(0.15), "bottleneck sent {wire:.0} bit/s, backlogged {:.0}% of the time", busy * 100.0);
            // Goodput: within 5% of what the link carried after headers. With the
            // link fully busy that is 10 Mbit/s x MSS / 1514; a stall of this shared
            // VM's CPU (seen: 4-5 s of steal per 30 s under CI load) idles the link
            // for a moment and lowers both sides alike.
            let want = expected_goodput(wire, r.metadata.socket.mss);
            let got = r.scenarios[0].summary.upload_bps;
            eprintln!("goodput {got:.0}, wire {wire:.0} -> expected {want:.0}, backlogged-rate {busy_rate:.0} ({:.0}% busy)", busy * 100.0);
            assert!((got - want).abs() / want < steal.tol(0.05), "goodput {got:.0} vs {want:.0} bit/s");
            if busy > 0.98 && steal.pct() <= 2.0 {
                // An undisturbed run: the absolute check.
                let full = expected_goodput(10e6, r.metadata.socket.mss);
                assert!((got - full).abs() / full < 0.05, "goodput {got:.0} vs {full:.0} bit/s");
            }
        }

        if steal.pct() > 10.0 {
            // The VM lost its CPU mid-run: delays measure the VM, not the queue.
            let (a, b) = (big.scenarios[0].summary.added_latency_ms.unwrap(), small.scenarios[0].summary.added_latency_ms.unwrap());
            assert!(b < a, "fifo:10 added {b} ms vs fifo:100 {a} ms");
            eprintln!("SKIP analytic delay checks: {:.0}% of the CPU was stolen by the hypervisor during the run", steal.pct());
            return;
        }
        // fifo:100: the queue holds 100 x 1514 B = 121.1 ms at 10 Mbit/s.
        let analytic = 100.0 * 1514.0 * 8.0 / 10e6 * 1e3;
        let lab = big.lab.as_ref().unwrap();
        assert!((lab.analytic_queue_delay_up_ms.unwrap() - analytic).abs() < 0.01);
        let idle = big.idle.as_ref().unwrap().summary.latency.p50_ms;
        let s = &big.scenarios[0].summary;
        let added = s.added_latency_ms.unwrap();
        let full = s.latency.p90_ms - idle;
        eprintln!("fifo:100: added p50 {added:.1} ms, p90-idle {full:.1} ms, analytic {analytic:.1} ms");
        // The full queue: loaded p90 within 15% of the analytic delay.
        assert!((full - analytic).abs() / analytic < 0.15, "loaded p90 - idle p50 = {full:.1} ms vs analytic {analytic:.1} ms");
        // The median sits in cubic's sawtooth (x0.7 after each loss): between 60% and 115%.
        assert!(added > 0.60 * analytic && added < 1.15 * analytic, "added {added:.1} ms vs analytic {analytic:.1} ms");
        // The witness behind the same bottleneck suffers the same queue.
        let w = s.witness_added_latency_ms.expect("witness added latency");
        assert!(w > 0.6 * analytic, "witness added {w:.1} ms, analytic {analytic:.1} ms");
        // The queue really filled to its limit, and dropped.
        let q = bottleneck_up(&big);
        let p = &big.scenarios[0];
        // The request/response probe crosses the same queue; its replies are
        // timed by the client kernel's TCP receive stamps (read up to one
        // probe interval later): its median must match the UDP probes'.
        let mut rr: Vec<f64> = p.rr.iter().filter(|x| x.completed).map(|x| x.rtt_ns as f64 / 1e6).collect();
        rr.sort_by(f64::total_cmp);
        assert!(rr.len() > 100, "{} request/response exchanges", rr.len());
        let rr50 = rr[rr.len() / 2];
        eprintln!("fifo:100: request/response p50 {rr50:.1} ms, UDP probes p50 {:.1} ms", s.latency.p50_ms);
        assert!((rr50 - s.latency.p50_ms).abs() < 0.15 * analytic, "request/response p50 {rr50:.1} ms vs UDP p50 {:.1} ms", s.latency.p50_ms);
        let inside: Vec<_> = q.samples.iter().filter(|x| x.t_ns >= p.start_ns && x.t_ns <= p.end_ns).collect();
        let maxq = inside.iter().map(|x| x.backlog_packets).max().unwrap();
        assert!((95..=100).contains(&maxq), "max backlog {maxq} packets");
        assert!(inside.last().unwrap().drops > inside.first().unwrap().drops, "no drops at the bottleneck");
        // The sampled backlog explains the probes' delay: mean backlog / rate ~ mean probe RTT.
        let mean_backlog_ms =
            inside.iter().map(|x| x.backlog_bytes as f64).sum::<f64>() / inside.len() as f64 * 8.0 / 10e6 * 1e3;
        let avg = s.latency.avg_ms - idle;
        assert!((mean_backlog_ms - avg).abs() / avg < 0.25, "mean backlog {mean_backlog_ms:.1} ms vs probe avg {avg:.1} ms");

        // fifo:10: far lower latency at about the same goodput.
        let s10 = &small.scenarios[0].summary;
        let added10 = s10.added_latency_ms.unwrap();
        eprintln!("fifo:10: added {added10:.2} ms, analytic 12.1 ms; goodput {:.0} vs {:.0}", s10.upload_bps, s.upload_bps);
        assert!(added10 < 0.2 * added, "fifo:10 added {added10:.1} ms vs fifo:100 {added:.1} ms");
        assert!(added10 < 12.12 * 1.15, "fifo:10 added {added10:.1} ms above its full queue");
        assert!((s10.upload_bps - s.upload_bps).abs() / s.upload_bps < steal.tol(0.08), "fifo:10 goodput not about the same as fifo:100's");
    });
}
