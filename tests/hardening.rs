//! A final report whatever ends the program, and nothing of the user's clobbered: real
//! fixture processes ended by SIGTERM, SIGINT, `process::exit` and `kill -9`, reports
//! written to real device nodes and FIFOs, and a program that changes directory.
#![cfg(unix)]

use std::io::{BufRead, BufReader};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};
use stemmon::Report;
use stemmon_suite::{cannot_run, read_report, temp_dir, TempDir};

const ENDINGS: &str = env!("CARGO_BIN_EXE_fixture-main-endings");
const OUTPUT: &str = env!("CARGO_BIN_EXE_fixture-output");
/// Signal numbers, the same on every Linux architecture and on the BSDs.
const SIGINT: i32 = 2;
const SIGTERM: i32 = 15;

/// A command for `binary` with no inherited `STEMMON_*` setting.
fn command(binary: &str) -> Command {
    stemmon_suite::fixture_command(binary)
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Waits for `child` at most `limit`; kills it and fails if it is still running then.
fn wait_at_most(child: &mut Child, limit: Duration) -> ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the process did not end within {limit:?}: it hangs");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Polls the report `child` writes at `path` until `done` holds for it (writes are
/// atomic: what reads is whole); fails if `child` ends first or after 20 s.
fn wait_for_report(
    child: &mut Child,
    path: &Path,
    what: &str,
    done: impl Fn(&Report) -> bool,
) -> Report {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the program ended ({status}) before {what}");
        }
        let report = std::fs::read_to_string(path)
            .ok()
            .and_then(|text| serde_json::from_str::<Report>(&text).ok());
        if let Some(report) = report.filter(&done) {
            return report;
        }
        assert!(Instant::now() < deadline, "not within 20 s: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Reads stdout up to the line `ready`.
fn wait_ready(child: &mut Child) {
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready", "the fixture did not start");
}

fn send(signal: &str, pid: u32) {
    let status = Command::new("kill")
        .args([format!("-{signal}"), pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
}

// ---------------------------------------------------------------------------------------
// Signals and process::exit

/// `fixture-main-endings wait` with SIGINT and SIGTERM at their default action, as in a
/// terminal, even when this test runs where SIGINT is ignored (a background job of a
/// script): through GNU `env --default-signal` where it exists.
fn endings_wait() -> Command {
    let resets = Command::new("env")
        .args(["--default-signal=INT,TERM", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if resets {
        let mut command = command("env");
        command.args(["--default-signal=INT,TERM", ENDINGS, "wait"]);
        command
    } else {
        let mut command = command(ENDINGS);
        command.arg("wait");
        command
    }
}

/// Starts `fixture-main-endings wait`, sends `signal` once it is inside its stage, and
/// returns how it ended, its stderr and its report.
fn end_by(signal: &str, name: &str, env: &[(&str, &str)]) -> (ExitStatus, String, Report) {
    let dir = temp_dir(name);
    let report_path = dir.join("report.json");
    let mut child = endings_wait()
        .env("STEMMON_OUTPUT", &report_path)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_ready(&mut child);
    std::thread::sleep(Duration::from_millis(300));
    let sent = Instant::now();
    send(signal, child.id());
    let status = wait_at_most(&mut child, Duration::from_secs(20));
    let took = sent.elapsed();
    assert!(
        took < Duration::from_secs(5),
        "{took:?} from the signal to the end"
    );
    let mut stderr = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    (status, stderr, read_report(&report_path))
}

fn assert_ended_by(
    signal: i32,
    name: &str,
    (status, stderr, report): (ExitStatus, String, Report),
) {
    assert_eq!(
        status.signal(),
        Some(signal),
        "{status:?}: the default action must end the process\n{stderr}"
    );
    assert!(!report.running, "the report is final");
    assert_eq!(report.error.as_deref(), Some(name));
    let serve = report
        .stage("serve")
        .expect("the open stage is in the report");
    assert_eq!(serve.calls, 1);
    assert!(serve.wall_seconds >= 0.3, "{}", serve.wall_seconds);
    assert!(report.latest_sample.is_some());
    assert!(report.wall_seconds >= 0.3);
}

#[test]
fn sigterm_leaves_a_final_report_naming_it_and_the_process_dies_of_it() {
    let ended = end_by("TERM", "sigterm", &[]);
    let lines: Vec<&str> = ended
        .1
        .lines()
        .filter(|l| l.starts_with("[stemmon]"))
        .collect();
    assert!(
        lines
            .last()
            .is_some_and(|l| l.starts_with("[stemmon] failed (SIGTERM); elapsed=")),
        "{lines:?}"
    );
    assert_ended_by(SIGTERM, "SIGTERM", ended);
}

#[test]
fn sigterm_with_the_log_off_still_writes_the_report() {
    let ended = end_by("TERM", "sigterm-quiet", &[("STEMMON_LOG_INTERVAL", "none")]);
    assert!(!ended.1.contains("[stemmon] failed"), "{}", ended.1);
    assert_ended_by(SIGTERM, "SIGTERM", ended);
}

#[test]
fn sigint_leaves_a_final_report_naming_it_and_the_process_dies_of_it() {
    let ended = end_by("INT", "sigint", &[]);
    assert_ended_by(SIGINT, "SIGINT", ended);
}

/// A program started with SIGINT ignored (`cmd &` in a script, `nohup`) keeps ignoring
/// it: stemmon does not make Ctrl-C kill a job that was meant to survive it.
#[test]
fn a_signal_ignored_at_the_start_stays_ignored() {
    let dir = temp_dir("ignored");
    let report_path = dir.join("report.json");
    let mut child = command("sh")
        .args(["-c", "trap '' INT; exec \"$0\" wait", ENDINGS])
        .env("STEMMON_OUTPUT", &report_path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_ready(&mut child);
    let before = wait_for_report(&mut child, &report_path, "a first report", |_| true);
    send("INT", child.id());
    // The program goes on well past the signal: its report is rewritten half a second on.
    let later = before.wall_seconds + 0.5;
    let after = wait_for_report(&mut child, &report_path, "a report after SIGINT", |r| {
        r.wall_seconds >= later
    });
    assert!(after.running, "SIGINT finalized the report");
    send("TERM", child.id());
    let status = wait_at_most(&mut child, Duration::from_secs(20));
    assert_eq!(status.signal(), Some(SIGTERM));
    assert_eq!(read_report(&report_path).error.as_deref(), Some("SIGTERM"));
}

#[test]
fn process_exit_inside_a_stage_leaves_a_final_report_with_the_stage() {
    let dir = temp_dir("exit");
    let report_path = dir.join("report.json");
    let mut child = command(ENDINGS)
        .arg("exit")
        .env("STEMMON_OUTPUT", &report_path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = wait_at_most(&mut child, Duration::from_secs(20));
    assert_eq!(status.code(), Some(3));
    let output = child.wait_with_output().unwrap();
    assert!(!String::from_utf8_lossy(&output.stdout).contains("unreachable"));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr
            .lines()
            .last()
            .is_some_and(|l| l.starts_with("[stemmon] finished; elapsed=")),
        "{stderr}"
    );
    let report = read_report(&report_path);
    assert!(!report.running);
    assert_eq!(report.error, None);
    let work = report.stage("work").expect("the stage that called exit");
    assert_eq!(work.calls, 1);
    assert!(work.wall_seconds >= 0.1, "{}", work.wall_seconds);
    assert!(names(&dir) == ["report.json"], "{:?}", names(&dir));
}

// ---------------------------------------------------------------------------------------
// Output paths

/// `fixture-output <path> once`, in `dir`: its output and the `output_error` it printed.
fn write_once(dir: &Path, path: &Path) -> (Output, String) {
    let output = command(OUTPUT)
        .arg(path)
        .arg("once")
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let error = stdout
        .lines()
        .find_map(|l| l.strip_prefix("output_error="))
        .expect("the fixture prints output_error")
        .to_owned();
    (output, error)
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// `mknod <dir>/<name> c <major> <minor>`; `false` if the system does not allow it.
fn mknod(path: &Path, major: u32, minor: u32) -> bool {
    Command::new("mknod")
        .arg(path)
        .args(["c", &major.to_string(), &minor.to_string()])
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn device_nodes_are_written_into_never_replaced() {
    let test = "device_nodes_are_written_into_never_replaced";
    if !is_root() {
        cannot_run(
            test,
            "making device nodes (mknod) needs root; run the tests as root",
        );
        return;
    }
    let dir = temp_dir("devices");
    let null = dir.join("null");
    let full = dir.join("full");
    if !(mknod(&null, 1, 3) && mknod(&full, 1, 7)) {
        cannot_run(
            test,
            "mknod is not permitted here (a container without CAP_MKNOD?)",
        );
        return;
    }
    // Without the fix, root's rename replaced the node with a regular file.
    let (_, error) = write_once(&dir, &null);
    assert_eq!(error, "None", "writing into the null device succeeds");
    let (run, error) = write_once(&dir, &full);
    assert!(
        error.contains("could not write the report to") && error.contains("No space left"),
        "{error}"
    );
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(
        stderr.matches("[stemmon] warning: could not write").count(),
        1,
        "warned once: {stderr}"
    );
    for node in [&null, &full] {
        let kind = std::fs::symlink_metadata(node).unwrap().file_type();
        assert!(kind.is_char_device(), "{} was replaced", node.display());
    }
    assert_eq!(names(&dir), ["full", "null"], "no temporary file either");
}

#[test]
fn a_fifo_without_a_reader_is_an_output_error_and_stays_a_fifo() {
    let dir = temp_dir("fifo");
    let fifo = dir.join("report.json");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let started = Instant::now();
    let (_, error) = write_once(&dir, &fifo);
    assert!(started.elapsed() < Duration::from_secs(10), "no hang");
    assert!(error.contains("no process is reading the FIFO"), "{error}");
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
    assert_eq!(names(&dir), ["report.json"]);
}

#[test]
fn a_relative_output_stays_where_it_was_at_the_start_after_set_current_dir() {
    let dir = temp_dir("chdir");
    let (start, elsewhere) = (dir.join("start"), dir.join("elsewhere"));
    std::fs::create_dir_all(&start).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    let output = command(OUTPUT)
        .args(["out/report.json", "chdir"])
        .arg(&elsewhere)
        .current_dir(&start)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let report = read_report(&start.join("out/report.json"));
    assert!(!report.running);
    assert_eq!(report.stage("work").unwrap().calls, 1);
    assert_eq!(names(&elsewhere), Vec::<String>::new(), "no second report");
    assert_eq!(names(&start.join("out")), ["report.json"]);
}

/// Starts `fixture-output <path> spin` (a rewrite every millisecond) and kills it with
/// SIGKILL once its report exists with the stage and was rewritten `rewrites` more times
/// (seen as a later `wall_seconds`): a moment that varies with `rewrites`, not a sleep.
/// Returns its pid.
fn spin_and_kill(dir: &TempDir, path: &Path, rewrites: u32) -> u32 {
    let mut child = command(OUTPUT)
        .arg(path)
        .arg("spin")
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_ready(&mut child);
    let mut seen = wait_for_report(&mut child, path, "a report with the stage `spin`", |r| {
        r.stage("spin").is_some() && r.running
    })
    .wall_seconds;
    for _ in 0..rewrites {
        seen = wait_for_report(&mut child, path, "a rewritten report", |r| {
            r.running && r.wall_seconds > seen
        })
        .wall_seconds;
    }
    let pid = child.id();
    send("KILL", pid);
    let status = wait_at_most(&mut child, Duration::from_secs(10));
    assert_eq!(status.signal(), Some(9));
    pid
}

fn temporaries(dir: &Path) -> Vec<String> {
    names(dir)
        .into_iter()
        .filter(|n| n.ends_with(".tmp"))
        .collect()
}

#[test]
fn kill_9_while_rewriting_leaves_no_temporary_after_the_next_run() {
    let dir = temp_dir("kill-9");
    let path: PathBuf = dir.join("report.json");
    let kills = 20;
    let mut left = 0;
    for kill in 0..kills {
        // The report waited for is this run's: its first write (linked straight at the
        // name with O_TMPFILE), then rewrites until the kill, at a varying point.
        let _ = std::fs::remove_file(&path);
        spin_and_kill(&dir, &path, kill % 7);
        left += temporaries(&dir).len();
        // The last periodic report is whole.
        let report = read_report(&path);
        assert!(report.running);
        assert!(report.stage("spin").is_some());
    }
    // With O_TMPFILE a temporary name lives only between a linkat and a rename.
    eprintln!("kill -9 during rewrites: {left} temporary files seen after {kills} kills");
    let (_, error) = write_once(&dir, &path);
    assert_eq!(error, "None");
    assert_eq!(temporaries(&dir), Vec::<String>::new());
    assert_eq!(names(&dir), ["report.json"]);
    assert!(!read_report(&path).running);
}

#[test]
fn the_next_run_removes_a_dead_writers_temporaries_only() {
    let dir = temp_dir("stale");
    let path: PathBuf = dir.join("report.json");
    let dead = spin_and_kill(&dir, &path, 0);
    // What a kill between the link and the rename leaves, made certain here, beside
    // files that are not a dead writer's: a live writer's (this test's pid) and the
    // user's own.
    let own = [
        format!(".report.json.stemmon-{}-0.tmp", std::process::id()),
        ".report.json.tmp".to_owned(),
        "notes.stemmon-1-1.tmp".to_owned(),
    ];
    std::fs::write(dir.join(format!(".report.json.stemmon-{dead}-99.tmp")), "{").unwrap();
    for name in &own {
        std::fs::write(dir.join(name), "keep").unwrap();
    }
    let (_, error) = write_once(&dir, &path);
    assert_eq!(error, "None");
    let mut expected: Vec<String> = own.to_vec();
    expected.push("report.json".to_owned());
    expected.sort();
    assert_eq!(names(&dir), expected);
    assert!(!read_report(&path).running);
}

/// Unmounts a filesystem the test mounted, when dropped (also when the test fails).
struct Unmount(PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        let unmounted = Command::new("umount")
            .arg(&self.0)
            .status()
            .is_ok_and(|s| s.success());
        if !unmounted {
            // Still busy (a failed test's open file): detached now, freed when closed.
            let _ = Command::new("umount").arg("-l").arg(&self.0).status();
        }
    }
}

/// Fills the filesystem of `path` with the file `path`, until the disk is full.
fn fill(path: &Path) {
    use std::io::Write;
    let mut file = std::fs::File::create(path).unwrap();
    let chunk = vec![0x55u8; 64 << 10];
    loop {
        match file.write(&chunk) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(28) => break, // ENOSPC
            Err(e) => panic!("filling {}: {e}", path.display()),
        }
    }
}

#[test]
fn a_full_disk_is_an_output_error_and_the_final_report_lands_once_space_is_back() {
    let test = "a_full_disk_is_an_output_error_and_the_final_report_lands_once_space_is_back";
    if !is_root() {
        cannot_run(
            test,
            "mounting a small tmpfs needs root; run the tests as root",
        );
        return;
    }
    let _serial = stemmon_suite::serial();
    let dir = temp_dir("full-disk");
    let disk = dir.join("disk");
    std::fs::create_dir_all(&disk).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
        .arg(&disk)
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        cannot_run(
            test,
            "mount -t tmpfs is not permitted here (no CAP_SYS_ADMIN?)",
        );
        return;
    }
    let _unmount = Unmount(disk.clone());
    let path = disk.join("report.json");
    let monitor = stemmon::Monitor::builder()
        .current_thread_only()
        .sample_interval(Duration::from_millis(10))
        .log_interval(Some(Duration::from_millis(50)))
        .output(&path)
        .start()
        .unwrap();
    // The disk fills mid-run, once a first report is there.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !path.exists() {
        assert!(Instant::now() < deadline, "no first report within 20 s");
        std::thread::sleep(Duration::from_millis(5));
    }
    let before = read_report(&path);
    let filler = disk.join("filler");
    fill(&filler);
    let first = loop {
        if let Some(error) = monitor.summary().output_error {
            break error;
        }
        assert!(Instant::now() < deadline, "no failed write within 20 s");
        std::thread::sleep(Duration::from_millis(5));
    };
    assert!(
        first.starts_with("could not write the report to") && first.contains("No space left"),
        "{first}"
    );
    // Some more `running` lines, each a failed write: the first failure is the one kept.
    stemmon_suite::wait_for_samples(&monitor, 12);
    assert_eq!(monitor.summary().output_error.as_deref(), Some(&*first));
    let stale = read_report(&path);
    assert_eq!(stale.output_error, None, "a report written on a full disk?");
    assert!(stale.wall_seconds >= before.wall_seconds);

    // Space comes back: the final report lands, and says what failed on the way.
    std::fs::remove_file(&filler).unwrap();
    drop(monitor.stage("after").unwrap());
    let report = monitor.finish();
    assert_eq!(report.output_error.as_deref(), Some(&*first));
    let written = read_report(&path);
    assert!(!written.running, "the final report");
    assert_eq!(written.output_error.as_deref(), Some(&*first));
    assert_eq!(written.stage("after").map(|s| s.calls), Some(1));
    assert_eq!(names(&disk), ["report.json"], "no temporary file left");
}

/// A tmpfs of `size` mounted at `dir` for one test, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    /// `None` where this machine may not mount one (not root, no tmpfs).
    fn mount(dir: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(dir).unwrap();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size},mode=0700")])
            .arg("tmpfs")
            .arg(dir)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        mounted.then(|| Tmpfs(dir.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_disk_full_for_a_while_still_gets_the_next_write_and_the_final_report() {
    let dir = temp_dir("full-disk");
    let mount = dir.path().join("small");
    let Some(_tmpfs) = Tmpfs::mount(&mount, "64k") else {
        cannot_run(
            "a_disk_full_for_a_while",
            "cannot mount a 64 KiB tmpfs (needs root)",
        );
        return;
    };
    let report_path = mount.join("report.json");
    // Rewritten every 50 ms for 4 s: at the end the report is over half the disk.
    let mut child = command(OUTPUT)
        .arg(&report_path)
        .args(["for", "50", "4"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !report_path.exists() {
        assert!(Instant::now() < deadline, "no first report");
        std::thread::sleep(Duration::from_millis(5));
    }
    // Fill the disk to the last byte.
    let filler = mount.join("filler");
    {
        use std::io::Write;
        let mut file = std::fs::File::create(&filler).unwrap();
        let block = [0u8; 4096];
        while file.write_all(&block).is_ok() {}
        let _ = file.flush();
    }
    // Until a write fails: the monitor's one warning says so.
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let mut lines = stderr.lines();
    let warned = lines
        .by_ref()
        .map_while(Result::ok)
        .find(|line| line.contains("warning: could not write the report"));
    assert!(warned.is_some(), "no write failed while the disk was full");
    let while_full = read_report(&report_path);
    assert!(while_full.running, "the last whole report stays");
    std::fs::remove_file(&filler).unwrap();
    // The rest of stderr drains while the run goes on.
    let drain = std::thread::spawn(move || lines.map_while(Result::ok).collect::<Vec<_>>());
    let status = wait_at_most(&mut child, Duration::from_secs(60));
    let rest = drain.join().unwrap();
    assert!(status.success(), "{status}");
    // Each failure is warned once, and the last word on the report is what happened:
    // the final report landed.
    let warnings: Vec<&String> = rest.iter().filter(|l| l.contains("warning:")).collect();
    assert!(
        !warnings
            .iter()
            .any(|l| l.contains("could not write the report")),
        "the failure warned twice: {warnings:?}"
    );
    assert!(
        !rest.iter().any(|l| l.contains("not written")),
        "the final report landed: {rest:?}"
    );
    let said = warnings.last().expect("a word on the final report");
    assert!(
        said.contains(&format!(
            "the final report was written to {}",
            report_path.display()
        )) && said.contains("earlier write"),
        "{said}"
    );
    let last = read_report(&report_path);
    assert!(!last.running, "the final report landed");
    assert!(last.stage("work").is_some(), "{:?}", last.stages);
    let error = last.output_error.expect("the failure is on record");
    assert!(error.contains("No space left"), "{error}");
    // And the write right after the space came back landed too: the report on the
    // disk changed between the failure and the end (the final one replaced it).
    assert!(last.wall_seconds > while_full.wall_seconds);
    assert_eq!(names(&mount), ["report.json"], "no temporary file left");
}
