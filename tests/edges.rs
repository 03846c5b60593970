//! The edges of an in-process run (the book's `exact-peaks.md` and `command/README.md` 0.3): the invariants of every record,
//! and the timeline's bound reaching the report's through stage-boundary readings.

#![cfg(target_os = "linux")]

use std::time::Duration;
use stemmon::Monitor;
use stemmon_suite::{check_invariants, read_report, serial, temp_dir, touched_mib, MIB};

#[test]
fn a_spike_between_samples_reaches_the_timelines_bound() {
    let _serial = serial();
    let dir = temp_dir("edges-timeline");
    let path = dir.join("report.json");
    // A sample a minute: only the start, the stage's boundaries and the end read.
    let monitor = Monitor::builder()
        .log_interval(None)
        .sample_interval(Duration::from_secs(60))
        .high_water_marks(true)
        .output(&path)
        .start()
        .unwrap();
    {
        let _spike = monitor.stage("spike").unwrap();
        let block = touched_mib(200);
        drop(block);
    }
    {
        let _after = monitor.stage("after").unwrap();
    }
    // Before any sample after the spike: the boundary readings alone carry it.
    let summary = monitor.summary();
    let line = summary
        .timeline
        .iter()
        .filter_map(|p| p.tree_rss_bound_bytes)
        .max();
    assert_eq!(line, summary.high_water.peak_tree_rss_bound_bytes);
    let finished = monitor.finish();
    check_invariants(&finished);
    let report = read_report(&path);
    if !report.high_water_marks.parent {
        stemmon_suite::cannot_run(
            "a_spike_between_samples_reaches_the_timelines_bound",
            "this process cannot reset its own mark",
        );
        return;
    }
    let bound = report.high_water.peak_tree_rss_bound_bytes.unwrap();
    assert!(bound >= 200 * MIB, "{:?}", report.high_water);
    let line = report
        .timeline
        .iter()
        .filter_map(|p| p.tree_rss_bound_bytes)
        .max();
    assert_eq!(line, Some(bound), "{:?}", report.timeline);
    // Folded into the points the samples made: no point per boundary.
    assert!(report.timeline.len() <= report.samples as usize);
}
