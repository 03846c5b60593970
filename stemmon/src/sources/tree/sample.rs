//! Full tree samples, in the measurement: they count toward every record open on any
//! thread, close the intervals of the kernel's marks the boundaries left open, and
//! give the report's sample and the timeline's point.

use super::{point_of, stats_of, Tree};
use crate::memory::TreeReading;
use crate::report::SampleReport;
use crate::sources::{SampleCalls, Sampled, POLL};

impl Tree {
    /// Counts a full sample: `calls.open` are the calls open when its reading ended, on
    /// every thread (async calls included), `calls.before` those open when it started;
    /// `calls.stage` is the record open on the monitor's thread.
    pub(super) fn count_sample(
        &mut self,
        reading: &mut TreeReading,
        calls: &SampleCalls<'_>,
    ) -> Sampled<'_> {
        let SampleCalls {
            before,
            open,
            started,
            elapsed,
            stage,
        } = *calls;
        let origin = self.boot_origin;
        // A descendant this reading found alive and a boundary reading since found
        // exited is in that reading's interval already: widening it leaves it out.
        self.boundary.mark_departed(&mut reading.bound_parts);
        let reading = &*reading;
        // The run's bound for this interval, as the total is about to count it (its
        // boundary intervals widened by the descendants' marks, never below the
        // sample), so that the timeline's bound reaches the report's.
        let bound = reading
            .tree_rss_bound
            .max(self.total.stats.pending_figure(reading, origin))
            .map(|bound| bound.max(reading.tree_rss.unwrap_or(0)));
        if self.total.stats.apply_sample(reading, origin) {
            self.total.peaked(stage, elapsed);
        }
        // A stage open on another thread saw the intervals other threads' boundary
        // readings closed since it was entered: each counts for it now.
        // (A poll frame is skipped: its async call is in `open` with its own start.)
        for frame in open.iter().chain(before.iter()) {
            if frame.entered != POLL {
                self.apply_intervals_since(frame.record, frame.entered);
            }
        }
        self.boundary.sample_gave_intervals();
        // The reading's figures are from before a call entered while it ran: such a
        // call's interval goes on to the next reading (its own entry reading counted).
        let seen = &mut self.seen;
        seen.clear();
        seen.extend(
            open.iter()
                .filter(|frame| frame.entered <= started)
                .map(|frame| frame.record),
        );
        seen.sort_unstable();
        seen.dedup();
        let late = &mut self.late;
        late.clear();
        late.extend(
            open.iter()
                .filter(|frame| frame.entered != POLL && frame.entered > started)
                .map(|frame| frame.record)
                .filter(|record| seen.binary_search(record).is_err()),
        );
        for &record in seen.iter() {
            stats_of(&mut self.records, record).apply_sample(reading, origin);
        }
        // Records that closed during this interval, or saw only a reused reading, get
        // the interval this sample closes; others only widen their pending bound.
        let closed = &mut self.closed;
        closed.clear();
        closed.extend(
            before
                .iter()
                .map(|frame| frame.record)
                .chain(self.boundary.take_awaiting(reading.parent_mark_epoch))
                .filter(|record| seen.binary_search(record).is_err()),
        );
        closed.sort_unstable();
        closed.dedup();
        self.interval.clear();
        for &record in closed.iter() {
            let stats = stats_of(&mut self.records, record);
            // Its exit reading closed its last interval: the rest of this one (the
            // parent's mark since, the descendants started since) is a later stage's.
            // Unless the sample read the mark before that exit reading did: then the
            // interval it closes ran while the record was open, and so do the figures
            // of the measurements that cover the time since the previous sample.
            let read_first = reading
                .parent_mark_epoch
                .is_some_and(|epoch| epoch < stats.interval_epoch);
            if stats.pending_local.is_some() && !stats.awaiting_interval && !read_first {
                stats.close_interval(reading, origin);
            } else {
                stats.apply_sample_interval(reading, origin);
                self.interval.push(record);
            }
        }
        for record in self.boundary.take_pending() {
            let stats = stats_of(&mut self.records, record);
            if stats.pending_local.is_some() {
                stats.close_interval(reading, origin);
            }
        }
        let epoch = reading.parent_mark_epoch.unwrap_or(0);
        for &id in late.iter() {
            let stats = stats_of(&mut self.records, id);
            self.boundary.await_interval(id, stats, epoch);
        }
        let sample = {
            let mut built = SampleReport::default();
            built.elapsed_seconds = elapsed;
            built.stage = String::new();
            built.tree_rss_bytes = reading.tree_rss;
            built.parent_rss_bytes = reading.parent_rss;
            built.children_rss_bytes = reading.children_rss;
            built.tree_uss_bytes = reading.tree_uss;
            built.tree_pss_bytes = reading.tree_pss;
            built.tree_physical_footprint_bytes = reading.tree_physical_footprint;
            built.process_count = reading.process_count;
            built.rss_processes = reading.rss_processes;
            built.rss_complete = reading.rss_complete;
            built
        };
        self.processes.sampled(reading, elapsed);
        let mut point = point_of(reading, elapsed, bound, 1);
        point.process_count = reading.process_count;
        Sampled {
            seen: &self.seen,
            interval: &self.interval,
            sample,
            point,
        }
    }
}
