//! A `bloatlab rpm` result: per stage, aggregate goodput per interval (and
//! its moving average) above, every probe's round trip by kind below.
use super::*;
use bloatlab_results::RpmResult;

const KINDS: [(&str, &str); 4] =
    [("tcp_foreign", "TCP handshake (fresh conn.)"), ("tls_foreign", "TLS handshake (fresh conn.)"), ("http_foreign", "HTTP GET (fresh conn.)"), ("http_self", "HTTP GET (loaded conn.)")];

/// The plot as an SVG document.
pub fn rpm_svg_string(r: &RpmResult) -> Result<String> {
    ensure_font();
    if r.stages.is_empty() {
        bail!("the RPM result has no stage to plot");
    }
    let n = r.stages.len() as u32;
    let size = (1100u32, 420 * n);
    let mut s = String::new();
    {
        let root = SVGBackend::with_string(&mut s, size).into_drawing_area();
        root.fill(&WHITE)?;
        for (area, st) in root.split_evenly((n as usize, 1)).iter().zip(&r.stages) {
            let (top, bottom) = area.split_vertically(190);
            let span = st.intervals.last().map(|i| i.t_s).unwrap_or(1.0).max(st.duration_s).max(0.1);
            // the unit the stage's largest rate needs (Gbit/s on loopback)
            let unit = crate::fmt::RateUnit::fit_all(st.intervals.iter().flat_map(|i| [i.goodput_bps, i.moving_average_bps]));
            let div = unit.divisor();
            let gmax = st.intervals.iter().map(|i| i.goodput_bps.max(i.moving_average_bps) / div).fold(0.0, f64::max).max(1e-3) * 1.15;
            let title = format!(
                "{}: {} RPM ({} confidence), {} with {} connection(s)",
                st.direction,
                st.rpm.map(crate::fmt::int3).unwrap_or_else(|| "no".into()),
                st.confidence,
                crate::fmt::rate(st.goodput_bps),
                st.connections
            );
            let mut c = ChartBuilder::on(&top)
                .caption(title, (FAMILY, 16))
                .margin(8)
                .x_label_area_size(24)
                .y_label_area_size(60)
                .build_cartesian_2d(0.0..span, 0.0..gmax)?;
            c.configure_mesh().y_desc(unit.name()).light_line_style(GRID).draw()?;
            let inst: Vec<(f64, f64)> = st.intervals.iter().map(|i| (i.t_s, i.goodput_bps / div)).collect();
            let ma: Vec<(f64, f64)> = st.intervals.iter().map(|i| (i.t_s, i.moving_average_bps / div)).collect();
            c.draw_series(LineSeries::new(inst, UP.stroke_width(1)))?.label("goodput per interval").legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], UP.stroke_width(2)));
            c.draw_series(LineSeries::new(ma, DOWN.stroke_width(2)))?.label("moving average").legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], DOWN.stroke_width(2)));
            c.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(GRID).position(SeriesLabelPosition::LowerRight).draw()?;
            let pmax = st.probes.iter().map(|p| p.rtt_ms).fold(0.0, f64::max).max(1e-3) * 1.15;
            let mut c = ChartBuilder::on(&bottom)
                .margin(8)
                .x_label_area_size(30)
                .y_label_area_size(60)
                .build_cartesian_2d(0.0..span, 0.0..pmax)?;
            c.configure_mesh().x_desc("seconds from the stage's start").y_desc("probe ms").light_line_style(GRID).draw()?;
            for (i, (kind, label)) in KINDS.iter().enumerate() {
                let col = PALETTE[i % PALETTE.len()];
                let pts: Vec<(f64, f64)> = st.probes.iter().filter(|p| p.kind == *kind).map(|p| (p.t_s, p.rtt_ms)).collect();
                let pts = series::thin_minmax(&pts, MAX_POINTS);
                c.draw_series(pts.into_iter().map(move |p| Circle::new(p, 2, col.filled())))?
                    .label(*label)
                    .legend(move |(x, y)| Circle::new((x + 9, y), 3, col.filled()));
            }
            c.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(GRID).position(SeriesLabelPosition::UpperLeft).draw()?;
        }
        root.present()?;
    }
    Ok(s)
}
