//! The table itself: one declaration per figure of a record.

use super::declare::{counter, declare};
use super::measures::{cgroup, cpu, heap, tree};
use super::{whole, Field, Fold, Source, Unit};

use Fold::Sum;
use Unit::{Count, Seconds};

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
    tree::PROCESSES,
    tree::PEAK,
    tree::PARENT,
    tree::CHILDREN,
    tree::USS,
    tree::PSS,
    tree::FOOTPRINT,
    tree::BOUND,
    tree::AT_LEAST,
    tree::PARENT_EXACT,
    tree::EXITED_CHILD,
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
