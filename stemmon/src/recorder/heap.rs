//! Heap per stage (the book's `heap.md`): what each stage allocated and freed, from the counters
//! `stemmon::Alloc` keeps per thread ([`crate::heap::slots`]).
//!
//! - A frame (a sync call, or one poll of an async call) notes its thread's counters
//!   at entry and takes the difference at exit, into the thread's delta of the stage;
//!   a merge adds it to the record. Peaks use the nested-peak trick: at entry the
//!   thread's peak is saved and lowered to its current net; at exit the call's peak is
//!   `peak − net at entry`, and the saved peak is restored (the higher of the two), so
//!   a call's peak is exact on its thread and includes its children's.
//! - A thread's outermost frame also counts toward the stages its record nests under
//!   on other threads (fork-join, the book's `guide/threads.md`): stages are inclusive.
//! - What a thread does with no frame open (a rayon worker running a closure of
//!   `fit`) is swept: at every fresh boundary reading (at most about once per
//!   `BOUNDARY_REUSE_NANOS`), every sample and the end, each thread's counts since the
//!   last sweep count toward the stages open on the monitor's own thread then. That
//!   is the granularity: an allocation on such a thread counts toward the stage open
//!   on the monitor's thread at the next sweep. Its peak there is the highest net the
//!   thread reached since that stage first got its counts, as far as the thread's
//!   own peak and the sweeps saw it. A monitor of its own thread only
//!   (`current_thread_only`) sweeps nothing.
//! - A stage's `peak_heap_bytes` is the sum, over threads, of each thread's highest:
//!   exact on one thread, an upper bound across several.
//! - The engine's own allocations on a user thread fall mostly outside the frames
//!   (the entry is noted after the boundary reading, the exit before the merge); the
//!   monitor's own thread is never charged.

use super::owned::OwnedGuard;
use super::records::Records;
use super::tally::{HeapDelta, HeapMark, NONE};
use super::thread::{take_at, Frame, ThreadState};
use super::timeline::Timeline;
use crate::heap::slots::{self, Counts, Slot};
use crate::report::{HeapReport, StageReport, TimelinePoint};

/// The reason the heap figures are `null`.
const MISSING: &str = "stemmon::Alloc is not the global allocator";

/// Notes the heap counters at the entry of the frame now on top of `thread`'s stack;
/// `swept` tells whether sweeps read the thread (all but the monitor's own).
#[inline]
pub(super) fn entered(thread: &mut ThreadState, swept: bool) {
    // Without `stemmon::Alloc`, one load: nothing else is read.
    let Some((index, slot)) = slots::this_thread() else {
        return;
    };
    let bottom = thread.stack.len() == 1;
    let Some(top) = thread.stack.last() else {
        return;
    };
    let seq = top.seq;
    // Room first: the list's growth is the engine's heap, not the call's.
    thread.heap_marks.reserve(1);
    let tells_sweeps = bottom && swept;
    if tells_sweeps {
        slot.stage_opened();
    }
    let at = slot.counts();
    let saved_peak = slot.peak();
    slot.set_peak(at.net());
    let mark = HeapMark {
        slot: Some(slot),
        index,
        at,
        saved_peak,
        tells_sweeps,
    };
    thread.heap_marks.push((seq, mark));
}

/// Counts the heap of `frame`, just taken off `thread`'s stack, into its stage.
#[inline]
pub(super) fn exited(thread: &mut ThreadState, frame: &Frame) {
    if thread.heap_marks.is_empty() {
        return;
    }
    let marks = &thread.heap_marks;
    let Some(at) = marks.iter().rposition(|(seq, _)| *seq == frame.seq) else {
        return;
    };
    let (_, mark) = take_at(&mut thread.heap_marks, at);
    let mark = &mark;
    let Some(slot) = mark.slot else {
        return;
    };
    let index = mark.index;
    let counts = slot.counts().since(&mark.at);
    let peak = slot.peak();
    let call_peak = peak.saturating_sub(mark.at.net()).max(0) as u64;
    slot.set_peak(peak.max(mark.saved_peak));
    if mark.tells_sweeps {
        slot.stage_closed(&counts);
    }
    let bottom = thread.stack.is_empty();
    let delta = &mut thread.delta(frame.record).heap;
    delta.slot = index;
    delta.counts = delta.counts.plus(&counts);
    delta.peak = delta.peak.max(call_peak);
    delta.outermost |= bottom;
}

/// Merges a thread's heap delta of record `id` (its ancestors get its outermost
/// frames' counts).
pub(super) fn merge(records: &mut Records, id: u32, delta: &HeapDelta) {
    if delta.slot == NONE {
        return;
    }
    let record = records.get_mut(id);
    record.heap.add(&delta.counts, delta.slot, delta.peak);
    if delta.outermost {
        let parent = record_parent(records, id);
        charge_ancestors(records, parent, &delta.counts, delta.slot, delta.peak);
    }
}

fn record_parent(records: &Records, id: u32) -> Option<u32> {
    records.get(id).parent
}

/// Charges `counts` to `first` and every ancestor of it.
fn charge_ancestors(
    records: &mut Records,
    first: Option<u32>,
    counts: &Counts,
    slot: u32,
    peak: u64,
) {
    let mut next = first;
    while let Some(id) = next {
        let record = records.get_mut(id);
        record.heap.add(counts, slot, peak);
        next = record.parent;
    }
}

/// What a call still open has counted so far: its record, whether it is its thread's
/// outermost frame, its counts and its net since entry.
pub(super) type OpenHeap = (u32, bool, Counts);

/// The heap counts of every frame open now on the threads `held`, for a snapshot.
pub(super) fn open_heap_of(held: &[OwnedGuard<'_, ThreadState>]) -> Vec<OpenHeap> {
    let mut open = Vec::new();
    if !slots::installed() {
        return open;
    }
    for thread in held {
        let outermost = thread.stack.first().map(|frame| frame.seq);
        for (seq, mark) in &thread.heap_marks {
            let (Some(heap), Some(frame)) =
                (mark.slot, thread.stack.iter().find(|f| f.seq == *seq))
            else {
                continue;
            };
            let counts = heap.counts().since(&mark.at);
            open.push((frame.record, outermost == Some(*seq), counts));
        }
    }
    open
}

/// Adds what open calls counted so far to their stages' figures (their ancestors' too
/// for a thread's outermost frame): a stage open for minutes shows its heap before it
/// closes. The peak so far is at least the net since entry.
pub(super) fn add_open(stages: &mut [StageReport], open: &[OpenHeap]) {
    for &(record, outermost, counts) in open {
        let mut next = Some(record);
        while let Some(id) = next {
            let Some(stage) = stages.get_mut(id as usize) else {
                break;
            };
            let h = &mut stage.heap;
            let add = |figure: &mut Option<u64>, n: u64| *figure = figure.map(|f| f + n);
            add(&mut h.heap_allocations, counts.allocations);
            add(&mut h.heap_allocated_bytes, counts.allocated);
            add(&mut h.heap_freed_bytes, counts.freed);
            h.heap_retained_bytes = h.heap_retained_bytes.map(|r| r + counts.net());
            let net = counts.net().max(0) as u64;
            h.peak_heap_bytes = h.peak_heap_bytes.map(|p| p.max(net));
            next = if outermost { stage.parent_id } else { None };
        }
    }
}

/// One thread's counts as the last sweep saw them.
#[derive(Clone, Copy, Debug, Default)]
struct Seen {
    /// Its counts with no frame open (`None`: not read yet, whatever came before the
    /// first reading is not charged).
    unstaged: Option<Counts>,
    /// Its net, and its peak counter, then.
    net: i64,
    peak: i64,
    /// The record last charged, and the net when it first was.
    charged: Option<u32>,
    net_at_charged: i64,
}

impl Seen {
    /// A slot read with these figures, nothing charged from it yet.
    fn read(unstaged: Counts, net: i64, peak: i64) -> Seen {
        Seen {
            unstaged: Some(unstaged),
            net,
            peak,
            ..Seen::default()
        }
    }

    /// `slot` as it is now, nothing charged from it yet; `None` while a frame is open.
    fn now(slot: &Slot) -> Option<Seen> {
        let (unstaged, net) = slot.unstaged()?;
        Some(Seen::read(unstaged, net, slot.peak()))
    }
}

/// The sweeps' memory of every thread, and the process's totals.
#[derive(Debug, Default)]
pub(crate) struct HeapSweep {
    seen: Vec<Seen>,
    /// How many slots were claimed at the start.
    at_start: usize,
    /// The monitor's own thread's slot: its allocations with no stage open are the
    /// workflow's.
    owner: Option<u32>,
    /// The process's counts when the monitor started.
    start: Counts,
    /// The highest live heap at any sweep.
    peak_live: u64,
}

impl HeapSweep {
    /// Called on the monitor's own thread at its start: what came before is no one's.
    pub(super) fn new() -> HeapSweep {
        let owner = slots::this_thread().map(|(index, _)| index);
        let mut sweep = HeapSweep {
            owner,
            ..HeapSweep::default()
        };
        let claimed = slots::claimed();
        sweep.seen.resize(claimed.len(), Seen::default());
        for (seen, slot) in sweep.seen.iter_mut().zip(claimed) {
            sweep.start = sweep.start.plus(&slot.counts());
            if let Some(now) = Seen::now(slot) {
                *seen = now;
            }
        }
        // Slots claimed later start from zero: everything they count is new.
        sweep.at_start = claimed.len();
        sweep.start = sweep.start.plus(&slots::shared());
        sweep
    }

    /// Totals of every thread now: all counts, and the live heap.
    /// The whole process's live heap now, where `stemmon::Alloc` counts it.
    pub(super) fn live_now(&self) -> Option<u64> {
        slots::allocator().map(|_| self.totals().1.max(0) as u64)
    }

    fn totals(&self) -> (Counts, i64) {
        let all = slots::claimed()
            .iter()
            .fold(slots::shared(), |sum, slot| sum.plus(&slot.counts()));
        (all, all.net())
    }
}

impl HeapSweep {
    /// Charges what threads with no frame open counted since the last sweep to
    /// `owner_record` and its ancestors in `records` (`None`: nobody; the stages open
    /// on the monitor's own thread, or a call closing there, which sweeps for itself);
    /// keeps the live heap's peak and raises `timeline`'s newest point, at `elapsed()`
    /// seconds (read only where `stemmon::Alloc` counts), to it. `others`: the monitor covers threads beyond its own. Under the
    /// state lock.
    pub(super) fn sweep(
        &mut self,
        records: &mut Records,
        timeline: &mut Timeline,
        elapsed: impl FnOnce() -> f64,
        owner_record: Option<u32>,
        others: bool,
    ) {
        if !slots::installed() {
            return;
        }
        let heap = self;
        let claimed = slots::claimed();
        let known = heap.at_start;
        if heap.seen.len() < claimed.len() {
            heap.seen.resize(claimed.len(), Seen::default());
        }
        // A monitor of its own thread only covers no other thread: nothing to sweep.
        for (index, slot) in claimed.iter().enumerate().filter(|_| others) {
            let seen = &mut heap.seen[index];
            if slot.is_own() || heap.owner == Some(index as u32) {
                // Never charged, but kept seen: a slot is handed on when its thread
                // exits (heap/slots.rs), and the thread that takes it (a sampler's, once
                // its monitor ended) is charged from then, not for the last owner's.
                if let Some(now) = Seen::now(slot) {
                    *seen = now;
                }
                continue;
            }
            let Some((unstaged, net)) = slot.unstaged() else {
                continue;
            };
            let base = match seen.unstaged {
                Some(base) => base,
                // Read for the first time: a slot claimed before the start was
                // unreadable then, and what it did before now is not charged.
                None if index < known => {
                    *seen = Seen::read(unstaged, net, slot.peak());
                    continue;
                }
                None => Counts::default(),
            };
            let counts = unstaged.since(&base);
            let peak = slot.peak();
            // A new high since the last sweep moved the peak: up, or down where the slot
            // was handed on to a new thread, whose peak starts from its net.
            let highest = if peak != seen.peak {
                peak.max(net)
            } else {
                net
            };
            if seen.charged != owner_record {
                seen.charged = owner_record;
                seen.net_at_charged = seen.net;
            }
            let rise = highest.saturating_sub(seen.net_at_charged).max(0) as u64;
            *seen = Seen {
                unstaged: Some(unstaged),
                net,
                peak,
                ..*seen
            };
            if counts != Counts::default() {
                charge_ancestors(records, owner_record, &counts, index as u32, rise);
            }
        }
        let (_, live) = heap.totals();
        let live = live.max(0) as u64;
        heap.peak_live = heap.peak_live.max(live);
        let elapsed = elapsed();
        timeline.raise_last({
            let mut built = TimelinePoint::default();
            built.elapsed_seconds = elapsed;
            built.end_seconds = elapsed;
            built.heap_live_bytes = Some(live);
            built.samples = 0;
            built
        });
    }

    /// The report's `heap`.
    pub(super) fn report(&self) -> HeapReport {
        let Some(inner) = slots::allocator() else {
            return {
                let mut built = HeapReport::default();
                built.missing = Some(MISSING.to_owned());
                built
            };
        };
        let (all, live) = self.totals();
        let since = all.since(&self.start);
        let live = live.max(0) as u64;
        {
            let mut built = HeapReport::default();
            built.allocator = Some(format!("stemmon::Alloc<{inner}>"));
            built.allocations = Some(since.allocations);
            built.allocated_bytes = Some(since.allocated);
            built.live_bytes = Some(live);
            built.peak_live_bytes = Some(self.peak_live.max(live));
            built.missing = None;
            built
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recorder::tally::HeapStats;
    use std::borrow::Cow;

    fn counts(allocations: u64, allocated: u64, freed: u64) -> Counts {
        Counts {
            allocations,
            allocated,
            freed,
        }
    }

    #[test]
    fn an_outermost_frame_counts_toward_its_ancestors_and_peaks_add_up_per_thread() {
        let mut records = Records::default();
        let fit = records.find_or_add(None, &Cow::Borrowed("fit"), 0.0);
        let chunk = records.find_or_add(Some(fit), &Cow::Borrowed("chunk"), 0.0);
        // The monitor's thread (slot 0) in `fit` itself; two workers (slots 1, 2) in
        // `fit/chunk` with nothing else open on them.
        let own = HeapDelta {
            slot: 0,
            counts: counts(1, 100, 0),
            peak: 100,
            ..HeapDelta::CLEAN
        };
        merge(&mut records, fit, &own);
        for (slot, peak) in [(1, 40), (2, 60), (1, 30)] {
            let worker = HeapDelta {
                slot,
                counts: counts(2, peak, peak),
                peak,
                outermost: true,
            };
            merge(&mut records, chunk, &worker);
        }
        let (fit, chunk) = (&records.get(fit).heap, &records.get(chunk).heap);
        assert_eq!(chunk.counts, counts(6, 130, 130));
        assert_eq!(fit.counts, counts(7, 230, 130));
        // Each thread's highest, summed: an upper bound across threads.
        let sum = |stats: &HeapStats| stats.peaks.iter().map(|(_, p)| p).sum::<u64>();
        assert_eq!(sum(chunk), 40 + 60);
        assert_eq!(sum(fit), 100 + 40 + 60);
        // Nothing counted (no `stemmon::Alloc`): nothing merged.
        let mut records = Records::default();
        let id = records.find_or_add(None, &Cow::Borrowed("x"), 0.0);
        merge(&mut records, id, &HeapDelta::CLEAN);
        assert!(records.get(id).heap.peaks.is_empty());
    }
}
