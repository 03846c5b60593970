//! `stemmon compare` fails closed: each way a NEW report once passed the gate (exit 0)
//! while it should not, as its own test, on hand-made reports (the input is the point),
//! and one on two real runs whose only difference is a spike between samples.

mod common;

use common::{fails_because, has_python3, outcome, run_quiet, stemmon, Outcome, TempDir};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

const GIB: u64 = 1 << 30;

/// A finished report of `prog` at 1 GiB everywhere, with stages `load` and `fit` (5 s each).
fn base() -> Value {
    let stage = |id: u32, name: &str| {
        json!({
            "id": id, "name": name, "path": name, "parent_id": null, "calls": 1,
            "start_seconds": 5.0 * f64::from(id), "wall_seconds": 5.0,
            "min_wall_seconds": 5.0, "max_wall_seconds": 5.0,
            "peak_tree_rss_bytes": GIB, "peak_parent_rss_bytes": GIB,
            "peak_tree_rss_bound_bytes": GIB, "peak_parent_hwm_bytes": GIB,
        })
    };
    json!({
        "pid": 1, "running": false, "error": null, "wall_seconds": 10.0,
        "sample_interval": 1.0, "sampler": "linux-proc", "command": ["prog"],
        "peak_tree_rss_bytes": GIB, "peak_parent_rss_bytes": GIB,
        "peak_tree_rss_bound_bytes": GIB, "peak_parent_hwm_bytes": GIB,
        "stages": [stage(0, "load"), stage(1, "fit")],
    })
}

/// A base without high-water marks (the sampled peak only).
fn sampled_only(mut report: Value) -> Value {
    let strip = |object: &mut Value| {
        let object = object.as_object_mut().unwrap();
        object.remove("peak_tree_rss_bound_bytes");
        object.remove("peak_parent_hwm_bytes");
    };
    strip(&mut report);
    for stage in report["stages"].as_array_mut().unwrap() {
        strip(stage);
    }
    report
}

fn write(dir: &Path, name: &str, report: &Value) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_vec_pretty(report).unwrap()).unwrap();
    path
}

fn compare(args: &[&str], base: &Value, new: &Value) -> Outcome {
    let dir = TempDir::new("compare");
    let (base, new) = (
        write(dir.path(), "base.json", base),
        write(dir.path(), "new.json", new),
    );
    compare_files(args, &base, &new)
}

fn compare_files(args: &[&str], base: &Path, new: &Path) -> Outcome {
    outcome(stemmon().arg("compare").arg(base).arg(new).args(args))
}

#[test]
fn the_same_report_passes() {
    let outcome = compare(&[], &base(), &base());
    assert_eq!(outcome.code, Some(0), "{}", outcome.stdout);
    assert!(outcome.stdout.contains("pass: no regression"));
    assert!(outcome.stderr.is_empty(), "{}", outcome.stderr);
}

#[test]
fn null_peaks_fail() {
    for base in [base(), sampled_only(base())] {
        let mut new = base.clone();
        for key in [
            "peak_tree_rss_bytes",
            "peak_tree_rss_bound_bytes",
            "peak_parent_hwm_bytes",
        ] {
            if new.get(key).is_some() {
                new[key] = Value::Null;
            }
            for stage in new["stages"].as_array_mut().unwrap() {
                if stage.get(key).is_some() {
                    stage[key] = Value::Null;
                }
            }
        }
        let outcome = compare(&[], &base, &new);
        fails_because(
            &outcome,
            "`peak_tree_rss_bytes` of the whole run is null or missing",
        );
        for metric in ["exact", "sampled"] {
            assert_eq!(compare(&["--metric", metric], &base, &new).code, Some(1));
        }
    }
}

#[test]
fn missing_peak_keys_fail() {
    let mut new = base();
    let strip = |object: &mut Value| {
        let object = object.as_object_mut().unwrap();
        object.retain(|key, _| !key.starts_with("peak_"));
    };
    strip(&mut new);
    for stage in new["stages"].as_array_mut().unwrap() {
        strip(stage);
    }
    let outcome = compare(&[], &base(), &new);
    fails_because(
        &outcome,
        "`peak_tree_rss_bound_bytes` of the whole run is null or missing",
    );
    fails_because(
        &outcome,
        "stage `fit`: NEW is incomplete: `peak_tree_rss_bytes`",
    );
}

#[test]
fn removed_stages_fail() {
    let mut new = base();
    new["stages"] = json!([]);
    let outcome = compare(&[], &base(), &new);
    fails_because(
        &outcome,
        "stage `load` (5.000s in BASE) is missing from NEW",
    );
    fails_because(&outcome, "stage `fit` (5.000s in BASE) is missing from NEW");
}

#[test]
fn renamed_stages_fail() {
    let mut new = base();
    for stage in new["stages"].as_array_mut().unwrap() {
        let renamed = format!("{}2", stage["name"].as_str().unwrap());
        stage["name"] = json!(renamed);
        stage["path"] = json!(renamed);
    }
    let outcome = compare(&[], &base(), &new);
    fails_because(&outcome, "stage `fit` (5.000s in BASE) is missing from NEW");
    assert!(outcome.stdout.contains("only in new"), "{}", outcome.stdout);
    // A stage too short to judge may go.
    let outcome = compare(&["--min-seconds", "6"], &base(), &new);
    assert_eq!(outcome.code, Some(0), "{}", outcome.stdout);
}

#[test]
fn a_run_still_running_and_killed_fails() {
    let mut new = base();
    new["running"] = json!(true);
    new["error"] = json!("SIGKILL");
    let outcome = compare(&[], &base(), &new);
    fails_because(&outcome, "`running` is true");
    fails_because(&outcome, "SIGKILL");
}

#[test]
fn a_sampling_error_fails() {
    let mut new = base();
    new["sampling_error"] = json!("cannot read /proc/1/status: permission denied");
    fails_because(&compare(&[], &base(), &new), "sampling failed");
}

#[test]
fn a_duplicate_stage_path_is_exit_2() {
    let mut new = base();
    // The first `fit` is small; the second holds the regression.
    let mut second = new["stages"][1].clone();
    second["id"] = json!(2);
    second["wall_seconds"] = json!(500.0);
    second["peak_tree_rss_bytes"] = json!(40 * GIB);
    new["stages"].as_array_mut().unwrap().push(second);
    for (base, new) in [(base(), new.clone()), (new, base())] {
        let outcome = compare(&[], &base, &new);
        assert_eq!(outcome.code, Some(2), "{}", outcome.stdout);
        assert_eq!(outcome.stderr.lines().count(), 1, "{}", outcome.stderr);
        assert!(
            outcome.stderr.contains("`fit` is there twice"),
            "{}",
            outcome.stderr
        );
    }
}

#[test]
fn a_parent_cycle_is_exit_2() {
    let mut new = base();
    new["stages"][0]["parent_id"] = json!(1);
    new["stages"][1]["parent_id"] = json!(0);
    let outcome = compare(&[], &base(), &new);
    assert_eq!(outcome.code, Some(2), "{}", outcome.stdout);
    assert_eq!(outcome.stderr.lines().count(), 1, "{}", outcome.stderr);
    assert!(outcome.stderr.contains("cycle"), "{}", outcome.stderr);
}

#[test]
fn only_the_exact_peaks_grown_fails() {
    let mut new = base();
    let grow = |object: &mut Value| {
        object["peak_tree_rss_bound_bytes"] = json!(40 * GIB);
        object["peak_parent_hwm_bytes"] = json!(40 * GIB);
    };
    grow(&mut new);
    grow(&mut new["stages"][1]);
    let outcome = compare(&[], &base(), &new);
    fails_because(
        &outcome,
        "(whole run): bound +3900.0 % (1.0 GiB → 40.0 GiB)",
    );
    fails_because(&outcome, "stage `fit`: parent exact +3900.0 %");
    assert!(outcome
        .stdout
        .starts_with("memory compared: the high-water bound"));
    assert!(outcome.stdout.contains("base bound"), "{}", outcome.stdout);
    // The sampled peak did not move: compared alone, it passes, and says so.
    let sampled = compare(&["--metric", "sampled"], &base(), &new);
    assert_eq!(sampled.code, Some(0), "{}", sampled.stdout);
    assert!(
        sampled.stdout.contains("base sampled peak"),
        "{}",
        sampled.stdout
    );
    // A ceiling on any compared figure, however loose the percentages.
    let loose = ["--max-memory-increase", "100000"];
    let outcome = compare(
        &[&loose[..], &["--max-peak", "2GiB"]].concat(),
        &base(),
        &new,
    );
    fails_because(
        &outcome,
        "NEW's bound of the whole run, 40.0 GiB, passes --max-peak 2.0 GiB",
    );
    let outcome = compare(
        &[&loose[..], &["--max-peak", "50G"]].concat(),
        &base(),
        &new,
    );
    assert_eq!(outcome.code, Some(0), "{}", outcome.stdout);
}

#[test]
fn a_bad_size_is_exit_2_with_one_line() {
    for size in ["2 parsecs", "-1G", "", "G"] {
        let outcome = compare(&["--max-peak", size], &base(), &base());
        assert_eq!(outcome.code, Some(2), "{size}: {}", outcome.stderr);
        assert_eq!(outcome.stderr.lines().count(), 1, "{}", outcome.stderr);
    }
}

#[test]
fn without_marks_the_sampled_peak_is_compared_and_named() {
    let base = sampled_only(base());
    let mut new = base.clone();
    new["peak_tree_rss_bytes"] = json!(2 * GIB);
    let outcome = compare(&[], &base, &new);
    fails_because(&outcome, "(whole run): sampled peak +100.0 %");
    assert!(
        outcome.stdout.lines().next().unwrap().contains(
            "the sampled peak tree RSS (`peak_tree_rss_bytes`); BASE has no high-water marks"
        ),
        "{}",
        outcome.stdout
    );
}

#[test]
fn runs_shorter_than_min_seconds_still_compare_the_whole_run() {
    let mut base = base();
    base["wall_seconds"] = json!(0.05);
    base["stages"] = json!([]);
    let mut new = base.clone();
    new["wall_seconds"] = json!(0.4);
    fails_because(&compare(&[], &base, &new), "(whole run): time +700.0 %");
}

#[test]
fn heap_and_cpu_are_exit_2_without_their_figures() {
    for (metric, what) in [("heap", "no heap figures"), ("cpu", "no CPU figures")] {
        let outcome = compare(&["--metric", metric], &base(), &base());
        assert_eq!(outcome.code, Some(2), "{}", outcome.stdout);
        assert_eq!(outcome.stderr.lines().count(), 1, "{}", outcome.stderr);
        assert!(outcome.stderr.contains(what), "{}", outcome.stderr);
    }
}

#[test]
fn different_commands_are_one_warning() {
    let mut new = base();
    new["command"] = json!(["other", "--flag"]);
    let outcome = compare(&[], &base(), &new);
    assert_eq!(outcome.code, Some(0), "{}", outcome.stdout);
    assert_eq!(outcome.stderr.lines().count(), 1, "{}", outcome.stderr);
    assert!(
        outcome
            .stderr
            .contains("different commands: BASE `prog`, NEW `other --flag`"),
        "{}",
        outcome.stderr
    );
}

#[test]
fn markdown_is_a_table_for_a_pull_request() {
    let mut new = base();
    new["stages"][1]["wall_seconds"] = json!(6.0);
    new["stages"][1]["name"] = json!("fit|<b>x</b>");
    new["stages"][1]["path"] = json!("fit|<b>x</b>");
    let outcome = compare(&["--format", "markdown"], &base(), &new);
    assert_eq!(outcome.code, Some(1), "{}", outcome.stdout);
    let out = &outcome.stdout;
    assert!(out.starts_with("### stemmon compare: FAIL\n"), "{out}");
    assert!(
        out.contains("| stage | base time | new time | time Δ | base bound |"),
        "{out}"
    );
    assert!(out.contains("| --- | ---: |"), "{out}");
    assert!(
        out.contains("- stage \\`fit\\` (5.000s in BASE) is missing from NEW"),
        "{out}"
    );
    assert!(out.contains("fit\\|&lt;b&gt;x&lt;/b&gt;"), "{out}");
    assert!(!out.contains("<b>"), "{out}");
    // Every table line has the header's number of cells.
    let cells = |line: &str| line.replace("\\|", "").matches('|').count();
    let table: Vec<&str> = out.lines().filter(|l| l.starts_with('|')).collect();
    assert!(table.iter().all(|l| cells(l) == cells(table[0])), "{out}");
    // The log gets the reasons too, since the Markdown may go to a file.
    assert!(
        outcome.stderr.contains("stemmon: FAIL: stage `fit`"),
        "{}",
        outcome.stderr
    );
}

/// `stemmon run` of python3 at 1 s samples: `spike` holds 300 MiB for 0.2 s, between samples.
fn python_run(dir: &Path, name: &str, spike: bool) -> PathBuf {
    let path = dir.join(name);
    let script = if spike {
        "import time; b = b'x' * (300 << 20); time.sleep(0.2)"
    } else {
        "import time; b = b'x'; time.sleep(0.2)"
    };
    let code = run_quiet(&path, "1", &["python3", "-c", script]);
    assert_eq!(code, Some(0));
    path
}

#[test]
fn a_spike_between_samples_fails_on_the_exact_figures() {
    if !has_python3("a_spike_between_samples_fails_on_the_exact_figures") {
        return;
    }
    let dir = TempDir::new("compare-spike");
    let base = python_run(dir.path(), "base.json", false);
    let new = python_run(dir.path(), "new.json", true);
    // Time is not the point here: python's start-up varies.
    let loose_time = ["--max-time-increase", "1000"];
    let exact = compare_files(&loose_time, &base, &new);
    fails_because(&exact, "(whole run): bound +");
    let outcome = compare_files(
        &[&loose_time[..], &["--max-peak", "200MiB"]].concat(),
        &base,
        &new,
    );
    fails_because(&outcome, "passes --max-peak 200.0 MiB");
    let same = compare_files(&loose_time, &base, &base);
    assert_eq!(same.code, Some(0), "{}", same.stdout);
}

/// The verdict cell of each table row, by stage name (text or Markdown).
fn verdicts(out: &str) -> Vec<(String, String)> {
    out.lines()
        .filter(|l| l.starts_with('│') || (l.starts_with("| ") && !l.starts_with("| ---")))
        .map(|l| {
            let cells: Vec<&str> = l
                .trim_matches(['│', '|'])
                .split(['┆', '|'])
                .map(str::trim)
                .collect();
            (cells[0].to_owned(), cells[cells.len() - 1].to_owned())
        })
        .filter(|(name, _)| name != "stage")
        .collect()
}

#[test]
fn a_row_over_max_peak_reads_as_failing_in_text_and_markdown() {
    // NEW is BASE (every row `ok` on the percentages), plus a short stage and a stage
    // only in NEW: every figure is 1 GiB, over the 512 MiB ceiling.
    let mut base = base();
    let short = json!({
        "id": 2, "name": "warmup", "path": "warmup", "calls": 1, "wall_seconds": 0.01,
        "peak_tree_rss_bytes": GIB, "peak_tree_rss_bound_bytes": GIB,
        "peak_parent_hwm_bytes": GIB,
    });
    base["stages"].as_array_mut().unwrap().push(short);
    let mut new = base.clone();
    let mut extra = new["stages"][2].clone();
    extra["id"] = json!(3);
    extra["name"] = json!("export");
    extra["path"] = json!("export");
    new["stages"].as_array_mut().unwrap().push(extra);
    for format in ["text", "markdown"] {
        let outcome = compare(&["--max-peak", "512MiB", "--format", format], &base, &new);
        assert_eq!(outcome.code, Some(1), "{}", outcome.stdout);
        let rows = verdicts(&outcome.stdout);
        assert_eq!(rows.len(), 5, "{format}: {rows:?}\n{}", outcome.stdout);
        for (name, verdict) in &rows {
            assert!(
                verdict.starts_with("FAIL") && verdict.contains("over --max-peak"),
                "{format}: row {name} reads {verdict:?} while the gate fails on it"
            );
        }
    }
    // Under the ceiling the rows read as before.
    let outcome = compare(&["--max-peak", "2GiB"], &base, &new);
    assert_eq!(outcome.code, Some(0), "{}", outcome.stdout);
    let rows = verdicts(&outcome.stdout);
    assert_eq!(rows[0].1, "ok");
    assert!(rows[3].1.starts_with("ok (< 100.0ms"), "{rows:?}");
    assert_eq!(rows[4].1, "only in new");
}

#[test]
fn the_whole_run_row_fails_when_new_is_incomplete_or_lacks_a_figure() {
    let mut new = base();
    new["error"] = json!("exit 3");
    let outcome = compare(&[], &base(), &new);
    fails_because(&outcome, "NEW is incomplete: the run failed");
    let rows = verdicts(&outcome.stdout);
    assert_eq!(rows[0].0, "(whole run)");
    assert_eq!(rows[0].1, "FAIL: NEW incomplete", "{}", outcome.stdout);
    // The sampled peak is checked but not compared under `--metric exact`.
    let mut new = base();
    new["peak_tree_rss_bytes"] = json!(null);
    let outcome = compare(&[], &base(), &new);
    fails_because(&outcome, "`peak_tree_rss_bytes` of the whole run is null");
    let rows = verdicts(&outcome.stdout);
    assert_eq!(
        rows[0].1, "FAIL: `peak_tree_rss_bytes` missing",
        "{}",
        outcome.stdout
    );
}

#[test]
fn the_table_fits_columns_keeping_the_changes_and_the_verdict() {
    let dir = TempDir::new("compare-width");
    let mut new = base();
    new["stages"][1]["wall_seconds"] = json!(6.0);
    let (base, new) = (
        write(dir.path(), "base.json", &base()),
        write(dir.path(), "new.json", &new),
    );
    let output = stemmon()
        .arg("compare")
        .arg(&base)
        .arg(&new)
        .args(["--max-time-increase", "10"])
        .env("COLUMNS", "80")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let out = String::from_utf8(output.stdout).unwrap();
    // Every line, the table's and those around it (wrapped), in characters.
    assert!(out.lines().all(|l| l.chars().count() <= 80), "{out}");
    let rows = verdicts(&out);
    assert_eq!(
        rows[2],
        ("fit".to_owned(), "FAIL: time +20.0 %".to_owned()),
        "{out}"
    );
    assert!(
        out.contains("time Δ") && out.contains("left out to fit 80 columns: "),
        "{out}"
    );
}

/// `base()` with the whole run and stage `fit` taking `wall` seconds and the stage
/// `fit` at `fit_bound` bytes of bound.
fn timed(wall: f64, fit_bound: u64) -> Value {
    let mut report = base();
    report["wall_seconds"] = json!(5.0 + wall);
    report["stages"][1]["wall_seconds"] = json!(wall);
    report["stages"][1]["peak_tree_rss_bound_bytes"] = json!(fit_bound);
    report
}

/// `compare BASE... -- NEW...` of the reports given.
fn compare_sides(args: &[&str], base: &[Value], new: &[Value]) -> Outcome {
    let dir = TempDir::new("compare-sides");
    let mut command = stemmon();
    command.arg("compare");
    for (index, report) in base.iter().enumerate() {
        command.arg(write(dir.path(), &format!("base{index}.json"), report));
    }
    command.arg("--");
    for (index, report) in new.iter().enumerate() {
        command.arg(write(dir.path(), &format!("new{index}.json"), report));
    }
    outcome(command.args(args))
}

#[test]
fn several_reports_a_side_judge_time_against_their_spread() {
    // Runs as noisy as a loaded machine makes them: NEW's mean is 12.5 % above BASE's,
    // well inside the runs' spread (about ±0.2 s a side).
    let noisy_base: Vec<Value> = [1.0, 1.3, 0.9].map(|w| timed(w, GIB)).to_vec();
    let noisy_new: Vec<Value> = [1.25, 1.0, 1.35].map(|w| timed(w, GIB)).to_vec();
    let outcome = compare_sides(&[], &noisy_base, &noisy_new);
    assert_eq!(
        outcome.code,
        Some(0),
        "{}{}",
        outcome.stdout,
        outcome.stderr
    );
    assert!(
        outcome.stdout.contains("BASE: 3 reports, NEW: 3 reports"),
        "{}",
        outcome.stdout
    );
    // A stage 30 % slower in every run fails, past the spread; the whole run, whose
    // own time grew 6 %, does not.
    let steady_base: Vec<Value> = [1.0, 1.02, 0.98].map(|w| timed(w, GIB)).to_vec();
    let slower: Vec<Value> = [1.3, 1.31, 1.29].map(|w| timed(w, GIB)).to_vec();
    let outcome = compare_sides(&[], &steady_base, &slower);
    fails_because(
        &outcome,
        "stage `fit`: time +30.0 % (1.000s → 1.300s), past +10 %",
    );
    let rows = verdicts(&outcome.stdout);
    assert_eq!(
        rows[0],
        ("(whole run)".to_owned(), "ok".to_owned()),
        "{}",
        outcome.stdout
    );
    // Two reports without `--` are BASE and NEW; three are not.
    let dir = TempDir::new("compare-no-dash");
    let paths: Vec<PathBuf> = (0..3)
        .map(|i| write(dir.path(), &format!("r{i}.json"), &base()))
        .collect();
    let three = common::outcome(stemmon().arg("compare").args(&paths));
    assert_eq!(three.code, Some(2), "{}", three.stderr);
    assert_eq!(three.stderr.lines().count(), 1, "{}", three.stderr);
    assert!(
        three.stderr.contains("`BASE... -- NEW...`"),
        "{}",
        three.stderr
    );
}

#[test]
fn one_report_a_side_judges_time_at_a_default_a_loaded_machine_does_not_trip() {
    // +92 %: what one identical run beside a build took (a stage of 0.80 s ran 1.53 s).
    // It passes by default, fails at a threshold asked for, and +110 % fails by default.
    let outcome = compare(&[], &timed(1.0, GIB), &timed(1.92, GIB));
    assert_eq!(outcome.code, Some(0), "{}", outcome.stdout);
    assert!(
        outcome.stdout.contains("thresholds: time +100 %"),
        "{}",
        outcome.stdout
    );
    let asked = compare(
        &["--max-time-increase", "50"],
        &timed(1.0, GIB),
        &timed(1.92, GIB),
    );
    fails_because(&asked, "stage `fit`: time +92.0 %");
    fails_because(
        &compare(&[], &timed(1.0, GIB), &timed(2.1, GIB)),
        "stage `fit`: time +110.0 %",
    );
}

#[test]
fn a_stage_under_the_noise_floor_is_judged_on_memory_not_time() {
    let (mut base, mut new) = (timed(0.02, GIB), timed(0.08, GIB));
    let outcome = compare(&[], &base, &new);
    assert_eq!(
        outcome.code,
        Some(0),
        "+300 % of 20 ms is noise: {}",
        outcome.stdout
    );
    let rows = verdicts(&outcome.stdout);
    assert!(
        rows[2].1.starts_with("ok (< 100.0ms: time not judged)"),
        "{rows:?}"
    );
    // Its memory is judged all the same.
    for report in [&mut base, &mut new] {
        report["stages"][1]["peak_process_count"] = json!(2);
        report["stages"][1]["peak_children_rss_bytes"] = json!(GIB / 2);
    }
    new["stages"][1]["peak_tree_rss_bound_bytes"] = json!(2 * GIB);
    fails_because(&compare(&[], &base, &new), "stage `fit`: bound +100.0 %");
}

#[test]
fn a_bound_is_judged_through_the_exact_figure_of_a_parent_alone() {
    // `fit` ran in the parent alone: its bound jumped (a sample that straddled the next
    // stage) while its exact peak held. Not a regression.
    let outcome = compare(&[], &timed(5.0, GIB), &timed(5.0, 3 * GIB));
    assert_eq!(outcome.code, Some(0), "{}", outcome.stdout);
    // With a child, the parent's exact peak is not the tree's: the bound is judged.
    let with_child = |mut report: Value| {
        report["stages"][1]["peak_process_count"] = json!(2);
        report["stages"][1]["peak_children_rss_bytes"] = json!(GIB / 4);
        report
    };
    let outcome = compare(
        &[],
        &with_child(timed(5.0, GIB)),
        &with_child(timed(5.0, 3 * GIB)),
    );
    fails_because(&outcome, "stage `fit`: bound +200.0 %");
    // The exact figure itself is judged tight, and the whole run only on its own.
    let mut grown = timed(5.0, GIB);
    grown["stages"][1]["peak_parent_hwm_bytes"] = json!(GIB + GIB / 5);
    grown["stages"][1]["peak_tree_rss_bound_bytes"] = json!(GIB + GIB / 5);
    let outcome = compare(&[], &timed(5.0, GIB), &grown);
    fails_because(&outcome, "stage `fit`: parent exact +20.0 %");
    let rows = verdicts(&outcome.stdout);
    assert_eq!(
        rows[0],
        ("(whole run)".to_owned(), "ok".to_owned()),
        "{}",
        outcome.stdout
    );
}

#[test]
fn six_identical_real_runs_pass_every_pairwise_compare_by_default() {
    if !has_python3("six_identical_real_runs_pass_every_pairwise_compare_by_default") {
        return;
    }
    let dir = TempDir::new("compare-identical");
    let program = "import time; b = b'x' * (60 << 20); time.sleep(0.6)";
    // The interpreter itself, not a version manager's shim before it.
    let python = common::interpreter();
    let reports: Vec<PathBuf> = (0..6)
        .map(|i| {
            let report = dir.path().join(format!("run{i}.json"));
            let argv = [python.as_os_str(), "-c".as_ref(), program.as_ref()];
            let code = run_quiet(&report, "0.1", &argv);
            assert_eq!(code, Some(0));
            report
        })
        .collect();
    let mut failed = Vec::new();
    for (a, first) in reports.iter().enumerate() {
        for second in &reports[a + 1..] {
            let outcome = compare_files(&[], first, second);
            if outcome.code != Some(0) {
                failed.push(outcome.stdout);
            }
        }
    }
    assert!(
        failed.is_empty(),
        "{} of 15 pairs failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
    // Three a side, the same.
    let outcome = common::outcome(
        stemmon()
            .arg("compare")
            .args(&reports[..3])
            .arg("--")
            .args(&reports[3..]),
    );
    assert_eq!(outcome.code, Some(0), "{}", outcome.stdout);
}
