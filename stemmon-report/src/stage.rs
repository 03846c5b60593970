//! A stage's record and the figures every record shares with the whole run: sampled
//! peaks, the kernel's exact figures, heap, CPU and I/O.

use crate::Figures;
use serde::{Deserialize, Serialize};

/// Peaks of the six memory fields over the samples a record saw.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct Peaks {
    /// Highest sum of the RSS of the process and all its descendants.
    pub peak_tree_rss_bytes: Option<u64>,
    /// Highest RSS of the monitored process itself.
    pub peak_parent_rss_bytes: Option<u64>,
    /// Highest sum of the RSS of the descendants.
    pub peak_children_rss_bytes: Option<u64>,
    /// Highest sum of unique set sizes (`detailed_memory`, Linux).
    pub peak_tree_uss_bytes: Option<u64>,
    /// Highest sum of proportional set sizes (`detailed_memory`, Linux).
    pub peak_tree_pss_bytes: Option<u64>,
    /// Highest physical footprint (macOS): kept for the layout, `null` until a macOS
    /// reader fills it.
    pub peak_tree_physical_footprint_bytes: Option<u64>,
}

/// What the kernel's own high-water marks and the job's cgroup say, for the whole run
/// or for one stage (the book's `exact-peaks.md`). `null` where the mark could not be read.
///
/// The sampled [`Peaks`] can miss a spike between two samples; these cannot. The true
/// peak of the tree lies between `peak_tree_rss_bytes` and `peak_tree_rss_bound_bytes`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct HighWater {
    /// The exact peak RSS of the monitored process itself (`VmHWM`, reset at every
    /// reading). Exact for stages longer than the boundary reuse window (about 1 ms).
    pub peak_parent_hwm_bytes: Option<u64>,
    /// An upper bound of the tree's peak that no spike escapes: per interval between
    /// readings, the sum of every live process's own high-water mark plus the peak of
    /// every descendant reaped in the interval (an exited root's final interval from its
    /// rusage). Never below `peak_tree_rss_bytes`: where a mark reads lower, the sampled
    /// figure stands.
    pub peak_tree_rss_bound_bytes: Option<u64>,
    /// Where some process of the tree ended at a peak nobody read (the report's
    /// `high_water_marks.unseen`), the sum that would have been the bound: the tree's
    /// peak was at least this, perhaps more. `peak_tree_rss_bound_bytes` is then `null`.
    pub peak_tree_rss_at_least_bytes: Option<u64>,
    /// The largest peak RSS of a descendant that exited while the record was open.
    pub peak_reaped_child_rss_bytes: Option<u64>,
    /// The highest memory charge of the job's cgroup seen while the record was open:
    /// its charge at each sample, or the kernel's peak where that rose in between. Not
    /// the cgroup's lifetime peak, which is [`CgroupReport::memory_peak_bytes`](crate::CgroupReport::memory_peak_bytes).
    pub peak_cgroup_memory_bytes: Option<u64>,
    /// The highest anonymous memory of the job's cgroup seen at the samples while the
    /// record was open (`memory.stat` `anon`): the charge without its file cache, still
    /// of every process in the cgroup.
    pub peak_cgroup_anon_bytes: Option<u64>,
    /// OOM kills in the job's cgroup while the record was open.
    pub oom_kills: Option<u64>,
}

/// Heap figures of one stage (the book's `heap.md`): what the stage's calls allocated and freed,
/// counted by `stemmon::Alloc` on the threads that ran them. `null` when
/// `stemmon::Alloc` is not the global allocator.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct StageHeap {
    /// Allocations made inside the stage, over all calls and threads.
    pub heap_allocations: Option<u64>,
    /// Bytes allocated inside the stage, over all calls and threads.
    pub heap_allocated_bytes: Option<u64>,
    /// Bytes freed inside the stage, whoever allocated them.
    pub heap_freed_bytes: Option<u64>,
    /// Allocated minus freed inside the stage: what it left behind, negative when it
    /// freed what others made.
    pub heap_retained_bytes: Option<i64>,
    /// The highest that difference reached during a call, measured from the call's
    /// entry: exact for a call on one thread; for calls on several threads at once the
    /// sum of each thread's highest, an upper bound.
    pub peak_heap_bytes: Option<u64>,
}

/// CPU and storage I/O of the whole process tree while a stage was open, or over the
/// whole run (the book's `cpu-io.md`). `null` where a reading could not be made.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct CpuIo {
    /// User CPU time of every thread of the process, its live descendants and the
    /// descendants reaped while open, summed over calls.
    pub cpu_user_seconds: Option<f64>,
    /// System CPU time, counted the same way.
    pub cpu_system_seconds: Option<f64>,
    /// User plus system CPU time over the wall time: 4.0 for a stage that kept four
    /// cores busy, near 0 for one that waited.
    pub cpu_cores: Option<f64>,
    /// CPU time of the threads that ran the stage's calls themselves (`RUSAGE_THREAD`
    /// at the boundary readings): the stage's own work apart from its siblings'.
    pub cpu_thread_seconds: Option<f64>,
    /// Bytes the tree read from storage (`/proc/PID/io` `read_bytes`, reaped children
    /// through their rusage).
    pub io_read_bytes: Option<u64>,
    /// Bytes the tree wrote to storage (`write_bytes`).
    pub io_write_bytes: Option<u64>,
    /// Page faults that needed I/O.
    pub major_faults: Option<u64>,
}

/// The aggregated record of one stage path.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct StageReport {
    /// Index of this record in [`Report::stages`](crate::Report::stages).
    pub id: u32,
    /// The stage's own name.
    pub name: String,
    /// Names from the outermost stage down, joined by `/`.
    pub path: String,
    /// `id` of the enclosing stage, `null` at the top level.
    pub parent_id: Option<u32>,
    /// How many times the stage was entered (open calls included).
    pub calls: u64,
    /// How many calls failed (panicked, returned `Err`, or were cancelled).
    pub errors: u64,
    /// How many threads ran it.
    pub threads: u32,
    /// Seconds from the monitor's start to the first entry.
    pub start_seconds: f64,
    /// Total wall time over all calls, summed over threads; an open call counts up to now.
    pub wall_seconds: f64,
    /// Shortest completed call; with only open calls, the shortest of those so far.
    pub min_wall_seconds: f64,
    /// Longest completed call; with only open calls, the longest of those so far.
    pub max_wall_seconds: f64,
    /// The last failure seen: `"panic"`, `"cancelled"` or the error's type name.
    pub error: Option<String>,
    /// Full tree samples taken while the stage was active.
    pub samples: u64,
    /// Of those, the ones that could not read every process.
    pub partial_rss_samples: u64,
    /// Most processes seen in the tree while the stage was active.
    pub peak_process_count: u32,
    /// Sampled memory peaks while the stage was active.
    #[serde(flatten)]
    pub peaks: Peaks,
    /// Exact peaks from the kernel's marks while the stage was active.
    #[serde(flatten)]
    pub high_water: HighWater,
    /// What the stage allocated and freed (the book's `heap.md`).
    #[serde(flatten)]
    pub heap: StageHeap,
    /// The tree's CPU and I/O while the stage was open (the book's `cpu-io.md`).
    #[serde(flatten)]
    pub cpu_io: CpuIo,
    /// The figures of the sources added since 0.4 (the GPU's), by key.
    #[serde(flatten)]
    pub figures: Figures,
}
