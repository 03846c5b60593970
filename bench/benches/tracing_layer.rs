//! A `tracing` span's new + enter + exit + close under a registry with
//! `stemmon::TracingLayer` and a running monitor, beside the same span under a registry
//! with a layer that only counts its callbacks, in one run. Budget (spec §13): ≤ 1.5×.

use criterion::Criterion;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
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

    let report = monitor.finish();
    let result = serde_json::json!({
        "stemmon_span_calls": report.stage("span").map_or(0, |stage| stage.calls),
        "stemmon_stages": report.stages.len(),
        "counting_callbacks": CALLBACKS.load(Ordering::Relaxed),
    });
    stemmon_bench::write_result("tracing_layer", &result).expect("the result is written");
    c.final_summary();
}
