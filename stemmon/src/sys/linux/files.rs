//! The files outside the tree's readings that the runtime reads through `/proc`: the
//! kernel's host name, a process's status for the GPU's pid matching, and the link
//! that gives an unnamed (`O_TMPFILE`) report its name.

use std::ffi::CString;
use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The kernel's host name, where it has one.
pub(crate) fn kernel_host_name() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
}

/// Appends the text of `/proc/PID/status` to `buf`; `path` is scratch space for its
/// path.
#[cfg_attr(not(feature = "gpu"), allow(dead_code))] // the GPU's pid matching
pub(crate) fn process_status(pid: u32, buf: &mut Vec<u8>, path: &mut String) -> io::Result<()> {
    path.clear();
    let _ = write!(path, "/proc/{pid}/status");
    File::open(path.as_str())?.read_to_end(buf)?;
    Ok(())
}

/// Gives the unnamed `file` the name `path` (`linkat`, which fails if `path` exists).
/// An error of kind `Unsupported` when neither `/proc` nor `CAP_DAC_READ_SEARCH` lets
/// a descriptor be linked.
pub(crate) fn link_unnamed(file: &File, path: &Path) -> io::Result<()> {
    let to = CString::new(path.as_os_str().as_bytes())?;
    let from = CString::new(format!("/proc/self/fd/{}", file.as_raw_fd()))?;
    // SAFETY: `from` and `to` are NUL-terminated strings that outlive the call, which
    // only reads them; `AT_FDCWD` needs no open descriptor.
    let linked = unsafe {
        libc::linkat(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::AT_SYMLINK_FOLLOW,
        )
    };
    if linked == 0 {
        return Ok(());
    }
    let error = io::Error::last_os_error();
    if error.raw_os_error() != Some(libc::ENOENT) || Path::new("/proc/self/fd").exists() {
        return Err(error);
    }
    // No `/proc`: `AT_EMPTY_PATH` links the descriptor itself, given the capability.
    // SAFETY: the descriptor is open (`file` owns it for the call); the empty path and
    // `to` are NUL-terminated strings that outlive the call, which only reads them.
    let linked = unsafe {
        libc::linkat(
            file.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::AT_EMPTY_PATH,
        )
    };
    if linked == 0 {
        return Ok(());
    }
    let error = io::Error::last_os_error();
    match error.raw_os_error() {
        Some(libc::EPERM | libc::ENOENT | libc::EACCES) => Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "an unnamed file cannot be linked without /proc",
        )),
        _ => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_status_names_its_own_pid() {
        let (mut buf, mut path) = (Vec::new(), String::new());
        process_status(std::process::id(), &mut buf, &mut path).unwrap();
        let text = String::from_utf8(buf).unwrap();
        let pid = format!("Pid:\t{}", std::process::id());
        assert!(text.lines().any(|line| line == pid), "{text}");
        assert_eq!(path, format!("/proc/{}/status", std::process::id()));
    }
}
