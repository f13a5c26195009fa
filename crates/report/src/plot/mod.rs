//! Plots (PNG and SVG) with plotters and an embedded DejaVu Sans font: no
//! system font library is used.
//!
//! Kinds: `timeseries` (throughput, latency and — for lab runs — queue
//! backlog on one time axis, scenario phases shaded and labelled),
//! `throughput`, `latency`, `cdf` (several runs overlaid), `box` (RTT per
//! scenario, several runs side by side), `queue` (lab queue backlog, delay,
//! drops), `tcp` (cwnd and smoothed RTT of the load flows), `classes` (per
//! DSCP class: goodput and marked-probe RTT) and the generic
//! [`sweep_plot`].
use crate::fmt::sig3;
use crate::series::{self, secs};
use crate::Run;
use anyhow::{bail, Context, Result};
use bloatlab_results::{Direction, Phase, TestResult};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};
use std::path::Path;
use std::sync::Once;

pub(crate) mod history;
mod boxplot;
mod classes;
mod cdf;
mod latency;
mod queue;
mod rpm;
mod style;
mod sweep;
mod tcp;
pub(crate) mod tune;
mod throughput;
mod time;
mod timeseries;

use boxplot::*;
use classes::*;
use cdf::*;
use latency::*;
use queue::*;
pub use rpm::rpm_svg_string;
use style::*;
use sweep::*;
use tcp::*;
use throughput::*;
use time::*;
use timeseries::*;

static FONT: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");
const FAMILY: &str = "sans-serif";

fn ensure_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        for st in [FontStyle::Normal, FontStyle::Bold, FontStyle::Italic, FontStyle::Oblique] {
            if register_font(FAMILY, st, FONT).is_err() {
                panic!("embedded DejaVu Sans font is invalid");
            }
        }
    });
}

/// What to plot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PlotKind {
    /// Throughput, latency and (lab) queue backlog over time, phases shaded.
    Timeseries,
    /// Goodput over time per flow and per direction.
    Throughput,
    /// RTT and one-way delays over time, lost probes marked.
    Latency,
    /// Latency CDF per phase (one result) or per result (several, overlaid).
    Cdf,
    /// RTT box plot per scenario (several results side by side).
    Box,
    /// Lab queue backlog (packets), queueing delay and drops over time.
    Queue,
    /// TCP_INFO of the load flows: cwnd and smoothed RTT over time.
    Tcp,
    /// Per DSCP class (`--dscp`): goodput and marked-probe RTT over time.
    Classes,
}

impl PlotKind {
    pub const ALL: [PlotKind; 8] =
        [PlotKind::Timeseries, PlotKind::Throughput, PlotKind::Latency, PlotKind::Cdf, PlotKind::Box, PlotKind::Queue, PlotKind::Tcp, PlotKind::Classes];
    /// The names the command line accepts, in [`PlotKind::ALL`] order.
    pub const NAMES: [&'static str; 8] = ["timeseries", "throughput", "latency", "cdf", "box", "queue", "tcp", "classes"];
    pub fn name(self) -> &'static str {
        match self {
            PlotKind::Timeseries => "timeseries",
            PlotKind::Throughput => "throughput",
            PlotKind::Latency => "latency",
            PlotKind::Cdf => "cdf",
            PlotKind::Box => "box",
            PlotKind::Queue => "queue",
            PlotKind::Tcp => "tcp",
            PlotKind::Classes => "classes",
        }
    }
    /// Whether the kind overlays several results (others need exactly one).
    pub fn multi_run(self) -> bool {
        matches!(self, PlotKind::Cdf | PlotKind::Box)
    }
}

/// Image format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    Png,
    Svg,
}

impl std::str::FromStr for PlotKind {
    type Err = String;
    fn from_str(s: &str) -> Result<PlotKind, String> {
        PlotKind::ALL
            .into_iter()
            .find(|k| k.name() == s.trim().to_ascii_lowercase())
            .ok_or_else(|| format!("unknown plot kind `{s}` ({})", PlotKind::NAMES.join(", ")))
    }
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Format, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "png" => Ok(Format::Png),
            "svg" => Ok(Format::Svg),
            o => Err(format!("unknown image format `{o}` (png, svg)")),
        }
    }
}

impl Format {
    pub const NAMES: [&'static str; 2] = ["png", "svg"];
    pub fn ext(self) -> &'static str {
        match self {
            Format::Png => "png",
            Format::Svg => "svg",
        }
    }
    /// From a file name's extension (".png" / ".svg", case-insensitive).
    pub fn from_path(p: &Path) -> Option<Format> {
        match p.extension()?.to_str()?.to_ascii_lowercase().as_str() {
            "png" => Some(Format::Png),
            "svg" => Some(Format::Svg),
            _ => None,
        }
    }
}

// ------------------------------------------------------------- rendering

enum Job<'a> {
    Runs { runs: &'a [Run<'a>], kind: PlotKind },
    Sweep(&'a Sweep<'a>),
}

struct Sweep<'a> {
    title: &'a str,
    x_label: &'a str,
    axes: SweepAxes,
    series: &'a [(String, Vec<(f64, f64)>)],
    y_label: &'a str,
}

fn has_queues(r: &TestResult) -> bool {
    r.lab.as_ref().is_some_and(|l| l.queues.iter().any(|q| !q.samples.is_empty()))
}

fn job_size(job: &Job) -> (u32, u32) {
    match job {
        Job::Sweep(_) => (900, 600),
        Job::Runs { runs, kind } => match kind {
            PlotKind::Timeseries => {
                if has_queues(runs[0].result) {
                    (1200, 1020)
                } else {
                    (1200, 760)
                }
            }
            PlotKind::Throughput | PlotKind::Latency => (1200, 460),
            PlotKind::Queue => (1200, 860),
            PlotKind::Tcp => (1200, 700),
            PlotKind::Classes => (1200, 760),
            PlotKind::Cdf => (1200, 560),
            PlotKind::Box => (1200, 560),
        },
    }
}

fn check_job(job: &Job) -> Result<()> {
    match job {
        Job::Runs { runs, kind } => {
            if runs.is_empty() {
                bail!("no result to plot");
            }
            if !kind.multi_run() && runs.len() > 1 {
                bail!("a {} plot shows one result; use --kind cdf or --kind box to overlay several", kind.name());
            }
            if *kind == PlotKind::Classes && result_classes(runs[0].result).is_empty() {
                bail!("this result has no DSCP classes (run the test with --dscp, e.g. --dscp BE,BK,CS5,EF)");
            }
            if *kind == PlotKind::Queue && !has_queues(runs[0].result) {
                bail!("this result has no queue samples (queue plots need a `bloatlab lab` run)");
            }
            if runs.iter().all(|r| series::phases(r.result).is_empty()) {
                bail!("the result has no phases (no idle baseline and no scenario)");
            }
            if matches!(kind, PlotKind::Cdf | PlotKind::Box)
                && !runs.iter().any(|r| series::phases(r.result).iter().any(|p| p.probes.iter().any(|x| x.rtt_ns.is_some())))
            {
                bail!("no latency probe was received, so there is no distribution to plot");
            }
            Ok(())
        }
        Job::Sweep(s) => {
            if s.series.iter().all(|(_, p)| p.is_empty()) {
                bail!("sweep plot '{}' has no points", s.title);
            }
            if s.axes.x_log && s.series.iter().flat_map(|(_, p)| p).any(|(x, _)| *x <= 0.0) {
                bail!("sweep plot '{}': a log x axis needs x > 0", s.title);
            }
            if s.axes.y_log && !s.series.iter().flat_map(|(_, p)| p).any(|(x, y)| x.is_finite() && y.is_finite() && *y > 0.0) {
                bail!("sweep plot '{}': a log y axis needs y > 0, and no point has y > 0 (use a linear y axis)", s.title);
            }
            Ok(())
        }
    }
}

fn draw_job<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, job: &Job) -> Result<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    match job {
        Job::Sweep(s) => draw_sweep(root, s),
        Job::Runs { runs, kind } => match kind {
            PlotKind::Timeseries => draw_timeseries(root, runs[0].result),
            PlotKind::Throughput => {
                let area = root.titled(&format!("{} — throughput", title_of(runs[0].result)), font(20.0))?;
                draw_throughput_panel(&area, runs[0].result, true)
            }
            PlotKind::Latency => {
                let area = root.titled(&format!("{} — latency", title_of(runs[0].result)), font(20.0))?;
                draw_latency_panel(&area, runs[0].result, true)
            }
            PlotKind::Cdf => draw_cdf(root, runs),
            PlotKind::Box => draw_box(root, runs),
            PlotKind::Queue => draw_queue(root, runs[0].result),
            PlotKind::Tcp => draw_tcp(root, runs[0].result),
            PlotKind::Classes => draw_classes(root, runs[0].result),
        },
    }
}

/// Whether a plot has something to draw (the reason when not), without drawing it.
pub fn plot_available(runs: &[Run], kind: PlotKind) -> Result<()> {
    check_job(&Job::Runs { runs, kind })
}

fn render_file(job: &Job, format: Format, path: &Path) -> Result<()> {
    ensure_font();
    check_job(job)?;
    if let Some(dir) = path.parent() {
        if !dir.as_os_str().is_empty() && !dir.exists() {
            bail!("directory {} does not exist", dir.display());
        }
    }
    let size = job_size(job);
    match format {
        Format::Png => {
            let root = BitMapBackend::new(path, size).into_drawing_area();
            draw_job(&root, job)?;
            root.present().with_context(|| format!("writing {}", path.display()))?;
        }
        Format::Svg => {
            let mut s = String::new();
            {
                let root = SVGBackend::with_string(&mut s, size).into_drawing_area();
                draw_job(&root, job)?;
                root.present()?;
            }
            std::fs::write(path, s).with_context(|| format!("writing {}", path.display()))?;
        }
    }
    Ok(())
}

fn render_svg(job: &Job) -> Result<String> {
    ensure_font();
    check_job(job)?;
    let size = job_size(job);
    let mut s = String::new();
    {
        let root = SVGBackend::with_string(&mut s, size).into_drawing_area();
        draw_job(&root, job)?;
        root.present()?;
    }
    Ok(s)
}

/// Plot one or several results (labelled "#1", "#2", ... in legends) to a file.
/// Timeseries, throughput, latency, queue and tcp plots take exactly one result.
pub fn plot(results: &[TestResult], kind: PlotKind, format: Format, path: &Path) -> Result<()> {
    let labels = crate::default_labels(results.len());
    let runs: Vec<Run> = labels.iter().zip(results).map(|(l, r)| Run { label: l, result: r }).collect();
    plot_runs(&runs, kind, format, path)
}

/// Plot labelled results to a file.
pub fn plot_runs(runs: &[Run], kind: PlotKind, format: Format, path: &Path) -> Result<()> {
    render_file(&Job::Runs { runs, kind }, format, path)
}

/// The plot as an SVG document string (for inline HTML).
pub fn plot_svg_string(runs: &[Run], kind: PlotKind) -> Result<String> {
    render_svg(&Job::Runs { runs, kind })
}

/// Axis scales of a [`sweep_plot`] (`SweepAxes::default()`: both linear).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SweepAxes {
    /// Log-scaled x axis. Every x must then be > 0: a point with x <= 0 is
    /// an error (x values are the swept parameters the caller chose).
    pub x_log: bool,
    /// Log-scaled y axis. Points with y <= 0 cannot be drawn on it: they are
    /// left out and the plot's caption says how many; if no point has y > 0
    /// the plot is an error.
    pub y_log: bool,
}

impl SweepAxes {
    /// Both axes linear.
    pub const LINEAR: SweepAxes = SweepAxes { x_log: false, y_log: false };
    pub fn new(x_log: bool, y_log: bool) -> SweepAxes {
        SweepAxes { x_log, y_log }
    }
}

/// A generic sweep plot: one line with markers per series, a swept parameter
/// on x. `axes` selects log scales (see [`SweepAxes`] for what happens to
/// points a log axis cannot show). Points are drawn in the order given after
/// sorting by x.
pub fn sweep_plot(
    title: &str,
    x_label: &str,
    axes: SweepAxes,
    series: &[(String, Vec<(f64, f64)>)],
    y_label: &str,
    path: &Path,
    format: Format,
) -> Result<()> {
    let s = Sweep { title, x_label, axes, series, y_label };
    render_file(&Job::Sweep(&s), format, path)
}

/// [`sweep_plot`] as an SVG string (for recipes' HTML pages).
pub fn sweep_plot_svg_string(
    title: &str,
    x_label: &str,
    axes: SweepAxes,
    series: &[(String, Vec<(f64, f64)>)],
    y_label: &str,
) -> Result<String> {
    let s = Sweep { title, x_label, axes, series, y_label };
    render_svg(&Job::Sweep(&s))
}
