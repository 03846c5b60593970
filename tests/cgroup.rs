//! The job's cgroup read for real: this machine's own memory cgroup, and a cgroup v1
//! with a limit made for the test, in which a child is OOM-killed. Parsing of both
//! versions on fixture directories is tested in `stemmon/src/memory/cgroup.rs`.

#![cfg(target_os = "linux")]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use stemmon::Monitor;
use stemmon_suite::{cannot_run, serial, MIB};

const HOLD: &str = env!("CARGO_BIN_EXE_stemmon-hold");

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// This process's cgroup v1 memory directory, when the machine has one mounted at the
/// usual place (`/sys/fs/cgroup/memory`).
fn v1_memory_dir() -> Option<PathBuf> {
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = cgroup.lines().find_map(|line| {
        let mut fields = line.splitn(3, ':');
        let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        controllers
            .split(',')
            .any(|c| c == "memory")
            .then_some(path)
    })?;
    let dir = Path::new("/sys/fs/cgroup/memory").join(path.trim_start_matches('/'));
    dir.join("memory.usage_in_bytes").exists().then_some(dir)
}

fn keyed(text: &str, key: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.trim().parse().ok())
}

#[test]
fn this_machines_cgroup_reads_as_its_files_say() {
    let _serial = serial();
    let monitor = Monitor::builder()
        .log_interval(None)
        .sample_interval(Duration::from_millis(50))
        .start()
        .unwrap();
    {
        let _stage = monitor.stage("hold").unwrap();
        let block = stemmon_suite::touched_mib(64);
        // Full samples read the cgroup: two of them inside the stage.
        stemmon_suite::wait_for_samples(&monitor, 2);
        drop(std::hint::black_box(block));
    }
    let report = monitor.finish();
    let Some(dir) = v1_memory_dir() else {
        assert!(report.cgroup.is_none() || report.cgroup.as_ref().unwrap().version == 2);
        cannot_run(
            "this_machines_cgroup_reads_as_its_files_say",
            "no cgroup v1 memory controller here to compare the report with",
        );
        return;
    };
    let cgroup = report.cgroup.clone().expect("the v1 cgroup is read");
    assert_eq!(cgroup.version, 1);
    assert_eq!(Path::new(&cgroup.path), dir);
    let limit: u64 = read(&dir.join("memory.limit_in_bytes"))
        .trim()
        .parse()
        .unwrap();
    assert_eq!(
        cgroup.memory_limit_bytes,
        (limit < 1 << 62).then_some(limit),
        "a huge v1 limit is unlimited"
    );
    assert_eq!(
        cgroup.oom_kills,
        keyed(&read(&dir.join("memory.oom_control")), "oom_kill")
    );
    let procs = read(&dir.join("cgroup.procs"));
    assert!(procs
        .lines()
        .any(|l| l.trim() == std::process::id().to_string()));
    assert!(cgroup.processes.expect("the cgroup's process count") >= 1);
    let peak = cgroup.memory_peak_bytes.unwrap();
    assert!(cgroup.memory_current_bytes.unwrap() <= peak);
    // Our own memory is charged to the cgroup: its charge covers what we held.
    let hold = report.stage("hold").unwrap();
    let charged = hold
        .high_water
        .peak_cgroup_memory_bytes
        .expect("the stage's cgroup peak");
    let held = hold
        .peaks
        .peak_parent_rss_bytes
        .expect("the stage's RSS peak");
    assert!(charged >= held, "{charged} vs {held}");
    // Its anonymous memory (`memory.stat`, the hierarchy's `total_rss` on v1): what the
    // processes hold themselves, within the charge, which adds the file cache.
    let stat = read(&dir.join("memory.stat"));
    assert!(keyed(&stat, "total_rss ").is_some(), "{stat}");
    let anon = hold
        .high_water
        .peak_cgroup_anon_bytes
        .expect("the stage's anonymous memory");
    assert!(
        anon >= 64 * stemmon_suite::MIB,
        "{anon}: the 64 MiB held at two samples"
    );
    assert!(anon <= charged, "anon {anon} above the charge {charged}");
    assert!(cgroup.memory_anon_bytes.is_some());
    assert_eq!(hold.high_water.oom_kills, Some(0));
}

/// A child cgroup of ours with a limit, removed when dropped.
struct LimitedCgroup(PathBuf);

impl Drop for LimitedCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

#[test]
fn an_oom_kill_in_a_limited_v1_cgroup_is_recorded() {
    let test = "an_oom_kill_in_a_limited_v1_cgroup_is_recorded";
    let Some(report) = oom_killed(test, Duration::from_millis(50), true) else {
        return;
    };
    let hog = report.stage("hog").unwrap();
    assert_eq!(hog.high_water.oom_kills, Some(1), "{hog:?}");
    assert!(
        hog.high_water
            .peak_cgroup_memory_bytes
            .expect("the stage's cgroup peak")
            >= 60 * MIB,
        "{hog:?}"
    );
}

/// With no sample between the start and `finish` (an hour's interval), the kill and the
/// charge it came at are the last sample's to count: the run has them.
#[test]
fn an_oom_kill_before_finish_is_counted_by_the_last_sample() {
    let test = "an_oom_kill_before_finish_is_counted_by_the_last_sample";
    let Some(report) = oom_killed(test, Duration::from_secs(3600), false) else {
        return;
    };
    assert_eq!(report.samples, 2, "the first sample and the last only");
    let peak = report.high_water.peak_cgroup_memory_bytes;
    assert!(peak.expect("the run's cgroup peak") >= 60 * MIB, "{peak:?}");
}

/// Runs a 200 MiB spike in a cgroup v1 limited to 64 MiB, in a stage `hog`, under a
/// monitor sampling every `interval` (waiting, with `wait`, for two samples before the
/// stage closes), and checks what every report of it holds: the cgroup read back, one
/// kill in the run. `None` (said loudly) where this machine cannot make the cgroup.
fn oom_killed(test: &str, interval: Duration, wait: bool) -> Option<stemmon::Report> {
    let _serial = serial();
    let Some(parent) = v1_memory_dir() else {
        cannot_run(test, "no cgroup v1 memory controller here");
        return None;
    };
    let dir = parent.join(format!("stemmon-test-{}", std::process::id()));
    if let Err(e) = std::fs::create_dir(&dir) {
        cannot_run(
            test,
            &format!("cannot make a cgroup ({e}); this needs root"),
        );
        return None;
    }
    let cgroup = LimitedCgroup(dir.clone());
    std::fs::write(dir.join("memory.limit_in_bytes"), (64 * MIB).to_string()).unwrap();
    // A shell that joins the cgroup, then runs a 200 MiB spike there when told to.
    let script = format!(
        "echo $$ > '{}' && echo in && read go && '{HOLD}' spike 200 100; echo done; read end",
        dir.join("cgroup.procs").display()
    );
    let mut shell = Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = shell.stdin.take().unwrap();
    let mut lines = BufReader::new(shell.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "in");
    let monitor = Monitor::builder()
        .log_interval(None)
        .sample_interval(interval)
        .root_process(shell.id())
        .start()
        .unwrap();
    {
        let _hog = monitor.stage("hog").unwrap();
        writeln!(stdin, "go").unwrap();
        assert_eq!(lines.next().unwrap().unwrap(), "done");
        if wait {
            // Let a sample see the kill.
            stemmon_suite::wait_for_samples(&monitor, 2);
        }
    }
    let report = monitor.finish();
    drop(stdin);
    shell.wait().unwrap();
    let read_back = report.cgroup.clone().expect("the test cgroup is read");
    assert_eq!(Path::new(&read_back.path), dir);
    assert_eq!(read_back.version, 1);
    assert_eq!(read_back.memory_limit_bytes, Some(64 * MIB));
    assert_eq!(read_back.oom_kills, Some(1));
    assert!(
        read_back.memory_peak_bytes.expect("the cgroup's peak") >= 60 * MIB,
        "{read_back:?}"
    );
    assert_eq!(report.high_water.oom_kills, Some(1));
    drop(cgroup);
    assert!(!dir.exists(), "the test cgroup is removed");
    Some(report)
}
