//! Every file stemmon writes (the report, the Prometheus textfile, the command's `-o`)
//! goes through [`Output`], so that on a shared machine nothing planted at the name is
//! followed or written into (the book's `security.md`, 0.3).
//!
//! - A regular file (or a new one) is replaced atomically. On Linux the bytes go to an
//!   unnamed file in the target's directory (`O_TMPFILE`), which gets a name only once
//!   whole (`linkat`): the target's own if nothing is there, else a random one beside
//!   it that is renamed over the target at once. Elsewhere (or on a filesystem without
//!   `O_TMPFILE`) they go to a temporary file beside it, created by the `tempfile` crate
//!   exclusively (`O_EXCL`, so no link is followed), then renamed. Either temporary name
//!   is unpredictable, `.<name>.stemmon-<pid>-<random>.tmp`. A reader never sees half a
//!   file, and the replaced file keeps its mode.
//! - Something else at the name (a symbolic link, a FIFO, a device, a socket) is trusted
//!   only if it belongs to this user or to root: a link is then followed, a FIFO or a
//!   character device (`/dev/null`, `/dev/stdout`, a terminal) written into; a FIFO is
//!   opened without blocking, so a missing reader is an error, not a hang. Planted by
//!   anyone else, it is replaced like a file, never followed nor written into.
//! - A directory is an error; so is a trusted block device or socket.
//! - A `kill -9` leaves a temporary file only between the `linkat` and the `rename`
//!   with `O_TMPFILE` (while writing, without it); the next writer of the same file
//!   removes those of dead writers.
//! - `fsync` only when `durable` (the final report, the command's outputs).
#![deny(clippy::undocumented_unsafe_blocks)]

use std::ffi::OsStr;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

mod special;
#[cfg(target_os = "linux")]
mod unnamed;

use special::{write_into, write_trusted};

/// A file's destination, resolved once.
#[derive(Debug)]
pub struct Output {
    /// Absolute: a later `set_current_dir` does not move it.
    path: PathBuf,
}

impl Output {
    /// Anchors a relative `path` at the current directory, now, and removes temporary
    /// files that dead writers left beside it. Fails only if `path` is relative and the
    /// current directory cannot be read, or if `path` names no file.
    pub fn resolve(path: &Path) -> io::Result<Output> {
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
        let output = Output { path };
        output.remove_stale_temporaries();
        Ok(output)
    }

    /// The absolute path written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `bytes` as the whole file. `durable`: flushed to the disk before the
    /// rename (and the directory after it).
    pub fn write(&self, bytes: &[u8], durable: bool) -> io::Result<()> {
        self.write_with(|out| out.write_all(bytes), durable)
    }

    /// Writes the whole file as `content` writes it into the writer it is given, with
    /// every guarantee of [`write`](Output::write): a file is replaced only once
    /// `content` returned `Ok` and every byte is written, so an error (its own, or the
    /// disk's) leaves what was there; nothing planted at the name is followed or written
    /// into. The text is never held whole in memory: it goes out in small buffers as
    /// `content` writes it.
    ///
    /// `content` may be called a second time, from the start, where the first file it
    /// wrote could not be given a name (a Linux without `/proc` and the capability to
    /// name an unnamed file): it must write the same bytes each time. Into a FIFO or a
    /// character device the bytes go as they come, so an error there may leave part of
    /// them written, as [`write`](Output::write) may too.
    pub fn write_with(
        &self,
        mut content: impl FnMut(&mut dyn Write) -> io::Result<()>,
        durable: bool,
    ) -> io::Result<()> {
        let content: Content = &mut content;
        let meta = match fs::symlink_metadata(&self.path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return replace(&self.path, content, durable, None);
            }
            Err(e) => return Err(e),
            Ok(meta) => meta,
        };
        if meta.file_type().is_dir() {
            return Err(refused("a directory"));
        }
        if meta.file_type().is_file() {
            return replace(&self.path, content, durable, Some(meta.permissions()));
        }
        if !trusted(&meta) {
            // Planted by someone else: replaced, never followed nor written into.
            return replace(&self.path, content, durable, None);
        }
        if !meta.file_type().is_symlink() {
            return write_trusted(&self.path, &meta, content);
        }
        // A link of this user's or root's (`/dev/stdout`): the file it names is written.
        let target = match fs::canonicalize(&self.path) {
            Ok(target) => target,
            // A link to a file not there yet: create that file through the link.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return write_into(&self.path, None, content, true);
            }
            Err(e) => return Err(e),
        };
        let meta = fs::symlink_metadata(&target)?;
        if meta.file_type().is_dir() {
            Err(refused("a directory"))
        } else if meta.file_type().is_file() {
            replace(&target, content, durable, Some(meta.permissions()))
        } else {
            write_trusted(&target, &meta, content)
        }
    }

    /// Removes `.<name>.stemmon-<pid>-<random>.tmp` files of this user beside the
    /// output whose process is gone.
    fn remove_stale_temporaries(&self) {
        if let Some(name) = self.path.file_name().and_then(OsStr::to_str) {
            remove_stale_temporaries_in(parent_of(&self.path), |target| target == name);
        }
    }
}

/// Removes the temporary files `.<target>.stemmon-<pid>-<random>.tmp` in `dir` of every
/// `target` that `of` accepts: regular files of this user whose process is gone.
pub(crate) fn remove_stale_temporaries_in(dir: &Path, of: impl Fn(&str) -> bool) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let Some((target, pid)) = temporary_of(&entry.file_name()) else {
            continue;
        };
        // Not followed: a link (anyone's) is never a temporary file.
        let mine = entry
            .metadata()
            .is_ok_and(|meta| meta.is_file() && owner(&meta) == Some(user()));
        if of(&target) && mine && pid != std::process::id() && !process_alive(pid) {
            let _ = fs::remove_file(entry.path());
        }
    }
}

fn refused(what: &str) -> io::Error {
    io::Error::other(format!(
        "it is {what}: stemmon writes to a regular file, a character device or a FIFO"
    ))
}

/// What writes a file's bytes into the writer it is given (see [`Output::write_with`]).
type Content<'a> = &'a mut dyn FnMut(&mut dyn Write) -> io::Result<()>;

/// Runs `content` into `file` through a buffer: `Ok` once every byte reached `file`. On
/// an error what is still buffered is dropped, not written.
fn buffered<W: Write>(file: W, content: Content) -> io::Result<()> {
    let mut out = io::BufWriter::new(file);
    match content(&mut out).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) => {
            let _ = out.into_parts();
            Err(e)
        }
    }
}

/// The atomic replacement of whatever is at `target` (never followed: `rename` replaces
/// the name itself). `permissions`: those of the regular file replaced, kept.
fn replace(
    target: &Path,
    content: Content,
    durable: bool,
    permissions: Option<fs::Permissions>,
) -> io::Result<()> {
    let parent = parent_of(target);
    fs::create_dir_all(parent)?;
    let name = target.file_name().unwrap_or(OsStr::new("output"));
    let prefix = temporary_prefix(name, std::process::id());
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix).suffix(".tmp");
    #[cfg(target_os = "linux")]
    if let Some(written) = unnamed::replace(
        parent,
        target,
        &builder,
        &mut *content,
        durable,
        &permissions,
    ) {
        return written;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        // A new file gets the mode `File::create` gives (0666 less the umask); a replaced
        // one is created no wider than its own and set to it exactly below.
        let mode = permissions.as_ref().map_or(0o666, |p| p.mode() & 0o777);
        builder.permissions(fs::Permissions::from_mode(mode));
    }
    let mut file = builder.tempfile_in(parent)?;
    if let Some(permissions) = permissions {
        file.as_file().set_permissions(permissions)?;
    }
    buffered(file.as_file_mut(), content)?;
    if durable {
        file.as_file().sync_all()?;
    }
    // On failure the temporary file is dropped, which removes it.
    file.persist(target).map_err(|e| e.error)?;
    if durable {
        // The rename itself reaches the disk with the directory.
        File::open(parent).and_then(|dir| dir.sync_all())?;
    }
    Ok(())
}

/// The user whose files are trusted: the effective uid.
fn user() -> u32 {
    #[cfg(unix)]
    {
        // SAFETY: `geteuid` has no preconditions and cannot fail.
        unsafe { libc::geteuid() }
    }
    #[cfg(not(unix))]
    {
        0
    }
}

/// The uid that owns what `meta` describes (`None` where the OS has no owners).
fn owner(meta: &fs::Metadata) -> Option<u32> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Some(meta.uid())
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        None
    }
}

/// Whether something that is not a regular file may be followed or written into: it
/// belongs to this user or to root.
fn trusted(meta: &fs::Metadata) -> bool {
    owner(meta).is_none_or(|uid| uid == 0 || uid == user())
}

fn parent_of(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// `.report.json.stemmon-4242-`: the temporary files' prefix; `tempfile` adds random
/// characters and `.tmp`.
fn temporary_prefix(name: &OsStr, pid: u32) -> std::ffi::OsString {
    let mut prefix = std::ffi::OsString::from(".");
    prefix.push(name);
    prefix.push(format!(".stemmon-{pid}-"));
    prefix
}

/// The file and the pid that a temporary name is for; `None` for any other file.
fn temporary_of(file: &OsStr) -> Option<(String, u32)> {
    let rest = file.to_str()?.strip_prefix('.')?.strip_suffix(".tmp")?;
    let (target, rest) = rest.rsplit_once(".stemmon-")?;
    let (pid, random) = rest.split_once('-')?;
    let digits = !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit());
    let random = !random.is_empty() && random.bytes().all(|b| b.is_ascii_alphanumeric());
    if target.is_empty() || !digits || !random {
        return None;
    }
    Some((target.to_owned(), pid.parse().ok()?))
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

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    use std::time::{Duration, Instant};

    /// A directory of its own, removed when dropped.
    struct Dir(PathBuf);

    impl Dir {
        fn new(name: &str) -> Dir {
            let dir =
                std::env::temp_dir().join(format!("stemmon-output-{}-{name}", std::process::id()));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).unwrap();
            Dir(dir)
        }

        fn join(&self, name: &str) -> PathBuf {
            self.0.join(name)
        }

        fn names(&self) -> Vec<String> {
            let mut names: Vec<String> = fs::read_dir(&self.0)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            names
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn mkfifo(path: &Path) {
        let status = std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Makes `path` (a link, not what it names) belong to `uid`; `false` when this
    /// process may not (not root).
    fn lchown(path: &Path, uid: u32) -> bool {
        use std::os::unix::ffi::OsStrExt;
        let path = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
        // SAFETY: `path` is a NUL-terminated string that lives across the call; `lchown`
        // only reads it. A gid of `-1` (all bits set) leaves the group as it is.
        unsafe { libc::lchown(path.as_ptr(), uid, libc::gid_t::MAX) == 0 }
    }

    #[test]
    fn temporary_names_are_recognised_and_nothing_else() {
        let name = OsStr::new("report.json");
        let prefix = temporary_prefix(name, 4242);
        assert_eq!(prefix, ".report.json.stemmon-4242-");
        let temporary_pid = |name: &OsStr, file: &OsStr| {
            temporary_of(file).and_then(|(target, pid)| (*target == *name).then_some(pid))
        };
        assert_eq!(
            temporary_pid(name, OsStr::new(".report.json.stemmon-4242-a7Xq9Z.tmp")),
            Some(4242)
        );
        assert_eq!(
            temporary_of(OsStr::new(".stemmon-vm-rank=1.prom.stemmon-7-Ab1.tmp")),
            Some(("stemmon-vm-rank=1.prom".to_owned(), 7))
        );
        for other in [
            ".report.json.tmp",
            "report.json",
            ".report.json.stemmon-42.tmp",
            ".report.json.stemmon-x-1.tmp",
            ".report.json.stemmon--1.tmp",
            ".report.json.stemmon-42-.tmp",
            ".report.json.stemmon-42-a-b.tmp",
            ".other.json.stemmon-42-1.tmp",
            ".report.json.stemmon-42-1.tmp.bak",
        ] {
            assert_eq!(temporary_pid(name, OsStr::new(other)), None, "{other}");
        }
    }

    #[test]
    fn atomic_write_creates_parents_keeps_the_mode_and_leaves_no_temporary() {
        let dir = Dir::new("atomic");
        let path = dir.join("a/b/report.json");
        let output = Output::resolve(&path).unwrap();
        output.write(b"{}", false).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        output.write(b"{\"x\":1}", true).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "{\"x\":1}");
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).unwrap();
        output.write(b"again", false).unwrap();
        assert_eq!(mode(&path), 0o640);
        let names: Vec<_> = fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["report.json"]);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn o_tmpfile_writes_a_new_file_and_replaces_one_with_its_mode() {
        let dir = Dir::new("o-tmpfile");
        let path = dir.join("report.json");
        let mut builder = tempfile::Builder::new();
        builder.prefix(".report.json.stemmon-1-").suffix(".tmp");
        let Some(made) = unnamed::replace(
            &dir.0,
            &path,
            &builder,
            &mut |w| w.write_all(b"one"),
            false,
            &None,
        ) else {
            crate::env::cannot_run(
                "o_tmpfile_writes_a_new_file_and_replaces_one_with_its_mode",
                "the temporary directory's filesystem has no O_TMPFILE",
            );
            return;
        };
        made.unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "one");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o604)).unwrap();
        let kept = Some(fs::metadata(&path).unwrap().permissions());
        unnamed::replace(
            &dir.0,
            &path,
            &builder,
            &mut |w| w.write_all(b"two"),
            true,
            &kept,
        )
        .expect("O_TMPFILE again")
        .unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "two");
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o604
        );
        assert_eq!(dir.names(), ["report.json"]);
    }

    #[test]
    fn a_new_file_gets_the_usual_mode_not_the_temporary_files_0600() {
        let dir = Dir::new("new-mode");
        let path = dir.join("plot.html");
        Output::resolve(&path).unwrap().write(b"x", false).unwrap();
        let made = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        let plain = dir.join("plain");
        File::create(&plain).unwrap();
        let usual = fs::metadata(&plain).unwrap().permissions().mode() & 0o777;
        assert_eq!(made, usual);
    }

    #[test]
    fn a_content_written_in_pieces_lands_whole_and_one_that_fails_replaces_nothing() {
        let dir = Dir::new("with");
        let path = dir.join("merged.json");
        let output = Output::resolve(&path).unwrap();
        // 100 000 small writes, 1.1 MB in all: more than any buffer holds.
        let piece = |at: usize| format!("{at:010}\n");
        output
            .write_with(
                |out| (0..100_000).try_for_each(|at| out.write_all(piece(at).as_bytes())),
                true,
            )
            .unwrap();
        let whole: String = (0..100_000).map(piece).collect();
        assert_eq!(fs::read_to_string(&path).unwrap(), whole);
        // Failing half way: the file written before stays as it was, and nothing else.
        let error = output
            .write_with(
                |out| {
                    out.write_all(&[b'x'; 100_000])?;
                    Err(io::Error::other("cannot encode"))
                },
                true,
            )
            .unwrap_err();
        assert_eq!(error.to_string(), "cannot encode");
        assert_eq!(fs::read_to_string(&path).unwrap(), whole);
        assert_eq!(dir.names(), ["merged.json"]);
        // And where nothing was there, nothing is made.
        let new = Output::resolve(&dir.join("new.json")).unwrap();
        assert!(new
            .write_with(|_| Err(io::Error::other("nothing")), false)
            .is_err());
        assert_eq!(dir.names(), ["merged.json"]);
    }

    #[test]
    fn a_directory_is_refused_and_no_temporary_is_left() {
        let dir = Dir::new("refused");
        fs::create_dir_all(dir.join("taken")).unwrap();
        let error = Output::resolve(&dir.join("taken"))
            .unwrap()
            .write(b"{}", true)
            .unwrap_err();
        assert!(error.to_string().contains("it is a directory"), "{error}");
        assert_eq!(dir.names(), ["taken"]);
    }

    #[test]
    fn a_link_of_this_user_is_followed_not_replaced() {
        let dir = Dir::new("link");
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
            dir.names(),
            ["dangling.json", "missing.json", "real.json", "report.json"]
        );
    }

    #[test]
    fn a_link_planted_by_another_user_is_replaced_never_followed() {
        let dir = Dir::new("planted");
        let victim = dir.join("victim");
        fs::write(&victim, "precious").unwrap();
        let planted = dir.join("report.json");
        std::os::unix::fs::symlink(&victim, &planted).unwrap();
        if !lchown(&planted, 65534) {
            crate::env::cannot_run(
                "a_link_planted_by_another_user_is_replaced_never_followed",
                "a link of another uid needs root to make (lchown)",
            );
            return;
        }
        Output::resolve(&planted)
            .unwrap()
            .write(b"report", true)
            .unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap(), "precious");
        let meta = fs::symlink_metadata(&planted).unwrap();
        assert!(meta.file_type().is_file(), "the link itself was replaced");
        assert_eq!(fs::read_to_string(&planted).unwrap(), "report");
        assert_eq!(dir.names(), ["report.json", "victim"]);
    }

    #[test]
    fn a_fifo_without_a_reader_is_an_error_not_a_hang() {
        let dir = Dir::new("fifo");
        let fifo = dir.join("report.json");
        mkfifo(&fifo);
        let output = Output::resolve(&fifo).unwrap();
        let started = Instant::now();
        let error = output.write(b"{}", true).unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(2));
        assert!(
            error.to_string().contains("no process is reading"),
            "{error}"
        );

        // With a reader, the bytes go through the FIFO, which stays a FIFO.
        let reader = std::thread::spawn({
            let fifo = fifo.clone();
            move || fs::read(&fifo).unwrap()
        });
        let deadline = Instant::now() + Duration::from_secs(10);
        let big = vec![b'x'; 200_000];
        // Retried until the reader's open lands: the write is what tells.
        while output.write(&big, true).is_err() {
            assert!(
                Instant::now() < deadline,
                "the reader never opened the FIFO"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(reader.join().unwrap().len(), big.len());
        assert!(fs::metadata(&fifo).unwrap().file_type().is_fifo());
        assert_eq!(dir.names(), ["report.json"]);
    }

    #[test]
    fn a_fifo_planted_by_another_user_is_replaced_not_written_into() {
        let dir = Dir::new("planted-fifo");
        let fifo = dir.join("metrics.prom");
        mkfifo(&fifo);
        if !lchown(&fifo, 65534) {
            crate::env::cannot_run(
                "a_fifo_planted_by_another_user_is_replaced_not_written_into",
                "a FIFO of another uid needs root to make (lchown)",
            );
            return;
        }
        // No reader: written into, this would fail; replaced, it succeeds.
        Output::resolve(&fifo)
            .unwrap()
            .write(b"metrics", false)
            .unwrap();
        assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_file());
        assert_eq!(fs::read_to_string(&fifo).unwrap(), "metrics");
        assert_eq!(dir.names(), ["metrics.prom"]);
    }

    #[test]
    fn dev_null_is_written_into() {
        Output::resolve(Path::new("/dev/null"))
            .unwrap()
            .write(b"discarded", true)
            .unwrap();
        assert!(fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device());
    }

    #[test]
    fn a_dead_writers_temporary_is_removed_and_a_live_ones_kept() {
        let dir = Dir::new("stale");
        // A pid above the kernel's limit (4194304) is never alive.
        let dead = dir.join(".report.json.stemmon-4194305-AbC123.tmp");
        let live = dir.join(&format!(
            ".report.json.stemmon-{}-XyZ789.tmp",
            std::process::id()
        ));
        fs::write(&dead, "half").unwrap();
        fs::write(&live, "mine").unwrap();
        Output::resolve(&dir.join("report.json")).unwrap();
        assert!(!dead.exists());
        assert!(live.exists());
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
