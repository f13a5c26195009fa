//! A `bloatlab rpm` result: per stage, aggregate goodput per interval (and
//! its moving average) above, every probe's round trip by kind below.
use super::*;
use bloatlab_results::RpmResult;

const KINDS: [(&str, &str); 4] =
    [("tcp_foreign", "TCP handshake, fresh"), ("tls_foreign", "TLS handshake, fresh"), ("http_foreign", "HTTP GET, fresh"), ("http_self", "HTTP GET, loaded conn.")];

/// The plot as an SVG document.
pub fn rpm_svg_string(r: &RpmResult) -> Result<String> {
    ensure_font();
    if r.stages.is_empty() {
        bail!("the RPM result has no stage to plot");
    }
    let n = r.stages.len() as u32;
    let size = (1200u32, 460 * n);
    let mut s = String::new();
    {
        let root = SVGBackend::with_string(&mut s, size).into_drawing_area();
        root.fill(&WHITE)?;
        for (area, st) in root.split_evenly((n as usize, 1)).iter().zip(&r.stages) {
            let (top, bottom) = area.split_vertically(210);
            let span = st.intervals.last().map(|i| i.t_s).unwrap_or(1.0).max(st.duration_s).max(0.1);
            // the unit the stage's largest rate needs (Gbit/s on loopback)
            let unit = crate::fmt::RateUnit::fit_all(st.intervals.iter().flat_map(|i| [i.goodput_bps, i.moving_average_bps]));
            let div = unit.divisor();
            let gmax = nice_max(st.intervals.iter().map(|i| i.goodput_bps.max(i.moving_average_bps) / div).fold(0.0, f64::max)) * 1.15;
            let title = format!(
                "{}: {} RPM ({} confidence), {} with {} connection(s)",
                st.direction,
                st.rpm.map(crate::fmt::int3).unwrap_or_else(|| "no".into()),
                st.confidence,
                crate::fmt::rate(st.goodput_bps),
                st.connections
            );
            let (top, top_strip) = split_legend(&top);
            let mut leg = Legend::default();
            let mut c = styled_chart(&top, Some(&title), 0.0..span, 0.0..gmax, unit.name(), None)?;
            let inst: Vec<(f64, f64)> = st.intervals.iter().map(|i| (i.t_s, i.goodput_bps / div)).collect();
            let ma: Vec<(f64, f64)> = st.intervals.iter().map(|i| (i.t_s, i.moving_average_bps / div)).collect();
            c.draw_series(LineSeries::new(inst, UP.stroke_width(1)))?;
            leg.add("goodput per interval", Mark::Line(UP, 2));
            c.draw_series(LineSeries::new(ma, DOWN.stroke_width(2)))?;
            leg.add("moving average", Mark::Line(DOWN, 2));
            leg.draw(&top_strip, LEGEND_TOP)?;
            let pmax = nice_max(st.probes.iter().map(|p| p.rtt_ms).fold(0.0, f64::max)) * 1.1;
            let (bottom, bottom_strip) = split_legend(&bottom);
            let mut leg = Legend::default();
            let mut c = styled_chart(&bottom, Some("each probe's round trip"), 0.0..span, 0.0..pmax, "ms", Some("seconds from the stage's start"))?;
            for (i, (kind, label)) in KINDS.iter().enumerate() {
                let col = PALETTE[i % PALETTE.len()];
                let pts: Vec<(f64, f64)> = st.probes.iter().filter(|p| p.kind == *kind).map(|p| (p.t_s, p.rtt_ms)).collect();
                if pts.is_empty() {
                    continue;
                }
                let pts = series::thin_minmax(&pts, MAX_POINTS);
                c.draw_series(pts.into_iter().map(move |p| Circle::new(p, 2, col.filled())))?;
                leg.add(label, Mark::Dot(col));
            }
            leg.draw(&bottom_strip, LEGEND_TOP)?;
        }
        root.present()?;
    }
    Ok(s)
}
