//! The calling thread's active monitor and its stage stack.
//!
//! A `#[monitored]` call with no monitor costs one thread-local load and a branch. Under
//! a monitor, the stack and the per-stage counters live on the owner thread ([`Owner`])
//! and take no lock: the stack is published through atomics for the sampler, and the
//! counters are merged into the shared records at most about once a millisecond, when
//! a stage boundary needs a fresh reading of the parent anyway.

use crate::monitor::Shared;
use crate::stage::{Stage, StageName};
use std::cell::{Cell, RefCell, RefMut};
use std::ptr;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

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
#[inline(always)]
pub fn enter(name: &'static str) -> Stage {
    let shared = active();
    if shared.is_null() {
        return Stage::inert();
    }
    enter_active(shared, name)
}

// Kept out of line so that the check above stays small enough to inline at every call site.
#[inline(never)]
fn enter_active(shared: *const Shared, name: &'static str) -> Stage {
    // SAFETY: as in `with_active`: the monitor keeps `shared` alive while it is active.
    unsafe { &*shared }.enter(StageName::Borrowed(name))
}

/// One open call on the stack (or one poll of an async stage).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Frame {
    pub(crate) record: u32,
    pub(crate) seq: u64,
    /// Raw clock ticks at entry; [`POLL`] for the frame of one poll of an async stage.
    pub(crate) entered: u64,
    /// The `type_name` of the `Err` this call returned, set just before it closes.
    pub(crate) error: Option<&'static str>,
}

/// `Frame::entered` of a poll frame, whose call is timed apart.
pub(crate) const POLL: u64 = u64::MAX;

/// Counts of one stage path not yet merged into the shared record; times in raw ticks.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Delta {
    pub(crate) calls: u64,
    pub(crate) completed: u64,
    pub(crate) wall_ticks: u64,
    pub(crate) min_ticks: u64,
    pub(crate) max_ticks: u64,
    /// A reused boundary reading fell in this stage since the last merge.
    pub(crate) saw_boundary: bool,
    dirty: bool,
}

impl Delta {
    const CLEAN: Delta = Delta {
        calls: 0,
        completed: 0,
        wall_ticks: 0,
        min_ticks: u64::MAX,
        max_ticks: 0,
        saw_boundary: false,
        dirty: false,
    };
}

/// The tree of stage paths as the owner thread looks them up.
#[derive(Debug)]
pub(crate) struct Node {
    name: StageName,
    children: Vec<u32>,
    /// The shared record has seen this path complete (its first completion is logged).
    pub(crate) completed_once: bool,
}

/// State only the monitor's own thread touches: the stack, the path lookup, and the
/// counters since the last merge.
#[derive(Debug)]
pub(crate) struct Owner {
    pub(crate) stack: Vec<Frame>,
    pub(crate) nodes: Vec<Node>,
    roots: Vec<u32>,
    /// The last lookup, `(parent, name address, name length, record)`: a hot stage
    /// called again and again at one depth finds its record without a scan.
    last_found: (Option<u32>, usize, usize, u32),
    pub(crate) deltas: Vec<Delta>,
    pub(crate) dirty: Vec<u32>,
    next_seq: u64,
    /// Raw ticks of the newest parent reading this thread knows of.
    pub(crate) boundary_at: u64,
    pub(crate) ended: bool,
}

impl Owner {
    pub(crate) fn new() -> Owner {
        Owner {
            stack: Vec::with_capacity(32),
            nodes: Vec::new(),
            roots: Vec::new(),
            last_found: (None, 0, 0, 0),
            deltas: Vec::new(),
            dirty: Vec::new(),
            next_seq: 1,
            boundary_at: 0,
            ended: false,
        }
    }

    pub(crate) fn take_seq(&mut self) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }

    /// Pushes a frame, publishes it, and returns its sequence number.
    #[inline]
    pub(crate) fn push_frame(&mut self, record: u32, entered: u64, published: &Published) -> u64 {
        let seq = self.take_seq();
        self.stack.push(Frame {
            record,
            seq,
            entered,
            error: None,
        });
        published.publish(&self.stack, self.stack.len() - 1);
        seq
    }

    /// Removes the frame `seq` (the top one, unless guards were dropped out of order).
    #[inline]
    pub(crate) fn remove_frame(&mut self, seq: u64, published: &Published) -> Option<Frame> {
        let index = match self.stack.last() {
            Some(top) if top.seq == seq => self.stack.len() - 1,
            _ => self.stack.iter().rposition(|frame| frame.seq == seq)?,
        };
        let frame = self.stack.remove(index);
        published.publish(&self.stack, index);
        Some(frame)
    }

    /// The record of `name` under `parent`, if this path was seen before.
    #[inline]
    pub(crate) fn find(&mut self, parent: Option<u32>, name: &StageName) -> Option<u32> {
        // `#[monitored]` names are one `&'static str` per call site: compare addresses first.
        // Only a `'static` name's address stands for its text; an owned one may be freed
        // and its address reused by other text.
        let key = (parent, name.as_ptr() as usize, name.len());
        let is_static = matches!(name, StageName::Borrowed(_));
        let (last_parent, last_ptr, last_len, last_id) = self.last_found;
        if is_static && (last_parent, last_ptr, last_len) == key {
            return Some(last_id);
        }
        let name: &str = name;
        let siblings = match parent {
            Some(parent) => &self.nodes[parent as usize].children,
            None => &self.roots,
        };
        let id = siblings.iter().rev().copied().find(|&id| {
            let known: &str = &self.nodes[id as usize].name;
            ptr::eq(known, name) || known == name
        })?;
        if is_static {
            self.last_found = (key.0, key.1, key.2, id);
        }
        Some(id)
    }

    /// Records the error of the open call `seq`.
    pub(crate) fn set_error(&mut self, seq: u64, type_name: &'static str) {
        if let Some(frame) = self.stack.iter_mut().rev().find(|frame| frame.seq == seq) {
            frame.error = Some(type_name);
        }
    }

    pub(crate) fn add_node(&mut self, parent: Option<u32>, name: StageName) -> u32 {
        let id = self.nodes.len() as u32;
        self.nodes.push(Node {
            name,
            children: Vec::new(),
            completed_once: false,
        });
        self.deltas.push(Delta::CLEAN);
        match parent {
            Some(parent) => self.nodes[parent as usize].children.push(id),
            None => self.roots.push(id),
        }
        id
    }

    #[inline]
    pub(crate) fn delta(&mut self, record: u32) -> &mut Delta {
        let delta = &mut self.deltas[record as usize];
        if !delta.dirty {
            delta.dirty = true;
            self.dirty.push(record);
        }
        delta
    }

    /// Takes the counters to merge, leaving them clean.
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = (u32, Delta)> + '_ {
        let deltas = &mut self.deltas;
        self.dirty.drain(..).map(move |id| {
            (
                id,
                std::mem::replace(&mut deltas[id as usize], Delta::CLEAN),
            )
        })
    }
}

/// The [`Owner`] of a monitor. Only the thread whose active slot holds the monitor
/// borrows it: stage guards and polls check the slot, and `Monitor` is neither `Send`
/// nor `Sync`, so its methods run there too.
pub(crate) struct OwnerCell(RefCell<Owner>);

// SAFETY: see the type's docs: every borrow happens on the one owner thread.
unsafe impl Sync for OwnerCell {}

impl OwnerCell {
    pub(crate) fn new() -> OwnerCell {
        OwnerCell(RefCell::new(Owner::new()))
    }

    #[inline]
    pub(crate) fn borrow(&self) -> RefMut<'_, Owner> {
        self.0.borrow_mut()
    }

    /// For drop paths, which must not panic while a panic unwinds.
    #[inline]
    pub(crate) fn try_borrow(&self) -> Option<RefMut<'_, Owner>> {
        self.0.try_borrow_mut().ok()
    }
}

/// Deepest stack level the sampler sees; deeper frames count toward the levels above.
const PUBLISHED_DEPTH: usize = 128;

/// The owner's stack as other threads see it: the sampler (which stages a sample
/// counts toward) and summaries (how long the open calls have run).
pub(crate) struct Published {
    depth: AtomicUsize,
    records: Box<[AtomicU32]>,
    entered: Box<[AtomicU64]>,
}

impl Published {
    pub(crate) fn new() -> Published {
        Published {
            depth: AtomicUsize::new(0),
            records: (0..PUBLISHED_DEPTH).map(|_| AtomicU32::new(0)).collect(),
            entered: (0..PUBLISHED_DEPTH).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Publishes `stack[from..]` and the new depth.
    #[inline]
    pub(crate) fn publish(&self, stack: &[Frame], from: usize) {
        let depth = stack.len().min(PUBLISHED_DEPTH);
        for (i, frame) in stack.iter().enumerate().take(depth).skip(from) {
            self.records[i].store(frame.record, Ordering::Relaxed);
            self.entered[i].store(frame.entered, Ordering::Relaxed);
        }
        self.depth.store(depth, Ordering::Release);
    }

    /// The published frames, outermost first, as `(record, entered)`.
    pub(crate) fn read(&self) -> Vec<(u32, u64)> {
        let depth = self.depth.load(Ordering::Acquire);
        (0..depth)
            .map(|i| {
                (
                    self.records[i].load(Ordering::Relaxed),
                    self.entered[i].load(Ordering::Relaxed),
                )
            })
            .collect()
    }
}
