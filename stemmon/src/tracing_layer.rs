//! `tracing` spans as stages (feature `tracing`): a [`Layer`] that opens one stage call
//! per span, from its first enter to its close, through the engine's async-call API.

use crate::context;
use crate::recorder::{OpenCall, Parent, Recorder, StageName, ThreadSlot};
use std::borrow::Cow;
use std::cell::RefCell;
use std::sync::Arc;
use tracing_core::span::{Attributes, Id};
use tracing_core::Subscriber;
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::{LookupSpan, SpanRef};

/// A [`tracing_subscriber::Layer`] that records every span it sees as one call of the
/// stage named after the span, in the monitor that runs when the span is created.
///
/// - **What a span becomes.** A span is one call of the stage named
///   [`metadata().name()`](tracing_core::Metadata::name) (for `#[instrument]`, the
///   function's name), from its first enter to its close, with the records of a
///   `#[monitored]` call: calls, errors, wall time, sampled and exact peaks. A span
///   entered many times before it closes (an instrumented future polled again and again)
///   is one call, like a `#[monitored] async fn`; a span closed while its thread panics
///   is recorded with `error: "panic"`.
/// - **Nesting.** Spans nest by their span parent, across threads and tasks: a task's
///   span whose parent is `fit` is `fit/<name>` on whichever worker polls it, even once
///   `fit` was exited on the thread that made it. Spans and `#[monitored]` stages nest
///   inside each other on one thread, both ways. A span with no parent nests where its
///   thread is, as a `#[monitored]` call would.
/// - **Which spans.** All that reach the layer: narrow them with a per-layer filter,
///   `TracingLayer::new().with_filter(...)`; the filtered-out ones are not stages, and
///   their children nest under the nearest span that is (so do the children of a span
///   that was never entered).
/// - **Cost.** With no monitor running, each callback is one relaxed load. A span
///   created while no monitor ran is never recorded, nor is one whose monitor finished
///   before it closed.
///
/// ```
/// use tracing_subscriber::prelude::*;
///
/// let subscriber = tracing_subscriber::registry().with(stemmon::TracingLayer::new());
/// // A program calls `.init()` instead, once, in `main`.
/// let _default = tracing::subscriber::set_default(subscriber);
///
/// let monitor = stemmon::Monitor::builder().log_interval(None).start()?;
/// {
///     let fit = tracing::info_span!("fit");
///     let _fit = fit.enter();
///     for _ in 0..3 {
///         tracing::info_span!("epoch").in_scope(|| {
///             let _step = stemmon::stage("step"); // a stage inside a span
///         });
///     }
/// }
/// let report = monitor.finish();
/// assert_eq!(report.stage("fit").unwrap().calls, 1);
/// assert_eq!(report.stage("fit/epoch").unwrap().calls, 3);
/// assert_eq!(report.stage("fit/epoch/step").unwrap().calls, 3);
/// # Ok::<(), stemmon::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default)]
#[must_use = "a layer records nothing until it is added to a subscriber: \
              `tracing_subscriber::registry().with(stemmon::TracingLayer::new())`"]
pub struct TracingLayer {
    _private: (),
}

impl TracingLayer {
    /// A layer that records spans as stages of the running monitor.
    pub fn new() -> TracingLayer {
        TracingLayer { _private: () }
    }
}

/// What a span holds in its extensions once a monitor saw it created.
struct SpanStage {
    recorder: Arc<Recorder>,
    /// The open call, from the first enter on.
    call: Option<OpenCall>,
}

/// A poll frame this thread pushed for an entered span.
#[derive(Clone, Copy)]
struct Frame {
    span: u64,
    epoch: u64,
    seq: u32,
}

thread_local! {
    /// The frames of the spans entered on this thread, innermost last: an exit pops its
    /// frame without looking the span up (enters and exits pair up on one thread).
    static FRAMES: RefCell<Vec<Frame>> = const { RefCell::new(Vec::new()) };
}

/// Takes the newest frame of `span` this thread pushed.
fn take_frame(span: u64) -> Option<Frame> {
    FRAMES
        .try_with(|frames| {
            let mut frames = frames.try_borrow_mut().ok()?;
            let index = match frames.last() {
                Some(top) if top.span == span => frames.len() - 1,
                _ => frames.iter().rposition(|frame| frame.span == span)?,
            };
            Some(frames.remove(index))
        })
        .ok()
        .flatten()
}

/// Pops `frame` from this thread's stack in its monitor.
fn pop(frame: Frame) {
    context::with_epoch(frame.epoch, |a| a.recorder.pop_poll(&a.slot, frame.seq));
}

/// Where a span entered for the first time on `slot`'s thread nests, by its nearest
/// ancestor span that is a call of this monitor (one never entered is skipped): where
/// the thread is if that ancestor is entered here (a `#[monitored]` call inside it may
/// come between), else under the ancestor's record, wherever that was opened.
fn parent_of<S>(span: &SpanRef<'_, S>, recorder: &Arc<Recorder>, slot: &ThreadSlot) -> Parent
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let call = span.scope().skip(1).find_map(|ancestor| {
        ancestor
            .extensions()
            .get::<SpanStage>()
            .filter(|stage| Arc::ptr_eq(&stage.recorder, recorder))
            .and_then(|stage| stage.call)
    });
    match call {
        Some(call) if !slot.has_open(call.record) => Parent::Record(call.record),
        _ => Parent::Here,
    }
}

impl<S> Layer<S> for TracingLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, _attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if !context::any_running() {
            return;
        }
        let Some(recorder) = context::with_attachment(|a| Arc::clone(&a.recorder)) else {
            return;
        };
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().replace(SpanStage {
                recorder,
                call: None,
            });
        }
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        if !context::any_running() {
            return;
        }
        let Some(span) = ctx.span(id) else {
            return;
        };
        let mut extensions = span.extensions_mut();
        let Some(stage) = extensions.get_mut::<SpanStage>() else {
            return;
        };
        context::with_attachment(|a| {
            if !Arc::ptr_eq(&a.recorder, &stage.recorder) || a.recorder.is_ended() {
                return;
            }
            let call = *stage.call.get_or_insert_with(|| {
                let parent = parent_of(&span, &a.recorder, &a.slot);
                let name = StageName::Borrowed(span.name());
                a.recorder.open_async(&a.slot, name, parent)
            });
            if let Some(seq) = a.recorder.push_poll(&a.slot, call.record) {
                let frame = Frame {
                    span: id.into_u64(),
                    epoch: a.recorder.epoch,
                    seq,
                };
                let _ = FRAMES.try_with(|frames| {
                    if let Ok(mut frames) = frames.try_borrow_mut() {
                        frames.push(frame);
                    }
                });
            }
        });
    }

    fn on_exit(&self, id: &Id, _ctx: Context<'_, S>) {
        if !context::any_running() {
            return;
        }
        if let Some(frame) = take_frame(id.into_u64()) {
            pop(frame);
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        if !context::any_running() {
            return;
        }
        let Some(span) = ctx.span(&id) else {
            return;
        };
        let Some(stage) = span.extensions_mut().remove::<SpanStage>() else {
            return;
        };
        let Some(call) = stage.call else {
            return;
        };
        // A span closed while still entered here (its guard was forgotten) leaves no frame.
        while let Some(frame) = take_frame(id.into_u64()) {
            pop(frame);
        }
        let error = std::thread::panicking().then_some(Cow::Borrowed("panic"));
        stage.recorder.close_async(call, error);
    }
}
