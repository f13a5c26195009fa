//! Small system helpers: running ip/tc/ethtool, per-namespace sysctls,
//! privileges, kernel version, process identity.
use anyhow::{anyhow, bail, Context, Result};
use std::path::Path;


/// Run a command, returning stdout; on failure the error names the command and its stderr.
pub fn run(argv: &[&str]) -> Result<String> {
    bloatlab_host::cmd::run(argv).map_err(|e| anyhow!(e))
}

/// Same as [`run`] with owned strings.
pub fn run_s(argv: &[String]) -> Result<String> {
    let v: Vec<&str> = argv.iter().map(|s| s.as_str()).collect();
    run(&v)
}

pub use bloatlab_host::cmd::have;
pub use bloatlab_host::{kernel_release, proc_start_time};

/// Run `f` on a thread that has entered network namespace `ns` (by name).
pub fn in_netns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    bloatlab_host::netns::in_netns(ns, move || f().map_err(|e| format!("{e:#}"))).map_err(|e: String| anyhow!(e))
}

/// Write sysctls (`net/ipv4/...` paths relative to /proc/sys) inside namespace `ns`.
pub fn set_sysctls(ns: &str, kv: &[(&str, String)]) -> Result<()> {
    let kv: Vec<(String, String)> = kv.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
    let nsname = ns.to_string();
    in_netns(ns, move || {
        for (k, v) in kv {
            let p = format!("/proc/sys/{k}");
            std::fs::write(&p, &v).with_context(|| format!("set {} = {v} in {nsname}", k.replace('/', ".")))?;
        }
        Ok(())
    })
}

/// Read a sysctl inside namespace `ns`.
pub fn get_sysctl(ns: &str, k: &str) -> Result<String> {
    let p = format!("/proc/sys/{k}");
    in_netns(ns, move || Ok(std::fs::read_to_string(&p)?.trim().to_string()))
}

/// Does this process have the privileges to build a lab (CAP_NET_ADMIN and
/// CAP_SYS_ADMIN, which `ip netns add` needs to mount the namespace)?
pub fn have_lab_privileges() -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return bloatlab_host::is_root();
    };
    for line in status.lines() {
        if let Some(hex) = line.strip_prefix("CapEff:") {
            if let Ok(caps) = u64::from_str_radix(hex.trim(), 16) {
                const NET_ADMIN: u64 = 1 << 12;
                const SYS_ADMIN: u64 = 1 << 21;
                return caps & NET_ADMIN != 0 && caps & SYS_ADMIN != 0;
            }
        }
    }
    false
}

pub const NEED_ROOT: &str =
    "bloatlab lab needs root (CAP_NET_ADMIN) to create network namespaces; run it with sudo";

/// Fail with the one-sentence root message unless privileged.
pub fn require_privileges() -> Result<()> {
    if !have_lab_privileges() {
        bail!("{NEED_ROOT}");
    }
    Ok(())
}

/// Random bytes (the `rand` crate's thread generator, seeded by the OS).
pub fn random_bytes<const N: usize>() -> [u8; N] {
    let mut b = [0u8; N];
    rand::fill(&mut b[..]);
    b
}

/// Unix time in nanoseconds.
pub use bloatlab_host::clock::realtime_ns as unix_ns;

/// Namespace names as `ip netns list` shows them.
pub fn netns_list() -> Result<Vec<String>> {
    let mut v = Vec::new();
    let dir = Path::new("/run/netns");
    if !dir.exists() {
        return Ok(v);
    }
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        if let Some(n) = e.file_name().to_str() {
            v.push(n.to_string());
        }
    }
    v.sort();
    Ok(v)
}

/// Pids of processes inside a named namespace (`ip netns pids`).
pub fn netns_pids(ns: &str) -> Vec<u32> {
    run(&["ip", "netns", "pids", ns])
        .map(|s| s.split_whitespace().filter_map(|p| p.parse().ok()).collect())
        .unwrap_or_default()
}

/// Send a signal to a pid if it is still the same process (start time matches).
pub fn kill_if_same(pid: u32, start: Option<u64>, sig: bloatlab_host::process::Signal) -> bool {
    if pid == 0 {
        return false;
    }
    if let Some(st) = start {
        if proc_start_time(pid) != Some(st) {
            return false;
        }
    }
    bloatlab_host::process::signal(pid, sig)
}

