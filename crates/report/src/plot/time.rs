//! The shared time axis: a chart over the test, phases shaded, legends placed where the data is quiet.
use super::*;

/// The strip right of a time panel where its legend goes.
pub(super) const LEGEND_WIDTH: u32 = 230;
/// Where a legend's first entry goes in its strip: below the panel's caption.
pub(super) const LEGEND_TOP: i32 = 26;

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
    styled_chart(area, caption, 0f64..span, ymin..ymax, y_desc, x_desc.then_some("time since test start (s)"))
}

/// A chart in the house style (the time panels', the RPM plot's): light
/// grid at the major ticks only, 13 px tick labels in 3 significant digits,
/// 14 px axis names.
#[allow(clippy::too_many_arguments)]
pub(super) fn styled_chart<'a, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, Shift>,
    caption: Option<&str>,
    x: std::ops::Range<f64>,
    y: std::ops::Range<f64>,
    y_desc: &str,
    x_desc: Option<&str>,
) -> Result<TimeChart<'a, DB>>
where
    DB::ErrorType: 'static,
{
    let mut b = ChartBuilder::on(area);
    b.margin(8).margin_right(12).x_label_area_size(if x_desc.is_some() { 40 } else { 26 }).y_label_area_size(70);
    if let Some(c) = caption {
        b.caption(c, font(16.0));
    }
    let mut chart = b.build_cartesian_2d(x, y)?;
    let tk = |v: &f64| tick(*v);
    let mut mesh = chart.configure_mesh();
    mesh.y_desc(y_desc)
        .label_style(font(14.0))
        .axis_desc_style(font(15.0))
        .bold_line_style(GRID)
        .light_line_style(TRANSPARENT)
        .x_labels(12)
        .y_labels(6)
        .x_label_formatter(&tk)
        .y_label_formatter(&tk);
    if let Some(d) = x_desc {
        mesh.x_desc(d);
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
            // within its phase: smaller where the phase is narrow (a 2 s
            // idle phase of a long test), left out where even that would
            // cross the next boundary
            let px = area.map_coordinate(&(x1, ymax)).0 - area.map_coordinate(&(x0, ymax)).0;
            let text = format!(" {}", p.name);
            let width = |size: f64| text.chars().count() as f64 * size * 0.55;
            if let Some(size) = [14.0, 12.0, 10.0].into_iter().find(|&s| width(s) <= px as f64 - 2.0) {
                area.draw(&Text::new(text, (x0, ymax), font(size).color(&RGBColor(70, 70, 100))))?;
            }
        }
    }
    Ok(())
}

/// How a legend entry is drawn.
#[derive(Debug, Clone, Copy)]
pub(super) enum Mark {
    Line(RGBColor, u32),
    /// A translucent line (per-flow series).
    Faint(RGBColor, f64, u32),
    Dashed(RGBColor, u32),
    Dot(RGBColor),
}

/// A time panel's legend, drawn in a strip right of its plotting area
/// ([`split_legend`]): it never covers data. Entries are added once each,
/// in the order series are drawn.
#[derive(Default)]
pub(super) struct Legend(Vec<(String, Mark)>);

impl Legend {
    pub(super) fn add(&mut self, name: &str, mark: Mark) {
        if !self.0.iter().any(|(n, _)| n == name) {
            self.0.push((name.to_string(), mark));
        }
    }

    /// Draw the entries top-down in `strip`, below `top` pixels (the panel's caption).
    pub(super) fn draw<DB: DrawingBackend>(&self, strip: &DrawingArea<DB, Shift>, top: i32) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        let (row, glyph) = (18, 22);
        for (i, (name, mark)) in self.0.iter().enumerate() {
            let y = top + 8 + row * i as i32;
            let (x0, x1) = (4, 4 + glyph - 4);
            match *mark {
                Mark::Line(c, w) => strip.draw(&PathElement::new(vec![(x0, y), (x1, y)], c.stroke_width(w)))?,
                Mark::Faint(c, a, w) => strip.draw(&PathElement::new(vec![(x0, y), (x1, y)], c.mix(a).stroke_width(w)))?,
                Mark::Dashed(c, w) => {
                    strip.draw(&PathElement::new(vec![(x0, y), (x0 + 6, y)], c.stroke_width(w)))?;
                    strip.draw(&PathElement::new(vec![(x1 - 6, y), (x1, y)], c.stroke_width(w)))?;
                }
                Mark::Dot(c) => strip.draw(&Circle::new(((x0 + x1) / 2, y), 3, c.filled()))?,
            }
            strip.draw(&Text::new(name.clone(), (4 + glyph + 4, y - 7), font(13.5)))?;
        }
        Ok(())
    }
}

/// A time panel's area split into its chart and, right of it, the strip of
/// [`LEGEND_WIDTH`] its legend goes in.
pub(super) fn split_legend<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>) -> (DrawingArea<DB, Shift>, DrawingArea<DB, Shift>) {
    let w = area.dim_in_pixel().0;
    area.split_horizontally(w.saturating_sub(LEGEND_WIDTH))
}
