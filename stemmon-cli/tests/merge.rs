//! `stemmon merge` round trips (the book's `exact-peaks.md`): a merged report is a report that `show`,
//! `plot`, `compare` and `export` read; merging one report gives its figures back;
//! merged reports merge again; the same run twice is refused.

mod common;

use common::{read_report, staged_report, stemmon, table_row, TempDir, Workload};
use serde_json::Value;
use std::path::{Path, PathBuf};
use stemmon::Report;
use stemmon_report::fields::{Fold, FIELDS};

struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn run(args: &[&std::ffi::OsStr]) -> Ran {
    let output = stemmon().args(args).output().unwrap();
    let ran = Ran {
        code: output.status.code(),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
    };
    assert!(!ran.stderr.contains("panicked"), "{}", ran.stderr);
    ran
}

/// `stemmon merge inputs... -o out`.
fn merge(inputs: &[&Path], out: &Path) -> Ran {
    let mut args: Vec<&std::ffi::OsStr> = vec!["merge".as_ref()];
    args.extend(inputs.iter().map(|p| p.as_os_str()));
    args.extend(["-o".as_ref(), out.as_os_str()]);
    run(&args)
}

/// Merges `inputs` into `dir/name`, which must work; the merged report, read and checked.
fn merged(inputs: &[&Path], dir: &Path, name: &str) -> (PathBuf, Report) {
    let out = dir.join(name);
    let ran = merge(inputs, &out);
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    let report = read_report(&out);
    (out, report)
}

fn section(path: &Path) -> Value {
    let json: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    json["merge"].clone()
}

#[test]
fn merging_one_report_gives_its_figures_back() {
    let dir = TempDir::new("merge-one");
    let path = staged_report(dir.path(), "rank0.json", Workload::default(), 0);
    let original = read_report(&path);
    let (_, merged) = merged(&[&path], dir.path(), "merged.json");
    assert_eq!(merged.stages.len(), original.stages.len());
    for stage in &original.stages {
        let back = merged.stage(&stage.path).unwrap();
        assert_eq!(
            (
                back.name.as_str(),
                back.start_seconds,
                back.min_wall_seconds
            ),
            (
                stage.name.as_str(),
                stage.start_seconds,
                stage.min_wall_seconds
            ),
            "{}",
            stage.path
        );
        let parent = |r: &Report, s: &stemmon::report::StageReport| {
            s.parent_id.map(|p| r.stages[p as usize].path.clone())
        };
        assert_eq!(parent(&merged, back), parent(&original, stage));
        for field in FIELDS {
            let (was, is) = (field.of_stage(stage), field.of_stage(back));
            if field.fold == Fold::Derived {
                // Recomputed from the stage's own sums: the same to rounding.
                let near = match (was, is) {
                    (Some(a), Some(b)) => (a - b).abs() <= 1e-9 * a.abs().max(1.0),
                    (a, b) => a == b,
                };
                assert!(near, "{} of {}: {was:?} → {is:?}", field.key, stage.path);
            } else {
                assert_eq!(was, is, "{} of {}", field.key, stage.path);
            }
        }
    }
    for field in FIELDS.iter().filter(|f| f.fold != Fold::Derived) {
        assert_eq!(
            field.of_run(&original),
            field.of_run(&merged),
            "{} of the run",
            field.key
        );
    }
    assert_eq!(merged.wall_seconds, original.wall_seconds);
    assert_eq!(
        (&merged.host, &merged.labels, merged.pid),
        (&original.host, &original.labels, original.pid)
    );
    assert_eq!(merged.timeline, original.timeline);
    assert_eq!(merged.spans, original.spans, "stage ids kept");
    let by_pid = |r: &Report| {
        let mut processes = r.processes.clone();
        processes.sort_by_key(|p| p.pid);
        processes
    };
    assert_eq!(by_pid(&merged), by_pid(&original));
    assert_eq!(
        merged.format_version.as_deref(),
        Some(stemmon_report::FORMAT_VERSION)
    );
    assert_ne!(
        merged.run_id, original.run_id,
        "a merge is a run of its own"
    );
}

#[test]
fn merged_reports_are_reports_and_merge_again() {
    let dir = TempDir::new("merge-round-trip");
    let ranks: Vec<PathBuf> = (0..3)
        .map(|rank| {
            staged_report(
                dir.path(),
                &format!("rank{rank}.json"),
                Workload::default(),
                rank,
            )
        })
        .collect();
    let (first, pair) = merged(&[&ranks[0], &ranks[1]], dir.path(), "pair.json");
    // `show`, `plot` (HTML and SVG), `compare` and `export` read it.
    let shown = run(&["show".as_ref(), first.as_os_str()]);
    assert_eq!(shown.code, Some(0), "{}", shown.stderr);
    assert!(
        shown
            .stdout
            .lines()
            .any(|l| l.starts_with("merged:     2 reports (") && l.contains("rank1.json")),
        "{}",
        shown.stdout
    );
    assert!(shown.stdout.contains("fit"), "{}", shown.stdout);
    for picture in ["pair.html", "pair.svg"] {
        let out = dir.path().join(picture);
        let ran = run(&[
            "plot".as_ref(),
            first.as_os_str(),
            "-o".as_ref(),
            out.as_os_str(),
        ]);
        assert_eq!(ran.code, Some(0), "{picture}: {}", ran.stderr);
    }
    let svg = std::fs::read_to_string(dir.path().join("pair.svg")).unwrap();
    roxmltree::Document::parse(&svg).expect("well-formed");
    let compared = run(&["compare".as_ref(), first.as_os_str(), first.as_os_str()]);
    assert_eq!(
        compared.code,
        Some(0),
        "{}{}",
        compared.stdout,
        compared.stderr
    );
    let exported = run(&[
        "export".as_ref(),
        first.as_os_str(),
        "--format".as_ref(),
        "chrome".as_ref(),
    ]);
    assert_eq!(exported.code, Some(0), "{}", exported.stderr);
    serde_json::from_str::<Value>(&exported.stdout).expect("a trace");

    // A merged report merges again, with another merged report.
    let (second, _) = merged(&[&ranks[2]], dir.path(), "third.json");
    let (all_path, all) = merged(&[&first, &second], dir.path(), "all.json");
    let reports: Vec<Report> = ranks.iter().map(|p| read_report(p)).collect();
    let calls = |r: &Report, path: &str| r.stage(path).map_or(0, |s| s.calls);
    for stage in &reports[0].stages {
        let path = &stage.path;
        let each: u64 = reports.iter().map(|r| calls(r, path)).sum();
        assert_eq!(calls(&all, path), each, "{path}");
        assert_eq!(
            calls(&pair, path),
            calls(&reports[0], path) + calls(&reports[1], path)
        );
    }
    let highest = reports
        .iter()
        .filter_map(|r| r.peaks.peak_tree_rss_bytes)
        .max();
    assert_eq!(all.peaks.peak_tree_rss_bytes, highest);
    let longest = reports.iter().map(|r| r.wall_seconds).fold(0.0, f64::max);
    assert_eq!(all.wall_seconds, longest);
    let runs = section(&all_path)["runs"].clone();
    let ids: Vec<&str> = reports
        .iter()
        .map(|r| r.run_id.as_deref().unwrap())
        .collect();
    let mut listed: Vec<&str> = runs
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    listed.sort_unstable();
    let mut expected = ids.clone();
    expected.sort_unstable();
    assert_eq!(listed, expected, "every rank's run, through both merges");
    assert_eq!(section(&all_path)["inputs"].as_array().unwrap().len(), 2);
}

#[test]
fn the_same_run_twice_is_exit_2_with_one_line_naming_both_files() {
    let dir = TempDir::new("merge-twice");
    let rank0 = staged_report(dir.path(), "rank0.json", Workload::default(), 0);
    let rank1 = staged_report(dir.path(), "rank1.json", Workload::default(), 1);
    let copy = dir.path().join("copy-of-rank0.json");
    std::fs::copy(&rank0, &copy).unwrap();
    let (pair, _) = merged(&[&rank0, &rank1], dir.path(), "pair.json");
    let out = dir.path().join("out.json");
    for (inputs, names, what) in [
        (
            vec![&rank0, &rank0],
            ["rank0.json", "rank0.json"],
            "are the same run",
        ),
        (
            vec![&rank0, &copy],
            ["rank0.json", "copy-of-rank0.json"],
            "are the same run",
        ),
        (
            vec![&pair, &rank1],
            ["pair.json", "rank1.json"],
            "both hold the run",
        ),
        (
            vec![&rank1, &pair],
            ["rank1.json", "pair.json"],
            "both hold the run",
        ),
        (
            vec![&pair, &pair],
            ["pair.json", "pair.json"],
            "are the same run",
        ),
    ] {
        let inputs: Vec<&Path> = inputs.iter().map(|p| p.as_path()).collect();
        let ran = merge(&inputs, &out);
        assert_eq!(ran.code, Some(2), "{names:?}: {}", ran.stdout);
        assert_eq!(ran.stderr.lines().count(), 1, "{}", ran.stderr);
        let line = ran.stderr.trim_end();
        let first = line.find(names[0]).unwrap_or_else(|| panic!("{line}"));
        assert!(line[first + 1..].contains(names[1]), "both named: {line}");
        assert!(
            line.contains(what) && line.ends_with("each run is merged once"),
            "{line}"
        );
        assert!(!out.exists(), "nothing written");
    }
}

/// A 0.4 report of a run on a GPU machine, written by hand (the runtime's GPU source
/// is tested with a fake NVML of its own): `train` held `tree` bytes of GPU memory on a
/// device whose busiest reading was `device`.
fn gpu_report(run_id: &str, tree: u64, device: u64) -> Value {
    serde_json::json!({
        "format_version": "0.4", "run_id": run_id, "pid": 7, "running": false,
        "wall_seconds": 4.0, "sample_interval": 0.5, "sampler": "linux-proc",
        "host": "gpu-node", "peak_tree_rss_bytes": 300 << 20,
        "peak_tree_gpu_bytes": tree, "peak_device_gpu_bytes": device,
        "gpu": {
            "driver_version": "550.54.15", "missing": null,
            "devices": [{ "index": 0, "name": "NVIDIA H200\u{1b}[2J", "uuid": "GPU-0f",
                          "memory_total_bytes": 150_000_000_000u64,
                          "peak_memory_used_bytes": device }],
        },
        "stages": [
            { "id": 0, "name": "load", "path": "load", "calls": 1, "wall_seconds": 1.0,
              "min_wall_seconds": 1.0, "max_wall_seconds": 1.0,
              "peak_tree_rss_bytes": 100 << 20 },
            { "id": 1, "name": "train", "path": "train", "calls": 1, "start_seconds": 1.0,
              "wall_seconds": 3.0, "min_wall_seconds": 3.0, "max_wall_seconds": 3.0,
              "peak_tree_rss_bytes": 300 << 20, "peak_tree_gpu_bytes": tree,
              "peak_device_gpu_bytes": device },
        ],
        "timeline": (0..8).map(|i| serde_json::json!({
            "elapsed_seconds": f64::from(i) * 0.5, "end_seconds": f64::from(i) * 0.5,
            "tree_rss_bytes": 100 << 20, "parent_rss_bytes": 100 << 20,
            "children_rss_bytes": 0, "process_count": 1, "samples": 1,
            "tree_gpu_bytes": if i >= 2 { tree } else { 0 },
        })).collect::<Vec<_>>(),
    })
}

fn write(dir: &Path, name: &str, report: &Value) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_vec(report).unwrap()).unwrap();
    path
}

const GIB: u64 = 1 << 30;

#[test]
fn gpu_figures_show_plot_compare_and_merge() {
    let dir = TempDir::new("merge-gpu");
    let base = write(dir.path(), "base.json", &gpu_report("aa", 2 * GIB, 3 * GIB));
    // show: a GPU column for the stage that has the figure, the `gpu:` line escaped.
    let out = run(&["show".as_ref(), base.as_os_str()]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let header = table_row(&out.stdout, "stage");
    let at = |name: &str| header.iter().position(|h| *h == name).unwrap();
    assert_eq!(
        table_row(&out.stdout, "train")[at("GPU")],
        "2.0 GiB",
        "{}",
        out.stdout
    );
    assert_eq!(table_row(&out.stdout, "train")[at("GPU device")], "3.0 GiB");
    assert_eq!(table_row(&out.stdout, "load")[at("GPU")], "-");
    let line = out
        .stdout
        .lines()
        .find(|l| l.starts_with("gpu:"))
        .unwrap_or_else(|| panic!("no gpu line in\n{}", out.stdout));
    assert_eq!(
        line,
        "gpu:        the tree's peak 2.0 GiB; the busiest GPU's peak 3.0 GiB; driver \
         550.54.15; GPU 0 NVIDIA H200\\u{1b}[2J: peak used 3.0 GiB of 139.7 GiB"
    );
    // plot: the GPU line, as steps over the times it covers.
    let svg = dir.path().join("base.svg");
    let ran = run(&[
        "plot".as_ref(),
        base.as_os_str(),
        "-o".as_ref(),
        svg.as_os_str(),
    ]);
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    let text = std::fs::read_to_string(&svg).unwrap();
    let doc = roxmltree::Document::parse(&text).unwrap();
    let gpu = doc
        .descendants()
        .find(|n| n.attribute("id") == Some("gpu"))
        .expect("the GPU line");
    let corners: Vec<(f64, f64)> = gpu
        .attribute("points")
        .unwrap()
        .split(' ')
        .map(|p| {
            let (x, y) = p.split_once(',').unwrap();
            (x.parse().unwrap(), y.parse().unwrap())
        })
        .collect();
    assert_eq!(
        corners.len(),
        2 * 15,
        "two corners a step: 8 readings, 7 gaps"
    );
    assert!(
        corners
            .windows(2)
            .all(|w| (w[0].0 - w[1].0).abs() < 0.05 || (w[0].1 - w[1].1).abs() < 0.05),
        "steps, no ramp: {corners:?}"
    );
    assert!(text.contains(">tree GPU memory<"), "in the legend");
    let without = {
        let mut report = gpu_report("bb", 2 * GIB, 3 * GIB);
        for point in report["timeline"].as_array_mut().unwrap() {
            point.as_object_mut().unwrap().remove("tree_gpu_bytes");
        }
        write(dir.path(), "no-timeline-gpu.json", &report)
    };
    let svg = dir.path().join("without.svg");
    let ran = run(&[
        "plot".as_ref(),
        without.as_os_str(),
        "-o".as_ref(),
        svg.as_os_str(),
    ]);
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    assert!(!std::fs::read_to_string(&svg)
        .unwrap()
        .contains("id=\"gpu\""));

    // compare --metric gpu: the two GPU figures, held to the memory threshold.
    let grown = write(
        dir.path(),
        "grown.json",
        &gpu_report("cc", 3 * GIB, 3 * GIB),
    );
    let compare = |base: &Path, new: &Path, extra: &[&str]| {
        let mut args: Vec<&std::ffi::OsStr> =
            vec!["compare".as_ref(), base.as_os_str(), new.as_os_str()];
        args.extend(
            ["--metric", "gpu"]
                .iter()
                .chain(extra)
                .map(std::ffi::OsStr::new),
        );
        run(&args)
    };
    let same = compare(&base, &base, &[]);
    assert_eq!(same.code, Some(0), "{}", same.stdout);
    assert!(
        same.stdout.starts_with(
            "memory compared: the highest GPU memory the tree's processes held \
             (`peak_tree_gpu_bytes`) and the busiest GPU's highest used memory"
        ),
        "{}",
        same.stdout
    );
    let failed = compare(&base, &grown, &[]);
    assert_eq!(failed.code, Some(1), "{}", failed.stdout);
    assert!(
        failed
            .stdout
            .contains("FAIL: stage `train`: GPU +50.0 % (2.0 GiB → 3.0 GiB), past +10 %"),
        "{}",
        failed.stdout
    );
    let capped = compare(&base, &base, &["--max-peak", "2.5GiB"]);
    assert!(
        capped
            .stdout
            .contains("FAIL: NEW's GPU device of the whole run, 3.0 GiB, passes --max-peak"),
        "{}",
        capped.stdout
    );
    // BASE without GPU figures: nothing to hold NEW to, exit 2 and NVML's reason.
    let mut none = gpu_report("dd", 0, 0);
    for key in ["peak_tree_gpu_bytes", "peak_device_gpu_bytes"] {
        none.as_object_mut().unwrap().remove(key);
        none["stages"][1].as_object_mut().unwrap().remove(key);
    }
    none["gpu"] = serde_json::json!({ "devices": [], "missing": "libnvidia-ml.so.1: not found" });
    let none = write(dir.path(), "none.json", &none);
    let refused = compare(&none, &base, &[]);
    assert_eq!(refused.code, Some(2), "{}", refused.stdout);
    assert_eq!(
        refused.stderr.trim_end(),
        format!(
            "stemmon: {}: this report has no GPU figures (--metric gpu): \
             libnvidia-ml.so.1: not found",
            none.display()
        )
    );
    let failed = compare(&base, &none, &[]);
    assert_eq!(
        failed.code,
        Some(1),
        "NEW without them fails: {}",
        failed.stdout
    );
    let shown = run(&["show".as_ref(), none.as_os_str()]);
    assert!(
        shown
            .stdout
            .contains("\ngpu:        none: libnvidia-ml.so.1: not found\n"),
        "{}",
        shown.stdout
    );

    // merge: the GPU peaks are the highest, per stage and for the run.
    let (merged_path, merged) = merged(&[&base, &grown], dir.path(), "merged.json");
    let figure = |key: &str| {
        stemmon_report::fields::field(key)
            .unwrap()
            .of_stage(merged.stage("train").unwrap())
    };
    assert_eq!(figure("peak_tree_gpu_bytes"), Some((3 * GIB) as f64));
    assert_eq!(merged.figures.count("peak_tree_gpu_bytes"), Some(3 * GIB));
    let spread = &section(&merged_path)["stages"][1]["peak_tree_gpu_bytes"];
    assert_eq!(
        (&spread["max"], &spread["max_report"]),
        (&(3 * GIB).into(), &1.into())
    );
    assert_eq!(spread["sum"], 5 * GIB);
    let shown = run(&["show".as_ref(), merged_path.as_os_str()]);
    assert_eq!(
        table_row(&shown.stdout, "train")[at("GPU")],
        "3.0 GiB",
        "{}",
        shown.stdout
    );
}

/// A merge of three real runs (ranks 0 to 2): `show` prints no pid (the merged report's
/// `pid` is 0, no process's), names each run by host and rank, and gives the cores per
/// run, their mean and the busiest run's, each input's figure the truth; comparing it
/// with one run is refused, with a merge of as many runs it is not.
#[test]
fn a_merge_names_its_runs_gives_cores_per_run_and_compares_only_with_merges() {
    let dir = TempDir::new("merge-runs");
    let inputs: Vec<PathBuf> = (0..3)
        .map(|rank| {
            staged_report(
                dir.path(),
                &format!("rank{rank}.json"),
                Workload::default(),
                rank,
            )
        })
        .collect();
    let runs: Vec<Report> = inputs.iter().map(|p| read_report(p)).collect();
    let refs: Vec<&Path> = inputs.iter().map(PathBuf::as_path).collect();
    let (out, whole) = merged(&refs, dir.path(), "merged.json");
    assert_eq!(whole.pid, 0, "no one process");
    let cores: Vec<f64> = runs.iter().map(|r| r.cpu_io.cpu_cores.unwrap()).collect();
    let mean = cores.iter().sum::<f64>() / 3.0;
    let max = cores.iter().copied().fold(0.0, f64::max);
    let merged_cores = whole.cpu_io.cpu_cores.unwrap();
    assert!(
        (merged_cores - mean).abs() < 1e-9,
        "{merged_cores} against {cores:?}"
    );
    assert!(
        merged_cores <= max,
        "a mean, not a sum: {merged_cores} against {cores:?}"
    );

    let shown = run(&["show".as_ref(), out.as_os_str()]);
    assert_eq!(shown.code, Some(0), "{}", shown.stderr);
    assert!(!shown.stdout.contains("pid 0"), "{}", shown.stdout);
    let run_line = shown.stdout.lines().next().unwrap();
    assert!(run_line.contains("3 runs"), "{run_line}");
    let merged_line = shown
        .stdout
        .lines()
        .find(|l| l.starts_with("merged:"))
        .unwrap();
    for (rank, input) in inputs.iter().enumerate() {
        let name = input.display().to_string();
        let host = &runs[rank].host;
        assert!(
            merged_line.contains(&format!("{name}: host {host}, rank {rank}")),
            "{merged_line}"
        );
    }
    let per_run = format!("{mean:.2} cores per run, at most {max:.2}");
    assert!(
        shown.stdout.contains(&per_run),
        "{per_run}:\n{}",
        shown.stdout
    );

    // A merge against one run, either way: refused, one line.
    for (base, new) in [(&out, &inputs[0]), (&inputs[0], &out)] {
        let ran = run(&["compare".as_ref(), base.as_os_str(), new.as_os_str()]);
        assert_eq!(ran.code, Some(2), "{}{}", ran.stdout, ran.stderr);
        assert_eq!(ran.stderr.lines().count(), 1, "{}", ran.stderr);
        assert!(
            ran.stderr.contains("is a merge of 3 runs"),
            "{}",
            ran.stderr
        );
        assert!(ran.stderr.contains("is a single run"), "{}", ran.stderr);
    }
    // Against a merge of as many runs it compares; of fewer, it is refused.
    let (again, _) = merged(&refs, dir.path(), "again.json");
    let ran = run(&["compare".as_ref(), out.as_os_str(), again.as_os_str()]);
    assert!(
        matches!(ran.code, Some(0 | 1)),
        "{}{}",
        ran.stdout,
        ran.stderr
    );
    let (two, _) = merged(&refs[..2], dir.path(), "two.json");
    let ran = run(&["compare".as_ref(), out.as_os_str(), two.as_os_str()]);
    assert_eq!(ran.code, Some(2), "{}", ran.stderr);
    assert!(
        ran.stderr.contains("is a merge of 2 runs"),
        "{}",
        ran.stderr
    );
}
