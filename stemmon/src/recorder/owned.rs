//! A value one thread uses on every call and other threads only now and then: the
//! owner takes it with two plain stores and a load, no atomic read-modify-write; any
//! other thread takes a mutex and makes the owner step aside.
//!
//! This is an asymmetric lock (the scheme of Linux's `membarrier(2)` man page, and of
//! folly's `asymmetric_thread_fence_heavy`). The owner marks itself `busy`, then checks
//! whether another thread `want`s the value. Another thread sets `want`, then has the
//! kernel run a full memory barrier on every CPU that runs a thread of this process
//! (`MEMBARRIER_CMD_PRIVATE_EXPEDITED`), then waits until the owner is not `busy`.
//! After that barrier, either the owner's `busy` is visible to the other thread (which
//! then waits for it to end) or the owner's check comes after the barrier and sees
//! `want` (and takes the mutex instead). Written here because no maintained crate
//! offers a lock with a barrier-free owner side; the one crate with the barrier alone
//! (`membarrier`) has seen no release since 2019.
//!
//! Where the kernel has no expedited `membarrier` (not Linux, an old kernel, a seccomp
//! filter), `want` stays set for good and every access takes the mutex: slower, the
//! same results. A thread that is not the owner always takes the mutex, so a caller
//! that is wrong about which thread it runs on is slow, never unsound.

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{compiler_fence, AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

thread_local! {
    /// Its address tells the threads alive at one time apart.
    static MARK: u8 = const { 0 };
}

/// The calling thread's mark: distinct for every thread alive now (a thread started
/// after another exited may get the same one, and then owns what it owned).
#[inline]
fn this_thread() -> usize {
    MARK.with(|mark| std::ptr::from_ref(mark) as usize)
}

/// Whether the expedited barrier works here (registered once, at the first use).
fn barrier_available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(crate::sys::register_barrier)
}

/// A `T` its owner thread takes without a lock; see the module's text.
pub(crate) struct Owned<T> {
    value: UnsafeCell<T>,
    /// The owner's mark ([`this_thread`] of the thread that made it).
    owner: usize,
    /// Set by the owner while it uses the value without the mutex.
    busy: AtomicBool,
    /// Set by a thread holding `mutex` that uses the value or waits to; set for good
    /// where the barrier is unavailable.
    want: AtomicBool,
    mutex: Mutex<()>,
}

// SAFETY: the value is reached only through a guard, and guards exclude each other:
// the mutex orders the guards of non-owners (and of an owner that stepped aside), and
// the busy/want handshake with the barrier keeps the owner's lock-free guard apart
// from all of them (module text). So `T` moves between threads but is never shared.
unsafe impl<T: Send> Sync for Owned<T> {}

impl<T> std::fmt::Debug for Owned<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not the value: printing must never take it (the printer may hold it).
        f.debug_struct("Owned")
            .field("busy", &self.busy)
            .field("want", &self.want)
            .finish_non_exhaustive()
    }
}

impl<T> Owned<T> {
    /// `value`, owned by the calling thread.
    pub(super) fn new(value: T) -> Owned<T> {
        Owned {
            value: UnsafeCell::new(value),
            owner: this_thread(),
            busy: AtomicBool::new(false),
            want: AtomicBool::new(!barrier_available()),
            mutex: Mutex::new(()),
        }
    }

    /// The value, for as long as the guard lives: without a lock on the owner thread
    /// when nobody else wants it, else behind the mutex.
    #[inline]
    pub(super) fn lock(&self) -> OwnedGuard<'_, T> {
        if self.owner == this_thread() {
            // A second guard on the owner thread would alias the first (a mutex would
            // deadlock); nothing in the recorder takes one inside another.
            assert!(
                !self.busy.load(Ordering::Relaxed),
                "stemmon: a thread's state taken twice on its own thread"
            );
            self.busy.store(true, Ordering::Relaxed);
            // The barrier of `others` orders this store before the load below, on
            // whichever CPU runs this; the compiler must not reorder them either.
            compiler_fence(Ordering::SeqCst);
            if !self.want.load(Ordering::Acquire) {
                return OwnedGuard {
                    owned: self,
                    held: Held::Owner,
                };
            }
            // Somebody holds (or waits for) the mutex: step aside, and queue for it.
            self.busy.store(false, Ordering::Release);
            let held = self.mutex.lock().unwrap_or_else(PoisonError::into_inner);
            return OwnedGuard {
                owned: self,
                held: Held::Mutex {
                    _mutex: held,
                    clears_want: false,
                },
            };
        }
        self.others()
    }

    /// The value, taken from a thread that is not the owner, and from now on through
    /// the mutex on the owner's side too: for a value other threads take often, which
    /// would otherwise cost a barrier each time.
    pub(super) fn lock_for_good(&self) -> OwnedGuard<'_, T> {
        if self.owner == this_thread() {
            return self.lock();
        }
        self.taken_elsewhere(true)
    }

    /// The values of `all`, in order, with one barrier for all of them. Each is held
    /// through its mutex, taken in the order of `all` (every caller takes them in the
    /// same order); the caller's own value too, which then needs no barrier: its owner
    /// is here, not using it.
    pub(super) fn lock_all<'a>(all: &[&'a Owned<T>]) -> Vec<OwnedGuard<'a, T>> {
        let me = this_thread();
        let claims: Vec<_> = all
            .iter()
            .map(|owned| {
                if owned.owner == me {
                    let mutex = owned.mutex.lock().unwrap_or_else(PoisonError::into_inner);
                    (mutex, false)
                } else {
                    owned.claim()
                }
            })
            .collect();
        if claims.iter().any(|(_, waits)| *waits) {
            barrier_or_pause();
        }
        all.iter()
            .zip(claims)
            .map(|(owned, (mutex, waits))| {
                if waits {
                    owned.wait_for_owner();
                }
                OwnedGuard {
                    owned,
                    held: Held::Mutex {
                        _mutex: mutex,
                        clears_want: waits,
                    },
                }
            })
            .collect()
    }

    /// The guard of a thread that is not the owner: the mutex, `want`, the barrier,
    /// then a wait for the owner's current use to end.
    #[cold]
    fn others(&self) -> OwnedGuard<'_, T> {
        self.taken_elsewhere(false)
    }

    /// The mutex, `want`, the barrier if the owner may be using the value, then a wait
    /// for that use to end. `for_good` leaves `want` set when the guard drops, so the
    /// owner keeps to the mutex from then on.
    fn taken_elsewhere(&self, for_good: bool) -> OwnedGuard<'_, T> {
        let (mutex, waits) = self.claim();
        if waits {
            barrier_or_pause();
            self.wait_for_owner();
        }
        OwnedGuard {
            owned: self,
            held: Held::Mutex {
                _mutex: mutex,
                clears_want: waits && !for_good,
            },
        }
    }

    /// Takes the mutex and sets `want`; true if the owner may be using the value
    /// without the mutex (then the barrier and [`Owned::wait_for_owner`] must follow).
    fn claim(&self) -> (MutexGuard<'_, ()>, bool) {
        let mutex = self.mutex.lock().unwrap_or_else(PoisonError::into_inner);
        if self.want.load(Ordering::Relaxed) {
            // Set for good: the owner takes the mutex too, and holds nothing now.
            return (mutex, false);
        }
        self.want.store(true, Ordering::Relaxed);
        (mutex, true)
    }

    /// Waits until the owner's use of the value without the mutex, if any, has ended.
    fn wait_for_owner(&self) {
        let mut spins = 0u32;
        while self.busy.load(Ordering::Acquire) {
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}

/// The heavy barrier; if the kernel refuses it (it does not once registered), a pause
/// long enough for any store of the owner's to become visible.
fn barrier_or_pause() {
    if !crate::sys::heavy_barrier() {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// How a guard holds the value.
enum Held<'a> {
    /// The owner's lock-free use: `busy` is set.
    Owner,
    /// Behind the mutex (released when the guard drops, after `drop` ran).
    Mutex {
        _mutex: MutexGuard<'a, ()>,
        /// This guard set `want` and clears it at the end.
        clears_want: bool,
    },
}

/// The value of an [`Owned`], held.
pub(crate) struct OwnedGuard<'a, T> {
    owned: &'a Owned<T>,
    held: Held<'a>,
}

impl<T> Deref for OwnedGuard<'_, T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: a live guard excludes every other guard (see `Sync` above).
        unsafe { &*self.owned.value.get() }
    }
}

impl<T> DerefMut for OwnedGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; `&mut self` makes this borrow the only one.
        unsafe { &mut *self.owned.value.get() }
    }
}

impl<T> Drop for OwnedGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        match &self.held {
            // Every write to the value happens before a waiter sees `busy` clear.
            Held::Owner => self.owned.busy.store(false, Ordering::Release),
            // The mutex guard drops after this, with the value's writes released.
            Held::Mutex {
                clears_want: true, ..
            } => self.owned.want.store(false, Ordering::Release),
            Held::Mutex { .. } => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;

    /// Two fields written together: a reader that sees them differ saw a torn update.
    #[derive(Default)]
    struct Pair {
        a: u64,
        b: u64,
    }

    #[test]
    fn the_owner_and_other_threads_never_overlap() {
        let owned = Arc::new(Owned::new(Pair::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let reads = Arc::new(AtomicU64::new(0));
        let others: Vec<_> = (0..2)
            .map(|_| {
                let (owned, stop, reads) = (owned.clone(), stop.clone(), reads.clone());
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let mut pair = owned.lock();
                        assert_eq!(pair.a, pair.b, "a torn update");
                        // Others write too, so the owner must see their writes whole.
                        pair.a += 1;
                        pair.b += 1;
                        reads.fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        let mut own = 0u64;
        // Until the others have made a few thousand accesses between the owner's.
        while reads.load(Ordering::Relaxed) < 2_000 || own < 200_000 {
            let mut pair = owned.lock();
            assert_eq!(pair.a, pair.b, "a torn update");
            pair.a += 1;
            std::hint::black_box(&mut *pair);
            pair.b += 1;
            own += 1;
        }
        stop.store(true, Ordering::Relaxed);
        for other in others {
            other.join().unwrap();
        }
        let pair = owned.lock();
        assert_eq!(pair.a, own + reads.load(Ordering::Relaxed));
        assert_eq!(pair.a, pair.b);
    }

    #[test]
    fn passes_over_all_values_from_two_owners_at_once_never_deadlock() {
        // Each thread owns one value, uses it alone and takes both in passes (as the
        // sampler and a summary on the monitor's thread do at once).
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<Arc<Owned<u64>>>();
        let other = std::thread::spawn(move || {
            let mine = Arc::new(Owned::new(0u64));
            ready_tx.send(mine.clone()).unwrap();
            let theirs = go_rx.recv().unwrap();
            for _ in 0..2_000 {
                *mine.lock() += 1;
                for mut value in Owned::lock_all(&[&*theirs, &*mine]) {
                    *value += 1;
                }
            }
        });
        let theirs: Arc<Owned<u64>> = ready_rx.recv().unwrap();
        let mine = Arc::new(Owned::new(0u64));
        go_tx.send(mine.clone()).unwrap();
        for _ in 0..2_000 {
            *mine.lock() += 1;
            for mut value in Owned::lock_all(&[&*mine, &*theirs]) {
                *value += 1;
            }
        }
        other.join().unwrap();
        assert_eq!((*mine.lock(), *theirs.lock()), (6_000, 6_000));
    }

    #[test]
    fn a_value_made_on_another_thread_is_reached_through_the_mutex() {
        let owned = std::thread::spawn(|| Owned::new(7u32)).join().unwrap();
        *owned.lock() += 1;
        assert_eq!(*owned.lock(), 8);
        assert!(matches!(owned.lock().held, Held::Mutex { .. }));
    }

    #[test]
    fn the_owner_takes_its_value_without_the_mutex_when_nobody_wants_it() {
        let owned = Owned::new(1u8);
        let guard = owned.lock();
        if barrier_available() {
            assert!(matches!(guard.held, Held::Owner));
        } else {
            assert!(matches!(guard.held, Held::Mutex { .. }));
        }
        // The owner's lock-free use holds no mutex: the mutex is free meanwhile.
        if barrier_available() {
            assert!(owned.mutex.try_lock().is_ok());
        }
    }
}
