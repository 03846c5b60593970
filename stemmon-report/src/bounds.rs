//! The bounds every report stemmon writes keeps (the book's `exact-peaks.md`): a high-water bound never
//! below the sampled peak it bounds, an exact peak never below the sampled one.

use crate::Report;

/// The records of `report` that break the bounds of the book's `exact-peaks.md`:
/// `peak_tree_rss_bound_bytes >= peak_tree_rss_bytes` and
/// `peak_parent_hwm_bytes >= peak_parent_rss_bytes`, wherever both are present. Empty
/// for every report stemmon writes.
pub fn violations(report: &Report) -> Vec<String> {
    let records = std::iter::once(("the whole run", &report.peaks, &report.high_water)).chain(
        report
            .stages
            .iter()
            .map(|s| (s.path.as_str(), &s.peaks, &s.high_water)),
    );
    let quoted = |name: &str| crate::text::escape(&crate::text::short(name)).into_owned();
    let mut broken = Vec::new();
    for (name, peaks, high_water) in records {
        if let (Some(bound), Some(tree)) = (
            high_water.peak_tree_rss_bound_bytes,
            peaks.peak_tree_rss_bytes,
        ) {
            if bound < tree {
                broken.push(format!(
                    "{}: peak_tree_rss_bound_bytes {bound} < peak_tree_rss_bytes {tree}",
                    quoted(name)
                ));
            }
        }
        if let (Some(hwm), Some(parent)) = (
            high_water.peak_parent_hwm_bytes,
            peaks.peak_parent_rss_bytes,
        ) {
            if hwm < parent {
                broken.push(format!(
                    "{}: peak_parent_hwm_bytes {hwm} < peak_parent_rss_bytes {parent}",
                    quoted(name)
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
        assert!(violations(&report).is_empty());
        report.peaks.peak_tree_rss_bytes = Some(200);
        report.high_water.peak_tree_rss_bound_bytes = Some(100);
        report.peaks.peak_parent_rss_bytes = Some(50);
        report.high_water.peak_parent_hwm_bytes = Some(50);
        let broken = violations(&report);
        assert_eq!(broken.len(), 1, "{broken:?}");
        assert!(broken[0].starts_with("the whole run: peak_tree_rss_bound_bytes 100"));
    }
}
