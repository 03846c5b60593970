//! The picture, drawn from a [`Chart`]: tree RSS over the run as parent and children
//! stacked, the tree line, the dashed high-water bound, stage bands and lanes with their
//! names, the peak marked and labelled (a circle at an instant, a bar over an interval);
//! every series in steps over the times [`super::model`] says it covers; the memory
//! panel's lines ([`super::lines`], the table's series in bytes) where the timeline has
//! them (the live heap, the tree's GPU memory) and, under it, the CPU panel
//! ([`super::cpu`]) and a panel for each other unit the timeline has figures in
//! ([`super::panel`]).
//!
//! Elements are written by [`Writer`](super::xml::Writer), which escapes every attribute
//! value and text: nothing from a report reaches the SVG raw.

use super::colour::{
    BOUND_COLOUR, CHILDREN_COLOUR, LANE_COLOURS, PARENT_COLOUR, PEAK_COLOUR, TREE_COLOUR,
};
use super::frame::{
    corners, time_axis, trim_number, Frame, BOTTOM, HEIGHT, LANE, LEFT, RIGHT, TOP, WIDTH,
};
use super::mark::PeakKind;
use super::model::Chart;
use super::panel::PANEL;
use super::series::Step;
use super::xml::{Px, Writer};
use crate::format::seconds;
use std::fmt::{Display, Write as _};

/// The whole picture; `standalone` adds the XML declaration and namespace for a file of
/// its own (inline in HTML it needs neither).
pub(crate) fn render(chart: &Chart, standalone: bool) -> String {
    let frame = Frame::of(chart);
    let height = height(chart);
    let mut w = Writer::default();
    if standalone {
        w.out
            .push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    }
    let view_box = format!("0 0 {WIDTH} {height}");
    let mut attributes: Vec<(&str, &dyn Display)> = vec![
        ("id", &"chart"),
        ("width", &WIDTH),
        ("height", &height),
        ("viewBox", &view_box),
        ("font-family", &"sans-serif"),
        ("font-size", &12),
        ("role", &"img"),
        ("aria-label", &chart.title),
    ];
    if standalone {
        attributes.insert(0, ("xmlns", &"http://www.w3.org/2000/svg"));
    }
    w.open("svg", &attributes);
    w.out.push('\n');
    w.empty(
        "rect",
        &[("width", &WIDTH), ("height", &height), ("fill", &"#ffffff")],
    );
    w.text(
        "text",
        &[
            ("x", &LEFT),
            ("y", &24),
            ("font-size", &16),
            ("font-weight", &"bold"),
        ],
        &chart.title,
    );
    w.text(
        "text",
        &[("x", &LEFT), ("y", &44), ("fill", &"#444")],
        &chart.subtitle,
    );
    legend(&mut w, chart);
    bands(&mut w, chart, &frame);
    axes(&mut w, &frame);
    series(&mut w, chart, &frame);
    super::annotate::marks(&mut w, chart, &frame);
    let plot_bottom = HEIGHT - BOTTOM;
    w.empty(
        "rect",
        &[
            ("x", &LEFT),
            ("y", &Px(frame.top)),
            ("width", &Px(WIDTH - LEFT - RIGHT)),
            ("height", &Px(plot_bottom - frame.top)),
            ("fill", &"none"),
            ("stroke", &"#888"),
        ],
    );
    let mut top = HEIGHT;
    if chart.has_cpu() {
        super::cpu::panel(&mut w, chart, &frame, top);
        top += PANEL;
    }
    for panel in &chart.series.panels {
        super::panel::unit(&mut w, chart, &frame, top, panel);
        top += PANEL;
    }
    w.close("svg");
    w.out
}

/// The picture's height: the memory panel, and the CPU panel and the unit panels under
/// it when drawn.
pub(crate) fn height(chart: &Chart) -> f64 {
    let under = usize::from(chart.has_cpu()) + chart.series.panels.len();
    HEIGHT + PANEL * under as f64
}

fn legend(w: &mut Writer, chart: &Chart) {
    let mut items = vec![
        ("parent RSS", PARENT_COLOUR, None),
        ("children RSS", CHILDREN_COLOUR, None),
        ("tree RSS", TREE_COLOUR, Some("")),
        ("high-water bound", BOUND_COLOUR, Some("6 4")),
    ];
    for line in chart.series.lines.iter().filter(|l| !l.steps.is_empty()) {
        items.push((line.name, line.colour, Some("")));
    }
    let mut x = LEFT;
    for (name, colour, line) in items {
        match line {
            None => w.empty(
                "rect",
                &[
                    ("x", &x),
                    ("y", &60),
                    ("width", &14),
                    ("height", &12),
                    ("fill", &colour),
                ],
            ),
            Some(dash) => w.empty(
                "line",
                &[
                    ("x1", &x),
                    ("x2", &(x + 14.0)),
                    ("y1", &66),
                    ("y2", &66),
                    ("stroke", &colour),
                    ("stroke-width", &2),
                    (
                        "stroke-dasharray",
                        &if dash.is_empty() { "none" } else { dash },
                    ),
                ],
            ),
        }
        w.text("text", &[("x", &(x + 20.0)), ("y", &71)], name);
        x += 30.0 + name.len() as f64 * 7.0;
    }
    // The same sign as on the plot: a circle for an instant, a bar for an interval.
    let over_interval = chart
        .peak
        .as_ref()
        .and_then(|p| p.when)
        .is_some_and(|(from, to)| to > from);
    if over_interval {
        super::annotate::bar(w, x, x + 12.0, 66.0, PEAK_COLOUR, "");
    } else {
        w.empty(
            "circle",
            &[
                ("cx", &(x + 6.0)),
                ("cy", &66),
                ("r", &5),
                ("fill", &"none"),
                ("stroke", &PEAK_COLOUR),
                ("stroke-width", &2),
            ],
        );
    }
    let peak = match chart.peak.as_ref().map(|p| p.kind) {
        Some(PeakKind::Exact) => "exact peak",
        _ => "sampled peak",
    };
    w.text("text", &[("x", &(x + 16.0)), ("y", &71)], peak);
    if !chart.bands.is_empty() {
        w.text(
            "text",
            &[
                ("x", &Px(LEFT - 6.0)),
                ("y", &Px(TOP + LANE - 8.0)),
                ("text-anchor", &"end"),
                ("fill", &"#444"),
            ],
            "stages",
        );
    }
}

/// Full-height bands for the outermost stages, then a lane per depth with the names.
fn bands(w: &mut Writer, chart: &Chart, frame: &Frame) {
    let plot_bottom = HEIGHT - BOTTOM;
    super::panel::outer_bands(w, chart, frame, frame.top, plot_bottom);
    let mut colour_of: std::collections::HashMap<&str, usize> = Default::default();
    for band in &chart.bands {
        let (x0, x1) = (frame.x(band.start), frame.x(band.end));
        let lane_y = TOP + LANE * band.depth as f64 - 4.0;
        let next = colour_of.len();
        let colour = *colour_of.entry(band.path.as_str()).or_insert(next);
        w.open(
            "rect",
            &[
                ("class", &"lane"),
                ("x", &Px(x0)),
                ("y", &Px(lane_y)),
                ("width", &Px((x1 - x0).max(1.0))),
                ("height", &Px(LANE - 2.0)),
                ("fill", &LANE_COLOURS[colour % LANE_COLOURS.len()]),
                ("stroke", &"#ffffff"),
            ],
        );
        let title = format!("{} ({})", band.path, seconds(band.end - band.start));
        w.text("title", &[], &title);
        w.close("rect");
        // A name only where it fits (about 7 px a character).
        let room = ((x1 - x0 - 6.0) / 7.0).floor();
        if room >= 2.0 {
            let mut name: String = band.name.chars().take(room as usize).collect();
            if name.len() < band.name.len() {
                name.pop();
                name.push('…');
            }
            w.text(
                "text",
                &[
                    ("x", &Px(x0 + 3.0)),
                    ("y", &Px(lane_y + LANE - 6.0)),
                    ("font-size", &11),
                ],
                &name,
            );
        }
    }
}

/// The memory grid and labels, the time ticks.
fn axes(w: &mut Writer, frame: &Frame) {
    let plot_bottom = HEIGHT - BOTTOM;
    let (unit, unit_name) = frame.unit;
    let mut tick = 0.0;
    while tick <= frame.scale / unit + 1e-9 {
        let y = frame.y(tick * unit);
        w.empty(
            "line",
            &[
                ("x1", &LEFT),
                ("x2", &Px(WIDTH - RIGHT)),
                ("y1", &Px(y)),
                ("y2", &Px(y)),
                ("stroke", &"#dddddd"),
            ],
        );
        w.text(
            "text",
            &[
                ("x", &Px(LEFT - 6.0)),
                ("y", &Px(y + 4.0)),
                ("text-anchor", &"end"),
            ],
            &format!("{} {unit_name}", trim_number(tick)),
        );
        tick += frame.step;
    }
    time_axis(w, frame, plot_bottom, HEIGHT - 10.0);
}

/// Memory steps as (seconds, bytes) corners (bytes as `f64`: only drawn, never summed).
fn byte_corners(steps: &[Step<u64>]) -> Vec<(f64, f64)> {
    corners(steps, |v| v as f64)
}

/// Parent, children stacked on it, the tree line and the dashed bound.
fn series(w: &mut Writer, chart: &Chart, frame: &Frame) {
    let series = &chart.series;
    let parent = byte_corners(&series.parent);
    let stacked = byte_corners(&series.stacked);
    area(w, frame, &stacked, &parent, CHILDREN_COLOUR, "children");
    area(w, frame, &parent, &[], PARENT_COLOUR, "parent");
    line(
        w,
        frame,
        &byte_corners(&series.tree),
        TREE_COLOUR,
        "none",
        "tree",
    );
    line(
        w,
        frame,
        &byte_corners(&series.bound),
        BOUND_COLOUR,
        "6 4",
        "bound",
    );
    for drawn in &series.lines {
        line(
            w,
            frame,
            &byte_corners(&drawn.steps),
            drawn.colour,
            "none",
            drawn.id,
        );
    }
}

/// The area between `upper` and `lower` (the floor, unless they pair up point for point).
fn area(
    w: &mut Writer,
    frame: &Frame,
    upper: &[(f64, f64)],
    lower: &[(f64, f64)],
    colour: &str,
    id: &str,
) {
    if upper.is_empty() {
        return;
    }
    let mut path = String::new();
    for (i, (t, v)) in upper.iter().enumerate() {
        let corner = if i == 0 { 'M' } else { 'L' };
        let _ = write!(path, "{corner}{},{} ", Px(frame.x(*t)), Px(frame.y(*v)));
    }
    if lower.len() == upper.len() {
        for (t, v) in lower.iter().rev() {
            let _ = write!(path, "L{},{} ", Px(frame.x(*t)), Px(frame.y(*v)));
        }
    } else {
        for (t, _) in upper.iter().rev() {
            let _ = write!(path, "L{},{} ", Px(frame.x(*t)), Px(frame.y(0.0)));
        }
    }
    path.push('Z');
    w.empty(
        "path",
        &[
            ("id", &id),
            ("d", &path),
            ("fill", &colour),
            ("stroke", &"none"),
        ],
    );
}

fn line(w: &mut Writer, frame: &Frame, series: &[(f64, f64)], colour: &str, dash: &str, id: &str) {
    if series.is_empty() {
        return;
    }
    let mut points = String::new();
    for (t, v) in series {
        let _ = write!(points, "{},{} ", Px(frame.x(*t)), Px(frame.y(*v)));
    }
    w.empty(
        "polyline",
        &[
            ("id", &id),
            ("points", &points.trim_end()),
            ("fill", &"none"),
            ("stroke", &colour),
            ("stroke-width", &1.8),
            ("stroke-dasharray", &dash),
        ],
    );
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::plot::model::Band;
    use crate::plot::point::Point;

    #[test]
    fn a_hostile_stage_name_cannot_break_the_svg() {
        let mut chart = Chart::of_points(
            vec![Point {
                start: 0.0,
                end: 2.0,
                tree: Some(3 << 20),
                parent: Some(2 << 20),
                children: Some(1 << 20),
                bound: Some(4 << 20),
                lines: vec![Some(1 << 20), Some(2 << 20)],
                others: Vec::new(),
                cpu: Some(2.0),
            }],
            vec![Band {
                depth: 0,
                name: "x\"/><script>".into(),
                path: "x\"/><script>\u{1}".into(),
                start: 0.0,
                end: 2.0,
            }],
            2.0,
        );
        chart.title = "stemmon: </svg><script>alert(1)</script>".into();
        chart.subtitle = "host \u{7}".into();
        let svg = render(&chart, true);
        assert!(!svg.contains("<script"), "{svg}");
        assert!(!svg.contains("</svg><"), "{svg}");
        let controls = svg.chars().filter(|c| c.is_control() && *c != '\n').count();
        assert_eq!(controls, 0);
        assert!(svg.ends_with("</svg>\n"));
    }

    const MIB: u64 = 1 << 20;

    /// A single-sample point at `at` with tree (= parent) RSS `mib`, `bound_mib` for the
    /// interval since the previous reading, and `heap_mib` live heap.
    fn sample(at: f64, mib: u64, bound_mib: u64, heap_mib: u64) -> Point {
        Point {
            start: at,
            end: at,
            tree: Some(mib * MIB),
            parent: Some(mib * MIB),
            children: Some(0),
            bound: Some(bound_mib * MIB),
            lines: vec![Some(heap_mib * MIB), None],
            others: Vec::new(),
            cpu: None,
        }
    }

    /// The (x, y) corners of the element with `id`: a polyline's points or a path's `d`.
    pub(crate) fn corners_of(svg: &str, id: &str) -> Vec<(f64, f64)> {
        let doc = roxmltree::Document::parse(svg).expect("well-formed");
        let node = doc
            .descendants()
            .find(|n| n.attribute("id") == Some(id))
            .unwrap_or_else(|| panic!("no #{id}"));
        let text = node
            .attribute("points")
            .or(node.attribute("d"))
            .unwrap()
            .replace(['M', 'L', 'Z'], " ");
        text.split_whitespace()
            .map(|pair| {
                let (x, y) = pair.split_once(',').unwrap();
                (x.parse().unwrap(), y.parse().unwrap())
            })
            .collect()
    }

    /// Whether every segment between consecutive corners is flat or upright: no ramp.
    fn steps_only(corners: &[(f64, f64)]) -> bool {
        corners
            .windows(2)
            .all(|w| (w[0].0 - w[1].0).abs() < 0.05 || (w[0].1 - w[1].1).abs() < 0.05)
    }

    #[test]
    fn a_spike_read_at_1_05s_rises_at_1_05s_and_is_no_ramp_to_the_next_sample() {
        // A 1 s sampler: the spike is read at 1.05 s; the bound of the interval that ends
        // at 2.03 s saw a higher one between samples.
        let chart = Chart::of_points(
            vec![
                sample(0.05, 10, 10, 5),
                sample(1.05, 300, 300, 5),
                sample(2.03, 10, 320, 5),
                sample(3.04, 10, 10, 5),
            ],
            Vec::new(),
            3.04,
        );
        let frame = Frame::of(&chart);
        let svg = render(&chart, true);
        let tree = corners_of(&svg, "tree");
        assert!(steps_only(&tree), "a ramp in the tree line: {tree:?}");
        let high = frame.y((300 * MIB) as f64);
        let at_spike: Vec<f64> = tree
            .iter()
            .filter(|(_, y)| (y - high).abs() < 0.05)
            .map(|(x, _)| *x)
            .collect();
        let near = |a: f64, b: f64| (a - b).abs() < 0.1;
        assert_eq!(at_spike.len(), 2, "{tree:?}");
        assert!(
            at_spike.iter().all(|x| near(*x, frame.x(1.05))),
            "drawn at 1.05 s, where it was read, and nowhere else: {tree:?}"
        );
        let bound = corners_of(&svg, "bound");
        assert!(steps_only(&bound), "a ramp in the bound: {bound:?}");
        let top = frame.y((320 * MIB) as f64);
        let over: Vec<f64> = bound
            .iter()
            .filter(|(_, y)| (y - top).abs() < 0.05)
            .map(|(x, _)| *x)
            .collect();
        assert!(
            over.len() == 2 && near(over[0], frame.x(1.05)) && near(over[1], frame.x(2.03)),
            "the bound covers the interval since the previous reading: {bound:?}"
        );
        for id in ["parent", "children", "heap"] {
            assert!(steps_only(&corners_of(&svg, id)), "a ramp in #{id}");
        }
    }

    #[test]
    fn a_merged_point_never_paints_into_the_stage_band_that_ended_at_its_start() {
        // `a` ends at 4 s; the point merged from 4 to 6 s holds the high figures of `b`.
        let mut merged = sample(4.0, 400, 400, 300);
        merged.end = 6.0;
        merged.parent = Some(100 * MIB);
        merged.children = Some(300 * MIB);
        let band = |name: &str, start: f64, end: f64| Band {
            depth: 0,
            name: name.into(),
            path: name.into(),
            start,
            end,
        };
        let chart = Chart::of_points(
            vec![sample(3.0, 50, 50, 20), merged, sample(7.0, 50, 50, 20)],
            vec![band("a", 2.0, 4.0), band("b", 4.0, 7.0)],
            7.0,
        );
        let frame = Frame::of(&chart);
        let svg = render(&chart, true);
        let (end_of_a, low) = (frame.x(4.0), frame.y((50 * MIB) as f64));
        for id in ["tree", "heap", "parent", "children"] {
            let corners = corners_of(&svg, id);
            // Flat or upright only: then no corner inside `a` means no paint inside it.
            assert!(steps_only(&corners), "a ramp in #{id}: {corners:?}");
            let inside_a: Vec<&(f64, f64)> = corners
                .iter()
                .filter(|(x, y)| *x < end_of_a - 0.05 && *y < low - 0.05)
                .collect();
            assert!(inside_a.is_empty(), "#{id} paints into `a`: {inside_a:?}");
            let high = corners.iter().map(|c| c.1).fold(f64::MAX, f64::min);
            let rise = corners.iter().find(|c| (c.1 - high).abs() < 0.05).unwrap();
            assert!(
                (rise.0 - end_of_a).abs() < 0.1,
                "#{id} rises at 4 s: {corners:?}"
            );
        }
    }
}
