//! Ctrl-C / SIGTERM / SIGHUP handling for every bloatlab process: the handler
//! only records the signal; the engine, the lab, the emulator and the recipe
//! runner poll [`pending`] (or [`flag`]) between steps and while waiting,
//! then forward the signal to their children, write what they have and tear
//! down.
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Once;

static PENDING: AtomicI32 = AtomicI32::new(0);
static FLAG: AtomicBool = AtomicBool::new(false);
static INSTALL: Once = Once::new();

extern "C" fn on_signal(sig: libc::c_int) {
    PENDING.store(sig, Ordering::SeqCst);
    FLAG.store(true, Ordering::SeqCst);
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

/// True once a signal arrived: for loops that poll an `&AtomicBool`.
pub fn flag() -> &'static AtomicBool {
    &FLAG
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
