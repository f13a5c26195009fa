//! The browser test in a lab: headless Chromium in the lab's client
//! namespace runs the page `bloatlab server` serves in the server
//! namespace, through a 10 Mbit/s bottleneck, and its result is checked
//! against physics and against `bloatlab test` on the same link in the same
//! run (the same scenarios the page's ramp ended at):
//! - loaded latency (p50) within 15% or 5 ms of the CLI's, phase by phase;
//! - goodput within 10% of the CLI's (loaded both ways: the sum; each
//!   direction within 20%);
//! - goodput 8.5-10 Mbit/s per loaded direction, added latency at most what
//!   the full queue holds (10 packets: 12 ms);
//! - the added latency graded as the CLI grades it; fifo:10's latency A or
//!   A+ (the grade capped by the quarter of the probes the short queue
//!   drops, as the CLI's), fq_codel A+ or A;
//! - the page's result within 30 s, with no request but to the server;
//! - the household test: the game and the call good through fq_codel, the
//!   stream not poor.
//!
//! A deep FIFO (1.2 s when full) is lab_web_agree.rs's `deep` link, in
//! Chromium and Firefox, with the same physics checks.
mod lab_util;
use bloatlab_results::TestResult;
use bloatlab_testkit::chrome::{chromium, Chrome};
use lab_util::*;
use std::process::Command;
use std::time::Duration;

fn lab(id: &str, queue: &str) -> String {
    // reno: no HyStart. Cubic leaves slow start at a point that varies run
    // to run (a flow that missed it held 600 ms of fifo:1000 in one run
    // while the others held 260), so two clients could not be compared
    // within 15%; reno fills the queue the same way each time.
    let out = Command::new(EXE).args(["lab", "--no-run", "--id", id, "--rate", "10mbit", "--queue", queue, "--cc", "reno"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    text.lines()
        .find(|l| l.trim_start().starts_with("server ") && l.contains("ip netns exec"))
        .and_then(|l| l.rsplit('#').next())
        .and_then(|s| s.split_whitespace().next())
        .unwrap_or_else(|| panic!("no server address:\n{text}"))
        .to_string()
}

fn page(bin: &std::path::Path, id: &str, server: &str, mode: bloatlab_model::Profile) -> TestResult {
    let ns = format!("blab-{id}-client");
    let chrome = Chrome::start(bin, Some(&ns), server, 1280, 900).unwrap();
    let url = format!("http://{server}:{}/?autostart=1&mode={mode}", bloatlab_model::DEFAULT_WEB_PORT);
    let plan = bloatlab_model::WebPlan::of(mode);
    // BLOATLAB_WEB_SCREENSHOTS=DIR keeps a screenshot of each finished page (for the docs)
    let look = bloatlab_testkit::chrome::Look {
        screenshot: std::env::var_os("BLOATLAB_WEB_SCREENSHOTS").map(|d| std::path::Path::new(&d).join(format!("web-{}.png", server.replace('.', "-") + "-" + &mode.to_string()))),
        ..Default::default()
    };
    let run = chrome.run_with(&url, "window.bloatlabResult || (window.bloatlabError && {error: window.bloatlabError})", plan.max_total() + Duration::from_secs(25), &look).unwrap();
    let v = run.value.unwrap_or_else(|| panic!("no result in time; console: {:#?}", run.console));
    assert!(v.get("error").is_none(), "the page failed: {v}\n{:#?}", run.console);
    // the result within 10 s of the test's end (its phases at their caps at the most)
    assert!(run.elapsed <= plan.max_total() + Duration::from_secs(10), "the page took {:?}", run.elapsed);
    let prefix = format!("http://{server}:{}/", bloatlab_model::DEFAULT_WEB_PORT);
    let ws = format!("ws://{server}:{}/", bloatlab_model::DEFAULT_WEB_PORT);
    for r in &run.requests {
        assert!(r.starts_with(&prefix) || r.starts_with(&ws) || r.starts_with("blob:") || r.starts_with("data:"), "a request elsewhere: {r}");
    }
    serde_json::from_value(v).unwrap()
}

fn cli(id: &str, server: &str, scenarios: &str, mode: bloatlab_model::Profile) -> TestResult {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("cli.json");
    let cfg = bloatlab_model::WebPlan::of(mode).test_config(server, vec![]);
    let (d, i) = (format!("{}ms", cfg.duration.as_millis()), format!("{}ms", cfg.idle.as_millis()));
    // the page's phases run on until latency stopped rising: so do the CLI's
    let cap = format!("{}ms", cfg.until_settled.unwrap_or(cfg.duration).as_millis());
    let o = Command::new("ip")
        .args(["netns", "exec", &format!("blab-{id}-client"), EXE, "test", server, "-s", scenarios, "--duration", &d, "--until-settled", &cap, "--idle", &i, "--json"])
        .arg(&json)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    TestResult::read_file(&json).unwrap()
}

fn compare(queue: &str, web: &TestResult, cli: &TestResult) {
    assert_eq!(web.scenarios.len(), cli.scenarios.len());
    for (w, c) in web.scenarios.iter().zip(&cli.scenarios) {
        assert_eq!(w.name, c.name);
        let (wl, cl) = (w.summary.latency.p50_ms, c.summary.latency.p50_ms);
        eprintln!(
            "{queue} {}: p50 browser {wl:.1} ms, cli {cl:.1} ms; goodput down browser {:.2}, cli {:.2}; up browser {:.2}, cli {:.2} Mbit/s",
            w.name,
            w.summary.download_bps / 1e6,
            c.summary.download_bps / 1e6,
            w.summary.upload_bps / 1e6,
            c.summary.upload_bps / 1e6
        );
        assert!((wl - cl).abs() <= (0.15 * cl).max(5.0), "{queue} {}: loaded p50 browser {wl:.1} ms vs cli {cl:.1} ms", w.name);
        // Loaded both ways, each direction's ACKs queue behind the other's
        // data and the split wanders between runs of the same client: there
        // the pair's sum is held to 10%, each direction to 20%.
        let both = w.uploads > 0 && w.downloads > 0;
        let each = if both { 0.20 } else { 0.10 };
        for (wg, cg, dir) in [(w.summary.download_bps, c.summary.download_bps, "download"), (w.summary.upload_bps, c.summary.upload_bps, "upload")] {
            assert!((wg - cg).abs() <= each * cg, "{queue} {} {dir}: goodput browser {wg:.0} vs cli {cg:.0} bit/s", w.name);
        }
        if both {
            let (ws, cs) = (w.summary.download_bps + w.summary.upload_bps, c.summary.download_bps + c.summary.upload_bps);
            assert!((ws - cs).abs() <= 0.10 * cs, "{queue} {}: goodput both ways browser {ws:.0} vs cli {cs:.0} bit/s", w.name);
        }
    }
}

/// Each loaded phase ran until latency stopped rising, in the page as in
/// the CLI: a phase that ended before its cap is one the result's rule
/// (metrics::settle, in Rust) also calls settled, and not still rising (the
/// page's live rule and the result's agree); a phase at its cap says
/// whether it was still rising. Through the AQM, where latency does not
/// rise, every phase ends at its minimum (the quick test stays short).
fn settling(queue: &str, web: &TestResult, cli: &TestResult, mode: bloatlab_model::Profile) {
    let plan = bloatlab_model::WebPlan::of(mode);
    let (min, cap) = (plan.phases[1].duration.as_secs_f64(), plan.phases[1].cap.as_secs_f64());
    for (who, r) in [("browser", web), ("cli", cli)] {
        for p in &r.scenarios {
            let len = (p.end_ns - p.start_ns) as f64 / 1e9;
            eprintln!("{queue} {who} {}: ran {len:.1} s (min {min}, cap {cap}), settled after {:?} s, still rising {}", p.name, p.summary.settled_after_s, p.summary.still_rising);
            assert!(len >= min - 0.3 && len <= cap + 1.0, "{queue} {who} {}: ran {len:.1} s", p.name);
            if len < cap - 0.5 {
                assert!(p.summary.settled_after_s.is_some_and(|s| s <= len + 0.01) && !p.summary.still_rising, "{queue} {who} {}: ended at {len:.1} s before its cap, but the result's rule says {:?}", p.name, p.summary);
            }
            if queue == "fq_codel" {
                assert!(len <= min + 1.5, "{queue} {who} {}: ran {len:.1} s where latency does not rise", p.name);
            }
        }
    }
}

#[test]
fn the_browser_test_matches_the_cli_and_physics() {
    if skip("the_browser_test_matches_the_cli_and_physics") {
        return;
    }
    let Some(bin) = chromium() else {
        bloatlab_testkit::cannot_run("the_browser_test_matches_the_cli_and_physics", "no chromium on PATH (apt-get install chromium)");
        return;
    };
    guarded(|| {
        let mut grades = vec![];
        let mut households = vec![];
        use bloatlab_model::Profile;
        for (queue, mode) in [("fifo:10", Profile::Quick), ("fq_codel", Profile::Quick)] {
          // A link measured twice when the first pair fails a check, as
          // lab_web_agree.rs does: a browser phase through fifo:10 once lost
          // 41% of its probes and the page's live rule called it settled
          // where the result's did not; a second pair is a new measurement,
          // and it must pass every check.
          let attempt = || {
            let id = unique_id();
            let lab_guard = KeptLab(id.clone());
            let server = lab(&id, queue);
            let web = page(&bin, &id, &server, mode);
            assert_eq!(web.client, bloatlab_results::ClientKind::Browser);
            assert!(web.metadata.user_agent.as_deref().is_some_and(|u| u.contains("Chrome")), "{:?}", web.metadata.user_agent);
            let names: Vec<String> = web.scenarios.iter().map(|p| p.name.clone()).collect();
            let cli = cli(&id, &server, &names.join(","), mode);
            if let Some(d) = std::env::var_os("BLOATLAB_KEEP_RESULTS") {
                let d = std::path::Path::new(&d);
                let tag = queue.replace(':', "");
                std::fs::write(d.join(format!("web-{tag}.json")), serde_json::to_string(&web).unwrap()).unwrap();
                std::fs::write(d.join(format!("cli-{tag}.json")), serde_json::to_string(&cli).unwrap()).unwrap();
            }
            compare(queue, &web, &cli);
            settling(queue, &web, &cli, mode);
            // physics: each loaded direction carries 10 Mbit/s less headers
            // (9.5 of TCP payload at MSS 1448); a queue adds at most what it
            // holds when full (1000 packets: 1211 ms; 10: 12 ms)
            let full_ms = bloatlab_model::analytic_queue_delay_ms(&queue.parse().unwrap(), 10e6).unwrap_or(f64::INFINITY);
            // (both ways at once, each direction's ACKs wait behind the other's data)
            for p in &web.scenarios {
                if p.uploads > 0 && p.downloads > 0 {
                    // both ways: see compare(); at least 8 Mbit/s between them
                    let sum = p.summary.download_bps + p.summary.upload_bps;
                    assert!(sum > 8e6 && p.summary.download_bps < 10e6 && p.summary.upload_bps < 10e6, "{queue} {}: goodput {sum:.0} bit/s both ways", p.name);
                } else {
                    for (n, g, dir) in [(p.downloads, p.summary.download_bps, "download"), (p.uploads, p.summary.upload_bps, "upload")] {
                        if n > 0 {
                            assert!(g > 8.5e6 && g < 10.0e6, "{queue} {} {dir}: goodput {g:.0} bit/s through 10 Mbit/s", p.name);
                        }
                    }
                }
                let added = p.summary.added_latency_ms.unwrap();
                assert!(added < full_ms * 1.1 + 5.0, "{queue} {}: {added} ms added, more than the full queue holds ({full_ms} ms)", p.name);
            }
            // the same rule as the CLI's: the latency's grade alike, and the
            // grade the page shows is the result's
            let (wg, cg) = (bloatlab_metrics::grade::grade(&web), bloatlab_metrics::grade::grade(&cli));
            eprintln!("{queue}: grade browser {} (latency {}), cli {} (latency {})", wg.grade, wg.latency_grade, cg.grade, cg.latency_grade);
            assert_eq!(wg.latency_grade, cg.latency_grade, "{queue}: the added latency's grade");
            assert_eq!(web.headline.grade.as_deref(), Some(wg.grade.as_str()));
            (lab_guard, id, server, wg)
          };
            let (_lab, id, server, wg) = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(attempt)) {
                Ok(x) => x,
                Err(e) => {
                    let why = e.downcast_ref::<String>().cloned().or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default();
                    eprintln!("{queue}: the first pair failed ({why}); measuring the link again");
                    attempt()
                }
            };
            grades.push((queue, wg));
            // the household test on the AQM's link (the deep FIFO's is
            // lab_web_agree.rs's, in both browsers)
            if queue == "fq_codel" {
                let h = page(&bin, &id, &server, Profile::Household);
                let v = bloatlab_metrics::household::household(&h);
                for u in &v {
                    eprintln!("{queue} household {}: {:?}, {}", u.name, u.verdict, u.measured);
                }
                households.push((queue, v));
            }
        }
        // A game and a call beside a bulk update and a stream: the AQM keeps
        // their few packets out of the bulk flows' queue (good); the
        // stream's segments get a fair share (not poor).
        use bloatlab_metrics::uses::Verdict;
        assert_eq!(households.len(), 1);
        let verdict = |name: &str| households[0].1.iter().find(|u| u.name == name).map(|u| u.verdict).unwrap();
        for name in ["game", "video call"] {
            assert_eq!(verdict(name), Verdict::Good, "fq_codel {name}: {:#?}", households[0].1);
        }
        assert_ne!(verdict("stream"), Verdict::Poor, "{:#?}", households[0].1);
        use bloatlab_metrics::grade::Grade;
        // the short FIFO does not bloat (its grade is capped by the probes it
        // drops: a quarter of them, as the CLI's, so below the AQM's); the
        // AQM neither
        assert_eq!((grades[0].0, grades[1].0), ("fifo:10", "fq_codel"));
        assert!(grades[0].1.latency_grade <= Grade::A && grades[0].1.grade > grades[1].1.grade, "{grades:?}");
        assert!(grades[1].1.grade <= Grade::A, "{grades:?}");
    });
}
