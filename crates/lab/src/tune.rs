//! `bloatlab lab --tune`: `bloatlab tune` on the lab's home router. The
//! home router's `wan0` is the interface tune shapes, its `lan0` the LAN
//! side, the client namespace the LAN host the tests run from; each test
//! runs as any lab test does (queues sampled, the lab section filled), so
//! the results before and after carry the line's own figures.
//!
//! With `--bottleneck local` the bottleneck is the client's own `eth0`
//! (the seeds' txqueuelen case): there is no home router, and `tune
//! --local` tunes the client's own queue.
use crate::lab::Lab;
use crate::run::{ProgressFn, RunOptions};
use anyhow::{anyhow, bail, Result};
use bloatlab_model::{Placement, TuneConfig, TuneTest};
use bloatlab_results::TestResult;
use bloatlab_tune::driver::{self, Meter, Say, TuneDoc};
use bloatlab_tune::shaper::{self, LineShaper, Place};

/// The lab's client as the tune's meter.
struct LabMeter<'a> {
    lab: &'a mut Lab,
    progress: Option<ProgressFn>,
    command: Vec<String>,
}

impl Meter for LabMeter<'_> {
    fn run(&mut self, what: &str, test: &TuneTest) -> Result<TestResult> {
        let TuneTest::Test(test) = test else { bail!("the lab tunes against its own bloatlab server, not an RPM server") };
        let opts = RunOptions { config: Some(test.clone()), progress: self.progress.clone(), command: self.command.clone(), ..Default::default() };
        let out = self.lab.run_test(&opts)?;
        if out.interrupted_by != 0 {
            bail!("interrupted by {} during the test {what}", bloatlab_host::signals::name(out.interrupted_by));
        }
        if let Some(f) = out.failure {
            bail!("the test {what}: {f}");
        }
        Ok(out.result)
    }
}

/// The home router's interfaces, as tune names them.
pub const HOME_WAN: &str = "wan0";
pub const HOME_LAN: &str = "lan0";

impl Lab {
    /// The tune configuration the lab runs: `cfg` with the home router's
    /// interfaces, the lab's server and congestion control, and the state
    /// kept with the lab's files.
    pub fn tune_config(&self, cfg: &TuneConfig) -> Result<TuneConfig> {
        let addr = if self.cfg.ipv6 { &self.server.v6 } else { &self.server.v4 };
        let mut c = cfg.clone();
        if self.cfg.placement == Placement::Local {
            c.wan = "eth0".into();
            c.lan = vec![];
            c.client_netns = None;
            c.local = true;
        } else {
            c.wan = HOME_WAN.into();
            c.lan = vec![HOME_LAN.into()];
            c.client_netns = Some(self.client.netns.clone());
        }
        c.set_server(&if addr.contains(':') { format!("[{addr}]:{}", self.cfg.port) } else { format!("{addr}:{}", self.cfg.port) }).map_err(|e| anyhow!(e))?;
        c.cc = self.cfg.cc.clone();
        c.state_dir = self.run_dir.clone();
        c.check().map_err(|e| anyhow!(e))?;
        Ok(c)
    }

    /// Run `bloatlab tune` on the home router: before, the search, after;
    /// the home router's queues are put back unless `cfg.keep`.
    pub fn tune(&mut self, cfg: &TuneConfig, progress: Option<ProgressFn>, say: Say) -> Result<TuneDoc> {
        if self.cfg.placement == Placement::Local {
            return self.tune_local(cfg, progress, say);
        }
        let home = self.home.clone().ok_or_else(|| anyhow!("this lab has no home router to tune (build it with --tune)"))?;
        let cfg = self.tune_config(cfg)?;
        let support = shaper::probe(Some(&home.netns)).map_err(|e| anyhow!(e))?;
        let (leaf, why) = shaper::choose(cfg.shaper, &support, cfg.overhead, cfg.mpu, true).map_err(|e| anyhow!(e))?;
        let place = Place {
            netns: Some(home.netns.clone()),
            wan: HOME_WAN.into(),
            lan: vec![HOME_LAN.into()],
            state_file: bloatlab_tune::state::path(&cfg.state_dir, Some(&home.netns), HOME_WAN),
            exe: self.exe()?,
            run_dir: self.run_dir.clone(),
        };
        let mut line_shaper = LineShaper::new(place, leaf, why);
        let command = std::env::args().collect();
        let mut meter = LabMeter { lab: self, progress, command };
        driver::tune(&cfg, &mut meter, &mut line_shaper, say)
    }

    /// `--bottleneck local`: `tune --local` on the client's own `eth0`.
    fn tune_local(&mut self, cfg: &TuneConfig, progress: Option<ProgressFn>, say: Say) -> Result<TuneDoc> {
        if crate::lab::backend(&self.cfg).0 != bloatlab_model::Backend::Kernel {
            bail!("--bottleneck local --tune tunes the client's own kernel queue: the lab's link must be the kernel's (--backend kernel)");
        }
        if self.cfg.rate_up.is_none() {
            bail!("--bottleneck local --tune tunes the client's upload queue: give its rate (--rate or --rate-up)");
        }
        let cfg = self.tune_config(cfg)?;
        let ns = self.client.netns.clone();
        let lb = bloatlab_tune::local::LocalBefore::read(Some(&ns), "eth0").map_err(|e| anyhow!(e))?;
        let fq_codel = shaper::probe(Some(&ns)).map_err(|e| anyhow!(e))?.fq_codel;
        let state = bloatlab_tune::state::path(&cfg.state_dir, Some(&ns), "eth0");
        let command = std::env::args().collect();
        let mut meter = LabMeter { lab: self, progress, command };
        driver::tune_local(&cfg, &mut meter, &lb, fq_codel, &state, say)
    }
}
