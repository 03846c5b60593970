//! What the `stemmon` command reuses from the runtime, so that each rule is written
//! once: the one writer of every file, the byte figures, the escaping of text for a
//! terminal, the label check, the bounds every report keeps (which both test suites
//! check on every report they read). Not a public API: it changes with the command.

use crate::Report;

pub use crate::identity::check_label;
pub use crate::log::{escape, format_bytes};
pub use crate::monitor::CommandExit;
pub use crate::output::Output;

/// The records of `report` that break the bounds of SPEC §8:
/// `peak_tree_rss_bound_bytes >= peak_tree_rss_bytes` and
/// `peak_parent_hwm_bytes >= peak_parent_rss_bytes`, wherever both are present. Empty
/// for every report stemmon writes.
pub fn bound_violations(report: &Report) -> Vec<String> {
    let records = std::iter::once(("the whole run", &report.peaks, &report.high_water)).chain(
        report
            .stages
            .iter()
            .map(|s| (s.path.as_str(), &s.peaks, &s.high_water)),
    );
    let mut broken = Vec::new();
    for (name, peaks, high_water) in records {
        if let (Some(bound), Some(tree)) = (
            high_water.peak_tree_rss_bound_bytes,
            peaks.peak_tree_rss_bytes,
        ) {
            if bound < tree {
                broken.push(format!(
                    "{name}: peak_tree_rss_bound_bytes {bound} < peak_tree_rss_bytes {tree}"
                ));
            }
        }
        if let (Some(hwm), Some(parent)) = (
            high_water.peak_parent_hwm_bytes,
            peaks.peak_parent_rss_bytes,
        ) {
            if hwm < parent {
                broken.push(format!(
                    "{name}: peak_parent_hwm_bytes {hwm} < peak_parent_rss_bytes {parent}"
                ));
            }
        }
    }
    broken
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bound_below_the_sampled_peak_is_named() {
        let mut report = Report::default();
        assert!(bound_violations(&report).is_empty());
        report.peaks.peak_tree_rss_bytes = Some(200);
        report.high_water.peak_tree_rss_bound_bytes = Some(100);
        report.peaks.peak_parent_rss_bytes = Some(50);
        report.high_water.peak_parent_hwm_bytes = Some(50);
        let broken = bound_violations(&report);
        assert_eq!(broken.len(), 1, "{broken:?}");
        assert!(broken[0].starts_with("the whole run: peak_tree_rss_bound_bytes 100"));
    }
}
