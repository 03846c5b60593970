//! Memory pressure of a real run under `stemmon run`, held to the kernel's own stall
//! total (the same pressure file, read before and after): the report's seconds are
//! within it, its shares within 0 and 1, and every surface shows the figures.

mod common;

use common::{stemmon, TempDir};

/// The `some` total, in microseconds, of the file the report names as its source.
fn kernel_total(source: &str) -> u64 {
    let path = match source {
        "system" => "/proc/pressure/memory".to_owned(),
        _ => cgroup_file().expect("a cgroup v2 pressure file"),
    };
    let text = std::fs::read_to_string(&path).unwrap();
    let line = text.lines().find(|l| l.starts_with("some ")).unwrap();
    line.split_whitespace()
        .find_map(|w| w.strip_prefix("total="))
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn a_runs_memory_pressure_is_within_the_kernels_and_reaches_every_surface() {
    if !std::path::Path::new("/proc/pressure/memory").exists() {
        common::cannot_run(
            "a_runs_memory_pressure_is_within_the_kernels",
            "no /proc/pressure/memory: the kernel has no PSI",
        );
        return;
    }
    let dir = TempDir::new("pressure");
    let report = dir.path().join("run.json");
    // Which file the run reads is known from its report; both are read around it.
    let before = (kernel_total("system"), cgroup_total());
    // It ends once the report being written holds a share of an interval.
    let output = common::run_watched(&report, "until_report memory_pressure_some_share 0", &[]);
    let after = (kernel_total("system"), cgroup_total());
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let source = json["pressure"]["source"]
        .as_str()
        .expect("pressure.source");
    let kernel = match source {
        "system" => after.0 - before.0,
        "cgroup" => after.1.unwrap() - before.1.unwrap(),
        other => panic!("source {other}"),
    };
    let seconds = json["memory_pressure_some_seconds"]
        .as_f64()
        .expect("memory_pressure_some_seconds");
    assert!(
        (0.0..=kernel as f64 / 1e6 + 1e-6).contains(&seconds),
        "{seconds} s, the kernel's {kernel} µs"
    );
    let share = json["memory_pressure_some_share"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&share), "{share}");
    let points: Vec<f64> = json["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["memory_pressure_some_share"].as_f64())
        .collect();
    assert!(!points.is_empty(), "no pressure in the timeline");
    assert!(points.iter().all(|s| (0.0..=1.0).contains(s)), "{points:?}");

    let log = String::from_utf8_lossy(&output.stderr);
    assert!(log.contains("; psi="), "no `psi=` in the live log: {log}");
    let shown = stemmon().arg("show").arg(&report).output().unwrap();
    let shown = String::from_utf8(shown.stdout).unwrap();
    assert!(shown.contains("pressure:   memory pressure "), "{shown}");
    let compared = stemmon()
        .args(["compare", "--metric", "pressure"])
        .arg(&report)
        .arg(&report)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&compared.stdout);
    assert!(
        text.contains("pressure compared: the highest share"),
        "{text}"
    );
    assert_eq!(compared.status.code(), Some(0), "{text}");
    // The Chrome counter, in percent.
    let counted = common::chrome_counter_max(&report, "memory pressure", "%");
    assert!((0.0..=100.0).contains(&counted), "{counted}");
}

/// The test process's cgroup v2 pressure total, where it has one.
fn cgroup_total() -> Option<u64> {
    cgroup_file().map(|_| kernel_total("cgroup"))
}

/// The `memory.pressure` of this process's cgroup v2: its path under the cgroup2 mount
/// (`/sys/fs/cgroup`, or `/sys/fs/cgroup/unified` on a hybrid machine).
fn cgroup_file() -> Option<String> {
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let dir = cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::"))?
        .to_owned();
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mount = mounts.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        (right.split_whitespace().next()? == "cgroup2")
            .then(|| left.split_whitespace().nth(4).map(str::to_owned))
            .flatten()
    })?;
    let path = format!("{mount}{}/memory.pressure", dir.trim_end_matches('/'));
    std::path::Path::new(&path).exists().then_some(path)
}
