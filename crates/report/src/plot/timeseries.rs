//! `timeseries`: throughput, latency and (lab) queue panels on one time axis.
use super::*;

pub(super) fn draw_timeseries<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, r: &TestResult) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let area = root.titled(&format!("{} — throughput and latency", title_of(r)), font(20.0))?;
    let q = has_queues(r);
    let panels = area.split_evenly((if q { 3 } else { 2 }, 1));
    draw_throughput_panel(&panels[0], r, false)?;
    draw_latency_panel(&panels[1], r, !q)?;
    if q {
        draw_queue_panels(&panels[2..3], r, true)?;
    }
    Ok(())
}
