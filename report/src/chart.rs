//! Charts as inline SVG, drawn by plotters' SVG backend. Each chart is a `<figure>` whose
//! `data-chart` attribute holds, as JSON, exactly the values it draws: a reader (or a test)
//! gets the numbers back without measuring pixels, and the SVG's own points are an affine
//! image of them (log10 of them on log axes).

use plotters::coord::Shift;
use plotters::prelude::*;
use serde_json::{Value, json};

use crate::escape::escape;

const SIZE: (u32, u32) = (640, 300);
const FONT: (&str, u32) = ("sans-serif", 13);
const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// One named line: `(x, y)` points in order of x.
#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// A line chart: every series over shared axes, vertical marks at named x values.
#[derive(Debug, Clone)]
pub struct Lines {
    pub title: String,
    pub x: String,
    pub y: String,
    pub series: Vec<Series>,
    pub marks: Vec<(String, f64)>,
    /// Both axes logarithmic (every value must be positive; others are left out).
    pub log: bool,
}

/// A bar chart: one bar a label.
#[derive(Debug, Clone)]
pub struct Bars {
    pub title: String,
    pub x: String,
    pub y: String,
    pub labels: Vec<String>,
    pub values: Vec<f64>,
}

/// The chart as a `<figure>`, or a note in its place when it cannot be drawn.
pub fn lines(chart: &Lines) -> String {
    let data = json!({
        "kind": "lines",
        "title": chart.title,
        "log": chart.log,
        "series": chart.series.iter().map(|s| json!({"name": s.name, "points": s.points})).collect::<Vec<_>>(),
        "marks": chart.marks,
    });
    figure(&chart.title, &data, draw_lines(chart))
}

pub fn bars(chart: &Bars) -> String {
    let data = json!({
        "kind": "bars",
        "title": chart.title,
        "labels": chart.labels,
        "values": chart.values,
    });
    figure(&chart.title, &data, draw_bars(chart))
}

fn figure(title: &str, data: &Value, svg: Result<String, String>) -> String {
    let body =
        svg.unwrap_or_else(|e| format!("<p class=\"note\">{} could not be drawn: {}</p>", escape(title), escape(&e)));
    format!("<figure class=\"chart\" data-chart=\"{}\">{body}</figure>\n", escape(&data.to_string()))
}

/// The axis value of `v`: itself, or its log10 on a log chart (`None`: not drawable there).
fn axis(v: f64, log: bool) -> Option<f64> {
    match log {
        false => v.is_finite().then_some(v),
        true => (v.is_finite() && v > 0.0).then(|| v.log10()),
    }
}

/// `[lo, hi]` around `values`, padded so that a flat line or a single point still shows; an
/// error when that range is not a finite number (values near the ends of f64).
fn span(values: impl Iterator<Item = f64>, pad_zero: bool) -> Result<(f64, f64), String> {
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if !lo.is_finite() {
        return Ok((0.0, 1.0));
    }
    let pad = if hi > lo { (hi - lo) * 0.05 } else { 0.5 };
    let lo = if pad_zero && lo >= 0.0 { lo.min(0.0) } else { lo - pad };
    let hi = hi + pad;
    match (hi - lo).is_finite() {
        true => Ok((lo, hi)),
        false => Err(format!("values from {lo:e} to {hi:e} span more than a number can hold")),
    }
}

/// Every chart's frame: its caption, margins and room for the axis labels.
fn frame<'a, 'b>(root: &'a DrawingArea<SVGBackend<'b>, Shift>, title: &str) -> ChartBuilder<'a, 'b, SVGBackend<'b>> {
    let mut builder = ChartBuilder::on(root);
    builder.caption(title, FONT).margin(12).x_label_area_size(38).y_label_area_size(60);
    builder
}

fn draw_lines(chart: &Lines) -> Result<String, String> {
    let log = chart.log;
    let series: Vec<Vec<(f64, f64)>> = chart
        .series
        .iter()
        .map(|s| s.points.iter().filter_map(|&(x, y)| Some((axis(x, log)?, axis(y, log)?))).collect())
        .collect();
    let marks: Vec<(String, f64)> =
        chart.marks.iter().filter_map(|(label, x)| Some((label.clone(), axis(*x, log)?))).collect();
    let xs = series.iter().flatten().map(|p| p.0).chain(marks.iter().map(|m| m.1));
    let (x0, x1) = span(xs, false)?;
    let (y0, y1) = span(series.iter().flatten().map(|p| p.1), false)?;
    let label = move |v: &f64| match log {
        false => short(*v),
        // Only whole powers of ten are labelled on a log axis.
        true if (v - v.round()).abs() < 1e-9 => short(10f64.powf(v.round())),
        true => String::new(),
    };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let mut plot = frame(&root, &chart.title).build_cartesian_2d(x0..x1, y0..y1).map_err(|e| e.to_string())?;
        plot.configure_mesh()
            .x_desc(chart.x.as_str())
            .y_desc(chart.y.as_str())
            .x_label_formatter(&label)
            .y_label_formatter(&label)
            .label_style(FONT)
            .draw()
            .map_err(|e| e.to_string())?;
        for (i, (points, s)) in series.iter().zip(&chart.series).enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            plot.draw_series(LineSeries::new(points.iter().copied(), color.stroke_width(2)))
                .map_err(|e| e.to_string())?
                .label(s.name.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
        }
        for (name, x) in &marks {
            let style = BLACK.mix(0.6).stroke_width(1);
            plot.draw_series(std::iter::once(PathElement::new(vec![(*x, y0), (*x, y1)], style)))
                .map_err(|e| e.to_string())?
                .label(name.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x + 9, y - 6), (x + 9, y + 6)], style));
        }
        plot.configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .label_font(FONT)
            .draw()
            .map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

fn draw_bars(chart: &Bars) -> Result<String, String> {
    // A segmented range a..b has b - a + 1 segments: one a bar.
    let last = chart.values.len().max(1) as u32 - 1;
    let (_, top) = span(chart.values.iter().copied().filter(|v| v.is_finite()), true)?;
    let labels = &chart.labels;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let mut plot = frame(&root, &chart.title)
            .build_cartesian_2d((0u32..last).into_segmented(), 0f64..top)
            .map_err(|e| e.to_string())?;
        plot.configure_mesh()
            .disable_x_mesh()
            .x_desc(chart.x.as_str())
            .y_desc(chart.y.as_str())
            .x_labels(labels.len().clamp(1, 24))
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => labels.get(*i as usize).cloned().unwrap_or_default(),
                _ => String::new(),
            })
            .y_label_formatter(&|v| short(*v))
            .label_style(FONT)
            .draw()
            .map_err(|e| e.to_string())?;
        let color = PALETTE[0];
        let bars = chart.values.iter().enumerate().filter(|(_, v)| v.is_finite()).map(|(i, &v)| {
            let i = i as u32;
            let mut bar =
                Rectangle::new([(SegmentValue::Exact(i), 0.0), (SegmentValue::Exact(i + 1), v)], color.filled());
            bar.set_margin(0, 0, 3, 3);
            bar
        });
        plot.draw_series(bars).map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

/// A tick label: few digits, thousands as k and millions as M.
fn short(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{}M", trim(v / 1e6))
    } else if a >= 1e4 {
        format!("{}k", trim(v / 1e3))
    } else {
        trim(v)
    }
}

fn trim(v: f64) -> String {
    let text = format!("{v:.3}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text == "-0" { "0".into() } else { text.into() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_at_the_ends_of_f64_are_a_note_not_a_hang() {
        let series = vec![Series { name: "loss".into(), points: vec![(1.0, 1e308), (2.0, -1e308)] }];
        let chart =
            Lines { title: "loss".into(), x: "epoch".into(), y: "loss".into(), series, marks: vec![], log: false };
        assert!(lines(&chart).contains("could not be drawn"));
        let bars = bars(&Bars {
            title: "t".into(),
            x: "p".into(),
            y: "s".into(),
            labels: vec!["a".into(), "b".into()],
            values: vec![1e308, -1e308],
        });
        assert!(bars.contains("could not be drawn"), "{bars}");
    }

    #[test]
    fn tick_labels_are_short() {
        assert_eq!(short(0.25), "0.25");
        assert_eq!(short(3.0), "3");
        assert_eq!(short(12_500.0), "12.5k");
        assert_eq!(short(2_000_000.0), "2M");
        assert_eq!(short(-0.0001), "0");
    }

    #[test]
    fn a_chart_carries_its_values_and_draws_them() {
        let chart = Lines {
            title: "loss".into(),
            x: "epoch".into(),
            y: "loss".into(),
            series: vec![Series { name: "train".into(), points: vec![(1.0, 0.9), (2.0, 0.5), (3.0, 0.25)] }],
            marks: vec![("best".into(), 2.0)],
            log: false,
        };
        let html = lines(&chart);
        assert!(html.starts_with("<figure class=\"chart\" data-chart=\""), "{html}");
        assert!(html.contains("<svg") && html.contains("<polyline"), "{html}");
        assert!(html.contains("&quot;points&quot;:[[1.0,0.9],[2.0,0.5],[3.0,0.25]]"), "{html}");
        assert!(!html.contains("could not be drawn"), "{html}");
    }

    #[test]
    fn log_charts_leave_out_what_they_cannot_draw() {
        let chart = Lines {
            title: "in-degree".into(),
            x: "in-degree".into(),
            y: "nodes".into(),
            series: vec![Series {
                name: "nodes".into(),
                points: vec![(0.0, 5.0), (1.0, 100.0), (2.0, 0.0), (4.0, 10.0)],
            }],
            marks: vec![],
            log: true,
        };
        let html = lines(&chart);
        // Two drawable points: one polyline of two.
        let points = html.split("points=\"").nth(1).unwrap().split('"').next().unwrap();
        assert_eq!(points.split_whitespace().count(), 2, "{points}");
        let bars = bars(&Bars {
            title: "classes".into(),
            x: "class".into(),
            y: "nodes".into(),
            labels: vec!["0".into(), "1".into()],
            values: vec![3.0, f64::NAN],
        });
        // The bar that is not a number is left out of the drawing and null in the data.
        assert!(bars.contains("&quot;values&quot;:[3.0,null]") && !bars.contains("could not be drawn"), "{bars}");
    }
}
