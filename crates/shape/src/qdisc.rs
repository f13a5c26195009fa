//! The commands that hold a device's egress to a rate with a queue under
//! it, the IFB redirect that shapes a device's ingress on another device's
//! egress, and the commands that remove them. Each command is an argv
//! (`tc ...`, `ip ...`): what runs ([`crate::exec`]) is also what a user
//! can keep as a script.
use bloatlab_model::Rate;
use serde::{Deserialize, Serialize};

/// What holds the rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Limiter {
    /// An HTB class at the rate (burst and quantum sized to it, as
    /// [`Rate::shaper_burst_bytes`] and [`Rate::htb_quantum_bytes`] say),
    /// the leaf queue under it.
    Htb,
    /// A token bucket at the rate, the leaf queue under it.
    Tbf,
    /// cake, which shapes itself, with the per-packet overhead and minimum
    /// packet size the line adds (bytes); it is its own queue.
    Cake { overhead: u32, mpu: u32 },
}

/// The handle of the leaf queue under HTB or TBF (`10:`).
pub const LEAF_HANDLE: &str = "10:";

/// A shaper on one device's egress.
#[derive(Debug, Clone, PartialEq)]
pub struct Egress {
    pub device: String,
    pub rate: Rate,
    pub limiter: Limiter,
    /// The leaf queue's kind and arguments under HTB or TBF (`pfifo limit
    /// 1000`, `fq_codel`, ...); unused by cake.
    pub leaf: Vec<String>,
}

impl Egress {
    /// The commands that install it on the device's root (each replaces
    /// what it names: a new rate on the same shaper changes it in place).
    /// A different leaf kind under an installed shaper needs [`Self::remove`]
    /// first (the kernel will not change a qdisc's kind in place).
    pub fn install(&self) -> Vec<Vec<String>> {
        let dev = self.device.as_str();
        let r = self.rate.tc();
        let burst = self.rate.shaper_burst_bytes().to_string();
        let mut leaf = argv(&["tc", "qdisc", "replace", "dev", dev, "parent", "1:1", "handle", LEAF_HANDLE]);
        leaf.extend(self.leaf.iter().cloned());
        match self.limiter {
            Limiter::Cake { overhead, mpu } => vec![argv(&[
                "tc", "qdisc", "replace", "dev", dev, "root", "cake", "bandwidth", &r, "overhead", &overhead.to_string(), "mpu", &mpu.to_string(),
            ])],
            Limiter::Htb => {
                let quantum = self.rate.htb_quantum_bytes().to_string();
                vec![
                    argv(&["tc", "qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb", "default", "1"]),
                    argv(&["tc", "class", "replace", "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate", &r, "ceil", &r, "burst", &burst, "cburst", &burst, "quantum", &quantum]),
                    leaf,
                ]
            }
            // the bucket's own queue is unbounded in effect (`limit`): the leaf is the queue
            Limiter::Tbf => vec![argv(&["tc", "qdisc", "replace", "dev", dev, "root", "handle", "1:", "tbf", "rate", &r, "burst", &burst, "limit", "100000000"]), leaf],
        }
    }

    /// The commands that remove it (the device's own default queue returns).
    pub fn remove(&self) -> Vec<Vec<String>> {
        vec![argv(&["tc", "qdisc", "del", "dev", &self.device, "root"])]
    }
}

/// A device's ingress redirected to an IFB device's egress, where a shaper
/// can hold it (`ingress` qdisc, a `u32` filter matching every packet,
/// `mirred egress redirect`: `u32` rather than `matchall`, which some
/// kernels lack).
#[derive(Debug, Clone, PartialEq)]
pub struct IngressRedirect {
    pub device: String,
    pub ifb: String,
}

impl IngressRedirect {
    /// `device`'s ingress to the IFB named after it ([`ifb_name`]).
    pub fn of(device: &str) -> IngressRedirect {
        IngressRedirect { device: device.into(), ifb: ifb_name(device) }
    }

    pub fn install(&self) -> Vec<Vec<String>> {
        let (dev, ifb) = (self.device.as_str(), self.ifb.as_str());
        vec![
            argv(&["ip", "link", "add", "name", ifb, "type", "ifb"]),
            argv(&["ip", "link", "set", "dev", ifb, "up"]),
            argv(&["tc", "qdisc", "add", "dev", dev, "handle", "ffff:", "ingress"]),
            argv(&["tc", "filter", "add", "dev", dev, "parent", "ffff:", "protocol", "all", "prio", "10", "u32", "match", "u32", "0", "0", "action", "mirred", "egress", "redirect", "dev", ifb]),
        ]
    }

    pub fn remove(&self) -> Vec<Vec<String>> {
        vec![argv(&["tc", "qdisc", "del", "dev", &self.device, "ingress"]), argv(&["ip", "link", "del", "dev", &self.ifb])]
    }
}

/// The IFB device that carries `dev`'s ingress (an interface name has at
/// most 15 bytes).
pub fn ifb_name(dev: &str) -> String {
    let mut n = format!("ifb4{dev}");
    n.truncate(15);
    n
}

pub fn argv(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(v: Vec<Vec<String>>) -> Vec<String> {
        v.iter().map(|c| c.join(" ")).collect()
    }

    #[test]
    fn htb_tbf_and_cake_with_burst_and_quantum_sized_to_the_rate() {
        let e = Egress { device: "wan".into(), rate: Rate::mbit(4.5), limiter: Limiter::Htb, leaf: argv(&["pfifo", "limit", "1000"]) };
        assert_eq!(
            words(e.install()),
            [
                "tc qdisc replace dev wan root handle 1: htb default 1",
                "tc class replace dev wan parent 1: classid 1:1 htb rate 4500000bit ceil 4500000bit burst 3028 cburst 3028 quantum 56250",
                "tc qdisc replace dev wan parent 1:1 handle 10: pfifo limit 1000",
            ]
        );
        let t = Egress { limiter: Limiter::Tbf, leaf: argv(&["fq_codel"]), ..e.clone() };
        assert_eq!(
            words(t.install()),
            ["tc qdisc replace dev wan root handle 1: tbf rate 4500000bit burst 3028 limit 100000000", "tc qdisc replace dev wan parent 1:1 handle 10: fq_codel"]
        );
        let c = Egress { limiter: Limiter::Cake { overhead: 18, mpu: 64 }, ..e.clone() };
        assert_eq!(words(c.install()), ["tc qdisc replace dev wan root cake bandwidth 4500000bit overhead 18 mpu 64"]);
        assert_eq!(words(e.remove()), ["tc qdisc del dev wan root"]);
        // a gigabit shaper's burst is not a fixed 5 KB (which held one to 65-70% of its rate)
        let g = Egress { rate: Rate::mbit(1000.0), ..e };
        assert!(g.install()[1].join(" ").contains("burst 125000"), "{:?}", g.install()[1]);
    }

    #[test]
    fn an_ingress_goes_to_its_ifb_and_back() {
        let r = IngressRedirect::of("eth1");
        assert_eq!(
            words(r.install()),
            [
                "ip link add name ifb4eth1 type ifb",
                "ip link set dev ifb4eth1 up",
                "tc qdisc add dev eth1 handle ffff: ingress",
                "tc filter add dev eth1 parent ffff: protocol all prio 10 u32 match u32 0 0 action mirred egress redirect dev ifb4eth1",
            ]
        );
        assert_eq!(words(r.remove()), ["tc qdisc del dev eth1 ingress", "ip link del dev ifb4eth1"]);
        assert_eq!(ifb_name("enp0s31f6.100"), "ifb4enp0s31f6.1");
    }
}
