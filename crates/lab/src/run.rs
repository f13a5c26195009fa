//! Running the engine inside the lab: `bloatlab server` in the server and
//! witness namespaces, `bloatlab test` in the client namespace, the queue
//! sampler alongside, and the merge of the lab's section into the result.
use crate::lab::Lab;
use crate::sampler::Sampler;
use crate::signals;
use crate::spec::{parse_duration, Backend, Placement};
use anyhow::{anyhow, bail, Context, Result};
use bloatlab_results::{LabHost, LabInfo, TestResult};
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Options of one test run inside a built lab.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Extra `bloatlab test` arguments (after `--` on the command line).
    pub engine_args: Vec<String>,
    /// Show the engine's own output (default: silent, the lab prints its table).
    pub show_engine_output: bool,
    /// Queue sampling interval; default = the engine's --sample-interval (100 ms).
    pub queue_interval: Option<Duration>,
    /// Lab command line, recorded in the lab config.
    pub command: Vec<String>,
}

/// What a run produced.
pub struct RunOutcome {
    pub result: TestResult,
    /// Signal that interrupted the run (0 = none).
    pub interrupted_by: i32,
    /// Set when the test ended early on its own (exit status 1 with a partial result).
    pub failure: Option<String>,
}

/// `bloatlab test` options the lab passes unless given after `--`: one upload,
/// 18 s (a cubic flow needs ~13-15 s to fill a 1000-packet FIFO at 10 Mbit/s:
/// HyStart leaves slow start early), 2 s idle baseline, and probes every 50 ms
/// (in a packet-limited FIFO every probe takes a slot; at 10 ms to server and
/// witness, probes would be ~20% of a 10 Mbit/s FIFO's packets).
pub const ENGINE_DEFAULTS: [(&str, &str); 4] =
    [("--scenarios", "1u0d"), ("--duration", "18s"), ("--idle", "2s"), ("--probe-interval", "50ms")];

/// Engine args the lab itself provides; the user may not pass them after `--`.
const LAB_OWNED: &[&str] = &["--json", "--witness", "--port"];

fn has_flag(args: &[String], flag: &str) -> bool {
    args.iter().any(|a| a == flag || a.starts_with(&format!("{flag}=")))
}

fn flag_value(args: &[String], flag: &str) -> Option<String> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == flag {
            return it.next().cloned();
        }
        if let Some(v) = a.strip_prefix(&format!("{flag}=")) {
            return Some(v.to_string());
        }
    }
    None
}

/// Validate the pass-through engine args.
pub fn check_engine_args(args: &[String]) -> Result<()> {
    for f in LAB_OWNED {
        if has_flag(args, f) {
            bail!("`{f}` after `--` is set by bloatlab lab itself; use the lab's own option (bloatlab lab --json FILE / --port N)");
        }
    }
    if let Some(first) = args.first() {
        if !first.starts_with('-') {
            bail!("after `--` come `bloatlab test` options (e.g. -- --scenarios 1u1d --duration 5s); the server address `{first}` is chosen by the lab");
        }
    }
    Ok(())
}

impl Lab {
    fn exe(&self) -> Result<PathBuf> {
        match &self.cfg.exe {
            Some(p) => Ok(p.clone()),
            // Our own binary through /proc: the same version as this lab even
            // when the file on disk was replaced (or deleted) meanwhile.
            None => {
                let p = PathBuf::from(format!("/proc/{}/exe", std::process::id()));
                if p.exists() {
                    Ok(p)
                } else {
                    std::env::current_exe().context("cannot find the bloatlab executable to run inside the lab")
                }
            }
        }
    }

    fn addr(&self, h: &crate::lab::Host) -> String {
        if self.cfg.ipv6 {
            format!("[{}]:{}", h.v6, self.cfg.port)
        } else {
            format!("{}:{}", h.v4, self.cfg.port)
        }
    }

    /// Start `bloatlab server` in the server and witness namespaces (once).
    pub fn start_servers(&mut self) -> Result<()> {
        if !self.servers.is_empty() {
            return Ok(());
        }
        let exe = self.exe()?;
        for h in [self.server.clone(), self.witness.clone()] {
            let errf = self.run_dir.join(format!("{}-server.stderr", h.role));
            let err = std::fs::File::create(&errf)?;
            let mut ch = Command::new("ip")
                .args(["netns", "exec", &h.netns])
                .arg(&exe)
                // Only this lab's client can reach these servers: no need for the
                // public-server limits on test length.
                .args(["server", "--port", &self.cfg.port.to_string(), "--max-duration", "86400s"])
                // The witness only gets UDP probes: its control connection stays
                // silent for the whole test, longer than the default 15 s.
                .args(if h.role == "witness" { &["--idle-timeout", "3600s"][..] } else { &[][..] })
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(err)
                .process_group(0)
                .spawn()
                .with_context(|| format!("start bloatlab server in {}", h.netns))?;
            let pid = ch.id();
            self.record_child(pid, &format!("server in {}", h.netns));
            let stdout = ch.stdout.take().unwrap();
            self.servers.push(ch);
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let mut r = BufReader::new(stdout);
                let mut line = String::new();
                let _ = r.read_line(&mut line);
                let _ = tx.send(line);
                // Keep draining so the server never blocks on a full pipe.
                let mut sink = Vec::new();
                let _ = std::io::Read::read_to_end(&mut r, &mut sink);
            });
            let deadline = Instant::now() + Duration::from_secs(15);
            loop {
                if let Ok(line) = rx.recv_timeout(Duration::from_millis(50)) {
                    if line.contains("listening") {
                        break;
                    }
                    let e = std::fs::read_to_string(&errf).unwrap_or_default();
                    bail!("bloatlab server in {} did not start: {}{}", h.netns, line.trim(), e.trim());
                }
                if signals::pending() != 0 {
                    bail!("interrupted by {}", signals::name(signals::pending()));
                }
                if Instant::now() > deadline {
                    let e = std::fs::read_to_string(&errf).unwrap_or_default();
                    bail!("bloatlab server in {} did not report listening within 15 s{}", h.netns,
                        if e.trim().is_empty() { String::new() } else { format!(": {}", e.trim()) });
                }
            }
        }
        Ok(())
    }

    /// Run one `bloatlab test` from the client namespace to the server, with
    /// the witness probed alongside, sampling the queues; returns the result
    /// with its `lab` section filled.
    pub fn run_test(&mut self, opts: &RunOptions) -> Result<RunOutcome> {
        check_engine_args(&opts.engine_args)?;
        if signals::pending() != 0 {
            bail!("interrupted by {}", signals::name(signals::pending()));
        }
        self.start_servers()?;
        let steal_meter = bloatlab_host::StealMeter::start();
        let exe = self.exe()?;
        let n = self.own.rec.children.len();
        let json = self.run_dir.join(format!("result-{n}.json"));
        let _ = std::fs::remove_file(&json);
        let mut args: Vec<String> = vec![
            "test".into(),
            self.addr(&self.server.clone()),
            "--witness".into(),
            self.addr(&self.witness.clone()),
            "--json".into(),
            json.display().to_string(),
        ];
        // `--cc` after `--` wins over the lab's --cc (and is what gets recorded).
        let cc = flag_value(&opts.engine_args, "--cc").unwrap_or_else(|| self.cfg.cc.clone());
        if !has_flag(&opts.engine_args, "--cc") {
            args.push("--cc".into());
            args.push(cc.clone());
        }
        let ea = &opts.engine_args;
        for (f, v) in ENGINE_DEFAULTS {
            if !has_flag(ea, f) {
                args.push(f.into());
                args.push(v.into());
            }
        }
        // Between scenarios the bottleneck must drain: a full 1000-packet FIFO at
        // 10 Mbit/s holds 1.2 s, more than the engine's default 1 s pause.
        if !has_flag(ea, "--pause") {
            let full = [self.cfg.analytic_queue_delay_ms(true), self.cfg.analytic_queue_delay_ms(false)]
                .into_iter()
                .flatten()
                .fold(0.0f64, f64::max);
            let pause_ms = (full * 1.5 + 500.0).clamp(1000.0, 60_000.0).ceil();
            args.push("--pause".into());
            args.push(format!("{pause_ms:.0}ms"));
        }
        if !opts.show_engine_output && !has_flag(ea, "--quiet") {
            args.push("--quiet".into());
        }
        args.extend(ea.iter().cloned());
        let interval = match opts.queue_interval {
            Some(d) => d,
            None => match flag_value(ea, "--sample-interval") {
                Some(v) => parse_duration(&v).map_err(|e| anyhow!("--sample-interval: {e}"))?,
                None => Duration::from_millis(100),
            },
        };
        let errf = self.run_dir.join(format!("client-{n}.stderr"));
        let err = std::fs::File::create(&errf)?;
        let interval = interval.max(Duration::from_millis(5));
        let mut emulator = None;
        if self.cfg.effective_backend() == Backend::Emulator {
            let mut ecfg = self.cfg.emulator_config()?;
            ecfg.sample_interval_ns = interval.as_nanos().max(1_000_000) as u64;
            let stats = self.run_dir.join(format!("emulator-{n}.json"));
            let h = bloatlab_emulator::start_in_netns(&exe, &self.router.netns, &ecfg, &["lan"], &["wan"], &stats)
                .context("starting bloatlab's user-space link emulator in the router namespace")?;
            if let Some(pid) = h.pid() {
                self.record_child(pid, &format!("emulator in {}", self.router.netns));
            }
            emulator = Some((h, ecfg));
        }
        let sampler = Sampler::start(self.queue_targets(), interval);
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.client.netns]).arg(&exe).args(&args).stdin(Stdio::null());
        if opts.show_engine_output {
            cmd.stdout(Stdio::inherit());
        } else {
            cmd.stdout(Stdio::null());
        }
        let mut child = cmd.stderr(err).process_group(0).spawn().context("start bloatlab test in the client namespace")?;
        self.record_child(child.id(), &format!("test in {}", self.client.netns));
        let mut forwarded: Option<(i32, Instant)> = None;
        let status = loop {
            if let Some(st) = child.try_wait()? {
                break st;
            }
            let sig = signals::pending();
            match forwarded {
                None if sig != 0 => {
                    // Ask the client to stop and write what it has.
                    // SAFETY: signalling our own child.
                    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
                    forwarded = Some((sig, Instant::now()));
                }
                Some((_, t)) if t.elapsed() > Duration::from_secs(10) => {
                    let _ = child.kill();
                }
                _ => {}
            }
            // A server that died mid-run is an error worth naming.
            for (i, s) in self.servers.iter_mut().enumerate() {
                if let Ok(Some(st)) = s.try_wait() {
                    let _ = child.kill();
                    let _ = child.wait();
                    let role = if i == 0 { "server" } else { "witness" };
                    bail!("the bloatlab server in the {role} namespace exited during the test ({st})");
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let stderr = std::fs::read_to_string(&errf).unwrap_or_default();
        let code = status.code().unwrap_or(-1);
        let interrupted_by = forwarded.map(|f| f.0).unwrap_or(0);
        if !json.exists() {
            drop(sampler);
            if interrupted_by != 0 {
                bail!("interrupted by {} before the test produced a result", signals::name(interrupted_by));
            }
            bail!(
                "bloatlab test in the client namespace failed ({status}) without a result{}",
                if stderr.trim().is_empty() { String::new() } else { format!(": {}", stderr.trim()) }
            );
        }
        let mut result = TestResult::read_file(&json).map_err(|e| anyhow!("{e}"))?;
        // The engine ran as /proc/<pid>/exe (our own binary); record its real path.
        if let (Some(c0), Ok(real)) = (result.metadata.command.first_mut(), std::env::current_exe()) {
            if c0.starts_with("/proc/") && self.cfg.exe.is_none() {
                *c0 = real.display().to_string().trim_end_matches(" (deleted)").to_string();
            }
        }
        if code != 0 && code != 130 && result.complete {
            bail!("bloatlab test exited with {status}: {}", stderr.trim());
        }
        let failure = (code != 0 && !result.complete && interrupted_by == 0 && code != 130).then(|| {
            format!(
                "bloatlab test ended early ({status}): {}",
                result.incomplete_reason.clone().unwrap_or_else(|| stderr.trim().to_string())
            )
        });
        let (mut queues, sampler_method) = sampler.finish(result.metadata.start_unix_ns);
        let mut emu_info = None;
        if let Some((h, ecfg)) = emulator {
            let mut st = h.stop().context("stopping the emulator")?;
            st.rebase(result.metadata.start_unix_ns);
            let mut q = st.queues;
            q.append(&mut queues);
            queues = q;
            emu_info = Some((st.counters, ecfg));
        }
        let mut info = self.lab_info(queues, opts);
        info.config["cc"] = cc.clone().into();
        // A virtual machine whose CPU the hypervisor takes away stops its
        // emulated links too: record how much, and warn when it matters.
        let steal = steal_meter.pct();
        info.config["cpu_steal_pct"] = ((steal * 10.0).round() / 10.0).into();
        if steal > 2.0 {
            eprintln!(
                "warning: the hypervisor took {steal:.1}% of this machine's CPU during the run; \
                 the lab's emulated rates and delays are off by about that much (cpu_steal_pct in the result)"
            );
        }
        info.config["queue_sampler"] = serde_json::json!({
            "method": sampler_method,
            "interval_ms": interval.as_secs_f64() * 1e3,
        });
        if let Some((counters, ecfg)) = emu_info {
            info.backend = "emulator".into();
            info.config["backend"] = "emulator".into();
            info.config["emulator"] = serde_json::json!({
                "config": ecfg,
                "describe": ecfg.describe(),
            });
            info.emulator = Some(counters);
        }
        result.lab = Some(info);
        Ok(RunOutcome { result, interrupted_by, failure })
    }

    /// The `lab` section of a result.
    pub fn lab_info(&self, queues: Vec<bloatlab_results::QueueSeries>, opts: &RunOptions) -> LabInfo {
        let c = &self.cfg;
        let (up, down) = self.bottleneck_devices();
        let config = serde_json::json!({
            "id": self.id,
            "backend": "kernel",
            "placement": c.placement,
            "rate_up_bps": c.rate_desc(true).1,
            "rate_down_bps": c.rate_desc(false).1,
            "rate_up": c.rate_desc(true).0,
            "rate_down": c.rate_desc(false).0,
            "trace_up": c.trace_up,
            "trace_down": c.trace_down,
            "queue": c.queue_label(),
            "queue_spec": if c.qdisc.is_some() { serde_json::Value::Null } else { serde_json::to_value(&c.queue).unwrap_or_default() },
            "queue_up": if c.qdisc.is_some() { None } else { Some(c.queue_of(true).label()) },
            "queue_down": if c.qdisc.is_some() { None } else { Some(c.queue_of(false).label()) },
            "queue_up_spec": if c.qdisc.is_some() { serde_json::Value::Null } else { serde_json::to_value(c.queue_of(true)).unwrap_or_default() },
            "queue_down_spec": if c.qdisc.is_some() { serde_json::Value::Null } else { serde_json::to_value(c.queue_of(false)).unwrap_or_default() },
            "qdisc": c.qdisc,
            "shaper": c.shaper,
            "txqueuelen": match (c.txqueuelen, c.queues(), &c.qdisc) {
                (Some(t), _, _) => Some(t),
                (None, [crate::spec::QueueSpec::Fifo { packets: u }, crate::spec::QueueSpec::Fifo { packets: d }], None) if u == d => Some(*u),
                _ => None,
            },
            "bottleneck_up": up.map(|(n, d)| format!("{n}/{d}")),
            "bottleneck_down": down.map(|(n, d)| format!("{n}/{d}")),
            "offloads": c.offloads.to_string(),
            "cc": c.cc,
            "tcp_mem_max": c.tcp_mem_max,
            "ecn": c.ecn.map(|e| e.to_string()),
            "delay_ms": c.delay.map(|d| d.as_secs_f64() * 1e3),
            "jitter_ms": c.jitter.map(|d| d.as_secs_f64() * 1e3),
            "loss": c.loss,
            "ip_version": if c.ipv6 { 6 } else { 4 },
            "port": c.port,
            "engine_args": opts.engine_args,
            "lab_command": opts.command,
            "applied": self.applied,
            "tsq_note": if c.placement == Placement::Local {
                "local bottleneck: TCP small queues (TSQ) limits the bytes each socket keeps in its own host's qdisc to a few packets (about 1 ms at the pacing rate, at least two packets), so a single TCP flow cannot fill a local queue on Linux >= 3.6"
            } else { "" },
        });
        LabInfo {
            backend: "kernel".into(),
            config,
            kernel: self.kernel.clone(),
            qdiscs_available: self.support.available.clone(),
            qdiscs_missing: self.support.missing.clone(),
            offloads: c.offloads.to_string(),
            hosts: self
                .hosts()
                .iter()
                .map(|h| LabHost { role: h.role.into(), netns: h.netns.clone(), addresses: h.addresses() })
                .collect(),
            queues,
            emulator: None,
            analytic_queue_delay_up_ms: c.analytic_queue_delay_ms(true),
            analytic_queue_delay_down_ms: c.analytic_queue_delay_ms(false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn engine_args() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert!(check_engine_args(&s(&["--scenarios", "1u1d"])).is_ok());
        assert!(check_engine_args(&s(&["--json", "x"])).is_err());
        assert!(check_engine_args(&s(&["--witness=1.2.3.4"])).is_err());
        assert!(check_engine_args(&s(&["10.0.0.1"])).is_err());
        assert!(check_engine_args(&s(&["--cc", "bbr"])).is_ok());
        assert_eq!(flag_value(&s(&["--sample-interval", "50ms"]), "--sample-interval").as_deref(), Some("50ms"));
        assert_eq!(flag_value(&s(&["--sample-interval=20ms"]), "--sample-interval").as_deref(), Some("20ms"));
        assert!(has_flag(&s(&["--duration=5s"]), "--duration"));
    }
}
