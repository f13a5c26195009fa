//! Ctrl-C / SIGTERM handling: the handler only records the signal; the lab
//! polls [`pending`] between steps and while waiting for its children, then
//! forwards the signal to them and tears down.
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Once;

static PENDING: AtomicI32 = AtomicI32::new(0);
static INSTALL: Once = Once::new();

extern "C" fn on_signal(sig: libc::c_int) {
    PENDING.store(sig, Ordering::SeqCst);
}

/// Install handlers for SIGINT, SIGTERM and SIGHUP (once per process).
pub fn install() {
    INSTALL.call_once(|| {
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            // SAFETY: installing an async-signal-safe handler (one atomic store).
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
                sa.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut sa.sa_mask);
                libc::sigaction(sig, &sa, std::ptr::null_mut());
            }
        }
    });
}

/// The signal received, if any (0 = none).
pub fn pending() -> i32 {
    PENDING.load(Ordering::SeqCst)
}

/// Name for messages.
pub fn name(sig: i32) -> &'static str {
    match sig {
        libc::SIGINT => "SIGINT (Ctrl-C)",
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        _ => "a signal",
    }
}

/// Conventional exit code for a signal-terminated run: 128 + signal.
pub fn exit_code(sig: i32) -> i32 {
    128 + sig
}
