//! Calls of `tracing` spans opened without the registry (the `tracing` layer's fast
//! path; the book's `tracing.md`).
//!
//! The layer keeps a span's call in the span's registry extensions, where any thread
//! finds it; writing them costs a write lock, an allocation and a map insert per span.
//! A span made on a thread and entered, exited and closed there with nothing else
//! between (a leaf span, most of them) can skip that: its call is kept here, in the
//! state of the thread that opened it, and marked with the span's id.
//!
//! Whoever else needs such a span (another thread entering or closing it, or a child
//! span entered elsewhere) asks [`Recorder::find_span`], which looks through every
//! thread's state. Two facts make that exact without any atomic read-modify-write on
//! the owner's side:
//!
//! - **One winner for the first enter.** A thread opens a span this way only while the
//!   span is its newest made one ([`Mirror::made`](super::tally::Mirror::made), checked under the thread's lock);
//!   `find_span` clears that under the same lock (the [`Owned`](super::owned)
//!   handshake), so a span is opened either by its maker's fast path or by the
//!   registry's way, never both. The registry's way is serialised per span by the
//!   extensions' write lock, as before.
//! - **Nothing missed.** Each thread publishes, with release stores, its newest made
//!   span and how many calls it holds this way ([`Mirror`](super::tally::Mirror)): the count before the
//!   span is cleared, so a reader that sees the span gone sees the count that replaced
//!   it. A reader that sees neither the span nor any count takes no lock at all.
//!
//! Locks are taken in one order: a span's extensions, then threads' states. The owner
//! never waits for an extension while it holds its own state.

use super::tally::Unregistered;
use super::thread::{ThreadSlot, ThreadState};
use super::{OpenCall, Parent, Recorder, StageName};
use std::sync::atomic::Ordering;

impl ThreadSlot {
    /// Notes that `span` was just made on this thread (0: forget the last one).
    #[inline]
    pub(crate) fn note_made_span(&self, span: u64) {
        self.spans.made.store(span, Ordering::Release);
    }

    /// Publishes how many calls `thread` keeps apart.
    #[inline]
    fn publish_spans(&self, thread: &ThreadState) {
        let open = u32::try_from(thread.spans.open.len()).unwrap_or(u32::MAX);
        self.spans.open.store(open, Ordering::Release);
    }

    /// Clears the made span if it is `span`; the caller holds the thread's state.
    fn claim_made(&self, span: u64) {
        if self.spans.made.load(Ordering::Acquire) == span {
            self.spans.made.store(0, Ordering::Release);
        }
    }

    /// Whether this thread may hold `span`: as its newest made span, or among
    /// calls opened without the registry.
    fn may_hold(&self, span: u64) -> bool {
        let made = self.spans.made.load(Ordering::Acquire);
        let open = self.spans.open.load(Ordering::Acquire);
        made == span || open != 0
    }
}

impl Recorder {
    /// Opens `span` at its first enter, with one poll, without the registry: only if
    /// it is still the newest span made on `slot`'s thread and the open would be a
    /// call of its own (not folded into a recursive one, not after the end). `None`:
    /// the caller takes the registry's way.
    #[inline]
    pub(crate) fn open_made_span(
        &self,
        slot: &ThreadSlot,
        span: u64,
        name: StageName,
        parent: Parent,
    ) -> Option<(OpenCall, Option<u32>)> {
        let now = self.clock.raw();
        let mut thread = slot.lock();
        if slot.spans.made.load(Ordering::Relaxed) != span || self.is_ended() {
            return None;
        }
        let here = match parent {
            Parent::Here => true,
            Parent::Record(record) => thread.has_open(record),
        };
        let folds = here
            && thread
                .stack
                .last()
                .is_some_and(|top| thread.is_named(top.record, &name));
        if folds {
            return None;
        }
        let (call, poll) = self.open_locked(slot, &mut thread, name, parent, true, now);
        thread.spans.open.push((call.seq, span));
        // The count first, then the made span cleared (the module's text).
        slot.publish_spans(&thread);
        slot.claim_made(span);
        Some((call, poll))
    }

    /// Gives up the registry-free keeping of `call` (its span now has its extension):
    /// true if it was still kept so, open on `slot`'s thread.
    pub(crate) fn register_span(&self, slot: &ThreadSlot, call: OpenCall) -> bool {
        let mut thread = slot.lock();
        let kept = thread.spans.forget(call.seq);
        if kept {
            slot.publish_spans(&thread);
        }
        kept
    }

    /// Forgets `seq` (just closed on `slot`'s thread) among the calls kept without
    /// the registry.
    #[inline]
    pub(super) fn closed_span(&self, slot: &ThreadSlot, thread: &mut ThreadState, seq: u64) {
        if !thread.spans.open.is_empty() && thread.spans.forget(seq) {
            slot.publish_spans(thread);
        }
    }

    /// The call of `span` if some thread opened it without the registry, handed over:
    /// from now on the caller keeps it in the span's extensions. A thread that still
    /// has `span` as its newest made span gives that up, so its first enter takes the
    /// registry's way. The caller holds the span's extensions (write lock), or closes
    /// the span (then nobody else holds it).
    pub(crate) fn find_span(&self, span: u64) -> Option<OpenCall> {
        let threads = self.lock_threads();
        if self.is_ended() || !threads.iter().any(|slot| slot.may_hold(span)) {
            return None;
        }
        let mut held = ThreadSlot::lock_all(&threads);
        let mut found = None;
        for (slot, thread) in threads.iter().zip(held.iter_mut()) {
            slot.claim_made(span);
            let kept = thread.spans.open.iter().find(|(_, of)| *of == span);
            if let Some(&(seq, _)) = kept.filter(|_| found.is_none()) {
                found = thread.open_calls().find(|call| call.seq == seq).copied();
                thread.spans.forget(seq);
                slot.publish_spans(thread);
            }
        }
        found
    }
}

impl Unregistered {
    /// Forgets the call `seq`; true if it was kept.
    fn forget(&mut self, seq: u64) -> bool {
        match self.open.iter().position(|(kept, _)| *kept == seq) {
            Some(index) => {
                self.open.swap_remove(index);
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fake::Rig;
    use super::*;

    #[test]
    fn a_made_span_opens_once_and_another_thread_finds_its_call() {
        let rig = Rig::new();
        let (maker, other) = (rig.thread(), rig.thread());
        maker.note_made_span(7);
        let (call, poll) = rig
            .recorder
            .open_made_span(&maker, 7, "leaf".into(), Parent::Here)
            .expect("the newest made span opens");
        assert!(poll.is_some());
        // Opened once: the made note is used up.
        assert!(rig
            .recorder
            .open_made_span(&maker, 7, "leaf".into(), Parent::Here)
            .is_none());
        assert!(maker.may_hold(7), "published");
        // Another thread takes the call over, once.
        assert_eq!(rig.recorder.find_span(7).map(|c| c.seq), Some(call.seq));
        assert_eq!(rig.recorder.find_span(7).map(|c| c.seq), None);
        assert!(!maker.may_hold(7) && !other.may_hold(7));
        // Handed over, it is no longer the maker's to register.
        assert!(!rig.recorder.register_span(&maker, call));
        rig.recorder.pop_poll(&maker, poll.unwrap());
        rig.recorder.close_async(Some(&other), call, None);
        let report = rig.recorder.snapshot();
        assert_eq!(report.stage("leaf").unwrap().calls, 1);
        assert!(rig.recorder.open_calls().is_empty());
    }

    #[test]
    fn a_made_span_claimed_elsewhere_is_not_opened_by_its_maker() {
        let rig = Rig::new();
        let maker = rig.thread();
        maker.note_made_span(9);
        assert!(maker.may_hold(9));
        // Another thread's first enter claims it (and opens it the registry's way).
        assert!(rig.recorder.find_span(9).is_none());
        assert!(!maker.may_hold(9));
        assert!(rig
            .recorder
            .open_made_span(&maker, 9, "late".into(), Parent::Here)
            .is_none());
    }

    #[test]
    fn a_closed_or_registered_span_is_no_longer_kept() {
        let rig = Rig::new();
        let maker = rig.thread();
        for (span, register) in [(3, false), (4, true)] {
            maker.note_made_span(span);
            let (call, poll) = rig
                .recorder
                .open_made_span(&maker, span, "leaf".into(), Parent::Here)
                .unwrap();
            assert!(maker.may_hold(span));
            if register {
                assert!(rig.recorder.register_span(&maker, call));
            }
            rig.recorder.pop_poll(&maker, poll.unwrap());
            rig.recorder.close_async(Some(&maker), call, None);
            assert!(!maker.may_hold(span), "span {span}");
            assert!(rig.recorder.find_span(span).is_none());
        }
        assert_eq!(rig.recorder.snapshot().stage("leaf").unwrap().calls, 2);
    }

    #[test]
    fn a_span_that_would_fold_into_its_recursive_caller_is_left_to_the_registry() {
        let rig = Rig::new();
        let maker = rig.thread();
        let outer = rig.recorder.enter(&maker, "walk".into());
        maker.note_made_span(5);
        assert!(rig
            .recorder
            .open_made_span(&maker, 5, "walk".into(), Parent::Here)
            .is_none());
        assert!(maker.may_hold(5), "still the maker's newest span");
        rig.recorder.exit(&maker, outer);
    }
}
