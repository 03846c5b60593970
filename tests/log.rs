//! The live log, read from the stdout of a real run.

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
    let stdout = String::from_utf8(run.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    let events: Vec<&str> = lines
        .iter()
        .map(|l| {
            let rest = l.strip_prefix("[stemmon] ").expect(l);
            &rest[..rest.find(';').unwrap()]
        })
        .collect();
    assert_eq!(events.first(), Some(&"started"));
    assert_eq!(events.last(), Some(&"finished"));
    assert!(
        events.iter().filter(|e| **e == "running").count() >= 3,
        "{events:?}"
    );
    // The first completion of a stage is logged; later short ones are only aggregated.
    let load: Vec<_> = events
        .iter()
        .filter(|e| e.starts_with("completed load ("))
        .collect();
    assert_eq!(load.len(), 1, "{events:?}");
    assert!(events
        .iter()
        .any(|e| e.starts_with("completed fit/inner (0.1")));
    assert!(events.iter().any(|e| e.starts_with("completed fit (0.1")));
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
            names,
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
