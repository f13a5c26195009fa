//! Small system helpers: running ip/tc/ethtool, per-namespace sysctls,
//! privileges, kernel version, process identity.
use anyhow::{anyhow, bail, Context, Result};
use std::path::Path;
use std::process::{Command, Stdio};

/// Run a command, returning stdout; on failure the error names the command and its stderr.
pub fn run(argv: &[&str]) -> Result<String> {
    let out = Command::new(argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                anyhow!("`{}` is not installed (bloatlab lab needs iproute2 and ethtool: apt-get install iproute2 ethtool)", argv[0])
            } else {
                anyhow!("cannot run `{}`: {e}", argv[0])
            }
        })?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let err = err.trim();
        bail!(
            "`{}` failed: {}",
            argv.join(" "),
            if err.is_empty() { format!("{}", out.status) } else { err.to_string() }
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Same as [`run`] with owned strings.
pub fn run_s(argv: &[String]) -> Result<String> {
    let v: Vec<&str> = argv.iter().map(|s| s.as_str()).collect();
    run(&v)
}

/// True when the command exists on PATH.
pub fn have(cmd: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(cmd).is_file()))
        .unwrap_or(false)
}

/// Run `f` on a thread that has entered network namespace `ns` (by name).
pub fn in_netns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    let path = format!("/run/netns/{ns}");
    std::thread::spawn(move || -> Result<T> {
        let fd = std::fs::File::open(&path).with_context(|| format!("open {path}"))?;
        use std::os::fd::AsRawFd;
        // SAFETY: plain syscall on a valid fd; affects only this thread.
        let r = unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) };
        if r != 0 {
            bail!("setns({path}): {}", std::io::Error::last_os_error());
        }
        f()
    })
    .join()
    .map_err(|_| anyhow!("namespace helper thread panicked"))?
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

/// `uname -r`.
pub fn kernel_release() -> String {
    // SAFETY: uname fills a zeroed struct.
    unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut u) != 0 {
            return "unknown".into();
        }
        std::ffi::CStr::from_ptr(u.release.as_ptr()).to_string_lossy().into_owned()
    }
}

/// Does this process have the privileges to build a lab (CAP_NET_ADMIN and
/// CAP_SYS_ADMIN, which `ip netns add` needs to mount the namespace)?
pub fn have_lab_privileges() -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        // SAFETY: trivial libc call.
        return unsafe { libc::geteuid() } == 0;
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

/// Random bytes from the kernel.
pub fn random_bytes<const N: usize>() -> [u8; N] {
    let mut b = [0u8; N];
    let ok = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| {
            use std::io::Read;
            f.read_exact(&mut b)
        })
        .is_ok();
    if !ok {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
            ^ ((std::process::id() as u128) << 40);
        for (i, x) in b.iter_mut().enumerate() {
            *x = (t >> ((i % 16) * 8)) as u8;
        }
    }
    b
}

/// Process start time (clock ticks since boot, field 22 of /proc/PID/stat):
/// together with the pid it identifies a process across pid reuse.
pub fn proc_start_time(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Unix time in nanoseconds.
pub fn unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

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
pub fn kill_if_same(pid: u32, start: Option<u64>, sig: i32) -> bool {
    if pid == 0 {
        return false;
    }
    if let Some(st) = start {
        if proc_start_time(pid) != Some(st) {
            return false;
        }
    }
    // SAFETY: kill(2) on a specific pid we verified.
    unsafe { libc::kill(pid as i32, sig) == 0 }
}

