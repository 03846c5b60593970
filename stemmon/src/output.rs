//! Where the report goes: a path resolved once at start, written so that nothing the
//! user owns is clobbered.
//!
//! - A regular file (or a new one) is replaced atomically: the report is written to a
//!   temporary file beside it, `.<name>.stemmon-<pid>-<n>.tmp`, which is then renamed
//!   over it. A reader never sees half a report.
//! - A character device (`/dev/null`, `/dev/stderr`) or a FIFO is written into as it is,
//!   never replaced; a FIFO is opened without blocking, so a missing reader is an
//!   error, not a hang. A directory, a socket or a block device is an error.
//! - A symbolic link is followed: the file it names is the one replaced.
//! - Temporary files left by a writer that was killed (`kill -9`) are removed by the
//!   next writer of the same report, once their process is gone.
//! - `fsync` is for the final report only (`durable`); the periodic rewrites skip it.
#![deny(clippy::undocumented_unsafe_blocks)]

use std::ffi::{OsStr, OsString};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long a write into a FIFO waits for its reader to make room.
const FIFO_PATIENCE: Duration = Duration::from_secs(1);

/// The report's destination, resolved once.
#[derive(Debug)]
pub(crate) struct Output {
    /// Absolute: a later `set_current_dir` does not move it.
    path: PathBuf,
    /// Numbers this process's temporary files, so two writers never share one.
    counter: AtomicU64,
}

impl Output {
    /// Anchors a relative `path` at the current directory, now, and removes temporary
    /// files that dead writers left beside it. Fails only if `path` is relative and the
    /// current directory cannot be read, or if `path` names no file.
    pub(crate) fn resolve(path: &Path) -> io::Result<Output> {
        if path.file_name().is_none() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the output path names no file",
            ));
        }
        let path = if path.is_absolute() {
            path.to_path_buf()
        } else {
            std::env::current_dir()?.join(path)
        };
        let output = Output {
            path,
            counter: AtomicU64::new(0),
        };
        output.remove_stale_temporaries();
        Ok(output)
    }

    /// The absolute path of the report.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `bytes` as the whole report. `durable`: flushed to the disk before the
    /// rename (and the directory after it), for the final report.
    pub(crate) fn write(&self, bytes: &[u8], durable: bool) -> io::Result<()> {
        let target = match fs::symlink_metadata(&self.path) {
            Ok(meta) if meta.file_type().is_symlink() => match fs::canonicalize(&self.path) {
                Ok(target) => target,
                // A link to a file not there yet: create that file through the link.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    return write_into(&self.path, bytes, true);
                }
                Err(e) => return Err(e),
            },
            _ => self.path.clone(),
        };
        match fs::metadata(&target) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                self.replace(&target, bytes, durable, None)
            }
            Err(e) => Err(e),
            Ok(meta) => match Kind::of(&meta) {
                Kind::File => self.replace(&target, bytes, durable, Some(meta.permissions())),
                Kind::Stream => write_into(&target, bytes, false),
                Kind::Refused(what) => Err(io::Error::other(format!(
                    "it is {what}: stemmon writes its report to a regular file, a character \
                     device or a FIFO"
                ))),
            },
        }
    }

    /// The atomic replacement of a regular file (or a new one) at `target`.
    fn replace(
        &self,
        target: &Path,
        bytes: &[u8],
        durable: bool,
        permissions: Option<fs::Permissions>,
    ) -> io::Result<()> {
        let parent = parent_of(target);
        fs::create_dir_all(parent)?;
        let name = target.file_name().unwrap_or(OsStr::new("report"));
        let temporary = parent.join(temporary_name(
            name,
            std::process::id(),
            self.counter.fetch_add(1, Ordering::Relaxed),
        ));
        let written = (|| {
            let mut file = File::create(&temporary)?;
            if let Some(permissions) = permissions {
                // The replaced file keeps its mode.
                file.set_permissions(permissions)?;
            }
            file.write_all(bytes)?;
            if durable {
                file.sync_all()?;
            }
            drop(file);
            fs::rename(&temporary, target)?;
            if durable {
                // The rename itself reaches the disk with the directory.
                File::open(parent).and_then(|dir| dir.sync_all())?;
            }
            Ok(())
        })();
        if written.is_err() {
            let _ = fs::remove_file(&temporary);
        }
        written
    }

    /// Removes `.<name>.stemmon-<pid>-<n>.tmp` beside the report whose process is gone.
    fn remove_stale_temporaries(&self) {
        let (Some(name), parent) = (self.path.file_name(), parent_of(&self.path)) else {
            return;
        };
        let Ok(entries) = fs::read_dir(parent) else {
            return;
        };
        for entry in entries.flatten() {
            let Some(pid) = temporary_pid(name, &entry.file_name()) else {
                continue;
            };
            let is_file = entry.file_type().is_ok_and(|t| t.is_file());
            if is_file && pid != std::process::id() && !process_alive(pid) {
                let _ = fs::remove_file(entry.path());
            }
        }
    }
}

/// What a path that exists is, for the writer.
enum Kind {
    /// Replaced atomically.
    File,
    /// Written into as it is: a character device or a FIFO.
    Stream,
    /// Never written: a directory, a socket, a block device (a disk).
    Refused(&'static str),
}

impl Kind {
    fn of(meta: &fs::Metadata) -> Kind {
        let kind = meta.file_type();
        if kind.is_file() {
            return Kind::File;
        }
        if kind.is_dir() {
            return Kind::Refused("a directory");
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::FileTypeExt;
            if kind.is_char_device() || kind.is_fifo() {
                return Kind::Stream;
            }
            if kind.is_block_device() {
                return Kind::Refused("a block device");
            }
            if kind.is_socket() {
                return Kind::Refused("a socket");
            }
        }
        Kind::Refused("not a regular file")
    }
}

fn parent_of(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// `.report.json.stemmon-4242-0.tmp` for `report.json`.
fn temporary_name(name: &OsStr, pid: u32, n: u64) -> OsString {
    let mut temporary = OsString::from(".");
    temporary.push(name);
    temporary.push(format!(".stemmon-{pid}-{n}.tmp"));
    temporary
}

/// The pid in a temporary name of the report `name`; `None` for any other file.
fn temporary_pid(name: &OsStr, file: &OsStr) -> Option<u32> {
    let file = file.to_str()?;
    let rest = file
        .strip_prefix('.')?
        .strip_prefix(name.to_str()?)?
        .strip_prefix(".stemmon-")?
        .strip_suffix(".tmp")?;
    let (pid, n) = rest.split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (digits(pid) && digits(n))
        .then(|| pid.parse().ok())
        .flatten()
}

/// Whether a process `pid` exists (when unsure, it does: its file is kept).
fn process_alive(pid: u32) -> bool {
    #[cfg(unix)]
    {
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            return true;
        };
        // SAFETY: `kill` with signal 0 sends nothing; it only checks that `pid` exists.
        if unsafe { libc::kill(pid, 0) } == 0 {
            return true;
        }
        io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
    }
    #[cfg(not(unix))]
    {
        let _ = pid;
        true
    }
}

/// Writes `bytes` into what is at `path` without replacing it. `create`: a missing file
/// may be created (through a dangling symbolic link).
fn write_into(path: &Path, bytes: &[u8], create: bool) -> io::Result<()> {
    let mut options = OpenOptions::new();
    options.write(true);
    if create {
        options.create(true).truncate(true);
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // A FIFO with no reader fails at once (ENXIO) instead of blocking the open.
        options.custom_flags(libc::O_NONBLOCK);
    }
    let mut file = options.open(path).map_err(|e| {
        #[cfg(unix)]
        if e.raw_os_error() == Some(libc::ENXIO) {
            return io::Error::new(e.kind(), "no process is reading the FIFO");
        }
        e
    })?;
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

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("stemmon-output-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn temporary_names_are_recognised_and_nothing_else() {
        let name = OsStr::new("report.json");
        let made = temporary_name(name, 4242, 7);
        assert_eq!(made, ".report.json.stemmon-4242-7.tmp");
        assert_eq!(temporary_pid(name, &made), Some(4242));
        for other in [
            ".report.json.tmp",
            "report.json",
            ".report.json.stemmon-42.tmp",
            ".report.json.stemmon-x-1.tmp",
            ".report.json.stemmon--1.tmp",
            ".other.json.stemmon-42-1.tmp",
            ".report.json.stemmon-42-1.tmp.bak",
        ] {
            assert_eq!(temporary_pid(name, OsStr::new(other)), None, "{other}");
        }
    }

    #[test]
    fn atomic_write_creates_parents_keeps_the_mode_and_leaves_no_temporary() {
        use std::os::unix::fs::PermissionsExt;
        let dir = dir("atomic");
        let path = dir.join("a/b/report.json");
        let output = Output::resolve(&path).unwrap();
        output.write(b"{}", false).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        output.write(b"{\"x\":1}", true).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "{\"x\":1}");
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(names(path.parent().unwrap()), ["report.json"]);
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_directory_is_refused_and_no_temporary_is_left() {
        let dir = dir("refused");
        fs::create_dir_all(dir.join("taken")).unwrap();
        let error = Output::resolve(&dir.join("taken"))
            .unwrap()
            .write(b"{}", true)
            .unwrap_err();
        assert!(error.to_string().contains("it is a directory"), "{error}");
        assert_eq!(names(&dir), ["taken"]);
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_symbolic_link_is_followed_not_replaced() {
        let dir = dir("link");
        fs::write(dir.join("real.json"), "old").unwrap();
        std::os::unix::fs::symlink("real.json", dir.join("report.json")).unwrap();
        std::os::unix::fs::symlink("missing.json", dir.join("dangling.json")).unwrap();
        Output::resolve(&dir.join("report.json"))
            .unwrap()
            .write(b"new", false)
            .unwrap();
        Output::resolve(&dir.join("dangling.json"))
            .unwrap()
            .write(b"made", false)
            .unwrap();
        assert!(fs::symlink_metadata(dir.join("report.json"))
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(fs::read_to_string(dir.join("real.json")).unwrap(), "new");
        assert_eq!(
            fs::read_to_string(dir.join("missing.json")).unwrap(),
            "made"
        );
        assert_eq!(
            names(&dir),
            ["dangling.json", "missing.json", "real.json", "report.json"]
        );
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_fifo_without_a_reader_is_an_error_not_a_hang() {
        let dir = dir("fifo");
        let fifo = dir.join("report.json");
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(status.success());
        let output = Output::resolve(&fifo).unwrap();
        let started = Instant::now();
        let error = output.write(b"{}", true).unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(2));
        assert!(
            error.to_string().contains("no process is reading"),
            "{error}"
        );

        // With a reader, the report goes through the FIFO, which stays a FIFO.
        let reader = std::thread::spawn({
            let fifo = fifo.clone();
            move || fs::read(&fifo).unwrap()
        });
        let deadline = Instant::now() + Duration::from_secs(10);
        let big = vec![b'x'; 200_000];
        while output.write(&big, true).is_err() {
            assert!(
                Instant::now() < deadline,
                "the reader never opened the FIFO"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(reader.join().unwrap().len(), big.len());
        use std::os::unix::fs::FileTypeExt;
        assert!(fs::metadata(&fifo).unwrap().file_type().is_fifo());
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_relative_path_is_anchored_at_the_directory_of_the_start() {
        let output = Output::resolve(Path::new("target/r.json")).unwrap();
        assert!(output.path().is_absolute());
        assert_eq!(
            output.path(),
            std::env::current_dir().unwrap().join("target/r.json")
        );
        assert!(Output::resolve(Path::new("/")).is_err());
    }
}
