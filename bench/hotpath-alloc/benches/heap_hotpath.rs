//! hotpath's allocation mode (`hotpath-alloc`) as the global allocator, timed on the
//! workload of `stemmon-bench`'s `heap` bench: one allocation + free pair of 64 bytes
//! through the allocator, inside a `#[hotpath::measure]` function with hotpath's guard
//! running (so its per-function tracking is on). The table compares it with
//! `stemmon::Alloc` from the same run of `bash bench/run`.

use criterion::Criterion;
use std::alloc::{GlobalAlloc, Layout};
use std::hint::black_box;
use std::time::{Duration, Instant};

#[global_allocator]
static GLOBAL: hotpath::CountingAllocator = hotpath::CountingAllocator::new();

const LAYOUT: Layout = match Layout::from_size_align(64, 8) {
    Ok(layout) => layout,
    Err(_) => panic!("a valid layout"),
};

/// `iters` pairs inside one measured call: its tracking frame is open for all of them.
#[hotpath::measure]
#[inline(never)]
fn pairs(iters: u64) -> Duration {
    let started = Instant::now();
    for _ in 0..iters {
        // SAFETY: LAYOUT has a non-zero size; the block is freed with the allocator
        // and layout it was made with, and never read or written.
        unsafe {
            let block = GLOBAL.alloc(LAYOUT);
            black_box(block);
            if !block.is_null() {
                GLOBAL.dealloc(block, LAYOUT);
            }
        }
    }
    started.elapsed()
}

/// As `stemmon_bench::{WARM_UP, MEASURE_FAST, SAMPLES_FAST}` (this crate is a
/// workspace of its own).
const WARM_UP: Duration = Duration::from_millis(800);
const MEASURE_FAST: Duration = Duration::from_secs(3);
const SAMPLES_FAST: usize = 60;

fn main() {
    // hotpath's own report, beside the other figures (`$STEMMON_BENCH_OUT`).
    let out = std::env::var_os("STEMMON_BENCH_OUT").map_or_else(std::env::temp_dir, Into::into);
    let guard = hotpath::HotpathGuardBuilder::new("heap_hotpath")
        .format(hotpath::Format::Json)
        .output_path(out.join("hotpath_alloc.json"))
        .build();
    let mut c = Criterion::default()
        .warm_up_time(WARM_UP)
        .measurement_time(MEASURE_FAST)
        .sample_size(SAMPLES_FAST)
        .configure_from_args();
    let mut group = c.benchmark_group("heap_hotpath");
    group.bench_function("hotpath_alloc", |b| b.iter_custom(pairs));
    group.finish();
    drop(guard);
    c.final_summary();
}
