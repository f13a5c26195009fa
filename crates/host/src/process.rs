//! Processes: whether this one runs as root, signals to a child or to a
//! recorded pid, a child that dies with its parent, and the machine's name
//! as uname(2) gives it.
use std::process::{Child, Command};

/// The signals bloatlab sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGINT: stop and write what was measured.
    Int,
    /// SIGTERM: stop.
    Term,
    /// SIGKILL: stop now.
    Kill,
}

impl Signal {
    fn raw(self) -> libc::c_int {
        match self {
            Signal::Int => libc::SIGINT,
            Signal::Term => libc::SIGTERM,
            Signal::Kill => libc::SIGKILL,
        }
    }
}

/// True when this process runs as root (effective uid 0).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Send `sig` to process `pid`; false when it is gone (or not ours to signal).
/// Pid 0 is refused: it would signal our own process group.
pub fn signal(pid: u32, sig: Signal) -> bool {
    if pid == 0 || pid > i32::MAX as u32 {
        return false;
    }
    // SAFETY: kill(2) with a positive pid and a valid signal number.
    unsafe { libc::kill(pid as libc::pid_t, sig.raw()) == 0 }
}

/// Send `sig` to every process of process group `pgid` (a child started
/// with `process_group(0)` and its children).
pub fn signal_group(pgid: u32, sig: Signal) -> bool {
    if pgid <= 1 || pgid > i32::MAX as u32 {
        return false;
    }
    // SAFETY: kill(2) with a negative pid names a process group.
    unsafe { libc::kill(-(pgid as libc::pid_t), sig.raw()) == 0 }
}

/// Send `sig` to a child this process started (and has not reaped).
pub fn signal_child(child: &Child, sig: Signal) -> bool {
    signal(child.id(), sig)
}

/// Let the command's process receive `sig` when the thread that starts it
/// ends (PR_SET_PDEATHSIG), so it never outlives its parent.
pub fn die_with_parent(cmd: &mut Command, sig: Signal) {
    use std::os::unix::process::CommandExt;
    let raw = sig.raw() as libc::c_ulong;
    // SAFETY: the closure runs in the child between fork and exec and only
    // calls prctl(2), which is async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            libc::prctl(libc::PR_SET_PDEATHSIG, raw, 0, 0, 0);
            Ok(())
        });
    }
}

/// The operating system's name and the machine's architecture, as uname(2)
/// reports them ("Linux", "x86_64").
pub fn uname() -> Option<(String, String)> {
    // SAFETY: uname fills the zeroed struct it is given; its fields are
    // NUL-terminated strings.
    unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut u) != 0 {
            return None;
        }
        let s = |f: &[libc::c_char]| std::ffi::CStr::from_ptr(f.as_ptr()).to_string_lossy().into_owned();
        Some((s(&u.sysname), s(&u.machine)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_reach_a_child_and_not_pid_zero() {
        let mut c = Command::new("sleep").arg("30").spawn().unwrap();
        assert!(signal_child(&c, Signal::Term));
        let st = c.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(st.signal(), Some(libc::SIGTERM));
        assert!(!signal(0, Signal::Term), "pid 0 would be our own group");
        assert!(!signal_group(1, Signal::Term));
        let (os, machine) = uname().unwrap();
        assert_eq!(os, "Linux");
        assert!(!machine.is_empty());
    }
}
