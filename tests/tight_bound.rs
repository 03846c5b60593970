//! A tight bound (issue 33): on a library app, a rayon stage of 4 × 64 MiB then a stage
//! with a 150 MiB child, the whole run's high-water bound is within 1.10× of the true
//! peak (a 5 ms poller of the process and its child) in each of six runs, at the
//! default 1 s sampling, and never below it.

#![cfg(target_os = "linux")]

use std::process::Command;
use std::time::Duration;
use stemmon::Monitor;
use stemmon_suite::{poll_tree_peak, read_report, serial, temp_dir, touched_mib, MIB};

const HOLD: &str = env!("CARGO_BIN_EXE_stemmon-hold");

/// The library app, run in a process of its own by the test.
#[test]
#[ignore = "a fixture: run in a process of its own by the test below"]
fn library_app() {
    let Some(report) = std::env::var_os("TIGHT_FIXTURE_REPORT") else {
        return;
    };
    let monitor = Monitor::builder()
        .log_interval(None)
        .output(std::path::PathBuf::from(report))
        .start()
        .unwrap();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(4)
        .build()
        .unwrap();
    {
        let _rayon = monitor.stage("rayon").unwrap();
        pool.scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|_| {
                    let held = touched_mib(64);
                    std::thread::sleep(Duration::from_millis(700));
                    std::hint::black_box(&held);
                });
            }
        });
    }
    {
        let _child = monitor.stage("child").unwrap();
        let status = Command::new(HOLD)
            .args(["spike", "150", "700"])
            .status()
            .unwrap();
        assert!(status.success());
    }
    monitor.finish();
}

#[test]
fn the_whole_runs_bound_is_within_ten_percent_of_the_true_peak_in_six_runs() {
    let _serial = serial();
    let dir = temp_dir("tight");
    let mut ratios = Vec::new();
    for run in 0..6 {
        let path = dir.path().join(format!("run{run}.json"));
        let mut command = Command::new(std::env::current_exe().unwrap());
        command
            .args(["--ignored", "--exact", "library_app", "--nocapture"])
            .env("TIGHT_FIXTURE_REPORT", &path)
            .env_remove("STEMMON_HIGH_WATER_MARKS");
        let (status, truth) = poll_tree_peak(&mut command, true);
        assert!(status.success(), "{status:?}");
        let report = read_report(&path);
        let bound = report
            .high_water
            .peak_tree_rss_bound_bytes
            .unwrap_or_else(|| panic!("no bound: {:?}", report.high_water_marks));
        let ratio = bound as f64 / truth as f64;
        eprintln!(
            "run {run}: bound {} MiB, poller {} MiB ({ratio:.3}x)",
            bound / MIB,
            truth / MIB
        );
        ratios.push(ratio);
        assert!(truth >= 250 * MIB, "the poller saw {truth}");
        // The poller reads each process a few µs apart: it may miss a little, never more.
        assert!(
            ratio >= 0.99,
            "run {run}: bound {bound} below the poller's {truth}"
        );
        assert!(
            ratio <= 1.10,
            "run {run}: bound {bound} against {truth} ({ratio:.3}x)"
        );
    }
    eprintln!("ratios {ratios:.3?}");
}
