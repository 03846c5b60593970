//! Stage-boundary readings: the parent alone, read at a stage's entry and exit (or a
//! reading under 1 ms old reused), with the descendants as last sampled. A fresh
//! reading also closes an interval of the kernel's marks (the book's `exact-peaks.md`),
//! which counts toward every stage that overlapped it, on the call's thread now and on
//! others at the next sample.

use super::stats::{BoundaryInterval, Stats};
use super::{point_of, stats_of};
use crate::memory::{BoundPart, SelfReader, SelfReading, TreeReading};
use crate::report::TimelinePoint;
use crate::sources::{AtBoundary, CallAt, Edge};

/// A reading of the parent alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct ParentReading {
    /// Clock ticks when it was read.
    pub(super) at: u64,
    /// Its RSS then.
    pub(super) rss: u64,
    /// Its mark's place among the readings of it (0: not known).
    pub(super) epoch: u64,
}

/// An interval a fresh boundary reading closed, and when.
#[derive(Clone, Copy, Debug)]
struct Closed {
    /// Clock ticks at the reading that closed it.
    end: u64,
    interval: BoundaryInterval,
}

/// Everything boundary readings need and leave behind.
pub(super) struct Boundary {
    reader: Box<dyn SelfReader>,
    /// The newest reading of the parent.
    latest: Option<ParentReading>,
    /// The live descendants' RSS at that reading, those found exited left out.
    children: Option<u64>,
    /// The tree as last sampled: its descendants and process count.
    last_tree: TreeReading,
    /// Which of `last_tree.descendants` were found exited since the last sample.
    gone: Vec<bool>,
    /// When each of those was found exited, in seconds from the start.
    found: Vec<Option<f64>>,
    /// Their pids with those times, sorted (kept to reuse its capacity).
    departed: Vec<(u32, f64)>,
    /// Every exit comes with its record, as the newest fresh reading says.
    recorded: bool,
    /// Without them, the kernel's figures of reapings of processes no sample read,
    /// as parts for the next sample to widen the intervals since the last one with.
    reaped: Vec<BoundPart>,
    /// Clock ticks at the last reading of the parent's mark, of either kind: where the
    /// interval the next fresh reading closes began (0 before the first: the start).
    mark_at: u64,
    /// Records that saw only a reused reading, each with that reading's mark epoch: the
    /// next interval that a later reading of the mark closes is theirs.
    awaiting: Vec<(u32, u64)>,
    /// The records a fresh reading closes (kept to reuse its capacity).
    closing: Vec<u32>,
    /// Records whose bound waits for the next sample's descendant marks.
    pending: Vec<u32>,
    /// The intervals closed since the last sample, oldest first: the sample gives them
    /// to stages open on other threads meanwhile.
    intervals: Vec<Closed>,
}

impl Boundary {
    /// Nothing read yet; `reader` reads the parent at each fresh boundary.
    pub(super) fn new(reader: Box<dyn SelfReader>) -> Boundary {
        Boundary {
            reader,
            latest: None,
            children: None,
            last_tree: TreeReading::default(),
            gone: Vec::new(),
            found: Vec::new(),
            departed: Vec::new(),
            recorded: false,
            reaped: Vec::new(),
            mark_at: 0,
            awaiting: Vec::new(),
            closing: Vec::new(),
            pending: Vec::new(),
            intervals: Vec::new(),
        }
    }

    /// The latest parent reading with the descendants as last sampled.
    pub(super) fn tree(&self) -> Option<TreeReading> {
        let parent = self.latest?.rss;
        Some(TreeReading {
            parent_rss: Some(parent),
            children_rss: self.children,
            tree_rss: Some(parent + self.children.unwrap_or(0)),
            process_count: self.last_tree.process_count.max(1),
            ..TreeReading::default()
        })
    }

    /// Notes that record `id` saw only a reused reading (of mark epoch `epoch`), whose
    /// interval ended before its call: the next interval to close is the one it
    /// overlaps.
    pub(super) fn await_interval(&mut self, id: u32, stats: &mut Stats, epoch: u64) {
        if !std::mem::replace(&mut stats.awaiting_interval, true) {
            self.awaiting.push((id, epoch));
        }
    }

    /// Takes in a full sample whose reading began at `started`: its descendants
    /// are the ones later boundaries check. Its parent reading is never reused by a
    /// boundary: the sample may have read the parent during a stage that was freeing
    /// its memory (the kernel's figure falls as the pages go), and a stage entered just
    /// after that one exits would take the older, higher figure as its own. Where a
    /// boundary reading ran meanwhile, a descendant the walk read before it exited may
    /// be gone already: each is checked now (its exit was that reading's to count), so
    /// that no later boundary counts it alive.
    pub(super) fn sampled(&mut self, reading: TreeReading, started: u64) {
        let raced = self.latest.is_some_and(|latest| latest.at > started);
        self.children = reading.children_rss;
        self.mark_at = self.mark_at.max(started);
        self.gone.clear();
        self.found.clear();
        self.last_tree = reading;
        if raced && !self.last_tree.descendants.is_empty() {
            let live =
                crate::sys::live_children_rss(&self.last_tree.descendants, &mut self.gone, drop);
            self.children = Some(live.rss);
        }
    }

    /// Takes in the exits a fresh reading tells of (the book's `exact-peaks.md`). A
    /// boundary never counts a descendant that has exited: when a child was reaped or
    /// became a zombie, each last-sampled one is checked. With exit records, no exit
    /// counts here: the next sample counts each from its record, in the intervals its
    /// life overlapped, and the kernel's reaped figure (the largest of the children
    /// reaped since, however many held their memory at once) stays out. Without them,
    /// the descendants found exited count in this interval at their last marks, the
    /// largest raised to the kernel's figure; a reaped process that no sample read may
    /// have lived in any interval since the last sample, so the kernel's figure is a
    /// part for the next sample to widen each of them by; and where more than one
    /// process ended, those beyond the first ended unseen (every one, where the
    /// kernel's maximum is one from before the start: it says nothing of theirs).
    /// Returns whether some last-sampled descendant may be gone, and how many processes
    /// ended unseen; `found_at` is now, in seconds from the start.
    fn count_exits(&mut self, reading: &mut SelfReading, found_at: f64) -> (bool, u32) {
        let changed = reading.children_changed && !self.last_tree.descendants.is_empty();
        let kernel = reading.reaped_at_most;
        let (mut exited, mut marks) = (0, None);
        if changed {
            let descendants = &self.last_tree.descendants;
            let live = self.reader.live_children(descendants, &mut self.gone);
            self.children = Some(live.rss);
            self.found.resize(self.gone.len(), None);
            for (found, gone) in self.found.iter_mut().zip(&self.gone) {
                if *gone && found.is_none() {
                    *found = Some(found_at);
                }
            }
            if reading.hwm.is_some() {
                reading.reaped = reading.reaped.max(live.exited_peak);
            }
            exited = live.exited;
            marks = live.exited_peak.map(|largest| (live.exited_peaks, largest));
        }
        if reading.exits_recorded || reading.hwm.is_none() {
            reading.reaped_at_most = None;
            return (changed, 0);
        }
        // A reaping that no descendant found exited explains is of one no sample read.
        let unsampled = match reading.ended_unsampled {
            Some(ended) if exited == 0 => ended.max(1),
            Some(ended) => ended,
            None => 0,
        };
        // One figure stands for one of them: the kernel's where a child was reaped, and
        // none where it says nothing (its maximum is one from before the start).
        let reaped = reading.ended_unsampled.is_some();
        let covered = u32::from(kernel.is_some() || !reaped);
        let unseen = (exited + unsampled).saturating_sub(covered);
        let departed = marks
            .map(|(sum, largest)| (sum, sum + kernel.map_or(0, |k| k.saturating_sub(largest))));
        reading.reaped_at_most = match (unsampled, kernel) {
            (1.., Some(bytes)) => {
                self.reaped.push(BoundPart {
                    started: None,
                    bytes,
                    gone_by: Some(found_at),
                    ..BoundPart::default()
                });
                departed.map(|(sum, _)| sum)
            }
            _ => departed.map(|(_, raised)| raised).or(kernel),
        };
        (changed, unseen)
    }

    /// Marks the parts of a sample's reading whose process a boundary reading found
    /// exited since the last sample (the sample may have read it alive before it
    /// exited). Without exit records, the interval that reading closed counted its
    /// peak among the reaped already: widening leaves it out. With them, no boundary
    /// counted it: widening counts it in the intervals that began before it was found
    /// exited, and only those. Adds the reapings of processes no sample read.
    pub(super) fn mark_departed(&mut self, parts: &mut Vec<BoundPart>) {
        parts.append(&mut self.reaped);
        self.departed.clear();
        let descendants = self.last_tree.descendants.iter().map(|d| d.pid);
        self.departed.extend(
            descendants
                .zip(&self.found)
                .filter_map(|(pid, found)| Some((pid, (*found)?))),
        );
        if self.departed.is_empty() {
            return;
        }
        self.departed.sort_unstable_by_key(|(pid, _)| *pid);
        for part in parts {
            let Ok(at) = self
                .departed
                .binary_search_by_key(&part.pid, |(pid, _)| *pid)
            else {
                continue;
            };
            match self.recorded {
                true => part.gone_by = Some(self.departed[at].1),
                false => part.departed = true,
            }
        }
    }

    /// The mark epoch of the newest reading (0 before the first).
    pub(super) fn latest_epoch(&self) -> u64 {
        self.latest.map_or(0, |latest| latest.epoch)
    }

    /// The records waiting for a sample whose mark reading had `epoch`, those that saw
    /// only a reused reading first: the sample closes their interval. One whose reused
    /// reading came after the sample's stays: its call came after the interval the
    /// sample closes (a 4 µs stage would take the peak of the stage that closed just
    /// before it, while the sample ran). Without an epoch, every one.
    pub(super) fn take_awaiting(&mut self, epoch: Option<u64>) -> impl Iterator<Item = u32> + '_ {
        self.awaiting
            .extract_if(.., move |(_, reused)| epoch.is_none_or(|e| *reused < e))
            .map(|(id, _)| id)
    }

    /// The records whose bound waits for the sample's descendant marks.
    pub(super) fn take_pending(&mut self) -> std::vec::Drain<'_, u32> {
        self.pending.drain(..)
    }

    /// Forgets the intervals closed before a sample: it has given them out.
    pub(super) fn sample_gave_intervals(&mut self) {
        self.intervals.clear();
    }
}

impl super::Tree {
    /// Reads the parent (or reuses a reading under 1 ms old) and counts it toward the
    /// call's record (see [`Measurement::boundary_call`](crate::sources::Measurement::boundary_call)).
    /// A fresh reading closes an interval of the kernel's marks: it counts toward every
    /// stage on the thread's stack, the records waiting for it, and the call's record
    /// itself when its call is ending. The exit of a call longer than a clock tick also
    /// notes the last pid given out, which tells the processes the call's stage
    /// overlapped from those started just after it.
    pub(super) fn count_boundary(
        &mut self,
        young: bool,
        call: &CallAt<'_>,
        fresh: &mut dyn FnMut(&AtBoundary<'_>),
    ) -> Option<TimelinePoint> {
        let (now, record) = (call.now, call.record);
        let entering = call.edge == Edge::Entry;
        let boundary = &mut self.boundary;
        // A young reading is reused, unless a child exited since: its figures would
        // still count that child, and its reaping would fall to a later stage.
        let read = match boundary.latest {
            Some(_) if young && !boundary.reader.children_changed() => None,
            _ => {
                let mut reading = boundary.reader.read()?;
                boundary.latest = Some(ParentReading {
                    at: now,
                    rss: reading.rss,
                    epoch: reading.epoch,
                });
                let began = std::mem::replace(&mut boundary.mark_at, now);
                boundary.recorded = reading.exits_recorded;
                let (changed, unseen) = boundary.count_exits(&mut reading, call.elapsed);
                fresh(&AtBoundary {
                    reading: &reading,
                    descendants: &boundary.last_tree.descendants,
                    changed,
                    gone: &boundary.gone,
                });
                Some((reading, began, unseen))
            }
        };
        let reading = boundary.tree()?;
        let stats = stats_of(&mut self.records, record);
        stats.apply_boundary(&reading);
        let Some((fresh, began, unseen)) = read else {
            // A reused reading's interval ended before this call.
            let epoch = boundary.latest_epoch();
            boundary.await_interval(record, stats, epoch);
            return None;
        };
        let last_pid = match call.edge {
            Edge::LongExit => boundary.reader.last_pid(),
            _ => None,
        };
        let interval = BoundaryInterval {
            parent_hwm: fresh.hwm,
            reaped: fresh.reaped,
            reaped_at_most: fresh.reaped_at_most,
            children_rss: boundary.children.unwrap_or(0),
            start_seconds: (call.seconds)(began),
            end_seconds: call.elapsed,
            last_pid,
            epoch: fresh.epoch,
            unseen,
        };
        // The plot's series gets the fresh reading too (at most one a millisecond),
        // folded into the newest point: its bound line reaches the report's bound.
        let bound = interval.parent_hwm.map(|hwm| {
            (hwm + interval.reaped_at_most.unwrap_or(0) + interval.children_rss)
                .max(reading.tree_rss.unwrap_or(0))
        });
        let point = point_of(&reading, call.elapsed, bound, 0);
        if interval.parent_hwm.is_some() {
            boundary.intervals.push(Closed { end: now, interval });
        }
        let mut closed = std::mem::take(&mut boundary.closing);
        closed.clear();
        closed.extend(boundary.awaiting.drain(..).map(|(id, _)| id));
        if !entering {
            closed.push(record);
        }
        closed.extend(call.stack.iter().copied().filter(|r| *r != record));
        for &id in &closed {
            self.apply_interval(id, &interval);
        }
        self.boundary.closing = closed;
        self.total.stats.apply_interval(&interval);
        for &open in call.stack.iter().filter(|r| **r != record) {
            stats_of(&mut self.records, open).apply_boundary(&reading);
        }
        if self.total.stats.apply_boundary(&reading) {
            self.total.peaked(Some(record), call.elapsed);
        }
        Some(point)
    }

    /// Counts toward record `id` every interval closed since `entered` (and since the
    /// last sample, which gave it the earlier ones), whichever thread's reading closed it.
    pub(super) fn apply_intervals_since(&mut self, id: u32, entered: u64) {
        let intervals = std::mem::take(&mut self.boundary.intervals);
        for closed in intervals.iter().rev() {
            if closed.end <= entered {
                break;
            }
            self.apply_interval(id, &closed.interval);
        }
        self.boundary.intervals = intervals;
    }

    /// Counts a fresh boundary interval toward record `id`.
    fn apply_interval(&mut self, id: u32, interval: &BoundaryInterval) {
        if stats_of(&mut self.records, id).apply_interval(interval) {
            self.boundary.pending.push(id);
        }
    }

    /// Calls of each of `records` reused the newest reading: it counts toward them, and
    /// the interval it closes ended before their calls, so the next one counts.
    pub(super) fn count_reused(&mut self, records: &[u32]) {
        let Some(reading) = self.boundary.tree() else {
            return;
        };
        let epoch = self.boundary.latest_epoch();
        for &record in records {
            let stats = stats_of(&mut self.records, record);
            stats.apply_boundary(&reading);
            self.boundary.await_interval(record, stats, epoch);
        }
    }
}
