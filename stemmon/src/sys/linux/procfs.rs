//! `/proc` text, read and parsed without allocating: one `pread` per file where the
//! file allows it, fixed buffers, paths built on the stack.
//!
//! A `/proc` file regenerates its whole text at every read, from offset 0 or not, so a
//! second `pread` to find the end would cost as much as the first: a read that leaves
//! room in the buffer (a whole-text file) or in the kernel's page (a record-by-record
//! file) already holds everything.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Write as _};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, OpenOptionsExt as _};
use std::path::Path;

/// A `children` or `cgroup.procs` record is at most this long (`4194304 ` with
/// `pid_max` at its largest, rounded up).
const MAX_RECORD: usize = 24;

/// A reusable read buffer: `data` keeps its length, `len` says how much of it the last
/// read filled, so that reading never resizes (nor zeroes) it in the steady state.
#[derive(Debug)]
pub(crate) struct Buf {
    data: Vec<u8>,
    len: usize,
}

impl Buf {
    /// A buffer of `size` bytes.
    pub(crate) fn new(size: usize) -> Buf {
        Buf {
            data: vec![0; size.max(64)],
            len: 0,
        }
    }

    /// What the last read filled.
    pub(crate) fn text(&self) -> &[u8] {
        &self.data[..self.len]
    }

    /// Reads a file whose text the kernel makes in one piece (`status`, `statm`,
    /// `smaps_rollup`, a cgroup value): one `pread`, or more only when the text is
    /// longer than the buffer, which then doubles for good.
    pub(crate) fn read_whole(&mut self, file: &File) -> io::Result<&[u8]> {
        loop {
            let n = file.read_at(&mut self.data, 0)?;
            if n < self.data.len() {
                self.len = n;
                return Ok(self.text());
            }
            let grown = self.data.len() * 2;
            self.data.resize(grown, 0);
        }
    }

    /// Reads at most `self`'s size of a whole-text file: one `pread`, no growth. For
    /// `status`, whose wanted lines come first: [`parse_status`] says when they did
    /// not fit.
    pub(crate) fn read_prefix(&mut self, file: &File) -> io::Result<&[u8]> {
        self.len = file.read_at(&mut self.data, 0)?;
        Ok(self.text())
    }

    /// Whether the last read filled the whole buffer (a prefix may be cut).
    pub(crate) fn is_full(&self) -> bool {
        self.len == self.data.len()
    }

    /// Doubles the buffer (a `status` longer than it, with a huge `Groups:` line).
    pub(crate) fn grow(&mut self) {
        let grown = self.data.len() * 2;
        self.data.resize(grown, 0);
    }

    /// Reads a file the kernel makes record by record, at most a page per read
    /// (`children`, `cgroup.procs`): one `pread` unless the listing is longer than a
    /// page. `page` is the kernel's page size.
    pub(crate) fn read_records(&mut self, file: &File, page: usize) -> io::Result<&[u8]> {
        self.len = 0;
        loop {
            if self.data.len() - self.len < page {
                let grown = self.data.len() + page;
                self.data.resize(grown, 0);
            }
            let n = file.read_at(&mut self.data[self.len..], self.len as u64)?;
            self.len += n;
            // A read stops short of the page only at the end of the listing.
            if n == 0 || n + MAX_RECORD < page {
                return Ok(self.text());
            }
        }
    }
}

/// A `/proc` path built on the stack: `/proc/PID/LEAF` or `/proc/PID/task/TID/LEAF`.
/// Opening it allocates nothing either (std passes short paths on the stack).
pub(crate) struct ProcPath {
    bytes: [u8; 64],
    len: usize,
}

impl ProcPath {
    /// `/proc/{pid}/{leaf}`.
    pub(crate) fn of(pid: u32, leaf: &str) -> ProcPath {
        ProcPath::build(format_args!("/proc/{pid}/{leaf}"))
    }

    /// `/proc/{pid}/task/{tid}/{leaf}`.
    pub(crate) fn of_task(pid: u32, tid: u32, leaf: &str) -> ProcPath {
        ProcPath::build(format_args!("/proc/{pid}/task/{tid}/{leaf}"))
    }

    fn build(args: std::fmt::Arguments<'_>) -> ProcPath {
        let mut bytes = [0u8; 64];
        let mut cursor = &mut bytes[..];
        // The longest path (two ten-digit ids and `smaps_rollup`) is 46 bytes.
        let fitted = cursor.write_fmt(args).is_ok();
        debug_assert!(fitted, "a /proc path longer than 64 bytes");
        let len = 64 - cursor.len();
        ProcPath { bytes, len }
    }

    pub(crate) fn as_path(&self) -> &Path {
        Path::new(OsStr::from_bytes(&self.bytes[..self.len]))
    }
}

impl std::fmt::Display for ProcPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.as_path().display().fmt(f)
    }
}

/// The kernel's page size.
pub(crate) fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions; it reads a constant of the system.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(size).ok().filter(|s| *s > 0).unwrap_or(4096)
}

/// Whether `error` says the process or thread is gone (exited, reaped) rather than that
/// it could not be read.
pub(crate) fn is_gone(error: &io::Error) -> bool {
    matches!(error.raw_os_error(), Some(libc::ESRCH) | Some(libc::ENOENT))
}

pub(crate) fn parse_u64(digits: &[u8]) -> Option<u64> {
    let digits = digits.trim_ascii();
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |acc, b| {
        b.is_ascii_digit()
            .then(|| acc.checked_mul(10)?.checked_add(u64::from(b - b'0')))
            .flatten()
    })
}

/// The resident pages field (second) of a `statm` line.
pub(crate) fn parse_statm_resident(text: &[u8]) -> Option<u64> {
    let mut fields = text.split(|b| *b == b' ');
    fields.next()?;
    parse_u64(fields.next()?)
}

/// Pids listed in a `children` file (space-separated) or `cgroup.procs` (one a line),
/// each given to `each`.
pub(crate) fn parse_pid_list(text: &[u8], mut each: impl FnMut(u32)) {
    for field in text.split(|b| b.is_ascii_whitespace()) {
        if let Some(pid) = parse_u64(field).and_then(|p| u32::try_from(p).ok()) {
            each(pid);
        }
    }
}

/// The parent pid in a `/proc/PID/stat` line; the command name may hold spaces and
/// parentheses, so fields are counted from the last `)`.
pub(crate) fn parse_stat_ppid(text: &[u8]) -> Option<u32> {
    let close = text.iter().rposition(|b| *b == b')')?;
    let mut fields = text[close + 1..]
        .split(|b| *b == b' ')
        .filter(|f| !f.is_empty());
    fields.next()?; // state
    parse_u64(fields.next()?).and_then(|p| u32::try_from(p).ok())
}

/// The CPU and fault counters of one `/proc/PID/stat` line (the book's `cpu-io.md`), its own and
/// those of the children it reaped (`cutime`, `cstime`, `cmajflt`), which `RUSAGE_CHILDREN`
/// would give it: a descendant reaped by a live one moves from its own line into its
/// parent's, so the sum over the live tree never counts it twice. The process's own
/// share is kept apart for the report's `processes`, and its start for the stages it
/// overlapped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct StatUsage {
    /// Its parent.
    pub(crate) ppid: u32,
    /// User time, own plus reaped children's, in clock ticks.
    pub(crate) user_ticks: u64,
    /// System time, counted the same way.
    pub(crate) system_ticks: u64,
    /// Major faults, own plus reaped children's.
    pub(crate) major_faults: u64,
    /// User plus system time of the process alone (`utime` + `stime`), in clock ticks.
    pub(crate) own_ticks: u64,
    /// When it started (`starttime`: clock ticks since boot, at its `fork`); `None`
    /// where the line is cut short.
    pub(crate) start_ticks: Option<u64>,
    /// Minor faults of the children it reaped (`cminflt`): it grows whenever the
    /// process reaps one, since every process that ran faulted.
    pub(crate) child_minor_faults: u64,
}

/// The parent, children's minor faults, CPU times, major faults and start of a
/// `/proc/PID/stat` line (fields 4, 11 to 17 and 22, counted from the last `)`, since the command name may hold spaces
/// and parentheses).
pub(crate) fn parse_stat_usage(text: &[u8]) -> Option<StatUsage> {
    let close = text.iter().rposition(|b| *b == b')')?;
    let mut fields = text[close + 1..]
        .split(|b| *b == b' ')
        .filter(|f| !f.is_empty());
    // Field 3 (state) is the first after the name.
    let mut nth = |skip: usize| parse_u64(fields.nth(skip)?);
    let ppid = u32::try_from(nth(1)?).ok()?; // field 4
    let child_minor = nth(6)?; // field 11
    let major = nth(0)?; // field 12
    let child_major = nth(0)?; // 13
    let user = nth(0)?; // 14
    let system = nth(0)?; // 15
    let child_user = nth(0)?; // 16
    let child_system = nth(0)?; // 17
    let start_ticks = nth(4); // 22
    Some(StatUsage {
        ppid,
        user_ticks: user + child_user,
        system_ticks: system + child_system,
        major_faults: major + child_major,
        own_ticks: user + system,
        start_ticks,
        child_minor_faults: child_minor,
    })
}

/// What a `/proc/PID/io` text says the process read and wrote: `read_bytes` (the
/// storage reads the kernel also gives as `ru_inblock`), and the larger of
/// `write_bytes` and `wchar`. `write_bytes` counts pages as they turn dirty, so an
/// overwrite of pages still dirty (a rerun's output, before writeback) counts nothing,
/// and how much depends on writeback's timing; `wchar`, the bytes passed to write
/// calls, counts every byte written (to pipes and sockets too) but misses writes
/// through a mapping, which `write_bytes` has. `cancelled_write_bytes` is not netted
/// out: it counts dirty pages that this process truncated, whoever dirtied them.
pub(crate) fn parse_io(text: &[u8]) -> Option<(u64, u64)> {
    let (mut read, mut write, mut wchar) = (None, None, None);
    for line in text.split(|b| *b == b'\n') {
        let Some(colon) = line.iter().position(|b| *b == b':') else {
            continue;
        };
        let value = parse_u64(&line[colon + 1..]);
        match &line[..colon] {
            b"read_bytes" => read = value,
            b"write_bytes" => write = value,
            b"wchar" => wchar = value,
            _ => {}
        }
    }
    Some((read?, write?.max(wchar.unwrap_or(0))))
}

/// The kernel's clock ticks a second (`USER_HZ`), the unit of `/proc/PID/stat` times.
pub(crate) fn clock_ticks() -> u64 {
    // SAFETY: sysconf has no preconditions; it reads a constant of the system.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(ticks).ok().filter(|t| *t > 0).unwrap_or(100)
}

/// Unique and proportional set sizes, in bytes, of one `smaps_rollup`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Rollup {
    /// The private pages (clean, dirty, hugetlb); `None` when no such line is present.
    pub(crate) uss: Option<u64>,
    /// `Pss`.
    pub(crate) pss: Option<u64>,
}

/// `smaps_rollup` text (values there are in kB).
pub(crate) fn parse_smaps_rollup(text: &[u8]) -> Rollup {
    let (mut private, mut pss, mut seen_private) = (0u64, None, false);
    for line in text.split(|b| *b == b'\n') {
        let Some(colon) = line.iter().position(|b| *b == b':') else {
            continue;
        };
        let (key, rest) = (&line[..colon], &line[colon + 1..]);
        let value = || parse_u64(rest.trim_ascii().strip_suffix(b"kB").unwrap_or(rest));
        match key {
            b"Pss" => pss = value().map(|kb| kb * 1024),
            b"Private_Clean" | b"Private_Dirty" | b"Private_Hugetlb" => {
                if let Some(kb) = value() {
                    private += kb * 1024;
                    seen_private = true;
                }
            }
            _ => {}
        }
    }
    Rollup {
        uss: seen_private.then_some(private),
        pss,
    }
}

/// What one `status` reading found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Status {
    /// `VmRSS`; `None` for a zombie, which holds no memory.
    pub(crate) rss: Option<u64>,
    /// `VmHWM`: the peak since the last reset (or since the process started).
    pub(crate) hwm: Option<u64>,
    /// `Threads:`, the number of threads; `None` where the line was not read.
    pub(crate) threads: Option<u32>,
    /// `VmSize`: its virtual memory.
    pub(crate) size: Option<u64>,
}

/// The `Name:` of a `status` text (its first line): the command's name, as `comm`.
pub(crate) fn status_name(text: &[u8]) -> Option<String> {
    let name = status_name_bytes(text);
    (!name.is_empty()).then(|| String::from_utf8_lossy(name).into_owned())
}

/// The bytes of [`status_name`], empty where there is none.
pub(crate) fn status_name_bytes(text: &[u8]) -> &[u8] {
    text.strip_prefix(b"Name:")
        .map_or(&[][..], |rest| until_newline(rest).trim_ascii())
}

/// `VmHWM`, `VmRSS` and `Threads` from a `status` text (they come in that order, and
/// nothing after `Threads` is needed). Lines are skipped eight bytes at a time, and
/// only those that start with `V` or `T` are looked at: this runs once per process per
/// sample, over a kilobyte of text.
pub(crate) fn parse_status(text: &[u8]) -> Status {
    let kib = |rest: &[u8]| {
        let rest = rest.trim_ascii();
        parse_u64(rest.strip_suffix(b"kB").unwrap_or(rest)).map(|kb| kb * 1024)
    };
    let mut status = Status::default();
    let mut line = text;
    loop {
        match line.first() {
            Some(b'V') => {
                if let Some(rest) = line.strip_prefix(b"VmHWM:") {
                    status.hwm = kib(until_newline(rest));
                } else if let Some(rest) = line.strip_prefix(b"VmSize:") {
                    status.size = kib(until_newline(rest));
                } else if let Some(rest) = line.strip_prefix(b"VmRSS:") {
                    status.rss = kib(until_newline(rest));
                }
            }
            Some(b'T') => {
                if let Some(rest) = line.strip_prefix(b"Threads:") {
                    status.threads =
                        parse_u64(until_newline(rest)).and_then(|n| u32::try_from(n).ok());
                    return status;
                }
            }
            None => return status,
            _ => {}
        }
        match find_newline(line) {
            Some(end) => line = &line[end + 1..],
            None => return status,
        }
    }
}

fn until_newline(text: &[u8]) -> &[u8] {
    &text[..find_newline(text).unwrap_or(text.len())]
}

/// The index of the first `\n` in `text`, found a word at a time.
fn find_newline(text: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    const NEWLINES: u64 = ONES * b'\n' as u64;
    let mut words = text.chunks_exact(8);
    let mut offset = 0;
    for word in &mut words {
        let word = u64::from_le_bytes(word.try_into().expect("eight bytes")) ^ NEWLINES;
        // A zero byte of `word` is a newline; the lowest flagged byte is the first.
        let zeros = word.wrapping_sub(ONES) & !word & HIGHS;
        if zeros != 0 {
            return Some(offset + (zeros.trailing_zeros() / 8) as usize);
        }
        offset += 8;
    }
    words
        .remainder()
        .iter()
        .position(|b| *b == b'\n')
        .map(|at| offset + at)
}

/// Lists the numeric entries of the directory `dir` (`/proc/PID/task`) into `into`
/// with `getdents64` and a buffer on the stack: nothing allocated, and one call for
/// any directory of up to about 150 threads.
pub(crate) fn list_numeric_dir(dir: &Path, into: &mut Vec<u32>) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    into.clear();
    let dir = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY)
        .open(dir)?;
    let mut buf = [0u8; 4096];
    loop {
        // SAFETY: `buf` is valid for writes of its whole length and outlives the call;
        // the descriptor is open (owned by `dir`) for the call's duration.
        let n = unsafe {
            libc::syscall(
                libc::SYS_getdents64,
                dir.as_raw_fd(),
                buf.as_mut_ptr(),
                buf.len(),
            )
        };
        let n = usize::try_from(n).map_err(|_| io::Error::last_os_error())?;
        parse_dirents(&buf[..n], |name| {
            if let Some(id) = parse_u64(name).and_then(|id| u32::try_from(id).ok()) {
                into.push(id);
            }
        });
        // procfs stops filling only when the next entry does not fit: a buffer with
        // room for another entry left means the directory is done.
        if n == 0 || n + 64 <= buf.len() {
            return Ok(());
        }
    }
}

/// The names in a `getdents64` buffer: records of `d_ino` (8 bytes), `d_off` (8),
/// `d_reclen` (2), `d_type` (1), then the NUL-terminated name.
fn parse_dirents(mut records: &[u8], mut each: impl FnMut(&[u8])) {
    while records.len() >= 19 {
        let reclen = usize::from(u16::from_ne_bytes([records[16], records[17]]));
        if reclen < 19 || reclen > records.len() {
            return;
        }
        let name = &records[19..reclen];
        let end = name.iter().position(|b| *b == 0).unwrap_or(name.len());
        each(&name[..end]);
        records = &records[reclen..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_status() {
        let text = b"Name:\tx\nVmPeak:\t  9000 kB\nVmSize:\t  8000 kB\nVmHWM:\t  4096 kB\nVmRSS:\t  1024 kB\nRssAnon:\t 1 kB\nThreads:\t3\nSigQ:\t0/1\n";
        assert_eq!(
            parse_status(text),
            Status {
                rss: Some(1024 * 1024),
                hwm: Some(4096 * 1024),
                threads: Some(3),
                size: Some(8000 * 1024),
            }
        );
        // A zombie has no memory lines at all.
        assert_eq!(
            parse_status(b"Name:\tx\nState:\tZ (zombie)\nThreads:\t1\n"),
            Status {
                threads: Some(1),
                ..Status::default()
            }
        );
    }

    #[test]
    fn a_status_names_its_command_on_its_first_line() {
        assert_eq!(
            status_name(b"Name:\tpython3\nUmask:\t0022\n").as_deref(),
            Some("python3")
        );
        assert_eq!(status_name(b"Name:\t\nState:\tZ\n"), None);
        assert_eq!(status_name(b"Umask:\t0022\n"), None);
        assert_eq!(status_name(b""), None);
    }

    #[test]
    fn finds_newlines_a_word_at_a_time() {
        for len in 0..40 {
            for at in 0..len {
                let mut text = vec![b'x'; len];
                text[at] = b'\n';
                if at + 3 < len {
                    text[at + 3] = b'\n';
                }
                assert_eq!(find_newline(&text), Some(at), "{len} {at}");
            }
            assert_eq!(find_newline(&vec![0x8a; len]), None);
        }
        // A real status, every field the slow way and the fast way.
        let text = std::fs::read("/proc/self/status").unwrap();
        let slow = |key: &str| {
            let line = String::from_utf8_lossy(&text)
                .lines()
                .find(|l| l.starts_with(key))
                .map(str::to_owned)
                .unwrap();
            line.split_whitespace()
                .nth(1)
                .unwrap()
                .parse::<u64>()
                .unwrap()
        };
        let fast = parse_status(&text);
        assert_eq!(fast.hwm, Some(slow("VmHWM:") * 1024));
        assert_eq!(fast.threads, Some(slow("Threads:") as u32));
        assert!(fast.rss.is_some());
    }

    #[test]
    fn parses_stat_ppid_with_awkward_names() {
        assert_eq!(parse_stat_ppid(b"42 (a) b (c)) S 7 42 42 0"), Some(7));
        assert_eq!(parse_stat_ppid(b"1 (init) S 0 1 1"), Some(0));
    }

    #[test]
    fn parses_stat_usage_and_io() {
        let line = b"42 (a b) c)) S 7 42 42 0 -1 4194560 100 5 3 2 150 20 9 1 20 0 1 0 8675";
        assert_eq!(
            parse_stat_usage(line),
            Some(StatUsage {
                ppid: 7,
                user_ticks: 159,
                system_ticks: 21,
                major_faults: 5,
                own_ticks: 170,
                start_ticks: Some(8675),
                child_minor_faults: 5,
            })
        );
        let short = parse_stat_usage(&line[..line.len() - 5]).unwrap();
        assert_eq!(short.start_ticks, None);
        assert_eq!(parse_stat_usage(b"1 (x) S 0"), None);
        let real = std::fs::read("/proc/self/stat").unwrap();
        let usage = parse_stat_usage(&real).expect("this process's stat");
        assert_eq!(usage.ppid, std::os::unix::process::parent_id());
        let io = b"rchar: 10\nwchar: 20\nsyscr: 1\nsyscw: 2\nread_bytes: 4096\nwrite_bytes: 8192\ncancelled_write_bytes: 4096\n";
        // The cancelled bytes are not netted out: the process wrote 8192.
        assert_eq!(parse_io(io), Some((4096, 8192)));
        // Pages overwritten while still dirty: `write_bytes` 0, `wchar` every byte.
        let overwrite = b"rchar: 10\nwchar: 41943040\nread_bytes: 0\nwrite_bytes: 0\n";
        assert_eq!(parse_io(overwrite), Some((0, 40 << 20)));
        assert_eq!(parse_io(b"rchar: 1\n"), None);
    }

    #[test]
    fn parses_smaps_rollup() {
        let text = b"00400000-ffffffffff601000 ---p 00000000 00:00 0 [rollup]\n\
            Rss:                1024 kB\nPss:                 600 kB\n\
            Private_Clean:       100 kB\nPrivate_Dirty:       400 kB\n";
        assert_eq!(
            parse_smaps_rollup(text),
            Rollup {
                uss: Some(500 * 1024),
                pss: Some(600 * 1024)
            }
        );
    }

    #[test]
    fn parses_pid_lists() {
        let mut pids = Vec::new();
        parse_pid_list(b"12 345 6789 \n", |p| pids.push(p));
        assert_eq!(pids, vec![12, 345, 6789]);
        pids.clear();
        parse_pid_list(b"1\n22\n", |p| pids.push(p));
        assert_eq!(pids, vec![1, 22]);
    }

    #[test]
    fn paths_are_built_on_the_stack() {
        assert_eq!(
            ProcPath::of(42, "status").as_path(),
            Path::new("/proc/42/status")
        );
        let longest = ProcPath::of_task(u32::MAX, u32::MAX, "smaps_rollup");
        assert_eq!(
            longest.to_string(),
            "/proc/4294967295/task/4294967295/smaps_rollup"
        );
    }

    #[test]
    fn lists_a_task_directory_as_read_dir_does() {
        let listed_all = std::sync::Arc::new(std::sync::Barrier::new(4));
        let threads: Vec<_> = (0..3)
            .map(|_| {
                let listed_all = std::sync::Arc::clone(&listed_all);
                std::thread::spawn(move || {
                    listed_all.wait();
                })
            })
            .collect();
        let mut listed = Vec::new();
        list_numeric_dir(Path::new("/proc/self/task"), &mut listed).unwrap();
        let mut expected: Vec<u32> = std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect();
        listed_all.wait();
        listed.sort_unstable();
        expected.sort_unstable();
        // Other tests' threads may come and go in between: ours are in both.
        assert!(listed.len() >= 4, "{listed:?}");
        let common = listed.iter().filter(|t| expected.contains(t)).count();
        assert!(common >= 4, "{listed:?} vs {expected:?}");
        for thread in threads {
            thread.join().unwrap();
        }
        assert!(list_numeric_dir(Path::new("/proc/nonexistent"), &mut listed).is_err());
    }

    #[test]
    fn a_whole_text_file_longer_than_the_buffer_is_read_whole() {
        let mut buf = Buf::new(64);
        let file = File::open("/proc/self/status").unwrap();
        let text = buf.read_whole(&file).unwrap().to_vec();
        assert!(text.len() > 64 && text.ends_with(b"\n"));
        assert!(parse_status(&text).rss.is_some());
        // Kept at its new size: the next read is one pread.
        let mut small = Buf::new(64);
        assert!(small.read_prefix(&file).unwrap().len() == 64 && small.is_full());
    }
}
