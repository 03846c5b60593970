//! The reading of this process alone, at stage boundaries: RSS from `statm`, the
//! high-water mark from `getrusage` (or `status`), the reset through `clear_refs`, and
//! whether a child exited since. Its files sit in the monitor's [`Ledger`], which the
//! tree sample reads this process's mark through as well.

use super::ledger::Ledger;
use super::procfs::{page_size, parse_statm_resident, parse_status, Buf, Status};
use super::reaped::{any_zombie_child, rusage, usage_of, ChildUsage};
use crate::memory::{Descendant, LiveChildren, SelfReader, SelfReading};
use crate::sys::live_children_rss;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::sync::Arc;

/// This process's `status` (RSS and mark together), `clear_refs` (the reset) and
/// `statm` (RSS alone, cheaper), with the buffer they are read into.
pub(crate) struct SelfFiles {
    status: File,
    clear_refs: Option<File>,
    statm: Option<File>,
    buf: Buf,
    /// This monitor's place in the exchange of the process's one mark.
    exchange: crate::sys::linux::own_mark::Mailbox,
}

impl SelfFiles {
    pub(crate) fn open() -> io::Result<SelfFiles> {
        Ok(SelfFiles {
            status: File::open("/proc/self/status")?,
            // Without write access the mark is still read: it then runs from the
            // process's start, which still bounds every interval's peak from above.
            clear_refs: OpenOptions::new()
                .write(true)
                .open("/proc/self/clear_refs")
                .ok(),
            statm: None,
            buf: Buf::new(4096),
            exchange: crate::sys::linux::own_mark::Mailbox::join(),
        })
    }

    /// Reads VmRSS, VmHWM and Threads together, then (when `reset`) resets the mark to
    /// the current RSS (`clear_refs` value 5), so that the next reading gets its own
    /// interval's peak.
    pub(crate) fn read_status(&mut self, reset: bool) -> io::Result<Status> {
        let mut status = loop {
            let text = self.buf.read_prefix(&self.status)?;
            if text.is_empty() {
                return Err(io::Error::new(io::ErrorKind::NotFound, "empty status"));
            }
            let status = parse_status(text);
            if status.threads.is_some() || !self.buf.is_full() {
                break status;
            }
            self.buf.grow();
        };
        if let (Some(file), true, Some(hwm)) = (&self.clear_refs, reset, status.hwm) {
            status.hwm = Some(self.exchange.hand_on(hwm));
            // A failed reset leaves the mark running from the earlier reset: still a bound.
            let _ = (&*file).write(b"5");
        }
        Ok(status)
    }

    /// The cheap boundary reading: RSS from `statm` and, with `marks`, the mark from
    /// `getrusage` (then reset): about 2 µs against 8 µs for `status`. `getrusage` also
    /// holds the peak of the image this process replaced at `exec` (the forked copy of
    /// its launcher), which no reset lowers: it speaks for the mark only above `floor`
    /// (see [`SelfFiles::exec_floor`]); below, `status` is read instead.
    /// `maxrss` is `getrusage(RUSAGE_SELF)`'s, which the caller read.
    /// Without `reset`, the mark is read from `status` and left as it is.
    pub(crate) fn read_cheap(
        &mut self,
        marks: bool,
        reset: bool,
        floor: u64,
        maxrss: u64,
    ) -> io::Result<Status> {
        if marks && !reset {
            return self.read_status(false);
        }
        if self.statm.is_none() {
            self.statm = Some(File::open("/proc/self/statm")?);
        }
        let statm = self.statm.as_ref().expect("opened above");
        let rss = parse_statm_resident(self.buf.read_whole(statm)?)
            .map(|pages| pages * page_size())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "unreadable statm"))?;
        if !marks {
            return Ok(Status {
                rss: Some(rss),
                ..Status::default()
            });
        }
        if maxrss <= floor {
            return self.read_status(true);
        }
        let mut hwm = maxrss.max(rss);
        if let Some(file) = &self.clear_refs {
            hwm = self.exchange.hand_on(hwm);
            let _ = (&*file).write(b"5");
        }
        Ok(Status {
            rss: Some(rss),
            hwm: Some(hwm),
            threads: None,
        })
    }

    /// Above what `getrusage(RUSAGE_SELF)` is this process's mark: its figure right
    /// after a reset, which is the larger of the RSS then and the peak from before
    /// `exec`.
    pub(crate) fn exec_floor(&mut self) -> u64 {
        let _ = self.read_status(true);
        self_maxrss()
    }

    /// Whether this process can reset its own high-water mark (it tries, which starts
    /// the first interval): `Err` says why not.
    pub(crate) fn probe_reset(&mut self) -> Result<(), String> {
        let why = |e: io::Error| {
            format!("cannot reset the process's own mark (/proc/self/clear_refs: {e})")
        };
        if self.clear_refs.is_some() {
            // The mark so far ends other monitors' intervals too: handed on first.
            if let Ok(Status { hwm: Some(hwm), .. }) = self.read_status(false) {
                self.exchange.hand_on(hwm);
            }
        }
        match &self.clear_refs {
            // The write's own result: a kernel without value 5 refuses it.
            Some(file) => (&*file).write(b"5").map(drop).map_err(why),
            None => Err(why(OpenOptions::new()
                .write(true)
                .open("/proc/self/clear_refs")
                .err()
                .unwrap_or_else(|| io::Error::other("not opened")))),
        }
    }
}

/// This process's peak RSS as `getrusage(RUSAGE_SELF)` gives it: the larger of its
/// mark (`VmHWM`, reset by `clear_refs`) and the peak of the image it replaced at `exec`.
fn self_maxrss() -> u64 {
    maxrss_of(&rusage(libc::RUSAGE_SELF))
}

fn maxrss_of(usage: &libc::rusage) -> u64 {
    u64::try_from(usage.ru_maxrss).unwrap_or(0) * 1024
}

/// The cheap reading of the monitored process alone, taken at stage boundaries: one
/// `pread` of `statm`, one write to `clear_refs`, two `getrusage` and one `waitid`.
/// The same `getrusage` calls give the CPU and I/O of the process (every thread) and of
/// the children it reaped (SPEC §12).
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
        let (reaped, usage) = shared.reaped_and_usage();
        let reaped_any = std::mem::replace(&mut self.last_usage, usage) != usage;
        let children_changed = reaped_any || any_zombie_child();
        let reaped = reaped.filter(|_| self.marks);
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
        let reaped_usage = usage.usage();
        let self_usage = own.as_ref().map_or(crate::memory::Usage::ZERO, usage_of);
        Some(SelfReading {
            rss: status.rss?,
            hwm: status.hwm.filter(|_| self.marks),
            reaped: reaped.and_then(|r| r.peak),
            reaped_at_most: reaped.and_then(|r| r.bound()),
            children_changed,
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
        use std::os::unix::fs::FileExt;
        if self.last_pid_file.is_none() {
            self.last_pid_file = Some(File::open("/proc/sys/kernel/ns_last_pid").ok());
        }
        let file = self.last_pid_file.as_ref()?.as_ref()?;
        let mut text = [0u8; 16];
        let read = file.read_at(&mut text, 0).ok()?;
        std::str::from_utf8(&text[..read]).ok()?.trim().parse().ok()
    }

    fn live_children(&mut self, descendants: &[Descendant], gone: &mut Vec<bool>) -> LiveChildren {
        let (marks, ledger) = (self.marks, &self.ledger);
        live_children_rss(descendants, gone, |pid| {
            // Only a reading with marks counts the exit's peak (the engine adds it to
            // its interval then); without, the next sample must count it.
            if marks {
                ledger.shared().count_exited(pid);
            }
        })
    }
}
