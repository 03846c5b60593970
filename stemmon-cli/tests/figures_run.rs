//! The 0.3 figures end to end: reports that the runtime really wrote, read by the
//! command. `stemmon run` of a CPU-bound shell loop (CPU, cores, processes, exit code)
//! against the kernel's own count of the CPU it used; `show`, `compare --metric cpu`,
//! `plot` and `export` on that report.

mod common;

use common::{chrome_counter_max, read_report, run_sh, stemmon, TempDir};

/// User plus system CPU seconds of this process's reaped children so far.
fn children_cpu() -> f64 {
    // SAFETY: `usage` is a plain C struct that getrusage fills; RUSAGE_CHILDREN is valid.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        assert_eq!(libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage), 0);
        usage
    };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

#[test]
fn a_cpu_bound_command_reads_its_cpu_processes_and_exit_code_everywhere() {
    let dir = TempDir::new("figures-run");
    let report_path = dir.path().join("report.json");
    // A shell loop: CPU-bound on one core, then exit 3.
    let script = "i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done; exit 3";
    let before = children_cpu();
    let code = run_sh(&report_path, script);
    // `stemmon run` and, through its rusage, the shell it reaped.
    let kernel = children_cpu() - before;
    assert_eq!(code, Some(3));
    let report = read_report(&report_path);
    let user = report.cpu_io.cpu_user_seconds.expect("the run's user CPU");
    let system = report
        .cpu_io
        .cpu_system_seconds
        .expect("the run's system CPU");
    let tree = user + system;
    // The tree is the shell alone; the kernel's figure adds stemmon's own sampling.
    assert!(kernel > 0.2, "the loop ran: {kernel} s");
    assert!(
        tree <= kernel + 0.02 && tree >= 0.8 * kernel - 0.05,
        "tree CPU {tree} s against the kernel's {kernel} s"
    );
    let shell = report
        .processes
        .iter()
        .find(|p| p.command.starts_with("sh -c i=0;"))
        .unwrap_or_else(|| panic!("the shell among {:?}", report.processes));
    assert_eq!(shell.exit_code, Some(3));
    let shell_cpu = shell.cpu_seconds.expect("the shell's CPU");
    assert!(
        (shell_cpu - tree).abs() <= 0.1 * tree + 0.02,
        "{shell_cpu} vs {tree}"
    );
    assert!(report.timeline.iter().any(|p| p.cpu_cores.is_some()));

    // show: the header's CPU line and the processes table with the shell's exit code.
    let out = stemmon()
        .arg("show")
        .arg(&report_path)
        .arg("--processes")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("\nCPU, I/O:   CPU "), "{text}");
    let row = text
        .lines()
        .find(|l| l.starts_with('│') && l.contains("sh -c i=0;"))
        .unwrap_or_else(|| panic!("no shell row in\n{text}"));
    let cells: Vec<&str> = row.trim_matches('│').split('┆').map(str::trim).collect();
    assert_eq!(cells[0], shell.pid.to_string());
    assert_eq!(cells[5], "3", "{row}");

    // compare --metric cpu: the report against itself passes, and judges CPU.
    let out = stemmon()
        .arg("compare")
        .arg(&report_path)
        .arg(&report_path)
        .args(["--metric", "cpu"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    // NEW failed (`exit 3`), so the gate fails closed, and says so; CPU itself is 0 %.
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.starts_with("time compared: the tree's CPU seconds"),
        "{text}"
    );
    assert!(text.contains("NEW is incomplete: the run failed"), "{text}");

    // plot: the CPU panel; export: the CPU counter.
    let svg = dir.path().join("plot.svg");
    let out = stemmon()
        .arg("plot")
        .arg(&report_path)
        .arg("-o")
        .arg(&svg)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(svg.contains("id=\"cpu-panel\"") && svg.contains("id=\"cpu\""));
    let most = chrome_counter_max(&report_path, "CPU cores", "cores");
    // One busy core, on a machine that may share it: well above idle, and not above 1
    // but for the shell's 10 ms clock tick over a point's window of at least 100 ms
    // (0.1 core) and the sampler's own scheduling delay on a loaded machine.
    assert!(most > 0.3 && most < 1.35, "the loop's cores: {most}");
    // Over the whole run the tick is a few per cent: one core at most.
    let run_cores = report.cpu_io.cpu_cores.expect("the run's cores");
    assert!(run_cores <= 1.05, "the run's cores: {run_cores}");
}
