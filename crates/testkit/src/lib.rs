//! Support for bloatlab's timing tests on shared virtual machines.
//!
//! bloatlab's lab links, emulator and pacers are emulated by the machine's
//! own CPU: while a hypervisor runs other guests instead of this VM, they
//! stop. Tests keep tight tolerances on a quiet machine, widen them (and say
//! so) in proportion to the CPU that was stolen, skip (saying why) when the
//! VM is starved, and turn a failure under heavy steal into a printed skip.
//! On a quiet machine a failure stays a failure. In strict mode
//! ([`STRICT_ENV`], as CI runs) nothing skips: a starved machine is waited
//! for, then fails with its figures; a failure under steal runs again, and
//! the second outcome stands.
#![forbid(unsafe_code)]

use std::time::Duration;

pub mod chrome;
pub mod postgres;

/// The environment variable that turns a test's "cannot run here" into a
/// failure. `.ci/run` sets it: a green CI means every test ran.
pub const STRICT_ENV: &str = "BLOATLAB_STRICT";

/// Strict mode: [`STRICT_ENV`] is set to anything but "0" or "".
pub fn strict() -> bool {
    std::env::var(STRICT_ENV).is_ok_and(|v| !v.is_empty() && v != "0")
}

/// A test that cannot run on this machine (a tool, root, a peer or a
/// platform feature missing): on a developer's machine print why and return
/// true (the caller returns); in strict mode fail with the same reason.
pub fn cannot_run(test: &str, why: &str) -> bool {
    if strict() {
        panic!("{test} cannot run here and {STRICT_ENV} is set (CI runs every test): {why}");
    }
    eprintln!("SKIP {test}: {why} (with {STRICT_ENV}=1 this fails)");
    true
}

/// CPU time the hypervisor took from this VM since [`StealMeter::start`].
pub struct StealMeter(bloatlab_host::StealMeter);

impl StealMeter {
    pub fn start() -> StealMeter {
        StealMeter(bloatlab_host::StealMeter::start())
    }
    /// Percent of all CPU time since `start` that was stolen.
    pub fn pct(&self) -> f64 {
        self.0.pct()
    }
    /// A relative tolerance: `base` on a quiet machine; with more than 2% of
    /// the CPU stolen, at least 15% plus 1.5x the stolen fraction.
    pub fn tol(&self, base: f64) -> f64 {
        let p = self.pct();
        widen(base, p, || base.max(0.15) + 1.5 * p / 100.0)
    }
    /// `base` on a quiet machine; with more than 2% of the CPU stolen, `wide`
    /// grown in proportion to the stolen fraction (`wide x (1 + 10 x stolen)`).
    pub fn tol_or(&self, base: f64, wide: f64) -> f64 {
        let p = self.pct();
        widen(base, p, || wide * (1.0 + 10.0 * p / 100.0))
    }
}

fn widen(base: f64, pct: f64, wide: impl FnOnce() -> f64) -> f64 {
    if pct > 2.0 {
        let t = wide();
        eprintln!("NOTE: {pct:.1}% of CPU time was stolen by the hypervisor during this test: tolerance {base} widened to {t:.2}");
        t
    } else {
        base
    }
}

/// Some(percent) when more than 10% of the CPU is being stolen by the
/// hypervisor (sampled over one second): too little CPU to keep time, and
/// the caller skips, saying so. In strict mode a starved machine is waited
/// for (up to [`STARVED_WAIT`], a second's sample at a time) and, if it
/// stays starved, the test fails with the figures: never a silent pass.
pub fn starved() -> Option<f64> {
    starved_with(strict(), STARVED_WAIT, || {
        let m = StealMeter::start();
        std::thread::sleep(Duration::from_secs(1));
        m.pct()
    })
}

/// How long strict mode waits for a starved machine to calm down.
pub const STARVED_WAIT: Duration = Duration::from_secs(60);

fn starved_with(strict: bool, wait: Duration, mut sample: impl FnMut() -> f64) -> Option<f64> {
    let p = sample();
    if p <= 10.0 {
        return None;
    }
    if !strict {
        return Some(p);
    }
    let t0 = std::time::Instant::now();
    let mut seen = vec![p];
    while t0.elapsed() < wait {
        let p = sample();
        if p <= 10.0 {
            eprintln!("NOTE: the hypervisor took {} of this VM's CPU (% per second) before the test began; it ran once that fell to {p:.0}%", fmt_pcts(&seen));
            return None;
        }
        seen.push(p);
    }
    panic!("the hypervisor kept taking over 10% of this VM's CPU for {:.0} s ({}% per second): a timing test cannot run, and {STRICT_ENV} is set", wait.as_secs_f64(), fmt_pcts(&seen));
}

fn fmt_pcts(v: &[f64]) -> String {
    v.iter().map(|p| format!("{p:.0}")).collect::<Vec<_>>().join(", ")
}

/// Run a test's body; if it fails while more than 5% of the CPU was being
/// stolen by the hypervisor, the timing it checked was the VM's, not the
/// code's: on a developer's machine print a skip (with the failure); in
/// strict mode run the body once more, and that run's outcome stands
/// (a second failure fails, whatever the steal).
pub fn guarded(f: impl Fn()) {
    let m = StealMeter::start();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(&f));
    if strict() {
        if let Err(e) = r {
            let p = m.pct();
            if p <= 5.0 {
                std::panic::resume_unwind(e);
            }
            eprintln!("NOTE: a timing check failed while the hypervisor took {p:.1}% of this VM's CPU ({}); {STRICT_ENV} is set: running it once more", message(&*e));
            f();
        }
        return;
    }
    settle(r, || m.pct());
}

fn message(e: &(dyn std::any::Any + Send)) -> String {
    let msg = e.downcast_ref::<String>().cloned().or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default();
    msg.chars().take(300).collect()
}

/// A test body's outcome: Ok, a printed skip (failed with more than 5% of the
/// CPU stolen, `stolen` is asked only on failure), or the failure again.
fn settle(r: std::thread::Result<()>, stolen: impl FnOnce() -> f64) {
    if let Err(e) = r {
        let p = stolen();
        if p > 5.0 {
            eprintln!("SKIP: a timing check failed while the hypervisor took {p:.1}% of this VM's CPU: {} (with {STRICT_ENV}=1 it runs again)", message(&*e));
            return;
        }
        std::panic::resume_unwind(e);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_mode_turns_a_skip_into_a_failure() {
        // one test owns the variable: set, check, restore
        let before = std::env::var(STRICT_ENV).ok();
        std::env::remove_var(STRICT_ENV);
        assert!(!strict());
        assert!(cannot_run("t", "no such tool"), "a developer's machine skips");
        std::env::set_var(STRICT_ENV, "1");
        assert!(strict());
        let e = std::panic::catch_unwind(|| cannot_run("t", "no such tool")).unwrap_err();
        let msg = e.downcast_ref::<String>().unwrap();
        assert!(msg.contains("no such tool") && msg.contains(STRICT_ENV), "{msg}");
        std::env::set_var(STRICT_ENV, "0");
        assert!(!strict());
        match before {
            Some(v) => std::env::set_var(STRICT_ENV, v),
            None => std::env::remove_var(STRICT_ENV),
        }
    }

    #[test]
    fn a_starved_machine_skips_only_off_strict_mode() {
        let quiet = std::time::Duration::from_millis(50);
        assert_eq!(starved_with(false, quiet, || 3.0), None);
        assert_eq!(starved_with(false, quiet, || 40.0), Some(40.0), "a developer's machine skips");
        // strict: waited for, and run once it calms down
        let mut v = vec![40.0, 30.0, 4.0].into_iter();
        assert_eq!(starved_with(true, std::time::Duration::from_secs(5), || v.next().unwrap()), None);
        // strict and starved throughout: a failure with the figures
        let e = std::panic::catch_unwind(|| starved_with(true, quiet, || 40.0)).unwrap_err();
        let msg = e.downcast_ref::<String>().unwrap();
        assert!(msg.contains("40, 40") && msg.contains(STRICT_ENV), "{msg}");
    }

    #[test]
    fn widening_only_under_steal() {
        assert_eq!(widen(0.03, 0.0, || 9.0), 0.03);
        assert_eq!(widen(0.03, 2.0, || 9.0), 0.03);
        assert_eq!(widen(0.03, 2.1, || 9.0), 9.0);
    }

    #[test]
    fn a_failure_on_a_quiet_machine_stays_a_failure() {
        let boom = || -> std::thread::Result<()> { Err(Box::new("boom")) };
        // quiet machine: the failure propagates
        let r = std::panic::catch_unwind(|| settle(boom(), || 0.0));
        assert_eq!(*r.unwrap_err().downcast::<&str>().unwrap(), "boom");
        let r = std::panic::catch_unwind(|| settle(boom(), || 5.0));
        assert!(r.is_err());
        // starved VM: a printed skip
        settle(boom(), || 5.1);
        // success never asks
        settle(Ok(()), || panic!("steal asked on success"));
        guarded(|| {});
    }
}
