//! What the processes that left the tree in one interval held, for the high-water bound
//! (the book's `exact-peaks.md`): each process counted once.
//!
//! The kernel gives an exited process's peak only merged with others': a zombie's
//! `waitid` rusage is the larger of its own peak and those of the children it waited
//! for, and `RUSAGE_CHILDREN` keeps one maximum over every child this process reaped.
//! So the processes of an interval are put in groups by who reaped them (the zombie
//! that waited for them, or this process), and each group counts its members at their
//! last readings, raised by what the kernel's figure for the group says beyond the
//! largest of them: `sum(last) + max(0, figure - max(last))`. Never a sum of a
//! process's last reading and its reaped peak: the figure goes to one member, the one
//! whose reading it is most likely to extend. Where several members of one group
//! spiked after their last readings, only the largest spike is in the bound: the
//! kernel keeps no more than that.

use super::ledger::Known;
use crate::memory::{BoundPart, Unread};

/// A process that left the tree, as the previous sample knew it.
#[derive(Clone, Copy, Debug)]
struct Gone {
    pid: u32,
    ppid: u32,
    /// This process reaped it: its peak is in `RUSAGE_CHILDREN`.
    direct: bool,
    /// Its mark at its last reading.
    last: u64,
    started: Option<f64>,
    /// Its own peak from its exit record, where one came.
    exact: Option<u64>,
}

/// An exited process not yet reaped.
#[derive(Clone, Copy, Debug)]
struct Zombie {
    pid: u32,
    last: u64,
    started: Option<f64>,
    /// Its rusage's peak, where this process may read it (its own child).
    figure: Option<u64>,
    /// Its own peak from its exit record, where one came.
    exact: Option<u64>,
}

/// Who a departed process's peak went to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reaper {
    /// A zombie of this interval waited for it: into that zombie's rusage.
    Zombie(usize),
    /// This process reaped it (or its reaper, which it reaped): into `RUSAGE_CHILDREN`.
    Kernel,
    /// A live process reaped it: its rusage is not readable, the last reading stands.
    Alive,
}

/// One group's sums.
#[derive(Clone, Copy, Debug, Default)]
struct Group {
    sum: u64,
    max: u64,
    started: Option<f64>,
    /// The lowest pid of its members.
    pid: u32,
    members: u32,
}

impl Group {
    /// A member at its last reading; the group began with its first member (unknown
    /// if any member's start is).
    fn add(&mut self, pid: u32, last: u64, started: Option<f64>) {
        self.started = match (self.members, self.started, started) {
            (0, _, started) => started,
            (_, Some(a), Some(b)) => Some(a.min(b)),
            _ => None,
        };
        self.pid = if self.members == 0 {
            pid
        } else {
            self.pid.min(pid)
        };
        self.sum += last;
        self.max = self.max.max(last);
        self.members += 1;
    }

    fn part(&self, figure: Option<u64>) -> BoundPart {
        BoundPart {
            pid: self.pid,
            started: self.started,
            bytes: self.sum + figure.map_or(0, |f| f.saturating_sub(self.max)),
            departed: false,
            gone_by: None,
        }
    }
}

/// One interval's live marks, zombies and departed processes; kept by the reader
/// between samples to reuse its lists.
#[derive(Debug, Default)]
pub(crate) struct Exits {
    parts: Vec<BoundPart>,
    zombies: Vec<Zombie>,
    departed: Vec<Gone>,
    /// The parts of processes a boundary reading found exited (see
    /// [`Exits::found_exited`]).
    found: Vec<BoundPart>,
    /// Live processes that reaped a child this interval, unseen by any record.
    reapers: Vec<u32>,
    /// Processes that lived and died between two readings, from their exit records.
    unread: Vec<Unread>,
    /// The largest peak of a process that exited in the interval.
    pub(crate) largest: Option<u64>,
    /// Every exit comes with its record (taskstats): each process counts at its own
    /// peak, and no kernel figure that merges several is needed.
    pub(crate) exact: bool,
    /// Processes that ended in the interval at a peak nobody read (set by
    /// [`Exits::parts`]): their last readings stand, so the sum is at least the peak.
    pub(crate) unseen: u32,
    /// Children of this process that a sample read and that exited with no record:
    /// the kernel's one figure is all their reaping leaves (see `births`).
    pub(crate) merged: u32,
}

impl Exits {
    /// Empties the lists for a new sample.
    pub(crate) fn clear(&mut self) {
        self.parts.clear();
        self.zombies.clear();
        self.departed.clear();
        self.found.clear();
        self.reapers.clear();
        self.unread.clear();
        self.largest = None;
        self.exact = false;
        self.unseen = 0;
        self.merged = 0;
    }

    /// A process that lived and died between two readings, from its exit record: its
    /// peak, and when it began and ended (seconds since boot).
    pub(crate) fn unread(&mut self, pid: u32, peak: u64, began: f64, ended: f64) {
        self.largest = self.largest.max(Some(peak));
        self.unread.push(Unread {
            pid,
            peak,
            began,
            ended,
        });
    }

    /// The processes no reading saw, for the reading (see `TreeReading::unread`).
    pub(crate) fn take_unread(&mut self) -> Vec<Unread> {
        std::mem::take(&mut self.unread)
    }

    /// A live process of the tree that reaped a child in the interval (its `stat`'s
    /// children's faults grew): where no departed process of its accounts for that,
    /// one process ended unseen.
    pub(crate) fn reaper(&mut self, pid: u32) {
        self.reapers.push(pid);
    }

    /// A live descendant and its mark.
    pub(crate) fn live(&mut self, pid: u32, started: Option<f64>, mark: u64) {
        self.parts.push(BoundPart {
            pid,
            started,
            bytes: mark,
            departed: false,
            gone_by: None,
        });
    }

    /// An exited process not yet reaped: its last reading and, where readable, its
    /// rusage's peak.
    pub(crate) fn zombie(
        &mut self,
        pid: u32,
        last: u64,
        started: Option<f64>,
        figure: Option<u64>,
    ) {
        self.zombie_at(pid, last, started, figure, None);
    }

    /// [`Exits::zombie`] with its own peak from its exit record, where one came.
    pub(crate) fn zombie_at(
        &mut self,
        pid: u32,
        last: u64,
        started: Option<f64>,
        figure: Option<u64>,
        exact: Option<u64>,
    ) {
        self.largest = self.largest.max(exact.or(figure));
        self.zombies.push(Zombie {
            pid,
            last,
            started,
            figure,
            exact,
        });
    }

    /// The root, exited and not yet reaped: a group of its own, whose figure (merged
    /// with its children's) is no exited child's peak.
    pub(crate) fn root_zombie(
        &mut self,
        pid: u32,
        last: u64,
        started: Option<f64>,
        figure: Option<u64>,
    ) {
        let largest = self.largest;
        self.zombie(pid, last, started, figure);
        self.largest = largest;
    }

    /// A process of the previous sample that is gone.
    #[cfg(test)]
    pub(crate) fn departed(&mut self, pid: u32, was: &Known) {
        self.departed_at(pid, was, None, false);
    }

    /// [`Exits::departed`] with its own peak from its exit record, where one came;
    /// `found`: a boundary reading found it exited (see [`Exits::found_exited`]).
    pub(crate) fn departed_at(&mut self, pid: u32, was: &Known, exact: Option<u64>, found: bool) {
        if found {
            return self.found_exited(pid, was, exact);
        }
        self.largest = self.largest.max(Some(was.peak)).max(exact);
        // Without records, the kernel's figure is all its reaping leaves.
        self.merged += u32::from(was.direct && exact.is_none());
        self.departed.push(Gone {
            pid,
            ppid: was.ppid,
            direct: was.direct,
            last: was.hwm,
            started: was.started,
            exact,
        });
    }

    /// A process that exited after the last sample read it, and that a boundary reading
    /// found exited: with exit records, a part at its own peak for the intervals it
    /// overlapped, left out of this sample's own sum (its exit came before the reading
    /// that found it, which the engine knows). Without, that reading counted it. With
    /// records but none for it (dropped), its final interval is unread: no reading
    /// counted it beyond its last mark.
    fn found_exited(&mut self, pid: u32, was: &Known, exact: Option<u64>) {
        if self.exact {
            self.unseen += u32::from(exact.is_none());
            self.largest = self.largest.max(exact);
            self.found.push(BoundPart {
                pid,
                started: was.started,
                bytes: exact.map_or(was.hwm, |e| e.max(was.hwm)),
                departed: true,
                gone_by: None,
            });
        }
    }

    /// The bound's parts: every live mark, and one part per group of exited processes;
    /// `kernel` is what `RUSAGE_CHILDREN`'s maximum grew to in the interval, if it grew.
    pub(crate) fn parts(&mut self, kernel: Option<u64>) -> Vec<BoundPart> {
        if self.exact {
            return self.exact_parts();
        }
        self.departed.sort_unstable_by_key(|g| g.pid);
        self.zombies.sort_unstable_by_key(|z| z.pid);
        let mut zombie_groups = vec![Group::default(); self.zombies.len()];
        for (group, zombie) in zombie_groups.iter_mut().zip(&self.zombies) {
            group.add(zombie.pid, zombie.last, zombie.started);
        }
        let mut kernel_group = Group::default();
        let mut parts = std::mem::take(&mut self.parts);
        for gone in &self.departed {
            match self.reaper_of(gone) {
                Reaper::Zombie(index) => {
                    zombie_groups[index].add(gone.pid, gone.last, gone.started)
                }
                Reaper::Kernel => kernel_group.add(gone.pid, gone.last, gone.started),
                Reaper::Alive => {
                    self.unseen += 1;
                    parts.push(BoundPart {
                        pid: gone.pid,
                        started: gone.started,
                        bytes: gone.last,
                        departed: false,
                        gone_by: None,
                    })
                }
            }
        }
        // A zombie that is not this process's child: its last interval is unread.
        self.unseen += self.zombies.iter().filter(|z| z.figure.is_none()).count() as u32;
        let departed = &self.departed;
        self.unseen += self
            .reapers
            .iter()
            .filter(|pid| !departed.iter().any(|g| g.ppid == **pid))
            .count() as u32;
        for (group, zombie) in zombie_groups.iter().zip(&self.zombies) {
            parts.push(group.part(zombie.figure));
        }
        if kernel_group.members > 0 || kernel.is_some() {
            parts.push(kernel_group.part(kernel));
        }
        parts
    }

    /// The parts where every exit came with its record: each process at its own peak.
    fn exact_parts(&mut self) -> Vec<BoundPart> {
        let mut parts = std::mem::take(&mut self.parts);
        parts.append(&mut self.found);
        // One that ended with no record (dropped, or sent before the registration):
        // its final interval is unread.
        self.unseen += self.departed.iter().filter(|g| g.exact.is_none()).count() as u32;
        // A zombie of ours without one still has its rusage (merged, so at least its own).
        self.unseen += self
            .zombies
            .iter()
            .filter(|z| z.exact.is_none() && z.figure.is_none())
            .count() as u32;
        for gone in &self.departed {
            parts.push(BoundPart {
                pid: gone.pid,
                started: gone.started,
                bytes: gone.exact.map_or(gone.last, |e| e.max(gone.last)),
                departed: false,
                gone_by: None,
            });
        }
        for zombie in &self.zombies {
            parts.push(BoundPart {
                pid: zombie.pid,
                started: zombie.started,
                bytes: zombie
                    .exact
                    .or(zombie.figure)
                    .map_or(zombie.last, |e| e.max(zombie.last)),
                departed: false,
                gone_by: None,
            });
        }
        parts
    }

    /// Who reaped `gone`: walked up through the processes that left in this interval.
    fn reaper_of(&self, gone: &Gone) -> Reaper {
        let mut at = *gone;
        // Parent links of one interval: a chain is as long as the tree is deep.
        for _ in 0..256 {
            if at.direct {
                return Reaper::Kernel;
            }
            if let Ok(index) = self.zombies.binary_search_by_key(&at.ppid, |z| z.pid) {
                return Reaper::Zombie(index);
            }
            match self.departed.binary_search_by_key(&at.ppid, |g| g.pid) {
                Ok(index) if self.departed[index].pid != at.pid => at = self.departed[index],
                _ => return Reaper::Alive,
            }
        }
        Reaper::Alive
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn known(hwm: u64, ppid: u32, direct: bool) -> Known {
        Known {
            hwm,
            peak: hwm,
            direct,
            ppid,
            started: Some(1.0),
            reaps: 0,
            recorded: false,
        }
    }

    fn total(parts: &[BoundPart]) -> u64 {
        parts.iter().map(|p| p.bytes).sum()
    }

    #[test]
    fn a_wrapper_and_the_child_it_waited_for_count_once() {
        // sh (ours, 2 MiB) waited for python (300 MiB) and exited: its rusage says 310.
        let mut exits = Exits::default();
        exits.zombie(10, 2 * MIB, Some(1.0), Some(310 * MIB));
        exits.departed(11, &known(300 * MIB, 10, false));
        let parts = exits.parts(None);
        assert_eq!(total(&parts), 312 * MIB, "{parts:?}");
        assert_eq!(exits.largest, Some(310 * MIB));
    }

    #[test]
    fn a_child_that_spiked_after_its_last_reading_gets_the_kernels_figure() {
        let mut exits = Exits::default();
        exits.zombie(10, 2 * MIB, None, Some(310 * MIB));
        exits.departed(11, &known(10 * MIB, 10, false));
        assert_eq!(total(&exits.parts(None)), 312 * MIB);
    }

    #[test]
    fn a_pool_reaped_by_this_process_counts_each_worker_once() {
        let mut exits = Exits::default();
        for pid in 20..24 {
            exits.departed(pid, &known(100 * MIB, 1, true));
        }
        exits.live(3, Some(1.0), 40 * MIB);
        // The kernel's maximum grew to 104 MiB: one worker spiked past its last reading.
        assert_eq!(total(&exits.parts(Some(104 * MIB))), 444 * MIB);
        // Without growth (the maximum is an earlier child's, or inherited across exec),
        // the kernel says nothing: the last readings stand.
        exits.clear();
        for pid in 20..24 {
            exits.departed(pid, &known(100 * MIB, 1, true));
        }
        assert_eq!(total(&exits.parts(None)), 400 * MIB);
    }

    #[test]
    fn a_child_never_sampled_counts_with_the_kernels_growth() {
        let mut exits = Exits::default();
        let parts = exits.parts(Some(50 * MIB));
        assert_eq!(total(&parts), 50 * MIB);
        exits.clear();
        assert!(exits.parts(None).is_empty());
    }

    #[test]
    fn a_grandchild_reaped_by_a_live_process_counts_its_last_reading() {
        let mut exits = Exits::default();
        exits.departed(30, &known(64 * MIB, 29, false));
        let parts = exits.parts(Some(500 * MIB));
        // The kernel's growth is another child's (this process reaped it): its own part.
        assert_eq!(total(&parts), 564 * MIB);
        assert_eq!(parts[0].bytes, 64 * MIB);
    }

    #[test]
    fn a_chain_of_exits_joins_the_group_of_its_top() {
        // 40 (ours) reaped 41, which had reaped 42; all gone in one interval.
        let mut exits = Exits::default();
        exits.departed(42, &known(30 * MIB, 41, false));
        exits.departed(41, &known(5 * MIB, 40, false));
        exits.departed(40, &known(MIB, 1, true));
        let parts = exits.parts(Some(32 * MIB));
        assert_eq!(parts.len(), 1, "{parts:?}");
        assert_eq!(total(&parts), 36 * MIB + 2 * MIB);
    }

    #[test]
    fn processes_no_reading_saw_count_where_their_lives_overlap() {
        let mut exits = Exits {
            exact: true,
            ..Exits::default()
        };
        // Forty 3 MiB helpers one after another, then two 100 MiB ones together.
        for i in 0..40 {
            let began = f64::from(i) * 0.01;
            exits.unread(100 + i, 3 * MIB, began, began + 0.009);
        }
        exits.unread(200, 100 * MIB, 1.0, 1.5);
        exits.unread(201, 100 * MIB, 1.2, 1.6);
        exits.unread(202, 3 * MIB, 1.5, 1.55);
        let parts = exits.parts(Some(900 * MIB));
        assert!(parts.is_empty(), "{parts:?}");
        let unread = exits.take_unread();
        let most = |from: f64, until: f64| {
            crate::memory::most_at_once(&unread, |u| u.began <= until && u.ended > from)
        };
        // The helpers one at a time; the two big ones overlapped.
        assert_eq!(most(0.0, 10.0), 203 * MIB);
        assert_eq!(most(0.0, 0.5), 3 * MIB);
        assert_eq!(most(0.0, 1.1), 100 * MIB);
        // After the helpers and the first big one had ended, only what was left.
        assert_eq!(most(1.55, 10.0), 100 * MIB);
        assert_eq!(exits.largest, Some(100 * MIB));
        assert_eq!(exits.unseen, 0);
    }

    #[test]
    fn with_records_an_exit_without_one_is_unseen() {
        let mut exits = Exits {
            exact: true,
            ..Exits::default()
        };
        exits.departed_at(30, &known(64 * MIB, 29, false), Some(80 * MIB), false);
        exits.departed_at(31, &known(10 * MIB, 29, false), None, false);
        exits.zombie_at(32, 5 * MIB, None, Some(9 * MIB), None);
        exits.zombie_at(33, 5 * MIB, None, None, None);
        let parts = exits.parts(None);
        assert_eq!(total(&parts), (80 + 10 + 9 + 5) * MIB, "{parts:?}");
        assert_eq!(
            exits.unseen, 2,
            "31 without a record, 33 without any figure"
        );
    }

    /// With records, a process a boundary reading found exited is a part of its own at
    /// its record's peak, out of the sample's own sum; one whose record never came is
    /// counted at its last mark and said unseen (no reading counted its last interval).
    #[test]
    fn with_records_one_a_boundary_found_exited_is_a_part_from_its_record() {
        let mut exits = Exits {
            exact: true,
            ..Exits::default()
        };
        exits.departed_at(30, &known(10 * MIB, 1, true), Some(150 * MIB), true);
        exits.departed_at(31, &known(20 * MIB, 1, true), None, true);
        let parts = exits.parts(Some(150 * MIB));
        let found: Vec<_> = parts.iter().map(|p| (p.pid, p.bytes, p.departed)).collect();
        assert_eq!(found, [(30, 150 * MIB, true), (31, 20 * MIB, true)]);
        assert_eq!((exits.unseen, exits.largest), (1, Some(150 * MIB)));
        // Without records the boundary reading counted both: no part.
        let mut exits = Exits::default();
        exits.departed_at(30, &known(10 * MIB, 1, true), None, true);
        assert!(exits.parts(None).is_empty());
        assert_eq!(exits.unseen, 0);
    }

    #[test]
    fn a_parent_cycle_in_stale_readings_ends() {
        let mut exits = Exits::default();
        exits.departed(50, &known(MIB, 51, false));
        exits.departed(51, &known(MIB, 50, false));
        assert_eq!(total(&exits.parts(None)), 2 * MIB);
    }
}
