//! A `#[monitored]` call with no active monitor, beside the same function without it.
//! Budget (spec §6): at most 1 ns added per call.

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
    c.final_summary();
}
