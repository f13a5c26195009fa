//! `bloatlab history --html`: a monitor's runs over time. Latency as
//! smokeping draws it (per hour or day: the band from the lowest to the
//! highest loaded latency, the median as a line; per run: each run's), the
//! added latency over the grade's zones, and the goodput each way.
use super::*;
use crate::history::{aggregate, By};
use plotters::coord::ranged1d::{AsRangedCoord, DefaultFormatting, KeyPointHint, Ranged, ValueFormatter};
use bloatlab_model::units::UtcTime;
use bloatlab_results::history::RunRow;

const W: u32 = 1100;
const H: u32 = 340;

/// Zones of the grade on the added latency (ms), from the grade's one
/// table (`metrics::grade::GRADE_THRESHOLDS_MS`), each a pale tint of its
/// letter's badge colour (`report::grade_color`).
fn zones() -> Vec<(f64, f64, &'static str, RGBColor)> {
    use crate::verdict::{grade_color, Grade, GRADE_THRESHOLDS_MS};
    let mut lo = f64::NEG_INFINITY;
    let mut v = vec![];
    for (g, hi) in GRADE_THRESHOLDS_MS.iter().map(|(g, ms)| (*g, *ms)).chain([(Grade::F, f64::INFINITY)]) {
        v.push((lo, hi, g.as_str(), tint(grade_color(g), 0.82)));
        lo = hi;
    }
    v
}

/// `hex` (`#rrggbb`) mixed with white, `white` of it white.
fn tint(hex: &str, white: f64) -> RGBColor {
    let c = |i: usize| u8::from_str_radix(&hex[i..i + 2], 16).unwrap_or(0) as f64;
    let m = |x: f64| (x * (1.0 - white) + 255.0 * white).round() as u8;
    RGBColor(m(c(1)), m(c(3)), m(c(5)))
}

struct Line {
    target: String,
    /// The target's place among all (its color, the same in every plot).
    index: usize,
    /// (seconds since the first run, value)
    points: Vec<(f64, f64)>,
}

/// The time axis: `unit` seconds a step of x (seconds over half an hour,
/// minutes over two days, hours beyond), from `t0`, the first run's time
/// floored to the next unit up, so that the axis's round numbers (10 s,
/// 20 min, 12 h) fall on round clock times.
#[derive(Clone, Copy)]
struct Axis {
    t0: u64,
    unit: f64,
}

impl Axis {
    fn new(first: u64, last: u64, width_s: f64) -> Axis {
        let span = (last.saturating_sub(first)) as f64 / 1e9 + width_s;
        let (unit, align) = if span < 1800.0 {
            (1.0, 60u64)
        } else if span < 2.0 * 86400.0 {
            (60.0, 3600)
        } else {
            (3600.0, 86400)
        };
        let a = align * 1_000_000_000;
        Axis { t0: first - first % a, unit }
    }

    fn x(&self, ns: u64) -> f64 {
        ns.saturating_sub(self.t0) as f64 / 1e9 / self.unit
    }

    /// Ticks on round clock times between `xa` and `xb`: the smallest
    /// clock step (1 s ... 1 week) that gives at most 8 of them.
    fn ticks(&self, xa: f64, xb: f64) -> Vec<f64> {
        const STEPS: [u64; 21] = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800, 2419200];
        let (a, b) = (xa * self.unit, xb * self.unit);
        let step = STEPS.iter().copied().find(|&st| (b - a) / st as f64 <= 8.0).unwrap_or(2419200) as f64;
        let mut t = (a / step).ceil() * step;
        let mut out = vec![];
        while t <= b {
            out.push(t / self.unit);
            t += step;
        }
        out
    }

    fn label(&self, x: f64) -> String {
        let t = UtcTime::from_unix_ns(self.t0 + (x.max(0.0) * self.unit * 1e9) as u64);
        if self.unit < 60.0 {
            format!("{:02}:{:02}:{:02}", t.hour, t.minute, t.second)
        } else if self.unit < 3600.0 {
            format!("{:02}-{:02} {:02}:{:02}", t.month, t.day, t.hour, t.minute)
        } else {
            format!("{}-{:02}-{:02} {:02}h", t.year, t.month, t.day, t.hour)
        }
    }
}

/// An x axis whose ticks are [`Axis::ticks`] (plotters' own pick steps of
/// 1, 2 or 5 times a power of ten: 50 minutes, not an hour).
struct Clock {
    range: RangedCoordf64,
    ticks: Vec<f64>,
}

impl Clock {
    fn new(axis: &Axis, xa: f64, xb: f64) -> Clock {
        Clock { range: (xa..xb).into(), ticks: axis.ticks(xa, xb) }
    }
}

impl Ranged for Clock {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;
    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        self.range.map(v, limit)
    }
    fn key_points<H: KeyPointHint>(&self, _hint: H) -> Vec<f64> {
        self.ticks.clone()
    }
    fn range(&self) -> std::ops::Range<f64> {
        self.range.range()
    }
}

/// The share of a plot's height its legend of `n` entries takes (in the
/// upper left): the axis is stretched by it, so no line runs under it.
fn legend_share(n: usize) -> f64 {
    ((n as f64 * 19.0 + 16.0) / (H as f64 - 90.0)).min(0.8)
}

/// Ticks of a log axis from `lo` to `hi`: 1, 2 and 5 times each power of
/// ten inside, or the powers alone where those would be more than 10
/// (plotters' own log axis may label none below 0.1 ms where idle round
/// trips sit at 0.02-0.05 ms).
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let (a, b) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    let all: Vec<f64> = (a..=b).flat_map(|e| [1.0, 2.0, 5.0].map(|m| m * 10f64.powi(e))).filter(|v| *v >= lo && *v <= hi).collect();
    if all.len() <= 10 {
        all
    } else {
        (a..=b).map(|e| 10f64.powi(e)).filter(|v| *v >= lo && *v <= hi).collect()
    }
}

/// A bit rate axis: its unit by the largest value, and the divisor.
fn rate_unit(max_bps: f64) -> (f64, &'static str) {
    if max_bps >= 2e9 {
        (1e9, "Gbit/s")
    } else if max_bps >= 2e6 {
        (1e6, "Mbit/s")
    } else {
        (1e3, "kbit/s")
    }
}

fn range(v: impl Iterator<Item = f64>) -> (f64, f64) {
    v.filter(|x| x.is_finite()).fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| (a.min(x), b.max(x)))
}

fn svg(draw: impl FnOnce(&DrawingArea<SVGBackend, Shift>) -> Result<()>) -> Result<String> {
    ensure_font();
    let mut s = String::new();
    {
        let root = SVGBackend::with_string(&mut s, (W, H)).into_drawing_area();
        root.fill(&WHITE)?;
        draw(&root)?;
        root.present()?;
    }
    Ok(s)
}

type Chart<'a, 'b, Y> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<Clock, Y>>;

/// A chart of the history's layout: `title`, time along x, `y` up.
fn chart<'a, 'b, Y: AsRangedCoord>(root: &'a DrawingArea<SVGBackend<'b>, Shift>, title: &str, x: Clock, y: Y) -> Result<Chart<'a, 'b, Y::CoordDescType>> {
    Ok(ChartBuilder::on(root).caption(title, font(18.0)).margin(10).margin_right(25).x_label_area_size(40).y_label_area_size(70).build_cartesian_2d(x, y)?)
}

/// Its grid and axes: clock times along x, `y_desc` and `y_label` up.
fn mesh<Y: Ranged<ValueType = f64> + ValueFormatter<f64>>(c: &mut Chart<'_, '_, Y>, axis: &Axis, y_desc: &str, y_label: fn(f64) -> String) -> Result<()> {
    c.configure_mesh()
        .y_desc(y_desc)
        .label_style(font(13.0))
        .axis_desc_style(font(14.0))
        .bold_line_style(GRID)
        .light_line_style(TRANSPARENT)
        .x_label_formatter(&|v| axis.label(*v))
        .y_label_formatter(&|v| y_label(*v))
        .draw()?;
    Ok(())
}

/// The plots of `rows` (oldest first): (caption, SVG).
pub fn history_svgs(rows: &[RunRow], by: By) -> Result<Vec<(String, String)>> {
    let measured: Vec<&RunRow> = rows.iter().filter(|r| r.failure.is_none()).collect();
    let (Some(first), Some(last)) = (rows.first().map(|r| r.started_unix_ns), rows.last().map(|r| r.started_unix_ns)) else { return Ok(vec![]) };
    let width_s = match by {
        By::Hour => 3600.0,
        By::Day => 86400.0,
        By::Run => 0.0,
    };
    // (a bucket begins before its first run)
    let bucket_first = if by == By::Run { first } else { first - first % (width_s as u64 * 1_000_000_000) };
    let axis = Axis::new(bucket_first, last, width_s);
    let x = |ns: u64| axis.x(ns);
    let width = width_s / axis.unit;
    let (x0, x1) = (x(bucket_first), x(last) + width);
    let pad = ((x1 - x0) * 0.02).max(0.5);
    let (xa, xb) = (x0 - pad, x1 + pad);
    let mut targets: Vec<&str> = rows.iter().map(|r| r.target.as_str()).collect();
    targets.sort();
    targets.dedup();
    // each target's points of one number; a target without any has no line (nor legend entry)
    let per = |f: &dyn Fn(&RunRow) -> Option<f64>| -> Vec<Line> {
        targets
            .iter()
            .enumerate()
            .map(|(index, t)| Line {
                target: t.to_string(),
                index,
                points: measured.iter().filter(|r| r.target == *t).filter_map(|r| f(r).map(|v| (x(r.started_unix_ns), v))).collect(),
            })
            .filter(|l| !l.points.is_empty())
            .collect()
    };
    let mut out = vec![];

    // 1. latency: per run, each run's idle and loaded median; per hour/day,
    // the loaded latency's band (lowest to highest) and median
    let buckets = if by == By::Run { vec![] } else { aggregate(rows, by) };
    let loaded = per(&|r| r.loaded_ms);
    let idle = per(&|r| r.idle_ms);
    let (lo, hi) = range(loaded.iter().chain(idle.iter()).flat_map(|l| l.points.iter().map(|p| p.1)).filter(|v| *v > 0.0));
    let banded: Vec<&str> = if by == By::Run {
        vec![]
    } else {
        targets.iter().copied().filter(|t| buckets.iter().any(|b| b.target == *t && (b.loaded_min_ms.is_some() || b.idle_min_ms.is_some()))).collect()
    };
    let entries = if by == By::Run { loaded.len() + idle.len() } else { banded.len() };
    if lo.is_finite() {
        // log axis: the legend's share of the height above the data
        let (lo, hi) = (lo / 1.5, hi * 1.5);
        let f = legend_share(entries);
        let top = hi * (hi / lo).powf(f / (1.0 - f));
        let title = if by == By::Run { "Round trip: idle and loaded median, each run".to_string() } else { format!("Loaded round trip per {}: lowest to highest (band), median (line)", by.name()) };
        let s = svg(|root| {
            let mut c = chart(root, &title, Clock::new(&axis, xa, xb), (lo..top).log_scale().with_key_points(log_ticks(lo, top)))?;
            mesh(&mut c, &axis, "ms (log)", tick_log)?;
            if by == By::Run {
                for l in &loaded {
                    let col = run_color(l.index);
                    c.draw_series(LineSeries::new(l.points.clone(), col.stroke_width(2)))?
                        .label(format!("{} loaded", l.target))
                        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], col.stroke_width(3)));
                    c.draw_series(l.points.iter().map(|p| Circle::new(*p, 3, col.filled())))?;
                }
                for l in &idle {
                    // thin, with small dots: a latency-only target has only these
                    let col = run_color(l.index);
                    c.draw_series(LineSeries::new(l.points.clone(), col.mix(0.6).stroke_width(1)))?
                        .label(format!("{} idle", l.target))
                        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], col.mix(0.6).stroke_width(1)));
                    c.draw_series(l.points.iter().map(|p| Circle::new(*p, 2, col.mix(0.6).filled())))?;
                }
            }
            for t in &banded {
                let col = run_color(targets.iter().position(|x| x == t).unwrap_or(0));
                // a target's loaded round trips; a latency-only target's idle ones
                let loaded_band = buckets.iter().any(|b| b.target == *t && b.loaded_ms.is_some());
                let bs: Vec<(f64, f64, f64, f64)> = buckets
                    .iter()
                    .filter(|b| b.target == *t)
                    .filter_map(|b| {
                        let (a, m, z) = if loaded_band { (b.loaded_min_ms, b.loaded_ms, b.loaded_max_ms) } else { (b.idle_min_ms, b.idle_ms, b.idle_max_ms) };
                        Some((x(b.start_unix_ns), a?, m?, z?))
                    })
                    .collect();
                c.draw_series(bs.iter().map(|&(x0, a, _, z)| Rectangle::new([(x0, a.max(lo)), (x0 + width, z)], col.mix(0.25).filled())))?;
                let med: Vec<(f64, f64)> = bs.iter().map(|&(x0, _, m, _)| (x0 + width / 2.0, m)).collect();
                c.draw_series(LineSeries::new(med.clone(), col.stroke_width(2)))?
                    .label(format!("{t} {}", if loaded_band { "loaded" } else { "at rest" }))
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], col.stroke_width(3)));
                c.draw_series(med.iter().map(|p| Circle::new(*p, 3, col.filled())))?;
            }
            draw_legend(&mut c, SeriesLabelPosition::UpperLeft)?;
            Ok(())
        })?;
        let caption = if by == By::Run {
            "The median round trip of each run: idle (thin; a latency-only target's round of pings or probes) and in its worst loaded phase (thick). Log scale.".to_string()
        } else {
            format!("Each band spans the lowest to the highest loaded round trip of a {}'s runs (a latency-only target's: its rounds' medians at rest), smokeping-style; the line joins their medians. Log scale.", by.name())
        };
        out.push((caption, s));
    }

    // 2. added latency over the grade's zones
    let added = per(&|r| r.added_ms);
    let (alo, ahi) = range(added.iter().flat_map(|l| l.points.iter().map(|p| p.1)));
    if alo.is_finite() {
        let title = "Added latency under load, each run, over the grade's zones".to_string();
        let (y0, y1) = (alo.min(0.0), (ahi * 1.2).max(10.0));
        let y1 = y0 + (y1 - y0) / (1.0 - legend_share(added.len()));
        let s = svg(|root| {
            let mut c = chart(root, &title, Clock::new(&axis, xa, xb), y0..y1)?;
            for (a, b, name, col) in zones() {
                let (a, b) = (a.max(y0), b.min(y1));
                if a < b {
                    c.draw_series(std::iter::once(Rectangle::new([(xa, a), (xb, b)], col.filled())))?;
                    // the letter inside its zone, centred; none in a zone
                    // thinner than the letter
                    let area = c.plotting_area();
                    let tall = area.map_coordinate(&(xa, a)).1 - area.map_coordinate(&(xa, b)).1;
                    if tall >= 16 {
                        let style = font(12.0).pos(plotters::style::text_anchor::Pos::new(plotters::style::text_anchor::HPos::Right, plotters::style::text_anchor::VPos::Center));
                        c.draw_series(std::iter::once(Text::new(name.to_string(), (xb - (xb - xa) * 0.01, (a + b) / 2.0), style)))?;
                    }
                }
            }
            mesh(&mut c, &axis, "ms", tick)?;
            for l in &added {
                let col = run_color(l.index);
                c.draw_series(LineSeries::new(l.points.clone(), col.stroke_width(2)))?
                    .label(l.target.clone())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], col.stroke_width(3)));
                c.draw_series(l.points.iter().map(|p| Circle::new(*p, 3, col.filled())))?;
            }
            draw_legend(&mut c, SeriesLabelPosition::UpperLeft)?;
            Ok(())
        })?;
        out.push((format!("Loaded minus idle median round trip, each run, over the zones of the grade it earns ({}).", crate::verdict::scale_words()), s));
    }

    // 3. goodput each way
    let down = per(&|r| r.download_bps);
    let up = per(&|r| r.upload_bps);
    let (glo, ghi) = range(down.iter().chain(up.iter()).flat_map(|l| l.points.iter().map(|p| p.1)));
    if glo.is_finite() {
        let (div, unit) = rate_unit(ghi);
        let top = ghi * 1.1 / div / (1.0 - legend_share(down.len() + up.len()));
        let title = "Goodput each run (capacity)".to_string();
        let s = svg(|root| {
            let mut c = chart(root, &title, Clock::new(&axis, xa, xb), 0.0..top)?;
            mesh(&mut c, &axis, unit, tick)?;
            for (lines, d, name) in [(&down, Direction::Down, "down"), (&up, Direction::Up, "up")] {
                for l in lines.iter() {
                    let col = if targets.len() == 1 { dir_color(d) } else { run_color(l.index) };
                    // down solid with filled dots, up dashed with open ones
                    // (told apart when every target has its own colour)
                    let style = col.stroke_width(2);
                    let pts: Vec<(f64, f64)> = l.points.iter().map(|&(x, v)| (x, v / div)).collect();
                    if d == Direction::Down {
                        c.draw_series(LineSeries::new(pts.clone(), style))?
                            .label(format!("{} {name}", l.target))
                            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
                        c.draw_series(pts.iter().map(|p| Circle::new(*p, 3, col.filled())))?;
                    } else {
                        c.draw_series(DashedLineSeries::new(pts.clone(), 7, 5, style))?
                            .label(format!("{} {name}", l.target))
                            .legend(move |(x, y)| EmptyElement::at((x, y)) + PathElement::new(vec![(0, 0), (7, 0)], style) + PathElement::new(vec![(11, 0), (18, 0)], style));
                        c.draw_series(pts.iter().map(|p| Circle::new(*p, 3, col.stroke_width(2))))?;
                    }
                }
            }
            draw_legend(&mut c, SeriesLabelPosition::UpperLeft)?;
            Ok(())
        })?;
        out.push(("Each run's goodput each way: the highest of its scenarios, the line's capacity as the run saw it.".to_string(), s));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ping_round(t_s: u64, idle: f64, loss: f64) -> RunRow {
        RunRow { started_unix_ns: t_s * 1_000_000_000, target: "ping:192.0.2.1".into(), complete: true, idle_ms: Some(idle), loss_pct: Some(loss), ..Default::default() }
    }

    #[test]
    fn a_log_axis_is_labelled_where_the_data_are() {
        // idle round trips at 0.02-0.05 ms, loaded at 0.2
        let t = log_ticks(0.013, 0.3);
        assert_eq!(t.len(), 4);
        for (a, b) in t.iter().zip([0.02, 0.05, 0.1, 0.2]) {
            assert!((a - b).abs() < 1e-12, "{t:?}");
        }
        // five decades: the powers of ten alone
        assert_eq!(log_ticks(0.01, 1000.0).len(), 6);
    }

    #[test]
    fn a_latency_only_target_gets_bands_and_lines_without_data_are_not_drawn() {
        // 2026-11-20T10:00:00Z, rounds every 5 minutes for 3 hours, and one loaded run
        let h = 1_795_168_800u64;
        let mut rows: Vec<RunRow> = (0..36).map(|i| ping_round(h + i * 300, 10.0 + (i % 4) as f64, 0.0)).collect();
        rows.push(RunRow {
            started_unix_ns: (h + 100) * 1_000_000_000,
            target: "srv:1".into(),
            complete: true,
            idle_ms: Some(9.0),
            loaded_ms: Some(60.0),
            added_ms: Some(51.0),
            download_bps: Some(95e6),
            upload_bps: Some(20e6),
            ..Default::default()
        });
        rows.sort_by_key(|r| r.started_unix_ns);
        let per_hour = history_svgs(&rows, By::Hour).unwrap();
        let lat = &per_hour[0].1;
        // the ping target's band at rest beside the server's loaded one
        assert!(lat.contains("ping:192.0.2.1 at rest") && lat.contains("srv:1 loaded"), "legend");
        // the axis on round clock times (a step of minutes from 10:00)
        let ticks: Vec<&str> = lat.match_indices("11-20 ").map(|(i, _)| &lat[i..i + 11]).collect();
        assert!(ticks.contains(&"11-20 10:00") && ticks.contains(&"11-20 11:00"), "ticks {ticks:?}");
        let per_run = history_svgs(&rows, By::Run).unwrap();
        // no "loaded" line for the ping target, no goodput for it; goodput in Mbit/s
        assert!(!per_run[0].1.contains("ping:192.0.2.1 loaded") && per_run[0].1.contains("ping:192.0.2.1 idle"));
        let goodput = &per_run.iter().find(|(c, _)| c.contains("goodput")).unwrap().1;
        assert!(goodput.contains("Mbit/s") && !goodput.contains("ping:192.0.2.1"), "goodput");
    }
}
