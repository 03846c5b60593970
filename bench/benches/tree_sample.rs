//! One full sample of a process tree of 10 and of 100 descendants (half of them
//! grandchildren): stemmon's reader beside sysinfo's all-process refresh and psutil's
//! `children(recursive=True)` + `memory_info()`, on the same tree in the same run.
//! stemmon's sample is the default one: RSS and the high-water marks of every process
//! (read together from `status`, each reset through `clear_refs`), and the job's cgroup.
//! Budgets (spec §6): 10 descendants, at most 1/4 of sysinfo and 1/8 of psutil;
//! 100 descendants, at most 1/2 and 1/4.

use criterion::Criterion;
use std::collections::HashMap;
use std::hint::black_box;
use stemmon_bench::Tree;
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
        let mut reader = stemmon::__bench::default_reader(false);
        let marks = reader.configure_marks(true, root);
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
        let stemmon_count = first.process_count;
        let (sysinfo_count, _) = sysinfo_tree(&mut system, with_tasks, root);
        let expected = tree.descendants() + 1;
        assert_eq!(stemmon_count, expected, "stemmon sees the whole tree");
        assert_eq!(sysinfo_count, expected, "sysinfo sees the whole tree");

        let mut group = c.benchmark_group(format!("tree_{size}"));
        group.bench_function("stemmon", |b| {
            b.iter(|| black_box(reader.read_tree(black_box(root)).map(|r| r.tree_rss)))
        });
        group.bench_function("sysinfo", |b| {
            b.iter(|| black_box(sysinfo_tree(&mut system, with_tasks, root)))
        });
        let mut lean = System::new().expect("sysinfo opens the process table");
        group.bench_function("sysinfo_no_tasks", |b| {
            b.iter(|| black_box(sysinfo_tree(&mut lean, without_tasks, root)))
        });
        group.finish();

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
            "psutil": psutil,
        });
        stemmon_bench::write_result(&format!("tree_{size}"), &result)
            .expect("the result is written");
        drop(tree);
    }
    c.final_summary();
}
