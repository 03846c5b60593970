//! A `tracing` span's new + enter + exit + close under a registry with
//! `stemmon::TracingLayer` and a running monitor, beside the same span under a registry
//! with a layer that only counts its callbacks, in one run. Budget (the book's `tracing.md`): ≤ 1.5×.
//!
//! Criterion times the two one after the other; on a loaded machine their medians drift
//! apart. So the bench also times them alternately, batch by batch, and keeps each
//! side's fastest batch: the figure a busy neighbour cannot inflate on one side only.
//!
//! Three more subjects in the same alternation show where the cost goes (no budget):
//! the floor of any layer that times spans (a layer that reads the clock at a span's
//! enter and close, keeps a thread-local stack and sums the times), the engine alone
//! (the same body as a `#[monitored]` call, no span), and the clock alone (its two
//! reads around the body).

use criterion::Criterion;
use std::cell::RefCell;
use std::hint::black_box;

use std::time::Instant;
use tracing::span::Id;
use tracing::Dispatch;
use tracing_subscriber::layer::{Context, Layer, SubscriberExt as _};

mod subjects;

use subjects::CountingLayer;

thread_local! {
    /// The timing layer's open spans on this thread: (span id, clock at first enter).
    static OPEN: RefCell<Vec<(u64, u64)>> = const { RefCell::new(Vec::new()) };
    /// The timing layer's closed spans on this thread: how many, and their total ticks.
    static TIMED: RefCell<(u64, u64)> = const { RefCell::new((0, 0)) };
}

/// The floor: a layer that times each span from its first enter to its close with the
/// clock stemmon reads, on a thread-local stack, and sums the times per thread.
struct TimingLayer {
    clock: quanta::Clock,
}

impl<S: tracing::Subscriber> Layer<S> for TimingLayer {
    fn on_enter(&self, id: &Id, _ctx: Context<'_, S>) {
        let span = id.into_u64();
        let now = self.clock.raw();
        OPEN.with(|open| {
            let mut open = open.borrow_mut();
            if !open.iter().any(|(id, _)| *id == span) {
                open.push((span, now));
            }
        });
    }

    fn on_close(&self, id: Id, _ctx: Context<'_, S>) {
        let span = id.into_u64();
        let now = self.clock.raw();
        let started = OPEN.with(|open| {
            let mut open = open.borrow_mut();
            let index = open.iter().rposition(|(id, _)| *id == span)?;
            Some(open.remove(index).1)
        });
        if let Some(started) = started {
            TIMED.with(|timed| {
                let mut timed = timed.borrow_mut();
                timed.0 += 1;
                timed.1 += now.saturating_sub(started);
            });
        }
    }
}

/// One span made, entered, exited and closed around the shared body.
#[inline(never)]
fn span(x: u64) -> u64 {
    tracing::info_span!("span").in_scope(|| stemmon_bench::body(x))
}

/// The same body as a `#[monitored]` call, no span: the engine's own cost per call.
#[stemmon::monitored]
#[inline(never)]
fn stage(x: u64) -> u64 {
    stemmon_bench::body(x)
}

/// The clock alone: the two reads a timed call makes (stemmon's clock, as the timing
/// layer reads it) around the same body, no span and no layer: what timing costs.
#[inline(never)]
fn clocked(x: u64) -> u64 {
    let clock = CLOCK.get_or_init(quanta::Clock::new);
    let started = clock.raw();
    let y = stemmon_bench::body(x);
    y.wrapping_add(clock.raw().wrapping_sub(started))
}

static CLOCK: std::sync::OnceLock<quanta::Clock> = std::sync::OnceLock::new();

/// Spans per alternating batch, and batches per side.
const BATCH: u32 = 2_000;
const BATCHES: u32 = 400;

/// Nanoseconds per call of one batch of `subject` under `dispatch`.
fn batch(dispatch: &Dispatch, subject: fn(u64) -> u64) -> f64 {
    tracing::dispatcher::with_default(dispatch, || {
        let started = Instant::now();
        for _ in 0..BATCH {
            black_box(subject(black_box(7)));
        }
        started.elapsed().as_nanos() as f64 / f64::from(BATCH)
    })
}

/// A dispatch and the function it times.
type Subject<'a> = (&'a Dispatch, fn(u64) -> u64);

/// The fastest batch of each subject, timed alternately.
fn alternating(subjects: &[Subject<'_>]) -> Vec<f64> {
    let mut fastest = vec![f64::MAX; subjects.len()];
    for _ in 0..BATCHES {
        for (best, (dispatch, subject)) in fastest.iter_mut().zip(subjects) {
            *best = best.min(batch(dispatch, *subject));
        }
    }
    fastest
}

fn main() {
    let stemmon = Dispatch::new(tracing_subscriber::registry().with(stemmon::TracingLayer::new()));
    let counting = Dispatch::new(tracing_subscriber::registry().with(CountingLayer));
    let timing = Dispatch::new(tracing_subscriber::registry().with(TimingLayer {
        clock: quanta::Clock::new(),
    }));
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
    let fastest = alternating(&[
        (&stemmon, span),
        (&counting, span),
        (&timing, span),
        (&counting, stage),
        (&counting, clocked),
    ]);

    let report = monitor.finish();
    let result = serde_json::json!({
        "stemmon_span_calls": report.stage("span").map_or(0, |stage| stage.calls),
        "stemmon_stages": report.stages.len(),
        "counting_callbacks": subjects::counting_callbacks(),
        "stemmon_stage_calls": report.stage("stage").map_or(0, |stage| stage.calls),
        "timing_spans": TIMED.with(|timed| timed.borrow().0),
        "alternating_stemmon_ns": fastest[0],
        "alternating_counting_ns": fastest[1],
        "alternating_timing_ns": fastest[2],
        "alternating_stage_ns": fastest[3],
        "alternating_clock_ns": fastest[4],
    });
    stemmon_bench::write_result("tracing_layer", &result).expect("the result is written");
    c.final_summary();
}
