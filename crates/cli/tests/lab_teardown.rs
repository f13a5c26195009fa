//! Teardown of `bloatlab lab`: after a normal run, after an error mid-run,
//! after SIGTERM, and after SIGKILL followed by `bloatlab lab cleanup`,
//! nothing of the lab is left. Also: the one-sentence message without root.
mod lab_util;
use bloatlab_results::TestResult;
use lab_util::*;
use std::process::{Command, Stdio};
use std::time::Duration;

const SHORT: &[&str] = &["--", "--duration", "3s", "--idle", "1s"];

#[test]
fn lab_teardown_after_normal_run() {
    if skip("lab_teardown_after_normal_run") {
        return;
    }
    let id = unique_id();
    let before = root_links();
    let out = Command::new(EXE).args(["lab", "--queue", "fifo:20", "--id", &id, "--quiet"]).args(SHORT).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_gone(&id, &before);
}

#[test]
fn lab_teardown_after_error_mid_run() {
    if skip("lab_teardown_after_error_mid_run") {
        return;
    }
    let id = unique_id();
    let before = root_links();
    let child = Command::new(EXE)
        .args(["lab", "--queue", "fifo:20", "--id", &id, "--", "--duration", "8s", "--idle", "1s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the witness's server, then kill it: the run must fail and clean up.
    let ns = format!("blab-{id}-witness");
    wait_for_test_client(&id);
    std::thread::sleep(Duration::from_millis(1500));
    for pid in netns_pids(&ns) {
        bloatlab_host::process::signal(pid as u32, bloatlab_host::process::Signal::Kill);
    }
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {err}");
    assert!(err.contains("witness") && err.contains("exited"), "stderr: {err}");
    assert_gone(&id, &before);
}

#[test]
fn lab_teardown_after_sigterm_keeps_partial_result() {
    if skip("lab_teardown_after_sigterm_keeps_partial_result") {
        return;
    }
    let id = unique_id();
    let before = root_links();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("partial.json");
    let child = long_lab(&id, &json, false);
    std::thread::sleep(Duration::from_secs(3));
    bloatlab_host::process::signal_child(&child, bloatlab_host::process::Signal::Term);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(143), "{}", String::from_utf8_lossy(&out.stderr));
    let r = TestResult::read_file(&json).unwrap();
    assert!(!r.complete);
    assert!(r.lab.is_some());
    assert_gone(&id, &before);
}

#[test]
fn lab_teardown_after_ctrl_c() {
    if skip("lab_teardown_after_ctrl_c") {
        return;
    }
    let id = unique_id();
    let before = root_links();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("ctrlc.json");
    // A terminal's Ctrl-C: SIGINT to the whole foreground process group.
    let child = long_lab(&id, &json, true);
    std::thread::sleep(Duration::from_secs(3));
    bloatlab_host::process::signal_group(child.id(), bloatlab_host::process::Signal::Int);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", String::from_utf8_lossy(&out.stderr));
    let r = TestResult::read_file(&json).unwrap();
    assert!(!r.complete);
    assert_gone(&id, &before);
}

#[test]
fn lab_sigkill_then_cleanup_removes_everything() {
    if skip("lab_sigkill_then_cleanup_removes_everything") {
        return;
    }
    let id = unique_id();
    let before = root_links();
    let mut child = Command::new(EXE)
        .args(["lab", "--queue", "fifo:20", "--id", &id, "--quiet", "--", "--duration", "20s", "--idle", "1s"])
        .spawn()
        .unwrap();
    wait_for_test_client(&id);
    let mut procs: Vec<u32> = Vec::new();
    for role in ["client", "server", "witness"] {
        procs.extend(netns_pids(&format!("blab-{id}-{role}")));
    }
    assert!(procs.len() >= 3, "lab processes: {procs:?}");
    child.kill().unwrap(); // SIGKILL: no chance to clean up
    child.wait().unwrap();
    assert_eq!(lab_namespaces(&id).len(), 4, "a SIGKILLed lab cannot have removed itself");
    // cleanup leaves other running labs alone and removes this one.
    let out = Command::new(EXE).args(["lab", "cleanup", "--id", &id]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains(&format!("lab {id}: removed 4 namespaces")), "{text}");
    assert_gone(&id, &before);
    std::thread::sleep(Duration::from_millis(200));
    for pid in procs {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let gone = stat.is_empty() || stat.rsplit(')').next().map(|s| s.trim_start().starts_with('Z')).unwrap_or(true);
        assert!(gone, "process {pid} of the killed lab still runs");
    }
    // A second cleanup finds nothing of it.
    let out = Command::new(EXE).args(["lab", "cleanup", "--id", &id]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("nothing to clean up"));
}

#[test]
fn lab_without_root_says_so_in_one_sentence() {
    const MSG: &str = "bloatlab lab needs root (CAP_NET_ADMIN) to create network namespaces; run it with sudo";
    let out = if !bloatlab_host::is_root() {
        Command::new(EXE).arg("lab").output().unwrap()
    } else {
        // As root: drop to nobody without capabilities.
        match Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", EXE, "lab"])
            .output()
        {
            Ok(o) => o,
            Err(_) => {
                eprintln!("skipping lab_without_root_says_so_in_one_sentence: setpriv not available");
                return;
            }
        }
    };
    let err = String::from_utf8_lossy(&out.stderr);
    if err.contains("Permission denied") && !err.contains("bloatlab") {
        eprintln!("skipping: the test binary is not executable by nobody ({err})");
        return;
    }
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(MSG), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    // The other subcommands say the same.
    if !bloatlab_host::is_root() {
        for sub in ["cleanup", "qdiscs"] {
            let o = Command::new(EXE).args(["lab", sub]).output().unwrap();
            assert!(String::from_utf8_lossy(&o.stderr).contains(MSG));
        }
    }
}

/// A 20 s lab run writing `json`, in its own process group when `group`
/// (as a terminal's foreground job); returns once its test runs.
fn long_lab(id: &str, json: &std::path::Path, group: bool) -> std::process::Child {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(EXE);
    cmd.args(["lab", "--queue", "fifo:20", "--id", id, "--json"])
        .arg(json)
        .args(["--", "--duration", "20s", "--idle", "1s"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if group {
        cmd.process_group(0);
    }
    let child = cmd.spawn().unwrap();
    wait_for_test_client(id);
    child
}

/// `cleanup` removes only what nobody owns: a kept lab stays until named
/// (`--id`) or `--all`; `--dry-run` only says what would go.
#[test]
fn cleanup_leaves_kept_labs_until_named() {
    if skip("cleanup_leaves_kept_labs_until_named") {
        return;
    }
    let id = unique_id();
    let before = root_links();
    let allowed_before = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_allowed_congestion_control").unwrap();
    let out = Command::new(EXE).args(["lab", "--no-run", "--id", &id, "--quiet"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(lab_namespaces(&id).len(), 4);
    // the banner's cc is the namespaces' default, for any tool run in the lab
    for role in ["client", "server", "witness"] {
        let o = Command::new("ip").args(["netns", "exec", &format!("blab-{id}-{role}"), "cat", "/proc/sys/net/ipv4/tcp_congestion_control"]).output().unwrap();
        assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "cubic", "{role}'s default congestion control");
    }
    // the printed test command works as printed (binary by path, the lab's --cc)
    let printed = String::from_utf8_lossy(&out.stdout).to_string();
    let cmd = printed.lines().find(|l| l.trim_start().starts_with("sudo ip netns exec")).unwrap_or_else(|| panic!("{printed}"));
    assert!(cmd.contains(" --cc cubic") && cmd.contains(EXE), "{cmd}");
    let words: Vec<&str> = cmd.split_whitespace().skip(1).collect(); // we are root: no sudo
    let o = Command::new(words[0])
        .args(&words[1..])
        .args(["--scenarios", "1u0d", "--duration", "1s", "--idle", "0.5s", "--interval", "0", "--quiet"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{cmd}: {}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("1u0d"));
    let text = |args: &[&str]| {
        let o = Command::new(EXE).args(args).output().unwrap();
        assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).to_string()
    };
    let t = text(&["lab", "cleanup"]);
    assert!(t.contains(&format!("lab {id}: kept with --keep")) && t.contains(&format!("--id {id}")), "{t}");
    assert_eq!(lab_namespaces(&id).len(), 4, "a bare cleanup removed a kept lab");
    let t = text(&["lab", "cleanup", "--all", "--dry-run"]);
    assert!(t.contains(&format!("lab {id}: would remove 4 namespaces (kept with --keep)")), "{t}");
    assert_eq!(lab_namespaces(&id).len(), 4, "--dry-run removed something");
    let t = text(&["lab", "cleanup", "--id", &id]);
    assert!(t.contains(&format!("lab {id}: removed 4 namespaces")), "{t}");
    assert_gone(&id, &before);
    // the host's allowed list is as it was (unless another lab on the host added the same cc)
    let allowed_after = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_allowed_congestion_control").unwrap();
    if !std::fs::read_dir("/run/bloatlab").map(|d| d.flatten().any(|e| e.file_name().to_string_lossy().ends_with(".json"))).unwrap_or(false) {
        assert_eq!(allowed_after, allowed_before, "the allowed congestion controls were not restored");
    }
}
