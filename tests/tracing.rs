//! `tracing` spans as stages (feature `tracing`, the book's `tracing.md`): `#[instrument]` functions,
//! nested spans, spans and `#[monitored]` inside each other, task spans on tokio
//! workers, per-layer filters, no monitor, and the memory a span holds.
//!
//! Each test installs its subscriber with `set_default` on the threads that make spans
//! (not a global `init`), so the tests of this binary never share one.

use std::sync::Mutex;
use std::time::Duration;
use stemmon::{monitored, Monitor, Report, TracingLayer};
use stemmon_suite::{touched_mib, MIB};
use tracing::{info_span, Instrument as _};
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::prelude::*;

/// A process-wide monitor covers every thread (and memory tests reset the process's
/// high-water mark): these tests must not overlap.
static PROCESS_WIDE: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    PROCESS_WIDE.lock().unwrap_or_else(|e| e.into_inner())
}

fn start() -> Monitor {
    Monitor::builder()
        .log_interval(None)
        .sample_interval(Duration::from_millis(20))
        .start()
        .unwrap()
}

/// The layer alone on a registry, the default on the calling thread until dropped.
fn layer_here() -> tracing::subscriber::DefaultGuard {
    tracing::subscriber::set_default(tracing_subscriber::registry().with(TracingLayer::new()))
}

fn stage<'a>(report: &'a Report, path: &str) -> &'a stemmon::report::StageReport {
    report
        .stage(path)
        .unwrap_or_else(|| panic!("no stage {path}: {:#?}", paths(report)))
}

fn paths(report: &Report) -> Vec<&str> {
    report.stages.iter().map(|s| s.path.as_str()).collect()
}

fn calls(report: &Report) -> Vec<(&str, u64)> {
    report
        .stages
        .iter()
        .map(|s| (s.path.as_str(), s.calls))
        .collect()
}

#[tracing::instrument]
fn load(n: u64) -> u64 {
    parse(n) + parse(n + 1)
}

#[tracing::instrument]
fn parse(n: u64) -> u64 {
    std::hint::black_box(n * 2)
}

#[test]
fn instrumented_functions_and_nested_spans_are_stages() {
    let _serial = serial();
    let _layer = layer_here();
    let monitor = start();
    let total: u64 = (0..3).map(load).sum();
    {
        let pipeline = info_span!("pipeline");
        let _pipeline = pipeline.enter();
        for _ in 0..4 {
            info_span!("step").in_scope(|| {
                drop(info_span!("io").entered());
                drop(info_span!("io").entered());
            });
        }
    }
    let report = monitor.finish();
    assert_eq!(total, (0..3).map(|n| 4 * n + 2).sum::<u64>());
    assert_eq!(
        calls(&report),
        [
            ("load", 3),
            ("load/parse", 6),
            ("pipeline", 1),
            ("pipeline/step", 4),
            ("pipeline/step/io", 8),
        ]
    );
    for record in &report.stages {
        assert_eq!(record.errors, 0, "{}", record.path);
        assert_eq!(record.threads, 1, "{}", record.path);
        assert!(record.wall_seconds > 0.0, "{}", record.path);
        assert!(
            record.peaks.peak_parent_rss_bytes.is_some(),
            "{}",
            record.path
        );
    }
}

#[monitored]
fn train() {
    for _ in 0..2 {
        info_span!("epoch").in_scope(|| {
            batch();
            batch();
        });
    }
}

#[monitored]
fn batch() {
    info_span!("forward").in_scope(|| std::hint::black_box(()));
}

#[test]
fn spans_and_monitored_stages_nest_inside_each_other_both_ways() {
    let _serial = serial();
    let _layer = layer_here();
    let monitor = start();
    info_span!("run").in_scope(train);
    let report = monitor.finish();
    assert_eq!(
        calls(&report),
        [
            ("run", 1),
            ("run/train", 1),
            ("run/train/epoch", 2),
            ("run/train/epoch/batch", 4),
            ("run/train/epoch/batch/forward", 4),
        ]
    );
}

#[test]
fn a_span_entered_many_times_is_one_call() {
    let _serial = serial();
    let _layer = layer_here();
    let monitor = start();
    let span = info_span!("reentered");
    for _ in 0..5 {
        span.in_scope(|| drop(stemmon::stage("inner")));
    }
    // Open and not entered: what runs now is not inside it.
    drop(stemmon::stage("between"));
    drop(span);
    let report = monitor.finish();
    assert_eq!(
        calls(&report),
        [("reentered", 1), ("reentered/inner", 5), ("between", 1)]
    );
    let reentered = stage(&report, "reentered");
    assert_eq!(reentered.errors, 0);
    assert!(reentered.wall_seconds >= stage(&report, "reentered/inner").wall_seconds);
}

#[test]
fn a_span_closed_while_its_thread_panics_is_a_failed_call() {
    let _serial = serial();
    let _layer = layer_here();
    let monitor = start();
    let caught = std::panic::catch_unwind(|| {
        let _boom = info_span!("boom").entered();
        panic!("inside a span");
    });
    drop(info_span!("fine").entered());
    let report = monitor.finish();
    assert!(caught.is_err());
    let boom = stage(&report, "boom");
    assert_eq!((boom.calls, boom.errors), (1, 1));
    assert_eq!(boom.error.as_deref(), Some("panic"));
    let fine = stage(&report, "fine");
    assert_eq!(
        (fine.calls, fine.errors, fine.error.as_deref()),
        (1, 0, None)
    );
}

#[test]
fn a_stage_on_an_idle_thread_nests_under_the_span_open_on_main() {
    let _serial = serial();
    let _layer = layer_here();
    let monitor = start();
    info_span!("fit").in_scope(|| {
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| drop(stemmon::stage("chunk")));
            }
        });
    });
    let report = monitor.finish();
    assert_eq!(calls(&report), [("fit", 1), ("fit/chunk", 4)]);
    assert_eq!(stage(&report, "fit/chunk").threads, 4);
}

#[monitored]
fn step(x: u64) -> u64 {
    std::hint::black_box(x + 1)
}

thread_local! {
    /// A tokio worker's subscriber, set when the worker starts and dropped when it stops.
    static WORKER_DEFAULT: std::cell::RefCell<Option<tracing::subscriber::DefaultGuard>> =
        const { std::cell::RefCell::new(None) };
}

#[test]
fn twenty_task_spans_nest_under_their_parent_span_on_any_worker() {
    let _serial = serial();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(TracingLayer::new()));
    let _main = tracing::dispatcher::set_default(&dispatch);
    // Worker threads need the dispatcher too: each sets it as its own default when it
    // starts, so no global default leaks into the other tests of this binary.
    let worker_dispatch = dispatch.clone();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .on_thread_start(move || {
            let guard = tracing::dispatcher::set_default(&worker_dispatch);
            WORKER_DEFAULT.with(|slot| *slot.borrow_mut() = Some(guard));
        })
        .on_thread_stop(|| WORKER_DEFAULT.with(|slot| drop(slot.borrow_mut().take())))
        .build()
        .unwrap();
    let monitor = start();
    let fit = info_span!("fit");
    let tasks: Vec<_> = {
        let _fit = fit.enter();
        (0..20u64)
            .map(|i| {
                async move {
                    tokio::task::yield_now().await;
                    step(i)
                }
                .instrument(info_span!(parent: &fit, "task"))
            })
            .collect()
    };
    // `fit` is exited on main and another stage is open there when the tasks first run.
    let other = monitor.stage("other").unwrap();
    let sum: u64 = runtime.block_on(async {
        let handles: Vec<_> = tasks.into_iter().map(tokio::spawn).collect();
        let mut sum = 0;
        for handle in handles {
            sum += handle.await.unwrap();
        }
        sum
    });
    drop(other);
    drop(fit);
    let report = monitor.finish();
    drop(runtime);
    assert_eq!(sum, (1..=20).sum::<u64>());
    assert_eq!(
        calls(&report),
        [
            ("fit", 1),
            ("other", 1),
            ("fit/task", 20),
            ("fit/task/step", 20)
        ]
    );
    let task = stage(&report, "fit/task");
    assert!((1..=2).contains(&task.threads), "{} threads", task.threads);
    assert_eq!(task.errors, 0);
}

#[test]
fn spans_a_per_layer_filter_rejects_are_not_stages() {
    let _serial = serial();
    let layer = TracingLayer::new().with_filter(filter_fn(|meta| meta.name() != "hidden"));
    let _layer = tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));
    let monitor = start();
    info_span!("kept").in_scope(|| {
        info_span!("hidden").in_scope(|| {
            drop(info_span!("leaf").entered());
        });
        drop(info_span!("hidden").entered());
    });
    let report = monitor.finish();
    assert_eq!(calls(&report), [("kept", 1), ("kept/leaf", 1)]);
}

#[test]
fn a_span_never_entered_is_no_stage_and_its_children_nest_above_it() {
    let _serial = serial();
    let dispatch = tracing::Dispatch::new(tracing_subscriber::registry().with(TracingLayer::new()));
    let _layer = tracing::dispatcher::set_default(&dispatch);
    let monitor = start();
    info_span!("outer").in_scope(|| {
        let idle = info_span!("idle");
        // What main has open now is not where `child` nests: its span tree says `outer`.
        let _busy = stemmon::stage("busy");
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let _layer = tracing::dispatcher::set_default(&dispatch);
                drop(info_span!(parent: &idle, "child").entered());
            });
        });
    });
    let report = monitor.finish();
    assert_eq!(
        calls(&report),
        [("outer", 1), ("outer/busy", 1), ("outer/child", 1)]
    );
}

#[test]
fn the_layer_without_a_monitor_records_nothing_and_a_later_monitor_only_later_spans() {
    let _serial = serial();
    let _layer = layer_here();
    // No monitor at all: spans come and go.
    info_span!("alone").in_scope(|| drop(info_span!("nested").entered()));
    // Made before the start, first entered after: its call begins at that enter.
    let early = info_span!("early");
    let monitor = start();
    early.in_scope(|| drop(info_span!("late").entered()));
    drop(early);
    // Open under this monitor, closed after it finished.
    let straddle = info_span!("straddle");
    let straddle_entered = straddle.enter();
    let first = monitor.finish();
    let second = start();
    drop(straddle_entered);
    drop(straddle);
    drop(info_span!("after").entered());
    let second = second.finish();
    assert_eq!(
        calls(&first),
        [("early", 1), ("early/late", 1), ("straddle", 1)]
    );
    assert_eq!(calls(&second), [("after", 1)]);
}

#[test]
fn a_span_holding_200_mib_shows_it_in_its_exact_and_tree_peaks() {
    let _serial = serial();
    let _layer = layer_here();
    // No sample falls inside the spans: their boundary readings alone must see it.
    let monitor = Monitor::builder()
        .log_interval(None)
        .sample_interval(Duration::from_secs(60))
        .start()
        .unwrap();
    // Longer than the 1 ms reuse window, so the quiet span has an interval of its own.
    info_span!("quiet").in_scope(|| std::thread::sleep(Duration::from_millis(20)));
    // Still held when the span closes: its closing reading sees it resident.
    let block = info_span!("hold").in_scope(|| touched_mib(200));
    drop(block);
    let report = monitor.finish();
    assert!(report.high_water_marks.enabled && report.high_water_marks.parent);
    let quiet = stage(&report, "quiet");
    let hold = stage(&report, "hold");
    let baseline = quiet.peaks.peak_parent_rss_bytes.unwrap();
    let mib = |bytes: Option<u64>| bytes.map_or(0, |b| b / MIB);
    // The whole block is resident at once; allow 5 % for pages the kernel reclaims.
    let at_least = baseline + 190 * MIB;
    assert!(
        hold.high_water.peak_parent_hwm_bytes >= Some(at_least),
        "hold's mark {} MiB, baseline {} MiB",
        mib(hold.high_water.peak_parent_hwm_bytes),
        baseline / MIB
    );
    assert!(
        hold.peaks.peak_tree_rss_bytes >= Some(at_least),
        "hold's tree peak {} MiB, baseline {} MiB",
        mib(hold.peaks.peak_tree_rss_bytes),
        baseline / MIB
    );
    // The quiet span's interval is its own: the block is not in its mark.
    assert!(
        quiet.high_water.peak_parent_hwm_bytes < Some(baseline + 100 * MIB),
        "quiet's mark {} MiB",
        mib(quiet.high_water.peak_parent_hwm_bytes)
    );
}

#[tracing::instrument]
fn descend(depth: u32) -> u32 {
    if depth == 0 {
        0
    } else {
        1 + descend(depth - 1)
    }
}

#[test]
fn a_directly_recursive_span_folds_into_one_record_timed_once() {
    let _serial = serial();
    let _layer = layer_here();
    let monitor = start();
    let depth = descend(99);
    let report = monitor.finish();
    assert_eq!(depth, 99);
    assert_eq!(calls(&report), [("descend", 100)]);
    let descend = stage(&report, "descend");
    assert!(descend.wall_seconds <= report.wall_seconds, "timed once");
}

#[test]
fn a_span_closed_on_another_thread_is_closed_once_in_its_monitor() {
    let _serial = serial();
    let _layer = layer_here();
    let monitor = start();
    let moved = info_span!("moved");
    moved.in_scope(|| drop(info_span!("inner").entered()));
    // The thread that drops it records nothing itself: the span's own monitor closes it.
    std::thread::scope(|scope| {
        scope.spawn(move || drop(moved));
    });
    let kept = info_span!("kept");
    kept.in_scope(|| ());
    let (first, second) = (monitor.summary(), monitor.summary());
    // A closed call's wall time is fixed; an open one's grows from summary to summary.
    let wall = |report: &Report, path: &str| stage(report, path).wall_seconds;
    assert_eq!(wall(&first, "moved"), wall(&second, "moved"), "closed");
    assert!(wall(&first, "kept") < wall(&second, "kept"), "still open");
    drop(kept);
    let report = monitor.finish();
    assert_eq!(
        calls(&report),
        [("moved", 1), ("moved/inner", 1), ("kept", 1)]
    );
    assert_eq!(stage(&report, "moved").errors, 0);
}

/// The layer on one registry, for threads that each make it their default: spans made
/// on one thread and met on another belong to one subscriber.
fn shared_layer() -> tracing::Dispatch {
    tracing::Dispatch::new(tracing_subscriber::registry().with(TracingLayer::new()))
}

#[test]
fn a_leaf_span_kept_apart_then_met_on_another_thread_is_one_call_closed_once() {
    let _serial = serial();
    let dispatch = shared_layer();
    let _default = tracing::dispatcher::set_default(&dispatch);
    let monitor = start();
    // Each span is made, entered and exited here with nothing after it on this thread:
    // its call is still kept apart here when the other thread meets it.
    let moved = info_span!("moved");
    moved.in_scope(|| std::hint::black_box(1));
    std::thread::scope(|scope| {
        scope.spawn(move || {
            // Entered again there, then closed there.
            moved.in_scope(|| std::hint::black_box(2));
        });
    });
    let dropped = info_span!("dropped");
    dropped.in_scope(|| std::hint::black_box(3));
    std::thread::scope(|scope| {
        scope.spawn(move || drop(dropped));
    });
    let (first, second) = (monitor.summary(), monitor.summary());
    let wall = |report: &Report, path: &str| stage(report, path).wall_seconds;
    for path in ["moved", "dropped"] {
        assert_eq!(wall(&first, path), wall(&second, path), "{path} closed");
    }
    let report = monitor.finish();
    assert_eq!(calls(&report), [("moved", 1), ("dropped", 1)]);
    assert!(report.stages.iter().all(|s| s.errors == 0));
}

#[test]
fn a_child_made_on_another_thread_nests_under_its_parent_kept_apart() {
    let _serial = serial();
    let dispatch = shared_layer();
    let monitor = start();
    // On a worker, not the monitor's own thread (whose open stage idle threads nest
    // under anyway).
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let _default = tracing::dispatcher::set_default(&dispatch);
            // The worker's first span joins it to the monitor.
            info_span!("warm").in_scope(|| std::hint::black_box(0));
            let parent = info_span!("parent");
            // Entered here, and nothing else happens on this thread while the child runs.
            let entered = parent.enter();
            std::thread::scope(|inner| {
                inner.spawn(|| {
                    let _default = tracing::dispatcher::set_default(&dispatch);
                    info_span!(parent: &parent, "child").in_scope(|| std::hint::black_box(0));
                });
            });
            drop(entered);
        });
    });
    let report = monitor.finish();
    assert_eq!(
        calls(&report),
        [("warm", 1), ("parent", 1), ("parent/child", 1)]
    );
}

#[test]
fn a_span_first_entered_on_nine_threads_at_once_is_one_call() {
    let _serial = serial();
    let dispatch = shared_layer();
    let _default = tracing::dispatcher::set_default(&dispatch);
    let monitor = start();
    for round in 0..20 {
        // Made here: this thread's first enter may take the way apart, the others the
        // registry's, all at the same moment.
        let shared = info_span!("shared", round);
        let barrier = std::sync::Barrier::new(9);
        std::thread::scope(|scope| {
            for _ in 0..8 {
                scope.spawn(|| {
                    barrier.wait();
                    shared.in_scope(|| std::hint::black_box(0));
                });
            }
            barrier.wait();
            shared.in_scope(|| std::hint::black_box(0));
        });
    }
    let report = monitor.finish();
    assert_eq!(calls(&report), [("shared", 20)]);
    assert!(monitor_is_quiet(&report));
}

/// No call left open and none failed.
fn monitor_is_quiet(report: &Report) -> bool {
    report.stages.iter().all(|s| s.errors == 0)
}
