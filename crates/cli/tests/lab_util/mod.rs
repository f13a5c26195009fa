//! Helpers shared by the lab integration tests (crates/cli/tests/lab_*.rs).
#![allow(dead_code)]
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

#[allow(unused_imports)]
pub use bloatlab_testkit::{guarded, starved, StealMeter};

pub const EXE: &str = env!("CARGO_BIN_EXE_bloatlab");

/// True (after printing why) when this machine cannot run labs: not root, or tools missing.
pub fn skip(test: &str) -> bool {
    if !bloatlab_host::is_root() {
        return bloatlab_testkit::cannot_run(test, "needs root to create network namespaces (run cargo test as root)");
    }
    for tool in ["ip", "tc", "ethtool"] {
        let found = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
            .unwrap_or(false);
        if !found {
            return bloatlab_testkit::cannot_run(test, &format!("`{tool}` is not installed (apt-get install iproute2 ethtool)"));
        }
    }
    if let Some(p) = starved() {
        eprintln!(
            "skipping {test}: the hypervisor is taking {p:.0}% of this VM's CPU right now; the lab's emulated \
             links cannot keep time, so its timing checks would measure the VM, not the lab"
        );
        return true;
    }
    false
}

/// A lab id nobody else uses: 6 hex digits from the pid, time and a counter.
pub fn unique_id() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    let x = (t ^ ((std::process::id() as u64) << 20) ^ ((N.fetch_add(1, Ordering::SeqCst) as u64) << 9))
        .wrapping_mul(0x9E3779B97F4A7C15);
    format!("{:06x}", (x >> 40) & 0xffffff)
}

/// Namespaces of lab `id` that exist now (`ip netns list`).
pub fn lab_namespaces(id: &str) -> Vec<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().expect("ip netns list");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&format!("blab-{id}-")))
        .map(String::from)
        .collect()
}

/// Interface names in the root namespace (`ip -o link`).
pub fn root_links() -> Vec<String> {
    let out = Command::new("ip").args(["-o", "link"]).output().expect("ip -o link");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split(": ").nth(1))
        .map(|n| n.split('@').next().unwrap_or(n).to_string())
        .collect()
}

/// Assert nothing of lab `id` is left: no namespaces, no record, no lab
/// interfaces in the root namespace, no processes it started.
pub fn assert_gone(id: &str, links_before: &[String]) {
    let ns = lab_namespaces(id);
    assert!(ns.is_empty(), "lab {id} left namespaces behind: {ns:?}");
    assert!(!Path::new(&format!("/run/bloatlab/lab-{id}.json")).exists(), "lab {id} left its record");
    let tmp: Vec<_> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&format!("bloatlab-lab-{id}-")))
        .collect();
    assert!(tmp.is_empty(), "lab {id} left its temporary directory");
    for l in root_links() {
        if ["lan", "wan", "wan-srv", "wan-wit", "probe0", "probe1"].contains(&l.as_str()) {
            assert!(links_before.contains(&l), "lab {id} left interface {l} in the root namespace");
        }
    }
}

pub fn wait_for(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let t = Instant::now();
    while !cond() {
        assert!(t.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Pids inside a namespace.
pub fn netns_pids(ns: &str) -> Vec<u32> {
    let out = Command::new("ip").args(["netns", "pids", ns]).output().expect("ip netns pids");
    String::from_utf8_lossy(&out.stdout).split_whitespace().filter_map(|p| p.parse().ok()).collect()
}

/// TCP goodput a link of `rate_bps` can carry: MSS bytes of each full-size
/// 1514-byte frame (1500 MTU + 14 Ethernet; IPv4 MSS 1448, IPv6 1428 with timestamps).
pub fn expected_goodput(rate_bps: f64, mss: u32) -> f64 {
    rate_bps * mss as f64 / 1514.0
}

/// Samples of the queue `role` in the steady part of a phase: without its
/// first 20% and last 5%, as the goodput summary.
pub fn steady_samples<'a>(r: &'a bloatlab_results::TestResult, role: &str, phase: usize) -> Vec<&'a bloatlab_results::QueueSample> {
    let q = r.lab.as_ref().unwrap().queues.iter().find(|q| q.role == role).expect("queue series");
    let p = &r.scenarios[phase];
    let len = (p.end_ns - p.start_ns) as f64;
    q.samples
        .iter()
        .filter(|x| (x.t_ns as f64) >= p.start_ns as f64 + 0.2 * len && (x.t_ns as f64) <= p.start_ns as f64 + 0.95 * len)
        .collect()
}

/// Bits per second the queue `role` sent during the steady part of a phase
/// (without its first 20% and last 5%, as the goodput summary).
pub fn wire_bps(r: &bloatlab_results::TestResult, role: &str, phase: usize) -> f64 {
    let w = steady_samples(r, role, phase);
    let (a, b) = (w.first().unwrap(), w.last().unwrap());
    (b.sent_bytes - a.sent_bytes) as f64 * 8.0 / ((b.t_ns - a.t_ns) as f64 / 1e9)
}

/// Bits per second the queue `role` sent while it had a backlog (both ends of
/// a sampling interval non-empty) in the steady part of a phase, and the
/// fraction of that window it was backlogged. While backlogged, a shaper sends
/// at exactly its rate, whatever the sending host does; stalls of the host
/// (e.g. CPU steal on a shared VM) only lower the backlogged fraction.
pub fn backlogged_rate(r: &bloatlab_results::TestResult, role: &str, phase: usize) -> (f64, f64) {
    let w = steady_samples(r, role, phase);
    let (mut bytes, mut busy_ns, mut all_ns) = (0u64, 0u64, 0u64);
    for pair in w.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        let dt = b.t_ns - a.t_ns;
        all_ns += dt;
        if a.backlog_packets > 0 && b.backlog_packets > 0 {
            bytes += b.sent_bytes - a.sent_bytes;
            busy_ns += dt;
        }
    }
    let rate = if busy_ns > 0 { bytes as f64 * 8.0 / (busy_ns as f64 / 1e9) } else { 0.0 };
    (rate, busy_ns as f64 / all_ns.max(1) as f64)
}

/// Wait until the lab's test (`bloatlab job .../test-N.job.json`) runs in lab
/// `id`'s client namespace (other short-lived helpers such as tc or ethtool
/// also show up there).
pub fn wait_for_test_client(id: &str) {
    let cns = format!("blab-{id}-client");
    wait_for("the lab's bloatlab test", Duration::from_secs(30), || {
        netns_pids(&cns).iter().any(|p| {
            let cmd = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
            let args: Vec<&[u8]> = cmd.split(|b| *b == 0).collect();
            args.len() > 2 && args[1] == b"job" && String::from_utf8_lossy(args[2]).contains("/test-")
        })
    });
}

/// Run `bloatlab lab LAB --quiet --json JSON -- TEST`, require success and
/// read the result it wrote.
pub fn run_lab(json: &Path, lab: &[&str], test: &[&str]) -> bloatlab_results::TestResult {
    let out = Command::new(EXE).arg("lab").args(lab).args(["--quiet", "--json"]).arg(json).arg("--").args(test).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    bloatlab_results::TestResult::read_file(json).unwrap()
}

/// [`run_lab`] without --quiet: the result and what the lab printed (its table).
pub fn run_lab_printed(json: &Path, lab: &[&str], test: &[&str]) -> (bloatlab_results::TestResult, String) {
    let out = Command::new(EXE).arg("lab").args(lab).arg("--json").arg(json).arg("--").args(test).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    (bloatlab_results::TestResult::read_file(json).unwrap(), String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Removes a kept lab (`bloatlab lab --no-run --id ID`) when dropped,
/// whether or not the test's assertions passed.
pub struct KeptLab(pub String);
impl Drop for KeptLab {
    fn drop(&mut self) {
        let _ = Command::new(EXE).args(["lab", "cleanup", "--id", &self.0]).output();
    }
}
