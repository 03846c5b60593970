//! The platform reads of the measurements read at samples only (`sources`): how many
//! descriptors a process holds open, and the memory pressure stall time (PSI) of the
//! run's cgroup or of the whole system.

use std::fmt::Write as _;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt as _;
use std::path::PathBuf;

/// How many file descriptors process `pid` holds open; `path` is scratch space for the
/// path of its `fd` directory. A stat of the directory gives the count (Linux 6.2 and
/// later); an older kernel gives 0 there, and the directory is listed.
pub(crate) fn open_fds(pid: u32, path: &mut String) -> io::Result<u64> {
    path.clear();
    let _ = write!(path, "/proc/{pid}/fd");
    let size = std::fs::metadata(path.as_str())?.len();
    if size > 0 {
        return Ok(size);
    }
    let mut count = 0;
    for entry in std::fs::read_dir(path.as_str())? {
        entry?;
        count += 1;
    }
    Ok(count)
}

/// Where the memory pressure is read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PressureSource {
    /// The run's cgroup (v2 `memory.pressure`): its own tasks' stalls.
    Cgroup,
    /// The whole system (`/proc/pressure/memory`): no cgroup of the run has the file.
    System,
}

impl PressureSource {
    /// The report's word: `cgroup` or `system`.
    fn name(self) -> &'static str {
        match self {
            PressureSource::Cgroup => "cgroup",
            PressureSource::System => "system",
        }
    }
}

/// The memory pressure file, kept open and read with one `pread` at each sample.
#[derive(Debug)]
pub(crate) struct MemoryPressure {
    file: File,
    source: PressureSource,
    buf: Vec<u8>,
}

impl MemoryPressure {
    /// The file of this process's v2 cgroup, else the system's, or why neither can be
    /// read (a kernel without PSI).
    pub(crate) fn open() -> io::Result<MemoryPressure> {
        let cgroup = cgroup_dir().and_then(|dir| File::open(dir.join("memory.pressure")).ok());
        let (file, source) = match cgroup {
            Some(file) => (file, PressureSource::Cgroup),
            None => (File::open("/proc/pressure/memory")?, PressureSource::System),
        };
        let mut pressure = MemoryPressure {
            file,
            source,
            buf: vec![0; 256],
        };
        // A file that opens but cannot be read (PSI compiled in but off) is no source.
        pressure.some_micros()?;
        Ok(pressure)
    }

    /// Where it reads from, as the report says: `cgroup` or `system`.
    pub(crate) fn source(&self) -> &'static str {
        self.source.name()
    }

    /// The total time, in microseconds, in which some task stalled on memory.
    pub(crate) fn some_micros(&mut self) -> io::Result<u64> {
        let read = self.file.read_at(&mut self.buf, 0)?;
        parse_some_total(&self.buf[..read])
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no `some ... total=`"))
    }
}

/// This process's cgroup v2 directory, where it has one.
fn cgroup_dir() -> Option<PathBuf> {
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    super::cgroup::locate(&cgroup, &mountinfo)
        .into_iter()
        .find_map(|(version, dir)| (version == 2).then_some(dir))
}

/// The `total=` of the `some` line of a pressure file.
fn parse_some_total(text: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(text).ok()?;
    let line = text.lines().find(|l| l.starts_with("some "))?;
    let total = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("total="))?;
    total.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_some_total_is_read_from_a_pressure_file() {
        let text = b"some avg10=0.00 avg60=0.12 avg300=0.00 total=500200\n\
                     full avg10=0.00 avg60=0.00 avg300=0.00 total=482701\n";
        assert_eq!(parse_some_total(text), Some(500_200));
        assert_eq!(parse_some_total(b"full avg10=0.00 total=5\n"), None);
        assert_eq!(parse_some_total(b"some avg10=0.00 total=x\n"), None);
    }

    #[test]
    fn a_process_holds_the_descriptors_it_opened() {
        let mut path = String::new();
        let before = open_fds(std::process::id(), &mut path).unwrap();
        let files: Vec<File> = (0..20).map(|_| File::open("/dev/null").unwrap()).collect();
        let during = open_fds(std::process::id(), &mut path).unwrap();
        drop(files);
        // Other tests' threads open files too: at least the 20 more.
        assert!(during >= before + 20, "{before} then {during}");
    }

    #[test]
    fn the_memory_pressure_grows_only() {
        // A kernel without PSI has no file: the measurement says so in the report, and
        // this test cannot run (under CI, it fails).
        if !std::path::Path::new("/proc/pressure/memory").exists() {
            return crate::env::cannot_run("the memory pressure", "the kernel has no PSI");
        }
        let mut pressure = MemoryPressure::open().unwrap();
        let first = pressure.some_micros().unwrap();
        let second = pressure.some_micros().unwrap();
        assert!(second >= first);
    }
}
