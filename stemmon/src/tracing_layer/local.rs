//! What the `tracing` layer keeps per thread: the spans entered here, the calls opened
//! here lately, the span made here last, and the one call kept apart from the registry
//! (the book's `tracing.md`, "Cost"). One thread-local, taken once per callback.

use super::SpanCall;
use crate::context;
use crate::recorder::{Recorder, ThreadSlot};
use std::cell::RefCell;
use std::sync::Arc;

/// A poll frame this thread pushed for an entered span.
#[derive(Clone, Copy)]
pub(super) struct Frame {
    pub(super) span: u64,
    pub(super) epoch: u64,
    pub(super) seq: u32,
}

/// How many calls this thread opened for spans it remembers: a span closed soon after
/// its first enter, on that thread, is closed without looking it up.
const REMEMBERED: usize = 16;

/// A span just made on this thread: what its first enter here needs to open it without
/// looking it up.
#[derive(Clone, Copy)]
pub(super) struct Made {
    pub(super) span: u64,
    pub(super) epoch: u64,
    pub(super) name: &'static str,
    pub(super) parent: MadeParent,
}

/// The parent a span was made with.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum MadeParent {
    /// None: a root span.
    Root,
    /// The span current where it was made: the innermost span entered on this thread
    /// then, as this layer saw it (`None`: none).
    Contextual(Option<u64>),
    /// A parent named at the span's making.
    Explicit(u64),
}

/// The layer's state on one thread.
pub(super) struct Local {
    /// The frames of the spans entered on this thread, innermost last: an exit pops its
    /// frame without looking the span up (enters and exits pair up on one thread).
    frames: Vec<Frame>,
    /// The calls this thread opened most recently, by span id, newest last. A hint only:
    /// an entry may be stale (the span closed elsewhere and its id was reused), and the
    /// engine closes a call only if it is still open on this thread.
    opened: Vec<(u64, SpanCall)>,
    /// The span made on this thread most recently under a monitor, until its first enter.
    pub(super) made: Option<Made>,
    /// The span whose call this thread keeps apart from the registry (its extensions
    /// hold nothing; the engine keeps it on this thread, where other threads find it),
    /// while nothing happens here but its exit, its enters and its close; 0: none.
    pub(super) fast: u64,
    /// The monitor this thread records to and its slot there, kept from the last
    /// callback that attached: a made span is noted without the attachment.
    attached: Option<(Arc<Recorder>, Arc<ThreadSlot>)>,
}

thread_local! {
    static LOCAL: RefCell<Local> = const {
        RefCell::new(Local {
            frames: Vec::new(),
            opened: Vec::new(),
            made: None,
            fast: 0,
            attached: None,
        })
    };
}

/// Runs `f` with this thread's state; `None` while the thread exits, or inside `f`.
#[inline]
pub(super) fn with<R>(f: impl FnOnce(&mut Local) -> R) -> Option<R> {
    LOCAL
        .try_with(|local| local.try_borrow_mut().ok().map(|mut local| f(&mut local)))
        .ok()
        .flatten()
}

impl Local {
    /// The innermost span entered on this thread (and its monitor).
    #[inline]
    pub(super) fn top_frame(&self) -> Option<Frame> {
        self.frames.last().copied()
    }

    /// Whether `span` is entered on this thread in the monitor of `epoch`.
    pub(super) fn is_entered(&self, span: u64, epoch: u64) -> bool {
        self.frames
            .iter()
            .any(|frame| frame.span == span && frame.epoch == epoch)
    }

    /// Pushes the frame of a span entered on this thread.
    #[inline]
    pub(super) fn push_frame(&mut self, frame: Frame) {
        self.frames.push(frame);
    }

    /// Takes the newest frame of `span` this thread pushed.
    #[inline]
    pub(super) fn take_frame(&mut self, span: u64) -> Option<Frame> {
        match self.frames.last() {
            Some(top) if top.span == span => self.frames.pop(),
            _ => {
                let index = self.frames.iter().rposition(|frame| frame.span == span)?;
                Some(self.frames.remove(index))
            }
        }
    }

    /// Remembers that this thread opened `state` for `span`.
    #[inline]
    pub(super) fn remember(&mut self, span: u64, state: SpanCall) {
        if self.opened.len() == REMEMBERED {
            self.opened.remove(0);
        }
        self.opened.push((span, state));
    }

    /// What this thread remembers of `span`, left in place.
    pub(super) fn remembered(&self, span: u64) -> Option<SpanCall> {
        let (_, state) = self.opened.iter().rev().find(|(id, _)| *id == span)?;
        Some(*state)
    }

    /// Takes what this thread remembers of `span`.
    #[inline]
    pub(super) fn recall(&mut self, span: u64) -> Option<SpanCall> {
        match self.opened.last() {
            Some((id, _)) if *id == span => self.opened.pop().map(|(_, state)| state),
            _ => {
                let index = self.opened.iter().rposition(|(id, _)| *id == span)?;
                Some(self.opened.remove(index).1)
            }
        }
    }

    /// The monitor this thread records to now, and its slot: the kept one while it
    /// runs, else the thread's attachment, joining the process-wide monitor first if
    /// `join` (a thread that only makes spans joins no monitor).
    #[inline]
    pub(super) fn attached(&mut self, join: bool) -> Option<(&Arc<Recorder>, &Arc<ThreadSlot>)> {
        let running = self
            .attached
            .as_ref()
            .is_some_and(|(recorder, _)| !recorder.is_ended());
        if !running {
            let kept = |a: &context::Attachment| (Arc::clone(&a.recorder), Arc::clone(&a.slot));
            self.attached = if join {
                context::with_attachment(kept)
            } else {
                context::with_live(kept)
            };
        }
        self.attached
            .as_ref()
            .map(|(recorder, slot)| (recorder, slot))
    }
}
