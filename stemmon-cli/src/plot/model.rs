//! What the chart shows, taken from a report once: the memory series, the stage bands,
//! the peak and the captions. The SVG is drawn from it, and the HTML page hands it to its
//! script as JSON (serde), so the picture and the read-out never disagree.
//!
//! A report may come from anyone: every time is made finite and non-negative here, sums
//! saturate, and the work is linear in the report's size (no scan per span).

use crate::format::{bytes, command_line, seconds};
use serde::Serialize;
use std::collections::HashMap;
use std::fmt::Write as _;
use stemmon::Report;

/// Stages drawn as lanes: the outermost and their children.
const MAX_DEPTH: usize = 2;

/// One point of the series: [start, end] seconds and the maxima over that interval.
#[derive(Clone, Copy, Debug, Serialize)]
pub(crate) struct Point {
    pub(crate) start: f64,
    pub(crate) end: f64,
    pub(crate) tree: Option<u64>,
    pub(crate) parent: Option<u64>,
    pub(crate) children: Option<u64>,
    /// The kernel's high-water bound over the interval (stemmon 0.2 on).
    pub(crate) bound: Option<u64>,
    /// The highest live heap (stemmon 0.3 with `stemmon::Alloc`).
    pub(crate) heap: Option<u64>,
    /// The highest CPU use of the tree in cores (stemmon 0.3).
    pub(crate) cpu: Option<f64>,
}

impl Point {
    /// Parent and children stacked: their sum, or whichever was read.
    pub(crate) fn stacked(&self) -> Option<u64> {
        match (self.parent, self.children) {
            (Some(a), Some(b)) => Some(a.saturating_add(b)),
            (a, b) => a.or(b),
        }
    }
}

/// Calls of one stage path drawn as a band: its lane (depth), name and interval.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Band {
    pub(crate) depth: usize,
    pub(crate) name: String,
    pub(crate) path: String,
    pub(crate) start: f64,
    pub(crate) end: f64,
}

/// The highest tree RSS: when, how much, in which stage.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Peak {
    pub(crate) at: f64,
    pub(crate) bytes: u64,
    pub(crate) stage: String,
}

impl Peak {
    /// `peak 200.1 MiB in fit/inner at 1.234s`.
    pub(crate) fn label(&self) -> String {
        format!(
            "peak {} in {} at {}",
            bytes(Some(self.bytes)),
            self.stage,
            seconds(self.at)
        )
    }
}

/// Everything the picture shows.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Chart {
    pub(crate) title: String,
    pub(crate) subtitle: String,
    /// Seconds the time axis spans: the run, or further if a point or band does.
    pub(crate) duration: f64,
    pub(crate) points: Vec<Point>,
    pub(crate) bands: Vec<Band>,
    pub(crate) peak: Option<Peak>,
}

/// A time from a report: finite and at least zero.
fn time(seconds: f64) -> f64 {
    if seconds.is_nan() {
        0.0
    } else {
        seconds.clamp(0.0, f64::MAX)
    }
}

impl Chart {
    /// The chart of `report`; `None` when it has nothing to plot (no timeline, no samples).
    pub(crate) fn new(report: &Report) -> Option<Chart> {
        let points = points(report);
        if points.is_empty() {
            return None;
        }
        let bands = bands(report);
        let last = points.iter().map(|p| p.end).fold(0.0, f64::max);
        let band_end = bands.iter().map(|b| b.end).fold(0.0, f64::max);
        let duration = time(report.wall_seconds).max(last).max(band_end).max(1e-3);
        let peak = peak(report, &points);
        let title = match &report.command {
            Some(argv) => format!("stemmon: {}", command_line(argv)),
            None => format!("stemmon: pid {}", report.pid),
        };
        let mut subtitle = format!("wall {}", seconds(time(report.wall_seconds)));
        if let Some(peak) = &peak {
            let _ = write!(
                subtitle,
                "; peak tree RSS {} in {} at {}",
                bytes(Some(peak.bytes)),
                peak.stage,
                seconds(peak.at)
            );
        }
        if let Some(bound) = report.high_water.peak_tree_rss_bound_bytes {
            let _ = write!(subtitle, "; high-water bound {}", bytes(Some(bound)));
        }
        if let Some(peak) = report.heap.peak_live_bytes {
            let _ = write!(subtitle, "; peak live heap {}", bytes(Some(peak)));
        }
        if let Some(cores) = report.cpu_io.cpu_cores {
            let _ = write!(subtitle, "; {cores:.2} cores over the run");
        }
        if !report.host.is_empty() {
            let _ = write!(subtitle, "; host {}", report.host);
        }
        Some(Chart {
            title,
            subtitle,
            duration,
            points,
            bands,
            peak,
        })
    }

    /// Whether a point has the live heap: the memory panel then draws its line.
    pub(crate) fn has_heap(&self) -> bool {
        self.points.iter().any(|p| p.heap.is_some())
    }

    /// Whether a point has CPU in cores: the CPU panel is then drawn under memory.
    pub(crate) fn has_cpu(&self) -> bool {
        self.points.iter().any(|p| p.cpu.is_some())
    }

    /// The most cores a point used, at least 1.
    pub(crate) fn most_cores(&self) -> f64 {
        self.points.iter().filter_map(|p| p.cpu).fold(1.0, f64::max)
    }

    /// How many stage lanes sit above the plot.
    pub(crate) fn lanes(&self) -> usize {
        self.bands.iter().map(|b| b.depth + 1).max().unwrap_or(0)
    }

    /// The highest figure drawn, at least 1 MiB.
    pub(crate) fn highest(&self) -> u64 {
        self.points
            .iter()
            .flat_map(|p| [p.tree, p.bound, p.stacked(), p.heap])
            .flatten()
            .chain(self.peak.as_ref().map(|p| p.bytes))
            .max()
            .unwrap_or(0)
            .max(1 << 20)
    }
}

/// The report's timeline, or (stemmon 0.1) its raw samples.
fn points(report: &Report) -> Vec<Point> {
    if !report.timeline.is_empty() {
        return report
            .timeline
            .iter()
            .map(|p| Point {
                start: time(p.elapsed_seconds),
                end: time(p.end_seconds).max(time(p.elapsed_seconds)),
                tree: p.tree_rss_bytes,
                parent: p.parent_rss_bytes,
                children: p.children_rss_bytes,
                bound: p.tree_rss_bound_bytes,
                heap: p.heap_live_bytes,
                // Checked finite and at most 1e9 by `input`; clamped for `Chart`'s own tests.
                cpu: p.cpu_cores.map(|c| time(c).min(1e9)),
            })
            .collect();
    }
    report
        .recent_samples
        .iter()
        .map(|s| Point {
            start: time(s.elapsed_seconds),
            end: time(s.elapsed_seconds),
            tree: s.tree_rss_bytes,
            parent: s.parent_rss_bytes,
            children: s.children_rss_bytes,
            bound: None,
            heap: None,
            cpu: None,
        })
        .collect()
}

/// The report's peak, or the highest point when it names none.
fn peak(report: &Report, points: &[Point]) -> Option<Peak> {
    match (
        report.peaks.peak_tree_rss_bytes,
        report.peak_rss_elapsed_seconds,
    ) {
        (Some(bytes), Some(at)) => Some(Peak {
            at: time(at),
            bytes,
            stage: report
                .peak_rss_stage
                .clone()
                .unwrap_or_else(|| "workflow".into()),
        }),
        _ => points
            .iter()
            .filter_map(|p| p.tree.map(|t| (p.start, t)))
            .max_by_key(|(_, t)| *t)
            .map(|(at, bytes)| Peak {
                at,
                bytes,
                stage: "workflow".to_owned(),
            }),
    }
}

/// How deep stage `id` sits, counted up to `MAX_DEPTH` (a parent cycle ends there too).
fn depth_of(report: &Report, id: u32) -> usize {
    let mut depth = 0;
    let mut parent = report.stages.get(id as usize).and_then(|s| s.parent_id);
    while let Some(id) = parent {
        depth += 1;
        if depth >= MAX_DEPTH {
            break;
        }
        parent = report.stages.get(id as usize).and_then(|s| s.parent_id);
    }
    depth
}

/// Stage calls to draw, two lanes deep: the kept spans, or (0.1) stages entered once.
/// Overlapping or touching calls of one path (threads, back-to-back calls) are one band.
fn bands(report: &Report) -> Vec<Band> {
    let mut calls: Vec<(u32, f64, f64)> = if report.spans.is_empty() {
        report
            .stages
            .iter()
            .filter(|s| s.calls == 1)
            .map(|s| (s.id, s.start_seconds, s.wall_seconds))
            .collect()
    } else {
        report
            .spans
            .iter()
            .map(|s| (s.stage_id, s.start_seconds, s.wall_seconds))
            .collect()
    };
    calls.sort_by(|a, b| time(a.1).total_cmp(&time(b.1)));
    let mut bands: Vec<Band> = Vec::new();
    // The last band of each path: calls come in order of start, so only it can overlap.
    let mut last_of: HashMap<&str, usize> = HashMap::new();
    for (id, start, wall) in calls {
        let Some(stage) = report.stages.get(id as usize) else {
            continue;
        };
        let depth = depth_of(report, id);
        if depth >= MAX_DEPTH {
            continue;
        }
        let start = time(start);
        let end = time(start + time(wall));
        if let Some(&index) = last_of.get(stage.path.as_str()) {
            let band = &mut bands[index];
            if band.end >= start {
                band.end = band.end.max(end);
                continue;
            }
        }
        last_of.insert(&stage.path, bands.len());
        bands.push(Band {
            depth,
            name: stage.name.clone(),
            path: stage.path.clone(),
            start,
            end,
        });
    }
    bands
}

#[cfg(test)]
mod tests {
    use super::*;
    use stemmon::report::{Span, StageReport, TimelinePoint};

    fn stage(id: u32, name: &str, path: &str, parent: Option<u32>) -> StageReport {
        let mut stage = StageReport::default();
        stage.id = id;
        stage.name = name.into();
        stage.path = path.into();
        stage.parent_id = parent;
        stage
    }

    fn span(stage_id: u32, start: f64, wall: f64) -> Span {
        let mut span = Span::default();
        span.stage_id = stage_id;
        span.start_seconds = start;
        span.wall_seconds = wall;
        span
    }

    #[test]
    fn calls_of_one_path_that_touch_are_one_band_and_deep_stages_no_lane() {
        let mut report = Report::default();
        report.stages = vec![
            stage(0, "fit", "fit", None),
            stage(1, "inner", "fit/inner", Some(0)),
            stage(2, "deep", "fit/inner/deep", Some(1)),
        ];
        report.spans = vec![
            span(0, 3.0, 1.0),
            span(0, 0.0, 1.0),
            span(0, 0.5, 1.0),
            span(1, 0.2, 0.1),
            span(2, 0.2, 0.1),
        ];
        let bands = bands(&report);
        let summary: Vec<(&str, usize, f64, f64)> = bands
            .iter()
            .map(|b| (b.path.as_str(), b.depth, b.start, b.end))
            .collect();
        assert_eq!(
            summary,
            [
                ("fit", 0, 0.0, 1.5),
                ("fit/inner", 1, 0.2, 0.30000000000000004),
                ("fit", 0, 3.0, 4.0)
            ]
        );
    }

    #[test]
    fn hostile_figures_stay_finite_and_sums_saturate() {
        let mut report = Report::default();
        report.wall_seconds = 1e308;
        report.stages = vec![stage(0, "a", "a", Some(0))]; // Its own parent.
        report.spans = vec![span(0, 1e308, 1e308), span(0, -5.0, f64::MAX)];
        let mut point = TimelinePoint::default();
        point.elapsed_seconds = -1.0;
        point.end_seconds = f64::MAX;
        point.parent_rss_bytes = Some(u64::MAX);
        point.children_rss_bytes = Some(u64::MAX);
        report.timeline = vec![point];
        let chart = Chart::new(&report).unwrap();
        assert!(chart.duration.is_finite());
        assert!(chart
            .bands
            .iter()
            .all(|b| b.start.is_finite() && b.end.is_finite()));
        assert_eq!(chart.highest(), u64::MAX);
        assert_eq!(chart.points[0].start, 0.0);
    }

    #[test]
    fn nothing_to_plot_is_none() {
        assert!(Chart::new(&Report::default()).is_none());
    }
}
