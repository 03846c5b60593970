//! The calling thread's active monitor: one pointer in a thread-local, so a
//! `#[monitored]` call with no monitor costs one thread-local load and a branch.

use crate::monitor::Shared;
use crate::stage::{Stage, StageName};
use std::cell::Cell;
use std::ptr;

thread_local! {
    // Set by `Monitor::start`, cleared by `finish`/drop before the `Shared` can be freed.
    static ACTIVE: Cell<*const Shared> = const { Cell::new(ptr::null()) };
}

/// The active monitor of this thread, or null.
#[inline(always)]
pub(crate) fn active() -> *const Shared {
    ACTIVE.with(Cell::get)
}

/// Runs `f` with this thread's active monitor, if there is one.
#[inline]
pub(crate) fn with_active<R>(f: impl FnOnce(&Shared) -> R) -> Option<R> {
    let shared = active();
    // SAFETY: a non-null pointer was stored by `Monitor::start` from an `Arc<Shared>` that
    // the monitor keeps alive until it clears this slot (on this same thread).
    (!shared.is_null()).then(|| f(unsafe { &*shared }))
}

pub(crate) fn set_active(shared: *const Shared) {
    ACTIVE.with(|slot| slot.set(shared));
}

/// Clears the slot if it still holds `shared`.
pub(crate) fn clear_active(shared: *const Shared) {
    ACTIVE.with(|slot| {
        if ptr::eq(slot.get(), shared) {
            slot.set(ptr::null());
        }
    });
}

/// Opens a stage named `name` on this thread's active monitor; an inert guard when
/// there is none. This is what `#[monitored]` expands to.
#[inline]
pub fn enter(name: &'static str) -> Stage {
    match with_active(|shared| shared.enter(StageName::Borrowed(name))) {
        Some(stage) => stage,
        None => Stage::inert(),
    }
}
