//! What the chart shows, taken from a report once: the memory series ([`super::series`]),
//! the stage bands, the peak ([`super::mark`]) and the captions. The SVG is drawn from it, and the HTML page hands it to its
//! script as JSON (serde), so the picture and the read-out never disagree.
//!
//! A report may come from anyone: every time is made finite and non-negative here, sums
//! saturate, and the work is linear in the report's size (no scan per span).

use super::lines::{on_memory, Line};
use super::mark::{highest_bound, peak, BoundMark, Peak};
use super::point::{time, Point};
use super::series::Series;
use crate::format::{bytes, command_line, cut_middle, seconds};
use crate::peak::{tree_peak, TreePeak};
use serde::Serialize;
use std::collections::HashMap;
use std::fmt::Write as _;
use stemmon::Report;

/// The most characters of a command in the title.
const TITLE: usize = 100;

/// Stages drawn as lanes: the outermost and their children.
const MAX_DEPTH: usize = 2;

/// Calls of one stage path drawn as a band: its lane (depth), name and interval.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Band {
    pub(crate) depth: usize,
    pub(crate) name: String,
    pub(crate) path: String,
    pub(crate) start: f64,
    pub(crate) end: f64,
}

/// Everything the picture shows.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Chart {
    pub(crate) title: String,
    pub(crate) subtitle: String,
    /// Seconds the time axis spans: the run, or further if a point or band does.
    pub(crate) duration: f64,
    pub(crate) points: Vec<Point>,
    pub(crate) series: Series,
    pub(crate) bands: Vec<Band>,
    pub(crate) peak: Option<Peak>,
    /// Marked where the peak is the sampled one and a bound was read.
    pub(crate) bound: Option<BoundMark>,
}

impl Chart {
    /// The chart of `report`; `None` when it has nothing to plot (no timeline, no samples).
    pub(crate) fn new(report: &Report) -> Option<Chart> {
        Chart::with_lines(report, &super::lines::all())
    }

    /// The chart of `report` with the series of `lines` (the table's, or a test's).
    pub(crate) fn with_lines(report: &Report, lines: &[Line]) -> Option<Chart> {
        let points = points(report, lines);
        if points.is_empty() {
            return None;
        }
        let bands = bands(report);
        let last = points.iter().map(|p| p.end).fold(0.0, f64::max);
        let band_end = bands.iter().map(|b| b.end).fold(0.0, f64::max);
        let duration = time(report.wall_seconds).max(last).max(band_end).max(1e-3);
        let series = Series::of(&points, lines);
        let kind = tree_peak(&report.peaks, &report.high_water, report.peak_process_count);
        let peak = peak(report, kind, &points, &series);
        // A bound no higher than the marked peak adds nothing: the two agree.
        let bound = match kind {
            TreePeak::Exact(_) => None,
            TreePeak::Between { .. } => {
                highest_bound(&series).filter(|b| peak.as_ref().is_none_or(|p| b.bytes > p.bytes))
            }
        };
        let title = match &report.command {
            // About 100 characters fit the picture's width: the middle of a long one goes.
            Some(argv) => format!("stemmon: {}", cut_middle(&command_line(argv), TITLE)),
            None => format!("stemmon: pid {}", report.pid),
        };
        let subtitle = subtitle(report, kind, peak.as_ref(), lines);
        Some(Chart {
            title,
            subtitle,
            duration,
            points,
            series,
            bands,
            peak,
            bound,
        })
    }

    /// A chart of these points and bands alone (no peak, no captions), for tests.
    #[cfg(test)]
    pub(crate) fn of_points(points: Vec<Point>, bands: Vec<Band>, duration: f64) -> Chart {
        Chart {
            title: "t".into(),
            subtitle: String::new(),
            duration,
            series: Series::of(&points, &super::lines::all()),
            points,
            bands,
            peak: None,
            bound: None,
        }
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
            .flat_map(|p| {
                [p.tree, p.bound, p.stacked()]
                    .into_iter()
                    .chain(p.lines.iter().copied())
            })
            .flatten()
            .chain(self.peak.as_ref().map(|p| p.bytes))
            .max()
            .unwrap_or(0)
            .max(1 << 20)
    }
}

/// The caption: wall time, which peak is marked and what it means, the other figures.
fn subtitle(report: &Report, kind: TreePeak, peak: Option<&Peak>, lines: &[Line]) -> String {
    let mut subtitle = format!("wall {}", seconds(time(report.wall_seconds)));
    let sampled = report.peaks.peak_tree_rss_bytes;
    match (kind, peak) {
        (TreePeak::Exact(exact), _) => {
            let _ = write!(
                subtitle,
                "; exact peak tree RSS {} (the process alone: its own high-water mark); \
                 sampled peak {}",
                bytes(Some(exact)),
                bytes(sampled)
            );
        }
        (
            TreePeak::Between {
                bound: Some(bound), ..
            },
            Some(peak),
        ) if bound <= peak.bytes => {
            let _ = write!(
                subtitle,
                "; peak tree RSS {} (sampled, and the high-water bound agrees)",
                bytes(Some(peak.bytes))
            );
        }
        (
            TreePeak::Between {
                bound: Some(bound), ..
            },
            Some(peak),
        ) => {
            let _ = write!(
                subtitle,
                "; peak tree RSS between {} (sampled) and {} (high-water bound)",
                bytes(Some(peak.bytes)),
                bytes(Some(bound))
            );
        }
        (
            TreePeak::Between {
                bound: Some(bound), ..
            },
            None,
        ) => {
            let _ = write!(
                subtitle,
                "; peak tree RSS at most {} (high-water bound)",
                bytes(Some(bound))
            );
        }
        (TreePeak::Between { bound: None, .. }, _)
            if report.high_water.peak_tree_rss_at_least_bytes.is_some() =>
        {
            let unseen = report.high_water_marks.unseen;
            if let Some(floor) = crate::peak::at_least(&report.high_water, unseen) {
                let _ = write!(subtitle, "; peak tree RSS {floor}");
            }
        }
        (TreePeak::Between { bound: None, .. }, Some(peak)) => {
            let _ = write!(
                subtitle,
                "; peak tree RSS {} (sampled; no high-water bound)",
                bytes(Some(peak.bytes))
            );
        }
        (TreePeak::Between { bound: None, .. }, None) => {}
    }
    if let (TreePeak::Between { .. }, Some(parent)) =
        (kind, report.high_water.peak_parent_hwm_bytes)
    {
        let _ = write!(
            subtitle,
            "; the process's own exact peak {}",
            bytes(Some(parent))
        );
    }
    for line in lines {
        let peak = line.series.peak.and_then(stemmon_report::fields::field);
        if let Some(peak) = peak.and_then(|f| f.of_run(report)) {
            let _ = write!(
                subtitle,
                "; peak {} {}",
                line.name,
                crate::format::figure(line.unit(), Some(peak))
            );
        }
    }
    if let Some(cores) = report.cpu_io.cpu_cores {
        let _ = write!(subtitle, "; {cores:.2} cores over the run");
    }
    if !report.host.is_empty() {
        let _ = write!(subtitle, "; host {}", report.host);
    }
    subtitle
}

/// The report's timeline with the figures of `lines`, or (stemmon 0.1) its raw samples,
/// in order of start.
fn points(report: &Report, lines: &[Line]) -> Vec<Point> {
    let (memory, others): (Vec<&Line>, Vec<&Line>) = lines.iter().partition(|l| on_memory(l));
    let mut points: Vec<Point> = if !report.timeline.is_empty() {
        report
            .timeline
            .iter()
            .map(|p| Point {
                start: time(p.elapsed_seconds),
                end: time(p.end_seconds).max(time(p.elapsed_seconds)),
                tree: p.tree_rss_bytes,
                parent: p.parent_rss_bytes,
                children: p.children_rss_bytes,
                bound: p.tree_rss_bound_bytes,
                // Bytes are whole and at least 0 (`as` saturates a hostile 1e300).
                lines: memory
                    .iter()
                    .map(|l| {
                        l.of_point(p)
                            .filter(|v| *v >= 0.0)
                            .map(|v| v.round() as u64)
                    })
                    .collect(),
                others: others.iter().map(|l| l.of_point(p)).collect(),
                // Checked finite and at most 1e9 by `input`; clamped for `Chart`'s own tests.
                cpu: p.cpu_cores.map(|c| time(c).min(1e9)),
            })
            .collect()
    } else {
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
                lines: vec![None; memory.len()],
                others: vec![None; others.len()],
                cpu: None,
            })
            .collect()
    };
    // stemmon writes them in order; a hand-made report may not (stable: ties keep theirs).
    points.sort_by(|a, b| a.start.total_cmp(&b.start));
    points
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
pub(crate) mod tests {
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

    pub(crate) const MIB: u64 = 1 << 20;

    /// A `stemmon run` of a process alone, sampled every second: a 3.3 MiB sample at
    /// 0.05 s, 300 MiB read at 1.05 s, and an exact peak of 320 MiB between samples that
    /// only the bound of the interval 1.05-2.03 s saw; 4 cores over 0.05-1.05 s.
    pub(crate) fn spike_report() -> Report {
        let mut report = Report::default();
        report.wall_seconds = 3.04;
        report.command = Some(vec!["python3".into(), "train.py".into()]);
        report.peak_process_count = 1;
        report.peaks.peak_tree_rss_bytes = Some(300 * MIB);
        report.peaks.peak_children_rss_bytes = Some(0);
        report.peak_rss_elapsed_seconds = Some(1.05);
        report.high_water.peak_parent_hwm_bytes = Some(320 * MIB);
        report.high_water.peak_tree_rss_bound_bytes = Some(320 * MIB);
        let at = |t: f64, mib: u64, bound: u64, cpu: Option<f64>| {
            let mut point = TimelinePoint::default();
            point.elapsed_seconds = t;
            point.end_seconds = t;
            point.tree_rss_bytes = Some(mib * MIB / 10);
            point.parent_rss_bytes = point.tree_rss_bytes;
            point.children_rss_bytes = Some(0);
            point.tree_rss_bound_bytes = Some(bound * MIB / 10);
            point.cpu_cores = cpu;
            point.samples = 1;
            point
        };
        report.timeline = vec![
            at(0.05, 33, 33, None),
            at(1.05, 3000, 3000, Some(4.0)),
            at(2.03, 33, 3200, Some(0.5)),
            at(3.04, 33, 33, Some(0.5)),
        ];
        report
    }
}
