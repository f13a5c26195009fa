//! `bloatlab tune`'s search: per direction, each step's shaper rate
//! against the added latency it measured (log scale; green held the
//! target, red did not), with the target and the line's rate drawn in, and
//! the goodput each step kept.
use super::*;
use bloatlab_tune::driver::{word, TuneDoc};

const SIZE: (u32, u32) = (1100, 420);

fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, doc: &TuneDoc) -> Result<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let searches: Vec<_> = doc.searches.iter().filter(|s| doc.steps.iter().any(|x| x.direction == s.direction)).collect();
    if searches.is_empty() {
        bail!("the tune ran no search step");
    }
    let areas = root.split_evenly((1, searches.len()));
    for (area, s) in areas.iter().zip(&searches) {
        let steps: Vec<_> = doc.steps.iter().filter(|x| x.direction == s.direction).collect();
        let line_rate = s.line.goodput_bps / bloatlab_tune::search::WIRE_EFFICIENCY / 1e6;
        let rates: Vec<f64> = steps.iter().filter_map(|x| x.step.rate_bps).map(|r| r / 1e6).collect();
        let xmax = rates.iter().cloned().fold(line_rate, f64::max) * 1.05;
        let xmin = rates.iter().cloned().fold(line_rate, f64::min) * 0.9;
        let ys: Vec<f64> = steps.iter().map(|x| x.step.added_ms.max(0.1)).chain([doc.target_added_ms, s.line.added_ms.max(0.1)]).collect();
        let ymax = ys.iter().cloned().fold(1.0, f64::max) * 2.0;
        let title = format!("{}: shaper rate vs added latency", word(s.direction));
        let mut c = ChartBuilder::on(area)
            .caption(title, font(17.0))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(xmin..xmax.max(xmin + 0.1), (0.1..ymax).log_scale())?;
        c.configure_mesh()
            .x_desc("shaper rate, Mbit/s")
            .y_desc("added latency, ms")
            .label_style(font(13.0))
            .axis_desc_style(font(14.0))
            .bold_line_style(GRID)
            .light_line_style(TRANSPARENT)
            .x_label_formatter(&|v| tick(*v))
            .y_label_formatter(&|v| tick_log(*v))
            .draw()?;
        let target = doc.target_added_ms;
        c.draw_series(DashedLineSeries::new([(xmin, target), (xmax, target)], 6, 4, BLACK.mix(0.6).stroke_width(1)))?
            .label(format!("target {} ms", crate::fmt::ms(target)))
            .legend(|(x, y)| PathElement::new([(x, y), (x + 18, y)], BLACK.mix(0.6)));
        let lc = dir_color(s.direction);
        c.draw_series(DashedLineSeries::new([(line_rate, 0.1), (line_rate, ymax)], 4, 4, lc.stroke_width(1)))?
            .label(format!("unshaped: {} goodput, {} ms", crate::fmt::rate(s.line.goodput_bps), crate::fmt::signed(s.line.added_ms)))
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], lc));
        let green = RGBColor(30, 150, 60);
        let red = RGBColor(200, 40, 40);
        for (i, st) in steps.iter().enumerate() {
            let Some(r) = st.step.rate_bps else { continue };
            let p = (r / 1e6, st.step.added_ms.max(0.1));
            let col = if st.step.held { green } else { red };
            c.draw_series([Circle::new(p, 5, col.filled())])?;
            c.draw_series([Text::new(format!("{}", i + 1), (p.0, p.1 * 1.25), font(11.0))])?;
        }
        draw_legend(&mut c, SeriesLabelPosition::UpperLeft)?;
    }
    Ok(())
}

/// The search plot as an SVG document.
pub fn tune_steps_svg(doc: &TuneDoc) -> Result<String> {
    ensure_font();
    let mut s = String::new();
    {
        let root = SVGBackend::with_string(&mut s, SIZE).into_drawing_area();
        draw(&root, doc)?;
        root.present()?;
    }
    Ok(s)
}

/// The search plot as a PNG file.
pub fn tune_steps_png(doc: &TuneDoc, path: &Path) -> Result<()> {
    ensure_font();
    let root = BitMapBackend::new(path, SIZE).into_drawing_area();
    draw(&root, doc)?;
    root.present().with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
