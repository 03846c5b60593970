//! The CPU panel under the memory panel (the book's `cpu-io.md`): the tree's CPU use in cores over
//! the run, from `timeline[].cpu_cores`, on the memory panel's time axis and under the
//! same stage bands, so a stage that kept four cores busy stands apart from one that
//! waited.

use super::frame::{corners, trim_number, Frame};
use super::model::Chart;
use super::panel::{axis, draw, Panel, Trace};
use super::xml::Writer;

/// The colour the CPU area is filled with, also what the Chromium test looks for.
pub(crate) const CPU_COLOUR: &str = "#8172b3";

/// Draws the panel from `top` (the memory panel's bottom edge) down.
pub(super) fn panel(w: &mut Writer, chart: &Chart, frame: &Frame, top: f64) {
    let (step, scale) = axis(chart.most_cores());
    let label = |tick: f64| match trim_number(tick).as_str() {
        "1" => "1 core".to_owned(),
        n => format!("{n} cores"),
    };
    let panel = Panel {
        id: "cpu-panel",
        title: "CPU of the process tree, in cores (user + system over wall time)",
        tick_class: "cpu-tick",
        scale,
        step,
        label: &label,
        // Each figure flat over the interval it covers: since the previous CPU reading.
        traces: vec![Trace {
            id: "cpu",
            corners: corners(&chart.series.cpu, |c| c),
            stroke: "#4b3c8c",
            area: Some(("cpu-area".to_owned(), CPU_COLOUR, None)),
        }],
    };
    draw(w, chart, frame, top, &panel);
}

#[cfg(test)]
mod tests {
    use crate::plot::model::Chart;
    use crate::plot::point::Point;
    use crate::plot::svg::render;

    fn point(start: f64, cpu: Option<f64>) -> Point {
        Point {
            start,
            end: start + 1.0,
            tree: Some(1 << 20),
            parent: None,
            children: None,
            bound: None,
            lines: Vec::new(),
            others: Vec::new(),
            cpu,
        }
    }

    fn chart(points: Vec<Point>) -> Chart {
        Chart::of_points(points, Vec::new(), 4.0)
    }

    #[test]
    fn the_panel_is_drawn_only_with_cpu_figures_and_labelled_in_cores() {
        let without = render(&chart(vec![point(0.0, None), point(1.0, None)]), true);
        assert!(!without.contains("cpu-panel"), "{without}");
        assert!(without.contains("height=\"560\""));
        let with = render(
            &chart(vec![
                point(0.0, Some(0.02)),
                point(1.0, None),
                point(2.0, Some(3.9)),
            ]),
            true,
        );
        assert!(with.contains("id=\"cpu-panel\"") && with.contains("id=\"cpu\""));
        assert!(
            with.contains("height=\"760\""),
            "the picture grows by the panel"
        );
        assert!(with.contains(">4 cores</text>") && with.contains(">0 cores</text>"));
        let doc = roxmltree::Document::parse(&with).expect("well-formed");
        let line = doc
            .descendants()
            .find(|n| n.attribute("id") == Some("cpu"))
            .unwrap();
        // Two corners per point with the reading; the one without is skipped.
        assert_eq!(line.attribute("points").unwrap().split(' ').count(), 4);
    }

    #[test]
    fn cpu_is_drawn_over_the_interval_since_the_previous_sample_not_at_its_end() {
        // Samples at 0.05, 1.05 and 2.03 s: the first has no CPU figure (nothing to
        // measure from); 4 cores is the use over 0.05-1.05 s, 0.5 over 1.05-2.03 s.
        let at = |t: f64, cpu: Option<f64>| Point {
            end: t,
            ..point(t, cpu)
        };
        let chart = chart(vec![
            at(0.05, None),
            at(1.05, Some(4.0)),
            at(2.03, Some(0.5)),
        ]);
        let svg = render(&chart, true);
        let corners = crate::plot::svg::tests::corners_of(&svg, "cpu");
        let top = corners.iter().map(|c| c.1).fold(f64::MAX, f64::min);
        let xs: Vec<f64> = corners.iter().map(|c| c.0).collect();
        let busy: Vec<f64> = corners
            .iter()
            .filter(|c| (c.1 - top).abs() < 0.05)
            .map(|c| c.0)
            .collect();
        // The time axis spans 4 s over 990 px from x = 80.
        let x = |t: f64| 80.0 + t / 4.0 * 990.0;
        assert!(
            busy.len() == 2 && (busy[0] - x(0.05)).abs() < 0.1 && (busy[1] - x(1.05)).abs() < 0.1,
            "4 cores over 0.05-1.05 s: {corners:?}"
        );
        assert!((xs[3] - x(2.03)).abs() < 0.1, "{corners:?}");
    }
}
