//! The emulator process: enter the router's network namespace, create the two
//! TUN devices, steer traffic into them with policy routing, run the two
//! direction threads until SIGTERM/SIGINT (or a duration), then undo the
//! routing and write the statistics file.
//!
//! Routing (inside the namespace), with tables `T_up`, `T_down`:
//!
//! ```text
//! ip rule add iif <client-side if> lookup T_up      (IPv4 and IPv6)
//! ip route add default dev <tun-up> table T_up
//! ip rule add iif <server-side if> lookup T_down
//! ip route add default dev <tun-down> table T_down
//! ```
//!
//! A packet from the client enters the router on the client-side interface,
//! is routed into `tun-up`, read by the emulator, and written back into
//! `tun-up`; the kernel sees it arrive on `tun-up` (no rule matches) and
//! forwards it by the main table towards the server. Traffic to the router's
//! own addresses is delivered locally (the local table comes first) and is not
//! emulated. Reverse-path filtering is turned off (packets re-enter on the
//! TUN device), and forwarding is turned on.

use crate::config::EmulatorConfig;
use crate::datapath::{run_direction, unix_ns, Clock, DirectionReport, RunOpts};
use crate::tun::Tun;
use anyhow::{anyhow, bail, Context, Result};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Everything the emulator process needs: the typed configuration the lab
/// hands `bloatlab emulate --spec FILE` as JSON.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunSpec {
    /// Network namespace to enter (name under /run/netns, or a path); None = stay.
    pub netns: Option<String>,
    /// Interfaces whose incoming traffic goes through the "up" direction.
    pub client_side_ifs: Vec<String>,
    /// Interfaces whose incoming traffic goes through the "down" direction.
    pub server_side_ifs: Vec<String>,
    pub tun_up: String,
    pub tun_down: String,
    /// Routing tables (and rule priorities) used for the two directions.
    pub table_up: u32,
    pub table_down: u32,
    pub cfg: EmulatorConfig,
    pub stats_path: Option<PathBuf>,
    pub duration: Option<Duration>,
    /// Print progress to stderr.
    pub verbose: bool,
}

/// Enter network namespace `ns` (a name under /run/netns or a path) for the calling thread.
pub fn enter_netns(ns: &str) -> Result<()> {
    bloatlab_host::netns::enter(ns).map_err(|e| anyhow!(e))
}

fn ip(args: &[&str]) -> Result<()> {
    let mut v = vec!["ip"];
    v.extend_from_slice(args);
    bloatlab_host::cmd::run(&v).map(drop).map_err(|e| anyhow!(e))
}

fn if_mtu(name: &str) -> Result<u32> {
    let out = Command::new("ip").args(["-o", "link", "show", "dev", name]).output().context("cannot run `ip`")?;
    if !out.status.success() {
        bail!("interface \"{name}\" does not exist in this namespace");
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut it = text.split_whitespace();
    while let Some(w) = it.next() {
        if w == "mtu" {
            if let Some(v) = it.next().and_then(|v| v.parse().ok()) {
                return Ok(v);
            }
        }
    }
    bail!("cannot read the MTU of {name}")
}

fn sysctl(path: &str, value: &str) -> Result<()> {
    let p = format!("/proc/sys/{path}");
    std::fs::write(&p, value).with_context(|| format!("cannot set {p} = {value}"))
}

/// Routing state to undo at exit.
struct Routing {
    rules: Vec<Vec<String>>,
}

impl Routing {
    fn add_rule(&mut self, family: &str, iif: &str, table: u32) -> Result<()> {
        let t = table.to_string();
        let args = vec![family.to_string(), "rule".into(), "add".into(), "iif".into(), iif.into(), "lookup".into(), t.clone(), "pref".into(), t];
        let a: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        ip(&a)?;
        let mut del = args.clone();
        del[2] = "del".into();
        self.rules.push(del);
        Ok(())
    }
    fn undo(&mut self) {
        for r in self.rules.drain(..).rev() {
            let a: Vec<&str> = r.iter().map(|s| s.as_str()).collect();
            let _ = ip(&a);
        }
    }
}

fn setup_routing(spec: &RunSpec, r: &mut Routing, ipv6: bool) -> Result<()> {
    for (tun, table, ifs) in [(&spec.tun_up, spec.table_up, &spec.client_side_ifs), (&spec.tun_down, spec.table_down, &spec.server_side_ifs)] {
        let t = table.to_string();
        // rules left by an emulator that was killed (SIGKILL) before it could clean up
        for fam in ["-4", "-6"] {
            for _ in 0..16 {
                if ip(&[fam, "rule", "del", "pref", &t]).is_err() {
                    break;
                }
            }
        }
        ip(&["-4", "route", "replace", "default", "dev", tun, "table", &t])?;
        if ipv6 {
            ip(&["-6", "route", "replace", "default", "dev", tun, "table", &t])?;
        }
        for i in ifs.iter() {
            r.add_rule("-4", i, table)?;
            if ipv6 {
                r.add_rule("-6", i, table)?;
            }
        }
    }
    Ok(())
}

/// Run the emulator process to completion. Returns the exit code.
pub fn run(spec: RunSpec) -> Result<i32> {
    spec.cfg.validate().map_err(|e| anyhow!("invalid emulator configuration: {e}"))?;
    if spec.client_side_ifs.is_empty() || spec.server_side_ifs.is_empty() {
        bail!("need at least one client-side and one server-side interface (--client-if, --server-if)");
    }
    if let Some(i) = spec.client_side_ifs.iter().find(|i| spec.server_side_ifs.contains(i)) {
        bail!("interface {i} cannot be on both the client side and the server side");
    }
    if spec.tun_up == spec.tun_down {
        bail!("the two TUN devices need different names");
    }
    if spec.table_up == spec.table_down {
        bail!("the two directions need different routing tables");
    }
    bloatlab_host::signals::install();
    let stop = bloatlab_host::signals::flag();
    if let Some(ns) = &spec.netns {
        enter_netns(ns)?;
    }
    let mut mtu = 0;
    for i in spec.client_side_ifs.iter().chain(spec.server_side_ifs.iter()) {
        mtu = mtu.max(if_mtu(i)?);
    }
    let mtu = mtu.clamp(1280, 65535);
    let tun_up = Tun::open_with(&spec.tun_up, spec.cfg.offload && spec.cfg.up.is_unshaped())?;
    let tun_down = Tun::open_with(&spec.tun_down, spec.cfg.offload && spec.cfg.down.is_unshaped())?;
    let ipv6 = Path::new("/proc/sys/net/ipv6").exists();
    let mut routing = Routing { rules: vec![] };
    let setup = (|| -> Result<()> {
        for t in [&spec.tun_up, &spec.tun_down] {
            ip(&["link", "set", "dev", t, "mtu", &mtu.to_string(), "txqueuelen", "1000", "up"])?;
        }
        sysctl("net/ipv4/ip_forward", "1")?;
        sysctl("net/ipv4/conf/all/rp_filter", "0")?;
        sysctl("net/ipv4/conf/default/rp_filter", "0")?;
        for t in [&spec.tun_up, &spec.tun_down] {
            sysctl(&format!("net/ipv4/conf/{t}/rp_filter"), "0")?;
        }
        if ipv6 {
            sysctl("net/ipv6/conf/all/forwarding", "1")?;
            for t in [&spec.tun_up, &spec.tun_down] {
                let _ = sysctl(&format!("net/ipv6/conf/{t}/disable_ipv6"), "0");
            }
        }
        setup_routing(&spec, &mut routing, ipv6)
    })();
    if let Err(e) = setup {
        routing.undo();
        return Err(e);
    }

    let seed = spec.cfg.seed.unwrap_or_else(crate::rng::random_seed);
    let clock = Clock::new();
    let start_unix = unix_ns();
    let buf_size = (mtu as usize + 64).max(2048);
    let opts = RunOpts {
        timer: spec.cfg.timer,
        spin_ns: spec.cfg.spin_ns,
        batch: spec.cfg.batch,
        sample_interval_ns: spec.cfg.sample_interval_ns,
        buf_size,
        seed,
        rt_priority: spec.cfg.rt_priority,
    };
    let (up_name, down_name) = (tun_up.name().to_string(), tun_down.name().to_string());
    let (cu, cd) = (spec.cfg.up.clone(), spec.cfg.down.clone());
    let (ou, od) = (opts.clone(), RunOpts { seed: seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 1, ..opts.clone() });
    let th_up = std::thread::Builder::new().name("emu-up".into()).spawn(move || run_direction("up", tun_up, cu, ou, clock, stop))?;
    let th_down = std::thread::Builder::new().name("emu-down".into()).spawn(move || run_direction("down", tun_down, cd, od, clock, stop))?;

    let ready = serde_json::json!({
        "ready": true,
        "pid": std::process::id(),
        "netns": spec.netns,
        "tun_up": up_name,
        "tun_down": down_name,
        "mtu": mtu,
        "seed": seed,
        "offload_up": spec.cfg.offload && spec.cfg.up.is_unshaped(),
        "offload_down": spec.cfg.offload && spec.cfg.down.is_unshaped(),
        "description": spec.cfg.describe(),
    });
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{ready}");
        let _ = out.flush();
    }
    if spec.verbose {
        eprintln!("bloatlab emulate: running ({}); stop with SIGTERM or Ctrl-C", spec.cfg.describe());
    }
    let t0 = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        if let Some(d) = spec.duration {
            if t0.elapsed() >= d {
                stop.store(true, Ordering::SeqCst);
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let up = th_up.join().map_err(|_| anyhow!("up direction thread panicked"))?;
    let down = th_down.join().map_err(|_| anyhow!("down direction thread panicked"))?;
    let (kernel_up, kernel_down) = (up.kernel_tun, down.kernel_tun);
    routing.undo();
    let stop_unix = unix_ns();
    let fatal: Vec<String> = [&up, &down].iter().filter_map(|d| d.fatal_error.clone()).collect();
    let stats = stats_json(&spec, seed, mtu, start_unix, stop_unix, &up, &down, kernel_up, kernel_down);
    if let Some(path) = &spec.stats_path {
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, serde_json::to_vec_pretty(&stats)?).with_context(|| format!("cannot write {}", tmp.display()))?;
        std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))?;
    } else {
        println!("{}", serde_json::to_string_pretty(&stats)?);
    }
    if !fatal.is_empty() {
        eprintln!("bloatlab emulate: stopped early: {}", fatal.join("; "));
        return Ok(1);
    }
    if spec.verbose {
        for d in [&up, &down] {
            eprintln!(
                "bloatlab emulate: {}: {} packets in, {} delivered, {} dropped by the queue, {} marked, {} lost; release error p99 {:.1} us",
                d.name,
                d.packets_read,
                d.link.delivered,
                d.qdisc.dropped,
                d.qdisc.ecn_marked,
                d.link.lost,
                d.release_error.quantile(0.99) as f64 / 1e3
            );
        }
    }
    Ok(0)
}

#[allow(clippy::too_many_arguments)]
fn stats_json(
    spec: &RunSpec,
    seed: u64,
    mtu: u32,
    start_unix: u64,
    stop_unix: u64,
    up: &DirectionReport,
    down: &DirectionReport,
    kup: Option<(u64, u64, u64, u64)>,
    kdown: Option<(u64, u64, u64, u64)>,
) -> serde_json::Value {
    let loc = |t: &str| format!("{}/{}", spec.netns.as_deref().unwrap_or("-"), t);
    let kernel = |k: Option<(u64, u64, u64, u64)>| match k {
        Some((rxp, rxd, txp, txd)) => serde_json::json!({
            "to_emulator_packets": txp, "to_emulator_dropped": txd,
            "from_emulator_packets": rxp, "from_emulator_dropped": rxd,
        }),
        None => serde_json::Value::Null,
    };
    let mut up_j = up.to_json();
    up_j["kernel_tun"] = kernel(kup);
    let mut down_j = down.to_json();
    down_j["kernel_tun"] = kernel(kdown);
    serde_json::json!({
        "emulator": "bloatlab-emulator",
        "version": env!("CARGO_PKG_VERSION"),
        "pid": std::process::id(),
        "netns": spec.netns,
        "seed": seed,
        "mtu": mtu,
        "timer": { "mode": spec.cfg.timer, "spin_us": spec.cfg.spin_ns as f64 / 1e3, "timer_slack_ns": 1, "rt_priority": spec.cfg.rt_priority },
        "batch": spec.cfg.batch,
        "sample_interval_ms": spec.cfg.sample_interval_ns as f64 / 1e6,
        "start_unix_ns": start_unix,
        "stop_unix_ns": stop_unix,
        "config": spec.cfg,
        "description": spec.cfg.describe(),
        "routing": {
            "client_side_ifs": spec.client_side_ifs,
            "server_side_ifs": spec.server_side_ifs,
            "tun_up": up.tun,
            "tun_down": down.tun,
            "table_up": spec.table_up,
            "table_down": spec.table_down,
        },
        "up": up_j,
        "down": down_j,
        "queues": [up.queue_series(&loc(&up.tun)), down.queue_series(&loc(&down.tun))],
    })
}
