//! `bloatlab tune`: parsed here into the model's [`TuneConfig`] (its
//! options defined once in [`bloatlab_model::TUNE_OPTIONS`]), run by the
//! tune crate on this host's interface, printed and written by the report
//! crate.
use crate::options::OptionArgs;
use anyhow::{anyhow, bail, Context, Result};
use bloatlab_host::signals;
use bloatlab_model::TuneConfig;
use bloatlab_tune::driver::{self, TuneDoc};
use bloatlab_tune::meter::JobMeter;
use bloatlab_tune::shaper::{self, LineShaper, Place};
use clap::Args;
use std::path::{Path, PathBuf};

/// `bloatlab tune SERVER --wan IFACE`: shape the line, search the rate, verify.
#[derive(Args, Debug)]
#[command(after_help = "Runs as root on the Linux host that routes the line (a home router). Measures the line \
(the quick profile; against an RPM server, the method's stages after idle probes), searches each bloated direction for the highest shaper rate that keeps the added latency \
under --target-added, verifies the rates found, and puts the interface back as it was unless --keep. \
See docs/tune.md.")]
pub struct TuneArgs {
    /// The server beyond the line: a bloatlab server, HOST[:PORT], or an
    /// RPM server, https://HOST[:PORT]/.well-known/nq (#pin-sha256=HEX pins
    /// a self-signed certificate).
    #[arg(value_name = "SERVER", required_unless_present = "undo")]
    pub server: Option<String>,
    #[command(flatten)]
    pub opts: OptionArgs<TuneConfig>,
    /// Undo a tune that was killed (SIGKILL, power cut) or kept with
    /// --keep: remove its shaper and put IFACE's queues back as they were
    /// (from the state saved in --state-dir).
    #[arg(long, value_name = "IFACE", conflicts_with = "server")]
    pub undo: Option<String>,
    /// No progress lines (the table and errors only).
    #[arg(long)]
    pub quiet: bool,
}

/// The tune configuration the command line asks for, checked.
pub fn config(a: &TuneArgs) -> Result<TuneConfig> {
    let mut c = TuneConfig::default();
    if let Some(s) = &a.server {
        c.set_server(s).map_err(|e| anyhow!(e))?;
    }
    a.opts.0.apply(&mut c).map_err(|e| anyhow!(e))?;
    c.check().map_err(|e| anyhow!(e))?;
    Ok(c)
}

pub fn run_tune(a: TuneArgs) -> Result<i32> {
    if let Some(iface) = &a.undo {
        let mut c = TuneConfig::default();
        a.opts.0.apply(&mut c).map_err(|e| anyhow!(e))?;
        let s = shaper::undo_saved(&c.state_dir, None, iface).map_err(|e| anyhow!(e))?;
        match &s.local {
            Some(lb) => println!("{iface}: its queue is back as it was ({}{}, txqueuelen {})", lb.kind, lb.limit.map(|l| format!(" limit {l}")).unwrap_or_default(), lb.txqueuelen),
            None => println!("{iface}: the shaper is removed and its queues read as before ({})", s.before.iter().map(|q| q.kind.as_str()).collect::<Vec<_>>().join(", ")),
        }
        return Ok(0);
    }
    let cfg = config(&a)?;
    if !bloatlab_host::process::is_root() {
        bail!("bloatlab tune changes {}'s queues: run it as root", cfg.wan);
    }
    signals::install();
    check_route(&cfg)?;
    if cfg.local {
        return run_local(&cfg, a.quiet);
    }
    let lan = if cfg.lan.is_empty() { shaper::default_lan(None, &cfg.wan).map_err(|e| anyhow!(e))? } else { cfg.lan.clone() };
    let support = shaper::probe(None).map_err(|e| anyhow!(e))?;
    let (leaf, why) = shaper::choose(cfg.shaper, &support, cfg.overhead, cfg.mpu, cfg.client_netns.is_some()).map_err(|e| anyhow!(e))?;
    if leaf == bloatlab_tune::plan::Leaf::Emulator && lan.is_empty() {
        bail!("the user-space shaper needs the LAN side: no other interface is up; name it with --lan IFACE");
    }
    let dir = tempfile::Builder::new().prefix("bloatlab-tune-").tempdir().context("create a temporary directory")?;
    let exe = self_exe()?;
    let place = Place {
        netns: None,
        wan: cfg.wan.clone(),
        lan,
        state_file: bloatlab_tune::state::path(&cfg.state_dir, None, &cfg.wan),
        exe: exe.clone(),
        run_dir: dir.path().to_path_buf(),
    };
    let mut line = LineShaper::new(place, leaf, why);
    let mut meter = JobMeter::new(exe, cfg.client_netns.clone(), dir.path().to_path_buf());
    let quiet = a.quiet;
    let mut say = |s: &str| {
        if !quiet {
            eprintln!("tune: {s}");
        }
    };
    done(&cfg, driver::tune(&cfg, &mut meter, &mut line, &mut say))
}

/// The end of a tune: its table and files, or the error; a signal's exit
/// code (130, 143) after its message when one ended it.
fn done(cfg: &TuneConfig, r: Result<TuneDoc>) -> Result<i32> {
    match r {
        Ok(doc) => finish(cfg, &doc).map(|_| 0),
        Err(e) if signals::pending() != 0 => {
            eprintln!("bloatlab tune: {e:#}");
            Ok(signals::exit_code(signals::pending()))
        }
        Err(e) => Err(e),
    }
}

/// `bloatlab tune --local`: this host's own queue on `cfg.wan`.
fn run_local(cfg: &TuneConfig, quiet: bool) -> Result<i32> {
    let lb = bloatlab_tune::local::LocalBefore::read(None, &cfg.wan).map_err(|e| anyhow!(e))?;
    let fq_codel = shaper::probe(None).map_err(|e| anyhow!(e))?.fq_codel;
    let dir = tempfile::Builder::new().prefix("bloatlab-tune-").tempdir().context("create a temporary directory")?;
    let mut meter = JobMeter::new(self_exe()?, None, dir.path().to_path_buf());
    let mut say = |s: &str| {
        if !quiet {
            eprintln!("tune: {s}");
        }
    };
    let state = bloatlab_tune::state::path(&cfg.state_dir, None, &cfg.wan);
    done(cfg, driver::tune_local(cfg, &mut meter, &lb, fq_codel, &state, &mut say))
}

/// Print the table and write what was asked for (`--json`, `--write-config`, `--report`).
pub fn finish(cfg: &TuneConfig, doc: &TuneDoc) -> Result<()> {
    print!("{}", bloatlab_report::tune::tune_table(doc));
    if let Some(l) = &doc.local {
        let keep = l.setting.map(|s| l.before.script(&s, l.bql_bytes.unwrap_or(0)));
        match (&keep, doc.kept) {
            (Some(_), true) => println!("kept: {}'s queue stays until reboot or `bloatlab tune --undo {}`", l.before.iface, l.before.iface),
            (Some(k), false) => println!("{}'s queue is back as it was. To keep the setting found:\n{}", l.before.iface, indent(k)),
            (None, _) => {}
        }
        if let Some(f) = &cfg.json {
            write(f, &serde_json::to_string_pretty(doc)?)?;
        }
        match (&cfg.write_config, &keep) {
            (Some(f), Some(k)) => {
                write(f, k)?;
                println!("wrote {} (a shell script: run it at boot, from your network's up hooks)", f.display());
            }
            (Some(_), None) => println!("--write-config: nothing to keep (no setting was found or needed)"),
            _ => {}
        }
        if let Some(d) = &cfg.report {
            let files = bloatlab_report::tune::write_tune_report(doc, d)?;
            println!("report: {}", files.display());
        }
        return Ok(());
    }
    if let Some(p) = &doc.settings {
        if doc.kept {
            println!("kept: the shaper stays until reboot or `bloatlab tune --undo {}`", p.wan);
        } else {
            println!("{} is back as it was. To keep these rates:\n{}", p.wan, indent(&p.script()));
        }
    }
    if let Some(f) = &cfg.json {
        write(f, &serde_json::to_string_pretty(doc)?)?;
    }
    if let (Some(f), Some(p)) = (&cfg.write_config, &doc.settings) {
        write(f, &p.script())?;
        let with = |ext: &str| PathBuf::from(format!("{}.{ext}", f.display()));
        write(&with("sqm"), &p.openwrt_sqm())?;
        let abs = std::fs::canonicalize(f).unwrap_or_else(|_| f.clone());
        write(&with("service"), &p.systemd_unit(&abs.display().to_string()))?;
        println!("wrote {}, {}.sqm (OpenWrt /etc/config/sqm) and {}.service (systemd)", f.display(), f.display(), f.display());
    } else if cfg.write_config.is_some() {
        println!("--write-config: nothing to keep (no direction needed shaping)");
    }
    if let Some(d) = &cfg.report {
        let files = bloatlab_report::tune::write_tune_report(doc, d)?;
        println!("report: {}", files.display());
    }
    Ok(())
}

fn indent(s: &str) -> String {
    s.lines().filter(|l| !l.starts_with("#!")).map(|l| format!("  {l}\n")).collect()
}

fn write(p: &Path, s: &str) -> Result<()> {
    if p == Path::new("-") {
        println!("{s}");
        return Ok(());
    }
    std::fs::write(p, s).with_context(|| format!("cannot write {}", p.display()))
}

fn self_exe() -> Result<PathBuf> {
    let p = PathBuf::from(format!("/proc/{}/exe", std::process::id()));
    if p.exists() {
        Ok(p)
    } else {
        std::env::current_exe().context("cannot find the bloatlab executable")
    }
}

/// Refuse up front an interface that does not exist or does not lead to
/// the server, and a server that is not one of the kind named (a bloatlab
/// server's handshake; an RPM server's configuration and endpoints).
fn check_route(cfg: &TuneConfig) -> Result<()> {
    use bloatlab_model::{TuneTarget, TuneTest};
    use std::net::ToSocketAddrs;
    if !bloatlab_tune::apply::device_exists(None, &cfg.wan) {
        bail!("there is no interface {} here (ip link show)", cfg.wan);
    }
    let target = cfg.server.as_ref().ok_or_else(|| anyhow!("no server"))?;
    let (host, port) = target.address().map_err(|e| anyhow!(e))?;
    let addr = (host.as_str(), port).to_socket_addrs().with_context(|| format!("cannot resolve {host}"))?.next().ok_or_else(|| anyhow!("{host} has no address"))?;
    let out = bloatlab_host::cmd::run(&["ip", "route", "get", &addr.ip().to_string()]).map_err(|e| anyhow!("no route to {}: {e}", addr.ip()))?;
    let dev = out.split_whitespace().skip_while(|w| *w != "dev").nth(1).unwrap_or("");
    if dev != cfg.wan {
        bail!("{} is reached through {dev}, not {}: tune shapes the interface that leads to the server (--wan {dev}?)", addr.ip(), cfg.wan);
    }
    match (target, cfg.verify_test().map_err(|e| anyhow!(e))?) {
        (TuneTarget::Server { .. }, TuneTest::Test(t)) => bloatlab_engine::client::check_server(addr, &t)
            .map_err(|e| anyhow!("{e}; tune needs a bloatlab server (`bloatlab server`) or an RPM server's https:// URL")),
        (_, TuneTest::Rpm(r)) => bloatlab_rpm::client::check(&r).map_err(|e| anyhow!("{} is not an RPM server tune can use: {e}", cfg.server_name())),
        _ => Ok(()),
    }
}
