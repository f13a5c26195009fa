//! bloatlab reports: terminal tables, the verdict, plots (PNG/SVG), a
//! self-contained HTML report, comparisons, and CSV / flent export.
//!
//! Everything here reads [`bloatlab_results::TestResult`] documents; nothing
//! recomputes the engine's summary statistics. Raw samples are turned into
//! display series (rates, CDFs, box plots) and — for display only — thinned
//! when a series has more points than a plot can show (see [`series`]).
//!
//! User documentation: `docs/report.md`.
#![forbid(unsafe_code)]

pub mod files;
pub mod export;
pub mod fmt;
pub mod history;
mod html;
pub mod lab;
pub(crate) mod plot;
mod rpm;
pub mod series;
mod table;
pub mod tune;
mod verdict;

pub use export::csv::{csv_string, CSV_COLUMNS};
pub use export::flent::flent_document;
pub use export::{export, export_csv, export_flent, ExportFormat, Exporter};
pub use html::{render_html, write_html, write_report, ReportFiles};
pub use plot::{
    plot, plot_available, plot_runs, plot_svg_string, sweep_plot, sweep_plot_svg_string, Format, PlotKind, SweepAxes,
};
pub use rpm::{rpm_html, rpm_table};
pub use table::{compare_table, compare_table_labeled, seed003_lines, summary_table};
pub use verdict::{grade_color, scale_words, verdict, Grade, Verdict, GRADE_THRESHOLDS_MS};

use bloatlab_results::TestResult;

/// A result with the label it carries in plots, tables and legends
/// (the CLI uses the file name without extension).
#[derive(Debug, Clone, Copy)]
pub struct Run<'a> {
    pub label: &'a str,
    pub result: &'a TestResult,
}

/// Default labels for unlabeled results: "#1", "#2", ...
pub fn default_labels(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("#{i}")).collect()
}

/// Read a result file with a clear error (wraps [`TestResult::read_file`]).
pub fn read_result(path: &std::path::Path) -> anyhow::Result<TestResult> {
    TestResult::read_file(path).map_err(|e| anyhow::anyhow!(e))
}
