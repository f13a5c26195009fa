//! The kernel backend with a stock kernel's queue disciplines: fq_codel,
//! codel, pie, cake, fq and netem in real labs, checked against the analytic
//! truth. This machine's kernel lacks them, so the test skips here (saying
//! so); `.ci/stock-kernel.sh` runs it on Debian's kernel under QEMU.
mod lab_util;
use bloatlab_results::TestResult;
use lab_util::*;
use std::process::Command;

fn kernel_qdiscs() -> Vec<String> {
    let o = Command::new(EXE).args(["lab", "qdiscs", "--json"]).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
    v["available"].as_array().map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect()).unwrap_or_default()
}

/// Run a lab and read its results (one per queue).
fn lab(args: &[&str], test: &[&str]) -> Vec<TestResult> {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("k.json");
    let out = Command::new(EXE).arg("lab").args(args).arg("--json").arg(&json).arg("--").args(test).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    eprintln!("bloatlab lab {args:?} -- {test:?}\n{err}");
    assert!(out.status.success(), "{err}");
    let mut files: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().map(|e| e.path()).collect();
    files.sort();
    files.iter().map(|f| TestResult::read_file(f).unwrap()).collect()
}

fn added(r: &TestResult) -> f64 {
    r.scenarios[0].summary.added_latency_ms.unwrap()
}

#[test]
fn stock_kernel_aqms_and_netem_in_the_kernel() {
    if skip("stock_kernel_aqms_and_netem_in_the_kernel") {
        return;
    }
    let have = kernel_qdiscs();
    let need = ["fq_codel", "codel", "pie", "cake", "fq", "netem"];
    let missing: Vec<&str> = need.iter().copied().filter(|q| !have.iter().any(|h| h == q)).collect();
    if !missing.is_empty() {
        eprintln!(
            "SKIP stock_kernel_aqms_and_netem_in_the_kernel: this kernel ({}) lacks {}; .ci/stock-kernel.sh runs this test on Debian's stock kernel under QEMU",
            bloatlab_host::kernel_release(),
            missing.join(", ")
        );
        return;
    }
    let test = ["--scenarios", "1u0d", "--duration", "10s", "--idle", "2s"];
    // A FIFO of 100 full frames at 10 Mbit/s adds up to 121 ms; fq_codel,
    // codel and pie, from the kernel now, keep it near their targets.
    let rs = lab(&["--rate", "10mbit", "--queue", "fifo:100,fq_codel,codel,pie"], &test);
    assert_eq!(rs.len(), 4);
    for r in &rs {
        let l = r.lab.as_ref().unwrap();
        assert_eq!(l.backend, "kernel", "{}", l.config.queue);
        let kind = &l.queues.iter().find(|q| q.role == "bottleneck-up").unwrap().qdisc;
        eprintln!("{}: kernel qdisc {kind}, added {:.1} ms, {:.2} Mbit/s", l.config.queue, added(r), r.scenarios[0].summary.upload_bps / 1e6);
        // The link is used: 70% of it at least (see the ceiling below).
        assert!(r.scenarios[0].summary.upload_bps > 7e6, "{}: the link is used", l.config.queue);
    }
    // What one TCP flow through 10 Mbit/s reaches in this guest: a TCG
    // guest's CPU, with CI's release builds beside it, holds it to 8.1-8.6
    // Mbit/s (9.5 on hardware). The qdiscs below are held to it.
    let ceiling = rs.iter().map(|r| r.scenarios[0].summary.upload_bps).fold(0.0, f64::max);
    let want = 0.9 * ceiling;
    eprintln!("this guest's ceiling through the first four queues: {:.2} Mbit/s; cake and fq must reach {:.2}", ceiling / 1e6, want / 1e6);
    let by = |q: &str| rs.iter().find(|r| r.lab.as_ref().unwrap().config.queue == q).unwrap();
    // fifo:100: 100 x 1514 B at 10 Mbit/s = 121.1 ms when full; the median sits
    // in cubic's sawtooth (x0.7 after each loss), the p90 near the full queue.
    let fifo = by("fifo:100");
    let analytic = 100.0 * 1514.0 * 8.0 / 10e6 * 1e3;
    assert!((fifo.lab.as_ref().unwrap().analytic_queue_delay_up_ms.unwrap() - analytic).abs() < 0.01);
    let full = fifo.scenarios[0].summary.latency.p90_ms - fifo.idle.as_ref().unwrap().summary.latency.p50_ms;
    eprintln!("fifo:100: added p50 {:.1} ms, p90-idle {full:.1} ms, analytic {analytic:.1} ms", added(fifo));
    assert!(added(fifo) > 0.6 * analytic && added(fifo) < 1.15 * analytic, "fifo:100 added {} ms vs analytic {analytic:.1}", added(fifo));
    assert!((full - analytic).abs() / analytic < 0.2, "fifo:100 p90 - idle = {full:.1} ms vs analytic {analytic:.1}");
    // The AQMs hold the standing queue near their targets: 5 ms for codel and
    // fq_codel (fq_codel's probe flow has its own queue), 15 ms for pie.
    for (q, bound) in [("fq_codel", 10.0), ("codel", 20.0), ("pie", 35.0)] {
        assert!(added(by(q)) < bound, "{q} added {} ms (target bound {bound} ms)", added(by(q)));
    }
    // Any other kernel qdisc as the bottleneck: cake and fq under the shaper.
    for q in ["cake", "fq"] {
        let r = lab(&["--rate", "10mbit", "--qdisc", q], &test).remove(0);
        let l = r.lab.as_ref().unwrap();
        assert_eq!(l.queues.iter().find(|x| x.role == "bottleneck-up").unwrap().qdisc, q);
        let mut got = vec![r.scenarios[0].summary.upload_bps];
        eprintln!("{q}: added {:.1} ms, {:.2} Mbit/s", added(&r), got[0] / 1e6);
        // Under TCG the guest's CPU sometimes stalls a flow for seconds (one
        // CI run: 1.7 Mbit/s for the first 3 s under cake, then 8.6): one
        // more run after a miss; two misses fail.
        if got[0] <= want {
            let again = lab(&["--rate", "10mbit", "--qdisc", q], &test).remove(0);
            got.push(again.scenarios[0].summary.upload_bps);
            eprintln!("{q}: second run {:.2} Mbit/s", got[1] / 1e6);
        }
        assert!(got.iter().any(|&g| g > want), "{q}: goodput {got:?} bit/s in every run, want > {want:.0} (0.9 x this guest's best through the first four queues)");
    }
    // netem: 20 ms each way is a 40 ms idle round trip; jitter and loss on top.
    let r = &lab(&["--rate", "10mbit", "--queue", "fifo:100", "--delay", "20ms"], &test)[0];
    let l = r.lab.as_ref().unwrap();
    let idle = &r.idle.as_ref().unwrap().summary.latency;
    // The guest's own round trip without netem (a TCG guest's probes take
    // 1-4 ms through two namespaces and a router) is the floor the delay
    // adds to: the median of the first four labs' idle medians.
    let mut floors: Vec<f64> = rs.iter().map(|r| r.idle.as_ref().unwrap().summary.latency.p50_ms).collect();
    floors.sort_by(f64::total_cmp);
    let floor = (floors[1] + floors[2]) / 2.0;
    eprintln!("netem delay 20ms: backend {}, idle RTT min {:.2} p50 {:.2} ms, without netem p50 {floor:.2} ms", l.backend, idle.min_ms, idle.p50_ms);
    assert_eq!(l.backend, "kernel");
    // netem never delivers early: no probe under 2 x 20 ms; the median adds
    // 40 ms to the guest's own round trip.
    assert!(idle.min_ms >= 39.5, "a probe came back in {} ms through 2 x 20 ms", idle.min_ms);
    // netem's timers fire late, never early, in a TCG guest: +0.7 to +1.8
    // ms over the floor in most clean-clone CI runs, +5.5 in one (p50 46.49
    // against a 1.01 ms floor). Not applied would read -40, doubled +40.
    let over = idle.p50_ms - floor - 40.0;
    assert!((-1.0..8.0).contains(&over), "idle RTT p50 {} ms = {floor:.2} ms without netem + {:.2}, want + 40", idle.p50_ms, idle.p50_ms - floor);
    let probes = ["--scenarios", "1u0d", "--duration", "3s", "--idle", "5s", "--probe-interval", "20ms"];
    let r = &lab(&["--rate", "10mbit", "--queue", "fifo:100", "--delay", "20ms", "--jitter", "5ms", "--loss", "2%"], &probes)[0];
    let i = &r.idle.as_ref().unwrap().summary.latency;
    eprintln!("netem jitter 5ms loss 2%: idle RTT {:.1}..{:.1} ms, {:.1}% lost", i.min_ms, i.max_ms, i.loss_pct);
    // 40 ms +/- 2 x 5 ms: never below 30 (netem cannot deliver early), the
    // top decile left to the guest's scheduling (a TCG guest once put one
    // probe of 251 at 66.7 ms while its p99 was 54.9; in a CI run with the
    // release builds beside it, p99 66.2 and max 74.5 with p90 49.6).
    assert!(i.min_ms >= 29.0 && i.p90_ms <= 56.0 && i.max_ms - i.min_ms > 5.0, "{i:?}");
    assert!(i.loss_pct > 0.0, "2% loss each way lost no probe: {i:?}");
}
