//! The 0.3 figures (the book's `heap.md` and `cpu-io.md`: heap, CPU, I/O and processes) everywhere the command
//! reads them: `show`, `compare --metric heap|cpu`, `merge`, `export --format chrome`
//! and `plot`, on reports built here that hold them (the printing is the point), and
//! the same commands on reports without them, which print as before.

mod common;

use common::{fails_because, outcome, stemmon, table_row, Outcome, TempDir, MIB};
use serde_json::Value;
use std::path::{Path, PathBuf};
use stemmon::report::{ProcessReport, StageReport, TimelinePoint};
use stemmon::Report;

fn stage(id: u32, path: &str, wall: f64) -> StageReport {
    let mut stage = StageReport::default();
    stage.id = id;
    stage.name = path.rsplit('/').next().unwrap().to_owned();
    stage.path = path.to_owned();
    stage.calls = 1;
    stage.wall_seconds = wall;
    stage.min_wall_seconds = wall;
    stage.max_wall_seconds = wall;
    stage
}

/// A finished run: `load_big` holding 500 MiB of heap on 1 core, `tiny_io` writing 64 MiB
/// while it waits, two processes, a 40-point timeline with both series.
fn with_figures() -> Report {
    let mut report = Report::default();
    report.pid = 100;
    report.wall_seconds = 4.0;
    report.sample_interval = 0.1;
    report.sampler = "linux-proc".into();
    report.peaks.peak_tree_rss_bytes = Some(520 * MIB);
    report.heap.allocator = Some("stemmon::Alloc<std::alloc::System>".into());
    report.heap.allocations = Some(1200);
    report.heap.allocated_bytes = Some(600 * MIB);
    report.heap.live_bytes = Some(3 * MIB);
    report.heap.peak_live_bytes = Some(502 * MIB);
    report.cpu_io.cpu_user_seconds = Some(3.5);
    report.cpu_io.cpu_system_seconds = Some(0.5);
    report.cpu_io.cpu_cores = Some(1.0);
    report.cpu_io.io_read_bytes = Some(0);
    report.cpu_io.io_write_bytes = Some(64 * MIB);
    report.cpu_io.major_faults = Some(2);
    let mut big = stage(0, "load_big", 3.0);
    big.heap.heap_allocations = Some(1000);
    big.heap.heap_allocated_bytes = Some(500 * MIB);
    big.heap.heap_freed_bytes = Some(0);
    big.heap.heap_retained_bytes = Some(500 << 20);
    big.heap.peak_heap_bytes = Some(500 * MIB);
    big.cpu_io.cpu_user_seconds = Some(2.7);
    big.cpu_io.cpu_system_seconds = Some(0.3);
    big.cpu_io.cpu_cores = Some(1.0);
    big.cpu_io.cpu_thread_seconds = Some(2.9);
    let mut tiny = stage(1, "tiny_io", 1.0);
    tiny.start_seconds = 3.0;
    tiny.heap.heap_allocations = Some(3);
    tiny.heap.heap_allocated_bytes = Some(4096);
    tiny.heap.heap_freed_bytes = Some(8192);
    tiny.heap.heap_retained_bytes = Some(-4096);
    tiny.heap.peak_heap_bytes = Some(4096);
    tiny.cpu_io.cpu_user_seconds = Some(0.01);
    tiny.cpu_io.cpu_system_seconds = Some(0.02);
    tiny.cpu_io.cpu_cores = Some(0.03);
    tiny.cpu_io.io_read_bytes = Some(0);
    tiny.cpu_io.io_write_bytes = Some(64 * MIB);
    report.stages = vec![big, tiny];
    let mut me = ProcessReport::default();
    me.pid = 100;
    me.ppid = 1;
    me.command = "pipeline --big".into();
    me.last_seconds = 4.0;
    me.peak_rss_bytes = Some(520 * MIB);
    me.cpu_seconds = Some(3.9);
    let mut child = ProcessReport::default();
    child.pid = 101;
    child.ppid = 100;
    // A hostile argv: escapes, a line break, and far wider than a terminal.
    child.command = format!("sh -c '\u{1b}[2J\u{7}\nrm'{}", "x".repeat(5000));
    child.first_seconds = 3.0;
    child.last_seconds = 3.5;
    child.peak_rss_bytes = Some(2 * MIB);
    child.cpu_seconds = Some(0.1);
    child.exit_code = Some(3);
    report.processes = vec![child, me];
    report.timeline = (0..40u32)
        .map(|i| {
            let mut point = TimelinePoint::default();
            point.elapsed_seconds = f64::from(i) * 0.1;
            point.end_seconds = point.elapsed_seconds + 0.1;
            point.tree_rss_bytes = Some((20 + 12 * u64::from(i.min(30))) * MIB);
            point.parent_rss_bytes = point.tree_rss_bytes;
            point.children_rss_bytes = Some(0);
            point.heap_live_bytes = Some(12 * u64::from(i.min(30)) * MIB);
            point.cpu_cores = Some(if i < 30 { 1.0 } else { 0.03 });
            point.process_count = 1;
            point.samples = 1;
            point
        })
        .collect();
    report
}

/// The same run as written by stemmon 0.2: no heap, CPU, I/O or processes.
fn without_figures() -> Report {
    let mut report = with_figures();
    report.heap = Default::default();
    report.cpu_io = Default::default();
    report.processes.clear();
    for stage in &mut report.stages {
        stage.heap = Default::default();
        stage.cpu_io = Default::default();
    }
    for point in &mut report.timeline {
        point.heap_live_bytes = None;
        point.cpu_cores = None;
    }
    report
}

fn write(dir: &Path, name: &str, report: &Report) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_vec(report).unwrap()).unwrap();
    path
}

fn run(args: &[&std::ffi::OsStr]) -> Outcome {
    outcome(stemmon().args(args))
}

fn show(report: &Report, extra: &[&str]) -> String {
    let dir = TempDir::new("figures-show");
    let path = write(dir.path(), "r.json", report);
    let mut args: Vec<&std::ffi::OsStr> = vec!["show".as_ref(), path.as_os_str()];
    args.extend(extra.iter().map(std::ffi::OsStr::new));
    let out = run(&args);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    out.stdout
}

#[test]
fn show_prints_heap_cpu_and_io_columns_and_header_lines() {
    let out = show(&with_figures(), &[]);
    let header = table_row(&out, "stage");
    // The figure columns, from the field table: its labels, in its order.
    assert_eq!(
        header[9..],
        [
            "heap allocated",
            "retained",
            "peak heap",
            "CPU",
            "cores",
            "own CPU",
            "read",
            "written"
        ]
    );
    assert_eq!(
        table_row(&out, "load_big")[9..],
        [
            "500.0 MiB",
            "500.0 MiB",
            "500.0 MiB",
            "3.000s",
            "1.00",
            "2.900s",
            "-",
            "-"
        ]
    );
    assert_eq!(
        table_row(&out, "tiny_io")[9..],
        ["4 KiB", "-4 KiB", "4 KiB", "30.0ms", "0.03", "-", "0 B", "64.0 MiB"]
    );
    assert!(
        out.contains(
            "heap:       stemmon::Alloc<std::alloc::System>; live 3.0 MiB, peak live 502.0 MiB; \
             600.0 MiB allocated in 1200 allocations\n"
        ),
        "{out}"
    );
    assert!(
        out.contains(
            "CPU, I/O:   CPU 4.000s (user 3.500s, system 500.0ms; 1.00 cores over the run); \
             read 0 B, written 64.0 MiB; 2 major faults\n"
        ),
        "{out}"
    );
    assert!(
        !out.contains("processes:"),
        "the processes table is asked for"
    );
}

#[test]
fn a_report_without_the_figures_prints_as_before() {
    let out = show(&without_figures(), &["--processes"]);
    assert_eq!(table_row(&out, "stage").len(), 9, "{out}");
    assert!(!out.contains("heap") && !out.contains("CPU"), "{out}");
    assert!(out.contains("processes:  none recorded"), "{out}");
    // Why the heap is missing, when the runtime says.
    let mut report = without_figures();
    report.heap.missing = Some("stemmon::Alloc is not the global allocator".into());
    report.io_missing = Some("/proc/self/io: permission denied".into());
    let out = show(&report, &[]);
    assert!(
        out.contains("heap:       none: stemmon::Alloc is not the global allocator\n"),
        "{out}"
    );
    assert!(
        out.contains("CPU, I/O:   I/O missing: /proc/self/io: permission denied\n"),
        "{out}"
    );
}

#[test]
fn show_processes_is_an_escaped_table_highest_peak_first() {
    let out = show(&with_figures(), &["--processes"]);
    let table: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("processes:"))
        .collect();
    assert_eq!(
        table[0],
        "processes:  2 seen (at most the 50 with the highest peak)"
    );
    let rows: Vec<Vec<&str>> = table
        .iter()
        .filter(|l| l.starts_with('│'))
        .map(|l| l.trim_matches('│').split('┆').map(str::trim).collect())
        .collect();
    assert_eq!(
        rows[0],
        ["pid", "ppid", "command", "peak RSS", "CPU", "exit", "first", "last"]
    );
    assert_eq!(
        rows[1],
        [
            "100",
            "1",
            "pipeline --big",
            "520.0 MiB",
            "3.900s",
            "-",
            "0µs",
            "4.000s"
        ]
    );
    assert_eq!(rows[2][..2], ["101", "100"]);
    assert!(
        rows[2][2].starts_with("sh -c '\\u{1b}[2J\\u{7}\\nrm'xxx"),
        "{}",
        rows[2][2]
    );
    // Longer than the 200 characters stemmon records: cut in the middle there, even down
    // a pipe, the command's head and its tail both showing (60 when fitted to a width).
    let (head, tail) = rows[2][2].split_once('…').unwrap();
    assert!(
        tail.chars().all(|c| c == 'x') && !tail.is_empty(),
        "{}",
        rows[2][2]
    );
    assert_eq!(head.chars().count() + 1 + tail.chars().count(), 200);
    assert_eq!(
        rows[2][3..],
        ["2.0 MiB", "100.0ms", "3", "3.000s", "3.500s"]
    );
    let raw = out.chars().filter(|c| c.is_control() && *c != '\n').count();
    assert_eq!(raw, 0, "no raw control character reaches the terminal");
    assert!(
        out.lines().all(|l| l.chars().count() < 300),
        "bounded width"
    );
}

#[test]
fn show_processes_of_a_hostile_report_stays_linear() {
    // 100 000 processes with 200-character commands of escapes: well under 10 s.
    let mut report = with_figures();
    let mut process = report.processes[0].clone();
    process.command = "\u{1b}".repeat(200);
    report.processes = (0..100_000)
        .map(|pid| {
            let mut p = process.clone();
            p.pid = pid;
            p.peak_rss_bytes = Some(u64::from(pid % 977) * MIB);
            p
        })
        .collect();
    // Timed from the written file: the command's time alone, not this test's writing.
    let dir = TempDir::new("figures-show-hostile");
    let path = write(dir.path(), "r.json", &report);
    let started = std::time::Instant::now();
    let done = run(&["show".as_ref(), path.as_os_str(), "--processes".as_ref()]);
    assert!(started.elapsed().as_secs() < 10, "{:?}", started.elapsed());
    assert_eq!(done.code, Some(0), "{}", done.stderr);
    let out = done.stdout;
    // The highest 200 printed, the rest counted: output stays bounded too.
    assert_eq!(out.lines().filter(|l| l.contains("\\u{1b}")).count(), 200);
    assert!(out.contains("\n… and 99800 more (a report stemmon wrote holds at most 50)\n"));
}

fn compare(args: &[&str], base: &Report, new: &Report) -> Outcome {
    let dir = TempDir::new("figures-compare");
    let (base, new) = (
        write(dir.path(), "base.json", base),
        write(dir.path(), "new.json", new),
    );
    let mut all: Vec<&std::ffi::OsStr> = vec!["compare".as_ref(), base.as_ref(), new.as_ref()];
    all.extend(args.iter().map(std::ffi::OsStr::new));
    run(&all)
}

#[test]
fn compare_heap_judges_allocated_bytes_and_the_peak_heap() {
    let base = with_figures();
    let same = compare(&["--metric", "heap"], &base, &base);
    assert_eq!(same.code, Some(0), "{}{}", same.stdout, same.stderr);
    assert!(
        same.stdout.starts_with(
            "memory compared: the bytes allocated on the heap (`heap_allocated_bytes`) and"
        ),
        "{}",
        same.stdout
    );
    assert_eq!(
        table_row(&same.stdout, "load_big")[4..7],
        ["500.0 MiB", "500.0 MiB", "0.0 %"]
    );

    let mut grew = base.clone();
    grew.stages[0].heap.peak_heap_bytes = Some(600 * MIB);
    fails_because(
        &compare(&["--metric", "heap"], &base, &grew),
        "stage `load_big`: peak heap +20.0 % (500.0 MiB → 600.0 MiB), past +10 %",
    );
    let mut allocated = base.clone();
    allocated.heap.allocated_bytes = Some(700 * MIB);
    fails_because(
        &compare(&["--metric", "heap"], &base, &allocated),
        "(whole run): heap allocated +16.7 %",
    );
    // RSS is not what `--metric heap` judges: a grown RSS passes.
    let mut rss = base.clone();
    rss.peaks.peak_tree_rss_bytes = Some(2000 * MIB);
    assert_eq!(compare(&["--metric", "heap"], &base, &rss).code, Some(0));
    // --max-peak holds the peak heap to a size, never the sum of allocations.
    let limited = compare(&["--metric", "heap", "--max-peak", "550MiB"], &base, &base);
    assert_eq!(limited.code, Some(0), "{}", limited.stdout);
    fails_because(
        &compare(&["--metric", "heap", "--max-peak", "400MiB"], &base, &base),
        "NEW's peak heap of stage `load_big`, 500.0 MiB, passes --max-peak 400.0 MiB",
    );
}

#[test]
fn compare_heap_and_cpu_fail_closed_without_the_figures() {
    let (with, without) = (with_figures(), without_figures());
    for metric in ["heap", "cpu"] {
        // NEW without the figures BASE has: a failure, never a pass.
        let outcome = compare(&["--metric", metric], &with, &without);
        assert_eq!(outcome.code, Some(1), "{metric}: {}", outcome.stdout);
        assert!(
            outcome.stdout.contains("NEW is incomplete"),
            "{}",
            outcome.stdout
        );
        // BASE without them: nothing to compare with, exit 2 with one line.
        let outcome = compare(&["--metric", metric], &without, &with);
        assert_eq!(outcome.code, Some(2), "{metric}: {}", outcome.stdout);
        assert_eq!(outcome.stderr.lines().count(), 1, "{}", outcome.stderr);
    }
    // One stage's figure gone from NEW fails that stage.
    let mut gone = with.clone();
    gone.stages[1].heap.peak_heap_bytes = None;
    fails_because(
        &compare(&["--metric", "heap"], &with, &gone),
        "stage `tiny_io`: NEW is incomplete: `peak_heap_bytes` is null or missing",
    );
    let mut base = without.clone();
    base.heap.missing = Some("stemmon::Alloc is not the global allocator".into());
    let outcome = compare(&["--metric", "heap"], &base, &with);
    assert!(
        outcome
            .stderr
            .contains("no heap figures (--metric heap): stemmon::Alloc is not"),
        "{}",
        outcome.stderr
    );
}

#[test]
fn compare_cpu_judges_user_plus_system_seconds_against_the_time_threshold() {
    let base = with_figures();
    let mut new = base.clone();
    // 3.0 s → 3.3 s: +10 %, at the time threshold, passes; past it fails.
    new.stages[0].cpu_io.cpu_user_seconds = Some(3.0);
    let outcome = compare(&["--metric", "cpu"], &base, &new);
    assert_eq!(outcome.code, Some(0), "{}", outcome.stdout);
    assert!(outcome
        .stdout
        .starts_with("time compared: the tree's CPU seconds"));
    assert_eq!(
        table_row(&outcome.stdout, "load_big")[4..7],
        ["3.000s", "3.300s", "+10.0 %"]
    );
    fails_because(
        &compare(
            &["--metric", "cpu", "--max-time-increase", "5"],
            &base,
            &new,
        ),
        "stage `load_big`: CPU +10.0 % (3.000s → 3.300s), past +5 %",
    );
    let markdown = compare(
        &[
            "--metric",
            "cpu",
            "--max-time-increase",
            "5",
            "--format",
            "markdown",
        ],
        &base,
        &new,
    );
    assert_eq!(markdown.code, Some(1));
    assert!(
        markdown
            .stdout
            .contains("| load\\_big | 3.000s | 3.000s | 0.0 % | 3.000s | 3.300s | +10.0 % | FAIL: CPU +10.0 % |"),
        "{}",
        markdown.stdout
    );
    assert!(markdown
        .stderr
        .contains("stemmon: FAIL: stage `load_big`: CPU +10.0 %"));
}

fn merge(reports: &[Report]) -> Value {
    let dir = TempDir::new("figures-merge");
    let paths: Vec<PathBuf> = reports
        .iter()
        .enumerate()
        .map(|(i, r)| write(dir.path(), &format!("rank{i}.json"), r))
        .collect();
    let out = dir.path().join("merged.json");
    let mut args: Vec<&std::ffi::OsStr> = vec!["merge".as_ref()];
    args.extend(paths.iter().map(|p| p.as_os_str()));
    args.extend(["-o".as_ref(), out.as_os_str()]);
    let done = run(&args);
    assert_eq!(done.code, Some(0), "{}", done.stderr);
    serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap()
}

#[test]
fn merge_sums_counts_keeps_peaks_and_recomputes_cores() {
    let a = with_figures();
    let mut b = with_figures();
    b.pid = 200; // Another rank: another run.
    b.host = "node-2".into();
    b.labels.insert("rank".into(), "1".into());
    b.stages[0].heap.peak_heap_bytes = Some(700 * MIB);
    b.stages[0].cpu_io.cpu_user_seconds = Some(8.7); // 9 s over 3 s: 3 cores.
    b.stages[0].cpu_io.cpu_cores = Some(3.0);
    b.processes[0].peak_rss_bytes = Some(900 * MIB);
    let mut old = without_figures();
    old.pid = 300;
    let merged = merge(&[a, b, old]);
    // The stage holds the combined figures under the report's own keys.
    let big = &merged["stages"][0];
    assert_eq!(big["path"], "load_big");
    assert_eq!(big["calls"], 3);
    assert_eq!(big["wall_seconds"], 9.0, "summed, as threads sum");
    assert_eq!(
        big["heap_allocated_bytes"],
        1000 * MIB,
        "the 0.2 report has none"
    );
    assert_eq!(big["heap_allocations"], 2000);
    assert_eq!(big["peak_heap_bytes"], 700 * MIB, "the highest");
    assert!((big["cpu_user_seconds"].as_f64().unwrap() - 11.4).abs() < 1e-9);
    // 12 CPU seconds over the 6 wall seconds of the two reports with CPU.
    assert!(
        (big["cpu_cores"].as_f64().unwrap() - 2.0).abs() < 1e-9,
        "{big}"
    );
    assert_eq!(merged["stages"][1]["io_write_bytes"], 128 * MIB);
    // The whole run: the longest wall, peaks the highest, sums summed, cores per run.
    assert_eq!(merged["wall_seconds"], 4.0);
    assert_eq!(merged["heap"]["allocated_bytes"], 1200 * MIB);
    assert_eq!(merged["heap"]["peak_live_bytes"], 502 * MIB);
    assert!(
        (merged["cpu_cores"].as_f64().unwrap() - 1.0).abs() < 1e-9,
        "each run's 1.0 cores, not their sum: {}",
        merged["cpu_cores"]
    );
    assert_eq!(merged["merge"]["run"]["cpu_cores"]["max"], 1.0);
    // What each report said is under `merge`.
    let section = &merged["merge"];
    assert_eq!(section["inputs"][1]["host"], "node-2");
    assert_eq!(section["inputs"][1]["rank"], "1");
    let spreads = &section["stages"][0];
    assert_eq!(
        (&spreads["path"], &spreads["reports"]),
        (&"load_big".into(), &3.into())
    );
    assert_eq!(spreads["heap_allocated_bytes"]["count"], 2);
    assert_eq!(spreads["heap_allocated_bytes"]["sum"], 1000 * MIB);
    assert_eq!(spreads["peak_heap_bytes"]["max"], 700 * MIB);
    assert_eq!(spreads["peak_heap_bytes"]["max_report"], 1);
    assert_eq!(spreads["peak_heap_bytes"]["sum"], 1200 * MIB);
    assert_eq!(spreads["peak_heap_bytes"]["mean"], 600.0 * MIB as f64);
    assert!((spreads["cpu_seconds"]["sum"].as_f64().unwrap() - 12.0).abs() < 1e-9);
    assert_eq!(section["run"]["wall_seconds"]["sum"], 12.0);
    assert_eq!(section["run"]["peak_heap_bytes"]["max"], 502 * MIB);
    let processes = merged["processes"].as_array().unwrap();
    assert_eq!(processes.len(), 4);
    assert_eq!(processes[0]["peak_rss_bytes"], 900 * MIB);
    assert_eq!(section["processes"][0], 1, "from rank 1's report");
    assert_eq!(processes[1]["pid"], 100);
    assert_eq!(section["processes"][1], 0);
}

#[test]
fn merge_keeps_the_50_processes_with_the_highest_peak() {
    let mut a = with_figures();
    a.processes = (0..40)
        .map(|i| {
            let mut p = ProcessReport::default();
            p.pid = i;
            p.peak_rss_bytes = Some(u64::from(i) * MIB);
            p
        })
        .collect();
    let mut b = a.clone();
    b.pid = 101;
    for p in &mut b.processes {
        p.peak_rss_bytes = p.peak_rss_bytes.map(|v| v + MIB / 2);
    }
    let merged = merge(&[a, b]);
    let processes = merged["processes"].as_array().unwrap();
    assert_eq!(processes.len(), 50);
    let peaks: Vec<u64> = processes
        .iter()
        .map(|p| p["peak_rss_bytes"].as_u64().unwrap())
        .collect();
    assert!(peaks.windows(2).all(|w| w[0] >= w[1]), "highest first");
    assert_eq!(peaks[0], 39 * MIB + MIB / 2);
    assert_eq!(peaks[49], 15 * MIB, "40 + 40, the 30 lowest dropped");
    assert_eq!(merged["merge"]["processes"].as_array().unwrap().len(), 50);
}

#[test]
fn export_chrome_has_cpu_and_heap_counters() {
    let dir = TempDir::new("figures-export");
    let path = write(dir.path(), "r.json", &with_figures());
    let out = run(&[
        "export".as_ref(),
        path.as_os_str(),
        "--format".as_ref(),
        "chrome".as_ref(),
    ]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let trace: Value = serde_json::from_str(&out.stdout).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let counter = |name: &str, key: &str| -> Vec<f64> {
        events
            .iter()
            .filter(|e| e["ph"] == "C" && e["name"] == name)
            .map(|e| e["args"][key].as_f64().unwrap())
            .collect()
    };
    let cores = counter("CPU cores", "cores");
    assert_eq!(cores.len(), 40);
    assert_eq!((cores[0], cores[39]), (1.0, 0.03));
    let heap = counter("live heap", "MiB");
    assert_eq!(heap.len(), 40);
    assert_eq!(heap[39], 360.0);
    let path = write(dir.path(), "old.json", &without_figures());
    let out = run(&[
        "export".as_ref(),
        path.as_os_str(),
        "--format".as_ref(),
        "chrome".as_ref(),
    ]);
    assert!(!out.stdout.contains("CPU cores") && !out.stdout.contains("live heap"));
}

#[test]
fn plot_svg_has_the_heap_line_and_the_cpu_panel_only_with_the_figures() {
    let dir = TempDir::new("figures-plot");
    for (report, has) in [(with_figures(), true), (without_figures(), false)] {
        let path = write(dir.path(), "r.json", &report);
        let svg_path = dir.path().join("r.svg");
        let out = run(&[
            "plot".as_ref(),
            path.as_os_str(),
            "-o".as_ref(),
            svg_path.as_os_str(),
        ]);
        assert_eq!(out.code, Some(0), "{}", out.stderr);
        let svg = std::fs::read_to_string(&svg_path).unwrap();
        let doc = roxmltree::Document::parse(&svg).expect("well-formed XML");
        let by_id = |id: &str| doc.descendants().find(|n| n.attribute("id") == Some(id));
        assert_eq!(by_id("cpu-panel").is_some(), has);
        assert_eq!(by_id("heap").is_some(), has);
        if has {
            let corners = by_id("cpu").unwrap().attribute("points").unwrap();
            assert_eq!(corners.split(' ').count(), 80, "two corners a point");
            let ticks: Vec<&str> = doc
                .descendants()
                .filter(|n| n.attribute("class") == Some("cpu-tick"))
                .filter_map(|n| n.text())
                .collect();
            assert!(ticks.contains(&"1 core") && ticks.iter().all(|t| t.contains("core")));
        }
    }
}

#[test]
fn hostile_cpu_and_heap_figures_are_exit_2_or_print_bounded() {
    let dir = TempDir::new("figures-hostile");
    // A CPU time no run has: refused like a hostile wall time, one line, every command.
    let mut report = with_figures();
    report.stages[1].cpu_io.cpu_user_seconds = Some(1e308);
    let path = write(dir.path(), "cpu.json", &report);
    for command in ["show", "plot", "export", "merge"] {
        let mut args: Vec<&std::ffi::OsStr> = vec![command.as_ref(), path.as_os_str()];
        let out = dir.path().join("out.html");
        match command {
            "export" => args.extend(["--format", "chrome"].map(std::ffi::OsStr::new)),
            "plot" => args.extend([std::ffi::OsStr::new("-o"), out.as_os_str()]),
            "merge" => args.extend([
                path.as_os_str(),
                std::ffi::OsStr::new("-o"),
                out.as_os_str(),
            ]),
            _ => {}
        }
        let done = run(&args);
        assert_eq!(done.code, Some(2), "{command}: {}", done.stdout);
        assert_eq!(done.stderr.lines().count(), 1, "{}", done.stderr);
        assert!(
            done.stderr
                .contains("stage 1's `cpu_user_seconds` is 1e308, not a time"),
            "{}",
            done.stderr
        );
    }
    let mut report = with_figures();
    report.timeline[3].cpu_cores = Some(-1.0);
    let path = write(dir.path(), "cores.json", &report);
    let done = run(&["show".as_ref(), path.as_os_str()]);
    assert_eq!(done.code, Some(2));
    assert!(
        done.stderr.contains("timeline point 3's `cpu_cores`"),
        "{}",
        done.stderr
    );
    // Extreme heap figures print, and the SVG scales to them.
    let mut report = with_figures();
    report.stages[0].heap.heap_retained_bytes = Some(i64::MIN);
    report.stages[0].heap.peak_heap_bytes = Some(u64::MAX);
    report.timeline[0].heap_live_bytes = Some(u64::MAX);
    let path = write(dir.path(), "heap.json", &report);
    let out = show(&report, &[]);
    let header = table_row(&out, "stage");
    let at = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let big = table_row(&out, "load_big");
    assert_eq!(
        [big[at("peak heap")], big[at("retained")]],
        ["17179869184.0 GiB", "-8589934592.0 GiB"]
    );
    let svg = dir.path().join("heap.svg");
    let done = run(&[
        "plot".as_ref(),
        path.as_os_str(),
        "-o".as_ref(),
        svg.as_os_str(),
    ]);
    assert_eq!(done.code, Some(0), "{}", done.stderr);
    roxmltree::Document::parse(&std::fs::read_to_string(&svg).unwrap()).expect("well-formed");
}
