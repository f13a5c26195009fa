//! The browser test agrees with `bloatlab test --profile quick`, in Chromium
//! and in Firefox, on four lab links (bench/web_vs_cli.sh runs the same
//! with more repetitions and prints the table in docs/web.md):
//! - aqm: the emulator's FQ-CoDel at 20 Mbit/s with 10 ms each way, load
//!   both ways: at most 5 ms added in either browser, as the CLI (the page's
//!   probe channel runs in its probe worker: on the page's main thread it
//!   read +5.8 ms here). At 50 Mbit/s this 2-core machine cannot run a
//!   browser's load both ways, the server and the emulator and still time
//!   probes to a millisecond: the page's probe timer ran 27-93 ms late,
//!   its UDP probes read +3.3 to +11.6 ms, and the page mostly said so
//!   ("not graded": its own delay decided the letter, or it held over 10%
//!   of its probes), but once, with its network-timed HTTP probes at
//!   +5.4 ms too, graded A where the CLI read A+ (docs/web.md);
//! - fast: 100 Mbit/s, 1000-packet FIFO (121 ms when full): the page's
//!   largest added latency within 10% or 5 ms of the CLI's;
//! - deep: 10 Mbit/s, 1000-packet FIFO (1.2 s when full): every loaded
//!   phase runs until latency stopped rising, in every client; the largest
//!   added latency within 15% of the CLI's (the queue saws between ~70% and
//!   full: each client alone reads its phase median 10-20% apart from run
//!   to run, the CLI 547-572 ms, Chromium 555-623, Firefox 513-640); physics, in every client: no
//!   phase adds more than the full queue holds (1211 ms, +10% + 5 ms) and
//!   each direction's capacity is 7-10 Mbit/s (the overflow's recovery can
//!   fall into a phase's steady part: 7.2-9.5 Mbit/s in one direction);
//! - asym: 20 down / 5 up Mbit/s, 500-packet FIFOs: within 10%, Firefox
//!   25% and its upload capacity 10% (over seven runs it read 0.79-0.96 of
//!   the CLI's added latency, Chromium 0.92-1.06: Firefox loses dozens of
//!   its probes at once once the round trip passes a second, 43 of 50
//!   within one second of a run where the CLI lost 4 and Chromium 5 at the
//!   same queue level, and those are the plateau's highest samples; they
//!   never reached the server, docs/web.md);
//! - everywhere: the same grade letter, capacities within 5%, the probes in
//!   the worker, and the page's own delay reported.
//!
//! (Through deep and asym the page read 10-30% less until the server's
//! WebRTC stack stopped abandoning its answers at once: sctp-proto 0.9
//! marked every `maxRetransmits: 0` message abandoned as it was sent, so a
//! SACK moved FORWARD-TSN past answers still in flight, the browser dropped
//! them when they came, and the two ends then traded FORWARD-TSN and SACK
//! 5800 times a second each way, 3 Mbit/s in a 5 Mbit/s upload. docs/web.md.)
//!
//! On fast, a slow phone (the page's main thread 20 times slower) gets the
//! CLI's grade (its added latency within 15%: one pair, not measured
//! again), and a browser held to 15% of a CPU says it could not keep up
//! instead of grading.
//!
//! The household test: the page in both browsers and `bloatlab test
//! --profile household` give each application (game, video call, stream,
//! bulk update) the same verdict on slow (5 Mbit/s, 1000-packet FIFO, 2.4 s
//! when full: the game, the call and the stream poor, checked; the loopback
//! tests in web.rs and engine.rs and lab_web.rs's fq_codel see them good).
//! The page runs through WebDriver (bench/web_page.py: selenium, Debian's
//! chromedriver, geckodriver) inside the lab's client namespace.
mod lab_util;
use bloatlab_model::Profile;
use bloatlab_results::TestResult;
use lab_util::*;
use std::process::Command;

fn have(tool: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
}

fn page_script() -> String {
    format!("{}/../../bench/web_page.py", env!("CARGO_MANIFEST_DIR"))
}

struct Link {
    name: &'static str,
    args: &'static [&'static str],
    /// The page's largest added latency within this share (or 5 ms) of the CLI's.
    added: f64,
    /// Capacities within this share, (down, up).
    capacity: (f64, f64),
    /// Firefox's bands where they differ (added, upload capacity).
    firefox: Option<(f64, f64)>,
}

const LINKS: &[Link] = &[
    Link { name: "aqm", args: &["--rate", "20mbit", "--queue", "fq_codel", "--delay", "10ms", "--backend", "emulator"], added: 0.10, capacity: (0.05, 0.05), firefox: None },
    Link { name: "fast", args: &["--rate", "100mbit", "--queue", "fifo:1000"], added: 0.10, capacity: (0.05, 0.05), firefox: None },
    // Through deep's and asym's FIFOs (1.2 s when full) the loaded part of
    // a phase (model::LOADED_RULE) reads 1.04-1.14 of the CLI's in the
    // browsers: once the queue overflows, the WebRTC probes' SCTP restarts
    // its congestion window at one packet per round trip (its
    // retransmission timer ran out), and at 1.2 s a round trip probes and
    // answers wait in its send queue: one-second medians of 1358-2274 ms
    // where the queue holds 1211 ms at most and the CLI's bare UDP probes
    // read 1019-1145 (docs/web.md, "Deep queues").
    Link { name: "deep", args: &["--rate", "10mbit", "--queue", "fifo:1000"], added: 0.15, capacity: (0.05, 0.05), firefox: None },
    Link { name: "asym", args: &["--rate-down", "20mbit", "--rate-up", "5mbit", "--queue", "fifo:500"], added: 0.15, capacity: (0.05, 0.05), firefox: Some((0.15, 0.10)) },
];

/// Links the household test runs on: each application's verdict is the
/// same in every client there.
const HOUSEHOLD_LINKS: &[(&str, &[&str])] = &[("slow", &["--rate", "5mbit", "--queue", "fifo:1000"])];

/// The tests here one at a time: each loads a lab link with a browser or
/// the CLI, and two at once would measure the machine.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn server_addr(id: &str) -> String {
    let out = Command::new("ip").args(["-n", &format!("blab-{id}-server"), "-4", "-o", "addr", "show", "dev", "eth0"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).split_whitespace().nth(3).and_then(|a| a.split('/').next()).expect("the server's address").to_string()
}

fn page(id: &str, browser: &str, server: &str, out: &std::path::Path, profile: bloatlab_model::Profile) -> TestResult {
    page_on(id, browser, server, out, profile, None, None)
}

/// The page, its main thread `throttle` times slower (DevTools' CPU
/// throttling, a slow phone's), or the whole browser held to `cgroup`'s CPU
/// share (workers too).
fn page_on(id: &str, browser: &str, server: &str, out: &std::path::Path, profile: bloatlab_model::Profile, throttle: Option<u32>, cgroup: Option<&CpuShare>) -> TestResult {
    let url = format!("http://{server}:{}/?autostart=1&mode={profile}", bloatlab_model::DEFAULT_WEB_PORT);
    let timeout = bloatlab_model::WebPlan::of(profile).max_total().as_secs() + 60;
    let args = ["ip".to_string(), "netns".into(), "exec".into(), format!("blab-{id}-client"), "python3".into(), page_script(), browser.into(), url];
    let mut cmd = match cgroup {
        // joined before exec, so the browser and its helpers inherit it
        Some(c) => {
            let mut cmd = Command::new("sh");
            cmd.args(["-c", &format!("echo $$ > {}/cgroup.procs && exec \"$@\"", c.0.display()), "sh"]).args(&args);
            cmd
        }
        None => {
            let mut cmd = Command::new(&args[0]);
            cmd.args(&args[1..]);
            cmd
        }
    };
    if let Some(t) = throttle {
        cmd.env("CPU_THROTTLE", t.to_string());
    }
    let o = cmd
        .arg(out)
        .arg(timeout.to_string())
        .env("PATH", format!("{}:{}/.cargo/bin", std::env::var("PATH").unwrap_or_default(), std::env::var("HOME").unwrap_or_default()))
        .output()
        .unwrap();
    assert!(o.status.success(), "{browser}: {}", String::from_utf8_lossy(&o.stderr));
    TestResult::read_file(out).unwrap()
}

fn cli(id: &str, server: &str, out: &std::path::Path, profile: bloatlab_model::Profile) -> TestResult {
    let o = Command::new("ip")
        .args(["netns", "exec", &format!("blab-{id}-client"), EXE, "test", server, "--profile", profile.name(), "--cc", "cubic", "--quiet", "--json"])
        .arg(out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    TestResult::read_file(out).unwrap()
}

fn line(link: &str, who: &str, r: &TestResult) -> String {
    let h = &r.headline;
    let phases: Vec<String> = r.scenarios.iter().map(|p| format!("{} {:.1}s{}", p.name, (p.end_ns - p.start_ns) as f64 / 1e9, if p.summary.still_rising { " rising" } else { "" })).collect();
    let lag = r.scenarios.iter().filter_map(|p| p.summary.page_lag_max_ms).fold(0.0, f64::max);
    let held: u32 = r.scenarios.iter().map(|p| p.summary.page_delayed_probes).sum();
    let rr: Vec<String> = r.scenarios.iter().map(|p| p.summary.rr_added_latency_ms.map_or("-".into(), |v| format!("{v:.1}"))).collect();
    format!(
        "{link} {who}: grade {:?}, idle {:.2} ms, max added {:.1} ms (request/response per phase: {} ms), down {:.2} up {:.2} Mbit/s, RPM {:.0}; {}; page lag {lag:.1} ms, {held} held",
        h.grade,
        h.idle_latency_ms.unwrap_or(f64::NAN),
        h.max_added_latency_ms.unwrap_or(f64::NAN),
        rr.join("/"),
        h.download_capacity_bps / 1e6,
        h.upload_capacity_bps / 1e6,
        h.rpm.unwrap_or(f64::NAN),
        phases.join(", ")
    )
}

/// A CPU cgroup holding its processes to a share of one CPU (cgroup v1's
/// cpu controller, or v2's cpu.max); removed when dropped.
struct CpuShare(std::path::PathBuf);

impl CpuShare {
    fn new(percent: u32) -> Result<CpuShare, String> {
        let name = format!("bloatlab-test-{}", std::process::id());
        let v1 = std::path::Path::new("/sys/fs/cgroup/cpu");
        let (dir, files): (std::path::PathBuf, Vec<(&str, String)>) = if v1.join("cpu.cfs_quota_us").is_file() {
            (v1.join(&name), vec![("cpu.cfs_period_us", "100000".into()), ("cpu.cfs_quota_us", format!("{}", percent * 1000))])
        } else if std::fs::read_to_string("/sys/fs/cgroup/cgroup.subtree_control").is_ok_and(|c| c.split_whitespace().any(|w| w == "cpu")) {
            (std::path::Path::new("/sys/fs/cgroup").join(&name), vec![("cpu.max", format!("{} 100000", percent * 1000))])
        } else {
            return Err("no cgroup cpu controller (cgroup v1 cpu, or v2 with cpu in cgroup.subtree_control)".into());
        };
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let share = CpuShare(dir);
        for (f, v) in files {
            std::fs::write(share.0.join(f), v).map_err(|e| format!("{f}: {e}"))?;
        }
        Ok(share)
    }
}

impl Drop for CpuShare {
    fn drop(&mut self) {
        // its processes have ended (the browser quit with the page)
        for _ in 0..50 {
            if std::fs::remove_dir(&self.0).is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}

/// On the fast link, beside the CLI's result `c`: a slow phone (the page's
/// main thread 20 times slower: its probes and load run in workers) gets
/// the CLI's grade; a browser held to 15% of a CPU (workers too) cannot
/// load 100 Mbit/s and probe at once, and says so instead of grading.
fn slow_and_starved(test: &str, id: &str, server: &str, dir: &std::path::Path, c: &TestResult) {
    let cpu = match CpuShare::new(15) {
        Ok(c) => c,
        Err(e) => {
            bloatlab_testkit::cannot_run(test, &e);
            return;
        }
    };
    // measured once more when the first is outside the band, as every
    // pair here is (the fast link's added latency wanders about 10% from
    // run to run: 96.5 and 99.0 ms for the CLI in one CI run)
    let ca = c.headline.max_added_latency_ms.unwrap();
    let within = |w: &TestResult| (w.headline.max_added_latency_ms.unwrap() - ca).abs() <= (0.15 * ca).max(5.0);
    let mut w = page_on(id, "chromium", server, &dir.join("phone.json"), Profile::Quick, Some(20), None);
    eprintln!("{}", line("fast", "chromium, main thread 20x slower", &w));
    if !within(&w) {
        w = page_on(id, "chromium", server, &dir.join("phone2.json"), Profile::Quick, Some(20), None);
        eprintln!("{}", line("fast", "chromium, main thread 20x slower, again", &w));
    }
    let why = bloatlab_metrics::grade::grade(&w).ungraded.unwrap_or_default();
    if w.headline.grade.is_none() && why.contains("the browser could not load the line and probe at once") {
        // this machine's 2 cores could not run the throttled page and the
        // load at once (issue 31: then the page says so instead of grading)
        eprintln!("fast, chromium, main thread 20x slower: not graded, as the page says: {why}");
    } else {
        assert_eq!(w.headline.grade, c.headline.grade, "the throttled page's grade: {why}");
        let wa = w.headline.max_added_latency_ms.unwrap();
        assert!(within(&w), "throttled page {wa:.1} ms vs cli {ca:.1} ms added");
    }
    let s = page_on(id, "chromium", server, &dir.join("starved.json"), Profile::Quick, None, Some(&cpu));
    eprintln!("{}", line("fast", "chromium on 15% of a CPU", &s));
    assert_eq!(s.headline.grade, None, "a starved browser was graded");
    let why = bloatlab_metrics::grade::grade(&s).ungraded.unwrap_or_default();
    assert!(why.contains("the browser could not load the line and probe at once"), "{why}");
}

/// Whether both browsers and their drivers are here (else the test says
/// what is missing, and fails in strict mode).
fn browsers(test: &str) -> bool {
    for (tool, why) in [("chromedriver", "apt-get install chromium chromium-driver"), ("firefox-esr", "apt-get install firefox-esr"), ("python3", "apt-get install python3")] {
        if !have(tool) {
            bloatlab_testkit::cannot_run(test, &format!("`{tool}` is not installed ({why})"));
            return false;
        }
    }
    if !have("geckodriver") && !std::path::Path::new(&format!("{}/.cargo/bin/geckodriver", std::env::var("HOME").unwrap_or_default())).is_file() {
        bloatlab_testkit::cannot_run(test, "geckodriver is not installed (cargo install geckodriver)");
        return false;
    }
    if !Command::new("python3").args(["-c", "import selenium"]).status().is_ok_and(|s| s.success()) {
        bloatlab_testkit::cannot_run(test, "python3 has no selenium (pip install selenium)");
        return false;
    }
    true
}

#[test]
fn the_household_page_in_chromium_and_firefox_and_the_cli_judge_each_application_alike() {
    let test = "the_household_page_in_chromium_and_firefox_and_the_cli_judge_each_application_alike";
    if skip(test) || !browsers(test) {
        return;
    }
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    for (name, args) in HOUSEHOLD_LINKS {
        let id = unique_id();
        let _lab = KeptLab(id.clone());
        let out = Command::new(EXE).args(["lab", "--no-run", "--quiet", "--id", &id, "--cc", "cubic"]).args(*args).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let server = server_addr(&id);
        let verdicts = |r: &TestResult| -> Vec<(String, bloatlab_metrics::uses::Verdict, String)> {
            bloatlab_metrics::household::household(r).into_iter().map(|u| (u.name, u.verdict, u.measured)).collect()
        };
        let c = verdicts(&cli(&id, &server, &dir.path().join(format!("{name}-cli.json")), Profile::Household));
        assert_eq!(c.len(), 4, "{name}: the CLI's household verdicts: {c:?}");
        for (app, v, m) in &c {
            eprintln!("{name} cli {app}: {v:?} ({m})");
            // behind 2.4 s of queue a game's updates, a call's frames and a
            // stream's segments all wait too long
            if app != "bulk update" {
                assert_eq!(*v, bloatlab_metrics::uses::Verdict::Poor, "{name} {app}: {m}");
            }
        }
        for browser in ["chromium", "firefox"] {
            let w = verdicts(&page(&id, browser, &server, &dir.path().join(format!("{name}-{browser}.json")), Profile::Household));
            for ((app, v, m), (capp, cv, cm)) in w.iter().zip(&c) {
                eprintln!("{name} {browser} {app}: {v:?} ({m})");
                assert_eq!((app, v), (capp, cv), "{name}: {browser} says {m}; the CLI {cm}");
            }
        }
    }
}

#[test]
fn the_page_in_chromium_and_firefox_agrees_with_the_cli_on_four_links() {
    let test = "the_page_in_chromium_and_firefox_agrees_with_the_cli_on_four_links";
    if skip(test) || !browsers(test) {
        return;
    }
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    for link in LINKS {
        let id = unique_id();
        let _lab = KeptLab(id.clone());
        let out = Command::new(EXE).args(["lab", "--no-run", "--quiet", "--id", &id, "--cc", "cubic"]).args(link.args).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let server = server_addr(&id);
        let c = cli(&id, &server, &dir.path().join(format!("{}-cli.json", link.name)), Profile::Quick);
        eprintln!("{}", line(link.name, "cli", &c));
        for browser in ["chromium", "firefox"] {
            let w = page(&id, browser, &server, &dir.path().join(format!("{}-{browser}.json", link.name)), Profile::Quick);
            eprintln!("{}", line(link.name, browser, &w));
            http_probes_measure_the_line(link, browser, &w);
            let what = format!("{} {browser}", link.name);
            // Through a FIFO each client alone reads a few % differently
            // from run to run (the CLI 96.5-100.8 ms through fast's over
            // three runs, Firefox 93.9-110.8): a pair outside its band is
            // measured again, both clients, once, and that pair decides.
            if let Err(e) = agrees(link, browser, &w, &c) {
                eprintln!("{what}: {e}; measuring both again");
                let c = cli(&id, &server, &dir.path().join(format!("{}-cli-again.json", link.name)), Profile::Quick);
                eprintln!("{}", line(link.name, "cli, again", &c));
                let w = page(&id, browser, &server, &dir.path().join(format!("{}-{browser}-again.json", link.name)), Profile::Quick);
                eprintln!("{}", line(link.name, &format!("{browser}, again"), &w));
                http_probes_measure_the_line(link, browser, &w);
                // a browser this machine's 2 cores could not keep up with says
                // so instead of grading (issue 31's rule), which is the
                // page telling the truth; a graded page must agree
                let why = bloatlab_metrics::grade::grade(&w).ungraded.unwrap_or_default();
                if w.headline.grade.is_none() && why.contains("the browser could not load the line and probe at once") {
                    eprintln!("{what}, again: not graded, as the page says: {why}");
                    continue;
                }
                agrees(link, browser, &w, &c).unwrap_or_else(|e| panic!("{what}, measured twice: {e}"));
            }
        }
        if link.name == "fast" {
            slow_and_starved(test, &id, &server, dir.path(), &c);
        }
    }
}

/// The page's result `w` against the CLI's `c` on `link`: the first way
/// they disagree.
/// Every answered HTTP probe was timed by the browser's network stack
/// (Resource Timing), in both browsers. (Their added latency is not
/// bounded here: through FQ-CoDel a probe connection that shares a bulk
/// flow's hash bucket waits behind its queue, +5.3 ms in one run where the
/// UDP probes read +1.2.)
fn http_probes_measure_the_line(link: &Link, browser: &str, w: &TestResult) {
    let ts = &w.metadata.probe_timestamps;
    let counts = ts.split("request/response: HTTP requests from the probe worker, one at a time, ").nth(1).and_then(|r| r.split(" answered timed by the browser's network stack").next());
    let (timed, answered) = counts.and_then(|c| c.split_once(" of ")).unwrap_or_else(|| panic!("{} {browser}: {ts}", link.name));
    assert_eq!(timed, answered, "{} {browser}: HTTP probes timed by the page's clock: {ts}", link.name);
    assert!(timed.parse::<u32>().unwrap() > 0, "{} {browser}: {ts}", link.name);
}

fn agrees(link: &Link, browser: &str, w: &TestResult, c: &TestResult) -> Result<(), String> {
    let ts = &w.metadata.probe_timestamps;
    if !ts.contains("probe worker") {
        return Err(format!("the probes did not run in the worker: {ts}"));
    }
    if !ts.contains("as measured") {
        return Err(format!("the clock step was not measured: {ts}"));
    }
    if w.headline.grade != c.headline.grade {
        return Err(format!("grade page {:?} vs cli {:?}", w.headline.grade, c.headline.grade));
    }
    let (wa, ca) = (w.headline.max_added_latency_ms.unwrap_or(f64::NAN), c.headline.max_added_latency_ms.unwrap_or(f64::NAN));
    let (added, up) = match link.firefox {
        Some(f) if browser == "firefox" => f,
        _ => (link.added, link.capacity.1),
    };
    if !((wa - ca).abs() <= (added * ca).max(5.0)) {
        return Err(format!("max added latency page {wa:.1} ms vs cli {ca:.1} ms (band {:.0}% or 5 ms)", added * 100.0));
    }
    if link.name == "aqm" && !(wa <= 5.0) {
        return Err(format!("{wa:.1} ms added through an AQM"));
    }
    for (wc, cc, share, dir) in [
        (w.headline.download_capacity_bps, c.headline.download_capacity_bps, link.capacity.0, "download"),
        (w.headline.upload_capacity_bps, c.headline.upload_capacity_bps, up, "upload"),
    ] {
        if !((wc - cc).abs() <= share * cc) {
            return Err(format!("{dir} capacity page {wc:.0} vs cli {cc:.0} bit/s (band {:.0}%)", share * 100.0));
        }
    }
    if link.name == "deep" {
        physics_deep(browser, w)?;
        physics_deep("cli", c)?;
    }
    // every loaded phase ran within its bounds, and one that ended before
    // its cap is one the result's rule calls settled
    for p in &w.scenarios {
        let len = (p.end_ns - p.start_ns) as f64 / 1e9;
        if !(4.7..=16.0).contains(&len) {
            return Err(format!("{}: ran {len:.1} s", p.name));
        }
        if len < 14.5 && (p.summary.still_rising || p.summary.settled_after_s.is_none()) {
            return Err(format!("{}: ended at {len:.1} s but {:?}", p.name, p.summary));
        }
    }
    Ok(())
}

/// The deep link's physics: 10 Mbit/s carries at most 10 Mbit/s of goodput
/// each way and at least 7 (one client alone reads 7.2-9.5 through the
/// overflow's recovery); no phase adds more than 1000 full-size packets
/// hold at 10 Mbit/s (1211 ms: model::analytic_queue_delay_ms).
fn physics_deep(who: &str, r: &TestResult) -> Result<(), String> {
    let full_ms = bloatlab_model::analytic_queue_delay_ms(&"fifo:1000".parse().unwrap(), 10e6).unwrap();
    for (cap, dir) in [(r.headline.download_capacity_bps, "download"), (r.headline.upload_capacity_bps, "upload")] {
        if !(7e6..10e6).contains(&cap) {
            return Err(format!("deep, {who}: {dir} capacity {cap:.0} bit/s through 10 Mbit/s"));
        }
    }
    for p in &r.scenarios {
        let Some(added) = p.summary.added_latency_ms else { continue };
        if !(added < full_ms * 1.1 + 5.0) {
            return Err(format!("deep, {who} {}: {added:.1} ms added, more than the full queue holds ({full_ms:.0} ms)", p.name));
        }
    }
    Ok(())
}
