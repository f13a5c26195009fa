//! `queue`: lab queue backlog (packets), queueing delay and drops over time.
use super::*;

pub(super) fn draw_queue_panels<DB: DrawingBackend>(areas: &[DrawingArea<DB, Shift>], r: &TestResult, x_desc_last: bool) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let Some(lab) = &r.lab else { return Ok(()) };
    let span = series::test_span_s(r);
    // Queues that never held a packet nor dropped one (e.g. "noqueue" on a
    // sender) are left out unless nothing else is there.
    let busy = |q: &&bloatlab_results::QueueSeries| q.samples.iter().any(|s| s.backlog_packets > 0 || s.backlog_bytes > 0 || s.drops > 0);
    let mut qs: Vec<_> = lab.queues.iter().filter(|q| !q.samples.is_empty()).filter(busy).collect();
    if qs.is_empty() {
        qs = lab.queues.iter().filter(|q| !q.samples.is_empty()).collect();
    }
    let name = |q: &bloatlab_results::QueueSeries| {
        if q.qdisc.is_empty() {
            q.role.clone()
        } else {
            format!("{} ({})", q.role, q.qdisc)
        }
    };
    // Panel 1: backlog packets.
    let ymax = nice_max(qs.iter().flat_map(|q| q.samples.iter()).map(|s| s.backlog_packets as f64).fold(0.0, f64::max)) * 1.3;
    let last = areas.len() - 1;
    let (area, strip) = split_legend(&areas[0]);
    let mut leg = Legend::default();
    let mut chart = time_chart(&area, Some("Queue backlog"), span, ymax, "packets", x_desc_last && last == 0)?;
    shade_phases(&mut chart, r, ymax, true)?;
    for (i, q) in qs.iter().enumerate() {
        let c = run_color(i);
        let (p, _) = series::queue_backlog(q);
        chart.draw_series(LineSeries::new(series::thin_minmax(&p, MAX_POINTS), c.stroke_width(2)))?;
        leg.add(&name(q), Mark::Line(c, 3));
    }
    leg.draw(&strip, LEGEND_TOP)?;
    if areas.len() < 3 {
        return Ok(());
    }
    // Panel 2: queueing delay at the measured drain rate.
    let delays: Vec<(usize, Vec<(f64, f64)>)> = qs
        .iter()
        .enumerate()
        .filter_map(|(i, q)| {
            let d = bloatlab_metrics::queue::drain_bps(q, 0, u64::MAX)?;
            Some((i, q.samples.iter().map(|s| (secs(s.t_ns), s.backlog_bytes as f64 * 8.0 / d * 1000.0)).collect()))
        })
        .collect();
    let ymax = nice_max(delays.iter().flat_map(|(_, v)| v.iter()).map(|p| p.1).fold(0.0, f64::max)) * 1.6;
    let (area, strip) = split_legend(&areas[1]);
    let mut leg = Legend::default();
    let mut chart = time_chart(&area, Some("Queueing delay (backlog bytes / measured drain rate)"), span, ymax, "ms", false)?;
    shade_phases(&mut chart, r, ymax, false)?;
    for (i, pts) in &delays {
        let c = run_color(*i);
        chart.draw_series(LineSeries::new(series::thin_minmax(pts, MAX_POINTS), c.stroke_width(2)))?;
        leg.add(&name(qs[*i]), Mark::Line(c, 3));
    }
    let mut analytic = vec![];
    if let Some(a) = lab.analytic_queue_delay_up_ms {
        analytic.push(("analytic up", a));
    }
    if let Some(a) = lab.analytic_queue_delay_down_ms {
        analytic.push(("analytic down", a));
    }
    for (k, (n, a)) in analytic.iter().enumerate() {
        let c = if k == 0 { UP } else { DOWN };
        let line = if *a < ymax { vec![(0.0, *a), (span, *a)] } else { vec![] };
        let label = if *a < ymax { format!("{n}: {} ms", sig3(*a)) } else { format!("{n}: {} ms (above)", sig3(*a)) };
        chart.draw_series(DashedLineSeries::new(line, 6, 4, c.mix(0.7).stroke_width(1)))?;
        leg.add(&label, Mark::Dashed(c, 1));
    }
    if delays.is_empty() {
        chart.plotting_area().draw(&Text::new("drain rate unknown (queue never busy)", (span * 0.35, ymax * 0.5), font(15.0)))?;
    }
    leg.draw(&strip, LEGEND_TOP)?;
    // Panel 3: drops per second.
    let drops: Vec<(usize, Vec<(f64, f64)>)> = qs.iter().enumerate().map(|(i, q)| (i, series::queue_drop_rate(q))).collect();
    let ymax = nice_max(drops.iter().flat_map(|(_, v)| v.iter()).map(|p| p.1).fold(0.0, f64::max)) * 1.3;
    let (area, strip) = split_legend(&areas[2]);
    let mut leg = Legend::default();
    let mut chart = time_chart(&area, Some("Queue drops"), span, ymax, "drops/s", x_desc_last)?;
    shade_phases(&mut chart, r, ymax, false)?;
    for (i, pts) in &drops {
        let c = run_color(*i);
        chart.draw_series(LineSeries::new(series::thin_minmax(pts, MAX_POINTS), c.stroke_width(1)))?;
        leg.add(&name(qs[*i]), Mark::Line(c, 2));
    }
    leg.draw(&strip, LEGEND_TOP)?;
    Ok(())
}

pub(super) fn draw_queue<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, r: &TestResult) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let area = root.titled(&format!("{} — bottleneck queues", title_of(r)), font(20.0))?;
    let panels = area.split_evenly((3, 1));
    draw_queue_panels(&panels, r, true)
}
