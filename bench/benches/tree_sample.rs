//! One full sample of a process tree of 10 and of 100 descendants (half of them
//! grandchildren): stemmon's reader beside sysinfo's all-process refresh and psutil's
//! `children(recursive=True)` + `memory_info()`, on the same tree in the same run.
//! stemmon's sample is the default one: RSS and the high-water marks of every process
//! (read together from `status`, each reset through `clear_refs`), its CPU, faults and
//! I/O (`stat`, `io`), and the job's cgroup.
//! Budgets (the book's `cost.md`): 10 descendants, at most 1/4 of sysinfo and 1/8 of psutil;
//! 100 descendants, at most 1/2 and 1/4. Beside them, the floor of the same sample
//! ([`Floor`]: the `pread`s and writes alone, through descriptors kept open, `stat`
//! and `io` included); stemmon's budget is 1.3× the floor at both sizes. And the whole
//! sample as a running monitor counts it (`sampling_seconds / sampling_attempts`: the
//! reading, the sources and the fold into the open stages), beside the same floor; and
//! that sample beside the same monitor's without the measurements read at samples (the
//! open descriptors, memory pressure, the GPU), in the same rounds: what they add.

use criterion::Criterion;
use std::collections::HashMap;
use std::hint::black_box;
use std::time::{Duration, Instant};
use stemmon_bench::{Floor, Tree};
use sysinfo::{Pid, ProcessRefreshKind, ProcessesToUpdate, System};

/// Refreshes every process with `kind`, then walks parent links from `root`; returns
/// the tree's process count and total RSS.
fn sysinfo_tree(system: &mut System, kind: ProcessRefreshKind, root: u32) -> (u32, u64) {
    system.refresh_processes_specifics(ProcessesToUpdate::All, true, kind);
    let processes = system.processes();
    let mut kids: HashMap<Pid, Vec<Pid>> = HashMap::new();
    for (pid, process) in processes {
        // Threads are listed as processes when tasks are refreshed; they are not children.
        if process.thread_kind().is_none() {
            if let Some(parent) = process.parent() {
                kids.entry(parent).or_default().push(*pid);
            }
        }
    }
    let root = Pid::from_u32(root);
    let mut rss = processes.get(&root).map_or(0, |p| p.memory());
    let mut count = 1;
    let mut queue = kids.remove(&root).unwrap_or_default();
    while let Some(pid) = queue.pop() {
        count += 1;
        rss += processes.get(&pid).map_or(0, |p| p.memory());
        queue.extend(kids.remove(&pid).unwrap_or_default());
    }
    (count, rss)
}

/// Times `a` and `b` alternately for about `seconds` and returns the median of each, in
/// nanoseconds: on a shared machine whose load shifts between criterion's runs, both
/// see the same load, so their ratio holds.
fn interleaved(seconds: f64, mut a: impl FnMut(), mut b: impl FnMut()) -> (f64, f64) {
    let (mut times_a, mut times_b) = (Vec::new(), Vec::new());
    let started = Instant::now();
    while started.elapsed().as_secs_f64() < seconds || times_a.len() < 11 {
        let at = Instant::now();
        a();
        let between = Instant::now();
        b();
        times_a.push((between - at).as_nanos() as f64);
        times_b.push(between.elapsed().as_nanos() as f64);
    }
    let median = |times: &mut Vec<f64>| {
        times.sort_by(f64::total_cmp);
        times[times.len() / 2]
    };
    (median(&mut times_a), median(&mut times_b))
}

/// One whole-sample round's figures: a running monitor's mean sample (ns), with the
/// measurements read at samples and without them.
#[derive(Clone, Copy, Debug)]
struct Round {
    with: f64,
    without: f64,
    floor: f64,
}

/// A running monitor of the tree at `root`, sampling every 10 ms for `round` inside one
/// stage, with or without the measurements read at samples; returns its mean sample
/// (`sampling_seconds / sampling_attempts`, ns) and its samples.
fn monitored(root: u32, round: Duration, measurements: bool) -> (f64, u64) {
    let output = stemmon_bench::out_dir().join("whole_sample_report.json");
    let builder = stemmon::Monitor::builder()
        .root_process(root)
        .sample_interval(Duration::from_millis(10))
        .log_interval(None)
        .output(&output);
    let builder = if measurements {
        builder
    } else {
        builder.without_measurements()
    };
    let monitor = builder.start().expect("the monitor starts");
    {
        let _stage = monitor.stage("work").expect("a stage opens");
        std::thread::sleep(round);
    }
    let report = monitor.finish();
    assert!(
        report.sampling_error.is_none(),
        "{:?}",
        report.sampling_error
    );
    let mean = report.sampling_seconds * 1e9 / report.sampling_attempts.max(1) as f64;
    (mean, report.sampling_attempts)
}

/// The whole sample as a running monitor of the tree at `root` counts it, beside the
/// floor, in `rounds` rounds. Each round times the floor for `round`, then runs a monitor
/// sampling every 10 ms for `round` (so that each sample reads every process's `stat`
/// and `io`, as the floor does) with the measurements read at samples and one without
/// them (in turn first), then the floor again; the floor is timed at the same cadence
/// (a sample 10 ms after the last finds colder caches than one in a tight loop) and,
/// like `sampling_seconds / sampling_attempts`, as a mean. A round's ratios are the
/// monitors' means over the mean of the two floors around it, and the one monitor's
/// over the other's, so that a load that shifts between rounds moves both sides;
/// returns each ratio's median round and the samples counted.
fn whole_sample(
    root: u32,
    floor: &mut Floor,
    rounds: usize,
    round: Duration,
) -> (Round, Round, u64) {
    let mut floor_mean = || {
        let (mut total, mut count) = (0.0, 0u32);
        let started = Instant::now();
        while started.elapsed() < round {
            std::thread::sleep(Duration::from_millis(10));
            let at = Instant::now();
            black_box(floor.sample().expect("the floor reads"));
            total += at.elapsed().as_nanos() as f64;
            count += 1;
        }
        total / f64::from(count.max(1))
    };
    let (mut figures, mut samples) = (Vec::new(), 0);
    for index in 0..rounds {
        let before = floor_mean();
        let ((with, a), (without, b)) = if index % 2 == 0 {
            let with = monitored(root, round, true);
            (with, monitored(root, round, false))
        } else {
            let without = monitored(root, round, false);
            (monitored(root, round, true), without)
        };
        samples += a + b;
        let floor = (before + floor_mean()) / 2.0;
        figures.push(Round {
            with,
            without,
            floor,
        });
    }
    let median = |key: fn(&Round) -> f64| {
        let mut sorted = figures.clone();
        sorted.sort_by(|a, b| key(a).total_cmp(&key(b)));
        sorted[sorted.len() / 2]
    };
    let over_floor = median(|r| r.with / r.floor);
    let measurements = median(|r| r.with / r.without);
    (over_floor, measurements, samples)
}

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(stemmon_bench::WARM_UP)
        .measurement_time(stemmon_bench::MEASURE_SLOW)
        .sample_size(stemmon_bench::SAMPLES_SLOW)
        .configure_from_args();
    let with_tasks = ProcessRefreshKind::nothing().with_memory();
    let without_tasks = ProcessRefreshKind::nothing().with_memory().without_tasks();
    for size in [10u32, 100] {
        let tree = Tree::spawn(size).expect("the tree starts");
        let root = tree.root();
        // Every file of every process at every sample: the work the floor does.
        let mut reader = stemmon::readers::full_reader(false);
        let marks = reader.configure_marks(true, true, root);
        assert!(
            marks.parent && marks.descendants,
            "marks are read: {marks:?}"
        );
        let mut system = System::new().expect("sysinfo opens the process table");
        // The same tree for every reader: each must see the root and every descendant.
        let first = reader.read_tree(root).expect("stemmon reads");
        assert!(
            first.tree_rss_bound.is_some(),
            "the default sample has the bound"
        );
        assert!(
            first.own_usage.is_some() && first.io_missing.is_none(),
            "the default sample has CPU and I/O: {:?}",
            first.io_missing
        );
        let stemmon_count = first.process_count;
        let (sysinfo_count, _) = sysinfo_tree(&mut system, with_tasks, root);
        let expected = tree.descendants() + 1;
        assert_eq!(stemmon_count, expected, "stemmon sees the whole tree");
        assert_eq!(sysinfo_count, expected, "sysinfo sees the whole tree");

        let mut floor = Floor::open(root).expect("the floor's files open");
        let (floor_processes, floor_tasks) = floor.files();
        assert_eq!(
            floor_processes as u32, expected,
            "the floor reads the whole tree"
        );

        let mut group = c.benchmark_group(format!("tree_{size}"));
        group.bench_function("stemmon", |b| {
            b.iter(|| black_box(reader.read_tree(black_box(root)).map(|r| r.tree_rss)))
        });
        group.bench_function("floor", |b| {
            b.iter(|| black_box(floor.sample().expect("the floor reads")))
        });
        group.bench_function("sysinfo", |b| {
            b.iter(|| black_box(sysinfo_tree(&mut system, with_tasks, root)))
        });
        let mut lean = System::new().expect("sysinfo opens the process table");
        group.bench_function("sysinfo_no_tasks", |b| {
            b.iter(|| black_box(sysinfo_tree(&mut lean, without_tasks, root)))
        });
        group.finish();
        let (stemmon_ns, floor_ns) = interleaved(
            3.0,
            || drop(black_box(reader.read_tree(root).map(|r| r.tree_rss))),
            || drop(black_box(floor.sample())),
        );
        eprintln!(
            "tree_{size}: stemmon {stemmon_ns:.0} ns, floor {floor_ns:.0} ns interleaved: {:.2}x",
            stemmon_ns / floor_ns
        );
        let (whole, measured, whole_samples) =
            whole_sample(root, &mut floor, 25, Duration::from_millis(400));
        let (whole_ratio, measured_ratio) =
            (whole.with / whole.floor, measured.with / measured.without);
        eprintln!(
            "tree_{size}: whole sample of a running monitor {:.0} ns ({whole_samples} samples), floor {:.0} ns: {whole_ratio:.2}x (median of rounds)",
            whole.with, whole.floor,
        );
        eprintln!(
            "tree_{size}: whole sample with the measurements {:.0} ns, without {:.0} ns: {measured_ratio:.3}x (median of rounds)",
            measured.with, measured.without,
        );

        let psutil = match stemmon_bench::run_psutil(root, 4.0) {
            Ok(Some(figures)) => figures,
            Ok(None) => {
                eprintln!("psutil skipped: STEMMON_BENCH_PYTHON is not set (run bash bench/run)");
                serde_json::Value::Null
            }
            Err(error) => {
                eprintln!("psutil failed: {error}");
                serde_json::Value::Null
            }
        };
        let result = serde_json::json!({
            "descendants": tree.descendants(),
            "stemmon_process_count": stemmon_count,
            "sysinfo_process_count": sysinfo_count,
            "floor_processes": floor_processes,
            "floor_children_files": floor_tasks,
            "interleaved": {"stemmon_ns": stemmon_ns, "floor_ns": floor_ns},
            "whole_sample": {"monitor_ns": whole.with, "floor_ns": whole.floor, "ratio": whole_ratio, "samples": whole_samples},
            "measurements": {"with_ns": measured.with, "without_ns": measured.without, "ratio": measured_ratio},
            "psutil": psutil,
        });
        stemmon_bench::write_result(&format!("tree_{size}"), &result)
            .expect("the result is written");
        drop(tree);
    }
    c.final_summary();
}
