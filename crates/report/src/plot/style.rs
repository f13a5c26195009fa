//! Colours, fonts, tick labels and titles shared by every plot.
use super::*;

pub(super) const UP: RGBColor = RGBColor(31, 119, 180);
pub(super) const DOWN: RGBColor = RGBColor(230, 110, 0);
pub(super) const RTT: RGBColor = RGBColor(40, 40, 40);
pub(super) const OWD_UP: RGBColor = RGBColor(90, 160, 220);
pub(super) const OWD_DOWN: RGBColor = RGBColor(245, 160, 70);
pub(super) const RR: RGBColor = RGBColor(148, 103, 189);
pub(super) const WITNESS: RGBColor = RGBColor(44, 160, 44);
pub(super) const LOST: RGBColor = RGBColor(214, 39, 40);
/// Lost witness probes: not the witness RTT's green, nor the server's lost red.
pub(super) const LOST_WITNESS: RGBColor = RGBColor(140, 86, 75);
/// --ping / --tcp-ping targets, in turn.
pub(super) const PINGS: [RGBColor; 4] = [RGBColor(23, 190, 207), RGBColor(188, 189, 34), RGBColor(227, 119, 194), RGBColor(140, 86, 75)];
pub(super) const GRID: RGBColor = RGBColor(225, 225, 225);
pub(super) const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(230, 110, 0),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

pub(super) fn run_color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}
pub(super) fn dir_color(d: Direction) -> RGBColor {
    match d {
        Direction::Up => UP,
        Direction::Down => DOWN,
    }
}

/// Points per series kept for display (min/max thinning beyond this).
pub(super) const MAX_POINTS: usize = 2400;

pub(super) fn font(size: f64) -> TextStyle<'static> {
    (FAMILY, size).into_font().color(&BLACK)
}

pub(super) fn tick(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let a = v.abs();
    if a >= 1e6 {
        format!("{:.0}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        let s = format!("{v:.1}");
        s.trim_end_matches(".0").to_string()
    } else if a >= 1.0 {
        let s = format!("{v:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// Tick label on a log axis: like [`tick`], and values below 0.001 (which
/// [`tick`] rounds to "0") in scientific notation.
/// Whether `v` is 1, 2 or 5 times a power of ten (within rounding).
pub(super) fn is_125(v: f64) -> bool {
    if v.is_nan() || v <= 0.0 {
        return false;
    }
    let m = v / 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0].iter().any(|k| (m - k).abs() < 1e-6 * k)
}

pub(super) fn tick_log(v: f64) -> String {
    if v != 0.0 && v.abs() < 1e-3 {
        format!("{v:.0e}")
    } else {
        tick(v)
    }
}

pub(super) fn nice_max(v: f64) -> f64 {
    if !v.is_finite() || v <= 0.0 {
        return 1.0;
    }
    v
}

pub(super) fn title_of(r: &TestResult) -> String {
    let m = &r.metadata;
    let mut t = String::from("bloatlab");
    if let Some(lab) = &r.lab {
        t.push_str(&format!(" lab ({})", lab.backend));
    } else if !m.server_address.is_empty() {
        t.push_str(&format!(" → {}", m.server_address));
    }
    if !m.start_time.is_empty() {
        t.push_str(&format!("  {}", m.start_time.split('.').next().unwrap_or("")));
    }
    if !r.complete {
        t.push_str("  (INCOMPLETE)");
    }
    t
}

/// The legend box of the summary plots (boxplot, CDF, sweep): translucent
/// white, grey border, 13 px labels, at `pos`.
pub(super) fn draw_legend<'a, DB, CT>(chart: &mut ChartContext<'a, DB, CT>, pos: SeriesLabelPosition) -> Result<()>
where
    DB: DrawingBackend + 'a,
    DB::ErrorType: 'static,
    CT: plotters::coord::CoordTranslate,
{
    chart
        .configure_series_labels()
        .position(pos)
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(180, 180, 180))
        .label_font(font(14.0))
        .draw()?;
    Ok(())
}
