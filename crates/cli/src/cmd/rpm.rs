//! `bloatlab rpm URL`: the IETF responsiveness test against any
//! networkQuality-style server (bloatlab's own, goserver, Apple's).
use anyhow::{anyhow, Result};
use crate::options::OptionArgs;
use bloatlab_model::RpmConfig;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct RpmArgs {
    /// The server: https://HOST[:PORT] (its /.well-known/nq) or a configuration URL.
    pub url: String,
    /// The method's options (model::RPM_OPTIONS, defined once).
    #[command(flatten)]
    pub opts: OptionArgs<RpmConfig>,
    #[command(flatten)]
    pub secret: super::ClientSecret,
    /// Write the result (every interval and probe) as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Also write an HTML report (table and plot) next to --json (or in the current directory).
    #[arg(long)]
    pub report: bool,
    /// No per-interval progress lines.
    #[arg(long, short)]
    pub quiet: bool,
}

impl RpmArgs {
    pub fn config(&self) -> Result<RpmConfig> {
        let mut cfg = RpmConfig { url: self.url.clone(), ..Default::default() };
        self.opts.0.apply(&mut cfg).map_err(|e| anyhow!(e))?;
        // the file is read here, at the edge
        cfg.ca_pem = cfg.ca_file.as_deref().map(|p| std::fs::read_to_string(p).map_err(|e| anyhow!("--ca-file {}: {e}", p.display()))).transpose()?;
        cfg.secret = self.secret.read()?;
        cfg.validate().map_err(|e| anyhow!(e))?;
        Ok(cfg)
    }
}

pub fn run_rpm(a: RpmArgs) -> Result<i32> {
    let cfg = a.config()?;
    // Refuse an unwritable --json before measuring, not after.
    if let Some(p) = &a.json {
        let dir = p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
        if !dir.is_dir() {
            return Err(anyhow!("--json {}: the directory {} does not exist", p.display(), dir.display()));
        }
    }
    let show = !a.quiet;
    let progress = move |p: &bloatlab_rpm::StageProgress| {
        if show {
            eprintln!("{}", p.line());
        }
    };
    let command: Vec<String> = std::env::args().collect();
    let r = bloatlab_rpm::run_client(&cfg, command, &progress).map_err(|e| anyhow!(e))?;
    if let Some(p) = &a.json {
        let text = serde_json::to_string_pretty(&r)?;
        std::fs::write(p, text + "\n").map_err(|e| anyhow!("--json {}: {e}", p.display()))?;
    }
    print!("{}", bloatlab_report::rpm_table(&r));
    if a.report {
        let (dir, stem) = match &a.json {
            Some(p) => (
                p.parent().filter(|d| !d.as_os_str().is_empty()).map(|d| d.to_path_buf()).unwrap_or_else(|| PathBuf::from(".")),
                bloatlab_report::files::stem_of(p),
            ),
            None => (PathBuf::from("."), format!("bloatlab-rpm-{}", r.start_time.chars().filter(|c| c.is_ascii_alphanumeric()).take(15).collect::<String>())),
        };
        let html = bloatlab_report::files::write_rpm_report(&r, &dir, &stem)?;
        eprintln!("bloatlab: report written to {}", html.display());
    }
    Ok(0)
}
