//! What `bloatlab tune` installs on a router, as one list of commands that
//! is both what it runs and what it prints for keeping (a shell script),
//! and the same settings as an OpenWrt SQM section and a systemd unit.
//!
//! Upload is shaped on the WAN interface's egress. Download is shaped on
//! an IFB device that the WAN's ingress is redirected to. The commands are
//! the shaping layer's (bloatlab_shape::qdisc), the lab's bottleneck's too.
use bloatlab_model::Rate;
use bloatlab_shape::qdisc::{argv, Egress, IngressRedirect, Limiter};
pub use bloatlab_shape::qdisc::ifb_name;
use serde::{Deserialize, Serialize};

/// The queue a shaper feeds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Leaf {
    /// cake, which shapes itself (`bandwidth`), with the per-packet
    /// overhead and minimum size the line adds (bytes).
    Cake { overhead: u32, mpu: u32 },
    /// HTB at the rate, fq_codel under it.
    FqCodel,
    /// bloatlab's user-space shaper (`bloatlab emulate`): the rate and an
    /// FQ-CoDel queue per direction, for kernels without cake or fq_codel.
    /// Policy routing takes what the router forwards between its LAN
    /// interfaces ([`Plan::lan`]) and the WAN through two TUN devices.
    Emulator,
}

/// The emulator shaper's TUN devices and routing tables (rule preferences
/// are the same numbers).
pub const EMULATOR_TUN: (&str, &str) = ("tune-up", "tune-down");
pub const EMULATOR_TABLES: (u32, u32) = (7711, 7712);

/// One direction's shaper.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Setting {
    /// The device whose egress is shaped (the WAN for upload, its IFB for
    /// download).
    pub device: String,
    /// The shaper's rate, bit/s on the wire.
    pub rate_bps: u64,
    pub leaf: Leaf,
}

impl Setting {
    pub fn rate(&self) -> Rate {
        Rate { bps: self.rate_bps }
    }

    /// The kernel shaper on its device's egress (None: the emulator shapes).
    pub fn egress(&self) -> Option<Egress> {
        let (limiter, leaf) = match self.leaf {
            Leaf::Cake { overhead, mpu } => (Limiter::Cake { overhead, mpu }, vec![]),
            Leaf::FqCodel => (Limiter::Htb, argv(&["fq_codel"])),
            Leaf::Emulator => return None,
        };
        Some(Egress { device: self.device.clone(), rate: self.rate(), limiter, leaf })
    }
}

/// The shaper of a WAN interface: its upload, its download, or both.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub wan: String,
    pub upload: Option<Setting>,
    pub download: Option<Setting>,
    /// The LAN-side interfaces (the emulator shaper's client side).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lan: Vec<String>,
}

impl Plan {
    /// Shape `wan`: upload at `up`, download at `down` (None: that
    /// direction is left alone), feeding `leaf`.
    pub fn new(wan: &str, up: Option<Rate>, down: Option<Rate>, leaf: Leaf) -> Plan {
        Plan {
            wan: wan.into(),
            upload: up.map(|rate| Setting { device: wan.into(), rate_bps: rate.bps, leaf }),
            download: down.map(|rate| Setting { device: ifb_name(wan), rate_bps: rate.bps, leaf }),
            lan: vec![],
        }
    }

    /// The leaf both directions feed (the first set).
    pub fn leaf(&self) -> Option<Leaf> {
        self.upload.as_ref().or(self.download.as_ref()).map(|s| s.leaf)
    }

    /// Whether the emulator shapes (a process, not qdiscs).
    pub fn is_emulator(&self) -> bool {
        self.leaf() == Some(Leaf::Emulator)
    }

    /// The emulator shaper's command line (`bloatlab emulate`), the upload
    /// and download rates on the wire with the Ethernet header counted.
    pub fn emulate_argv(&self, exe: &str) -> Vec<String> {
        let mut v = argv(&[exe, "emulate"]);
        for l in &self.lan {
            v.extend(argv(&["--client-if", l]));
        }
        v.extend(argv(&["--server-if", &self.wan]));
        for (dir, s) in [("up", &self.upload), ("down", &self.download)] {
            if let Some(s) = s {
                v.extend(argv(&[&format!("--rate-{dir}"), &s.rate().tc()]));
            }
        }
        v.extend(argv(&["--queue", "fq_codel", "--overhead", "14"]));
        v
    }

    /// The commands that install it, in order (each an argv).
    pub fn install(&self) -> Vec<Vec<String>> {
        let mut v = vec![];
        if self.is_emulator() {
            // a process: bloatlab emulate (Plan::emulate_argv)
            return v;
        }
        if let Some(d) = &self.download {
            v.extend(IngressRedirect { device: self.wan.clone(), ifb: d.device.clone() }.install());
        }
        for s in [&self.upload, &self.download].into_iter().flatten() {
            v.extend(s.egress().map(|e| e.install()).unwrap_or_default());
        }
        v
    }

    /// The commands that remove it (each may fail harmlessly when a part
    /// was never installed).
    pub fn remove(&self) -> Vec<Vec<String>> {
        let mut v = vec![];
        if self.is_emulator() {
            // the emulator removes its rules when it stops; these are what a
            // killed one leaves
            for fam in ["-4", "-6"] {
                for t in [EMULATOR_TABLES.0, EMULATOR_TABLES.1] {
                    v.push(argv(&["ip", fam, "rule", "del", "pref", &t.to_string()]));
                }
            }
            return v;
        }
        if let Some(e) = self.upload.as_ref().and_then(Setting::egress) {
            v.extend(e.remove());
        }
        if let Some(d) = &self.download {
            // the IFB's shaper goes with the device
            v.extend(IngressRedirect { device: self.wan.clone(), ifb: d.device.clone() }.remove());
        }
        v
    }

    /// A shell script that installs it (what `--write-config` keeps).
    pub fn script(&self) -> String {
        if self.is_emulator() {
            return format!(
                "#!/bin/sh\n# bloatlab tune: shape {}{} with bloatlab's user-space shaper (runs until stopped)\nexec {}\n",
                self.wan,
                self.summary(),
                shell(&self.emulate_argv("bloatlab"))
            );
        }
        let mut s = format!("#!/bin/sh\n# bloatlab tune: shape {}{}\nset -e\n", self.wan, self.summary());
        for c in self.remove() {
            s.push_str(&format!("{} 2>/dev/null || true\n", shell(&c)));
        }
        for c in self.install() {
            s.push_str(&shell(&c));
            s.push('\n');
        }
        s
    }

    /// The same settings as an OpenWrt SQM section (`/etc/config/sqm`;
    /// sqm-scripts takes rates in kbit/s, 0 = that direction unshaped).
    pub fn openwrt_sqm(&self) -> String {
        let kbit = |s: &Option<Setting>| s.as_ref().map(|s| s.rate_bps / 1000).unwrap_or(0);
        let leaf = self.upload.as_ref().or(self.download.as_ref()).map(|s| s.leaf).unwrap_or(Leaf::FqCodel);
        let (qdisc, script, overhead) = match leaf {
            Leaf::Cake { overhead, mpu } => ("cake", "piece_of_cake.qos", Some((overhead, mpu))),
            // OpenWrt's kernels have fq_codel: sqm-scripts shapes in the kernel
            Leaf::FqCodel | Leaf::Emulator => ("fq_codel", "simple.qos", None),
        };
        let mut s = format!(
            "config queue 'bloatlab'\n\toption enabled '1'\n\toption interface '{}'\n\toption download '{}'\n\toption upload '{}'\n\toption qdisc '{qdisc}'\n\toption script '{script}'\n",
            self.wan,
            kbit(&self.download),
            kbit(&self.upload)
        );
        match overhead {
            Some((o, mpu)) => s.push_str(&format!("\toption linklayer 'ethernet'\n\toption overhead '{o}'\n\toption linklayer_advanced '1'\n\toption tcMPU '{mpu}'\n")),
            None => s.push_str("\toption linklayer 'none'\n"),
        }
        s
    }

    /// A systemd unit that runs the script at boot (`script_path`) and
    /// removes the shaper when stopped.
    pub fn systemd_unit(&self, script_path: &str) -> String {
        if self.is_emulator() {
            return format!(
                "[Unit]\nDescription=bloatlab tune: shape {}{} (user-space shaper)\nAfter=network-online.target\nWants=network-online.target\n\n[Service]\nType=simple\nExecStart=/bin/sh {script_path}\nRestart=on-failure\n\n[Install]\nWantedBy=multi-user.target\n",
                self.wan,
                self.summary()
            );
        }
        let stop: Vec<String> = self.remove().iter().map(|c| format!("-{}", shell_abs(c))).collect();
        format!(
            "[Unit]\nDescription=bloatlab tune: shape {}{}\nAfter=network-online.target\nWants=network-online.target\n\n[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/bin/sh {script_path}\n{}\n\n[Install]\nWantedBy=multi-user.target\n",
            self.wan,
            self.summary(),
            stop.iter().map(|c| format!("ExecStop={c}")).collect::<Vec<_>>().join("\n")
        )
    }

    fn summary(&self) -> String {
        let mut parts = vec![];
        if let Some(s) = &self.upload {
            parts.push(format!("upload {}", bloatlab_model::fmt::rate(s.rate_bps as f64)));
        }
        if let Some(s) = &self.download {
            parts.push(format!("download {}", bloatlab_model::fmt::rate(s.rate_bps as f64)));
        }
        if parts.is_empty() {
            String::new()
        } else {
            format!(" ({})", parts.join(", "))
        }
    }
}

fn shell(c: &[String]) -> String {
    c.iter().map(|w| if w.chars().all(|ch| ch.is_ascii_alphanumeric() || "-_.:/+=".contains(ch)) { w.clone() } else { format!("'{}'", w.replace('\'', "'\\''")) }).collect::<Vec<_>>().join(" ")
}

/// systemd wants an absolute path for the program.
fn shell_abs(c: &[String]) -> String {
    let mut c = c.to_vec();
    if let Some(p) = c.first_mut() {
        *p = match p.as_str() {
            "tc" => "/sbin/tc".into(),
            "ip" => "/sbin/ip".into(),
            other => other.into(),
        };
    }
    shell(&c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Plan {
        Plan::new("eth1", Some(Rate::mbit(4.5)), Some(Rate::mbit(18.0)), Leaf::FqCodel)
    }

    #[test]
    fn upload_on_the_wan_download_on_its_ifb_with_the_burst_sized_to_the_rate() {
        let p = plan();
        let cmds: Vec<String> = p.install().iter().map(|c| c.join(" ")).collect();
        assert_eq!(
            cmds,
            [
                "ip link add name ifb4eth1 type ifb",
                "ip link set dev ifb4eth1 up",
                "tc qdisc add dev eth1 handle ffff: ingress",
                "tc filter add dev eth1 parent ffff: protocol all prio 10 u32 match u32 0 0 action mirred egress redirect dev ifb4eth1",
                "tc qdisc replace dev eth1 root handle 1: htb default 1",
                "tc class replace dev eth1 parent 1: classid 1:1 htb rate 4500000bit ceil 4500000bit burst 3028 cburst 3028 quantum 56250",
                "tc qdisc replace dev eth1 parent 1:1 handle 10: fq_codel",
                "tc qdisc replace dev ifb4eth1 root handle 1: htb default 1",
                "tc class replace dev ifb4eth1 parent 1: classid 1:1 htb rate 18000000bit ceil 18000000bit burst 3028 cburst 3028 quantum 200000",
                "tc qdisc replace dev ifb4eth1 parent 1:1 handle 10: fq_codel",
            ]
        );
        let rm: Vec<String> = p.remove().iter().map(|c| c.join(" ")).collect();
        assert_eq!(rm, ["tc qdisc del dev eth1 root", "tc qdisc del dev eth1 ingress", "ip link del dev ifb4eth1"]);
    }

    #[test]
    fn cake_shapes_itself_with_its_overhead_stated() {
        let p = Plan::new("wan", Some(Rate::mbit(9.0)), None, Leaf::Cake { overhead: 18, mpu: 64 });
        let cmds: Vec<String> = p.install().iter().map(|c| c.join(" ")).collect();
        assert_eq!(cmds, ["tc qdisc replace dev wan root cake bandwidth 9000000bit overhead 18 mpu 64"]);
        assert_eq!(p.remove().len(), 1);
        let sqm = p.openwrt_sqm();
        assert!(sqm.contains("option interface 'wan'\n\toption download '0'\n\toption upload '9000'\n\toption qdisc 'cake'\n\toption script 'piece_of_cake.qos'"), "{sqm}");
        assert!(sqm.contains("option overhead '18'") && sqm.contains("option tcMPU '64'"), "{sqm}");
    }

    #[test]
    fn the_script_and_the_unit_install_and_remove_the_same_commands() {
        let p = plan();
        let s = p.script();
        assert!(s.starts_with("#!/bin/sh\n# bloatlab tune: shape eth1 (upload 4.50 Mbit/s, download 18.0 Mbit/s)\nset -e\n"), "{s}");
        // what was there before goes first, harmlessly when absent
        assert!(s.contains("tc qdisc del dev eth1 root 2>/dev/null || true\n"), "{s}");
        for c in p.install() {
            assert!(s.contains(&format!("{}\n", c.join(" "))), "{s}");
        }
        let u = p.systemd_unit("/etc/bloatlab/tune-eth1.sh");
        assert!(u.contains("ExecStart=/bin/sh /etc/bloatlab/tune-eth1.sh\n"), "{u}");
        assert!(u.contains("ExecStop=-/sbin/tc qdisc del dev eth1 root\nExecStop=-/sbin/tc qdisc del dev eth1 ingress\nExecStop=-/sbin/ip link del dev ifb4eth1\n"), "{u}");
        let sqm = p.openwrt_sqm();
        assert!(sqm.contains("option download '18000'\n\toption upload '4500'\n\toption qdisc 'fq_codel'\n\toption script 'simple.qos'"), "{sqm}");
    }

    #[test]
    fn the_emulator_shaper_is_a_process_and_its_undo_removes_what_a_killed_one_leaves() {
        let mut p = Plan::new("wan0", Some(Rate::mbit(4.5)), Some(Rate::mbit(18.0)), Leaf::Emulator);
        p.lan = vec!["lan0".into()];
        assert!(p.install().is_empty());
        assert_eq!(
            p.emulate_argv("bloatlab").join(" "),
            "bloatlab emulate --client-if lan0 --server-if wan0 --rate-up 4500000bit --rate-down 18000000bit --queue fq_codel --overhead 14"
        );
        let rm: Vec<String> = p.remove().iter().map(|c| c.join(" ")).collect();
        assert_eq!(rm[0], "ip -4 rule del pref 7711");
        assert_eq!(rm.len(), 4);
        assert!(p.script().contains("exec bloatlab emulate --client-if lan0"), "{}", p.script());
        assert!(p.systemd_unit("/x.sh").contains("Type=simple"));
    }

    #[test]
    fn an_ifb_name_fits_an_interface_name() {
        assert_eq!(ifb_name("eth1"), "ifb4eth1");
        assert_eq!(ifb_name("enp0s31f6.100"), "ifb4enp0s31f6.1");
        assert!(ifb_name("enp0s31f6.100").len() <= 15);
    }
}
