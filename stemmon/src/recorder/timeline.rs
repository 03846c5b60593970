//! The whole-run memory series of the report ([`Report::timeline`](crate::Report::timeline)):
//! bounded however long the run, and no sampled peak lost on the way.
//!
//! Each pushed sample becomes a point. Once [`MAX_POINTS`] points are held, every new
//! point is paid for by merging the two oldest points that are still at the finer
//! resolution into one that keeps each field's maximum, so the peak of every merged
//! pair is still there. A point stands for `samples` samples; a new sample is first
//! folded into the last point until that point stands for as many samples as a point
//! at the current stride. When every older point has been merged once, the whole series
//! stands for twice the samples per point, and the next round begins.
//!
//! Merging one pair per new point, rather than halving the series at once, keeps the
//! number of points (and the report's size) steady once the cap is reached, and costs
//! the same small work at every sample. The points are boxed: a merge frees one and the
//! next sample's takes its place, so once the cap is reached the series touches no new
//! memory (unboxed, the merged points filled a second buffer over the following round:
//! about 1 MiB of RSS that came a round after the series was full).

use crate::report::TimelinePoint;
use std::collections::VecDeque;
use stemmon_report::fields::measures::CORE;

/// The most points the series holds at once.
pub(crate) const MAX_POINTS: usize = 2_000;

/// A bounded series of [`TimelinePoint`]s, one per sample until it would grow past
/// [`MAX_POINTS`], then one per 2, 4, 8 ... samples.
#[derive(Clone, Debug, Default)]
pub(crate) struct Timeline {
    /// The oldest points, merged in this round: each stands for `2 × stride` samples.
    // Boxed on purpose (see the module docs): the points' memory is recycled.
    #[allow(clippy::vec_box)]
    merged: Vec<Box<TimelinePoint>>,
    /// The newer ones, at `stride` samples a point (the newest may stand for fewer).
    rest: VecDeque<Box<TimelinePoint>>,
    /// How many samples a full point of `rest` stands for: 1, then doubling each round.
    stride: u32,
}

impl Timeline {
    /// An empty series.
    pub(super) fn new() -> Timeline {
        Timeline {
            merged: Vec::with_capacity(MAX_POINTS),
            rest: VecDeque::with_capacity(MAX_POINTS + 1),
            stride: 1,
        }
    }

    /// How many points the series holds.
    pub(super) fn len(&self) -> usize {
        self.merged.len() + self.rest.len()
    }

    /// Adds one sample (a point with `samples` = 1, or a point already standing for
    /// several). It is folded into the last point while that point stands for fewer
    /// samples than the current stride; past [`MAX_POINTS`] points the two oldest
    /// unmerged points become one.
    pub(super) fn push(&mut self, point: TimelinePoint) {
        let stride = self.stride.max(1);
        match self.rest.back_mut() {
            Some(last) if last.samples < stride => merge_into(last, point),
            _ => self.rest.push_back(Box::new(point)),
        }
        while self.len() > MAX_POINTS {
            self.merge_oldest_pair();
        }
    }

    /// Raises the newest point's maxima to `reading`'s (a reading between samples, as
    /// a stage boundary's, with `samples` 0): no point is added, so the series stays
    /// bounded, and a figure between samples still shows.
    pub(super) fn raise_last(&mut self, reading: TimelinePoint) {
        if let Some(last) = self.rest.back_mut().or(self.merged.last_mut()) {
            merge_into(last, reading);
        }
    }

    /// The points, oldest first.
    pub(super) fn points(&self) -> Vec<TimelinePoint> {
        self.merged
            .iter()
            .chain(&self.rest)
            .map(|point| TimelinePoint::clone(point))
            .collect()
    }

    /// Merges the two oldest points at the current stride; once none is left to merge
    /// (the newest is kept for new samples to fold into), the round ends: every point
    /// stands for twice the samples.
    fn merge_oldest_pair(&mut self) {
        if self.rest.len() > 2 {
            let (Some(mut first), Some(second)) = (self.rest.pop_front(), self.rest.pop_front())
            else {
                return;
            };
            merge_into(&mut first, *second);
            self.merged.push(first);
            return;
        }
        // The end of the round: the last one or two points join the merged ones.
        let mut last = self.rest.pop_front();
        if let (Some(first), Some(second)) = (last.as_mut(), self.rest.pop_front()) {
            merge_into(first, *second);
        }
        self.rest.extend(self.merged.drain(..));
        self.rest.extend(last);
        self.stride = self.stride.max(1).saturating_mul(2);
    }
}

/// Folds `later` into `earlier`: the maxima of both, the span from `earlier`'s start to
/// `later`'s end, and the samples of both.
fn merge_into(earlier: &mut TimelinePoint, later: TimelinePoint) {
    earlier.end_seconds = later.end_seconds.max(earlier.end_seconds);
    // The core measurements' typed series (the tree's RSS, bound and processes, the
    // cgroup's charge, the live heap, the cores): the higher.
    for series in CORE.iter().flat_map(|measure| measure.series) {
        let high = match (series.of_point(earlier), series.of_point(&later)) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        series.set(earlier, high);
    }
    earlier.samples = earlier.samples.saturating_add(later.samples);
    super::extra::merge_figures(earlier, &later);
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn sample(index: u64, tree: u64) -> TimelinePoint {
        let at = index as f64 * 0.5;
        {
            let mut built = TimelinePoint::default();
            built.elapsed_seconds = at;
            built.end_seconds = at;
            built.tree_rss_bytes = Some(tree);
            built.parent_rss_bytes = Some(tree / 4);
            built.children_rss_bytes = Some(tree - tree / 4);
            built.tree_rss_bound_bytes = Some(tree + MIB);
            built.cgroup_memory_bytes = None;
            built.process_count = 1 + (index % 7) as u32;
            built.cpu_cores = None;
            built.samples = 1;
            built
        }
    }

    #[test]
    fn a_short_run_keeps_every_sample() {
        let mut timeline = Timeline::new();
        for index in 0..MAX_POINTS as u64 {
            timeline.push(sample(index, 10 * MIB + index));
        }
        let points = timeline.points();
        assert_eq!(points.len(), MAX_POINTS);
        assert!(points.iter().all(|p| p.samples == 1));
        assert_eq!(points[17], sample(17, 10 * MIB + 17));
    }

    #[test]
    fn a_million_samples_stay_bounded_and_keep_a_one_sample_spike() {
        let spike_at = 777_777;
        let mut timeline = Timeline::new();
        for index in 0..1_000_000u64 {
            let tree = if index == spike_at {
                900 * MIB
            } else {
                100 * MIB + (index % 13) * MIB
            };
            let mut point = sample(index, tree);
            if index == 123_456 {
                point.parent_rss_bytes = Some(300 * MIB);
                point.cgroup_memory_bytes = Some(2_000 * MIB);
            }
            timeline.push(point);
            assert!(timeline.len() <= MAX_POINTS, "at sample {index}");
        }
        let points = timeline.points();
        assert!(
            points.len() > MAX_POINTS / 2,
            "halving leaves at least half: {}",
            points.len()
        );
        // Every sample is accounted for exactly once, in order, without gaps.
        assert_eq!(
            points.iter().map(|p| u64::from(p.samples)).sum::<u64>(),
            1_000_000
        );
        assert_eq!(points[0].elapsed_seconds, 0.0);
        assert_eq!(points.last().unwrap().end_seconds, 999_999.0 * 0.5);
        for pair in points.windows(2) {
            assert_eq!(pair[1].elapsed_seconds, pair[0].end_seconds + 0.5);
        }
        // The spike survives in the point covering it, and nowhere else.
        let spike_time = spike_at as f64 * 0.5;
        let holder = points
            .iter()
            .find(|p| p.elapsed_seconds <= spike_time && spike_time <= p.end_seconds)
            .unwrap();
        assert_eq!(holder.tree_rss_bytes, Some(900 * MIB));
        assert_eq!(holder.tree_rss_bound_bytes, Some(901 * MIB));
        assert_eq!(
            points
                .iter()
                .filter(|p| p.tree_rss_bytes == Some(900 * MIB))
                .count(),
            1
        );
        // Each field keeps its own maximum, from whichever sample had it.
        let max = |f: fn(&TimelinePoint) -> Option<u64>| points.iter().filter_map(f).max();
        assert_eq!(max(|p| p.parent_rss_bytes), Some(300 * MIB));
        assert_eq!(max(|p| p.cgroup_memory_bytes), Some(2_000 * MIB));
        assert_eq!(points.iter().map(|p| p.process_count).max(), Some(7));
        // Resolution is nearly even: older points stand for the same count as newer
        // ones or twice it, never fewer; only the newest may stand for fewer still.
        assert_eq!(points.len(), MAX_POINTS, "steady once full");
        let full = points[..points.len() - 1].iter().map(|p| p.samples);
        let (min, max) = (full.clone().min().unwrap(), full.max().unwrap());
        assert!(max == min || max == 2 * min, "{min}..{max}");
        for pair in points[..points.len() - 1].windows(2) {
            assert!(pair[0].samples >= pair[1].samples);
        }
        assert!(points.last().unwrap().samples <= max);
    }

    #[test]
    fn a_missing_reading_does_not_hide_a_present_one() {
        let (mut earlier, mut later) = (sample(0, MIB), sample(1, 2 * MIB));
        earlier.tree_rss_bound_bytes = None;
        later.parent_rss_bytes = None;
        merge_into(&mut earlier, later);
        assert_eq!(earlier.tree_rss_bound_bytes, Some(3 * MIB));
        assert_eq!(earlier.parent_rss_bytes, Some(MIB / 4));
        assert_eq!(earlier.tree_rss_bytes, Some(2 * MIB));
    }

    #[test]
    fn merged_points_keep_the_higher_of_the_core_measurements_series() {
        let (mut earlier, mut later) = (sample(0, MIB), sample(1, MIB));
        (earlier.cpu_cores, later.cpu_cores) = (Some(2.5), Some(1.0));
        later.cgroup_memory_bytes = Some(3 * MIB);
        merge_into(&mut earlier, later);
        assert_eq!(earlier.cpu_cores, Some(2.5));
        assert_eq!(earlier.cgroup_memory_bytes, Some(3 * MIB));
        let (mut earlier, mut later) = (sample(0, MIB), sample(1, MIB));
        (earlier.cgroup_memory_bytes, later.cpu_cores) = (Some(5 * MIB), Some(0.5));
        later.cgroup_memory_bytes = Some(4 * MIB);
        merge_into(&mut earlier, later);
        assert_eq!(earlier.cpu_cores, Some(0.5));
        assert_eq!(earlier.cgroup_memory_bytes, Some(5 * MIB));
    }

    #[test]
    fn once_full_the_series_stays_at_the_cap_and_merges_evenly_at_each_round() {
        let mut timeline = Timeline::new();
        let mut lengths = Vec::new();
        for index in 0..50_000u64 {
            timeline.push(sample(index, MIB + index));
            if index >= MAX_POINTS as u64 {
                lengths.push(timeline.len());
            }
            if timeline.rest.len() == timeline.len() && index > MAX_POINTS as u64 {
                // A round just ended: every point but the newest at one stride.
                let stride = timeline.stride;
                let points = timeline.points();
                assert!(points[..points.len() - 1]
                    .iter()
                    .all(|p| p.samples == stride));
            }
        }
        assert!(
            lengths.iter().all(|&len| len == MAX_POINTS),
            "never shrinks nor grows"
        );
        let points = timeline.points();
        assert_eq!(
            points.iter().map(|p| u64::from(p.samples)).sum::<u64>(),
            50_000
        );
        assert_eq!(points.last().unwrap().tree_rss_bytes, Some(MIB + 49_999));
    }
}
