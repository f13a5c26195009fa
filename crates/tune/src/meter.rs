//! The meter of `bloatlab tune` on a router: each test runs as a
//! `bloatlab job` process (the same typed [`Job`] a lab hands its client;
//! an RPM server's tests as [`Job::Rpm`]),
//! on the router itself or in a LAN host's network namespace
//! (`--client-netns`). A signal to tune reaches the test as SIGINT, so it
//! stops and the tune can put the interface back.
use crate::driver::Meter;
use anyhow::{anyhow, bail, Context, Result};
use bloatlab_host::signals;
use bloatlab_model::{Job, TuneTest};
use bloatlab_results::TestResult;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub struct JobMeter {
    /// The bloatlab binary.
    pub exe: PathBuf,
    pub netns: Option<String>,
    /// Where the jobs, their results and logs go.
    pub dir: PathBuf,
    n: usize,
}

impl JobMeter {
    pub fn new(exe: PathBuf, netns: Option<String>, dir: PathBuf) -> JobMeter {
        JobMeter { exe, netns, dir, n: 0 }
    }
}

impl Meter for JobMeter {
    fn run(&mut self, what: &str, test: &TuneTest) -> Result<TestResult> {
        self.n += 1;
        let n = self.n;
        let json = self.dir.join(format!("test-{n}.json"));
        let job = self.dir.join(format!("test-{n}.job.json"));
        let errf = self.dir.join(format!("test-{n}.stderr"));
        let j = match test {
            TuneTest::Test(t) => Job::Test { config: Box::new(t.clone()), json: json.clone(), quiet: true, progress: None },
            TuneTest::Rpm(r) => Job::Rpm { config: Box::new(r.clone()), json: json.clone() },
        };
        std::fs::write(&job, serde_json::to_vec_pretty(&j)?).with_context(|| format!("cannot write {}", job.display()))?;
        let mut cmd = match &self.netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]).arg(&self.exe);
                c
            }
            None => Command::new(&self.exe),
        };
        cmd.arg("job").arg(&job).stdin(Stdio::null()).stdout(Stdio::null());
        cmd.stderr(std::fs::File::create(&errf)?).process_group(0);
        // a tune killed outright takes its test with it
        bloatlab_host::process::die_with_parent(&mut cmd, bloatlab_host::process::Signal::Int);
        let mut child = cmd.spawn().with_context(|| format!("cannot start the test {what}"))?;
        let mut forwarded: Option<(i32, Instant)> = None;
        let status = loop {
            if let Some(st) = child.try_wait()? {
                break st;
            }
            let sig = signals::pending();
            match forwarded {
                None if sig != 0 => {
                    bloatlab_host::process::signal_child(&child, bloatlab_host::process::Signal::Int);
                    forwarded = Some((sig, Instant::now()));
                }
                Some((_, t)) if t.elapsed() > Duration::from_secs(10) => {
                    let _ = child.kill();
                }
                _ => {}
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        if let Some((sig, _)) = forwarded {
            bail!("interrupted by {} during the test {what}", signals::name(sig));
        }
        let stderr = std::fs::read_to_string(&errf).unwrap_or_default();
        if !json.exists() {
            bail!("the test {what} failed ({status}){}", if stderr.trim().is_empty() { String::new() } else { format!(": {}", stderr.trim()) });
        }
        let r = TestResult::read_file(&json).map_err(|e| anyhow!("{e}"))?;
        if !r.complete {
            bail!("the test {what} ended early: {}", r.incomplete_reason.clone().unwrap_or_else(|| stderr.trim().to_string()));
        }
        Ok(r)
    }
}
