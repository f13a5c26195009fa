//! `box`: RTT box plot per scenario, several results side by side.
use super::*;

pub(super) fn draw_box<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, runs: &[Run]) -> Result<()>
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
            // The axis fits the whiskers: one late probe (a max of seconds
            // beside boxes of milliseconds) would flatten every box.
            if let Some((b, _)) = &st {
                ymax = ymax.max(b.p95);
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
    let ymax = nice_max(ymax) * 1.2;
    let mut chart = ChartBuilder::on(&area)
        .margin(10)
        .margin_right(25)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .caption("box: p25–p75, line: median, whiskers: p5–p95, dot: max (a max above the axis: a triangle at the top, with its value)", font(15.0))
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
        .label_style(font(14.0))
        .axis_desc_style(font(15.0))
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
            if b.max <= ymax {
                area.draw(&Circle::new((x, b.max), 3, RTT.filled()))?;
            } else {
                let top = ymax * 0.985;
                area.draw(&TriangleMarker::new((x, top), 5, RTT.filled()))?;
                area.draw(&Text::new(format!("max {} ms", sig3(b.max)), (x + half * 0.15, ymax * 0.975), font(13.5)))?;
            }
        }
    }
    if runs.len() > 1 {
        draw_legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
    }
    Ok(())
}
