//! Shared by the tests: the built binary, temp dirs that clean up, /proc lookups, and
//! reports measured for real.
#![allow(dead_code)] // Each test binary uses a part of this module.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use stemmon::report::{Span, TimelinePoint};
use stemmon::Report;

pub const MIB: u64 = 1 << 20;

/// The built `stemmon` binary.
pub fn stemmon() -> Command {
    Command::new(env!("CARGO_BIN_EXE_stemmon"))
}

/// `stemmon run` of `sh -c script` with 50 ms samples, no log, the report at `report`:
/// the command's exit code.
pub fn run_sh(report: &Path, script: &str) -> Option<i32> {
    stemmon()
        .args([
            "run",
            "--sample-interval",
            "0.05",
            "--log-interval",
            "none",
            "-o",
        ])
        .arg(report)
        .args(["--", "sh", "-c", script])
        .status()
        .unwrap()
        .code()
}

/// A directory removed when dropped, failing test or not.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        let path = std::env::temp_dir().join(format!(
            "stemmon-cli-{name}-{}-{:?}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn read_report(path: &Path) -> Report {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("no report at {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

pub fn write_report(path: &Path, report: &Report) {
    std::fs::write(path, serde_json::to_string_pretty(report).unwrap()).unwrap();
}

/// The direct children of `pid`, from every thread's `children` file.
pub fn children_of(pid: u32) -> Vec<u32> {
    let mut children = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return children;
    };
    for task in tasks.flatten() {
        let file = task.path().join("children");
        if let Ok(text) = std::fs::read_to_string(file) {
            children.extend(
                text.split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
    }
    children
}

/// The fields of `/proc/PID/stat` after the command name: state, ppid, ...
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &text[text.rfind(')')? + 1..];
    Some(after.split_whitespace().map(str::to_owned).collect())
}

pub fn parent_of(pid: u32) -> Option<u32> {
    stat_fields(pid)?.get(1)?.parse().ok()
}

/// `R`, `S`, `Z`... or `None` once the process is gone (reaped).
pub fn state_of(pid: u32) -> Option<String> {
    stat_fields(pid)?.first().cloned()
}

pub fn command_name(pid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|s| s.trim().to_owned())
}

pub fn signal(pid: u32, signal: i32) {
    // SAFETY: kill has no memory-safety preconditions; pid is a process this test started.
    assert_eq!(unsafe { libc::kill(pid as i32, signal) }, 0);
}

/// Touches `mib` MiB so that it is resident.
fn touched(mib: u64) -> Vec<u8> {
    let mut buffer = vec![0u8; (mib * MIB) as usize];
    for index in (0..buffer.len()).step_by(4096) {
        buffer[index] = 1;
    }
    buffer
}

/// A report measured for real: a monitor on this thread, stages that hold known memory
/// (`load` 64 MiB, `fit` 192 MiB with `fit/inner`, `predict` with a `dd` child holding
/// 100 MiB), sampled every 20 ms.
///
/// Until the runtime writes `timeline` and `spans` itself, they are filled here from the
/// same run's raw samples and stage records (one call each); once it does, its own are kept.
///
/// Measured once per test binary, before any test of it starts a child of its own
/// (Chromium, say), since the monitor counts every child of this process.
pub fn measured_report() -> Report {
    static REPORT: std::sync::OnceLock<Report> = std::sync::OnceLock::new();
    REPORT.get_or_init(measure).clone()
}

fn measure() -> Report {
    let monitor = stemmon::Monitor::builder()
        .current_thread_only()
        .log_interval(None)
        .sample_interval(Duration::from_millis(20))
        .max_samples(100_000)
        .label("rank", "0")
        .start()
        .unwrap();
    std::thread::sleep(Duration::from_millis(150));
    {
        let _load = monitor.stage("load").unwrap();
        let held = touched(64);
        std::thread::sleep(Duration::from_millis(300));
        std::hint::black_box(&held);
    }
    std::thread::sleep(Duration::from_millis(100));
    {
        let _fit = monitor.stage("fit").unwrap();
        let held = touched(128);
        std::thread::sleep(Duration::from_millis(200));
        {
            let _inner = monitor.stage("inner").unwrap();
            let more = touched(64);
            std::thread::sleep(Duration::from_millis(200));
            std::hint::black_box(&more);
        }
        std::hint::black_box(&held);
    }
    {
        let _predict = monitor.stage("predict").unwrap();
        let status = Command::new("sh")
            .args([
                "-c",
                "dd if=/dev/zero of=/dev/null bs=100M count=1 2>/dev/null; sleep 0.1; \
                 dd if=/dev/zero of=/dev/null bs=100M count=120 2>/dev/null",
            ])
            .status()
            .unwrap();
        assert!(status.success());
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut report = monitor.finish();
    if report.timeline.is_empty() {
        report.timeline = report
            .recent_samples
            .iter()
            .map(|sample| {
                let mut point = TimelinePoint::default();
                point.elapsed_seconds = sample.elapsed_seconds;
                point.end_seconds = sample.elapsed_seconds;
                point.tree_rss_bytes = sample.tree_rss_bytes;
                point.parent_rss_bytes = sample.parent_rss_bytes;
                point.children_rss_bytes = sample.children_rss_bytes;
                point.process_count = sample.process_count;
                point.samples = 1;
                point
            })
            .collect();
    }
    if report.spans.is_empty() {
        report.spans = report
            .stages
            .iter()
            .map(|stage| {
                let mut span = Span::default();
                span.stage_id = stage.id;
                span.start_seconds = stage.start_seconds;
                span.wall_seconds = stage.wall_seconds;
                span
            })
            .collect();
    }
    report
}
