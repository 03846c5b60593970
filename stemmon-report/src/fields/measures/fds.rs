//! Open file descriptors of the process tree: the most held at once, per stage, per
//! process and over time.

use crate::fields::declare::{declare, gauge};
use crate::fields::{Field, Fold, Measure, Metric, Process, Series, Source, Unit};

/// `compare --metric fds`.
pub const METRIC: Metric = Metric::of("fds", Some("file descriptor"), Some("fds"));

/// The most descriptors the tree's processes held open at once.
pub const PEAK_TREE: Field = declare(
    "peak_tree_fds",
    Source::Measurement("fds"),
    Unit::Count,
    Fold::Max,
    (
        "fds",
        "the most file descriptors the tree's processes held open at once",
    ),
    &[METRIC],
    gauge("peak_tree_fds", "tree.file_descriptor.count"),
    figure!("peak_tree_fds"),
);

/// The descriptors the tree held open at a timeline point.
pub const TREE: Series = Series::new("tree_fds", "open descriptors", Unit::Count)
    .live("fds")
    .peak("peak_tree_fds");

/// Open file descriptors.
pub const MEASURE: Measure = Measure::new("fds", "fds.md", &[PEAK_TREE], &[TREE])
    .process(Process::new("peak_fds", Unit::Count))
    .section("fds", &[])
    .metric(METRIC);
