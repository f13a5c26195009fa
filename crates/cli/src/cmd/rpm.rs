//! `bloatlab rpm URL`: the IETF responsiveness test against any
//! networkQuality-style server (bloatlab's own, goserver, Apple's).
use anyhow::{anyhow, Result};
use bloatlab_model::units::parse_duration;
use bloatlab_model::{RpmConfig, RpmDirection};
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct RpmArgs {
    /// The server: https://HOST[:PORT] (its /.well-known/nq) or a configuration URL.
    pub url: String,
    /// Stages, run one after another.
    #[arg(long, value_delimiter = ',', default_value = "download,upload", value_name = "download|upload|bidirectional,...",
          value_parser = crate::choice::<RpmDirection>(RpmDirection::WORDS))]
    pub directions: Vec<RpmDirection>,
    /// Longest a stage may take to become stable (then it reports low confidence).
    #[arg(long, default_value = "20s", value_name = "DURATION", value_parser = parse_duration)]
    pub max_stage: Duration,
    /// Interval duration (the draft's ID).
    #[arg(long, default_value = "1s", value_name = "DURATION", value_parser = parse_duration)]
    pub interval: Duration,
    /// Moving average distance, intervals (the draft's MAD).
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub mad: u32,
    /// Standard deviation tolerance, a fraction (the draft's SDT).
    #[arg(long, default_value_t = 0.05, value_name = "FRACTION")]
    pub sdt: f64,
    /// Most load-generating connections per direction (the draft's MNP).
    #[arg(long, default_value_t = 16, value_name = "N")]
    pub max_connections: u32,
    /// Probe rounds per second, each a foreign and a self probe (at most the draft's MPS, 100).
    #[arg(long, default_value_t = 20, value_name = "N")]
    pub probe_rate: u32,
    /// Accept any certificate (self-signed servers); the result says so.
    #[arg(long, short = 'k')]
    pub insecure: bool,
    /// Accept exactly the certificate with this SHA-256 (what `bloatlab server` prints), whoever signed it.
    #[arg(long, value_name = "HEX", conflicts_with = "insecure")]
    pub pin_sha256: Option<String>,
    /// Also trust the CA certificate(s) in FILE (PEM).
    #[arg(long, value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
    /// Connect to this host or address instead of resolving the URL's host.
    #[arg(long, value_name = "HOST")]
    pub connect_to: Option<String>,
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
        let ca_pem = self
            .ca_file
            .as_deref()
            .map(|p| std::fs::read_to_string(p).map_err(|e| anyhow!("--ca-file {}: {e}", p.display())))
            .transpose()?;
        let cfg = RpmConfig {
            url: self.url.clone(),
            directions: self.directions.clone(),
            max_stage: self.max_stage,
            interval: self.interval,
            mad: self.mad,
            sdt: self.sdt,
            max_connections: self.max_connections,
            probes_per_second: self.probe_rate,
            insecure: self.insecure,
            pin_sha256: self.pin_sha256.clone(),
            ca_pem,
            connect_to: self.connect_to.clone(),
            secret: self.secret.read()?,
            idle: std::time::Duration::ZERO,
        };
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
