//! `stemmon run` at the edges of a run (the book's `exact-peaks.md`, 0.3: no interval escapes, the last
//! one included): real programs, with the kernel's own figure for the same command as
//! ground truth (`wait4`'s `ru_maxrss`, what `/usr/bin/time` prints).

mod common;

use common::{cannot_run, read_report, serial, stemmon, wait4_maxrss, TempDir, MIB};
use std::process::{Command, Stdio};
use stemmon::Report;

/// `stemmon run` with `options` (the report, no log) of `argv`: its exit code, stdout and
/// the report.
fn run(options: &[&str], argv: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String, Report) {
    let dir = TempDir::new("edges");
    let path = dir.path().join("report.json");
    let mut command = stemmon();
    command.env_remove("STEMMON_HIGH_WATER_MARKS");
    for (key, value) in env {
        command.env(key, value);
    }
    let output = command
        .args(["run", "--log-interval", "none", "-o"])
        .arg(&path)
        .args(options)
        .arg("--")
        .args(argv)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    let report = read_report(&path);
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        report,
    )
}

fn bound(report: &Report) -> u64 {
    report
        .high_water
        .peak_tree_rss_bound_bytes
        .unwrap_or_else(|| panic!("no bound: {:?}", report.high_water_marks))
}

/// `bound >= truth - 5 %`, with both in the message.
fn assert_bounds(what: &str, report: &Report, truth: u64) {
    let bound = bound(report);
    eprintln!(
        "{what}: bound {} MiB, ground truth {} MiB",
        bound / MIB,
        truth / MIB
    );
    assert!(
        bound as f64 >= truth as f64 * 0.95,
        "{what}: bound {bound} below the ground truth {truth}: {:?}",
        report.high_water
    );
}

const LAST_SECOND_SPIKE: &str =
    "import time; time.sleep(1.2); b = b'x' * (300 << 20); time.sleep(0.2)";

#[test]
fn a_spike_in_the_commands_last_second_is_in_the_bound_and_its_exit_figure() {
    let _serial = serial();
    let argv = ["python3", "-c", LAST_SECOND_SPIKE];
    let truth = wait4_maxrss(&argv);
    // At 60 s, no sample falls between the first and the last, however slow the
    // machine: the spike is in the final interval for sure.
    for interval in ["1", "60"] {
        let (code, _, report) = run(&["--sample-interval", interval], &argv, &[]);
        assert_eq!(code, Some(0));
        assert_bounds(
            &format!("last-second spike at {interval} s"),
            &report,
            truth,
        );
        assert_own_peak(
            &format!("last-second spike at {interval} s"),
            &report,
            truth,
        );
    }
}

/// The command is the parent: its own exact peak is its exit figure (its exit record,
/// else its rusage where it reaped no child), within 2 % of `truth` (`wait4`'s
/// `ru_maxrss` of the same command), never an exited child's, and no mark is missing.
fn assert_own_peak(what: &str, report: &Report, truth: u64) {
    let command = report
        .processes
        .iter()
        .find(|p| p.pid == report.pid)
        .unwrap();
    let exited = command.exit_maxrss_bytes.unwrap();
    assert!(exited as f64 >= truth as f64 * 0.98, "{what}: {command:?}");
    if !report.high_water_marks.exit_records {
        // A `python3` shim on PATH reaps children of its own: its rusage is merged.
        cannot_run(what, "no exit records (taskstats needs CAP_NET_ADMIN)");
        return;
    }
    let own = report.high_water.peak_parent_hwm_bytes.unwrap();
    eprintln!(
        "{what}: own exact peak {} KiB, wait4 {} KiB",
        own >> 10,
        truth >> 10
    );
    assert!(
        (own as f64 - truth as f64).abs() <= truth as f64 * 0.02,
        "{what}: own {own} against wait4 {truth}: {:?}",
        report.high_water
    );
    let children = report.high_water.peak_reaped_child_rss_bytes.unwrap_or(0);
    assert!(
        children < truth / 2,
        "{what}: the command counted as a child: {children}"
    );
    assert_eq!(report.high_water_marks.missing, None, "{what}");
    assert_eq!(report.high_water_marks.unseen, 0, "{what}");
}

/// Holds 300 MiB, then `exec`s `sleep`.
const EXEC_AFTER_PEAK: &str = "import os, time; b = b'x' * (300 << 20); time.sleep(0.2); \
                               os.execvp('sleep', ['sleep', '0.3'])";

/// The Python interpreter itself: a shim on PATH (pyenv) would reap children of its own.
fn python() -> String {
    let python = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    String::from_utf8(python.stdout).unwrap().trim().to_owned()
}

/// A command that peaks, then `exec`s a small program: its exit record has the last
/// program's memory alone (a bound of 21 MiB, an own peak of 3 MiB, for `wait4`'s 320),
/// its rusage the peak of every program it ran.
#[test]
fn a_command_that_execs_after_its_peak_keeps_that_peak() {
    let _serial = serial();
    let python = python();
    let argv = [python.as_str(), "-c", EXEC_AFTER_PEAK];
    let truth = wait4_maxrss(&argv);
    assert!(truth >= 300 * MIB, "{truth}");
    let (code, _, report) = run(&["--sample-interval", "60"], &argv, &[]);
    assert_eq!(code, Some(0));
    assert_bounds("exec after the peak", &report, truth);
    assert_own_peak("exec after the peak", &report, truth);
}

/// The same program run by a shell: its exit record, which has the last program's
/// memory alone, is all that counts it (a bound of 11.5 MiB for `wait4`'s 320). The
/// shell's exit figure, which has the peaks of the children it waited for, says that the
/// bound is none: the figure is "at least" that peak.
#[test]
fn a_grandchild_that_execs_after_its_peak_leaves_no_bound_below_it() {
    let _serial = serial();
    let script = format!("{} -c \"{EXEC_AFTER_PEAK}\"; true", python());
    let argv = ["sh", "-c", script.as_str()];
    let truth = wait4_maxrss(&argv);
    assert!(truth >= 300 * MIB, "{truth}");
    let (code, _, report) = run(&["--sample-interval", "60"], &argv, &[]);
    assert_eq!(code, Some(0));
    let h = &report.high_water;
    assert_eq!(h.peak_tree_rss_bound_bytes, None, "{h:?}");
    let least = h.peak_tree_rss_at_least_bytes.unwrap();
    assert!(
        least as f64 >= truth as f64 * 0.98,
        "at least {least} for {truth}"
    );
    assert!(report.high_water_marks.unseen >= 1);
}

#[test]
fn a_short_threaded_commands_own_exact_peak_is_its_exit_maxrss() {
    let _serial = serial();
    // Each thread holds its 50 MiB until all four do (a barrier), so the peak is the
    // same in every run however the threads are scheduled on a loaded machine.
    let script = "import threading, time\n\
                  ready = threading.Barrier(4)\n\
                  def work():\n    b = b'x' * (50 << 20)\n    ready.wait()\n    time.sleep(0.2)\n\
                  threads = [threading.Thread(target=work) for _ in range(4)]\n\
                  for t in threads: t.start()\n\
                  for t in threads: t.join()";
    let argv = ["python3", "-c", script];
    let truth = wait4_maxrss(&argv);
    assert!(truth >= 200 * MIB, "{truth}");
    let (code, _, report) = run(&[], &argv, &[]);
    assert_eq!(code, Some(0));
    assert!(report.wall_seconds < 5.0, "{}", report.wall_seconds);
    assert_own_peak("0.5 s threaded command", &report, truth);
}

#[test]
fn a_small_commands_exact_peak_is_not_the_spawn_floor() {
    let _serial = serial();
    let time = std::path::Path::new("/usr/bin/time");
    if !time.exists() {
        cannot_run("small command", "no /usr/bin/time for the ground truth");
        return;
    }
    let dir = TempDir::new("small");
    let big = dir.path().join("big");
    let noise: Vec<u8> = (0..16u32 << 20)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    std::fs::write(&big, noise).unwrap();
    let gzip = |keep: &str| {
        let _ = std::fs::remove_file(dir.path().join("big.gz"));
        vec![
            "gzip".to_owned(),
            keep.to_owned(),
            big.to_str().unwrap().to_owned(),
        ]
    };
    let argv = gzip("-k");
    let timed = Command::new(time)
        .args(["-f", "%M"])
        .args(&argv)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let truth: u64 = String::from_utf8_lossy(&timed.stderr)
        .trim()
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("{timed:?}"));
    let argv = gzip("-k");
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let (code, _, report) = run(&[], &argv, &[]);
    assert_eq!(code, Some(0));
    let floor = report.spawn_floor_bytes.unwrap_or(0);
    if !report.high_water_marks.exit_records {
        cannot_run(
            "small command",
            "no exit records (taskstats needs CAP_NET_ADMIN)",
        );
        return;
    }
    let own = report.high_water.peak_parent_hwm_bytes.unwrap();
    eprintln!(
        "gzip: own {} KiB, /usr/bin/time {truth} KiB, floor {} KiB",
        own >> 10,
        floor >> 10
    );
    // /usr/bin/time's figure holds its own memory at the fork, a few hundred KiB;
    // the kernel's per-CPU RSS batching adds up to 256 KiB per CPU.
    assert!(
        own <= (truth << 10) + MIB,
        "own {own} above /usr/bin/time's {truth} KiB"
    );
    assert!(
        floor == 0 || own < floor || truth << 10 >= floor,
        "the spawn floor {floor} hid {own}"
    );
    let bound = report.high_water.peak_tree_rss_bound_bytes.unwrap();
    assert!(
        bound <= own.max(report.peaks.peak_tree_rss_bytes.unwrap()) + MIB,
        "{:?}",
        report.high_water
    );
}

#[test]
fn a_child_spike_shorter_than_one_sample_is_in_the_bound() {
    let _serial = serial();
    // `; true` keeps the shell from exec-ing python: the spike is its child's.
    let argv = [
        "sh",
        "-c",
        "python3 -c \"b = b'x' * (150 << 20); import time; time.sleep(0.15)\"; true",
    ];
    let truth = wait4_maxrss(&argv);
    assert!(truth >= 150 * MIB, "{truth}");
    // Shorter than one sample even on a slow machine.
    let (code, _, report) = run(&["--sample-interval", "10"], &argv, &[]);
    assert_eq!(code, Some(0));
    assert_bounds("child spike", &report, truth);
}

#[test]
fn a_threaded_burst_shorter_than_one_sample_is_in_the_bound() {
    let _serial = serial();
    let script = "import threading, time\n\
                  def work():\n    b = b'x' * (50 << 20)\n    time.sleep(0.5)\n\
                  threads = [threading.Thread(target=work) for _ in range(4)]\n\
                  for t in threads: t.start()\n\
                  for t in threads: t.join()";
    let argv = ["python3", "-c", script];
    let truth = wait4_maxrss(&argv);
    assert!(truth >= 200 * MIB, "{truth}");
    let (code, _, report) = run(&["--sample-interval", "10"], &argv, &[]);
    assert_eq!(code, Some(0));
    assert_bounds("threaded burst", &report, truth);
}

#[test]
fn a_daemon_grandchild_outliving_the_command_keeps_the_bound_above_the_sampled_peak() {
    let _serial = serial();
    // The subshell exits at once: its python is re-parented to stemmon (the subreaper),
    // says through the FIFO that it holds 100 MiB, and holds it for 1.5 s more, after
    // the command has exited.
    let dir = TempDir::new("daemon");
    let fifo = dir.path().join("held");
    let argv = [
        "sh",
        "-c",
        "mkfifo \"$FIFO\"; (python3 -c \"import os, time; b = b'x' * (100 << 20); \
         open(os.environ['FIFO'], 'w').close(); time.sleep(1.5)\" \
         </dev/null >/dev/null 2>&1 &); read _ < \"$FIFO\" || true",
    ];
    let fifo = fifo.to_str().unwrap();
    let (code, _, report) = run(&["--sample-interval", "1"], &argv, &[("FIFO", fifo)]);
    assert_eq!(code, Some(0));
    let sampled = report.peaks.peak_tree_rss_bytes.unwrap();
    let bound = bound(&report);
    eprintln!(
        "daemon grandchild: bound {} MiB, sampled {} MiB",
        bound / MIB,
        sampled / MIB
    );
    assert!(sampled >= 100 * MIB, "sampled {sampled}: {report:?}");
    assert!(bound >= sampled, "bound {bound} < sampled {sampled}");
}

#[test]
fn a_process_pools_bound_is_at_least_the_sum_seen_sampled() {
    let _serial = serial();
    let argv = [
        "sh",
        "-c",
        "for i in 1 2 3 4; do python3 -c \"import time; b = b'x' * (64 << 20); \
         time.sleep(1.5)\" & done; wait",
    ];
    let (code, _, report) = run(&["--sample-interval", "0.2"], &argv, &[]);
    assert_eq!(code, Some(0));
    let sampled = report.peaks.peak_tree_rss_bytes.unwrap();
    let bound = bound(&report);
    eprintln!(
        "process pool: bound {} MiB, sampled {} MiB",
        bound / MIB,
        sampled / MIB
    );
    assert!(sampled >= 4 * 60 * MIB, "sampled {sampled}");
    assert!(bound >= sampled, "bound {bound} < sampled {sampled}");
}

/// Holds 300 MiB, frees it, waits for samples, then prints its own `ru_maxrss` (KiB).
const SELF_VIEW: &str = "import resource, time\n\
                         b = b'x' * (300 << 20)\n\
                         time.sleep(0.3)\n\
                         del b\n\
                         time.sleep(1.0)\n\
                         print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)";

fn self_view(options: &[&str], env: &[(&str, &str)]) -> (u64, Report) {
    let mut all = vec!["--sample-interval", "0.1"];
    all.extend_from_slice(options);
    let (code, stdout, report) = run(&all, &["python3", "-c", SELF_VIEW], env);
    assert_eq!(code, Some(0), "{stdout}");
    let kib: u64 = stdout.trim().parse().expect("ru_maxrss printed");
    (kib * 1024, report)
}

#[test]
fn the_observer_switch_leaves_the_programs_own_peak_alone() {
    let _serial = serial();
    // By default `stemmon run` reads the marks without resetting them: the program's
    // own `ru_maxrss` is true, and the exact figures are still there.
    let (seen, report) = self_view(&[], &[]);
    assert!(seen >= 300 * MIB, "the program saw {seen}");
    assert!(report.high_water_marks.enabled && !report.high_water_marks.resets);
    let bound = report.high_water.peak_tree_rss_bound_bytes.unwrap();
    assert!(bound >= 300 * MIB, "bound {bound}");
    // With `--high-water-marks` the resets lower what the program sees of itself ...
    let (seen, report) = self_view(&["--high-water-marks"], &[]);
    assert!(report.high_water_marks.resets);
    assert!(seen < 300 * MIB, "the resets should show: {seen}");
    // ... and the flag or the variable turns the marks off altogether.
    for (options, env) in [
        (&["--no-high-water-marks"][..], &[][..]),
        (&[][..], &[("STEMMON_HIGH_WATER_MARKS", "0")][..]),
    ] {
        let (seen, report) = self_view(options, env);
        assert!(
            seen >= 300 * MIB,
            "{options:?} {env:?}: the program saw {seen}"
        );
        assert!(!report.high_water_marks.enabled, "{options:?} {env:?}");
        assert_eq!(report.high_water.peak_tree_rss_bound_bytes, None);
    }
}

#[test]
fn the_exit_code_is_in_the_report_and_a_failure_is_its_error() {
    let _serial = serial();
    let (code, _, report) = run(&[], &["sh", "-c", "exit 3"], &[]);
    assert_eq!(code, Some(3));
    assert_eq!(report.exit_code, Some(3));
    assert_eq!(report.error.as_deref(), Some("exit 3"));
    let (code, _, report) = run(&[], &["true"], &[]);
    assert_eq!(code, Some(0));
    assert_eq!(report.exit_code, Some(0));
    assert_eq!(report.error, None);
    let (code, _, report) = run(&[], &["sh", "-c", "kill -9 $$"], &[]);
    assert_eq!(code, Some(137));
    assert_eq!(report.exit_code, Some(137));
    assert_eq!(report.error.as_deref(), Some("SIGKILL"));
}

/// The kernel's peak of the cgroup at `dir` (v2 `memory.peak`, v1 `max_usage_in_bytes`).
fn cgroup_peak(dir: &str, version: u8) -> Option<u64> {
    let name = if version == 2 {
        "memory.peak"
    } else {
        "memory.max_usage_in_bytes"
    };
    std::fs::read_to_string(std::path::Path::new(dir).join(name))
        .ok()?
        .trim()
        .parse()
        .ok()
}

#[test]
fn the_runs_cgroup_peak_is_not_the_cgroups_lifetime_peak() {
    let _serial = serial();
    let small = [
        "python3",
        "-c",
        "import time; b = b'x' * (32 << 20); time.sleep(0.5)",
    ];
    // Which cgroup a run of this program reads, from a run of its own.
    let (_, _, probe) = run(&["--sample-interval", "0.1"], &small, &[]);
    let Some(cgroup) = probe.cgroup else {
        cannot_run(
            "the_runs_cgroup_peak_is_not_the_cgroups_lifetime_peak",
            "no memory cgroup can be read",
        );
        return;
    };
    // Raise the cgroup's lifetime peak well above anything the run charges.
    let status = Command::new("python3")
        .args(["-c", "b = b'x' * (512 << 20)"])
        .status()
        .unwrap();
    assert!(status.success());
    let Some(before) = cgroup_peak(&cgroup.path, cgroup.version) else {
        cannot_run(
            "the_runs_cgroup_peak_is_not_the_cgroups_lifetime_peak",
            "the cgroup has no peak file",
        );
        return;
    };
    let (code, _, report) = run(&["--sample-interval", "0.1"], &small, &[]);
    assert_eq!(code, Some(0));
    let run_peak = report.high_water.peak_cgroup_memory_bytes.unwrap();
    let end = report.cgroup.as_ref().unwrap();
    assert_eq!(end.path, cgroup.path, "the same cgroup");
    let lifetime = end.memory_peak_bytes.unwrap();
    eprintln!(
        "cgroup: run's peak {} MiB, lifetime peak {} MiB (before the run {} MiB)",
        run_peak / MIB,
        lifetime / MIB,
        before / MIB
    );
    assert!(run_peak <= lifetime, "{run_peak} > {lifetime}");
    if lifetime == before {
        // The kernel's peak did not rise while the run was open: the run's figure is a
        // charge it read, below the 512 MiB spike that made the lifetime peak.
        assert!(
            run_peak < before,
            "{run_peak} is the lifetime peak {before}"
        );
    }
}
