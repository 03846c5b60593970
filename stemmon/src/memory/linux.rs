//! The Linux reader: `/proc` directly. Descendants come from
//! `/proc/PID/task/TID/children` (a `/proc/*/stat` parent scan where the kernel lacks
//! those files), RSS and the high-water mark together from `status` (the mark reset
//! through `clear_refs` at each reading), USS and PSS from `smaps_rollup`, the peaks of
//! reaped children from `getrusage(RUSAGE_CHILDREN)` and `waitid(WNOWAIT)`.

use super::cgroup::CgroupReader;
use super::{TreeReader, TreeReading};
use crate::report::HighWaterMarks;
use std::collections::{HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::sync::{Mutex, PoisonError};

/// Reads a whole file at offset 0 into `buf` with `pread`, so an open `/proc` file can
/// be read again and again without reopening it.
fn pread_all(file: &File, buf: &mut Vec<u8>) -> io::Result<()> {
    buf.clear();
    let mut offset = 0u64;
    loop {
        if buf.capacity() - buf.len() < 512 {
            buf.reserve(4096);
        }
        let len = buf.len();
        let spare = buf.capacity() - len;
        buf.resize(len + spare, 0);
        let read = file.read_at(&mut buf[len..], offset);
        match read {
            Ok(0) => {
                buf.truncate(len);
                return Ok(());
            }
            Ok(n) => {
                buf.truncate(len + n);
                offset += n as u64;
            }
            Err(e) => {
                buf.truncate(len);
                return Err(e);
            }
        }
    }
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(size).ok().filter(|s| *s > 0).unwrap_or(4096)
}

/// The resident pages field (second) of a `statm` line.
fn parse_statm_resident(text: &[u8]) -> Option<u64> {
    let mut fields = text.split(|b| *b == b' ');
    fields.next()?;
    parse_u64(fields.next()?)
}

fn parse_u64(digits: &[u8]) -> Option<u64> {
    let digits = digits.trim_ascii();
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |acc, b| {
        b.is_ascii_digit()
            .then(|| acc.checked_mul(10)?.checked_add(u64::from(b - b'0')))
            .flatten()
    })
}

/// Pids listed in a `children` file: space-separated decimal numbers.
fn parse_pid_list(text: &[u8], into: &mut Vec<u32>) {
    for field in text.split(|b| b.is_ascii_whitespace()) {
        if let Some(pid) = parse_u64(field).and_then(|p| u32::try_from(p).ok()) {
            into.push(pid);
        }
    }
}

/// The parent pid in a `/proc/PID/stat` line; the command name may hold spaces and
/// parentheses, so fields are counted from the last `)`.
fn parse_stat_ppid(text: &[u8]) -> Option<u32> {
    let close = text.iter().rposition(|b| *b == b')')?;
    let mut fields = text[close + 1..]
        .split(|b| *b == b' ')
        .filter(|f| !f.is_empty());
    fields.next()?; // state
    parse_u64(fields.next()?).and_then(|p| u32::try_from(p).ok())
}

/// `(uss, pss)` in bytes from `smaps_rollup` text (values there are in kB).
fn parse_smaps_rollup(text: &[u8]) -> (Option<u64>, Option<u64>) {
    let (mut private, mut pss, mut seen_private) = (0u64, None, false);
    for line in text.split(|b| *b == b'\n') {
        let Some(colon) = line.iter().position(|b| *b == b':') else {
            continue;
        };
        let (key, rest) = (&line[..colon], &line[colon + 1..]);
        let value = || parse_u64(rest.trim_ascii().strip_suffix(b"kB").unwrap_or(rest));
        match key {
            b"Pss" => pss = value().map(|kb| kb * 1024),
            b"Private_Clean" | b"Private_Dirty" | b"Private_Hugetlb" => {
                if let Some(kb) = value() {
                    private += kb * 1024;
                    seen_private = true;
                }
            }
            _ => {}
        }
    }
    (seen_private.then_some(private), pss)
}

fn is_gone(error: &io::Error) -> bool {
    matches!(error.raw_os_error(), Some(libc::ESRCH) | Some(libc::ENOENT))
}

/// `(VmRSS, VmHWM)` in bytes from a `status` text; `None` where the line is absent, as
/// in a zombie, which holds no memory.
fn parse_status(text: &[u8]) -> (Option<u64>, Option<u64>) {
    let kib = |rest: &[u8]| {
        let rest = rest.trim_ascii();
        parse_u64(rest.strip_suffix(b"kB").unwrap_or(rest)).map(|kb| kb * 1024)
    };
    let mut hwm = None;
    for line in text.split(|b| *b == b'\n') {
        if let Some(rest) = line.strip_prefix(b"VmHWM:") {
            hwm = kib(rest);
        } else if let Some(rest) = line.strip_prefix(b"VmRSS:") {
            // VmRSS follows VmHWM: nothing after it is needed.
            return (kib(rest), hwm);
        }
    }
    (None, hwm)
}

/// How many `/proc` files a reader keeps open between samples: a quarter of the soft
/// descriptor limit, at most 4096, so that the program keeps the rest. Files beyond it
/// are opened, read and closed at each sample.
fn fd_budget() -> usize {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct it is given, which lives on this stack.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return 64;
    }
    usize::try_from(limit.rlim_cur / 4).map_or(4096, |n| n.min(4096))
}

/// What one `status` reading found.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Status {
    /// `VmRSS`; `None` for a zombie.
    pub(crate) rss: Option<u64>,
    /// `VmHWM`: the peak since the last reset (or since the process started).
    pub(crate) hwm: Option<u64>,
}

/// A process's `status`, read with `pread`, and its `clear_refs`, written to reset the
/// high-water mark.
struct ProcFiles {
    status: File,
    clear_refs: Option<File>,
    /// `statm`, for this process's cheap stage-boundary reading only.
    statm: Option<File>,
}

impl ProcFiles {
    fn open(dir: &str, marks: bool) -> io::Result<ProcFiles> {
        let status = File::open(format!("{dir}/status"))?;
        // Without write access the mark is still read: it then runs from the process's
        // start, which still bounds every interval's peak from above.
        let clear_refs = marks
            .then(|| {
                OpenOptions::new()
                    .write(true)
                    .open(format!("{dir}/clear_refs"))
            })
            .and_then(Result::ok);
        Ok(ProcFiles {
            status,
            clear_refs,
            statm: None,
        })
    }

    fn fds(&self) -> usize {
        1 + usize::from(self.clear_refs.is_some())
    }

    /// Reads VmRSS and VmHWM together, then (when `reset`) resets the mark to the current
    /// RSS (`clear_refs` value 5), so that the next reading gets its own interval's peak.
    fn read(&self, buf: &mut Vec<u8>, reset: bool) -> io::Result<Status> {
        pread_all(&self.status, buf)?;
        if buf.is_empty() {
            return Err(io::Error::new(io::ErrorKind::NotFound, "empty status"));
        }
        let (rss, hwm) = parse_status(buf);
        if let (Some(file), true, Some(_)) = (&self.clear_refs, reset, hwm) {
            // A failed reset leaves the mark running from the earlier reset: still a bound.
            let _ = (&*file).write(b"5");
        }
        Ok(Status { rss, hwm })
    }
}

/// This process's own files, shared by the sampler and the stage-boundary readings so
/// that one reading's reset never falls between another's read and reset.
static SELF_FILES: Mutex<Option<ProcFiles>> = Mutex::new(None);

/// Reads this process's VmRSS and VmHWM and, when `reset`, resets the mark.
pub(crate) fn read_self(buf: &mut Vec<u8>, reset: bool) -> io::Result<Status> {
    let mut files = SELF_FILES.lock().unwrap_or_else(PoisonError::into_inner);
    if files.is_none() {
        *files = Some(ProcFiles::open("/proc/self", true)?);
    }
    let files = files.as_ref().expect("opened above");
    files.read(buf, reset)
}

/// This process's peak RSS as `getrusage(RUSAGE_SELF)` gives it: the larger of its
/// mark (`VmHWM`, reset by `clear_refs`) and the peak of the image it replaced at `exec`.
fn self_maxrss() -> u64 {
    // SAFETY: an all-zero rusage is valid; getrusage only writes into it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid pointer cannot fail.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    u64::try_from(usage.ru_maxrss).unwrap_or(0) * 1024
}

/// The cheap stage-boundary reading of this process: RSS from `statm` and, with
/// `marks`, the mark from `getrusage` (then reset): about 2 µs against 8 µs for
/// `status`. `getrusage` also holds the peak of the image this process replaced at
/// `exec` (the forked copy of its launcher), which no reset lowers: it speaks for the
/// mark only above `floor` (see [`self_exec_floor`]); below, `status` is read instead.
pub(crate) fn read_self_cheap(buf: &mut Vec<u8>, marks: bool, floor: u64) -> io::Result<Status> {
    let mut guard = SELF_FILES.lock().unwrap_or_else(PoisonError::into_inner);
    if guard.is_none() {
        *guard = Some(ProcFiles::open("/proc/self", true)?);
    }
    let files = guard.as_mut().expect("opened above");
    if files.statm.is_none() {
        files.statm = Some(File::open("/proc/self/statm")?);
    }
    pread_all(files.statm.as_ref().expect("opened above"), buf)?;
    let rss = parse_statm_resident(buf)
        .map(|pages| pages * page_size())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "unreadable statm"))?;
    if !marks {
        return Ok(Status {
            rss: Some(rss),
            hwm: None,
        });
    }
    let maxrss = self_maxrss();
    if maxrss <= floor {
        return files.read(buf, true);
    }
    if let Some(file) = &files.clear_refs {
        let _ = (&*file).write(b"5");
    }
    Ok(Status {
        rss: Some(rss),
        hwm: Some(maxrss.max(rss)),
    })
}

/// Above what `getrusage(RUSAGE_SELF)` is this process's mark: its figure right after
/// a reset, which is the larger of the RSS then and the peak from before `exec`.
pub(crate) fn self_exec_floor(buf: &mut Vec<u8>) -> u64 {
    let _ = read_self(buf, true);
    self_maxrss()
}

/// Whether this process can reset its own high-water mark (it tries, which starts the
/// first interval): `Err` says why not.
pub(crate) fn probe_self_reset() -> Result<(), String> {
    let mut files = SELF_FILES.lock().unwrap_or_else(PoisonError::into_inner);
    if files.is_none() {
        *files = Some(
            ProcFiles::open("/proc/self", true).map_err(|e| format!("/proc/self/status: {e}"))?,
        );
    }
    let why =
        |e: io::Error| format!("cannot reset the process's own mark (/proc/self/clear_refs: {e})");
    match files.as_ref().and_then(|f| f.clear_refs.as_ref()) {
        Some(file) => (&*file).write(b"5").map(drop).map_err(why),
        None => Err(why(OpenOptions::new()
            .write(true)
            .open("/proc/self/clear_refs")
            .err()
            .unwrap_or_else(|| io::Error::other("not opened")))),
    }
}

/// The `RUSAGE_CHILDREN` figures last seen: any change means a child was reaped since.
static CHILD_USAGE: Mutex<Option<[i64; 7]>> = Mutex::new(None);

/// The peak of the children this process reaped since the previous check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Reaped {
    /// The largest peak RSS, in bytes, of any child this process ever reaped: the kernel
    /// keeps the maximum (`ru_maxrss`), not one figure per child.
    pub(crate) peak: u64,
    /// The maximum grew since the previous check, so a child reaped since had exactly
    /// `peak`; otherwise `peak` is an upper bound of theirs.
    pub(crate) exact: bool,
}

fn children_usage() -> [i64; 7] {
    // SAFETY: an all-zero rusage is valid; getrusage only writes into it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_CHILDREN with a valid pointer cannot fail.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
    [
        usage.ru_utime.tv_sec * 1_000_000 + usage.ru_utime.tv_usec,
        usage.ru_stime.tv_sec * 1_000_000 + usage.ru_stime.tv_usec,
        usage.ru_minflt,
        usage.ru_majflt,
        usage.ru_nvcsw,
        usage.ru_nivcsw,
        usage.ru_maxrss,
    ]
}

/// Whether this process reaped a child since the previous check (by any reader of
/// this process: a reaping counts in the interval of the first reading after it), and
/// the kernel's figure for its peak: one `getrusage` call. The first check sets the
/// baseline.
pub(crate) fn reaped_since_last() -> Option<Reaped> {
    reaped_and_usage().0
}

/// [`reaped_since_last`], and the `RUSAGE_CHILDREN` figures it saw, which a caller can
/// compare with its own last ones (the change may have been counted by another reader).
pub(crate) fn reaped_and_usage() -> (Option<Reaped>, [i64; 7]) {
    let now = children_usage();
    let before = CHILD_USAGE
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .replace(now);
    let reaped = before.filter(|before| *before != now).map(|before| Reaped {
        peak: u64::try_from(now[6]).unwrap_or(0) * 1024,
        exact: now[6] > before[6],
    });
    (reaped, now)
}

/// Forgets the children reaped so far: a new monitor counts from its start.
pub(crate) fn reset_reaped_baseline() {
    *CHILD_USAGE.lock().unwrap_or_else(PoisonError::into_inner) = Some(children_usage());
}

/// The peak RSS of `pid` if it is a child of this process that has exited and is not
/// yet reaped: `waitid(WEXITED | WNOWAIT | WNOHANG)` returns its rusage and leaves it
/// for the program's own `wait`. A zombie's pid cannot be reused, so `P_PID` is as safe
/// here as a pidfd.
pub(crate) fn zombie_peak(pid: u32) -> Option<u64> {
    // SAFETY: all-zero siginfo_t and rusage are valid values; waitid only writes them.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: the raw syscall takes (idtype, id, *siginfo, options, *rusage); both
    // pointers are valid for writes. WNOWAIT leaves the child waitable.
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
    // SAFETY: waitid filled `info` for a SIGCHLD; si_pid is 0 when no child had exited.
    let found = unsafe { info.si_pid() };
    (result == 0 && u32::try_from(found) == Ok(pid))
        .then(|| u64::try_from(usage.ru_maxrss).unwrap_or(0) * 1024)
}

/// Whether some child of this process has exited and waits to be reaped: one
/// `waitid(P_ALL, WEXITED | WNOWAIT | WNOHANG)`, which reaps nothing.
pub(crate) fn any_zombie_child() -> bool {
    // SAFETY: an all-zero siginfo_t is valid; waitid only writes it.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: `info` is valid for writes; WNOWAIT leaves any child waitable.
    let result = unsafe {
        libc::waitid(
            libc::P_ALL,
            0,
            &mut info,
            libc::WEXITED | libc::WNOWAIT | libc::WNOHANG,
        )
    };
    // SAFETY: waitid filled `info`; si_pid is 0 when no child had exited.
    result == 0 && unsafe { info.si_pid() } != 0
}

/// Whether `pid` has exited: gone from the process table, or a zombie child of this
/// process (which holds no memory any more).
pub(crate) fn has_exited(pid: u32) -> bool {
    let Ok(signed) = i32::try_from(pid) else {
        return true;
    };
    // SAFETY: signal 0 sends nothing; it only checks that the process exists.
    if unsafe { libc::kill(signed, 0) } != 0 {
        return io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
    }
    zombie_peak(pid).is_some()
}

/// Descendants that a stage-boundary reading already counted as exited, with their
/// peaks: the next sample does not count them again.
static COUNTED_EXITED: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// Records that a boundary reading counted `pid`'s exit and peak.
pub(crate) fn counted_as_exited(pid: u32) {
    COUNTED_EXITED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(pid);
}

/// What the previous sample knew of a descendant: its last mark, the highest of its
/// marks so far, and whether this process is its parent (its peak then shows in
/// `RUSAGE_CHILDREN` when it is reaped).
#[derive(Clone, Copy, Debug)]
struct Known {
    hwm: u64,
    peak: u64,
    direct: bool,
}

/// Reads a tree from `/proc`, keeping each process's `status` and `clear_refs` and each
/// thread's `children` file open between samples (up to a descriptor budget) so that a
/// sample is mostly `pread` calls.
pub(crate) struct ProcReader {
    detailed: bool,
    marks: bool,
    own_pid: u32,
    budget: usize,
    cached_fds: usize,
    files: HashMap<u32, ProcFiles>,
    children: HashMap<(u32, u32), File>,
    use_children_files: bool,
    /// A `children` file could not be read in this sample: descendants may be missing.
    walk_incomplete: bool,
    /// `pids[1..direct_end]` are the root's own children.
    direct_end: usize,
    /// With a root other than this process: also walk this process's other children,
    /// the orphans it adopted as a subreaper (`stemmon run`).
    adopted: bool,
    known: HashMap<u32, Known>,
    cgroup: Option<CgroupReader>,
    /// The cgroup's kernel peak and OOM kills at the previous sample.
    cgroup_last: (Option<u64>, Option<u64>),
    buf: Vec<u8>,
    pids: Vec<u32>,
    tids: Vec<u32>,
}

impl ProcReader {
    pub(crate) fn new(detailed: bool) -> ProcReader {
        reset_reaped_baseline();
        ProcReader {
            detailed,
            marks: true,
            own_pid: std::process::id(),
            adopted: false,
            budget: fd_budget(),
            cached_fds: 0,
            files: HashMap::new(),
            children: HashMap::new(),
            use_children_files: true,
            walk_incomplete: false,
            direct_end: 1,
            known: HashMap::new(),
            cgroup: None,
            cgroup_last: (None, None),
            buf: Vec::with_capacity(4096),
            pids: Vec::new(),
            tids: Vec::new(),
        }
    }

    /// Forces the `/proc/*/stat` parent scan, as on kernels without `children` files.
    #[cfg(test)]
    pub(crate) fn with_stat_scan(mut self) -> ProcReader {
        self.use_children_files = false;
        self
    }

    /// Caps the descriptors kept open between samples.
    #[cfg(test)]
    pub(crate) fn with_budget(mut self, budget: usize) -> ProcReader {
        self.budget = budget;
        self
    }

    fn list_tasks(&mut self, pid: u32) -> io::Result<()> {
        self.tids.clear();
        for entry in fs::read_dir(format!("/proc/{pid}/task"))? {
            let name = entry?.file_name();
            if let Some(tid) = name.to_str().and_then(|s| s.parse().ok()) {
                self.tids.push(tid);
            }
        }
        Ok(())
    }

    /// Reads one `children` file into `self.pids`, through the cache when it has room.
    /// `Ok(false)`: the file does not exist.
    fn read_children_file(&mut self, pid: u32, tid: u32) -> io::Result<bool> {
        if let Some(file) = self.children.get(&(pid, tid)) {
            match pread_all(file, &mut self.buf) {
                Ok(()) => {
                    // Each child is listed by the one thread that started it: no duplicates.
                    parse_pid_list(&self.buf, &mut self.pids);
                    return Ok(true);
                }
                Err(_) => {
                    self.children.remove(&(pid, tid));
                    self.cached_fds -= 1;
                }
            }
        }
        let file = match File::open(format!("/proc/{pid}/task/{tid}/children")) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e),
        };
        pread_all(&file, &mut self.buf)?;
        parse_pid_list(&self.buf, &mut self.pids);
        if self.cached_fds < self.budget {
            self.children.insert((pid, tid), file);
            self.cached_fds += 1;
        }
        Ok(true)
    }

    /// Adds this process's children but `root` (orphans re-parented to this subreaper)
    /// to the walk; their own descendants follow through the walk.
    fn add_adopted(&mut self, root: u32) {
        let own = self.own_pid;
        let (pids, tids) = (self.pids.len(), std::mem::take(&mut self.tids));
        if self.list_tasks(own).is_err() {
            self.walk_incomplete = true;
        } else {
            for t in 0..self.tids.len() {
                let tid = self.tids[t];
                if self.read_children_file(own, tid).is_err() {
                    self.walk_incomplete = true;
                }
            }
        }
        self.tids = tids;
        let mut index = pids;
        while index < self.pids.len() {
            if self.pids[index] == root {
                self.pids.swap_remove(index);
            } else {
                index += 1;
            }
        }
    }

    /// Fills `self.pids` with `root` and its descendants, root first.
    /// Returns `Ok(false)` when the kernel has no `children` files.
    fn walk_children(&mut self, root: u32) -> io::Result<bool> {
        self.pids.clear();
        self.pids.push(root);
        self.direct_end = 1;
        let mut index = 0;
        while index < self.pids.len() {
            let pid = self.pids[index];
            index += 1;
            if let Err(e) = self.list_tasks(pid) {
                if pid == root {
                    return Err(io::Error::new(
                        e.kind(),
                        format!("cannot list /proc/{root}/task: {e}"),
                    ));
                }
                if !is_gone(&e) {
                    self.walk_incomplete = true;
                }
                continue; // exited since its parent listed it
            }
            for t in 0..self.tids.len() {
                let tid = self.tids[t];
                match self.read_children_file(pid, tid) {
                    Ok(true) => {}
                    Ok(false) => {
                        // The task dir exists but the file does not: no CONFIG_PROC_CHILDREN.
                        if pid == root && fs::metadata(format!("/proc/{pid}/task/{tid}")).is_ok() {
                            return Ok(false);
                        }
                    }
                    // A thread that ended mid-walk lists nobody; any other failure (no
                    // descriptor left, no permission) may hide descendants.
                    Err(e) if is_gone(&e) => {}
                    Err(_) => self.walk_incomplete = true,
                }
            }
            if pid == root {
                if self.adopted && root != self.own_pid {
                    self.add_adopted(root);
                }
                self.direct_end = self.pids.len();
            }
        }
        Ok(true)
    }

    /// Fills `self.pids` from a scan of every `/proc/*/stat` parent field.
    fn scan_stat(&mut self, root: u32) -> io::Result<()> {
        let mut kids: HashMap<u32, Vec<u32>> = HashMap::new();
        for entry in fs::read_dir("/proc")? {
            let Ok(entry) = entry else { continue };
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            let Ok(text) = fs::read(format!("/proc/{pid}/stat")) else {
                continue;
            };
            if let Some(ppid) = parse_stat_ppid(&text) {
                kids.entry(ppid).or_default().push(pid);
            }
        }
        fs::metadata(format!("/proc/{root}"))?;
        self.pids.clear();
        self.pids.push(root);
        self.direct_end = 1;
        let mut index = 0;
        while index < self.pids.len() {
            if let Some(children) = kids.remove(&self.pids[index]) {
                self.pids.extend(children);
            }
            if index == 0 {
                self.direct_end = self.pids.len();
            }
            index += 1;
        }
        Ok(())
    }

    /// Reads `pid`'s status (and resets its mark), through the cache when it has room.
    fn status_of(&mut self, pid: u32) -> io::Result<Status> {
        if pid == self.own_pid {
            return read_self(&mut self.buf, self.marks);
        }
        if let Some(files) = self.files.get(&pid) {
            match files.read(&mut self.buf, self.marks) {
                Ok(status) => return Ok(status),
                Err(_) => {
                    let gone = self.files.remove(&pid).map_or(0, |f| f.fds());
                    self.cached_fds -= gone;
                }
            }
        }
        let files = ProcFiles::open(&format!("/proc/{pid}"), self.marks)?;
        let status = files.read(&mut self.buf, self.marks)?;
        if self.cached_fds + files.fds() <= self.budget {
            self.cached_fds += files.fds();
            self.files.insert(pid, files);
        }
        Ok(status)
    }

    /// Drops the cached files of processes that left the tree.
    fn forget_gone(&mut self, alive: &HashSet<u32>) {
        let mut freed = 0;
        self.files.retain(|pid, files| {
            let keep = alive.contains(pid);
            if !keep {
                freed += files.fds();
            }
            keep
        });
        self.children.retain(|(pid, _), _| {
            let keep = alive.contains(pid);
            freed += usize::from(!keep);
            keep
        });
        self.cached_fds -= freed;
    }
}

impl TreeReader for ProcReader {
    fn name(&self) -> &'static str {
        "linux-proc"
    }

    fn adopt_orphans(&mut self, adopt: bool) {
        self.adopted = adopt;
    }

    fn configure_marks(&mut self, enabled: bool, root: u32) -> HighWaterMarks {
        self.marks = enabled;
        if self.cgroup.is_none() {
            self.cgroup = CgroupReader::of_process(root).ok();
        }
        if !enabled {
            return HighWaterMarks {
                missing: Some("turned off".to_owned()),
                ..HighWaterMarks::default()
            };
        }
        let own = root == self.own_pid;
        let parent = if own {
            probe_self_reset()
        } else {
            OpenOptions::new()
                .write(true)
                .open(format!("/proc/{root}/clear_refs"))
                .map(drop)
                .map_err(|e| format!("cannot reset the root's mark (/proc/{root}/clear_refs: {e})"))
        };
        let mut missing = Vec::new();
        if let Err(why) = &parent {
            missing.push(why.clone());
        }
        if !own {
            missing.push(
                "descendants reaped by the monitored command (not by this process) count with \
                 their last sampled mark"
                    .to_owned(),
            );
        }
        HighWaterMarks {
            enabled: true,
            parent: parent.is_ok(),
            descendants: true,
            reaped: own,
            missing: (!missing.is_empty()).then(|| missing.join("; ")),
            ..HighWaterMarks::default()
        }
    }

    fn read_tree(&mut self, root: u32) -> io::Result<TreeReading> {
        self.walk_incomplete = false;
        if self.use_children_files && !self.walk_children(root)? {
            self.use_children_files = false;
            self.cached_fds -= self.children.len();
            self.children.clear();
        }
        if !self.use_children_files {
            self.scan_stat(root)?;
        }
        let own = root == self.own_pid;
        // Checked before reading the marks: a child reaped in between counts in this interval.
        let reaped = if self.marks && own {
            reaped_since_last()
        } else {
            None
        };
        let pids = std::mem::take(&mut self.pids);
        let mut reading = TreeReading {
            process_count: pids.len() as u32,
            ..TreeReading::default()
        };
        let (mut tree, mut children, mut uss, mut pss) = (0u64, 0u64, None::<u64>, None::<u64>);
        let (mut children_hwm, mut zombie_sum, mut zombie_max) = (0u64, 0u64, None::<u64>);
        let mut known = HashMap::with_capacity(pids.len());
        for (i, &pid) in pids.iter().enumerate() {
            let status = match self.status_of(pid) {
                Ok(status) => status,
                Err(e) if i == 0 => {
                    self.pids = pids;
                    return Err(io::Error::new(
                        e.kind(),
                        format!("cannot read /proc/{root}/status: {e}"),
                    ));
                }
                Err(_) => continue, // vanished or denied: the coverage says so
            };
            reading.rss_processes += 1;
            let rss = status.rss.unwrap_or(0);
            tree += rss;
            let direct = i < self.direct_end;
            if i == 0 {
                reading.parent_rss = Some(rss);
                reading.parent_hwm = status.hwm.filter(|_| self.marks);
            } else {
                children += rss;
                let hwm = status.hwm.unwrap_or(rss).max(rss);
                children_hwm += hwm;
                let peak = self.known.get(&pid).map_or(hwm, |k| k.peak.max(hwm));
                reading
                    .descendants
                    .push(super::Descendant { pid, rss, peak });
                known.insert(pid, Known { hwm, peak, direct });
                if status.rss.is_none() && direct && own && self.marks {
                    if let Some(peak) = zombie_peak(pid) {
                        zombie_sum += peak;
                        zombie_max = zombie_max.max(Some(peak));
                    }
                }
            }
            if self.detailed {
                if let Ok(text) = fs::read(format!("/proc/{pid}/smaps_rollup")) {
                    let (u, p) = parse_smaps_rollup(&text);
                    uss = u.map(|u| uss.unwrap_or(0) + u).or(uss);
                    pss = p.map(|p| pss.unwrap_or(0) + p).or(pss);
                }
            }
        }
        reading.tree_rss = Some(tree);
        reading.children_rss = Some(children);
        reading.tree_uss = uss;
        reading.tree_pss = pss;
        reading.rss_complete =
            reading.rss_processes == reading.process_count && !self.walk_incomplete;
        if self.marks {
            // Descendants seen last time and gone now exited in this interval.
            let (mut direct_gone, mut other_sum, mut other_max) = (0u64, 0u64, None::<u64>);
            let counted = std::mem::take(
                &mut *COUNTED_EXITED
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner),
            );
            for (pid, was) in &self.known {
                if !known.contains_key(pid) && !counted.contains(pid) {
                    // Its peak over its life (an earlier sample may have reset its mark).
                    other_max = other_max.max(Some(was.peak));
                    if was.direct && own {
                        direct_gone += 1;
                    } else {
                        other_sum += was.hwm;
                        other_max = other_max.max(Some(was.hwm));
                    }
                }
            }
            let kernel = reaped.map(|r| r.peak);
            reading.reaped_child_peak = kernel.max(zombie_max).max(other_max);
            // Each reaped child's peak is at most the kernel's maximum over all of them.
            let reaped_bound = kernel.map_or(0, |peak| peak * direct_gone.max(1));
            reading.tree_rss_bound = reading
                .parent_hwm
                .map(|parent| parent + children_hwm + zombie_sum + reaped_bound + other_sum);
            reading.children_hwm = Some(children_hwm);
        }
        self.known = known;
        if let Some(cgroup) = &mut self.cgroup {
            if let Ok(now) = cgroup.read() {
                let (peak_before, kills_before) = self.cgroup_last;
                // The kernel's peak is since the cgroup was made: it speaks for this
                // interval only where it rose in it.
                let risen = now
                    .memory_peak_bytes
                    .filter(|p| peak_before.is_some_and(|b| *p > b));
                reading.cgroup_peak = now.memory_current_bytes.max(risen);
                reading.oom_kills = now
                    .oom_kills
                    .map(|k| k.saturating_sub(kills_before.unwrap_or(k)));
                self.cgroup_last = (now.memory_peak_bytes, now.oom_kills);
                reading.cgroup = Some(now);
            }
        }
        let alive: HashSet<u32> = pids.iter().copied().collect();
        if self.files.len() + self.children.len() > alive.len() * 2 {
            self.forget_gone(&alive);
        }
        self.pids = pids;
        Ok(reading)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_status() {
        let text = b"Name:\tx\nVmPeak:\t  9000 kB\nVmHWM:\t  4096 kB\nVmRSS:\t  1024 kB\nRssAnon:\t 1 kB\n";
        assert_eq!(parse_status(text), (Some(1024 * 1024), Some(4096 * 1024)));
        // A zombie has no memory lines at all.
        assert_eq!(
            parse_status(b"Name:\tx\nState:\tZ (zombie)\n"),
            (None, None)
        );
    }

    #[test]
    fn parses_stat_ppid_with_awkward_names() {
        assert_eq!(parse_stat_ppid(b"42 (a) b (c)) S 7 42 42 0"), Some(7));
        assert_eq!(parse_stat_ppid(b"1 (init) S 0 1 1"), Some(0));
    }

    #[test]
    fn parses_smaps_rollup() {
        let text = b"00400000-ffffffffff601000 ---p 00000000 00:00 0 [rollup]\n\
            Rss:                1024 kB\nPss:                 600 kB\n\
            Private_Clean:       100 kB\nPrivate_Dirty:       400 kB\n";
        assert_eq!(
            parse_smaps_rollup(text),
            (Some(500 * 1024), Some(600 * 1024))
        );
    }

    #[test]
    fn parses_pid_lists() {
        let mut pids = Vec::new();
        parse_pid_list(b"12 345 6789 \n", &mut pids);
        assert_eq!(pids, vec![12, 345, 6789]);
    }

    /// Tests that read or reset this process's own mark must not interleave.
    static SELF_MARK: Mutex<()> = Mutex::new(());

    fn self_mark() -> std::sync::MutexGuard<'static, ()> {
        SELF_MARK.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// VmRSS of this process from a fresh `open` + `read` of its status file.
    fn fresh_vm_rss() -> u64 {
        let text = fs::read("/proc/self/status").unwrap();
        parse_status(&text).0.unwrap()
    }

    const MIB: u64 = 1 << 20;

    fn touched(mib: u64) -> Vec<u8> {
        let mut block = vec![0u8; (mib * MIB) as usize];
        for page in block.chunks_mut(4096) {
            page[0] = 1;
        }
        std::hint::black_box(block)
    }

    #[test]
    fn self_status_matches_a_fresh_read_and_its_mark_resets() {
        let _mark = self_mark();
        let mut buf = Vec::new();
        read_self(&mut buf, true).unwrap();
        let block = touched(64);
        let held = read_self(&mut buf, false).unwrap();
        let fresh = fresh_vm_rss();
        let rss = held.rss.unwrap();
        assert!(
            rss.abs_diff(fresh) < 4 * MIB,
            "the kept fd reads what a fresh open reads: {rss} vs {fresh}"
        );
        drop(block);
        let after = read_self(&mut buf, true).unwrap();
        let (rss_after, hwm) = (after.rss.unwrap(), after.hwm.unwrap());
        assert!(
            hwm + MIB >= rss && hwm >= rss_after + 40 * MIB,
            "the mark kept the freed 64 MiB: hwm {hwm}, rss then {rss}, now {rss_after}"
        );
        let next = read_self(&mut buf, true).unwrap().hwm.unwrap();
        assert!(
            next + 40 * MIB <= hwm,
            "the reset started a new interval: {next} after {hwm}"
        );
    }

    #[test]
    fn a_descendants_mark_is_read_and_reset_at_each_sample() {
        let _mark = self_mark();
        // A child that touches 96 MiB, frees it, then waits: only its mark remembers.
        let mut child = std::process::Command::new("python3")
            .args([
                "-c",
                "b = bytearray(96 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\n\
                 del b\nprint('freed', flush=True)\nimport sys; sys.stdin.read()",
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3 runs");
        let mut line = String::new();
        io::BufRead::read_line(
            &mut io::BufReader::new(child.stdout.as_mut().unwrap()),
            &mut line,
        )
        .unwrap();
        assert_eq!(line.trim(), "freed");
        let mut reader = ProcReader::new(false);
        let first = reader.read_tree(std::process::id()).unwrap();
        let second = reader.read_tree(std::process::id()).unwrap();
        drop(child.stdin.take());
        child.wait().unwrap();
        let (rss, hwm) = (first.children_rss.unwrap(), first.children_hwm.unwrap());
        assert!(
            hwm >= rss + 90 * MIB,
            "the child's mark holds the freed 96 MiB: hwm {hwm}, rss {rss}"
        );
        let again = second.children_hwm.unwrap();
        assert!(
            again + 90 * MIB <= hwm,
            "reset after the first sample: {again} after {hwm}"
        );
        let bound = first.tree_rss_bound.unwrap();
        assert!(bound >= first.parent_hwm.unwrap() + hwm, "{first:?}");
    }

    #[test]
    fn a_reaped_childs_peak_shows_in_the_next_reading() {
        let _mark = self_mark();
        let mut reader = ProcReader::new(false);
        reader.read_tree(std::process::id()).unwrap();
        let status = std::process::Command::new("python3")
            .args([
                "-c",
                "b = bytearray(128 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1",
            ])
            .status()
            .expect("python3 runs");
        assert!(status.success());
        let reading = reader.read_tree(std::process::id()).unwrap();
        let peak = reading.reaped_child_peak.unwrap();
        assert!(peak >= 128 * MIB, "reaped peak {peak}");
        assert!(reading.tree_rss_bound.unwrap() >= peak + reading.parent_hwm.unwrap());
        // Consumed: the next reading has no reaped child.
        let next = reader.read_tree(std::process::id()).unwrap();
        assert_eq!(next.reaped_child_peak, None);
    }

    #[test]
    fn a_zombie_childs_peak_is_read_without_reaping_it() {
        let _mark = self_mark();
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

    /// Run by `samples_survive_a_low_descriptor_limit` in a child under `ulimit -n 36`.
    #[test]
    #[ignore = "a helper: runs in a child process under `ulimit -n 36`"]
    fn fd_limit_probe() {
        if std::env::var_os("STEMMON_FD_PROBE").is_none() {
            return;
        }
        let (stop, parked) = std::sync::mpsc::channel::<()>();
        let parked = std::sync::Arc::new(Mutex::new(parked));
        let threads: Vec<_> = (0..31)
            .map(|_| {
                let parked = std::sync::Arc::clone(&parked);
                std::thread::spawn(move || {
                    let _ = parked.lock().map(|rx| rx.recv());
                })
            })
            .collect();
        let mut kids = spawn_sleepers(3);
        let me = std::process::id();
        let mut reader = ProcReader::new(false);
        for _ in 0..3 {
            match reader.read_tree(me) {
                Ok(r) => println!(
                    "sample count={} read={} complete={}",
                    r.process_count, r.rss_processes, r.rss_complete
                ),
                Err(e) => println!("sample failed: {e}"),
            }
        }
        // With no descriptor left, the failure says so rather than "not found".
        let mut hog = Vec::new();
        while let Ok(file) = File::open("/dev/null") {
            hog.push(file);
        }
        let mut fresh = ProcReader::new(false).with_budget(0);
        match fresh.read_tree(me) {
            Ok(_) => println!("exhausted: read"),
            Err(e) => println!("exhausted: {e}"),
        }
        drop(hog);
        for kid in &mut kids {
            kid.kill().unwrap();
            kid.wait().unwrap();
        }
        drop(stop);
        for thread in threads {
            thread.join().unwrap();
        }
    }

    #[test]
    fn samples_survive_a_low_descriptor_limit() {
        let exe = std::env::current_exe().unwrap();
        let output = std::process::Command::new("sh")
            .args(["-c", "ulimit -n 36 && exec \"$0\" \"$@\""])
            .arg(&exe)
            .args([
                "--exact",
                "memory::linux::tests::fd_limit_probe",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("STEMMON_FD_PROBE", "1")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let samples: Vec<&str> = stdout
            .lines()
            .filter_map(|l| l.find("sample ").map(|at| &l[at..]))
            .collect();
        assert_eq!(
            samples,
            vec!["sample count=4 read=4 complete=true"; 3],
            "31 threads and 3 children under 36 descriptors:\n{stdout}"
        );
        let exhausted = stdout.lines().find(|l| l.starts_with("exhausted")).unwrap();
        assert!(
            exhausted.contains("Too many open files"),
            "the real error is kept: {exhausted}"
        );
    }

    fn spawn_sleepers(n: usize) -> Vec<std::process::Child> {
        (0..n)
            .map(|_| {
                std::process::Command::new("sleep")
                    .arg("30")
                    .spawn()
                    .unwrap()
            })
            .collect()
    }

    #[test]
    fn children_walk_and_stat_scan_find_the_same_tree() {
        let _mark = self_mark();
        let mut kids = spawn_sleepers(3);
        let me = std::process::id();
        let mut walk = ProcReader::new(false);
        let mut scan = ProcReader::new(false).with_stat_scan();
        let a = walk.read_tree(me).unwrap();
        let b = scan.read_tree(me).unwrap();
        // Other tests of this binary may run their own children; ours are among them.
        assert!(a.process_count >= 4, "{a:?}");
        let mut found_walk = walk.pids.clone();
        let mut found_scan = scan.pids.clone();
        found_walk.sort_unstable();
        found_scan.sort_unstable();
        for kid in &kids {
            assert!(found_walk.contains(&kid.id()));
            assert!(found_scan.contains(&kid.id()));
        }
        assert!(b.rss_complete && a.rss_complete);
        for kid in &mut kids {
            kid.kill().unwrap();
            kid.wait().unwrap();
        }
    }

    #[test]
    fn detailed_reading_has_uss_and_pss() {
        let _mark = self_mark();
        let mut reader = ProcReader::new(true);
        let reading = reader.read_tree(std::process::id()).unwrap();
        let (uss, pss, rss) = (
            reading.tree_uss.unwrap(),
            reading.tree_pss.unwrap(),
            reading.tree_rss.unwrap(),
        );
        assert!(
            uss > 0 && uss <= pss && pss <= rss,
            "uss {uss} pss {pss} rss {rss}"
        );
    }

    #[test]
    fn a_missing_root_is_an_error() {
        let mut reader = ProcReader::new(false);
        assert!(reader.read_tree(u32::MAX - 1).is_err());
    }
}
