//! NVIDIA GPUs through NVML: the GPU memory of the tree's processes and of the busiest
//! device, per stage, per process and over time, and the `gpu` section.

use crate::fields::declare::{declare, gauge};
use crate::fields::{Field, Fold, Measure, Metric, Process, Series, Source, Unit};

/// `compare --metric gpu`.
pub const METRIC: Metric = Metric::of("gpu", Some("GPU"), Some("gpu"));

/// The highest GPU memory the tree's processes held.
pub const PEAK_TREE: Field = declare(
    "peak_tree_gpu_bytes",
    Source::Gpu,
    Unit::Bytes,
    Fold::Max,
    ("GPU", "the highest GPU memory the tree's processes held"),
    &[METRIC],
    gauge("peak_tree_gpu_bytes", "peak_tree_gpu"),
    figure!("peak_tree_gpu_bytes"),
)
.in_column();

/// The busiest GPU's highest used memory.
pub const PEAK_DEVICE: Field = declare(
    "peak_device_gpu_bytes",
    Source::Gpu,
    Unit::Bytes,
    Fold::Max,
    (
        "GPU device",
        "the busiest GPU's highest used memory, whoever used it",
    ),
    &[METRIC],
    gauge("peak_device_gpu_bytes", "peak_device_gpu"),
    figure!("peak_device_gpu_bytes"),
)
.in_column();

/// The tree's GPU memory at a timeline point.
pub const TREE: Series = Series::new("tree_gpu_bytes", "tree GPU memory", Unit::Bytes)
    .live("gpu")
    .peak("peak_tree_gpu_bytes");

/// The GPU.
pub const MEASURE: Measure = Measure::new("gpu", "gpu.md", &[PEAK_TREE, PEAK_DEVICE], &[TREE])
    .process(Process::new("peak_gpu_bytes", Unit::Bytes))
    .section("gpu", &[])
    .metric(METRIC);
