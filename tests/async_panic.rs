//! A panic inside an async stage's poll: the poll's frame leaves the polling thread's
//! stack as the panic unwinds, so the thread's later stages have their own paths
//! (`after`, not `boom/after`) and later samples count toward nothing dead.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Mutex;
use std::task::{Context, Waker};
use std::thread::ThreadId;
use std::time::Duration;
use stemmon::{monitored, Monitor, Report};
use stemmon_suite::wait_for_samples;

/// A process-wide monitor covers every thread: these tests must not overlap.
static SERIAL: Mutex<()> = Mutex::new(());

/// The thread that polled `boom` last.
static BOOM_THREAD: Mutex<Option<ThreadId>> = Mutex::new(None);

#[monitored]
async fn boom() {
    *BOOM_THREAD.lock().unwrap() = Some(std::thread::current().id());
    panic!("boom (expected by the test)");
}

fn paths(report: &Report) -> Vec<&str> {
    report.stages.iter().map(|s| s.path.as_str()).collect()
}

#[test]
fn a_tokio_worker_that_survives_a_panicking_poll_keeps_no_stage_of_it_open() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let monitor = Monitor::builder()
        .log_interval(None)
        .sample_interval(Duration::from_millis(10))
        .start()
        .unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .build()
        .unwrap();
    let panicked = runtime.block_on(async { tokio::spawn(boom()).await });
    assert!(panicked.unwrap_err().is_panic());
    let boom_thread = BOOM_THREAD.lock().unwrap().expect("boom was polled");
    // The one worker outlived the panic and runs the next task.
    let after_thread = runtime.block_on(async {
        tokio::spawn(async {
            let _after = stemmon::stage("after");
            std::thread::current().id()
        })
        .await
        .unwrap()
    });
    assert_eq!(after_thread, boom_thread, "the same worker thread");
    let samples_of_boom = monitor.summary().stage("boom").unwrap().samples;
    wait_for_samples(&monitor, 3);
    let report = monitor.summary();
    let boom = report.stage("boom").unwrap();
    assert_eq!(
        boom.samples, samples_of_boom,
        "no sample after the panic counts toward boom: nothing of it is open"
    );
    assert_eq!((boom.calls, boom.errors), (1, 1));
    assert_eq!(boom.error.as_deref(), Some("panic"));
    drop(runtime);
    let report = monitor.finish();
    assert!(report.stage("boom/after").is_none(), "{:?}", paths(&report));
    let after = report.stage("after").expect("a top-level `after`");
    assert_eq!((after.calls, after.parent_id), (1, None));
}

#[test]
fn a_stage_after_a_caught_panicking_poll_on_the_same_thread_is_top_level() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let monitor = Monitor::builder()
        .log_interval(None)
        .current_thread_only()
        .start()
        .unwrap();
    let mut future = Box::pin(boom());
    let mut cx = Context::from_waker(Waker::noop());
    let polled = std::panic::catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(&mut cx)));
    assert!(polled.is_err(), "the poll panicked");
    {
        let _after = monitor.stage("after").unwrap();
    }
    drop(future);
    let report = monitor.finish();
    assert!(report.stage("boom/after").is_none(), "{:?}", paths(&report));
    let after = report.stage("after").expect("a top-level `after`");
    assert_eq!((after.calls, after.parent_id), (1, None));
    let boom = report.stage("boom").unwrap();
    assert_eq!((boom.calls, boom.errors), (1, 1));
}
