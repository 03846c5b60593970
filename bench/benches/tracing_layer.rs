//! A `tracing` span's new + enter + exit + close under a registry with
//! `stemmon::TracingLayer` and a running monitor, beside the same span under a registry
//! with a layer that only counts its callbacks, in one run. Budget (spec §13): ≤ 1.5×.
//!
//! Criterion times the two one after the other; on a loaded machine their medians drift
//! apart. So the bench also times them alternately, batch by batch, and keeps each
//! side's fastest batch: the figure a busy neighbour cannot inflate on one side only.

use criterion::Criterion;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;
use tracing::span::{Attributes, Id};
use tracing::Dispatch;
use tracing_subscriber::layer::{Context, Layer, SubscriberExt as _};

static CALLBACKS: AtomicU64 = AtomicU64::new(0);

/// The peer: a layer that sees the same four callbacks of every span and counts them.
struct CountingLayer;

impl<S: tracing::Subscriber> Layer<S> for CountingLayer {
    fn on_new_span(&self, _attrs: &Attributes<'_>, _id: &Id, _ctx: Context<'_, S>) {
        CALLBACKS.fetch_add(1, Ordering::Relaxed);
    }

    fn on_enter(&self, _id: &Id, _ctx: Context<'_, S>) {
        CALLBACKS.fetch_add(1, Ordering::Relaxed);
    }

    fn on_exit(&self, _id: &Id, _ctx: Context<'_, S>) {
        CALLBACKS.fetch_add(1, Ordering::Relaxed);
    }

    fn on_close(&self, _id: Id, _ctx: Context<'_, S>) {
        CALLBACKS.fetch_add(1, Ordering::Relaxed);
    }
}

/// One span made, entered, exited and closed around the shared body.
#[inline(never)]
fn span(x: u64) -> u64 {
    tracing::info_span!("span").in_scope(|| stemmon_bench::body(x))
}

/// Spans per alternating batch, and batches per side.
const BATCH: u32 = 2_000;
const BATCHES: u32 = 400;

/// Nanoseconds per span of one batch under `dispatch`.
fn batch(dispatch: &Dispatch) -> f64 {
    tracing::dispatcher::with_default(dispatch, || {
        let started = Instant::now();
        for _ in 0..BATCH {
            black_box(span(black_box(7)));
        }
        started.elapsed().as_nanos() as f64 / f64::from(BATCH)
    })
}

/// The fastest batch of each side, timed alternately: (stemmon, counting).
fn alternating(stemmon: &Dispatch, counting: &Dispatch) -> (f64, f64) {
    let (mut ours, mut theirs) = (f64::MAX, f64::MAX);
    for _ in 0..BATCHES {
        ours = ours.min(batch(stemmon));
        theirs = theirs.min(batch(counting));
    }
    (ours, theirs)
}

fn main() {
    let stemmon = Dispatch::new(tracing_subscriber::registry().with(stemmon::TracingLayer::new()));
    let counting = Dispatch::new(tracing_subscriber::registry().with(CountingLayer));
    let monitor = stemmon::Monitor::builder()
        .log_interval(None)
        .start()
        .expect("the monitor starts");

    let mut c = Criterion::default()
        .warm_up_time(stemmon_bench::WARM_UP)
        .measurement_time(stemmon_bench::MEASURE_FAST)
        .sample_size(stemmon_bench::SAMPLES_FAST)
        .configure_from_args();
    let mut group = c.benchmark_group("tracing_layer");
    group.bench_function("stemmon", |b| {
        tracing::dispatcher::with_default(&stemmon, || b.iter(|| span(black_box(7))));
    });
    group.bench_function("counting", |b| {
        tracing::dispatcher::with_default(&counting, || b.iter(|| span(black_box(7))));
    });
    group.finish();
    let (alternating_stemmon, alternating_counting) = alternating(&stemmon, &counting);

    let report = monitor.finish();
    let result = serde_json::json!({
        "stemmon_span_calls": report.stage("span").map_or(0, |stage| stage.calls),
        "stemmon_stages": report.stages.len(),
        "counting_callbacks": CALLBACKS.load(Ordering::Relaxed),
        "alternating_stemmon_ns": alternating_stemmon,
        "alternating_counting_ns": alternating_counting,
    });
    stemmon_bench::write_result("tracing_layer", &result).expect("the result is written");
    c.final_summary();
}
