//! The table itself: one declaration per figure of a record.

use super::declare::{counter, declare, gauge};
use super::measures::cgroup;
use super::{bytes, whole, Field, Fold, Metric, Source, Unit};

fn cpu_seconds(cpu_user: Option<f64>, cpu_system: Option<f64>) -> Option<f64> {
    match (cpu_user, cpu_system) {
        (Some(user), Some(system)) => Some(user + system),
        (user, system) => user.or(system),
    }
}

use Fold::{Derived, Max, Sum};
const EXACT: Metric = Metric::EXACT;
const SAMPLED: Metric = Metric::SAMPLED;
const HEAP_METRIC: Metric = Metric::HEAP;
const CPU_METRIC: Metric = Metric::CPU;
use Unit::{Bytes, Cores, Count, Seconds};

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
    declare(
        "heap_allocations",
        Source::Heap,
        Count,
        Sum,
        ("allocs", "heap allocations made"),
        &[],
        None,
        (
            |s| bytes(s.heap.heap_allocations),
            |r| bytes(r.heap.allocations),
            Some(|s, v| s.heap.heap_allocations = whole(v)),
        ),
    ),
    declare(
        "heap_allocated_bytes",
        Source::Heap,
        Bytes,
        Sum,
        ("heap allocated", "the bytes allocated on the heap"),
        &[HEAP_METRIC],
        counter("heap_allocated_bytes", "heap.allocated"),
        (
            |s| bytes(s.heap.heap_allocated_bytes),
            |r| bytes(r.heap.allocated_bytes),
            Some(|s, v| s.heap.heap_allocated_bytes = whole(v)),
        ),
    )
    .in_column(),
    declare(
        "heap_freed_bytes",
        Source::Heap,
        Bytes,
        Sum,
        ("freed", "the bytes freed on the heap"),
        &[],
        None,
        (
            |s| bytes(s.heap.heap_freed_bytes),
            |_| None,
            Some(|s, v| s.heap.heap_freed_bytes = whole(v)),
        ),
    ),
    declare(
        "heap_retained_bytes",
        Source::Heap,
        Bytes,
        Sum,
        ("retained", "allocated minus freed: what was left behind"),
        &[],
        None,
        (
            |s| s.heap.heap_retained_bytes.map(|v| v as f64),
            |_| None,
            Some(|s, v| s.heap.heap_retained_bytes = v.map(|v| v.round() as i64)),
        ),
    )
    .in_column(),
    declare(
        "peak_heap_bytes",
        Source::Heap,
        Bytes,
        Max,
        (
            "peak heap",
            "the peak heap (of the whole run: the peak live heap)",
        ),
        &[HEAP_METRIC],
        gauge("peak_heap_bytes", "heap.peak"),
        (
            |s| bytes(s.heap.peak_heap_bytes),
            |r| bytes(r.heap.peak_live_bytes),
            Some(|s, v| s.heap.peak_heap_bytes = whole(v)),
        ),
    )
    .in_column(),
    declare(
        "cpu_user_seconds",
        Source::Cpu,
        Seconds,
        Sum,
        ("user", "the tree's user CPU time"),
        &[],
        None,
        both!(cpu_io.cpu_user_seconds, seconds),
    ),
    declare(
        "cpu_system_seconds",
        Source::Cpu,
        Seconds,
        Sum,
        ("system", "the tree's system CPU time"),
        &[],
        None,
        both!(cpu_io.cpu_system_seconds, seconds),
    ),
    declare(
        "cpu_seconds",
        Source::Cpu,
        Seconds,
        Derived,
        ("CPU", "the tree's CPU seconds, user plus system"),
        &[CPU_METRIC],
        counter("cpu_seconds", "cpu.time"),
        (
            |s| cpu_seconds(s.cpu_io.cpu_user_seconds, s.cpu_io.cpu_system_seconds),
            |r| cpu_seconds(r.cpu_io.cpu_user_seconds, r.cpu_io.cpu_system_seconds),
            None,
        ),
    )
    .in_column(),
    declare(
        "cpu_cores",
        Source::Cpu,
        Cores,
        Derived,
        ("cores", "CPU seconds over wall seconds"),
        &[],
        None,
        both!(cpu_io.cpu_cores, seconds),
    )
    .in_column(),
    declare(
        "cpu_thread_seconds",
        Source::Cpu,
        Seconds,
        Sum,
        (
            "own CPU",
            "the CPU time of the threads that ran the stage's calls",
        ),
        &[],
        None,
        both!(cpu_io.cpu_thread_seconds, seconds),
    )
    .in_column(),
    declare(
        "io_read_bytes",
        Source::Cpu,
        Bytes,
        Sum,
        ("read", "bytes the tree read from storage"),
        &[],
        counter("io_read_bytes", "disk.read"),
        both!(cpu_io.io_read_bytes, bytes),
    )
    .in_column(),
    declare(
        "io_write_bytes",
        Source::Cpu,
        Bytes,
        Sum,
        ("written", "bytes the tree wrote to storage"),
        &[],
        counter("io_write_bytes", "disk.write"),
        both!(cpu_io.io_write_bytes, bytes),
    )
    .in_column(),
    declare(
        "major_faults",
        Source::Cpu,
        Count,
        Sum,
        ("major faults", "page faults that needed I/O"),
        &[],
        None,
        both!(cpu_io.major_faults, bytes),
    ),
];
