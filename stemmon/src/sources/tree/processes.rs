//! The report's `processes` (the book's `cpu-io.md`): the tree's processes seen during the run, in
//! bounded memory whatever the churn. At most [`MAX_CANDIDATES`] are kept; past that,
//! the one with the lowest peak goes (an exited one first, at equal peaks), and the
//! report lists the [`MAX_LISTED`] with the highest peaks.

use crate::memory::{Descendant, TreeReading};
use crate::report::ProcessReport;
use std::collections::HashMap;
use std::sync::Arc;

/// The most processes kept as candidates for the report.
pub(crate) const MAX_CANDIDATES: usize = 400;
/// The most processes the report lists.
pub(crate) const MAX_LISTED: usize = 50;

/// One process as seen so far.
#[derive(Clone, Debug)]
struct Seen {
    ppid: u32,
    command: Option<Arc<str>>,
    first: f64,
    last: f64,
    /// Its own highest reading; `None` until it is read alive.
    peak: Option<u64>,
    /// The kernel's figure at its exit (its own and its waited children's, merged).
    exit_maxrss: Option<u64>,
    cpu_micros: Option<u64>,
    exit_code: Option<i32>,
    /// Its latest state (the root alone).
    state: Option<crate::memory::ProcessState>,
    /// The measurement sources' figures of it (`peak_gpu_bytes`), the highest seen.
    figures: Vec<(&'static str, f64)>,
}

impl Seen {
    /// What it is ranked by: its own peak, else what the kernel said at its exit.
    fn rank(&self) -> u64 {
        self.peak.or(self.exit_maxrss).unwrap_or(0)
    }
}

/// The candidates, by pid.
#[derive(Debug, Default)]
pub(crate) struct Processes {
    seen: HashMap<u32, Seen>,
}

impl Processes {
    /// Takes in the processes a full sample at `elapsed` seconds read.
    pub(super) fn sampled(&mut self, reading: &TreeReading, elapsed: f64) {
        // Without CPU figures (another platform's reader) there is no process list.
        let cpu = reading.own_usage.is_some();
        if !cpu {
            return;
        }
        for process in reading.root_process.iter().chain(&reading.descendants) {
            self.saw(process, elapsed);
        }
    }

    /// Takes in one process seen at `elapsed` seconds. Its peak is its own readings'
    /// highest (its RSS, its marks); the kernel's figure at its exit, which merges the
    /// peaks of the children it waited for, is kept apart, never taken as its own.
    pub(super) fn saw(&mut self, process: &Descendant, elapsed: f64) {
        let cpu = process
            .own_cpu_micros
            .unwrap_or_else(|| process.usage.cpu_micros());
        let entry = self.seen.entry(process.pid).or_insert_with(|| Seen {
            ppid: process.ppid,
            command: None,
            first: elapsed,
            last: elapsed,
            peak: None,
            exit_maxrss: None,
            cpu_micros: None,
            exit_code: None,
            state: None,
            figures: Vec::new(),
        });
        if process.state.is_some() {
            entry.state = process.state;
        }
        if process.ppid != 0 {
            entry.ppid = process.ppid;
        }
        if process.command.is_some() && process.exited_peak.is_none() {
            // Read again after an `exec`: the program it runs now names it.
            entry.command.clone_from(&process.command);
        } else if entry.command.is_none() {
            entry.command.clone_from(&process.command);
        }
        entry.last = elapsed;
        // A zombie reads 0: not a reading of the process alive.
        let own = process.rss.max(process.peak);
        if own > 0 {
            entry.peak = Some(entry.peak.unwrap_or(0).max(own));
        }
        entry.exit_maxrss = entry.exit_maxrss.max(process.exited_peak);
        entry.cpu_micros = Some(entry.cpu_micros.map_or(cpu, |c| c.max(cpu)));
        entry.exit_code = process.exit_code.or(entry.exit_code);
        if self.seen.len() > MAX_CANDIDATES {
            self.evict();
        }
    }

    /// Drops the candidate with the lowest peak, an exited one before a live one.
    fn evict(&mut self) {
        let lowest = self
            .seen
            .iter()
            .min_by_key(|(_, seen)| (seen.rank(), seen.exit_code.is_none()))
            .map(|(pid, _)| *pid);
        if let Some(pid) = lowest {
            self.seen.remove(&pid);
        }
    }

    /// Keeps the highest `value` of a source's figure `key` for `pid`, if it is seen.
    pub(super) fn figure(&mut self, pid: u32, key: &'static str, value: f64) {
        if let Some(seen) = self.seen.get_mut(&pid) {
            match seen.figures.iter_mut().find(|(k, _)| *k == key) {
                Some((_, high)) => *high = (*high).max(value),
                None => seen.figures.push((key, value)),
            }
        }
    }

    /// Records the exit code of `pid`, reaped by this process (`stemmon run`).
    pub(super) fn exited(&mut self, pid: u32, exit_code: i32) {
        if let Some(seen) = self.seen.get_mut(&pid) {
            seen.exit_code = Some(exit_code);
        }
    }

    /// The report's list: the [`MAX_LISTED`] highest peaks, highest first.
    pub(super) fn report(&self) -> Vec<ProcessReport> {
        let mut list: Vec<ProcessReport> = self
            .seen
            .iter()
            .map(|(&pid, seen)| {
                let mut built = ProcessReport::default();
                built.pid = pid;
                built.ppid = seen.ppid;
                built.command = seen.command.as_deref().unwrap_or("").to_owned();
                built.first_seconds = seen.first;
                built.last_seconds = seen.last;
                built.peak_rss_bytes = seen.peak;
                built.exit_maxrss_bytes = seen.exit_maxrss;
                built.cpu_seconds = seen.cpu_micros.map(|c| c as f64 / 1e6);
                built.exit_code = seen.exit_code;
                if let Some(state) = seen.state {
                    built.virtual_bytes = state.virtual_bytes;
                    built.threads = state.threads;
                    built.open_fds = state.open_fds;
                }
                for &(key, value) in &seen.figures {
                    built.figures.set_number(key, Some(value));
                }
                built
            })
            .collect();
        let rank = |p: &ProcessReport| p.peak_rss_bytes.or(p.exit_maxrss_bytes);
        list.sort_by(|a, b| {
            rank(b)
                .cmp(&rank(a))
                .then(a.first_seconds.total_cmp(&b.first_seconds))
                .then(a.pid.cmp(&b.pid))
        });
        list.truncate(MAX_LISTED);
        list
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::Usage;

    fn process(pid: u32, rss: u64) -> Descendant {
        Descendant {
            pid,
            rss,
            peak: rss,
            ppid: 1,
            usage: Usage {
                user_micros: 2_000_000,
                ..Usage::ZERO
            },
            command: Some(format!("worker {pid}").into()),
            ..Descendant::default()
        }
    }

    #[test]
    fn churn_keeps_memory_bounded_and_the_highest_peaks() {
        let mut processes = Processes::default();
        for round in 0..20u32 {
            let reading = TreeReading {
                own_usage: Some(Usage::ZERO),
                descendants: (0..100)
                    .map(|i| process(round * 100 + i + 2, u64::from(round * 100 + i)))
                    .collect(),
                ..TreeReading::default()
            };
            processes.sampled(&reading, f64::from(round));
            assert!(processes.seen.len() <= MAX_CANDIDATES);
        }
        let listed = processes.report();
        assert_eq!(listed.len(), MAX_LISTED);
        assert_eq!(listed[0].pid, 2_001, "the highest peak first");
        assert_eq!(listed[0].command, "worker 2001");
        assert_eq!(listed[0].cpu_seconds, Some(2.0));
        assert!(listed
            .windows(2)
            .all(|w| w[0].peak_rss_bytes >= w[1].peak_rss_bytes));
    }

    #[test]
    fn an_exited_processs_rusage_peak_is_kept_apart_from_its_own() {
        let mut processes = Processes::default();
        let exited = |pid| Descendant {
            exited_peak: Some(300 << 20),
            ..process(pid, 0)
        };
        // A command that exited before any sample: its own peak was never read.
        processes.saw(&exited(5), 0.1);
        // A shell whose child held 300 MiB: its own peak is its readings'.
        processes.saw(&process(10, 2 << 20), 0.1);
        processes.saw(
            &Descendant {
                ppid: 10,
                ..process(11, 300 << 20)
            },
            0.1,
        );
        processes.saw(&exited(10), 0.2);
        let listed = processes.report();
        let find = |pid| listed.iter().find(|p| p.pid == pid).unwrap();
        assert_eq!(find(5).peak_rss_bytes, None);
        assert_eq!(find(5).exit_maxrss_bytes, Some(300 << 20));
        assert_eq!(find(10).peak_rss_bytes, Some(2 << 20));
        assert_eq!(find(10).exit_maxrss_bytes, Some(300 << 20));
        assert_eq!(find(11).peak_rss_bytes, Some(300 << 20));
        assert_eq!(find(11).exit_maxrss_bytes, None);
        // Ranked by its own peak, else by the kernel's figure.
        assert_eq!(listed[0].pid, 5);
    }

    #[test]
    fn the_command_follows_an_exec() {
        let mut processes = Processes::default();
        processes.saw(&process(7, 1 << 20), 0.1);
        let python = Descendant {
            command: Some("python3 train.py".into()),
            ..process(7, 200 << 20)
        };
        processes.saw(&python, 0.2);
        let listed = processes.report();
        assert_eq!(listed[0].command, "python3 train.py");
    }

    #[test]
    fn an_exit_code_is_kept_once_seen() {
        let mut processes = Processes::default();
        let mut zombie = process(9, 10);
        zombie.exit_code = Some(3);
        let reading = |p: Descendant| TreeReading {
            own_usage: Some(Usage::ZERO),
            descendants: vec![p],
            ..TreeReading::default()
        };
        processes.sampled(&reading(process(9, 10)), 0.5);
        processes.sampled(&reading(zombie), 1.0);
        processes.exited(9, 4);
        let listed = processes.report();
        assert_eq!(listed[0].exit_code, Some(4));
        assert_eq!(
            (listed[0].first_seconds, listed[0].last_seconds),
            (0.5, 1.0)
        );
    }
}
