//! Installing a [`Plan`] on a live interface and undoing it: the state is
//! saved before the first change, a failed step undoes the steps before it,
//! and an undo removes the shaper and checks that the interface's queues
//! read as they did before. Commands run through the shaping layer
//! (bloatlab_shape::exec: `ip`, `tc`), in a network namespace when given
//! one (the lab's home router).
use crate::plan::Plan;
use crate::state::Saved;
pub use bloatlab_shape::exec::device_exists;
pub(crate) use bloatlab_shape::exec::run_in;
pub use bloatlab_shape::tree::qdiscs;
use bloatlab_shape::tree;
use std::path::Path;

/// Install `plan` on its WAN interface, saving first what was there in
/// `state_file`. Refused, changing nothing, when the interface is missing,
/// its queues are not the kernel's own, or the IFB device exists already.
/// A step that fails undoes the steps before it.
pub fn install(plan: &Plan, netns: Option<&str>, state_file: &Path) -> Result<Saved, String> {
    if !device_exists(netns, &plan.wan) {
        return Err(format!("there is no interface {}{}", plan.wan, netns.map(|n| format!(" in {n}")).unwrap_or_default()));
    }
    if state_file.exists() {
        return Err(format!(
            "{} holds the state of a tune not undone yet (another tune running, or one that was killed): run `bloatlab tune --undo {}` first",
            state_file.display(),
            plan.wan
        ));
    }
    let before = qdiscs(netns, &plan.wan)?;
    tree::check_untouched(&plan.wan, &before)?;
    if let Some(d) = &plan.download {
        if device_exists(netns, &d.device) {
            return Err(format!("a device named {} exists already: not tune's to use; remove it first (ip link del dev {})", d.device, d.device));
        }
    }
    let saved = Saved {
        iface: plan.wan.clone(),
        netns: netns.map(String::from),
        before,
        plan: plan.clone(),
        emulator_pid: None,
        pid: std::process::id(),
        at_unix_s: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
        local: None,
    };
    saved.save(state_file)?;
    for c in plan.install() {
        if let Err(e) = run_in(netns, &c) {
            let undone = undo(&saved, state_file);
            return Err(match undone {
                Ok(()) => format!("{e} (the steps before it were undone: {} is as it was)", plan.wan),
                Err(u) => format!("{e}; undoing the steps before it: {u}"),
            });
        }
    }
    Ok(saved)
}

/// Remove what `saved` installed and check that the interface's queues read
/// as before; the state file is removed once they do.
pub fn undo(saved: &Saved, state_file: &Path) -> Result<(), String> {
    let ns = saved.netns.as_deref();
    if let Some(lb) = &saved.local {
        // --local: the host's own queue, txqueuelen and BQL as they were
        lb.restore()?;
        return std::fs::remove_file(state_file).or_else(|e| if e.kind() == std::io::ErrorKind::NotFound { Ok(()) } else { Err(format!("{}: {e}", state_file.display())) });
    }
    for c in saved.plan.remove() {
        // a part never installed (a failed install, a killed tune) is not an error
        let _ = run_in(ns, &c);
    }
    if let Some(d) = &saved.plan.download {
        if device_exists(ns, &d.device) {
            return Err(format!("{} is still there after `ip link del dev {}`", d.device, d.device));
        }
    }
    let now = qdiscs(ns, &saved.iface)?;
    tree::same_as_before(&saved.before, &now).map_err(|e| format!("{}: {e}", saved.iface))?;
    std::fs::remove_file(state_file).or_else(|e| if e.kind() == std::io::ErrorKind::NotFound { Ok(()) } else { Err(format!("{}: {e}", state_file.display())) })
}
