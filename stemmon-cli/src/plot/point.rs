//! One point of the chart's series: an interval of the run and the figures read in it,
//! and the rule that makes a report's times safe to draw.

use serde::Serialize;

/// One point of the series: [start, end] seconds and the maxima over that interval.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Point {
    pub(crate) start: f64,
    pub(crate) end: f64,
    pub(crate) tree: Option<u64>,
    pub(crate) parent: Option<u64>,
    pub(crate) children: Option<u64>,
    /// The kernel's high-water bound over the interval (stemmon 0.2 on).
    pub(crate) bound: Option<u64>,
    /// The figures of the memory panel's lines ([`super::lines`], those in bytes), in
    /// the table's order: the highest live heap (stemmon 0.3 with `stemmon::Alloc`), the
    /// tree's GPU memory (0.4).
    pub(crate) lines: Vec<Option<u64>>,
    /// The figures of the other lines (the panels under the memory panel), in the
    /// table's order. Not in the page's JSON: their steps hold them.
    #[serde(skip)]
    pub(crate) others: Vec<Option<f64>>,
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

/// A time from a report: finite and at least zero.
pub(crate) fn time(seconds: f64) -> f64 {
    if seconds.is_nan() {
        0.0
    } else {
        seconds.clamp(0.0, f64::MAX)
    }
}
