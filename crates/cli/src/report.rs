//! `bloatlab report`, `plot`, `export` and `compare` command lines, mapped
//! to the report crate's typed requests.
use crate::choice;
use anyhow::Result;
use bloatlab_report::app::{self, ExportFormat};
use bloatlab_report::{Format, PlotKind};
use clap::Args;
use std::path::PathBuf;

/// Write an HTML report (plus PNG plots) for one result, or a comparison for several.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Result JSON file(s) written by `bloatlab test --json` (or a lab/recipe run).
    #[arg(required = true, value_name = "RESULT.json")]
    pub results: Vec<PathBuf>,
    /// Output directory (default: the directory of the first result).
    #[arg(long, short = 'o', value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Base name of the files written (default: the result's file name
    /// without .json; "compare" for several results).
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Image format of the plot files written next to the HTML.
    #[arg(long, default_value = "png", value_parser = choice::<Format>(&Format::NAMES))]
    pub image_format: Format,
    /// Write only the HTML file (it embeds its plots as SVG anyway).
    #[arg(long)]
    pub no_images: bool,
    /// Do not print the summary table / comparison to stdout.
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

/// Draw one plot of one or more results.
#[derive(Debug, Args)]
pub struct PlotArgs {
    #[arg(required = true, value_name = "RESULT.json")]
    pub results: Vec<PathBuf>,
    /// What to draw. cdf and box overlay several results; the others take one.
    #[arg(long, short = 'k', default_value = "timeseries", value_parser = choice::<PlotKind>(&PlotKind::NAMES))]
    pub kind: PlotKind,
    /// Image format (default: from the -o extension, else png).
    #[arg(long, short = 'f', value_parser = choice::<Format>(&Format::NAMES))]
    pub format: Option<Format>,
    /// Output file (default: RESULT.KIND.FORMAT next to the first result).
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
}


/// Export a result's raw samples as CSV or as a flent data file.
#[derive(Debug, Args)]
pub struct ExportArgs {
    #[arg(value_name = "RESULT.json")]
    pub result: PathBuf,
    #[arg(long, short = 'f', value_parser = choice::<ExportFormat>(&ExportFormat::NAMES))]
    pub format: ExportFormat,
    /// Output file (default: RESULT.csv / RESULT.flent.gz next to the result; "-" = stdout for csv).
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// Print several results side by side with their differences.
#[derive(Debug, Args)]
pub struct CompareArgs {
    #[arg(required = true, num_args = 2.., value_name = "RESULT.json")]
    pub results: Vec<PathBuf>,
    /// Also write the comparison as a self-contained HTML file.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

impl ReportArgs {
    pub fn run(self) -> Result<i32> {
        app::run_report(app::ReportRequest {
            results: self.results,
            out: self.out,
            name: self.name,
            image_format: self.image_format,
            no_images: self.no_images,
            quiet: self.quiet,
        })
    }
}

impl PlotArgs {
    pub fn run(self) -> Result<i32> {
        app::run_plot(app::PlotRequest { results: self.results, kind: self.kind, format: self.format, output: self.output })
    }
}

impl ExportArgs {
    pub fn run(self) -> Result<i32> {
        app::run_export(app::ExportRequest { result: self.result, format: self.format, output: self.output })
    }
}

impl CompareArgs {
    pub fn run(self) -> Result<i32> {
        app::run_compare(app::CompareRequest { results: self.results, html: self.html })
    }
}
