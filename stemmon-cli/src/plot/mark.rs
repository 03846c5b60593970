//! The marked peak, and the bound above it where the peak is the sampled one.
//!
//! Where the tree was the monitored process alone ([`crate::peak`]), its own high-water
//! mark is the tree's exact peak: it is marked at the sampled peak's instant when that
//! reading equals it, else over the interval of the first bound step that reached it,
//! else (not in the timeline) as a level without a time. Otherwise the sampled peak is
//! marked as what it is, and the highest bound step as the bound the true peak lies
//! under.

use super::point::{time, Point};
use super::series::Series;
use crate::format::{bytes, seconds};
use crate::peak::TreePeak;
use serde::Serialize;
use std::fmt::Write as _;
use stemmon::Report;

/// Which figure the marked peak is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum PeakKind {
    /// The tree's exact peak: the process alone, its own high-water mark.
    Exact,
    /// The highest sampled tree RSS; the true peak may be higher, up to the bound.
    Sampled,
}

/// The marked peak: which figure, how much, and when (an instant where `from == to`).
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Peak {
    pub(crate) kind: PeakKind,
    pub(crate) bytes: u64,
    /// `[from, to]` seconds; `None` where the timeline does not say when.
    pub(crate) when: Option<(f64, f64)>,
    /// The stage the sampled reading fell in, where known.
    pub(crate) stage: Option<String>,
}

impl Peak {
    /// `exact peak 205.3 MiB at 1.203s in fit`, `sampled peak 200.1 MiB in fit/inner at
    /// 1.234s`, `exact peak 205.3 MiB between 1.001s and 1.203s`.
    pub(crate) fn label(&self) -> String {
        let kind = match self.kind {
            PeakKind::Exact => "exact",
            PeakKind::Sampled => "sampled",
        };
        let mut label = format!("{kind} peak {}", bytes(Some(self.bytes)));
        if let Some(stage) = &self.stage {
            let _ = write!(label, " in {stage}");
        }
        match self.when {
            Some((from, to)) => label.push_str(&during(from, to)),
            None => label.push_str(" (when: not in the timeline)"),
        }
        label
    }
}

/// ` at 1.050s`, or ` between 1.050s and 2.030s` for an interval that reads as one.
pub(crate) fn during(from: f64, to: f64) -> String {
    let (from, to) = (seconds(from), seconds(to));
    if from == to {
        format!(" at {from}")
    } else {
        format!(" between {from} and {to}")
    }
}

/// The highest step of the bound: the level the tree's true peak lies under, and when.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct BoundMark {
    pub(crate) bytes: u64,
    pub(crate) from: f64,
    pub(crate) to: f64,
}

/// The peak to mark (see the module docs).
pub(super) fn peak(
    report: &Report,
    kind: TreePeak,
    points: &[Point],
    series: &Series,
) -> Option<Peak> {
    let sampled_at = report.peak_rss_elapsed_seconds.map(time);
    match kind {
        TreePeak::Exact(bytes) => {
            let (when, stage) =
                if report.peaks.peak_tree_rss_bytes == Some(bytes) && sampled_at.is_some() {
                    (sampled_at.map(|at| (at, at)), report.peak_rss_stage.clone())
                } else {
                    let step = series.bound.iter().find(|s| s.value >= bytes);
                    (step.map(|s| (s.from, s.to)), None)
                };
            Some(Peak {
                kind: PeakKind::Exact,
                bytes,
                when,
                stage,
            })
        }
        TreePeak::Between { .. } => match (report.peaks.peak_tree_rss_bytes, sampled_at) {
            (Some(bytes), Some(at)) => Some(Peak {
                kind: PeakKind::Sampled,
                bytes,
                when: Some((at, at)),
                stage: Some(
                    report
                        .peak_rss_stage
                        .clone()
                        .unwrap_or_else(|| "workflow".into()),
                ),
            }),
            // No time in the report: the highest point, over the span it covers.
            _ => points
                .iter()
                .filter_map(|p| p.tree.map(|t| (p, t)))
                .max_by_key(|(_, t)| *t)
                .map(|(p, bytes)| Peak {
                    kind: PeakKind::Sampled,
                    bytes,
                    when: Some((p.start, p.end)),
                    stage: None,
                }),
        },
    }
}

/// The first of the bound's highest steps.
pub(super) fn highest_bound(series: &Series) -> Option<BoundMark> {
    let top = series.bound.iter().map(|s| s.value).max()?;
    let step = series.bound.iter().find(|s| s.value == top)?;
    Some(BoundMark {
        bytes: top,
        from: step.from,
        to: step.to,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plot::model::tests::{spike_report, MIB};
    use crate::plot::model::Chart;

    #[test]
    fn the_exact_peak_of_a_process_alone_is_marked_over_the_interval_it_happened_in() {
        let chart = Chart::new(&spike_report()).unwrap();
        let peak = chart.peak.as_ref().unwrap();
        assert_eq!(peak.kind, PeakKind::Exact);
        assert_eq!(peak.bytes, 320 * MIB);
        assert_eq!(peak.when, Some((1.05, 2.03)));
        assert_eq!(
            peak.label(),
            "exact peak 320.0 MiB between 1.050s and 2.030s"
        );
        assert!(chart.bound.is_none(), "the exact figure needs no bound");
        assert!(
            chart.subtitle.contains(
                "exact peak tree RSS 320.0 MiB (the process alone: its own high-water mark)"
            ),
            "{}",
            chart.subtitle
        );
        // Read by a sample: marked at that instant, in its stage.
        let mut report = spike_report();
        report.high_water.peak_parent_hwm_bytes = Some(300 * MIB);
        report.peak_rss_stage = Some("fit".into());
        let peak = Chart::new(&report).unwrap().peak.unwrap();
        assert_eq!(peak.when, Some((1.05, 1.05)));
        assert_eq!(peak.label(), "exact peak 300.0 MiB in fit at 1.050s");
        // Higher than anything in the timeline: a level, no time claimed.
        let mut report = spike_report();
        report.high_water.peak_parent_hwm_bytes = Some(500 * MIB);
        let peak = Chart::new(&report).unwrap().peak.unwrap();
        assert_eq!(
            peak.label(),
            "exact peak 500.0 MiB (when: not in the timeline)"
        );
    }

    #[test]
    fn a_tree_with_descendants_marks_its_sampled_peak_and_the_bound_above_it() {
        let mut report = spike_report();
        report.peak_process_count = 2;
        report.peaks.peak_children_rss_bytes = Some(MIB);
        let chart = Chart::new(&report).unwrap();
        let peak = chart.peak.as_ref().unwrap();
        assert_eq!(peak.kind, PeakKind::Sampled);
        assert_eq!(peak.label(), "sampled peak 300.0 MiB in workflow at 1.050s");
        let bound = chart.bound.as_ref().unwrap();
        assert_eq!((bound.bytes, bound.from, bound.to), (320 * MIB, 1.05, 2.03));
        assert!(
            chart.subtitle.contains(
                "peak tree RSS between 300.0 MiB (sampled) and 320.0 MiB (high-water bound); \
                 the process's own exact peak 320.0 MiB"
            ),
            "{}",
            chart.subtitle
        );
    }
}
