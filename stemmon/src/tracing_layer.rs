//! `tracing` spans as stages (feature `tracing`): a [`Layer`] that opens one stage call
//! per span, from its first enter to its close, through the engine's async-call API.

use crate::context;
use crate::recorder::{OpenCall, Parent, StageName};
use std::borrow::Cow;
use std::cell::RefCell;
use tracing_core::span::Id;
use tracing_core::Subscriber;
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::{LookupSpan, SpanRef};

/// A [`tracing_subscriber::Layer`] that records every span it sees as one call of the
/// stage named after the span, in the monitor that runs when the span is first entered.
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
/// - **Which monitor.** The one running when the span is first entered with a monitor
///   running: a span made (or entered) before a monitor started is recorded from its
///   first enter after the start; one whose monitor finished before it closed records
///   nothing more.
/// - **Cost.** With no monitor running, each callback is one relaxed load.
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

/// What a span holds in its extensions from its first enter under a monitor: small and
/// `Copy`, the monitor found again by its epoch.
#[derive(Clone, Copy)]
struct SpanCall {
    epoch: u64,
    call: OpenCall,
}

/// A poll frame this thread pushed for an entered span.
#[derive(Clone, Copy)]
struct Frame {
    span: u64,
    epoch: u64,
    seq: u32,
}

/// How many calls this thread opened for spans it remembers: a span closed soon after
/// its first enter, on that thread, is closed without looking it up.
const REMEMBERED: usize = 16;

thread_local! {
    /// The frames of the spans entered on this thread, innermost last: an exit pops its
    /// frame without looking the span up (enters and exits pair up on one thread).
    static FRAMES: RefCell<Vec<Frame>> = const { RefCell::new(Vec::new()) };
    /// The calls this thread opened most recently, by span id, newest last. A hint only:
    /// an entry may be stale (the span closed elsewhere and its id was reused), and the
    /// engine closes a call only if it is still open on this thread.
    static OPENED: RefCell<Vec<(u64, SpanCall)>> = const { RefCell::new(Vec::new()) };
}

/// Remembers that this thread opened `state` for `span`.
#[inline]
fn remember(span: u64, state: SpanCall) {
    let _ = OPENED.try_with(|opened| {
        if let Ok(mut opened) = opened.try_borrow_mut() {
            if opened.len() == REMEMBERED {
                opened.remove(0);
            }
            opened.push((span, state));
        }
    });
}

/// Takes what this thread remembers of `span`.
#[inline]
fn recall(span: u64) -> Option<SpanCall> {
    OPENED
        .try_with(|opened| {
            let mut opened = opened.try_borrow_mut().ok()?;
            match opened.last() {
                Some((id, _)) if *id == span => opened.pop().map(|(_, state)| state),
                _ => {
                    let index = opened.iter().rposition(|(id, _)| *id == span)?;
                    Some(opened.remove(index).1)
                }
            }
        })
        .ok()
        .flatten()
}

/// Takes the newest frame of `span` this thread pushed.
#[inline]
fn take_frame(span: u64) -> Option<Frame> {
    FRAMES
        .try_with(|frames| {
            let mut frames = frames.try_borrow_mut().ok()?;
            match frames.last() {
                Some(top) if top.span == span => frames.pop(),
                _ => {
                    let index = frames.iter().rposition(|frame| frame.span == span)?;
                    Some(frames.remove(index))
                }
            }
        })
        .ok()
        .flatten()
}

/// Pops `frame` from this thread's stack in its monitor.
#[inline]
fn pop(frame: Frame) {
    context::with_epoch(frame.epoch, |a| a.recorder.pop_poll(&a.slot, frame.seq));
}

/// Where a span entered for the first time nests: by its nearest ancestor span that is
/// a call of the monitor of `epoch` (a span never entered, or filtered out, is skipped).
/// The engine nests it where the thread is if that ancestor is entered on this thread
/// (a `#[monitored]` call inside it may come between), else under the ancestor's record.
fn parent_of<S>(span: &SpanRef<'_, S>, epoch: u64) -> Parent
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let mut next = span.parent();
    while let Some(ancestor) = next {
        let state = ancestor.extensions().get::<SpanCall>().copied();
        match state {
            Some(state) if state.epoch == epoch => return Parent::Record(state.call.record),
            _ => next = ancestor.parent(),
        }
    }
    Parent::Here
}

impl<S> Layer<S> for TracingLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    // Nothing at `on_new_span`: a span's call begins at its first enter.

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        if !context::any_running() {
            return;
        }
        let Some(span) = ctx.span(id) else {
            return;
        };
        context::with_attachment(|a| {
            let epoch = a.recorder.epoch;
            let mut extensions = span.extensions_mut();
            let seq = match extensions.get_mut::<SpanCall>() {
                Some(state) if state.epoch == epoch => {
                    a.recorder.push_poll(&a.slot, state.call.record)
                }
                // Another monitor's span: it records nothing more.
                Some(_) => None,
                None => {
                    let parent = parent_of(&span, epoch);
                    let name = StageName::Borrowed(span.name());
                    let (call, seq) = a.recorder.open_and_poll(&a.slot, name, parent);
                    let state = SpanCall { epoch, call };
                    extensions.insert(state);
                    remember(id.into_u64(), state);
                    seq
                }
            };
            drop(extensions);
            if let Some(seq) = seq {
                let frame = Frame {
                    span: id.into_u64(),
                    epoch,
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
        // A span closed while still entered here (its guard was forgotten) leaves no frame.
        while let Some(frame) = take_frame(id.into_u64()) {
            pop(frame);
        }
        let error = std::thread::panicking().then_some(Cow::Borrowed("panic"));
        // Opened here lately: closed without a lookup, if the engine still has it open.
        if let Some(SpanCall { epoch, call }) = recall(id.into_u64()) {
            let closed = context::with_own(epoch, |own| {
                own.is_some_and(|a| a.recorder.close_if_open_here(&a.slot, call, error.clone()))
            });
            if closed {
                return;
            }
        }
        let Some(span) = ctx.span(&id) else {
            return;
        };
        let Some(SpanCall { epoch, call }) = span.extensions().get::<SpanCall>().copied() else {
            return;
        };
        drop(span);
        context::with_own(epoch, |own| match own {
            Some(a) => a.recorder.close_async(Some(&a.slot), call, error),
            // Closed on a thread that records elsewhere, or nowhere.
            None => {
                if let Some(recorder) = context::recorder_of(epoch) {
                    recorder.close_async(None, call, error);
                }
            }
        });
    }
}
