//! The hidden `bloatlab job FILE`: what a lab runs inside its namespaces
//! (a typed [`Job`], never an argument list).
use super::server::serve;
use super::test::{run_test, Render, TextOptions};
use anyhow::{anyhow, Context, Result};
use bloatlab_model::Job;
use std::path::Path;

/// `bloatlab job FILE`: run the [`Job`] a lab wrote for this process.
pub fn run_job(file: &Path, table: &Render) -> Result<i32> {
    let text = std::fs::read_to_string(file).with_context(|| format!("cannot read job {}", file.display()))?;
    let job: Job = serde_json::from_str(&text).with_context(|| format!("{} is not a bloatlab job", file.display()))?;
    match job {
        Job::Server { config } => {
            config.validate().map_err(|e| anyhow!(e))?;
            serve(config)
        }
        Job::Test { config, json, quiet, progress } => {
            let path = json.to_str().ok_or_else(|| anyhow!("job result path is not UTF-8"))?;
            run_test(&config, Some(path), &TextOptions { quiet, progress, ..Default::default() }, table).map(|(code, _)| code)
        }
        Job::Rpm { config, json } => run_rpm(&config, &json),
    }
}

/// An RPM job: the method's stages, stopped by a signal (SIGINT, SIGTERM);
/// its result written as a test result.
fn run_rpm(cfg: &bloatlab_model::RpmConfig, json: &Path) -> Result<i32> {
    use std::sync::atomic::{AtomicBool, Ordering};
    bloatlab_host::signals::install();
    let stop = AtomicBool::new(false);
    let r = std::thread::scope(|s| {
        let run = s.spawn(|| {
            let r = bloatlab_rpm::run_client_until(cfg, vec!["tune".into(), cfg.url.clone()], &|_| {}, &stop);
            stop.store(true, Ordering::Relaxed);
            r
        });
        while !stop.load(Ordering::Relaxed) {
            if bloatlab_host::signals::pending() != 0 {
                stop.store(true, Ordering::Relaxed);
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        run.join().unwrap_or_else(|_| Err("the RPM client panicked".into()))
    });
    let sig = bloatlab_host::signals::pending();
    let r = r.map_err(|e| anyhow!(e))?;
    let t = bloatlab_rpm::result::test_result(r);
    std::fs::write(json, serde_json::to_vec_pretty(&t)?).with_context(|| format!("cannot write {}", json.display()))?;
    Ok(if sig != 0 { bloatlab_host::signals::exit_code(sig) } else { 0 })
}

