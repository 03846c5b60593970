//! This process's own files (`status`, `clear_refs`, `statm`), kept open in the
//! monitor's [`Ledger`](super::ledger::Ledger): the mark read and reset, and the peak
//! `getrusage` gives.

use super::procfs::{page_size, parse_statm_resident, parse_status, Buf, Status};
use super::reaped::rusage;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};

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
            size: None,
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
pub(crate) fn self_maxrss() -> u64 {
    maxrss_of(&rusage(libc::RUSAGE_SELF))
}

pub(crate) fn maxrss_of(usage: &libc::rusage) -> u64 {
    u64::try_from(usage.ru_maxrss).unwrap_or(0) * 1024
}
