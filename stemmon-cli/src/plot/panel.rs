//! A panel under the memory panel: one figure over the run on the memory panel's time
//! axis and under the same stage bands, with its title, its y ticks and its step lines
//! (an area under a lone one). The CPU panel ([`super::cpu`]) is one; each unit other
//! than bytes that a series of the table has ([`super::lines`]), and some point of the
//! report has a figure in, is another ([`unit`]): open descriptors as a count, memory
//! pressure as a percentage of the time.

use super::colour::BAND_COLOURS;
use super::frame::{corners, nice_step, time_axis, trim_number, Frame, LEFT, RIGHT, WIDTH};
use super::model::Chart;
use super::series::Panel as Steps;
use super::xml::{Px, Writer};
use std::fmt::{Display, Write as _};
use stemmon_report::fields::Unit;

/// A panel's height, axis and labels included.
pub(crate) const PANEL: f64 = 200.0;
/// Space above the plot area, for the panel's title.
const HEAD: f64 = 26.0;
/// Space below it, for the time ticks and their caption.
const FOOT: f64 = 46.0;

/// A panel to draw: what [`draw`] needs, in figures of its own unit.
pub(super) struct Panel<'a> {
    /// The `id` of its `<g>`.
    pub(super) id: &'a str,
    /// The title over it.
    pub(super) title: &'a str,
    /// The `class` of its tick labels.
    pub(super) tick_class: &'a str,
    /// The figure at the top of the plot area.
    pub(super) scale: f64,
    /// The figure between two ticks.
    pub(super) step: f64,
    /// A tick's label.
    pub(super) label: &'a dyn Fn(f64) -> String,
    /// Its lines, in the order they are drawn.
    pub(super) traces: Vec<Trace<'a>>,
}

/// A line of a panel: its (seconds, figure) corners, and the area under it if any.
pub(super) struct Trace<'a> {
    /// The polyline's `id`.
    pub(super) id: &'a str,
    /// Its corners (from [`corners`]).
    pub(super) corners: Vec<(f64, f64)>,
    /// The line's colour.
    pub(super) stroke: &'a str,
    /// The area under it: its `id`, its colour and that colour's opacity (opaque where
    /// `None`).
    pub(super) area: Option<(String, &'a str, Option<f64>)>,
}

/// The step and the top of an axis from 0 over figures up to `most`, about four ticks.
/// The outermost stages' bands, from `top` to `bottom`, each titled with its path: under
/// the memory panel's lines and under every panel's.
pub(super) fn outer_bands(w: &mut Writer, chart: &Chart, frame: &Frame, top: f64, bottom: f64) {
    for (index, band) in chart.bands.iter().filter(|b| b.depth == 0).enumerate() {
        let (x0, x1) = (frame.x(band.start), frame.x(band.end));
        w.open(
            "rect",
            &[
                ("class", &"band"),
                ("x", &Px(x0)),
                ("y", &Px(top)),
                ("width", &Px((x1 - x0).max(1.0))),
                ("height", &Px(bottom - top)),
                ("fill", &BAND_COLOURS[index % 2]),
            ],
        );
        w.text("title", &[], &band.path);
        w.close("rect");
    }
}

pub(super) fn axis(most: f64) -> (f64, f64) {
    let step = nice_step(most * 1.1, 4.0);
    (step, ((most * 1.1 / step).ceil() * step).max(step))
}

/// Draws `panel` from `top` (the bottom edge of the panel above) down.
pub(super) fn draw(w: &mut Writer, chart: &Chart, frame: &Frame, top: f64, panel: &Panel) {
    let (plot_top, plot_bottom) = (top + HEAD, top + PANEL - FOOT);
    let scale = panel.scale;
    let y = |v: f64| plot_bottom - v.clamp(0.0, scale) / scale * (plot_bottom - plot_top);
    w.open("g", &[("id", &panel.id)]);
    w.text(
        "text",
        &[
            ("x", &LEFT),
            ("y", &Px(top + 16.0)),
            ("font-weight", &"bold"),
            ("fill", &"#444"),
        ],
        panel.title,
    );
    outer_bands(w, chart, frame, plot_top, plot_bottom);
    let mut tick = 0.0;
    while tick <= scale + 1e-9 {
        w.empty(
            "line",
            &[
                ("x1", &LEFT),
                ("x2", &Px(WIDTH - RIGHT)),
                ("y1", &Px(y(tick))),
                ("y2", &Px(y(tick))),
                ("stroke", &"#dddddd"),
            ],
        );
        w.text(
            "text",
            &[
                ("class", &panel.tick_class),
                ("x", &Px(LEFT - 6.0)),
                ("y", &Px(y(tick) + 4.0)),
                ("text-anchor", &"end"),
            ],
            &(panel.label)(tick),
        );
        tick += panel.step;
    }
    for trace in &panel.traces {
        let corners: Vec<(f64, f64)> = trace
            .corners
            .iter()
            .map(|&(t, v)| (frame.x(t), y(v)))
            .collect();
        let (Some(first), Some(last)) = (corners.first(), corners.last()) else {
            continue;
        };
        let mut area = format!("M{},{} ", Px(first.0), Px(y(0.0)));
        let mut line = String::new();
        for (x, y) in &corners {
            let _ = write!(area, "L{},{} ", Px(*x), Px(*y));
            let _ = write!(line, "{},{} ", Px(*x), Px(*y));
        }
        let _ = write!(area, "L{},{} Z", Px(last.0), Px(y(0.0)));
        if let Some((id, fill, opacity)) = &trace.area {
            let mut attributes: Vec<(&str, &dyn Display)> = vec![
                ("id", id),
                ("d", &area),
                ("fill", fill),
                ("stroke", &"none"),
            ];
            if let Some(opacity) = opacity {
                attributes.push(("fill-opacity", opacity));
            }
            w.empty("path", &attributes);
        }
        w.empty(
            "polyline",
            &[
                ("id", &trace.id),
                ("points", &line.trim_end()),
                ("fill", &"none"),
                ("stroke", &trace.stroke),
                ("stroke-width", &1.5),
            ],
        );
    }
    time_axis(w, frame, plot_bottom, top + PANEL - 10.0);
    w.empty(
        "rect",
        &[
            ("x", &LEFT),
            ("y", &Px(plot_top)),
            ("width", &Px(WIDTH - LEFT - RIGHT)),
            ("height", &Px(plot_bottom - plot_top)),
            ("fill", &"none"),
            ("stroke", &"#888"),
        ],
    );
    w.close("g");
}

/// A unit panel's title: its lines' names and how its figures read
/// (`open descriptors, a count`, `memory pressure, in percent of the time`).
pub(crate) fn title(steps: &Steps) -> String {
    let names: Vec<&str> = steps.lines.iter().map(|l| l.name).collect();
    let unit = match steps.unit {
        Unit::Count => "a count".to_owned(),
        Unit::Share => "in percent of the time".to_owned(),
        Unit::Seconds => "in seconds".to_owned(),
        Unit::Cores => "in cores".to_owned(),
        other => format!("in {}", other.name()),
    };
    format!("{}, {unit}", names.join(", "))
}

/// A tick of a unit panel's axis as a person reads it: `12`, `25%`, `1.5 s`.
fn tick_label(unit: Unit, tick: f64) -> String {
    match unit {
        Unit::Share => format!("{}%", trim_number(tick * 100.0)),
        Unit::Seconds => format!("{} s", trim_number(tick)),
        Unit::Cores => format!("{} cores", trim_number(tick)),
        _ => trim_number(tick),
    }
}

/// Draws the panel of one unit's lines from `top` down: a share from 0 to 100 %, a
/// count on whole ticks, any other from 0 to a round figure over its highest.
pub(super) fn unit(w: &mut Writer, chart: &Chart, frame: &Frame, top: f64, steps: &Steps) {
    let most = steps
        .lines
        .iter()
        .flat_map(|l| &l.steps)
        .map(|s| s.value)
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let (step, scale) = match steps.unit {
        Unit::Share => (0.25, 1.0),
        Unit::Count => {
            let step = axis(most.max(1.0)).0.max(1.0);
            (step, ((most.max(1.0) * 1.1 / step).ceil() * step).max(step))
        }
        _ => axis(if most > 0.0 { most } else { 1.0 }),
    };
    let alone = steps.lines.len() == 1;
    let traces = steps
        .lines
        .iter()
        .map(|line| Trace {
            id: line.id,
            corners: corners(&line.steps, |v| v),
            stroke: line.colour,
            area: alone.then(|| (format!("{}-area", line.id), line.colour, Some(0.35))),
        })
        .collect();
    let (id, class) = (
        format!("{}-panel", steps.unit_name),
        format!("{}-tick", steps.unit_name),
    );
    let unit = steps.unit;
    let label = move |tick: f64| tick_label(unit, tick);
    let title = title(steps);
    let panel = Panel {
        id: &id,
        title: &title,
        tick_class: &class,
        scale,
        step,
        label: &label,
        traces,
    };
    draw(w, chart, frame, top, &panel);
}

#[cfg(test)]
mod tests {
    use crate::plot::lines;
    use crate::plot::model::tests::spike_report;
    use crate::plot::model::Chart;
    use crate::plot::svg::render;
    use crate::plot::svg::tests::corners_of;
    use stemmon::Report;
    use stemmon_report::fields::{Series, Unit, SERIES};

    /// The report crate's table, with open descriptors and memory pressure where it does
    /// not declare them yet.
    fn table() -> Vec<Series> {
        let mut table = SERIES.to_vec();
        for extra in [
            Series::new("tree_fds", "open descriptors", Unit::Count),
            Series::new("memory_pressure_some_share", "memory pressure", Unit::Share),
        ] {
            if !table.iter().any(|s| s.key == extra.key) {
                table.push(extra);
            }
        }
        table
    }

    /// The spike report with 12, 40, 7 and no open descriptors and 0, 0.5, 1 and 0.25 of
    /// the time under memory pressure.
    fn with_figures() -> Report {
        let mut report = spike_report();
        let fds = [Some(12.0), Some(40.0), Some(7.0), None];
        let pressure = [0.0, 0.5, 1.0, 0.25];
        for (point, (fds, pressure)) in report
            .timeline
            .iter_mut()
            .zip(fds.into_iter().zip(pressure))
        {
            point.figures.set_number("tree_fds", fds);
            point
                .figures
                .set_number("memory_pressure_some_share", Some(pressure));
        }
        report
    }

    /// The text of the `<g>` with `id`'s title (its first `<text>`) and its tick labels.
    fn panel_text(svg: &str, id: &str) -> (String, Vec<String>) {
        let doc = roxmltree::Document::parse(svg).expect("well-formed");
        let panel = doc
            .descendants()
            .find(|n| n.attribute("id") == Some(id))
            .unwrap_or_else(|| panic!("no #{id}"));
        let texts: Vec<_> = panel
            .descendants()
            .filter(|n| n.has_tag_name("text"))
            .collect();
        let title = texts[0].text().unwrap_or_default().to_owned();
        let ticks = texts
            .iter()
            .filter(|n| n.attribute("class").is_some_and(|c| c.ends_with("-tick")))
            .map(|n| n.text().unwrap_or_default().to_owned())
            .collect();
        (title, ticks)
    }

    #[test]
    fn each_unit_of_the_table_with_figures_has_a_panel_under_the_cpu_panel() {
        let chart = Chart::with_lines(&with_figures(), &lines::of(&table())).unwrap();
        let svg = render(&chart, true);
        assert!(
            svg.contains("height=\"1160\""),
            "memory, CPU and two panels"
        );
        let (cpu, count, share) = (
            svg.find("id=\"cpu-panel\"").unwrap(),
            svg.find("id=\"count-panel\"").unwrap(),
            svg.find("id=\"share-panel\"").unwrap(),
        );
        assert!(
            cpu < count && count < share,
            "in the table's order, after CPU"
        );
        let (title, ticks) = panel_text(&svg, "count-panel");
        assert_eq!(title, "open descriptors, a count");
        assert_eq!(ticks, ["0", "20", "40", "60"]);
        let (title, ticks) = panel_text(&svg, "share-panel");
        assert_eq!(title, "memory pressure, in percent of the time");
        assert_eq!(ticks, ["0%", "25%", "50%", "75%", "100%"]);
        // Sampled: each reading at its instant, the lower one between two; the fourth
        // point has no descriptors, so the line ends at 2.03 s.
        let fds = corners_of(&svg, "tree_fds");
        let x = |t: f64| 80.0 + t / 3.04 * 990.0;
        // The count panel's plot runs from y = 786 (60) to 914 (0).
        let y = |v: f64| 914.0 - v / 60.0 * 128.0;
        let expected = [
            (0.05, 12.0),
            (0.05, 12.0),
            (0.05, 12.0),
            (1.05, 12.0),
            (1.05, 40.0),
            (1.05, 40.0),
            (1.05, 7.0),
            (2.03, 7.0),
            (2.03, 7.0),
            (2.03, 7.0),
        ];
        assert_eq!(fds.len(), expected.len(), "{fds:?}");
        for ((px, py), (t, v)) in fds.iter().zip(expected) {
            assert!(
                (px - x(t)).abs() < 0.1 && (py - y(v)).abs() < 0.1,
                "{fds:?}"
            );
        }
        assert!(
            svg.contains("id=\"tree_fds-area\""),
            "a lone line has its area"
        );
        // The share panel from 0 (y = 1114) to 100 % (y = 986).
        let pressure = corners_of(&svg, "memory_pressure_some_share");
        let top = pressure.iter().map(|c| c.1).fold(f64::MAX, f64::min);
        let bottom = pressure.iter().map(|c| c.1).fold(f64::MIN, f64::max);
        assert!(
            (top - 986.0).abs() < 0.1 && (bottom - 1114.0).abs() < 0.1,
            "{pressure:?}"
        );
    }

    #[test]
    fn a_unit_no_point_has_a_figure_in_has_no_panel() {
        let lines = lines::of(&table());
        let svg = render(&Chart::with_lines(&spike_report(), &lines).unwrap(), true);
        assert!(!svg.contains("count-panel") && !svg.contains("share-panel"));
        assert!(svg.contains("height=\"760\""), "memory and CPU only");
        // The same picture as with the table alone (as today's reports are drawn).
        let today = render(&Chart::new(&spike_report()).unwrap(), true);
        assert_eq!(svg, today);
        // Descriptors without pressure: the count panel alone.
        let mut report = with_figures();
        for point in &mut report.timeline {
            point.figures.set_number("memory_pressure_some_share", None);
        }
        let svg = render(&Chart::with_lines(&report, &lines).unwrap(), true);
        assert!(svg.contains("count-panel") && !svg.contains("share-panel"));
        assert!(svg.contains("height=\"960\""));
    }

    #[test]
    fn the_page_s_data_holds_each_panel_s_steps_for_the_read_out() {
        let chart = Chart::with_lines(&with_figures(), &lines::of(&table())).unwrap();
        let page = crate::plot::html::render(&chart);
        let start = page.find("<script id=\"data\"").unwrap();
        let json = &page[start..];
        let json = &json[json.find('>').unwrap() + 1..json.find("</script>").unwrap()];
        let data: serde_json::Value = serde_json::from_str(json).unwrap();
        let panels = &data["series"]["panels"];
        assert_eq!(panels[0]["unit"], "count");
        assert_eq!(panels[0]["lines"][0]["name"], "open descriptors");
        assert_eq!(
            panels[0]["lines"][0]["steps"][2],
            serde_json::json!([1.05, 1.05, 40.0, 1])
        );
        assert_eq!(panels[1]["unit"], "share");
        assert_eq!(
            panels[1]["lines"][0]["steps"][4],
            serde_json::json!([2.03, 2.03, 1.0, 2])
        );
        // The memory lines' JSON is as it was: the table's lines in bytes only.
        assert_eq!(data["points"][0]["lines"], serde_json::json!([null, null]));
        assert!(data["points"][0].get("others").is_none());
        assert!(page.contains("open descriptors, a count; memory pressure, in percent"));
        let without = crate::plot::html::render(&Chart::new(&spike_report()).unwrap());
        assert!(!without.contains("\"panels\"") && !without.contains("The panels under it"));
    }
}
