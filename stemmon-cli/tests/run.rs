//! `stemmon run` against real programs: exit codes, signals, the subreaper, the report.

mod common;

use common::{read_report, run_sh, stemmon, TempDir, MIB};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn the_command_s_exit_code_is_stemmon_s() {
    let dir = TempDir::new("exit-code");
    let report_path = dir.path().join("report.json");
    let output = stemmon()
        .args(["run", "--log-interval", "none", "-o"])
        .arg(&report_path)
        .args(["--", "sh", "-c", "exit 3"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    let report = read_report(&report_path);
    assert_eq!(
        report.command,
        Some(vec!["sh".to_owned(), "-c".to_owned(), "exit 3".to_owned()])
    );
    assert!(!report.running);

    let ok = stemmon()
        .args(["run", "--log-interval", "none", "--", "true"])
        .status()
        .unwrap();
    assert_eq!(ok.code(), Some(0));
}

/// Starts `stemmon run -- sleep 30` and waits until `sleep` runs as its child.
// The child is handed to the caller, which waits on it.
#[allow(clippy::zombie_processes)]
fn sleeping_under_stemmon(report: &std::path::Path) -> (std::process::Child, u32) {
    let mut run = stemmon()
        .args(["run", "--log-interval", "none", "-o"])
        .arg(report)
        .args(["--", "sleep", "30"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let children = common::children_of(run.id());
        if let Some(&child) = children.first() {
            if common::command_name(child).as_deref() == Some("sleep") {
                return (run, child);
            }
        }
        if Instant::now() > deadline {
            let _ = run.kill();
            let _ = run.wait();
            panic!("sleep never started under stemmon run");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn exits_soon_with(mut run: std::process::Child, code: i32, child: u32) {
    let started = Instant::now();
    let status = loop {
        if let Some(status) = run.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(10) {
            let _ = run.kill();
            panic!("stemmon did not exit after the signal: it was not forwarded");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(status.code(), Some(code), "{status:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "sleep 30 ended early"
    );
    assert!(
        !std::path::Path::new(&format!("/proc/{child}")).exists()
            || common::command_name(child).as_deref() != Some("sleep"),
        "sleep survived"
    );
}

#[test]
fn sigterm_is_forwarded_and_the_exit_is_128_plus_15() {
    let dir = TempDir::new("sigterm");
    let report = dir.path().join("report.json");
    let (run, child) = sleeping_under_stemmon(&report);
    common::signal(run.id(), libc::SIGTERM);
    exits_soon_with(run, 143, child);
    let report = read_report(&report);
    assert!(!report.running);
    assert_eq!(
        report.error.as_deref(),
        Some("SIGTERM"),
        "the command's death is the run's failure"
    );
}

#[test]
fn sigint_is_forwarded_and_the_exit_is_128_plus_2() {
    let dir = TempDir::new("sigint");
    let report = dir.path().join("report.json");
    let (run, child) = sleeping_under_stemmon(&report);
    common::signal(run.id(), libc::SIGINT);
    exits_soon_with(run, 130, child);
    assert_eq!(read_report(&report).error.as_deref(), Some("SIGINT"));
}

#[test]
fn a_command_that_does_not_exist_is_one_line_and_exit_2() {
    let output = stemmon()
        .args(["run", "--", "stemmon-no-such-command-here", "x"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("cannot run `stemmon-no-such-command-here`: no such command"),
        "{stderr}"
    );
}

#[test]
fn orphans_are_re_parented_to_stemmon_and_reaped() {
    let dir = TempDir::new("subreaper");
    let pid_file = dir.path().join("orphan.pid");
    // The inner shell starts `sleep 1` in the background and exits at once: the sleep is
    // orphaned while the command (the outer shell) still runs for 6 s.
    let script = format!(
        "sh -c 'sleep 1 & echo $! > {}'; sleep 6",
        pid_file.display()
    );
    let mut run = stemmon()
        .args(["run", "--log-interval", "none", "--", "sh", "-c", &script])
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    let orphan: u32 = loop {
        if let Ok(text) = std::fs::read_to_string(&pid_file) {
            if let Ok(pid) = text.trim().parse() {
                break pid;
            }
        }
        assert!(Instant::now() < deadline, "no orphan pid");
        std::thread::sleep(Duration::from_millis(10));
    };
    // While it sleeps, its parent is stemmon, not init. (The inner shell may still be
    // on its way out: wait for the re-parenting.)
    let mut parent = None;
    while Instant::now() < deadline {
        parent = common::parent_of(orphan);
        if parent == Some(run.id()) || parent.is_none() {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(parent, Some(run.id()), "re-parented to stemmon");
    // Once it has exited, stemmon reaps it while the command runs on: no zombie.
    let deadline = Instant::now() + Duration::from_secs(4);
    while common::state_of(orphan).is_some() {
        assert!(
            Instant::now() < deadline,
            "the orphan must be reaped, not left {:?}",
            common::state_of(orphan)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        run.try_wait().unwrap().is_none(),
        "reaped by stemmon during the run, not at its exit"
    );
    let status = run.wait().unwrap();
    assert_eq!(status.code(), Some(0));
}

#[test]
fn the_report_measures_the_command_s_tree() {
    let dir = TempDir::new("tree");
    let report_path = dir.path().join("report.json");
    // dd holds a 100 MiB buffer, touched by every read, for about a second.
    let status = run_sh(
        &report_path,
        "dd if=/dev/zero of=/dev/null bs=100M count=1 2>/dev/null; \
         sleep 0.3; dd if=/dev/zero of=/dev/null bs=100M count=200 2>/dev/null",
    );
    assert_eq!(status, Some(0));
    let report = read_report(&report_path);
    assert!(report.samples >= 3, "{}", report.samples);
    let children = report.peaks.peak_children_rss_bytes.unwrap();
    assert!(
        (95 * MIB..160 * MIB).contains(&children),
        "dd's 100 MiB buffer: {} MiB",
        children / MIB
    );
    // The root is the shell itself: small.
    let parent = report.peaks.peak_parent_rss_bytes.unwrap();
    assert!(parent < 20 * MIB, "sh: {} MiB", parent / MIB);
    assert_eq!(report.peak_process_count, 2, "sh and dd");
}

#[test]
fn bad_options_are_exit_2() {
    for args in [
        &["run", "--sample-interval", "0", "--", "true"][..],
        &["run", "--log-interval", "soon", "--", "true"],
        &["run", "--label", "9x=1", "--", "true"],
        &["run"],
    ] {
        let output = stemmon().args(args).stdout(Stdio::null()).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
    }
    let help = Command::new(env!("CARGO_BIN_EXE_stemmon"))
        .args(["run", "--help"])
        .output()
        .unwrap();
    assert_eq!(help.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&help.stdout).contains("128 + N"));
}

#[test]
fn labels_reach_the_report() {
    let dir = TempDir::new("labels");
    let report_path = dir.path().join("report.json");
    let status = stemmon()
        .args(["run", "--log-interval", "none", "--label", "rank=3", "-o"])
        .arg(&report_path)
        .args(["--", "true"])
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0));
    assert_eq!(read_report(&report_path).labels["rank"], "3");
}

#[test]
fn adopted_orphans_count_in_the_tree() {
    let dir = TempDir::new("orphan-memory");
    let report_path = dir.path().join("report.json");
    // The orphaned dd holds 100 MiB while the command itself (the outer shell) only sleeps.
    let status = run_sh(
        &report_path,
        "sh -c 'dd if=/dev/zero of=/dev/null bs=100M count=150 2>/dev/null &'; sleep 1.5",
    );
    assert_eq!(status, Some(0));
    let report = read_report(&report_path);
    let children = report.peaks.peak_children_rss_bytes.unwrap();
    assert!(
        children >= 95 * MIB,
        "the orphaned dd's 100 MiB: {} MiB",
        children / MIB
    );
}

/// Waits until `path` exists (with content), or fails the test after `deadline`.
fn wait_for_file(path: &std::path::Path, deadline: Duration) -> String {
    let started = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            if !text.is_empty() {
                return text;
            }
        }
        assert!(
            started.elapsed() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A `stemmon run` killed (with its command) if the test fails before it ends.
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            // SAFETY: kill has no memory-safety preconditions; the pid is our unreaped child.
            unsafe { libc::kill(-(self.0.id() as i32), libc::SIGKILL) };
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// `stemmon run` of a shell that traps `name`: the signal sent to stemmon reaches the
/// shell (its marker written), stemmon exits with the shell's code and the report is final.
fn forwarded(signal: i32, name: &str, code: i32) {
    use std::os::unix::process::CommandExt;
    let dir = TempDir::new(&format!("forward-{name}"));
    let (report, ready, marker) = (
        dir.path().join("report.json"),
        dir.path().join("ready"),
        dir.path().join("marker"),
    );
    let script = format!(
        "trap 'echo got {name} > {marker}; exit {code}' {name}; echo ready > {ready}; \
         while :; do sleep 0.05; done",
        marker = marker.display(),
        ready = ready.display(),
    );
    // Live lines every 50 ms, so that the report file appears while the command runs.
    let mut run = Running(
        stemmon()
            .args([
                "run",
                "--log-interval",
                "0.05",
                "--sample-interval",
                "0.05",
                "-o",
            ])
            .arg(&report)
            .args(["--", "sh", "-c", &script])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // A group of its own, so that a failed test can end stemmon and the shell.
            .process_group(0)
            .spawn()
            .unwrap(),
    );
    // The trap is set once `ready` is written; the report is there once the monitor runs.
    wait_for_file(&ready, Duration::from_secs(30));
    wait_for_file(&report, Duration::from_secs(30));
    common::signal(run.0.id(), signal);
    assert_eq!(
        wait_for_file(&marker, Duration::from_secs(30)).trim(),
        format!("got {name}"),
        "the command got {name}"
    );
    let started = Instant::now();
    let status = loop {
        if let Some(status) = run.0.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "stemmon did not exit after its command did ({name})"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(status.code(), Some(code), "{name}: {status:?}");
    let report = read_report(&report);
    assert!(!report.running, "{name}: the report is final");
    // The command exited by itself, with a code that is not 0: that is the run's error.
    assert_eq!(report.exit_code, Some(code), "{name}");
    assert_eq!(
        report.error.as_deref(),
        Some(format!("exit {code}").as_str()),
        "{name}: the command exited by itself"
    );
}

#[test]
fn sighup_is_forwarded_and_stemmon_exits_with_the_command_s_code() {
    forwarded(libc::SIGHUP, "HUP", 7);
}

#[test]
fn sigusr1_is_forwarded() {
    forwarded(libc::SIGUSR1, "USR1", 8);
}

#[test]
fn sigquit_sigusr2_and_sigwinch_are_forwarded() {
    forwarded(libc::SIGQUIT, "QUIT", 9);
    forwarded(libc::SIGUSR2, "USR2", 10);
    forwarded(libc::SIGWINCH, "WINCH", 11);
}

#[test]
fn a_reserved_label_is_exit_2_and_the_command_does_not_run() {
    let dir = TempDir::new("bad-label");
    let (report, ran) = (dir.path().join("report.json"), dir.path().join("ran"));
    let output = stemmon()
        .args(["run", "--log-interval", "none", "--label", "host=x", "-o"])
        .arg(&report)
        .args(["--", "touch"])
        .arg(&ran)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("\"host\" is reserved"), "{stderr}");
    assert!(
        !report.exists() && !ran.exists(),
        "nothing ran, nothing written"
    );
}

/// The settings table's bounds and message for an interval, as every surface gives them.
#[test]
fn an_interval_flag_out_of_range_is_exit_2_naming_the_range() {
    for flag in ["--sample-interval", "--log-interval"] {
        for value in ["0.0005", "86401"] {
            let output = stemmon()
                .args(["run", flag, value, "--", "true"])
                .output()
                .unwrap();
            assert_eq!(output.status.code(), Some(2), "{flag} {value}");
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert_eq!(stderr.lines().count(), 1, "{stderr}");
            assert!(
                stderr.contains("expected a number of seconds from 0.001 to 86400"),
                "{stderr}"
            );
        }
    }
}
