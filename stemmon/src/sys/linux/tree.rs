//! The walk of a process tree through `/proc/PID/task/TID/children`, with the files of
//! every live process kept open between samples (up to a descriptor budget), so that a
//! sample is, per process, one `pread` of `status`, one write to `clear_refs`, one
//! `pread` each of `stat` and `io` (CPU, faults and storage I/O, the book's `cpu-io.md`) and one
//! `pread` of each thread's `children`: the floor of the work. A process's `cmdline`
//! is read once, when it is first seen.
//!
//! `stat` and `io` are read at most every [`USAGE_EVERY`] per process: sampling faster
//! than that (down to 1 ms) would otherwise add most of what `status` costs, for CPU and
//! I/O figures that a timeline point measures over 100 ms anyway. In between, a
//! process's last figures stand (its counters are cumulative: nothing is lost, it
//! shows a few milliseconds later, or in its reaper's rusage once it exits).
//!
//! Where the kernel has no `children` files, a scan of every `/proc/*/stat` parent
//! field finds the tree instead (slower, and only there).

use super::ledger::{Ledger, PidMap};
pub(crate) use super::proc_files::{fd_budget, ProcUsage};
use super::proc_files::{read_command, read_kept, read_status, Comm, Fds};
use super::procfs::{
    is_gone, list_numeric_dir, page_size, parse_io, parse_pid_list, parse_stat_usage, status_name,
    Buf, ProcPath, Status,
};
use super::stat_scan::{has_children_files, scan_stat};
use std::fs::{File, OpenOptions};
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A process's `stat` and `io` are read at most this often (see the module docs).
pub(crate) const USAGE_EVERY: Duration = Duration::from_millis(10);

/// A process of several threads has its thread list read at least every this many
/// samples, whatever `Threads:` says (by pid; why: [`ProcTable::children_of`]).
pub(crate) const RELIST_EVERY: u64 = 8;

/// One process of a sample, as the walk found it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Seen {
    pub(crate) pid: u32,
    /// Its `status`; `None` when it vanished or denied access before it was read.
    pub(crate) status: Option<Status>,
    /// A child of this process: of the root when the root is this process, or an
    /// orphan it adopted as a subreaper. Its peak shows in this process's rusage
    /// (`waitid(WNOWAIT)` as a zombie, `RUSAGE_CHILDREN` once reaped).
    pub(crate) direct: bool,
    /// Its CPU, faults and I/O; `None` where its `stat` could not be read, and for
    /// this process (whose figures come from `getrusage`).
    pub(crate) usage: Option<ProcUsage>,
}

/// One thread and its `children` file.
#[derive(Debug)]
struct Task {
    tid: u32,
    /// `None` past the budget: opened at each sample then.
    children: Option<File>,
}

/// One process's files, kept between samples.
#[derive(Debug, Default)]
struct Proc {
    /// `None` past the budget: opened at each sample then.
    status: Option<File>,
    clear_refs: Option<File>,
    stat: Option<File>,
    io: Option<File>,
    /// Its `stat` and `io` as last read, and when.
    usage: Option<(ProcUsage, Instant)>,
    /// Its argv joined by spaces, read once (`None` until read, or unreadable).
    command: Option<Arc<str>>,
    /// `cmdline` was read (or tried) for this process.
    command_read: bool,
    /// Its `Name:` when `command` was read (a change: it `exec`ed another program).
    comm: Comm,
    /// Its threads as last listed.
    tasks: Vec<Task>,
    /// `Threads:` when `tasks` were listed; `None`: list them at the next sample.
    listed_threads: Option<u32>,
    /// The last sample that found it.
    stamp: u64,
}

impl Proc {
    /// Notes the `Name:` of the `status` just read: where it changed since the argv
    /// was read, the process `exec`ed another program, and its argv is read again.
    fn follow_exec(&mut self, status: &[u8]) {
        let comm = Comm::of(status);
        if comm != self.comm {
            if self.comm.is_read() {
                self.command_read = false;
            }
            self.comm = comm;
        }
    }

    /// Closes every file (the process is gone, or its pid is another process's now).
    fn close(&mut self, fds: &mut Fds) {
        fds.release(self.status.take());
        fds.release(self.clear_refs.take());
        fds.release(self.stat.take());
        fds.release(self.io.take());
        self.usage = None;
        self.command = None;
        self.command_read = false;
        self.comm = Comm::default();
        for task in self.tasks.drain(..) {
            fds.release(task.children);
        }
        self.listed_threads = None;
    }
}

/// The tree walk and its cache of open files. See the module docs.
pub(crate) struct ProcTable {
    own_pid: u32,
    page: usize,
    fds: Fds,
    procs: PidMap<Proc>,
    /// Samples taken: the re-list cadence, and the stamp that finds who left.
    sample: u64,
    /// When the current sample began: the age of each process's `stat` and `io`.
    now: Instant,
    /// How old a process's `stat` and `io` may be before they are read again.
    usage_every: Duration,
    /// `Some(false)` where the kernel has no `children` files (checked once).
    children_files: Option<bool>,
    status_buf: Buf,
    children_buf: Buf,
    usage_buf: Buf,
    tids: Vec<u32>,
}

impl ProcTable {
    pub(crate) fn new(own_pid: u32, budget: usize) -> ProcTable {
        ProcTable {
            own_pid,
            page: usize::try_from(page_size()).unwrap_or(4096),
            fds: Fds { open: 0, budget },
            procs: PidMap::default(),
            sample: 0,
            now: Instant::now(),
            usage_every: USAGE_EVERY,
            children_files: None,
            status_buf: Buf::new(4096),
            children_buf: Buf::new(4096),
            usage_buf: Buf::new(1024),
            tids: Vec::new(),
        }
    }

    /// Forces the `/proc/*/stat` parent scan, as on kernels without `children` files.
    #[cfg(test)]
    pub(crate) fn force_stat_scan(&mut self) {
        self.children_files = Some(false);
    }

    #[cfg(any(test, feature = "unstable-readers"))]
    /// How old a process's `stat` and `io` may be before they are read again.
    pub(crate) fn set_usage_every(&mut self, every: Duration) {
        self.usage_every = every;
    }

    /// Caps the descriptors kept open between samples.
    #[cfg(test)]
    pub(crate) fn set_budget(&mut self, budget: usize) {
        self.fds.budget = budget;
    }

    /// The descriptors kept open now.
    #[cfg(test)]
    pub(crate) fn open_fds(&self) -> usize {
        self.fds.open
    }

    /// Reads `root` and its descendants into `seen`, root first: each one's `status`
    /// (its mark reset when `reset`), through `ledger` for this process. With `adopted`
    /// and a root other than this process, this process's other children are
    /// descendants too. Returns whether every `children` file could be read; an error
    /// means that the root itself could not be.
    pub(crate) fn sample(
        &mut self,
        root: u32,
        reset: bool,
        adopted: bool,
        ledger: &Ledger,
        seen: &mut Vec<Seen>,
    ) -> io::Result<bool> {
        self.sample += 1;
        self.now = Instant::now();
        seen.clear();
        let children_files = *self
            .children_files
            .get_or_insert_with(|| has_children_files(self.own_pid));
        let mut complete = true;
        if children_files {
            seen.push(Seen {
                pid: root,
                status: None,
                direct: false,
                usage: None,
            });
            let mut index = 0;
            while index < seen.len() {
                let pid = seen[index].pid;
                let is_root = index == 0;
                let status = match self.status_of(pid, reset, ledger) {
                    Ok(status) => Some(status),
                    Err(e) if is_root => {
                        return Err(io::Error::new(
                            e.kind(),
                            format!("cannot read /proc/{root}/status: {e}"),
                        ))
                    }
                    // Exited since its parent listed it: no children left to walk.
                    Err(e) if is_gone(&e) => {
                        index += 1;
                        continue;
                    }
                    // Denied: the coverage says so, its children may still be read.
                    Err(_) => None,
                };
                seen[index].status = status;
                if status.is_some() && pid != self.own_pid {
                    seen[index].usage = self.usage_of(pid);
                }
                let threads = status.and_then(|s| s.threads);
                let ours = is_root && root == self.own_pid;
                match self.children_of(pid, threads, ours, seen) {
                    Ok(read_all) => complete &= read_all,
                    Err(e) if is_root => {
                        return Err(io::Error::new(
                            e.kind(),
                            format!("cannot list /proc/{root}/task: {e}"),
                        ))
                    }
                    Err(e) => complete &= is_gone(&e),
                }
                if is_root && adopted && root != self.own_pid {
                    complete &= self.adopted_children(root, seen);
                }
                index += 1;
            }
        } else {
            seen.extend(scan_stat(root)?.into_iter().map(|(pid, direct)| Seen {
                pid,
                status: None,
                direct,
                usage: None,
            }));
            if root != self.own_pid {
                // The root's children are not this process's: their peaks never show
                // in its rusage.
                seen.iter_mut().for_each(|s| s.direct = false);
            }
            for (index, process) in seen.iter_mut().enumerate() {
                match self.status_of(process.pid, reset, ledger) {
                    Ok(status) => {
                        process.status = Some(status);
                        if process.pid != self.own_pid {
                            process.usage = self.usage_of(process.pid);
                        }
                    }
                    Err(e) if index == 0 => {
                        return Err(io::Error::new(
                            e.kind(),
                            format!("cannot read /proc/{root}/status: {e}"),
                        ))
                    }
                    Err(_) => {}
                }
            }
        }
        self.forget_gone(seen.len());
        Ok(complete)
    }

    /// `pid`'s command as read when it was first seen (its argv joined by spaces, at
    /// most [`MAX_COMMAND_CHARS`]; `[name]` from its `status` for one gone by then),
    /// reading it now if it was not.
    pub(crate) fn command(&mut self, pid: u32) -> Option<Arc<str>> {
        let proc = self.procs.get_mut(&pid)?;
        if !proc.command_read {
            proc.command_read = true;
            proc.command = read_command(pid);
        }
        proc.command.clone()
    }

    /// Reads `pid`'s `stat` and `io` through its kept files when the budget has room
    /// (its entry exists: [`ProcTable::status_of`] read it first), or gives those read
    /// less than [`USAGE_EVERY`] ago. `None` where `stat` cannot be read.
    fn usage_of(&mut self, pid: u32) -> Option<ProcUsage> {
        let ProcTable {
            fds,
            procs,
            usage_buf,
            now,
            usage_every,
            ..
        } = self;
        let proc = procs.get_mut(&pid)?;
        if let Some((usage, at)) = proc.usage {
            if now.saturating_duration_since(at) < *usage_every {
                return Some(usage);
            }
        }
        let stat = read_kept(&mut proc.stat, fds, pid, "stat", usage_buf)
            .ok()
            .and_then(parse_stat_usage)?;
        let io = match read_kept(&mut proc.io, fds, pid, "io", usage_buf) {
            Ok(text) => parse_io(text).ok_or(libc::EINVAL),
            Err(e) => Err(e.raw_os_error().unwrap_or(libc::EIO)),
        };
        let usage = ProcUsage { stat, io };
        proc.usage = Some((usage, *now));
        Some(usage)
    }

    /// Reads `pid`'s status (and resets its mark), through its kept files when the
    /// budget has room.
    fn status_of(&mut self, pid: u32, reset: bool, ledger: &Ledger) -> io::Result<Status> {
        let ProcTable {
            own_pid,
            fds,
            procs,
            sample,
            status_buf,
            ..
        } = self;
        let proc = procs.entry(pid).or_default();
        proc.stamp = *sample;
        if pid == *own_pid {
            return ledger.shared().sample_own(reset);
        }
        if let Some(file) = &proc.status {
            match read_status(file, status_buf, proc.clear_refs.as_ref(), reset) {
                Ok(status) => {
                    proc.follow_exec(status_buf.text());
                    return Ok(status);
                }
                // Gone, or its pid is another process's now: start afresh.
                Err(_) => proc.close(fds),
            }
        }
        let status = File::open(ProcPath::of(pid, "status").as_path())?;
        // Without write access the mark is still read: it then runs from the process's
        // start, which still bounds every interval's peak from above.
        let clear_refs = reset
            .then(|| {
                OpenOptions::new()
                    .write(true)
                    .open(ProcPath::of(pid, "clear_refs").as_path())
            })
            .and_then(Result::ok);
        let read = read_status(&status, status_buf, clear_refs.as_ref(), reset)?;
        proc.follow_exec(status_buf.text());
        if !proc.command_read {
            // First seen: its argv now, while it is most likely still there. One with
            // none left (a zombie, or gone since: a short-lived process reaped
            // meanwhile) is named as `ps` names it, `[name]` from the `status` just read.
            proc.command_read = true;
            proc.command = read_command(pid)
                .or_else(|| status_name(status_buf.text()).map(|name| format!("[{name}]").into()));
        }
        if fds.open + 1 + usize::from(clear_refs.is_some()) <= fds.budget {
            proc.status = fds.keep(status);
            proc.clear_refs = clear_refs.and_then(|f| fds.keep(f));
        }
        Ok(read)
    }

    /// Reads the `children` file of each of `pid`'s threads into `seen` (as `direct`
    /// when `pid` is this process). `Ok(false)`: some could not be read (descendants may be
    /// missing); `Err`: the threads could not be listed.
    ///
    /// The thread list is read again only when `threads` (this sample's `Threads:`)
    /// differs from the count at the last listing, when a thread's file failed, and,
    /// for a process of more than one thread, at least every [`RELIST_EVERY`] samples.
    /// Why no child is lost: a thread that exits hands its children to a live thread
    /// of the same process (the kernel's `find_alive_thread`), so a child can hide only
    /// in the `children` of a thread started since the last listing and still alive.
    /// That thread raises the count, unless another thread exited in the same interval
    /// (whose kept file then reads empty, not as an error). The exited one cannot be
    /// the leader, which stays in the count until the whole process exits: so a
    /// process of one thread cannot swap, and in a process of more, the periodic
    /// listing finds the swapped-in thread's children within [`RELIST_EVERY`] samples
    /// (those that are this process's own children show meanwhile, once they exit, in
    /// `RUSAGE_CHILDREN` and their zombie marks). A listing keeps the file of a tid it
    /// lists again: only a tid that died and came back to the same process (a wrap of
    /// the whole pid space between two listings) would keep a dead thread's file.
    fn children_of(
        &mut self,
        pid: u32,
        threads: Option<u32>,
        direct: bool,
        seen: &mut Vec<Seen>,
    ) -> io::Result<bool> {
        let ProcTable {
            page,
            fds,
            procs,
            sample,
            children_buf,
            tids,
            ..
        } = self;
        let proc = procs.entry(pid).or_default();
        proc.stamp = *sample;
        let due = threads > Some(1) && (*sample + u64::from(pid)) % RELIST_EVERY == 0;
        if threads.is_none() || proc.listed_threads != threads || due {
            list_numeric_dir(ProcPath::of(pid, "task").as_path(), tids)?;
            proc.tasks.retain_mut(|task| {
                let alive = tids.contains(&task.tid);
                if !alive {
                    fds.release(task.children.take());
                }
                alive
            });
            for &tid in tids.iter() {
                if !proc.tasks.iter().any(|t| t.tid == tid) {
                    proc.tasks.push(Task {
                        tid,
                        children: None,
                    });
                }
            }
            proc.listed_threads = threads;
        }
        let mut read_all = true;
        for task in &mut proc.tasks {
            let read = match &task.children {
                Some(file) => children_buf.read_records(file, *page),
                None => match File::open(ProcPath::of_task(pid, task.tid, "children").as_path()) {
                    Ok(file) => {
                        let read = children_buf.read_records(&file, *page).map(drop);
                        task.children = fds.keep(file);
                        read.map(|()| children_buf.text())
                    }
                    Err(e) => Err(e),
                },
            };
            match read {
                Ok(text) => parse_pid_list(text, |child| {
                    seen.push(Seen {
                        pid: child,
                        status: None,
                        direct,
                        usage: None,
                    })
                }),
                Err(e) => {
                    // A thread that ended lists nobody: list the threads again next
                    // time. Any other failure (no descriptor left, no permission) may
                    // hide descendants.
                    proc.listed_threads = None;
                    read_all &= is_gone(&e);
                }
            }
        }
        Ok(read_all)
    }

    /// Adds this process's children but `root` (orphans re-parented to this
    /// subreaper) to the walk, as direct; their own descendants follow through the
    /// walk. Returns whether every `children` file could be read.
    fn adopted_children(&mut self, root: u32, seen: &mut Vec<Seen>) -> bool {
        let start = seen.len();
        // This process's own status is not read here: list its threads every time.
        let read_all = self
            .children_of(self.own_pid, None, true, seen)
            .unwrap_or(false);
        let mut index = start;
        while index < seen.len() {
            if seen[index].pid == root {
                seen.swap_remove(index);
            } else {
                index += 1;
            }
        }
        read_all
    }

    /// Closes the files of processes that left the tree (`alive` processes remain).
    fn forget_gone(&mut self, alive: usize) {
        // Only when some entry is not of this sample's (this process's own, read for
        // adopted orphans, is stamped too, and stays).
        if self.procs.len() <= alive {
            return;
        }
        let (sample, fds) = (self.sample, &mut self.fds);
        self.procs.retain(|_, proc| {
            let keep = proc.stamp == sample;
            if !keep {
                proc.close(fds);
            }
            keep
        });
    }
}
