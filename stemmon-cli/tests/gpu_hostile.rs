//! A hostile or broken NVIDIA driver under `stemmon run` (the fake of
//! `stemmon/tests/support/fake_nvml.c` in its init, read, crash and huge-count modes):
//! NVML is read in a helper process, so the command's exit status, its wall time and
//! its report never depend on the driver. Each case is timed against the same run with
//! no driver, and stemmon's memory is the kernel's figure (`wait4`).

mod common;

use common::{read_report, stemmon, TempDir, MIB};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Instant;
use stemmon_suite::FakeNvml;

/// A driver with one healthy device, then `extra` lines.
fn state(extra: &str) -> String {
    format!(
        "driver 550.54.15\ndevice\nname NVIDIA Fake H100\nuuid GPU-0000\ntotal {}\nused {}\n{extra}\n",
        80u64 << 30,
        1u64 << 30
    )
}

/// One `stemmon run` as the kernel saw it.
struct Ran {
    code: Option<i32>,
    seconds: f64,
    /// stemmon's peak RSS (and that of the children it reaped), from `wait4`.
    maxrss: u64,
    stderr: String,
    report: PathBuf,
}

/// `stemmon run -o REPORT -- sh -c SCRIPT` under `library` (no driver at all when
/// `None`), timed from its start to its reaping.
fn run(dir: &Path, name: &str, library: Option<&Path>, script: &str) -> Ran {
    let report = dir.join(format!("{name}.json"));
    let mut command = stemmon();
    command
        .args(["run", "--log-interval", "none", "-o"])
        .arg(&report)
        .args(["--", "sh", "-c", script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    match library {
        Some(library) => command.env("STEMMON_NVML_LIBRARY", library),
        None => command.env("STEMMON_NVML_LIBRARY", dir.join("no-libnvidia-ml.so.1")),
    };
    let began = Instant::now();
    // Reaped below by wait4, for its rusage.
    #[allow(clippy::zombie_processes)]
    let mut child = command.spawn().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut stderr, &mut text).unwrap();
        text
    });
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value; wait4 fills it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `status` and `usage` are valid for writes for the whole call; the pid is
    // our child, not reaped yet.
    let reaped = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage) };
    let seconds = began.elapsed().as_secs_f64();
    assert_eq!(reaped, child.id() as libc::pid_t);
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    Ran {
        code,
        seconds,
        maxrss: usage.ru_maxrss as u64 * 1024,
        stderr: reader.join().unwrap(),
        report,
    }
}

/// The run under the fake serving `served`, beside the same run with no driver: both
/// exit 3, the fake's within 0.2 s of the other's wall time, with a whole report whose
/// `wall_seconds` is the command's. Returns the fake's run and its report's `gpu`.
fn against_no_driver(
    test: &str,
    served: &str,
    script: &str,
) -> Option<(TempDir, Ran, serde_json::Value)> {
    let fake = FakeNvml::new(test, &state(served))?;
    let dir = TempDir::new(test);
    let plain = run(dir.path(), "plain", None, script);
    let hostile = run(dir.path(), "hostile", Some(&fake.library()), script);
    for ran in [&plain, &hostile] {
        assert_eq!(ran.code, Some(3), "{}", ran.stderr);
    }
    assert!(
        hostile.seconds <= plain.seconds + 0.2,
        "{test}: {:.3} s against {:.3} s with no driver",
        hostile.seconds,
        plain.seconds
    );
    let report = read_report(&hostile.report);
    let plain_report = read_report(&plain.report);
    assert_eq!(report.exit_code, Some(3));
    assert!(
        report.wall_seconds <= plain_report.wall_seconds + 0.2,
        "{test}: wall_seconds {} against {}",
        report.wall_seconds,
        plain_report.wall_seconds
    );
    assert!(
        hostile.maxrss < 64 * MIB,
        "{test}: stemmon held {} MiB",
        hostile.maxrss / MIB
    );
    let gpu = report
        .figures
        .value("gpu")
        .expect("the gpu section")
        .clone();
    Some((dir, hostile, gpu))
}

fn missing(gpu: &serde_json::Value) -> &str {
    gpu["missing"].as_str().unwrap_or("")
}

#[test]
fn a_driver_whose_init_blocks_holds_neither_the_command_nor_its_report() {
    let Some((_dir, _, gpu)) =
        against_no_driver("a_driver_whose_init_blocks", "init_sleep 20000", "exit 3")
    else {
        return;
    };
    assert_eq!(missing(&gpu), "NVML has not answered yet", "{gpu}");
}

#[test]
fn a_driver_that_crashes_at_init_costs_only_the_gpu_figures() {
    let Some((_dir, _, gpu)) = against_no_driver(
        "a_driver_that_crashes_at_init",
        "crash init",
        // A sample after the crash (every second) says so.
        "sleep 1.3; exit 3",
    ) else {
        return;
    };
    assert!(
        missing(&gpu).starts_with("the NVML helper process ended (killed by signal 11 (SIGSEGV))"),
        "{gpu}"
    );
}

#[test]
fn a_driver_that_crashes_in_a_read_costs_only_the_gpu_figures() {
    let Some((_dir, _, gpu)) = against_no_driver(
        "a_driver_that_crashes_in_a_read",
        "crash read",
        "sleep 1.3; exit 3",
    ) else {
        return;
    };
    assert!(missing(&gpu).contains("(SIGSEGV)"), "{gpu}");
}

#[test]
fn slow_reads_leave_the_wall_time_the_commands() {
    let Some((_dir, _, gpu)) = against_no_driver(
        "slow_reads_leave_the_wall_time_the_commands",
        "read_sleep 5000",
        "sleep 1; exit 3",
    ) else {
        return;
    };
    // The device's name is a read too: NVML never finished starting within the run.
    assert_eq!(missing(&gpu), "NVML has not answered yet", "{gpu}");
}

#[test]
fn five_million_devices_are_read_as_sixty_four() {
    let Some((_dir, ran, gpu)) = against_no_driver(
        "five_million_devices_are_read_as_sixty_four",
        "claim_devices 5000000",
        "sleep 1.3; exit 3",
    ) else {
        return;
    };
    assert_eq!(gpu["devices"].as_array().unwrap().len(), 64, "{gpu}");
    assert!(
        missing(&gpu).contains("NVML counts 5000000 GPUs: stemmon reads the first 64"),
        "{gpu}"
    );
    // The report stays small, and `show` reads it.
    let size = std::fs::metadata(&ran.report).unwrap().len();
    assert!(size < 256 * 1024, "{size} bytes");
    let shown = stemmon().arg("show").arg(&ran.report).output().unwrap();
    assert_eq!(shown.status.code(), Some(0), "{shown:?}");
}

#[test]
fn absurd_process_counts_allocate_nothing_of_their_size() {
    for (name, count) in [
        ("absurd_process_counts_4294967290", 4_294_967_290u64),
        ("absurd_process_counts_1e9", 1_000_000_000),
    ] {
        let Some((_dir, _, gpu)) = against_no_driver(
            name,
            &format!("claim_processes {count}"),
            "sleep 1.3; exit 3",
        ) else {
            return;
        };
        assert!(
            missing(&gpu).contains(&format!(
                "NVML lists {count} processes on the device, more than the 4096 stemmon reads"
            )),
            "{gpu}"
        );
    }
}

#[test]
fn impossible_and_refused_figures_are_unknown_not_kept() {
    let test = "impossible_and_refused_figures_are_unknown_not_kept";
    // Used memory above the device's total, and process lists NVML refuses.
    let served = format!(
        "driver 550.54.15\ndevice\nname NVIDIA Fake\nuuid GPU-0\ntotal {}\nused {}\n\
         error compute NO_PERMISSION\nerror graphics NO_PERMISSION\n",
        16u64 << 30,
        u64::MAX - 1
    );
    let Some(fake) = FakeNvml::new(test, &served) else {
        return;
    };
    let dir = TempDir::new(test);
    let ran = run(
        dir.path(),
        "run",
        Some(&fake.library()),
        "sleep 1.3; exit 3",
    );
    assert_eq!(ran.code, Some(3), "{}", ran.stderr);
    let report = read_report(&ran.report);
    let gpu = report.figures.value("gpu").unwrap();
    assert!(
        missing(gpu).contains("NVML gave an impossible figure"),
        "{gpu}"
    );
    assert!(missing(gpu).contains("NoPermission"), "{gpu}");
    assert_eq!(
        gpu["devices"][0]["peak_memory_used_bytes"],
        serde_json::Value::Null
    );
    // Unknown, not 0: for the run and for the stage of the sample.
    assert_eq!(report.figures.count("peak_tree_gpu_bytes"), None);
    assert_eq!(report.figures.count("peak_device_gpu_bytes"), None);
    for stage in &report.stages {
        assert_eq!(
            stage.figures.count("peak_tree_gpu_bytes"),
            None,
            "{}",
            stage.name
        );
    }
    let shown = stemmon().arg("show").arg(&ran.report).output().unwrap();
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(!text.contains("17179869184.0 GiB"), "{text}");
}

#[test]
fn a_library_that_others_may_write_is_not_loaded() {
    use std::os::unix::fs::PermissionsExt;
    let test = "a_library_that_others_may_write_is_not_loaded";
    let Some(fake) = FakeNvml::new(test, &state("crash init")) else {
        return;
    };
    let library = fake.library();
    std::fs::set_permissions(&library, std::fs::Permissions::from_mode(0o666)).unwrap();
    let dir = TempDir::new(test);
    let ran = run(dir.path(), "run", Some(&library), "exit 3");
    assert_eq!(ran.code, Some(3), "{}", ran.stderr);
    let warning = ran
        .stderr
        .lines()
        .find(|l| l.contains("not loading STEMMON_NVML_LIBRARY="))
        .unwrap_or_else(|| panic!("no warning in {:?}", ran.stderr));
    assert!(
        warning
            .ends_with("may be written by its group or by others (mode 666); the GPU is not read"),
        "{warning}"
    );
    let report = read_report(&ran.report);
    let gpu = report.figures.value("gpu").unwrap();
    assert!(
        missing(gpu).starts_with("not loading STEMMON_NVML_LIBRARY="),
        "{gpu}"
    );
    // Owned by another user (nobody): refused the same way, whatever its mode.
    std::fs::set_permissions(&library, std::fs::Permissions::from_mode(0o755)).unwrap();
    // SAFETY: chown takes a NUL-terminated path that outlives the call.
    let owned = unsafe {
        let path = std::ffi::CString::new(library.to_str().unwrap()).unwrap();
        libc::chown(path.as_ptr(), 65534, 65534)
    };
    if owned != 0 {
        stemmon_suite::cannot_run(test, "chown to nobody needs root");
        return;
    }
    let ran = run(dir.path(), "other-owner", Some(&library), "exit 3");
    assert!(
        ran.stderr
            .contains("belongs to uid 65534, neither you nor root"),
        "{}",
        ran.stderr
    );
}

#[test]
fn stemmon_gpu_0_loads_no_driver() {
    let test = "stemmon_gpu_0_loads_no_driver";
    let Some(fake) = FakeNvml::new(test, &state("crash init\nlog")) else {
        return;
    };
    let dir = TempDir::new(test);
    let report = dir.path().join("report.json");
    let status = stemmon()
        .env("STEMMON_NVML_LIBRARY", fake.library())
        .env("STEMMON_GPU", "0")
        .args(["run", "--log-interval", "none", "-o"])
        .arg(&report)
        .args(["--", "sh", "-c", "exit 3"])
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(3));
    let report = read_report(&report);
    let gpu = report.figures.value("gpu").unwrap();
    assert_eq!(
        missing(gpu),
        "the GPU is not read: turned off by STEMMON_GPU=0"
    );
    // The driver was never called.
    assert!(!fake.library().with_file_name("fake-nvml-calls").exists());
}
