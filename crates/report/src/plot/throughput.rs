//! `throughput`: goodput over time per flow and per direction.
use super::*;

pub(super) fn draw_throughput_panel<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, r: &TestResult, x_desc: bool) -> Result<()>
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
    let (area, strip) = split_legend(area);
    let mut leg = Legend::default();
    let mut chart = time_chart(&area, Some("Goodput (thin: per flow, bold: sum per direction)"), span, ymax, unit, x_desc)?;
    shade_phases(&mut chart, r, ymax, true)?;
    for (d, pts) in &flows {
        if flows.len() == sums.len() {
            break; // one flow per direction and phase: the sum is the flow
        }
        let c = dir_color(*d);
        let pts = series::thin_minmax(pts, MAX_POINTS).into_iter().map(|(x, y)| (x, y.min(ymax)));
        chart.draw_series(LineSeries::new(pts, c.mix(0.35).stroke_width(1)))?;
        leg.add(if *d == Direction::Up { "upload, per flow" } else { "download, per flow" }, Mark::Faint(c, 0.5, 1));
    }
    for (d, pts) in &sums {
        let c = dir_color(*d);
        chart.draw_series(LineSeries::new(series::thin_minmax(pts, MAX_POINTS), c.stroke_width(2)))?;
        leg.add(if *d == Direction::Up { "upload (sum)" } else { "download (sum)" }, Mark::Line(c, 3));
    }
    if sums.is_empty() {
        chart.plotting_area().draw(&Text::new("no load flows", (span * 0.45, ymax * 0.5), font(15.0)))?;
    }
    leg.draw(&strip, LEGEND_TOP)?;
    Ok(())
}
