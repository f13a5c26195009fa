//! The txqueuelen recipe in a real lab (needs root: lab_util::skip): with two
//! queue sizes the bigger queue must give the higher latency, the same goodput
//! within 5%, and a latency below the analytic maximum queueing delay.
mod lab_util;
use std::process::Command;

const EXE: &str = env!("CARGO_BIN_EXE_bloatlab");

#[test]
fn txqueuelen_short_run_orders_latency_by_queue() {
    if lab_util::skip("txqueuelen_short_run_orders_latency_by_queue") {
        return;
    }
    lab_util::guarded(move || {
        let steal = lab_util::StealMeter::start();
        let root = tempfile::tempdir().unwrap();
        let o = Command::new(EXE)
            .args(["recipe", "run", "txqueuelen", "--set", "queue=fifo:10,fifo:100", "--set", "duration=10s", "--set", "idle=1s"])
            .args(["--out", root.path().to_str().unwrap()])
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{out}\n{err}");
        assert!(out.contains("| queue") && out.contains("1 upload, to server") && out.contains("1 upload, to witness"), "{out}");
        // the seeds' own figures beside ours
        assert!(out.contains("seed 000 / 002") && out.contains("000 idle: 2.6/3.3/23/2.9 ms") && out.contains("seed 002:"), "{out}");
        let dir = std::fs::read_dir(root.path()).unwrap().next().unwrap().unwrap().path();
        let mut pts: Vec<_> = std::fs::read_dir(dir.join("points")).unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().map(|e| e == "json").unwrap_or(false)).collect();
        pts.sort();
        assert_eq!(pts.len(), 2);
        let res: Vec<bloatlab_results::TestResult> = pts.iter().map(|p| bloatlab_results::TestResult::read_file(p).unwrap()).collect();
        // points that differ only in their queue share one lab (the bottleneck is swapped)
        let ids: Vec<&str> = res.iter().map(|r| r.lab.as_ref().unwrap().config.id.as_str()).collect();
        assert!(ids[0].len() == 6 && ids[0] == ids[1], "lab ids {ids:?}");
        assert_eq!(res[1].lab.as_ref().unwrap().config.queue, "fifo:100");
        let (small, big) = (&res[0].scenarios[0].summary, &res[1].scenarios[0].summary);
        eprintln!(
            "fifo:10: avg {:.1} ms, {:.2} Mbit/s; fifo:100: avg {:.1} ms, {:.2} Mbit/s",
            small.latency.avg_ms, small.upload_bps / 1e6, big.latency.avg_ms, big.upload_bps / 1e6
        );
        assert!(big.latency.avg_ms > 2.0 * small.latency.avg_ms, "bigger queue, higher latency");
        assert!(big.latency.p50_ms > small.latency.p50_ms);
        let rel = (big.upload_bps - small.upload_bps).abs() / big.upload_bps.max(small.upload_bps);
        assert!(rel < steal.tol(0.05), "goodput differs by {:.1}%", rel * 100.0);
        // 100 packets of 1514 B at 10 Mbit/s hold at most 121 ms: the probes can wait no longer
        // than that plus the idle RTT; a full-ish FIFO under one cubic upload keeps them above 40%.
        let analytic = res[1].lab.as_ref().and_then(|l| l.analytic_queue_delay_up_ms).unwrap_or(121.1);
        assert!(big.latency.avg_ms < analytic * 1.1 + 5.0, "{} vs analytic {analytic}", big.latency.avg_ms);
        assert!(big.latency.avg_ms > analytic * 0.4, "{} vs analytic {analytic}", big.latency.avg_ms);
        for f in ["results.csv", "table.md", "index.json", "recipe.toml", "report/report.html", "txqueuelen-latency_avg_ms.svg"] {
            assert!(dir.join(f).is_file(), "{f}");
        }
    });
}
