//! A `#[monitored]` call under a process-wide monitor on a worker thread, beside the
//! same call on the monitor's own thread; and on two threads at once, beside one
//! thread alone. Budgets (the book's `cost.md`): a worker within 1.2× of the monitor's thread; two
//! threads within 1.5× per call of one.
//!
//! Also the scale figures of a process-wide monitor, measured once each (criterion
//! would repeat them for minutes): 100 000 distinct stage paths; recursion 10 000 deep,
//! direct and mutual (`expr → term → expr`), and the report each leaves; 2 000 distinct
//! stages nested in one another; 100 000 first completions with logging and an output
//! file, beside the same without.

use criterion::Criterion;
use std::hint::black_box;
use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

mod subjects;

use subjects::attribute;

/// Runs `iters` calls of the measured fn and returns how long they took.
fn calls(iters: u64) -> Duration {
    let started = Instant::now();
    for i in 0..iters {
        black_box(attribute(black_box(i)));
    }
    started.elapsed()
}

/// A thread that runs batches of calls on request: the same worker for every batch,
/// as a rayon or tokio worker would be.
struct Worker {
    ask: mpsc::Sender<(u64, Arc<Barrier>)>,
    answer: mpsc::Receiver<Duration>,
}

impl Worker {
    fn spawn() -> Worker {
        let (ask, asked) = mpsc::channel::<(u64, Arc<Barrier>)>();
        let (answered, answer) = mpsc::channel();
        std::thread::spawn(move || {
            for (iters, barrier) in asked {
                barrier.wait();
                answered.send(calls(iters)).unwrap();
            }
        });
        Worker { ask, answer }
    }

    fn run(workers: &[Worker], iters: u64) -> Duration {
        let barrier = Arc::new(Barrier::new(workers.len()));
        for worker in workers {
            worker.ask.send((iters, Arc::clone(&barrier))).unwrap();
        }
        workers
            .iter()
            .map(|w| w.answer.recv().unwrap())
            .max()
            .unwrap()
    }
}

/// Mutual recursion, as a recursive-descent parser's: folds into `expr` and `expr/term`.
#[stemmon::monitored]
fn expr(depth: u32) -> u32 {
    if depth == 0 {
        0
    } else {
        term(depth - 1) + 1
    }
}

#[stemmon::monitored]
fn term(depth: u32) -> u32 {
    if depth == 0 {
        0
    } else {
        expr(depth - 1) + 1
    }
}

/// Runs `f` on a thread with room for deep recursion.
fn on_big_stack(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(512 << 20)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap();
}

/// Scale figures of one fresh monitor each.
fn scale() -> serde_json::Value {
    // 100 000 distinct paths: each is looked up, made and completed once.
    let monitor = stemmon::Monitor::builder()
        .log_interval(None)
        .start()
        .unwrap();
    let started = Instant::now();
    {
        let _root = monitor.stage("root").unwrap();
        for i in 0..100_000 {
            let _stage = stemmon::stage(format!("s{i}"));
        }
    }
    let distinct_seconds = started.elapsed().as_secs_f64();
    let report = monitor.finish();
    assert_eq!(report.stages.len(), 100_001);

    // Recursion 10 000 deep, on a thread with room for it.
    let dir = std::env::temp_dir().join(format!("stemmon-bench-scale-{}", std::process::id()));
    let path = dir.join("deep.json");
    let monitor = stemmon::Monitor::builder()
        .log_interval(None)
        .output(&path)
        .start()
        .unwrap();
    let started = Instant::now();
    std::thread::Builder::new()
        .stack_size(512 << 20)
        .spawn(|| black_box(subjects::descend(black_box(9_999))))
        .unwrap()
        .join()
        .unwrap();
    let deep_seconds = started.elapsed().as_secs_f64();
    monitor.finish();
    let deep_report_bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);

    // Mutual recursion 10 000 deep of each of `expr` and `term`.
    let path = dir.join("mutual.json");
    let monitor = stemmon::Monitor::builder()
        .log_interval(None)
        .output(&path)
        .start()
        .unwrap();
    let started = Instant::now();
    on_big_stack(|| {
        black_box(expr(black_box(19_999)));
    });
    let mutual_seconds = started.elapsed().as_secs_f64();
    let report = monitor.finish();
    assert_eq!(report.stages.len(), 2, "expr and expr/term");
    let mutual_report_bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);

    // 2 000 distinct stages nested in one another, closed innermost first.
    let path = dir.join("nested.json");
    let monitor = stemmon::Monitor::builder()
        .log_interval(None)
        .output(&path)
        .start()
        .unwrap();
    let started = Instant::now();
    let guards: Vec<_> = (0..2_000)
        .map(|i| stemmon::stage(format!("n{i}")))
        .collect();
    guards.into_iter().rev().for_each(drop);
    let nesting_seconds = started.elapsed().as_secs_f64();
    let report = monitor.finish();
    assert_eq!(report.stages.len(), 2_000);
    let nesting_report_bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);

    // First completions, with the default log interval and an output file, then
    // without: the instrumented thread hands both to the sampler.
    let first_completions = |logged: bool| {
        let mut builder = stemmon::Monitor::builder();
        builder = if logged {
            builder.output(dir.join("logged.json"))
        } else {
            builder.log_interval(None)
        };
        let monitor = builder.start().unwrap();
        let started = Instant::now();
        for i in 0..100_000 {
            let _stage = stemmon::stage(format!("first{i}"));
        }
        let took = started.elapsed().as_secs_f64();
        monitor.finish();
        took
    };
    // The logged run prints 100 000 lines: send them nowhere.
    let logged_seconds = with_stderr_to_null(|| first_completions(true));
    let quiet_seconds = first_completions(false);
    let _ = std::fs::remove_dir_all(&dir);
    serde_json::json!({
        "distinct_paths": 100_000,
        "distinct_paths_seconds": distinct_seconds,
        "recursion_depth": 10_000,
        "recursion_seconds": deep_seconds,
        "recursion_report_bytes": deep_report_bytes,
        "mutual_recursion_seconds": mutual_seconds,
        "mutual_recursion_report_bytes": mutual_report_bytes,
        "nesting_depth": 2_000,
        "nesting_seconds": nesting_seconds,
        "nesting_report_bytes": nesting_report_bytes,
        "first_completions": 100_000,
        "first_completions_logged_seconds": logged_seconds,
        "first_completions_quiet_seconds": quiet_seconds,
    })
}

/// Runs `f` with file descriptor 2 pointed at /dev/null.
fn with_stderr_to_null<R>(f: impl FnOnce() -> R) -> R {
    use std::os::fd::AsRawFd;
    let null = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/null")
        .unwrap();
    // SAFETY: dup/dup2 on descriptors this process owns; 2 is restored before returning.
    let saved = unsafe { libc::dup(2) };
    // SAFETY: as above: `null` is open for the whole call.
    unsafe { libc::dup2(null.as_raw_fd(), 2) };
    let result = f();
    // SAFETY: as above; `saved` is a descriptor dup returned and is closed once.
    unsafe {
        libc::dup2(saved, 2);
        libc::close(saved);
    }
    result
}

fn main() {
    let scale = scale();
    stemmon_bench::write_result("scale", &scale).expect("the result is written");

    let monitor = stemmon::Monitor::builder()
        .log_interval(None)
        .start()
        .expect("the monitor starts");
    let one = [Worker::spawn()];
    let two = [Worker::spawn(), Worker::spawn()];

    let mut c = Criterion::default()
        .warm_up_time(stemmon_bench::WARM_UP)
        .measurement_time(stemmon_bench::MEASURE_FAST)
        .sample_size(stemmon_bench::SAMPLES_FAST)
        .configure_from_args();
    let mut group = c.benchmark_group("threads");
    group.bench_function("owner", |b| b.iter_custom(calls));
    group.bench_function("worker", |b| b.iter_custom(|n| Worker::run(&one, n)));
    group.bench_function("two_workers", |b| b.iter_custom(|n| Worker::run(&two, n)));
    group.finish();

    let report = monitor.finish();
    let attribute = report.stage("attribute").expect("the calls were recorded");
    let result = serde_json::json!({
        "attribute_calls": attribute.calls,
        "attribute_threads": attribute.threads,
    });
    stemmon_bench::write_result("threads", &result).expect("the result is written");
    c.final_summary();
}
