//! Installing and undoing a shaper on a real interface: a veth in a network
//! namespace of the test's own (`blab-<pid>-tune`), with the system's `ip`
//! and `tc`. Needs root.
use bloatlab_model::Rate;
use bloatlab_tune::apply::{self, qdiscs};
use bloatlab_tune::plan::{ifb_name, Leaf, Plan};
use bloatlab_tune::state::Saved;
use std::process::Command;

/// A namespace with a veth pair (`wan0`, `lan0`), removed when dropped.
struct Ns(String);

impl Ns {
    fn new(tag: &str) -> Option<Ns> {
        let ns = format!("blab-{:06x}-tune{tag}", std::process::id() & 0xffffff);
        let ok = |a: &[&str]| Command::new(a[0]).args(&a[1..]).output().is_ok_and(|o| o.status.success());
        if !ok(&["ip", "netns", "add", &ns]) {
            return None;
        }
        let n = Ns(ns);
        assert!(ok(&["ip", "-n", &n.0, "link", "add", "name", "wan0", "type", "veth", "peer", "name", "lan0"]));
        assert!(ok(&["ip", "-n", &n.0, "link", "set", "wan0", "up"]));
        assert!(ok(&["ip", "-n", &n.0, "link", "set", "lan0", "up"]));
        Some(n)
    }

    fn tc(&self, args: &[&str]) -> bool {
        Command::new("tc").args(["-n", &self.0]).args(args).output().is_ok_and(|o| o.status.success())
    }

    /// Whether this kernel has qdisc `kind` (tried on lan0).
    fn has(&self, kind: &str) -> bool {
        let ok = self.tc(&["qdisc", "add", "dev", "lan0", "root", "handle", "1:", kind]);
        self.tc(&["qdisc", "del", "dev", "lan0", "root"]);
        ok
    }
}

impl Drop for Ns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}

fn ns(test: &str, tag: &str) -> Option<Ns> {
    let root = Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if !root || !bloatlab_host::cmd::have("tc") {
        bloatlab_testkit::cannot_run(test, "needs root and iproute2's ip and tc");
        return None;
    }
    let n = Ns::new(tag);
    if n.is_none() {
        bloatlab_testkit::cannot_run(test, "cannot create a network namespace here");
    }
    n
}

fn plan() -> Plan {
    Plan::new("wan0", Some(Rate::mbit(4.5)), Some(Rate::mbit(18.0)), Leaf::FqCodel)
}

#[test]
fn an_install_is_undone_exactly_or_rolled_back_when_a_step_fails() {
    let Some(n) = ns("an_install_is_undone_exactly_or_rolled_back_when_a_step_fails", "a") else { return };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tune-wan0.json");
    let before = qdiscs(Some(&n.0), "wan0").unwrap();
    let p = plan();
    if n.has("fq_codel") {
        // a kernel with fq_codel: the shaper goes on, then comes off
        let saved = apply::install(&p, Some(&n.0), &file).unwrap();
        assert!(file.exists(), "the state is kept on disk while the shaper is on");
        let on: Vec<String> = qdiscs(Some(&n.0), "wan0").unwrap().iter().map(|q| q.kind.clone()).collect();
        assert!(on.contains(&"htb".to_string()) && on.contains(&"fq_codel".to_string()) && on.contains(&"ingress".to_string()), "{on:?}");
        let ifb: Vec<String> = qdiscs(Some(&n.0), &ifb_name("wan0")).unwrap().iter().map(|q| q.kind.clone()).collect();
        assert!(ifb.contains(&"htb".to_string()), "{ifb:?}");
        apply::undo(&saved, &file).unwrap();
        eprintln!("tune: HTB + fq_codel on wan0 and {}: installed, then undone exactly", ifb_name("wan0"));
    } else {
        // this machine's kernel (no fq_codel): the step that needs it fails,
        // the steps before it (the IFB, the ingress redirect, HTB) are undone
        let e = apply::install(&p, Some(&n.0), &file).unwrap_err();
        assert!(e.contains("fq_codel") && e.contains("the steps before it were undone: wan0 is as it was"), "{e}");
        eprintln!("tune: no fq_codel in this kernel: the install failed at it and was rolled back");
    }
    assert_eq!(qdiscs(Some(&n.0), "wan0").unwrap(), before);
    assert!(!apply::device_exists(Some(&n.0), &ifb_name("wan0")), "the IFB is gone");
    assert!(!file.exists(), "the state file goes once the queues read as before");
}

#[test]
fn a_shaped_or_missing_interface_is_refused_and_nothing_changes() {
    let Some(n) = ns("a_shaped_or_missing_interface_is_refused_and_nothing_changes", "b") else { return };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tune-wan0.json");
    assert!(n.tc(&["qdisc", "add", "dev", "wan0", "root", "handle", "1:", "htb", "default", "1"]));
    let before = qdiscs(Some(&n.0), "wan0").unwrap();
    let e = apply::install(&plan(), Some(&n.0), &file).unwrap_err();
    assert!(e.contains("wan0 already has a htb qdisc (handle 1:)"), "{e}");
    assert_eq!(qdiscs(Some(&n.0), "wan0").unwrap(), before);
    assert!(!file.exists() && !apply::device_exists(Some(&n.0), &ifb_name("wan0")));
    let e = apply::install(&Plan::new("wan9", Some(Rate::mbit(1.0)), None, Leaf::FqCodel), Some(&n.0), &file).unwrap_err();
    assert!(e.contains("there is no interface wan9 in blab-"), "{e}");
}

#[test]
fn a_killed_tune_is_undone_from_its_state_file() {
    let Some(n) = ns("a_killed_tune_is_undone_from_its_state_file", "c") else { return };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tune-wan0.json");
    let before = qdiscs(Some(&n.0), "wan0").unwrap();
    let p = plan();
    // what a tune killed mid-install leaves: its state saved, the IFB, the
    // ingress redirect and the upload shaper's root in place
    Saved { iface: "wan0".into(), netns: Some(n.0.clone()), before: before.clone(), plan: p.clone(), emulator_pid: None, pid: 1, at_unix_s: 0, local: None }.save(&file).unwrap();
    for c in p.install().iter().take(5) {
        let mut v: Vec<&str> = c.iter().map(|s| s.as_str()).collect();
        v.splice(1..1, ["-n", n.0.as_str()]);
        bloatlab_host::cmd::run(&v).unwrap();
    }
    assert_ne!(qdiscs(Some(&n.0), "wan0").unwrap(), before);
    // a second tune is refused while the state is there
    let e = apply::install(&p, Some(&n.0), &file).unwrap_err();
    assert!(e.contains("bloatlab tune --undo wan0"), "{e}");
    // what `bloatlab tune --undo` does
    apply::undo(&Saved::load(&file).unwrap(), &file).unwrap();
    assert_eq!(qdiscs(Some(&n.0), "wan0").unwrap(), before);
    assert!(!apply::device_exists(Some(&n.0), &ifb_name("wan0")));
    assert!(!file.exists());
}

/// `--local`: the queue under a rate limiter (the lab's local bottleneck)
/// and a default root queue, each set to a short FIFO (txqueuelen with it)
/// and put back exactly, directly and through the saved state's undo (what
/// `tune --undo` runs after a SIGKILL); a queue tune cannot put back is
/// refused, changing nothing.
#[test]
fn a_hosts_own_queue_is_set_and_put_back_exactly() {
    use bloatlab_tune::local::{LocalBefore, LocalSetting};
    let Some(n) = ns("a_hosts_own_queue_is_set_and_put_back_exactly", "l") else { return };
    let ip = |a: &[&str]| assert!(Command::new("ip").args(["-n", &n.0]).args(a).output().unwrap().status.success(), "{a:?}");
    // wan0: HTB at 10 Mbit/s with a 1000-packet FIFO under it, txqueuelen 1000
    assert!(n.tc(&["qdisc", "add", "dev", "wan0", "root", "handle", "1:", "htb", "default", "1"]));
    assert!(n.tc(&["class", "add", "dev", "wan0", "parent", "1:", "classid", "1:1", "htb", "rate", "10mbit"]));
    assert!(n.tc(&["qdisc", "add", "dev", "wan0", "parent", "1:1", "handle", "10:", "pfifo", "limit", "1000"]));
    ip(&["link", "set", "dev", "wan0", "txqueuelen", "1000"]);
    let lb = LocalBefore::read(Some(&n.0), "wan0").unwrap();
    // (a veth has BQL on some kernels, Debian's 6.1, and not on others, 6.18)
    assert!(lb.under_limiter && lb.kind == "pfifo" && lb.limit == Some(1000) && lb.txqueuelen == 1000, "{lb:?}");
    assert_eq!(lb.packets(), 1000);
    lb.apply(&LocalSetting::Pfifo { packets: 6 }, 3028).unwrap();
    let now = LocalBefore::read(Some(&n.0), "wan0").unwrap();
    assert_eq!((now.kind.as_str(), now.limit, now.txqueuelen), ("pfifo", Some(6), 6));
    assert!(now.bql.iter().all(|(_, limit)| limit == "3028") && now.bql.len() == lb.bql.len(), "BQL's limit set where the driver has it: {now:?}");
    lb.restore().unwrap();
    // through the saved state, as --undo does
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tune-wan0.json");
    Saved::local(&lb).save_new(&file).unwrap();
    assert!(Saved::local(&lb).save_new(&file).unwrap_err().contains("not undone yet"));
    lb.apply(&LocalSetting::Pfifo { packets: 3 }, 3028).unwrap();
    let saved = Saved::load(&file).unwrap();
    bloatlab_tune::shaper::undo(&saved, &file).unwrap();
    assert!(!file.exists());
    let back = LocalBefore::read(Some(&n.0), "wan0").unwrap();
    assert_eq!(back, lb);

    // lan0: the kernel's default root (noqueue on a veth) and its txqueuelen
    let lb = LocalBefore::read(Some(&n.0), "lan0").unwrap();
    assert!(!lb.under_limiter && lb.handle == "0:", "{lb:?}");
    lb.apply(&LocalSetting::Pfifo { packets: 8 }, 3028).unwrap();
    assert_eq!(LocalBefore::read(Some(&n.0), "lan0").unwrap().limit, Some(8));
    lb.restore().unwrap();
    assert_eq!(LocalBefore::read(Some(&n.0), "lan0").unwrap(), lb);

    // a queue it could not put back exactly: refused
    assert!(n.tc(&["qdisc", "replace", "dev", "lan0", "root", "handle", "1:", "tbf", "rate", "1mbit", "burst", "10k", "latency", "50ms"]));
    let e = LocalBefore::read(Some(&n.0), "lan0").unwrap_err();
    assert!(e.contains("has no queue at 10:") || e.contains("tune --local changes"), "{e}");
}
