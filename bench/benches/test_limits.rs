//! The cost of `#[stemmon::test]` per allocation + free pair, beside plain heap
//! monitoring, with `stemmon::Alloc` as the real global allocator: System alone;
//! `Alloc` on a thread outside any test (what every other thread pays); `Alloc` with a
//! monitor and a stage open (plain heap monitoring); `Alloc` inside a test's limits
//! (its shared counters: four atomic read-modify-writes an allocation, two a free);
//! and two threads of one test allocating at once (the counters' cache line shared).

use criterion::Criterion;
use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::{mpsc, Arc, Barrier};
use std::time::{Duration, Instant};

#[global_allocator]
static ALLOC: stemmon::Alloc = stemmon::Alloc::system();

/// The workload of every row: one allocation of 64 bytes and its free.
const LAYOUT: Layout = match Layout::from_size_align(64, 8) {
    Ok(layout) => layout,
    Err(_) => panic!("a valid layout"),
};

/// One allocation + free pair through `allocator`.
#[inline(always)]
fn pair(allocator: &impl GlobalAlloc) {
    // SAFETY: LAYOUT has a non-zero size; the block is freed with the allocator and
    // layout it was made with, and never read or written.
    unsafe {
        let block = allocator.alloc(LAYOUT);
        black_box(block);
        if !block.is_null() {
            allocator.dealloc(block, LAYOUT);
        }
    }
}

/// Two threads started inside one test (so both count for it), timed together: a
/// batch is `iters` pairs on each at once; the mean of their times.
struct TestThreads {
    start: Vec<mpsc::Sender<u64>>,
    done: mpsc::Receiver<Duration>,
}

impl TestThreads {
    fn new(threads: usize) -> TestThreads {
        let barrier = Arc::new(Barrier::new(threads));
        let (done_tx, done) = mpsc::channel();
        let start = (0..threads)
            .map(|_| {
                let (tx, rx) = mpsc::channel::<u64>();
                let (barrier, done_tx) = (Arc::clone(&barrier), done_tx.clone());
                std::thread::spawn(move || {
                    for iters in rx {
                        barrier.wait();
                        let started = Instant::now();
                        for _ in 0..iters {
                            pair(&ALLOC);
                        }
                        let _ = done_tx.send(started.elapsed());
                    }
                });
                tx
            })
            .collect();
        TestThreads { start, done }
    }

    fn run(&self, iters: u64) -> Duration {
        for start in &self.start {
            start.send(iters).expect("the thread waits");
        }
        let total: Duration = (0..self.start.len())
            .map(|_| self.done.recv().expect("the thread reports"))
            .sum();
        total / self.start.len() as u32
    }
}

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(stemmon_bench::WARM_UP)
        .measurement_time(stemmon_bench::MEASURE_FAST)
        .sample_size(stemmon_bench::SAMPLES_FAST)
        .configure_from_args();
    let mut group = c.benchmark_group("test_limits");
    group.bench_function("system", |b| b.iter(|| pair(&System)));
    group.bench_function("alloc_outside_tests", |b| b.iter(|| pair(&ALLOC)));
    let outside =
        stemmon_bench::fastest_alternating(&[&|| pair(&System), &|| pair(&ALLOC)], 200_000, 40);
    let staged = {
        let monitor = stemmon::Monitor::builder()
            .log_interval(None)
            .start()
            .expect("the monitor starts");
        let _stage = monitor.stage("allocate").expect("a stage");
        group.bench_function("alloc_monitor_stage", |b| b.iter(|| pair(&ALLOC)));
        stemmon_bench::fastest_alternating(&[&|| pair(&System), &|| pair(&ALLOC)], 200_000, 40)
    };
    let watch = stemmon::testing::Limits::new("bench")
        .max_heap("1 GiB")
        .start()
        .expect("the limits start");
    group.bench_function("alloc_in_test", |b| b.iter(|| pair(&ALLOC)));
    let in_test =
        stemmon_bench::fastest_alternating(&[&|| pair(&System), &|| pair(&ALLOC)], 200_000, 40);
    let (one, two) = (TestThreads::new(1), TestThreads::new(2));
    group.bench_function("one_thread_in_test", |b| {
        b.iter_custom(|iters| one.run(iters))
    });
    group.bench_function("two_threads_in_test", |b| {
        b.iter_custom(|iters| two.run(iters))
    });
    group.finish();
    drop((one, two));
    let figures = watch.figures();
    drop(watch.finish());
    let result = serde_json::json!({
        "test_allocations": figures.allocations,
        "fastest_batch_ns": {
            "system": outside[0],
            "alloc_outside_tests": outside[1],
            "system_in_stage": staged[0],
            "alloc_monitor_stage": staged[1],
            "system_in_test": in_test[0],
            "alloc_in_test": in_test[1],
        },
    });
    stemmon_bench::write_result("test_limits", &result).expect("the result is written");
    c.final_summary();
}
