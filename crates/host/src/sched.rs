//! Thread scheduling: the threads that move bulk data yield the CPU to the
//! threads that measure (probes, control, handshakes).
//!
//! A saturated 2-core host running 200 tests has ~1600 busy flow threads; a
//! single probe thread at the same priority competes with all of them.
//! Bulk threads therefore run under SCHED_IDLE (weight 3 against a normal
//! thread's 1024): they still take every cycle nothing else wants, so with
//! CPU to spare nothing changes, but a probe, control or handshake thread
//! that wakes up runs first. The costs: a bulk flow also yields to every
//! other busy process on the host, so a CPU-bound host shows lower goodput
//! (a measurement on a CPU-starved host is suspect anyway), and such threads
//! migrate between CPUs more often. docs/design.md has the measurements.

/// Run the calling thread (Linux: one thread, not the process) under
/// SCHED_IDLE. Lowering a priority needs no privilege; a failure (a seccomp
/// profile forbidding it) leaves the thread as it was.
pub fn make_current_thread_bulk() {
    let p = sched_param(0);
    // SAFETY: pid 0 = the calling thread; `p` is a valid sched_param.
    unsafe {
        let _ = libc::sched_setscheduler(0, libc::SCHED_IDLE, &p);
    }
}

/// A `sched_param` with its priority (musl's has further fields, zeroed).
fn sched_param(priority: libc::c_int) -> libc::sched_param {
    // SAFETY: sched_param is plain integers; all-zero is a valid value.
    let mut p: libc::sched_param = unsafe { std::mem::zeroed() };
    p.sched_priority = priority;
    p
}

/// Run the calling thread under SCHED_FIFO at `priority` (1..99): the
/// emulator's release threads. Needs CAP_SYS_NICE (root).
pub fn make_current_thread_realtime(priority: u32) -> std::io::Result<()> {
    let p = sched_param(priority.min(99) as libc::c_int);
    // SAFETY: pid 0 = the calling thread; `p` is a valid sched_param.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Timer slack of the calling thread, ns (PR_SET_TIMERSLACK): with 1 ns a
/// timed wait ends when asked, not up to the default 50 us later.
pub fn set_current_thread_timer_slack(ns: u64) {
    // SAFETY: prctl on the calling thread with integer arguments.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, ns.max(1) as libc::c_ulong, 0, 0, 0);
    }
}

/// Whether the calling thread runs as bulk (SCHED_IDLE).
pub fn current_thread_is_bulk() -> bool {
    // SAFETY: pid 0 = the calling thread.
    unsafe { libc::sched_getscheduler(0) == libc::SCHED_IDLE }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_calling_thread_becomes_bulk() {
        assert!(!current_thread_is_bulk());
        let inner = std::thread::spawn(|| {
            make_current_thread_bulk();
            current_thread_is_bulk()
        })
        .join()
        .unwrap();
        assert!(inner, "SCHED_IDLE was not applied");
        assert!(!current_thread_is_bulk(), "the spawning thread kept its policy");
    }
}
