//! The cost of `stemmon::Alloc` per allocation + free pair (the book's `heap.md`), with it as the
//! real global allocator: the inner allocator (System) alone; `Alloc` with no monitor;
//! `Alloc` with a monitor running and a stage open; `stats_alloc`'s `StatsAlloc`
//! (process-wide atomics, a `Region` open) in the same run; two threads allocating at
//! once beside one; and a `#[monitored]` call under an active monitor with `Alloc`
//! installed (the old budget, against the peers of `active_call`). hotpath's
//! allocation mode must be the global allocator of its own binary with its feature on:
//! `bench/hotpath-alloc`, same workload.
//!
//! Budgets: ≤ 8 ns added over System with a monitor and a stage, ≤ 2 ns with none; two
//! threads within 1.2× per pair of one; below `stats_alloc` and hotpath's mode.

use criterion::Criterion;
use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::{mpsc, Arc, Barrier};
use std::time::{Duration, Instant};

mod subjects;

#[global_allocator]
static ALLOC: stemmon::Alloc = stemmon::Alloc::system();

/// The peer: process-wide atomic counters around System.
static STATS: stats_alloc::StatsAlloc<System> = stats_alloc::StatsAlloc::system();

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

/// Worker threads that stay up for the whole bench, each in a stage of its own: a
/// batch is `iters` pairs on every worker at once. Spawning threads per batch would
/// time thread start-up and the wake-up skew between them instead of the pairs.
struct Workers {
    start: Vec<mpsc::Sender<(u64, bool)>>,
    done: mpsc::Receiver<Duration>,
    barrier: Arc<Barrier>,
}

impl Workers {
    fn new(threads: usize) -> Workers {
        let barrier = Arc::new(Barrier::new(threads));
        let (done_tx, done) = mpsc::channel();
        let start = (0..threads)
            .map(|_| {
                let (tx, rx) = mpsc::channel::<(u64, bool)>();
                let (barrier, done_tx) = (Arc::clone(&barrier), done_tx.clone());
                std::thread::spawn(move || {
                    let _stage = stemmon::stage("worker");
                    for (iters, system) in rx {
                        barrier.wait();
                        let started = Instant::now();
                        for _ in 0..iters {
                            if system {
                                pair(&System);
                            } else {
                                pair(&ALLOC);
                            }
                        }
                        let _ = done_tx.send(started.elapsed());
                    }
                });
                tx
            })
            .collect();
        Workers {
            start,
            done,
            barrier,
        }
    }

    /// `iters` pairs (through `ALLOC`, or System alone when `system`) on every worker
    /// at once: the mean of the workers' times, the time per pair each thread saw.
    fn run(&self, iters: u64, system: bool) -> Duration {
        let _ = &self.barrier;
        for start in &self.start {
            start.send((iters, system)).expect("the worker waits");
        }
        let total: Duration = (0..self.start.len())
            .map(|_| self.done.recv().expect("the worker reports"))
            .sum();
        total / self.start.len() as u32
    }
}

/// Nanoseconds per pair through each allocator, the fastest of 40 alternating
/// batches of 200 000 pairs each.
fn alternating(allocators: &[&dyn Fn()]) -> Vec<f64> {
    stemmon_bench::fastest_alternating(allocators, 200_000, 40)
}

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(stemmon_bench::WARM_UP)
        .measurement_time(stemmon_bench::MEASURE_FAST)
        .sample_size(stemmon_bench::SAMPLES_FAST)
        .configure_from_args();
    let mut group = c.benchmark_group("heap");
    group.bench_function("system", |b| b.iter(|| pair(&System)));
    group.bench_function("alloc_no_monitor", |b| b.iter(|| pair(&ALLOC)));
    {
        let region = stats_alloc::Region::new(&STATS);
        group.bench_function("stats_alloc", |b| b.iter(|| pair(&STATS)));
        black_box(region.change());
    }
    let quiet = alternating(&[&|| pair(&System), &|| pair(&ALLOC), &|| pair(&STATS)]);
    let monitor = stemmon::Monitor::builder()
        .log_interval(None)
        .start()
        .expect("the monitor starts");
    let counted = {
        let _stage = monitor.stage("allocate").expect("a stage");
        let staged = alternating(&[&|| pair(&System), &|| pair(&ALLOC)]);
        group.bench_function("alloc_monitor_stage", |b| b.iter(|| pair(&ALLOC)));
        // Threads: one alone, then two at once, each in a stage, per pair.
        let (one, two) = (Workers::new(1), Workers::new(2));
        group.bench_function("one_thread", |b| {
            b.iter_custom(|iters| one.run(iters, false))
        });
        group.bench_function("two_threads", |b| {
            b.iter_custom(|iters| two.run(iters, false))
        });
        // System alone on the same threads: how far the machine lets two threads scale.
        group.bench_function("one_thread_system", |b| {
            b.iter_custom(|iters| one.run(iters, true))
        });
        group.bench_function("two_threads_system", |b| {
            b.iter_custom(|iters| two.run(iters, true))
        });
        group.finish();
        // The old budget with `Alloc` installed: an active `#[monitored]` call.
        let mut group = c.benchmark_group("heap_active");
        group.bench_function("plain", |b| b.iter(|| subjects::plain(black_box(7))));
        group.bench_function("attribute", |b| {
            b.iter(|| subjects::attribute(black_box(7)))
        });
        group.finish();
        black_box(subjects::attribute(1));
        staged
    };
    let report = monitor.finish();
    let allocate = report.stage("allocate");
    let result = serde_json::json!({
        "allocator": report.heap.allocator,
        "stage_allocations": allocate.and_then(|s| s.heap.heap_allocations),
        "attribute_calls": report.stage("allocate/attribute").map_or(0, |s| s.calls),
        "fastest_batch_ns": {
            "system": quiet[0],
            "alloc_no_monitor": quiet[1],
            "stats_alloc": quiet[2],
            "system_in_stage": counted[0],
            "alloc_monitor_stage": counted[1],
        },
    });
    stemmon_bench::write_result("heap", &result).expect("the result is written");
    c.final_summary();
}
