//! The memory panel's lines beside the tree's RSS, declared in one list ([`LINES`]):
//! the picture, its legend, the read-out and the caption draw each one the timeline has.

use super::colour::{GPU_COLOUR, HEAP_COLOUR};
use stemmon::report::TimelinePoint;

/// A line of the memory panel beside the tree's RSS: a sampled figure of the timeline,
/// drawn (in the picture, its legend and the read-out) when some point has it.
pub(crate) struct Line {
    /// The SVG element's `id`.
    pub(crate) id: &'static str,
    /// Its name in the legend, the read-out and the caption.
    pub(crate) name: &'static str,
    pub(crate) colour: &'static str,
    /// Its figure at a timeline point.
    pub(crate) of_point: fn(&TimelinePoint) -> Option<u64>,
    /// The field (`stemmon_report::fields`) whose whole-run figure the caption gives as
    /// its peak.
    pub(crate) peak: &'static str,
}

/// The memory panel's lines, in the order they are drawn: a new one is one entry.
pub(crate) const LINES: [Line; 2] = [
    Line {
        id: "heap",
        name: "live heap",
        colour: HEAP_COLOUR,
        of_point: |p| p.heap_live_bytes,
        peak: "peak_heap_bytes",
    },
    Line {
        id: "gpu",
        name: "tree GPU memory",
        colour: GPU_COLOUR,
        of_point: |p| p.figures.count("tree_gpu_bytes"),
        peak: "peak_tree_gpu_bytes",
    },
];
