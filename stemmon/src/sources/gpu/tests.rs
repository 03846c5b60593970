//! The GPU source against a fake `libnvidia-ml.so.1` (`tests/support/fake_nvml.c`),
//! compiled once per test process; each test runs its own copy, in its own directory,
//! beside the state file that says what the fake driver serves.

use super::*;
use crate::env::cannot_run;
use std::io;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// The fake library's bytes, compiled once per test process and variant.
fn compiled(without_graphics: bool) -> &'static Result<Vec<u8>, String> {
    static FULL: OnceLock<Result<Vec<u8>, String>> = OnceLock::new();
    static OLD: OnceLock<Result<Vec<u8>, String>> = OnceLock::new();
    let cell = if without_graphics { &OLD } else { &FULL };
    cell.get_or_init(|| {
        let source = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/support/fake_nvml.c");
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let out = dir.path().join("libnvidia-ml.so.1");
        let compiler = std::env::var_os("CC").unwrap_or_else(|| "cc".into());
        let mut command = Command::new(&compiler);
        command
            .args(["-shared", "-fPIC", "-O2", "-o"])
            .arg(&out)
            .arg(source);
        if without_graphics {
            command.arg("-DFAKE_NVML_WITHOUT_GRAPHICS");
        }
        let output = command
            .output()
            .map_err(|e| format!("{} could not run: {e}", compiler.to_string_lossy()))?;
        if !output.status.success() {
            return Err(format!(
                "{} failed on fake_nvml.c: {}",
                compiler.to_string_lossy(),
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        std::fs::read(&out).map_err(|e| e.to_string())
    })
}

/// One test's fake driver: its own copy of the library (a copy is a library of its own
/// to the loader, with its own state) and its state file, in a directory of its own.
struct Fake {
    dir: tempfile::TempDir,
}

impl Fake {
    /// A fake serving `state`; `None` (after saying so) where no C compiler is at hand.
    fn new(test: &str, state: &str) -> Option<Fake> {
        Fake::variant(test, state, false)
    }

    fn variant(test: &str, state: &str, without_graphics: bool) -> Option<Fake> {
        let bytes = match compiled(without_graphics) {
            Ok(bytes) => bytes,
            Err(why) => {
                cannot_run(
                    test,
                    &format!("the fake NVML library does not build: {why}"),
                );
                return None;
            }
        };
        let fake = Fake {
            dir: tempfile::tempdir().unwrap(),
        };
        std::fs::write(fake.library(), bytes).unwrap();
        fake.set(state);
        Some(fake)
    }

    fn library(&self) -> PathBuf {
        self.dir.path().join("libnvidia-ml.so.1")
    }

    /// Replaces what the fake serves, as one rename: the fake sees the old or the new.
    fn set(&self, state: &str) {
        let next = self.dir.path().join("fake-nvml-state.next");
        std::fs::write(&next, state).unwrap();
        std::fs::rename(next, self.dir.path().join("fake-nvml-state")).unwrap();
    }

    /// The device calls made so far, one `function index` a line (with `log` set).
    fn calls(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("fake-nvml-calls")).unwrap_or_default()
    }

    fn open(&self) -> GpuSource {
        GpuSource::open(Some(&self.library()))
    }
}

/// A `sleep` that ends with the test.
struct Sleeper(Child);

impl Sleeper {
    fn start() -> Sleeper {
        let child = Command::new("sleep")
            .arg("600")
            .stdin(Stdio::null())
            .spawn()
            .expect("sleep starts");
        Sleeper(child)
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn device(text: &str) -> String {
    format!(
        "device\nname NVIDIA Fake\nuuid GPU-fake\ntotal {}\n{text}\n",
        80 * GIB
    )
}

fn process(pid: u32, bytes: Option<u64>) -> ProcessGpu {
    ProcessGpu { pid, bytes }
}

fn used(bytes: u64) -> DeviceReading {
    DeviceReading {
        used_bytes: Some(bytes),
        ..DeviceReading::default()
    }
}

fn count(calls: &str, function: &str, index: u32) -> usize {
    let line = format!("{function} {index}");
    calls.lines().filter(|l| *l == line).count()
}

#[test]
fn this_process_and_a_child_on_two_devices() {
    let me = std::process::id();
    let child = Sleeper::start();
    let outsider = Sleeper::start();
    let (c, o) = (child.pid(), outsider.pid());
    let state = |child_bytes: u64| {
        format!(
            "driver 550.54.15\n\
             device\nname NVIDIA H100 80GB HBM3\nuuid GPU-0a\ntotal {total0}\nused {used0}\n\
             compute {me} {gib}\ncompute {o} {half}\ngraphics {c} {hundred}\n\
             device\nname NVIDIA A100-SXM4-40GB\nuuid GPU-1b\ntotal {total1}\nused {used1}\n\
             compute {c} {child_bytes}\ngraphics {c} {child_bytes}\ncompute {me} {fifty}\n",
            total0 = 80 * GIB,
            used0 = 3 * GIB,
            gib = GIB,
            half = 512 * MIB,
            hundred = 100 * MIB,
            total1 = 40 * GIB,
            used1 = 5 * GIB,
            fifty = 50 * MIB,
        )
    };
    let Some(fake) = Fake::new("this_process_and_a_child_on_two_devices", &state(200 * MIB)) else {
        return;
    };
    let mut source = fake.open();
    assert_eq!(source.missing(), None);
    assert_eq!(
        source.info(),
        &GpuInfo {
            driver_version: Some("550.54.15".into()),
            devices: vec![
                DeviceInfo {
                    index: 0,
                    name: Some("NVIDIA H100 80GB HBM3".into()),
                    uuid: Some("GPU-0a".into()),
                    memory_total_bytes: Some(80 * GIB),
                    missing: None,
                },
                DeviceInfo {
                    index: 1,
                    name: Some("NVIDIA A100-SXM4-40GB".into()),
                    uuid: Some("GPU-1b".into()),
                    memory_total_bytes: Some(40 * GIB),
                    missing: None,
                },
            ],
            missing: None,
            dropped: None,
        }
    );
    let tree = [me, c];
    // The outsider's 512 MiB is not the tree's; the child on both lists of device 1
    // counts once.
    assert_eq!(
        source.read(&tree, &[]),
        &GpuReading {
            tree_bytes: Some(GIB + 100 * MIB + 200 * MIB + 50 * MIB),
            tree_complete: true,
            unknown_processes: 0,
            ambiguous_pids: 0,
            device_bytes: Some(5 * GIB),
            devices: vec![used(3 * GIB), used(5 * GIB)],
            processes: vec![
                process(me, Some(GIB + 50 * MIB)),
                process(c, Some(300 * MIB))
            ],
        }
    );
    // The child grows mid-run.
    fake.set(&state(700 * MIB));
    let reading = source.read(&tree, &[]);
    assert_eq!(
        reading.tree_bytes,
        Some(GIB + 100 * MIB + 700 * MIB + 50 * MIB)
    );
    assert_eq!(reading.processes[1], process(c, Some(800 * MIB)));
    // The child leaves the tree: its memory is no longer the tree's.
    let reading = source.read(&[me], &[]);
    assert_eq!(reading.tree_bytes, Some(GIB + 50 * MIB));
    assert_eq!(reading.processes, vec![process(me, Some(GIB + 50 * MIB))]);
}

#[test]
fn a_process_outside_the_tree_is_ignored() {
    let me = std::process::id();
    let outsider = Sleeper::start();
    let state = device(&format!(
        "used {}\ncompute {} {}\ngraphics {} {}",
        6 * GIB,
        outsider.pid(),
        4 * GIB,
        outsider.pid(),
        4 * GIB
    ));
    let Some(fake) = Fake::new("a_process_outside_the_tree_is_ignored", &state) else {
        return;
    };
    let mut source = fake.open();
    let reading = source.read(&[me], &[]);
    // Read in full and nothing of the tree's on it: zero, not unknown.
    assert_eq!((reading.tree_bytes, reading.tree_complete), (Some(0), true));
    assert!(reading.processes.is_empty());
    assert_eq!(reading.device_bytes, Some(6 * GIB));
}

#[test]
fn not_available_values_are_unknown_not_huge() {
    let me = std::process::id();
    let child = Sleeper::start();
    let c = child.pid();
    let state = format!(
        "{}{}",
        device(&format!(
            "used na\ncompute {me} na\ngraphics {c} {}",
            30 * MIB
        )),
        device(&format!("used {}\ncompute {me} {}", 2 * GIB, 10 * MIB)),
    );
    let Some(fake) = Fake::new("not_available_values_are_unknown_not_huge", &state) else {
        return;
    };
    let mut source = fake.open();
    assert_eq!(
        source.read(&[me, c], &[]),
        &GpuReading {
            tree_bytes: Some(40 * MIB),
            tree_complete: false,
            unknown_processes: 1,
            ambiguous_pids: 0,
            device_bytes: Some(2 * GIB),
            devices: vec![
                DeviceReading {
                    used_bytes: None,
                    used_missing: Some(Reason::NotAvailable),
                    processes_missing: None,
                },
                used(2 * GIB),
            ],
            processes: vec![process(me, Some(10 * MIB)), process(c, Some(30 * MIB))],
        }
    );
    // Listed, never with a figure: the tree's GPU memory is unknown, not 0.
    fake.set(&format!(
        "{}{}",
        device(&format!("used {GIB}\ncompute {me} na\ngraphics {me} na")),
        device(&format!("used {GIB}"))
    ));
    let reading = source.read(&[me, c], &[]);
    assert_eq!(reading.tree_bytes, None);
    assert_eq!(reading.unknown_processes, 1, "on both lists: one process");
    assert_eq!(reading.processes, vec![process(me, None)]);
}

#[test]
fn no_permission_leaves_the_figure_unknown_and_is_asked_again() {
    let me = std::process::id();
    let state = |compute_error: &str| {
        format!(
            "log\n{}{}",
            device(&format!(
                "used {}\n{compute_error}compute {me} {}\ngraphics {me} {}",
                GIB,
                64 * MIB,
                64 * MIB
            )),
            device("error handle NO_PERMISSION\nused 1"),
        )
    };
    let Some(fake) = Fake::new(
        "no_permission_leaves_the_figure_unknown_and_is_asked_again",
        &state("error compute NO_PERMISSION\n"),
    ) else {
        return;
    };
    let mut source = fake.open();
    // A device whose handle is refused is listed, with the reason, and never read.
    assert_eq!(
        source.info().devices[1],
        DeviceInfo {
            index: 1,
            name: None,
            uuid: None,
            memory_total_bytes: None,
            missing: Some(Reason::NoPermission),
        }
    );
    let reading = source.read(&[me], &[]).clone();
    assert_eq!(
        reading.devices[0].processes_missing,
        Some(Reason::NoPermission)
    );
    // The graphics list still read: a lower bound, said to be one.
    assert_eq!(
        (reading.tree_bytes, reading.tree_complete),
        (Some(64 * MIB), false)
    );
    assert_eq!(
        reading.devices[1],
        DeviceReading {
            used_bytes: None,
            used_missing: Some(Reason::NoPermission),
            processes_missing: Some(Reason::NoPermission),
        }
    );
    assert_eq!(reading.missing(), Some(&Reason::NoPermission));
    assert!(Reason::NoPermission.to_string().contains("MIG"));
    // Refused once is not refused for good: the next reading asks again.
    fake.set(&state(""));
    let reading = source.read(&[me], &[]);
    assert_eq!(reading.tree_bytes, Some(64 * MIB));
    assert_eq!(reading.devices[0].processes_missing, None);
    let calls = fake.calls();
    // Refused once; then the list, in one call (into a buffer of a fixed size).
    assert_eq!(
        count(&calls, "nvmlDeviceGetComputeRunningProcesses_v3", 0),
        1 + 1
    );
    assert_eq!(
        count(&calls, "nvmlDeviceGetHandleByIndex_v2", 1),
        1,
        "{calls}"
    );
}

#[test]
fn not_supported_is_asked_once() {
    let me = std::process::id();
    let state = device(&format!(
        "log\nerror memory NOT_SUPPORTED\nerror graphics NOT_SUPPORTED\ncompute {me} {}",
        8 * MIB
    ));
    // `log` is global: it may come after `device`.
    let Some(fake) = Fake::new("not_supported_is_asked_once", &state) else {
        return;
    };
    let mut source = fake.open();
    assert_eq!(source.info().devices[0].memory_total_bytes, None);
    for _ in 0..3 {
        let reading = source.read(&[me], &[]);
        assert_eq!(
            reading.devices[0],
            DeviceReading {
                used_bytes: None,
                used_missing: Some(Reason::NotSupported),
                processes_missing: Some(Reason::NotSupported),
            }
        );
        assert_eq!(
            (reading.tree_bytes, reading.tree_complete),
            (Some(8 * MIB), false)
        );
        assert_eq!(reading.device_bytes, None);
    }
    let calls = fake.calls();
    // Once at open for the total, once at the first reading.
    assert_eq!(count(&calls, "nvmlDeviceGetMemoryInfo_v2", 0), 2, "{calls}");
    assert_eq!(
        count(&calls, "nvmlDeviceGetGraphicsRunningProcesses_v3", 0),
        1,
        "{calls}"
    );
}

#[test]
fn a_gpu_lost_mid_run_stays_lost() {
    let me = std::process::id();
    let state = |second: &str| {
        format!(
            "log\n{}{}",
            device(&format!("used {}\ncompute {me} {}", GIB, 100 * MIB)),
            device(&format!(
                "used {}\ncompute {me} {}\n{second}",
                2 * GIB,
                300 * MIB
            )),
        )
    };
    let Some(fake) = Fake::new("a_gpu_lost_mid_run_stays_lost", &state("")) else {
        return;
    };
    let mut source = fake.open();
    let before = source.read(&[me], &[]).clone();
    assert_eq!(
        (before.tree_bytes, before.device_bytes),
        (Some(400 * MIB), Some(2 * GIB))
    );
    fake.set(&state("lost"));
    let lost = source.read(&[me], &[]).clone();
    assert_eq!(
        lost.devices,
        vec![
            used(GIB),
            DeviceReading {
                used_bytes: None,
                used_missing: Some(Reason::GpuLost),
                processes_missing: Some(Reason::GpuLost),
            },
        ]
    );
    assert_eq!(
        (lost.tree_bytes, lost.tree_complete),
        (Some(100 * MIB), false)
    );
    assert_eq!(lost.device_bytes, Some(GIB));
    assert_eq!(lost.missing(), Some(&Reason::GpuLost));
    // The GPU answers again: it is not asked.
    let calls_then = fake.calls();
    fake.set(&state(""));
    let after = source.read(&[me], &[]);
    assert_eq!(after, &lost);
    let calls = fake.calls();
    let new_calls = &calls[calls_then.len()..];
    assert!(!new_calls.lines().any(|l| l.ends_with(" 1")), "{new_calls}");
    assert!(new_calls.lines().any(|l| l.ends_with(" 0")), "{new_calls}");
}

#[test]
fn a_gpu_lost_at_open_is_never_read() {
    let me = std::process::id();
    let state = format!("log\n{}", device("lost"));
    let Some(fake) = Fake::new("a_gpu_lost_at_open_is_never_read", &state) else {
        return;
    };
    let mut source = fake.open();
    // Lost at its handle: named nowhere, listed with the reason.
    assert_eq!(source.info().devices[0].missing, Some(Reason::GpuLost));
    let reading = source.read(&[me], &[]);
    assert_eq!((reading.tree_bytes, reading.tree_complete), (None, false));
    assert_eq!(fake.calls().lines().count(), 1, "{}", fake.calls());
}

#[test]
fn no_library_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("libnvidia-ml.so.1");
    let mut source = GpuSource::open(Some(&path));
    let missing = source.missing().unwrap();
    assert!(missing.starts_with("no NVIDIA driver: "), "{missing}");
    assert!(
        missing.contains("libnvidia-ml.so.1 could not be loaded ("),
        "{missing}"
    );
    assert_eq!(source.info().devices, Vec::new());
    assert_eq!(
        source.read(&[std::process::id()], &[]),
        &GpuReading::default()
    );
    // A file that is not a library is no driver either.
    std::fs::write(&path, "not a library").unwrap();
    let source = GpuSource::open(Some(&path));
    assert!(source.missing().unwrap().starts_with("no NVIDIA driver: "));
}

#[test]
fn a_library_that_lacks_a_symbol_is_too_old() {
    let Some(fake) = Fake::variant(
        "a_library_that_lacks_a_symbol_is_too_old",
        &device("used 1"),
        true,
    ) else {
        return;
    };
    let mut source = fake.open();
    let missing = source.missing().unwrap();
    assert!(
        missing.starts_with("the NVIDIA driver is too old for stemmon: "),
        "{missing}"
    );
    assert!(
        missing.ends_with("lacks nvmlDeviceGetGraphicsRunningProcesses_v3"),
        "{missing}"
    );
    assert_eq!(source.read(&[1], &[]), &GpuReading::default());
}

#[test]
fn nvml_that_does_not_start_or_has_no_gpu() {
    let Some(fake) = Fake::new(
        "nvml_that_does_not_start_or_has_no_gpu",
        "init_error DRIVER_NOT_LOADED\n",
    ) else {
        return;
    };
    let source = fake.open();
    let missing = source.missing().unwrap();
    assert!(
        missing.starts_with("the NVIDIA driver is not running: "),
        "{missing}"
    );
    fake.set("driver 550.54.15\n");
    let source = fake.open();
    assert_eq!(source.missing(), Some("NVML lists no GPU on this machine"));
    assert_eq!(source.info().driver_version.as_deref(), Some("550.54.15"));
}

#[test]
fn a_container_pid_is_mapped_through_nspid() {
    struct Status(u32);
    impl StatusSource for Status {
        fn read_status(&mut self, pid: u32, buf: &mut Vec<u8>, _: &mut String) -> io::Result<()> {
            // The tree's second process is pid 7 in a namespace of its own.
            let nspid = if pid == self.0 {
                format!("{pid}\t7")
            } else {
                pid.to_string()
            };
            buf.extend_from_slice(format!("Name:\tworker\nNSpid:\t{nspid}\n").as_bytes());
            Ok(())
        }
    }
    let me = std::process::id();
    let inner = me + 1;
    let state = device(&format!("used {}\ncompute 7 {}", GIB, 12 * MIB));
    let Some(fake) = Fake::new("a_container_pid_is_mapped_through_nspid", &state) else {
        return;
    };
    let mut source = fake.open();
    let reading = source.read_with(&[me, inner], &[], None, &mut Status(inner));
    assert_eq!(reading.tree_bytes, Some(12 * MIB));
    assert_eq!(reading.processes, vec![process(inner, Some(12 * MIB))]);
}

#[test]
fn the_source_goes_to_the_sampler_thread() {
    fn send<T: Send>() {}
    send::<GpuSource>();
}

#[test]
fn the_builder_turns_the_gpu_off() {
    if std::env::var_os("STEMMON_GPU").is_some() {
        cannot_run("the_builder_turns_the_gpu_off", "STEMMON_GPU is set");
        return;
    }
    let monitor = crate::Monitor::builder()
        .current_thread_only()
        .log_interval(None)
        .gpu(false)
        .start()
        .unwrap();
    let report = monitor.finish();
    assert_eq!(
        report.figures.value("gpu").unwrap()["missing"],
        "the GPU is not read: turned off by the monitor's gpu(false)"
    );
}
