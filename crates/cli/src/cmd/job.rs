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
    }
}

