//! The heap, a measurement of the core: what each thread allocated and freed while it
//! ran a record's calls, as `stemmon::Alloc` counts it per thread. Its figures are typed
//! fields of every record (`heap`), its series the timeline's `heap_live_bytes`, its
//! section the report's `heap`.

use crate::fields::declare::{counter, declare, gauge};
use crate::fields::{bytes, whole, Field, Fold, Measure, Metric, Series, Source, Unit};

/// The heap allocations the record's calls made.
pub const ALLOCATIONS: Field = declare(
    "heap_allocations",
    Source::Heap,
    Unit::Count,
    Fold::Sum,
    ("allocs", "heap allocations made"),
    &[],
    None,
    (
        |s| bytes(s.heap.heap_allocations),
        |r| bytes(r.heap.allocations),
        Some(|s, v| s.heap.heap_allocations = whole(v)),
    ),
);

/// The bytes the record's calls allocated on the heap.
pub const ALLOCATED: Field = declare(
    "heap_allocated_bytes",
    Source::Heap,
    Unit::Bytes,
    Fold::Sum,
    ("heap allocated", "the bytes allocated on the heap"),
    &[Metric::HEAP],
    counter("heap_allocated_bytes", "heap.allocated"),
    (
        |s| bytes(s.heap.heap_allocated_bytes),
        |r| bytes(r.heap.allocated_bytes),
        Some(|s, v| s.heap.heap_allocated_bytes = whole(v)),
    ),
)
.in_column();

/// The bytes the record's calls freed on the heap.
pub const FREED: Field = declare(
    "heap_freed_bytes",
    Source::Heap,
    Unit::Bytes,
    Fold::Sum,
    ("freed", "the bytes freed on the heap"),
    &[],
    None,
    (
        |s| bytes(s.heap.heap_freed_bytes),
        |_| None,
        Some(|s, v| s.heap.heap_freed_bytes = whole(v)),
    ),
);

/// What the record's calls allocated and did not free.
pub const RETAINED: Field = declare(
    "heap_retained_bytes",
    Source::Heap,
    Unit::Bytes,
    Fold::Sum,
    ("retained", "allocated minus freed: what was left behind"),
    &[],
    None,
    (
        |s| s.heap.heap_retained_bytes.map(|v| v as f64),
        |_| None,
        Some(|s, v| s.heap.heap_retained_bytes = v.map(|v| v.round() as i64)),
    ),
)
.in_column();

/// The record's peak heap: per thread, the highest its live heap rose above where a
/// call began, summed over threads.
pub const PEAK: Field = declare(
    "peak_heap_bytes",
    Source::Heap,
    Unit::Bytes,
    Fold::Max,
    (
        "peak heap",
        "the peak heap (of the whole run: the peak live heap)",
    ),
    &[Metric::HEAP],
    gauge("peak_heap_bytes", "heap.peak"),
    (
        |s| bytes(s.heap.peak_heap_bytes),
        |r| bytes(r.heap.peak_live_bytes),
        Some(|s, v| s.heap.peak_heap_bytes = whole(v)),
    ),
)
.in_column();

/// The whole process's live heap at a timeline point, the highest of its readings.
pub const LIVE: Series = Series::new("heap_live_bytes", "live heap", Unit::Bytes)
    .peak("peak_heap_bytes")
    .read(|p| p.heap_live_bytes.map(|v| v as f64))
    .write(|p, v| p.heap_live_bytes = whole(v));

/// The heap.
pub const MEASURE: Measure = Measure::new(
    "heap",
    "heap.md",
    &[ALLOCATIONS, ALLOCATED, FREED, RETAINED, PEAK],
    &[LIVE],
)
.of_core("heap", |r, value| {
    r.heap = serde_json::from_value(value.clone()).unwrap_or_default();
});
