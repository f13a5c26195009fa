//! `bloatlab history --html`: a monitor's runs over time. Latency as
//! smokeping draws it (per hour or day: the band from the lowest to the
//! highest loaded latency, the median as a line; per run: each run's), the
//! added latency over the grade's zones, and the goodput each way.
use super::*;
use crate::history::{aggregate, By};
use bloatlab_model::units::UtcTime;
use bloatlab_store::RunRow;

const W: u32 = 1100;
const H: u32 = 340;

/// Zones of the grade on the added latency (ms): A+ < 5, A < 30, B < 60, C < 200, D < 400, F.
const ZONES: [(f64, f64, &str, RGBColor); 6] = [
    (f64::NEG_INFINITY, 5.0, "A+", RGBColor(220, 242, 220)),
    (5.0, 30.0, "A", RGBColor(232, 246, 226)),
    (30.0, 60.0, "B", RGBColor(246, 246, 220)),
    (60.0, 200.0, "C", RGBColor(250, 236, 214)),
    (200.0, 400.0, "D", RGBColor(250, 222, 214)),
    (400.0, f64::INFINITY, "F", RGBColor(244, 206, 206)),
];

struct Line {
    target: String,
    /// (seconds since the first run, value)
    points: Vec<(f64, f64)>,
}

fn label(t0: u64, x: f64) -> String {
    let t = UtcTime::from_unix_ns(t0 + (x.max(0.0) * 1e9) as u64);
    format!("{:02}-{:02} {:02}:{:02}", t.month, t.day, t.hour, t.minute)
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

/// The plots of `rows` (oldest first): (caption, SVG).
pub fn history_svgs(rows: &[RunRow], by: By) -> Result<Vec<(String, String)>> {
    let measured: Vec<&RunRow> = rows.iter().filter(|r| r.failure.is_none()).collect();
    let Some(t0) = rows.first().map(|r| r.started_unix_ns) else { return Ok(vec![]) };
    let x = |ns: u64| (ns.saturating_sub(t0)) as f64 / 1e9;
    let span = rows.last().map(|r| x(r.started_unix_ns)).unwrap_or(0.0).max(1.0);
    let mut targets: Vec<&str> = rows.iter().map(|r| r.target.as_str()).collect();
    targets.sort();
    targets.dedup();
    let per = |f: &dyn Fn(&RunRow) -> Option<f64>| -> Vec<Line> {
        targets
            .iter()
            .map(|t| Line {
                target: t.to_string(),
                points: measured.iter().filter(|r| r.target == *t).filter_map(|r| f(r).map(|v| (x(r.started_unix_ns), v))).collect(),
            })
            .collect()
    };
    let mut out = vec![];

    // 1. latency: per run, each run's idle and loaded median; per hour/day,
    // the loaded latency's band (lowest to highest) and median
    let buckets = if by == By::Run { vec![] } else { aggregate(rows, by) };
    let width = match by {
        By::Hour => 3600.0,
        By::Day => 86400.0,
        By::Run => 0.0,
    };
    let loaded = per(&|r| r.loaded_ms);
    let idle = per(&|r| r.idle_ms);
    let (lo, hi) = range(loaded.iter().chain(idle.iter()).flat_map(|l| l.points.iter().map(|p| p.1)).filter(|v| *v > 0.0));
    if lo.is_finite() {
        let title = if by == By::Run { "Round trip: idle and loaded median, each run".to_string() } else { format!("Loaded round trip per {}: lowest to highest (band), median (line)", by.name()) };
        let s = svg(|root| {
            let mut c = ChartBuilder::on(root)
                .caption(&title, font(18.0))
                .margin(10)
                .margin_right(25)
                .x_label_area_size(40)
                .y_label_area_size(70)
                .build_cartesian_2d(-span * 0.02..span * 1.02 + width, ((lo / 1.5)..(hi * 2.0)).log_scale())?;
            c.configure_mesh()
                .y_desc("ms (log)")
                .label_style(font(13.0))
                .axis_desc_style(font(14.0))
                .bold_line_style(GRID)
                .light_line_style(TRANSPARENT)
                .x_label_formatter(&|v| label(t0, *v))
                .y_label_formatter(&|v| tick_log(*v))
                .draw()?;
            for (i, t) in targets.iter().enumerate() {
                let col = run_color(i);
                if by == By::Run {
                    let l = &loaded[i].points;
                    c.draw_series(LineSeries::new(l.clone(), col.stroke_width(2)))?
                        .label(format!("{t} loaded"))
                        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], col.stroke_width(3)));
                    c.draw_series(l.iter().map(|p| Circle::new(*p, 3, col.filled())))?;
                    let id = &idle[i].points;
                    c.draw_series(LineSeries::new(id.clone(), col.mix(0.5).stroke_width(1)))?
                        .label(format!("{t} idle"))
                        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], col.mix(0.5).stroke_width(1)));
                } else {
                    let bs: Vec<_> = buckets.iter().filter(|b| b.target == *t && b.loaded_min_ms.is_some()).collect();
                    c.draw_series(bs.iter().map(|b| {
                        let x0 = x(b.start_unix_ns);
                        Rectangle::new([(x0, b.loaded_min_ms.unwrap().max(lo / 1.5)), (x0 + width, b.loaded_max_ms.unwrap())], col.mix(0.25).filled())
                    }))?;
                    let med: Vec<(f64, f64)> = bs.iter().filter_map(|b| b.loaded_ms.map(|m| (x(b.start_unix_ns) + width / 2.0, m))).collect();
                    c.draw_series(LineSeries::new(med.clone(), col.stroke_width(2)))?
                        .label(format!("{t} loaded"))
                        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], col.stroke_width(3)));
                    c.draw_series(med.iter().map(|p| Circle::new(*p, 3, col.filled())))?;
                }
            }
            draw_legend(&mut c, SeriesLabelPosition::UpperLeft)?;
            Ok(())
        })?;
        let caption = if by == By::Run {
            "The median UDP-probe round trip of each run: idle (thin) and in its worst loaded phase (thick). Log scale.".to_string()
        } else {
            format!("Each band spans the lowest to the highest loaded round trip of a {}'s runs, smokeping-style; the line joins their medians. Log scale.", by.name())
        };
        out.push((caption, s));
    }

    // 2. added latency over the grade's zones
    let added = per(&|r| r.added_ms);
    let (alo, ahi) = range(added.iter().flat_map(|l| l.points.iter().map(|p| p.1)));
    if alo.is_finite() {
        let title = "Added latency under load, each run, over the grade's zones".to_string();
        let (y0, y1) = (alo.min(0.0), (ahi * 1.2).max(10.0));
        let s = svg(|root| {
            let mut c = ChartBuilder::on(root)
                .caption(&title, font(18.0))
                .margin(10)
                .margin_right(25)
                .x_label_area_size(40)
                .y_label_area_size(70)
                .build_cartesian_2d(-span * 0.02..span * 1.02, y0..y1)?;
            for (a, b, name, col) in ZONES {
                let (a, b) = (a.max(y0), b.min(y1));
                if a < b {
                    c.draw_series(std::iter::once(Rectangle::new([(-span * 0.02, a), (span * 1.02, b)], col.filled())))?;
                    c.draw_series(std::iter::once(Text::new(name.to_string(), (span * 1.0, b - (b - a) * 0.15), font(12.0))))?;
                }
            }
            c.configure_mesh()
                .y_desc("ms")
                .label_style(font(13.0))
                .axis_desc_style(font(14.0))
                .bold_line_style(GRID)
                .light_line_style(TRANSPARENT)
                .x_label_formatter(&|v| label(t0, *v))
                .y_label_formatter(&|v| tick(*v))
                .draw()?;
            for (i, l) in added.iter().enumerate() {
                let col = run_color(i);
                c.draw_series(LineSeries::new(l.points.clone(), col.stroke_width(2)))?
                    .label(l.target.clone())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], col.stroke_width(3)));
                c.draw_series(l.points.iter().map(|p| Circle::new(*p, 3, col.filled())))?;
            }
            draw_legend(&mut c, SeriesLabelPosition::UpperLeft)?;
            Ok(())
        })?;
        out.push(("Loaded minus idle median round trip, each run, over the zones of the grade it earns (A+ under 5 ms, A 30, B 60, C 200, D 400, F above).".to_string(), s));
    }

    // 3. goodput each way
    let down = per(&|r| r.download_bps);
    let up = per(&|r| r.upload_bps);
    let (glo, ghi) = range(down.iter().chain(up.iter()).flat_map(|l| l.points.iter().map(|p| p.1)));
    if glo.is_finite() {
        let title = "Goodput each run (capacity)".to_string();
        let s = svg(|root| {
            let mut c = ChartBuilder::on(root)
                .caption(&title, font(18.0))
                .margin(10)
                .margin_right(25)
                .x_label_area_size(40)
                .y_label_area_size(70)
                .build_cartesian_2d(-span * 0.02..span * 1.02, 0.0..ghi * 1.5)?;
            c.configure_mesh()
                .y_desc("bit/s")
                .label_style(font(13.0))
                .axis_desc_style(font(14.0))
                .bold_line_style(GRID)
                .light_line_style(TRANSPARENT)
                .x_label_formatter(&|v| label(t0, *v))
                .y_label_formatter(&|v| tick(*v))
                .draw()?;
            for (i, t) in targets.iter().enumerate() {
                for (l, d, name) in [(&down[i], Direction::Down, "down"), (&up[i], Direction::Up, "up")] {
                    let col = if targets.len() == 1 { dir_color(d) } else { run_color(i) };
                    let style = if d == Direction::Down { col.stroke_width(2) } else { col.mix(0.6).stroke_width(2) };
                    c.draw_series(LineSeries::new(l.points.clone(), style))?
                        .label(format!("{t} {name}"))
                        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
                    c.draw_series(l.points.iter().map(|p| Circle::new(*p, 3, col.filled())))?;
                }
            }
            draw_legend(&mut c, SeriesLabelPosition::UpperLeft)?;
            Ok(())
        })?;
        out.push(("Each run's goodput each way: the highest of its scenarios, the line's capacity as the run saw it.".to_string(), s));
    }
    Ok(out)
}
