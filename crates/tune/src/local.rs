//! The seeds' own knob (`bloatlab tune --local`): when the bottleneck is
//! this host's own interface (its link is the slowest on the path: seeds
//! 000-002's txqueuelen case, the lab's `--bottleneck local`), no shaper
//! helps, because the queue that fills is this host's own. Tune that queue
//! instead: fq_codel where the kernel has it, else the longest FIFO whose
//! added latency stays within the target (searched by bisection on its
//! length); txqueuelen set to match; BQL's `limit_max` held to about a
//! millisecond of the link where the driver has BQL.
//!
//! The queue is the root qdisc, or, where a rate limiter stands for the
//! link (HTB or TBF at `1:` with the queue under it at `10:`, as the lab
//! and bloatlab's shaping layer install it), the queue under it. Only a
//! queue that can be put back exactly is changed: the kernel's default
//! root, or a pfifo/bfifo (its limit read back); what was there, the
//! txqueuelen and BQL's limits are saved before the first change and put
//! back on every exit, checked against `tc -j qdisc show`.
use crate::search::{holds, WIRE_EFFICIENCY};
use bloatlab_shape::exec::{run, run_all};
use bloatlab_shape::qdisc::LEAF_HANDLE;
use bloatlab_shape::tree::{self, Qdisc};
use serde::{Deserialize, Serialize};

/// What a host's queue was before tune changed it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LocalBefore {
    pub iface: String,
    #[serde(default)]
    pub netns: Option<String>,
    /// The device's qdiscs (compared after the restore).
    pub tree: Vec<Qdisc>,
    /// The queue tuned is under a rate limiter (`10:` under `1:1`), not the root.
    pub under_limiter: bool,
    /// Its kind and, for pfifo/bfifo, its limit (packets or bytes).
    pub kind: String,
    pub handle: String,
    pub limit: Option<u64>,
    pub txqueuelen: u64,
    /// BQL's `limit_max` per transmit queue (`tx-0`, ...); empty without BQL.
    #[serde(default)]
    pub bql: Vec<(String, String)>,
}

/// A setting of the host's queue.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LocalSetting {
    FqCodel,
    /// A FIFO of this many packets (and txqueuelen the same).
    Pfifo { packets: u64 },
}

impl LocalSetting {
    pub fn name(&self) -> String {
        match self {
            LocalSetting::FqCodel => "fq_codel".into(),
            LocalSetting::Pfifo { packets } => format!("pfifo limit {packets}"),
        }
    }

    fn qdisc_args(&self) -> Vec<String> {
        self.name().split_whitespace().map(String::from).collect()
    }
}

/// The kinds a restore can put back exactly.
const FIFOS: &[&str] = &["pfifo", "bfifo"];

fn limit_of(json: &serde_json::Value) -> Option<u64> {
    json.get("options").and_then(|o| o.get("limit")).and_then(|l| l.as_u64())
}

impl LocalBefore {
    /// Read `iface`'s queue (in `netns`), refusing one that could not be
    /// put back exactly.
    pub fn read(netns: Option<&str>, iface: &str) -> Result<LocalBefore, String> {
        let out = run(netns, &["tc", "-j", "qdisc", "show", "dev", iface]).map_err(|e| format!("there is no interface {iface}? {e}"))?;
        let tree = tree::parse_qdiscs(&out)?;
        let raw: Vec<serde_json::Value> = serde_json::from_str(&out).map_err(|e| format!("cannot read `tc -j qdisc show`: {e}"))?;
        let root = raw.iter().find(|q| q.get("root").and_then(|r| r.as_bool()) == Some(true)).ok_or_else(|| format!("{iface} has no root qdisc"))?;
        let kind_of = |q: &serde_json::Value| q.get("kind").and_then(|k| k.as_str()).unwrap_or("").to_string();
        let handle_of = |q: &serde_json::Value| q.get("handle").and_then(|k| k.as_str()).unwrap_or("").to_string();
        let limiter = matches!(kind_of(root).as_str(), "htb" | "tbf") && handle_of(root) == "1:";
        let q = if limiter {
            raw.iter().find(|q| handle_of(q) == LEAF_HANDLE).ok_or_else(|| format!("{iface}'s {} has no queue at {LEAF_HANDLE} under it", kind_of(root)))?
        } else {
            root
        };
        let (kind, handle) = (kind_of(q), handle_of(q));
        let default_root = !limiter && handle == "0:";
        if ingress(&tree) {
            return Err(format!("{iface} has an ingress qdisc (a shaper or a filter): tune --local leaves such a device alone"));
        }
        if !(FIFOS.contains(&kind.as_str()) || default_root) {
            return Err(format!(
                "{iface}'s queue is {kind} ({handle}): tune --local changes a pfifo/bfifo or the kernel's default root queue, which it can put back exactly; remove it first or tune without --local"
            ));
        }
        let link = run(netns, &["ip", "-j", "link", "show", "dev", iface])?;
        let txqueuelen = serde_json::from_str::<serde_json::Value>(&link)
            .ok()
            .and_then(|v| v.get(0).and_then(|l| l.get("txqlen")).and_then(|t| t.as_u64()))
            .ok_or_else(|| format!("cannot read {iface}'s txqueuelen"))?;
        Ok(LocalBefore { iface: iface.into(), netns: netns.map(String::from), tree, under_limiter: limiter, limit: limit_of(q), kind, handle, txqueuelen, bql: bql_read(netns, iface) })
    }

    fn ns(&self) -> Option<&str> {
        self.netns.as_deref()
    }

    /// The longest FIFO the search starts from: the queue's own limit in
    /// packets, else the txqueuelen (what pfifo_fast and a default pfifo hold).
    pub fn packets(&self) -> u64 {
        match (self.kind.as_str(), self.limit) {
            ("pfifo", Some(l)) => l,
            ("bfifo", Some(b)) => (b / 1514).max(1),
            _ => self.txqueuelen.max(1),
        }
    }

    /// The commands that make the queue `s`.
    fn queue_commands(&self, args: &[String]) -> Vec<Vec<String>> {
        let dev = self.iface.as_str();
        let w = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        if self.under_limiter {
            let mut add = w(&["tc", "qdisc", "add", "dev", dev, "parent", "1:1", "handle", LEAF_HANDLE]);
            add.extend(args.iter().cloned());
            vec![w(&["tc", "qdisc", "del", "dev", dev, "parent", "1:1", "handle", LEAF_HANDLE]), add]
        } else {
            let mut add = w(&["tc", "qdisc", "replace", "dev", dev, "root", "handle", "1:"]);
            add.extend(args.iter().cloned());
            vec![add]
        }
    }

    /// Set the queue to `s` (and txqueuelen to a FIFO's length; BQL's
    /// limit to `bql_bytes` where the driver has BQL).
    pub fn apply(&self, s: &LocalSetting, bql_bytes: u64) -> Result<(), String> {
        run_all(self.ns(), &self.queue_commands(&s.qdisc_args()))?;
        if let LocalSetting::Pfifo { packets } = s {
            run(self.ns(), &["ip", "link", "set", "dev", &self.iface, "txqueuelen", &packets.to_string()])?;
        }
        for (q, _) in &self.bql {
            bql_write(self.ns(), &self.iface, q, &bql_bytes.to_string())?;
        }
        Ok(())
    }

    /// Put the queue, txqueuelen and BQL back as they were, and check that
    /// the device's qdiscs read as before.
    pub fn restore(&self) -> Result<(), String> {
        let ns = self.ns();
        if self.under_limiter {
            let mut args = vec![self.kind.clone()];
            if let Some(l) = self.limit {
                args.extend(["limit".to_string(), l.to_string()]);
            }
            run_all(ns, &self.queue_commands(&args))?;
        } else {
            // the root goes; the kernel's default (or a FIFO as it was) returns
            let _ = run(ns, &["tc", "qdisc", "del", "dev", &self.iface, "root"]);
            if self.handle != "0:" {
                let mut a = vec!["tc", "qdisc", "add", "dev", &self.iface, "root", "handle", &self.handle, &self.kind];
                let l = self.limit.map(|l| l.to_string());
                if let Some(l) = &l {
                    a.extend(["limit", l.as_str()]);
                }
                run(ns, &a)?;
            }
        }
        run(ns, &["ip", "link", "set", "dev", &self.iface, "txqueuelen", &self.txqueuelen.to_string()])?;
        for (q, v) in &self.bql {
            bql_write(ns, &self.iface, q, v)?;
        }
        let now = LocalBefore::read(ns, &self.iface)?;
        tree::same_as_before(&self.tree, &now.tree).map_err(|e| format!("{}: {e}", self.iface))?;
        if (now.kind.as_str(), now.limit, now.txqueuelen) != (self.kind.as_str(), self.limit, self.txqueuelen) {
            return Err(format!(
                "{}: the queue reads {} limit {:?}, txqueuelen {} where it read {} limit {:?}, txqueuelen {} before",
                self.iface, now.kind, now.limit, now.txqueuelen, self.kind, self.limit, self.txqueuelen
            ));
        }
        Ok(())
    }

    /// The commands that keep a setting (a shell script's lines).
    pub fn script(&self, s: &LocalSetting, bql_bytes: u64) -> String {
        let mut out = format!("#!/bin/sh\n# bloatlab tune --local: {} on {}\nset -e\n", s.name(), self.iface);
        for c in self.queue_commands(&s.qdisc_args()) {
            out.push_str(&c.join(" "));
            out.push('\n');
        }
        if let LocalSetting::Pfifo { packets } = s {
            out.push_str(&format!("ip link set dev {} txqueuelen {packets}\n", self.iface));
        }
        for (q, _) in &self.bql {
            out.push_str(&format!("echo {bql_bytes} > /sys/class/net/{}/queues/{q}/byte_queue_limits/limit_max\n", self.iface));
        }
        out
    }
}

fn ingress(t: &[Qdisc]) -> bool {
    t.iter().any(|q| q.kind == "ingress" || q.kind == "clsact")
}

/// BQL's `limit_max` per transmit queue (sysfs, read in the namespace).
fn bql_read(netns: Option<&str>, iface: &str) -> Vec<(String, String)> {
    let script = format!("for q in /sys/class/net/{iface}/queues/tx-*; do [ -r $q/byte_queue_limits/limit_max ] && echo ${{q##*/}} $(cat $q/byte_queue_limits/limit_max); done; true");
    let out = match netns {
        Some(ns) => run(None, &["ip", "netns", "exec", ns, "sh", "-c", &script]),
        None => run(None, &["sh", "-c", &script]),
    };
    out.unwrap_or_default().lines().filter_map(|l| l.split_once(' ').map(|(q, v)| (q.to_string(), v.trim().to_string()))).collect()
}

fn bql_write(netns: Option<&str>, iface: &str, q: &str, v: &str) -> Result<(), String> {
    let script = format!("echo {v} > /sys/class/net/{iface}/queues/{q}/byte_queue_limits/limit_max");
    match netns {
        Some(ns) => run(None, &["ip", "netns", "exec", ns, "sh", "-c", &script]),
        None => run(None, &["sh", "-c", &script]),
    }
    .map(drop)
}

/// BQL's limit for a link of `rate_bps`: about 1 ms of it, at least two
/// full-size frames.
pub fn bql_bytes(rate_bps: f64) -> u64 {
    ((rate_bps / 8.0 / 1000.0) as u64).max(2 * 1514)
}

/// One step of the local search.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LocalStep {
    pub setting: LocalSetting,
    pub goodput_bps: f64,
    pub added_ms: f64,
    /// Latency probes lost under that load, percent: a FIFO short enough
    /// for the latency drops what shares it (the probes, a call, a game).
    #[serde(default)]
    pub lost_pct: f64,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub still_rising: bool,
    pub held: bool,
}

/// The search over the FIFO's length: the longest that holds the target
/// (added latency within it plus one full-size packet's time at the
/// goodput's rate, not still rising), by bisection on a log scale between
/// 2 packets and the queue as it was (which did not hold), to within 25%.
#[derive(Debug, Clone)]
pub struct QueueSearch {
    target_ms: f64,
    /// Longest that held, shortest that did not.
    lo: u64,
    lo_held: bool,
    hi: u64,
    steps: Vec<LocalStep>,
    max_steps: usize,
}

/// The shortest FIFO tried.
pub const MIN_PACKETS: u64 = 2;

/// A setting that loses this share of the latency probes or more (percent)
/// is not kept, whatever its latency: the grade caps such a line at A
/// (metrics::grade::LOSS_CAPS), and what the probes meet a call meets.
pub const MAX_LOST_PCT: f64 = 5.0;

impl QueueSearch {
    pub fn new(target_ms: f64, packets_before: u64, max_steps: usize) -> QueueSearch {
        QueueSearch { target_ms, lo: MIN_PACKETS, lo_held: false, hi: packets_before.max(MIN_PACKETS + 1), steps: vec![], max_steps }
    }

    /// The next length to try, None when done.
    pub fn next(&self) -> Option<u64> {
        if self.steps.len() >= self.max_steps {
            return None;
        }
        if self.hi <= self.lo + 1 || (self.hi as f64) <= self.lo as f64 * 1.25 {
            // the interval closed: the low end itself, if never tried
            return (!self.lo_held && !self.tried(self.lo)).then_some(self.lo);
        }
        Some((((self.lo as f64) * (self.hi as f64)).sqrt().round() as u64).clamp(self.lo + 1, self.hi - 1))
    }

    fn tried(&self, n: u64) -> bool {
        self.steps.iter().any(|s| s.setting == LocalSetting::Pfifo { packets: n })
    }

    /// Record a length's step; it holds when its latency does (the loss is
    /// judged once, on the length found: [`MAX_LOST_PCT`]).
    pub fn record(&mut self, packets: u64, goodput_bps: f64, added_ms: f64, still_rising: bool, lost_pct: f64) -> LocalStep {
        let held = holds(self.target_ms, added_ms, goodput_bps / WIRE_EFFICIENCY, still_rising);
        let s = LocalStep { setting: LocalSetting::Pfifo { packets }, goodput_bps, added_ms, lost_pct, still_rising, held };
        self.steps.push(s);
        if held {
            if packets >= self.lo {
                self.lo = packets;
                self.lo_held = true;
            }
        } else if packets < self.hi {
            self.hi = packets;
            if packets <= self.lo {
                // even the low end did not hold
                self.lo = packets.min(self.lo);
                self.lo_held = false;
                self.hi = self.lo;
            }
        }
        s
    }

    pub fn steps(&self) -> &[LocalStep] {
        &self.steps
    }

    /// The longest FIFO that held, if any did.
    pub fn found(&self) -> Option<LocalStep> {
        self.steps.iter().filter(|s| s.held).max_by_key(|s| match s.setting {
            LocalSetting::Pfifo { packets } => packets,
            LocalSetting::FqCodel => u64::MAX,
        }).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 10 Mbit/s link whose FIFO of n packets adds n x 1.2 ms.
    fn model(n: u64) -> (f64, f64, bool) {
        (9.4e6, n as f64 * 1514.0 * 8.0 / 10e6 * 1e3, false)
    }

    #[test]
    fn the_search_finds_the_longest_fifo_within_the_target() {
        let mut s = QueueSearch::new(5.0, 1000, 20);
        while let Some(n) = s.next() {
            let (g, a, r) = model(n);
            s.record(n, g, a, r, 0.0);
        }
        // 5 ms + one packet's 1.3 ms at 9.4 Mbit/s: 5 packets (6.06 ms) hold, 6 (7.27) do not
        let f = s.found().unwrap();
        assert_eq!(f.setting, LocalSetting::Pfifo { packets: 5 }, "{:?}", s.steps());
        assert!(s.steps().len() <= 12, "{} steps", s.steps().len());
    }

    #[test]
    fn a_queue_that_is_not_this_hosts_is_said_so() {
        // latency stays high whatever the host's queue: nothing holds
        let mut s = QueueSearch::new(5.0, 1000, 20);
        while let Some(n) = s.next() {
            s.record(n, 9.4e6, 300.0, false, 0.0);
        }
        assert!(s.found().is_none());
        assert!(s.steps().iter().any(|x| x.setting == LocalSetting::Pfifo { packets: MIN_PACKETS }), "the low end was tried: {:?}", s.steps());
    }

    #[test]
    fn bql_holds_about_a_millisecond() {
        assert_eq!(bql_bytes(1e9), 125_000);
        assert_eq!(bql_bytes(10e6), 3028);
    }
}
