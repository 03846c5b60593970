//! Memory pressure (Linux PSI): the time in which some of the run's tasks stalled on
//! memory, per stage and run, and the highest share of a sample interval it took.

use crate::fields::declare::{counter, declare, gauge};
use crate::fields::{Field, Fold, Measure, Metric, Series, Source, Unit};

/// `compare --metric pressure`.
pub const METRIC: Metric = Metric::of("pressure", Some("memory pressure"), Some("pressure"));

/// The highest share of a sample interval in which some task stalled on memory.
pub const SHARE: Field = declare(
    "memory_pressure_some_share",
    Source::Measurement("pressure"),
    Unit::Share,
    Fold::Max,
    (
        "memory pressure",
        "the highest share of a sample interval in which some task stalled on memory",
    ),
    &[METRIC],
    gauge("memory_pressure_some_share", "memory.pressure.some.share"),
    figure!("memory_pressure_some_share"),
);

/// The time in which some task stalled on memory.
pub const SECONDS: Field = declare(
    "memory_pressure_some_seconds",
    Source::Measurement("pressure"),
    Unit::Seconds,
    Fold::Sum,
    ("memory stall", "time in which some task stalled on memory"),
    &[],
    counter("memory_pressure_some_seconds", "memory.pressure.some.time"),
    figure!("memory_pressure_some_seconds"),
);

/// The share of a timeline point's interval in which some task stalled on memory.
pub const POINT: Series = Series::new(
    "memory_pressure_some_share",
    "memory pressure",
    Unit::Share,
)
.live("psi")
.peak("memory_pressure_some_share");

/// Memory pressure.
pub const MEASURE: Measure = Measure::new("pressure", "pressure.md", &[SHARE, SECONDS], &[POINT])
    .section("pressure", &[])
    .metric(METRIC);
