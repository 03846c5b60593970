//! Open file descriptors of a real tree under `stemmon run`: a shell holding seven more
//! than its standard three and two children that inherit them. The count the kernel
//! gives (`/proc/PID/fd` of a child, listed by the script itself) is the
//! truth the report, `show`, `compare --metric fds`, the Chrome counters and the live
//! line are held to.

mod common;

use common::{stemmon, TempDir};
use std::path::Path;

/// The shell: descriptors 3 to 9 open, two children (they hold what the shell held
/// when they were made: none is close-on-exec), the kernel's count of a child's
/// written to `counts`; then it waits until the report being written holds the three's
/// sum, and ends. (The shell's own count, read while it runs a pipeline, would include
/// the pipe's ends.)
const SCRIPT: &str = "exec 3</dev/null 4</dev/null 5</dev/null 6</dev/null 7</dev/null \
                      8</dev/null 9</dev/null; sleep 60 & a=$!; sleep 60 & b=$!; \
                      n=$(ls /proc/$a/fd 3<&- 4<&- 5<&- 6<&- 7<&- 8<&- 9<&- | wc -l); \
                      echo $n > \"$COUNTS\"; until_report peak_tree_fds $((3 * n)); \
                      kill $a $b; wait; exit 0";

fn run(dir: &Path, name: &str) -> (std::path::PathBuf, u64, String) {
    let report = dir.join(format!("{name}.json"));
    let counts = dir.join(format!("{name}.counts"));
    let output = common::run_watched(&report, SCRIPT, &[("COUNTS", counts.as_os_str())]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let truth = 3 * std::fs::read_to_string(&counts)
        .unwrap()
        .trim()
        .parse::<u64>()
        .unwrap();
    (
        report,
        truth,
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn a_trees_open_descriptors_reach_every_surface() {
    let dir = TempDir::new("fds");
    let (report, truth, log) = run(dir.path(), "a");
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let peak = json["peak_tree_fds"].as_u64().expect("peak_tree_fds");
    // The script waited for the sum; a process of its wait loop (`awk` or `sleep`, with
    // 0 to 2 and the report open) may be caught beside the three.
    assert!(
        peak >= truth && peak <= truth + 5,
        "peak {peak}, the kernel's count {truth}"
    );
    assert_eq!(
        json["fds"]["missing"],
        serde_json::Value::Null,
        "{}",
        json["fds"]
    );
    let most = json["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["tree_fds"].as_u64())
        .max()
        .unwrap();
    assert_eq!(most, peak, "the timeline's highest is the run's peak");
    // Each process's own peak: the shell and its two children hold at least a child's
    // count (the shell more while it runs a pipeline); the wait loop's processes hold
    // their standard three and the report.
    let processes = json["processes"].as_array().unwrap();
    let per_process: Vec<u64> = processes
        .iter()
        .filter_map(|p| p["peak_fds"].as_u64())
        .collect();
    let holding = per_process.iter().filter(|&&n| n >= truth / 3).count();
    assert!(
        holding >= 3,
        "{per_process:?}, a child's count {}",
        truth / 3
    );
    assert!(per_process.iter().all(|&n| n >= 3), "{per_process:?}");
    // The live line.
    assert!(
        log.lines().any(|l| l.contains("; fds=")),
        "no `fds=` in the live log: {log}"
    );

    // `show`'s header.
    let shown = stemmon().arg("show").arg(&report).output().unwrap();
    let shown = String::from_utf8(shown.stdout).unwrap();
    assert!(
        shown.contains(&format!("fds:        fds {peak}")),
        "show: {shown}"
    );

    // `compare --metric fds`: the same run passes; a run that held far more fails.
    let (other, _, _) = run(dir.path(), "b");
    let compared = stemmon()
        .args(["compare", "--metric", "fds"])
        .arg(&report)
        .arg(&other)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&compared.stdout);
    assert!(
        text.contains("count compared: the most file descriptors"),
        "{text}"
    );
    let mut more = json.clone();
    more["peak_tree_fds"] = (peak * 3).into();
    let more_path = dir.path().join("more.json");
    std::fs::write(&more_path, serde_json::to_vec(&more).unwrap()).unwrap();
    let judged = stemmon()
        .args(["compare", "--metric", "fds"])
        .arg(&report)
        .arg(&more_path)
        .output()
        .unwrap();
    assert_eq!(judged.status.code(), Some(1), "{judged:?}");

    // The Chrome trace's counter.
    let counted = common::chrome_counter_max(&report, "open descriptors", "count");
    assert_eq!(counted, peak as f64);
}
