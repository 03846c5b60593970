//! A hostile or broken NVIDIA driver under the library (the fake of
//! `stemmon/tests/support/fake_nvml.c`): NVML is opened and read on the sampler thread
//! alone, so a driver that blocks or answers slowly never holds the program. The
//! program is `#[monitor_main]`'s fixture (a 0.4 s stage, samples every 50 ms), timed
//! against the same run with no driver. A driver that crashes is the program's own
//! crash in-process: `STEMMON_GPU=0` keeps it out.

use std::path::Path;
use std::time::Instant;
use stemmon_suite::{fixture_command, read_report, temp_dir, FakeNvml};

const OK: &str = env!("CARGO_BIN_EXE_fixture-main-ok");

fn state(extra: &str) -> String {
    format!(
        "driver 550.54.15\ndevice\nname NVIDIA Fake H100\nuuid GPU-0000\ntotal {}\nused {}\n{extra}\n",
        80u64 << 30,
        1u64 << 30
    )
}

/// Runs the fixture in `dir` with `library` as NVML (none at all when `None`) and
/// `STEMMON_GPU` as given: its wall time, from start to exit, and its report's `gpu`.
fn run(dir: &Path, library: Option<&Path>, gpu: Option<&str>) -> (f64, serde_json::Value) {
    let mut command = fixture_command(OK);
    command
        .current_dir(dir)
        .env("STEMMON_LOG_INTERVAL", "none")
        .stdout(std::process::Stdio::null());
    match library {
        Some(library) => command.env("STEMMON_NVML_LIBRARY", library),
        None => command.env("STEMMON_NVML_LIBRARY", dir.join("no-libnvidia-ml.so.1")),
    };
    if let Some(gpu) = gpu {
        command.env("STEMMON_GPU", gpu);
    }
    let began = Instant::now();
    let output = command.output().unwrap();
    let seconds = began.elapsed().as_secs_f64();
    assert!(output.status.success(), "{output:?}");
    let report = read_report(&dir.join("fixture-report.json"));
    assert_eq!(report.stage("fit").map(|s| s.calls), Some(1));
    (seconds, report.figures.value("gpu").unwrap().clone())
}

/// The fixture under the fake serving `served` and with no driver: within 0.2 s of
/// each other. The fake's `gpu` section.
fn against_no_driver(test: &str, served: &str) -> Option<serde_json::Value> {
    let fake = FakeNvml::new(test, &state(served))?;
    let dir = temp_dir(test);
    let (plain, _) = run(dir.path(), None, None);
    let (hostile, gpu) = run(dir.path(), Some(&fake.library()), None);
    assert!(
        hostile <= plain + 0.2,
        "{test}: {hostile:.3} s against {plain:.3} s with no driver"
    );
    Some(gpu)
}

#[test]
fn a_driver_whose_init_blocks_never_holds_the_program() {
    let Some(gpu) = against_no_driver(
        "a_driver_whose_init_blocks_never_holds_the_program",
        "init_sleep 10000",
    ) else {
        return;
    };
    // NVML never started within the run: the report says it was never opened.
    assert_eq!(gpu["missing"], "NVML was not opened yet", "{gpu}");
}

#[test]
fn slow_reads_never_hold_the_program() {
    let Some(gpu) = against_no_driver("slow_reads_never_hold_the_program", "read_sleep 5000")
    else {
        return;
    };
    assert_eq!(gpu["missing"], "NVML was not opened yet", "{gpu}");
}

#[test]
fn a_driver_that_answers_late_once_is_read_no_more() {
    // Each device call takes 0.4 s: NVML's start (three calls) and the first reading
    // (three more) hold only the sampler, which then stops reading the GPU.
    let test = "a_driver_that_answers_late_once_is_read_no_more";
    let Some(gpu) = against_no_driver(test, "read_sleep 400") else {
        return;
    };
    let missing = gpu["missing"].as_str().unwrap_or("");
    assert!(
        missing == "NVML was not opened yet" || missing.contains("the GPU is no longer read"),
        "{gpu}"
    );
}

#[test]
fn stemmon_gpu_0_keeps_a_crashing_driver_out_of_the_program() {
    let test = "stemmon_gpu_0_keeps_a_crashing_driver_out_of_the_program";
    let Some(fake) = FakeNvml::new(test, &state("crash init")) else {
        return;
    };
    let dir = temp_dir(test);
    let (_, gpu) = run(dir.path(), Some(&fake.library()), Some("0"));
    assert_eq!(
        gpu["missing"], "the GPU is not read: turned off by STEMMON_GPU=0",
        "{gpu}"
    );
    // Without it, the driver's crash is the program's: that is what the variable is for.
    let crashed = fixture_command(OK)
        .current_dir(dir.path())
        .env("STEMMON_LOG_INTERVAL", "none")
        .env("STEMMON_NVML_LIBRARY", fake.library())
        .output()
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(crashed.status.signal(), Some(libc::SIGSEGV), "{crashed:?}");
}
