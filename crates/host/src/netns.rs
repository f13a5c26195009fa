//! Network namespaces: entering one on the calling thread, or running a
//! closure on a helper thread that has.
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// The file of a namespace: a name under /run/netns, or a path.
pub fn path(ns: &str) -> PathBuf {
    if ns.contains('/') {
        PathBuf::from(ns)
    } else {
        Path::new("/run/netns").join(ns)
    }
}

/// Enter network namespace `ns` on the calling thread.
pub fn enter(ns: &str) -> Result<(), String> {
    let p = path(ns);
    let f = std::fs::File::open(&p).map_err(|e| format!("network namespace \"{ns}\" not found ({}): {e}", p.display()))?;
    // SAFETY: setns on a valid namespace fd; it affects only this thread.
    let r = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    if r != 0 {
        return Err(format!("cannot enter network namespace {ns}: {} (root needed)", std::io::Error::last_os_error()));
    }
    Ok(())
}

/// Run `f` on a thread that has entered namespace `ns`.
pub fn in_netns<T: Send + 'static, E: From<String> + Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> Result<T, E> + Send + 'static,
) -> Result<T, E> {
    let ns = ns.to_string();
    std::thread::spawn(move || {
        enter(&ns)?;
        f()
    })
    .join()
    .map_err(|_| E::from("namespace helper thread panicked".to_string()))?
}
