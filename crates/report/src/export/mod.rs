//! Exports of a result's raw samples: one [`Exporter`] per format, one module
//! each ([`csv`], [`flent`]); [`export`] writes any of them. A history's
//! rows: [`history`].
use anyhow::{bail, Context, Result};
use bloatlab_results::TestResult;
use std::io::Write;
use std::path::Path;

pub mod csv;
pub mod flent;
pub mod history;

/// A way to write a result to a file.
pub trait Exporter {
    /// File name extension, without the dot (`csv`, `flent.gz`).
    fn extension(&self) -> &'static str;
    /// Whether the format may go to stdout (`-o -`).
    fn to_stdout(&self) -> bool;
    /// The file's bytes; `file_name` is the name it is written under.
    fn render(&self, r: &TestResult, file_name: &str) -> Result<Vec<u8>>;
}

/// The export formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    /// One row per raw sample (columns in docs/report.md).
    Csv,
    /// flent's data file (.flent.gz, format version 4), openable with `flent -i`.
    Flent,
}

impl ExportFormat {
    pub const NAMES: [&'static str; 2] = ["csv", "flent"];

    pub fn exporter(self) -> &'static dyn Exporter {
        match self {
            ExportFormat::Csv => &csv::Csv,
            ExportFormat::Flent => &flent::Flent,
        }
    }
}

impl std::str::FromStr for ExportFormat {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<ExportFormat, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "csv" => Ok(ExportFormat::Csv),
            "flent" => Ok(ExportFormat::Flent),
            o => Err(format!("unknown export format `{o}` (csv, flent)")),
        }
    }
}

/// Write `r` in `format` to `path` (`-` = stdout, where the format allows it).
pub fn export(r: &TestResult, format: ExportFormat, path: &Path) -> Result<()> {
    let e = format.exporter();
    if path.as_os_str() == "-" {
        if !e.to_stdout() {
            bail!("the {} export is a binary file; give -o FILE.{}", e.extension(), e.extension());
        }
        std::io::stdout().write_all(&e.render(r, "-")?)?;
        return Ok(());
    }
    let name = path.file_name().map(|s| s.to_string_lossy().to_string()).unwrap_or_default();
    std::fs::write(path, e.render(r, &name)?).with_context(|| format!("writing {}", path.display()))
}

/// Write the CSV to `path` ("-" = stdout).
pub fn export_csv(r: &TestResult, path: &Path) -> Result<()> {
    export(r, ExportFormat::Csv, path)
}

/// Write flent's `.flent.gz`. `flent -i FILE -p totals -o x.png` plots it.
pub fn export_flent(r: &TestResult, path: &Path) -> Result<()> {
    export(r, ExportFormat::Flent, path)
}
