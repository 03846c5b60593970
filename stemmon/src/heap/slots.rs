//! Every thread's heap counters, in a static registry the engine reads.
//!
//! A thread claims a slot at its first allocation (one `fetch_add` of the registry's
//! length, once per thread) and keeps its address in a `const`-initialised
//! thread-local `Cell` with no destructor: reading it never allocates, never
//! registers a destructor and works while the thread's other thread-locals are torn
//! down. Only the owning thread writes its slot's counters (relaxed load, then store:
//! no read-modify-write); the engine on other threads reads them with relaxed loads.
//!
//! A thread that exits hands its slot on, counts and all (unix: a `pthread` key's
//! destructor, which runs after the thread's other thread-locals are gone, pushes the
//! slot on a free list): the next thread to claim one continues its counters, so
//! nothing a thread counted is lost, and the engine's sweeps see one slot whose
//! counts only grow. Only a process with more than [`SLOTS`] threads alive at once
//! (or, elsewhere than unix, started over its life) counts the later ones in one
//! shared slot, with `fetch_add`: their allocations count toward the process's
//! totals, not toward their stages.

use super::tally::{self, Tally};
use std::cell::Cell;
use std::sync::atomic::{
    fence, AtomicBool, AtomicI64, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering,
};

/// How many threads get a slot of their own.
pub(crate) const SLOTS: usize = 4096;

/// Relaxed, everywhere: each counter has one writer, and readers want a recent value,
/// not an order.
const R: Ordering = Ordering::Relaxed;

/// One thread's counters, on cache lines of its own.
#[derive(Debug)]
#[repr(align(128))]
pub(crate) struct Slot {
    /// Allocations, bytes allocated and bytes freed by the thread since it started.
    allocations: AtomicU64,
    allocated: AtomicU64,
    freed: AtomicU64,
    /// The highest `allocated − freed` reached since the engine last set it (the
    /// engine lowers it to the current value at a frame's entry: the book's `heap.md` peaks).
    peak: AtomicI64,
    /// Odd while a stage frame is open on the thread (written by the engine on it):
    /// a sweep charges only what the thread did with no frame open.
    staged_seq: AtomicU64,
    /// What the thread's outermost frames counted, added up as each closed.
    staged_allocations: AtomicU64,
    staged_allocated: AtomicU64,
    staged_freed: AtomicU64,
    /// The monitor's own thread (the sampler): never charged to a stage.
    own: AtomicBool,
    /// On the free list: the next free slot's index + 1 (0: none).
    next: AtomicU32,
    /// The test the thread counts for now, if any (null: none); written by the thread.
    tally: AtomicPtr<Tally>,
    /// A test the thread holds a reference to until it exits (a thread it started).
    held: AtomicPtr<Tally>,
}

/// A slot's counts at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub(crate) allocations: u64,
    pub(crate) allocated: u64,
    pub(crate) freed: u64,
}

impl Counts {
    /// Bytes allocated minus bytes freed (negative when more was freed).
    #[inline]
    pub(crate) fn net(&self) -> i64 {
        self.allocated.wrapping_sub(self.freed) as i64
    }

    /// `self − earlier`, counter by counter.
    #[inline]
    pub(crate) fn since(&self, earlier: &Counts) -> Counts {
        Counts {
            allocations: self.allocations.wrapping_sub(earlier.allocations),
            allocated: self.allocated.wrapping_sub(earlier.allocated),
            freed: self.freed.wrapping_sub(earlier.freed),
        }
    }

    /// The counts of `values`: allocations, bytes allocated, bytes freed.
    pub(crate) const fn of(values: [u64; 3]) -> Counts {
        let [allocations, allocated, freed] = values;
        Counts {
            allocations,
            allocated,
            freed,
        }
    }

    /// The counts in order: allocations, bytes allocated, bytes freed.
    pub(crate) const fn values(&self) -> [u64; 3] {
        [self.allocations, self.allocated, self.freed]
    }

    /// `self + other`, counter by counter.
    #[inline]
    pub(crate) fn plus(&self, other: &Counts) -> Counts {
        Counts {
            allocations: self.allocations.wrapping_add(other.allocations),
            allocated: self.allocated.wrapping_add(other.allocated),
            freed: self.freed.wrapping_add(other.freed),
        }
    }
}

impl Slot {
    /// A slot nobody claimed.
    const fn new() -> Slot {
        Slot {
            allocations: AtomicU64::new(0),
            allocated: AtomicU64::new(0),
            freed: AtomicU64::new(0),
            peak: AtomicI64::new(0),
            staged_seq: AtomicU64::new(0),
            staged_allocations: AtomicU64::new(0),
            staged_allocated: AtomicU64::new(0),
            staged_freed: AtomicU64::new(0),
            own: AtomicBool::new(false),
            next: AtomicU32::new(0),
            tally: AtomicPtr::new(std::ptr::null_mut()),
            held: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// The counts now (freed read first: a racing reader errs toward more held).
    #[inline]
    pub(crate) fn counts(&self) -> Counts {
        let freed = self.freed.load(R);
        Counts {
            allocations: self.allocations.load(R),
            allocated: self.allocated.load(R),
            freed,
        }
    }

    /// The highest `allocated − freed` since the engine last set it.
    #[inline]
    pub(crate) fn peak(&self) -> i64 {
        self.peak.load(R)
    }

    /// Sets the peak; only the owning thread calls it (the engine at its frames).
    #[inline]
    pub(crate) fn set_peak(&self, peak: i64) {
        self.peak.store(peak, R);
    }

    /// The thread opens its outermost frame (the owning thread only).
    #[inline]
    pub(crate) fn stage_opened(&self) {
        let seq = self.staged_seq.load(R);
        if seq.is_multiple_of(2) {
            self.staged_seq.store(seq + 1, Ordering::Release);
        }
    }

    /// The thread closes its outermost frame, which counted `counts` (the owning
    /// thread only).
    #[inline]
    pub(crate) fn stage_closed(&self, counts: &Counts) {
        let add = |counter: &AtomicU64, n: u64| counter.store(counter.load(R).wrapping_add(n), R);
        add(&self.staged_allocations, counts.allocations);
        add(&self.staged_allocated, counts.allocated);
        add(&self.staged_freed, counts.freed);
        let seq = self.staged_seq.load(R);
        if !seq.is_multiple_of(2) {
            self.staged_seq.store(seq + 1, Ordering::Release);
        }
    }

    /// The thread exits: an outermost frame it left open counts as closed, and what
    /// it counted in it as counted with no frame open.
    fn stage_abandoned(&self) {
        let seq = self.staged_seq.load(R);
        if !seq.is_multiple_of(2) {
            self.staged_seq.store(seq + 1, Ordering::Release);
        }
    }

    /// What the thread counted with no frame open (all of it minus its outermost
    /// frames'), and its net now, if no frame is open now and none opened or closed
    /// while reading; `None` otherwise.
    pub(crate) fn unstaged(&self) -> Option<(Counts, i64)> {
        let before = self.staged_seq.load(Ordering::Acquire);
        if !before.is_multiple_of(2) {
            return None;
        }
        let staged = Counts {
            allocations: self.staged_allocations.load(R),
            allocated: self.staged_allocated.load(R),
            freed: self.staged_freed.load(R),
        };
        let all = self.counts();
        fence(Ordering::Acquire);
        (self.staged_seq.load(R) == before).then(|| (all.since(&staged), all.net()))
    }

    /// Whether this is the monitor's own thread.
    pub(crate) fn is_own(&self) -> bool {
        self.own.load(R)
    }

    /// The test the thread counts for (null: none).
    #[inline(always)]
    pub(crate) fn tally(&self) -> *const Tally {
        self.tally.load(R)
    }

    /// Has the thread count for `tally` (null: none); the owning thread only.
    pub(crate) fn set_tally(&self, tally: *const Tally) {
        self.tally.store(tally.cast_mut(), R);
    }

    /// Has the thread count for `tally`, and release it when the thread exits.
    #[cfg_attr(not(any(feature = "testing", feature = "rayon")), allow(dead_code))] // threads a test starts
    pub(crate) fn hold(&self, tally: *const Tally) {
        self.held.store(tally.cast_mut(), R);
        self.set_tally(tally);
    }

    /// The thread exits: it counts for no test from now on, and lets go of the one it
    /// held.
    fn forget_tally(&self) {
        self.set_tally(std::ptr::null());
        let held = self.held.swap(std::ptr::null_mut(), R);
        if !held.is_null() {
            tally::release(held);
        }
    }
}

/// The slots, claimed in order.
static REGISTRY: [Slot; SLOTS] = [const { Slot::new() }; SLOTS];
/// How many slots were claimed (may exceed `SLOTS`: the rest use `SHARED`).
static CLAIMED: AtomicUsize = AtomicUsize::new(0);
/// The slot of every thread past the first `SLOTS`, written with `fetch_add`.
static SHARED: Slot = Slot::new();
/// `type_name` of the inner allocator, set at the first allocation: also tells that
/// `stemmon::Alloc` is the global allocator.
static NAME: AtomicPtr<u8> = AtomicPtr::new(std::ptr::null_mut());
static NAME_LEN: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's slot, null until its first allocation.
    static CURRENT: Cell<*const Slot> = const { Cell::new(std::ptr::null()) };
}

/// The calling thread's slot, claimed now if it has none; `SHARED` past `SLOTS`
/// threads or where the thread-local is gone.
#[inline(always)]
fn current(name: fn() -> &'static str) -> &'static Slot {
    CURRENT
        .try_with(|cell| {
            let slot = cell.get();
            if slot.is_null() {
                claim(cell, name)
            } else {
                // SAFETY: the cell only ever holds the address of a `static` slot.
                unsafe { &*slot }
            }
        })
        .unwrap_or(&SHARED)
}

/// Claims a slot for the calling thread (once per thread) and notes the allocator: one
/// an exited thread handed on, else the next never claimed.
#[cold]
#[inline(never)]
fn claim(cell: &Cell<*const Slot>, name: fn() -> &'static str) -> &'static Slot {
    let name = name();
    if NAME.load(R).is_null() && !name.is_empty() {
        NAME_LEN.store(name.len(), R);
        NAME.store(name.as_ptr().cast_mut(), Ordering::Release);
    }
    let slot = match free::pop() {
        Some(index) => {
            let slot = &REGISTRY[index];
            // The sampler's slot, handed on, is a user thread's now; and its peak is
            // this thread's from here (the last owner's highest would hide it).
            slot.own.store(false, R);
            slot.set_tally(std::ptr::null());
            slot.set_peak(slot.counts().net());
            slot
        }
        None => REGISTRY.get(CLAIMED.fetch_add(1, R)).unwrap_or(&SHARED),
    };
    cell.set(slot);
    if !std::ptr::eq(slot, &SHARED) {
        free::at_exit(slot_index(slot));
    }
    slot
}

/// The index of `slot` in the registry.
fn slot_index(slot: &Slot) -> usize {
    (slot as *const Slot as usize - REGISTRY.as_ptr() as usize) / std::mem::size_of::<Slot>()
}

/// The slots of exited threads: a stack linked through [`Slot::next`], its head tagged
/// so that a pop racing a pop and a push cannot take a stale link (ABA). Written here:
/// it runs inside the allocator, where a crate's queue would allocate.
#[cfg(unix)]
mod free {
    use super::{Cell, Slot, CURRENT, R, REGISTRY, SHARED};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;

    /// `tag << 32 | (index + 1)` of the top free slot; index part 0: empty.
    static HEAD: AtomicU64 = AtomicU64::new(0);

    /// A free slot's index, taken off the list.
    pub(super) fn pop() -> Option<usize> {
        let mut head = HEAD.load(Ordering::Acquire);
        loop {
            let top = head as u32;
            if top == 0 {
                return None;
            }
            let next = REGISTRY[top as usize - 1].next.load(R);
            let tagged = ((head >> 32) + 1) << 32 | u64::from(next);
            // Acquire: the exited thread's last counts happen before the new owner's.
            match HEAD.compare_exchange_weak(head, tagged, Ordering::Acquire, Ordering::Acquire) {
                Ok(_) => return Some(top as usize - 1),
                Err(now) => head = now,
            }
        }
    }

    /// Puts the slot of `index` on the list.
    fn push(index: usize) {
        let slot: &Slot = &REGISTRY[index];
        let mut head = HEAD.load(R);
        loop {
            slot.next.store(head as u32, R);
            let tagged = ((head >> 32) + 1) << 32 | (index as u64 + 1);
            match HEAD.compare_exchange_weak(head, tagged, Ordering::Release, R) {
                Ok(_) => return,
                Err(now) => head = now,
            }
        }
    }

    /// The key whose destructor hands a slot on; `None` if none could be made.
    fn key() -> Option<libc::pthread_key_t> {
        static KEY: OnceLock<Option<libc::pthread_key_t>> = OnceLock::new();
        *KEY.get_or_init(|| {
            let mut key: libc::pthread_key_t = 0;
            // SAFETY: `key` is ours to write; `handed_on` is an `extern "C"` function
            // that lives as long as the process.
            let made = unsafe { libc::pthread_key_create(&mut key, Some(handed_on)) };
            (made == 0).then_some(key)
        })
    }

    /// Has the calling thread hand the slot of `index` on when it exits. Without a
    /// key, the slot is kept for good.
    pub(super) fn at_exit(index: usize) {
        if let Some(key) = key() {
            // SAFETY: a valid key; the value is an integer, never dereferenced.
            // (glibc stores it without allocating for the first 32 keys, and with
            // libc's own `calloc`, not the Rust allocator, past them.)
            unsafe { libc::pthread_setspecific(key, (index + 1) as *const libc::c_void) };
        }
    }

    /// The key's destructor: the thread is exiting, its other thread-locals gone.
    /// What it allocates or frees from now on counts in the shared slot, so that
    /// the slot has one writer at a time.
    extern "C" fn handed_on(value: *mut libc::c_void) {
        let index = value as usize - 1;
        let _ = CURRENT.try_with(|cell: &Cell<*const Slot>| cell.set(&SHARED));
        // A frame left open for good (a guard forgotten) would hide the slot from
        // sweeps until its next owner closes one: what it counted since is unstaged.
        REGISTRY[index].stage_abandoned();
        REGISTRY[index].forget_tally();
        push(index);
    }
}

/// Elsewhere than unix a slot is kept for good.
#[cfg(not(unix))]
mod free {
    pub(super) fn pop() -> Option<usize> {
        None
    }

    pub(super) fn at_exit(_index: usize) {}
}

/// Counts an allocation of `size` bytes on the calling thread.
#[cfg_attr(not(feature = "enabled"), allow(dead_code))] // `Alloc` counts nothing then
#[inline(always)]
pub(crate) fn allocated(size: usize, name: fn() -> &'static str) {
    let slot = current(name);
    let size = size as u64;
    if std::ptr::eq(slot, &SHARED) {
        slot.allocations.fetch_add(1, R);
        slot.allocated.fetch_add(size, R);
        return;
    }
    let allocated = slot.allocated.load(R).wrapping_add(size);
    slot.allocated.store(allocated, R);
    slot.allocations
        .store(slot.allocations.load(R).wrapping_add(1), R);
    let net = allocated.wrapping_sub(slot.freed.load(R)) as i64;
    if net > slot.peak.load(R) {
        slot.peak.store(net, R);
    }
    counted_for_test(slot, |tally| tally.allocated(size));
}

/// Also counts into the test the thread counts for, if any.
#[inline(always)]
fn counted_for_test(slot: &Slot, count: impl FnOnce(&Tally)) {
    let tally = slot.tally();
    if !tally.is_null() {
        // SAFETY: a slot's tally is kept alive by the guard that set it (until it
        // unsets it) or by the reference the thread holds (until its slot forgets it).
        count(unsafe { &*tally });
    }
}

/// Counts a free of `size` bytes on the calling thread.
#[cfg_attr(not(feature = "enabled"), allow(dead_code))] // `Alloc` counts nothing then
#[inline(always)]
pub(crate) fn freed(size: usize) {
    // A thread frees before it ever allocates only what another thread made; it
    // claims its slot then, under the name the first allocation set.
    let slot = current(|| "");
    let size = size as u64;
    if std::ptr::eq(slot, &SHARED) {
        slot.freed.fetch_add(size, R);
        return;
    }
    slot.freed.store(slot.freed.load(R).wrapping_add(size), R);
    counted_for_test(slot, |tally| tally.freed(size));
}

/// The inner allocator's `type_name`, once `stemmon::Alloc` has allocated: `None`
/// when it is not the global allocator.
pub(crate) fn allocator() -> Option<&'static str> {
    let name = NAME.load(Ordering::Acquire);
    if name.is_null() {
        return None;
    }
    let len = NAME_LEN.load(R);
    // SAFETY: `NAME` and `NAME_LEN` were set from one `&'static str` (the length
    // first, the address published after it with `Release`), and never change after.
    let bytes = unsafe { std::slice::from_raw_parts(name.cast_const(), len) };
    std::str::from_utf8(bytes).ok()
}

/// Whether `stemmon::Alloc` is the global allocator (it has allocated).
#[inline]
pub(crate) fn installed() -> bool {
    !NAME.load(R).is_null()
}

/// The calling thread's own slot, for the engine's frames; `None` without
/// `stemmon::Alloc`, or for a thread counted in the shared slot.
#[inline]
pub(crate) fn this_thread() -> Option<(u32, &'static Slot)> {
    if !installed() {
        return None;
    }
    let slot = current(|| "");
    (!std::ptr::eq(slot, &SHARED)).then(|| (slot_index(slot) as u32, slot))
}

/// Marks the calling thread as the monitor's own: what it allocates is no stage's.
pub(crate) fn mark_own_thread() {
    if let Some((_, slot)) = this_thread() {
        slot.own.store(true, R);
    }
}

/// The slots claimed so far, in order.
pub(crate) fn claimed() -> &'static [Slot] {
    &REGISTRY[..CLAIMED.load(R).min(SLOTS)]
}

/// The counts of the threads past the first `SLOTS`.
pub(crate) fn shared() -> Counts {
    SHARED.counts()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_subtract_and_add_counter_by_counter() {
        let a = Counts {
            allocations: 3,
            allocated: 300,
            freed: 100,
        };
        let b = Counts {
            allocations: 1,
            allocated: 50,
            freed: 150,
        };
        assert_eq!(a.net(), 200);
        assert_eq!(b.net(), -100);
        assert_eq!(a.since(&b).plus(&b), a);
    }

    #[test]
    fn a_frame_open_hides_the_thread_from_a_sweep_and_its_close_leaves_the_rest() {
        let slot = Slot::new();
        slot.allocated.store(1000, R);
        slot.allocations.store(2, R);
        assert_eq!(slot.unstaged().unwrap().0.allocated, 1000);
        slot.stage_opened();
        assert_eq!(slot.unstaged(), None);
        slot.allocated.store(1600, R);
        slot.allocations.store(3, R);
        slot.stage_closed(&Counts {
            allocations: 1,
            allocated: 600,
            freed: 0,
        });
        let (unstaged, net) = slot.unstaged().unwrap();
        assert_eq!(
            (unstaged.allocations, unstaged.allocated, net),
            (2, 1000, 1600)
        );
    }
}
