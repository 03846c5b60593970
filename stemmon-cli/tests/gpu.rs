//! `stemmon run` of a command that a (fake) NVIDIA driver lists as a GPU process: the
//! report has its GPU memory, and `show` says so (the book's `gpu.md`).

mod common;

use common::{read_report, stemmon, TempDir, MIB};
use std::time::{Duration, Instant};
use stemmon_suite::FakeNvml;

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Kills `stemmon run` if the test fails before it ends.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn stemmon_run_reads_the_gpu_memory_of_a_command_the_driver_lists() {
    let dir = TempDir::new("gpu-run");
    // The driver lists the device from the start (NVML is opened once, when the run
    // starts); the command's process appears once its pid is known.
    let state = |compute: &str| {
        format!(
            "driver 555.1\ndevice\nname NVIDIA Fake\nuuid GPU-1\ntotal {}\nused {}\n{compute}",
            16u64 << 30,
            4u64 << 30,
        )
    };
    let Some(fake) = FakeNvml::new(
        "stemmon_run_reads_the_gpu_memory_of_a_command_the_driver_lists",
        &state(""),
    ) else {
        return;
    };
    let (pid_file, go, report) = (
        dir.path().join("pid"),
        dir.path().join("go"),
        dir.path().join("report.json"),
    );
    let script = format!(
        "echo $$ > {pid}; while [ ! -e {go} ]; do sleep 0.01; done",
        pid = pid_file.display(),
        go = go.display()
    );
    let log = dir.path().join("stderr");
    let run = stemmon()
        .env("STEMMON_NVML_LIBRARY", fake.library())
        .stderr(std::fs::File::create(&log).unwrap())
        .args([
            "run",
            "--sample-interval",
            "0.05",
            "--log-interval",
            "0.05",
            "-o",
        ])
        .arg(&report)
        .args(["--", "sh", "-c", &script])
        .spawn()
        .unwrap();
    let mut run = KillOnDrop(run);
    wait_for("the command's pid", || {
        std::fs::read_to_string(&pid_file).is_ok_and(|t| t.ends_with('\n'))
    });
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    fake.set(&state(&format!("compute {pid} {}\n", 300 * MIB)));
    // Until a sample saw it: the report is rewritten at every log line.
    wait_for("a sample of the GPU", || {
        std::fs::read(&report)
            .ok()
            .and_then(|bytes| stemmon_report::read(&bytes).ok())
            .is_some_and(|r| r.figures.count("peak_tree_gpu_bytes") == Some(300 * MIB))
    });
    std::fs::write(&go, "").unwrap();
    assert!(run.0.wait().unwrap().success());
    // The live line says it too.
    let lines = std::fs::read_to_string(&log).unwrap();
    assert!(lines.contains("; gpu=300.0 MiB"), "{lines}");
    let report_read = read_report(&report);
    assert_eq!(
        report_read.figures.count("peak_tree_gpu_bytes"),
        Some(300 * MIB)
    );
    assert_eq!(
        report_read.figures.count("peak_device_gpu_bytes"),
        Some(4 << 30),
        "{:?}",
        report_read.figures
    );
    let command = report_read.processes.iter().find(|p| p.pid == pid).unwrap();
    assert_eq!(command.figures.count("peak_gpu_bytes"), Some(300 * MIB));
    // `show` gives the run's GPU memory its header line, from the report's `gpu` section.
    let shown = stemmon().arg("show").arg(&report).output().unwrap();
    assert_eq!(shown.status.code(), Some(0), "{shown:?}");
    let text = String::from_utf8(shown.stdout).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("gpu:"))
        .unwrap_or_else(|| panic!("{text}"));
    assert_eq!(
        line,
        "gpu:        the tree's peak 300.0 MiB; the busiest GPU's peak 4.0 GiB; driver 555.1; \
         GPU 0 NVIDIA Fake: peak used 4.0 GiB of 16.0 GiB",
        "{text}"
    );
}
