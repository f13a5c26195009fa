//! `cdf`: latency CDF per phase (one result) or per result (several, overlaid).
use super::*;

pub(super) fn loaded_probes(r: &TestResult) -> Vec<&bloatlab_results::Probe> {
    r.scenarios.iter().flat_map(|p| p.probes.iter()).collect()
}

/// One line of the CDF plot: (label, points, color, dashed).
pub(super) type CdfLine = (String, Vec<(f64, f64)>, RGBColor, bool);

pub(super) fn draw_cdf<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, runs: &[Run]) -> Result<()>
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
    // On a log axis plotters proposes every 1..9 x 10^k; labelling only the
    // 1-2-5 ones keeps neighbours ("0.08", "0.09", "0.1") from overlapping.
    let tk = |v: &f64| if !log || is_125(*v) { tick(*v) } else { String::new() };
    let pct = |v: &f64| format!("{:.0}%", v * 100.0);
    macro_rules! body {
        ($chart:ident) => {{
            $chart
                .configure_mesh()
                .x_desc(x_desc)
                .y_desc("fraction of probes sent")
                .label_style(font(14.0))
                .axis_desc_style(font(15.0))
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
            draw_legend(&mut $chart, SeriesLabelPosition::LowerRight)?;
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
