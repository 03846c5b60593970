//! The few calls the monitor's own helper processes need (NVML's, see
//! `sources::gpu::helper`): how one ended, its pipes without blocking, and its end with
//! the monitor's.

use std::time::Duration;

/// How the exited child `pid` ended (`killed by signal 11 (SIGSEGV)`, `exited with
/// status 3`), without reaping it; `None` while it runs.
#[cfg(unix)]
pub(crate) fn child_end(pid: u32) -> Option<String> {
    // SAFETY: an all-zero siginfo_t is a valid value; waitid fills it.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: `info` is valid for writes for the whole call; WNOWAIT leaves the child
    // to be reaped by its owner.
    let done = unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOWAIT | libc::WNOHANG,
        )
    };
    // SAFETY: waitid succeeded; with WNOHANG a pid of 0 means no child has exited.
    let (who, code, status) = unsafe { (info.si_pid(), info.si_code, info.si_status()) };
    if done != 0 || who == 0 {
        return None;
    }
    Some(match code {
        libc::CLD_EXITED => format!("exited with status {status}"),
        _ => {
            let name = match status {
                libc::SIGSEGV => " (SIGSEGV)",
                libc::SIGABRT => " (SIGABRT)",
                libc::SIGBUS => " (SIGBUS)",
                libc::SIGKILL => " (SIGKILL)",
                libc::SIGILL => " (SIGILL)",
                libc::SIGFPE => " (SIGFPE)",
                _ => "",
            };
            format!("killed by signal {status}{name}")
        }
    })
}

#[cfg(not(unix))]
pub(crate) fn child_end(_pid: u32) -> Option<String> {
    None
}

/// Makes reads and writes of `fd` return at once (`WouldBlock`) rather than wait.
#[cfg(unix)]
pub(crate) fn set_nonblocking(fd: &impl std::os::fd::AsRawFd) -> std::io::Result<()> {
    let fd = fd.as_raw_fd();
    // SAFETY: F_GETFL and F_SETFL take and return plain integers on a descriptor the
    // caller owns.
    let done = unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 {
            -1
        } else {
            libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK)
        }
    };
    if done < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Waits until `fd` can be read (or has ended), at most `wait`.
#[cfg(unix)]
pub(crate) fn wait_readable(fd: &impl std::os::fd::AsRawFd, wait: Duration) {
    let mut poll = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let millis = wait.as_millis().clamp(1, i32::MAX as u128) as libc::c_int;
    // SAFETY: `poll` is one valid pollfd for the whole call.
    unsafe { libc::poll(&mut poll, 1, millis) };
}

/// A helper dies with the monitor's process, even while blocked in a driver's call.
pub(crate) fn die_with_parent() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: PR_SET_PDEATHSIG takes one integer argument and touches no memory.
        unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) };
    }
}
