//! Every thread counts: stages on rayon workers, spawned and scoped threads and tokio
//! workers all land in the process-wide monitor, with exact call counts and paths.

use std::sync::mpsc;
use std::time::{Duration, Instant};
use stemmon::{monitored, Error, Monitor, Report};
// A process-wide monitor covers every thread: the tests that start one must not overlap.
use stemmon_suite::serial;

fn start() -> Monitor {
    Monitor::builder()
        .log_interval(None)
        .sample_interval(Duration::from_millis(20))
        .start()
        .unwrap()
}

#[monitored]
fn predict_one(x: u64) -> u64 {
    std::hint::black_box(x.wrapping_mul(31))
}

#[monitored]
fn fit() -> u64 {
    use rayon::prelude::*;
    (0..1_000_000u64).into_par_iter().map(predict_one).sum()
}

fn stage<'a>(report: &'a Report, path: &str) -> &'a stemmon::report::StageReport {
    report
        .stage(path)
        .unwrap_or_else(|| panic!("no stage {path}: {:#?}", paths(report)))
}

fn paths(report: &Report) -> Vec<&str> {
    report.stages.iter().map(|s| s.path.as_str()).collect()
}

#[test]
fn a_million_rayon_items_nest_under_the_stage_open_on_main() {
    let _serial = serial();
    let monitor = start();
    let sum = fit();
    let report = monitor.finish();
    assert_eq!(
        sum,
        (0..1_000_000u64).map(|x| x.wrapping_mul(31)).sum::<u64>()
    );
    assert_eq!(paths(&report), ["fit", "fit/predict_one"]);
    assert_eq!(stage(&report, "fit").calls, 1);
    let predict = stage(&report, "fit/predict_one");
    assert_eq!(predict.calls, 1_000_000);
    assert_eq!(predict.errors, 0);
    let workers = rayon::current_num_threads() as u32;
    assert!(
        (1..=workers + 1).contains(&predict.threads),
        "{workers} workers (and perhaps main) ran it: {}",
        predict.threads
    );
    assert!(predict.wall_seconds > 0.0);
    let calls: u64 = report.threads.iter().map(|t| t.calls).sum();
    assert_eq!(calls, 1_000_000 + 1, "{:?}", report.threads);
}

#[test]
fn a_stage_opened_on_a_pool_thread_is_the_root_of_what_that_thread_runs() {
    let _serial = serial();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    let monitor = start();
    // `install` runs the closure on a pool thread: `pipeline` opens there, and main,
    // the monitor's thread, has nothing open for idle workers to nest under.
    pool.install(|| {
        let _pipeline = stemmon::stage("pipeline");
        predict_one(1);
    });
    let report = monitor.finish();
    assert_eq!(paths(&report), ["pipeline", "pipeline/predict_one"]);
    assert_eq!(stage(&report, "pipeline").threads, 1);
}

#[test]
fn rayon_workers_with_nothing_open_on_their_own_nest_under_main() {
    use rayon::prelude::*;
    let _serial = serial();
    let monitor = start();
    {
        let _fit = monitor.stage("fit").unwrap();
        (0..10_000u64).into_par_iter().for_each(|x| {
            predict_one(x);
        });
    }
    let report = monitor.finish();
    assert_eq!(stage(&report, "fit/predict_one").calls, 10_000);
    assert_eq!(paths(&report), ["fit", "fit/predict_one"]);
}

#[monitored]
fn work() {
    std::hint::black_box(0);
}

#[test]
fn a_hundred_short_lived_threads_lose_no_call() {
    let _serial = serial();
    let monitor = start();
    let threads: Vec<_> = (0..100)
        .map(|_| {
            std::thread::spawn(|| {
                for _ in 0..10 {
                    work();
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    let report = monitor.finish();
    let work = stage(&report, "work");
    assert_eq!(work.calls, 1_000);
    assert_eq!(work.threads, 100);
    assert_eq!(report.threads.len(), 101, "main and the hundred");
    assert_eq!(report.threads[0].calls, 0, "main ran no stage");
}

#[test]
fn scoped_threads_nest_under_main_and_fold_into_one_record() {
    let _serial = serial();
    let monitor = start();
    {
        let _load = monitor.stage("load").unwrap();
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    for _ in 0..250 {
                        let _chunk = stemmon::stage("chunk");
                        let _parse = stemmon::stage(String::from("parse"));
                    }
                });
            }
        });
    }
    let report = monitor.finish();
    assert_eq!(paths(&report), ["load", "load/chunk", "load/chunk/parse"]);
    let chunk = stage(&report, "load/chunk");
    assert_eq!((chunk.calls, chunk.threads), (1_000, 4));
    assert_eq!(stage(&report, "load/chunk/parse").calls, 1_000);
    assert_eq!(stage(&report, "load").threads, 1);
}

#[monitored]
async fn fetch(i: u64) -> u64 {
    tokio::time::sleep(Duration::from_millis(1 + i % 3)).await;
    parse(i)
}

#[monitored]
fn parse(i: u64) -> u64 {
    i * 2
}

#[test]
fn tokio_worker_threads_record_async_and_sync_stages() {
    let _serial = serial();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    let monitor = start();
    let total = {
        let _serve = monitor.stage("serve").unwrap();
        runtime.block_on(async {
            let tasks: Vec<_> = (0..100).map(|i| tokio::spawn(fetch(i))).collect();
            let mut total = 0;
            for task in tasks {
                total += task.await.unwrap();
            }
            total
        })
    };
    let report = monitor.finish();
    assert_eq!(total, (0..100).map(|i| i * 2).sum::<u64>());
    assert_eq!(
        paths(&report),
        ["serve", "serve/fetch", "serve/fetch/parse"]
    );
    let fetch = stage(&report, "serve/fetch");
    assert_eq!((fetch.calls, fetch.errors), (100, 0));
    assert!(
        fetch.wall_seconds >= 100.0 * 0.001,
        "{}",
        fetch.wall_seconds
    );
    let parse = stage(&report, "serve/fetch/parse");
    assert_eq!(parse.calls, 100);
    assert!(parse.threads >= 1);
}

#[test]
fn a_worker_inside_a_stage_at_finish_is_reported_open_and_not_waited_for() {
    let _serial = serial();
    let monitor = start();
    let (entered, is_entered) = mpsc::channel();
    let (release, released) = mpsc::channel::<()>();
    let worker = std::thread::spawn(move || {
        let _stuck = stemmon::stage("stuck");
        entered.send(()).unwrap();
        released.recv().unwrap();
    });
    is_entered.recv().unwrap();
    std::thread::sleep(Duration::from_millis(60));
    // Samples count toward a worker's open stage: wait for two (a busy machine may be slow).
    let deadline = Instant::now() + Duration::from_secs(10);
    while monitor.summary().stage("stuck").map_or(0, |s| s.samples) < 2 {
        assert!(Instant::now() < deadline, "the sampler stalled");
        std::thread::sleep(Duration::from_millis(5));
    }
    // Releases the worker if `finish` has not returned in 30 s: a `finish` that waits for
    // the worker's stage then fails the test instead of hanging it.
    let (finished, is_finished) = mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        let gave_up = is_finished.recv_timeout(Duration::from_secs(30)).is_err();
        release.send(()).unwrap();
        gave_up
    });
    let report = monitor.finish();
    finished.send(()).unwrap();
    assert!(!watchdog.join().unwrap(), "finish waited for the worker");
    worker.join().unwrap();
    let stuck = stage(&report, "stuck");
    assert_eq!((stuck.calls, stuck.errors), (1, 0));
    assert!(
        stuck.wall_seconds >= 0.06,
        "open for 60 ms: {}",
        stuck.wall_seconds
    );
    assert!(
        stuck.samples >= 2,
        "samples count toward a worker's open stage"
    );
    assert_eq!(stuck.min_wall_seconds, stuck.max_wall_seconds);
}

#[monitored]
fn descend(depth: u32) -> u32 {
    if depth == 0 {
        0
    } else {
        1 + descend(depth - 1)
    }
}

#[test]
fn direct_recursion_folds_into_one_record_timed_once() {
    let _serial = serial();
    let monitor = start();
    // Deep recursion wants a deep stack.
    let depth = std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(|| descend(9_999))
        .unwrap()
        .join()
        .unwrap();
    let report = monitor.finish();
    assert_eq!(depth, 9_999);
    assert_eq!(paths(&report), ["descend"]);
    let descend = stage(&report, "descend");
    assert_eq!(descend.calls, 10_000);
    assert!(descend.wall_seconds <= report.wall_seconds, "timed once");
}

#[test]
fn two_thread_only_monitors_run_at_once_and_keep_apart() {
    let run = |name: &'static str, calls: u64| {
        std::thread::spawn(move || {
            let monitor = Monitor::builder()
                .current_thread_only()
                .log_interval(None)
                .start()
                .unwrap();
            for _ in 0..calls {
                let _stage = monitor.stage(name).unwrap();
                work();
            }
            monitor.finish()
        })
    };
    let (a, b) = (run("left", 300), run("right", 500));
    let (a, b) = (a.join().unwrap(), b.join().unwrap());
    assert_eq!(paths(&a), ["left", "left/work"]);
    assert_eq!(paths(&b), ["right", "right/work"]);
    assert_eq!(stage(&a, "left/work").calls, 300);
    assert_eq!(stage(&b, "right/work").calls, 500);
}

#[test]
fn a_thread_is_covered_by_one_monitor_at_most() {
    let _serial = serial();
    let monitor = start();
    let second = Monitor::builder().log_interval(None).start();
    assert!(matches!(second, Err(Error::AlreadyActive)), "{second:?}");
    let local = Monitor::builder()
        .current_thread_only()
        .log_interval(None)
        .start();
    assert!(matches!(local, Err(Error::AlreadyActive)), "{local:?}");
    monitor.finish();
    // Once finished, the next one may start.
    start().finish();
}

#[test]
fn with_no_monitor_a_stage_records_nothing_and_a_later_monitor_sees_none_of_it() {
    let _serial = serial();
    for _ in 0..10 {
        work();
    }
    let inert = stemmon::stage("before");
    drop(inert);
    let monitor = start();
    work();
    let report = monitor.finish();
    assert_eq!(paths(&report), ["work"]);
    assert_eq!(stage(&report, "work").calls, 1);
}

#[test]
fn a_stage_with_only_open_calls_reports_their_shortest_and_longest() {
    let _serial = serial();
    let monitor = start();
    // Two workers, each holding a stage open until released; the second opens its stage
    // 300 ms after the first did.
    let open_until_released = |delay: u64| {
        let (entered, is_entered) = mpsc::channel();
        let (release, released) = mpsc::channel::<()>();
        let worker = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(delay));
            let _open = stemmon::stage("open");
            entered.send(()).unwrap();
            let _ = released.recv();
        });
        is_entered.recv().unwrap();
        (worker, release)
    };
    let first = open_until_released(0);
    let second = open_until_released(300);
    std::thread::sleep(Duration::from_millis(100));
    let report = monitor.finish();
    for (worker, release) in [first, second] {
        release.send(()).unwrap();
        worker.join().unwrap();
    }
    let open = stage(&report, "open");
    assert_eq!((open.calls, open.threads), (2, 2));
    // One call open for at least 0.4 s, the other for at least 0.1 s and 0.3 s less:
    // their shortest and longest, not (as before) their mean and their sum, whose total
    // would not be the stage's wall time.
    let (min, max) = (open.min_wall_seconds, open.max_wall_seconds);
    assert!(min >= 0.09, "min {min}");
    assert!(max - min >= 0.29, "min {min}, max {max}");
    assert!((open.wall_seconds - open.min_wall_seconds - open.max_wall_seconds).abs() < 1e-9);
}
