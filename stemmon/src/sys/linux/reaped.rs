//! Children that exited: the peaks the kernel keeps for those this process reaped
//! (`getrusage(RUSAGE_CHILDREN)`) and for those waiting to be reaped (`waitid` with
//! `WNOWAIT`, which leaves them to the program's own `wait`).

use crate::memory::Usage;
use std::io;

/// The `RUSAGE_CHILDREN` figures of this process: any change means that a child was
/// reaped since they were taken.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ChildUsage {
    user_seconds: libc::time_t,
    user_micros: libc::suseconds_t,
    system_seconds: libc::time_t,
    system_micros: libc::suseconds_t,
    minor_faults: libc::c_long,
    major_faults: libc::c_long,
    voluntary_switches: libc::c_long,
    involuntary_switches: libc::c_long,
    /// The largest peak RSS of any child ever reaped, in KiB (`ru_maxrss`).
    max_rss_kib: libc::c_long,
    /// Blocks of 512 bytes the reaped children read and wrote (`ru_inblock`,
    /// `ru_oublock`: their `/proc/PID/io` `read_bytes`, `write_bytes` >> 9).
    in_blocks: libc::c_long,
    out_blocks: libc::c_long,
}

impl ChildUsage {
    /// The figures now: one `getrusage` call.
    pub(crate) fn now() -> ChildUsage {
        // SAFETY: an all-zero rusage is a valid value of this plain C struct.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `usage` is valid for writes and outlives the call; RUSAGE_CHILDREN
        // is a valid `who`, so the call cannot fail.
        unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
        ChildUsage {
            user_seconds: usage.ru_utime.tv_sec,
            user_micros: usage.ru_utime.tv_usec,
            system_seconds: usage.ru_stime.tv_sec,
            system_micros: usage.ru_stime.tv_usec,
            minor_faults: usage.ru_minflt,
            major_faults: usage.ru_majflt,
            voluntary_switches: usage.ru_nvcsw,
            involuntary_switches: usage.ru_nivcsw,
            max_rss_kib: usage.ru_maxrss,
            in_blocks: usage.ru_inblock,
            out_blocks: usage.ru_oublock,
        }
    }

    /// The reaped children's CPU and I/O.
    pub(crate) fn usage(&self) -> Usage {
        usage_of_parts(
            (self.user_seconds, self.user_micros),
            (self.system_seconds, self.system_micros),
            self.in_blocks,
            self.out_blocks,
            self.major_faults,
        )
    }

    /// What changed from `before` to `self`: `Some` when a child was reaped in between.
    /// `baseline` is the figures when the monitor started: a maximum no higher than
    /// theirs is not this run's.
    pub(crate) fn reaped_since(
        &self,
        before: &ChildUsage,
        baseline: &ChildUsage,
    ) -> Option<Reaped> {
        let bytes = u64::try_from(self.max_rss_kib).unwrap_or(0) * 1024;
        (self != before).then(|| Reaped {
            peak: (self.max_rss_kib > before.max_rss_kib).then_some(bytes),
            at_most: (self.max_rss_kib > baseline.max_rss_kib).then_some(bytes),
        })
    }
}

fn micros((seconds, micros): (libc::time_t, libc::suseconds_t)) -> u64 {
    let seconds = u64::try_from(seconds).unwrap_or(0);
    let micros = u64::try_from(micros).unwrap_or(0);
    seconds.saturating_mul(1_000_000).saturating_add(micros)
}

fn usage_of_parts(
    user: (libc::time_t, libc::suseconds_t),
    system: (libc::time_t, libc::suseconds_t),
    in_blocks: libc::c_long,
    out_blocks: libc::c_long,
    major_faults: libc::c_long,
) -> Usage {
    let count = |n: libc::c_long| u64::try_from(n).unwrap_or(0);
    Usage {
        user_micros: micros(user),
        system_micros: micros(system),
        read_bytes: count(in_blocks) * 512,
        write_bytes: count(out_blocks) * 512,
        major_faults: count(major_faults),
    }
}

/// The CPU and I/O counters of an rusage.
pub(crate) fn usage_of(usage: &libc::rusage) -> Usage {
    usage_of_parts(
        (usage.ru_utime.tv_sec, usage.ru_utime.tv_usec),
        (usage.ru_stime.tv_sec, usage.ru_stime.tv_usec),
        usage.ru_inblock,
        usage.ru_oublock,
        usage.ru_majflt,
    )
}

/// `getrusage(who)`: one call, which cannot fail for a valid `who`.
pub(crate) fn rusage(who: libc::c_int) -> libc::rusage {
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is valid for writes and outlives the call; callers pass
    // RUSAGE_SELF, RUSAGE_CHILDREN or RUSAGE_THREAD, all valid on Linux.
    unsafe { libc::getrusage(who, &mut usage) };
    usage
}

/// The calling thread's user plus system CPU time, in microseconds (`RUSAGE_THREAD`).
pub(crate) fn thread_cpu_micros() -> u64 {
    usage_of(&rusage(libc::RUSAGE_THREAD)).cpu_micros()
}

/// What `waitid(WNOWAIT)` says of an exited child not yet reaped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Zombie {
    /// Its peak RSS (`ru_maxrss`), in bytes.
    pub(crate) peak: u64,
    /// Its exit code, 128 + N for signal N.
    pub(crate) exit_code: Option<i32>,
    /// Its final counters, with those of the children it reaped.
    pub(crate) usage: Usage,
}

/// What the kernel says of the children this process reaped since a previous check.
///
/// It keeps one maximum over every child ever reaped (`ru_maxrss` of
/// `RUSAGE_CHILDREN`), counted from before this process's `exec` too (`cargo run`
/// hands its program the maximum of the compilers it reaped). Where it grew, one of
/// the children reaped since had exactly that peak (its own, or one of the children it
/// waited for: the kernel merges them). Where it did not, their peaks were at most the
/// maximum, which bounds them only if this run set it: one inherited, or from before
/// the start, says nothing of theirs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Reaped {
    /// The maximum it grew to, in bytes; `None` where it did not grow.
    pub(crate) peak: Option<u64>,
    /// The maximum, in bytes, where it is above the one at the start: at most what each
    /// child reaped since held. `None` where it is not this run's.
    pub(crate) at_most: Option<u64>,
}

impl Reaped {
    /// The most the children reaped since held, where the kernel says (exactly where it
    /// grew, else at most this run's maximum).
    pub(crate) fn bound(&self) -> Option<u64> {
        self.peak.or(self.at_most)
    }
}

/// The peak RSS of `pid` if it is a child of this process that has exited and is not
/// yet reaped: `waitid(WEXITED | WNOWAIT | WNOHANG)` returns its rusage and leaves it
/// for the program's own `wait`. A zombie's pid cannot be reused, so `P_PID` is as safe
/// here as a pidfd.
pub(crate) fn zombie_peak(pid: u32) -> Option<u64> {
    zombie(pid).map(|z| z.peak)
}

/// [`zombie_peak`] with the exit code and the final counters.
pub(crate) fn zombie(pid: u32) -> Option<Zombie> {
    // SAFETY: an all-zero siginfo_t is a valid value of this plain C struct.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: the raw syscall takes (idtype, id, *siginfo, options, *rusage) (libc's
    // `waitid` wrapper has no rusage argument); both pointers are valid for writes and
    // outlive the call. WNOWAIT leaves the child waitable, WNOHANG keeps it from blocking.
    let result = unsafe {
        libc::syscall(
            libc::SYS_waitid,
            libc::P_PID,
            libc::id_t::from(pid),
            &mut info as *mut libc::siginfo_t,
            libc::WEXITED | libc::WNOWAIT | libc::WNOHANG,
            &mut usage as *mut libc::rusage,
        )
    };
    // SAFETY: `info` is initialized (zeroed, then possibly filled by waitid for a
    // SIGCHLD); si_pid reads the pid field of that layout, 0 when no child had exited.
    let found = unsafe { info.si_pid() };
    if result != 0 || u32::try_from(found) != Ok(pid) {
        return None;
    }
    // SAFETY: as above: a SIGCHLD siginfo filled by waitid, whose status field holds
    // the exit status (CLD_EXITED) or the signal (CLD_KILLED, CLD_DUMPED).
    let status = unsafe { info.si_status() };
    let exit_code = match info.si_code {
        libc::CLD_EXITED => Some(status),
        libc::CLD_KILLED | libc::CLD_DUMPED => Some(128 + status),
        _ => None,
    };
    Some(Zombie {
        peak: u64::try_from(usage.ru_maxrss).unwrap_or(0) * 1024,
        exit_code,
        usage: usage_of(&usage),
    })
}

/// Whether some child of this process has exited and waits to be reaped: one
/// `waitid(P_ALL, WEXITED | WNOWAIT | WNOHANG)`, which reaps nothing.
pub(crate) fn any_zombie_child() -> bool {
    // SAFETY: an all-zero siginfo_t is a valid value of this plain C struct.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: `info` is valid for writes and outlives the call; WNOWAIT leaves any
    // child waitable and WNOHANG keeps the call from blocking.
    let result = unsafe {
        libc::waitid(
            libc::P_ALL,
            0,
            &mut info,
            libc::WEXITED | libc::WNOWAIT | libc::WNOHANG,
        )
    };
    // SAFETY: `info` is initialized (zeroed, then possibly filled by waitid); si_pid
    // is 0 when no child had exited.
    result == 0 && unsafe { info.si_pid() } != 0
}

/// Whether `pid` has exited: gone from the process table, or a zombie child of this
/// process (which holds no memory any more).
pub(crate) fn has_exited(pid: u32) -> bool {
    let Ok(signed) = i32::try_from(pid) else {
        return true;
    };
    // SAFETY: signal 0 sends nothing; kill only checks that the process exists and
    // that this process may signal it.
    if unsafe { libc::kill(signed, 0) } != 0 {
        return io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
    }
    zombie_peak(pid).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn a_zombie_childs_peak_is_read_without_reaping_it() {
        let _mark = crate::sys::linux::tests::self_mark();
        let mut child = std::process::Command::new("python3")
            .args([
                "-c",
                "b = bytearray(80 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1",
            ])
            .spawn()
            .expect("python3 runs");
        let pid = child.id();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let peak = loop {
            if let Some(peak) = zombie_peak(pid) {
                break peak;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the child never exited"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        };
        assert!(peak >= 80 * MIB, "zombie peak {peak}");
        assert!(has_exited(pid));
        // Still there for the program's own wait.
        assert!(child.wait().unwrap().success());
    }

    #[test]
    fn a_change_of_the_figures_is_a_reaping() {
        let start = ChildUsage::default();
        assert_eq!(start.reaped_since(&start, &start), None);
        let after = ChildUsage {
            max_rss_kib: 2048,
            minor_faults: 10,
            ..start
        };
        let grew = Reaped {
            peak: Some(2 * MIB),
            at_most: Some(2 * MIB),
        };
        assert_eq!(after.reaped_since(&start, &start), Some(grew));
        // A reaping below this run's maximum: at most that.
        let smaller = ChildUsage {
            minor_faults: 20,
            ..after
        };
        let below = smaller.reaped_since(&after, &start).unwrap();
        assert_eq!((below.peak, below.bound()), (None, Some(2 * MIB)));
        // A maximum inherited across `exec` (the baseline) says nothing.
        let inherited = smaller.reaped_since(&after, &after).unwrap();
        assert_eq!((inherited.peak, inherited.bound()), (None, None));
    }
}
