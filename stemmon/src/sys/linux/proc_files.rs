//! The files of one process that the tree walk keeps open between samples, against a
//! descriptor budget, and what is read through them besides `children`: `status`
//! (RSS and the mark, reset through `clear_refs`), `stat` and `io` (CPU, faults and
//! storage I/O, the book's `cpu-io.md`), and `cmdline` once.

use super::procfs::{parse_status, status_name_bytes, Buf, ProcPath, StatUsage, Status};
use std::fs::File;
use std::io::{self, Write};
use std::sync::Arc;

/// A process's command in the report is at most this many characters (the book's `cpu-io.md`).
pub(crate) const MAX_COMMAND_CHARS: usize = 200;

/// How many `/proc` files a reader keeps open between samples: a quarter of the soft
/// descriptor limit, at most 4096, so that the program keeps the rest. Files beyond it
/// are opened, read and closed at each sample.
pub(crate) fn fd_budget() -> usize {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is valid for writes and outlives the call; RLIMIT_NOFILE is a
    // valid resource.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return 64;
    }
    usize::try_from(limit.rlim_cur / 4).map_or(4096, |n| n.min(4096))
}

/// What `stat` and `io` gave of one process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ProcUsage {
    pub(crate) stat: StatUsage,
    /// `read_bytes`, `write_bytes`; `Err` with the OS error
    /// where `io` could not be read (another user's process, no task accounting).
    pub(crate) io: Result<(u64, u64), i32>,
}

/// A process's `comm` as its `status` gives it (the kernel keeps 15 bytes; 32 are compared),
/// kept without allocating.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Comm {
    len: u8,
    bytes: [u8; 32],
}

impl Comm {
    /// The `Name:` of a `status` text.
    /// Whether one was read.
    pub(super) fn is_read(&self) -> bool {
        self.len > 0
    }

    pub(super) fn of(status: &[u8]) -> Comm {
        let name = status_name_bytes(status);
        let len = name.len().min(32);
        let mut comm = Comm {
            len: len as u8,
            bytes: [0; 32],
        };
        comm.bytes[..len].copy_from_slice(&name[..len]);
        comm
    }
}

/// The descriptors kept open, against their budget.
#[derive(Debug)]
pub(super) struct Fds {
    pub(super) open: usize,
    pub(super) budget: usize,
}

impl Fds {
    /// Keeps `file` if the budget has room; else it is closed once read.
    pub(super) fn keep(&mut self, file: File) -> Option<File> {
        (self.open < self.budget).then(|| {
            self.open += 1;
            file
        })
    }

    pub(super) fn release(&mut self, file: Option<File>) {
        if file.is_some() {
            self.open -= 1;
        }
    }
}

/// One `status` read (a second only when its first lines did not fit the buffer),
/// then the reset of the mark when `reset` and there is one.
pub(super) fn read_status(
    file: &File,
    buf: &mut Buf,
    clear_refs: Option<&File>,
    reset: bool,
) -> io::Result<Status> {
    let status = loop {
        let text = buf.read_prefix(file)?;
        if text.is_empty() {
            return Err(io::Error::new(io::ErrorKind::NotFound, "empty status"));
        }
        let status = parse_status(text);
        if status.threads.is_some() || !buf.is_full() {
            break status;
        }
        buf.grow();
    };
    if let (Some(mut file), true, Some(_)) = (clear_refs, reset, status.hwm) {
        // A failed reset leaves the mark running from the earlier reset: still a bound.
        let _ = file.write(b"5");
    }
    Ok(status)
}

/// One `pread` of the whole text of `/proc/{pid}/{leaf}` through the kept `file`,
/// opened (and kept, when the budget has room) if it is not open yet; a kept file that
/// fails is closed, so that the next sample opens it afresh.
pub(super) fn read_kept<'b>(
    file: &mut Option<File>,
    fds: &mut Fds,
    pid: u32,
    leaf: &str,
    buf: &'b mut Buf,
) -> io::Result<&'b [u8]> {
    if let Some(kept) = file {
        if buf.read_whole(kept).is_ok() {
            return Ok(buf.text());
        }
        fds.release(file.take());
    }
    let opened = File::open(ProcPath::of(pid, leaf).as_path())?;
    buf.read_whole(&opened)?;
    *file = fds.keep(opened);
    Ok(buf.text())
}

/// `/proc/{pid}/cmdline` as one line: the arguments joined by spaces, at most
/// [`MAX_COMMAND_CHARS`] characters; control characters are kept as data (whoever
/// prints it escapes them). `None` for a process without one (a kernel thread, a zombie:
/// the tree reader names it from its `status` then).
pub(super) fn read_command(pid: u32) -> Option<Arc<str>> {
    use std::io::Read as _;
    let mut bytes = Vec::with_capacity(256);
    File::open(ProcPath::of(pid, "cmdline").as_path())
        .ok()?
        .take(4 * MAX_COMMAND_CHARS as u64)
        .read_to_end(&mut bytes)
        .ok()?;
    while bytes.last() == Some(&0) {
        bytes.pop();
    }
    if bytes.is_empty() {
        return None;
    }
    for byte in &mut bytes {
        if *byte == 0 {
            *byte = b' ';
        }
    }
    let text = String::from_utf8_lossy(&bytes);
    Some(
        text.chars()
            .take(MAX_COMMAND_CHARS)
            .collect::<String>()
            .into(),
    )
}
