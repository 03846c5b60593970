//! Stages through the explicit API: nesting, aggregation, failures, and the memory a
//! stage holds, measured from the real `/proc`.

use std::time::Duration;
use stemmon::{Error, Monitor};
// Tests that assert on this process's memory must not overlap one another.
use stemmon_suite::serial;
use stemmon_suite::{touched_mib, MIB};

fn quiet() -> stemmon::MonitorBuilder {
    Monitor::builder().current_thread_only().log_interval(None)
}

#[test]
fn a_stage_holding_a_known_allocation_shows_it_in_its_peak() {
    let _serial = serial();
    let monitor = quiet()
        .sample_interval(Duration::from_millis(20))
        .start()
        .unwrap();
    {
        let _small = monitor.stage("small").unwrap();
        std::thread::sleep(Duration::from_millis(100));
    }
    {
        let _big = monitor.stage("big").unwrap();
        let block = touched_mib(256);
        stemmon_suite::wait_for_samples(&monitor, 3);
        drop(block);
    }
    let report = monitor.finish();
    let small = report.stage("small").unwrap();
    let big = report.stage("big").unwrap();
    let small_peak = small.peaks.peak_parent_rss_bytes.unwrap();
    let big_peak = big.peaks.peak_parent_rss_bytes.unwrap();
    // 256 MiB touched: the sampler must see at least 90 % of it on top of the small stage.
    assert!(
        big_peak >= small_peak + 230 * MIB,
        "big {} MiB vs small {} MiB",
        big_peak / MIB,
        small_peak / MIB
    );
    assert!(big.samples >= 3, "{} samples, 3 waited for", big.samples);
    assert_eq!(report.peak_rss_stage.as_deref(), Some("big"));
    assert!(report.peaks.peak_tree_rss_bytes.unwrap() >= big_peak);
}

#[test]
fn a_short_stage_is_never_empty() {
    let monitor = quiet()
        .sample_interval(Duration::from_secs(60))
        .start()
        .unwrap();
    drop(monitor.stage("blink").unwrap());
    let report = monitor.finish();
    let blink = report.stage("blink").unwrap();
    assert_eq!(blink.samples, 0, "no full sample fell inside it");
    assert!(blink.peaks.peak_parent_rss_bytes.unwrap() > MIB);
    assert!(blink.peaks.peak_tree_rss_bytes.unwrap() >= blink.peaks.peak_parent_rss_bytes.unwrap());
    assert!(blink.peak_process_count >= 1);
}

#[test]
fn nested_and_repeated_stages_aggregate_by_path() {
    let monitor = quiet().start().unwrap();
    for _ in 0..3 {
        let _outer = monitor.stage("outer").unwrap();
        for _ in 0..5 {
            let _inner = monitor.stage("inner").unwrap();
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    {
        // Same name at the top level is a different path from outer/inner.
        let _inner = monitor.stage(String::from("inner")).unwrap();
    }
    let report = monitor.finish();
    assert_eq!(report.stages.len(), 3, "{:#?}", report.stages);
    let outer = report.stage("outer").unwrap();
    let inner = report.stage("outer/inner").unwrap();
    let top_inner = report.stage("inner").unwrap();
    assert_eq!((outer.calls, inner.calls, top_inner.calls), (3, 15, 1));
    assert_eq!(outer.parent_id, None);
    assert_eq!(inner.parent_id, Some(outer.id));
    assert_eq!(top_inner.parent_id, None);
    assert_eq!(inner.name, "inner");
    for (i, stage) in report.stages.iter().enumerate() {
        assert_eq!(stage.id as usize, i);
        assert_eq!(stage.errors, 0);
        assert_eq!(stage.error, None);
    }
    assert!(inner.min_wall_seconds >= 0.002 && inner.min_wall_seconds <= inner.max_wall_seconds);
    assert!(inner.wall_seconds >= 15.0 * 0.002);
    // Inclusive: the outer stages contain the inner ones.
    assert!(outer.wall_seconds >= inner.wall_seconds);
    assert!(inner.start_seconds >= outer.start_seconds);
    assert!(outer.wall_seconds <= report.wall_seconds);
}

#[test]
fn a_hot_stage_costs_one_record() {
    let monitor = quiet().start().unwrap();
    for _ in 0..200_000 {
        let _hot = monitor.stage("hot").unwrap();
    }
    let report = monitor.finish();
    assert_eq!(report.stages.len(), 1);
    assert_eq!(report.stages[0].calls, 200_000);
}

#[test]
fn a_panic_inside_a_stage_marks_it_failed_and_reaches_the_caller() {
    let monitor = quiet().start().unwrap();
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _stage = monitor.stage("explode").unwrap();
        panic!("boom");
    }));
    assert_eq!(*caught.unwrap_err().downcast::<&str>().unwrap(), "boom");
    {
        let _ok = monitor.stage("explode").unwrap();
    }
    let report = monitor.finish();
    let stage = report.stage("explode").unwrap();
    assert_eq!((stage.calls, stage.errors), (2, 1));
    assert_eq!(stage.error.as_deref(), Some("panic"));
    assert_eq!(report.error, None, "the monitor itself finished normally");
}

#[test]
fn stages_closed_out_of_order_are_each_recorded() {
    let monitor = quiet().start().unwrap();
    let a = monitor.stage("a").unwrap();
    let b = monitor.stage("b").unwrap();
    drop(a);
    let c = monitor.stage("c").unwrap();
    drop(b);
    drop(c);
    let report = monitor.finish();
    let paths: Vec<_> = report.stages.iter().map(|s| s.path.as_str()).collect();
    assert_eq!(paths, ["a", "a/b", "a/b/c"]);
    assert!(report.stages.iter().all(|s| s.calls == 1));
}

#[test]
fn an_open_stage_counts_up_to_now_in_a_summary() {
    let monitor = quiet().start().unwrap();
    let _open = monitor.stage("open").unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let first = monitor.summary();
    std::thread::sleep(Duration::from_millis(50));
    let second = monitor.summary();
    assert!(first.running && second.running);
    let (a, b) = (first.stage("open").unwrap(), second.stage("open").unwrap());
    assert!(a.wall_seconds >= 0.05 && b.wall_seconds >= a.wall_seconds + 0.045);
    assert_eq!(b.calls, 1);
}

#[test]
fn stage_names_must_not_be_empty() {
    let monitor = quiet().start().unwrap();
    let error = monitor.stage("").unwrap_err();
    assert!(matches!(error, Error::EmptyStageName));
    assert_eq!(error.to_string(), "a stage name must not be empty");
    assert!(monitor.finish().stages.is_empty());
}

#[test]
fn one_monitor_per_thread_and_a_new_one_after_finish() {
    let first = quiet().start().unwrap();
    let error = quiet().start().unwrap_err();
    assert!(matches!(error, Error::AlreadyActive));
    assert!(error.to_string().contains("already active on this thread"));
    first.finish();
    let second = quiet().start().unwrap();
    {
        let _s = second.stage("again").unwrap();
    }
    assert_eq!(second.finish().stage("again").unwrap().calls, 1);
}

#[test]
fn monitors_on_two_threads_are_independent() {
    let other = std::thread::spawn(|| {
        let monitor = quiet().start().unwrap();
        drop(monitor.stage("there").unwrap());
        monitor.finish()
    });
    let monitor = quiet().start().unwrap();
    drop(monitor.stage("here").unwrap());
    let here = monitor.finish();
    let there = other.join().unwrap();
    assert!(here.stage("here").is_some() && here.stage("there").is_none());
    assert!(there.stage("there").is_some() && there.stage("here").is_none());
}

#[test]
fn a_stage_guard_that_outlives_its_monitor_is_harmless() {
    let monitor = quiet().start().unwrap();
    let stale = monitor.stage("late").unwrap();
    let report = monitor.finish();
    // The stage was open at the end: counted up to the end.
    assert_eq!(report.stage("late").unwrap().calls, 1);
    // The stale guard of the first call and the next monitor's first call have the
    // same place on a fresh stack: dropping the stale one must not close the new one.
    let next = quiet().start().unwrap();
    let mine = next.stage("mine").unwrap();
    drop(stale);
    let child = next.stage("child").unwrap();
    drop(child);
    drop(mine);
    let report = next.finish();
    let paths: Vec<_> = report.stages.iter().map(|s| s.path.as_str()).collect();
    assert_eq!(paths, ["mine", "mine/child"]);
    assert!(report.stages.iter().all(|s| s.calls == 1 && s.errors == 0));
}

#[test]
fn a_summary_on_the_owner_thread_counts_every_call_so_far() {
    let monitor = quiet().start().unwrap();
    for i in 0..10_000 {
        let _hot = monitor.stage("hot").unwrap();
        if i % 1000 == 0 {
            let _inner = monitor.stage("inner").unwrap();
        }
    }
    let running = monitor.summary();
    assert_eq!(running.stage("hot").unwrap().calls, 10_000);
    assert_eq!(running.stage("hot/inner").unwrap().calls, 10);
    assert!(running.running);
    monitor.finish();
}

#[test]
fn every_stage_of_a_quick_burst_gets_a_reading() {
    let monitor = quiet().start().unwrap();
    // Far more stages than fit in the 1 ms a boundary reading is reused for.
    for i in 0..200 {
        let _stage = monitor.stage(format!("quick-{i}")).unwrap();
    }
    let report = monitor.finish();
    assert_eq!(report.stages.len(), 200);
    for stage in &report.stages {
        assert!(stage.peaks.peak_parent_rss_bytes.is_some(), "{stage:?}");
        assert!(stage.peaks.peak_tree_rss_bytes.is_some(), "{stage:?}");
        assert!(stage.min_wall_seconds <= stage.max_wall_seconds);
    }
}
