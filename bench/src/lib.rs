//! Benchmarks of stemmon beside its peers, and the helpers they share.
//!
//! Run everything with `bash bench/run` from the workspace root: it builds the benches in
//! release mode, times each stemmon figure beside its peer in the same run, and prints
//! the budget table of the spec (the book's `cost.md`). The benches live in `benches/`:
//!
//! - `no_monitor`: a `#[monitored]` call with no active monitor, beside the plain fn;
//! - `active_call`: the same call under an active monitor, beside a `tracing`
//!   `#[instrument]` span (registry + a layer) and hotpath's `#[measure]`;
//! - `call_floor`: the call at its floor, in one group run three times by `bench/run`:
//!   an active `#[monitored]` call beside the two clock reads it makes, a `tracing`
//!   span under a counting layer and under `stemmon::TracingLayer`, a fastrace span
//!   and hotpath's `#[measure]`; the table shows each ratio's min and median;
//! - `tree_sample`: one full tree sample of 10 and 100 descendants, beside sysinfo's
//!   all-process refresh, (through `psutil_tree.py`) psutil, and the [`Floor`] of the
//!   same sample;
//! - `footprint`: memory held after 10 million active calls, and the sampler thread's CPU;
//! - `tracing_layer`: a `tracing` span under `stemmon::TracingLayer` with a monitor
//!   running, beside the same span under a registry with a layer counting callbacks.
//! - `heap`: an allocation + free pair through `stemmon::Alloc` (the global allocator
//!   there) beside System alone and `stats_alloc`, with and without a monitor, on two
//!   threads, and an active `#[monitored]` call with it installed; hotpath's
//!   allocation mode, the other peer, runs from `hotpath-alloc/` (a workspace of its
//!   own, for its feature).
//! - `gpu_sample`: one GPU reading of a tree of 10 pids on 2 devices (a fake NVML),
//!   beside the same NVML calls made bare through nvml-wrapper.
//!
//! Criterion keeps its estimates under `$CRITERION_HOME`; the figures that are not
//! criterion timings go to [`out_dir`] as one JSON file each, and the `bench-table`
//! binary reads both.

use std::fs;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where the non-criterion figures are written: `$STEMMON_BENCH_OUT`, else
/// `stemmon-bench/` in the workspace's target directory.
pub fn out_dir() -> PathBuf {
    match std::env::var_os("STEMMON_BENCH_OUT") {
        Some(dir) => PathBuf::from(dir),
        None => target_dir().join("stemmon-bench"),
    }
}

/// Where criterion keeps its estimates: `$CRITERION_HOME`, else `criterion/` in the
/// workspace's target directory (criterion's own default).
pub fn criterion_dir() -> PathBuf {
    match std::env::var_os("CRITERION_HOME") {
        Some(dir) => PathBuf::from(dir),
        None => target_dir().join("criterion"),
    }
}

fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"),
    }
}

/// Nanoseconds per call of each subject, timed in alternating batches of `batch`
/// calls, `rounds` batches each, keeping each subject's fastest batch: on a shared
/// machine a burst of load then hits every subject alike, and the fastest batch is the
/// one least disturbed. Criterion's medians, timed one subject after the other, can
/// drift apart by more than a nanosecond-scale budget.
pub fn fastest_alternating(subjects: &[&dyn Fn()], batch: u32, rounds: u32) -> Vec<f64> {
    let mut best = vec![f64::INFINITY; subjects.len()];
    for _ in 0..rounds {
        for (subject, best) in subjects.iter().zip(&mut best) {
            let started = Instant::now();
            for _ in 0..batch {
                subject();
            }
            *best = best.min(started.elapsed().as_nanos() as f64 / f64::from(batch));
        }
    }
    best
}

/// Writes one figure file, `<out_dir>/<name>.json`.
pub fn write_result(name: &str, value: &serde_json::Value) -> io::Result<()> {
    let dir = out_dir();
    fs::create_dir_all(&dir)?;
    let text = serde_json::to_string_pretty(value).map_err(io::Error::other)?;
    fs::write(dir.join(format!("{name}.json")), text)
}

/// Criterion warm-up before each function (criterion is a dev-dependency, so the
/// benches build their `Criterion` from these numbers).
pub const WARM_UP: Duration = Duration::from_millis(800);
/// Criterion measurement time of a nanosecond-scale function.
pub const MEASURE_FAST: Duration = Duration::from_secs(3);
/// Criterion samples of a nanosecond-scale function.
pub const SAMPLES_FAST: usize = 60;
/// Criterion measurement time of a tree sample (microseconds to milliseconds).
pub const MEASURE_SLOW: Duration = Duration::from_secs(4);
/// Criterion samples of a tree sample.
pub const SAMPLES_SLOW: usize = 30;

/// Resident set size of this process now, in bytes, from `/proc/self/statm`.
pub fn self_rss_bytes() -> io::Result<u64> {
    let text = fs::read_to_string("/proc/self/statm")?;
    let pages: u64 = text
        .split_whitespace()
        .nth(1)
        .and_then(|field| field.parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "unreadable statm"))?;
    Ok(pages * page_size())
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(size).ok().filter(|s| *s > 0).unwrap_or(4096)
}

fn clock_ticks() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(ticks).ok().filter(|t| *t > 0).unwrap_or(100)
}

/// CPU time used so far by one thread of this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadCpu {
    /// Thread id.
    pub tid: u32,
    /// `utime + stime` from `/proc/self/task/TID/stat`, in nanoseconds (tick resolution,
    /// usually 10 ms).
    pub stat_ns: u64,
    /// The scheduler's run time from `/proc/self/task/TID/schedstat`, in nanoseconds;
    /// `None` where the kernel lacks schedstat.
    pub schedstat_ns: Option<u64>,
}

/// The CPU time of the first thread of this process whose name (`comm`) is `name`.
pub fn thread_cpu(name: &str) -> io::Result<ThreadCpu> {
    for entry in fs::read_dir("/proc/self/task")? {
        let entry = entry?;
        let Some(tid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        let dir = entry.path();
        let Ok(comm) = fs::read_to_string(dir.join("comm")) else {
            continue;
        };
        if comm.trim_end() != name {
            continue;
        }
        let stat = fs::read_to_string(dir.join("stat"))?;
        // Fields after the command name, which may hold spaces: utime and stime are 14 and 15.
        let after = stat
            .rfind(')')
            .map(|close| &stat[close + 1..])
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "unreadable stat"))?;
        let fields: Vec<&str> = after.split_whitespace().collect();
        let ticks = |index: usize| fields.get(index).and_then(|f| f.parse::<u64>().ok());
        let (utime, stime) = match (ticks(11), ticks(12)) {
            (Some(u), Some(s)) => (u, s),
            _ => return Err(io::Error::new(io::ErrorKind::InvalidData, "short stat")),
        };
        let schedstat_ns = fs::read_to_string(dir.join("schedstat"))
            .ok()
            .and_then(|text| text.split_whitespace().next()?.parse().ok());
        return Ok(ThreadCpu {
            tid,
            stat_ns: (utime + stime) * 1_000_000_000 / clock_ticks(),
            schedstat_ns,
        });
    }
    Err(io::Error::new(
        io::ErrorKind::NotFound,
        format!("no thread named {name:?}"),
    ))
}

/// A process tree to sample: a `sh` root whose descendants are `pairs` shells, each
/// waiting on one `sleep` (its child, the root's grandchild), so half the tree is
/// grandchildren. Dropping it kills the whole tree.
#[derive(Debug)]
pub struct Tree {
    root: Child,
    descendants: u32,
}

impl Tree {
    /// Starts a tree of `descendants` processes under a new root (rounded up to even)
    /// and waits until all of them exist.
    pub fn spawn(descendants: u32) -> io::Result<Tree> {
        let pairs = descendants.div_ceil(2);
        let script = format!(
            "i=0; while [ $i -lt {pairs} ]; do sh -c 'sleep 600 & wait' & i=$((i+1)); done; wait"
        );
        let root = Command::new("sh")
            .arg("-c")
            .arg(script)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            // Its own process group, so one signal reaches every descendant.
            .process_group(0)
            .spawn()?;
        let tree = Tree {
            root,
            descendants: pairs * 2,
        };
        tree.wait_until_complete(Duration::from_secs(20))?;
        Ok(tree)
    }

    /// The root's pid; the tree's processes are its descendants.
    pub fn root(&self) -> u32 {
        self.root.id()
    }

    /// How many descendants the root has once the tree is complete.
    pub fn descendants(&self) -> u32 {
        self.descendants
    }

    fn wait_until_complete(&self, limit: Duration) -> io::Result<()> {
        let started = Instant::now();
        let mut reader = stemmon::readers::default_reader(false);
        loop {
            let reading = reader.read_tree(self.root())?;
            if reading.process_count > self.descendants {
                return Ok(());
            }
            if started.elapsed() > limit {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "the tree reached {} of {} descendants",
                        reading.process_count.saturating_sub(1),
                        self.descendants
                    ),
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        // A negative pid signals the whole process group, grandchildren included.
        if let Ok(group) = libc::pid_t::try_from(self.root.id()) {
            // SAFETY: kill has no memory-safety preconditions.
            unsafe { libc::kill(-group, libc::SIGKILL) };
        }
        let _ = self.root.wait();
    }
}

/// The floor of one tree sample with high-water marks, CPU and I/O: per process, one
/// `pread` of `status`, one write of `5` to `clear_refs`, one `pread` each of `stat`
/// and `io` (the book's `cpu-io.md`) and one `pread` of each thread's `children`, through
/// descriptors opened once. No parsing, no listing, no
/// bookkeeping: what any reader of the same figures must at least spend in the kernel.
/// The `tree_sample` bench times it beside stemmon's sample, same tree, same run.
#[derive(Debug)]
pub struct Floor {
    processes: Vec<FloorProcess>,
    buf: Vec<u8>,
}

#[derive(Debug)]
struct FloorProcess {
    status: fs::File,
    clear_refs: fs::File,
    stat: fs::File,
    io: fs::File,
    children: Vec<fs::File>,
}

impl Floor {
    /// Opens the files of `root` and of every descendant it has now, found through the
    /// same `children` files.
    pub fn open(root: u32) -> io::Result<Floor> {
        let mut processes = Vec::new();
        let mut queue = vec![root];
        let mut buf = vec![0u8; 4096];
        while let Some(pid) = queue.pop() {
            let dir = PathBuf::from(format!("/proc/{pid}"));
            let mut children = Vec::new();
            for task in fs::read_dir(dir.join("task"))? {
                let file = fs::File::open(task?.path().join("children"))?;
                let n = std::os::unix::fs::FileExt::read_at(&file, &mut buf, 0)?;
                queue.extend(
                    String::from_utf8_lossy(&buf[..n])
                        .split_whitespace()
                        .filter_map(|p| p.parse::<u32>().ok()),
                );
                children.push(file);
            }
            processes.push(FloorProcess {
                status: fs::File::open(dir.join("status"))?,
                clear_refs: fs::OpenOptions::new()
                    .write(true)
                    .open(dir.join("clear_refs"))?,
                stat: fs::File::open(dir.join("stat"))?,
                io: fs::File::open(dir.join("io"))?,
                children,
            });
        }
        Ok(Floor { processes, buf })
    }

    /// How many processes and how many `children` files (threads) one sample reads.
    pub fn files(&self) -> (usize, usize) {
        let tasks = self.processes.iter().map(|p| p.children.len()).sum();
        (self.processes.len(), tasks)
    }

    /// One sample at the floor; returns the bytes read, so nothing is optimized away.
    pub fn sample(&mut self) -> io::Result<usize> {
        use std::io::Write as _;
        use std::os::unix::fs::FileExt as _;
        let mut read = 0;
        for process in &self.processes {
            read += process.status.read_at(&mut self.buf, 0)?;
            (&process.clear_refs).write_all(b"5")?;
            read += process.stat.read_at(&mut self.buf, 0)?;
            read += process.io.read_at(&mut self.buf, 0)?;
            for children in &process.children {
                read += children.read_at(&mut self.buf, 0)?;
            }
        }
        Ok(read)
    }
}

/// Times psutil's `children(recursive=True)` + `memory_info()` on the tree under
/// `root` with `bench/psutil_tree.py` and the interpreter in `$STEMMON_BENCH_PYTHON`
/// (the bench command's virtualenv). `Ok(None)` when that variable is not set.
pub fn run_psutil(root: u32, seconds: f64) -> io::Result<Option<serde_json::Value>> {
    let Some(python) = std::env::var_os("STEMMON_BENCH_PYTHON") else {
        return Ok(None);
    };
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("psutil_tree.py");
    let output = Command::new(python)
        .arg(script)
        .arg("--root")
        .arg(root.to_string())
        .arg("--seconds")
        .arg(seconds.to_string())
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()?;
    if !output.status.success() {
        return Err(io::Error::other(format!(
            "psutil_tree.py failed: {}",
            output.status
        )));
    }
    serde_json::from_slice(&output.stdout)
        .map(Some)
        .map_err(io::Error::other)
}

/// The body of every benchmarked function: a few cycles of work the optimizer cannot
/// remove, so the figures compare the instrumentation and nothing else.
#[inline(always)]
pub fn body(x: u64) -> u64 {
    std::hint::black_box(x)
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .rotate_left(7)
}
