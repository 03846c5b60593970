//! A `#[monitored]` call with no active monitor, beside the same function without it.
//! Budget (spec §6): at most 1 ns added per call.

use criterion::Criterion;
use std::hint::black_box;
use stemmon_bench::body;

/// The function as written, without instrumentation.
#[inline(never)]
fn plain(x: u64) -> u64 {
    body(x)
}

/// The same function under the attribute (a pass-through until the macro lands).
#[stemmon::monitored]
#[inline(never)]
fn attribute(x: u64) -> u64 {
    body(x)
}

/// What `#[monitored]` expands to, written by hand: the guard, the body in its own
/// scope, and the error check (a no-op for a non-`Result` value).
#[inline(never)]
fn enter(x: u64) -> u64 {
    #[allow(unused_imports)]
    use stemmon::__private::{ErrorOfOther as _, ErrorOfResult as _};
    let stage = stemmon::__private::enter("enter");
    let value = stemmon::__private::call(|| body(x));
    stemmon::__private::set_error(&stage, (&value).__stemmon_error());
    value
}

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
