//! The JSON report: what [`Monitor::summary`](crate::Monitor::summary) and
//! [`Monitor::finish`](crate::Monitor::finish) return and what the output file holds.
//!
//! Sizes are bytes, times are seconds, readings that were not taken are `null`.

use serde::{Deserialize, Serialize};
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Peaks of the six memory fields over the samples a record saw.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
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

/// One reading of the process tree.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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

/// The aggregated record of one stage path.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
    /// Seconds from the monitor's start to the first entry.
    pub start_seconds: f64,
    /// Total wall time over all calls; an open call counts up to now.
    pub wall_seconds: f64,
    /// Shortest call.
    pub min_wall_seconds: f64,
    /// Longest call.
    pub max_wall_seconds: f64,
    /// The last failure seen: `"panic"`, `"cancelled"` or the error's type name.
    pub error: Option<String>,
    /// Full tree samples taken while the stage was active.
    pub samples: u64,
    /// Of those, the ones that could not read every process.
    pub partial_rss_samples: u64,
    /// Most processes seen in the tree while the stage was active.
    pub peak_process_count: u32,
    /// Memory peaks while the stage was active.
    #[serde(flatten)]
    pub peaks: Peaks,
}

/// A snapshot of a monitor: timings, peaks, stages and the sampler's own health.
///
/// It serializes to exactly the keys of the JSON report and reads back from it:
///
/// ```no_run
/// let text = std::fs::read_to_string("report.json")?;
/// let report: stemmon::Report = serde_json::from_str(&text)?;
/// println!("peak {:?} bytes in {:?}", report.peaks.peak_tree_rss_bytes, report.peak_rss_stage);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Process id of the monitored process.
    pub pid: u32,
    /// `true` while the monitor runs, `false` once it finished.
    pub running: bool,
    /// Why the monitored run failed: `"panic"` or the error type `main` returned.
    pub error: Option<String>,
    /// Seconds since the monitor started (until it finished).
    pub wall_seconds: f64,
    /// Seconds between background samples.
    pub sample_interval: f64,
    /// Operating system, kernel release and architecture.
    pub platform: String,
    /// Which memory reader ran: `"linux-proc"` or `"sysinfo"`.
    pub sampler: String,
    /// Whether USS / PSS / physical footprint were collected.
    pub detailed_memory: bool,
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
    /// Successful full tree samples.
    pub samples: u64,
    /// Of those, the ones that could not read every process.
    pub partial_rss_samples: u64,
    /// Most processes seen in the tree.
    pub peak_process_count: u32,
    /// Memory peaks over the whole run.
    #[serde(flatten)]
    pub peaks: Peaks,
    /// The stage path active at the tree RSS peak.
    pub peak_rss_stage: Option<String>,
    /// When the tree RSS peak was seen.
    pub peak_rss_elapsed_seconds: Option<f64>,
    /// One record per stage path, in order of first entry.
    pub stages: Vec<StageReport>,
    /// The newest sample.
    pub latest_sample: Option<SampleReport>,
    /// The last `max_samples` samples, oldest first.
    pub recent_samples: Vec<SampleReport>,
}

impl Report {
    /// The record of a stage path such as `"fit"` or `"fit/inner"`.
    pub fn stage(&self, path: &str) -> Option<&StageReport> {
        self.stages.iter().find(|stage| stage.path == path)
    }
}

/// Writes `bytes` to `path` so that a reader sees the old file or the new one, never a
/// part: a temporary file beside it, flushed, then renamed over it.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(parent)?;
    }
    let file_name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the path names no file"))?;
    let mut temporary_name = std::ffi::OsString::from(".");
    temporary_name.push(file_name);
    temporary_name.push(format!(
        ".{}.{}.tmp",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let temporary: PathBuf = path.with_file_name(temporary_name);
    let written = (|| {
        let mut file = fs::File::create(&temporary)?;
        file.write_all(bytes)?;
        file.sync_data()?;
        fs::rename(&temporary, path)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&temporary);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_creates_parents_and_leaves_no_temporary() {
        let dir = std::env::temp_dir().join(format!("stemmon-unit-{}", std::process::id()));
        let path = dir.join("a/b/report.json");
        write_atomic(&path, b"{}").unwrap();
        write_atomic(&path, b"{\"x\":1}").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "{\"x\":1}");
        let names: Vec<_> = fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("report.json")]);
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn atomic_write_to_a_directory_fails_and_cleans_up() {
        let dir = std::env::temp_dir().join(format!("stemmon-unit-dir-{}", std::process::id()));
        fs::create_dir_all(dir.join("taken")).unwrap();
        assert!(write_atomic(&dir.join("taken"), b"{}").is_err());
        let names: Vec<_> = fs::read_dir(&dir).unwrap().collect();
        assert_eq!(names.len(), 1, "the temporary file must be removed");
        fs::remove_dir_all(dir).unwrap();
    }
}
