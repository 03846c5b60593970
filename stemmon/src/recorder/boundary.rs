//! Stage-boundary readings: the parent alone, read at a stage's entry and exit (or a
//! reading under 1 ms old reused), with the descendants as last sampled. A fresh
//! reading also closes an interval of the kernel's marks (the book's `exact-peaks.md`), which counts
//! toward every stage that overlapped it, on this thread now and on others at the
//! next sample.

use super::records::{BoundaryInterval, Stats};
use super::thread::ThreadState;
use super::{Recorder, State, BOUNDARY_REUSE_NANOS};
use crate::memory::{BoundPart, SelfReader, SelfReading, TreeReading};
use crate::sources::AtBoundary;
use std::sync::atomic::Ordering;

/// Which edge of a call a boundary reading is at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Edge {
    /// Its entry.
    Entry,
    /// Its exit.
    Exit,
    /// The exit of a call of 1 ms or more: it reads the last pid given out, so that of
    /// the processes started in its last clock tick (10 ms), those after it are told
    /// apart (a pread; a hot function's shorter calls skip it).
    LongExit,
}

impl Edge {
    /// The exit of a call that lasted `nanos`.
    pub(super) fn exit_after(nanos: u64) -> Edge {
        if nanos >= 1_000_000 {
            Edge::LongExit
        } else {
            Edge::Exit
        }
    }
}

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

    /// The newest reading, for tests.
    #[cfg(test)]
    pub(super) fn latest(&self) -> Option<ParentReading> {
        self.latest
    }
}

impl Recorder {
    /// Reads the parent (or reuses a reading under 1 ms old) and counts it toward
    /// `record`. A fresh reading closes an interval of the kernel's marks: it counts
    /// toward every stage on the thread's stack, the records waiting for it, and
    /// `record` itself when its call is ending (`edge`). The exit of a call longer than
    /// a clock tick also notes the last pid given out, which tells the processes the
    /// call's stage overlapped from those started just after it.
    pub(super) fn boundary_reading(
        &self,
        state: &mut State,
        thread: &ThreadState,
        now: u64,
        record: u32,
        edge: Edge,
    ) {
        let entering = edge == Edge::Entry;
        let boundary = &mut state.boundary;
        // A young reading is reused, unless a child exited since: its figures would
        // still count that child, and its reaping would fall to a later stage.
        let fresh = match boundary.latest {
            Some(latest)
                if self.clock.delta_as_nanos(latest.at, now) < BOUNDARY_REUSE_NANOS
                    && !boundary.reader.children_changed() =>
            {
                None
            }
            _ => match boundary.reader.read() {
                Some(mut reading) => {
                    boundary.latest = Some(ParentReading {
                        at: now,
                        rss: reading.rss,
                        epoch: reading.epoch,
                    });
                    let began = std::mem::replace(&mut boundary.mark_at, now);
                    boundary.recorded = reading.exits_recorded;
                    self.boundary_at.0.store(now, Ordering::Relaxed);
                    let (changed, unseen) = boundary.count_exits(&mut reading, self.elapsed(now));
                    let at = AtBoundary {
                        reading: &reading,
                        descendants: &boundary.last_tree.descendants,
                        changed,
                        gone: &boundary.gone,
                    };
                    let counters = state.counted.boundary(&at, &mut state.extra);
                    self.counters.publish(counters);
                    Some((reading, began, unseen))
                }
                None => return,
            },
        };
        let Some(reading) = boundary.tree() else {
            return;
        };
        let stats = &mut state.records.get_mut(record).stats;
        stats.apply_boundary(&reading);
        let Some((fresh, began, unseen)) = fresh else {
            // A reused reading's interval ended before this call.
            let epoch = boundary.latest_epoch();
            boundary.await_interval(record, stats, epoch);
            return;
        };
        let elapsed = self.elapsed(now);
        let last_pid = match edge {
            Edge::LongExit => boundary.reader.last_pid(),
            _ => None,
        };
        let interval = BoundaryInterval {
            parent_hwm: fresh.hwm,
            reaped: fresh.reaped,
            reaped_at_most: fresh.reaped_at_most,
            children_rss: boundary.children.unwrap_or(0),
            start_seconds: self.elapsed(began),
            end_seconds: elapsed,
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
        let point = super::timeline::point_of(&reading, elapsed, bound, 0);
        state.samples.timeline.raise_last(point);
        self.sweep_threads(state, now);
        let boundary = &mut state.boundary;
        if interval.parent_hwm.is_some() {
            boundary.intervals.push(Closed { end: now, interval });
        }
        let mut closed = std::mem::take(&mut boundary.closing);
        closed.clear();
        closed.extend(boundary.awaiting.drain(..).map(|(id, _)| id));
        if !entering {
            closed.push(record);
        }
        closed.extend(
            thread
                .stack
                .iter()
                .map(|frame| frame.record)
                .filter(|r| *r != record),
        );
        for &id in &closed {
            state.apply_interval(id, &interval);
        }
        state.boundary.closing = closed;
        state.total.stats.apply_interval(&interval);
        for frame in &thread.stack {
            if frame.record != record {
                state
                    .records
                    .get_mut(frame.record)
                    .stats
                    .apply_boundary(&reading);
            }
        }
        if state.total.stats.apply_boundary(&reading) {
            state.total.peaked(Some(record), self.elapsed(now));
        }
    }
}

impl State {
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
        if self.records.get_mut(id).stats.apply_interval(interval) {
            self.boundary.pending.push(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fake::Rig;
    use super::*;

    /// Without exit records, a child no sample read, started in one stage and reaped in
    /// the next, counts in both: the next sample widens every interval since the last
    /// one by the kernel's figure (it counted only in the second).
    #[test]
    fn an_unsampled_child_reaped_a_stage_later_counts_in_both() {
        const MIB: u64 = 1 << 20;
        let rig = Rig::new();
        let main = rig.thread();
        rig.set_self(10 * MIB, Some(10 * MIB));
        let sample = || TreeReading {
            parent_rss: Some(10 * MIB),
            children_rss: Some(0),
            tree_rss: Some(10 * MIB),
            parent_hwm: Some(10 * MIB),
            children_hwm: Some(0),
            tree_rss_bound: Some(10 * MIB),
            process_count: 1,
            ..TreeReading::default()
        };
        rig.sample(sample());
        for stage in ["starts", "reaps"] {
            rig.advance_micros(2_000);
            let call = rig.recorder.enter(&main, stage.into());
            rig.advance_micros(2_000);
            if stage == "reaps" {
                rig.set_reaped(Some(150 * MIB), Some(1));
            }
            rig.recorder.exit(&main, call);
            rig.set_reaped(None, None);
        }
        rig.advance_micros(2_000);
        rig.sample(sample());
        let report = rig.recorder.snapshot();
        for stage in ["starts", "reaps"] {
            let bound = report
                .stage(stage)
                .unwrap()
                .high_water
                .peak_tree_rss_bound_bytes;
            assert_eq!(bound, Some(160 * MIB), "{stage}");
        }
        assert_eq!(report.high_water.peak_tree_rss_bound_bytes, Some(160 * MIB));
        assert_eq!(report.high_water_marks.unseen, 0);
    }

    #[test]
    fn a_reading_under_a_millisecond_old_is_reused_an_older_one_is_not() {
        let rig = Rig::new();
        let main = rig.thread();
        rig.set_self(100 << 20, None);
        let first = rig.recorder.enter(&main, "a".into());
        assert_eq!(rig.self_reads(), 1, "the first entry reads");
        rig.advance_micros(400);
        rig.set_self(300 << 20, None);
        rig.recorder.exit(&main, first);
        let again = rig.recorder.enter(&main, "b".into());
        rig.recorder.exit(&main, again);
        assert_eq!(rig.self_reads(), 1, "0.4 ms later the reading is reused");
        let report = rig.recorder.snapshot();
        assert_eq!(
            report.stage("b").unwrap().peaks.peak_parent_rss_bytes,
            Some(100 << 20)
        );
        rig.advance_micros(1_100);
        let fresh = rig.recorder.enter(&main, "c".into());
        assert_eq!(rig.self_reads(), 2, "1.5 ms after the reading, a fresh one");
        rig.recorder.exit(&main, fresh);
        let report = rig.recorder.snapshot();
        assert_eq!(
            report.stage("c").unwrap().peaks.peak_parent_rss_bytes,
            Some(300 << 20)
        );
        assert_eq!(report.peaks.peak_parent_rss_bytes, Some(300 << 20));
        assert_eq!(report.peak_rss_stage.as_deref(), Some("c"));
        let at = rig.recorder.lock().boundary.latest().unwrap().at;
        assert_eq!(rig.recorder.elapsed(at), 1.5e-3);
    }

    #[test]
    fn a_fresh_reading_counts_toward_every_stage_on_the_threads_stack() {
        let rig = Rig::new();
        let main = rig.thread();
        rig.set_self(10 << 20, Some(10 << 20));
        let outer = rig.recorder.enter(&main, "outer".into());
        rig.advance_micros(2_000);
        rig.set_self(20 << 20, Some(50 << 20));
        let inner = rig.recorder.enter(&main, "inner".into());
        let report = rig.recorder.snapshot();
        let hwm = |path: &str| report.stage(path).unwrap().high_water.peak_parent_hwm_bytes;
        assert_eq!(hwm("outer"), Some(50 << 20), "the interval since its entry");
        assert_eq!(hwm("outer/inner"), None, "entered as the interval closed");
        assert_eq!(
            report.stage("outer").unwrap().peaks.peak_parent_rss_bytes,
            Some(20 << 20)
        );
        rig.recorder.exit(&main, inner);
        rig.recorder.exit(&main, outer);
    }

    #[test]
    fn an_interval_another_thread_closed_counts_for_a_stage_open_meanwhile() {
        let rig = Rig::new();
        let main = rig.thread();
        let worker = rig.thread();
        rig.set_self(10 << 20, Some(10 << 20));
        let long = rig.recorder.enter(&main, "long".into());
        rig.advance_micros(2_000);
        // The worker's reading closes an interval with a spike in it, while `long`
        // is open on the main thread, whose stack the worker cannot see.
        rig.set_self(10 << 20, Some(900 << 20));
        let short = rig.recorder.enter(&worker, "short".into());
        rig.advance_micros(2_000);
        rig.set_self(10 << 20, Some(10 << 20));
        rig.recorder.exit(&worker, short);
        let hwm = |report: &crate::Report, path: &str| {
            report.stage(path).unwrap().high_water.peak_parent_hwm_bytes
        };
        assert_eq!(hwm(&rig.recorder.snapshot(), "long"), None, "not yet");
        // The next sample gives the interval to the stages open on other threads.
        rig.sample(TreeReading {
            parent_rss: Some(10 << 20),
            tree_rss: Some(10 << 20),
            process_count: 1,
            ..TreeReading::default()
        });
        let report = rig.recorder.snapshot();
        assert_eq!(hwm(&report, "long"), Some(900 << 20));
        assert_eq!(
            hwm(&report, "long/short"),
            Some(10 << 20),
            "its own interval only"
        );
        assert_eq!(report.high_water.peak_parent_hwm_bytes, Some(900 << 20));
        // And the same interval is not counted again for a stage entered after it.
        rig.advance_micros(2_000);
        let later = rig.recorder.enter(&worker, "later".into());
        rig.advance_micros(2_000);
        rig.recorder.exit(&worker, later);
        let report = rig.recorder.snapshot();
        assert_eq!(hwm(&report, "long/later"), Some(10 << 20));
        rig.recorder.exit(&main, long);
    }

    #[test]
    fn an_exited_child_is_left_out_of_the_next_boundary() {
        let rig = Rig::new();
        let main = rig.thread();
        rig.set_self(10 << 20, None);
        rig.sample(TreeReading {
            parent_rss: Some(10 << 20),
            children_rss: Some(40 << 20),
            tree_rss: Some(50 << 20),
            process_count: 2,
            descendants: vec![crate::memory::Descendant {
                pid: 7,
                rss: 40 << 20,
                peak: 40 << 20,
                ..crate::memory::Descendant::default()
            }],
            ..TreeReading::default()
        });
        rig.advance_micros(2_000);
        rig.set_children_changed(crate::memory::LiveChildren {
            rss: 0,
            exited_peak: Some(40 << 20),
            exited: 1,
            exited_peaks: 40 << 20,
        });
        let call = rig.recorder.enter(&main, "after_exit".into());
        rig.recorder.exit(&main, call);
        let report = rig.recorder.snapshot();
        let stage = report.stage("after_exit").unwrap();
        assert_eq!(stage.peaks.peak_children_rss_bytes, Some(0));
        assert_eq!(stage.peaks.peak_tree_rss_bytes, Some(10 << 20));
    }

    /// A boundary never reuses a sample's reading of the parent: one read while a stage
    /// was freeing its memory would give the stage entered just after that one's exit
    /// the older, higher figure.
    #[test]
    fn a_stage_entered_just_after_a_sample_never_takes_its_parent_figure() {
        // The sample reads the parent while `fit` is freeing its memory, and ends; `fit`
        // exits within the millisecond, having freed it all; `predict` follows.
        let rig = Rig::new();
        let main = rig.thread();
        rig.set_self(206 << 20, None);
        let fit = rig.recorder.enter(&main, "fit".into());
        rig.advance_micros(2_000);
        rig.sample(TreeReading {
            parent_rss: Some(127 << 20),
            tree_rss: Some(127 << 20),
            process_count: 1,
            ..TreeReading::default()
        });
        let reads = rig.self_reads();
        rig.set_self(3 << 20, None);
        rig.advance_micros(100);
        rig.recorder.exit(&main, fit);
        assert_eq!(
            rig.self_reads(),
            reads + 1,
            "fit's exit reads the parent afresh"
        );
        rig.advance_micros(100);
        let predict = rig.recorder.enter(&main, "predict".into());
        rig.recorder.exit(&main, predict);
        assert_eq!(
            rig.self_reads(),
            reads + 1,
            "predict reuses fit's exit reading"
        );
        let report = rig.recorder.snapshot();
        let predict = report.stage("predict").unwrap();
        assert_eq!(predict.peaks.peak_parent_rss_bytes, Some(3 << 20));
        assert!(
            predict.high_water.peak_parent_hwm_bytes <= Some(3 << 20),
            "{:?}",
            predict.high_water
        );
    }

    /// A sample whose reading of the parent came before a boundary reading that ran
    /// while it was taken leaves that newer reading as the one later calls reuse: a call
    /// just after a stage freed its memory never takes the sample's older figure.
    #[test]
    fn a_sample_read_before_a_boundary_reading_never_replaces_it() {
        let rig = Rig::new();
        let main = rig.thread();
        rig.set_self(206 << 20, None);
        let fit = rig.recorder.enter(&main, "fit".into());
        rig.advance_micros(2_000);
        rig.sample_during(|| {
            // The parent is read while `fit` still holds its memory; then `fit` frees
            // it and exits, its exit reading fresh, before the sample ends.
            let reading = TreeReading {
                parent_rss: Some(206 << 20),
                tree_rss: Some(206 << 20),
                process_count: 1,
                ..TreeReading::default()
            };
            rig.advance_micros(2_000);
            rig.set_self(3 << 20, None);
            rig.recorder.exit(&main, fit);
            reading
        });
        let reads = rig.self_reads();
        // Within a millisecond of the sample: a reused reading.
        rig.advance_micros(100);
        let predict = rig.recorder.enter(&main, "predict".into());
        rig.recorder.exit(&main, predict);
        assert_eq!(rig.self_reads(), reads, "predict reuses a reading");
        let report = rig.recorder.snapshot();
        let peaks = &report.stage("predict").unwrap().peaks;
        assert_eq!(peaks.peak_parent_rss_bytes, Some(3 << 20), "{peaks:?}");
    }
}
