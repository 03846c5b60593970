//! The kernel's peak RSS of this process and of the children it reaped (`getrusage`),
//! and of one child as it is reaped (`wait4`): what a test's `max_rss` is held to.

use std::io;

/// The largest peak RSS of this process and of the children it reaped, in bytes.
pub(crate) fn own_peak() -> Option<u64> {
    let peak = |who| {
        // SAFETY: `usage` is a plain struct the call fills; `who` is a valid selector.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: as above; a failed call leaves it unread.
        (unsafe { libc::getrusage(who, &mut usage) } == 0).then(|| kib(usage.ru_maxrss))
    };
    let own = peak(libc::RUSAGE_SELF)?;
    Some(own.max(peak(libc::RUSAGE_CHILDREN).unwrap_or(0)))
}

/// Waits for the child `pid`, which nobody reaped yet (std's `Child` never waited),
/// and reaps it: whether it exited with status 0, and its peak RSS and its reaped
/// descendants', in bytes.
pub(crate) fn reap_with_peak(pid: u32) -> io::Result<(bool, u64)> {
    // SAFETY: plain structs the call fills.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let mut status: libc::c_int = 0;
    let pid = pid as libc::pid_t;
    loop {
        // SAFETY: `pid` is the caller's child, not reaped yet; both pointers are valid
        // for writes for the whole call.
        let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if reaped == pid {
            break;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    let exited_zero = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    Ok((exited_zero, kib(usage.ru_maxrss)))
}

fn kib(maxrss: libc::c_long) -> u64 {
    // Linux and the BSDs count KiB; macOS counts bytes.
    let bytes = if cfg!(target_os = "macos") { 1 } else { 1024 };
    (maxrss.max(0) as u64).saturating_mul(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reaped_childs_peak_is_what_it_held() {
        // A shell that exits at once: its peak is a few MiB, above nothing and below
        // 64 MiB, and it is reaped once (a second wait finds no child).
        #[allow(clippy::zombie_processes)] // reaped by `reap_with_peak`
        let child = std::process::Command::new("sh")
            .args(["-c", "exit 0"])
            .spawn()
            .unwrap();
        let (passed, peak) = reap_with_peak(child.id()).unwrap();
        assert!(passed);
        assert!(peak > 0 && peak < 64 << 20, "{peak}");
        assert!(reap_with_peak(child.id()).is_err(), "reaped once");
        assert!(own_peak().is_some_and(|own| own > 0));
    }
}
