//! Queue observation: `tc -s -j qdisc show` in each namespace at a fixed cadence.
use crate::lab::QueueTarget;
use crate::sys;
use bloatlab_results::{QueueSample, QueueSeries};
use serde_json::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

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
enum Reader {
    /// rtnetlink socket inside the namespace, and the targets' ifindexes.
    Netlink(crate::nlstats::QdiscSock, Vec<(String, i32)>),
    /// `tc -n NS -s -j qdisc show` per sample.
    Tc,
}

impl Reader {
    fn open(ns: &str, devs: &[String]) -> Reader {
        let idx: Result<Vec<(String, i32)>, _> =
            devs.iter().map(|d| crate::nlstats::ifindex_in(ns, d).map(|i| (d.clone(), i))).collect();
        match (crate::nlstats::QdiscSock::open_in(ns), idx) {
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

    fn read(&mut self, ns: &str) -> Option<Vec<(String, DevStats)>> {
        match self {
            Reader::Tc => {
                let text = sys::run(&["tc", "-n", ns, "-s", "-j", "qdisc", "show"]).ok()?;
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

    fn name(&self) -> &'static str {
        match self {
            Reader::Netlink(..) => "netlink",
            Reader::Tc => "tc",
        }
    }
}

type Collected = (Vec<(QueueTarget, String, Vec<QueueSample>)>, String);

/// Series being collected, stamped in Unix ns (converted to test time later).
pub struct Sampler {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<Collected>>,
    /// Largest bottleneck backlog (packets) of the newest sample; u64::MAX = none yet.
    backlog: Arc<std::sync::atomic::AtomicU64>,
}

impl Sampler {
    pub fn start(targets: Vec<QueueTarget>, interval: Duration) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let backlog = Arc::new(std::sync::atomic::AtomicU64::new(u64::MAX));
        let bl = backlog.clone();
        let handle = std::thread::spawn(move || {
            let mut series: Vec<(QueueTarget, String, Vec<QueueSample>)> =
                targets.iter().map(|t| (t.clone(), String::new(), Vec::new())).collect();
            let mut nss: Vec<String> = targets.iter().map(|t| t.netns.clone()).collect();
            nss.sort();
            nss.dedup();
            let mut readers: Vec<(String, Reader)> = nss
                .iter()
                .map(|ns| {
                    let devs: Vec<String> = targets.iter().filter(|t| &t.netns == ns).map(|t| t.dev.clone()).collect();
                    (ns.clone(), Reader::open(ns, &devs))
                })
                .collect();
            let mut methods: Vec<&str> = readers.iter().map(|(_, r)| r.name()).collect();
            methods.dedup();
            let method = methods.join("+");
            let start = Instant::now();
            let mut tick: u32 = 0;
            loop {
                for (ns, reader) in readers.iter_mut() {
                    // A netlink dump is stamped within it (and retried if
                    // the thread was preempted during it), as the flows'
                    // byte counters are; a `tc` run (fork and exec, always
                    // milliseconds) at the middle of its span.
                    let (t_mid, stats) = if matches!(reader, Reader::Netlink(..)) {
                        bloatlab_host::clock::stamped(sys::unix_ns, || reader.read(ns))
                    } else {
                        let t0 = sys::unix_ns();
                        let s = reader.read(ns);
                        (t0 + (sys::unix_ns() - t0) / 2, s)
                    };
                    let Some(stats) = stats else { continue };
                    for (t, kind, samples) in series.iter_mut().filter(|(t, _, _)| &t.netns == ns) {
                        if let Some((_, s)) = stats.iter().find(|(d, _)| *d == t.dev) {
                            let mut q = s.sample;
                            q.t_ns = t_mid;
                            samples.push(q);
                            if kind.is_empty() {
                                *kind = s.kind.clone();
                            }
                        }
                    }
                }
                let newest = series
                    .iter()
                    .filter(|(t, _, _)| t.role.starts_with("bottleneck"))
                    .filter_map(|(_, _, s)| s.last().map(|q| q.backlog_packets))
                    .max();
                if let Some(b) = newest {
                    bl.store(b, Ordering::Relaxed);
                }
                if st.load(Ordering::SeqCst) {
                    break;
                }
                tick += 1;
                let next = start + interval * tick;
                while Instant::now() < next {
                    if st.load(Ordering::SeqCst) {
                        break;
                    }
                    std::thread::sleep((next - Instant::now()).min(Duration::from_millis(20)));
                }
            }
            (series, method)
        });
        Sampler { stop, handle: Some(handle), backlog }
    }

    /// The largest bottleneck backlog (packets) in the newest sample, if any.
    pub fn backlog_packets(&self) -> Option<u64> {
        Some(self.backlog.load(Ordering::Relaxed)).filter(|b| *b != u64::MAX)
    }

    /// Stop (after one last sample) and convert stamps to test time: ns since `start_unix_ns`.
    /// Samples taken before the test started are dropped. Also returns how the
    /// queues were read ("netlink" or "tc").
    pub fn finish(mut self, start_unix_ns: u64) -> (Vec<QueueSeries>, String) {
        self.stop.store(true, Ordering::SeqCst);
        let (series, method) = self.handle.take().and_then(|h| h.join().ok()).unwrap_or_default();
        let series = series
            .into_iter()
            .map(|(t, kind, samples)| QueueSeries {
                role: t.role.clone(),
                location: format!("{}/{}", t.netns, t.dev),
                qdisc: kind,
                samples: samples
                    .into_iter()
                    .filter(|s| s.t_ns >= start_unix_ns)
                    .map(|mut s| {
                        s.t_ns -= start_unix_ns;
                        s
                    })
                    .collect(),
            })
            .collect();
        (series, method)
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
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
