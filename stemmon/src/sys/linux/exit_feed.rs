//! The exit records of one monitor's tree: the machine's records (see [`taskstats`])
//! kept where they are of a process of the tree, or of a child of one (a process that
//! lived and died between two samples), folded per process until its exit is counted.
//!
//! [`taskstats`]: super::taskstats

use super::exit_watch::{ExitWatch, Stamped};
use super::ledger::PidMap;
use super::taskstats::ExitRecord;

/// What the exit records of one process's threads say.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct ExitPeak {
    /// Its memory's peak, in bytes (since its last reset, where marks are reset).
    pub(crate) hiwater: u64,
    /// Its parent as it exited (0 until its main thread's record came).
    pub(crate) ppid: u32,
    /// Its exited threads' I/O.
    pub(crate) read_bytes: u64,
    pub(crate) write_bytes: u64,
    pub(crate) write_char: u64,
    /// Its main thread's record came: the process has exited.
    pub(crate) exited: bool,
    /// When it began and ended, in seconds since boot (its main thread's record).
    pub(crate) began: f64,
    pub(crate) ended: f64,
}

impl ExitPeak {
    fn add(&mut self, record: &ExitRecord, came: f64) {
        if record.tid == record.tgid {
            self.ended = came;
            self.began = came - record.elapsed_micros as f64 / 1e6;
        }
        self.hiwater = self.hiwater.max(record.hiwater);
        self.read_bytes += record.read_bytes;
        self.write_bytes += record.write_bytes;
        self.write_char += record.write_char;
        if record.tid == record.tgid {
            self.ppid = record.ppid;
            self.exited = true;
        }
    }
}

/// The exit records of one monitor (in its ledger). See the module docs.
#[derive(Debug, Default)]
pub(crate) struct ExitFeed {
    watch: Option<ExitWatch>,
    tried: bool,
    /// Each process of the tree that has exited threads, until its exit is counted.
    stash: PidMap<ExitPeak>,
    /// The previous drain's records that no process of the tree claimed: tried once
    /// more (a parent first seen by the next sample).
    pending: Vec<Stamped>,
    drained: Vec<Stamped>,
    kept: Vec<u32>,
    /// The monitor's own children (NVML's helper): their records are never the tree's.
    excluded: Vec<u32>,
}

/// Which of `records` are of the tree (`tree(pid)`), or of a child of a process that
/// is (`kept` collects the pids claimed). A grandchild's record comes before its
/// parent's: the records are gone over until none more is claimed.
fn claim(
    records: &[Stamped],
    own: u32,
    excluded: &[u32],
    tree: &impl Fn(u32) -> bool,
    kept: &mut Vec<u32>,
) -> Vec<bool> {
    let mut claimed = vec![false; records.len()];
    kept.clear();
    loop {
        let mut more = false;
        for (index, (record, _)) in records.iter().enumerate() {
            if claimed[index] || record.tgid == own || excluded.contains(&record.tgid) {
                continue;
            }
            let ours = |pid: u32| pid != 0 && (tree(pid) || kept.binary_search(&pid).is_ok());
            if ours(record.tgid) || ours(record.ppid) {
                claimed[index] = true;
                if let Err(at) = kept.binary_search(&record.tgid) {
                    kept.insert(at, record.tgid);
                }
                more = true;
            }
        }
        if !more {
            return claimed;
        }
    }
}

impl ExitFeed {
    /// Leaves `pid`'s records out for good: a child of this process that is the
    /// monitor's own.
    pub(crate) fn exclude(&mut self, pid: u32) {
        self.excluded.push(pid);
    }

    /// Registers for the records, once: whether records come.
    pub(crate) fn start(&mut self) -> bool {
        if !self.tried {
            self.tried = true;
            // Without CAP_NET_ADMIN (EPERM) or taskstats, exits go without records.
            self.watch = ExitWatch::start().ok();
        }
        self.watch.is_some()
    }

    /// Takes the records that came since the last call and keeps those of the tree:
    /// `tree(pid)` says whether a pid is of the tree (read now or at the last sample);
    /// a record of `own` (this process, whose own figures come from elsewhere) is
    /// never kept. Returns false where records were dropped since the last call.
    pub(crate) fn collect(&mut self, own: u32, tree: impl Fn(u32) -> bool) -> bool {
        let Some(watch) = &self.watch else {
            return true;
        };
        let mut drained = std::mem::take(&mut self.drained);
        drained.clear();
        drained.append(&mut self.pending);
        let retried = drained.len();
        let lost = !watch.take(&mut drained);
        let claimed = claim(&drained, own, &self.excluded, &tree, &mut self.kept);
        for (index, stamped) in drained.iter().enumerate() {
            let (record, came) = stamped;
            if claimed[index] {
                self.stash
                    .entry(record.tgid)
                    .or_default()
                    .add(record, *came);
            } else if index >= retried
                && record.tgid != own
                && !self.excluded.contains(&record.tgid)
            {
                self.pending.push(*stamped);
            }
        }
        self.drained = drained;
        !lost
    }

    /// Registers (once) and takes the records of this sample's tree: its processes
    /// (`seen`), the previous sample's (`known`), and this process's children where
    /// `ours`. Returns whether records come, and whether none was lost (`pids`: a
    /// buffer to reuse).
    pub(crate) fn sample(
        &mut self,
        own: u32,
        ours: bool,
        known: &PidMap<super::ledger::Known>,
        seen: &[super::tree::Seen],
        pids: &mut Vec<u32>,
    ) -> (bool, bool) {
        if !self.start() {
            return (false, true);
        }
        pids.clear();
        pids.extend(seen.iter().map(|s| s.pid));
        pids.sort_unstable();
        let whole = self.collect(own, |pid| {
            (ours && pid == own) || known.contains_key(&pid) || pids.binary_search(&pid).is_ok()
        });
        (true, whole)
    }

    /// The records of `pid`, once it has exited: taken, so counted once.
    pub(crate) fn take(&mut self, pid: u32) -> Option<ExitPeak> {
        match self.stash.get(&pid) {
            Some(peak) if peak.exited => self.stash.remove(&pid),
            _ => None,
        }
    }

    /// Takes the processes that exited without any sample reading them: those with a
    /// record of their main thread that `alive(pid)` does not claim.
    pub(crate) fn take_unread(
        &mut self,
        alive: impl Fn(u32) -> bool,
        out: &mut Vec<(u32, ExitPeak)>,
    ) {
        out.clear();
        self.stash.retain(|pid, peak| {
            let unread = peak.exited && !alive(*pid);
            if unread {
                out.push((*pid, *peak));
            }
            !unread
        });
        out.sort_unstable_by_key(|(pid, _)| *pid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(tid: u32, tgid: u32, ppid: u32, mib: u64) -> ExitRecord {
        ExitRecord {
            tid,
            tgid,
            ppid,
            hiwater: mib << 20,
            ..ExitRecord::default()
        }
    }

    #[test]
    fn a_chain_unknown_to_the_samples_is_claimed_through_its_parents() {
        let mut feed = ExitFeed::default();
        let records = [
            (record(12, 12, 11, 30), 1.0), // grandchild, first
            (record(11, 11, 10, 5), 2.0),  // child of the tree's 10
            (record(99, 99, 1, 900), 3.0), // someone else's
            (record(13, 11, 10, 5), 4.0),  // a thread of 11
            (record(7, 7, 10, 1), 5.0),    // this process, never kept
        ];
        let mut kept = Vec::new();
        let claimed = claim(&records, 7, &[], &|pid| pid == 10, &mut kept);
        assert_eq!(claimed, vec![true, true, false, true, false]);
        for ((r, came), _) in records.iter().zip(&claimed).filter(|(_, c)| **c) {
            feed.stash.entry(r.tgid).or_default().add(r, *came);
        }
        assert_eq!(feed.take(11).map(|p| p.hiwater), Some(5 << 20));
        assert_eq!(feed.take(11), None, "taken once");
        let mut unread = Vec::new();
        feed.take_unread(|pid| pid == 10, &mut unread);
        assert_eq!(unread.len(), 1);
        assert_eq!(
            (unread[0].0, unread[0].1.hiwater, unread[0].1.ppid),
            (12, 30 << 20, 11)
        );
    }

    #[test]
    fn a_live_process_with_exited_threads_is_not_taken() {
        let mut feed = ExitFeed::default();
        feed.stash
            .entry(20)
            .or_default()
            .add(&record(21, 20, 1, 64), 1.0);
        assert_eq!(feed.take(20), None, "its main thread lives");
        let mut unread = Vec::new();
        feed.take_unread(|_| false, &mut unread);
        assert!(unread.is_empty());
    }
}
