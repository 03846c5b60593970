//! The ledger of one monitor: what its tree readers and its boundary reader share, so
//! that each interval of the kernel's marks is counted once, by that monitor alone.
//!
//! A monitor owns one ([`Ledger::new`] when its readers are made) and hands it, in an
//! `Arc`, to each of its readers. Nothing here is process-wide: two monitors never
//! see each other's baselines. (The kernel keeps one mark per process, though, which
//! every monitor with marks on resets: the reading of this process hands the mark it
//! read on to the other monitors' next readings, see `self_reading`. A descendant's
//! mark is not handed on: two monitors sampling one child each end the other's
//! intervals of it. Their reaped children and exited descendants stay apart.)

use super::reaped::{ChildUsage, Reaped};
use super::self_files::SelfFiles;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::io;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// At most this many exited descendants wait in [`Shared::count_exited`] for the next
/// sample. Each sample takes them all, and between two samples a boundary reading adds
/// only descendants of the last one, once each; the cap holds even when no sample
/// comes. A descendant left out past it is counted again by the sample: the bound is
/// then higher than it need be, never lower.
pub(crate) const MAX_COUNTED_EXITED: usize = 4096;

/// A hasher for pids: one multiplication (the keys are small integers chosen by the
/// kernel, not by an attacker), spreading them over the high bits the table probes.
#[derive(Default)]
pub(crate) struct PidHasher(u64);

impl Hasher for PidHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 = (self.0 ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.0 = u64::from(n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// A map keyed by pid.
pub(crate) type PidMap<V> = HashMap<u32, V, BuildHasherDefault<PidHasher>>;

/// What the previous sample knew of a descendant.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Known {
    /// Its mark at that sample (its peak in that sample's interval).
    pub(crate) hwm: u64,
    /// The highest of its marks so far: its peak over its life.
    pub(crate) peak: u64,
    /// This process is its parent, so its peak shows in `RUSAGE_CHILDREN` when it is
    /// reaped.
    pub(crate) direct: bool,
    /// Its parent then (0 where unknown): who reaps it, and whose rusage its peak
    /// joins.
    pub(crate) ppid: u32,
    /// When it started, in seconds since boot, where known.
    pub(crate) started: Option<f64>,
    /// Its children's minor faults then: where they grew, it reaped a child.
    pub(crate) reaps: u64,
    /// Its exit record came (a zombie's): its final peak is counted.
    pub(crate) recorded: bool,
}

/// The job's cgroup at the previous sample.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CgroupLast {
    /// The kernel's peak then.
    pub(crate) peak: Option<u64>,
    /// The OOM kills then.
    pub(crate) oom_kills: Option<u64>,
}

/// What the boundary reader and the tree readers share, held only for a few calls.
pub(crate) struct Shared {
    /// This process's own `status`, `clear_refs` and `statm`, opened at the first
    /// reading: every reading of this process's mark goes through them under this lock,
    /// so one reading's reset never falls between another's read and reset.
    own: Option<SelfFiles>,
    /// `RUSAGE_CHILDREN` at the previous reading of either kind: a reaping counts in
    /// the interval of the first reading after it.
    child_usage: ChildUsage,
    /// `RUSAGE_CHILDREN` when the monitor started: what the process inherited across
    /// `exec` or did before, which no figure of this run counts.
    baseline: ChildUsage,
    /// Descendants that boundary readings counted as exited (with their peaks) since
    /// the last sample, which does not count them again. At most
    /// [`MAX_COUNTED_EXITED`].
    counted_exited: Vec<u32>,
    /// How many readings of this process's mark were taken, of either kind.
    mark_readings: u64,
    /// The place of the last full sample's reading of it among them.
    sampled_epoch: u64,
    /// Every exit of the tree comes with its record: the next sample counts each
    /// exited process no sample read at its own peak, so no boundary reading does.
    exits_recorded: bool,
    /// The pids given out since the last sample, without exit records.
    births: super::births::Births,
}

impl Shared {
    /// Counts a reading of this process's mark by a boundary reader: its place.
    pub(crate) fn mark_read(&mut self) -> u64 {
        self.mark_readings += 1;
        self.mark_readings
    }

    /// A full sample's reading of this process's status (its mark reset where
    /// `reset`), counted among the readings of its mark.
    pub(crate) fn sample_own(&mut self, reset: bool) -> io::Result<super::procfs::Status> {
        let status = self.own()?.read_status(reset)?;
        self.sampled_epoch = self.mark_read();
        Ok(status)
    }

    /// Notes whether every exit of the tree comes with its record (see
    /// [`Shared::exits_recorded`]).
    pub(crate) fn set_exits_recorded(&mut self, recorded: bool) {
        self.exits_recorded = recorded;
    }

    /// Whether every exit of the tree comes with its record: the sample counts each
    /// process no sample read from it, at its own peak and with its start and end; a
    /// boundary reading that counted its reaping too would count it twice.
    pub(crate) fn exits_recorded(&self) -> bool {
        self.exits_recorded
    }

    /// The place of the last full sample's reading of this process's mark.
    pub(crate) fn sampled_epoch(&self) -> u64 {
        self.sampled_epoch
    }

    /// This process's own files, opened on first use.
    pub(crate) fn own(&mut self) -> io::Result<&mut SelfFiles> {
        if self.own.is_none() {
            self.own = Some(SelfFiles::open()?);
        }
        Ok(self.own.as_mut().expect("opened above"))
    }

    /// Whether this process reaped a child since the previous check (of either kind of
    /// reader of this ledger), and the kernel's figure for its peak; also the figures
    /// now, which a reader can compare with its own last ones. One `getrusage` call.
    /// Without exit records, where it reaped one: how many processes that no sample
    /// read may have ended since the previous reaping (`births`), whose peaks the
    /// kernel's figure does not sum. A `sample` begins a new count.
    pub(crate) fn reaped_and_usage(
        &mut self,
        sample: bool,
    ) -> (Option<Reaped>, ChildUsage, Option<u32>) {
        let now = ChildUsage::now();
        let before = std::mem::replace(&mut self.child_usage, now);
        let reaped = now.reaped_since(&before, &self.baseline);
        let unrecorded = !self.exits_recorded;
        let ended = (reaped.is_some() && unrecorded).then(|| self.births.ended_since());
        if sample && unrecorded {
            self.births.renew();
        }
        (reaped, now, ended)
    }

    /// Records that a boundary reading counted `pid`'s exit and peak, so that the next
    /// sample does not count them again. Past the cap, the sample counts it again.
    pub(crate) fn count_exited(&mut self, pid: u32) {
        if self.counted_exited.len() < MAX_COUNTED_EXITED {
            self.counted_exited.push(pid);
        }
    }

    /// Moves the descendants counted since the previous sample into `into`, sorted.
    /// Both vectors keep their capacity: nothing is allocated in the steady state.
    pub(crate) fn take_counted(&mut self, into: &mut Vec<u32>) {
        into.clear();
        into.append(&mut self.counted_exited);
        into.sort_unstable();
    }

    /// How many exited descendants wait for the next sample.
    #[cfg(test)]
    pub(crate) fn counted_len(&self) -> usize {
        self.counted_exited.len()
    }
}

/// What the tree readers of one monitor share: held through a whole sample, so that
/// two samples of one monitor (the sampler's and a signal's last one) never overlap,
/// and the second continues from the first.
#[derive(Default)]
pub(crate) struct TreeLedger {
    /// The descendants the previous sample read.
    pub(crate) known: PidMap<Known>,
    /// The map the current sample fills, then swaps with `known` (kept to reuse its
    /// capacity).
    pub(crate) next: PidMap<Known>,
    /// The job's cgroup at the previous sample.
    pub(crate) cgroup_last: CgroupLast,
    /// The root's mark at the previous sample, where the root is another process
    /// (`stemmon run`'s command): its last reading once it has exited.
    pub(crate) root_last: u64,
    /// The root's children's minor faults at the previous sample (another process).
    pub(crate) root_reaps: Option<u64>,
    /// What the root's exit record says it wrote: its counters never read lower after.
    pub(crate) root_wrote: u64,
    /// The kernel's exit records of the tree.
    pub(crate) feed: super::exit_feed::ExitFeed,
    /// The processes that exited unread in the interval (kept to reuse its capacity).
    pub(crate) unread: Vec<(u32, super::exit_feed::ExitPeak)>,
}

/// One monitor's ledger. See the module docs.
pub(crate) struct Ledger {
    shared: Mutex<Shared>,
    tree: Mutex<TreeLedger>,
    /// This process's own CPU microseconds when the monitor started: its line in the
    /// report's `processes` counts from there.
    own_cpu_start: u64,
    /// The spawn floor of a root this process started, where it is known (see
    /// [`above_spawn_floor`](crate::memory::above_spawn_floor)).
    spawn_floor: Option<u64>,
}

impl Ledger {
    /// A ledger that counts the children reaped from now on.
    pub(crate) fn new() -> Ledger {
        let start = ChildUsage::now();
        Ledger {
            shared: Mutex::new(Shared {
                own: None,
                child_usage: start,
                baseline: start,
                counted_exited: Vec::new(),
                mark_readings: 0,
                sampled_epoch: 0,
                exits_recorded: false,
                births: super::births::Births::now(),
            }),
            tree: Mutex::new(TreeLedger::default()),
            own_cpu_start: super::reaped::usage_of(&super::reaped::rusage(libc::RUSAGE_SELF))
                .cpu_micros(),
            spawn_floor: None,
        }
    }

    /// A ledger like [`new`](Ledger::new)'s for a root started by a process whose mark
    /// was `spawn_floor` then.
    pub(crate) fn with_spawn_floor(spawn_floor: Option<u64>) -> Ledger {
        Ledger {
            spawn_floor,
            ..Ledger::new()
        }
    }

    /// An exited root's peak over every program it ran, from its rusage's `peak`: where
    /// that is its own (`reaped_none`: it reaped no child) and above the spawn floor.
    pub(crate) fn ran_peak(&self, peak: Option<u64>, reaped_none: bool) -> Option<u64> {
        let above = |peak| {
            let floor = self.spawn_floor;
            floor.is_some_and(|floor| crate::memory::above_spawn_floor(peak, floor))
        };
        peak.filter(|&peak| reaped_none && above(peak))
    }

    /// This process's own CPU microseconds when the monitor started.
    pub(crate) fn own_cpu_start(&self) -> u64 {
        self.own_cpu_start
    }

    /// The part the boundary reader shares: hold it for a few calls only.
    pub(crate) fn shared(&self) -> MutexGuard<'_, Shared> {
        // Every update under this lock is complete before any call that could panic.
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers for the tree's exit records (once): whether they come. Where they do
    /// and `marks` are read, no boundary reading counts an unsampled child's exit (see
    /// [`Shared::exits_recorded`]).
    pub(crate) fn start_exit_records(&self, marks: bool) -> bool {
        let recorded = self.tree().feed.start();
        self.shared().set_exits_recorded(recorded && marks);
        recorded
    }

    /// The part the tree readers share: held through one sample.
    pub(crate) fn tree(&self) -> MutexGuard<'_, TreeLedger> {
        // A sample that panicked left the previous sample's figures: still usable.
        self.tree.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exited_roots_rusage_is_its_peak_only_above_the_spawn_floor_and_its_own() {
        const MIB: u64 = 1 << 20;
        let ledger = Ledger::with_spawn_floor(Some(10 * MIB));
        // The image of the process that started it, carried across `exec`: not its own.
        assert_eq!(ledger.ran_peak(Some(10 * MIB + 4096), true), None);
        assert_eq!(ledger.ran_peak(Some(300 * MIB), true), Some(300 * MIB));
        // Merged with the children it reaped.
        assert_eq!(ledger.ran_peak(Some(300 * MIB), false), None);
        // No floor known (a root this process did not say it started).
        assert_eq!(Ledger::new().ran_peak(Some(300 * MIB), true), None);
    }

    #[test]
    fn the_exited_set_is_bounded_and_emptied_by_each_sample() {
        let ledger = Ledger::new();
        let mut taken = Vec::new();
        for pid in 0..(MAX_COUNTED_EXITED as u32 + 100) {
            ledger.shared().count_exited(pid);
        }
        assert_eq!(ledger.shared().counted_len(), MAX_COUNTED_EXITED);
        ledger.shared().take_counted(&mut taken);
        assert_eq!(taken.len(), MAX_COUNTED_EXITED);
        assert_eq!(ledger.shared().counted_len(), 0);
        ledger.shared().count_exited(7);
        ledger.shared().count_exited(3);
        ledger.shared().take_counted(&mut taken);
        assert_eq!(taken, vec![3, 7], "sorted, the earlier ones gone");
    }

    #[test]
    fn pids_spread_over_the_high_bits() {
        use std::hash::BuildHasher;
        let build = BuildHasherDefault::<PidHasher>::default();
        let top = |pid: u32| build.hash_one(pid) >> 57;
        let tops: std::collections::HashSet<u64> = (1000..1100).map(top).collect();
        assert!(tops.len() > 50, "{} distinct of 100", tops.len());
    }
}
