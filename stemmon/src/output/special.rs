//! Writing into what is at a name without replacing it: a FIFO or a character device
//! that this user or root owns (`/dev/null`, `/dev/stdout`, a terminal).

use super::{buffered, refused, Content};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;
use std::time::{Duration, Instant};

/// How long a write into a FIFO waits for its reader to make room.
const FIFO_PATIENCE: Duration = Duration::from_secs(1);

/// Writes into a FIFO or a character device that this user or root owns, as it is.
pub(super) fn write_trusted(path: &Path, meta: &fs::Metadata, content: Content) -> io::Result<()> {
    let kind = meta.file_type();
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_char_device() || kind.is_fifo() {
            return write_into(path, Some(meta), content, false);
        }
        if kind.is_block_device() {
            return Err(refused("a block device"));
        }
        if kind.is_socket() {
            return Err(refused("a socket"));
        }
    }
    let _ = (path, kind, content);
    Err(refused("not a regular file"))
}

/// Writes what `content` writes into what is at `path`, without replacing it. `expected`: what was
/// checked there, which the opened file must still be (nothing swapped in between).
/// `create`: a missing file may be created (through a dangling link of this user's).
pub(super) fn write_into(
    path: &Path,
    expected: Option<&fs::Metadata>,
    content: Content,
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
    let file = options.open(path).map_err(|e| {
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
    buffered(
        Patient {
            file: &file,
            patience: FIFO_PATIENCE,
        },
        content,
    )
}

/// A file written without blocking (a FIFO opened `O_NONBLOCK`) that waits for room
/// when it is full: [`FIFO_PATIENCE`] in all, however the bytes come.
struct Patient<'a> {
    file: &'a File,
    /// How much longer it may wait.
    patience: Duration,
}

impl Write for Patient<'_> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        loop {
            match self.file.write(bytes) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let started = Instant::now();
                    wait_writable(self.file, self.patience)?;
                    self.patience = self.patience.saturating_sub(started.elapsed());
                }
                written => return written,
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Waits until `file` (a FIFO) takes more bytes, at most `left`; fails when nothing
/// is `left`.
fn wait_writable(file: &File, left: Duration) -> io::Result<()> {
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
