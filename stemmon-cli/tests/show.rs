//! `stemmon show`'s header says what each peak is, and its table fits the terminal.

mod common;

use common::{stemmon, table_row, TempDir, MIB};
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
        "cgroup:     this run's peak 1.4 GiB (every process of the cgroup, file cache \
         included); cgroup lifetime peak 8.8 GiB; limit 16.0 GiB; OOM kills 0"
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

/// `stemmon show` of `report` with `COLUMNS` set to `columns`.
fn show_at(report: &serde_json::Value, columns: &str, extra: &[&str]) -> String {
    let dir = TempDir::new("show-width");
    let path = dir.path().join("report.json");
    std::fs::write(&path, report.to_string()).unwrap();
    let output = stemmon()
        .arg("show")
        .arg(&path)
        .args(extra)
        .env("COLUMNS", columns)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    String::from_utf8(output.stdout).unwrap()
}

/// A `stemmon run` of a process alone whose exact peak (213 MiB) fell between samples
/// (3.3 MiB sampled), with a stage alone and one with a child.
fn alone() -> serde_json::Value {
    let mut report = report();
    report["command"] = json!([
        "python3",
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "8",
        "--rdzv-endpoint",
        "localhost:29400",
        "train.py"
    ]);
    report["peak_tree_rss_bytes"] = json!(33 * MIB / 10);
    report["peak_parent_rss_bytes"] = json!(33 * MIB / 10);
    report["peak_children_rss_bytes"] = json!(0);
    report["peak_process_count"] = json!(1);
    report["peak_parent_hwm_bytes"] = json!(213 * MIB);
    report["peak_tree_rss_bound_bytes"] = json!(213 * MIB);
    report["stages"] = json!([
        { "id": 0, "name": "fit", "path": "fit", "calls": 1, "wall_seconds": 4.0,
          "peak_process_count": 1, "peak_tree_rss_bytes": 33 * MIB / 10,
          "peak_children_rss_bytes": 0, "peak_parent_hwm_bytes": 213 * MIB,
          "peak_tree_rss_bound_bytes": 213 * MIB },
        { "id": 1, "name": "a_stage_whose_name_is_much_too_long_for_a_narrow_terminal",
          "path": "fit/a_stage_whose_name_is_much_too_long_for_a_narrow_terminal",
          "parent_id": 0, "calls": 3, "wall_seconds": 1.0, "peak_process_count": 2,
          "peak_tree_rss_bytes": 3 * MIB, "peak_children_rss_bytes": MIB,
          "peak_parent_hwm_bytes": 2 * MIB, "peak_tree_rss_bound_bytes": 40 * MIB,
          "cpu_user_seconds": 0.5, "cpu_system_seconds": 0.1, "cpu_cores": 0.6,
          "io_read_bytes": 0, "io_write_bytes": 4096, "heap_allocated_bytes": MIB },
    ]);
    report
}

#[test]
fn show_leads_with_the_exact_peak_where_the_tree_was_the_process_alone() {
    let out = show(&alone());
    assert_eq!(
        line(&out, "peak:"),
        "peak:       tree RSS 213.0 MiB (exact: the process alone, its own high-water \
         mark); sampled 3.3 MiB, at 3.100s in fit"
    );
    let header = table_row(&out, "stage");
    let peak = header.iter().position(|c| *c == "peak tree RSS").unwrap();
    assert_eq!(table_row(&out, "fit")[peak], "213.0 MiB", "{out}");
    // With a child the true peak is known only to lie between the sample and the bound.
    let row = table_row(
        &out,
        "a_stage_whose_name_is_much_too_long_for_a_narrow_terminal",
    );
    assert_eq!(row[peak], "≥ 3.0 MiB", "{out}");
    assert_eq!(row[peak + 1], "40.0 MiB", "{out}");
}

#[test]
fn show_fits_columns_cutting_names_in_the_middle_and_leaving_out_the_least_first() {
    let mut report = alone();
    report["command"][7] = json!("train\u{1b}[2J.py");
    let whole = show(&report);
    assert!(whole.lines().any(|l| l.chars().count() > 120), "{whole}");
    for columns in [80, 200] {
        let out = show_at(&report, &columns.to_string(), &["--processes"]);
        let wide: Vec<&str> = out
            .lines()
            .filter(|l| l.chars().count() > columns)
            .collect();
        assert!(wide.is_empty(), "COLUMNS={columns}: {wide:#?}");
        assert!(!out.chars().any(|c| c.is_control() && c != '\n'), "{out}");
        let header = table_row(&out, "stage");
        for kept in ["stage", "total", "peak tree RSS"] {
            assert!(
                header.contains(&kept),
                "COLUMNS={columns}: {kept} in\n{out}"
            );
        }
    }
    let narrow = show_at(&report, "80", &[]);
    // The command's head and tail, the middle left out; the stage's name likewise.
    let run = line(&narrow, "run:");
    assert!(run.starts_with("run:        python3 "), "{run}");
    assert!(
        run.contains('…') && run.contains("train\\u{1b}[2J.py' (pid 7)"),
        "{run}"
    );
    let stage = narrow
        .lines()
        .filter(|l| l.starts_with('│'))
        .nth(2)
        .unwrap()
        .split('┆')
        .next()
        .unwrap();
    assert!(
        stage.starts_with("│   a_stage") && stage.trim_end().ends_with("terminal"),
        "indented, cut in the middle: {stage}"
    );
    assert!(stage.contains('…'), "{stage}");
    let left_out = line(&narrow, "left out to fit 80 columns:");
    assert!(left_out.contains("min, max"), "{left_out}");
    // Wide enough: every column, nothing left out, nothing cut.
    let wide = show_at(&report, "400", &[]);
    assert_eq!(table_row(&wide, "stage"), table_row(&whole, "stage"));
    assert!(!wide.contains("left out"), "{wide}");
    assert!(wide.contains("a_stage_whose_name_is_much_too_long_for_a_narrow_terminal"));
    // A pipe without COLUMNS gets the table whole.
    assert!(
        !whole.contains("left out") && !whole.contains('…'),
        "{whole}"
    );
}

#[test]
fn show_says_when_the_marks_were_reset_and_what_it_does_to_ru_maxrss() {
    let mut report = alone();
    report["high_water_marks"] =
        json!({ "enabled": true, "parent": true, "descendants": true, "reaped": true });
    let out = show(&report);
    let resets = line(&out, "resets:");
    assert!(
        resets.starts_with(
            "resets:     on: stemmon reset the kernel's high-water marks of the command and \
             its descendants at every reading, so a process's own ru_maxrss"
        ),
        "{resets}"
    );
    assert!(
        resets.contains("only with --high-water-marks=reset"),
        "{resets}"
    );
    report["command"] = json!(null);
    let resets = show(&report);
    assert!(
        line(&resets, "resets:").contains("of the monitored process and its descendants"),
        "{resets}"
    );
    report["high_water_marks"]["enabled"] = json!(false);
    assert!(!show(&report).contains("resets:"));
    report["high_water_marks"] =
        json!({ "enabled": true, "parent": false, "descendants": false, "reaped": true });
    assert!(!show(&report).contains("resets:"), "nothing was reset");
}

#[test]
fn a_processes_command_comes_whole_down_a_pipe_and_cut_at_60_characters_to_fit() {
    let long = format!(
        "/{}/target/debug/examples/quickstart --worker 64",
        "d".repeat(70)
    );
    let mut report = alone();
    report["processes"] = json!([
        { "pid": 7, "ppid": 1, "command": long, "peak_rss_bytes": 213 * MIB,
          "cpu_seconds": 1.5, "first_seconds": 0.0, "last_seconds": 5.0 },
    ]);
    let row = |out: &str| {
        out.lines()
            .find(|l| l.starts_with('│') && l.contains("quickstart"))
            .unwrap_or_else(|| panic!("no process row in\n{out}"))
            .split('┆')
            .nth(2)
            .unwrap()
            .trim()
            .to_owned()
    };
    let dir = TempDir::new("show-processes");
    let path = dir.path().join("report.json");
    std::fs::write(&path, report.to_string()).unwrap();
    let piped = stemmon()
        .args(["show", "--processes"])
        .arg(&path)
        .env_remove("COLUMNS")
        .output()
        .unwrap();
    assert_eq!(piped.status.code(), Some(0), "{piped:?}");
    assert_eq!(row(&String::from_utf8(piped.stdout).unwrap()), long);
    let fitted = row(&show_at(&report, "400", &["--processes"]));
    // At most 60, the cut moved to a `/` near it.
    assert!((50..=60).contains(&fitted.chars().count()), "{fitted}");
    assert!(
        fitted.ends_with("/quickstart --worker 64") && fitted.contains('…'),
        "{fitted}"
    );
}
