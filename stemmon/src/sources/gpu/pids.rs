//! Which of NVML's processes belong to the tree, and what they hold.
//!
//! NVML may report a process by its pid in another pid namespace than the one this
//! process's `/proc` shows (containers). A tree process's `/proc/PID/status` has an
//! `NSpid:` line: its pid in each namespace it is in, this procfs's first, then each
//! nested namespace inward. The rule, for the pids one device lists:
//!
//! 1. A listed pid equal to a tree pid is that tree process.
//! 2. Otherwise a listed pid equal to an inner `NSpid` entry of exactly one tree process
//!    is that process, unless the device also lists that process by its own pid (then
//!    NVML speaks this namespace, and the inner pid is an unrelated process that happens
//!    to have the same number here).
//! 3. A listed pid that is an inner entry of two or more tree processes (siblings in
//!    different namespaces) is counted for none of them, and counted as ambiguous.
//!
//! What no rule can tell apart: NVML speaking this namespace, an unrelated process
//! using the GPU under a pid that is also a tree process's inner pid, and that tree
//! process not on the GPU. Its memory is then counted for the tree process.
//!
//! `NSpid` never changes for a process, so it is read once per pid and kept until the
//! pid leaves the tree; a steady tree costs no file read and no allocation.

use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::struct_wrappers::device::ProcessInfo;
use std::collections::HashMap;
use std::io;

/// A tree process's GPU memory over every device read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProcessGpu {
    /// Its pid, as this process sees it.
    pub pid: u32,
    /// The sum of the figures NVML gave for it; `None` when every figure it was listed
    /// with was not available.
    pub bytes: Option<u64>,
}

/// The tree's side of one reading, summed over the devices matched so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Tally {
    /// The sum of the known figures of the tree's listings.
    pub known_bytes: u64,
    /// Tree listings (a process on one device, once) with a known figure.
    pub known: u32,
    /// Tree listings whose figure NVML marked not available.
    pub unknown: u32,
    /// Listed pids that were an inner pid of more than one tree process.
    pub ambiguous: u32,
}

/// One tree process as the matcher keeps it.
#[derive(Debug)]
struct Member {
    /// Its `NSpid` entries other than its own pid: its pids in nested namespaces.
    inner: Box<[u32]>,
    /// The reading that last found it in the tree.
    seen: u64,
    /// The device pass that last listed it by its own pid.
    listed_at: u64,
    bytes: u64,
    known: bool,
    listed: bool,
    /// It started after this reading began: what NVML lists under its pid is an
    /// earlier process's.
    late: bool,
}

/// Who an inner pid belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    One(u32),
    Many,
}

/// One tree listing on the device being matched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Hit {
    pid: u32,
    gpu_instance: Option<u32>,
    compute_instance: Option<u32>,
    bytes: Option<u64>,
}

/// Matches NVML's listings to the tree, reading and caching each tree process's `NSpid`.
#[derive(Debug, Default)]
pub(super) struct Matcher {
    members: HashMap<u32, Member>,
    /// Inner pid → the tree process it belongs to, rebuilt when the tree changes.
    inner: HashMap<u32, Owner>,
    reading: u64,
    pass: u64,
    hits: Vec<Hit>,
    tally: Tally,
    status: Vec<u8>,
    path: String,
}

impl Matcher {
    /// Starts a reading of `tree`: new pids get their `NSpid` read through `read_status`
    /// (the text of `/proc/PID/status`, into the buffer it is given), pids gone from the
    /// tree are dropped, and the sums start again from zero.
    pub fn start(&mut self, tree: &[u32], read_status: &mut dyn StatusSource) {
        self.reading += 1;
        self.tally = Tally::default();
        let mut changed = false;
        for &pid in tree {
            if let Some(member) = self.members.get_mut(&pid) {
                member.seen = self.reading;
                member.bytes = 0;
                member.known = false;
                member.listed = false;
                member.late = false;
                continue;
            }
            self.status.clear();
            let inner = match read_status.read_status(pid, &mut self.status, &mut self.path) {
                Ok(()) => inner_pids(pid, &self.status),
                // Gone, or not readable: it can still be matched by its own pid.
                Err(_) => Box::default(),
            };
            changed |= !inner.is_empty();
            self.members.insert(
                pid,
                Member {
                    inner,
                    seen: self.reading,
                    listed_at: 0,
                    bytes: 0,
                    known: false,
                    listed: false,
                    late: false,
                },
            );
        }
        let reading = self.reading;
        self.members.retain(|_, member| {
            let stays = member.seen == reading;
            changed |= !stays && !member.inner.is_empty();
            stays
        });
        if changed {
            self.inner.clear();
            for (&pid, member) in &self.members {
                for &inner in member.inner.iter() {
                    self.inner
                        .entry(inner)
                        .and_modify(|owner| {
                            if *owner != Owner::One(pid) {
                                *owner = Owner::Many;
                            }
                        })
                        .or_insert(Owner::One(pid));
                }
            }
        }
    }

    /// Marks the tree processes that started after `now` (seconds since boot, as
    /// `started`, one entry per pid of `tree`): NVML's listing of their pid is stale,
    /// and is charged to none of them. A start known to the clock tick (10 ms) counts
    /// as before `now` when it falls in the same tick.
    pub fn exclude_later(&mut self, tree: &[u32], started: &[Option<f64>], now: Option<f64>) {
        let Some(now) = now else {
            return;
        };
        let tick = crate::sys::start_tick_seconds();
        for (pid, started) in tree.iter().zip(started) {
            if let (Some(member), Some(started)) = (self.members.get_mut(pid), started) {
                member.late = *started > now + tick;
            }
        }
    }

    /// Matches one device's compute and graphics listings. A tree process listed twice
    /// with the same MIG instance (on both lists) counts once, with its known figure;
    /// listings on different instances add up.
    pub fn device(&mut self, lists: &[&[ProcessInfo]]) {
        self.pass += 1;
        self.hits.clear();
        for process in lists.iter().flat_map(|list| list.iter()) {
            if let Some(member) = self.members.get_mut(&process.pid) {
                member.listed_at = self.pass;
                self.hits.push(hit(process.pid, process));
            }
        }
        for process in lists.iter().flat_map(|list| list.iter()) {
            if self.members.contains_key(&process.pid) {
                continue;
            }
            match self.inner.get(&process.pid) {
                Some(&Owner::One(owner)) if self.members[&owner].listed_at != self.pass => {
                    self.hits.push(hit(owner, process));
                }
                Some(&Owner::Many) => self.tally.ambiguous += 1,
                _ => {}
            }
        }
        // Known figures sort after `None`, so the last of a run of equal keys is the
        // largest known one.
        self.hits.sort_unstable();
        let mut index = 0;
        while index < self.hits.len() {
            let first = self.hits[index];
            let mut last = first;
            while index + 1 < self.hits.len() && same_listing(&self.hits[index + 1], &first) {
                index += 1;
                last = self.hits[index];
            }
            index += 1;
            let Some(member) = self.members.get_mut(&last.pid) else {
                continue;
            };
            if member.late {
                continue;
            }
            member.listed = true;
            match last.bytes {
                Some(bytes) => {
                    member.bytes = member.bytes.saturating_add(bytes);
                    member.known = true;
                    self.tally.known_bytes = self.tally.known_bytes.saturating_add(bytes);
                    self.tally.known += 1;
                }
                None => self.tally.unknown += 1,
            }
        }
    }

    /// The sums of this reading so far.
    pub fn tally(&self) -> Tally {
        self.tally
    }

    /// Writes the tree's processes that some device listed, in `tree`'s order, to `out`.
    pub fn processes(&self, tree: &[u32], out: &mut Vec<ProcessGpu>) {
        out.clear();
        for &pid in tree {
            if let Some(member) = self.members.get(&pid) {
                if member.listed && !out.iter().any(|p| p.pid == pid) {
                    out.push(ProcessGpu {
                        pid,
                        bytes: member.known.then_some(member.bytes),
                    });
                }
            }
        }
    }

    /// How many pids the matcher keeps `NSpid` for.
    #[cfg(test)]
    pub fn cached(&self) -> usize {
        self.members.len()
    }
}

fn hit(pid: u32, process: &ProcessInfo) -> Hit {
    Hit {
        pid,
        gpu_instance: process.gpu_instance_id,
        compute_instance: process.compute_instance_id,
        bytes: match process.used_gpu_memory {
            UsedGpuMemory::Used(bytes) => Some(bytes),
            UsedGpuMemory::Unavailable => None,
        },
    }
}

fn same_listing(a: &Hit, b: &Hit) -> bool {
    (a.pid, a.gpu_instance, a.compute_instance) == (b.pid, b.gpu_instance, b.compute_instance)
}

/// The text of a process's `/proc/PID/status`.
pub(super) trait StatusSource {
    /// Appends the status text of `pid` to `buf`; `path` is scratch space for its path.
    fn read_status(&mut self, pid: u32, buf: &mut Vec<u8>, path: &mut String) -> io::Result<()>;
}

/// This procfs, through the platform (`sys`).
pub(super) struct Procfs;

impl StatusSource for Procfs {
    fn read_status(&mut self, pid: u32, buf: &mut Vec<u8>, path: &mut String) -> io::Result<()> {
        crate::sys::process_status(pid, buf, path)
    }
}

/// The `NSpid:` entries of a status text other than `pid` itself; none where the line is
/// missing (kernels before 4.1) or lists only `pid`.
pub(super) fn inner_pids(pid: u32, status: &[u8]) -> Box<[u32]> {
    let Some(line) = status
        .split(|&b| b == b'\n')
        .find_map(|line| line.strip_prefix(b"NSpid:"))
    else {
        return Box::default();
    };
    let entries = line
        .split(|b| b.is_ascii_whitespace())
        .filter_map(|field| std::str::from_utf8(field).ok()?.parse::<u32>().ok());
    // The first entry is this procfs's pid, normally `pid` itself.
    let inner: Vec<u32> = entries.skip(1).filter(|&entry| entry != pid).collect();
    inner.into_boxed_slice()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Status texts by pid; a pid without one is gone.
    struct Fixture(Vec<(u32, String)>);

    impl StatusSource for Fixture {
        fn read_status(&mut self, pid: u32, buf: &mut Vec<u8>, _: &mut String) -> io::Result<()> {
            let (_, text) = self
                .0
                .iter()
                .find(|(p, _)| *p == pid)
                .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
            buf.extend_from_slice(text.as_bytes());
            Ok(())
        }
    }

    fn status(nspid: &[u32]) -> String {
        let entries: Vec<String> = nspid.iter().map(u32::to_string).collect();
        format!(
            "Name:\tworker\nTgid:\t{0}\nPid:\t{0}\nNSpid:\t{1}\nVmRSS:\t100 kB\n",
            nspid[0],
            entries.join("\t")
        )
    }

    fn listing(pid: u32, bytes: Option<u64>) -> ProcessInfo {
        ProcessInfo {
            pid,
            used_gpu_memory: bytes.map_or(UsedGpuMemory::Unavailable, UsedGpuMemory::Used),
            gpu_instance_id: None,
            compute_instance_id: None,
        }
    }

    fn read(
        matcher: &mut Matcher,
        tree: &[u32],
        fixture: &mut Fixture,
        lists: &[&[ProcessInfo]],
    ) -> (Tally, Vec<ProcessGpu>) {
        matcher.start(tree, fixture);
        matcher.device(lists);
        let mut processes = Vec::new();
        matcher.processes(tree, &mut processes);
        (matcher.tally(), processes)
    }

    #[test]
    fn nspid_lists_the_pids_of_nested_namespaces() {
        assert_eq!(&*inner_pids(4000, status(&[4000, 7]).as_bytes()), &[7]);
        assert_eq!(
            &*inner_pids(4000, status(&[4000, 310, 1]).as_bytes()),
            &[310, 1]
        );
        assert!(inner_pids(4000, status(&[4000]).as_bytes()).is_empty());
        // Before Linux 4.1 there is no NSpid line.
        assert!(inner_pids(4000, b"Name:\tx\nPid:\t4000\n").is_empty());
        // A field that is not a number is left out, not a failure.
        assert_eq!(&*inner_pids(4000, b"NSpid:\t4000\tx\t9\n"), &[9]);
    }

    #[test]
    fn this_process_status_has_its_own_pid_first() {
        let mut buf = Vec::new();
        let pid = std::process::id();
        Procfs
            .read_status(pid, &mut buf, &mut String::new())
            .unwrap();
        let text = String::from_utf8(buf).unwrap();
        let line = text.lines().find(|l| l.starts_with("NSpid:")).unwrap();
        let first: u32 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        assert_eq!(first, pid, "{line}");
    }

    #[test]
    fn a_pid_that_started_after_the_reading_is_not_charged() {
        // NVML lists pid 4000 (8 GiB) in a reading that began at 100.0 s since boot; the
        // tree process that has pid 4000 now started at 100.5 s: the listing is stale,
        // an earlier process's. Its sibling, started before, is charged.
        let mut fixture = Fixture(vec![(4000, status(&[4000])), (4001, status(&[4001]))]);
        let mut matcher = Matcher::default();
        let compute = [listing(4000, Some(8 << 30)), listing(4001, Some(1 << 20))];
        let tree = [4000, 4001];
        matcher.start(&tree, &mut fixture);
        matcher.exclude_later(&tree, &[Some(100.5), Some(99.0)], Some(100.0));
        matcher.device(&[&compute]);
        let mut processes = Vec::new();
        matcher.processes(&tree, &mut processes);
        assert_eq!(
            processes,
            vec![ProcessGpu {
                pid: 4001,
                bytes: Some(1 << 20)
            }]
        );
        assert_eq!(matcher.tally().known_bytes, 1 << 20);
        // Within the clock tick of the start times (10 ms), a start counts as before.
        matcher.start(&tree, &mut fixture);
        matcher.exclude_later(&tree, &[Some(100.005), Some(99.0)], Some(100.0));
        matcher.device(&[&compute]);
        assert_eq!(matcher.tally().known_bytes, (8 << 30) + (1 << 20));
    }

    #[test]
    fn an_inner_pid_is_matched_to_its_tree_process() {
        let mut fixture = Fixture(vec![(100, status(&[100])), (4000, status(&[4000, 7]))]);
        let mut matcher = Matcher::default();
        let compute = [listing(7, Some(5 << 20)), listing(9999, Some(1 << 30))];
        let (tally, processes) = read(&mut matcher, &[100, 4000], &mut fixture, &[&compute]);
        assert_eq!(
            processes,
            vec![ProcessGpu {
                pid: 4000,
                bytes: Some(5 << 20)
            }]
        );
        assert_eq!(
            (tally.known_bytes, tally.known, tally.ambiguous),
            (5 << 20, 1, 0)
        );
    }

    #[test]
    fn an_inner_pid_beside_its_process_own_pid_is_another_process() {
        // The device lists 4000 itself: NVML speaks this namespace, so 7 is this
        // namespace's pid 7, not the tree process whose inner pid is 7.
        let mut fixture = Fixture(vec![(4000, status(&[4000, 7]))]);
        let mut matcher = Matcher::default();
        let compute = [listing(4000, Some(3 << 20)), listing(7, Some(1 << 30))];
        let (tally, processes) = read(&mut matcher, &[4000], &mut fixture, &[&compute]);
        assert_eq!(
            processes,
            vec![ProcessGpu {
                pid: 4000,
                bytes: Some(3 << 20)
            }]
        );
        assert_eq!(tally.known_bytes, 3 << 20);
    }

    #[test]
    fn a_tree_pid_wins_over_an_inner_pid_of_the_same_number() {
        // Tree process 7 (this namespace) and tree process 4000 (pid 7 inside its own).
        let mut fixture = Fixture(vec![(7, status(&[7])), (4000, status(&[4000, 7]))]);
        let mut matcher = Matcher::default();
        let compute = [listing(7, Some(2 << 20))];
        let (tally, processes) = read(&mut matcher, &[7, 4000], &mut fixture, &[&compute]);
        assert_eq!(
            processes,
            vec![ProcessGpu {
                pid: 7,
                bytes: Some(2 << 20)
            }]
        );
        assert_eq!((tally.known, tally.ambiguous), (1, 0));
    }

    #[test]
    fn an_inner_pid_of_two_tree_processes_counts_for_neither() {
        let mut fixture = Fixture(vec![
            (4000, status(&[4000, 7])),
            (4001, status(&[4001, 7])),
            (4002, status(&[4002, 8])),
        ]);
        let mut matcher = Matcher::default();
        let compute = [listing(7, Some(2 << 20)), listing(8, Some(1 << 20))];
        let tree = [4000, 4001, 4002];
        let (tally, processes) = read(&mut matcher, &tree, &mut fixture, &[&compute]);
        assert_eq!(
            processes,
            vec![ProcessGpu {
                pid: 4002,
                bytes: Some(1 << 20)
            }]
        );
        assert_eq!((tally.known_bytes, tally.ambiguous), (1 << 20, 1));
        // 4001 leaves the tree: 7 is 4000's alone again.
        let (tally, processes) = read(&mut matcher, &[4000, 4002], &mut fixture, &[&compute]);
        assert_eq!(processes.len(), 2);
        assert_eq!((tally.known_bytes, tally.ambiguous), (3 << 20, 0));
    }

    #[test]
    fn a_process_on_both_lists_counts_once_and_mig_instances_add_up() {
        let mut fixture = Fixture(vec![(100, status(&[100]))]);
        let mut matcher = Matcher::default();
        let on = |gi, bytes| ProcessInfo {
            gpu_instance_id: Some(gi),
            compute_instance_id: Some(0),
            ..listing(100, bytes)
        };
        let compute = [on(1, Some(4 << 20)), on(2, Some(6 << 20))];
        let graphics = [on(1, Some(4 << 20)), on(2, None)];
        let (tally, processes) = read(&mut matcher, &[100], &mut fixture, &[&compute, &graphics]);
        assert_eq!(processes[0].bytes, Some(10 << 20));
        assert_eq!((tally.known, tally.unknown), (2, 0));
    }

    #[test]
    fn nspid_is_read_once_per_pid_and_dropped_when_it_leaves() {
        struct Counting(u32);
        impl StatusSource for Counting {
            fn read_status(
                &mut self,
                pid: u32,
                buf: &mut Vec<u8>,
                _: &mut String,
            ) -> io::Result<()> {
                self.0 += 1;
                buf.extend_from_slice(status(&[pid, pid % 50]).as_bytes());
                Ok(())
            }
        }
        let mut reads = Counting(0);
        let mut matcher = Matcher::default();
        let tree: Vec<u32> = (1000..1010).collect();
        for _ in 0..5 {
            matcher.start(&tree, &mut reads);
        }
        assert_eq!((reads.0, matcher.cached()), (10, 10));
        matcher.start(&tree[..4], &mut reads);
        assert_eq!((reads.0, matcher.cached()), (10, 4));
        matcher.start(&tree, &mut reads);
        assert_eq!((reads.0, matcher.cached()), (16, 10));
    }
}
