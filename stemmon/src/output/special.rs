//! Writing into what is at a name without replacing it: a FIFO or a character device
//! that this user or root owns (`/dev/null`, `/dev/stdout`, a terminal).

use super::refused;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;
use std::time::{Duration, Instant};

/// How long a write into a FIFO waits for its reader to make room.
const FIFO_PATIENCE: Duration = Duration::from_secs(1);

/// Writes into a FIFO or a character device that this user or root owns, as it is.
pub(super) fn write_trusted(path: &Path, meta: &fs::Metadata, bytes: &[u8]) -> io::Result<()> {
    let kind = meta.file_type();
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_char_device() || kind.is_fifo() {
            return write_into(path, Some(meta), bytes, false);
        }
        if kind.is_block_device() {
            return Err(refused("a block device"));
        }
        if kind.is_socket() {
            return Err(refused("a socket"));
        }
    }
    let _ = (path, kind, bytes);
    Err(refused("not a regular file"))
}

/// Writes `bytes` into what is at `path` without replacing it. `expected`: what was
/// checked there, which the opened file must still be (nothing swapped in between).
/// `create`: a missing file may be created (through a dangling link of this user's).
pub(super) fn write_into(
    path: &Path,
    expected: Option<&fs::Metadata>,
    bytes: &[u8],
    create: bool,
) -> io::Result<()> {
    let mut options = OpenOptions::new();
    options.write(true);
    if create {
        options.create(true).truncate(true);
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // A FIFO with no reader fails at once (ENXIO) instead of blocking the open; a
        // link swapped in since the check is not followed.
        let nofollow = if expected.is_some() {
            libc::O_NOFOLLOW
        } else {
            0
        };
        options.custom_flags(libc::O_NONBLOCK | nofollow);
    }
    let mut file = options.open(path).map_err(|e| {
        #[cfg(unix)]
        if e.raw_os_error() == Some(libc::ENXIO) {
            return io::Error::new(e.kind(), "no process is reading the FIFO");
        }
        e
    })?;
    #[cfg(unix)]
    if let Some(expected) = expected {
        use std::os::unix::fs::MetadataExt;
        let opened = file.metadata()?;
        if (opened.dev(), opened.ino()) != (expected.dev(), expected.ino()) {
            return Err(io::Error::other("the file was replaced while being opened"));
        }
    }
    let deadline = Instant::now() + FIFO_PATIENCE;
    let mut rest = bytes;
    while !rest.is_empty() {
        match file.write(rest) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => rest = &rest[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => wait_writable(&file, deadline)?,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Waits until `file` (a FIFO) takes more bytes, or fails at `deadline`.
fn wait_writable(file: &File, deadline: Instant) -> io::Result<()> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "the FIFO's reader did not take the report within 1 s",
        ));
    }
    #[cfg(unix)]
    {
        use std::os::fd::AsRawFd;
        let mut poll = libc::pollfd {
            fd: file.as_raw_fd(),
            events: libc::POLLOUT,
            revents: 0,
        };
        let millis = libc::c_int::try_from(left.as_millis().max(1)).unwrap_or(1000);
        // SAFETY: `poll` points at one initialised `pollfd` that lives across the call,
        // and the count says one; the descriptor is owned by `file`, open for the call.
        let _ = unsafe { libc::poll(&mut poll, 1, millis) };
    }
    #[cfg(not(unix))]
    {
        let _ = file;
        std::thread::sleep(left.min(Duration::from_millis(10)));
    }
    Ok(())
}
