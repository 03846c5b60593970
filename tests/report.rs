//! The report: its exact keys, its file written atomically, and the monitor's own
//! failures kept apart from the program's.

use serde_json::Value;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use stemmon::{Error, Monitor, Report};
use stemmon_suite::temp_dir;

const MEMORY_FIELDS: [&str; 6] = [
    "tree_rss_bytes",
    "parent_rss_bytes",
    "children_rss_bytes",
    "tree_uss_bytes",
    "tree_pss_bytes",
    "tree_physical_footprint_bytes",
];

fn keys(value: &Value) -> Vec<String> {
    let mut keys: Vec<String> = value.as_object().unwrap().keys().cloned().collect();
    keys.sort();
    keys
}

fn sorted(names: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut names: Vec<String> = names.into_iter().collect();
    names.sort();
    names
}

fn peak_keys() -> impl Iterator<Item = String> {
    MEMORY_FIELDS.iter().map(|f| format!("peak_{f}"))
}

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The exact-peak keys, in the report and in every stage (with the floor where a
/// process ended unseen, and the cgroup's anonymous memory).
const HIGH_WATER_KEYS: [&str; 7] = [
    "peak_parent_hwm_bytes",
    "peak_tree_rss_bound_bytes",
    "peak_tree_rss_at_least_bytes",
    "peak_reaped_child_rss_bytes",
    "peak_cgroup_memory_bytes",
    "peak_cgroup_anon_bytes",
    "oom_kills",
];

/// The CPU and I/O keys of the book's `cpu-io.md`, in the report and in every stage.
const CPU_IO_KEYS: [&str; 7] = [
    "cpu_user_seconds",
    "cpu_system_seconds",
    "cpu_cores",
    "cpu_thread_seconds",
    "io_read_bytes",
    "io_write_bytes",
    "major_faults",
];

/// The figures of the measurements read at samples, in the report and in every stage
/// (`null` until a sample reads them): the open descriptors', and the memory
/// pressure's where the kernel has PSI (its section then says why not).
fn measured_keys() -> Vec<&'static str> {
    let mut keys = vec!["peak_tree_fds"];
    if Path::new("/proc/pressure/memory").exists() {
        keys.extend(["memory_pressure_some_share", "memory_pressure_some_seconds"]);
    }
    keys
}

#[test]
fn the_report_file_has_exactly_the_specified_keys() {
    let dir = temp_dir("keys");
    let path = dir.join("report.json");
    let monitor = Monitor::builder()
        .current_thread_only()
        .log_interval(None)
        .output(&path)
        .max_samples(2)
        .start()
        .unwrap();
    drop(monitor.stage("fit").unwrap());
    monitor.finish();
    let json = read(&path);

    let report_keys = [
        "format_version",
        "pid",
        "running",
        "error",
        "exit_code",
        "wall_seconds",
        "sample_interval",
        "platform",
        "sampler",
        "host",
        "labels",
        "command",
        "detailed_memory",
        "high_water_marks",
        "sampling_attempts",
        "sampling_seconds",
        "max_sampling_seconds",
        "max_sample_gap_seconds",
        "sampling_error",
        "output_error",
        "export_error",
        "samples",
        "partial_rss_samples",
        "peak_process_count",
        "peak_rss_stage",
        "peak_rss_elapsed_seconds",
        "cgroup",
        "threads",
        "stages",
        "latest_sample",
        "recent_samples",
        "timeline",
        "spans",
        "heap",
        "io_missing",
        "processes",
        // 0.4: the run's identity and its place in time.
        "run_id",
        "start_unix_seconds",
        "spawn_floor_bytes",
        // The GPU source's section (feature `gpu`, on by default): here without a driver.
        "gpu",
        // 0.5: the open descriptors' section, and the memory pressure's.
        "fds",
        "pressure",
    ];
    let expected = sorted(
        report_keys
            .iter()
            .chain(HIGH_WATER_KEYS.iter())
            .chain(CPU_IO_KEYS.iter())
            .chain(measured_keys().iter())
            .map(|k| k.to_string())
            .chain(peak_keys()),
    );
    assert_eq!(keys(&json), expected);

    let stage_keys = [
        "id",
        "name",
        "path",
        "parent_id",
        "calls",
        "errors",
        "threads",
        "start_seconds",
        "wall_seconds",
        "min_wall_seconds",
        "max_wall_seconds",
        "error",
        "samples",
        "partial_rss_samples",
        "peak_process_count",
        // The heap's (the book's `heap.md`).
        "heap_allocations",
        "heap_allocated_bytes",
        "heap_freed_bytes",
        "heap_retained_bytes",
        "peak_heap_bytes",
    ];
    let expected = sorted(
        stage_keys
            .iter()
            .chain(HIGH_WATER_KEYS.iter())
            .chain(CPU_IO_KEYS.iter())
            .chain(measured_keys().iter())
            .map(|k| k.to_string())
            .chain(peak_keys()),
    );
    assert_eq!(keys(&json["stages"][0]), expected);

    let sample_keys = [
        "elapsed_seconds",
        "stage",
        "process_count",
        "rss_processes",
        "rss_complete",
    ];
    let expected = sorted(
        sample_keys
            .iter()
            .chain(MEMORY_FIELDS.iter())
            .map(|k| k.to_string()),
    );
    assert_eq!(keys(&json["latest_sample"]), expected);
    assert_eq!(keys(&json["recent_samples"][0]), expected);

    assert_eq!(json["running"], Value::Bool(false));
    assert_eq!(json["pid"], std::process::id());
    // Without detailed_memory the detailed peaks are present and null.
    assert!(json["peak_tree_uss_bytes"].is_null() && json["peak_tree_pss_bytes"].is_null());
    assert!(json["peak_tree_rss_bytes"].as_u64().unwrap() > 0);
    assert_eq!(json["stages"][0]["name"], "fit");
}

#[test]
fn the_file_reads_back_as_the_report_finish_returned() {
    let dir = temp_dir("roundtrip");
    let path = dir.join("nested/dirs/report.json");
    let monitor = Monitor::builder()
        .current_thread_only()
        .log_interval(None)
        .output(&path)
        .start()
        .unwrap();
    {
        let _a = monitor.stage("a").unwrap();
        let _b = monitor.stage("b").unwrap();
    }
    let returned = monitor.finish();
    let text = std::fs::read_to_string(&path).unwrap();
    let parsed: Report = serde_json::from_str(&text).unwrap();
    assert_eq!(parsed, returned);
    assert_eq!(parsed.stage("a/b").unwrap().parent_id, Some(0));
    assert!(!parsed.running);
}

#[test]
fn without_logging_the_report_is_written_at_the_end_only() {
    let dir = temp_dir("end-only");
    let path = dir.join("report.json");
    let monitor = Monitor::builder()
        .current_thread_only()
        .log_interval(None)
        .sample_interval(Duration::from_millis(10))
        .output(&path)
        .start()
        .unwrap();
    drop(monitor.stage("s").unwrap());
    // Samples come and go, a stage completed: still no file.
    stemmon_suite::wait_for_samples(&monitor, 5);
    assert!(!path.exists(), "nothing is written before the end");
    monitor.finish();
    assert!(path.exists());
}

#[test]
fn a_reader_never_sees_a_half_written_report() {
    let dir = temp_dir("atomic");
    let path = dir.join("report.json");
    // Log (and so rewrite) every 2 ms, with stage lines in between, and a large report.
    let monitor = Monitor::builder()
        .current_thread_only()
        .log_interval(Some(Duration::from_millis(2)))
        .sample_interval(Duration::from_millis(2))
        .max_samples(500)
        .output(&path)
        .start()
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let parsed = Arc::new(AtomicU32::new(0));
    let reader = {
        let (stop, parsed, path) = (Arc::clone(&stop), Arc::clone(&parsed), path.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                match std::fs::read_to_string(&path) {
                    Ok(text) => {
                        let report: Report = serde_json::from_str(&text)
                            .unwrap_or_else(|e| panic!("invalid report after {parsed:?}: {e}"));
                        assert!(report.pid > 0);
                        parsed.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::NotFound),
                }
            }
        })
    };
    // Rewrites go on until the reader has read 20 reports whole (at least 400 stages),
    // however slowly a busy machine lets it read.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut i = 0;
    while i < 400 || parsed.load(Ordering::Relaxed) < 20 {
        if reader.is_finished() {
            break; // it panicked: the join below says why
        }
        assert!(
            Instant::now() < deadline,
            "the reader read {parsed:?} reports in 30 s"
        );
        let _stage = monitor.stage(format!("stage-{}", i % 40)).unwrap();
        std::thread::sleep(Duration::from_micros(500));
        i += 1;
    }
    monitor.finish();
    stop.store(true, Ordering::Relaxed);
    reader.join().unwrap();
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, ["report.json"], "no temporary file is left behind");
}

#[test]
fn an_unwritable_output_path_is_the_monitors_error_not_the_programs() {
    let dir = temp_dir("unwritable");
    let blocker = dir.join("not-a-directory");
    std::fs::write(&blocker, b"a file where a directory should be").unwrap();
    let path = blocker.join("report.json");
    let monitor = Monitor::builder()
        .current_thread_only()
        .log_interval(Some(Duration::from_millis(20)))
        .sample_interval(Duration::from_millis(10))
        .output(&path)
        .start()
        .unwrap();
    {
        let _work = monitor.stage("work").unwrap();
        std::thread::sleep(Duration::from_millis(60));
    }
    let report = monitor.finish();
    let error = report
        .output_error
        .clone()
        .expect("the failed write is recorded");
    assert!(error.contains("could not write the report"), "{error}");
    assert!(error.contains("report.json"), "{error}");
    assert_eq!(report.error, None);
    assert_eq!(report.sampling_error, None);
    assert_eq!(report.stage("work").unwrap().calls, 1);
    assert!(!path.exists());
}

#[test]
fn a_panic_with_an_active_monitor_still_writes_a_complete_report() {
    let dir = temp_dir("panic");
    let path = dir.join("report.json");
    let thread = {
        let path = path.clone();
        std::thread::spawn(move || {
            let monitor = Monitor::builder()
                .current_thread_only()
                .log_interval(None)
                .output(&path)
                .start()
                .unwrap();
            let _stage = monitor.stage("doomed").unwrap();
            panic!("the pipeline failed");
        })
    };
    let panic = thread.join().unwrap_err();
    assert_eq!(*panic.downcast::<&str>().unwrap(), "the pipeline failed");
    let report: Report = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(report.error.as_deref(), Some("panic"));
    assert!(!report.running);
    let doomed = report.stage("doomed").unwrap();
    assert_eq!(doomed.error.as_deref(), Some("panic"));
    assert_eq!(doomed.errors, 1);
}

#[test]
fn every_invalid_setting_is_a_clear_error() {
    let zero = Monitor::builder().sample_interval(Duration::ZERO).start();
    let Err(Error::InvalidConfig { setting, .. }) = &zero else {
        panic!("{zero:?}")
    };
    assert_eq!(*setting, "sample_interval");
    assert_eq!(
        zero.unwrap_err().to_string(),
        "invalid `sample_interval`: expected a number of seconds from 0.001 to 86400"
    );
    // The bounds of every surface (the settings table), not only "above zero".
    for too_far in [Duration::from_micros(500), Duration::from_secs(86_401)] {
        let error = Monitor::builder()
            .sample_interval(too_far)
            .start()
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "invalid `sample_interval`: expected a number of seconds from 0.001 to 86400"
        );
    }

    let log = Monitor::builder()
        .current_thread_only()
        .log_interval(Some(Duration::ZERO))
        .start();
    assert_eq!(
        log.unwrap_err().to_string(),
        "invalid `log_interval`: expected a number of seconds from 0.001 to 86400, or none"
    );

    let output = Monitor::builder().output("").start();
    assert_eq!(
        output.unwrap_err().to_string(),
        "invalid `output`: must name a file"
    );
    let output = Monitor::builder().output("..").start();
    assert_eq!(
        output.unwrap_err().to_string(),
        "invalid `output`: must name a file"
    );
    // A rejected builder leaves the thread free for a valid one.
    Monitor::builder()
        .current_thread_only()
        .log_interval(None)
        .start()
        .unwrap()
        .finish();
}
