//! Plots (PNG and SVG) with plotters and an embedded DejaVu Sans font: no
//! system font library is used.
//!
//! Kinds: `timeseries` (throughput, latency and — for lab runs — queue
//! backlog on one time axis, scenario phases shaded and labelled),
//! `throughput`, `latency`, `cdf` (several runs overlaid), `box` (RTT per
//! scenario, several runs side by side), `queue` (lab queue backlog, delay,
//! drops), `tcp` (cwnd and smoothed RTT of the load flows) and the generic
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

static FONT: &[u8] = include_bytes!("../assets/fonts/DejaVuSans.ttf");
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
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
}

impl PlotKind {
    pub fn name(self) -> &'static str {
        match self {
            PlotKind::Timeseries => "timeseries",
            PlotKind::Throughput => "throughput",
            PlotKind::Latency => "latency",
            PlotKind::Cdf => "cdf",
            PlotKind::Box => "box",
            PlotKind::Queue => "queue",
            PlotKind::Tcp => "tcp",
        }
    }
    /// Whether the kind overlays several results (others need exactly one).
    pub fn multi_run(self) -> bool {
        matches!(self, PlotKind::Cdf | PlotKind::Box)
    }
}

/// Image format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Format {
    Png,
    Svg,
}

impl Format {
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

// ---------------------------------------------------------------- styling

const UP: RGBColor = RGBColor(31, 119, 180);
const DOWN: RGBColor = RGBColor(230, 110, 0);
const RTT: RGBColor = RGBColor(40, 40, 40);
const OWD_UP: RGBColor = RGBColor(90, 160, 220);
const OWD_DOWN: RGBColor = RGBColor(245, 160, 70);
const RR: RGBColor = RGBColor(148, 103, 189);
const WITNESS: RGBColor = RGBColor(44, 160, 44);
const LOST: RGBColor = RGBColor(214, 39, 40);
const GRID: RGBColor = RGBColor(225, 225, 225);
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(230, 110, 0),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

fn run_color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}
fn dir_color(d: Direction) -> RGBColor {
    match d {
        Direction::Up => UP,
        Direction::Down => DOWN,
    }
}

/// Points per series kept for display (min/max thinning beyond this).
const MAX_POINTS: usize = 2400;

fn font(size: f64) -> TextStyle<'static> {
    (FAMILY, size).into_font().color(&BLACK)
}

fn tick(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let a = v.abs();
    if a >= 1e6 {
        format!("{:.0}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        let s = format!("{v:.1}");
        s.trim_end_matches(".0").to_string()
    } else if a >= 1.0 {
        let s = format!("{v:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// Tick label on a log axis: like [`tick`], and values below 0.001 (which
/// [`tick`] rounds to "0") in scientific notation.
fn tick_log(v: f64) -> String {
    if v != 0.0 && v.abs() < 1e-3 {
        format!("{v:.0e}")
    } else {
        tick(v)
    }
}

fn nice_max(v: f64) -> f64 {
    if !v.is_finite() || v <= 0.0 {
        return 1.0;
    }
    v
}

fn title_of(r: &TestResult) -> String {
    let m = &r.metadata;
    let mut t = String::from("bloatlab");
    if let Some(lab) = &r.lab {
        t.push_str(&format!(" lab ({})", lab.backend));
    } else if !m.server_address.is_empty() {
        t.push_str(&format!(" → {}", m.server_address));
    }
    if !m.start_time.is_empty() {
        t.push_str(&format!("  {}", m.start_time.split('.').next().unwrap_or("")));
    }
    if !r.complete {
        t.push_str("  (INCOMPLETE)");
    }
    t
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
            PlotKind::Cdf => (900, 600),
            PlotKind::Box => (1000, 600),
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

// ------------------------------------------------------------ time panels

type TimeChart<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

fn time_chart<'a, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, Shift>,
    caption: Option<&str>,
    span: f64,
    ymax: f64,
    y_desc: &str,
    x_desc: bool,
) -> Result<TimeChart<'a, DB>>
where
    DB::ErrorType: 'static,
{
    time_chart_from(area, caption, span, 0.0, ymax, y_desc, x_desc)
}

/// A time panel whose y axis starts at `ymin` (negative one-way delays
/// within the clock-offset uncertainty stay visible).
#[allow(clippy::too_many_arguments)]
fn time_chart_from<'a, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, Shift>,
    caption: Option<&str>,
    span: f64,
    ymin: f64,
    ymax: f64,
    y_desc: &str,
    x_desc: bool,
) -> Result<TimeChart<'a, DB>>
where
    DB::ErrorType: 'static,
{
    let mut b = ChartBuilder::on(area);
    b.margin(8).margin_right(20).x_label_area_size(if x_desc { 40 } else { 26 }).y_label_area_size(70);
    if let Some(c) = caption {
        b.caption(c, font(16.0));
    }
    let mut chart = b.build_cartesian_2d(0f64..span, ymin..ymax)?;
    let tk = |v: &f64| tick(*v);
    let mut mesh = chart.configure_mesh();
    mesh.y_desc(y_desc)
        .label_style(font(13.0))
        .axis_desc_style(font(14.0))
        .bold_line_style(GRID)
        .light_line_style(TRANSPARENT)
        .x_labels(12)
        .y_labels(6)
        .x_label_formatter(&tk)
        .y_label_formatter(&tk);
    if x_desc {
        mesh.x_desc("time since test start (s)");
    }
    mesh.draw()?;
    Ok(chart)
}

/// Shade alternate phases and label each at the top of the panel.
fn shade_phases<'a, DB: DrawingBackend + 'a>(chart: &mut TimeChart<'a, DB>, r: &TestResult, ymax: f64, label: bool) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let ph = series::phases(r);
    let ymin = chart.y_range().start;
    let area = chart.plotting_area();
    for (i, p) in ph.iter().enumerate() {
        let (x0, x1) = (secs(p.start_ns), secs(p.end_ns));
        let fill = if p.name == "idle" {
            RGBColor(120, 180, 120).mix(0.10)
        } else if i % 2 == 0 {
            RGBColor(120, 120, 160).mix(0.10)
        } else {
            RGBColor(120, 120, 160).mix(0.04)
        };
        area.draw(&Rectangle::new([(x0, ymin), (x1, ymax)], fill.filled()))?;
        area.draw(&PathElement::new(vec![(x0, ymin), (x0, ymax)], RGBColor(150, 150, 170).stroke_width(1)))?;
        if label {
            area.draw(&Text::new(format!(" {}", p.name), (x0, ymax), font(13.0).color(&RGBColor(70, 70, 100))))?;
        }
    }
    Ok(())
}

/// Whether the left part of a time panel holds less data near the top than
/// the right part (the legend then goes upper left, below the phase labels).
fn left_is_quieter<'p>(series: impl IntoIterator<Item = &'p [(f64, f64)]>, span: f64) -> bool {
    let (mut l, mut r) = (0.0f64, 0.0f64);
    for v in series {
        for &(x, y) in v {
            if x < span * 0.4 {
                l = l.max(y);
            } else if x > span * 0.6 {
                r = r.max(y);
            }
        }
    }
    l < r * 0.75
}

fn legend<'a, DB: DrawingBackend + 'a>(chart: &mut TimeChart<'a, DB>, left: bool) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let pos = if left { SeriesLabelPosition::Coordinate(8, 20) } else { SeriesLabelPosition::UpperRight };
    chart
        .configure_series_labels()
        .position(pos)
        .margin(6)
        .legend_area_size(22)
        .background_style(WHITE.mix(0.8))
        .border_style(RGBColor(180, 180, 180))
        .label_font(font(12.0))
        .draw()?;
    Ok(())
}

fn draw_throughput_panel<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, r: &TestResult, x_desc: bool) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let span = series::test_span_s(r);
    let step = ((r.metadata.sample_interval_ms * 1e6) as u64).max(10_000_000);
    // Per flow and per direction, per phase (lines break between phases).
    let mut flows: Vec<(Direction, Vec<(f64, f64)>)> = Vec::new();
    let mut sums: Vec<(Direction, Vec<(f64, f64)>)> = Vec::new();
    let mut ymax: f64 = 0.0;
    for p in series::phases(r) {
        for f in &p.flows {
            let pts: Vec<(f64, f64)> = series::flow_rate(f).into_iter().map(|(t, b)| (t, b / 1e6)).collect();
            flows.push((f.direction, pts));
        }
        for d in [Direction::Up, Direction::Down] {
            let pts: Vec<(f64, f64)> = series::direction_rate(p, d, step).into_iter().map(|(t, b)| (t, b / 1e6)).collect();
            ymax = pts.iter().fold(ymax, |m, p| m.max(p.1));
            if !pts.is_empty() {
                sums.push((d, pts));
            }
        }
    }
    // Display unit by magnitude (data were collected in Mbit/s).
    let mut all_max = ymax;
    for (_, pts) in &flows {
        all_max = pts.iter().fold(all_max, |m, p| m.max(p.1));
    }
    let (div, unit) = if all_max >= 2000.0 {
        (1000.0, "Gbit/s")
    } else if all_max > 0.0 && all_max < 1.0 {
        (0.001, "kbit/s")
    } else {
        (1.0, "Mbit/s")
    };
    let scale = |v: &mut Vec<(f64, f64)>| v.iter_mut().for_each(|p| p.1 /= div);
    flows.iter_mut().for_each(|(_, v)| scale(v));
    sums.iter_mut().for_each(|(_, v)| scale(v));
    ymax /= div;
    let many = flows.len() > 2 * sums.len().max(1);
    if !many {
        // Few flows: their own peaks matter for the axis too.
        for (_, pts) in &flows {
            ymax = pts.iter().fold(ymax, |m, p| m.max(p.1));
        }
    }
    let ymax = nice_max(ymax) * 1.3;
    let mut chart = time_chart(area, Some("Goodput (thin: per flow, bold: sum per direction)"), span, ymax, unit, x_desc)?;
    shade_phases(&mut chart, r, ymax, true)?;
    let mut labelled = [false; 4];
    for (d, pts) in &flows {
        if flows.len() == sums.len() {
            break; // one flow per direction and phase: the sum is the flow
        }
        let c = dir_color(*d);
        let pts = series::thin_minmax(pts, MAX_POINTS).into_iter().map(|(x, y)| (x, y.min(ymax)));
        let s = chart.draw_series(LineSeries::new(pts, c.mix(0.35).stroke_width(1)))?;
        let k = if *d == Direction::Up { 0 } else { 1 };
        if !labelled[k] {
            labelled[k] = true;
            let name = if *d == Direction::Up { "upload, per flow" } else { "download, per flow" };
            s.label(name).legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.mix(0.5).stroke_width(1)));
        }
    }
    for (d, pts) in &sums {
        let c = dir_color(*d);
        let s = chart.draw_series(LineSeries::new(series::thin_minmax(pts, MAX_POINTS), c.stroke_width(2)))?;
        let k = if *d == Direction::Up { 2 } else { 3 };
        if !labelled[k] {
            labelled[k] = true;
            let name = if *d == Direction::Up { "upload (sum)" } else { "download (sum)" };
            s.label(name).legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(3)));
        }
    }
    if sums.is_empty() {
        chart.plotting_area().draw(&Text::new("no load flows", (span * 0.45, ymax * 0.5), font(14.0)))?;
    } else {
        let left = left_is_quieter(sums.iter().chain(flows.iter()).map(|(_, v)| v.as_slice()), span);
        legend(&mut chart, left)?;
    }
    Ok(())
}

fn draw_latency_panel<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, r: &TestResult, x_desc: bool) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let span = series::test_span_s(r);
    struct PhaseSeries {
        rtt: Vec<(f64, f64)>,
        lost: Vec<f64>,
        up: Vec<(f64, f64)>,
        down: Vec<(f64, f64)>,
        rr: Vec<(f64, f64)>,
        wit: Vec<(f64, f64)>,
        wit_lost: Vec<f64>,
    }
    let mut all = Vec::new();
    let mut ymax: f64 = 0.0;
    for p in series::phases(r) {
        let (rtt, lost) = series::probe_rtt(&p.probes);
        let (up, down) = series::probe_owd(&p.probes);
        let rr: Vec<(f64, f64)> = p.rr.iter().map(|s| (secs(s.t_ns), s.rtt_ns as f64 / 1e6)).collect();
        let (wit, wit_lost) = series::probe_rtt(&p.witness_probes);
        for v in [&rtt, &up, &down, &rr, &wit] {
            ymax = v.iter().fold(ymax, |m, p| m.max(p.1));
        }
        all.push(PhaseSeries { rtt, lost, up, down, rr, wit, wit_lost });
    }
    let ymax = nice_max(ymax) * 1.5;
    let lowest = all.iter().flat_map(|ps| ps.up.iter().chain(ps.down.iter())).map(|p| p.1).fold(0.0, f64::min);
    let ymin = if lowest < 0.0 { lowest - 0.05 * ymax } else { 0.0 };
    let mut chart = time_chart_from(area, Some("Latency (UDP probes; one-way delays from the clock-offset estimate)"), span, ymin, ymax, "ms", x_desc)?;
    shade_phases(&mut chart, r, ymax, false)?;
    let mut done = [false; 7];
    fn lab<'a, DB: DrawingBackend + 'a>(
        s: &mut plotters::chart::SeriesAnno<'a, DB>,
        done: &mut bool,
        name: &str,
        c: RGBColor,
        w: u32,
        dot: bool,
    ) {
        if *done {
            return;
        }
        *done = true;
        if dot {
            s.label(name).legend(move |(x, y)| Circle::new((x + 9, y), 3, c.filled()));
        } else {
            s.label(name).legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(w + 1)));
        }
    }
    for ps in &all {
        if !ps.up.is_empty() {
            let s = chart.draw_series(LineSeries::new(series::thin_minmax(&ps.up, MAX_POINTS), OWD_UP.stroke_width(1)))?;
            lab(s, &mut done[0], "one-way up", OWD_UP, 1, false);
        }
        if !ps.down.is_empty() {
            let s = chart.draw_series(LineSeries::new(series::thin_minmax(&ps.down, MAX_POINTS), OWD_DOWN.stroke_width(1)))?;
            lab(s, &mut done[1], "one-way down", OWD_DOWN, 1, false);
        }
        if !ps.rtt.is_empty() {
            let s = chart.draw_series(LineSeries::new(series::thin_minmax(&ps.rtt, MAX_POINTS), RTT.stroke_width(1)))?;
            lab(s, &mut done[2], "round trip", RTT, 1, false);
        }
        if !ps.rr.is_empty() {
            let pts = series::thin_minmax(&ps.rr, MAX_POINTS);
            let s = chart.draw_series(pts.into_iter().map(|p| Circle::new(p, 2, RR.filled())))?;
            lab(s, &mut done[3], "TCP request/response", RR, 1, true);
        }
        if !ps.wit.is_empty() {
            let pts = series::thin_minmax(&ps.wit, MAX_POINTS);
            let s = chart.draw_series(LineSeries::new(pts, WITNESS.stroke_width(1)))?;
            lab(s, &mut done[4], "witness host RTT", WITNESS, 1, false);
        }
        if !ps.lost.is_empty() {
            let (y0, y1) = (ymax * 0.97, ymax);
            let s = chart.draw_series(
                series::thin_xs(&ps.lost, MAX_POINTS).into_iter().map(|x| PathElement::new(vec![(x, y0), (x, y1)], LOST.stroke_width(1))),
            )?;
            lab(s, &mut done[5], "lost probe", LOST, 1, false);
        }
        if !ps.wit_lost.is_empty() {
            let (y0, y1) = (ymax * 0.93, ymax * 0.96);
            let s = chart.draw_series(
                series::thin_xs(&ps.wit_lost, MAX_POINTS).into_iter().map(|x| PathElement::new(vec![(x, y0), (x, y1)], WITNESS.stroke_width(1))),
            )?;
            lab(s, &mut done[6], "lost witness probe", WITNESS, 1, false);
        }
    }
    if done.iter().any(|d| *d) {
        let mut v: Vec<&[(f64, f64)]> = vec![];
        let mut marks: Vec<(f64, f64)> = vec![];
        for ps in &all {
            v.extend([ps.rtt.as_slice(), ps.up.as_slice(), ps.down.as_slice(), ps.rr.as_slice(), ps.wit.as_slice()]);
            marks.extend(ps.lost.iter().chain(ps.wit_lost.iter()).map(|x| (*x, ymax)));
        }
        v.push(&marks);
        legend(&mut chart, left_is_quieter(v, span))?;
    }
    Ok(())
}

fn draw_queue_panels<DB: DrawingBackend>(areas: &[DrawingArea<DB, Shift>], r: &TestResult, x_desc_last: bool) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let Some(lab) = &r.lab else { return Ok(()) };
    let span = series::test_span_s(r);
    // Queues that never held a packet nor dropped one (e.g. "noqueue" on a
    // sender) are left out unless nothing else is there.
    let busy = |q: &&bloatlab_results::QueueSeries| q.samples.iter().any(|s| s.backlog_packets > 0 || s.backlog_bytes > 0 || s.drops > 0);
    let mut qs: Vec<_> = lab.queues.iter().filter(|q| !q.samples.is_empty()).filter(busy).collect();
    if qs.is_empty() {
        qs = lab.queues.iter().filter(|q| !q.samples.is_empty()).collect();
    }
    let name = |q: &bloatlab_results::QueueSeries| {
        if q.qdisc.is_empty() {
            q.role.clone()
        } else {
            format!("{} ({})", q.role, q.qdisc)
        }
    };
    // Panel 1: backlog packets.
    let ymax = nice_max(qs.iter().flat_map(|q| q.samples.iter()).map(|s| s.backlog_packets as f64).fold(0.0, f64::max)) * 1.3;
    let last = areas.len() - 1;
    let mut chart = time_chart(&areas[0], Some("Queue backlog"), span, ymax, "packets", x_desc_last && last == 0)?;
    shade_phases(&mut chart, r, ymax, true)?;
    for (i, q) in qs.iter().enumerate() {
        let c = run_color(i);
        let (p, _) = series::queue_backlog(q);
        chart
            .draw_series(LineSeries::new(series::thin_minmax(&p, MAX_POINTS), c.stroke_width(2)))?
            .label(name(q))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(3)));
    }
    let backlog: Vec<Vec<(f64, f64)>> = qs.iter().map(|q| series::queue_backlog(q).0).collect();
    legend(&mut chart, left_is_quieter(backlog.iter().map(|v| v.as_slice()), span))?;
    if areas.len() < 3 {
        return Ok(());
    }
    // Panel 2: queueing delay at the measured drain rate.
    let delays: Vec<(usize, Vec<(f64, f64)>)> = qs
        .iter()
        .enumerate()
        .filter_map(|(i, q)| {
            let d = series::queue_drain_bps(q)?;
            Some((i, q.samples.iter().map(|s| (secs(s.t_ns), s.backlog_bytes as f64 * 8.0 / d * 1000.0)).collect()))
        })
        .collect();
    let ymax = nice_max(delays.iter().flat_map(|(_, v)| v.iter()).map(|p| p.1).fold(0.0, f64::max)) * 1.6;
    let mut chart = time_chart(&areas[1], Some("Queueing delay (backlog bytes / measured drain rate)"), span, ymax, "ms", false)?;
    shade_phases(&mut chart, r, ymax, false)?;
    for (i, pts) in &delays {
        let c = run_color(*i);
        chart
            .draw_series(LineSeries::new(series::thin_minmax(pts, MAX_POINTS), c.stroke_width(2)))?
            .label(name(qs[*i]))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(3)));
    }
    let mut analytic = vec![];
    if let Some(a) = lab.analytic_queue_delay_up_ms {
        analytic.push(("analytic max, up", a));
    }
    if let Some(a) = lab.analytic_queue_delay_down_ms {
        analytic.push(("analytic max, down", a));
    }
    for (k, (n, a)) in analytic.iter().enumerate() {
        let c = if k == 0 { UP } else { DOWN };
        let line = if *a < ymax { vec![(0.0, *a), (span, *a)] } else { vec![] };
        let label = if *a < ymax { format!("{n} ({} ms)", sig3(*a)) } else { format!("{n}: {} ms (above the plot)", sig3(*a)) };
        chart
            .draw_series(DashedLineSeries::new(line, 6, 4, c.mix(0.7).stroke_width(1)))?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.mix(0.7).stroke_width(1)));
    }
    if delays.is_empty() {
        chart.plotting_area().draw(&Text::new("drain rate unknown (queue never busy)", (span * 0.35, ymax * 0.5), font(14.0)))?;
    } else {
        legend(&mut chart, left_is_quieter(delays.iter().map(|(_, v)| v.as_slice()), span))?;
    }
    // Panel 3: drops per second.
    let drops: Vec<(usize, Vec<(f64, f64)>)> = qs.iter().enumerate().map(|(i, q)| (i, series::queue_drop_rate(q))).collect();
    let ymax = nice_max(drops.iter().flat_map(|(_, v)| v.iter()).map(|p| p.1).fold(0.0, f64::max)) * 1.3;
    let mut chart = time_chart(&areas[2], Some("Queue drops"), span, ymax, "drops/s", x_desc_last)?;
    shade_phases(&mut chart, r, ymax, false)?;
    for (i, pts) in &drops {
        let c = run_color(*i);
        chart
            .draw_series(LineSeries::new(series::thin_minmax(pts, MAX_POINTS), c.stroke_width(1)))?
            .label(name(qs[*i]))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)));
    }
    legend(&mut chart, left_is_quieter(drops.iter().map(|(_, v)| v.as_slice()), span))?;
    Ok(())
}

fn draw_timeseries<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, r: &TestResult) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let area = root.titled(&format!("{} — throughput and latency", title_of(r)), font(20.0))?;
    let q = has_queues(r);
    let panels = area.split_evenly((if q { 3 } else { 2 }, 1));
    draw_throughput_panel(&panels[0], r, false)?;
    draw_latency_panel(&panels[1], r, !q)?;
    if q {
        draw_queue_panels(&panels[2..3], r, true)?;
    }
    Ok(())
}

fn draw_queue<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, r: &TestResult) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let area = root.titled(&format!("{} — bottleneck queues", title_of(r)), font(20.0))?;
    let panels = area.split_evenly((3, 1));
    draw_queue_panels(&panels, r, true)
}

fn draw_tcp<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, r: &TestResult) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let area = root.titled(&format!("{} — TCP_INFO of the load flows", title_of(r)), font(20.0))?;
    let panels = area.split_evenly((2, 1));
    let span = series::test_span_s(r);
    let mut cw: Vec<(Direction, Vec<(f64, f64)>)> = vec![];
    let mut rt: Vec<(Direction, Vec<(f64, f64)>)> = vec![];
    for p in series::phases(r) {
        for f in &p.flows {
            if f.tcp_info.is_empty() {
                continue;
            }
            cw.push((f.direction, f.tcp_info.iter().map(|s| (secs(s.t_ns), s.cwnd as f64)).collect()));
            rt.push((f.direction, f.tcp_info.iter().map(|s| (secs(s.t_ns), s.srtt_us as f64 / 1000.0)).collect()));
        }
    }
    for (k, (data, title, unit)) in
        [(&cw, "Congestion window (sender side)", "cwnd (packets)"), (&rt, "Smoothed RTT seen by the sender", "srtt (ms)")].into_iter().enumerate()
    {
        let ymax = nice_max(data.iter().flat_map(|(_, v)| v.iter()).map(|p| p.1).fold(0.0, f64::max)) * 1.3;
        let mut chart = time_chart(&panels[k], Some(title), span, ymax, unit, k == 1)?;
        shade_phases(&mut chart, r, ymax, k == 0)?;
        let mut labelled = [false; 2];
        for (d, pts) in data.iter() {
            let c = dir_color(*d);
            let s = chart.draw_series(LineSeries::new(series::thin_minmax(pts, MAX_POINTS), c.mix(0.6).stroke_width(1)))?;
            let i = if *d == Direction::Up { 0 } else { 1 };
            if !labelled[i] {
                labelled[i] = true;
                s.label(if i == 0 { "upload flows (client sender)" } else { "download flows (server sender)" })
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)));
            }
        }
        if data.is_empty() {
            chart.plotting_area().draw(&Text::new("no TCP_INFO samples", (span * 0.4, ymax * 0.5), font(14.0)))?;
        } else {
            legend(&mut chart, left_is_quieter(data.iter().map(|(_, v)| v.as_slice()), span))?;
        }
    }
    Ok(())
}

// ------------------------------------------------------------- CDF / box

fn loaded_probes(r: &TestResult) -> Vec<&bloatlab_results::Probe> {
    r.scenarios.iter().flat_map(|p| p.probes.iter()).collect()
}

/// One line of the CDF plot: (label, points, color, dashed).
type CdfLine = (String, Vec<(f64, f64)>, RGBColor, bool);

fn draw_cdf<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, runs: &[Run]) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let mut lines: Vec<CdfLine> = vec![];
    let title;
    if runs.len() == 1 {
        let r = runs[0].result;
        title = format!("{} — latency CDF per phase", title_of(r));
        for (i, p) in series::phases(r).iter().enumerate() {
            let refs: Vec<&_> = p.probes.iter().collect();
            let (pts, lost) = series::cdf(&refs);
            if pts.is_empty() {
                continue;
            }
            let c = if p.name == "idle" { RGBColor(90, 90, 90) } else { run_color(i.saturating_sub(usize::from(r.idle.is_some()))) };
            lines.push((format!("{} (n={}, lost {}%)", p.name, refs.len(), sig3(lost * 100.0)), pts, c, p.name == "idle"));
        }
    } else {
        title = "Latency CDF under load — results overlaid".to_string();
        for (i, run) in runs.iter().enumerate() {
            let c = run_color(i);
            let refs = loaded_probes(run.result);
            let (pts, lost) = series::cdf(&refs);
            if !pts.is_empty() {
                lines.push((format!("{} loaded (n={}, lost {}%)", run.label, refs.len(), sig3(lost * 100.0)), pts, c, false));
            }
            if let Some(idle) = &run.result.idle {
                let refs: Vec<&_> = idle.probes.iter().collect();
                let (pts, _) = series::cdf(&refs);
                if !pts.is_empty() {
                    lines.push((format!("{} idle", run.label), pts, c, true));
                }
            }
        }
    }
    if lines.is_empty() {
        bail!("no received latency probes to plot a CDF of");
    }
    let xmin = lines.iter().flat_map(|l| l.1.iter()).map(|p| p.0).filter(|x| *x > 0.0).fold(f64::INFINITY, f64::min);
    let xmax = lines.iter().flat_map(|l| l.1.iter()).map(|p| p.0).fold(0.0, f64::max);
    let log = xmin.is_finite() && xmin > 0.0 && xmax / xmin > 20.0;
    let area = root.titled(&title, font(20.0))?;
    let x_desc = if log { "round-trip time (ms, log scale)" } else { "round-trip time (ms)" };
    let tk = |v: &f64| tick(*v);
    let pct = |v: &f64| format!("{:.0}%", v * 100.0);
    macro_rules! body {
        ($chart:ident) => {{
            $chart
                .configure_mesh()
                .x_desc(x_desc)
                .y_desc("fraction of probes sent")
                .label_style(font(13.0))
                .axis_desc_style(font(14.0))
                .bold_line_style(GRID)
                .light_line_style(TRANSPARENT)
                .x_label_formatter(&tk)
                .y_label_formatter(&pct)
                .draw()?;
            for (label, pts, c, dashed) in &lines {
                let c = *c;
                let pts: Vec<(f64, f64)> = series::thin_minmax(pts, 4 * MAX_POINTS).into_iter().map(|(x, y)| (x.max(if log { xmin } else { 0.0 }), y)).collect();
                let width = if *dashed { 1 } else { 2 };
                if *dashed {
                    $chart.draw_series(DashedLineSeries::new(pts, 5, 4, c.stroke_width(width)))?
                } else {
                    $chart.draw_series(LineSeries::new(pts, c.stroke_width(width)))?
                }
                .label(label.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(width + 1)));
            }
            $chart
                .configure_series_labels()
                .position(SeriesLabelPosition::LowerRight)
                .background_style(WHITE.mix(0.85))
                .border_style(RGBColor(180, 180, 180))
                .label_font(font(13.0))
                .draw()?;
        }};
    }
    let mut b = ChartBuilder::on(&area);
    b.margin(10).margin_right(25).x_label_area_size(45).y_label_area_size(70);
    if log {
        let mut chart = b.build_cartesian_2d((xmin * 0.9..xmax * 1.1).log_scale(), 0f64..1.02)?;
        body!(chart);
    } else {
        let mut chart = b.build_cartesian_2d(0f64..nice_max(xmax) * 1.05, 0f64..1.02)?;
        body!(chart);
    }
    Ok(())
}

fn draw_box<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, runs: &[Run]) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let mut names: Vec<String> = vec![];
    for run in runs {
        for p in series::phases(run.result) {
            if !names.contains(&p.name) {
                names.push(p.name.clone());
            }
        }
    }
    // stats[run][phase]
    let mut stats: Vec<Vec<Option<(series::BoxStats, f64)>>> = vec![];
    let mut ymax: f64 = 0.0;
    for run in runs {
        let mut row = vec![];
        for n in &names {
            let ph: Option<&Phase> = series::phases(run.result).into_iter().find(|p| &p.name == n);
            let st = ph.and_then(|p| {
                let v: Vec<f64> = p.probes.iter().filter_map(|x| x.rtt_ns.map(|r| r as f64 / 1e6)).collect();
                let lost = if p.probes.is_empty() { 0.0 } else { 100.0 * (p.probes.len() - v.len()) as f64 / p.probes.len() as f64 };
                series::box_stats(v).map(|b| (b, lost))
            });
            if let Some((b, _)) = &st {
                ymax = ymax.max(b.max);
            }
            row.push(st);
        }
        stats.push(row);
    }
    if stats.iter().all(|r| r.iter().all(|s| s.is_none())) {
        bail!("no received latency probes to draw a box plot of");
    }
    let title = if runs.len() == 1 {
        format!("{} — RTT per phase", title_of(runs[0].result))
    } else {
        "RTT per phase — results side by side".to_string()
    };
    let area = root.titled(&title, font(20.0))?;
    let n = names.len();
    let ymax = nice_max(ymax) * 1.15;
    let mut chart = ChartBuilder::on(&area)
        .margin(10)
        .margin_right(25)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .caption("box: p25–p75, line: median, whiskers: p5–p95, dot: max", font(14.0))
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0f64..ymax)?;
    let names_c = names.clone();
    let xf = move |v: &f64| {
        let i = v.round();
        if (v - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < names_c.len() {
            names_c[i as usize].clone()
        } else {
            String::new()
        }
    };
    let tk = |v: &f64| tick(*v);
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n + 1)
        .x_label_formatter(&xf)
        .y_label_formatter(&tk)
        .y_desc("round-trip time (ms)")
        .x_desc("phase")
        .label_style(font(13.0))
        .axis_desc_style(font(14.0))
        .bold_line_style(GRID)
        .light_line_style(TRANSPARENT)
        .draw()?;
    let k = runs.len() as f64;
    let slot = 0.8 / k;
    let half = slot * 0.38;
    for (ri, run) in runs.iter().enumerate() {
        let c = run_color(ri);
        let mut first = true;
        for (pi, st) in stats[ri].iter().enumerate() {
            let Some((b, _lost)) = st else { continue };
            let x = pi as f64 - 0.4 + slot * (ri as f64 + 0.5);
            let area = chart.plotting_area();
            area.draw(&PathElement::new(vec![(x, b.p5), (x, b.p25)], RTT.stroke_width(1)))?;
            area.draw(&PathElement::new(vec![(x, b.p75), (x, b.p95)], RTT.stroke_width(1)))?;
            area.draw(&PathElement::new(vec![(x - half / 2.0, b.p5), (x + half / 2.0, b.p5)], RTT.stroke_width(1)))?;
            area.draw(&PathElement::new(vec![(x - half / 2.0, b.p95), (x + half / 2.0, b.p95)], RTT.stroke_width(1)))?;
            let boxel = Rectangle::new([(x - half, b.p25), (x + half, b.p75)], c.mix(0.45).filled());
            if first && runs.len() > 1 {
                first = false;
                chart
                    .draw_series(std::iter::once(boxel))?
                    .label(run.label.to_string())
                    .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], c.mix(0.6).filled()));
            } else {
                chart.draw_series(std::iter::once(boxel))?;
            }
            let area = chart.plotting_area();
            area.draw(&Rectangle::new([(x - half, b.p25), (x + half, b.p75)], c.stroke_width(1)))?;
            area.draw(&PathElement::new(vec![(x - half, b.p50), (x + half, b.p50)], BLACK.stroke_width(2)))?;
            area.draw(&Circle::new((x, b.max), 3, RTT.filled()))?;
        }
    }
    if runs.len() > 1 {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(180, 180, 180))
            .label_font(font(13.0))
            .draw()?;
    }
    Ok(())
}

// ------------------------------------------------------------------ sweep

fn draw_sweep<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, s: &Sweep) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let y_log = s.axes.y_log;
    let mut hidden = 0usize;
    let mut pts = |v: &Vec<(f64, f64)>| {
        let mut v: Vec<(f64, f64)> = v.iter().copied().filter(|p| p.0.is_finite() && p.1.is_finite()).collect();
        if y_log {
            let n = v.len();
            v.retain(|p| p.1 > 0.0);
            hidden += n - v.len();
        }
        v.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap());
        v
    };
    let series: Vec<(String, Vec<(f64, f64)>)> = s
        .series
        .iter()
        .map(|(n, v)| {
            let v = pts(v);
            let name = if y_log && v.is_empty() { format!("{n} (all y \u{2264} 0: not shown)") } else { n.clone() };
            (name, v)
        })
        .collect();
    let xs = series.iter().flat_map(|(_, v)| v.iter().map(|p| p.0));
    let xmin = xs.clone().fold(f64::INFINITY, f64::min);
    let xmax = xs.fold(f64::NEG_INFINITY, f64::max);
    let ys = series.iter().flat_map(|(_, v)| v.iter().map(|p| p.1));
    let (ymin, ymax) = if y_log {
        // all y > 0 here; a decade of headroom is not needed, 2x leaves room for the legend
        (ys.clone().fold(f64::INFINITY, f64::min) / 1.5, ys.fold(f64::NEG_INFINITY, f64::max) * 2.0)
    } else {
        (ys.clone().fold(0.0, f64::min), nice_max(ys.fold(0.0, f64::max)) * 1.15)
    };
    let (x0, x1) = if s.axes.x_log {
        (xmin / 1.5, xmax * 1.5)
    } else {
        let pad = ((xmax - xmin) * 0.05).max(if xmax == xmin { 1.0 } else { 0.0 });
        (xmin - pad, xmax + pad)
    };
    let area = root.titled(s.title, font(20.0))?;
    let tk = |v: &f64| tick(*v);
    let tk_log = |v: &f64| tick_log(*v);
    let y_tk: &dyn Fn(&f64) -> String = if y_log { &tk_log } else { &tk };
    let x_tk: &dyn Fn(&f64) -> String = if s.axes.x_log { &tk_log } else { &tk };
    let mut b = ChartBuilder::on(&area);
    b.margin(10).margin_right(25).x_label_area_size(45).y_label_area_size(70);
    if hidden > 0 {
        let note = format!(
            "log y axis: {hidden} point{} with y \u{2264} 0 not shown",
            if hidden == 1 { "" } else { "s" }
        );
        b.caption(note, font(14.0));
    }
    macro_rules! body {
        ($chart:ident) => {{
            $chart
                .configure_mesh()
                .x_desc(s.x_label)
                .y_desc(s.y_label)
                .label_style(font(13.0))
                .axis_desc_style(font(14.0))
                .bold_line_style(GRID)
                .light_line_style(TRANSPARENT)
                .x_label_formatter(&x_tk)
                .y_label_formatter(&y_tk)
                .draw()?;
            for (i, (name, v)) in series.iter().enumerate() {
                let c = run_color(i);
                $chart
                    .draw_series(LineSeries::new(v.clone(), c.stroke_width(2)))?
                    .label(name.clone())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(3)));
                $chart.draw_series(v.iter().map(|p| Circle::new(*p, 4, c.filled())))?;
            }
            $chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperLeft)
                .background_style(WHITE.mix(0.85))
                .border_style(RGBColor(180, 180, 180))
                .label_font(font(13.0))
                .draw()?;
        }};
    }
    match (s.axes.x_log, y_log) {
        (true, true) => {
            let mut chart = b.build_cartesian_2d((x0..x1).log_scale(), (ymin..ymax).log_scale())?;
            body!(chart);
        }
        (true, false) => {
            let mut chart = b.build_cartesian_2d((x0..x1).log_scale(), ymin..ymax)?;
            body!(chart);
        }
        (false, true) => {
            let mut chart = b.build_cartesian_2d(x0..x1, (ymin..ymax).log_scale())?;
            body!(chart);
        }
        (false, false) => {
            let mut chart = b.build_cartesian_2d(x0..x1, ymin..ymax)?;
            body!(chart);
        }
    }
    Ok(())
}
