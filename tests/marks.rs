//! The `high_water_marks` setting, `"reset"` or `"keep"`, against the kernel's own figure
//! for a monitored program: `wait4`'s `ru_maxrss`, what `/usr/bin/time` and a batch
//! system's accounting read at its exit.

#![cfg(target_os = "linux")]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;
use stemmon::{Marks, Monitor};
use stemmon_suite::{read_report, serial, temp_dir, touched_mib, MIB};

/// Run in a process of its own by [`run_fixture`]: a 200 MiB stage, then a 20 MiB one,
/// with the marks as `STEMMON_HIGH_WATER_MARKS` says (the environment's surface).
#[test]
#[ignore = "a fixture: run in a process of its own by run_fixture"]
fn marks_fixture() {
    let Some(report) = std::env::var_os("MARKS_FIXTURE_REPORT") else {
        return;
    };
    let monitor = Monitor::builder()
        .log_interval(Some(Duration::from_secs(60)))
        .sample_interval(Duration::from_millis(50))
        .output(std::path::PathBuf::from(report))
        .start()
        .unwrap();
    {
        let _big = monitor.stage("big").unwrap();
        let held = touched_mib(200);
        std::thread::sleep(Duration::from_millis(300));
        std::hint::black_box(&held);
    }
    {
        let _small = monitor.stage("small").unwrap();
        let held = touched_mib(20);
        std::thread::sleep(Duration::from_millis(300));
        std::hint::black_box(&held);
    }
    monitor.finish();
}

/// Runs the fixture with `STEMMON_HIGH_WATER_MARKS=marks`, reaped here with `wait4`:
/// its `ru_maxrss` in bytes, its stderr and its report.
fn run_fixture(dir: &Path, marks: &str) -> (u64, String, stemmon::Report) {
    let path = dir.join(format!("{marks}.json"));
    let stderr = dir.join(format!("{marks}.err"));
    // Reaped by the `wait4` below, which gives its rusage (`Child::wait` does not).
    #[allow(clippy::zombie_processes)]
    let child = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "marks_fixture", "--nocapture"])
        .env("MARKS_FIXTURE_REPORT", &path)
        .env("STEMMON_HIGH_WATER_MARKS", marks)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `status` and `usage` are valid for writes for the whole call; `pid` is
    // this process's child, not yet reaped (its `Child` handle never waits).
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(reaped, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{status}"
    );
    let maxrss = u64::try_from(usage.ru_maxrss).unwrap() * 1024;
    let stderr = std::fs::read_to_string(stderr).unwrap();
    (maxrss, stderr, read_report(&path))
}

#[test]
fn with_keep_the_exit_maxrss_is_the_runs_true_peak_and_with_reset_the_line_says_so() {
    let _serial = serial();
    let dir = temp_dir("marks");
    let (maxrss, stderr, report) = run_fixture(dir.path(), "keep");
    let own = report.high_water.peak_parent_hwm_bytes.unwrap();
    eprintln!(
        "keep: wait4 {} MiB, the report's exact peak {} MiB",
        maxrss / MIB,
        own / MIB
    );
    assert!(!report.high_water_marks.resets);
    assert!(maxrss >= 200 * MIB, "{maxrss}");
    // The kernel's per-CPU RSS batching: up to 256 KiB per CPU between two readings.
    assert!(
        maxrss.abs_diff(own) <= 2 * MIB,
        "wait4 {maxrss}, report {own}"
    );
    assert!(!stderr.contains("marks=reset"), "{stderr}");

    let (maxrss, stderr, report) = run_fixture(dir.path(), "reset");
    let big = report
        .stage("big")
        .unwrap()
        .high_water
        .peak_parent_hwm_bytes
        .unwrap();
    let small = report
        .stage("small")
        .unwrap()
        .high_water
        .peak_parent_hwm_bytes
        .unwrap();
    eprintln!(
        "reset: wait4 {} MiB, stages {} / {} MiB",
        maxrss / MIB,
        big / MIB,
        small / MIB
    );
    assert!(report.high_water_marks.resets);
    assert!(
        big >= 200 * MIB && small < 200 * MIB,
        "each stage its own peak"
    );
    // What an outer tool sees: the reset marks, below the run's true peak.
    assert!(maxrss < 200 * MIB, "wait4 {maxrss}");
    let first = stderr
        .lines()
        .find(|l| l.starts_with("[stemmon] started"))
        .unwrap();
    assert!(
        first.contains("marks=reset") && first.contains("/usr/bin/time"),
        "{first}"
    );
}

#[test]
fn the_builder_and_a_bad_variable_take_the_tables_words() {
    let _serial = serial();
    assert_eq!(Marks::from(true), Marks::Reset);
    let setting = &stemmon_report::settings::HIGH_WATER_MARKS;
    let message = setting.parse("sometimes").unwrap_err();
    assert_eq!(message, "expected reset or keep, or 0 (off)");
    let dir = temp_dir("marks-builder");
    let path = dir.path().join("keep.json");
    let monitor = Monitor::builder()
        .log_interval(None)
        .high_water_marks(Marks::Keep)
        .output(&path)
        .start()
        .unwrap();
    let report = monitor.finish();
    assert!(report.high_water_marks.enabled && !report.high_water_marks.resets);
}
