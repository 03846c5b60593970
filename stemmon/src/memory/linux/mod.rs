//! The Linux reader: `/proc` directly. Descendants come from
//! `/proc/PID/task/TID/children` (a `/proc/*/stat` parent scan where the kernel lacks
//! those files), RSS and the high-water mark together from `status` (the mark reset
//! through `clear_refs` at each reading), USS and PSS from `smaps_rollup`, the peaks of
//! reaped children from `getrusage(RUSAGE_CHILDREN)` and `waitid(WNOWAIT)`.
//!
//! One room per source: [`procfs`] parses, [`tree`] walks the tree with its kept
//! files ([`proc_files`]: those it keeps open, and what it reads through them), [`self_reading`] reads this process at stage boundaries, [`reaped`] reads the
//! children that exited, and [`ledger`] holds what one monitor's readers share.

pub(crate) mod ledger;
pub(crate) mod proc_files;
pub(crate) mod procfs;
pub(crate) mod reaped;
pub(crate) mod self_reading;
pub(crate) mod stat_scan;
pub(crate) mod tree;

pub(crate) use ledger::Ledger;
pub(crate) use reaped::has_exited;
pub(crate) use self_reading::ProcSelfReader;

use super::cgroup::CgroupReader;
use super::{Descendant, TreeReader, TreeReading, Usage};
use crate::report::HighWaterMarks;
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
    table: ProcTable,
    cgroup: Option<CgroupReader>,
    /// The processes of the current sample (kept to reuse its capacity).
    seen: Vec<Seen>,
    /// The exited descendants boundary readings counted (kept to reuse its capacity).
    counted: Vec<u32>,
    smaps: Buf,
    /// Microseconds per clock tick of `stat`.
    tick_micros: u64,
}

impl ProcReader {
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
            table: ProcTable::new(own_pid, fd_budget()),
            cgroup: None,
            seen: Vec::new(),
            counted: Vec::new(),
            smaps: Buf::new(1024),
            tick_micros: 1_000_000 / clock_ticks().max(1),
        }
    }

    /// Turns the marks on or off for the tree rooted at `root`, and opens its cgroup,
    /// without the probe of [`TreeReader::configure_marks`] (whose reset would end an
    /// interval nobody reads): for another reader of a configured monitor.
    pub(crate) fn set_marks(&mut self, enabled: bool, root: u32) {
        self.marks = enabled;
        if self.cgroup.is_none() {
            self.cgroup = CgroupReader::of_process(root).ok();
        }
    }

    /// Reads every process's `stat` and `io` at every sample, however close together
    /// (by default at most every [`USAGE_EVERY`](tree::USAGE_EVERY) per process).
    pub(crate) fn reading_usage_every_sample(mut self) -> ProcReader {
        self.table.set_usage_every(std::time::Duration::ZERO);
        self
    }

    /// Reads a process's `stat` and `io` again once they are `every` old.
    #[cfg(test)]
    pub(crate) fn with_usage_every(mut self, every: std::time::Duration) -> ProcReader {
        self.table.set_usage_every(every);
        self
    }

    /// Forces the `/proc/*/stat` parent scan, as on kernels without `children` files.
    #[cfg(test)]
    pub(crate) fn with_stat_scan(mut self) -> ProcReader {
        self.table.force_stat_scan();
        self
    }

    /// Caps the descriptors kept open between samples.
    #[cfg(test)]
    pub(crate) fn with_budget(mut self, budget: usize) -> ProcReader {
        self.table.set_budget(budget);
        self
    }

    /// The pids of the last sample, root first.
    #[cfg(test)]
    pub(crate) fn pids(&self) -> Vec<u32> {
        self.seen.iter().map(|s| s.pid).collect()
    }

    /// The descriptors kept open now.
    #[cfg(test)]
    pub(crate) fn open_fds(&self) -> usize {
        self.table.open_fds()
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

    /// Reads the job's cgroup into `reading`, against its figures at the previous sample.
    fn add_cgroup(&mut self, ledger: &mut TreeLedger, reading: &mut TreeReading) {
        let Some(cgroup) = &mut self.cgroup else {
            return;
        };
        let Ok(now) = cgroup.read() else {
            return;
        };
        let before = ledger.cgroup_last;
        // The kernel's peak is since the cgroup was made: it speaks for this interval
        // only where it rose in it.
        let risen = now
            .memory_peak_bytes
            .filter(|p| before.peak.is_some_and(|b| *p > b));
        reading.cgroup_peak = now.memory_current_bytes.max(risen);
        reading.oom_kills = now
            .oom_kills
            .map(|k| k.saturating_sub(before.oom_kills.unwrap_or(k)));
        ledger.cgroup_last = ledger::CgroupLast {
            peak: now.memory_peak_bytes,
            oom_kills: now.oom_kills,
        };
        reading.cgroup = Some(now);
    }
}

/// What the descendants that left the tree since the previous sample add to this one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Departed {
    /// Children of this process (the root's, or adopted orphans) gone since: each had
    /// at most the kernel's reaped maximum.
    direct: u64,
    /// The sum of the last marks of the other ones.
    others_hwm: u64,
    /// The largest peak over the life of any of them.
    peak: Option<u64>,
}

impl TreeReader for ProcReader {
    fn name(&self) -> &'static str {
        "linux-proc"
    }

    fn adopt_orphans(&mut self, adopt: bool) {
        self.adopted = adopt;
    }

    fn configure_marks(&mut self, enabled: bool, root: u32) -> HighWaterMarks {
        self.set_marks(enabled, root);
        if !enabled {
            return HighWaterMarks {
                missing: Some("turned off".to_owned()),
                ..HighWaterMarks::default()
            };
        }
        let own = root == self.own_pid;
        let ours = own || self.adopted;
        let parent = if own {
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
            reaped: ours,
            missing: (!missing.is_empty()).then(|| missing.join("; ")),
            ..HighWaterMarks::default()
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
        let (reaped, children_usage) = if self.marks && ours {
            let (reaped, usage) = ledger.shared().reaped_and_usage();
            (reaped, usage)
        } else {
            (None, ChildUsage::now())
        };
        let own_rusage = rusage(libc::RUSAGE_SELF);
        let complete =
            self.table
                .sample(root, self.marks, self.adopted, &ledger, &mut self.seen)?;
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
            own_usage = own_usage.plus(usage_of(&own_rusage));
        }
        reading.own_usage = Some(own_usage);
        let (mut tree, mut children, mut children_hwm) = (0u64, 0u64, 0u64);
        let (mut zombie_sum, mut zombie_max) = (0u64, None::<u64>);
        let TreeLedger { known, next, .. } = &mut *intervals;
        next.clear();
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
            // An exited child waiting to be reaped: its exit code and final figures.
            let exited = (status.rss.is_none() && direct)
                .then(|| zombie(pid))
                .flatten();
            let process = Descendant {
                pid,
                rss,
                peak: status.hwm.unwrap_or(rss).max(rss),
                ppid: usage.map_or(0, |u| u.stat.ppid),
                usage: exited.map_or(counters, |z| z.usage.max(counters)),
                command: self.table.command(pid),
                exit_code: exited.and_then(|z| z.exit_code),
                exited_peak: exited.map(|z| z.peak),
            };
            if index == 0 {
                reading.parent_rss = Some(rss);
                reading.parent_hwm = status.hwm.filter(|_| self.marks);
                if !own {
                    reading.root_usage = process.usage;
                }
                let mut root = process;
                if own {
                    root.usage = usage_of(&own_rusage);
                    root.ppid = std::os::unix::process::parent_id();
                }
                if status.rss.is_none() && !own {
                    // The root has exited and waits to be reaped (`stemmon run` reaps
                    // its command after the last sample): its mark is gone with its
                    // memory, but as this process's child its final interval is in its
                    // rusage (`ru_maxrss`: its peak since the last reset, and that of
                    // the children it waited for, which the kernel does not tell apart).
                    // The tree's figures take it; its own line in `processes` unless a
                    // child seen holds it (`Processes::saw`).
                    root.exited_peak = zombie(pid).map(|z| z.peak);
                    if self.marks {
                        reading.parent_hwm = root.exited_peak.or(reading.parent_hwm);
                    }
                }
                if let Some(hwm) = reading.parent_hwm.filter(|_| root.exited_peak.is_none()) {
                    root.peak = root.peak.max(hwm);
                }
                reading.root_process = Some(root);
            } else {
                children += rss;
                let hwm = status.hwm.unwrap_or(rss).max(rss);
                children_hwm += hwm;
                let peak = known.get(&pid).map_or(hwm, |k| k.peak.max(hwm));
                next.insert(pid, Known { hwm, peak, direct });
                if self.marks {
                    if let Some(z) = exited {
                        zombie_sum += z.peak;
                        zombie_max = zombie_max.max(Some(z.peak));
                    }
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
            let departed = departed(known, next, &self.counted);
            let kernel = reaped.map(|r| r.peak);
            reading.reaped_child_peak = kernel.max(zombie_max).max(departed.peak);
            // Each reaped child's peak is at most the kernel's maximum over all of them.
            let reaped_bound = kernel.map_or(0, |peak| peak * departed.direct.max(1));
            reading.tree_rss_bound = reading.parent_hwm.map(|parent| {
                parent + children_hwm + zombie_sum + reaped_bound + departed.others_hwm
            });
            reading.children_hwm = Some(children_hwm);
        }
        std::mem::swap(known, next);
        self.add_cgroup(&mut intervals, &mut reading);
        self.seen = seen;
        Ok(reading)
    }
}

/// The descendants in `before` (the previous sample) and not in `now`, but those a
/// boundary reading already counted (`counted`, sorted): they exited in this interval.
fn departed(
    before: &ledger::PidMap<Known>,
    now: &ledger::PidMap<Known>,
    counted: &[u32],
) -> Departed {
    let mut departed = Departed::default();
    for (pid, was) in before {
        if now.contains_key(pid) || counted.binary_search(pid).is_ok() {
            continue;
        }
        // Its peak over its life (an earlier sample may have reset its mark).
        departed.peak = departed.peak.max(Some(was.peak));
        if was.direct {
            departed.direct += 1;
        } else {
            departed.others_hwm += was.hwm;
            departed.peak = departed.peak.max(Some(was.hwm));
        }
    }
    departed
}

#[cfg(test)]
pub(crate) mod tests;
