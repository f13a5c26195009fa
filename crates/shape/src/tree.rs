//! A device's qdisc tree as `tc -j qdisc show` lists it: whether it is the
//! kernel's own (so removing a shaper puts it back exactly), and whether it
//! reads as it did before.
use crate::exec::run;
use serde::{Deserialize, Serialize};

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

/// `iface`'s qdiscs now (in `netns` when given).
pub fn qdiscs(netns: Option<&str>, iface: &str) -> Result<Vec<Qdisc>, String> {
    parse_qdiscs(&run(netns, &["tc", "-j", "qdisc", "show", "dev", iface])?)
}

/// The kernel's own root qdiscs: what an interface has until someone
/// installs a qdisc (handle 0:).
const DEFAULT_ROOTS: &[&str] = &["noqueue", "pfifo_fast", "mq", "fq_codel", "fq", "pfifo", "cake", "sfq"];

/// Ok when `iface`'s queues are the kernel's own: a default root qdisc
/// (and its per-queue children under `mq`), no ingress qdisc. Otherwise
/// the reason, naming what is there: a shaper that replaced another could
/// not be removed without losing it.
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
    fn what_differs_is_named() {
        let before = parse_qdiscs(r#"[{"kind":"noqueue","handle":"0:","root":true}]"#).unwrap();
        same_as_before(&before, &before).unwrap();
        let e = same_as_before(&before, &parse_qdiscs(r#"[{"kind":"htb","handle":"1:","root":true}]"#).unwrap()).unwrap_err();
        assert_eq!(e, "the queues read [htb 1:] where they read [noqueue 0:] before");
    }
}
