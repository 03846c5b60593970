//! `tracing` spans as stages (feature `tracing`): a [`Layer`] that opens one stage call
//! per span, from its first enter to its close, through the engine's async-call API.

use crate::context;

mod local;
use crate::recorder::{OpenCall, Parent, Recorder, StageName};
use local::{Frame, Made, MadeParent};
use std::borrow::Cow;
use tracing_core::span::{Attributes, Id};
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

/// Pops `frame` from this thread's stack in its monitor.
#[inline]
fn pop(frame: Frame) {
    context::with_epoch(frame.epoch, |a| a.recorder.pop_poll(&a.slot, frame.seq));
}

/// Hands the call of `span`, kept apart on this thread until now, to the span's
/// extensions, where any thread finds it. Nothing if the span is gone, another thread
/// took the call over already, or its monitor ended.
#[cold]
fn register<S>(ctx: &Context<'_, S>, span: u64)
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let Some(state) = local::with(|local| local.remembered(span)).flatten() else {
        return;
    };
    // The id may name a newer span by now (this one closed elsewhere): the engine then
    // no longer keeps the call here, and nothing is written.
    let Some(span) = ctx.span(&Id::from_u64(span)) else {
        return;
    };
    let mut extensions = span.extensions_mut();
    if extensions.get_mut::<SpanCall>().is_some() {
        return;
    }
    // The extensions first, then the thread's state: the order every path takes them in.
    let kept = context::with_own(state.epoch, |own| {
        own.is_some_and(|a| a.recorder.register_span(&a.slot, state.call))
    });
    if kept {
        extensions.insert(state);
    }
}

/// Registers the call this thread keeps apart unless it is `keep`'s: something other
/// than that span's own exit, enter or close happens on this thread.
#[inline]
fn settle<S>(ctx: &Context<'_, S>, keep: u64)
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let fast = local::with(|local| {
        let fast = local.fast;
        if fast != keep {
            local.fast = 0;
        }
        fast
    });
    if let Some(fast) = fast.filter(|&fast| fast != 0 && fast != keep) {
        register(ctx, fast);
    }
}

/// Opens the span `id` at its first enter without the registry, if it is the span made
/// last on this thread and its parent is where the thread is (as the registry's way
/// would find it): true if it did. The made note is used up either way.
#[inline]
fn open_made(id: u64) -> bool {
    let opened = local::with(|local| {
        let made = local.made.take()?;
        let epoch = made.epoch;
        if made.span != id {
            return Some(false);
        }
        let here = match made.parent {
            MadeParent::Root => true,
            MadeParent::Contextual(current) => {
                let top = local.top_frame();
                top.map(|frame| frame.span) == current
                    && top.is_none_or(|frame| frame.epoch == epoch)
            }
            MadeParent::Explicit(parent) => local.is_entered(parent, epoch),
        };
        let (recorder, slot) = local.attached(true)?;
        if !here || recorder.epoch != epoch {
            return Some(false);
        }
        let name = StageName::Borrowed(made.name);
        let Some((call, seq)) = recorder.open_made_span(slot, id, name, Parent::Here) else {
            return Some(false);
        };
        local.remember(id, SpanCall { epoch, call });
        if let Some(seq) = seq {
            local.push_frame(Frame {
                span: id,
                epoch,
                seq,
            });
        }
        local.fast = id;
        Some(true)
    });
    opened.flatten().unwrap_or(false)
}

/// Where a span entered for the first time nests: by its nearest ancestor span that is
/// a call of the monitor of `epoch` (a span never entered, or filtered out, is skipped).
/// The engine nests it where the thread is if that ancestor is entered on this thread
/// (a `#[monitored]` call inside it may come between), else under the ancestor's record.
fn parent_of<S>(span: &SpanRef<'_, S>, recorder: &Recorder) -> Parent
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let mut next = span.parent();
    while let Some(ancestor) = next {
        let state = ancestor.extensions().get::<SpanCall>().copied();
        let state = state.or_else(|| adopt(&ancestor, recorder));
        match state {
            Some(state) if state.epoch == recorder.epoch => {
                return Parent::Record(state.call.record)
            }
            _ => next = ancestor.parent(),
        }
    }
    Parent::Here
}

/// The call of `span` that another thread opened without the registry, moved into the
/// span's extensions (or what they hold by now); `None` if it has none.
fn adopt<S>(span: &SpanRef<'_, S>, recorder: &Recorder) -> Option<SpanCall>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let mut extensions = span.extensions_mut();
    if let Some(state) = extensions.get_mut::<SpanCall>() {
        return Some(*state);
    }
    let call = recorder.find_span(span.id().into_u64())?;
    let state = SpanCall {
        epoch: recorder.epoch,
        call,
    };
    extensions.insert(state);
    Some(state)
}

impl<S> Layer<S> for TracingLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    // A span's call begins at its first enter: its making is only noted, so that a first
    // enter right after it, on this thread, needs no lookup.
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if !context::any_running() {
            return;
        }
        settle(&ctx, 0);
        let span = id.into_u64();
        local::with(|local| {
            let parent = if attrs.is_root() {
                MadeParent::Root
            } else if let Some(parent) = attrs.parent() {
                MadeParent::Explicit(parent.into_u64())
            } else {
                MadeParent::Contextual(local.top_frame().map(|frame| frame.span))
            };
            let Some((recorder, slot)) = local.attached(false) else {
                return;
            };
            slot.note_made_span(span);
            local.made = Some(Made {
                span,
                epoch: recorder.epoch,
                name: attrs.metadata().name(),
                parent,
            });
        });
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        if !context::any_running() {
            return;
        }
        let span = id.into_u64();
        // Entered again, still kept apart on this thread: one more poll.
        let again = local::with(|local| {
            if local.fast != span {
                return None;
            }
            let state = local.remembered(span)?;
            let (recorder, slot) = local.attached(true)?;
            if recorder.epoch != state.epoch {
                return None;
            }
            if let Some(seq) = recorder.push_poll(slot, state.call.record) {
                local.push_frame(Frame {
                    span,
                    epoch: state.epoch,
                    seq,
                });
            }
            Some(())
        });
        if again.flatten().is_some() {
            return;
        }
        settle(&ctx, 0);
        // The first enter right after its making here: no lookup, no extensions.
        if open_made(span) {
            return;
        }
        let Some(span_ref) = ctx.span(id) else {
            return;
        };
        // Joined here if not yet: later spans made here are noted.
        local::with(|local| local.attached(true).is_some());
        context::with_attachment(|a| {
            // Its first enter was not next: no thread opens a span apart now.
            a.slot.note_made_span(0);
            let epoch = a.recorder.epoch;
            let mut extensions = span_ref.extensions_mut();
            let seq = match extensions.get_mut::<SpanCall>() {
                Some(state) if state.epoch == epoch => {
                    a.recorder.push_poll(&a.slot, state.call.record)
                }
                // Another monitor's span: it records nothing more.
                Some(_) => None,
                None => match a.recorder.find_span(span) {
                    // Opened apart on another thread: kept in the extensions from now on.
                    Some(call) => {
                        extensions.insert(SpanCall { epoch, call });
                        a.recorder.push_poll(&a.slot, call.record)
                    }
                    None => {
                        let parent = parent_of(&span_ref, &a.recorder);
                        let name = StageName::Borrowed(span_ref.name());
                        let (call, seq) = a.recorder.open_and_poll(&a.slot, name, parent);
                        let state = SpanCall { epoch, call };
                        extensions.insert(state);
                        local::with(|local| local.remember(span, state));
                        seq
                    }
                },
            };
            drop(extensions);
            if let Some(seq) = seq {
                local::with(|local| local.push_frame(Frame { span, epoch, seq }));
            }
        });
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        if !context::any_running() {
            return;
        }
        let span = id.into_u64();
        settle(&ctx, span);
        if let Some(frame) = local::with(|local| local.take_frame(span)).flatten() {
            pop(frame);
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        if !context::any_running() {
            return;
        }
        let span = id.into_u64();
        // Kept apart here until now: closed below through what this thread remembers.
        settle(&ctx, span);
        let (frames, remembered) = local::with(|local| {
            if local.fast == span {
                local.fast = 0;
            }
            if local.made.is_some_and(|made| made.span == span) {
                // Made here and never entered: no thread opens it apart.
                local.made = None;
                if let Some((_, slot)) = local.attached(false) {
                    slot.note_made_span(0);
                }
            }
            // A span closed while still entered here (its guard was forgotten) leaves no
            // frame.
            let mut frames = Vec::new();
            while let Some(frame) = local.take_frame(span) {
                frames.push(frame);
            }
            (frames, local.recall(span))
        })
        .unwrap_or_default();
        for frame in frames {
            pop(frame);
        }
        let error = std::thread::panicking().then_some(Cow::Borrowed("panic"));
        // Opened here lately: closed without a lookup, if the engine still has it open.
        if let Some(SpanCall { epoch, call }) = remembered {
            let closed = context::with_own(epoch, |own| {
                own.is_some_and(|a| a.recorder.close_if_open_here(&a.slot, call, error.clone()))
            });
            if closed {
                return;
            }
        }
        let Some(span_ref) = ctx.span(&id) else {
            return;
        };
        let state = span_ref.extensions().get::<SpanCall>().copied();
        drop(span_ref);
        let Some(SpanCall { epoch, call }) = state else {
            // Opened apart on another thread, if at all: closed in its monitor.
            for recorder in context::running() {
                if let Some(call) = recorder.find_span(span) {
                    context::with_own(recorder.epoch, |own| match own {
                        Some(a) => a.recorder.close_async(Some(&a.slot), call, error),
                        None => recorder.close_async(None, call, error),
                    });
                    return;
                }
            }
            return;
        };
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
