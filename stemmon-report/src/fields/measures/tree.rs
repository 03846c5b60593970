//! The tree's memory, a measurement of the core: its RSS as sampled and read at stage
//! boundaries, and the kernel's high-water marks, which bound its peak between readings
//! (the book's `exact-peaks.md`). Its figures are typed fields of every record (the
//! report's `peaks`, `high_water` and `peak_process_count`), its series the timeline's
//! tree, parent and children RSS, bound and process count.

use crate::fields::declare::{declare, gauge};
use crate::fields::{whole, Field, Fold, Measure, Metric, Series, Source, Unit};

use Fold::Max;
use Unit::{Bytes, Count};
const EXACT: Metric = Metric::EXACT;
const SAMPLED: Metric = Metric::SAMPLED;

/// The most processes in the tree while the record was open.
pub const PROCESSES: Field = declare(
    "peak_process_count",
    Source::Tree,
    Count,
    Max,
    ("procs", "most processes in the tree"),
    &[],
    None,
    (
        |s| Some(f64::from(s.peak_process_count)),
        |r| Some(f64::from(r.peak_process_count)),
        Some(|s, v| s.peak_process_count = whole(v).unwrap_or(0).min(u64::from(u32::MAX)) as u32),
    ),
);

/// The tree's sampled peak RSS while the record was open.
pub const PEAK: Field = declare(
    "peak_tree_rss_bytes",
    Source::Tree,
    Bytes,
    Max,
    ("sampled peak", "the sampled peak tree RSS"),
    &[EXACT, SAMPLED],
    gauge("peak_tree_rss_bytes", "peak_tree_rss"),
    both!(peaks.peak_tree_rss_bytes, bytes),
);

/// The monitored process's sampled peak RSS.
pub const PARENT: Field = declare(
    "peak_parent_rss_bytes",
    Source::Tree,
    Bytes,
    Max,
    ("parent", "the sampled peak RSS of the monitored process"),
    &[],
    None,
    both!(peaks.peak_parent_rss_bytes, bytes),
);

/// Its descendants' sampled peak RSS.
pub const CHILDREN: Field = declare(
    "peak_children_rss_bytes",
    Source::Tree,
    Bytes,
    Max,
    ("children", "the sampled peak RSS of its descendants"),
    &[],
    None,
    both!(peaks.peak_children_rss_bytes, bytes),
);

/// The tree's sampled peak unique set size (`detailed_memory`).
pub const USS: Field = declare(
    "peak_tree_uss_bytes",
    Source::Tree,
    Bytes,
    Max,
    (
        "USS",
        "the sampled peak unique set size of the tree (detailed_memory)",
    ),
    &[],
    None,
    both!(peaks.peak_tree_uss_bytes, bytes),
);

/// The tree's sampled peak proportional set size (`detailed_memory`).
pub const PSS: Field = declare(
    "peak_tree_pss_bytes",
    Source::Tree,
    Bytes,
    Max,
    (
        "PSS",
        "the sampled peak proportional set size of the tree (detailed_memory)",
    ),
    &[],
    None,
    both!(peaks.peak_tree_pss_bytes, bytes),
);

/// The tree's physical footprint (macOS; not measured yet).
pub const FOOTPRINT: Field = declare(
    "peak_tree_physical_footprint_bytes",
    Source::Tree,
    Bytes,
    Max,
    (
        "footprint",
        "the physical footprint of the tree (macOS; not measured yet)",
    ),
    &[],
    None,
    both!(peaks.peak_tree_physical_footprint_bytes, bytes),
);

/// The kernel's marks' bound of the tree's peak: never below it.
pub const BOUND: Field = declare(
    "peak_tree_rss_bound_bytes",
    Source::Marks,
    Bytes,
    Max,
    ("bound", "the high-water bound of the tree's peak"),
    &[EXACT],
    gauge("peak_tree_rss_bound_bytes", "peak_tree_rss_bound"),
    both!(high_water.peak_tree_rss_bound_bytes, bytes),
);

/// The tree's peak was at least this, where a process ended at a peak nobody read.
pub const AT_LEAST: Field = declare(
    "peak_tree_rss_at_least_bytes",
    Source::Marks,
    Bytes,
    Max,
    ("at least", "the tree's peak was at least this"),
    &[],
    None,
    both!(high_water.peak_tree_rss_at_least_bytes, bytes),
);

/// The monitored process's exact peak, from its mark.
pub const PARENT_EXACT: Field = declare(
    "peak_parent_hwm_bytes",
    Source::Marks,
    Bytes,
    Max,
    ("parent exact", "the parent's exact peak"),
    &[EXACT],
    gauge("peak_parent_hwm_bytes", "peak_parent_hwm"),
    both!(high_water.peak_parent_hwm_bytes, bytes),
);

/// The largest peak of a descendant that exited.
pub const EXITED_CHILD: Field = declare(
    "peak_reaped_child_rss_bytes",
    Source::Marks,
    Bytes,
    Max,
    (
        "exited child",
        "the largest peak of a descendant that exited",
    ),
    &[],
    None,
    both!(high_water.peak_reaped_child_rss_bytes, bytes),
);

/// The tree's RSS at a timeline point, the highest of its readings.
pub const TREE_RSS: Series = Series::new("tree_rss_bytes", "tree RSS", Bytes)
    .read(|p| p.tree_rss_bytes.map(|v| v as f64))
    .write(|p, v| p.tree_rss_bytes = whole(v));

/// The monitored process's RSS at a timeline point.
pub const PARENT_RSS: Series = Series::new("parent_rss_bytes", "parent RSS", Bytes)
    .read(|p| p.parent_rss_bytes.map(|v| v as f64))
    .write(|p, v| p.parent_rss_bytes = whole(v));

/// Its descendants' RSS at a timeline point.
pub const CHILDREN_RSS: Series = Series::new("children_rss_bytes", "children RSS", Bytes)
    .read(|p| p.children_rss_bytes.map(|v| v as f64))
    .write(|p, v| p.children_rss_bytes = whole(v));

/// The bound of the tree's peak over a timeline point's interval.
pub const BOUND_NOW: Series = Series::new("tree_rss_bound_bytes", "bound", Bytes)
    .read(|p| p.tree_rss_bound_bytes.map(|v| v as f64))
    .write(|p, v| p.tree_rss_bound_bytes = whole(v));

/// The processes in the tree at a timeline point, the most of its samples.
pub const PROCESS_COUNT: Series = Series::new("process_count", "processes", Count)
    .read(|p| Some(f64::from(p.process_count)))
    .write(|p, v| p.process_count = whole(v).unwrap_or(0).min(u64::from(u32::MAX)) as u32);

/// The tree's memory.
pub const MEASURE: Measure = Measure::new(
    "tree",
    "reference.md",
    &[
        PROCESSES,
        PEAK,
        PARENT,
        CHILDREN,
        USS,
        PSS,
        FOOTPRINT,
        BOUND,
        AT_LEAST,
        PARENT_EXACT,
        EXITED_CHILD,
    ],
    &[TREE_RSS, PARENT_RSS, CHILDREN_RSS, BOUND_NOW, PROCESS_COUNT],
)
.of_the_core();
