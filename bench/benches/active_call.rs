//! A `#[monitored]` call under an active monitor, beside a `tracing` `#[instrument]`
//! span (registry subscriber + a layer) and hotpath's `#[measure]`, in one run.
//! Budget (the book's `cost.md`): below both peers.

use criterion::Criterion;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt as _};

mod subjects;

use subjects::{attribute, enter, hotpath_measure, plain, tracing_instrument};

static SPANS_CLOSED: AtomicU64 = AtomicU64::new(0);

/// The cheapest layer that still sees every span: it counts closed spans. A layer that
/// also timed them would only make the peer slower.
struct CountCloses;

impl<S: tracing::Subscriber> Layer<S> for CountCloses {
    fn on_close(&self, _id: tracing::span::Id, _ctx: Context<'_, S>) {
        SPANS_CLOSED.fetch_add(1, Ordering::Relaxed);
    }
}

fn main() {
    let subscriber = tracing_subscriber::registry().with(CountCloses);
    tracing::subscriber::set_global_default(subscriber).expect("no other subscriber is set");
    let hotpath_report = stemmon_bench::out_dir().join("hotpath_active_call.json");
    let hotpath_guard = hotpath::HotpathGuardBuilder::new("active_call")
        .format(hotpath::Format::Json)
        .output_path(&hotpath_report)
        .build();
    let monitor = stemmon::Monitor::builder()
        .log_interval(None)
        .start()
        .expect("the monitor starts");

    // Whether `#[monitored]` opens a stage at all (not with the `enabled` feature off).
    black_box(attribute(black_box(1)));
    let expanded = monitor.summary().stage("attribute").is_some();

    let mut c = Criterion::default()
        .warm_up_time(stemmon_bench::WARM_UP)
        .measurement_time(stemmon_bench::MEASURE_FAST)
        .sample_size(stemmon_bench::SAMPLES_FAST)
        .configure_from_args();
    let mut group = c.benchmark_group("active");
    group.bench_function("plain", |b| b.iter(|| plain(black_box(7))));
    group.bench_function("attribute", |b| b.iter(|| attribute(black_box(7))));
    group.bench_function("enter", |b| b.iter(|| enter(black_box(7))));
    group.bench_function("tracing", |b| b.iter(|| tracing_instrument(black_box(7))));
    group.bench_function("hotpath", |b| b.iter(|| hotpath_measure(black_box(7))));
    group.finish();

    let report = monitor.finish();
    let calls = |path: &str| report.stage(path).map_or(0, |stage| stage.calls);
    drop(hotpath_guard);
    let result = serde_json::json!({
        "macro_expanded": expanded,
        "stemmon_enter_calls": calls("enter"),
        "stemmon_attribute_calls": calls("attribute"),
        "stemmon_stages": report.stages.len(),
        "tracing_spans_closed": SPANS_CLOSED.load(Ordering::Relaxed),
    });
    stemmon_bench::write_result("active_call", &result).expect("the result is written");
    c.final_summary();
}
