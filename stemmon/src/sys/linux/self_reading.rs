//! The reading of this process alone, at stage boundaries: RSS from `statm`, the
//! high-water mark from `getrusage` (or `status`), the reset through `clear_refs`, and
//! whether a child exited since. Its files sit in the monitor's [`Ledger`], which the
//! tree sample reads this process's mark through as well.

use super::ledger::Ledger;
use super::reaped::{any_zombie_child, rusage, usage_of, ChildUsage};
use super::self_files::{maxrss_of, SelfFiles};
use crate::memory::{Descendant, LiveChildren, SelfReader, SelfReading};
use crate::sys::live_children_rss;
use std::fs::File;
use std::sync::Arc;

/// The cheap reading of the monitored process alone, taken at stage boundaries: one
/// `pread` of `statm`, one write to `clear_refs`, two `getrusage` and one `waitid`.
/// The same `getrusage` calls give the CPU and I/O of the process (every thread) and of
/// the children it reaped (the book's `cpu-io.md`).
pub(crate) struct ProcSelfReader {
    ledger: Arc<Ledger>,
    marks: bool,
    /// Each reading resets the mark.
    reset: bool,
    /// `/proc/sys/kernel/ns_last_pid`, opened on first use (`Some(None)`: unreadable).
    last_pid_file: Option<Option<File>>,
    /// This process's own CPU counts in the tree's (it is the root).
    count_self: bool,
    /// CPU and I/O are read at all (off only to measure what they cost).
    cpu: bool,
    /// `getrusage` stands for `VmHWM` above this (see [`SelfFiles::read_cheap`]).
    floor: u64,
    /// `RUSAGE_CHILDREN` at this reader's previous reading: a change means a child was
    /// reaped, even where a full sample counted its peak first.
    last_usage: ChildUsage,
}

impl ProcSelfReader {
    /// A reader of this process on the monitor's `ledger`; `marks` reads its
    /// high-water mark too, and `reset` resets it at every reading.
    pub(crate) fn new(ledger: Arc<Ledger>, marks: bool, reset: bool) -> ProcSelfReader {
        let floor = if marks && reset {
            ledger.shared().own().map_or(0, SelfFiles::exec_floor)
        } else {
            0
        };
        ProcSelfReader {
            ledger,
            marks,
            reset,
            last_pid_file: None,
            count_self: true,
            cpu: true,
            floor,
            last_usage: ChildUsage::now(),
        }
    }

    /// Leaves this process's own CPU and I/O out of its readings (the tree's root is
    /// another process: `stemmon run`'s command), keeping its reaped children's.
    pub(crate) fn without_self_usage(mut self) -> ProcSelfReader {
        self.count_self = false;
        self
    }

    #[cfg(feature = "unstable-readers")]
    /// Reads no CPU or I/O: the boundary reading as it was before them, for the
    /// benchmark that measures what they add.
    pub(crate) fn without_cpu(mut self) -> ProcSelfReader {
        self.cpu = false;
        self
    }

    /// The floor this reader found (for the cost measurement).
    #[cfg(test)]
    pub(crate) fn floor(&self) -> u64 {
        self.floor
    }
}

impl SelfReader for ProcSelfReader {
    fn read(&mut self) -> Option<SelfReading> {
        let mut shared = self.ledger.shared();
        let (reaped, usage, ended_unsampled) = shared.reaped_and_usage(false);
        let reaped_any = std::mem::replace(&mut self.last_usage, usage) != usage;
        let children_changed = reaped_any || any_zombie_child();
        let reaped = reaped.filter(|_| self.marks);
        // With exit records, the sample counts each unsampled child at its own peak.
        let exits_recorded = shared.exits_recorded();
        // One `getrusage(RUSAGE_SELF)` for the mark and the CPU both.
        let own = (self.cpu || self.marks).then(|| rusage(libc::RUSAGE_SELF));
        let status = shared
            .own()
            .ok()?
            .read_cheap(
                self.marks,
                self.reset,
                self.floor,
                own.as_ref().map_or(0, maxrss_of),
            )
            .ok()?;
        let epoch = shared.mark_read();
        let reaped_usage = usage.usage();
        let self_usage = own.as_ref().map_or(crate::memory::Usage::ZERO, usage_of);
        Some(SelfReading {
            rss: status.rss?,
            hwm: status.hwm.filter(|_| self.marks),
            epoch,
            reaped: reaped.and_then(|r| r.peak),
            reaped_at_most: reaped.and_then(|r| r.bound()),
            exits_recorded,
            children_changed,
            ended_unsampled,
            usage: self.cpu.then(|| {
                if self.count_self {
                    reaped_usage.plus(self_usage)
                } else {
                    reaped_usage
                }
            }),
        })
    }

    fn children_changed(&mut self) -> bool {
        ChildUsage::now() != self.last_usage || any_zombie_child()
    }

    fn last_pid(&mut self) -> Option<u32> {
        super::births::last_pid(&mut self.last_pid_file)
    }

    fn live_children(&mut self, descendants: &[Descendant], gone: &mut Vec<bool>) -> LiveChildren {
        let (marks, ledger) = (self.marks, &self.ledger);
        live_children_rss(descendants, gone, |pid| {
            // Only a reading with marks counts the exit: without exit records, the
            // engine adds its peak to the interval it closes, and the next sample leaves
            // it out; with them, the sample counts it from its record, in the intervals
            // it overlapped, never in its own sum (it had exited before the reading).
            if marks {
                ledger.shared().count_exited(pid);
            }
        })
    }
}
