//! Which monitor covers the calling thread.
//!
//! With no monitor running anywhere, a `#[monitored]` call costs one relaxed load of a
//! global counter and a branch. Otherwise the thread-local slot names the monitor this
//! thread records to: the thread-only monitor started on it, or the process-wide one,
//! which a thread joins at its first stage.

use crate::recorder::{Recorder, ThreadSlot};
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// Monitors running in the process, process-wide and thread-only alike.
static RUNNING: AtomicUsize = AtomicUsize::new(0);

/// The process-wide monitor, if one runs.
static GLOBAL: Mutex<Option<Arc<Recorder>>> = Mutex::new(None);
/// Whether `GLOBAL` holds one: a thread with nothing to join need not take the lock.
static GLOBAL_SET: AtomicBool = AtomicBool::new(false);
/// Every running monitor, thread-only ones too: a span closed on a thread that records
/// elsewhere (or nowhere) finds its monitor here.
#[cfg(feature = "tracing")]
static INSTALLED: Mutex<Vec<std::sync::Weak<Recorder>>> = Mutex::new(Vec::new());

/// A thread's tie to the monitor it records to.
pub(crate) struct Attachment {
    pub(crate) recorder: Arc<Recorder>,
    pub(crate) slot: Arc<ThreadSlot>,
}

impl Drop for Attachment {
    fn drop(&mut self) {
        // The thread exits (or moves on to a newer monitor): its counts are merged now.
        self.recorder.thread_exited(&self.slot);
    }
}

thread_local! {
    static SLOT: RefCell<Option<Attachment>> = const { RefCell::new(None) };
}

/// Runs `f` with the attachment of the calling thread, joining the process-wide
/// monitor first if the thread has none (or only one that finished).
#[inline]
pub(crate) fn with_attachment<R>(f: impl FnOnce(&Attachment) -> R) -> Option<R> {
    if RUNNING.load(Ordering::Relaxed) == 0 {
        return None;
    }
    SLOT.try_with(|slot| {
        let mut slot = slot.try_borrow_mut().ok()?;
        let live = slot.as_ref().is_some_and(|a| !a.recorder.is_ended());
        if !live {
            if !GLOBAL_SET.load(Ordering::Acquire) {
                return None;
            }
            let global = GLOBAL
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone()?;
            let thread = global.register_thread();
            *slot = Some(Attachment {
                recorder: global,
                slot: thread,
            });
        }
        slot.as_ref().map(f)
    })
    .ok()
    .flatten()
}

/// Runs `f` with the calling thread's attachment if it has one to a running monitor;
/// joins none.
#[cfg(feature = "tracing")]
pub(crate) fn with_live<R>(f: impl FnOnce(&Attachment) -> R) -> Option<R> {
    SLOT.try_with(|slot| {
        let slot = slot.try_borrow().ok()?;
        let attachment = slot.as_ref().filter(|a| !a.recorder.is_ended())?;
        Some(f(attachment))
    })
    .ok()
    .flatten()
}

/// Runs `f` with the attachment of the calling thread if it belongs to the monitor
/// of `epoch`: a guard that outlived its monitor does nothing.
#[inline]
pub(crate) fn with_epoch(epoch: u64, f: impl FnOnce(&Attachment)) {
    let _ = SLOT.try_with(|slot| {
        if let Ok(slot) = slot.try_borrow() {
            if let Some(attachment) = slot.as_ref().filter(|a| a.recorder.epoch == epoch) {
                f(attachment);
            }
        }
    });
}

/// Runs `f` with the attachment of the calling thread if it belongs to the monitor of
/// `epoch`, else with `None` (another monitor's thread, or none).
#[inline]
pub(crate) fn with_own<R>(epoch: u64, f: impl FnOnce(Option<&Attachment>) -> R) -> R {
    let mut f = Some(f);
    let done = SLOT
        .try_with(|slot| {
            let slot = slot.try_borrow().ok()?;
            let attachment = slot.as_ref().filter(|a| a.recorder.epoch == epoch)?;
            f.take().map(|f| f(Some(attachment)))
        })
        .ok()
        .flatten();
    match (done, f) {
        (Some(done), _) => done,
        (None, Some(f)) => f(None),
        (None, None) => unreachable!("`f` ran and returned"),
    }
}

/// The running monitor of `epoch`, wherever it was started.
#[cfg(feature = "tracing")]
pub(crate) fn recorder_of(epoch: u64) -> Option<Arc<Recorder>> {
    let installed = INSTALLED.lock().unwrap_or_else(PoisonError::into_inner);
    installed
        .iter()
        .filter_map(std::sync::Weak::upgrade)
        .find(|recorder| recorder.epoch == epoch)
}

/// Every monitor running now, wherever it was started.
#[cfg(feature = "tracing")]
pub(crate) fn running() -> Vec<Arc<Recorder>> {
    let installed = INSTALLED.lock().unwrap_or_else(PoisonError::into_inner);
    installed
        .iter()
        .filter_map(std::sync::Weak::upgrade)
        .filter(|recorder| !recorder.is_ended())
        .collect()
}

/// Makes `recorder` the process's monitor, or (thread-only) the calling thread's;
/// the calling thread is registered first, as thread 0. Fails if a monitor covers
/// this thread already.
pub(crate) fn install(recorder: &Arc<Recorder>) -> Result<(), crate::Error> {
    SLOT.with(|slot| {
        let mut slot = slot.borrow_mut();
        if slot.as_ref().is_some_and(|a| !a.recorder.is_ended()) {
            return Err(crate::Error::AlreadyActive);
        }
        if !recorder.config.current_thread_only {
            let mut global = GLOBAL.lock().unwrap_or_else(PoisonError::into_inner);
            if global.as_ref().is_some_and(|g| !g.is_ended()) {
                return Err(crate::Error::AlreadyActive);
            }
            *global = Some(Arc::clone(recorder));
            GLOBAL_SET.store(true, Ordering::Release);
        }
        let thread = recorder.register_thread();
        *slot = Some(Attachment {
            recorder: Arc::clone(recorder),
            slot: thread,
        });
        #[cfg(feature = "tracing")]
        INSTALLED
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Arc::downgrade(recorder));
        RUNNING.fetch_add(1, Ordering::Relaxed);
        Ok(())
    })
}

/// Undoes [`install`] once `recorder` has ended.
pub(crate) fn uninstall(recorder: &Arc<Recorder>) {
    {
        let mut global = GLOBAL.lock().unwrap_or_else(PoisonError::into_inner);
        if global.as_ref().is_some_and(|g| Arc::ptr_eq(g, recorder)) {
            *global = None;
            GLOBAL_SET.store(false, Ordering::Release);
        }
    }
    let _ = SLOT.try_with(|slot| {
        if let Ok(mut slot) = slot.try_borrow_mut() {
            if slot
                .as_ref()
                .is_some_and(|a| Arc::ptr_eq(&a.recorder, recorder))
            {
                *slot = None;
            }
        }
    });
    #[cfg(feature = "tracing")]
    INSTALLED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .retain(|weak| weak.strong_count() > 0 && weak.as_ptr() != Arc::as_ptr(recorder));
    RUNNING.fetch_sub(1, Ordering::Relaxed);
}

/// Whether any monitor runs in the process: with none, a stage is one relaxed load.
#[inline(always)]
pub(crate) fn any_running() -> bool {
    RUNNING.load(Ordering::Relaxed) != 0
}
