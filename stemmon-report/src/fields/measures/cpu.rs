//! CPU and I/O of the process tree, a measurement of the core: counters (CPU time,
//! bytes read and written, major faults) that the runtime differences per call, so a
//! record's figures are what the tree did while its calls were open. Its figures are
//! typed fields of every record (`cpu_io`), its series the timeline's `cpu_cores`, its
//! section the report's `io_missing`.

use crate::fields::declare::{counter, declare};
use crate::fields::{whole, Field, Fold, Measure, Metric, Series, Source, Unit};

fn cpu_seconds(cpu_user: Option<f64>, cpu_system: Option<f64>) -> Option<f64> {
    match (cpu_user, cpu_system) {
        (Some(user), Some(system)) => Some(user + system),
        (user, system) => user.or(system),
    }
}

/// The tree's user CPU time while the record's calls were open.
pub const USER: Field = declare(
    "cpu_user_seconds",
    Source::Cpu,
    Unit::Seconds,
    Fold::Sum,
    ("user", "the tree's user CPU time"),
    &[],
    None,
    both!(cpu_io.cpu_user_seconds, seconds),
)
.on_run(|r, v| r.cpu_io.cpu_user_seconds = v);

/// The tree's system CPU time while the record's calls were open.
pub const SYSTEM: Field = declare(
    "cpu_system_seconds",
    Source::Cpu,
    Unit::Seconds,
    Fold::Sum,
    ("system", "the tree's system CPU time"),
    &[],
    None,
    both!(cpu_io.cpu_system_seconds, seconds),
)
.on_run(|r, v| r.cpu_io.cpu_system_seconds = v);

/// The tree's CPU time, user plus system (computed from the two).
pub const SECONDS: Field = declare(
    "cpu_seconds",
    Source::Cpu,
    Unit::Seconds,
    Fold::Derived,
    ("CPU", "the tree's CPU seconds, user plus system"),
    &[Metric::CPU],
    counter("cpu_seconds", "cpu.time"),
    (
        |s| cpu_seconds(s.cpu_io.cpu_user_seconds, s.cpu_io.cpu_system_seconds),
        |r| cpu_seconds(r.cpu_io.cpu_user_seconds, r.cpu_io.cpu_system_seconds),
        None,
    ),
)
.in_column();

/// The cores the tree used while the record's calls were open: its CPU seconds over
/// its wall seconds.
pub const CORES: Field = declare(
    "cpu_cores",
    Source::Cpu,
    Unit::Cores,
    Fold::Derived,
    ("cores", "CPU seconds over wall seconds"),
    &[],
    None,
    both!(cpu_io.cpu_cores, seconds),
)
.in_column()
.on_run(|r, v| r.cpu_io.cpu_cores = v);

/// The CPU time of the threads that ran the record's calls.
pub const THREAD: Field = declare(
    "cpu_thread_seconds",
    Source::Cpu,
    Unit::Seconds,
    Fold::Sum,
    (
        "own CPU",
        "the CPU time of the threads that ran the stage's calls",
    ),
    &[],
    None,
    both!(cpu_io.cpu_thread_seconds, seconds),
)
.in_column()
.on_run(|r, v| r.cpu_io.cpu_thread_seconds = v);

/// The bytes the tree read from storage while the record's calls were open.
pub const IO_READ: Field = declare(
    "io_read_bytes",
    Source::Cpu,
    Unit::Bytes,
    Fold::Sum,
    ("read", "bytes the tree read from storage"),
    &[],
    counter("io_read_bytes", "disk.read"),
    both!(cpu_io.io_read_bytes, bytes),
)
.in_column()
.on_run(|r, v| r.cpu_io.io_read_bytes = whole(v));

/// The bytes the tree wrote to storage while the record's calls were open.
pub const IO_WRITE: Field = declare(
    "io_write_bytes",
    Source::Cpu,
    Unit::Bytes,
    Fold::Sum,
    ("written", "bytes the tree wrote to storage"),
    &[],
    counter("io_write_bytes", "disk.write"),
    both!(cpu_io.io_write_bytes, bytes),
)
.in_column()
.on_run(|r, v| r.cpu_io.io_write_bytes = whole(v));

/// The page faults that needed I/O while the record's calls were open.
pub const MAJOR_FAULTS: Field = declare(
    "major_faults",
    Source::Cpu,
    Unit::Count,
    Fold::Sum,
    ("major faults", "page faults that needed I/O"),
    &[],
    None,
    both!(cpu_io.major_faults, bytes),
)
.on_run(|r, v| r.cpu_io.major_faults = whole(v));

/// The cores the tree used over a timeline point's samples.
pub const CORES_NOW: Series = Series::new("cpu_cores", "cpu", Unit::Cores)
    .read(|p| p.cpu_cores)
    .write(|p, v| p.cpu_cores = v);

/// CPU and I/O.
pub const MEASURE: Measure = Measure::new(
    "cpu",
    "cpu-io.md",
    &[
        USER,
        SYSTEM,
        SECONDS,
        CORES,
        THREAD,
        IO_READ,
        IO_WRITE,
        MAJOR_FAULTS,
    ],
    &[CORES_NOW],
)
.of_core("io_missing", |r, value| {
    r.io_missing = value.as_str().map(str::to_owned);
});
