//! show, compare, export and merge on real reports: from `stemmon run`, from a program
//! with stages whose monitor wrote its own report, and from stemmon 0.1 (the fixtures).

mod common;

use common::{cannot_run, read_report, run_sh, staged_report, stemmon, TempDir, Workload, MIB};
use serde_json::Value;
use std::path::{Path, PathBuf};
use stemmon::Report;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// `stemmon run` on `dd` holding a `mib` MiB buffer for a while; the report's path.
fn run_dd(dir: &Path, name: &str, mib: u32) -> PathBuf {
    let path = dir.join(name);
    let script = format!(
        "dd if=/dev/zero of=/dev/null bs={mib}M count={} 2>/dev/null; sleep 0.3",
        12_000 / mib
    );
    assert_eq!(run_sh(&path, &script), Some(0));
    path
}

fn stdout_of(args: &[&str], paths: &[&Path]) -> (Option<i32>, String) {
    let output = stemmon().args(args).args(paths).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    (
        output.status.code(),
        String::from_utf8(output.stdout).unwrap(),
    )
}

#[test]
fn show_prints_the_header_and_an_indented_stage_table() {
    let dir = TempDir::new("show");
    let path = staged_report(dir.path(), "report.json", Workload::default(), 0);
    let report = read_report(&path);
    let (code, out) = stdout_of(&["show"], &[&path]);
    assert_eq!(code, Some(0), "{out}");
    for header in [
        "wall time:",
        "peak:",
        "in fit/inner",
        "coverage:",
        "sampler:",
        "errors:     none",
    ] {
        assert!(out.contains(header), "{header} in\n{out}");
    }
    let lines: Vec<&str> = out.lines().collect();
    let row = |name: &str| {
        *lines
            .iter()
            .find(|l| l.split(['│', '┆']).nth(1).is_some_and(|c| c.trim() == name))
            .unwrap_or_else(|| panic!("no row {name} in\n{out}"))
    };
    // `inner` is indented under `fit`; rows are aligned (same width).
    let cell = |line: &str| line.split(['│', '┆']).nth(1).unwrap().to_owned();
    assert!(cell(row("fit")).starts_with(" fit"));
    assert!(cell(row("inner")).starts_with("   inner"), "{out}");
    assert_eq!(row("fit").chars().count(), row("inner").chars().count());
    let inner = report.stage("fit/inner").unwrap();
    let peak = inner.peaks.peak_tree_rss_bytes.unwrap() as f64 / MIB as f64;
    assert!(row("inner").contains(&format!("{peak:.1} MiB")), "{out}");
    assert!(
        row("inner").contains(&format!("{:.1}ms", inner.wall_seconds * 1e3)),
        "{out}"
    );
}

#[test]
fn show_reads_reports_from_0_1() {
    for name in ["report-0.1.json", "report-0.1-samples.json"] {
        let (code, out) = stdout_of(&["show"], &[&fixture(name)]);
        assert_eq!(code, Some(0), "{name}: {out}");
        for stage in ["fit", "predict", "workers"] {
            assert!(out.contains(stage), "{name}: {stage} in\n{out}");
        }
    }
}

#[test]
fn compare_passes_the_same_workload_and_fails_more_memory() {
    let dir = TempDir::new("compare-run");
    let base = run_dd(dir.path(), "base.json", 50);
    let same = run_dd(dir.path(), "same.json", 50);
    let bigger = run_dd(dir.path(), "bigger.json", 150);
    let (code, out) = stdout_of(&["compare", "--max-time-increase", "200"], &[&base, &same]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("pass: no regression"), "{out}");
    let (code, out) = stdout_of(
        &["compare", "--max-time-increase", "200"],
        &[&base, &bigger],
    );
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("FAIL: (whole run): bound +"), "{out}");
    // The other way round memory shrank: no regression.
    let (code, out) = stdout_of(
        &["compare", "--max-time-increase", "200"],
        &[&bigger, &base],
    );
    assert_eq!(code, Some(0), "{out}");
}

#[test]
fn compare_judges_each_stage_and_ignores_short_ones() {
    let dir = TempDir::new("compare-stages");
    // Two runs of one program, the second with `fit/inner` three times as long: past
    // the default of one report a side (+100 %), which a loaded machine does not trip.
    let base_path = staged_report(dir.path(), "base.json", Workload::default(), 0);
    let slower = Workload {
        inner_ms: 600,
        ..Workload::default()
    };
    let new_path = staged_report(dir.path(), "new.json", slower, 0);
    let (base, new) = (read_report(&base_path), read_report(&new_path));
    let (code, out) = stdout_of(&["compare"], &[&base_path, &new_path]);
    assert_eq!(code, Some(1), "{out}");
    let row = |out: &str, path: &str| {
        out.lines()
            .find(|l| l.split(['│', '┆']).nth(1).is_some_and(|c| c.trim() == path))
            .unwrap_or_else(|| panic!("no row {path} in\n{out}"))
            .to_owned()
    };
    assert!(row(&out, "fit/inner").contains("FAIL: time +"), "{out}");
    // Within a looser threshold it passes. On the sampled peaks: the high-water bound of
    // a stage is the tree's for the intervals it overlaps, so a 100 ms `predict/chunk` on
    // worker threads counts whatever else ran then (the `dd`s), from run to run.
    let (code, out) = stdout_of(
        &[
            "compare",
            "--metric",
            "sampled",
            "--max-time-increase",
            "400",
            "--max-memory-increase",
            "50",
        ],
        &[&base_path, &new_path],
    );
    assert_eq!(code, Some(0), "{out}");
    // A stage shorter than --min-seconds (the noise floor) in both is not judged on
    // time, only on memory (the same here); a longer one still is.
    let longest = new.stage("fit/inner").unwrap().wall_seconds;
    assert!(base.stage("fit/inner").unwrap().wall_seconds < longest);
    let (_, out) = stdout_of(
        &[
            "compare",
            "--metric",
            "sampled",
            "--max-memory-increase",
            "50",
            "--min-seconds",
            &format!("{}", longest * 1.01),
        ],
        &[&base_path, &new_path],
    );
    assert!(row(&out, "fit/inner").contains("time not judged"), "{out}");
    // Judged on time: whether it fails depends on how much longer the rest of `fit`
    // took on a loaded machine, beside `inner`'s extra 400 ms.
    assert!(
        !row(&out, "fit").contains("time not judged"),
        "fit lasts longer than --min-seconds: {out}"
    );
}

#[test]
fn export_chrome_has_a_track_per_thread_slices_and_counters() {
    let dir = TempDir::new("export");
    let path = staged_report(dir.path(), "report.json", Workload::default(), 0);
    let report = read_report(&path);
    assert!(!report.spans.is_empty() && !report.timeline.is_empty());
    let trace_path = dir.path().join("trace.json");
    let (code, _) = stdout_of(
        &["export", "--format", "chrome", "-o"],
        &[&trace_path, &path],
    );
    assert_eq!(code, Some(0));
    let trace: Value =
        serde_json::from_str(&std::fs::read_to_string(&trace_path).unwrap()).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let of = |ph: &str| events.iter().filter(|e| e["ph"] == ph).collect::<Vec<_>>();
    assert!(events.iter().all(|e| e["pid"] == report.pid));
    // One named track per thread that ran a span.
    let threads: Vec<&Value> = of("M")
        .into_iter()
        .filter(|e| e["name"] == "thread_name")
        .collect();
    let mut span_threads: Vec<u32> = report.spans.iter().map(|s| s.thread).collect();
    span_threads.sort();
    span_threads.dedup();
    assert_eq!(threads.len(), span_threads.len().max(report.threads.len()));
    // A complete slice per span, in microseconds.
    let slices = of("X");
    assert_eq!(slices.len(), report.spans.len());
    for span in &report.spans {
        let stage = &report.stages[span.stage_id as usize];
        let slice = slices
            .iter()
            .find(|e| e["args"]["path"] == stage.path.as_str() && e["tid"] == span.thread + 1)
            .unwrap();
        assert_eq!(slice["name"], stage.name.as_str());
        let ts = slice["ts"].as_f64().unwrap();
        let dur = slice["dur"].as_f64().unwrap();
        assert!((ts - span.start_seconds * 1e6).abs() < 0.01, "{ts}");
        assert!((dur - span.wall_seconds * 1e6).abs() < 0.01, "{dur}");
    }
    let inner = slices.iter().find(|e| e["name"] == "inner").unwrap();
    let fit = slices.iter().find(|e| e["name"] == "fit").unwrap();
    let end = |e: &Value| e["ts"].as_f64().unwrap() + e["dur"].as_f64().unwrap();
    assert!(
        fit["ts"].as_f64() <= inner["ts"].as_f64() && end(inner) <= end(fit),
        "nested"
    );
    // Counter tracks: tree, parent, children, one value per timeline point.
    let counters = of("C");
    for name in ["tree RSS", "parent RSS", "children RSS"] {
        let track: Vec<_> = counters.iter().filter(|e| e["name"] == name).collect();
        assert_eq!(track.len(), report.timeline.len(), "{name}");
    }
    let peak_mib = counters
        .iter()
        .filter(|e| e["name"] == "tree RSS")
        .map(|e| e["args"]["MiB"].as_f64().unwrap())
        .fold(0.0, f64::max);
    let expected = report.peaks.peak_tree_rss_bytes.unwrap() as f64 / MIB as f64;
    assert!(
        (peak_mib - expected).abs() < 0.01,
        "{peak_mib} vs {expected}"
    );
}

#[test]
fn export_of_a_0_1_report_uses_its_stages_and_samples() {
    let (code, out) = stdout_of(
        &["export", "--format", "chrome"],
        &[&fixture("report-0.1-samples.json")],
    );
    assert_eq!(code, Some(0));
    let trace: Value = serde_json::from_str(&out).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let names: Vec<&str> = events
        .iter()
        .filter(|e| e["ph"] == "X")
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["fit", "predict", "workers"]);
    assert_eq!(
        events.iter().filter(|e| e["name"] == "tree RSS").count(),
        16
    );
}

#[test]
fn merge_sums_calls_and_spreads_walls_and_peaks_with_the_rank_of_the_max() {
    let dir = TempDir::new("merge");
    // Three ranks of one program (the runtime takes `rank` from RANK), `fit/inner`
    // holding 16, 160 and 96 MiB.
    let mut paths = Vec::new();
    for (rank, inner_mib) in [(0, 16), (1, 160), (2, 96)] {
        let workload = Workload {
            inner_mib,
            ..Workload::default()
        };
        paths.push(staged_report(
            dir.path(),
            &format!("rank{rank}.json"),
            workload,
            rank,
        ));
    }
    let out = dir.path().join("merged.json");
    let output = stemmon()
        .arg("merge")
        .args(&paths)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let merged: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(merged["format_version"], stemmon_report::FORMAT_VERSION);
    let inputs = merged["merge"]["inputs"].as_array().unwrap();
    assert_eq!(inputs.len(), 3);
    let reports: Vec<Report> = paths.iter().map(|p| read_report(p)).collect();
    for (rank, report) in reports.iter().enumerate() {
        assert_eq!(report.labels["rank"], rank.to_string());
        assert_eq!(inputs[rank]["rank"], rank.to_string());
    }
    // The whole run's peak is the highest; its spread says which rank had it.
    let peaks: Vec<f64> = reports
        .iter()
        .map(|r| r.peaks.peak_tree_rss_bytes.unwrap() as f64)
        .collect();
    assert_eq!(merged["peak_tree_rss_bytes"].as_f64().unwrap(), peaks[1]);
    let peak = &merged["merge"]["run"]["peak_tree_rss_bytes"];
    assert_eq!(peak["max_report"], 1);
    assert_eq!(inputs[1]["host"], reports[1].host.as_str());
    assert_eq!(peak["max"].as_f64().unwrap(), peaks[1]);
    assert_eq!(peak["min"].as_f64().unwrap(), peaks[0]);
    assert_eq!(peak["sum"].as_f64().unwrap(), peaks.iter().sum::<f64>());
    assert!((peak["mean"].as_f64().unwrap() - peaks.iter().sum::<f64>() / 3.0).abs() < 1.0);
    assert!(
        peaks[1] > (128 + 150) as f64 * MIB as f64,
        "rank 1 held 128 + 160 MiB"
    );
    let stages = merged["stages"].as_array().unwrap();
    let at = stages
        .iter()
        .position(|s| s["path"] == "fit/inner")
        .unwrap();
    let (stage, spread) = (&stages[at], &merged["merge"]["stages"][at]);
    assert_eq!(
        (&spread["path"], &spread["reports"]),
        (&stage["path"], &3.into())
    );
    assert_eq!(stage["calls"], 3);
    let walls: Vec<f64> = reports
        .iter()
        .map(|r| r.stage("fit/inner").unwrap().wall_seconds)
        .collect();
    let shortest = walls.iter().copied().fold(f64::INFINITY, f64::min);
    assert!((stage["wall_seconds"].as_f64().unwrap() - walls.iter().sum::<f64>()).abs() < 1e-9);
    assert_eq!(spread["wall_seconds"]["min"].as_f64().unwrap(), shortest);
    assert_eq!(spread["wall_seconds"]["count"], 3);
    let parent = stage["parent_id"].as_u64().unwrap() as usize;
    assert_eq!(stages[parent]["path"], "fit");
    let chunk = stages
        .iter()
        .find(|s| s["path"] == "predict/chunk")
        .unwrap();
    assert_eq!(chunk["calls"], 6, "two threads a rank");
}

#[test]
fn bad_input_is_exit_2_with_one_line_for_every_subcommand() {
    let dir = TempDir::new("bad-input");
    let good = staged_report(dir.path(), "good.json", Workload::default(), 0);
    let text = std::fs::read_to_string(&good).unwrap();
    let truncated = dir.path().join("truncated.json");
    std::fs::write(&truncated, &text[..text.len() / 2]).unwrap();
    let not_a_report = dir.path().join("package.json");
    std::fs::write(&not_a_report, r#"{"name": "left-pad", "version": "1.3.0"}"#).unwrap();
    let missing = dir.path().join("missing.json");
    let out = dir.path().join("out.json");
    let html = dir.path().join("out.html");
    for (bad, what) in [
        (&missing, "cannot read"),
        (&truncated, "truncated"),
        (&not_a_report, "not a stemmon report"),
    ] {
        let cases: Vec<Vec<&std::ffi::OsStr>> = vec![
            vec!["show".as_ref(), bad.as_os_str()],
            vec!["compare".as_ref(), good.as_os_str(), bad.as_os_str()],
            vec!["compare".as_ref(), bad.as_os_str(), good.as_os_str()],
            vec![
                "plot".as_ref(),
                bad.as_os_str(),
                "-o".as_ref(),
                html.as_os_str(),
            ],
            vec![
                "export".as_ref(),
                bad.as_os_str(),
                "--format".as_ref(),
                "chrome".as_ref(),
            ],
            vec![
                "merge".as_ref(),
                good.as_os_str(),
                bad.as_os_str(),
                "-o".as_ref(),
                out.as_os_str(),
            ],
        ];
        for args in cases {
            let output = stemmon().args(&args).output().unwrap();
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
            assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
            assert!(stderr.contains(what), "{args:?}: {stderr}");
            assert!(stderr.contains(&*bad.file_name().unwrap().to_string_lossy()));
        }
    }
    assert!(
        !out.exists() && !html.exists(),
        "nothing written on bad input"
    );
}

#[test]
fn a_reader_that_goes_away_is_not_a_panic() {
    let report = fixture("report-0.1-samples.json");
    for args in [
        vec!["show".as_ref(), report.as_os_str()],
        vec![
            "export".as_ref(),
            report.as_os_str(),
            "--format".as_ref(),
            "chrome".as_ref(),
        ],
    ] {
        let mut child = stemmon()
            .args(&args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take()); // As `| head -0` would.
        let output = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(stderr.is_empty(), "{args:?}: {stderr}");
    }
}

#[test]
fn an_output_link_another_user_planted_is_replaced_and_one_of_mine_followed() {
    use std::os::unix::ffi::OsStrExt;
    let dir = TempDir::new("planted");
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "precious").unwrap();
    let planted = dir.path().join("trace.json");
    std::os::unix::fs::symlink(&victim, &planted).unwrap();
    let name = std::ffi::CString::new(planted.as_os_str().as_bytes()).unwrap();
    // SAFETY: `name` is NUL-terminated and outlives the call, which only reads it; a
    // gid of all ones leaves the group unchanged.
    if unsafe { libc::lchown(name.as_ptr(), 65534, libc::gid_t::MAX) } != 0 {
        // CI runs as root: there this is a failure, not a pass.
        cannot_run(
            "an_output_link_another_user_planted_is_replaced_and_one_of_mine_followed",
            "a link of another uid needs root to make (lchown)",
        );
        return;
    }
    let export = |out: &Path| {
        stemmon()
            .args(["export", "--format", "chrome", "-o"])
            .arg(out)
            .arg(fixture("report-0.1-samples.json"))
            .status()
            .unwrap()
            .code()
    };
    assert_eq!(export(&planted), Some(0));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    let meta = std::fs::symlink_metadata(&planted).unwrap();
    assert!(meta.file_type().is_file(), "the planted link was replaced");
    let trace: Value = serde_json::from_str(&std::fs::read_to_string(&planted).unwrap()).unwrap();
    assert!(trace["traceEvents"].is_array());
    // A link of this user's is followed: the file it names gets the trace.
    let mine = dir.path().join("mine.json");
    std::os::unix::fs::symlink(&victim, &mine).unwrap();
    assert_eq!(export(&mine), Some(0));
    assert!(std::fs::symlink_metadata(&mine)
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(std::fs::read_to_string(&victim)
        .unwrap()
        .contains("traceEvents"));
}

#[test]
fn show_prints_no_raw_control_character_of_a_report() {
    let dir = TempDir::new("show-hostile");
    let path = dir.path().join("report.json");
    // The command line is in the header: `sh -c true NAME` with NAME clearing the screen.
    let output = stemmon()
        .args(["run", "--log-interval", "none", "-o"])
        .arg(&path)
        .args(["--", "sh", "-c", "true", "x\u{1b}[2J\u{7}\ny"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let (code, out) = stdout_of(&["show"], &[&path]);
    assert_eq!(code, Some(0), "{out}");
    let raw: Vec<char> = out
        .chars()
        .filter(|c| c.is_control() && *c != '\n')
        .collect();
    assert!(raw.is_empty(), "raw control characters {raw:?} in\n{out}");
    assert!(out.contains("x\\u{1b}[2J\\u{7}\\ny"), "{out}");
}

#[test]
fn an_endless_file_is_refused_past_the_size_limit() {
    // An endless device is not a regular file: refused at once.
    let started = std::time::Instant::now();
    let output = stemmon().args(["show", "/dev/zero"]).output().unwrap();
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("a device, not a regular file"), "{stderr}");
    // A regular file past the cap (sparse: 1 GiB of nothing on the disk) is refused by
    // its size, before a byte is read.
    let dir = TempDir::new("endless");
    let huge = dir.path().join("huge.json");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    let started = std::time::Instant::now();
    let output = stemmon().arg("show").arg(&huge).output().unwrap();
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("larger than 256 MiB"), "{stderr}");
}
