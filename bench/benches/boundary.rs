//! The stage-boundary reading of the monitored process (RSS from `statm`, the
//! high-water mark through `getrusage` and its reset, whether a child exited), with
//! and without the CPU and I/O figures of the book's `cpu-io.md` (the same `getrusage(RUSAGE_SELF)`
//! and `RUSAGE_CHILDREN` read for their time and block counts, and, at a call's exit,
//! the thread's own clock, `getrusage(RUSAGE_THREAD)`). Budget: at most 1 µs added.
//! The two readings are timed alternately as well, so that both see the same load.

use criterion::Criterion;
use std::hint::black_box;
use std::time::Instant;
use stemmon::readers::{thread_cpu_micros, BoundaryReader};

/// Times `a` and `b` alternately, `rounds` of `batch` calls each, and returns the
/// median time of one call of each, in nanoseconds.
fn interleaved(rounds: usize, batch: u32, mut a: impl FnMut(), mut b: impl FnMut()) -> (f64, f64) {
    let (mut times_a, mut times_b) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let at = Instant::now();
        for _ in 0..batch {
            a();
        }
        let between = Instant::now();
        for _ in 0..batch {
            b();
        }
        times_a.push((between - at).as_nanos() as f64 / f64::from(batch));
        times_b.push(between.elapsed().as_nanos() as f64 / f64::from(batch));
    }
    let median = |times: &mut Vec<f64>| {
        times.sort_by(f64::total_cmp);
        times[times.len() / 2]
    };
    (median(&mut times_a), median(&mut times_b))
}

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(stemmon_bench::WARM_UP)
        .measurement_time(stemmon_bench::MEASURE_FAST)
        .sample_size(stemmon_bench::SAMPLES_FAST)
        .configure_from_args();
    let mut with = BoundaryReader::new(true, true);
    let mut without = BoundaryReader::new(true, false);
    assert!(
        with.read().and_then(|(_, cpu)| cpu).is_some(),
        "the reading has CPU"
    );
    assert!(thread_cpu_micros().is_some(), "the thread clock reads");
    let mut group = c.benchmark_group("boundary");
    group.bench_function("with_cpu", |b| b.iter(|| black_box(with.read())));
    group.bench_function("without_cpu", |b| b.iter(|| black_box(without.read())));
    group.bench_function("thread_clock", |b| {
        b.iter(|| black_box(thread_cpu_micros()))
    });
    group.finish();
    let (with_ns, without_ns) = interleaved(
        400,
        50,
        || {
            black_box(with.read());
        },
        || {
            black_box(without.read());
        },
    );
    let (clock_ns, _) = interleaved(
        400,
        50,
        || {
            black_box(thread_cpu_micros());
        },
        || {},
    );
    eprintln!(
        "boundary: with CPU {with_ns:.0} ns, without {without_ns:.0} ns, thread clock \
         {clock_ns:.0} ns: {:.0} ns added",
        with_ns - without_ns + clock_ns
    );
    let result = serde_json::json!({
        "with_cpu_ns": with_ns,
        "without_cpu_ns": without_ns,
        "thread_clock_ns": clock_ns,
    });
    stemmon_bench::write_result("boundary", &result).expect("the result is written");
    c.final_summary();
}
