//! Running the engine inside the lab: `bloatlab server` in the server and
//! witness namespaces, `bloatlab test` in the client namespace, the queue
//! sampler alongside, and the merge of the lab's section into the result.
use crate::lab::Lab;
use crate::sampler::Sampler;
use bloatlab_host::signals;
use anyhow::{anyhow, bail, Context, Result};
use bloatlab_model::{Backend, Job, Placement, QueueSpec, ServerConfig, TestConfig, TestOverrides};
use bloatlab_results::{EmulatorRecord, LabHost, LabInfo, LabRecord, QueueSampler, TestResult};
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What a lab run is doing: the test's live status and the bottleneck's backlog.
#[derive(Debug, Clone)]
pub struct LabProgress {
    pub live: bloatlab_model::config::Live,
    /// The largest bottleneck queue backlog in the newest kernel sample
    /// (None with the emulator, whose queues are read at the end).
    pub backlog_packets: Option<u64>,
    /// The least length of each phase, s (the idle phase first when it
    /// runs; a loaded phase may run on until latency settles).
    pub planned_s: Vec<f64>,
}

/// A progress display, called a few times a second during a run.
#[derive(Clone)]
pub struct ProgressFn(pub std::sync::Arc<dyn Fn(&LabProgress) + Send + Sync>);

impl std::fmt::Debug for ProgressFn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProgressFn")
    }
}

/// Options of one test run inside a built lab.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// The user's `bloatlab test` options on top of [`LabConfig::test_defaults`](bloatlab_model::LabConfig::test_defaults).
    pub test: TestOverrides,
    /// The `bloatlab test` options as the user wrote them (after `--`), for the record.
    pub engine_args: Vec<String>,
    /// Show the engine's own output (default: silent, the lab prints its table).
    pub show_engine_output: bool,
    /// Lab command line, recorded in the lab config.
    pub command: Vec<String>,
    /// Called with the run's progress a few times a second.
    pub progress: Option<ProgressFn>,
    /// Run exactly this test instead of [`LabConfig::test_defaults`](bloatlab_model::LabConfig::test_defaults) with `test`
    /// over them (`bloatlab lab --tune`'s tests); its server becomes the
    /// lab's server.
    pub config: Option<TestConfig>,
}

/// What a run produced.
pub struct RunOutcome {
    pub result: TestResult,
    /// Signal that interrupted the run (0 = none).
    pub interrupted_by: i32,
    /// Set when the test ended early on its own (exit status 1 with a partial result).
    pub failure: Option<String>,
}

/// Each phase's queue statistics, computed once where the lab's queue
/// series meet the result's phases (`metrics::queue::phase_queues`).
pub fn phase_queues(result: &mut TestResult, lab: &LabInfo) {
    bloatlab_metrics::queue::phase_queues(result, lab);
}

/// Check the user's options against a lab before it is built (the hosts'
/// addresses stand in by role).
pub fn check_test_options(cfg: &bloatlab_model::LabConfig, user: &TestOverrides) -> Result<TestConfig> {
    let addr_of = |r: &str| ROLES.iter().position(|x| *x == r).map(|i| if cfg.ipv6 { format!("fd00::{}", i + 1) } else { format!("192.0.2.{}", i + 1) });
    lab_test_config(cfg, user, &addr_of, vec![])
}

/// The lab's hosts by role, as `--ping`, `--witness` and the server may name them.
pub const ROLES: [&str; 4] = ["client", "router", "server", "witness"];

/// The test a lab runs: [`LabConfig::test_defaults`](bloatlab_model::LabConfig::test_defaults), the user's options over
/// them, and the lab's hosts where the options name a role (`--ping
/// router`, `--witness server`); `addr_of` gives a role's address. Checked.
pub fn lab_test_config(
    cfg: &bloatlab_model::LabConfig,
    user: &TestOverrides,
    addr_of: &dyn Fn(&str) -> Option<String>,
    command: Vec<String>,
) -> Result<TestConfig> {
    let mut test = cfg.test_defaults();
    user.apply(&mut test).map_err(|e| anyhow!("after `--`: {e}"))?;
    let with_port = |a: String| if a.contains(':') { format!("[{a}]:{}", cfg.port) } else { format!("{a}:{}", cfg.port) };
    let role = |r: &str| addr_of(r).ok_or_else(|| anyhow!("the lab has no {r} host"));
    test.server = with_port(role("server")?);
    if let Some(w) = test.witness.clone() {
        test.witness = match w.as_str() {
            // the hosts that run a bloatlab server
            "witness" | "server" => Some(with_port(role(&w)?)),
            "router" | "client" => bail!("after `--`: --witness {w}: no bloatlab server runs on the lab's {w}; a lab's witness is `witness` (the default) or `server`"),
            _ => Some(w),
        };
    }
    for p in &mut test.pings {
        if ROLES.contains(&p.host.as_str()) {
            p.host = role(&p.host)?;
        }
    }
    test.command = command;
    test.validate().map_err(|e| anyhow!("after `--`: {e}"))?;
    Ok(test)
}

/// Write a [`Job`] for a child process as JSON.
fn write_job(path: &Path, job: &Job) -> Result<()> {
    std::fs::write(path, serde_json::to_vec_pretty(job)?).with_context(|| format!("cannot write {}", path.display()))
}

impl Lab {
    pub(crate) fn exe(&self) -> Result<PathBuf> {
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

    /// Start `bloatlab server` in the server and witness namespaces (once).
    pub fn start_servers(&mut self) -> Result<()> {
        if !self.servers.is_empty() {
            return Ok(());
        }
        let exe = self.exe()?;
        for h in [self.server.clone(), self.witness.clone()] {
            let errf = self.run_dir.join(format!("{}-server.stderr", h.role));
            let err = std::fs::File::create(&errf)?;
            // Only this lab's client can reach these servers: no need for the
            // public-server limits on test length. The witness only gets UDP
            // probes: its control connection stays silent for the whole test,
            // longer than the default 15 s.
            let config = ServerConfig {
                binds: vec![std::net::SocketAddr::from(([0u16; 8], self.cfg.port))],
                max_duration: Duration::from_secs(86_400),
                idle_timeout: if h.role == "witness" { Duration::from_secs(3600) } else { ServerConfig::default().idle_timeout },
                // The lab's own hosts: results record both ends' kernels.
                disclose_host: true,
                max_tests_per_source: ServerConfig::default().max_tests,
                // The IETF responsiveness endpoints too, so `bloatlab rpm`
                // and networkQuality clients can be run through the lab's
                // link (self-signed: clients use --insecure).
                rpm: Some(bloatlab_model::RpmServe {
                    port: bloatlab_model::DEFAULT_RPM_PORT,
                    public_name: None,
                    tls: bloatlab_model::RpmTls::SelfSigned { names: vec!["localhost".into()] },
                }),
                // and the browser test, for a browser in the client namespace
                web: (h.role == "server").then(|| bloatlab_model::WebServe { port: bloatlab_model::DEFAULT_WEB_PORT, results: None }),
                ..Default::default()
            };
            let job = self.run_dir.join(format!("{}-server.job.json", h.role));
            write_job(&job, &Job::Server { config })?;
            let mut ch = Command::new("ip")
                .args(["netns", "exec", &h.netns])
                .arg(&exe)
                .arg("job")
                .arg(&job)
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
            // what it says (its addresses, its RPM certificate's SHA-256)
            // goes to the logs, {role}-server.stdout
            let mut log = std::fs::File::create(self.run_dir.join(format!("{}-server.stdout", h.role)))?;
            std::thread::spawn(move || {
                let mut r = BufReader::new(stdout);
                let mut line = String::new();
                let _ = r.read_line(&mut line);
                let _ = std::io::Write::write_all(&mut log, line.as_bytes());
                let _ = tx.send(line);
                // Keep draining so the server never blocks on a full pipe.
                let _ = std::io::copy(&mut r, &mut log);
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
        if signals::pending() != 0 {
            bail!("interrupted by {}", signals::name(signals::pending()));
        }
        let hosts = [&self.client, &self.router, &self.server, &self.witness];
        let addr_of = |role: &str| hosts.iter().find(|h| h.role == role).map(|h| if self.cfg.ipv6 { h.v6.clone() } else { h.v4.clone() });
        let test = match &opts.config {
            Some(c) => {
                let mut t = c.clone();
                let a = addr_of("server").expect("a lab has a server");
                t.server = if a.contains(':') { format!("[{a}]:{}", self.cfg.port) } else { format!("{a}:{}", self.cfg.port) };
                t.validate().map_err(|e| anyhow!(e))?;
                t
            }
            None => lab_test_config(&self.cfg, &opts.test, &addr_of, opts.command.clone())?,
        };
        // each phase's least length, for the progress bar
        let planned_s: Vec<f64> = (!test.idle.is_zero())
            .then(|| test.idle.as_secs_f64())
            .into_iter()
            .chain((0..test.scenarios.len()).map(|i| test.phase_length_of(i).min.as_secs_f64()))
            .collect();
        self.start_servers()?;
        let steal_meter = bloatlab_host::StealMeter::start();
        let exe = self.exe()?;
        let n = self.own.rec.children.len();
        let json = self.run_dir.join(format!("result-{n}.json"));
        let _ = std::fs::remove_file(&json);
        let cc = test.cc.clone();
        let interval = self.cfg.queue_interval.unwrap_or(test.sample_interval);
        let job = self.run_dir.join(format!("test-{n}.job.json"));
        let progress = self.run_dir.join(format!("test-{n}.live.json"));
        write_job(&job, &Job::Test { config: Box::new(test), json: json.clone(), quiet: !opts.show_engine_output, progress: Some(progress.clone()) })?;
        let errf = self.run_dir.join(format!("client-{n}.stderr"));
        let err = std::fs::File::create(&errf)?;
        let interval = interval.max(Duration::from_millis(5));
        let mut emulator = None;
        if crate::lab::backend(&self.cfg).0 == Backend::Emulator {
            let mut ecfg = crate::lab::emulator_config(&self.cfg)?;
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
        cmd.args(["netns", "exec", &self.client.netns]).arg(&exe).arg("job").arg(&job).stdin(Stdio::null());
        if opts.show_engine_output {
            cmd.stdout(Stdio::inherit());
        } else {
            cmd.stdout(Stdio::null());
        }
        let mut child = cmd.stderr(err).process_group(0).spawn().context("start bloatlab test in the client namespace")?;
        self.record_child(child.id(), &format!("test in {}", self.client.netns));
        let mut forwarded: Option<(i32, Instant)> = None;
        let mut shown = Instant::now();
        let status = loop {
            if let Some(st) = child.try_wait()? {
                break st;
            }
            if let Some(show) = &opts.progress {
                if shown.elapsed() >= Duration::from_millis(200) {
                    shown = Instant::now();
                    let live = std::fs::read(&progress).ok().and_then(|b| serde_json::from_slice::<bloatlab_model::config::Live>(&b).ok());
                    if let Some(live) = live {
                        (show.0)(&LabProgress { live, backlog_packets: sampler.backlog_packets(), planned_s: planned_s.clone() });
                    }
                }
            }
            let sig = signals::pending();
            match forwarded {
                None if sig != 0 => {
                    // Ask the client to stop and write what it has.
                    bloatlab_host::process::signal_child(&child, bloatlab_host::process::Signal::Int);
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
        info.config.cc = cc.clone();
        // A virtual machine whose CPU the hypervisor takes away stops its
        // emulated links too: record how much, and warn when it matters.
        let steal = steal_meter.pct();
        info.config.cpu_steal_pct = Some((steal * 10.0).round() / 10.0);
        if steal > 2.0 {
            eprintln!(
                "warning: the hypervisor took {steal:.1}% of this machine's CPU during the run; \
                 the lab's emulated rates and delays are off by about that much (cpu_steal_pct in the result)"
            );
        }
        info.config.queue_sampler = Some(QueueSampler { method: sampler_method.to_string(), interval_ms: interval.as_secs_f64() * 1e3 });
        if let Some((counters, ecfg)) = emu_info {
            info.backend = "emulator".into();
            info.config.backend = "emulator".into();
            info.config.emulator = Some(EmulatorRecord { config: serde_json::to_value(&ecfg)?, describe: ecfg.describe() });
            info.emulator = Some(counters);
        }
        phase_queues(&mut result, &info);
        result.lab = Some(info);
        // the lab's link rates cap the grade by the goodput the load lost
        bloatlab_metrics::grade::record(&mut result);
        Ok(RunOutcome { result, interrupted_by, failure })
    }

    /// Start the emulator of a lab that is kept (`--keep`, `--no-run`) with
    /// the emulator backend: it outlives this process, is recorded as one of
    /// the lab's children (`lab list` shows it, `cleanup` stops it).
    pub fn start_kept_emulator(&mut self) -> Result<()> {
        if crate::lab::backend(&self.cfg).0 != Backend::Emulator {
            return Ok(());
        }
        let ecfg = crate::lab::emulator_config(&self.cfg)?;
        let stats = self.run_dir.join("emulator-kept.json");
        let mut o = bloatlab_emulator::StartOptions::new(&self.exe()?, &self.router.netns, &ecfg, &["lan"], &["wan"], &stats);
        o.die_with_parent = false;
        let h = bloatlab_emulator::start_with(o).context("starting the kept lab's emulator in the router namespace")?;
        if let Some(pid) = h.detach() {
            self.record_child(pid, &format!("emulator in {} (kept: {})", self.router.netns, ecfg.describe()));
        }
        Ok(())
    }

    /// The `lab` section of a result.
    pub fn lab_info(&self, queues: Vec<bloatlab_results::QueueSeries>, opts: &RunOptions) -> LabInfo {
        let c = &self.cfg;
        let kq = c.kernel_qdisc().is_some();
        let (up, down) = self.bottleneck_devices();
        let spec = |q: &QueueSpec| (!kq).then(|| q.clone());
        let config = LabRecord {
            id: self.id.clone(),
            backend: "kernel".into(),
            placement: c.placement.to_string(),
            rate_up_bps: c.rate_desc(true).1,
            rate_down_bps: c.rate_desc(false).1,
            rate_up: c.rate_desc(true).0,
            rate_down: c.rate_desc(false).0,
            trace_up: c.trace_up.clone(),
            trace_down: c.trace_down.clone(),
            queue: c.queue_label(),
            queue_spec: spec(&c.queue),
            queue_up: (!kq).then(|| c.queue_of(true).label()),
            queue_down: (!kq).then(|| c.queue_of(false).label()),
            queue_up_spec: spec(c.queue_of(true)),
            queue_down_spec: spec(c.queue_of(false)),
            qdisc: c.kernel_qdisc().map(|q| q.label()),
            shaper: c.shaper.to_string(),
            txqueuelen: match (c.txqueuelen, c.queues()) {
                (Some(t), _) => Some(t),
                (None, [QueueSpec::Fifo { packets: u }, QueueSpec::Fifo { packets: d }]) if u == d => Some(*u),
                _ => None,
            },
            bottleneck_up: up.map(|(n, d)| format!("{n}/{d}")),
            bottleneck_down: down.map(|(n, d)| format!("{n}/{d}")),
            offloads: c.offloads.to_string(),
            cc: c.cc.clone(),
            tcp_mem_max: c.tcp_mem_max,
            ecn: c.ecn.map(|e| e.to_string()),
            delay_ms: c.delay.map(|d| d.as_secs_f64() * 1e3),
            jitter_ms: c.jitter.as_ref().map(|j| j.amount_ns as f64 / 1e6),
            loss: c.loss.as_ref().map(|l| l.mean_loss()),
            loss_model: c.loss.as_ref().map(|l| l.describe()),
            jitter_model: c.jitter.as_ref().map(|j| j.spec()),
            ip_version: if c.ipv6 { 6 } else { 4 },
            port: c.port,
            engine_args: opts.engine_args.clone(),
            lab_command: opts.command.clone(),
            applied: self.applied.clone(),
            tsq_note: if c.placement == Placement::Local {
                "local bottleneck: TCP small queues (TSQ) limits the bytes each socket keeps in its own host's qdisc to a few packets (about 1 ms at the pacing rate, at least two packets), so a single TCP flow cannot fill a local queue on Linux >= 3.6"
            } else {
                ""
            }
            .into(),
            ..Default::default()
        };
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

