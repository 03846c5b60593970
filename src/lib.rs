//! Support shared by the workspace's examples and integration tests (not published):
//! memory that is really resident, and child processes that hold a known amount of it.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};

/// One mebibyte.
pub const MIB: u64 = 1 << 20;

/// Allocates `mib` MiB and writes every page, so all of it is resident.
pub fn touched_mib(mib: u64) -> Vec<u8> {
    let mut block = vec![0u8; (mib * MIB) as usize];
    for page in block.chunks_mut(4096) {
        page[0] = 1;
    }
    std::hint::black_box(block)
}

/// A child process holding `mib` MiB (and optionally grandchildren holding theirs),
/// started from the `stemmon-hold` binary. Dropping it ends the child and its children.
pub struct Holder {
    child: Child,
}

impl Holder {
    /// Starts `hold_binary` and waits until it and its children hold their memory.
    pub fn start(hold_binary: &str, mib: u64, grandchildren: u32, grandchild_mib: u64) -> Holder {
        let mut child = Command::new(hold_binary)
            .args([
                mib.to_string(),
                grandchildren.to_string(),
                grandchild_mib.to_string(),
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start stemmon-hold");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "ready", "stemmon-hold did not start");
        Holder { child }
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Ends the child (and its children) and waits for it.
    pub fn stop(mut self) {
        self.end();
    }

    fn end(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        self.end();
    }
}

/// A fresh, empty directory under the system's temporary directory, removed with
/// everything in it when dropped.
pub fn temp_dir(name: &str) -> TempDir {
    temp_dir_in(&std::env::temp_dir(), name)
}

/// A fresh, empty directory in `base`, removed with everything in it when dropped. Its
/// name is random and it is made exclusively, mode 0700 (tempfile): in a shared
/// directory, nothing another user planted at a name they could guess is ever used.
pub fn temp_dir_in(base: &Path, name: &str) -> TempDir {
    let dir = tempfile::Builder::new()
        .prefix(&format!("stemmon-test-{name}-"))
        .tempdir_in(base)
        .unwrap_or_else(|e| panic!("a temporary directory in {}: {e}", base.display()));
    TempDir(dir)
}

/// A directory that is removed when dropped; see [`temp_dir`].
#[derive(Debug)]
pub struct TempDir(tempfile::TempDir);

impl TempDir {
    /// Where it is.
    pub fn path(&self) -> &Path {
        self.0.path()
    }
}

impl std::ops::Deref for TempDir {
    type Target = Path;

    fn deref(&self) -> &Path {
        self.0.path()
    }
}

impl AsRef<Path> for TempDir {
    fn as_ref(&self) -> &Path {
        self.0.path()
    }
}

/// Names of this process's threads, from `/proc/self/task/*/comm`.
#[cfg(target_os = "linux")]
pub fn thread_names() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .map(|name| name.trim().to_owned())
        .collect()
}

/// A command for a `#[monitor_main]` fixture `binary`, with no `STEMMON_*` setting
/// inherited from the environment the tests run in.
pub fn fixture_command(binary: &str) -> Command {
    let mut command = Command::new(binary);
    for name in [
        "STEMMON_OUTPUT",
        "STEMMON_SAMPLE_INTERVAL",
        "STEMMON_LOG_INTERVAL",
        "STEMMON_DISABLE",
        "STEMMON_HIGH_WATER_MARKS",
        "STEMMON_LABELS",
        "STEMMON_PROMETHEUS_TEXTFILE_DIR",
        "STEMMON_PUSHGATEWAY_URL",
        "STEMMON_NVML_LIBRARY",
        "STEMMON_GPU",
    ] {
        command.env_remove(name);
    }
    command
}

/// Reads the report a run left at `path`, and checks its invariants
/// ([`check_invariants`]).
pub fn read_report(path: &Path) -> stemmon::Report {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("no report at {}: {e}", path.display()));
    let report = serde_json::from_str(&text).expect("the report reads back as a stemmon::Report");
    check_invariants(&report);
    report
}

/// Fails the test unless `report` keeps the bounds of the book's `exact-peaks.md` in every record:
/// `peak_tree_rss_bound_bytes >= peak_tree_rss_bytes` and
/// `peak_parent_hwm_bytes >= peak_parent_rss_bytes`, wherever both are present.
pub fn check_invariants(report: &stemmon::Report) {
    let broken = stemmon_report::bound_violations(report);
    assert!(
        broken.is_empty(),
        "the report breaks its bounds: {broken:#?}"
    );
}

/// Waits until `monitor` has taken `more` samples beyond those it had; fails the test
/// after 10 s (a stalled sampler).
pub fn wait_for_samples(monitor: &stemmon::Monitor, more: u64) {
    let target = monitor.summary().samples + more;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while monitor.summary().samples < target {
        assert!(std::time::Instant::now() < deadline, "the sampler stalled");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Holds the tests of one test binary apart that must not overlap: one process-wide
/// monitor at a time, the process's own high-water mark (every reading resets it), and
/// counts of this process's children. A test that panicked while holding it does not
/// fail the others.
pub fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Says that `test` cannot run here and why; the caller then returns. Under CI (`CI` set
/// and not `false` or `0`), where every test must run, it fails the test instead, so a
/// skip is never a silent pass.
#[track_caller]
pub fn cannot_run(test: &str, why: &str) {
    use std::io::Write;
    let ci = std::env::var("CI").is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false"));
    if ci {
        panic!("{test} cannot run under CI: {why}");
    }
    // Straight to the process's stderr: the test harness captures `eprintln!` of a test
    // that passes.
    let _ = writeln!(std::io::stderr(), "SKIPPED: {test}: {why}");
}

/// A fake NVIDIA driver (`stemmon/tests/support/fake_nvml.c`, built with the C
/// compiler) in a directory of its own, serving what its state file says; the GPU
/// tests point `STEMMON_NVML_LIBRARY` at [`FakeNvml::library`].
pub struct FakeNvml {
    dir: TempDir,
}

impl FakeNvml {
    /// Builds the fake into `name`'s temp dir, serving `state`; `None` (after
    /// [`cannot_run`]) where no C compiler builds it.
    pub fn new(name: &str, state: &str) -> Option<FakeNvml> {
        let dir = temp_dir(name);
        let source = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/stemmon/tests/support/fake_nvml.c"
        );
        let compiler = std::env::var_os("CC").unwrap_or_else(|| "cc".into());
        let built = Command::new(&compiler)
            .args(["-shared", "-fPIC", "-O2", "-o"])
            .arg(dir.path().join("libnvidia-ml.so.1"))
            .arg(source)
            .output();
        match built {
            Ok(output) if output.status.success() => {}
            other => {
                cannot_run(
                    name,
                    &format!("the fake NVML library does not build: {other:?}"),
                );
                return None;
            }
        }
        let fake = FakeNvml { dir };
        fake.set(state);
        Some(fake)
    }

    /// The library's path.
    pub fn library(&self) -> PathBuf {
        self.dir.path().join("libnvidia-ml.so.1")
    }

    /// Replaces what the fake serves, in one rename: it sees the old state or the new.
    pub fn set(&self, state: &str) {
        let next = self.dir.path().join("fake-nvml-state.next");
        std::fs::write(&next, state).unwrap();
        std::fs::rename(next, self.dir.path().join("fake-nvml-state")).unwrap();
    }
}

/// The direct children of `pid`, from every thread's `children` file.
fn children_of(pid: u32) -> Vec<u32> {
    let mut children = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return children;
    };
    for task in tasks.flatten() {
        if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
            children.extend(
                text.split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
    }
    children
}

/// The RSS of `pid` in bytes (`statm`), 0 once it is gone.
fn rss_of(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/statm"))
        .ok()
        .and_then(|t| t.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// Runs `command` to its end while a poller sums the RSS of its tree every 5 ms (with
/// the started process itself where `with_root`; without it, the tree that `stemmon
/// run` watches, stemmon left out): its exit status and the highest sum, the ground
/// truth of a tree's peak (psrecord's way).
pub fn poll_tree_peak(command: &mut Command, with_root: bool) -> (std::process::ExitStatus, u64) {
    let mut child = command.spawn().expect("the command starts");
    let root = child.id();
    let mut peak = 0;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return (status, peak);
        }
        let mut sum = if with_root { rss_of(root) } else { 0 };
        let mut todo = children_of(root);
        while let Some(pid) = todo.pop() {
            sum += rss_of(pid);
            todo.extend(children_of(pid));
        }
        peak = peak.max(sum);
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}
