//! The shared time axis: a chart over the test, phases shaded, legends placed where the data is quiet.
use super::*;

pub(super) type TimeChart<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

pub(super) fn time_chart<'a, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, Shift>,
    caption: Option<&str>,
    span: f64,
    ymax: f64,
    y_desc: &str,
    x_desc: bool,
) -> Result<TimeChart<'a, DB>>
where
    DB::ErrorType: 'static,
{
    time_chart_from(area, caption, span, 0.0, ymax, y_desc, x_desc)
}

/// A time panel whose y axis starts at `ymin` (negative one-way delays
/// within the clock-offset uncertainty stay visible).
#[allow(clippy::too_many_arguments)]
pub(super) fn time_chart_from<'a, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, Shift>,
    caption: Option<&str>,
    span: f64,
    ymin: f64,
    ymax: f64,
    y_desc: &str,
    x_desc: bool,
) -> Result<TimeChart<'a, DB>>
where
    DB::ErrorType: 'static,
{
    let mut b = ChartBuilder::on(area);
    b.margin(8).margin_right(20).x_label_area_size(if x_desc { 40 } else { 26 }).y_label_area_size(70);
    if let Some(c) = caption {
        b.caption(c, font(16.0));
    }
    let mut chart = b.build_cartesian_2d(0f64..span, ymin..ymax)?;
    let tk = |v: &f64| tick(*v);
    let mut mesh = chart.configure_mesh();
    mesh.y_desc(y_desc)
        .label_style(font(13.0))
        .axis_desc_style(font(14.0))
        .bold_line_style(GRID)
        .light_line_style(TRANSPARENT)
        .x_labels(12)
        .y_labels(6)
        .x_label_formatter(&tk)
        .y_label_formatter(&tk);
    if x_desc {
        mesh.x_desc("time since test start (s)");
    }
    mesh.draw()?;
    Ok(chart)
}

/// Shade alternate phases and label each at the top of the panel.
pub(super) fn shade_phases<'a, DB: DrawingBackend + 'a>(chart: &mut TimeChart<'a, DB>, r: &TestResult, ymax: f64, label: bool) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let ph = series::phases(r);
    let ymin = chart.y_range().start;
    let area = chart.plotting_area();
    for (i, p) in ph.iter().enumerate() {
        let (x0, x1) = (secs(p.start_ns), secs(p.end_ns));
        let fill = if p.name == "idle" {
            RGBColor(120, 180, 120).mix(0.10)
        } else if i % 2 == 0 {
            RGBColor(120, 120, 160).mix(0.10)
        } else {
            RGBColor(120, 120, 160).mix(0.04)
        };
        area.draw(&Rectangle::new([(x0, ymin), (x1, ymax)], fill.filled()))?;
        area.draw(&PathElement::new(vec![(x0, ymin), (x0, ymax)], RGBColor(150, 150, 170).stroke_width(1)))?;
        if label {
            area.draw(&Text::new(format!(" {}", p.name), (x0, ymax), font(13.0).color(&RGBColor(70, 70, 100))))?;
        }
    }
    Ok(())
}

/// Whether the left part of a time panel holds less data near the top than
/// the right part (the legend then goes upper left, below the phase labels).
pub(super) fn left_is_quieter<'p>(series: impl IntoIterator<Item = &'p [(f64, f64)]>, span: f64) -> bool {
    let (mut l, mut r) = (0.0f64, 0.0f64);
    for v in series {
        for &(x, y) in v {
            if x < span * 0.4 {
                l = l.max(y);
            } else if x > span * 0.6 {
                r = r.max(y);
            }
        }
    }
    l < r * 0.75
}

pub(super) fn legend<'a, DB: DrawingBackend + 'a>(chart: &mut TimeChart<'a, DB>, left: bool) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let pos = if left { SeriesLabelPosition::Coordinate(8, 20) } else { SeriesLabelPosition::UpperRight };
    chart
        .configure_series_labels()
        .position(pos)
        .margin(6)
        .legend_area_size(22)
        .background_style(WHITE.mix(0.8))
        .border_style(RGBColor(180, 180, 180))
        .label_font(font(12.0))
        .draw()?;
    Ok(())
}
