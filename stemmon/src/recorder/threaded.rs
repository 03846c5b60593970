//! The measurement of thread counters in the engine (the heap: the book's `heap.md` and
//! `architecture.md`): what each thread counted in its own counters, charged to the
//! stages it ran. Nothing here knows what the counters count (allocations, bytes): the
//! measurement gives the table of every thread's counters ([`Threads`]) and turns a
//! record's counts into its figures.
//!
//! - A frame (a sync call, or one poll of an async call) notes its thread's counters
//!   at entry and takes the difference at exit, into the thread's delta of the stage;
//!   a merge adds it to the record. Peaks use the nested-peak trick: at entry the
//!   thread's peak is saved and lowered to its current level; at exit the call's peak
//!   is `peak − level at entry`, and the saved peak is restored (the higher of the
//!   two), so a call's peak is exact on its thread and includes its children's.
//! - A thread's outermost frame also counts toward the stages its record nests under
//!   on other threads (fork-join, the book's `guide/threads.md`): stages are inclusive.
//! - What a thread does with no frame open (a rayon worker running a closure of
//!   `fit`) is swept: at every fresh boundary reading (at most about once per
//!   `BOUNDARY_REUSE_NANOS`), every sample and the end, each thread's counts since the
//!   last sweep count toward the stages open on the monitor's own thread then. That
//!   is the granularity: a count on such a thread counts toward the stage open on the
//!   monitor's thread at the next sweep. Its peak there is the highest level the
//!   thread reached since that stage first got its counts, as far as the thread's own
//!   peak and the sweeps saw it. A monitor of its own thread only
//!   (`current_thread_only`) sweeps nothing.
//! - A stage's peak is the sum, over threads, of each thread's highest: exact on one
//!   thread, an upper bound across several.
//! - The engine's own allocations on a user thread fall mostly outside the frames
//!   (the entry is noted after the boundary reading, the exit before the merge); the
//!   monitor's own thread is never charged.

use super::owned::OwnedGuard;
use super::records::Records;
use super::tally::{SlotDelta, SlotMark, SlotTally, NONE};
use super::thread::{take_at, Frame, ThreadState};
use super::timeline::Timeline;
use crate::report::{StageReport, TimelinePoint};
use crate::sources::{Counts, Growth, Measurement, Slot, Threads};

/// Notes the thread's counters at the entry of the frame now on top of `thread`'s
/// stack, where `threads` has some for it; `swept` tells whether sweeps read the thread
/// (all but the monitor's own).
#[inline]
pub(super) fn entered(thread: &mut ThreadState, swept: bool, threads: Option<Threads>) {
    // Without a table (no `stemmon::Alloc`), one branch: nothing else is read.
    let Some((index, slot)) = threads.and_then(|threads| (threads.this_thread)()) else {
        return;
    };
    let bottom = thread.stack.len() == 1;
    let Some(top) = thread.stack.last() else {
        return;
    };
    let seq = top.seq;
    // Room first: the list's growth is the engine's heap, not the call's.
    thread.slot_marks.reserve(1);
    let tells_sweeps = bottom && swept;
    if tells_sweeps {
        slot.stage_opened();
    }
    let at = slot.counts();
    let saved_peak = slot.peak();
    slot.set_peak(at.net());
    let mark = SlotMark {
        slot: Some(slot),
        index,
        at,
        saved_peak,
        tells_sweeps,
    };
    thread.slot_marks.push((seq, mark));
}

/// Counts the thread's counters of `frame`, just taken off `thread`'s stack, into its
/// stage.
#[inline]
pub(super) fn exited(thread: &mut ThreadState, frame: &Frame) {
    if thread.slot_marks.is_empty() {
        return;
    }
    let marks = &thread.slot_marks;
    let Some(at) = marks.iter().rposition(|(seq, _)| *seq == frame.seq) else {
        return;
    };
    let (_, mark) = take_at(&mut thread.slot_marks, at);
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
    let delta = &mut thread.delta(frame.record).slots;
    delta.slot = index;
    delta.counts = delta.counts.plus(&counts);
    delta.peak = delta.peak.max(call_peak);
    delta.outermost |= bottom;
}

/// Merges a thread's delta of record `id` (its ancestors get its outermost frames'
/// counts).
pub(super) fn merge(records: &mut Records, id: u32, delta: &SlotDelta) {
    if delta.slot == NONE {
        return;
    }
    let record = records.get_mut(id);
    record.slots.add(&delta.counts, delta.slot, delta.peak);
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
        record.slots.add(counts, slot, peak);
        next = record.parent;
    }
}

/// What a call still open has counted so far: its record, whether it is its thread's
/// outermost frame, its counts since entry.
pub(super) type OpenSlots = (u32, bool, Counts);

/// The counts of every frame open now on the threads `held`, for a snapshot.
pub(super) fn open_of(held: &[OwnedGuard<'_, ThreadState>]) -> Vec<OpenSlots> {
    let mut open = Vec::new();
    for thread in held {
        let outermost = thread.stack.first().map(|frame| frame.seq);
        for (seq, mark) in &thread.slot_marks {
            let (Some(slot), Some(frame)) =
                (mark.slot, thread.stack.iter().find(|f| f.seq == *seq))
            else {
                continue;
            };
            let counts = slot.counts().since(&mark.at);
            open.push((frame.record, outermost == Some(*seq), counts));
        }
    }
    open
}

/// What open calls counted so far, per record of `records` (its ancestors' too for a
/// thread's outermost frame): their counts, and the highest level any rose to above
/// its entry (a stage's peak so far is at least that). Empty where none is open.
pub(super) fn open_by_record(records: &Records, open: &[OpenSlots]) -> Vec<(Counts, u64)> {
    let mut by_record = Vec::new();
    if open.is_empty() {
        return by_record;
    }
    by_record.resize(records.list.len(), (Counts::default(), 0));
    for &(record, outermost, counts) in open {
        let mut next = Some(record);
        while let Some(id) = next {
            let Some((sum, high)) = by_record.get_mut(id as usize) else {
                break;
            };
            *sum = sum.plus(&counts);
            *high = (*high).max(counts.net().max(0) as u64);
            next = if outermost {
                records.get(id).parent
            } else {
                None
            };
        }
    }
    by_record
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

/// The engine's measurement of thread counters, if it has one, its table of every
/// thread's counters (where it counts), and the sweeps' memory of every thread.
#[derive(Default)]
pub(crate) struct Threaded {
    measurement: Option<Box<dyn Measurement>>,
    threads: Option<Threads>,
    seen: Vec<Seen>,
    /// How many threads' counters were claimed at the start.
    at_start: usize,
    /// The monitor's own thread's counters: what it counts with no stage open is the
    /// workflow's.
    owner: Option<u32>,
}

impl std::fmt::Debug for Threaded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = self.measurement.as_ref().map(|m| m.declared().name);
        f.debug_struct("Threaded")
            .field("measurement", &name)
            .field("counting", &self.threads.is_some())
            .finish_non_exhaustive()
    }
}

impl Threaded {
    /// Holds `measurement`, which has thread counters; called on the monitor's own
    /// thread at its start: what came before is no one's.
    pub(super) fn of(measurement: Box<dyn Measurement>) -> Threaded {
        let threads = measurement.threads();
        let mut threaded = Threaded {
            measurement: Some(measurement),
            threads,
            ..Threaded::default()
        };
        let Some(threads) = threads else {
            return threaded;
        };
        threaded.owner = (threads.this_thread)().map(|(index, _)| index);
        let claimed = (threads.claimed)();
        threaded.seen.resize(claimed.len(), Seen::default());
        for (seen, slot) in threaded.seen.iter_mut().zip(claimed) {
            if let Some(now) = Seen::now(slot) {
                *seen = now;
            }
        }
        // Counters claimed later start from zero: everything they count is new.
        threaded.at_start = claimed.len();
        threaded
    }

    /// The table of every thread's counters, where the measurement counts.
    pub(super) fn threads(&self) -> Option<Threads> {
        self.threads
    }

    /// The level of every thread's counters together now (the live heap), for a log
    /// line.
    pub(super) fn level(&self) -> Option<u64> {
        self.measurement.as_ref()?.level()
    }

    /// Writes the figures of `tally` into `stage`, with what its open calls counted so
    /// far (`open`: their counts and highest level above entry); `figures` is a buffer
    /// to reuse (a snapshot writes every stage's).
    pub(super) fn stage(
        &self,
        tally: &SlotTally,
        open: Option<&(Counts, u64)>,
        wall_seconds: f64,
        stage: &mut StageReport,
        figures: &mut Vec<Option<f64>>,
    ) {
        let (Some(measurement), Some(_)) = (&self.measurement, self.threads) else {
            return;
        };
        let (mut counts, mut peak) = (tally.counts, tally.peak());
        if let Some((open, high)) = open {
            counts = counts.plus(open);
            peak = peak.max(*high);
        }
        let growth = Growth {
            counters: &counts.values(),
            peak,
            ..Growth::default()
        };
        measurement.figures(&growth, wall_seconds, figures);
        for (field, value) in measurement.declared().fields.iter().zip(figures.iter()) {
            if field.is_key() {
                field.set(stage, *value);
            }
        }
    }

    /// The measurement's section as it is now into `extra`.
    pub(super) fn section_into(&mut self, extra: &mut super::extra::Extra) {
        let Some(measurement) = self.measurement.as_mut() else {
            return;
        };
        if let Some(value) = measurement.section() {
            extra.section(measurement.declared(), value);
        }
    }

    /// Charges what threads with no frame open counted since the last sweep to
    /// `owner_record` and its ancestors in `records` (`None`: nobody; the stages open
    /// on the monitor's own thread, or a call closing there, which sweeps for itself);
    /// raises `timeline`'s newest point, at `elapsed()` seconds (read only where the
    /// measurement counts), to its series now. `others`: the monitor covers threads
    /// beyond its own. Under the state lock.
    pub(super) fn sweep(
        &mut self,
        records: &mut Records,
        timeline: &mut Timeline,
        elapsed: impl FnOnce() -> f64,
        owner_record: Option<u32>,
        others: bool,
    ) {
        let (Some(threads), Some(measurement)) = (self.threads, self.measurement.as_mut()) else {
            return;
        };
        let claimed = (threads.claimed)();
        let known = self.at_start;
        if self.seen.len() < claimed.len() {
            self.seen.resize(claimed.len(), Seen::default());
        }
        // A monitor of its own thread only covers no other thread: nothing to sweep.
        for (index, slot) in claimed.iter().enumerate().filter(|_| others) {
            let seen = &mut self.seen[index];
            if slot.is_own() || self.owner == Some(index as u32) {
                // Never charged, but kept seen: counters are handed on when their
                // thread exits, and the thread that takes them (a sampler's, once its
                // monitor ended) is charged from then, not for the last owner's.
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
                // Read for the first time: counters claimed before the start were
                // unreadable then, and what they did before now is not charged.
                None if index < known => {
                    *seen = Seen::read(unstaged, net, slot.peak());
                    continue;
                }
                None => Counts::default(),
            };
            let counts = unstaged.since(&base);
            let peak = slot.peak();
            // A new high since the last sweep moved the peak: up, or down where the
            // counters were handed on to a new thread, whose peak starts from its level.
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
        let declared = measurement.declared();
        let series = measurement.swept();
        let elapsed = elapsed();
        let mut point = TimelinePoint::default();
        point.elapsed_seconds = elapsed;
        point.end_seconds = elapsed;
        point.samples = 0;
        for (series, value) in declared.series.iter().zip(series) {
            series.set(&mut point, *value);
        }
        timeline.raise_last(point);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;

    fn counts(events: u64, added: u64, removed: u64) -> Counts {
        Counts::of([events, added, removed])
    }

    #[test]
    fn an_outermost_frame_counts_toward_its_ancestors_and_peaks_add_up_per_thread() {
        let mut records = Records::default();
        let fit = records.find_or_add(None, &Cow::Borrowed("fit"), 0.0);
        let chunk = records.find_or_add(Some(fit), &Cow::Borrowed("chunk"), 0.0);
        // The monitor's thread (slot 0) in `fit` itself; two workers (slots 1, 2) in
        // `fit/chunk` with nothing else open on them.
        let own = SlotDelta {
            slot: 0,
            counts: counts(1, 100, 0),
            peak: 100,
            ..SlotDelta::CLEAN
        };
        merge(&mut records, fit, &own);
        for (slot, peak) in [(1, 40), (2, 60), (1, 30)] {
            let worker = SlotDelta {
                slot,
                counts: counts(2, peak, peak),
                peak,
                outermost: true,
            };
            merge(&mut records, chunk, &worker);
        }
        let (fit, chunk) = (&records.get(fit).slots, &records.get(chunk).slots);
        assert_eq!(chunk.counts, counts(6, 130, 130));
        assert_eq!(fit.counts, counts(7, 230, 130));
        // Each thread's highest, summed: an upper bound across threads.
        assert_eq!(chunk.peak(), 40 + 60);
        assert_eq!(fit.peak(), 100 + 40 + 60);
        // Nothing counted (no `stemmon::Alloc`): nothing merged.
        let mut records = Records::default();
        let id = records.find_or_add(None, &Cow::Borrowed("x"), 0.0);
        merge(&mut records, id, &SlotDelta::CLEAN);
        assert!(records.get(id).slots.peaks.is_empty());
    }
}
