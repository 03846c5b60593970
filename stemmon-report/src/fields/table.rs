//! The table itself: one declaration per figure of a record.

use super::declare::{counter, declare, gauge};
use super::measures::{cgroup, cpu, heap};
use super::{whole, Field, Fold, Metric, Source, Unit};

use Fold::{Max, Sum};
const EXACT: Metric = Metric::EXACT;
const SAMPLED: Metric = Metric::SAMPLED;
use Unit::{Bytes, Count, Seconds};

/// The figures every record has (the measurements' follow them in [`FIELDS`](super::FIELDS)),
/// in the order the docs and the tables give them.
pub(super) const CORE: &[Field] = &[
    declare(
        "calls",
        Source::Calls,
        Count,
        Sum,
        ("calls", "calls of the stage, open ones included"),
        &[],
        counter("calls", "calls"),
        (
            |s| Some(s.calls as f64),
            |r| {
                Some(
                    r.stages
                        .iter()
                        .filter(|s| s.parent_id.is_none())
                        .map(|s| s.calls as f64)
                        .sum(),
                )
            },
            Some(|s, v| s.calls = whole(v).unwrap_or(0)),
        ),
    ),
    declare(
        "errors",
        Source::Calls,
        Count,
        Sum,
        (
            "errors",
            "calls that failed (panicked, returned Err, were cancelled)",
        ),
        &[],
        counter("errors", "errors"),
        (
            |s| Some(s.errors as f64),
            |r| Some(r.stages.iter().map(|s| s.errors as f64).sum()),
            Some(|s, v| s.errors = whole(v).unwrap_or(0)),
        ),
    ),
    declare(
        "wall_seconds",
        Source::Calls,
        Seconds,
        Sum,
        ("wall", "wall time over all calls, summed over threads"),
        &[],
        counter("wall_seconds", "wall_time"),
        (
            |s| Some(s.wall_seconds),
            |r| Some(r.wall_seconds),
            Some(|s, v| s.wall_seconds = v.unwrap_or(0.0)),
        ),
    ),
    declare(
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
            Some(|s, v| {
                s.peak_process_count = whole(v).unwrap_or(0).min(u64::from(u32::MAX)) as u32
            }),
        ),
    ),
    declare(
        "peak_tree_rss_bytes",
        Source::Tree,
        Bytes,
        Max,
        ("sampled peak", "the sampled peak tree RSS"),
        &[EXACT, SAMPLED],
        gauge("peak_tree_rss_bytes", "peak_tree_rss"),
        both!(peaks.peak_tree_rss_bytes, bytes),
    ),
    declare(
        "peak_parent_rss_bytes",
        Source::Tree,
        Bytes,
        Max,
        ("parent", "the sampled peak RSS of the monitored process"),
        &[],
        None,
        both!(peaks.peak_parent_rss_bytes, bytes),
    ),
    declare(
        "peak_children_rss_bytes",
        Source::Tree,
        Bytes,
        Max,
        ("children", "the sampled peak RSS of its descendants"),
        &[],
        None,
        both!(peaks.peak_children_rss_bytes, bytes),
    ),
    declare(
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
    ),
    declare(
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
    ),
    declare(
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
    ),
    declare(
        "peak_tree_rss_bound_bytes",
        Source::Marks,
        Bytes,
        Max,
        ("bound", "the high-water bound of the tree's peak"),
        &[EXACT],
        gauge("peak_tree_rss_bound_bytes", "peak_tree_rss_bound"),
        both!(high_water.peak_tree_rss_bound_bytes, bytes),
    ),
    declare(
        "peak_tree_rss_at_least_bytes",
        Source::Marks,
        Bytes,
        Max,
        ("at least", "the tree's peak was at least this"),
        &[],
        None,
        both!(high_water.peak_tree_rss_at_least_bytes, bytes),
    ),
    declare(
        "peak_parent_hwm_bytes",
        Source::Marks,
        Bytes,
        Max,
        ("parent exact", "the parent's exact peak"),
        &[EXACT],
        gauge("peak_parent_hwm_bytes", "peak_parent_hwm"),
        both!(high_water.peak_parent_hwm_bytes, bytes),
    ),
    declare(
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
    ),
    cgroup::PEAK_MEMORY,
    cgroup::PEAK_ANON,
    cgroup::OOM_KILLS,
    heap::ALLOCATIONS,
    heap::ALLOCATED,
    heap::FREED,
    heap::RETAINED,
    heap::PEAK,
    cpu::USER,
    cpu::SYSTEM,
    cpu::SECONDS,
    cpu::CORES,
    cpu::THREAD,
    cpu::IO_READ,
    cpu::IO_WRITE,
    cpu::MAJOR_FAULTS,
];
