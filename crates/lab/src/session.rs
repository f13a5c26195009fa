//! Running the lab over a list of configurations: the one mechanism behind
//! `bloatlab lab --queue A,B` (a one-axis sweep), recipes and `bloatlab
//! sweep`. A configuration that differs from the lab already built only in
//! its queues reuses it (the bottleneck is swapped); any other difference
//! builds a fresh lab.
use crate::lab::Lab;
use crate::run::{RunOptions, RunOutcome};
use anyhow::Result;
use bloatlab_model::LabConfig;

/// A lab kept across runs. Dropping the session tears its lab down.
#[derive(Default)]
pub struct Session {
    lab: Option<Lab>,
    /// Keep a lab whose run failed (for `--keep`: the user inspects it).
    keep_failed: bool,
}

impl Session {
    pub fn new() -> Session {
        Session::default()
    }

    /// A session that keeps the lab of a failed run instead of rebuilding.
    pub fn keeping_failed() -> Session {
        Session { lab: None, keep_failed: true }
    }

    /// Make the current lab match `cfg`: swap its bottleneck when only the
    /// queues differ, otherwise tear it down and build anew.
    pub fn prepare(&mut self, cfg: &LabConfig) -> Result<&mut Lab> {
        match self.lab.take() {
            Some(mut lab) if lab.cfg.same_but_queues(cfg) => {
                if lab.cfg != *cfg {
                    lab.cfg = cfg.clone();
                    lab.apply_bottleneck()?;
                }
                self.lab = Some(lab);
            }
            old => {
                if let Some(mut l) = old {
                    l.teardown()?;
                }
                self.lab = Some(Lab::build(cfg)?);
            }
        }
        Ok(self.lab.as_mut().expect("just set"))
    }

    /// Run one test on a lab configured as `cfg`. A run that failed or was
    /// interrupted leaves no lab behind for the next one to trust: it is torn
    /// down, and the next run builds anew.
    pub fn run(&mut self, cfg: &LabConfig, opts: &RunOptions) -> Result<RunOutcome> {
        let out = self.prepare(cfg).and_then(|lab| lab.run_test(opts));
        let healthy = matches!(&out, Ok(o) if o.failure.is_none() && o.interrupted_by == 0);
        if !healthy && !self.keep_failed {
            if let Some(mut l) = self.lab.take() {
                if let Err(e) = l.teardown() {
                    eprintln!("bloatlab lab: {e:#}");
                }
            }
        }
        out
    }

    /// The lab built last, if any.
    pub fn lab(&mut self) -> Option<&mut Lab> {
        self.lab.as_mut()
    }

    /// Tear the lab down now (reporting errors, which dropping cannot).
    pub fn finish(mut self) -> Result<()> {
        match self.lab.take() {
            Some(mut l) => l.teardown(),
            None => Ok(()),
        }
    }
}
