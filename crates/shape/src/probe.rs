//! What the kernel offers a shaper, tried for real on a scratch veth pair
//! (the only sure test: a module may be missing, unloadable or built
//! without an option), removed again when done.
use crate::exec::run;
use crate::qdisc::IngressRedirect;

/// A scratch veth pair in a namespace (or the host's), removed when dropped.
pub struct Scratch {
    netns: Option<String>,
    dev: String,
}

impl Scratch {
    /// Make the pair `dev`/`peer` in `netns`, removing a stale one first.
    pub fn new(netns: Option<&str>, dev: &str, peer: &str) -> Result<Scratch, String> {
        let _ = run(netns, &["ip", "link", "del", dev]);
        run(netns, &["ip", "link", "add", dev, "type", "veth", "peer", "name", peer]).map_err(|e| format!("cannot make a scratch veth pair to probe the kernel's qdiscs: {e}"))?;
        Ok(Scratch { netns: netns.map(String::from), dev: dev.into() })
    }

    fn ns(&self) -> Option<&str> {
        self.netns.as_deref()
    }

    /// Whether a root qdisc of `kind` with `args` can be made here.
    pub fn has(&self, kind: &str, args: &[&str]) -> bool {
        let mut a = vec!["tc", "qdisc", "add", "dev", self.dev.as_str(), "root", "handle", "1:", kind];
        a.extend_from_slice(args);
        let ok = run(self.ns(), &a).is_ok();
        let _ = run(self.ns(), &["tc", "qdisc", "del", "dev", &self.dev, "root"]);
        ok
    }

    /// Whether the ingress can be redirected to an IFB device (ifb,
    /// sch_ingress, cls_u32, act_mirred), tried with `ifb` as its name.
    pub fn has_ifb_redirect(&self, ifb: &str) -> bool {
        let r = IngressRedirect { device: self.dev.clone(), ifb: ifb.into() };
        let _ = run(self.ns(), &["ip", "link", "del", ifb]);
        let ok = crate::exec::run_all(self.ns(), &r.install()).is_ok();
        crate::exec::run_each_quietly(self.ns(), &r.remove());
        ok
    }

    /// The kinds of `list` (kind, arguments) this kernel has, and those it
    /// has not.
    pub fn kinds(&self, list: &[(&str, &str)]) -> (Vec<String>, Vec<String>) {
        let (mut have, mut lack) = (vec![], vec![]);
        for (kind, args) in list {
            let args: Vec<&str> = args.split_whitespace().collect();
            if self.has(kind, &args) {
                have.push(kind.to_string());
            } else {
                lack.push(kind.to_string());
            }
        }
        (have, lack)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = run(self.ns(), &["ip", "link", "del", &self.dev]);
    }
}
