//! `stemmon show`'s header says what each peak is, and `merge` needs two reports.

mod common;

use common::{stemmon, TempDir, MIB};
use serde_json::json;

fn show(report: &serde_json::Value) -> String {
    let dir = TempDir::new("show-header");
    let path = dir.path().join("report.json");
    std::fs::write(&path, report.to_string()).unwrap();
    let output = stemmon().arg("show").arg(&path).output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    String::from_utf8(output.stdout).unwrap()
}

fn line<'a>(out: &'a str, start: &str) -> &'a str {
    out.lines()
        .find(|l| l.starts_with(start))
        .unwrap_or_else(|| panic!("no line {start:?} in\n{out}"))
}

fn report() -> serde_json::Value {
    json!({
        "pid": 7, "running": false, "wall_seconds": 5.0, "sample_interval": 1.0,
        "sampler": "linux-proc", "stages": [
            { "id": 0, "name": "fit", "path": "fit", "calls": 1, "wall_seconds": 4.0 },
        ],
        "peak_tree_rss_bytes": 1200 * MIB, "peak_parent_rss_bytes": 1100 * MIB,
        "peak_children_rss_bytes": 300 * MIB, "peak_rss_stage": "fit",
        "peak_rss_elapsed_seconds": 3.1, "peak_tree_rss_bound_bytes": 1300 * MIB,
        "peak_parent_hwm_bytes": 1150 * MIB, "peak_reaped_child_rss_bytes": 64 * MIB,
        "peak_cgroup_memory_bytes": 1400 * MIB,
        "cgroup": { "path": "/sys/fs/cgroup/job", "version": 2,
                    "memory_peak_bytes": 9000 * MIB, "memory_limit_bytes": 16384 * MIB,
                    "oom_kills": 0 },
    })
}

#[test]
fn the_peak_line_is_not_a_breakdown_of_figures_taken_at_different_moments() {
    let out = show(&report());
    assert_eq!(
        line(&out, "peak:"),
        "peak:       tree RSS 1.2 GiB (sampled, at 3.100s in fit); bound ≤ 1.3 GiB; \
         parent's exact peak 1.1 GiB"
    );
    assert_eq!(
        line(&out, "own peaks:"),
        "own peaks:  parent RSS 1.1 GiB, children RSS 300.0 MiB (sampled, each at its own \
         moment); largest exited child 64.0 MiB"
    );
    assert!(!out.contains("= parent"), "{out}");
}

#[test]
fn the_cgroup_s_lifetime_peak_is_apart_from_this_run_s() {
    let out = show(&report());
    assert_eq!(
        line(&out, "cgroup:"),
        "cgroup:     this run's peak 1.4 GiB; cgroup lifetime peak 8.8 GiB; limit 16.0 GiB; \
         OOM kills 0"
    );
}

#[test]
fn missing_marks_and_detailed_memory_are_in_the_header() {
    let out = show(&report());
    assert!(!out.contains("marks:"), "{out}");
    assert!(!out.contains("detailed:"), "{out}");
    let mut report = report();
    report["high_water_marks"] = json!({
        "enabled": true, "parent": true, "descendants": false, "reaped": false,
        "missing": "descendants' marks need ptrace access",
    });
    report["peak_tree_uss_bytes"] = json!(900 * MIB);
    report["peak_tree_pss_bytes"] = json!(950 * MIB);
    let out = show(&report);
    assert_eq!(
        line(&out, "marks:"),
        "marks:      missing (descendants, reaped not read): descendants' marks need \
         ptrace access"
    );
    assert_eq!(
        line(&out, "detailed:"),
        "detailed:   peak tree USS 900.0 MiB; peak tree PSS 950.0 MiB"
    );
}

#[test]
fn a_deep_stage_shows_its_depth_past_32_levels() {
    let stages: Vec<serde_json::Value> = (0..40u32)
        .map(|i| {
            json!({ "id": i, "name": format!("s{i}"), "path": format!("p{i}"),
                    "parent_id": i.checked_sub(1), "calls": 1 })
        })
        .collect();
    let mut report = report();
    report["stages"] = json!(stages);
    let out = show(&report);
    let row = |name: &str| {
        out.lines()
            .find(|l| l.contains(&format!(" {name} ")))
            .unwrap_or_else(|| panic!("no {name} in\n{out}"))
    };
    assert!(
        row("s32").contains(&format!("{}s32", " ".repeat(65))),
        "{out}"
    );
    assert!(
        row("s39").contains(&format!("{}[depth 39] s39", " ".repeat(65))),
        "{out}"
    );
}

#[test]
fn merge_of_one_report_is_exit_2_with_one_line() {
    let dir = TempDir::new("merge-one");
    let path = dir.path().join("report.json");
    std::fs::write(&path, report().to_string()).unwrap();
    let output = stemmon()
        .arg("merge")
        .arg(&path)
        .arg("-o")
        .arg(dir.path().join("merged.json"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("two or more reports"), "{stderr}");
    assert!(!dir.path().join("merged.json").exists());
}
