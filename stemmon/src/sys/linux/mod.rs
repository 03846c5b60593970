//! The Linux reader: `/proc` directly. Descendants come from
//! `/proc/PID/task/TID/children` (a `/proc/*/stat` parent scan where the kernel lacks
//! those files), RSS and the high-water mark together from `status` (the mark reset
//! through `clear_refs` at each reading), USS and PSS from `smaps_rollup`, the peaks of
//! reaped children from `getrusage(RUSAGE_CHILDREN)` and `waitid(WNOWAIT)`.
//!
//! One room per source: [`procfs`] parses, [`tree`] walks the tree with its kept
//! files ([`proc_files`]: those it keeps open, and what it reads through them), [`self_reading`] reads this process at stage boundaries, [`reaped`] reads the
//! children that exited, and [`ledger`] holds what one monitor's readers share.

mod births;
pub(crate) mod cgroup;
mod exit_feed;
mod exit_watch;
mod exits;
pub(crate) mod files;
pub(crate) mod ledger;
pub(crate) mod own_mark;
pub(crate) mod platform;
pub(crate) mod proc_files;
pub(crate) mod procfs;
pub(crate) mod reaped;
mod root_state;
pub(crate) mod sampled;
pub(crate) mod self_files;
pub(crate) mod self_reading;
pub(crate) mod stat_scan;
pub(crate) mod taskstats;
pub(crate) mod tree;

pub(crate) use ledger::Ledger;
pub(crate) use self_reading::ProcSelfReader;

use crate::memory::{Descendant, TreeReader, TreeReading, Usage};
use crate::report::HighWaterMarks;
use cgroup::CgroupReader;
use ledger::{Known, TreeLedger};
use procfs::{clock_ticks, parse_smaps_rollup, Buf, ProcPath};
use reaped::{rusage, usage_of, zombie, ChildUsage};
use std::fs::{File, OpenOptions};
use std::io;
use std::sync::Arc;
use tree::{fd_budget, ProcTable, Seen};

/// Reads a tree from `/proc`; see the module docs. Its readings of this process, and
/// the intervals of the marks, go through the monitor's [`Ledger`].
pub(crate) struct ProcReader {
    ledger: Arc<Ledger>,
    detailed: bool,
    marks: bool,
    own_pid: u32,
    /// With a root other than this process: also walk this process's other children,
    /// the orphans it adopted as a subreaper (`stemmon run`).
    adopted: bool,
    /// Children of this process that are the monitor's own (NVML's helper), never
    /// part of the tree.
    excluded: Vec<u32>,
    table: ProcTable,
    cgroup: Option<CgroupReader>,
    /// The processes of the current sample (kept to reuse its capacity).
    seen: Vec<Seen>,
    /// The exited descendants boundary readings counted (kept to reuse its capacity).
    counted: Vec<u32>,
    smaps: Buf,
    /// Microseconds per clock tick of `stat`.
    tick_micros: u64,
    /// Clock ticks a second, for the processes' start times.
    ticks_per_second: f64,
    /// Marks are reset at each reading (else each runs from its process's start).
    reset: bool,
    /// The interval's exits (kept to reuse its lists).
    exits: exits::Exits,
    root_state: root_state::RootState,
}

impl ProcReader {
    #[cfg(any(test, feature = "unstable-readers"))]
    /// A reader on a ledger of its own (a monitor's readers share one: see
    /// [`Readers`](super::Readers)).
    pub(crate) fn new(detailed: bool) -> ProcReader {
        ProcReader::on_ledger(Arc::new(Ledger::new()), detailed)
    }

    /// A reader on `ledger`: it continues from the previous sample of any reader of
    /// that ledger (its marks, its reaped children, its cgroup figures).
    pub(crate) fn on_ledger(ledger: Arc<Ledger>, detailed: bool) -> ProcReader {
        let own_pid = std::process::id();
        ProcReader {
            ledger,
            detailed,
            marks: true,
            own_pid,
            adopted: false,
            excluded: Vec::new(),
            table: ProcTable::new(own_pid, fd_budget()),
            cgroup: None,
            seen: Vec::new(),
            counted: Vec::new(),
            smaps: Buf::new(1024),
            tick_micros: 1_000_000 / clock_ticks().max(1),
            ticks_per_second: clock_ticks().max(1) as f64,
            reset: true,
            exits: exits::Exits::default(),
            root_state: Default::default(),
        }
    }

    /// Turns the marks on or off for the tree rooted at `root`, and opens its cgroup,
    /// without the probe of [`TreeReader::configure_marks`] (whose reset would end an
    /// interval nobody reads): for another reader of a configured monitor.
    pub(crate) fn set_marks(&mut self, enabled: bool, reset: bool, root: u32) {
        self.marks = enabled;
        self.reset = reset;
        if self.cgroup.is_none() {
            self.cgroup = CgroupReader::of_process(root).ok();
        }
    }

    #[cfg(feature = "unstable-readers")]
    /// Reads every process's `stat` and `io` at every sample, however close together
    /// (by default at most every [`USAGE_EVERY`](tree::USAGE_EVERY) per process).
    pub(crate) fn reading_usage_every_sample(mut self) -> ProcReader {
        self.table.set_usage_every(std::time::Duration::ZERO);
        self
    }

    /// Adds `pid`'s USS and PSS to `reading` (detailed readers).
    fn add_smaps(&mut self, pid: u32, reading: &mut TreeReading) {
        let Ok(file) = File::open(ProcPath::of(pid, "smaps_rollup").as_path()) else {
            return;
        };
        if let Ok(text) = self.smaps.read_whole(&file) {
            let rollup = parse_smaps_rollup(text);
            reading.tree_uss = rollup
                .uss
                .map(|u| reading.tree_uss.unwrap_or(0) + u)
                .or(reading.tree_uss);
            reading.tree_pss = rollup
                .pss
                .map(|p| reading.tree_pss.unwrap_or(0) + p)
                .or(reading.tree_pss);
        }
    }
}

impl TreeReader for ProcReader {
    fn name(&self) -> &'static str {
        "linux-proc"
    }

    fn adopt_orphans(&mut self, adopt: bool) {
        self.adopted = adopt;
    }

    fn refresh_all(&mut self) {
        self.root_state = Default::default();
        if let Some(cgroup) = &mut self.cgroup {
            cgroup.refresh_all();
        }
    }

    fn exclude(&mut self, pid: u32) {
        self.excluded.push(pid);
        self.ledger.tree().feed.exclude(pid);
    }

    fn configure_marks(&mut self, enabled: bool, reset: bool, root: u32) -> HighWaterMarks {
        self.set_marks(enabled, reset, root);
        if !enabled {
            return {
                let mut built = HighWaterMarks::default();
                built.missing = Some("turned off".to_owned());
                built
            };
        }
        let own = root == self.own_pid;
        let ours = own || self.adopted;
        let parent = if !reset {
            // Read, never reset: nothing to probe.
            Ok(())
        } else if own {
            match self.ledger.shared().own() {
                Ok(files) => files.probe_reset(),
                Err(e) => Err(format!("/proc/self/status: {e}")),
            }
        } else {
            OpenOptions::new()
                .write(true)
                .open(ProcPath::of(root, "clear_refs").as_path())
                .map(drop)
                .map_err(|e| format!("cannot reset the root's mark (/proc/{root}/clear_refs: {e})"))
        };
        let mut missing = Vec::new();
        if let Err(why) = &parent {
            missing.push(why.clone());
        }
        // Without them a descendant reaped by another counts with its last reading: the
        // report says so where one did.
        let exit_records = self.ledger.start_exit_records(self.marks);
        {
            let mut built = HighWaterMarks::default();
            built.enabled = true;
            built.resets = reset && parent.is_ok();
            built.parent = parent.is_ok();
            built.descendants = true;
            built.reaped = ours || exit_records;
            built.exit_records = exit_records;
            built.missing = (!missing.is_empty()).then(|| missing.join("; "));
            built
        }
    }

    fn read_tree(&mut self, root: u32) -> io::Result<TreeReading> {
        let ledger = Arc::clone(&self.ledger);
        // Samples of one monitor never overlap: each continues from the previous one.
        let mut intervals = ledger.tree();
        let own = root == self.own_pid;
        // This process's children are the root's (its own tree) or the orphans it
        // adopted (`stemmon run`): their peaks show in its RUSAGE_CHILDREN once reaped.
        let ours = own || self.adopted;
        // Checked before reading the marks: a child reaped in between counts in this interval.
        // Read before the walk: a child reaped meanwhile is missed once, never counted twice.
        let (reaped, children_usage, ended) = if self.marks && ours {
            ledger.shared().reaped_and_usage(true)
        } else {
            // Another process's tree (not adopted): this process's children are not its.
            (None, ours.then(ChildUsage::now).unwrap_or_default(), None)
        };
        let own_rusage = own.then(|| usage_of(&rusage(libc::RUSAGE_SELF)));
        let reset = self.marks && self.reset;
        let complete = self
            .table
            .sample(root, reset, self.adopted, &ledger, &mut self.seen)?;
        if !self.excluded.is_empty() {
            let excluded = &self.excluded;
            self.seen.retain(|seen| !excluded.contains(&seen.pid));
        }
        let seen = std::mem::take(&mut self.seen);
        let mut reading = TreeReading {
            process_count: seen.len() as u32,
            descendants: Vec::with_capacity(seen.len().saturating_sub(1)),
            ..TreeReading::default()
        };
        // The tree's CPU and I/O: this process's own where it is the root, the children
        // it reaped where they are the tree's, and every live process's `stat` and `io`.
        let mut own_usage = if ours {
            children_usage.usage()
        } else {
            Usage::ZERO
        };
        if own {
            own_usage = own_usage.plus(own_rusage.unwrap_or(Usage::ZERO));
        }
        reading.own_usage = Some(own_usage);
        let (mut tree, mut children) = (0u64, 0u64);
        let mut exits = std::mem::take(&mut self.exits);
        exits.clear();
        let mut root_exited = false;
        let TreeLedger {
            known,
            next,
            root_last,
            root_reaps,
            root_wrote,
            feed,
            unread,
            ..
        } = &mut *intervals;
        next.clear();
        // Every exit of the tree with its own peak, where the kernel sends the records.
        let (feed_live, whole) = match self.marks {
            true => feed.sample(self.own_pid, ours, known, &seen, &mut self.counted),
            false => (false, true),
        };
        exits.exact = feed_live;
        let mut take = |pid: u32| feed_live.then(|| feed.take(pid)).flatten();
        for (
            index,
            &Seen {
                pid,
                status,
                direct,
                usage,
            },
        ) in seen.iter().enumerate()
        {
            let Some(status) = status else {
                continue; // vanished or denied: the coverage says so
            };
            reading.rss_processes += 1;
            let rss = status.rss.unwrap_or(0);
            tree += rss;
            let counters = usage.map_or(Usage::ZERO, |u| {
                let (read_bytes, write_bytes) = u.io.unwrap_or((0, 0));
                Usage {
                    user_micros: u.stat.user_ticks * self.tick_micros,
                    system_micros: u.stat.system_ticks * self.tick_micros,
                    read_bytes,
                    write_bytes,
                    major_faults: u.stat.major_faults,
                }
            });
            if let Some(Err(errno)) = usage.map(|u| u.io) {
                if reading.io_missing.is_none() {
                    reading.io_missing = Some(format!(
                        "cannot read /proc/{pid}/io: {}",
                        io::Error::from_raw_os_error(errno)
                    ));
                }
            }
            let started = usage
                .and_then(|u| u.stat.start_ticks)
                .map(|ticks| ticks as f64 / self.ticks_per_second);
            // An exited child waiting to be reaped: its exit code and final figures
            // (the root's too, where it is `stemmon run`'s command).
            let exited = (status.rss.is_none() && (direct || (index == 0 && !own)))
                .then(|| zombie(pid))
                .flatten();
            let mark = status.hwm.unwrap_or(rss).max(rss);
            let process = Descendant {
                pid,
                rss,
                peak: mark,
                ppid: usage.map_or(0, |u| u.stat.ppid),
                usage: exited.map_or(counters, |z| z.usage.max(counters)),
                own_cpu_micros: usage.map(|u| u.stat.own_ticks * self.tick_micros),
                started,
                command: self.table.command(pid),
                exit_code: exited.and_then(|z| z.exit_code),
                exited_peak: exited.map(|z| z.peak),
                state: None,
            };
            if index == 0 {
                reading.parent_rss = Some(rss);
                let mut root = process;
                if own {
                    reading.parent_hwm = status.hwm.filter(|_| self.marks);
                    reading.parent_mark_epoch = Some(ledger.shared().sampled_epoch());
                    root.usage = own_rusage.unwrap_or(Usage::ZERO);
                    // Since the start: what it did before is not this run's.
                    root.own_cpu_micros = Some(
                        root.usage
                            .cpu_micros()
                            .saturating_sub(ledger.own_cpu_start()),
                    );
                    root.ppid = std::os::unix::process::parent_id();
                } else {
                    reading.root_usage = root.usage;
                    let reaps = usage.map(|u| u.stat.child_minor_faults);
                    if status.rss.is_some() {
                        reading.parent_hwm = status.hwm.filter(|_| self.marks);
                        *root_last = mark;
                        if !feed_live && reaps > *root_reaps && root_reaps.is_some() {
                            exits.reaper(pid);
                        }
                        *root_reaps = reaps;
                    } else if self.marks {
                        // Exited, not reaped yet (`stemmon run` reaps it after the last
                        // sample): its rusage has its peak over every program it `exec`d
                        // (its record: the last one's), merged with the children it reaped.
                        let reaped_none = reaps == Some(0);
                        let record = take(pid);
                        if let Some(exit) = &record {
                            // What its write calls passed, as a live reading counts it.
                            *root_wrote = exit.write_char.max(exit.write_bytes);
                        }
                        root.usage.write_bytes = root.usage.write_bytes.max(*root_wrote);
                        reading.root_usage = root.usage;
                        let ran = ledger.ran_peak(root.exited_peak, reaped_none);
                        match (record, root.exited_peak) {
                            (Some(exit), _) => reading.parent_hwm = Some(exit.hiwater).max(ran),
                            (None, Some(figure)) if reaped_none => {
                                reading.parent_hwm = Some(figure.max(*root_last))
                            }
                            _ => {
                                root_exited = true;
                                // Its group (below) takes the merged figure; its own
                                // exact peak stays what its marks last read.
                                exits.root_zombie(pid, *root_last, started, root.exited_peak);
                            }
                        }
                    }
                }
                root.state = status.rss.map(|_| self.root_state.of(pid, &status));
                reading.root_process = Some(root);
            } else {
                children += rss;
                let last = known.get(&pid);
                let peak = last.map_or(mark, |k| k.peak.max(mark));
                let reaps = usage.map_or(0, |u| u.stat.child_minor_faults);
                if status.rss.is_some() {
                    exits.live(pid, started, mark);
                    if !feed_live && last.is_some_and(|k| reaps > k.reaps) {
                        exits.reaper(pid);
                    }
                    next.insert(
                        pid,
                        Known {
                            hwm: mark,
                            peak,
                            direct,
                            ppid: process.ppid,
                            started,
                            reaps,
                            recorded: false,
                        },
                    );
                } else {
                    // A zombie holds no memory: what it held is its last reading, or
                    // its rusage where this process may read it (a child of ours).
                    let hwm = last.map_or(0, |k| k.hwm);
                    // Its record, or (a zombie of an earlier sample) its peak then counted.
                    let exact = take(pid)
                        .map(|e| e.hiwater.max(hwm))
                        .or(last.filter(|k| k.recorded).map(|_| hwm));
                    if self.marks {
                        exits.zombie_at(pid, hwm, started, process.exited_peak, exact);
                    }
                    let ppid = process.ppid;
                    next.insert(
                        pid,
                        Known {
                            hwm,
                            peak,
                            direct,
                            ppid,
                            started,
                            reaps,
                            recorded: exact.is_some(),
                        },
                    );
                }
                reading.descendants.push(Descendant { peak, ..process });
            }
            if self.detailed {
                self.add_smaps(pid, &mut reading);
            }
        }
        reading.tree_rss = Some(tree);
        reading.children_rss = Some(children);
        reading.rss_complete = reading.rss_processes == reading.process_count && complete;
        // Taken at every sample, marks or not: the set never outgrows one interval.
        ledger.shared().take_counted(&mut self.counted);
        if self.marks {
            for (pid, was) in known.iter() {
                if next.contains_key(pid) {
                    continue;
                }
                // Taken either way: one a boundary reading counted is not unread.
                let exact = take(*pid)
                    .map(|e| e.hiwater)
                    .or(was.recorded.then_some(was.hwm));
                let found = self.counted.binary_search(pid).is_ok();
                exits.departed_at(*pid, was, exact, found);
            }
            if feed_live {
                feed.take_unread(|pid| pid == root || next.contains_key(&pid), unread);
                for (pid, exit) in unread.iter() {
                    exits.unread(*pid, exit.hiwater, exit.began, exit.ended);
                }
            }
            let kernel = reaped.and_then(|r| r.bound());
            let parts = exits.parts(kernel);
            // Records dropped: some exit may have gone unread. Beyond the first of those
            // (none where the kernel says nothing of them), each ended unseen.
            let covered = u32::from(kernel.is_some());
            let merged = ended.map_or(0, |n| (n + exits.merged).saturating_sub(covered));
            reading.unseen = exits.unseen + u32::from(!whole) + merged;
            // The largest exited peak: the kernel's where it grew (exact), never a
            // maximum that only bounds the children reaped since.
            reading.reaped_child_peak = reaped.and_then(|r| r.peak).max(exits.largest);
            reading.unread = exits.take_unread();
            reading.unread_most = crate::memory::most_at_once(&reading.unread, |_| true);
            let own = parts.iter().filter(|p| !p.departed);
            let children_hwm = reading.unread_most + own.map(|p| p.bytes).sum::<u64>();
            // An exited root is a group of its own, in the parts.
            let root_mark = if root_exited {
                Some(0)
            } else {
                reading.parent_hwm
            };
            reading.tree_rss_bound = root_mark.map(|root| root + children_hwm);
            reading.children_hwm = Some(children_hwm);
            reading.bound_parts = parts;
        }
        self.exits = exits;
        std::mem::swap(known, next);
        cgroup::add_to(
            self.cgroup.as_mut(),
            &mut intervals.cgroup_last,
            &mut reading,
        );
        self.seen = seen;
        Ok(reading)
    }
}

#[cfg(test)]
pub(crate) mod tests;
