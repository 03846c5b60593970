//! The functions every call bench times: one body, bare and under each instrumentation.
// Each bench uses the subset it compares.
#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use stemmon_bench::body;
use tracing::span::{Attributes, Id};
use tracing_subscriber::layer::{Context, Layer};

static CALLBACKS: AtomicU64 = AtomicU64::new(0);

/// The `tracing` peer: a layer that sees the four callbacks of every span and counts
/// them.
pub struct CountingLayer;

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

/// How many callbacks [`CountingLayer`] saw.
pub fn counting_callbacks() -> u64 {
    CALLBACKS.load(Ordering::Relaxed)
}

/// The function as written, without instrumentation.
#[inline(never)]
pub fn plain(x: u64) -> u64 {
    body(x)
}

/// The same function under the attribute.
#[stemmon::monitored]
#[inline(never)]
pub fn attribute(x: u64) -> u64 {
    body(x)
}

/// What `#[monitored]` expands to, written by hand: the guard, the body in a closure,
/// and the error check (a no-op for a non-`Result` value).
#[inline(never)]
// The three borrows are the specialization, as the expansion writes them.
#[allow(clippy::needless_borrow)]
pub fn enter(x: u64) -> u64 {
    #[allow(unused_imports)]
    use stemmon::__private::{ErrorOf, ErrorOfDisplay as _, ErrorOfOther as _, ErrorOfResult as _};
    let stage = stemmon::__private::enter("enter");
    let value = stemmon::__private::call(|| body(x));
    stemmon::__private::set_error(&stage, (&&&ErrorOf(&value)).__stemmon_error());
    value
}

/// The tracing peer; `skip_all` so no argument is formatted (stemmon records none).
#[tracing::instrument(skip_all)]
#[inline(never)]
pub fn tracing_instrument(x: u64) -> u64 {
    body(x)
}

/// The hotpath peer.
#[hotpath::measure]
#[inline(never)]
pub fn hotpath_measure(x: u64) -> u64 {
    body(x)
}

/// Direct recursion under the attribute: folds into one record.
#[stemmon::monitored]
#[inline(never)]
pub fn descend(depth: u32) -> u32 {
    if depth == 0 {
        0
    } else {
        1 + descend(depth - 1)
    }
}

/// The fastrace peer: a local span under the batch's root span.
#[fastrace::trace]
#[inline(never)]
pub fn fastrace_trace(x: u64) -> u64 {
    body(x)
}

/// A `tracing` span made, entered, exited and closed around the body, under whichever
/// subscriber is the default.
#[inline(never)]
pub fn tracing_span(x: u64) -> u64 {
    tracing::info_span!("span").in_scope(|| body(x))
}
