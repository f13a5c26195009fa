//! What `bloatlab tune` changed on an interface, kept on disk until it is
//! undone, and the undoing: a shaper goes only onto an interface whose
//! queues are the kernel's own (so removing the shaper restores them
//! exactly), the queues before are saved with the shaper's plan, and the
//! restore removes the shaper and checks that the queues read as before.
use crate::plan::Plan;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// One qdisc as `tc -j qdisc show` lists it: what identifies it in the
/// tree (its options and counters are not compared).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Qdisc {
    pub kind: String,
    pub handle: String,
    #[serde(default)]
    pub parent: Option<String>,
    #[serde(default)]
    pub root: bool,
}

/// The qdiscs of `tc -j qdisc show dev IFACE`.
pub fn parse_qdiscs(json: &str) -> Result<Vec<Qdisc>, String> {
    serde_json::from_str(json).map_err(|e| format!("cannot read `tc -j qdisc show`: {e}"))
}

/// The kernel's own root qdiscs: what an interface has until someone
/// installs a qdisc (handle 0:).
const DEFAULT_ROOTS: &[&str] = &["noqueue", "pfifo_fast", "mq", "fq_codel", "fq", "pfifo", "cake", "sfq"];

/// Ok when `iface`'s queues are the kernel's own: a default root qdisc
/// (and its per-queue children under `mq`), no ingress qdisc. Otherwise
/// the reason, naming what is there: tune will not replace a shaper it
/// cannot put back exactly.
pub fn check_untouched(iface: &str, qdiscs: &[Qdisc]) -> Result<(), String> {
    for q in qdiscs {
        let default = q.handle == "0:" && DEFAULT_ROOTS.contains(&q.kind.as_str());
        if q.kind == "ingress" || q.kind == "clsact" {
            return Err(format!(
                "{iface} already has an {} qdisc (another shaper or filter: sqm-scripts, a firewall's ingress rules?); remove it first (tc qdisc del dev {iface} {}) or run with --dry-run",
                q.kind, q.kind
            ));
        }
        if !default {
            return Err(format!(
                "{iface} already has a {} qdisc (handle {}): another shaper? tune puts back only the kernel's own queues; remove it first (tc qdisc del dev {iface} root) or run with --dry-run",
                q.kind, q.handle
            ));
        }
    }
    Ok(())
}

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

/// The qdiscs now, compared as `before`: Ok when the same, else what differs.
pub fn same_as_before(before: &[Qdisc], now: &[Qdisc]) -> Result<(), String> {
    if before == now {
        Ok(())
    } else {
        let show = |v: &[Qdisc]| v.iter().map(|q| format!("{} {}", q.kind, q.handle)).collect::<Vec<_>>().join(", ");
        Err(format!("the queues read [{}] where they read [{}] before", show(now), show(before)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Leaf;
    use bloatlab_model::Rate;

    #[test]
    fn only_the_kernels_own_queues_are_replaced() {
        let veth = parse_qdiscs(r#"[{"kind":"noqueue","handle":"0:","root":true,"refcnt":2,"options":{}}]"#).unwrap();
        check_untouched("eth1", &veth).unwrap();
        let mq = parse_qdiscs(r#"[{"kind":"mq","handle":"0:","root":true},{"kind":"fq_codel","handle":"0:","parent":":1"}]"#).unwrap();
        check_untouched("eth1", &mq).unwrap();
        let shaped = parse_qdiscs(r#"[{"kind":"htb","handle":"1:","root":true,"options":{}},{"kind":"ingress","handle":"ffff:","parent":"ffff:fff1"}]"#).unwrap();
        let e = check_untouched("eth1", &shaped).unwrap_err();
        assert!(e.contains("eth1 already has a htb qdisc (handle 1:)") && e.contains("--dry-run"), "{e}");
        let ingress = parse_qdiscs(r#"[{"kind":"noqueue","handle":"0:","root":true},{"kind":"ingress","handle":"ffff:","parent":"ffff:fff1"}]"#).unwrap();
        assert!(check_untouched("eth1", &ingress).unwrap_err().contains("an ingress qdisc"));
        assert!(parse_qdiscs("not json").unwrap_err().contains("tc -j qdisc show"));
    }

    #[test]
    fn the_state_survives_on_disk_whole_and_says_what_differs() {
        let dir = tempfile::tempdir().unwrap();
        let s = Saved {
            iface: "eth1".into(),
            netns: Some("blab-abc123-router".into()),
            before: parse_qdiscs(r#"[{"kind":"noqueue","handle":"0:","root":true}]"#).unwrap(),
            plan: Plan::new("eth1", Some(Rate::mbit(4.5)), Some(Rate::mbit(18.0)), Leaf::FqCodel),
            emulator_pid: None,
            pid: 42,
            at_unix_s: 1_800_000_000,
        };
        let f = path(dir.path(), s.netns.as_deref(), &s.iface);
        assert!(f.ends_with("tune-blab-abc123-router-eth1.json"));
        s.save(&f).unwrap();
        assert_eq!(Saved::load(&f).unwrap(), s);
        assert!(!f.with_extension("json.tmp").exists());
        std::fs::write(&f, "{").unwrap();
        assert!(Saved::load(&f).unwrap_err().contains("is not a saved tune state"));
        same_as_before(&s.before, &s.before).unwrap();
        let e = same_as_before(&s.before, &parse_qdiscs(r#"[{"kind":"htb","handle":"1:","root":true}]"#).unwrap()).unwrap_err();
        assert_eq!(e, "the queues read [htb 1:] where they read [noqueue 0:] before");
    }
}
