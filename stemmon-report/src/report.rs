//! The report itself: what a monitor's `summary` and `finish` return and what its
//! output file holds.

use crate::sections::{
    CgroupReport, HeapReport, HighWaterMarks, ProcessReport, SampleReport, Span, ThreadReport,
    TimelinePoint,
};
use crate::stage::{CpuIo, HighWater, Peaks, StageReport};
use crate::Figures;
use serde::Serialize;
use std::collections::BTreeMap;

/// A snapshot of a monitor: timings, peaks, stages and the sampler's own health.
///
/// It serializes to exactly the keys of the JSON report and reads back from it; a
/// report written by an older version reads back too, its newer keys defaulted:
///
/// ```no_run
/// let text = std::fs::read_to_string("report.json")?;
/// let report = stemmon_report::read(text.as_bytes())?;
/// println!("peak {:?} bytes in {:?}", report.peaks.peak_tree_rss_bytes, report.peak_rss_stage);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Report {
    /// The version of the report's layout, `"MAJOR.MINOR"` ([`FORMAT_VERSION`](crate::FORMAT_VERSION)
    /// when written by this version); `null` in reports of 0.1 to 0.3, which did not
    /// write it (see [`read`](crate::read())).
    pub format_version: Option<String>,
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
    /// The `Display` text of the `Err` `main` returned, where its type has one: the
    /// first line, at most 256 characters (`error` keeps the type's name). Absent
    /// otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
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
    /// Whether USS and PSS were collected (Linux; the macOS physical footprint is not
    /// read yet).
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
    /// The tree's CPU and I/O over the whole run (the book's `cpu-io.md`).
    #[serde(flatten)]
    pub cpu_io: CpuIo,
    /// Why the I/O fields are `null` (`/proc/PID/io` unreadable), `null` when read.
    pub io_missing: Option<String>,
    /// The process's heap (the book's `heap.md`).
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
    /// The sections and figures of the sources added since 0.4 (`gpu`,
    /// `peak_tree_gpu_bytes`), by key.
    #[serde(flatten)]
    pub figures: Figures,
}

impl Report {
    /// The record of a stage path such as `"fit"` or `"fit/inner"`.
    pub fn stage(&self, path: &str) -> Option<&StageReport> {
        self.stages.iter().find(|stage| stage.path == path)
    }
}
