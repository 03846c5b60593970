//! `#[monitored]` under real monitors: every fn shape records the right stage (calls,
//! path, nesting, errors), and the call itself behaves exactly as without the attribute.

use std::error::Error;
use std::fmt;
use std::future::Future;
use std::num::ParseIntError;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use stemmon::{monitored, Monitor, Report};
use stemmon_suite::{touched_mib, MIB};

fn quiet() -> stemmon::MonitorBuilder {
    Monitor::builder().current_thread_only().log_interval(None)
}

/// Runs `body` under a fresh monitor on this thread and returns its report.
fn monitor(body: impl FnOnce()) -> Report {
    let monitor = quiet().start().unwrap();
    body();
    monitor.finish()
}

fn current_thread_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

fn paths(report: &Report) -> Vec<&str> {
    report.stages.iter().map(|s| s.path.as_str()).collect()
}

// ---------------------------------------------------------------------------------------
// Free fns, names, nesting

#[monitored]
fn sleepy(ms: u64) -> u64 {
    std::thread::sleep(Duration::from_millis(ms));
    ms
}

#[monitored("outer stage")]
fn outer() -> u64 {
    inner() + inner()
}

#[monitored]
fn inner() -> u64 {
    sleepy(5)
}

#[test]
fn a_free_fn_is_a_stage_named_after_it_with_every_call_aggregated() {
    let report = monitor(|| {
        for ms in [10, 20, 30] {
            assert_eq!(sleepy(ms), ms);
        }
    });
    let stage = report.stage("sleepy").unwrap();
    assert_eq!(stage.name, "sleepy");
    assert_eq!((stage.calls, stage.errors), (3, 0));
    assert_eq!(stage.error, None);
    assert_eq!(stage.parent_id, None);
    assert!(stage.wall_seconds >= 0.060, "{}", stage.wall_seconds);
    assert!(
        stage.min_wall_seconds >= 0.010,
        "{}",
        stage.min_wall_seconds
    );
    assert!(
        stage.max_wall_seconds >= 0.030,
        "{}",
        stage.max_wall_seconds
    );
    assert!(stage.wall_seconds < 10.0);
}

#[test]
fn nested_calls_are_child_stages_and_an_explicit_name_is_used() {
    let report = monitor(|| {
        assert_eq!(outer(), 10);
        assert_eq!(inner(), 5);
    });
    assert_eq!(
        paths(&report),
        [
            "outer stage",
            "outer stage/inner",
            "outer stage/inner/sleepy",
            "inner",
            "inner/sleepy"
        ]
    );
    let outer = report.stage("outer stage").unwrap();
    let nested = report.stage("outer stage/inner").unwrap();
    assert_eq!(outer.calls, 1);
    assert_eq!(nested.calls, 2);
    assert_eq!(nested.name, "inner");
    assert_eq!(nested.parent_id, Some(outer.id));
    assert!(outer.wall_seconds >= nested.wall_seconds);
    assert_eq!(report.stage("inner").unwrap().parent_id, None);
}

// ---------------------------------------------------------------------------------------
// Errors and panics

#[derive(Debug, PartialEq)]
struct PredictError {
    row: usize,
}

impl fmt::Display for PredictError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "row {} cannot be predicted", self.row)
    }
}

impl Error for PredictError {}

#[monitored]
fn parse(text: &str) -> Result<u32, ParseIntError> {
    text.trim().parse()
}

#[monitored]
fn predict(rows: &[&str]) -> Result<u32, PredictError> {
    let mut sum = 0;
    for (row, text) in rows.iter().enumerate() {
        if text.is_empty() {
            // An early return of an `Err` built in place.
            return Err(PredictError { row });
        }
        sum += parse(text).map_err(|_| PredictError { row })?;
    }
    Ok(sum)
}

#[monitored]
fn load(text: &str) -> Result<u32, Box<dyn Error + Send + Sync>> {
    if text.is_empty() {
        return Err(Box::new(PredictError { row: 0 }));
    }
    Ok(parse(text)? * 2)
}

#[test]
fn an_err_reaches_the_caller_unchanged_and_records_its_short_type_name() {
    let report = monitor(|| {
        assert_eq!(parse("x"), Err("x".parse::<u32>().unwrap_err()));
        assert_eq!(parse(" 7 "), Ok(7));
    });
    let stage = report.stage("parse").unwrap();
    assert_eq!((stage.calls, stage.errors), (2, 1));
    assert_eq!(stage.error.as_deref(), Some("ParseIntError"));
}

#[test]
fn early_return_and_question_mark_close_the_stage_with_the_fn_error_type() {
    let report = monitor(|| {
        assert_eq!(predict(&["1", "2"]), Ok(3));
        assert_eq!(predict(&["1", ""]), Err(PredictError { row: 1 }));
        assert_eq!(predict(&["x"]), Err(PredictError { row: 0 }));
        assert_eq!(load("4").unwrap(), 8);
        let error = load("").unwrap_err();
        assert_eq!(error.to_string(), "row 0 cannot be predicted");
        assert!(load("y").unwrap_err().is::<ParseIntError>());
    });
    let predict = report.stage("predict").unwrap();
    assert_eq!((predict.calls, predict.errors), (3, 2));
    assert_eq!(predict.error.as_deref(), Some("PredictError"));
    // The inner `Err` is recorded on the inner stage, with its own type.
    let inner = report.stage("predict/parse").unwrap();
    assert_eq!((inner.calls, inner.errors), (4, 1));
    assert_eq!(inner.error.as_deref(), Some("ParseIntError"));
    let load = report.stage("load").unwrap();
    assert_eq!((load.calls, load.errors), (3, 2));
    assert_eq!(load.error.as_deref(), Some("Box<dyn Error + Send + Sync>"));
}

#[test]
fn ok_calls_after_a_failure_keep_the_last_error_and_the_count() {
    let report = monitor(|| {
        let _ = parse("x");
        for _ in 0..5 {
            parse("1").unwrap();
        }
    });
    let stage = report.stage("parse").unwrap();
    assert_eq!((stage.calls, stage.errors), (6, 1));
    assert_eq!(stage.error.as_deref(), Some("ParseIntError"));
}

#[monitored]
fn explode(message: &str) -> u32 {
    panic!("{message}")
}

#[monitored]
fn calls_explode() {
    explode("from inside");
}

#[test]
fn a_panic_records_panic_and_still_reaches_the_caller() {
    let report = monitor(|| {
        let payload = catch_unwind(|| explode("boom")).unwrap_err();
        assert_eq!(payload.downcast_ref::<String>().unwrap(), "boom");
        assert!(catch_unwind(calls_explode).is_err());
        // The stack unwound with the panic: the next call is a root stage again.
        assert_eq!(parse("1"), Ok(1));
    });
    let explode = report.stage("explode").unwrap();
    assert_eq!((explode.calls, explode.errors), (1, 1));
    assert_eq!(explode.error.as_deref(), Some("panic"));
    let outer = report.stage("calls_explode").unwrap();
    assert_eq!(outer.error.as_deref(), Some("panic"));
    let nested = report.stage("calls_explode/explode").unwrap();
    assert_eq!(nested.error.as_deref(), Some("panic"));
    let parse = report.stage("parse").unwrap();
    assert_eq!((parse.parent_id, parse.errors), (None, 0));
}

// ---------------------------------------------------------------------------------------
// Methods, traits, generics, impl Trait, unsafe

struct Model {
    weights: Vec<f64>,
    name: String,
}

impl Model {
    #[monitored]
    fn new(n: usize) -> Self {
        Model {
            weights: vec![1.0; n],
            name: "linear".to_owned(),
        }
    }

    #[monitored]
    fn score(&self, x: f64) -> f64 {
        self.weights.iter().sum::<f64>() * x
    }

    #[monitored]
    fn weights_mut(&mut self) -> &mut Vec<f64> {
        &mut self.weights
    }

    #[monitored]
    fn name(&self) -> &str {
        &self.name
    }

    #[monitored]
    fn into_weights(self) -> Vec<f64> {
        self.weights
    }
}

trait Estimator {
    fn fit(&mut self, data: &[f64]) -> Result<usize, String>;
}

impl Estimator for Model {
    #[monitored]
    fn fit(&mut self, data: &[f64]) -> Result<usize, String> {
        if data.is_empty() {
            return Err("no data".to_owned());
        }
        self.weights = data.to_vec();
        Ok(data.len())
    }
}

#[monitored]
fn total<T, I>(items: I) -> T
where
    T: std::iter::Sum<T>,
    I: IntoIterator<Item = T>,
{
    items.into_iter().sum()
}

#[monitored]
fn doubled(items: impl IntoIterator<Item = u32>) -> impl Iterator<Item = u32> {
    items
        .into_iter()
        .map(|x| x * 2)
        .collect::<Vec<_>>()
        .into_iter()
}

#[monitored]
unsafe fn read_raw(pointer: *const u64) -> u64 {
    // SAFETY: the caller passes a pointer to a live u64.
    unsafe { *pointer }
}

#[monitored]
fn log_into(out: &mut Vec<String>, line: &str) {
    out.push(line.to_owned());
}

#[test]
fn methods_trait_impls_generics_impl_trait_and_unsafe_fns_are_stages() {
    let report = monitor(|| {
        let mut model = Model::new(3);
        assert_eq!(model.score(2.0), 6.0);
        model.weights_mut().push(1.0);
        assert_eq!(model.score(1.0), 4.0);
        assert_eq!(model.name(), "linear");
        assert_eq!(model.fit(&[]), Err("no data".to_owned()));
        assert_eq!(model.fit(&[2.0, 3.0]), Ok(2));
        assert_eq!(model.into_weights(), [2.0, 3.0]);
        assert_eq!(total(vec![1u64, 2, 3]), 6);
        assert_eq!(total([0.5f64, 0.25]), 0.75);
        assert_eq!(doubled([1, 2]).collect::<Vec<_>>(), [2, 4]);
        let value = 41u64;
        // SAFETY: `&value` points to a live u64, as `read_raw` requires.
        assert_eq!(unsafe { read_raw(&value) }, 41);
        let mut out = Vec::new();
        log_into(&mut out, "a");
        assert_eq!(out, ["a"]);
    });
    for (path, calls) in [
        ("new", 1),
        ("score", 2),
        ("weights_mut", 1),
        ("name", 1),
        ("into_weights", 1),
        ("total", 2),
        ("doubled", 1),
        ("read_raw", 1),
        ("log_into", 1),
    ] {
        let stage = report
            .stage(path)
            .unwrap_or_else(|| panic!("no stage {path}"));
        assert_eq!((stage.calls, stage.errors), (calls, 0), "{path}");
    }
    let fit = report.stage("fit").unwrap();
    assert_eq!((fit.calls, fit.errors), (2, 1));
    assert_eq!(fit.error.as_deref(), Some("String"));
}

// ---------------------------------------------------------------------------------------
// Memory

#[monitored]
fn allocate(mib: u64) -> Vec<u8> {
    let block = touched_mib(mib);
    std::thread::sleep(Duration::from_millis(60));
    block
}

#[test]
fn a_monitored_call_holding_memory_shows_it_in_its_stage_peak() {
    let monitor = quiet()
        .sample_interval(Duration::from_millis(10))
        .start()
        .unwrap();
    let block = allocate(64);
    let report = monitor.finish();
    drop(block);
    let stage = report.stage("allocate").unwrap();
    let peak = stage.peaks.peak_parent_rss_bytes.unwrap();
    assert!(
        peak >= 64 * MIB,
        "peak {peak} bytes while 64 MiB was resident"
    );
}

// ---------------------------------------------------------------------------------------
// Where nothing is recorded

/// Calls on a thread no monitor covers, made while a monitor runs on another thread
/// (covering that thread alone): they behave as without the attribute, and none of them
/// reaches the running monitor, whose report holds its own call only.
#[test]
fn with_no_monitor_the_calls_behave_and_nothing_is_recorded() {
    let (started, on_start) = std::sync::mpsc::channel();
    let (done, on_done) = std::sync::mpsc::channel::<()>();
    let monitored = std::thread::spawn(move || {
        let monitor = quiet().current_thread_only().start().unwrap();
        started.send(()).unwrap();
        on_done.recv().unwrap();
        assert_eq!(sleepy(1), 1);
        monitor.finish()
    });
    on_start.recv().unwrap();
    assert_eq!(outer(), 10);
    assert_eq!(parse("3"), Ok(3));
    assert!(parse("x").is_err());
    assert!(catch_unwind(|| explode("unmonitored")).is_err());
    done.send(()).unwrap();
    let report = monitored.join().unwrap();
    assert_eq!(paths(&report), ["sleepy"]);
    let sleepy = report.stage("sleepy").unwrap();
    assert_eq!((sleepy.calls, sleepy.errors), (1, 0));
}

/// `monitor` covers its own thread alone (`current_thread_only`); a process-wide monitor
/// records every thread (tests/threads.rs).
#[test]
fn under_a_thread_only_monitor_a_call_on_another_thread_is_a_no_op() {
    let report = monitor(|| {
        let value = std::thread::spawn(|| {
            assert!(parse("x").is_err());
            outer()
        })
        .join()
        .unwrap();
        assert_eq!(value, 10);
        assert_eq!(sleepy(1), 1);
    });
    assert_eq!(paths(&report), ["sleepy"]);
}

// ---------------------------------------------------------------------------------------
// async fn

#[monitored]
async fn fetch(id: u32, ms: u64) -> Result<u32, ParseIntError> {
    tokio::time::sleep(Duration::from_millis(ms)).await;
    tokio::task::yield_now().await;
    if id == 0 {
        return "zero".parse();
    }
    Ok(id)
}

#[monitored]
fn checksum(values: &[u32]) -> u32 {
    values.iter().sum()
}

#[monitored("pipeline")]
async fn pipeline() -> Result<u32, ParseIntError> {
    let a = fetch(1, 30).await?;
    let b = fetch(2, 30).await?;
    Ok(checksum(&[a, b]))
}

#[monitored]
async fn failing_pipeline() -> Result<u32, Box<dyn Error>> {
    let a = fetch(0, 1).await?;
    Ok(a)
}

#[monitored]
async fn async_explode() {
    tokio::task::yield_now().await;
    panic!("async boom");
}

#[test]
fn an_async_fn_is_one_stage_across_its_awaits_and_nests_what_it_awaits() {
    let runtime = current_thread_runtime();
    let report = monitor(|| {
        assert_eq!(runtime.block_on(pipeline()), Ok(3));
    });
    assert_eq!(
        paths(&report),
        ["pipeline", "pipeline/fetch", "pipeline/checksum"]
    );
    let pipeline = report.stage("pipeline").unwrap();
    let fetch = report.stage("pipeline/fetch").unwrap();
    assert_eq!((pipeline.calls, pipeline.errors), (1, 0));
    assert_eq!((fetch.calls, fetch.errors), (2, 0));
    assert_eq!(fetch.parent_id, Some(pipeline.id));
    // Two 30 ms sleeps: the stage spans the awaits, not only the polls.
    assert!(fetch.wall_seconds >= 0.060, "{}", fetch.wall_seconds);
    assert!(pipeline.wall_seconds >= 0.060, "{}", pipeline.wall_seconds);
    assert_eq!(report.stage("pipeline/checksum").unwrap().calls, 1);
}

#[test]
fn an_async_err_is_recorded_and_returned_through_question_mark() {
    let runtime = current_thread_runtime();
    let report = monitor(|| {
        let error = runtime.block_on(failing_pipeline()).unwrap_err();
        assert!(error.is::<ParseIntError>());
    });
    let outer = report.stage("failing_pipeline").unwrap();
    assert_eq!((outer.calls, outer.errors), (1, 1));
    assert_eq!(outer.error.as_deref(), Some("Box<dyn Error>"));
    let fetch = report.stage("failing_pipeline/fetch").unwrap();
    assert_eq!(fetch.error.as_deref(), Some("ParseIntError"));
}

#[test]
fn an_async_panic_records_panic_and_reaches_the_caller() {
    let runtime = current_thread_runtime();
    let report = monitor(|| {
        let payload = catch_unwind(AssertUnwindSafe(|| runtime.block_on(async_explode())));
        assert_eq!(
            *payload.unwrap_err().downcast_ref::<&str>().unwrap(),
            "async boom"
        );
    });
    let stage = report.stage("async_explode").unwrap();
    assert_eq!((stage.calls, stage.errors), (1, 1));
    assert_eq!(stage.error.as_deref(), Some("panic"));
}

#[test]
fn a_future_dropped_before_it_completes_is_cancelled() {
    let runtime = current_thread_runtime();
    let report = monitor(|| {
        let outcome = runtime.block_on(async {
            tokio::time::timeout(Duration::from_millis(20), fetch(7, 10_000)).await
        });
        assert!(outcome.is_err(), "the timeout must drop the future");
        // A future never polled opens no stage at all.
        drop(pipeline());
    });
    assert_eq!(paths(&report), ["fetch"]);
    let stage = report.stage("fetch").unwrap();
    assert_eq!((stage.calls, stage.errors), (1, 1));
    assert_eq!(stage.error.as_deref(), Some("cancelled"));
    assert!(stage.wall_seconds >= 0.020, "{}", stage.wall_seconds);
}

/// As above: a process-wide monitor records tokio workers too (tests/threads.rs).
#[test]
fn under_a_thread_only_monitor_a_task_polled_on_a_worker_thread_records_nothing() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_time()
        .build()
        .unwrap();
    let report = monitor(|| {
        // `tokio::spawn` needs a `Send` future: a `#[monitored]` one is.
        let task = runtime.spawn(pipeline());
        assert_eq!(runtime.block_on(task).unwrap(), Ok(3));
    });
    assert!(report.stages.is_empty(), "{:?}", paths(&report));
}

/// Pending once, then ready: lets a test poll by hand, on the thread of its choice.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if std::mem::replace(&mut self.0, true) {
            Poll::Ready(())
        } else {
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

#[monitored]
async fn two_polls(text: String) -> Result<u8, ParseIntError> {
    YieldOnce(false).await;
    text.parse()
}

fn poll_once<F: Future>(future: Pin<&mut F>) -> Poll<F::Output> {
    future.poll(&mut Context::from_waker(Waker::noop()))
}

#[test]
fn a_future_started_here_and_finished_or_dropped_on_another_thread_closes_its_stage() {
    let report = monitor(|| {
        let mut failing = Box::pin(two_polls("x".to_owned()));
        assert!(poll_once(failing.as_mut()).is_pending());
        let failed = std::thread::spawn(move || match poll_once(failing.as_mut()) {
            Poll::Ready(result) => result.is_err(),
            Poll::Pending => panic!("ready at the second poll"),
        });
        assert!(failed.join().unwrap());

        let mut abandoned = Box::pin(two_polls("1".to_owned()));
        assert!(poll_once(abandoned.as_mut()).is_pending());
        std::thread::spawn(move || drop(abandoned)).join().unwrap();
    });
    let stage = report.stage("two_polls").unwrap();
    assert_eq!((stage.calls, stage.errors), (2, 2));
    assert_eq!(stage.error.as_deref(), Some("cancelled"));
}
