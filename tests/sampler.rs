//! The background sampler against real child processes holding known memory.

use std::time::{Duration, Instant};
use stemmon::Monitor;
// The tests that start children count this process's children: they must not overlap.
use stemmon_suite::serial;
use stemmon_suite::{wait_for_samples, Holder, MIB};

const HOLD: &str = env!("CARGO_BIN_EXE_stemmon-hold");

fn fast() -> stemmon::MonitorBuilder {
    Monitor::builder()
        .current_thread_only()
        .log_interval(None)
        .sample_interval(Duration::from_millis(25))
}

#[test]
fn children_holding_known_memory_show_in_the_report() {
    let _serial = serial();
    let monitor = fast().start().unwrap();
    let stage = monitor.stage("workers").unwrap();
    let workers: Vec<_> = (0..3).map(|_| Holder::start(HOLD, 64, 0, 0)).collect();
    wait_for_samples(&monitor, 3);
    let running = monitor.summary();
    drop(workers);
    drop(stage);
    let report = monitor.finish();

    let latest = running.latest_sample.unwrap();
    assert_eq!(latest.stage, "workers");
    assert_eq!(latest.process_count, 4, "{latest:?}");
    assert_eq!(latest.rss_processes, 4);
    assert!(latest.rss_complete);
    let children = latest.children_rss_bytes.unwrap();
    assert!(
        (3 * 60 * MIB..3 * 100 * MIB).contains(&children),
        "three children holding 64 MiB each: {} MiB",
        children / MIB
    );
    assert_eq!(
        latest.tree_rss_bytes.unwrap(),
        latest.parent_rss_bytes.unwrap() + children
    );
    let workers = report.stage("workers").unwrap();
    assert_eq!(workers.peak_process_count, 4);
    assert!(workers.peaks.peak_children_rss_bytes.unwrap() >= 3 * 60 * MIB);
    assert_eq!(report.peak_process_count, 4);
    // After the workers ended, the last sample sees the parent alone.
    let last = report.latest_sample.unwrap();
    assert_eq!((last.process_count, last.stage.as_str()), (1, "workflow"));
    assert_eq!(last.children_rss_bytes, Some(0));
}

#[test]
fn grandchildren_are_part_of_the_tree() {
    let _serial = serial();
    let monitor = fast().start().unwrap();
    let holder = Holder::start(HOLD, 16, 2, 48);
    wait_for_samples(&monitor, 2);
    let latest = monitor.summary().latest_sample.unwrap();
    holder.stop();
    monitor.finish();
    assert_eq!(latest.process_count, 4, "parent, child, two grandchildren");
    let children = latest.children_rss_bytes.unwrap();
    assert!(
        children >= (16 + 2 * 48) * MIB * 9 / 10,
        "{} MiB",
        children / MIB
    );
}

#[test]
fn a_child_that_exits_mid_run_is_coverage_not_an_error() {
    let _serial = serial();
    let monitor = fast().start().unwrap();
    let holder = Holder::start(HOLD, 100, 0, 0);
    wait_for_samples(&monitor, 2);
    holder.stop();
    wait_for_samples(&monitor, 2);
    let report = monitor.finish();
    assert_eq!(report.sampling_error, None);
    assert_eq!(report.peak_process_count, 2);
    assert!(report.peaks.peak_children_rss_bytes.unwrap() >= 95 * MIB);
    let last = report.latest_sample.unwrap();
    assert_eq!(last.process_count, 1);
    assert!(last.rss_complete);
}

#[test]
fn the_portable_reader_sees_the_same_tree() {
    let _serial = serial();
    let monitor = fast().reader(stemmon::Reader::Portable).start().unwrap();
    let holder = Holder::start(HOLD, 80, 1, 40);
    wait_for_samples(&monitor, 2);
    let report = monitor.summary();
    holder.stop();
    monitor.finish();
    assert_eq!(report.sampler, "sysinfo");
    let latest = report.latest_sample.unwrap();
    assert_eq!(latest.process_count, 3);
    assert!(latest.children_rss_bytes.unwrap() >= 108 * MIB);
    assert_eq!(latest.tree_uss_bytes, None);
}

#[cfg(target_os = "linux")]
#[test]
fn detailed_memory_adds_uss_and_pss() {
    let _serial = serial();
    let monitor = fast().detailed_memory(true).start().unwrap();
    let holder = Holder::start(HOLD, 64, 0, 0);
    wait_for_samples(&monitor, 2);
    let report = monitor.summary();
    holder.stop();
    monitor.finish();
    assert_eq!(report.sampler, "linux-proc");
    assert!(report.detailed_memory);
    let s = report.latest_sample.unwrap();
    let (uss, pss, rss) = (
        s.tree_uss_bytes.unwrap(),
        s.tree_pss_bytes.unwrap(),
        s.tree_rss_bytes.unwrap(),
    );
    // The child's 64 MiB are private to it: they count in USS, PSS and RSS alike.
    assert!(
        uss >= 64 * MIB && uss <= pss && pss <= rss,
        "{uss} {pss} {rss}"
    );
    assert_eq!(s.tree_physical_footprint_bytes, None);
    assert!(report.peaks.peak_tree_uss_bytes.unwrap() >= uss);
}

#[test]
fn without_detailed_memory_the_detailed_fields_are_null() {
    let monitor = fast().start().unwrap();
    let report = monitor.finish();
    let s = report.latest_sample.unwrap();
    assert_eq!(
        (
            s.tree_uss_bytes,
            s.tree_pss_bytes,
            s.tree_physical_footprint_bytes
        ),
        (None, None, None)
    );
    assert_eq!(report.peaks.peak_tree_pss_bytes, None);
}

#[test]
fn the_sampler_keeps_its_cadence_and_counts_its_cost() {
    let started = Instant::now();
    let monitor = fast().start().unwrap();
    wait_for_samples(&monitor, 20);
    let report = monitor.finish();
    let seconds = started.elapsed().as_secs_f64();
    // First sample at start, one per 25 ms grid point, a last one at finish: a busy
    // machine may delay or skip some, never add any.
    let most = (seconds / 0.025).floor() as u64 + 2;
    assert!(
        (21..=most).contains(&report.sampling_attempts),
        "{} attempts in {seconds} s at 25 ms: at most {most}",
        report.sampling_attempts
    );
    assert_eq!(report.samples, report.sampling_attempts);
    assert!(report.sampling_seconds > 0.0);
    assert!(report.max_sampling_seconds <= report.sampling_seconds);
    // Samples run one after another, inside the run.
    assert!(
        report.sampling_seconds < seconds,
        "{} s sampling in a {seconds} s run",
        report.sampling_seconds
    );
    // Some gap is at least the interval less a late sample's lateness; none is longer
    // than the run.
    assert!(
        report.max_sample_gap_seconds >= 0.02 && report.max_sample_gap_seconds < seconds,
        "gap {} in a {seconds} s run",
        report.max_sample_gap_seconds
    );
    assert_eq!(report.sample_interval, 0.025);
}

#[test]
fn max_samples_keeps_the_last_n_raw_samples() {
    let none = fast().start().unwrap();
    wait_for_samples(&none, 3);
    let report = none.finish();
    assert!(report.recent_samples.is_empty(), "0 keeps summaries only");
    assert!(report.latest_sample.is_some());

    let some = fast().max_samples(4).start().unwrap();
    wait_for_samples(&some, 8);
    let report = some.finish();
    assert_eq!(report.recent_samples.len(), 4);
    assert_eq!(report.recent_samples.last(), report.latest_sample.as_ref());
    let times: Vec<f64> = report
        .recent_samples
        .iter()
        .map(|s| s.elapsed_seconds)
        .collect();
    assert!(
        times.windows(2).all(|w| w[0] < w[1]),
        "oldest first: {times:?}"
    );
    assert!(report.samples >= 9);
}
