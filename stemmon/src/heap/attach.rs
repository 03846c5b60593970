//! Which test the calling thread counts for: a test's own thread between its start and
//! its end ([`enter`], [`leave`]), a thread it started until that thread exits
//! ([`attach`]), and none while the engine does its own bookkeeping ([`pause`]).

use super::slots::{self, Slot};
use super::tally::Tally;
use std::sync::Arc;

/// The calling thread's slot, if `stemmon::Alloc` counts it on a slot of its own.
fn slot() -> Option<&'static Slot> {
    slots::this_thread().map(|(_, slot)| slot)
}

/// The tally the calling thread counts into now, if any: what a thread it starts
/// inherits.
#[cfg_attr(not(feature = "testing"), allow(dead_code))] // threads a test starts
pub(crate) fn current() -> Option<Arc<Tally>> {
    let ptr = slot()?.tally();
    if ptr.is_null() {
        return None;
    }
    // SAFETY: a slot's tally is either the one a live guard on this thread holds, or
    // one this thread holds a reference to (`attach`), released only when it exits:
    // the count is above zero while we read it.
    unsafe {
        Arc::increment_strong_count(ptr);
        Some(Arc::from_raw(ptr))
    }
}

/// Counts the calling thread into `tally` until it exits (a thread a test started);
/// the thread holds `tally` till then. `false` (and `tally` dropped) where the thread
/// has no slot of its own or already counts for a test.
#[cfg_attr(not(any(feature = "testing", feature = "rayon")), allow(dead_code))] // threads a test starts
pub(crate) fn attach(tally: Arc<Tally>) -> bool {
    let Some(slot) = slot() else { return false };
    if !slot.tally().is_null() {
        return false;
    }
    tally.attached();
    slot.hold(Arc::into_raw(tally));
    true
}

/// Counts the calling thread into `tally` until [`leave`]; the caller keeps `tally`
/// alive until then. Returns what the thread counted into before, for `leave`; `None`
/// where the thread has no slot of its own (no `stemmon::Alloc`).
pub(crate) fn enter(tally: &Arc<Tally>) -> Option<*const Tally> {
    let slot = slot()?;
    let before = slot.tally();
    slot.set_tally(Arc::as_ptr(tally));
    Some(before)
}

/// Undoes [`enter`].
pub(crate) fn leave(before: *const Tally) {
    if let Some(slot) = slot() {
        slot.set_tally(before);
    }
}

/// While it lives, the calling thread's allocations count for no test: the engine's
/// own bookkeeping inside a test (a stage's record) is not the test's heap.
pub(crate) struct Paused(Option<(&'static Slot, *const Tally)>);

/// Pauses the calling thread's test, if it has one, until the guard drops.
#[inline]
pub(crate) fn pause() -> Paused {
    Paused(slot().and_then(|slot| {
        let tally = slot.tally();
        (!tally.is_null()).then(|| {
            slot.set_tally(std::ptr::null());
            (slot, tally)
        })
    }))
}

impl Drop for Paused {
    #[inline]
    fn drop(&mut self) {
        if let Some((slot, tally)) = self.0 {
            slot.set_tally(tally);
        }
    }
}
