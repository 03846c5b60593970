//! `#[monitor_main]` end to end: the fixture binaries in `tests/fixtures/` run as real
//! processes; their reports, live log lines, exit codes and environment overrides are
//! checked here.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use stemmon::Report;
use stemmon_suite::read_report;
use stemmon_suite::{temp_dir, TempDir, MIB};

const OK: &str = env!("CARGO_BIN_EXE_fixture-main-ok");
const ERR: &str = env!("CARGO_BIN_EXE_fixture-main-err");
const PANIC: &str = env!("CARGO_BIN_EXE_fixture-main-panic");
const EXIT_CODE: &str = env!("CARGO_BIN_EXE_fixture-main-exit-code");
const TOKIO: &str = env!("CARGO_BIN_EXE_fixture-main-tokio");

/// A fixture run: its output, and where its report was asked to go.
struct Run {
    output: Output,
    report_path: PathBuf,
    _dir: TempDir,
}

impl Run {
    /// Runs `binary` in a fresh directory named `name`, with `STEMMON_OUTPUT` pointing
    /// into it and `env` on top. Inherited `STEMMON_*` variables are removed.
    fn new(binary: &str, name: &str, env: &[(&str, &str)]) -> Run {
        let dir = temp_dir(&format!("main-attr-{name}"));
        let report_path = dir.join("report.json");
        let mut command = fixture(binary, &dir);
        command.env("STEMMON_OUTPUT", &report_path);
        command.envs(env.iter().copied());
        Run {
            output: command.output().expect("run the fixture"),
            report_path,
            _dir: dir,
        }
    }

    fn code(&self) -> Option<i32> {
        self.output.status.code()
    }

    fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }

    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }

    /// The `[stemmon]` lines of stderr.
    fn log_lines(&self) -> Vec<String> {
        self.stderr()
            .lines()
            .filter(|line| line.starts_with("[stemmon]"))
            .map(str::to_owned)
            .collect()
    }

    fn report(&self) -> Report {
        read_report(&self.report_path)
    }
}

fn fixture(binary: &str, dir: &Path) -> Command {
    let mut command = stemmon_suite::fixture_command(binary);
    command.current_dir(dir);
    command
}

fn no_temporaries_beside(path: &Path) {
    let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".tmp"))
        .collect();
    assert!(names.is_empty(), "temporary files left: {names:?}");
}

#[test]
fn an_ok_main_logs_its_run_and_writes_a_finished_report() {
    let run = Run::new(OK, "ok", &[]);
    assert_eq!(run.code(), Some(0), "stderr: {}", run.stderr());
    // The log is on stderr: stdout is the program's alone.
    assert_eq!(run.stdout(), "total 499500\n");
    let lines = run.log_lines();
    assert!(
        lines[0].starts_with("[stemmon] started; elapsed="),
        "{lines:?}"
    );
    let last = lines.last().unwrap();
    assert!(
        last.starts_with("[stemmon] finished; elapsed="),
        "{lines:?}"
    );
    assert!(last.contains("; peak RSS="), "{last}");
    // `log_interval = 0.1` over a 0.4 s stage: periodic lines while `fit` runs.
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("[stemmon] running;") && l.contains("stage=fit;")),
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("[stemmon] completed fit (")),
        "{lines:?}"
    );

    let report = run.report();
    assert!(!report.running);
    assert_eq!(report.error, None);
    assert_eq!(report.sample_interval, 0.05);
    assert!(report.wall_seconds >= 0.4, "{}", report.wall_seconds);
    assert!(report.samples >= 3, "{} samples", report.samples);
    let load = report.stage("load").unwrap();
    let fit = report.stage("fit").unwrap();
    assert_eq!(
        (load.calls, load.errors, fit.calls, fit.errors),
        (1, 0, 1, 0)
    );
    assert!(fit.wall_seconds >= 0.4, "{}", fit.wall_seconds);
    no_temporaries_beside(&run.report_path);
}

#[test]
fn an_err_from_main_is_the_report_error_and_the_exit_code_stays_1() {
    let run = Run::new(ERR, "err", &[]);
    assert_eq!(run.code(), Some(1));
    // What std prints for an `Err` from main, as without the attribute.
    assert!(
        run.stderr()
            .contains("Error: ParseIntError { kind: InvalidDigit }"),
        "{}",
        run.stderr()
    );
    assert!(!run.stdout().contains("unreachable"));
    let lines = run.log_lines();
    assert!(
        lines
            .last()
            .unwrap()
            .starts_with("[stemmon] failed (ParseIntError); elapsed="),
        "{lines:?}"
    );
    let report = run.report();
    assert!(!report.running);
    assert_eq!(report.error.as_deref(), Some("ParseIntError"));
    let parse = report.stage("parse").unwrap();
    assert_eq!((parse.calls, parse.errors), (1, 1));
    assert_eq!(parse.error.as_deref(), Some("ParseIntError"));
}

#[test]
fn a_panicking_main_leaves_a_complete_report_and_the_panic_goes_on() {
    let run = Run::new(PANIC, "panic", &[("RUST_BACKTRACE", "0")]);
    assert_eq!(run.code(), Some(101));
    assert!(
        run.stderr().contains("fixture panic at step 3"),
        "{}",
        run.stderr()
    );
    assert!(run.stdout().contains("before the panic\n"));
    let lines = run.log_lines();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("[stemmon] failed explode (panic);")),
        "{lines:?}"
    );
    assert!(
        lines
            .last()
            .unwrap()
            .starts_with("[stemmon] failed (panic); elapsed="),
        "{lines:?}"
    );
    let report = run.report();
    assert!(!report.running, "the report was finalized, not a snapshot");
    assert_eq!(report.error.as_deref(), Some("panic"));
    assert!(report.latest_sample.is_some());
    let explode = report.stage("explode").unwrap();
    assert_eq!((explode.calls, explode.errors), (1, 1));
    assert_eq!(explode.error.as_deref(), Some("panic"));
    no_temporaries_beside(&run.report_path);
}

#[test]
fn an_exit_code_from_main_is_kept_and_is_not_an_error() {
    let run = Run::new(EXIT_CODE, "exit-code", &[]);
    assert_eq!(run.code(), Some(3));
    assert!(run
        .log_lines()
        .last()
        .unwrap()
        .starts_with("[stemmon] finished;"));
    let report = run.report();
    assert_eq!(report.error, None);
    assert_eq!(report.stage("check").unwrap().calls, 1);
}

#[test]
fn a_tokio_main_records_async_stages_across_their_awaits() {
    let run = Run::new(TOKIO, "tokio", &[]);
    assert_eq!(run.code(), Some(0), "stderr: {}", run.stderr());
    assert!(run.stdout().contains("total 150\n"));
    let lines = run.log_lines();
    assert!(lines[0].starts_with("[stemmon] started;"), "{lines:?}");
    assert!(lines.last().unwrap().starts_with("[stemmon] finished;"));
    let report = run.report();
    assert_eq!(report.error, None);
    let download = report.stage("download").unwrap();
    assert_eq!((download.calls, download.errors), (2, 0));
    // 100 ms and 50 ms of sleeping: the stage spans the awaits.
    assert!(download.wall_seconds >= 0.15, "{}", download.wall_seconds);
    assert!(download.max_wall_seconds >= 0.1);
    assert_eq!(report.stage("summarize").unwrap().calls, 1);
}

#[test]
fn without_stemmon_output_the_attribute_output_path_is_used() {
    let dir = temp_dir("main-attr-own-output");
    let output = fixture(EXIT_CODE, &dir).output().unwrap();
    assert_eq!(output.status.code(), Some(3));
    // `fixture-main-exit-code` has no `output` key: no file at all.
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);

    let output = fixture(OK, &dir).output().unwrap();
    assert!(output.status.success());
    let report = read_report(&dir.join("fixture-report.json"));
    assert_eq!(report.stage("fit").unwrap().calls, 1);
}

#[test]
fn stemmon_log_interval_none_turns_the_log_off_and_still_writes_the_report() {
    let run = Run::new(OK, "log-none", &[("STEMMON_LOG_INTERVAL", "none")]);
    assert!(run.output.status.success());
    assert_eq!(run.log_lines(), Vec::<String>::new());
    assert_eq!(run.stdout(), "total 499500\n");
    let report = run.report();
    assert!(!report.running);
    assert_eq!(report.stage("fit").unwrap().calls, 1);
}

#[test]
fn stemmon_disable_runs_without_a_monitor() {
    let run = Run::new(OK, "disable", &[("STEMMON_DISABLE", "1")]);
    assert!(run.output.status.success(), "{}", run.stderr());
    assert_eq!(run.stdout(), "total 499500\n");
    assert!(!run.report_path.exists());
    assert_eq!(
        std::fs::read_dir(run.report_path.parent().unwrap())
            .unwrap()
            .count(),
        0,
        "no file of any name"
    );

    // The `Err` of main is untouched too.
    let run = Run::new(ERR, "disable-err", &[("STEMMON_DISABLE", "1")]);
    assert_eq!(run.code(), Some(1));
    assert_eq!(run.stdout(), "");
    assert!(!run.report_path.exists());
}

#[test]
fn stemmon_environment_values_override_the_attribute() {
    let run = Run::new(
        OK,
        "env-override",
        &[
            ("STEMMON_SAMPLE_INTERVAL", "0.02"),
            ("STEMMON_LOG_INTERVAL", "60"),
        ],
    );
    assert!(run.output.status.success());
    assert_eq!(run.report().sample_interval, 0.02);
    // A 60 s log interval: no periodic line during the 0.4 s run (the attribute says 0.1).
    let lines = run.log_lines();
    assert!(
        !lines.iter().any(|l| l.starts_with("[stemmon] running;")),
        "{lines:?}"
    );
    assert!(lines.last().unwrap().starts_with("[stemmon] finished;"));
}

#[test]
fn bad_environment_values_are_reported_and_the_attribute_values_used() {
    let run = Run::new(
        OK,
        "env-bad",
        &[
            ("STEMMON_SAMPLE_INTERVAL", "fast"),
            ("STEMMON_LOG_INTERVAL", "-1"),
        ],
    );
    assert!(run.output.status.success());
    let stderr = run.stderr();
    assert!(
        stderr.contains("ignoring STEMMON_SAMPLE_INTERVAL=\"fast\": expected a number of seconds from 0.001 to 86400")
            && stderr.contains("ignoring STEMMON_LOG_INTERVAL=\"-1\": expected a number of seconds from 0.001 to 86400, or none"),
        "{stderr}"
    );
    assert_eq!(run.report().sample_interval, 0.05);
    // The attribute's `log_interval = 0.1`, not the default 30 s: periodic lines appear.
    assert!(
        run.log_lines()
            .iter()
            .any(|l| l.starts_with("[stemmon] running;")),
        "{:?}",
        run.log_lines()
    );
}

/// Values that overflowed a `Duration` or an `Instant` (a panic in the sampler thread
/// that silently stopped sampling), that turned the monitor off (`1e-12`), or that were
/// ignored without a word: each gets one warning naming it, and the run goes on with
/// the attribute's settings.
#[test]
fn out_of_range_environment_values_never_panic_and_get_one_warning_each() {
    for value in ["1e19", "1e308", "1e-12", "NaN", "inf", ""] {
        let run = Run::new(
            OK,
            "env-range",
            &[
                ("STEMMON_SAMPLE_INTERVAL", value),
                ("STEMMON_LOG_INTERVAL", value),
                ("STEMMON_HIGH_WATER_MARKS", value),
            ],
        );
        let stderr = run.stderr();
        assert!(run.output.status.success(), "{value}: {stderr}");
        assert!(!stderr.contains("panicked"), "{value}: {stderr}");
        for name in [
            "STEMMON_SAMPLE_INTERVAL",
            "STEMMON_LOG_INTERVAL",
            "STEMMON_HIGH_WATER_MARKS",
        ] {
            let warning = format!("[stemmon] warning: ignoring {name}={value:?}: expected ");
            assert_eq!(stderr.matches(&warning).count(), 1, "{value}: {stderr}");
        }
        assert_eq!(stderr.matches("warning").count(), 3, "{value}: {stderr}");
        let report = run.report();
        assert!(!report.running);
        assert_eq!(report.sample_interval, 0.05, "{value}");
        // Sampling went on at the attribute's 0.05 s over the 0.4 s stage.
        assert!(report.samples >= 4, "{value}: {} samples", report.samples);
        assert!(
            run.log_lines()
                .iter()
                .any(|l| l.starts_with("[stemmon] running;")),
            "{value}"
        );
    }
}

#[test]
fn an_empty_stemmon_output_is_reported_and_the_attribute_path_used() {
    let dir = temp_dir("main-attr-empty-output");
    let output = fixture(OK, &dir)
        .env("STEMMON_OUTPUT", "")
        .output()
        .unwrap();
    assert!(output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        stderr
            .matches("[stemmon] warning: ignoring STEMMON_OUTPUT=\"\": expected the path of a file")
            .count(),
        1,
        "{stderr}"
    );
    let report = read_report(&dir.join("fixture-report.json"));
    assert_eq!(report.stage("fit").unwrap().calls, 1);
}

/// `cargo run --example quickstart`, as a user would, from this test: the example is
/// built by cargo (a no-op when `cargo test` built it already) and run in a fresh
/// directory, where it writes `target/stemmon/quickstart.json`.
#[test]
fn the_quickstart_example_reports_its_stages_and_its_workers() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let build = Command::new(cargo)
        .args([
            "build",
            "--quiet",
            "--example",
            "quickstart",
            "--message-format=json",
        ])
        .current_dir(workspace)
        .output()
        .expect("run cargo");
    assert!(
        build.status.success(),
        "{}",
        String::from_utf8_lossy(&build.stderr)
    );
    let messages = String::from_utf8_lossy(&build.stdout);
    let executable = messages
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|m| m["target"]["name"] == "quickstart")
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .expect("cargo names the quickstart executable");

    let dir = temp_dir("quickstart");
    let started = std::time::Instant::now();
    let output = fixture(executable.to_str().unwrap(), &dir)
        .output()
        .unwrap();
    let seconds = started.elapsed().as_secs_f64();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(seconds < 15.0, "{seconds} s");
    assert!(
        !stdout.contains("[stemmon]"),
        "the log is on stderr: {stdout}"
    );
    assert!(stderr.starts_with("[stemmon] started;"), "{stderr}");
    assert!(stderr.contains("[stemmon] completed workers ("), "{stderr}");
    assert!(stderr
        .trim_end()
        .lines()
        .last()
        .unwrap()
        .starts_with("[stemmon] finished;"));

    let report = read_report(&dir.join("target/stemmon/quickstart.json"));
    assert_eq!(report.error, None);
    for path in ["fit", "predict", "workers"] {
        assert_eq!(report.stage(path).unwrap().calls, 1, "{path}");
    }
    let fit = report.stage("fit").unwrap();
    assert!(fit.peaks.peak_parent_rss_bytes.unwrap() >= 190 * MIB);
    // The three workers: four processes in the tree, and their memory as children.
    let workers = report.stage("workers").unwrap();
    assert_eq!(report.peak_process_count, 4);
    assert_eq!(workers.peak_process_count, 4);
    assert!(
        workers.peaks.peak_children_rss_bytes.unwrap() >= 3 * 60 * MIB,
        "{:?}",
        workers.peaks
    );
    assert!(report.peaks.peak_children_rss_bytes.unwrap() >= 3 * 60 * MIB);
}

/// The settings table's one message for an interval out of range, on every surface: the
/// environment here (the command's flag in stemmon-cli/tests/run.rs, the attribute in
/// tests/ui, the builder in tests/report.rs).
#[test]
fn an_interval_out_of_range_is_warned_about_naming_the_range() {
    for value in ["0.0005", "86401"] {
        let run = Run::new(OK, "env-bounds", &[("STEMMON_SAMPLE_INTERVAL", value)]);
        let expected = format!(
            "[stemmon] warning: ignoring STEMMON_SAMPLE_INTERVAL={value:?}: expected a number \
             of seconds from 0.001 to 86400; the program's own setting stands"
        );
        assert!(run.stderr().contains(&expected), "{}", run.stderr());
        assert_eq!(run.report().sample_interval, 0.05);
    }
}
