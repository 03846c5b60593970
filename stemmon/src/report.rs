//! The JSON report: what [`Monitor::summary`](crate::Monitor::summary) and
//! [`Monitor::finish`](crate::Monitor::finish) return and what the output file holds.
//!
//! Sizes are bytes, times are seconds, readings that were not taken are `null`.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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
    /// Highest physical footprint (`detailed_memory`, macOS).
    pub peak_tree_physical_footprint_bytes: Option<u64>,
}

/// What the kernel's own high-water marks and the job's cgroup say, for the whole run
/// or for one stage (SPEC §8). `null` where the mark could not be read.
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
    /// The largest peak RSS of a descendant that exited while the record was open.
    pub peak_reaped_child_rss_bytes: Option<u64>,
    /// The highest memory charge of the job's cgroup seen while the record was open:
    /// its charge at each sample, or the kernel's peak where that rose in between. Not
    /// the cgroup's lifetime peak, which is [`CgroupReport::memory_peak_bytes`].
    pub peak_cgroup_memory_bytes: Option<u64>,
    /// OOM kills in the job's cgroup while the record was open.
    pub oom_kills: Option<u64>,
}

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
    /// The limit; `null` when unlimited.
    pub memory_limit_bytes: Option<u64>,
    /// OOM kills in the cgroup since it was made.
    pub oom_kills: Option<u64>,
    /// Processes in the cgroup.
    pub processes: Option<u32>,
}

/// Heap figures of one stage (SPEC §11): what the stage's calls allocated and freed,
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

/// The whole process's heap (SPEC §11), as `stemmon::Alloc` counted it.
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

/// CPU and storage I/O of the whole process tree while a stage was open, or over the
/// whole run (SPEC §12). `null` where a reading could not be made.
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

/// A process of the tree seen during the run (SPEC §12).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
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
    /// Physical footprint of the tree (`detailed_memory`, macOS), else `null`.
    pub tree_physical_footprint_bytes: Option<u64>,
    /// Processes found in the tree, the monitored one included.
    pub process_count: u32,
    /// Processes whose RSS was read.
    pub rss_processes: u32,
    /// Whether every process found was read.
    pub rss_complete: bool,
}

/// One point of the whole-run [`Report::timeline`]: the maxima of the samples it
/// stands for. Neighbours are merged as the run grows, so it never holds more than
/// about 2 000 points and no sampled peak disappears.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
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
    /// Highest high-water bound of the tree (see [`HighWater`]).
    pub tree_rss_bound_bytes: Option<u64>,
    /// Highest cgroup memory charge.
    pub cgroup_memory_bytes: Option<u64>,
    /// Most processes.
    pub process_count: u32,
    /// Highest live heap (SPEC §11), `null` without `stemmon::Alloc`.
    pub heap_live_bytes: Option<u64>,
    /// Highest CPU use of the tree in cores over the point's samples (SPEC §12).
    pub cpu_cores: Option<f64>,
    /// How many samples the point stands for.
    pub samples: u32,
}

/// One kept stage call of [`Report::spans`], for traces.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct Span {
    /// The [`StageReport::id`] of the call's stage.
    pub stage_id: u32,
    /// The [`ThreadReport::id`] of the thread that ran it.
    pub thread: u32,
    /// Seconds from the monitor's start to the call's entry.
    pub start_seconds: f64,
    /// How long the call took.
    pub wall_seconds: f64,
    /// How the call failed, if it did.
    pub error: Option<String>,
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

/// The aggregated record of one stage path.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct StageReport {
    /// Index of this record in [`Report::stages`].
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
    /// What the stage allocated and freed (SPEC §11).
    #[serde(flatten)]
    pub heap: StageHeap,
    /// The tree's CPU and I/O while the stage was open (SPEC §12).
    #[serde(flatten)]
    pub cpu_io: CpuIo,
}

/// A snapshot of a monitor: timings, peaks, stages and the sampler's own health.
///
/// It serializes to exactly the keys of the JSON report and reads back from it; a
/// report written by an older version reads back too, its newer keys defaulted:
///
/// ```no_run
/// let text = std::fs::read_to_string("report.json")?;
/// let report: stemmon::Report = serde_json::from_str(&text)?;
/// println!("peak {:?} bytes in {:?}", report.peaks.peak_tree_rss_bytes, report.peak_rss_stage);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct Report {
    /// Process id of the monitored process.
    pub pid: u32,
    /// This run's identity: unique per monitor start (host, pid, start time and a
    /// random part, as hex). `merge` refuses the same run twice; OTLP sends it as the
    /// `service.instance.id` resource attribute. `null` in reports before 0.4.
    pub run_id: Option<String>,
    /// When the monitor started, in seconds since the Unix epoch (the wall clock):
    /// every other time in the report counts from here. `null` before 0.4.
    pub start_unix_seconds: Option<f64>,
    /// `true` while the monitor runs, `false` once it finished.
    pub running: bool,
    /// Why the monitored run failed: `"panic"`, the error type `main` returned, or the
    /// signal that ended it (`"SIGTERM"`); under `stemmon run`, `"exit N"` when the
    /// command exited with a non-zero code N.
    pub error: Option<String>,
    /// The exit code of the command `stemmon run` watched (128 + N when signal N
    /// killed it, as the shell and `stemmon run` itself give it); `null` otherwise.
    pub exit_code: Option<i32>,
    /// Seconds since the monitor started (until it finished).
    pub wall_seconds: f64,
    /// Seconds between background samples.
    pub sample_interval: f64,
    /// Operating system, kernel release and architecture.
    pub platform: String,
    /// Which memory reader ran: `"linux-proc"` or `"sysinfo"`.
    pub sampler: String,
    /// The machine's host name.
    pub host: String,
    /// Who this process is in a larger job: `job_id`, `array_task`, `rank` from the
    /// scheduler's environment, and the labels given to the builder or in `STEMMON_LABELS`.
    pub labels: BTreeMap<String, String>,
    /// The monitored command's argv, when `stemmon run` started it.
    pub command: Option<Vec<String>>,
    /// Under `stemmon run`: stemmon's own high-water mark when it started the command.
    /// The kernel carries it into the command's `ru_maxrss` across `exec` (the peak of
    /// the image it replaced), so the command's `exit_maxrss_bytes` (and what
    /// `/usr/bin/time` prints for it) never reads below it, however little the command
    /// held. `null` otherwise.
    pub spawn_floor_bytes: Option<u64>,
    /// Whether USS / PSS / physical footprint were collected.
    pub detailed_memory: bool,
    /// Which high-water marks were read.
    pub high_water_marks: HighWaterMarks,
    /// Full tree samples attempted.
    pub sampling_attempts: u64,
    /// Seconds spent taking them.
    pub sampling_seconds: f64,
    /// The slowest one.
    pub max_sampling_seconds: f64,
    /// The longest time between two successful samples.
    pub max_sample_gap_seconds: f64,
    /// The last failure of a tree sample, if any.
    pub sampling_error: Option<String>,
    /// The last failure to write the report file, if any.
    pub output_error: Option<String>,
    /// The last failure to export metrics (Prometheus textfile or Pushgateway), if any.
    pub export_error: Option<String>,
    /// Successful full tree samples.
    pub samples: u64,
    /// Of those, the ones that could not read every process.
    pub partial_rss_samples: u64,
    /// Most processes seen in the tree.
    pub peak_process_count: u32,
    /// Sampled memory peaks over the whole run.
    #[serde(flatten)]
    pub peaks: Peaks,
    /// Exact peaks from the kernel's marks over the whole run.
    #[serde(flatten)]
    pub high_water: HighWater,
    /// The tree's CPU and I/O over the whole run (SPEC §12).
    #[serde(flatten)]
    pub cpu_io: CpuIo,
    /// Why the I/O fields are `null` (`/proc/PID/io` unreadable), `null` when read.
    pub io_missing: Option<String>,
    /// The process's heap (SPEC §11).
    pub heap: HeapReport,
    /// The tree's processes seen during the run: at most the 50 with the highest peak.
    pub processes: Vec<ProcessReport>,
    /// The stage path active at the tree RSS peak.
    pub peak_rss_stage: Option<String>,
    /// When the tree RSS peak was seen.
    pub peak_rss_elapsed_seconds: Option<f64>,
    /// The job's cgroup as last read, `null` where none can be read.
    pub cgroup: Option<CgroupReport>,
    /// The threads that recorded stages.
    pub threads: Vec<ThreadReport>,
    /// One record per stage path, in order of first entry.
    pub stages: Vec<StageReport>,
    /// The newest sample.
    pub latest_sample: Option<SampleReport>,
    /// The last `max_samples` samples, oldest first.
    pub recent_samples: Vec<SampleReport>,
    /// The whole run, at most about 2 000 points.
    pub timeline: Vec<TimelinePoint>,
    /// Stage calls kept for traces: at most 10 000, every call of 100 ms or more.
    pub spans: Vec<Span>,
}

impl Report {
    /// The record of a stage path such as `"fit"` or `"fit/inner"`.
    pub fn stage(&self, path: &str) -> Option<&StageReport> {
        self.stages.iter().find(|stage| stage.path == path)
    }
}
