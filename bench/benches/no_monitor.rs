//! A `#[monitored]` call with no active monitor, beside the same function without it.
//! Budget (the book's `cost.md`): at most 1 ns added per call. Criterion times the three one after
//! the other; the bench also times them in alternating batches and keeps each one's
//! fastest batch (`no_monitor.json`), a figure that drift between them cannot move.

use criterion::Criterion;
use std::hint::black_box;

mod subjects;

use subjects::{attribute, enter, plain};

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(stemmon_bench::WARM_UP)
        .measurement_time(stemmon_bench::MEASURE_FAST)
        .sample_size(stemmon_bench::SAMPLES_FAST)
        .configure_from_args();
    let mut group = c.benchmark_group("no_monitor");
    group.bench_function("plain", |b| b.iter(|| plain(black_box(7))));
    group.bench_function("attribute", |b| b.iter(|| attribute(black_box(7))));
    group.bench_function("enter", |b| b.iter(|| enter(black_box(7))));
    group.finish();
    let fastest = stemmon_bench::fastest_alternating(
        &[
            &|| {
                black_box(plain(black_box(7)));
            },
            &|| {
                black_box(attribute(black_box(7)));
            },
            &|| {
                black_box(enter(black_box(7)));
            },
        ],
        100_000,
        200,
    );
    let result = serde_json::json!({
        "fastest_batch_ns": {
            "plain": fastest[0],
            "attribute": fastest[1],
            "enter": fastest[2],
        }
    });
    stemmon_bench::write_result("no_monitor", &result).expect("the result is written");
    c.final_summary();
}
