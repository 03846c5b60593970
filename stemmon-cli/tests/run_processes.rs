//! `stemmon run`'s `processes` (the book's `cpu-io.md`): the command and the processes of its tree,
//! with their argv, CPU and the exit codes stemmon saw, an orphan it reaped as a
//! subreaper included.

mod common;

use common::{has_python3, read_report, run_quiet, run_sh, stemmon, TempDir};
use std::ffi::OsStr;

/// Busies itself for a few hundred milliseconds of CPU and exits 4. Its parent exits
/// at once, so it is an orphan that stemmon, the subreaper, reaps.
const ORPHAN: &str = r#"echo $$ > "$1/pid.tmp" && mv "$1/pid.tmp" "$1/pid"
i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done
exit 4
"#;

/// Starts the orphan, waits until stemmon has reaped it (its pid is gone), exits 5.
const COMMAND: &str = r#"sh -c 'sh "$0/orphan.sh" "$0" &' "$1"
n=0; while [ ! -s "$1/pid" ] && [ $n -lt 6000 ]; do sleep 0.01; n=$((n+1)); done
pid=$(cat "$1/pid")
n=0; while kill -0 "$pid" 2>/dev/null && [ $n -lt 6000 ]; do sleep 0.01; n=$((n+1)); done
exit 5
"#;

#[test]
fn processes_lists_the_command_and_the_orphan_with_argv_cpu_and_exit_codes() {
    let dir = TempDir::new("run-processes");
    std::fs::write(dir.path().join("orphan.sh"), ORPHAN).unwrap();
    std::fs::write(dir.path().join("command.sh"), COMMAND).unwrap();
    let report_path = dir.path().join("report.json");
    let script = dir.path().join("command.sh");
    let argv = [OsStr::new("sh"), script.as_os_str(), dir.path().as_os_str()];
    assert_eq!(run_quiet(&report_path, "0.05", &argv), Some(5));
    let report = read_report(&report_path);
    let command = report
        .processes
        .iter()
        .find(|p| p.command.contains("command.sh"))
        .unwrap_or_else(|| panic!("no command in {:#?}", report.processes));
    assert_eq!(command.pid, report.pid, "the root is the command");
    assert_eq!(command.exit_code, Some(5), "{command:?}");
    let orphan_pid: u32 = std::fs::read_to_string(dir.path().join("pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let orphan = report
        .processes
        .iter()
        .find(|p| p.pid == orphan_pid)
        .unwrap_or_else(|| panic!("no orphan {orphan_pid} in {:#?}", report.processes));
    assert_eq!(orphan.exit_code, Some(4), "{orphan:?}");
    assert!(orphan.command.contains("orphan.sh"), "{orphan:?}");
    let cpu = orphan.cpu_seconds.expect("its CPU");
    assert!(cpu > 0.05, "{orphan:?}");
    // The tree's CPU counts it, through the rusage of its reaping.
    let tree = report.cpu_io.cpu_user_seconds.unwrap() + report.cpu_io.cpu_system_seconds.unwrap();
    assert!(tree >= cpu * 0.95, "tree {tree} s, orphan {cpu} s");
    assert!(report.timeline.iter().any(|p| p.cpu_cores.is_some()));
}

#[test]
fn a_command_that_exits_at_once_is_listed_by_name_with_its_exit_code() {
    // Its argv is gone once it is a zombie, which is all the first sample may find;
    // it is named as `ps` names it then, `[sh]`.
    let dir = TempDir::new("run-processes-brief");
    let report_path = dir.path().join("report.json");
    let status = stemmon()
        .args(["run", "--log-interval", "none", "-o"])
        .arg(&report_path)
        .args(["--", "sh", "-c", "exit 3"])
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(3));
    let report = read_report(&report_path);
    let root = report
        .processes
        .iter()
        .find(|p| p.pid == report.pid)
        .unwrap_or_else(|| panic!("no command in {:#?}", report.processes));
    assert!(
        root.command == "[sh]" || root.command.starts_with("sh -c"),
        "{root:?}"
    );
    assert_eq!(root.exit_code, Some(3), "{root:?}");
}

#[test]
fn a_shell_is_listed_at_its_own_peak_not_at_its_childs() {
    // The kernel's peak for an exited process is the larger of its own and that of the
    // children it reaped: a shell that waited for a 200 MiB child must not read 200 MiB.
    if !has_python3("a_shell_is_listed_at_its_own_peak_not_at_its_childs") {
        return;
    }
    let dir = TempDir::new("run-processes-shell");
    let report_path = dir.path().join("report.json");
    let script = r#"python3 -c "import time; b = b'x' * (200 << 20); time.sleep(1)"; exit 0"#;
    assert_eq!(run_sh(&report_path, script), Some(0));
    let report = read_report(&report_path);
    let peak = |p: &stemmon::report::ProcessReport| p.peak_rss_bytes.expect("a peak");
    let shell = report
        .processes
        .iter()
        .find(|p| p.pid == report.pid)
        .unwrap_or_else(|| panic!("no shell in {:#?}", report.processes));
    assert!(peak(shell) < 50 << 20, "{shell:?}");
    assert!(
        report.processes.iter().any(|p| peak(p) >= 200 << 20),
        "no 200 MiB child in {:#?}",
        report.processes
    );
}
