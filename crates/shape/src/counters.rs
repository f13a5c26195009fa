//! The queues' counters, per device: the root qdisc's (which aggregate
//! its children: backlog, drops) and the leaf's kind, read over rtnetlink
//! inside a namespace (crates/host) or, where that fails, from `tc -s -j
//! qdisc show`.
use bloatlab_results::QueueSample;
use serde_json::Value;

/// Root-qdisc statistics of one device, plus the leaf kind (the queue).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DevStats {
    pub kind: String,
    pub sample: QueueSample,
}

/// Parse `tc -s -j qdisc show` output into per-device stats. The root qdisc's
/// counters aggregate its children (backlog, drops); the reported kind is the
/// leaf under the shaper (`handle 10:`) when there is one, else the root's.
pub fn parse_tc_json(text: &str) -> Result<Vec<(String, DevStats)>, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("tc -j output is not JSON: {e}"))?;
    let arr = v.as_array().ok_or("tc -j output is not an array")?;
    let mut out: Vec<(String, DevStats)> = Vec::new();
    let u = |q: &Value, k: &str| q.get(k).and_then(|x| x.as_u64()).unwrap_or(0);
    for q in arr {
        let dev = q.get("dev").and_then(|d| d.as_str()).unwrap_or("").to_string();
        let kind = q.get("kind").and_then(|d| d.as_str()).unwrap_or("").to_string();
        let root = q.get("root").and_then(|r| r.as_bool()).unwrap_or(false);
        let handle = q.get("handle").and_then(|r| r.as_str()).unwrap_or("");
        if root {
            out.push((
                dev,
                DevStats {
                    kind,
                    sample: QueueSample {
                        t_ns: 0,
                        backlog_packets: u(q, "qlen"),
                        backlog_bytes: u(q, "backlog"),
                        drops: u(q, "drops"),
                        overlimits: u(q, "overlimits"),
                        sent_packets: u(q, "packets"),
                        sent_bytes: u(q, "bytes"),
                        requeues: u(q, "requeues"),
                    },
                },
            ));
        } else if handle == "10:" {
            if let Some(e) = out.iter_mut().find(|(d, _)| *d == dev) {
                e.1.kind = kind;
            }
        }
    }
    Ok(out)
}

/// How a namespace's qdiscs are read.
pub enum Reader {
    /// rtnetlink socket inside the namespace, and the targets' ifindexes.
    Netlink(bloatlab_host::qdisc_stats::QdiscSock, Vec<(String, i32)>),
    /// `tc -n NS -s -j qdisc show` per sample.
    Tc,
}

impl Reader {
    pub fn open(ns: &str, devs: &[String]) -> Reader {
        let idx: Result<Vec<(String, i32)>, _> =
            devs.iter().map(|d| bloatlab_host::qdisc_stats::ifindex_in(ns, d).map(|i| (d.clone(), i))).collect();
        match (bloatlab_host::qdisc_stats::QdiscSock::open_in(ns), idx) {
            (Ok(mut sock), Ok(idx)) => {
                if sock.dump().is_ok() {
                    Reader::Netlink(sock, idx)
                } else {
                    Reader::Tc
                }
            }
            _ => Reader::Tc,
        }
    }

    pub fn read(&mut self, ns: &str) -> Option<Vec<(String, DevStats)>> {
        match self {
            Reader::Tc => {
                let text = crate::exec::run(Some(ns), &["tc", "-s", "-j", "qdisc", "show"]).ok()?;
                parse_tc_json(&text).ok()
            }
            Reader::Netlink(sock, idx) => {
                let qs = sock.dump().ok()?;
                let mut out = Vec::new();
                for (dev, i) in idx.iter() {
                    let Some(root) = qs.iter().find(|q| q.ifindex == *i && q.is_root()) else { continue };
                    let leaf = qs.iter().find(|q| q.ifindex == *i && q.handle == 0x0010_0000 /* "10:" (tc handles are hex) */);
                    out.push((
                        dev.clone(),
                        DevStats {
                            kind: leaf.unwrap_or(root).kind.clone(),
                            sample: QueueSample {
                                t_ns: 0,
                                backlog_packets: root.qlen,
                                backlog_bytes: root.backlog,
                                drops: root.drops,
                                overlimits: root.overlimits,
                                sent_packets: root.packets,
                                sent_bytes: root.bytes,
                                requeues: root.requeues,
                            },
                        },
                    ));
                }
                Some(out)
            }
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Reader::Netlink(..) => "netlink",
            Reader::Tc => "tc",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_htb_with_leaf() {
        let t = r#"[{"kind":"noqueue","handle":"0:","dev":"eth0","root":true,"refcnt":2,"options":{},"bytes":0,"packets":0,"drops":0,"overlimits":0,"requeues":0,"backlog":0,"qlen":0},
        {"kind":"htb","handle":"1:","dev":"wan","root":true,"refcnt":2,"options":{"r2q":10},"bytes":5038090,"packets":3354,"drops":6,"overlimits":3341,"requeues":0,"backlog":148372,"qlen":98},
        {"kind":"pfifo","handle":"10:","dev":"wan","parent":"1:1","options":{"limit":100},"bytes":5038090,"packets":3354,"drops":6,"overlimits":0,"requeues":0,"backlog":148372,"qlen":98}]"#;
        let v = parse_tc_json(t).unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].0, "eth0");
        assert_eq!(v[0].1.kind, "noqueue");
        assert_eq!(v[1].0, "wan");
        assert_eq!(v[1].1.kind, "pfifo");
        assert_eq!(v[1].1.sample.backlog_packets, 98);
        assert_eq!(v[1].1.sample.backlog_bytes, 148372);
        assert_eq!(v[1].1.sample.drops, 6);
        assert_eq!(v[1].1.sample.overlimits, 3341);
        assert!(parse_tc_json("nope").is_err());
    }
}
