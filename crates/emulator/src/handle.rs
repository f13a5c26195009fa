//! The lab's side: start the emulator as a child process inside the router's
//! namespace and stop it again, collecting its statistics.
//!
//! ```no_run
//! # use bloatlab_emulator::*;
//! # fn main() -> anyhow::Result<()> {
//! let cfg = EmulatorConfig::default();
//! let exe = std::env::current_exe()?; // a binary with the `emulate` subcommand
//! let h = start_in_netns(&exe, "blab-1a2b-router", &cfg, &["r-cli"], &["r-srv"], std::path::Path::new("/tmp/emu.json"))?;
//! // ... run the test ...
//! let stats = h.stop()?;
//! println!("{}", stats.counters["up"]["queue"]["dropped"]);
//! # Ok(()) }
//! ```

use crate::config::EmulatorConfig;
use crate::run::RunSpec;
use anyhow::{anyhow, bail, Context, Result};
use bloatlab_results::QueueSeries;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What the emulator reports when stopped.
#[derive(Debug, Clone)]
pub struct EmulatorStats {
    /// The full statistics document (see docs/emulator.md), for `LabInfo.emulator`.
    /// Its `queues` field is removed (it is in `queues` below).
    pub counters: serde_json::Value,
    /// One series per direction ("bottleneck-up", "bottleneck-down"). Their
    /// `t_ns` are **Unix nanoseconds**: convert with
    /// `t_ns = unix_ns - result.metadata.start_unix_ns` (see [`EmulatorStats::rebase`]).
    pub queues: Vec<QueueSeries>,
}

impl EmulatorStats {
    /// Convert the queue samples' Unix-ns stamps to a result's test clock
    /// (`start_unix_ns` = `metadata.start_unix_ns`); samples before the test start are dropped.
    pub fn rebase(&mut self, start_unix_ns: u64) {
        for q in &mut self.queues {
            q.samples.retain(|s| s.t_ns >= start_unix_ns);
            for s in &mut q.samples {
                s.t_ns -= start_unix_ns;
            }
        }
    }
}

/// A running emulator process. Dropping the handle stops the process (without reading stats).
#[derive(Debug)]
pub struct EmulatorHandle {
    child: Option<Child>,
    stats_path: PathBuf,
    log_path: PathBuf,
    /// The "ready" line the emulator printed (tun names, MTU, seed, ...).
    pub ready: serde_json::Value,
}

/// Options for [`start_with`].
#[derive(Debug, Clone)]
pub struct StartOptions {
    /// Executable that understands `emulate --spec FILE` (the `bloatlab` binary).
    pub exe: PathBuf,
    /// What the emulator process does; `spec.netns` is the router's namespace
    /// and `spec.stats_path` where it writes its statistics at exit
    /// (`<stats>.log` gets its stderr, `<stats>.spec.json` the spec).
    pub spec: RunSpec,
    /// How long to wait for the emulator to come up.
    pub ready_timeout: Duration,
    /// Stop the emulator when the process that started it dies (a lab run);
    /// false for a kept lab's emulator, which outlives `bloatlab lab` (in its
    /// own process group) until `bloatlab lab cleanup` stops it.
    pub die_with_parent: bool,
}

impl StartOptions {
    pub fn new(exe: &Path, netns: &str, cfg: &EmulatorConfig, client_side_ifs: &[&str], server_side_ifs: &[&str], stats_path: &Path) -> StartOptions {
        StartOptions {
            exe: exe.to_path_buf(),
            spec: RunSpec {
                netns: Some(netns.to_string()),
                client_side_ifs: client_side_ifs.iter().map(|s| s.to_string()).collect(),
                server_side_ifs: server_side_ifs.iter().map(|s| s.to_string()).collect(),
                tun_up: "emu-up".into(),
                tun_down: "emu-down".into(),
                table_up: 7701,
                table_down: 7702,
                cfg: cfg.clone(),
                stats_path: Some(stats_path.to_path_buf()),
                duration: None,
                verbose: false,
            },
            ready_timeout: Duration::from_secs(10),
            die_with_parent: true,
        }
    }
}

fn with_suffix(p: &Path, suffix: &str) -> PathBuf {
    let mut s = p.as_os_str().to_os_string();
    s.push(suffix);
    PathBuf::from(s)
}

/// Start the emulator in `netns` between the client-side and server-side
/// interfaces of the router. Returns once the TUN devices and routes are in
/// place and packets flow through the emulator.
pub fn start_in_netns(
    exe: &Path,
    netns: &str,
    cfg: &EmulatorConfig,
    client_side_ifs: &[&str],
    server_side_ifs: &[&str],
    stats_path: &Path,
) -> Result<EmulatorHandle> {
    start_with(StartOptions::new(exe, netns, cfg, client_side_ifs, server_side_ifs, stats_path))
}

/// [`start_in_netns`] with all options: the child gets the [`RunSpec`] as a
/// JSON file, never an argument list.
pub fn start_with(o: StartOptions) -> Result<EmulatorHandle> {
    o.spec.cfg.validate().map_err(|e| anyhow!("invalid emulator configuration: {e}"))?;
    let stats_path = o.spec.stats_path.clone().ok_or_else(|| anyhow!("the emulator needs a statistics file"))?;
    let spec_path = with_suffix(&stats_path, ".spec.json");
    let log_path = with_suffix(&stats_path, ".log");
    std::fs::write(&spec_path, serde_json::to_vec_pretty(&o.spec)?).with_context(|| format!("cannot write {}", spec_path.display()))?;
    let _ = std::fs::remove_file(&stats_path);
    let log = std::fs::File::create(&log_path).with_context(|| format!("cannot create {}", log_path.display()))?;
    let mut cmd = Command::new(&o.exe);
    cmd.arg("emulate").arg("--spec").arg(&spec_path);
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::from(log));
    if o.die_with_parent {
        // die with the lab: SIGTERM when the parent (thread) goes away
        bloatlab_host::process::die_with_parent(&mut cmd, bloatlab_host::process::Signal::Term);
    } else {
        cmd.process_group(0);
    }
    let mut child = cmd.spawn().with_context(|| format!("cannot start the emulator ({})", o.exe.display()))?;
    let stdout = child.stdout.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let r = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(r.map(|_| line));
    });
    let log_tail = |p: &Path| std::fs::read_to_string(p).unwrap_or_default().trim().to_string();
    let deadline = Instant::now() + o.ready_timeout;
    let line = loop {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(Ok(l)) if !l.trim().is_empty() => break l,
            Ok(_) => {
                let _ = child.wait();
                bail!("the emulator exited before it was ready: {}", log_tail(&log_path));
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                if let Ok(Some(st)) = child.try_wait() {
                    bail!("the emulator exited ({st}) before it was ready: {}", log_tail(&log_path));
                }
                if Instant::now() >= deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    bail!("the emulator did not become ready within {:?}: {}", o.ready_timeout, log_tail(&log_path));
                }
            }
            Err(_) => {
                let _ = child.wait();
                bail!("the emulator exited before it was ready: {}", log_tail(&log_path));
            }
        }
    };
    let ready: serde_json::Value = serde_json::from_str(line.trim()).with_context(|| format!("unexpected output from the emulator: {line}"))?;
    Ok(EmulatorHandle { child: Some(child), stats_path, log_path, ready })
}

impl EmulatorHandle {
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// Let the emulator run on without this handle (a kept lab's link):
    /// returns its pid; dropping the handle then no longer stops it.
    pub fn detach(mut self) -> Option<u32> {
        self.child.take().map(|c| c.id())
    }

    /// True while the emulator process runs.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }

    fn terminate(&mut self) -> Result<std::process::ExitStatus> {
        let mut child = self.child.take().ok_or_else(|| anyhow!("emulator already stopped"))?;
        if let Ok(Some(st)) = child.try_wait() {
            return Ok(st);
        }
        bloatlab_host::process::signal_child(&child, bloatlab_host::process::Signal::Term);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(st) = child.try_wait()? {
                return Ok(st);
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let st = child.wait()?;
                bail!("the emulator did not stop within 10 s of SIGTERM and was killed ({st})");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Stop the emulator (SIGTERM), wait for it, and read its statistics.
    pub fn stop(mut self) -> Result<EmulatorStats> {
        let st = self.terminate()?;
        let text = std::fs::read_to_string(&self.stats_path).map_err(|e| {
            let log = std::fs::read_to_string(&self.log_path).unwrap_or_default();
            anyhow!("the emulator ({st}) left no statistics in {}: {e}; its log: {}", self.stats_path.display(), log.trim())
        })?;
        let mut counters: serde_json::Value = serde_json::from_str(&text).with_context(|| format!("bad statistics file {}", self.stats_path.display()))?;
        let queues: Vec<QueueSeries> = match counters.as_object_mut().and_then(|o| o.remove("queues")) {
            Some(q) => serde_json::from_value(q).context("bad queue series in the emulator statistics")?,
            None => vec![],
        };
        Ok(EmulatorStats { counters, queues })
    }
}

impl Drop for EmulatorHandle {
    fn drop(&mut self) {
        if self.child.is_some() {
            let _ = self.terminate();
        }
    }
}
