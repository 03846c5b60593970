//! What a record (the whole run, or a stage) knows of its tree's peak RSS: the exact
//! figure, or only a range (the book's `exact-peaks.md`).
//!
//! `peak_parent_hwm_bytes` is the monitored process's own exact peak. Where the tree was
//! that process alone (no descendant while the record was open: `peak_children_rss_bytes`
//! 0 or null and `peak_process_count` at most 1) it is the tree's exact peak too.
//! Otherwise the tree's true peak is known only to lie between the sampled peak
//! (`peak_tree_rss_bytes`, which a spike between samples escapes) and the high-water
//! bound (`peak_tree_rss_bound_bytes`, which none escapes).

use stemmon::report::{HighWater, Peaks};
use TreePeak::{Between, Exact};

/// A record's tree peak: exact, or a range with either end possibly unknown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TreePeak {
    /// The process was the whole tree: its own high-water mark is the tree's peak.
    Exact(u64),
    /// The true peak lies in [`sampled`, `bound`]; `null` ends were not read.
    Between {
        sampled: Option<u64>,
        bound: Option<u64>,
    },
}

/// The tree peak of a record with these figures.
pub(crate) fn tree_peak(peaks: &Peaks, high_water: &HighWater, process_count: u32) -> TreePeak {
    let alone = peaks.peak_children_rss_bytes.unwrap_or(0) == 0 && process_count <= 1;
    match high_water.peak_parent_hwm_bytes {
        // The mark is never below what was sampled (the book's `exact-peaks.md`); a report that says
        // otherwise is not believed past its own sampled figure.
        Some(exact) if alone => Exact(exact.max(peaks.peak_tree_rss_bytes.unwrap_or(0))),
        _ => Between {
            sampled: peaks.peak_tree_rss_bytes,
            bound: high_water.peak_tree_rss_bound_bytes,
        },
    }
}

/// `at least 314.8 MiB (5 processes ended unseen)` where the tree's figure is only a
/// floor (a process of the tree ended at a peak nobody read), else `None`.
pub(crate) fn at_least(high_water: &HighWater, unseen: u32) -> Option<String> {
    let floor = high_water.peak_tree_rss_at_least_bytes?;
    let plural = if unseen == 1 { "" } else { "es" };
    Some(format!(
        "at least {} ({unseen} process{plural} ended unseen)",
        crate::format::bytes(Some(floor))
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(sampled: u64, children: Option<u64>, hwm: Option<u64>) -> (Peaks, HighWater) {
        let mut peaks = Peaks::default();
        peaks.peak_tree_rss_bytes = Some(sampled);
        peaks.peak_children_rss_bytes = children;
        let mut high_water = HighWater::default();
        high_water.peak_parent_hwm_bytes = hwm;
        high_water.peak_tree_rss_bound_bytes = Some(250);
        (peaks, high_water)
    }

    #[test]
    fn the_process_alone_has_an_exact_tree_peak_and_a_tree_with_descendants_a_range() {
        let (peaks, hw) = figures(3, Some(0), Some(213));
        assert_eq!(tree_peak(&peaks, &hw, 1), Exact(213));
        let (peaks, hw) = figures(3, None, Some(213));
        assert_eq!(tree_peak(&peaks, &hw, 0), Exact(213), "a 0.1 count of 0");
        let between = Between {
            sampled: Some(3),
            bound: Some(250),
        };
        let (peaks, hw) = figures(3, Some(1), Some(213));
        assert_eq!(tree_peak(&peaks, &hw, 2), between, "a descendant");
        let (peaks, hw) = figures(3, Some(0), Some(213));
        assert_eq!(tree_peak(&peaks, &hw, 2), between, "a descendant not read");
        let (peaks, hw) = figures(3, Some(0), None);
        assert_eq!(tree_peak(&peaks, &hw, 1), between, "no mark");
    }
}
