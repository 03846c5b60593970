//! The kernel keeps one mark of this process's peak, and every monitor with marks on
//! resets it at its readings: two monitors of one process (thread-only ones, on two
//! threads) would each end the other's intervals. So a reading that resets the mark
//! hands the mark it read on to every other monitor, whose next reading takes the
//! larger of its own and what was handed to it since its last: no peak is lost, and a
//! monitor may get one from a little before its interval began (a bound, never low).
//!
//! The one thing monitors share on purpose, so it lives here and not in the readers
//! (`memory/`), which keep no process-wide state: each monitor's reader of this
//! process holds a [`Mailbox`].

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

/// Every monitor's mailbox, and how many there are (one: nothing to hand on).
static MAILBOXES: Mutex<Vec<Weak<AtomicU64>>> = Mutex::new(Vec::new());
static JOINED: AtomicUsize = AtomicUsize::new(0);

/// One monitor's place in the exchange: the highest mark handed to it since its
/// last reading.
pub(crate) struct Mailbox {
    mailbox: Arc<AtomicU64>,
}

impl Mailbox {
    /// A mailbox for a new monitor's reader of this process.
    pub(crate) fn join() -> Mailbox {
        let mailbox = Arc::new(AtomicU64::new(0));
        let mut all = MAILBOXES.lock().unwrap_or_else(PoisonError::into_inner);
        all.retain(|other| other.strong_count() > 0);
        all.push(Arc::downgrade(&mailbox));
        JOINED.store(all.len(), Ordering::Relaxed);
        Mailbox { mailbox }
    }

    /// `hwm`, read just before a reset, handed on to the others, and raised to what
    /// they handed to this monitor since its last reading.
    pub(crate) fn hand_on(&self, hwm: u64) -> u64 {
        if JOINED.load(Ordering::Relaxed) > 1 {
            let all = MAILBOXES.lock().unwrap_or_else(PoisonError::into_inner);
            for other in all
                .iter()
                .filter(|o| !std::ptr::eq(o.as_ptr(), &*self.mailbox))
            {
                if let Some(other) = other.upgrade() {
                    other.fetch_max(hwm, Ordering::Relaxed);
                }
            }
        }
        hwm.max(self.mailbox.swap(0, Ordering::Relaxed))
    }
}

impl Drop for Mailbox {
    fn drop(&mut self) {
        let mut all = MAILBOXES.lock().unwrap_or_else(PoisonError::into_inner);
        all.retain(|other| {
            other.strong_count() > 0 && !std::ptr::eq(other.as_ptr(), &*self.mailbox)
        });
        JOINED.store(all.len(), Ordering::Relaxed);
    }
}
