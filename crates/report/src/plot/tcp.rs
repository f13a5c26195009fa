//! `tcp`: TCP_INFO of the load flows, cwnd and smoothed RTT over time.
use super::*;

pub(super) fn draw_tcp<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, r: &TestResult) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let area = root.titled(&format!("{} — TCP_INFO of the load flows", title_of(r)), font(20.0))?;
    let panels = area.split_evenly((2, 1));
    let span = series::test_span_s(r);
    let mut cw: Vec<(Direction, Vec<(f64, f64)>)> = vec![];
    let mut rt: Vec<(Direction, Vec<(f64, f64)>)> = vec![];
    for p in series::phases(r) {
        for f in &p.flows {
            if f.tcp_info.is_empty() {
                continue;
            }
            cw.push((f.direction, f.tcp_info.iter().map(|s| (secs(s.t_ns), s.cwnd as f64)).collect()));
            rt.push((f.direction, f.tcp_info.iter().map(|s| (secs(s.t_ns), s.srtt_us as f64 / 1000.0)).collect()));
        }
    }
    for (k, (data, title, unit)) in
        [(&cw, "Congestion window (sender side)", "cwnd (packets)"), (&rt, "Smoothed RTT seen by the sender", "srtt (ms)")].into_iter().enumerate()
    {
        let ymax = nice_max(data.iter().flat_map(|(_, v)| v.iter()).map(|p| p.1).fold(0.0, f64::max)) * 1.3;
        let (area, strip) = split_legend(&panels[k]);
        let mut leg = Legend::default();
        let mut chart = time_chart(&area, Some(title), span, ymax, unit, k == 1)?;
        shade_phases(&mut chart, r, ymax, k == 0)?;
        for (d, pts) in data.iter() {
            let c = dir_color(*d);
            chart.draw_series(LineSeries::new(series::thin_minmax(pts, MAX_POINTS), c.mix(0.6).stroke_width(1)))?;
            leg.add(if *d == Direction::Up { "uploads (client sends)" } else { "downloads (server sends)" }, Mark::Line(c, 2));
        }
        if data.is_empty() {
            chart.plotting_area().draw(&Text::new("no TCP_INFO samples", (span * 0.4, ymax * 0.5), font(15.0)))?;
        }
        leg.draw(&strip, LEGEND_TOP)?;
    }
    Ok(())
}
