//! What a tree reader reads: one sample of a process tree, its processes, their
//! counters, and the parts of the high-water bound.

use crate::report::CgroupReport;
use std::sync::Arc;

/// One reading of a process tree. Sizes in bytes; `None` where the source has no figure.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TreeReading {
    /// RSS of the root plus every descendant read.
    pub tree_rss: Option<u64>,
    /// RSS of the root.
    pub parent_rss: Option<u64>,
    /// RSS of the descendants read.
    pub children_rss: Option<u64>,
    /// Unique set size of the tree (detailed readers only).
    pub tree_uss: Option<u64>,
    /// Proportional set size of the tree (detailed readers only).
    pub tree_pss: Option<u64>,
    /// Physical footprint of the tree (macOS detailed readers only).
    pub tree_physical_footprint: Option<u64>,
    /// Processes found, root included.
    pub process_count: u32,
    /// Processes whose RSS was read.
    pub rss_processes: u32,
    /// Every process found was read, and every `children` file could be listed.
    pub rss_complete: bool,
    /// The root's peak RSS since the previous reading (`VmHWM`, then reset).
    pub parent_hwm: Option<u64>,
    /// Where the root is this process: the place of this reading's mark among every
    /// reading of it, boundary readings included (they count up from 1). A stage whose
    /// boundary reading came later overlaps none of this reading's interval.
    pub parent_mark_epoch: Option<u64>,
    /// The sum of the live descendants' own peaks since the previous full sample.
    pub children_hwm: Option<u64>,
    /// An upper bound of the tree's peak since the previous reading: `parent_hwm` +
    /// `children_hwm` + the peaks of the descendants that exited in the interval.
    pub tree_rss_bound: Option<u64>,
    /// The largest peak of a descendant that exited since the previous reading.
    pub reaped_child_peak: Option<u64>,
    /// Processes of the tree that ended since the previous reading at a peak no
    /// reading saw (reaped by another process of the tree, with no exit record): where
    /// any did, `tree_rss_bound` is only at least the tree's peak.
    pub unseen: u32,
    /// The parts of `tree_rss_bound` other than the root's own mark: each live
    /// descendant's mark, and what each group of descendants that exited in the
    /// interval held at most, with when each began. A stage that closed before the
    /// sample counts only the parts that began before it closed.
    pub bound_parts: Vec<BoundPart>,
    /// The processes that lived and ended between two samples, known from their exit
    /// records: the rest of `tree_rss_bound` beyond `bound_parts`, the most they held
    /// at one moment ([`most_at_once`]). A stage that closed before the sample counts
    /// those whose lives overlapped its own.
    pub unread: Vec<Unread>,
    /// The most the processes of `unread` held at one moment.
    pub unread_most: u64,
    /// The job's cgroup now.
    pub cgroup: Option<CgroupReport>,
    /// The cgroup's highest charge since the previous sample: its charge now, or the
    /// kernel's peak where that rose in the interval.
    pub cgroup_peak: Option<u64>,
    /// The cgroup's anonymous memory now (`memory.stat`).
    pub cgroup_anon: Option<u64>,
    /// OOM kills in the cgroup since the previous sample.
    pub oom_kills: Option<u64>,
    /// Each descendant read, so that a stage-boundary reading can leave out the ones
    /// that have exited since, and count their peaks as reaped.
    pub descendants: Vec<Descendant>,
    /// The CPU and I/O of this process and of the children it reaped, as a boundary
    /// reading gives them; `None` where not read. The tree's
    /// counters are this, `root_usage` and every descendant's `usage`.
    pub own_usage: Option<Usage>,
    /// The root's own counters where it is not this process (`stemmon run`'s command);
    /// zero when the root is this process, already in `own_usage`.
    pub root_usage: Usage,
    /// The root as a process of the report's `processes`.
    pub root_process: Option<Descendant>,
    /// Why some process's `/proc/PID/io` could not be read, if one could not.
    pub io_missing: Option<String>,
}

/// A process no reading saw, from its exit record (see [`TreeReading::unread`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Unread {
    /// Its process id.
    pub pid: u32,
    /// Its peak over its life, in bytes.
    pub peak: u64,
    /// When it began and ended, in seconds since boot.
    pub began: f64,
    /// See [`Unread::began`].
    pub ended: f64,
}

/// The most that the processes of `unread` that `keep` keeps held at one moment, each
/// at its peak over its life; two lives that touch count as overlapping.
pub fn most_at_once(unread: &[Unread], keep: impl Fn(&Unread) -> bool) -> u64 {
    let mut moments: Vec<(f64, i128)> = Vec::with_capacity(2 * unread.len());
    for u in unread.iter().filter(|u| keep(u)) {
        moments.push((u.began, i128::from(u.peak)));
        moments.push((u.ended, -i128::from(u.peak)));
    }
    // At one moment, starts before ends.
    moments.sort_by(|a, b| a.0.total_cmp(&b.0).then(b.1.cmp(&a.1)));
    let (mut now, mut most) = (0i128, 0i128);
    for (_, change) in moments {
        now += change;
        most = most.max(now);
    }
    u64::try_from(most).unwrap_or(u64::MAX)
}

/// A part of the tree's high-water bound (see [`TreeReading::bound_parts`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BoundPart {
    /// The process's id (the lowest of the group's): where two starts fall in one
    /// clock tick, the later process has the higher id.
    pub pid: u32,
    /// When the process (or the first of the group) started, in seconds since boot, to
    /// the clock tick of `/proc/PID/stat` (see [`start_tick_seconds`]); `None` where
    /// unknown (it then counts for every stage of the interval).
    pub started: Option<f64>,
    /// Its mark, or the group's most, in bytes.
    pub bytes: u64,
    /// A stage-boundary reading found it exited since the last sample: it is not in
    /// this sample's own sum (it exited before that reading). Without exit records
    /// that reading counted its peak in the interval it closed, so widening any
    /// interval leaves it out too; with them, see [`BoundPart::gone_by`].
    pub departed: bool,
    /// With exit records, when the boundary reading that found it exited ran, in
    /// seconds from the start: an interval widened by this part counts it only where
    /// it began before then (the process lived in it).
    pub gone_by: Option<f64>,
}

/// Cumulative CPU and storage counters of a process or a sum of them (the book's `cpu-io.md`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// User CPU time, in microseconds.
    pub user_micros: u64,
    /// System CPU time, in microseconds.
    pub system_micros: u64,
    /// Bytes read from storage.
    pub read_bytes: u64,
    /// Bytes written to storage.
    pub write_bytes: u64,
    /// Page faults that needed I/O.
    pub major_faults: u64,
}

impl Usage {
    /// Nothing counted.
    pub const ZERO: Usage = Usage {
        user_micros: 0,
        system_micros: 0,
        read_bytes: 0,
        write_bytes: 0,
        major_faults: 0,
    };

    /// `self + other`, field by field (wrapping: counters are differenced later).
    #[must_use]
    pub fn plus(self, other: Usage) -> Usage {
        Usage {
            user_micros: self.user_micros.wrapping_add(other.user_micros),
            system_micros: self.system_micros.wrapping_add(other.system_micros),
            read_bytes: self.read_bytes.wrapping_add(other.read_bytes),
            write_bytes: self.write_bytes.wrapping_add(other.write_bytes),
            major_faults: self.major_faults.wrapping_add(other.major_faults),
        }
    }

    /// `self - other`, field by field, never below zero.
    #[must_use]
    pub fn minus(self, other: Usage) -> Usage {
        Usage {
            user_micros: self.user_micros.saturating_sub(other.user_micros),
            system_micros: self.system_micros.saturating_sub(other.system_micros),
            read_bytes: self.read_bytes.saturating_sub(other.read_bytes),
            write_bytes: self.write_bytes.saturating_sub(other.write_bytes),
            major_faults: self.major_faults.saturating_sub(other.major_faults),
        }
    }

    /// The larger of each field.
    #[must_use]
    pub fn max(self, other: Usage) -> Usage {
        Usage {
            user_micros: self.user_micros.max(other.user_micros),
            system_micros: self.system_micros.max(other.system_micros),
            read_bytes: self.read_bytes.max(other.read_bytes),
            write_bytes: self.write_bytes.max(other.write_bytes),
            major_faults: self.major_faults.max(other.major_faults),
        }
    }

    /// User plus system time, in microseconds.
    pub fn cpu_micros(&self) -> u64 {
        self.user_micros.saturating_add(self.system_micros)
    }
}

/// One descendant as a full sample read it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Descendant {
    /// Its process id.
    pub pid: u32,
    /// Its RSS at the sample.
    pub rss: u64,
    /// The highest of its marks read so far.
    pub peak: u64,
    /// Its parent's process id (0 where its `stat` could not be read).
    pub ppid: u32,
    /// Its counters (its own and its reaped children's), zero where not read.
    pub usage: Usage,
    /// Its own CPU time (user plus system, its reaped children's left out), in
    /// microseconds, where read.
    pub own_cpu_micros: Option<u64>,
    /// When it started, in seconds since boot, where read.
    pub started: Option<f64>,
    /// Its argv joined by spaces, read when it was first seen and again after it
    /// `exec`ed another program.
    pub command: Option<Arc<str>>,
    /// Its exit code, where it was seen as an exited child waiting to be reaped.
    pub exit_code: Option<i32>,
    /// The peak its rusage gives once it exited (`waitid(WNOWAIT)` of a child of this
    /// process): its own and that of the children it reaped, which the kernel does not
    /// tell apart. Never taken as its own peak (`peak`).
    pub exited_peak: Option<u64>,
    /// The root's own state at the reading, where read (the root alone): its virtual
    /// memory, its threads and its open file descriptors.
    pub state: Option<ProcessState>,
}

/// A process's virtual memory, threads and open descriptors at one reading.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcessState {
    /// Its virtual memory (`VmSize`), in bytes.
    pub virtual_bytes: Option<u64>,
    /// Its threads.
    pub threads: Option<u32>,
    /// Its open file descriptors.
    pub open_fds: Option<u32>,
}
