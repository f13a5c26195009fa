//! The generic sweep plot: one line per series over a swept parameter.
use super::*;

pub(super) fn draw_sweep<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, s: &Sweep) -> Result<()>
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
        b.caption(note, font(15.0));
    }
    macro_rules! body {
        ($chart:ident) => {{
            $chart
                .configure_mesh()
                .x_desc(s.x_label)
                .y_desc(s.y_label)
                .label_style(font(14.0))
                .axis_desc_style(font(15.0))
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
            draw_legend(&mut $chart, SeriesLabelPosition::UpperLeft)?;
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
