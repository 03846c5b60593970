//! The job's cgroup, a measurement of the core: what a scheduler (Slurm, Kubernetes)
//! charges and kills on. Its figures are typed fields of every record (`high_water`),
//! its series a typed field of each timeline point, its section the report's `cgroup`.
//! They cover the time since the previous sample: the charge's highest since then and
//! the kills since then.

use crate::fields::declare::{counter, declare, gauge};
use crate::fields::{whole, Field, Fold, Measure, Series, Source, Unit};

/// The highest charge of the job's cgroup while the record was open.
pub const PEAK_MEMORY: Field = declare(
    "peak_cgroup_memory_bytes",
    Source::Cgroup,
    Unit::Bytes,
    Fold::Max,
    ("cgroup", "the highest charge of the job's cgroup"),
    &[],
    gauge("peak_cgroup_memory_bytes", "peak_cgroup_memory"),
    both!(high_water.peak_cgroup_memory_bytes, bytes),
)
.in_column()
.on_run(|r, v| r.high_water.peak_cgroup_memory_bytes = whole(v));

/// The cgroup's highest anonymous memory while the record was open.
pub const PEAK_ANON: Field = declare(
    "peak_cgroup_anon_bytes",
    Source::Cgroup,
    Unit::Bytes,
    Fold::Max,
    (
        "cgroup anon",
        "the cgroup's anonymous memory, no file cache",
    ),
    &[],
    None,
    both!(high_water.peak_cgroup_anon_bytes, bytes),
)
.on_run(|r, v| r.high_water.peak_cgroup_anon_bytes = whole(v));

/// OOM kills in the job's cgroup while the record was open.
pub const OOM_KILLS: Field = declare(
    "oom_kills",
    Source::Cgroup,
    Unit::Count,
    Fold::Sum,
    ("OOM kills", "OOM kills in the job's cgroup"),
    &[],
    counter("oom_kills", "oom_kills"),
    both!(high_water.oom_kills, bytes),
)
.on_run(|r, v| r.high_water.oom_kills = whole(v));

/// The cgroup's highest charge over a timeline point's samples.
pub const CHARGE: Series = Series::new("cgroup_memory_bytes", "cgroup charge", Unit::Bytes)
    .peak("peak_cgroup_memory_bytes")
    .read(|p| p.cgroup_memory_bytes.map(|v| v as f64))
    .write(|p, v| p.cgroup_memory_bytes = whole(v));

/// The job's cgroup.
pub const MEASURE: Measure = Measure::new(
    "cgroup",
    "reference.md",
    &[PEAK_MEMORY, PEAK_ANON, OOM_KILLS],
    &[CHARGE],
)
.of_core("cgroup", |r, value| {
    r.cgroup = serde_json::from_value(value.clone()).ok();
})
.interval();
