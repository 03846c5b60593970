//! The Linux reader: `/proc` directly. Descendants come from
//! `/proc/PID/task/TID/children` (a `/proc/*/stat` parent scan where the kernel lacks
//! those files), RSS from `statm`, USS and PSS from `smaps_rollup`.

use super::{TreeReader, TreeReading};
use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::fs::{self, File};
use std::io;
use std::os::unix::fs::FileExt;

/// Reads a whole file at offset 0 into `buf` with `pread`, so an open `/proc` file can
/// be read again and again without reopening it.
fn pread_all(file: &File, buf: &mut Vec<u8>) -> io::Result<()> {
    buf.clear();
    let mut offset = 0u64;
    loop {
        if buf.capacity() - buf.len() < 512 {
            buf.reserve(4096);
        }
        let len = buf.len();
        let spare = buf.capacity() - len;
        buf.resize(len + spare, 0);
        let read = file.read_at(&mut buf[len..], offset);
        match read {
            Ok(0) => {
                buf.truncate(len);
                return Ok(());
            }
            Ok(n) => {
                buf.truncate(len + n);
                offset += n as u64;
            }
            Err(e) => {
                buf.truncate(len);
                return Err(e);
            }
        }
    }
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if size > 0 {
        size as u64
    } else {
        4096
    }
}

/// The resident pages field (second) of a `statm` line.
fn parse_statm_resident(text: &[u8]) -> Option<u64> {
    let mut fields = text.split(|b| *b == b' ');
    fields.next()?;
    parse_u64(fields.next()?)
}

fn parse_u64(digits: &[u8]) -> Option<u64> {
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

/// Pids listed in a `children` file: space-separated decimal numbers.
fn parse_pid_list(text: &[u8], into: &mut Vec<u32>) {
    for field in text.split(|b| b.is_ascii_whitespace()) {
        if let Some(pid) = parse_u64(field).and_then(|p| u32::try_from(p).ok()) {
            into.push(pid);
        }
    }
}

/// The parent pid in a `/proc/PID/stat` line; the command name may hold spaces and
/// parentheses, so fields are counted from the last `)`.
fn parse_stat_ppid(text: &[u8]) -> Option<u32> {
    let close = text.iter().rposition(|b| *b == b')')?;
    let mut fields = text[close + 1..]
        .split(|b| *b == b' ')
        .filter(|f| !f.is_empty());
    fields.next()?; // state
    parse_u64(fields.next()?).and_then(|p| u32::try_from(p).ok())
}

/// `(uss, pss)` in bytes from `smaps_rollup` text (values there are in kB).
fn parse_smaps_rollup(text: &[u8]) -> (Option<u64>, Option<u64>) {
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
    (seen_private.then_some(private), pss)
}

fn is_gone(error: &io::Error) -> bool {
    matches!(error.raw_os_error(), Some(libc::ESRCH) | Some(libc::ENOENT))
}

/// Reads a tree from `/proc`, keeping each process's `statm` and each thread's
/// `children` file open between samples so that a sample is mostly `pread` calls.
pub(crate) struct ProcReader {
    detailed: bool,
    page_size: u64,
    statm: HashMap<u32, File>,
    children: HashMap<(u32, u32), File>,
    use_children_files: bool,
    buf: Vec<u8>,
    pids: Vec<u32>,
    tids: Vec<u32>,
}

impl ProcReader {
    pub(crate) fn new(detailed: bool) -> ProcReader {
        ProcReader {
            detailed,
            page_size: page_size(),
            statm: HashMap::new(),
            children: HashMap::new(),
            use_children_files: true,
            buf: Vec::with_capacity(4096),
            pids: Vec::new(),
            tids: Vec::new(),
        }
    }

    /// Forces the `/proc/*/stat` parent scan, as on kernels without `children` files.
    #[cfg(test)]
    pub(crate) fn with_stat_scan(mut self) -> ProcReader {
        self.use_children_files = false;
        self
    }

    fn list_tasks(&mut self, pid: u32) -> io::Result<()> {
        self.tids.clear();
        for entry in fs::read_dir(format!("/proc/{pid}/task"))? {
            let name = entry?.file_name();
            if let Some(tid) = name.to_str().and_then(|s| s.parse().ok()) {
                self.tids.push(tid);
            }
        }
        Ok(())
    }

    /// Fills `self.pids` with `root` and its descendants, root first.
    /// Returns `Ok(false)` when the kernel has no `children` files.
    fn walk_children(&mut self, root: u32) -> io::Result<bool> {
        self.pids.clear();
        self.pids.push(root);
        let mut index = 0;
        while index < self.pids.len() {
            let pid = self.pids[index];
            index += 1;
            if let Err(e) = self.list_tasks(pid) {
                if pid == root {
                    return Err(e);
                }
                continue; // exited since its parent listed it
            }
            for t in 0..self.tids.len() {
                let tid = self.tids[t];
                let file = match self.children.entry((pid, tid)) {
                    Entry::Occupied(o) => o.into_mut(),
                    Entry::Vacant(v) => {
                        match File::open(format!("/proc/{pid}/task/{tid}/children")) {
                            Ok(file) => v.insert(file),
                            Err(e) if e.kind() == io::ErrorKind::NotFound && pid == root => {
                                // The task dir exists but the file does not: no CONFIG_PROC_CHILDREN.
                                if fs::metadata(format!("/proc/{pid}/task/{tid}")).is_ok() {
                                    return Ok(false);
                                }
                                continue;
                            }
                            Err(_) => continue,
                        }
                    }
                };
                match pread_all(file, &mut self.buf) {
                    // Each child is listed by the one thread that started it: no duplicates.
                    Ok(()) => parse_pid_list(&self.buf, &mut self.pids),
                    Err(_) => {
                        self.children.remove(&(pid, tid));
                    }
                }
            }
        }
        Ok(true)
    }

    /// Fills `self.pids` from a scan of every `/proc/*/stat` parent field.
    fn scan_stat(&mut self, root: u32) -> io::Result<()> {
        let mut kids: HashMap<u32, Vec<u32>> = HashMap::new();
        for entry in fs::read_dir("/proc")? {
            let Ok(entry) = entry else { continue };
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            let Ok(text) = fs::read(format!("/proc/{pid}/stat")) else {
                continue;
            };
            if let Some(ppid) = parse_stat_ppid(&text) {
                kids.entry(ppid).or_default().push(pid);
            }
        }
        fs::metadata(format!("/proc/{root}"))?;
        self.pids.clear();
        self.pids.push(root);
        let mut index = 0;
        while index < self.pids.len() {
            if let Some(children) = kids.remove(&self.pids[index]) {
                self.pids.extend(children);
            }
            index += 1;
        }
        Ok(())
    }

    fn rss_of(&mut self, pid: u32) -> Option<u64> {
        let file = match self.statm.entry(pid) {
            Entry::Occupied(o) => o.into_mut(),
            Entry::Vacant(v) => v.insert(File::open(format!("/proc/{pid}/statm")).ok()?),
        };
        match pread_all(file, &mut self.buf) {
            Ok(()) if !self.buf.is_empty() => {
                parse_statm_resident(&self.buf).map(|pages| pages * self.page_size)
            }
            _ => {
                self.statm.remove(&pid);
                None
            }
        }
    }
}

impl TreeReader for ProcReader {
    fn name(&self) -> &'static str {
        "linux-proc"
    }

    fn read_tree(&mut self, root: u32) -> io::Result<TreeReading> {
        if self.use_children_files && !self.walk_children(root)? {
            self.use_children_files = false;
            self.children.clear();
        }
        if !self.use_children_files {
            self.scan_stat(root)?;
        }
        let pids = std::mem::take(&mut self.pids);
        let mut reading = TreeReading {
            process_count: pids.len() as u32,
            ..TreeReading::default()
        };
        let (mut tree, mut children, mut uss, mut pss) = (0u64, 0u64, None::<u64>, None::<u64>);
        for (i, &pid) in pids.iter().enumerate() {
            let Some(rss) = self.rss_of(pid) else {
                if i == 0 {
                    self.pids = pids;
                    return Err(io::Error::new(
                        io::ErrorKind::NotFound,
                        format!("cannot read /proc/{root}/statm"),
                    ));
                }
                continue;
            };
            reading.rss_processes += 1;
            tree += rss;
            if i == 0 {
                reading.parent_rss = Some(rss);
            } else {
                children += rss;
            }
            if self.detailed {
                match fs::read(format!("/proc/{pid}/smaps_rollup")) {
                    Ok(text) => {
                        let (u, p) = parse_smaps_rollup(&text);
                        uss = u.map(|u| uss.unwrap_or(0) + u).or(uss);
                        pss = p.map(|p| pss.unwrap_or(0) + p).or(pss);
                    }
                    Err(e) if is_gone(&e) => {}
                    Err(_) => {}
                }
            }
        }
        reading.tree_rss = Some(tree);
        reading.children_rss = Some(children);
        reading.tree_uss = uss;
        reading.tree_pss = pss;
        reading.rss_complete = reading.rss_processes == reading.process_count;
        // Forget files of processes that left the tree.
        let alive: HashSet<u32> = pids.iter().copied().collect();
        if self.statm.len() > alive.len() {
            self.statm.retain(|pid, _| alive.contains(pid));
        }
        if self.children.len() > 4 * alive.len() + 64 {
            self.children.retain(|(pid, _), _| alive.contains(pid));
        }
        self.pids = pids;
        Ok(reading)
    }
}

/// `/proc/self/statm`, kept open: one `pread` per stage-boundary reading.
pub(crate) struct SelfStatm {
    file: File,
    page_size: u64,
    buf: Vec<u8>,
}

impl SelfStatm {
    pub(crate) fn open() -> io::Result<SelfStatm> {
        Ok(SelfStatm {
            file: File::open("/proc/self/statm")?,
            page_size: page_size(),
            buf: Vec::with_capacity(128),
        })
    }

    pub(crate) fn read(&mut self) -> io::Result<u64> {
        pread_all(&self.file, &mut self.buf)?;
        parse_statm_resident(&self.buf)
            .map(|pages| pages * self.page_size)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "unreadable statm"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_statm() {
        assert_eq!(
            parse_statm_resident(b"1251 1020 783 193 0 270 0\n"),
            Some(1020)
        );
        assert_eq!(parse_statm_resident(b"garbage"), None);
    }

    #[test]
    fn parses_stat_ppid_with_awkward_names() {
        assert_eq!(parse_stat_ppid(b"42 (a) b (c)) S 7 42 42 0"), Some(7));
        assert_eq!(parse_stat_ppid(b"1 (init) S 0 1 1"), Some(0));
    }

    #[test]
    fn parses_smaps_rollup() {
        let text = b"00400000-ffffffffff601000 ---p 00000000 00:00 0 [rollup]\n\
            Rss:                1024 kB\nPss:                 600 kB\n\
            Private_Clean:       100 kB\nPrivate_Dirty:       400 kB\n";
        assert_eq!(
            parse_smaps_rollup(text),
            (Some(500 * 1024), Some(600 * 1024))
        );
    }

    #[test]
    fn parses_pid_lists() {
        let mut pids = Vec::new();
        parse_pid_list(b"12 345 6789 \n", &mut pids);
        assert_eq!(pids, vec![12, 345, 6789]);
    }

    #[test]
    fn self_statm_matches_a_fresh_read() {
        let mut reader = SelfStatm::open().unwrap();
        let rss = reader.read().unwrap();
        assert!(rss > 1 << 20, "a test binary holds more than 1 MiB: {rss}");
    }

    fn spawn_sleepers(n: usize) -> Vec<std::process::Child> {
        (0..n)
            .map(|_| {
                std::process::Command::new("sleep")
                    .arg("30")
                    .spawn()
                    .unwrap()
            })
            .collect()
    }

    #[test]
    fn children_walk_and_stat_scan_find_the_same_tree() {
        let mut kids = spawn_sleepers(3);
        let me = std::process::id();
        let mut walk = ProcReader::new(false);
        let mut scan = ProcReader::new(false).with_stat_scan();
        let a = walk.read_tree(me).unwrap();
        let b = scan.read_tree(me).unwrap();
        // Other tests of this binary may run their own children; ours are among them.
        assert!(a.process_count >= 4, "{a:?}");
        let mut found_walk = walk.pids.clone();
        let mut found_scan = scan.pids.clone();
        found_walk.sort_unstable();
        found_scan.sort_unstable();
        for kid in &kids {
            assert!(found_walk.contains(&kid.id()));
            assert!(found_scan.contains(&kid.id()));
        }
        assert!(b.rss_complete && a.rss_complete);
        for kid in &mut kids {
            kid.kill().unwrap();
            kid.wait().unwrap();
        }
    }

    #[test]
    fn detailed_reading_has_uss_and_pss() {
        let mut reader = ProcReader::new(true);
        let reading = reader.read_tree(std::process::id()).unwrap();
        let (uss, pss, rss) = (
            reading.tree_uss.unwrap(),
            reading.tree_pss.unwrap(),
            reading.tree_rss.unwrap(),
        );
        assert!(
            uss > 0 && uss <= pss && pss <= rss,
            "uss {uss} pss {pss} rss {rss}"
        );
    }

    #[test]
    fn a_missing_root_is_an_error() {
        let mut reader = ProcReader::new(false);
        assert!(reader.read_tree(u32::MAX - 1).is_err());
    }
}
