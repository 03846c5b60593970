//! The tree's figures of one record, or of the whole run: its sampled peaks, and the
//! bound the kernel's marks give of its peak between readings (the book's
//! `exact-peaks.md`).

use crate::memory::TreeReading;
use crate::report::{HighWater, Peaks};

/// Counters and peaks shared by stage records and the whole run.
#[derive(Clone, Debug, Default)]
pub(super) struct Stats {
    pub(super) samples: u64,
    pub(super) partial_rss_samples: u64,
    pub(super) peak_process_count: u32,
    pub(super) peaks: Peaks,
    /// The kernel's marks (the book's `exact-peaks.md`).
    pub(super) high_water: HighWater,
    /// The largest `parent mark + reaped peak` of the intervals this record overlapped
    /// since the last full sample; that sample adds the descendants' marks.
    pub(super) pending_local: Option<u64>,
    /// Seconds from the start to the end of the last of those intervals: the sample
    /// adds the marks of the descendants that had started by then, not of those
    /// started after the record closed.
    pub(super) pending_until: f64,
    /// The last pid given out at that interval's end, where read.
    pub(super) pending_last_pid: Option<u32>,
    /// Seconds from the start to the beginning of the earliest interval the largest
    /// figure stands for (its own, and those before it with smaller figures): a
    /// descendant a boundary reading found exited before then did not live in them.
    pub(super) pending_from: f64,
    /// The intervals of those that ended after the one with the largest figure: their
    /// largest figure, the last end and its last pid, and their earliest beginning. A
    /// descendant started after the big one ended never sums with it (a stage that
    /// freed 120 MiB, then started workers, is not 120 MiB plus the workers).
    pub(super) pending_later: Option<(u64, f64, Option<u32>, f64)>,
    /// Processes of the tree that ended unseen in the intervals it overlapped.
    pub(super) unseen: u32,
    /// The record saw only a reused boundary reading, whose interval ended before it:
    /// the next interval to close is the one it overlaps.
    pub(super) awaiting_interval: bool,
    /// The mark epoch of the last boundary interval counted: a sample whose reading
    /// of the mark came before it closed an interval this record overlapped too.
    pub(super) interval_epoch: u64,
}

/// Past this many processes that no reading saw in one sample's interval, each
/// interval widened by them counts them all, whenever they lived.
const MAX_WINDOWED: usize = 256;

/// What a fresh stage-boundary reading says about the interval it closes.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct BoundaryInterval {
    /// The parent's peak in the interval (`VmHWM`, reset at each reading).
    pub(super) parent_hwm: Option<u64>,
    /// The peak of the children reaped in the interval.
    pub(super) reaped: Option<u64>,
    /// The most a child reaped in the interval held, where known: for the bound.
    pub(super) reaped_at_most: Option<u64>,
    /// The live descendants as last sampled: the best figure until the next sample.
    pub(super) children_rss: u64,
    /// Seconds from the start to the reading before it (of either kind), which began
    /// it, and to the reading that closed it.
    pub(super) start_seconds: f64,
    pub(super) end_seconds: f64,
    /// The last pid given out when it closed, where read (a long call's exit): of the
    /// processes that started in the same clock tick, those with higher pids came after.
    pub(super) last_pid: Option<u32>,
    /// The place of its reading of the mark among every reading of it (0: unknown).
    pub(super) epoch: u64,
    /// Processes that ended in it at a peak no reading told apart (see
    /// `SelfReading::ended_unsampled`).
    pub(super) unseen: u32,
}

/// Raises `peak` to `value`; whether it rose.
fn raise(peak: &mut Option<u64>, value: Option<u64>) -> bool {
    match (value, *peak) {
        (Some(v), Some(p)) if v <= p => false,
        (Some(v), _) => {
            *peak = Some(v);
            true
        }
        (None, _) => false,
    }
}

impl Stats {
    /// The marks as the report gives them: where a process ended unseen, the sum is
    /// no bound, only at least the peak.
    pub(super) fn high_water_report(&self) -> HighWater {
        let mut built = self.high_water.clone();
        if self.unseen > 0 {
            built.peak_tree_rss_at_least_bytes = built.peak_tree_rss_bound_bytes.take();
        }
        built
    }

    /// Counts a full tree sample; returns whether it raised the tree RSS peak.
    pub(super) fn apply_sample(&mut self, reading: &TreeReading, boot_origin: Option<f64>) -> bool {
        self.samples += 1;
        self.partial_rss_samples += u64::from(!reading.rss_complete);
        self.peak_process_count = self.peak_process_count.max(reading.process_count);
        let p = &mut self.peaks;
        raise(&mut p.peak_parent_rss_bytes, reading.parent_rss);
        raise(&mut p.peak_children_rss_bytes, reading.children_rss);
        raise(&mut p.peak_tree_uss_bytes, reading.tree_uss);
        raise(&mut p.peak_tree_pss_bytes, reading.tree_pss);
        raise(
            &mut p.peak_tree_physical_footprint_bytes,
            reading.tree_physical_footprint,
        );
        let raised = raise(&mut p.peak_tree_rss_bytes, reading.tree_rss);
        self.apply_sample_interval(reading, boot_origin);
        raised
    }

    /// Keeps `bound >= sampled` for the tree and the parent (the book's `exact-peaks.md`): a mark read low
    /// (a zombie's, one reset between a boundary and a sample, one that could not be
    /// read) bounds nothing, and where the sampled figure is higher it is the better
    /// bound. Only where both are present: a missing mark stays missing.
    fn keep_bounds(&mut self) {
        let (p, h) = (&self.peaks, &mut self.high_water);
        if h.peak_tree_rss_bound_bytes.is_some() {
            raise(&mut h.peak_tree_rss_bound_bytes, p.peak_tree_rss_bytes);
        }
        if h.peak_parent_hwm_bytes.is_some() {
            raise(&mut h.peak_parent_hwm_bytes, p.peak_parent_rss_bytes);
        }
    }

    /// Counts the interval that a full sample closes: marks and reaped peaks.
    /// The boundary intervals it closed since the last sample are widened by the marks
    /// of the descendants that had started by their end (see [`Stats::close_interval`]):
    /// a child started after a boundary never sums with the parent's peak before it.
    pub(super) fn apply_sample_interval(
        &mut self,
        reading: &TreeReading,
        boot_origin: Option<f64>,
    ) {
        let widened = self.widened(reading, boot_origin);
        let h = &mut self.high_water;
        raise(&mut h.peak_parent_hwm_bytes, reading.parent_hwm);
        raise(
            &mut h.peak_reaped_child_rss_bytes,
            reading.reaped_child_peak,
        );
        raise(
            &mut h.peak_tree_rss_bound_bytes,
            reading.tree_rss_bound.max(widened),
        );
        self.unseen += reading.unseen;
        self.awaiting_interval = false;
        self.keep_bounds();
    }

    /// Closes, at a full sample, the interval of a record no longer open: its bound
    /// gets the marks of that sample's descendants that had started before the record's
    /// last interval ended (`boot_origin`: the start, in seconds since boot; `None`:
    /// every descendant counts). A start in the same clock tick as the end is told by
    /// its pid, where the end read the last one given out; else it counts. A reading
    /// without marks leaves the bound as it is.
    pub(super) fn close_interval(&mut self, reading: &TreeReading, boot_origin: Option<f64>) {
        // Whether the unseen ended before the record closed is not known: they count.
        self.unseen += reading.unseen;
        let widened = self.widened(reading, boot_origin);
        raise(&mut self.high_water.peak_tree_rss_bound_bytes, widened);
        self.keep_bounds();
    }

    /// The boundary intervals since the last full sample (their parent marks and
    /// reaped peaks, `pending_local`, taken) plus the marks of the descendants that had
    /// started before the last of them ended: `None` without a pending interval or marks.
    pub(super) fn widened(
        &mut self,
        reading: &TreeReading,
        boot_origin: Option<f64>,
    ) -> Option<u64> {
        let figure = self.pending_figure(reading, boot_origin);
        self.pending_local = None;
        self.pending_later = None;
        figure
    }

    /// What [`Stats::widened`] gives, leaving the pending intervals as they are: each
    /// figure with the descendants started before its own interval ended.
    pub(super) fn pending_figure(
        &self,
        reading: &TreeReading,
        boot_origin: Option<f64>,
    ) -> Option<u64> {
        let local = self.pending_local?;
        let (from, until) = (self.pending_from, self.pending_until);
        let first = local
            + self.children_before(reading, boot_origin, (from, until), self.pending_last_pid)?;
        let later = self
            .pending_later
            .and_then(|(local, until, last_pid, from)| {
                Some(local + self.children_before(reading, boot_origin, (from, until), last_pid)?)
            });
        Some(first.max(later.unwrap_or(0)))
    }

    /// The marks of `reading`'s descendants that had started before the end of this
    /// record's pending intervals (see [`Stats::close_interval`]) and had not been
    /// found exited before they began; `span` is their beginning and end.
    pub(super) fn children_before(
        &self,
        reading: &TreeReading,
        boot_origin: Option<f64>,
        span: (f64, f64),
        last_pid: Option<u32>,
    ) -> Option<u64> {
        let (from, end) = span;
        let all = reading.children_hwm?;
        let until = boot_origin.map(|origin| origin + end);
        // A reader that gives no parts gives the descendants' sum alone.
        if reading.bound_parts.is_empty() && reading.unread.is_empty() {
            return Some(all);
        }
        // Started before the end: a start in its last clock tick is told by its pid.
        let began = |started: Option<f64>, pid: u32| match (started, until) {
            (Some(started), Some(until)) => {
                started <= until
                    && (started + crate::sys::start_tick_seconds() <= until
                        || last_pid.is_none_or(|last| pid <= last))
            }
            _ => true,
        };
        let parts: u64 = reading
            .bound_parts
            .iter()
            .filter(|part| match part.gone_by {
                Some(gone) => gone > from,
                None => !part.departed,
            })
            .filter(|part| began(part.started, part.pid))
            .map(|part| part.bytes)
            .sum();
        // The processes no reading saw whose lives overlapped the intervals (past
        // `MAX_WINDOWED`, every one: the work grows with their number).
        let ended_after = |ended: f64| boot_origin.is_none_or(|origin| ended > origin + from);
        let unread = match reading.unread.len() {
            0 => 0,
            1..=MAX_WINDOWED => crate::memory::most_at_once(&reading.unread, |u| {
                began(Some(u.began), u.pid) && ended_after(u.ended)
            }),
            _ => reading.unread_most,
        };
        Some(parts + unread)
    }

    /// Counts the interval a fresh boundary reading closed; returns whether the record
    /// now waits for the next sample to widen its bound (it did not before).
    pub(super) fn apply_interval(&mut self, interval: &BoundaryInterval) -> bool {
        let Some(hwm) = interval.parent_hwm else {
            return false;
        };
        let h = &mut self.high_water;
        raise(&mut h.peak_parent_hwm_bytes, Some(hwm));
        raise(&mut h.peak_reaped_child_rss_bytes, interval.reaped);
        self.interval_epoch = self.interval_epoch.max(interval.epoch);
        self.unseen += interval.unseen;
        // `reaped_at_most` is never below `reaped`, but where exit records count the
        // reaped children in the sample instead (see `SelfReading::exits_recorded`).
        let local = hwm + interval.reaped_at_most.unwrap_or(0);
        raise(
            &mut h.peak_tree_rss_bound_bytes,
            Some(local + interval.children_rss),
        );
        let newly = self.pending_local.is_none();
        let (from, end) = (interval.start_seconds, interval.end_seconds);
        // A group of intervals stands for each of them: its largest figure, its last end
        // and its earliest beginning.
        if self.pending_local.is_none_or(|big| local >= big) {
            // The new largest: the later ones stand beside it as they are, and the old
            // largest joins them where it ended after this one (readings of two threads);
            // else this one stands for it too.
            let old = self.pending_local.map(|old| (old, self.pending_from));
            self.pending_from = from;
            match old {
                Some((old, old_from)) if self.pending_until > end => {
                    let (until, last_pid) = (self.pending_until, self.pending_last_pid);
                    self.pending_later = Some(match self.pending_later {
                        Some((most, later, pid, f)) if later >= until => {
                            (most.max(old), later, pid, f.min(old_from))
                        }
                        Some((most, _, _, f)) => (most.max(old), until, last_pid, f.min(old_from)),
                        None => (old, until, last_pid, old_from),
                    });
                }
                Some((_, old_from)) => self.pending_from = from.min(old_from),
                None => {}
            }
            self.pending_local = Some(local);
            self.pending_until = end;
            self.pending_last_pid = interval.last_pid;
        } else if end > self.pending_until {
            let (most, until, last_pid, f) =
                self.pending_later
                    .unwrap_or((0, end, interval.last_pid, from));
            self.pending_later = Some(if end >= until {
                (most.max(local), end, interval.last_pid, f.min(from))
            } else {
                (most.max(local), until, last_pid, f.min(from))
            });
        } else {
            // Smaller, and ended by the largest's end: the largest stands for it.
            self.pending_from = self.pending_from.min(from);
        }
        self.awaiting_interval = false;
        self.keep_bounds();
        newly
    }

    /// Counts a stage-boundary reading: the parent read now, the descendants as last
    /// sampled. Not a sample; returns whether it raised the tree RSS peak.
    pub(super) fn apply_boundary(&mut self, reading: &TreeReading) -> bool {
        self.peak_process_count = self.peak_process_count.max(reading.process_count);
        let p = &mut self.peaks;
        raise(&mut p.peak_parent_rss_bytes, reading.parent_rss);
        raise(&mut p.peak_children_rss_bytes, reading.children_rss);
        let raised = raise(&mut p.peak_tree_rss_bytes, reading.tree_rss);
        self.keep_bounds();
        raised
    }
}

/// The whole run's counters and peaks, and where its sampled peak fell.
#[derive(Clone, Debug, Default)]
pub(super) struct Total {
    pub(super) stats: Stats,
    /// The record open at the tree RSS peak (`None`: the workflow), its path built at
    /// snapshot time; meaningful once `peak_rss_elapsed_seconds` is set.
    pub(super) peak_rss_record: Option<u32>,
    pub(super) peak_rss_elapsed_seconds: Option<f64>,
}

impl Total {
    /// Notes that the tree RSS peak rose at `elapsed`, in `record` (`None`: the workflow).
    pub(super) fn peaked(&mut self, record: Option<u32>, elapsed: f64) {
        self.peak_rss_record = record;
        self.peak_rss_elapsed_seconds = Some(elapsed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn interval(hwm: u64, start_seconds: f64, end_seconds: f64) -> BoundaryInterval {
        BoundaryInterval {
            parent_hwm: Some(hwm),
            start_seconds,
            end_seconds,
            ..BoundaryInterval::default()
        }
    }

    /// With exit records, a process found exited at a boundary counts in the intervals
    /// that began before it was found, and only those: an interval with a smaller
    /// figure that ended first is not dropped for a larger one that began after the
    /// process was gone (it would lose the process).
    #[test]
    fn a_process_found_exited_counts_in_the_intervals_it_lived_in() {
        let mut reading = TreeReading {
            children_hwm: Some(30 * MIB),
            ..TreeReading::default()
        };
        reading.bound_parts = vec![crate::memory::BoundPart {
            pid: 7,
            bytes: 30 * MIB,
            departed: true,
            gone_by: Some(1.0),
            ..crate::memory::BoundPart::default()
        }];
        // The process lived in the first interval; the second, larger, began as it was
        // found gone.
        let mut lived = Stats::default();
        lived.apply_interval(&interval(80 * MIB, 0.0, 1.0));
        lived.apply_interval(&interval(100 * MIB, 1.0, 2.0));
        let figure = lived.widened(&reading, None).unwrap();
        assert!(figure >= 110 * MIB, "{}", figure / MIB);
        // A record whose intervals all began after it was found gone never counts it.
        let mut after = Stats::default();
        after.apply_interval(&interval(100 * MIB, 1.0, 2.0));
        after.apply_interval(&interval(20 * MIB, 2.0, 3.0));
        assert_eq!(after.widened(&reading, None), Some(100 * MIB));
    }

    /// Processes no reading saw count in an interval where their lives overlapped it,
    /// at the most they held at one moment.
    #[test]
    fn processes_no_reading_saw_count_where_they_lived() {
        let unread = |pid, peak, began, ended| crate::memory::Unread {
            pid,
            peak: peak * MIB,
            began,
            ended,
        };
        let mut reading = TreeReading {
            children_hwm: Some(100 * MIB),
            unread: vec![unread(7, 100, 0.0, 1.0), unread(8, 50, 2.0, 3.0)],
            unread_most: 100 * MIB,
            ..TreeReading::default()
        };
        let widened = |reading: &TreeReading, from, until| {
            let mut stats = Stats::default();
            stats.apply_interval(&interval(0, from, until));
            stats.widened(reading, Some(0.0))
        };
        // One after the other: the larger.
        assert_eq!(widened(&reading, 0.0, 4.0), Some(100 * MIB));
        // After the first had ended: the second alone.
        assert_eq!(widened(&reading, 1.5, 4.0), Some(50 * MIB));
        // Before the second began: the first alone.
        assert_eq!(widened(&reading, 0.0, 1.5), Some(100 * MIB));
        // Past the most that are told apart, all of them, whenever they lived.
        reading.unread = vec![unread(9, 1, 5.0, 6.0); MAX_WINDOWED + 1];
        assert_eq!(widened(&reading, 0.0, 1.0), Some(100 * MIB));
    }
}
