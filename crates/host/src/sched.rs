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
    let p = libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 = the calling thread; `p` is a valid sched_param.
    unsafe {
        let _ = libc::sched_setscheduler(0, libc::SCHED_IDLE, &p);
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
