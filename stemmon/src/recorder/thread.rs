//! What one thread owns: its stack of open calls, its path lookup, and its counters
//! since the last merge. The thread takes its own slot on every call without a lock
//! (`owned.rs`); nobody else takes it but the sampler and summaries, a few times a
//! second, so a call writes no cache line that another thread writes.

use super::id_map::FastMap;
use super::owned::{Owned, OwnedGuard};
use super::records::StageName;
pub(crate) use super::tally::NO_MARK;
use super::tally::{OpenCall, SlotDelta, SlotMark, Tally, ThreadMarks};
use std::collections::HashMap;

/// One open call on a thread's stack (or one poll of an async stage).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Frame {
    pub(crate) record: u32,
    pub(crate) seq: u32,
    /// Raw clock ticks at entry; [`POLL`] for the frame of one poll of an async stage.
    pub(crate) entered: u64,
    /// Recursive calls (direct or not) folded into this one and still open.
    pub(crate) folded: u32,
    /// Its call recorded an `Err` (kept in `ThreadState::errors`).
    pub(crate) failed: bool,
    /// The address and length of the record's name as this thread knows it (0, 0 if
    /// unknown): the recursion check rejects most frames on these two words alone.
    name: (usize, usize),
    /// The name's bucket in `ThreadState::open_buckets`; `NO_BUCKET` for a poll frame.
    bucket: u8,
    /// The index of this call's entry figures in the thread's CPU marks, shared with
    /// the calls below it that entered with the same ones; [`NO_MARK`] if none.
    pub(crate) mark: u16,
}

/// `Frame::bucket` of a frame not counted in the buckets (a poll frame).
const NO_BUCKET: u8 = u8::MAX;

/// How many buckets the names open on a stack are counted in.
const BUCKETS: usize = 32;

/// The bucket of a name, from its text (the same text, the same bucket, wherever it
/// lives): its length and last byte.
#[inline]
pub(super) fn bucket(name: &str) -> u8 {
    let last = u32::from(name.as_bytes().last().copied().unwrap_or(0));
    ((name.len() as u32 ^ last.wrapping_mul(7)) as usize % BUCKETS) as u8
}

pub(crate) use crate::sources::POLL;

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
    /// The thread counts of its frames (the heap: the book's `heap.md`).
    pub(crate) slots: SlotDelta,
    /// The counters' growth over the calls completed since the last merge.
    pub(crate) counted: Tally,
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
        slots: SlotDelta::CLEAN,
        counted: Tally::ZERO,
        dirty: false,
    };
}

/// The parent key of a top-level stage.
pub(crate) const NO_PARENT: u32 = u32::MAX;

/// A thread's state, behind its slot's lock.
#[derive(Debug, Default)]
pub(crate) struct ThreadState {
    pub(crate) stack: Vec<Frame>,
    /// `(parent, name address, name length) → record` for `'static` names: a
    /// `#[monitored]` name is one `&'static str` per call site.
    by_address: FastMap<(u32, usize, usize), u32>,
    /// `(parent, name) → record` for names built at run time.
    by_name: HashMap<(u32, String), u32>,
    /// The last lookup: a hot stage called again and again finds its record at once.
    last: Option<((u32, usize, usize), u32)>,
    /// Each record's name, as far as this thread has met it (direct recursion checks it).
    names: Vec<Option<StageName>>,
    deltas: Vec<Delta>,
    dirty: Vec<u32>,
    /// Records this thread has merged calls into (each counts it once in `threads`).
    ran: Vec<bool>,
    /// Records this thread has seen complete through the slow path, which logs a first
    /// completion: later completions here may take the fast one.
    completed: Vec<bool>,
    next_seq: u32,
    /// The async calls this thread opened and nobody closed yet, oldest first.
    open_async: Vec<OpenCall>,
    /// The `seq` of the newest of them.
    next_call: u64,
    /// How many frames on the stack have a name in each bucket: a name whose bucket is
    /// empty is open nowhere on the stack, so most calls skip the recursion scan.
    open_buckets: [u32; BUCKETS],
    /// Calls merged so far.
    pub(crate) calls: u64,
    /// This thread's clock and its open calls' entry figures of the counters.
    pub(crate) marks: ThreadMarks,
    /// The errors of open calls, by `seq`, until they close: the `type_name` and the
    /// `Display` text, if any (at most one per frame on the stack).
    errors: Vec<(u32, &'static str, Option<Box<str>>)>,
    /// The thread's counters at the entry of the frames open on the stack, by `seq`,
    /// oldest first; only where a measurement of thread counters counts (the heap, with
    /// `stemmon::Alloc`).
    pub(crate) slot_marks: Vec<(u32, SlotMark)>,
    /// The `tracing` spans this thread handles without the registry.
    pub(super) spans: super::tally::Unregistered,
}

impl ThreadState {
    /// The record of `name` under `parent`, if this thread has met the path.
    #[inline(always)]
    pub(super) fn find(&mut self, parent: u32, name: &StageName) -> Option<u32> {
        if let StageName::Borrowed(text) = name {
            let key = (parent, text.as_ptr() as usize, text.len());
            if let Some((last_key, id)) = self.last {
                if last_key == key {
                    return Some(id);
                }
            }
        }
        self.find_slow(parent, name)
    }

    /// [`ThreadState::find`] past the last lookup: the maps.
    #[inline(never)]
    fn find_slow(&mut self, parent: u32, name: &StageName) -> Option<u32> {
        match name {
            StageName::Borrowed(text) => {
                let key = (parent, text.as_ptr() as usize, text.len());
                let id = *self.by_address.get(&key)?;
                self.last = Some((key, id));
                Some(id)
            }
            StageName::Owned(text) => self.by_name.get(&(parent, text.clone())).copied(),
        }
    }

    /// Remembers that `name` under `parent` is `record`.
    pub(super) fn learn(&mut self, parent: u32, name: &StageName, record: u32) {
        match name {
            StageName::Borrowed(text) => {
                let key = (parent, text.as_ptr() as usize, text.len());
                self.by_address.insert(key, record);
                self.last = Some((key, record));
            }
            StageName::Owned(text) => {
                self.by_name.insert((parent, text.clone()), record);
            }
        }
        let index = record as usize;
        if self.names.len() <= index {
            self.names.resize(index + 1, None);
        }
        self.names[index] = Some(name.clone());
    }

    /// Whether `record` is named `name`.
    #[inline]
    pub(super) fn is_named(&self, record: u32, name: &str) -> bool {
        match self.names.get(record as usize) {
            Some(Some(known)) => std::ptr::eq(known.as_ref(), name) || known == name,
            _ => false,
        }
    }

    /// [`ThreadState::open_named_in`] of `name` in its own bucket.
    #[cfg(test)]
    pub(super) fn open_named(&self, name: &str) -> Option<usize> {
        self.open_named_in(name, bucket(name))
    }

    /// The frame of the open call named `name` (in `bucket`) on this stack, if any,
    /// nearest the top: where a recursive call folds. The search stops at a poll frame
    /// (an async call's stages nest under it, apart from the thread's own calls below).
    /// While recursion folds, the stack holds distinct names, so this stays as shallow
    /// as the program's nesting of distinct stages.
    #[inline]
    pub(super) fn open_named_in(&self, name: &str, bucket: u8) -> Option<usize> {
        if self.open_buckets[bucket as usize] == 0 {
            return None;
        }
        let (address, len) = (name.as_ptr() as usize, name.len());
        for (index, frame) in self.stack.iter().enumerate().rev() {
            if frame.entered == POLL {
                return None;
            }
            // The same `&'static str`, or the same text at another address.
            if frame.name.1 == len && (frame.name.0 == address || self.is_named(frame.record, name))
            {
                return Some(index);
            }
        }
        None
    }

    /// Pushes a frame and returns its sequence number.
    #[inline]
    pub(super) fn push(&mut self, record: u32, entered: u64) -> u32 {
        self.next_seq = self.next_seq.wrapping_add(1);
        let (name, bucket) = match self.names.get(record as usize) {
            Some(Some(name)) if entered != POLL => {
                let bucket = bucket(name);
                self.open_buckets[bucket as usize] += 1;
                ((name.as_ptr() as usize, name.len()), bucket)
            }
            _ => ((0, 0), NO_BUCKET),
        };
        self.push_frame(record, entered, name, bucket)
    }

    /// Pushes a fresh frame (`next_seq` already counted) and returns its `seq`.
    #[inline(always)]
    fn push_frame(&mut self, record: u32, entered: u64, name: (usize, usize), bucket: u8) -> u32 {
        self.stack.push(Frame {
            record,
            seq: self.next_seq,
            entered,
            folded: 0,
            failed: false,
            name,
            bucket,
            mark: NO_MARK,
        });
        self.next_seq
    }

    /// Pushes the frame of a sync call of `record` named `name` (the record's name, in
    /// `bucket`) and returns its sequence number: [`ThreadState::push`] without looking
    /// a `'static` name up again. A name built at run time is the record's own copy's
    /// (the frame keeps its address, which must outlive the call).
    #[inline]
    pub(super) fn push_call(
        &mut self,
        record: u32,
        entered: u64,
        name: &StageName,
        bucket: u8,
    ) -> u32 {
        let StageName::Borrowed(name) = name else {
            return self.push(record, entered);
        };
        self.next_seq = self.next_seq.wrapping_add(1);
        self.open_buckets[bucket as usize] += 1;
        self.push_frame(
            record,
            entered,
            (name.as_ptr() as usize, name.len()),
            bucket,
        )
    }

    /// Opens an async call of `record` at `now` kept by this thread, slot `id`.
    #[inline]
    pub(super) fn open_call(&mut self, record: u32, now: u64, id: u32) -> OpenCall {
        self.next_call += 1;
        let call = OpenCall {
            record,
            seq: self.next_call,
            started: now,
            thread: id,
        };
        self.open_async.push(call);
        call
    }

    /// Forgets the open async call `seq`; false if it is not open here.
    #[inline]
    pub(super) fn close_call(&mut self, seq: u64) -> bool {
        match self.open_async.iter().rposition(|call| call.seq == seq) {
            Some(index) => {
                take_at(&mut self.open_async, index);
                true
            }
            None => false,
        }
    }

    /// The async calls open now that this thread keeps.
    pub(super) fn open_calls(&self) -> impl Iterator<Item = &OpenCall> {
        self.open_async.iter()
    }

    /// Takes the frame at `index` off the stack.
    #[inline]
    pub(super) fn remove_frame(&mut self, index: usize) -> Frame {
        let frame = take_at(&mut self.stack, index);
        if let Some(count) = self.open_buckets.get_mut(frame.bucket as usize) {
            *count = count.saturating_sub(1);
        }
        frame
    }

    /// The frame `seq` (the top one, unless guards were dropped out of order).
    #[inline]
    pub(super) fn position(&self, seq: u32) -> Option<usize> {
        match self.stack.last() {
            Some(top) if top.seq == seq => Some(self.stack.len() - 1),
            _ => self.stack.iter().rposition(|frame| frame.seq == seq),
        }
    }

    /// Whether this thread has closed a call of `record` through the slow path.
    #[inline]
    pub(super) fn has_completed(&self, record: u32) -> bool {
        self.completed
            .get(record as usize)
            .copied()
            .unwrap_or(false)
    }

    /// Notes that a call of `record` closed through the slow path.
    pub(super) fn mark_completed(&mut self, record: u32) {
        let index = record as usize;
        if self.completed.len() <= index {
            self.completed.resize(index + 1, false);
        }
        self.completed[index] = true;
    }

    /// Records the error of the open call `seq`, its type and `Display` text beside the
    /// stack (a frame stays `Copy`) until the call closes.
    pub(super) fn set_error(
        &mut self,
        seq: u32,
        type_name: &'static str,
        message: Option<Box<str>>,
    ) {
        if let Some(index) = self.position(seq) {
            self.stack[index].failed = true;
            self.errors.retain(|(open, _, _)| *open != seq);
            self.errors.push((seq, type_name, message));
        }
    }

    /// The error recorded for the call `seq`, taken: its type and `Display` text.
    pub(super) fn take_error(&mut self, seq: u32) -> Option<(&'static str, Option<Box<str>>)> {
        let at = self.errors.iter().position(|(open, _, _)| *open == seq)?;
        let (_, type_name, message) = self.errors.remove(at);
        Some((type_name, message))
    }

    #[inline(always)]
    pub(super) fn delta(&mut self, record: u32) -> &mut Delta {
        let index = record as usize;
        if index >= self.deltas.len() || !self.deltas[index].dirty {
            self.dirty_delta(record);
        }
        &mut self.deltas[index]
    }

    /// Makes room for `record`'s counters and marks them dirty: the first count since
    /// the last merge.
    #[inline(never)]
    fn dirty_delta(&mut self, record: u32) {
        let index = record as usize;
        if self.deltas.len() <= index {
            self.deltas.resize(index + 1, Delta::CLEAN);
        }
        let delta = &mut self.deltas[index];
        if !delta.dirty {
            delta.dirty = true;
            self.dirty.push(record);
        }
    }

    /// Takes the counters to merge, leaving them clean; `first` tells whether this
    /// thread merges calls into the record for the first time.
    pub(super) fn drain(&mut self, mut each: impl FnMut(u32, Delta, bool)) {
        let dirty = std::mem::take(&mut self.dirty);
        for &id in &dirty {
            let delta = std::mem::replace(&mut self.deltas[id as usize], Delta::CLEAN);
            let index = id as usize;
            if self.ran.len() <= index {
                self.ran.resize(index + 1, false);
            }
            let first = delta.calls > 0 && !std::mem::replace(&mut self.ran[index], true);
            self.calls += delta.calls;
            each(id, delta, first);
        }
        self.dirty = dirty;
        self.dirty.clear();
    }
}

/// Takes the item at `index` (in `list`) out of `list`: the last one, nearly always,
/// popped inline (`Vec::remove` is out of line: it was 12 % of an active call).
#[inline]
pub(super) fn take_at<T>(list: &mut Vec<T>, index: usize) -> T {
    if index + 1 == list.len() {
        list.pop().expect("the index is in the list")
    } else {
        list.remove(index)
    }
}

/// One thread's slot in a recorder: registered at its first stage, kept after it exits.
/// Aligned to its own cache lines, so two threads' slots never share one.
#[derive(Debug)]
#[repr(align(128))]
pub(crate) struct ThreadSlot {
    /// 0 for the thread that started the monitor, then in order of first stage.
    pub(crate) id: u32,
    pub(crate) name: Option<String>,
    /// Taken without a lock by the thread itself, through a mutex by others.
    state: Owned<ThreadState>,
    /// What other threads may read of `state.spans` without taking it.
    pub(super) spans: super::tally::Mirror,
}

impl ThreadSlot {
    pub(super) fn new(id: u32, name: Option<String>) -> ThreadSlot {
        ThreadSlot {
            id,
            name,
            state: Owned::new(ThreadState::default()),
            spans: super::tally::Mirror::default(),
        }
    }

    /// The thread's state: made on the thread itself (`register_thread`), it is taken
    /// there without a lock (the sampler and summaries, a few times a second, make it
    /// step aside) and through a mutex anywhere else.
    #[inline]
    pub(super) fn lock(&self) -> OwnedGuard<'_, ThreadState> {
        self.state.lock()
    }

    /// The state, taken from another thread, and through the mutex on the thread
    /// itself from now on: for a thread whose async calls other threads close (a
    /// tokio worker), which would otherwise cost a barrier at every such close.
    pub(super) fn lock_for_good(&self) -> OwnedGuard<'_, ThreadState> {
        self.state.lock_for_good()
    }

    /// The states of `slots`, in order, with one barrier for all (a sample's or a
    /// snapshot's pass over every thread).
    pub(super) fn lock_all(
        slots: &[std::sync::Arc<ThreadSlot>],
    ) -> Vec<OwnedGuard<'_, ThreadState>> {
        let states: Vec<&Owned<ThreadState>> = slots.iter().map(|slot| &slot.state).collect();
        Owned::lock_all(&states)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_static_name_is_found_by_its_address_and_a_built_one_by_its_text() {
        let mut thread = ThreadState::default();
        let fit: &'static str = "fit";
        thread.learn(NO_PARENT, &StageName::Borrowed(fit), 0);
        thread.learn(0, &StageName::Owned("step".into()), 1);
        assert_eq!(thread.find(NO_PARENT, &StageName::Borrowed(fit)), Some(0));
        assert_eq!(thread.find(0, &StageName::Owned("step".into())), Some(1));
        assert_eq!(
            thread.find(1, &StageName::Owned("step".into())),
            None,
            "other parent"
        );
        // Another `&'static str` with the same text is another call site: looked up in
        // the shared records once, then learned.
        let elsewhere: &'static str = &"xfit"[1..];
        assert_eq!(
            thread.find(NO_PARENT, &StageName::Borrowed(elsewhere)),
            None
        );
        assert!(thread.is_named(0, elsewhere) && thread.is_named(1, "step"));
        assert!(!thread.is_named(2, "fit"));
    }

    #[test]
    fn the_open_name_check_finds_a_name_anywhere_below_a_poll_and_forgets_closed_ones() {
        let mut thread = ThreadState::default();
        let (expr, term): (&'static str, &'static str) = ("expr", "term");
        thread.learn(NO_PARENT, &StageName::Borrowed(expr), 0);
        thread.learn(0, &StageName::Borrowed(term), 1);
        thread.learn(1, &StageName::Owned("level".into()), 2);
        assert_eq!(thread.open_named("expr"), None);
        let outer = thread.push(0, 10);
        thread.push(1, 20);
        thread.push(2, 30);
        // The same text at another address, and a built name, are found too.
        assert_eq!(thread.open_named(&"xexpr"[1..]), Some(0));
        assert_eq!(thread.open_named("level"), Some(2));
        assert_eq!(thread.open_named("exps"), None);
        // A poll frame hides what is below it.
        thread.push(1, POLL);
        assert_eq!(thread.open_named("expr"), None);
        let poll = thread.position(thread.stack.last().unwrap().seq).unwrap();
        thread.remove_frame(poll);
        // Out of order: the outer call closes first.
        let index = thread.position(outer).unwrap();
        thread.remove_frame(index);
        assert_eq!(thread.open_named("expr"), None);
        assert_eq!(thread.open_named("term"), Some(0));
        while !thread.stack.is_empty() {
            thread.remove_frame(0);
        }
        assert!(thread.open_buckets.iter().all(|&count| count == 0));
        assert_eq!(thread.open_named("term"), None);
    }

    #[test]
    fn a_frame_is_found_out_of_order_and_counters_drain_once() {
        let mut thread = ThreadState::default();
        let outer = thread.push(0, 10);
        let inner = thread.push(1, 20);
        assert_eq!(thread.position(outer), Some(0));
        assert_eq!(thread.position(inner), Some(1));
        thread.stack.remove(0);
        assert_eq!(thread.position(outer), None);
        thread.delta(1).calls += 2;
        thread.delta(1).calls += 1;
        let mut drained = Vec::new();
        thread.drain(|id, delta, first| drained.push((id, delta.calls, first)));
        assert_eq!(drained, [(1, 3, true)]);
        thread.delta(1).calls += 1;
        drained.clear();
        thread.drain(|id, delta, first| drained.push((id, delta.calls, first)));
        assert_eq!(
            drained,
            [(1, 1, false)],
            "this thread counts in `threads` once"
        );
        drained.clear();
        thread.drain(|id, delta, first| drained.push((id, delta.calls, first)));
        assert!(drained.is_empty());
        assert_eq!(thread.calls, 4);
    }
}
