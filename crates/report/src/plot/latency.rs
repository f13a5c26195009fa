//! `latency`: RTT and one-way delays over time, lost probes marked.
use super::*;

pub(super) fn draw_latency_panel<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, r: &TestResult, x_desc: bool) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let span = series::test_span_s(r);
    struct PhaseSeries {
        rtt: Vec<(f64, f64)>,
        lost: Vec<f64>,
        up: Vec<(f64, f64)>,
        down: Vec<(f64, f64)>,
        rr: Vec<(f64, f64)>,
        wit: Vec<(f64, f64)>,
        wit_lost: Vec<f64>,
        /// --ping / --tcp-ping targets: (target, replies).
        pings: Vec<(String, Vec<(f64, f64)>)>,
    }
    let mut all = Vec::new();
    let (mut udp, mut rr_max): (Vec<f64>, f64) = (vec![], 0.0);
    for p in series::phases(r) {
        let (rtt, lost) = series::probe_rtt(&p.probes);
        let (up, down) = series::probe_owd(&p.probes);
        let rr: Vec<(f64, f64)> = p.rr.iter().map(|s| (secs(s.t_ns), s.rtt_ns as f64 / 1e6)).collect();
        let (wit, wit_lost) = series::probe_rtt(&p.witness_probes);
        let pings: Vec<(String, Vec<(f64, f64)>)> = p
            .pings
            .iter()
            .map(|ps| (ps.target.clone(), ps.samples.iter().filter_map(|x| x.rtt_ns.map(|r| (secs(x.t_ns), r as f64 / 1e6))).collect()))
            .collect();
        for v in [&rtt, &up, &down, &wit] {
            udp.extend(v.iter().map(|p| p.1));
        }
        for (_, v) in &pings {
            udp.extend(v.iter().map(|p| p.1));
        }
        rr_max = rr.iter().fold(rr_max, |m, p| m.max(p.1));
        all.push(PhaseSeries { rtt, lost, up, down, rr, wit, wit_lost, pings });
    }
    // Scale to the UDP probes (the latency this panel is about); a TCP
    // request/response outlier far above them (a loss recovery, a loopback
    // scheduling hiccup) is drawn at the top edge rather than flattening them.
    let udp_max = udp.iter().copied().fold(0.0, f64::max);
    let rr_clipped = udp_max > 0.0 && rr_max > 3.0 * udp_max;
    let ymax = nice_max(if rr_clipped { udp_max } else { udp_max.max(rr_max) }) * 1.5;
    let clipped = if rr_clipped { all.iter().map(|ps| ps.rr.iter().filter(|p| p.1 > ymax * 0.9).count()).sum::<usize>() } else { 0 };
    for ps in &mut all {
        for p in &mut ps.rr {
            p.1 = p.1.min(ymax * 0.9);
        }
    }
    let lowest = all.iter().flat_map(|ps| ps.up.iter().chain(ps.down.iter())).map(|p| p.1).fold(0.0, f64::min);
    let ymin = if lowest < 0.0 { lowest - 0.05 * ymax } else { 0.0 };
    let caption = if clipped > 0 {
        format!(
            "Latency (UDP probes; one-way delays from the clock-offset estimate; {clipped} TCP request/response point(s) up to {} ms drawn at {} ms)",
            sig3(rr_max),
            sig3(ymax * 0.9)
        )
    } else {
        "Latency (UDP probes; one-way delays from the clock-offset estimate)".to_string()
    };
    let caption = if r.metadata.pings.is_empty() { caption } else { caption.replacen("(UDP probes;", "(UDP probes and pings to other hosts;", 1) };
    let (area, strip) = split_legend(area);
    let mut leg = Legend::default();
    let mut chart = time_chart_from(&area, Some(&caption), span, ymin, ymax, "ms", x_desc)?;
    shade_phases(&mut chart, r, ymax, false)?;
    let targets: Vec<String> = r.metadata.pings.iter().map(|p| p.target.clone()).collect();
    for ps in &all {
        if !ps.up.is_empty() {
            chart.draw_series(LineSeries::new(series::thin_minmax(&ps.up, MAX_POINTS), OWD_UP.stroke_width(1)))?;
            leg.add("one-way up", Mark::Line(OWD_UP, 2));
        }
        if !ps.down.is_empty() {
            chart.draw_series(LineSeries::new(series::thin_minmax(&ps.down, MAX_POINTS), OWD_DOWN.stroke_width(1)))?;
            leg.add("one-way down", Mark::Line(OWD_DOWN, 2));
        }
        if !ps.rtt.is_empty() {
            chart.draw_series(LineSeries::new(series::thin_minmax(&ps.rtt, MAX_POINTS), RTT.stroke_width(1)))?;
            leg.add("round trip", Mark::Line(RTT, 2));
        }
        if !ps.rr.is_empty() {
            let pts = series::thin_minmax(&ps.rr, MAX_POINTS);
            chart.draw_series(pts.into_iter().map(|p| Circle::new(p, 2, RR.filled())))?;
            leg.add("TCP request/response", Mark::Dot(RR));
        }
        if !ps.wit.is_empty() {
            let pts = series::thin_minmax(&ps.wit, MAX_POINTS);
            chart.draw_series(LineSeries::new(pts, WITNESS.stroke_width(1)))?;
            leg.add("witness host RTT", Mark::Line(WITNESS, 2));
        }
        for (target, pts) in &ps.pings {
            let Some(i) = targets.iter().position(|t| t == target) else { continue };
            if pts.is_empty() {
                continue;
            }
            let c = PINGS[i % PINGS.len()];
            chart.draw_series(LineSeries::new(series::thin_minmax(pts, MAX_POINTS), c.stroke_width(1)))?;
            leg.add(target, Mark::Line(c, 2));
        }
        if !ps.lost.is_empty() {
            let (y0, y1) = (ymax * 0.97, ymax);
            chart.draw_series(
                series::thin_xs(&ps.lost, MAX_POINTS).into_iter().map(|x| PathElement::new(vec![(x, y0), (x, y1)], LOST.stroke_width(1))),
            )?;
            leg.add("lost probe", Mark::Line(LOST, 2));
        }
        if !ps.wit_lost.is_empty() {
            let (y0, y1) = (ymax * 0.93, ymax * 0.96);
            chart.draw_series(
                series::thin_xs(&ps.wit_lost, MAX_POINTS).into_iter().map(|x| PathElement::new(vec![(x, y0), (x, y1)], LOST_WITNESS.stroke_width(1))),
            )?;
            leg.add("lost witness probe", Mark::Line(LOST_WITNESS, 2));
        }
    }
    leg.draw(&strip, LEGEND_TOP)?;
    Ok(())
}
