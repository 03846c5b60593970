//! The engine at its floor: one criterion group with an active `#[monitored]` call, the
//! two clock reads it makes (bare, around the same body), a `tracing` span under a
//! layer that only counts its callbacks and under `stemmon::TracingLayer`, a fastrace
//! span (reported to a collector that counts them) and hotpath's `#[measure]`.
//! Budgets (the book's `cost.md`): the call's bookkeeping at most 10 ns over its clock
//! reads; the call cheaper than fastrace's span and hotpath's `#[measure]`; the
//! `TracingLayer` span at most 1.5× the counting one.
//!
//! `bash bench/run` runs this bench three times, `STEMMON_BENCH_ROUND` set to 1, 2 and
//! 3 (the group is named `call_floor_<round>`), and the table shows the minimum and
//! the median of each ratio over the three: on a loaded machine one run's ratio can be
//! off, three runs' median rarely is.

use criterion::Criterion;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tracing::Dispatch;
use tracing_subscriber::layer::SubscriberExt as _;

mod subjects;

use subjects::{attribute, fastrace_trace, hotpath_measure, plain, tracing_span, CountingLayer};

static FASTRACE_SPANS: AtomicU64 = AtomicU64::new(0);
static FASTRACE_TIMED: AtomicU64 = AtomicU64::new(0);

/// fastrace's reporter: counts the spans its collector thread hands over.
struct CountingReporter;

impl fastrace::collector::Reporter for CountingReporter {
    fn report(&mut self, spans: Vec<fastrace::prelude::SpanRecord>) {
        FASTRACE_SPANS.fetch_add(spans.len() as u64, Ordering::Relaxed);
    }
}

/// fastrace's spans per root span: its thread-local queue holds up to 10 240 a root,
/// and the root's own cost is spread over these.
const FASTRACE_BATCH: u64 = 1_000;

/// `iters` traced calls, under one root span per `FASTRACE_BATCH` (as a service
/// traces a request), every span recorded and handed to the collector.
fn fastrace_calls(iters: u64) -> Duration {
    let started = Instant::now();
    let mut left = iters;
    while left > 0 {
        let batch = left.min(FASTRACE_BATCH);
        let root = fastrace::Span::root("batch", fastrace::collector::SpanContext::random());
        let guard = root.set_local_parent();
        for _ in 0..batch {
            black_box(fastrace_trace(black_box(7)));
        }
        drop(guard);
        drop(root);
        left -= batch;
    }
    FASTRACE_TIMED.fetch_add(iters, Ordering::Relaxed);
    started.elapsed()
}

/// The clock reads an active call makes, around the same body: what timing costs.
#[inline(never)]
fn clocked(x: u64) -> u64 {
    let started = stemmon::__private::clock_ticks();
    let y = stemmon_bench::body(x);
    y.wrapping_add(stemmon::__private::clock_ticks().wrapping_sub(started))
}

fn main() {
    let round = std::env::var("STEMMON_BENCH_ROUND").unwrap_or_else(|_| "1".to_owned());
    fastrace::set_reporter(CountingReporter, fastrace::collector::Config::default());
    let hotpath_report = stemmon_bench::out_dir().join(format!("hotpath_call_floor_{round}.json"));
    let hotpath_guard = hotpath::HotpathGuardBuilder::new("call_floor")
        .format(hotpath::Format::Json)
        .output_path(&hotpath_report)
        .build();
    let counting = Dispatch::new(tracing_subscriber::registry().with(CountingLayer));
    let stemmon_layer =
        Dispatch::new(tracing_subscriber::registry().with(stemmon::TracingLayer::new()));
    let monitor = stemmon::Monitor::builder()
        .log_interval(None)
        .start()
        .expect("the monitor starts");

    black_box(attribute(black_box(1)));
    let expanded = monitor.summary().stage("attribute").is_some();

    let mut c = Criterion::default()
        .warm_up_time(stemmon_bench::WARM_UP)
        .measurement_time(stemmon_bench::MEASURE_FAST)
        .sample_size(stemmon_bench::SAMPLES_FAST)
        .configure_from_args();
    let mut group = c.benchmark_group(format!("call_floor_{round}"));
    group.bench_function("plain", |b| b.iter(|| plain(black_box(7))));
    group.bench_function("clock", |b| b.iter(|| clocked(black_box(7))));
    group.bench_function("attribute", |b| b.iter(|| attribute(black_box(7))));
    group.bench_function("counting_layer", |b| {
        tracing::dispatcher::with_default(&counting, || b.iter(|| tracing_span(black_box(7))));
    });
    group.bench_function("tracing_layer", |b| {
        tracing::dispatcher::with_default(&stemmon_layer, || {
            b.iter(|| tracing_span(black_box(7)));
        });
    });
    group.bench_function("fastrace", |b| b.iter_custom(fastrace_calls));
    group.bench_function("hotpath", |b| b.iter(|| hotpath_measure(black_box(7))));
    group.finish();

    let report = monitor.finish();
    let calls = |path: &str| report.stage(path).map_or(0, |stage| stage.calls);
    drop(hotpath_guard);
    fastrace::flush();
    let result = serde_json::json!({
        "macro_expanded": expanded,
        "stemmon_attribute_calls": calls("attribute"),
        "stemmon_span_calls": calls("span"),
        "counting_callbacks": subjects::counting_callbacks(),
        "fastrace_timed_calls": FASTRACE_TIMED.load(Ordering::Relaxed),
        "fastrace_reported_spans": FASTRACE_SPANS.load(Ordering::Relaxed),
    });
    stemmon_bench::write_result(&format!("call_floor_{round}"), &result)
        .expect("the result is written");
    c.final_summary();
}
