//! The lab: namespaces, links, addresses, routing, bottleneck qdiscs, teardown.
//!
//! ```text
//!   client ns            router ns                          server ns
//!   eth0 ──veth── lan   [ip_forward]   wan (bridge) ── wan-srv ──veth── eth0
//!                                          └────────── wan-wit ──veth── eth0
//!                                                               witness ns
//! ```
//! Server and witness share the router's `wan` bridge, so with the bottleneck on
//! the router's egress (default) client→server and client→witness traffic queue
//! in the same `wan` qdisc (upload), and server→client and witness→client in
//! the same `lan` qdisc (download). With `--bottleneck local` the queues are the
//! senders' own `eth0` (client for uploads, server for downloads).
//!
//! With a home router (`--tune`, [`LabConfig::home_router`]) the client sits
//! behind one more namespace, the home router `bloatlab tune` runs on: its
//! `wan0` leads to the line (the router above, the ISP's side, holding the
//! bottleneck), its `lan0` to the client, on a subnet of its own:
//! ```text
//!   client ns            home ns                    router ns ...
//!   eth0 ──veth── lan0  [ip_forward]  wan0 ──veth── lan
//! ```
use bloatlab_model::{Backend, LabConfig, OnOff, Placement, QueueSpec, Rate, Shaper, FRAME_BYTES, MTU};
use crate::state::{ChildRec, Ownership};
use crate::sys::{self, run_s};
use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;

/// The emulator's configuration for a lab (backend "emulator"): each
/// direction's rate (or trace), queue, delay, jitter and loss, with the
/// Ethernet header counted as htb counts it on a veth (1514-byte frames).
pub fn emulator_config(cfg: &LabConfig) -> Result<bloatlab_emulator::EmulatorConfig> {
    use bloatlab_emulator::{DirectionConfig, EmulatorConfig};
    let dir = |up: bool| -> Result<DirectionConfig> {
        Ok(DirectionConfig {
            rate: cfg.rate_spec(up).map_err(|e| anyhow!(e))?,
            delay_ns: cfg.delay.map(|d| d.as_nanos() as u64).unwrap_or(0),
            jitter: cfg.jitter.clone(),
            loss: cfg.loss.clone().unwrap_or_default(),
            queue: cfg.queue_of(up).clone(),
            overhead_bytes: (FRAME_BYTES - MTU as u64) as u32,
        })
    };
    let e = EmulatorConfig { up: dir(true)?, down: dir(false)?, ..Default::default() };
    e.validate().map_err(|e| anyhow!("emulator configuration: {e}"))?;
    Ok(e)
}

/// The queue disciplines this machine's kernel offers, probed once per
/// process in a scratch namespace (None without the privileges to probe:
/// then the lab assumes a kernel without AQMs or netem).
pub fn kernel_support() -> Option<&'static QdiscSupport> {
    static SUPPORT: std::sync::OnceLock<Option<QdiscSupport>> = std::sync::OnceLock::new();
    SUPPORT.get_or_init(|| if sys::have_lab_privileges() { probe_qdiscs().ok() } else { None }).as_ref()
}

fn kernel_has(kind: &str) -> bool {
    kernel_support().is_some_and(|s| s.available.iter().any(|a| a == kind))
}

/// The backend a configuration runs on here, and why: what the kernel
/// offers runs in the kernel, the rest in the emulator.
pub fn backend(cfg: &LabConfig) -> (Backend, String) {
    cfg.choose_backend(&kernel_has)
}

/// [`LabConfig::validate`] on this machine's kernel, and for the emulator
/// backend a configuration the emulator accepts.
pub fn validate(cfg: &LabConfig) -> Result<()> {
    cfg.validate_on(&kernel_has).map_err(|e| anyhow!(e))?;
    if backend(cfg).0 == Backend::Emulator {
        emulator_config(cfg)?;
    }
    Ok(())
}

/// (namespace, interface).
pub type NsDev = (String, String);

/// One namespace of the lab.
#[derive(Debug, Clone, Serialize)]
pub struct Host {
    pub role: &'static str,
    pub netns: String,
    pub v4: String,
    pub v6: String,
    /// Further addresses (the router's `wan` side).
    pub extra: Vec<String>,
}

impl Host {
    pub fn addresses(&self) -> Vec<String> {
        let mut v = vec![self.v4.clone(), self.v6.clone()];
        v.extend(self.extra.iter().cloned());
        v
    }
}

/// A queue the sampler watches.
#[derive(Debug, Clone, Serialize)]
pub struct QueueTarget {
    pub role: String,
    pub netns: String,
    pub dev: String,
}

/// Result of probing the kernel for qdisc kinds.
#[derive(Debug, Clone, Default, Serialize)]
pub struct QdiscSupport {
    pub available: Vec<String>,
    pub missing: Vec<String>,
}

/// The kinds probed (with the minimal arguments each needs).
pub const PROBED_QDISCS: &[(&str, &str)] = &[
    ("pfifo", ""),
    ("bfifo", ""),
    ("pfifo_fast", ""),
    ("pfifo_head_drop", ""),
    ("htb", ""),
    ("tbf", "rate 1mbit burst 10k latency 50ms"),
    ("hfsc", ""),
    ("prio", ""),
    ("drr", ""),
    ("netem", ""),
    ("fq_codel", ""),
    ("codel", ""),
    ("cake", ""),
    ("pie", ""),
    ("fq_pie", ""),
    ("fq", ""),
    ("sfq", ""),
    ("red", "limit 400000 min 30000 max 90000 avpkt 1000 burst 55 bandwidth 10mbit"),
    ("choke", "limit 1000 bandwidth 10mbit"),
    ("sfb", ""),
    ("hhf", ""),
];

/// A built lab. Dropping it tears everything down (unless [`Lab::keep`] was called).
pub struct Lab {
    pub id: String,
    pub cfg: LabConfig,
    pub client: Host,
    pub router: Host,
    pub server: Host,
    pub witness: Host,
    /// The home router between client and line (`home_router`).
    pub home: Option<Host>,
    pub support: QdiscSupport,
    pub kernel: String,
    /// Settings applied, for metadata.
    pub applied: serde_json::Value,
    pub(crate) own: Ownership,
    pub(crate) servers: Vec<std::process::Child>,
    /// Logs and intermediate files of this lab (kept with the lab on --keep).
    pub run_dir: PathBuf,
    tmp: Option<tempfile::TempDir>,
    kept: bool,
    torn_down: bool,
}

fn ns_name(id: &str, role: &str) -> String {
    format!("blab-{id}-{role}")
}

/// Run `tc`/`ip` inside the lab, with `-n NS`.
fn ipn(ns: &str, args: &str) -> Result<String> {
    let mut v = vec!["ip".to_string(), "-n".into(), ns.to_string()];
    v.extend(args.split_whitespace().map(String::from));
    run_s(&v)
}
fn tcn(ns: &str, args: &[&str]) -> Result<String> {
    let mut v = vec!["tc".to_string(), "-n".into(), ns.to_string()];
    v.extend(args.iter().map(|s| s.to_string()));
    run_s(&v)
}

fn check_interrupted() -> Result<()> {
    let s = bloatlab_host::signals::pending();
    if s != 0 {
        bail!("interrupted by {}", bloatlab_host::signals::name(s));
    }
    Ok(())
}

impl Lab {
    /// Build the lab: namespaces, links, addresses, routes, offloads, bottleneck.
    /// On any error everything created so far is removed.
    pub fn build(cfg: &LabConfig) -> Result<Lab> {
        validate(cfg)?;
        sys::require_privileges()?;
        for tool in ["ip", "tc"] {
            if !sys::have(tool) {
                bail!("`{tool}` is not installed; bloatlab lab needs iproute2 (apt-get install iproute2)");
            }
        }
        if cfg.offloads == OnOff::Off && !sys::have("ethtool") {
            bail!("`ethtool` is not installed; bloatlab lab needs it to turn segmentation offloads off (apt-get install ethtool), or pass --offloads on");
        }
        bloatlab_host::signals::install();
        let id = match &cfg.id {
            Some(i) => i.clone(),
            None => loop {
                let b = sys::random_bytes::<3>();
                let id = format!("{:02x}{:02x}{:02x}", b[0], b[1], b[2]);
                if !sys::netns_list()?.iter().any(|n| n.starts_with(&format!("blab-{id}-"))) {
                    break id;
                }
            },
        };
        let own = Ownership::claim(&id)?;
        let idn = u32::from_str_radix(&id, 16).unwrap_or(0);
        let octet = 16 + (idn % 224);
        let ula = format!("fd62:6c61:{:04x}", idn & 0xffff);
        let host = |role: &'static str, net: u32, h: u32| Host {
            role,
            netns: ns_name(&id, role),
            v4: format!("10.{octet}.{net}.{h}"),
            v6: format!("{ula}:{net}::{h}"),
            extra: Vec::new(),
        };
        let run_dir = tempfile::Builder::new()
            .prefix(&format!("bloatlab-lab-{id}-"))
            .tempdir()
            .context("create a temporary directory")?;
        let mut own = own;
        own.rec.run_dir = Some(run_dir.path().display().to_string());
        own.save()?;
        // with a home router the client's subnet is the home's LAN (net 3)
        // and the home router's wan0 takes the client's place on net 1
        let home = cfg.home_router.then(|| Host { extra: vec![format!("10.{octet}.1.2"), format!("{ula}:1::2")], ..host("home", 3, 1) });
        let mut lab = Lab {
            client: host("client", if cfg.home_router { 3 } else { 1 }, 2),
            home,
            router: host("router", 1, 1),
            server: host("server", 2, 2),
            witness: host("witness", 2, 3),
            id,
            cfg: cfg.clone(),
            support: QdiscSupport::default(),
            kernel: sys::kernel_release(),
            applied: serde_json::Value::Null,
            own,
            servers: Vec::new(),
            run_dir: run_dir.path().to_path_buf(),
            tmp: Some(run_dir),
            kept: false,
            torn_down: false,
        };
        // On error, dropping `lab` tears down what was built.
        lab.setup()?;
        Ok(lab)
    }

    pub fn hosts(&self) -> Vec<&Host> {
        let mut v = vec![&self.client];
        v.extend(self.home.as_ref());
        v.extend([&self.router, &self.server, &self.witness]);
        v
    }

    /// Build the lab: namespaces and links, the hosts' TCP settings,
    /// addresses and routes, offloads, then the bottleneck; what was applied
    /// is recorded for the result.
    fn setup(&mut self) -> Result<()> {
        self.namespaces_and_links()?;
        let (ns_default_cc, ecn_state) = self.host_settings()?;
        self.addresses_and_routes()?;
        check_interrupted()?;
        let (offload_detail, gso_segs_note) = self.offloads()?;
        check_interrupted()?;
        let r = self.router.netns.clone();
        self.support = probe_qdiscs_in(&r)?;
        self.check_kernel_features()?;
        self.apply_bottleneck()?;
        let m = self.cfg.tcp_mem_max;
        self.applied = serde_json::json!({
            "sysctl": {
                "net.ipv4.tcp_wmem": format!("4096 16384 {m}"),
                "net.ipv4.tcp_rmem": format!("4096 131072 {m}"),
            },
            "namespace_default_cc": ns_default_cc,
            "net.ipv4.tcp_ecn": ecn_state,
            "gso_max_segs": gso_segs_note,
            "offloads_per_interface": offload_detail,
            "frame_bytes": FRAME_BYTES,
            "mtu": MTU,
        });
        Ok(())
    }

    fn namespaces(&self) -> (String, String, String, String) {
        (self.client.netns.clone(), self.router.netns.clone(), self.server.netns.clone(), self.witness.netns.clone())
    }

    /// The four namespaces (each recorded before it is made, so a kill in
    /// between still gets it cleaned), the veth pairs and the router's bridge.
    fn namespaces_and_links(&mut self) -> Result<()> {
        let (c, r, s, w) = self.namespaces();
        let home = self.home.as_ref().map(|h| h.netns.clone());
        for ns in [&c, &r, &s, &w].into_iter().chain(home.as_ref()) {
            check_interrupted()?;
            // Record before creating, so a kill between the two still gets cleaned.
            self.own.rec.namespaces.push(ns.clone());
            self.own.save()?;
            sys::run(&["ip", "netns", "add", ns])?;
            ipn(ns, "link set lo up")?;
        }
        check_interrupted()?;
        match &home {
            Some(h) => {
                ipn(&c, &format!("link add eth0 type veth peer name lan0 netns {h}"))?;
                ipn(h, &format!("link add wan0 type veth peer name lan netns {r}"))?;
            }
            None => {
                ipn(&c, &format!("link add eth0 type veth peer name lan netns {r}"))?;
            }
        }
        ipn(&s, &format!("link add eth0 type veth peer name wan-srv netns {r}"))?;
        ipn(&w, &format!("link add eth0 type veth peer name wan-wit netns {r}"))?;
        ipn(&r, "link add wan type bridge stp_state 0 forward_delay 0")?;
        ipn(&r, "link set wan-srv master wan")?;
        ipn(&r, "link set wan-wit master wan")?;

        Ok(())
    }

    /// Forwarding on the router; TCP buffers large enough to fill a
    /// 1000-packet queue, ECN and the congestion control as the default of
    /// the hosts. Returns what each host's default CC and ECN ended up as.
    fn host_settings(&mut self) -> Result<(serde_json::Map<String, serde_json::Value>, serde_json::Map<String, serde_json::Value>)> {
        let (c, r, s, w) = self.namespaces();
        for ns in std::iter::once(&r).chain(self.home.as_ref().map(|h| &h.netns)) {
            sys::set_sysctls(
                ns,
                &[
                    ("net/ipv4/ip_forward", "1".into()),
                    ("net/ipv6/conf/all/forwarding", "1".into()),
                ],
            )?;
        }
        let m = self.cfg.tcp_mem_max;
        let avail = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
            .unwrap_or_default();
        if !avail.split_whitespace().any(|x| x == self.cfg.cc) {
            bail!(
                "congestion control `{}` is not available on this kernel (available: {}; try `modprobe tcp_{}`)",
                self.cfg.cc,
                avail.trim(),
                self.cfg.cc
            );
        }
        let mut ns_default_cc = serde_json::Map::new();
        let mut ecn_state = serde_json::Map::new();
        for ns in [&c, &s, &w] {
            let mut kv = vec![
                ("net/ipv4/tcp_wmem", format!("4096 16384 {m}")),
                ("net/ipv4/tcp_rmem", format!("4096 131072 {m}")),
            ];
            match self.cfg.ecn {
                Some(OnOff::On) => kv.push(("net/ipv4/tcp_ecn", "1".into())),
                Some(OnOff::Off) => kv.push(("net/ipv4/tcp_ecn", "0".into())),
                None => {}
            }
            sys::set_sysctls(ns, &kv)?;
            ecn_state.insert(ns.clone(), sys::get_sysctl(ns, "net/ipv4/tcp_ecn").unwrap_or_default().into());
            // The engine sets the CC per socket (--cc); the namespace default
            // (what any other tool run in the lab gets) can only be a CC in the
            // host's tcp_allowed_congestion_control: add it there for the lab's
            // lifetime (recorded first, so a killed lab's cleanup restores it).
            if self.own.rec.allowed_cc_added.is_none() && !crate::state::allowed_cc().contains(&self.cfg.cc) {
                self.own.rec.allowed_cc_added = Some(self.cfg.cc.clone());
                self.own.save()?;
                if !crate::state::allow_cc(&self.cfg.cc)? {
                    self.own.rec.allowed_cc_added = None;
                    self.own.save()?;
                }
            }
            sys::set_sysctls(ns, &[("net/ipv4/tcp_congestion_control", self.cfg.cc.clone())])
                .with_context(|| format!("making {} the default congestion control of {ns}", self.cfg.cc))?;
            ns_default_cc.insert(
                ns.clone(),
                sys::get_sysctl(ns, "net/ipv4/tcp_congestion_control").unwrap_or_default().into(),
            );
        }
        Ok((ns_default_cc, ecn_state))
    }

    /// Addresses (IPv4 and IPv6) and default routes through the router.
    fn addresses_and_routes(&mut self) -> Result<()> {
        let (c, r, s, w) = self.namespaces();
        let pfx6 = |h: &Host| format!("{}/64", h.v6);
        ipn(&c, &format!("addr add {}/24 dev eth0", self.client.v4))?;
        ipn(&c, &format!("addr add {} dev eth0 nodad", pfx6(&self.client)))?;
        ipn(&r, &format!("addr add {}/24 dev lan", self.router.v4))?;
        ipn(&r, &format!("addr add {} dev lan nodad", pfx6(&self.router)))?;
        let rwan4 = self.router.v4.rsplitn(3, '.').nth(2).map(|p| format!("{p}.2.1")).unwrap();
        let rwan6 = self.router.v6.replace(":1::1", ":2::1");
        ipn(&r, &format!("addr add {rwan4}/24 dev wan"))?;
        ipn(&r, &format!("addr add {rwan6}/64 dev wan nodad"))?;
        for h in [&self.server, &self.witness] {
            ipn(&h.netns, &format!("addr add {}/24 dev eth0", h.v4))?;
            ipn(&h.netns, &format!("addr add {} dev eth0 nodad", pfx6(h)))?;
        }
        for d in ["lan", "wan-srv", "wan-wit", "wan"] {
            ipn(&r, &format!("link set {d} up"))?;
        }
        for ns in [&c, &s, &w] {
            ipn(ns, "link set eth0 up")?;
        }
        match &self.home {
            Some(h) => {
                let hn = &h.netns;
                ipn(hn, &format!("addr add {}/24 dev lan0", h.v4))?;
                ipn(hn, &format!("addr add {} dev lan0 nodad", pfx6(h)))?;
                ipn(hn, &format!("addr add {}/24 dev wan0", h.extra[0]))?;
                ipn(hn, &format!("addr add {}/64 dev wan0 nodad", h.extra[1]))?;
                for d in ["lan0", "wan0"] {
                    ipn(hn, &format!("link set {d} up"))?;
                }
                ipn(hn, &format!("route add default via {}", self.router.v4))?;
                ipn(hn, &format!("-6 route add default via {}", self.router.v6))?;
                ipn(&c, &format!("route add default via {}", h.v4))?;
                ipn(&c, &format!("-6 route add default via {}", h.v6))?;
                // the router reaches the home's LAN through the home router
                let lan4 = format!("{}.0/24", h.v4.rsplitn(2, '.').nth(1).unwrap());
                let lan6 = format!("{}/64", h.v6.replace(":3::1", ":3::"));
                ipn(&r, &format!("route add {lan4} via {}", h.extra[0]))?;
                ipn(&r, &format!("-6 route add {lan6} via {}", h.extra[1]))?;
            }
            None => {
                ipn(&c, &format!("route add default via {}", self.router.v4))?;
                ipn(&c, &format!("-6 route add default via {}", self.router.v6))?;
            }
        }
        for h in [&self.server, &self.witness] {
            ipn(&h.netns, &format!("route add default via {rwan4}"))?;
            ipn(&h.netns, &format!("-6 route add default via {rwan6}"))?;
        }
        self.router.extra = vec![rwan4, rwan6];
        Ok(())
    }

    /// Offloads off (and one segment per packet) unless --offloads on; what
    /// each interface ended up with.
    fn offloads(&self) -> Result<(serde_json::Map<String, serde_json::Value>, serde_json::Value)> {
        let mut offload_detail = serde_json::Map::new();
        let mut gso_segs_note = serde_json::Value::Null;
        let read_offloads = |ns: &str, d: &str| -> [String; 3] {
            let k = sys::run(&["ip", "netns", "exec", ns, "ethtool", "-k", d]).unwrap_or_default();
            let get = |name: &str| {
                k.lines()
                    .find(|l| l.trim_start().starts_with(&format!("{name}:")))
                    .and_then(|l| l.split(':').nth(1))
                    .map(|v| v.trim().to_string())
                    .unwrap_or_else(|| "?".into())
            };
            [get("tcp-segmentation-offload"), get("generic-segmentation-offload"), get("generic-receive-offload")]
        };
        for (ns, devs) in self.lab_devices() {
            for d in devs {
                if self.cfg.offloads == OnOff::Off {
                    let set = sys::run(&["ip", "netns", "exec", &ns, "ethtool", "-K", d, "tso", "off", "gso", "off", "gro", "off"]);
                    let now = read_offloads(&ns, d);
                    if now.iter().any(|v| v.starts_with("on")) {
                        bail!(
                            "cannot turn segmentation offloads off on {ns}/{d} (tso {}, gso {}, gro {}{}); run with --offloads on to keep them (a queue's packet limit then counts super-packets)",
                            now[0],
                            now[1],
                            now[2],
                            set.err().map(|e| format!("; {e:#}")).unwrap_or_default()
                        );
                    }
                    // TCP builds GSO super-packets even with gso off (segmented only
                    // after the qdisc); one segment per skb makes a qdisc "packet" one
                    // MTU frame. Essential where TCP's own host holds the queue (local).
                    if let Err(e) = ipn(&ns, &format!("link set dev {d} gso_max_segs 1")) {
                        if self.cfg.placement == Placement::Local {
                            return Err(e.context("setting gso_max_segs 1 (needed with --bottleneck local and --offloads off; iproute2 >= 5.x)"));
                        }
                        gso_segs_note = format!("not set: {e:#}").into();
                    } else if gso_segs_note.is_null() {
                        gso_segs_note = 1.into();
                    }
                }
                if sys::have("ethtool") {
                    let [tso, gso, gro] = read_offloads(&ns, d);
                    offload_detail.insert(format!("{ns}/{d}"), serde_json::json!({ "tso": tso, "gso": gso, "gro": gro }));
                }
            }
        }
        Ok((offload_detail, gso_segs_note))
    }

    /// (namespace, interfaces) of every lab interface.
    fn lab_devices(&self) -> Vec<(String, Vec<&'static str>)> {
        let mut v = vec![(self.client.netns.clone(), vec!["eth0"])];
        v.extend(self.home.as_ref().map(|h| (h.netns.clone(), vec!["lan0", "wan0"])));
        v.extend([
            (self.router.netns.clone(), vec!["lan", "wan-srv", "wan-wit", "wan"]),
            (self.server.netns.clone(), vec!["eth0"]),
            (self.witness.netns.clone(), vec!["eth0"]),
        ]);
        v
    }

    /// The bottleneck devices per direction: (namespace, device).
    /// With the emulator backend these are the router interfaces the emulator sits between.
    pub fn bottleneck_devices(&self) -> (Option<NsDev>, Option<NsDev>) {
        let up = self.cfg.rate_up.map(|_| match self.cfg.placement {
            Placement::Router => (self.router.netns.clone(), "wan".to_string()),
            Placement::Local => (self.client.netns.clone(), "eth0".to_string()),
        });
        let down = self.cfg.rate_down.map(|_| match self.cfg.placement {
            Placement::Router => (self.router.netns.clone(), "lan".to_string()),
            Placement::Local => (self.server.netns.clone(), "eth0".to_string()),
        });
        (up, down)
    }

    /// Queues for the sampler: the bottlenecks, and the senders' own queues.
    pub fn queue_targets(&self) -> Vec<QueueTarget> {
        let (up, down) = self.bottleneck_devices();
        let mut v = Vec::new();
        let t = |role: &str, (ns, dev): (String, String)| QueueTarget { role: role.into(), netns: ns, dev };
        if backend(&self.cfg).0 == Backend::Emulator {
            // The bottleneck queues are inside the emulator; it reports them itself.
            v.push(t("sender-local-up", (self.client.netns.clone(), "eth0".into())));
            v.push(t("sender-local-down", (self.server.netns.clone(), "eth0".into())));
            return v;
        }
        if let Some(u) = up {
            v.push(t("bottleneck-up", u));
        }
        if let Some(d) = down {
            v.push(t("bottleneck-down", d));
        }
        if self.cfg.placement == Placement::Router || self.cfg.rate_up.is_none() {
            v.push(t("sender-local-up", (self.client.netns.clone(), "eth0".into())));
        }
        if self.cfg.placement == Placement::Router || self.cfg.rate_down.is_none() {
            v.push(t("sender-local-down", (self.server.netns.clone(), "eth0".into())));
        }
        v
    }

    fn check_kernel_features(&self) -> Result<()> {
        let missing = |k: &str| self.support.missing.iter().any(|m| m == k);
        let shaper = match self.cfg.shaper {
            Shaper::Htb => "htb",
            Shaper::Tbf => "tbf",
        };
        let kernel = backend(&self.cfg).0 == Backend::Kernel;
        if kernel && (self.cfg.rate_up.is_some() || self.cfg.rate_down.is_some()) && missing(shaper) {
            bail!("this kernel ({}) has no `{shaper}` qdisc to limit the rate; try --shaper {}", self.kernel,
                if shaper == "htb" { "tbf" } else { "htb" });
        }
        if let Some(QueueSpec::Kernel { qdisc: kind, args }) = self.cfg.kernel_qdisc() {
            let kind = kind.as_str();
            let known = self.support.available.iter().any(|a| a == kind);
            if !known {
                // Not in our probe list, or missing: try it for real on a scratch device.
                if missing(kind) || !probe_one(&self.router.netns, kind, &args.join(" "))? {
                    let emu = match kind {
                        "fq_codel" | "codel" | "pie" => format!(" — bloatlab's user-space emulator offers it: --queue {kind}"),
                        "netem" => " — bloatlab's user-space emulator offers delay/jitter/loss: --delay/--jitter/--loss".into(),
                        _ => String::new(),
                    };
                    bail!(
                        "this kernel ({}) has no `{kind}` qdisc (module sch_{kind} not built or not loadable){emu}; available here: {}",
                        self.kernel,
                        self.support.available.join(", ")
                    );
                }
            }
        }
        if backend(&self.cfg).0 == Backend::Kernel
            && (self.cfg.delay.is_some() || self.cfg.loss.is_some())
            && missing("netem")
        {
            bail!(
                "--delay/--jitter/--loss need the `netem` qdisc with the kernel backend, and this kernel ({}) has none; \
                 bloatlab's user-space link emulator provides them without netem: use --backend emulator (or auto)",
                self.kernel
            );
        }
        Ok(())
    }

    /// (Re)install the bottleneck qdiscs for the current `cfg.queue` / `cfg.qdisc`.
    pub fn apply_bottleneck(&mut self) -> Result<()> {
        if backend(&self.cfg).0 == Backend::Emulator {
            // The emulator is started per run (run_test) with the current queue;
            // remove kernel shapers a previous kernel-backend run left.
            validate(&self.cfg)?;
            let (up, down) = self.bottleneck_devices();
            for (ns, dev) in [up, down].into_iter().flatten() {
                let _ = tcn(&ns, &["qdisc", "del", "dev", &dev, "root"]);
            }
            return Ok(());
        }
        let (up, down) = self.bottleneck_devices();
        let rates = [(up, self.cfg.rate_up, true), (down, self.cfg.rate_down, false)];
        for (dev, rate, is_up) in rates {
            let (Some((ns, dev)), Some(rate)) = (dev, rate) else { continue };
            self.install_shaper(&ns, &dev, rate, self.cfg.queue_of(is_up))?;
        }
        // Delay/loss with netem on the interfaces that are not the bottleneck.
        if let Some(args) = netem_args(&self.cfg) {
            let places: Vec<(String, &str)> = match self.cfg.placement {
                Placement::Router => vec![
                    (self.client.netns.clone(), "eth0"),
                    (self.server.netns.clone(), "eth0"),
                    (self.witness.netns.clone(), "eth0"),
                ],
                Placement::Local => vec![(self.router.netns.clone(), "lan"), (self.router.netns.clone(), "wan")],
            };
            for (ns, dev) in places {
                let mut a: Vec<&str> = vec!["qdisc", "replace", "dev", dev, "root", "netem"];
                a.extend(args.iter().map(|s| s.as_str()));
                tcn(&ns, &a)?;
            }
        }
        Ok(())
    }

    fn install_shaper(&self, ns: &str, dev: &str, rate: Rate, queue: &QueueSpec) -> Result<()> {
        // the one shaping layer (bloatlab_shape): the limiter at the rate
        // (burst and quantum sized to it), the queue under it: pfifo/bfifo,
        // an AQM this kernel has, or a --qdisc. What a run before left goes
        // first (a leaf of another kind cannot be changed in place).
        let shaper = bloatlab_shape::qdisc::Egress {
            device: dev.into(),
            rate,
            limiter: match self.cfg.shaper {
                Shaper::Htb => bloatlab_shape::qdisc::Limiter::Htb,
                Shaper::Tbf => bloatlab_shape::qdisc::Limiter::Tbf,
            },
            leaf: queue.kernel_args(),
        };
        bloatlab_shape::exec::run_each_quietly(Some(ns), &shaper.remove());
        bloatlab_shape::exec::run_all(Some(ns), &shaper.install()).map_err(|e| anyhow!(e))?;
        let txq = match (self.cfg.txqueuelen, queue) {
            (Some(t), _) => Some(t),
            (None, QueueSpec::Fifo { packets }) => Some(*packets),
            _ => None,
        };
        if let Some(t) = txq {
            ipn(ns, &format!("link set dev {dev} txqueuelen {t}"))?;
        }
        Ok(())
    }

    /// Leave the lab up when dropped (servers keep running); returns the
    /// instructions to enter it.
    pub fn keep(&mut self) -> String {
        self.kept = true;
        self.own.rec.keep = true;
        let _ = self.own.save();
        if let Some(t) = self.tmp.take() {
            self.run_dir = t.keep();
        }
        let mut s = format!("lab {} left up:\n", self.id);
        for h in self.hosts() {
            s.push_str(&format!(
                "  {:<8} sudo ip netns exec {} bash      # {}\n",
                h.role, h.netns, h.addresses().join(" ")
            ));
        }
        if !self.servers.is_empty() {
            // the binary by its path (it need not be on root's PATH), and the
            // lab's congestion control (the namespace default may differ)
            let exe = exe_display();
            let port = if self.cfg.port == bloatlab_model::DEFAULT_PORT { String::new() } else { format!(":{}", self.cfg.port) };
            s.push_str(&format!(
                "  bloatlab servers listen on {}:{} and {}:{}; e.g.\n    sudo ip netns exec {} {exe} test {}{port} --witness {}{port} --cc {}\n",
                self.server.v4, self.cfg.port, self.witness.v4, self.cfg.port, self.client.netns, self.server.v4, self.witness.v4, self.cfg.cc
            ));
            // the server's other services (lab::run::start_servers): the
            // browser test and the RPM endpoints, their certificate as the
            // server printed it in the logs
            let pin = std::fs::read_to_string(self.run_dir.join("server-server.stdout"))
                .ok()
                .and_then(|l| l.split("SHA-256 ").nth(1).and_then(|r| r.split_whitespace().next()).map(|p| format!("#pin-sha256={p}")))
                .unwrap_or_default();
            s.push_str(&format!(
                "  the server also serves the browser test at http://{}:{} and the IETF RPM endpoints at https://{}:{}/.well-known/nq{pin} (self-signed), from the client namespace\n",
                self.server.v4,
                bloatlab_model::DEFAULT_WEB_PORT,
                self.server.v4,
                bloatlab_model::DEFAULT_RPM_PORT
            ));
        }
        if let Some(h) = &self.home {
            let port = if self.cfg.port == bloatlab_model::DEFAULT_PORT { String::new() } else { format!(":{}", self.cfg.port) };
            s.push_str(&format!(
                "  tune the home router:\n    sudo ip netns exec {} {} tune {}{port} --wan wan0 --lan lan0 --client-netns {}\n",
                h.netns,
                exe_display(),
                self.server.v4,
                self.client.netns
            ));
        }
        s.push_str(&format!("  logs: {}\n", self.run_dir.display()));
        s.push_str(&format!("  remove it with: sudo {} lab cleanup --id {}\n", exe_display(), self.id));
        s
    }

    /// Record a child process in the ownership file.
    pub(crate) fn record_child(&mut self, pid: u32, what: &str) {
        self.own.rec.children.push(ChildRec { pid, start: sys::proc_start_time(pid), what: what.into() });
        let _ = self.own.save();
    }

    /// Stop children and delete the namespaces. Idempotent.
    pub fn teardown(&mut self) -> Result<()> {
        if self.torn_down {
            return Ok(());
        }
        self.torn_down = true;
        for ch in &mut self.servers {
            bloatlab_host::process::signal_child(ch, bloatlab_host::process::Signal::Term);
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        for ch in &mut self.servers {
            loop {
                match ch.try_wait() {
                    Ok(Some(_)) | Err(_) => break,
                    Ok(None) if std::time::Instant::now() > deadline => {
                        let _ = ch.kill();
                        let _ = ch.wait();
                        break;
                    }
                    Ok(None) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        }
        self.servers.clear();
        if let Some(cc) = self.own.rec.allowed_cc_added.clone() {
            crate::state::release_cc(&self.id, &cc);
        }
        let mut errs = Vec::new();
        for ns in self.own.rec.namespaces.clone().iter().rev() {
            if !std::path::Path::new(&format!("/run/netns/{ns}")).exists() {
                continue;
            }
            if let Err(e) = sys::run(&["ip", "netns", "del", ns]) {
                errs.push(format!("{e:#}"));
            }
        }
        if errs.is_empty() {
            self.own.remove_files();
            Ok(())
        } else {
            Err(anyhow!("teardown of lab {} incomplete: {}", self.id, errs.join("; ")))
        }
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if self.kept {
            return;
        }
        if let Err(e) = self.teardown() {
            eprintln!("bloatlab lab: {e:#}; run `bloatlab lab cleanup --id {}`", self.id);
        }
    }
}

/// This bloatlab binary's path as a command to print (it need not be on root's PATH).
fn exe_display() -> String {
    std::env::current_exe()
        .map(|p| p.display().to_string().trim_end_matches(" (deleted)").to_string())
        .unwrap_or_else(|_| "bloatlab".into())
}

/// netem arguments for the kernel backend's delay/jitter/loss (one direction
/// each), or None when none is asked for.
pub fn netem_args(cfg: &LabConfig) -> Option<Vec<String>> {
    if cfg.delay.is_none() && cfg.loss.is_none() {
        return None;
    }
    let mut args: Vec<String> = vec!["limit".into(), "100000".into()];
    if let Some(d) = cfg.delay {
        args.push("delay".into());
        args.push(format!("{}us", d.as_micros()));
        if let Some(j) = &cfg.jitter {
            args.push(format!("{}us", j.amount_ns / 1000));
            if j.dist == bloatlab_model::link::JitterDist::Normal {
                args.extend(["distribution".into(), "normal".into()]);
            }
        }
    }
    let pct = |p: f64| format!("{}%", (p * 100.0 * 1e6).round() / 1e6);
    match cfg.loss {
        Some(bloatlab_model::link::LossSpec::Bernoulli { p }) => args.extend(["loss".into(), pct(p)]),
        // netem's Gilbert-Elliott: p, r, 1-h (loss in Bad), 1-k (loss in Good)
        Some(bloatlab_model::link::LossSpec::GilbertElliott { p, r, loss_good, loss_bad }) => {
            args.extend(["loss".into(), "gemodel".into(), pct(p), pct(r), pct(loss_bad), pct(loss_good)])
        }
        Some(bloatlab_model::link::LossSpec::None) | None => {}
    }
    Some(args)
}

/// Try to create one qdisc kind on a scratch veth in `ns`. Ok(false) = kernel lacks it.
fn probe_one(ns: &str, kind: &str, args: &str) -> Result<bool> {
    let scratch = bloatlab_shape::probe::Scratch::new(Some(ns), "probe0", "probe1").map_err(|e| anyhow!(e))?;
    Ok(scratch.has(kind, &args.split_whitespace().collect::<Vec<_>>()))
}

/// Probe the qdisc kinds of [`PROBED_QDISCS`] in namespace `ns`.
pub fn probe_qdiscs_in(ns: &str) -> Result<QdiscSupport> {
    let scratch = bloatlab_shape::probe::Scratch::new(Some(ns), "probe0", "probe1").map_err(|e| anyhow!(e))?;
    let (available, missing) = scratch.kinds(PROBED_QDISCS);
    Ok(QdiscSupport { available, missing })
}

/// Probe qdisc support in a scratch namespace of our own (`blab-<id>-probe`).
pub fn probe_qdiscs() -> Result<QdiscSupport> {
    sys::require_privileges()?;
    let b = sys::random_bytes::<3>();
    let id = format!("{:02x}{:02x}{:02x}", b[0], b[1], b[2]);
    let own = Ownership::claim(&id)?;
    let ns = ns_name(&id, "probe");
    let mut o = own;
    o.rec.namespaces.push(ns.clone());
    o.save()?;
    sys::run(&["ip", "netns", "add", &ns])?;
    let r = probe_qdiscs_in(&ns);
    let d = sys::run(&["ip", "netns", "del", &ns]);
    o.remove_files();
    d?;
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn netem_arguments() {
        let mut c = LabConfig::default();
        assert_eq!(netem_args(&c), None);
        c.delay = Some(Duration::from_millis(20));
        c.jitter = Some(bloatlab_model::link::JitterSpec::parse("2ms", false).unwrap());
        c.loss = Some("1%".parse().unwrap());
        assert_eq!(netem_args(&c).unwrap().join(" "), "limit 100000 delay 20000us 2000us loss 1%");
    }

    #[test]
    fn emulator_configuration() {
        let mut c = LabConfig { delay: Some(Duration::from_millis(10)), ..Default::default() };
        let e = emulator_config(&c).unwrap();
        assert_eq!(e.up.delay_ns, 10_000_000);
        assert_eq!(e.up.overhead_bytes, 14);
        c.queue_up = Some(QueueSpec::parse("codel").unwrap());
        let e = emulator_config(&c).unwrap();
        assert_eq!((e.up.queue.kind(), e.down.queue.kind()), ("codel", "fifo"));
        c.placement = Placement::Local;
        assert!(validate(&c).unwrap_err().to_string().contains("kernel backend"));
    }
}
