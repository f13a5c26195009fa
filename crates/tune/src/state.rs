//! What `bloatlab tune` changed on an interface, kept on disk until it is
//! undone, and the undoing: a shaper goes only onto an interface whose
//! queues are the kernel's own (so removing the shaper restores them
//! exactly), the queues before are saved with the shaper's plan, and the
//! restore removes the shaper and checks that the queues read as before.
use crate::plan::Plan;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

pub use bloatlab_shape::tree::{check_untouched, parse_qdiscs, same_as_before, Qdisc};

/// What tune changed, saved before it changes anything.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Saved {
    pub iface: String,
    /// The network namespace tune ran in (the lab's router), if any.
    #[serde(default)]
    pub netns: Option<String>,
    /// The interface's qdiscs before.
    pub before: Vec<Qdisc>,
    /// The shaper installed (its removal undoes it).
    pub plan: Plan,
    /// The emulator shaper's process, when it shapes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emulator_pid: Option<u32>,
    /// The tune process that made it, and when (Unix seconds).
    pub pid: u32,
    pub at_unix_s: u64,
    /// `--local`: the host's own queue as it was (its undo puts it back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local: Option<crate::local::LocalBefore>,
}

/// Where the saved state of `iface` lives under `dir` (by default
/// /run/bloatlab: gone at a reboot, as the shaper is).
pub fn path(dir: &Path, netns: Option<&str>, iface: &str) -> PathBuf {
    match netns {
        Some(ns) => dir.join(format!("tune-{ns}-{iface}.json")),
        None => dir.join(format!("tune-{iface}.json")),
    }
}

impl Saved {
    /// The state of a `--local` tune: the host's queue as it was.
    pub fn local(lb: &crate::local::LocalBefore) -> Saved {
        Saved {
            iface: lb.iface.clone(),
            netns: lb.netns.clone(),
            before: lb.tree.clone(),
            plan: Plan::new(&lb.iface, None, None, crate::plan::Leaf::FqCodel),
            emulator_pid: None,
            pid: std::process::id(),
            at_unix_s: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
            local: Some(lb.clone()),
        }
    }

    /// [`Saved::save`], refused when a state is there already (a tune not
    /// undone yet).
    pub fn save_new(&self, file: &Path) -> Result<(), String> {
        if file.exists() {
            return Err(format!(
                "{} holds the state of a tune not undone yet (another tune running, or one that was killed): run `bloatlab tune --undo {}` first",
                file.display(),
                self.iface
            ));
        }
        self.save(file)
    }

    /// Write it (a whole file or none: written aside, then renamed).
    pub fn save(&self, file: &Path) -> Result<(), String> {
        if let Some(d) = file.parent() {
            std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
        }
        let tmp = file.with_extension("json.tmp");
        std::fs::write(&tmp, serde_json::to_string_pretty(self).expect("serializable")).map_err(|e| format!("{}: {e}", tmp.display()))?;
        std::fs::rename(&tmp, file).map_err(|e| format!("{}: {e}", file.display()))
    }

    pub fn load(file: &Path) -> Result<Saved, String> {
        let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
        serde_json::from_str(&text).map_err(|e| format!("{} is not a saved tune state: {e}", file.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Leaf;
    use bloatlab_model::Rate;

    #[test]
    fn the_state_survives_on_disk_whole() {
        let dir = tempfile::tempdir().unwrap();
        let s = Saved {
            iface: "eth1".into(),
            netns: Some("blab-abc123-router".into()),
            before: parse_qdiscs(r#"[{"kind":"noqueue","handle":"0:","root":true}]"#).unwrap(),
            plan: Plan::new("eth1", Some(Rate::mbit(4.5)), Some(Rate::mbit(18.0)), Leaf::FqCodel),
            emulator_pid: None,
            pid: 42,
            at_unix_s: 1_800_000_000,
            local: None,
        };
        let f = path(dir.path(), s.netns.as_deref(), &s.iface);
        assert!(f.ends_with("tune-blab-abc123-router-eth1.json"));
        s.save(&f).unwrap();
        assert_eq!(Saved::load(&f).unwrap(), s);
        assert!(!f.with_extension("json.tmp").exists());
        std::fs::write(&f, "{").unwrap();
        assert!(Saved::load(&f).unwrap_err().contains("is not a saved tune state"));
    }
}
