//! GPU memory per stage (the book's `gpu.md`), end to end against a fake NVIDIA driver
//! (`stemmon/tests/support/fake_nvml.c`) that serves what each test says: a real
//! monitored program and its real child on two devices, a process outside the tree,
//! figures NVML marks not available, a GPU lost mid-run, and no driver at all.

use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use stemmon::Report;
use stemmon_suite::{fixture_command, read_report, temp_dir, FakeNvml};

const FIXTURE: &str = env!("CARGO_BIN_EXE_fixture-gpu");
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// Two devices: this tree's process `own` and its child `child` on both, a process
/// outside the tree (pid 1) on device 0, and `extra` more lines for device 1.
fn state(own: u32, child: u32, scale: u64, device1: &str) -> String {
    format!(
        "driver 550.54.15\n\
         device\nname NVIDIA Fake H100\nuuid GPU-0000\ntotal {total}\nused {used0}\n\
         compute {own} {own0}\ngraphics {own} {own0}\ncompute {child} {child0}\ncompute 1 {outsider}\n\
         device\nname NVIDIA Fake H100\nuuid GPU-0001\ntotal {total}\nused {used1}\n\
         compute {child} {child1}\n{device1}\n",
        total = 80 * GIB,
        used0 = 20 * GIB * scale,
        used1 = 5 * GIB * scale,
        own0 = 512 * MIB * scale,
        child0 = 256 * MIB * scale,
        child1 = GIB * scale,
        outsider = 8 * GIB,
    )
}

/// Runs the fixture under `fake`: `first` and `second` are the states for `load` and
/// `train`, given the fixture's pids. The report, the fixture's pids, and the Prometheus
/// textfile the run wrote.
fn run(
    fake: Option<&FakeNvml>,
    first: impl Fn(u32, u32) -> String,
    second: impl Fn(u32, u32) -> String,
) -> (Report, u32, u32, String) {
    let dir = temp_dir("gpu-run");
    let path = dir.path().join("report.json");
    let prom = dir.path().join("prom");
    std::fs::create_dir(&prom).unwrap();
    let mut command = fixture_command(FIXTURE);
    command.env("STEMMON_PROMETHEUS_TEXTFILE_DIR", &prom);
    match fake {
        Some(fake) => command.env("STEMMON_NVML_LIBRARY", fake.library()),
        None => command.env(
            "STEMMON_NVML_LIBRARY",
            dir.path().join("no-such-libnvidia-ml.so"),
        ),
    };
    let mut child = command
        .arg(&path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = lines.next().unwrap().unwrap();
    let pids: Vec<u32> = line
        .split(' ')
        .skip(1)
        .map(|p| p.parse().unwrap())
        .collect();
    let (own, kid) = (pids[0], pids[1]);
    if let Some(fake) = fake {
        fake.set(&first(own, kid));
    }
    writeln!(stdin, "go").unwrap();
    assert_eq!(lines.next().unwrap().unwrap(), "loaded");
    if let Some(fake) = fake {
        fake.set(&second(own, kid));
    }
    writeln!(stdin, "go").unwrap();
    assert!(child.wait().unwrap().success());
    let textfile = std::fs::read_dir(&prom)
        .unwrap()
        .map(|entry| std::fs::read_to_string(entry.unwrap().path()).unwrap())
        .collect();
    (read_report(&path), own, kid, textfile)
}

fn gpu(stage: Option<&stemmon::report::StageReport>, key: &str) -> Option<u64> {
    stage.unwrap().figures.count(key)
}

#[test]
fn a_process_and_its_child_on_two_devices_count_per_stage_and_an_outsider_does_not() {
    let Some(fake) = FakeNvml::new("gpu-two-devices", "") else {
        return;
    };
    let (report, own, kid, textfile) = run(
        Some(&fake),
        |own, kid| state(own, kid, 1, ""),
        |own, kid| state(own, kid, 2, ""),
    );
    // load: own 512 MiB (on both lists of device 0: once), child 256 MiB + 1 GiB.
    let load = 512 * MIB + 256 * MIB + GIB;
    assert_eq!(gpu(report.stage("load"), "peak_tree_gpu_bytes"), Some(load));
    assert_eq!(
        gpu(report.stage("train"), "peak_tree_gpu_bytes"),
        Some(2 * load)
    );
    assert_eq!(report.figures.count("peak_tree_gpu_bytes"), Some(2 * load));
    // The busiest device's used memory, whoever used it.
    assert_eq!(
        gpu(report.stage("load"), "peak_device_gpu_bytes"),
        Some(20 * GIB)
    );
    assert_eq!(
        report.figures.count("peak_device_gpu_bytes"),
        Some(40 * GIB)
    );
    // The section: the driver, each device and its highest used memory.
    let section = report.figures.value("gpu").expect("the gpu section");
    assert_eq!(section["driver_version"], "550.54.15");
    assert_eq!(section["missing"], Value::Null);
    let devices = section["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 2);
    assert_eq!(devices[1]["uuid"], "GPU-0001");
    assert_eq!(devices[0]["memory_total_bytes"], 80 * GIB);
    assert_eq!(devices[0]["peak_memory_used_bytes"], 40 * GIB);
    // Per process.
    let process = |pid| {
        report
            .processes
            .iter()
            .find(|p| p.pid == pid)
            .unwrap_or_else(|| panic!("{pid} in {:?}", report.processes))
            .figures
            .count("peak_gpu_bytes")
    };
    assert_eq!(process(own), Some(2 * 512 * MIB));
    assert_eq!(process(kid), Some(2 * (256 * MIB + GIB)));
    // The timeline's series.
    let highest = report
        .timeline
        .iter()
        .filter_map(|p| p.figures.count("tree_gpu_bytes"))
        .max();
    assert_eq!(highest, Some(2 * load));
    // Prometheus: the stage and run gauges, from the field table.
    let series = |name: &str, stage: Option<&str>| -> Option<u64> {
        textfile.lines().find_map(|line| {
            let (metric, value) = line.rsplit_once(' ')?;
            let matches = metric.starts_with(&format!("{name}{{"))
                && stage.is_none_or(|s| metric.contains(&format!("stage=\"{s}\"")));
            matches.then(|| value.parse().ok()).flatten()
        })
    };
    assert_eq!(
        series("stemmon_stage_peak_tree_gpu_bytes", Some("load")),
        Some(load),
        "{textfile}"
    );
    assert_eq!(
        series("stemmon_stage_peak_device_gpu_bytes", Some("train")),
        Some(40 * GIB)
    );
    assert_eq!(series("stemmon_peak_tree_gpu_bytes", None), Some(2 * load));
}

#[test]
fn not_available_figures_are_unknown_and_a_lost_gpu_is_data() {
    let Some(fake) = FakeNvml::new("gpu-lost", "") else {
        return;
    };
    let (report, _, _, _) = run(
        Some(&fake),
        // The child's figure on device 1 is not available: the sum leaves it out.
        |own, kid| {
            state(own, kid, 1, "").replace(
                &format!("compute {kid} {}\n\n", GIB),
                &format!("compute {kid} na\n\n"),
            )
        },
        // Device 1 falls off the bus mid-run.
        |own, kid| state(own, kid, 1, "lost"),
    );
    let load = gpu(report.stage("load"), "peak_tree_gpu_bytes").unwrap();
    assert_eq!(load, 512 * MIB + 256 * MIB, "not 2^64-1, not summed");
    let train = gpu(report.stage("train"), "peak_tree_gpu_bytes").unwrap();
    assert_eq!(train, 512 * MIB + 256 * MIB, "device 0 alone");
    let missing = report.figures.value("gpu").unwrap()["missing"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(missing.contains("not available"), "{missing}");
    assert!(missing.contains("GpuLost"), "{missing}");
}

#[test]
fn without_a_driver_the_run_goes_on_and_gpu_missing_says_why() {
    let (report, _, _, _) = run(None, |_, _| String::new(), |_, _| String::new());
    assert_eq!(report.stage("train").unwrap().calls, 1);
    let missing = report.figures.value("gpu").unwrap()["missing"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(missing.starts_with("no NVIDIA driver"), "{missing}");
    assert_eq!(report.figures.count("peak_tree_gpu_bytes"), None);
    assert!(report
        .stage("load")
        .unwrap()
        .figures
        .value("peak_tree_gpu_bytes")
        .is_none());
}
