//! Advisory file locks (flock(2)): a lab's lock file tells whether the
//! process that owns the lab still runs.
use std::fs::File;
use std::os::fd::AsRawFd;

/// Take the exclusive lock of `f` without waiting; false when another open
/// file description holds it. Released when `f` is closed.
pub fn try_lock(f: &File) -> bool {
    // SAFETY: flock(2) on a descriptor `f` keeps open.
    unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

/// Release the lock of `f`.
pub fn unlock(f: &File) {
    // SAFETY: flock(2) on a descriptor `f` keeps open.
    unsafe {
        libc::flock(f.as_raw_fd(), libc::LOCK_UN);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_description_cannot_take_a_held_lock() {
        let dir = std::env::temp_dir().join(format!("bloatlab-host-lock-{}", std::process::id()));
        let a = File::create(&dir).unwrap();
        let b = File::open(&dir).unwrap();
        assert!(try_lock(&a));
        assert!(!try_lock(&b), "held by a");
        unlock(&a);
        assert!(try_lock(&b));
        let _ = std::fs::remove_file(&dir);
    }
}
