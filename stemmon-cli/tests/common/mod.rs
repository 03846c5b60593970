//! Shared by the tests: the built binary, temp dirs that clean up, /proc lookups, and
//! reports that the runtime wrote for a real program.
#![allow(dead_code)] // Each test binary uses a part of this module.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
#[allow(unused_imports)] // Each test binary uses a part of them.
pub use stemmon_suite::{cannot_run, check_invariants, poll_tree_peak, read_report, serial};

pub const MIB: u64 = 1 << 20;

/// The built `stemmon` binary, its output at full width whatever the caller's `COLUMNS`
/// (a test that fits a width sets it).
pub fn stemmon() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_stemmon"));
    command.env_remove("COLUMNS");
    command
}

/// `stemmon run` of `argv` with samples every `interval` seconds, no log, the report at
/// `report`: the command's exit code.
pub fn run_quiet<S: AsRef<OsStr>>(report: &Path, interval: &str, argv: &[S]) -> Option<i32> {
    stemmon()
        .args([
            "run",
            "--sample-interval",
            interval,
            "--log-interval",
            "none",
            "-o",
        ])
        .arg(report)
        .arg("--")
        .args(argv)
        .status()
        .unwrap()
        .code()
}

/// `stemmon run` of `sh -c script` with 50 ms samples, no log, the report at `report`:
/// the command's exit code.
pub fn run_sh(report: &Path, script: &str) -> Option<i32> {
    run_quiet(report, "0.05", &["sh", "-c", script])
}

/// A shell function for a script run by [`run_watched`]: `until_report KEY AT_LEAST`
/// waits until the report being written (`$REPORT`) holds `"KEY": N` with N at least
/// AT_LEAST (the event a test waits for, not a time), for at most 60 s (then fails).
/// Its processes run with descriptors 3 to 9 closed, so that a script's own open
/// descriptors are not counted again in them.
pub const UNTIL_REPORT: &str = r#"until_report() {
  i=0
  while [ $i -lt 1200 ]; do
    awk -v key="\"$1\": *[0-9.e+-]+" -v t="$2" '{ while (match($0, key)) { v = substr($0, RSTART, RLENGTH); sub(/^[^:]*: */, "", v); if (!seen || v + 0 > m) m = v + 0; seen = 1; $0 = substr($0, RSTART + RLENGTH) } } END { exit !(seen && m >= t) }' "$REPORT" 3<&- 4<&- 5<&- 6<&- 7<&- 8<&- 9<&- 2>/dev/null && return 0
    sleep 0.05 3<&- 4<&- 5<&- 6<&- 7<&- 8<&- 9<&-
    i=$((i + 1))
  done
  echo "until_report: no $1 of at least $2 in $REPORT" >&2
  exit 3
}
"#;

/// `stemmon run` of `sh -c` [`UNTIL_REPORT`] then `script`, with samples every 20 ms,
/// a live line every 0.2 s, the report at `report` (also `$REPORT`) and `env` set: its
/// output.
pub fn run_watched(report: &Path, script: &str, env: &[(&str, &OsStr)]) -> std::process::Output {
    stemmon()
        .args([
            "run",
            "--sample-interval",
            "0.02",
            "--log-interval",
            "0.2",
            "-o",
        ])
        .arg(report)
        .args(["--", "sh", "-c", &format!("{UNTIL_REPORT}{script}")])
        .env("REPORT", report)
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

/// The largest `args[arg]` of the Chrome trace's counter `name`, in
/// `stemmon export --format chrome` of the report at `report` (0 when it has none).
pub fn chrome_counter_max(report: &Path, name: &str, arg: &str) -> f64 {
    let output = stemmon()
        .args(["export", "--format", "chrome"])
        .arg(report)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let trace: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == name)
        .filter_map(|e| e["args"][arg].as_f64())
        .fold(0.0, f64::max)
}

/// Whether `python3` runs here; when it does not, `test` [cannot run](cannot_run).
#[track_caller]
pub fn has_python3(test: &str) -> bool {
    let runs = Command::new("python3").arg("--version").output().is_ok();
    if !runs {
        cannot_run(test, "there is no python3");
    }
    runs
}

/// What a finished command left: its exit code and its output, as text.
pub struct Outcome {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `command` to its end; its output must be UTF-8.
pub fn outcome(command: &mut Command) -> Outcome {
    let output = command.output().unwrap();
    Outcome {
        code: output.status.code(),
        stdout: String::from_utf8(output.stdout).expect("stdout is UTF-8"),
        stderr: String::from_utf8(output.stderr).expect("stderr is UTF-8"),
    }
}

/// A `compare` that failed with exit 1, and a line of stdout starting `FAIL:` holds
/// `reason`.
#[track_caller]
pub fn fails_because(outcome: &Outcome, reason: &str) {
    assert_eq!(
        outcome.code,
        Some(1),
        "{}{}",
        outcome.stdout,
        outcome.stderr
    );
    assert!(
        outcome
            .stdout
            .lines()
            .any(|l| l.starts_with("FAIL: ") && l.contains(reason)),
        "no FAIL line with {reason:?}:\n{}",
        outcome.stdout
    );
}

/// A directory removed when dropped, failing test or not. Its name is random and it is
/// made exclusively, mode 0700 (tempfile): nothing planted in the shared temp dir is used.
pub struct TempDir(tempfile::TempDir);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        let dir = tempfile::Builder::new()
            .prefix(&format!("stemmon-cli-{name}-"))
            .tempdir()
            .expect("a temporary directory");
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        self.0.path()
    }
}

/// The direct children of `pid`, from every thread's `children` file.
pub fn children_of(pid: u32) -> Vec<u32> {
    let mut children = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return children;
    };
    for task in tasks.flatten() {
        let file = task.path().join("children");
        if let Ok(text) = std::fs::read_to_string(file) {
            children.extend(
                text.split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
    }
    children
}

/// The fields of `/proc/PID/stat` after the command name: state, ppid, ...
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &text[text.rfind(')')? + 1..];
    Some(after.split_whitespace().map(str::to_owned).collect())
}

pub fn parent_of(pid: u32) -> Option<u32> {
    stat_fields(pid)?.get(1)?.parse().ok()
}

/// `R`, `S`, `Z`... or `None` once the process is gone (reaped).
pub fn state_of(pid: u32) -> Option<String> {
    stat_fields(pid)?.first().cloned()
}

pub fn command_name(pid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|s| s.trim().to_owned())
}

pub fn signal(pid: u32, signal: i32) {
    // SAFETY: kill has no memory-safety preconditions; pid is a process this test started.
    assert_eq!(unsafe { libc::kill(pid as i32, signal) }, 0);
}

/// Touches `mib` MiB so that it is resident.
fn touched(mib: u64) -> Vec<u8> {
    let mut buffer = vec![0u8; (mib * MIB) as usize];
    for index in (0..buffer.len()).step_by(4096) {
        buffer[index] = 1;
    }
    buffer
}

/// What the staged fixture does: `fit/inner` holds `inner_mib` MiB for `inner_ms`.
#[derive(Clone, Copy, Debug)]
pub struct Workload {
    pub inner_mib: u64,
    pub inner_ms: u64,
}

impl Default for Workload {
    fn default() -> Workload {
        Workload {
            inner_mib: 64,
            inner_ms: 200,
        }
    }
}

/// The report of a real program with stages, written by the runtime itself: this test
/// binary run again with only [`staged_fixture`], whose monitor (20 ms samples, no log)
/// writes `dir/name`. Stages: `load` holds 64 MiB; `fit` 128 MiB, with `fit/inner`
/// holding `inner_mib` more; `predict` runs a `dd` child holding 100 MiB and two
/// threads that each run `predict/chunk`. `rank` is set through the environment
/// (`RANK`), as a job scheduler sets it.
pub fn staged_report(dir: &Path, name: &str, workload: Workload, rank: u32) -> PathBuf {
    let path = dir.join(name);
    let mut command = Command::new(std::env::current_exe().unwrap());
    // The fixture's own settings only: none of the caller's STEMMON_* reaches it.
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("STEMMON_") {
            command.env_remove(key);
        }
    }
    let output = command
        .args([
            "--ignored",
            "--exact",
            "common::staged_fixture",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("CLI_FIXTURE_REPORT", &path)
        .env("CLI_FIXTURE_INNER_MIB", workload.inner_mib.to_string())
        .env("CLI_FIXTURE_INNER_MS", workload.inner_ms.to_string())
        .env("RANK", rank.to_string())
        .output()
        .unwrap();
    assert!(output.status.success(), "the fixture failed: {output:?}");
    assert!(path.exists(), "the fixture wrote no report: {output:?}");
    path
}

/// The staged program of [`staged_report`]; without `CLI_FIXTURE_REPORT` it does nothing.
#[test]
#[ignore = "a fixture: run in a process of its own by common::staged_report"]
fn staged_fixture() {
    let Some(report) = std::env::var_os("CLI_FIXTURE_REPORT") else {
        return;
    };
    let number = |name: &str| -> u64 { std::env::var(name).unwrap().parse().unwrap() };
    let (inner_mib, inner_ms) = (
        number("CLI_FIXTURE_INNER_MIB"),
        number("CLI_FIXTURE_INNER_MS"),
    );
    let monitor = stemmon::Monitor::builder()
        .log_interval(None)
        .sample_interval(Duration::from_millis(20))
        .output(PathBuf::from(report))
        .start()
        .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    {
        let _load = monitor.stage("load").unwrap();
        let held = touched(64);
        std::thread::sleep(Duration::from_millis(300));
        std::hint::black_box(&held);
    }
    std::thread::sleep(Duration::from_millis(100));
    {
        let _fit = monitor.stage("fit").unwrap();
        let held = touched(128);
        std::thread::sleep(Duration::from_millis(200));
        {
            let _inner = monitor.stage("inner").unwrap();
            let more = touched(inner_mib);
            std::thread::sleep(Duration::from_millis(inner_ms));
            std::hint::black_box(&more);
        }
        std::hint::black_box(&held);
    }
    {
        let _predict = monitor.stage("predict").unwrap();
        std::thread::scope(|scope| {
            for _ in 0..2 {
                scope.spawn(|| {
                    let _chunk = stemmon::stage("chunk");
                    std::thread::sleep(Duration::from_millis(50));
                });
            }
        });
        let status = Command::new("sh")
            .args([
                "-c",
                "dd if=/dev/zero of=/dev/null bs=100M count=1 2>/dev/null; sleep 0.1; \
                 dd if=/dev/zero of=/dev/null bs=100M count=30 2>/dev/null",
            ])
            .status()
            .unwrap();
        assert!(status.success());
        std::thread::sleep(Duration::from_millis(100));
    }
    let report = monitor.finish();
    assert!(report.output_error.is_none(), "{:?}", report.output_error);
}

/// Runs `argv` under a wrapper that `wait4`s it: its peak RSS in bytes, as the kernel
/// gives it to a parent (what `/usr/bin/time -v` prints: the command's own, or the
/// largest of its waited-for children's).
pub fn wait4_maxrss(argv: &[&str]) -> u64 {
    let wrapper = "import os, sys\n\
                   pid = os.fork()\n\
                   if pid == 0:\n    os.execvp(sys.argv[1], sys.argv[1:])\n\
                   _, status, usage = os.wait4(pid, 0)\n\
                   print(usage.ru_maxrss)";
    let output = Command::new("python3")
        .arg("-c")
        .arg(wrapper)
        .args(argv)
        .stderr(Stdio::inherit())
        .output()
        .expect("python3 runs");
    assert!(output.status.success(), "{output:?}");
    let kib: u64 = String::from_utf8_lossy(&output.stdout)
        .lines()
        .last()
        .and_then(|line| line.trim().parse().ok())
        .unwrap_or_else(|| panic!("no ru_maxrss in {output:?}"));
    kib * 1024
}

/// The cells of `show`'s stage table row for `name`, trimmed.
pub fn table_row<'a>(out: &'a str, name: &str) -> Vec<&'a str> {
    out.lines()
        .filter(|l| l.starts_with('│'))
        .map(|l| {
            l.trim_matches('│')
                .split('┆')
                .map(str::trim)
                .collect::<Vec<_>>()
        })
        .find(|cells| cells[0] == name)
        .unwrap_or_else(|| panic!("no row {name} in\n{out}"))
}

/// The python3 interpreter itself: a version manager's `python3` on PATH (pyenv's)
/// is a shell script that runs a chain of helpers before it `exec`s it, whose memory
/// the bound rightly counts, and whose timing would make identical runs differ.
pub fn interpreter() -> std::ffi::OsString {
    let output = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&output.stdout).trim().into()
}

/// Runs `stemmon args` to its end: its exit code, its peak RSS in bytes as the kernel's
/// `wait4` gives it to its parent, and its stderr.
///
/// The parent is a small Python process, not this test: the kernel carries a process's
/// high-water mark across `exec`, so a direct child of this test would start at the
/// test's own peak (gigabytes beside the other tests here). An alarm set before `exec`
/// ends a reader that hangs: it is killed at `deadline`, and the test fails.
pub fn exit_and_peak(
    dir: &Path,
    args: &[&std::ffi::OsStr],
    deadline: Duration,
) -> (Option<i32>, u64, String) {
    let err = dir.join("stderr");
    let wrapper = "import os, sys, signal\n\
                   pid = os.fork()\n\
                   if pid == 0:\n\
                   \x20   fd = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)\n\
                   \x20   os.dup2(fd, 2)\n\
                   \x20   null = os.open(os.devnull, os.O_RDWR)\n\
                   \x20   os.dup2(null, 0)\n\
                   \x20   os.dup2(null, 1)\n\
                   \x20   signal.alarm(int(sys.argv[1]))\n\
                   \x20   os.execv(sys.argv[3], sys.argv[3:])\n\
                   _, status, usage = os.wait4(pid, 0)\n\
                   print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)";
    let output = std::process::Command::new("python3")
        .arg("-c")
        .arg(wrapper)
        .arg(deadline.as_secs().to_string())
        .arg(&err)
        .arg(env!("CARGO_BIN_EXE_stemmon"))
        .args(args)
        .env_remove("COLUMNS")
        .stdin(Stdio::null())
        .output()
        .expect("python3 runs");
    assert!(output.status.success(), "{output:?}");
    let text = String::from_utf8_lossy(&output.stdout);
    let (code, kib) = text
        .trim()
        .split_once(' ')
        .and_then(|(code, kib)| Some((code.parse::<i32>().ok()?, kib.parse::<u64>().ok()?)))
        .unwrap_or_else(|| panic!("no exit code and ru_maxrss in {output:?}"));
    assert_ne!(
        code,
        -libc::SIGALRM,
        "stemmon {args:?} still ran after {deadline:?}"
    );
    let stderr = String::from_utf8_lossy(&std::fs::read(&err).unwrap()).into_owned();
    (Some(code), kib * 1024, stderr)
}
