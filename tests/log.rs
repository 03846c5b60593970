//! The live log, read from the stderr of a real run: one line per event, on their
//! interval, whatever the stage names hold.

use std::process::Command;
use stemmon::Report;
use stemmon_suite::temp_dir;

#[test]
fn a_run_prints_one_flushed_line_per_event() {
    let dir = temp_dir("log");
    let path = dir.join("report.json");
    let run = Command::new(env!("CARGO_BIN_EXE_stemmon-log-lines"))
        .arg(&path)
        .output()
        .unwrap();
    assert!(run.status.success(), "{run:?}");
    // stdout stays the program's own.
    assert_eq!(String::from_utf8_lossy(&run.stdout), "");
    let stderr = String::from_utf8(run.stderr).unwrap();
    // Every line is a log line: the fixture's caught panic is silent.
    let lines: Vec<&str> = stderr.lines().collect();
    assert!(
        lines.iter().all(|l| l.starts_with("[stemmon] ")),
        "{stderr}"
    );
    let events: Vec<&str> = lines
        .iter()
        .map(|l| {
            let rest = l.strip_prefix("[stemmon] ").expect(l);
            &rest[..rest.find(';').unwrap()]
        })
        .collect();
    assert_eq!(events.first(), Some(&"started"));
    assert_eq!(events.last(), Some(&"finished"));
    // Running lines come on their own (their cadence is tested below with a longer run).
    assert!(events.contains(&"running"), "{events:?}");
    // The first completion of a stage is logged; later short ones are only aggregated.
    let load: Vec<_> = events
        .iter()
        .filter(|e| e.starts_with("completed load ("))
        .collect();
    assert_eq!(load.len(), 1, "{events:?}");
    // Both slept 120 ms: a busy machine may add to that, never take from it.
    let seconds = |prefix: &str| -> f64 {
        let event = events
            .iter()
            .find_map(|e| e.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("no `{prefix}` in {events:?}"));
        event.trim_end_matches("s)").parse().unwrap()
    };
    assert!(seconds("completed fit/inner (") >= 0.12, "{events:?}");
    assert!(seconds("completed fit (") >= 0.12, "{events:?}");
    assert!(events.contains(&"failed bad (panic)"), "{events:?}");
    // A line names the stage open at that moment: after fit/inner ends, fit is.
    let inner_done = lines
        .iter()
        .find(|l| l.contains("completed fit/inner"))
        .unwrap();
    assert!(inner_done.contains("; stage=fit; "), "{inner_done}");
    let fit_done = lines
        .iter()
        .find(|l| l.contains("completed fit ("))
        .unwrap();
    assert!(fit_done.contains("; stage=workflow; "), "{fit_done}");

    for line in &lines {
        let fields: Vec<&str> = line.split("; ").collect();
        let names: Vec<&str> = fields[1..]
            .iter()
            .map(|f| &f[..f.find('=').unwrap()])
            .collect();
        assert_eq!(
            names[..7],
            [
                "elapsed",
                "stage",
                "RSS",
                "RSS coverage",
                "peak RSS",
                "parent",
                "children"
            ],
            "{line}"
        );
        // Then, in 0.3, the live heap and the CPU in cores, where the report has them;
        // in 0.5, on the `started` line of a monitor that resets the marks, what that
        // does to the program's own figures.
        let mut extra: Vec<&str> = names[7..].to_vec();
        if line.starts_with("[stemmon] started;") {
            assert_eq!(extra.pop(), Some("marks"), "{line}");
            assert!(line.contains("see reset marks"), "{line}");
        }
        // Then, in 0.5, each measurement's series shown live (`fds`, `psi`, `gpu`), in
        // the field table's order, where the newest point has it.
        let live: Vec<&str> = stemmon_report::fields::SERIES
            .iter()
            .filter_map(|s| s.live)
            .collect();
        let measured = extra
            .iter()
            .position(|name| live.contains(name))
            .unwrap_or(extra.len());
        let shown = extra.split_off(measured);
        let mut order = live.iter();
        assert!(
            shown.iter().all(|name| order.any(|l| l == name)),
            "{line}: {shown:?} not in the table's order {live:?}"
        );
        assert!(
            [&[][..], &["heap"], &["cpu"], &["heap", "cpu"]].contains(&&extra[..]),
            "{line}"
        );
        assert!(fields[1].ends_with('s'), "{line}");
        assert!(
            fields[3].ends_with(" MiB") || fields[3].ends_with(" GiB"),
            "{line}"
        );
        assert!(fields[4].starts_with("RSS coverage=1/1"), "{line}");
    }
    let report: Report = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(report.stage("load").unwrap().calls, 3);
    assert!(!report.running);
}

const CADENCE: &str = env!("CARGO_BIN_EXE_fixture-main-cadence");

/// Runs `fixture-main-cadence <seconds>` with `env`; its stderr lines and its report.
fn cadence_run(name: &str, seconds: &str, env: &[(&str, &str)]) -> (Vec<String>, Report) {
    let dir = temp_dir(name);
    let path = dir.join("report.json");
    let run = Command::new(CADENCE)
        .arg(seconds)
        .env_remove("STEMMON_SAMPLE_INTERVAL")
        .env_remove("STEMMON_LOG_INTERVAL")
        .env_remove("STEMMON_DISABLE")
        .env("STEMMON_OUTPUT", &path)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert!(run.status.success(), "{run:?}");
    assert_eq!(String::from_utf8_lossy(&run.stdout), "");
    let stderr = String::from_utf8(run.stderr).unwrap();
    let report = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    (stderr.lines().map(str::to_owned).collect(), report)
}

/// The `elapsed` of each `running` line, in seconds.
fn running_at(lines: &[String]) -> Vec<f64> {
    lines
        .iter()
        .filter(|l| l.starts_with("[stemmon] running;"))
        .map(|l| {
            let elapsed = l.split("; elapsed=").nth(1).unwrap();
            elapsed[..elapsed.find('s').unwrap()].parse().unwrap()
        })
        .collect()
}

#[test]
fn running_lines_keep_a_quarter_second_interval() {
    let (lines, _) = cadence_run("cadence-quarter", "4.1", &[]);
    let at = running_at(&lines);
    // Ticks at 0.25, 0.50, ..., 4.00 s: 16, never more (10 or 11 when each deadline was
    // counted from the last line). A busy machine may make a line late, and a stall
    // skips the ticks it missed.
    assert!(
        (13..=16).contains(&at.len()),
        "{} lines at {at:?}",
        at.len()
    );
    // Each line is on a tick of its own, at or after it: a late line does not move the
    // next one off the grid.
    let ticks: Vec<u64> = at.iter().map(|s| ((s + 0.005) / 0.25) as u64).collect();
    assert!(
        ticks[0] >= 1 && ticks.windows(2).all(|w| w[0] < w[1]),
        "lines at {at:?} are not one per 0.25 s tick"
    );
}

#[test]
fn with_one_second_samples_and_lines_a_line_comes_every_second() {
    let (lines, report) = cadence_run(
        "cadence-second",
        "3.5",
        &[
            ("STEMMON_SAMPLE_INTERVAL", "1"),
            ("STEMMON_LOG_INTERVAL", "1"),
        ],
    );
    assert_eq!(report.sample_interval, 1.0);
    let at = running_at(&lines);
    // A line every 2 s when a sample pushed the line's deadline back; late on a busy
    // machine, but never early and never a tick later.
    assert_eq!(at.len(), 3, "{at:?}");
    for (line, second) in at.iter().zip([1.0, 2.0, 3.0]) {
        assert!(
            (second - 0.01..second + 0.5).contains(line),
            "{at:?}: not at 1, 2, 3 s"
        );
    }
}

#[test]
fn control_characters_in_a_stage_name_are_escaped_in_the_log_and_kept_in_the_report() {
    let (lines, report) = cadence_run("escape", "0.01", &[("STEMMON_LOG_INTERVAL", "30")]);
    // Every line is a whole log line: nothing split it.
    for line in &lines {
        assert!(line.starts_with("[stemmon] "), "{line:?} in {lines:#?}");
    }
    let odd = lines
        .iter()
        .find(|l| l.starts_with("[stemmon] completed odd"))
        .expect("the first completion is logged");
    assert!(
        odd.starts_with(r"[stemmon] completed odd\nname\r\u{1b}[31m\u{0}end ("),
        "{odd}"
    );
    assert!(!odd.chars().any(char::is_control), "{odd:?}");
    let name = "odd\nname\r\u{1b}[31m\0end";
    assert_eq!(report.stage(name).expect("the real name").name, name);
}

/// The only test in this binary that starts a monitor in-process, so it can count threads.
#[cfg(target_os = "linux")]
#[test]
fn the_sampler_thread_is_named_and_gone_after_finish() {
    use stemmon_suite::thread_names;
    let samplers = || {
        thread_names()
            .iter()
            .filter(|n| *n == "stemmon-sampler")
            .count()
    };
    assert_eq!(samplers(), 0);
    let monitor = stemmon::Monitor::builder()
        .current_thread_only()
        .log_interval(None)
        .start()
        .unwrap();
    // The new thread names itself as it starts: give it a moment.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while samplers() == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert_eq!(samplers(), 1);
    monitor.finish();
    assert_eq!(samplers(), 0, "finish joins the sampler");
    let dropped = stemmon::Monitor::builder()
        .current_thread_only()
        .log_interval(None)
        .start()
        .unwrap();
    drop(dropped);
    assert_eq!(samplers(), 0, "drop joins the sampler too");
}
