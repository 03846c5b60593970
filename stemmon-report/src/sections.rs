//! The run's sections that stand beside its figures: which marks were read, the job's
//! cgroup, the heap, the processes, the samples, the timeline, the kept calls, the
//! threads.

use crate::Figures;
use serde::{Deserialize, Serialize};

/// Which high-water marks were read, and why any were not.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct HighWaterMarks {
    /// Whether reading them was asked for (`.high_water_marks(true)`, the default).
    pub enabled: bool,
    /// Whether each reading reset them, so that every interval between readings has
    /// its own peak: the default of a monitored program; off by default under
    /// `stemmon run`. Resets change what the monitored processes see of their own
    /// peaks (`ru_maxrss`, `VmHWM`, `/usr/bin/time`). Off: each mark runs from its
    /// process's start, so the bound sums lifetime peaks (looser, never lower).
    pub resets: bool,
    /// The monitored process's own mark (`VmHWM`, reset through `clear_refs`).
    pub parent: bool,
    /// The live descendants' marks.
    pub descendants: bool,
    /// The peaks of reaped descendants.
    pub reaped: bool,
    /// Why a mark is missing (turned off, another OS, no permission), `null` if none is.
    pub missing: Option<String>,
    /// Each process of the tree that exited was accounted at its own peak from the
    /// kernel's exit record (taskstats, which needs `CAP_NET_ADMIN`), whoever reaped it.
    pub exit_records: bool,
    /// Processes of the tree that ended at a peak nobody read (reaped by another process
    /// of the tree, with no exit record): where any did, the tree's figure is only a
    /// floor, `peak_tree_rss_at_least_bytes`, and `peak_tree_rss_bound_bytes` is `null`.
    pub unseen: u32,
}

/// The job's cgroup: what a scheduler (Slurm, Kubernetes) charges and kills on.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct CgroupReport {
    /// The cgroup's directory.
    pub path: String,
    /// 1 or 2.
    pub version: u8,
    /// Memory charged to the cgroup now.
    pub memory_current_bytes: Option<u64>,
    /// The highest charge the kernel recorded since the cgroup was made (`memory.peak`,
    /// `memory.max_usage_in_bytes`): its lifetime peak, which may be an earlier job's,
    /// not this run's (that is `peak_cgroup_memory_bytes`).
    pub memory_peak_bytes: Option<u64>,
    /// The cgroup's anonymous memory now (`memory.stat` `anon`; v1 `total_rss`): what
    /// its processes hold themselves, without the file cache the charge also counts.
    pub memory_anon_bytes: Option<u64>,
    /// The limit; `null` when unlimited.
    pub memory_limit_bytes: Option<u64>,
    /// OOM kills in the cgroup since it was made.
    pub oom_kills: Option<u64>,
    /// Processes in the cgroup.
    pub processes: Option<u32>,
}

/// The whole process's heap (the book's `heap.md`), as `stemmon::Alloc` counted it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct HeapReport {
    /// The allocator that counted (`"stemmon::Alloc<mimalloc::MiMalloc>"`), `null`
    /// when none did.
    pub allocator: Option<String>,
    /// Allocations since the start.
    pub allocations: Option<u64>,
    /// Bytes allocated since the start.
    pub allocated_bytes: Option<u64>,
    /// Allocated minus freed by the whole process since the start.
    pub live_bytes: Option<u64>,
    /// The highest `live_bytes` at any sample or boundary reading.
    pub peak_live_bytes: Option<u64>,
    /// Why there are no heap figures (`"stemmon::Alloc is not the global
    /// allocator"`), `null` when there are.
    pub missing: Option<String>,
}

/// A process of the tree seen during the run (the book's `cpu-io.md`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ProcessReport {
    /// Its process id.
    pub pid: u32,
    /// Its parent's process id.
    pub ppid: u32,
    /// Its argv joined by spaces, at most 200 characters.
    pub command: String,
    /// Seconds from the monitor's start to when it was first seen.
    pub first_seconds: f64,
    /// Seconds from the monitor's start to when it was last seen.
    pub last_seconds: f64,
    /// Its own highest RSS: the highest of its readings (its RSS, its own high-water
    /// mark). `null` for a process never read alive (it exited between two samples).
    pub peak_rss_bytes: Option<u64>,
    /// The kernel's `ru_maxrss` at its exit, as its parent's `wait` gets it: the larger
    /// of its own peak and those of the children it waited for, which the kernel does
    /// not tell apart (this is what `/usr/bin/time` prints). `null` where stemmon did
    /// not see the exit (only its own children's exits can be read).
    pub exit_maxrss_bytes: Option<u64>,
    /// Its own user plus system CPU time (its reaped children's left out), as last
    /// read; the monitored process's since the monitor started.
    pub cpu_seconds: Option<f64>,
    /// Its exit code where stemmon saw the exit (128 + N for signal N), else `null`.
    pub exit_code: Option<i32>,
    /// The monitored process's virtual memory (`VmSize`) at its latest reading; absent
    /// for every other process (0.5).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub virtual_bytes: Option<u64>,
    /// The monitored process's threads at its latest reading; absent for every other
    /// process (0.5).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threads: Option<u32>,
    /// The monitored process's open file descriptors at its latest reading; absent for
    /// every other process (0.5).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_fds: Option<u32>,
    /// The figures of the sources added since 0.4 (`peak_gpu_bytes`), by key.
    #[serde(flatten)]
    pub figures: Figures,
}

/// One reading of the process tree.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct SampleReport {
    /// Seconds since the monitor started.
    pub elapsed_seconds: f64,
    /// The stage path active when the sample was applied (`"fit/inner"`), or `"workflow"`.
    pub stage: String,
    /// RSS of the process plus every descendant that could be read.
    pub tree_rss_bytes: Option<u64>,
    /// RSS of the monitored process.
    pub parent_rss_bytes: Option<u64>,
    /// RSS of the descendants that could be read.
    pub children_rss_bytes: Option<u64>,
    /// Unique set size of the tree (`detailed_memory`, Linux), else `null`.
    pub tree_uss_bytes: Option<u64>,
    /// Proportional set size of the tree (`detailed_memory`, Linux), else `null`.
    pub tree_pss_bytes: Option<u64>,
    /// Physical footprint of the tree (macOS): `null` until a macOS reader fills it.
    pub tree_physical_footprint_bytes: Option<u64>,
    /// Processes found in the tree, the monitored one included.
    pub process_count: u32,
    /// Processes whose RSS was read.
    pub rss_processes: u32,
    /// Whether every process found was read.
    pub rss_complete: bool,
}

/// One point of the whole-run [`Report::timeline`](crate::Report::timeline): the maxima of the samples it
/// stands for. Neighbours are merged as the run grows, so it never holds more than
/// about 2 000 points and no sampled peak disappears.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct TimelinePoint {
    /// Seconds since the start at the first sample of the point.
    pub elapsed_seconds: f64,
    /// Seconds since the start at the last sample of the point.
    pub end_seconds: f64,
    /// Highest tree RSS.
    pub tree_rss_bytes: Option<u64>,
    /// Highest RSS of the process itself.
    pub parent_rss_bytes: Option<u64>,
    /// Highest RSS of the descendants.
    pub children_rss_bytes: Option<u64>,
    /// Highest high-water bound of the tree (see [`HighWater`](crate::HighWater)).
    pub tree_rss_bound_bytes: Option<u64>,
    /// Highest cgroup memory charge.
    pub cgroup_memory_bytes: Option<u64>,
    /// Most processes.
    pub process_count: u32,
    /// Highest live heap (the book's `heap.md`), `null` without `stemmon::Alloc`.
    pub heap_live_bytes: Option<u64>,
    /// Highest CPU use of the tree in cores over the point's samples (the book's `cpu-io.md`).
    pub cpu_cores: Option<f64>,
    /// How many samples the point stands for.
    pub samples: u32,
    /// The highest figures of the sources added since 0.4 (`tree_gpu_bytes`), by key.
    #[serde(flatten)]
    pub figures: Figures,
}

/// One kept stage call of [`Report::spans`](crate::Report::spans), for traces.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct Span {
    /// The [`StageReport::id`](crate::StageReport::id) of the call's stage.
    pub stage_id: u32,
    /// The [`ThreadReport::id`] of the thread that ran it.
    pub thread: u32,
    /// Seconds from the monitor's start to the call's entry.
    pub start_seconds: f64,
    /// How long the call took.
    pub wall_seconds: f64,
    /// How the call failed, if it did.
    pub error: Option<String>,
    /// The `Display` text of the `Err` the call returned, where its type has one: the
    /// first line, at most 256 characters (`error` keeps the type's name). Absent
    /// otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
}

/// A thread that recorded stages.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct ThreadReport {
    /// Numbered from 0 (the monitor's own thread) in order of first stage.
    pub id: u32,
    /// The thread's name, if it has one.
    pub name: Option<String>,
    /// Stage calls it made.
    pub calls: u64,
}
