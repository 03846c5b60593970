//! The series as drawn: each figure of the timeline's points as steps, at the times
//! it covers.
//!
//! A timeline point spans `[elapsed_seconds, end_seconds]`: its first and last reading
//! (a merged point, or one raised by stage-boundary readings, spans several). Every
//! series is drawn as steps, each holding one point's maximum flat over the time it
//! covers, never as a ramp between two points:
//!
//! - **Sampled figures** (tree, parent and children RSS, the lines of the table
//!   ([`super::lines`]): live heap, the tree's GPU memory, and those of the panels under
//!   the memory panel) are maxima of
//!   instantaneous readings taken within the point's span, the one that gave the maximum
//!   anywhere in it. A point's maximum is drawn flat over its span, and nowhere else:
//!   between one point's end and the next one's start nothing was read, and the line
//!   stays at the lower of the two. A spike read at 1.05 s is drawn at 1.05 s, not up to
//!   the next sample; a point spanning 4-6 s is drawn from 4 to 6 s, so it never paints
//!   into a stage that ended at 4 s; and the tree line never rises over the bound of the
//!   time it is drawn in (the bound of an interval is at least every reading in it).
//! - **Interval figures** (the high-water bound, CPU in cores) cover the time since the
//!   previous reading of the same figure: from the end of the previous point that has it
//!   to this point's end. The first bound covers the run from 0 (the marks count from
//!   the start), the first CPU figure from the first point's start (the first sample,
//!   which has none, is where CPU is first read).

use super::lines::{on_memory, panel_units, Line};
use super::point::Point;
use serde::ser::{SerializeTuple, Serializer};
use serde::Serialize;
use stemmon_report::fields::Unit;

/// One step of a drawn series: `value` held flat from `from` to `to` seconds, taken from
/// `points[point]`. Written to the page's JSON as `[from, to, value, point]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Step<T> {
    pub(crate) from: f64,
    pub(crate) to: f64,
    pub(crate) value: T,
    pub(crate) point: usize,
}

impl<T: Serialize> Serialize for Step<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut tuple = serializer.serialize_tuple(4)?;
        tuple.serialize_element(&self.from)?;
        tuple.serialize_element(&self.to)?;
        tuple.serialize_element(&self.value)?;
        tuple.serialize_element(&self.point)?;
        tuple.end()
    }
}

/// Steps of a sampled figure: each point's maximum flat over its own span, and between
/// two points the lower of their two (see the module docs). A gap's step names the
/// point whose figure it holds.
pub(crate) fn sampled<T: Copy + PartialOrd>(
    points: &[Point],
    value: impl Fn(&Point) -> Option<T>,
) -> Vec<Step<T>> {
    let read: Vec<(usize, T)> = points
        .iter()
        .enumerate()
        .filter_map(|(i, p)| value(p).map(|v| (i, v)))
        .collect();
    let mut out = Vec::with_capacity(read.len() * 2);
    for (k, &(i, value)) in read.iter().enumerate() {
        let (from, to) = (points[i].start, points[i].end);
        out.push(Step {
            from,
            to,
            value,
            point: i,
        });
        if let Some(&(next, next_value)) = read.get(k + 1) {
            let (value, point) = if next_value < value {
                (next_value, next)
            } else {
                (value, i)
            };
            out.push(Step {
                from: to,
                to: points[next].start.max(to),
                value,
                point,
            });
        }
    }
    out
}

/// Steps of an interval figure: each covers the time since the previous reading of the
/// figure (the first since `origin`) up to its point's end (see the module docs).
pub(crate) fn interval<T: Copy>(
    points: &[Point],
    value: impl Fn(&Point) -> Option<T>,
    origin: f64,
) -> Vec<Step<T>> {
    let mut from = origin;
    let mut out = Vec::new();
    for (i, point) in points.iter().enumerate() {
        if let Some(value) = value(point) {
            out.push(Step {
                from: from.min(point.end),
                to: point.end,
                value,
                point: i,
            });
            from = point.end;
        }
    }
    out
}

/// One line of the table as drawn: written to the page's JSON as `{id, name, steps}`.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Drawn<T> {
    /// Its SVG element's `id`.
    pub(crate) id: &'static str,
    /// Its name in the legend or panel title and the read-out.
    pub(crate) name: &'static str,
    /// The colour it is drawn in.
    #[serde(skip)]
    pub(crate) colour: &'static str,
    /// Its steps (sampled).
    pub(crate) steps: Vec<Step<T>>,
}

/// A panel under the memory panel: the lines of the table in one unit other than bytes
/// that some point has, written to the page's JSON as `{unit, title, lines}`.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Panel {
    /// The unit's name (`count`, `share`, `seconds`, `cores`): how the read-out shows a
    /// figure.
    #[serde(rename = "unit")]
    pub(crate) unit_name: &'static str,
    /// The unit.
    #[serde(skip)]
    pub(crate) unit: Unit,
    /// Its lines that some point has, in the table's order.
    pub(crate) lines: Vec<Drawn<f64>>,
}

/// Every series as drawn, by the rules of the module docs.
#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct Series {
    /// Tree RSS (sampled).
    pub(crate) tree: Vec<Step<u64>>,
    /// Parent RSS, the floor of the stacked area (sampled; 0 where only children were
    /// read). Its steps pair up one for one with `stacked`'s.
    pub(crate) parent: Vec<Step<u64>>,
    /// Parent plus children RSS, the top of the stacked area (sampled).
    pub(crate) stacked: Vec<Step<u64>>,
    /// The high-water bound (an interval figure).
    pub(crate) bound: Vec<Step<u64>>,
    /// The memory panel's lines (the table's in bytes), in its order (sampled); a line
    /// no point has holds no step.
    pub(crate) lines: Vec<Drawn<u64>>,
    /// CPU in cores (an interval figure).
    pub(crate) cpu: Vec<Step<f64>>,
    /// The panels under the memory panel, one a unit that some point has a figure in
    /// (none for a report without such series: the page's JSON then has no key).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) panels: Vec<Panel>,
}

/// `line` as drawn with `steps`.
fn drawn<T>(line: &Line, steps: Vec<Step<T>>) -> Drawn<T> {
    Drawn {
        id: line.id,
        name: line.name,
        colour: line.colour,
        steps,
    }
}

impl Series {
    /// The series of `points`, which are in order of start and hold the figures of
    /// `lines` (those in bytes in `lines`, the others in `others`, in their order).
    pub(crate) fn of(points: &[Point], lines: &[Line]) -> Series {
        let cpu_origin = points.first().map_or(0.0, |p| p.start);
        let (memory, others): (Vec<&Line>, Vec<&Line>) = lines.iter().partition(|l| on_memory(l));
        let others: Vec<Drawn<f64>> = others
            .iter()
            .enumerate()
            .map(|(i, line)| {
                drawn(
                    line,
                    sampled(points, |p| p.others.get(i).copied().flatten()),
                )
            })
            .collect();
        let panels = panel_units(lines)
            .into_iter()
            .map(|unit| Panel {
                unit_name: unit.name(),
                unit,
                lines: lines
                    .iter()
                    .filter(|l| !on_memory(l))
                    .zip(&others)
                    .filter(|(line, drawn)| line.unit() == unit && !drawn.steps.is_empty())
                    .map(|(_, drawn)| drawn.clone())
                    .collect(),
            })
            .filter(|panel| !panel.lines.is_empty())
            .collect();
        Series {
            tree: sampled(points, |p| p.tree),
            parent: sampled(points, |p| p.stacked().map(|_| p.parent.unwrap_or(0))),
            stacked: sampled(points, Point::stacked),
            bound: interval(points, |p| p.bound, 0.0),
            lines: memory
                .iter()
                .enumerate()
                .map(|(i, line)| {
                    drawn(line, sampled(points, |p| p.lines.get(i).copied().flatten()))
                })
                .collect(),
            cpu: interval(points, |p| p.cpu, cpu_origin),
            panels,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plot::model::tests::{spike_report, MIB};
    use crate::plot::model::Chart;

    #[test]
    fn each_series_covers_the_time_its_rule_says() {
        let chart = Chart::new(&spike_report()).unwrap();
        let spans = |steps: &[Step<u64>]| -> Vec<(f64, f64, u64)> {
            steps
                .iter()
                .map(|s| (s.from, s.to, s.value / (MIB / 10)))
                .collect()
        };
        // Each reading at its instant; between two, the lower of them.
        assert_eq!(
            spans(&chart.series.tree),
            [
                (0.05, 0.05, 33),
                (0.05, 1.05, 33),
                (1.05, 1.05, 3000),
                (1.05, 2.03, 33),
                (2.03, 2.03, 33),
                (2.03, 3.04, 33),
                (3.04, 3.04, 33)
            ]
        );
        assert_eq!(
            spans(&chart.series.bound),
            [
                (0.0, 0.05, 33),
                (0.05, 1.05, 3000),
                (1.05, 2.03, 3200),
                (2.03, 3.04, 33)
            ]
        );
        let cpu: Vec<(f64, f64, f64)> = chart
            .series
            .cpu
            .iter()
            .map(|s| (s.from, s.to, s.value))
            .collect();
        assert_eq!(
            cpu,
            [(0.05, 1.05, 4.0), (1.05, 2.03, 0.5), (2.03, 3.04, 0.5)]
        );
        // A point without a reading hands its time to the next one that has it.
        let mut report = spike_report();
        report.timeline[2].tree_rss_bytes = None;
        report.timeline[2].cpu_cores = None;
        let chart = Chart::new(&report).unwrap();
        assert_eq!(spans(&chart.series.tree)[3], (1.05, 3.04, 33));
        assert_eq!(
            (chart.series.cpu[1].from, chart.series.cpu[1].to),
            (1.05, 3.04)
        );
    }

    #[test]
    fn the_tree_line_never_rises_over_the_bound_of_the_time_it_is_drawn_in() {
        // A sampler held up for 0.4 s (a loaded machine): the point read at 0.979 s was
        // raised by a stage boundary at 1.152 s; the kernel's bound of 1.152-1.551 s says
        // the tree stayed at or under 30 MiB there.
        let point = |start: f64, end: f64, tree: u64, bound: u64| Point {
            start,
            end,
            tree: Some(tree * MIB),
            parent: Some(tree * MIB),
            children: Some(0),
            bound: Some(bound * MIB),
            lines: Vec::new(),
            others: Vec::new(),
            cpu: None,
        };
        let points = vec![
            point(0.9, 0.9, 70, 70),
            point(0.979, 1.152, 42, 70),
            point(1.551, 1.551, 30, 30),
            point(1.583, 1.583, 35, 36),
        ];
        let series = Series::of(&points, &crate::plot::lines::all());
        for tree in &series.tree {
            let over: Vec<&Step<u64>> = series
                .bound
                .iter()
                .filter(|b| {
                    let inside = b.from < tree.to && tree.from < b.to;
                    let at = tree.from == tree.to && b.from < tree.from && tree.from <= b.to;
                    (inside || at) && b.value < tree.value
                })
                .collect();
            assert!(over.is_empty(), "tree {tree:?} over the bound {over:?}");
        }
    }
}
