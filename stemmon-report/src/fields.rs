//! Every figure a record (a stage, or the whole run) holds, declared once: its key, its
//! source, its unit, how it combines, its words for a column and a sentence, which
//! `compare --metric` judges it, and its exported metric. The command's `show`,
//! `compare` and `merge`, the runtime's Prometheus and OTLP metrics, and the report
//! reference of the docs are driven by this table, not written out per figure: a new
//! source adds its figures here and everything that reads records takes them.

use crate::{Report, StageReport};

/// Where a figure comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Source {
    /// The stage's calls themselves.
    Calls,
    /// The sampled memory of the process tree.
    Tree,
    /// The kernel's high-water marks and reaped children (the exact figures).
    Marks,
    /// The job's cgroup.
    Cgroup,
    /// `stemmon::Alloc`'s heap counts.
    Heap,
    /// CPU and storage I/O of the tree.
    Cpu,
    /// NVIDIA GPUs through NVML.
    Gpu,
}

/// A figure's unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Bytes.
    Bytes,
    /// Seconds.
    Seconds,
    /// A count.
    Count,
    /// CPU cores (CPU seconds over wall seconds).
    Cores,
}

/// How the figure of two records combines: the calls of one stage on two ranks, two
/// reports of one job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fold {
    /// The larger: a peak.
    Max,
    /// The sum: a count, a total time, bytes moved.
    Sum,
    /// Recomputed from other figures (`cpu_cores`), never combined itself.
    Derived,
}

/// The groups of figures `stemmon compare --metric` judges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    /// The kernel's exact figures (and the sampled peak beside them).
    Exact,
    /// The sampled peak alone.
    Sampled,
    /// The heap.
    Heap,
    /// CPU time.
    Cpu,
    /// GPU memory.
    Gpu,
}

/// A figure's exported metric.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Export {
    /// The Prometheus metric of a stage: `stemmon_stage_<name>` (counters end in
    /// `_total`); of the run, `stemmon_<name>`.
    pub name: &'static str,
    /// The OpenTelemetry metric of a stage: `stemmon.stage.<otlp>` (units are metadata,
    /// not part of the name); of the run, `stemmon.<otlp>`.
    pub otlp: &'static str,
    /// A counter (a sum over calls) or a gauge (a peak).
    pub counter: bool,
}

/// One figure of a record (see the module docs).
#[derive(Clone, Copy)]
pub struct Field {
    /// The report key (for a figure computed from others, its name: `cpu_seconds`).
    pub key: &'static str,
    /// Its source.
    pub source: Source,
    /// Its unit.
    pub unit: Unit,
    /// How two records' figures combine.
    pub fold: Fold,
    /// A column's header: `bound`, `peak heap`.
    pub label: &'static str,
    /// What it is, in a sentence.
    pub meaning: &'static str,
    /// The `compare --metric` groups that judge it.
    pub metrics: &'static [Metric],
    /// Its exported metric, where it has one.
    pub export: Option<Export>,
    /// Whether `stemmon show` gives it a column of the stage table, shown when some
    /// stage has the figure: the figures of the sources beyond the tree's (heap, CPU and
    /// I/O, cgroup, GPU) that say most per stage. The stage's calls, times and tree peaks
    /// have that table's own columns; the rest are in `show`'s header or the report.
    pub column: bool,
    stage: fn(&StageReport) -> Option<f64>,
    run: fn(&Report) -> Option<f64>,
    set: Option<fn(&mut StageReport, Option<f64>)>,
}

impl std::fmt::Debug for Field {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Field")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl Field {
    /// Its value in `stage`.
    pub fn of_stage(&self, stage: &StageReport) -> Option<f64> {
        (self.stage)(stage).filter(|v| v.is_finite())
    }

    /// Its value for the whole run of `report` (for the heap: the whole process's).
    pub fn of_run(&self, report: &Report) -> Option<f64> {
        (self.run)(report).filter(|v| v.is_finite())
    }

    /// Sets it in `stage` (a combined record); a figure computed from others is not set.
    pub fn set(&self, stage: &mut StageReport, value: Option<f64>) {
        if let Some(set) = self.set {
            set(stage, value);
        }
    }

    /// Whether it is a report key (not computed from others).
    pub fn is_key(&self) -> bool {
        self.set.is_some()
    }

    /// This field with a column in `stemmon show`'s stage table.
    const fn in_column(self) -> Field {
        Field {
            column: true,
            ..self
        }
    }

    /// Whether `--max-peak` and the memory threshold apply: a peak in bytes.
    pub fn is_peak(&self) -> bool {
        self.fold == Fold::Max && self.unit == Unit::Bytes
    }
}

/// The field with `key`.
pub fn field(key: &str) -> Option<&'static Field> {
    FIELDS.iter().find(|f| f.key == key)
}

fn bytes(value: Option<u64>) -> Option<f64> {
    value.map(|v| v as f64)
}

fn whole(value: Option<f64>) -> Option<u64> {
    value.filter(|v| *v >= 0.0).map(|v| v.round() as u64)
}

/// A figure at the same path on a stage and on the run (`peaks`, `high_water`, `cpu_io`).
macro_rules! both {
    ($section:ident . $name:ident, bytes) => {
        (
            |s: &StageReport| bytes(s.$section.$name),
            |r: &Report| bytes(r.$section.$name),
            Some(|s: &mut StageReport, v: Option<f64>| s.$section.$name = whole(v)),
        )
    };
    ($section:ident . $name:ident, seconds) => {
        (
            |s: &StageReport| s.$section.$name,
            |r: &Report| r.$section.$name,
            Some(|s: &mut StageReport, v: Option<f64>| s.$section.$name = v),
        )
    };
}

/// A figure of the sources since 0.4, kept by key.
macro_rules! figure {
    ($key:literal) => {
        (
            |s: &StageReport| s.figures.number($key),
            |r: &Report| r.figures.number($key),
            Some(|s: &mut StageReport, v: Option<f64>| s.figures.set_count($key, whole(v))),
        )
    };
}

/// How a field is read on a stage and on the run, and written on a stage.
type Access = (
    fn(&StageReport) -> Option<f64>,
    fn(&Report) -> Option<f64>,
    Option<fn(&mut StageReport, Option<f64>)>,
);

#[allow(clippy::too_many_arguments)] // One declaration: every column of the table.
const fn declare(
    key: &'static str,
    source: Source,
    unit: Unit,
    fold: Fold,
    words: (&'static str, &'static str),
    metrics: &'static [Metric],
    export: Option<Export>,
    access: Access,
) -> Field {
    Field {
        key,
        source,
        unit,
        fold,
        label: words.0,
        meaning: words.1,
        metrics,
        export,
        column: false,
        stage: access.0,
        run: access.1,
        set: access.2,
    }
}

const fn gauge(name: &'static str, otlp: &'static str) -> Option<Export> {
    Some(Export {
        name,
        otlp,
        counter: false,
    })
}

const fn counter(name: &'static str, otlp: &'static str) -> Option<Export> {
    Some(Export {
        name,
        otlp,
        counter: true,
    })
}

fn cpu_seconds(cpu_user: Option<f64>, cpu_system: Option<f64>) -> Option<f64> {
    match (cpu_user, cpu_system) {
        (Some(user), Some(system)) => Some(user + system),
        (user, system) => user.or(system),
    }
}

use Fold::{Derived, Max, Sum};
use Metric::{Cpu as CpuMetric, Exact, Gpu as GpuMetric, Heap as HeapMetric, Sampled};
use Unit::{Bytes, Cores, Count, Seconds};

/// Every figure of a record, in the order the docs and the tables give them.
pub const FIELDS: &[Field] = &[
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
        &[Exact, Sampled],
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
        &[Exact],
        gauge("peak_tree_rss_bound_bytes", "peak_tree_rss_bound"),
        both!(high_water.peak_tree_rss_bound_bytes, bytes),
    ),
    declare(
        "peak_parent_hwm_bytes",
        Source::Marks,
        Bytes,
        Max,
        ("parent exact", "the parent's exact peak"),
        &[Exact],
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
    declare(
        "peak_cgroup_memory_bytes",
        Source::Cgroup,
        Bytes,
        Max,
        ("cgroup", "the highest charge of the job's cgroup"),
        &[],
        gauge("peak_cgroup_memory_bytes", "peak_cgroup_memory"),
        both!(high_water.peak_cgroup_memory_bytes, bytes),
    )
    .in_column(),
    declare(
        "oom_kills",
        Source::Cgroup,
        Count,
        Sum,
        ("OOM kills", "OOM kills in the job's cgroup"),
        &[],
        counter("oom_kills", "oom_kills"),
        both!(high_water.oom_kills, bytes),
    ),
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
        &[HeapMetric],
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
        &[HeapMetric],
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
        &[CpuMetric],
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
    declare(
        "peak_tree_gpu_bytes",
        Source::Gpu,
        Bytes,
        Max,
        ("GPU", "the highest GPU memory the tree's processes held"),
        &[GpuMetric],
        gauge("peak_tree_gpu_bytes", "peak_tree_gpu"),
        figure!("peak_tree_gpu_bytes"),
    )
    .in_column(),
    declare(
        "peak_device_gpu_bytes",
        Source::Gpu,
        Bytes,
        Max,
        (
            "GPU device",
            "the busiest GPU's highest used memory, whoever used it",
        ),
        &[GpuMetric],
        gauge("peak_device_gpu_bytes", "peak_device_gpu"),
        figure!("peak_device_gpu_bytes"),
    )
    .in_column(),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_reads_and_writes_its_own_key() {
        let mut keys: Vec<&str> = FIELDS.iter().map(|f| f.key).collect();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), FIELDS.len(), "a key declared twice");
        for (n, field) in FIELDS.iter().enumerate().filter(|(_, f)| f.is_key()) {
            let mut stage = StageReport::default();
            let value = 1000.0 + n as f64;
            field.set(&mut stage, Some(value));
            assert_eq!(field.of_stage(&stage), Some(value), "{}", field.key);
            // And it is the report key of that name.
            let json = serde_json::to_value(&stage).unwrap();
            assert_eq!(json[field.key].as_f64(), Some(value), "{}", field.key);
        }
    }

    #[test]
    fn derived_figures_come_from_their_parts() {
        let mut stage = StageReport::default();
        stage.cpu_io.cpu_user_seconds = Some(1.5);
        stage.cpu_io.cpu_system_seconds = Some(0.25);
        assert_eq!(field("cpu_seconds").unwrap().of_stage(&stage), Some(1.75));
        assert!(!field("cpu_seconds").unwrap().is_key());
        assert!(field("peak_tree_rss_bound_bytes").unwrap().is_peak());
        assert!(!field("heap_allocated_bytes").unwrap().is_peak());
    }

    #[test]
    fn columns_are_figures_of_the_sources_beyond_the_tree() {
        for field in FIELDS.iter().filter(|f| f.column) {
            assert!(
                matches!(
                    field.source,
                    Source::Heap | Source::Cpu | Source::Cgroup | Source::Gpu
                ),
                "{}: the calls, times and tree peaks have show's own columns",
                field.key
            );
        }
        assert!(field("peak_tree_gpu_bytes").unwrap().column);
        assert!(!field("heap_freed_bytes").unwrap().column);
    }
}
