//! `classes`: per DSCP class (`--dscp`), flent's RRUL view: each class's
//! goodput per direction (top) and the round trips of its marked probes
//! (bottom) on one time axis, a colour per class.
use super::*;

/// The classes a result measured, in the order given: (DSCP, name).
pub(super) fn result_classes(r: &TestResult) -> Vec<(u8, String)> {
    let mut v: Vec<(u8, String)> = vec![];
    for p in series::phases(r) {
        for c in &p.summary.classes {
            if !v.iter().any(|(d, _)| *d == c.dscp) {
                v.push((c.dscp, c.class.clone()));
            }
        }
    }
    v
}

pub(super) fn draw_classes<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, r: &TestResult) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let area = root.titled(&format!("{} — per DSCP class", title_of(r)), font(20.0))?;
    let panels = area.split_evenly((2, 1));
    let classes = result_classes(r);
    let span = series::test_span_s(r);
    let step = ((r.metadata.sample_interval_ms * 1e6) as u64).max(10_000_000);
    // Goodput: per class and direction, per phase (lines break between phases).
    let mut rates: Vec<(usize, Direction, Vec<(f64, f64)>)> = vec![];
    let mut rtts: Vec<(usize, Vec<(f64, f64)>)> = vec![];
    for p in series::phases(r) {
        for (i, (d, _)) in classes.iter().enumerate() {
            for dir in [Direction::Up, Direction::Down] {
                let pts = series::class_rate(p, dir, *d, step);
                if !pts.is_empty() {
                    rates.push((i, dir, pts));
                }
            }
            if let Some(c) = p.class_probes.iter().find(|c| c.dscp == *d) {
                rtts.push((i, series::probe_rtt(&c.probes).0));
            }
        }
    }
    let unit = bloatlab_model::fmt::RateUnit::fit(rates.iter().flat_map(|(_, _, v)| v.iter().map(|p| p.1)).fold(0.0, f64::max));
    for (_, _, v) in &mut rates {
        v.iter_mut().for_each(|p| p.1 /= unit.divisor());
    }
    let ymax = nice_max(rates.iter().flat_map(|(_, _, v)| v.iter().map(|p| p.1)).fold(0.0, f64::max)) * 1.3;
    let (area, strip) = split_legend(&panels[0]);
    let mut leg = Legend::default();
    let mut chart = time_chart(&area, Some("Goodput per class (solid: upload, dashed: download)"), span, ymax, unit.name(), false)?;
    shade_phases(&mut chart, r, ymax, true)?;
    for (i, dir, pts) in &rates {
        let c = run_color(*i);
        let pts = series::thin_minmax(pts, MAX_POINTS);
        match dir {
            Direction::Up => {
                chart.draw_series(LineSeries::new(pts, c.stroke_width(2)))?;
                leg.add(&format!("{} upload", classes[*i].1), Mark::Line(c, 3));
            }
            Direction::Down => {
                chart.draw_series(DashedLineSeries::new(pts, 6, 4, c.stroke_width(2)))?;
                leg.add(&format!("{} download", classes[*i].1), Mark::Dashed(c, 3));
            }
        }
    }
    leg.draw(&strip, LEGEND_TOP)?;
    // Latency: each class's probes; the axis fits the 99th percentile so one
    // late probe does not flatten the rest (points above are drawn at the top).
    let mut all: Vec<f64> = rtts.iter().flat_map(|(_, v)| v.iter().map(|p| p.1)).collect();
    all.sort_by(|a, b| a.total_cmp(b));
    let top = if all.is_empty() { 1.0 } else { series::quantile_sorted(&all, 0.99) };
    let ymax = nice_max(top) * 1.3;
    let (area, strip) = split_legend(&panels[1]);
    let mut leg = Legend::default();
    let mut chart = time_chart(&area, Some("Round trip of each class's marked UDP probes"), span, ymax, "ms", true)?;
    shade_phases(&mut chart, r, ymax, false)?;
    for (i, pts) in &rtts {
        let c = run_color(*i);
        let pts = series::thin_minmax(pts, MAX_POINTS).into_iter().map(|(x, y)| (x, y.min(ymax)));
        chart.draw_series(LineSeries::new(pts, c.stroke_width(1)))?;
        leg.add(&classes[*i].1, Mark::Line(c, 3));
    }
    leg.draw(&strip, LEGEND_TOP)?;
    Ok(())
}
