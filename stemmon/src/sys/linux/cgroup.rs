//! The job's cgroup: what a scheduler (Slurm, Kubernetes) charges and kills on.
//!
//! The cgroup comes from `/proc/PID/cgroup`, its directory from the mount table
//! (`/proc/self/mountinfo`). cgroup v2 gives `memory.current`, `memory.peak`,
//! `memory.max` and `memory.events`; v1 gives `memory.usage_in_bytes`,
//! `memory.max_usage_in_bytes`, `memory.limit_in_bytes` and `memory.oom_control`. Both
//! give `cgroup.procs`. An unlimited limit is `None`. Nothing is ever written: the
//! kernel's peak belongs to the job.

use super::procfs::{page_size, parse_pid_list, parse_u64, Buf};
use crate::report::CgroupReport;
use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The cgroup's anonymous memory and process count are read again once this old:
/// `memory.stat` and `cgroup.procs` cost more than a sample of ten processes' marks, and
/// sampling faster than this finds them moved little. The charge, its peak, the limit
/// and the OOM kills (small files; a kill counts toward the stages open when it is
/// read) are read at every sample.
pub(crate) const SLOW_EVERY: Duration = Duration::from_millis(100);

/// The figures read once every [`SLOW_EVERY`].
#[derive(Clone, Copy, Debug)]
struct Slow {
    at: Instant,
    anon: Option<u64>,
    processes: Option<u32>,
}

/// A v1 limit at or above this is the kernel's "unlimited" (`9223372036854771712`, the
/// largest page-aligned `i64`).
const V1_UNLIMITED: u64 = 1 << 62;

/// Where a process's memory cgroup lives, from its `/proc/PID/cgroup` text and the
/// `mountinfo` text: `(version, directory)` candidates, v2 first.
pub(crate) fn locate(cgroup: &str, mountinfo: &str) -> Vec<(u8, PathBuf)> {
    let mut found = Vec::new();
    for line in cgroup.lines() {
        let mut fields = line.splitn(3, ':');
        let (Some(_id), Some(controllers), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let version = if controllers.is_empty() {
            2
        } else if controllers.split(',').any(|c| c == "memory") {
            1
        } else {
            continue;
        };
        for (root, mount_point) in mounts(mountinfo, version) {
            // The cgroup path is relative to the hierarchy's root; the mount shows `root` at `mount_point`.
            let relative = match path.strip_prefix(root.as_str()) {
                Some(rest) => rest.trim_start_matches('/'),
                None if root == "/" => path.trim_start_matches('/'),
                None => continue,
            };
            found.push((version, Path::new(&mount_point).join(relative)));
            // Inside a cgroup namespace the path may be the host's: the mount itself is the job's.
            found.push((version, PathBuf::from(mount_point)));
        }
    }
    found.sort_by_key(|(version, _)| std::cmp::Reverse(*version));
    found
}

/// `(root, mount point)` of every cgroup mount of `version` (v1: those with the memory
/// controller) in a `mountinfo` text.
fn mounts(mountinfo: &str, version: u8) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let left: Vec<&str> = left.split(' ').collect();
        let right: Vec<&str> = right.split(' ').collect();
        let (Some(root), Some(point), Some(fstype)) = (left.get(3), left.get(4), right.first())
        else {
            continue;
        };
        let wanted = match version {
            2 => *fstype == "cgroup2",
            _ => {
                *fstype == "cgroup"
                    && right
                        .get(2)
                        .is_some_and(|options| options.split(',').any(|o| o == "memory"))
            }
        };
        if wanted {
            out.push((unescape(root), unescape(point)));
        }
    }
    out
}

/// mountinfo escapes space, tab, newline and backslash as octal `\NNN`.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && bytes[i + 1..i + 4]
                .iter()
                .all(|b| (b'0'..=b'7').contains(b))
        {
            out.push(
                (bytes[i + 1] - b'0') * 64 + (bytes[i + 2] - b'0') * 8 + (bytes[i + 3] - b'0'),
            );
            i += 4;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The value of `key` in a `key value` per line file (`memory.events`, `memory.oom_control`).
fn keyed(text: &[u8], key: &[u8]) -> Option<u64> {
    text.split(|b| *b == b'\n').find_map(|line| {
        let rest = line.strip_prefix(key)?.strip_prefix(b" ")?;
        parse_u64(rest)
    })
}

/// A v2 `memory.max`: `max` is unlimited.
fn parse_v2_limit(text: &[u8]) -> Option<u64> {
    match text.trim_ascii() {
        b"max" => None,
        other => parse_u64(other),
    }
}

/// A v1 `memory.limit_in_bytes`: a huge value is unlimited.
fn parse_v1_limit(text: &[u8]) -> Option<u64> {
    parse_u64(text).filter(|limit| *limit < V1_UNLIMITED)
}

/// One cgroup's memory files, kept open and read with one `pread` each at each sample.
pub(crate) struct CgroupReader {
    /// The directory, as the report names it.
    path: String,
    version: u8,
    current: File,
    peak: Option<File>,
    limit: Option<File>,
    events: Option<File>,
    procs: Option<File>,
    /// `memory.stat`: its anonymous memory, apart from the file cache.
    stat: Option<File>,
    buf: Buf,
    page: usize,
    slow: Option<Slow>,
}

impl CgroupReader {
    /// The memory cgroup of process `pid`, or why there is none to read.
    pub(crate) fn of_process(pid: u32) -> io::Result<CgroupReader> {
        let cgroup = fs::read_to_string(format!("/proc/{pid}/cgroup"))?;
        let mountinfo = fs::read_to_string("/proc/self/mountinfo")?;
        locate(&cgroup, &mountinfo)
            .into_iter()
            .find_map(|(version, dir)| CgroupReader::open(&dir, version).ok())
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no readable memory cgroup"))
    }

    /// Opens the memory files of the cgroup directory `dir` of `version` 1 or 2.
    pub(crate) fn open(dir: &Path, version: u8) -> io::Result<CgroupReader> {
        let names = match version {
            2 => [
                "memory.current",
                "memory.peak",
                "memory.max",
                "memory.events",
            ],
            _ => [
                "memory.usage_in_bytes",
                "memory.max_usage_in_bytes",
                "memory.limit_in_bytes",
                "memory.oom_control",
            ],
        };
        let open = |name: &str| File::open(dir.join(name));
        Ok(CgroupReader {
            path: dir.display().to_string(),
            version,
            current: open(names[0])?,
            peak: open(names[1]).ok(),
            limit: open(names[2]).ok(),
            events: open(names[3]).ok(),
            procs: open("cgroup.procs").ok(),
            stat: open("memory.stat").ok(),
            buf: Buf::new(4096),
            page: usize::try_from(page_size()).unwrap_or(4096),
            slow: None,
        })
    }

    /// Reads the cgroup now: one `pread` per file. Fails only when the current charge
    /// cannot be read.
    pub(crate) fn read(&mut self) -> io::Result<CgroupReport> {
        let buf = &mut self.buf;
        let current = parse_u64(buf.read_whole(&self.current)?);
        let mut value = |file: &Option<File>, parse: &dyn Fn(&[u8]) -> Option<u64>| {
            file.as_ref()
                .and_then(|f| buf.read_whole(f).ok().and_then(parse))
        };
        let peak = value(&self.peak, &parse_u64);
        let limit = match self.version {
            2 => value(&self.limit, &parse_v2_limit),
            _ => value(&self.limit, &parse_v1_limit),
        };
        let oom_kills = value(&self.events, &|text| keyed(text, b"oom_kill"));
        let now = Instant::now();
        let slow = match self.slow {
            Some(slow) if now.duration_since(slow.at) < SLOW_EVERY => slow,
            _ => self.read_slow(now),
        };
        let Slow {
            anon, processes, ..
        } = slow;
        Ok({
            let mut built = CgroupReport::default();
            built.path = self.path.clone();
            built.version = self.version;
            built.memory_current_bytes = current;
            built.memory_peak_bytes = peak;
            built.memory_anon_bytes = anon;
            built.memory_limit_bytes = limit;
            built.oom_kills = oom_kills;
            built.processes = processes;
            built
        })
    }

    /// Reads every figure at the next reading (the last sample's).
    pub(crate) fn refresh_all(&mut self) {
        self.slow = None;
    }

    /// Reads the figures kept for [`SLOW_EVERY`], as of `now`.
    fn read_slow(&mut self, now: Instant) -> Slow {
        let buf = &mut self.buf;
        let mut value = |file: &Option<File>, parse: &dyn Fn(&[u8]) -> Option<u64>| {
            file.as_ref()
                .and_then(|f| buf.read_whole(f).ok().and_then(parse))
        };
        // v2 `anon`; v1 `total_rss`, the hierarchy's anonymous memory (`rss` without it).
        let anon = match self.version {
            2 => value(&self.stat, &|text| keyed(text, b"anon")),
            _ => value(&self.stat, &|text| {
                keyed(text, b"total_rss").or_else(|| keyed(text, b"rss"))
            }),
        };
        let processes = self.procs.as_ref().and_then(|file| {
            let text = self.buf.read_records(file, self.page).ok()?;
            let mut count = 0u32;
            parse_pid_list(text, |_| count += 1);
            Some(count)
        });
        let slow = Slow {
            at: now,
            anon,
            processes,
        };
        self.slow = Some(slow);
        slow
    }
}

/// Reads the job's cgroup into `reading`, against its figures at the previous sample
/// (`last`, updated).
pub(crate) fn add_to(
    cgroup: Option<&mut CgroupReader>,
    last: &mut super::ledger::CgroupLast,
    reading: &mut crate::memory::TreeReading,
) {
    let Some(cgroup) = cgroup else {
        return;
    };
    let Ok(now) = cgroup.read() else {
        return;
    };
    let before = *last;
    // The kernel's peak is since the cgroup was made: it speaks for this interval
    // only where it rose in it.
    let risen = now
        .memory_peak_bytes
        .filter(|p| before.peak.is_some_and(|b| *p > b));
    reading.cgroup_peak = now.memory_current_bytes.max(risen);
    reading.cgroup_anon = now.memory_anon_bytes;
    reading.oom_kills = now
        .oom_kills
        .map(|k| k.saturating_sub(before.oom_kills.unwrap_or(k)));
    *last = super::ledger::CgroupLast {
        peak: now.memory_peak_bytes,
        oom_kills: now.oom_kills,
    };
    reading.cgroup = Some(now);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(version: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/cgroup")
            .join(version)
    }

    #[test]
    fn reads_a_v2_directory() {
        let report = CgroupReader::open(&fixture("v2"), 2)
            .unwrap()
            .read()
            .unwrap();
        assert_eq!(report.version, 2);
        assert_eq!(report.memory_current_bytes, Some(734_003_200));
        assert_eq!(report.memory_peak_bytes, Some(1_073_741_824));
        assert_eq!(report.memory_limit_bytes, Some(4_294_967_296));
        assert_eq!(report.oom_kills, Some(2));
        assert_eq!(report.processes, Some(3));
    }

    #[test]
    fn reads_a_v1_directory_with_no_limit() {
        let report = CgroupReader::open(&fixture("v1"), 1)
            .unwrap()
            .read()
            .unwrap();
        assert_eq!(report.version, 1);
        assert_eq!(report.memory_current_bytes, Some(6_320_128));
        assert_eq!(report.memory_peak_bytes, Some(222_502_912));
        assert_eq!(
            report.memory_limit_bytes, None,
            "9223372036854771712 is unlimited"
        );
        assert_eq!(report.oom_kills, Some(1));
        assert_eq!(report.processes, Some(2));
    }

    #[test]
    fn limits_read_as_written() {
        assert_eq!(parse_v2_limit(b"max\n"), None);
        assert_eq!(parse_v2_limit(b"1048576\n"), Some(1 << 20));
        assert_eq!(parse_v1_limit(b"9223372036854771712\n"), None);
        assert_eq!(parse_v1_limit(b"536870912\n"), Some(512 << 20));
        assert_eq!(keyed(b"low 0\noom 3\noom_kill 2\n", b"oom_kill"), Some(2));
        assert_eq!(
            keyed(b"oom_kill_disable 0\nunder_oom 0\n", b"oom_kill"),
            None
        );
    }

    #[test]
    fn a_directory_without_memory_files_is_an_error() {
        assert!(CgroupReader::open(&fixture("v1"), 2).is_err());
        assert!(CgroupReader::open(&fixture("missing"), 1).is_err());
    }

    #[test]
    fn locates_v1_and_v2_cgroups_through_the_mount_table() {
        let cgroup = "4:memory:/process_api/abc\n3:cpuset:/\n0::/user.slice/job\n";
        let mountinfo = "\
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n\
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n\
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
        let found = locate(cgroup, mountinfo);
        assert_eq!(
            found[0],
            (2, PathBuf::from("/sys/fs/cgroup/unified/user.slice/job"))
        );
        assert!(found.contains(&(1, PathBuf::from("/sys/fs/cgroup/memory/process_api/abc"))));
        assert!(!found
            .iter()
            .any(|(_, p)| p.starts_with("/sys/fs/cgroup/cpu")));
        // A bind mount of a sub-hierarchy: the root field is stripped from the path.
        let nested = "50 31 0:32 /kubepods /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n";
        let found = locate("4:memory:/kubepods/pod1\n", nested);
        assert_eq!(found[0], (1, PathBuf::from("/sys/fs/cgroup/memory/pod1")));
        assert_eq!(unescape(r"/a\040b"), "/a b");
    }
}
