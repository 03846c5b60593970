//! Reports stemmon did not write (a CI artifact from an untrusted pull request): every
//! subcommand ends in well under 10 s with output or exit 2, never a panic, a stack
//! overflow or a hang, and no raw control character of the report reaches its output.

mod common;

use common::{stemmon, TempDir};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// What each subcommand gets on one report: 30 s for an optimized build (where the
/// slowest here takes under 2 s). An unoptimized one is several times slower, and a
/// loaded 2-core machine (the suite's other tests beside it) slower again: it gets
/// 120 s, still far below what a quadratic walk over 100 000 stages takes (many
/// minutes: 10¹⁰ steps).
const DEADLINE: Duration = Duration::from_secs(if cfg!(debug_assertions) { 120 } else { 30 });

const MIB: u64 = 1 << 20;

fn stage(id: usize, name: &str, path: &str, parent: Option<usize>, start: f64) -> Value {
    json!({
        "id": id, "name": name, "path": path, "parent_id": parent, "calls": 1,
        "start_seconds": start, "wall_seconds": 0.5, "min_wall_seconds": 0.5,
        "max_wall_seconds": 0.5, "peak_tree_rss_bytes": 10 * MIB,
        "peak_tree_rss_bound_bytes": 11 * MIB, "peak_parent_hwm_bytes": 10 * MIB,
    })
}

/// A report with `stages`, one span each, and a short timeline.
fn report(stages: Vec<Value>) -> Value {
    let spans: Vec<Value> = stages
        .iter()
        .map(|s| json!({ "stage_id": s["id"], "thread": 0, "start_seconds": s["start_seconds"], "wall_seconds": s["wall_seconds"] }))
        .collect();
    let timeline: Vec<Value> = (0..10)
        .map(|i| {
            json!({
                "elapsed_seconds": f64::from(i), "end_seconds": f64::from(i),
                "tree_rss_bytes": 10 * MIB, "parent_rss_bytes": 8 * MIB,
                "children_rss_bytes": 2 * MIB, "tree_rss_bound_bytes": 11 * MIB,
                "process_count": 2, "samples": 1,
            })
        })
        .collect();
    json!({
        "pid": 1, "running": false, "error": null, "wall_seconds": 10.0,
        "sample_interval": 1.0, "sampler": "linux-proc", "command": ["prog"],
        "peak_tree_rss_bytes": 10 * MIB, "peak_tree_rss_bound_bytes": 11 * MIB,
        "peak_parent_hwm_bytes": 10 * MIB, "threads": [{ "id": 0, "name": "main", "calls": 1 }],
        "stages": stages, "spans": spans, "timeline": timeline,
    })
}

const COUNT: usize = 100_000;

fn flat() -> Value {
    report(
        (0..COUNT)
            .map(|i| stage(i, &format!("s{i}"), &format!("s{i}"), None, i as f64 * 1e-4))
            .collect(),
    )
}

/// Each stage the child of the one before. Paths are named by index: paths joined
/// down a 100 000-deep chain would take gigabytes, past the size limit.
fn deep_chain() -> Value {
    report(
        (0..COUNT)
            .map(|i| {
                stage(
                    i,
                    &format!("{}", i % 10),
                    &format!("p{i}"),
                    i.checked_sub(1),
                    0.0,
                )
            })
            .collect(),
    )
}

fn cycle() -> Value {
    let mut stages: Vec<Value> = (0..3)
        .map(|i| {
            stage(
                i,
                &format!("c{i}"),
                &format!("c{i}"),
                Some((i + 1) % 3),
                0.0,
            )
        })
        .collect();
    stages.push(stage(3, "self", "self", Some(3), 0.0));
    report(stages)
}

/// Times at the edge of f64: each alone finite, their sums not.
fn huge_times() -> Value {
    let mut report = report(vec![stage(0, "fit", "fit", None, 1e308)]);
    report["stages"][0]["wall_seconds"] = json!(1.7e308);
    report["spans"][0]["start_seconds"] = json!(1e308);
    report["spans"][0]["wall_seconds"] = json!(1.7e308);
    report["timeline"][9]["end_seconds"] = json!(1e308);
    report["wall_seconds"] = json!(1.7e308);
    report
}

/// Every string the report holds, full of what a terminal or an SVG must not get raw.
fn control_characters() -> Value {
    let evil = |what: &str| format!("{what}\u{1b}[2J\u{1b}]0;owned\u{7}\u{0}\u{202e}\r\u{9b}x\n");
    let mut stages = vec![
        stage(0, &evil("fit"), &evil("fit"), None, 1.0),
        stage(
            1,
            &evil("inner"),
            &format!("{}/{}", evil("fit"), evil("inner")),
            Some(0),
            1.5,
        ),
    ];
    stages[1]["error"] = json!(evil("error"));
    stages[1]["errors"] = json!(1);
    let mut report = report(stages);
    report["host"] = json!(evil("host"));
    report["labels"] = json!({ "rank": evil("rank"), "job_id": evil("job") });
    report["command"] = json!([evil("prog"), evil("arg")]);
    report["error"] = json!(evil("error"));
    report["sampling_error"] = json!(evil("sampling"));
    report["output_error"] = json!(evil("output"));
    report["peak_rss_stage"] = json!(evil("fit"));
    report["peak_rss_elapsed_seconds"] = json!(1.2);
    report["threads"][0]["name"] = json!(evil("thread"));
    report["spans"][1]["error"] = json!(evil("span"));
    report["high_water_marks"] = json!({ "enabled": true, "missing": evil("missing") });
    report["cgroup"] = json!({ "path": evil("cgroup"), "version": 2, "memory_peak_bytes": 1 });
    report
}

/// A small good report to compare and merge with: another run than the hostile ones
/// (another pid), which `merge` would refuse as the same run twice.
fn good() -> Value {
    let mut good = report(vec![stage(0, "fit", "fit", None, 1.0)]);
    good["pid"] = json!(2);
    good
}

fn write(dir: &Path, name: &str, report: &Value) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_vec(report).unwrap()).unwrap();
    path
}

struct Ran {
    code: Option<i32>,
    took: Duration,
    stdout: String,
    stderr: String,
}

/// Runs `stemmon args`, killing it at the deadline; output goes to files (no pipe fills).
fn run(dir: &Path, args: &[&std::ffi::OsStr]) -> Ran {
    let (out, err) = (dir.join("stdout"), dir.join("stderr"));
    let started = Instant::now();
    let mut child = stemmon()
        .args(args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("stemmon {args:?} still runs after {DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let read = |path: &Path| String::from_utf8_lossy(&std::fs::read(path).unwrap()).into_owned();
    Ran {
        code: status.code(),
        took: started.elapsed(),
        stdout: read(&out),
        stderr: read(&err),
    }
}

/// A character a terminal acts on (C0 but `\n` and `\t`, DEL, C1) or that reorders text.
fn raw_control(text: &str) -> Option<char> {
    text.chars().find(|&c| {
        (c.is_control() && c != '\n' && c != '\t')
            || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    })
}

/// Every subcommand on `hostile` (and on it beside a good report): exit 0 or 2 (1 too
/// for `compare`, a failed gate), in time, no panic, nothing raw.
fn every_subcommand(name: &str, hostile: &Value) -> Vec<(String, Duration, Option<i32>)> {
    // One subcommand at a time, so that the deadline measures it, not its neighbours.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = TempDir::new(&format!("hostile-{name}"));
    let bad = write(dir.path(), "hostile.json", hostile);
    let good = write(dir.path(), "good.json", &good());
    let (html, svg, trace, merged) = (
        dir.path().join("out.html"),
        dir.path().join("out.svg"),
        dir.path().join("trace.json"),
        dir.path().join("merged.json"),
    );
    let (alone, again, merged_svg) = (
        dir.path().join("alone.json"),
        dir.path().join("again.json"),
        dir.path().join("merged.svg"),
    );
    let os = |s: &'static str| std::ffi::OsStr::new(s);
    let cases: Vec<(&str, Vec<&std::ffi::OsStr>)> = vec![
        ("show", vec![os("show"), bad.as_os_str()]),
        (
            "compare good hostile",
            vec![os("compare"), good.as_os_str(), bad.as_os_str()],
        ),
        (
            "compare hostile good",
            vec![os("compare"), bad.as_os_str(), good.as_os_str()],
        ),
        (
            "compare --format markdown",
            vec![
                os("compare"),
                bad.as_os_str(),
                bad.as_os_str(),
                os("--format"),
                os("markdown"),
            ],
        ),
        (
            "plot html",
            vec![os("plot"), bad.as_os_str(), os("-o"), html.as_os_str()],
        ),
        (
            "plot svg",
            vec![os("plot"), bad.as_os_str(), os("-o"), svg.as_os_str()],
        ),
        (
            "export chrome",
            vec![
                os("export"),
                bad.as_os_str(),
                os("--format"),
                os("chrome"),
                os("-o"),
                trace.as_os_str(),
            ],
        ),
        (
            "merge",
            vec![
                os("merge"),
                bad.as_os_str(),
                good.as_os_str(),
                os("-o"),
                merged.as_os_str(),
            ],
        ),
        (
            "merge alone",
            vec![os("merge"), bad.as_os_str(), os("-o"), alone.as_os_str()],
        ),
        // The merged report (where merge wrote one) is read like any other.
        ("show merged", vec![os("show"), merged.as_os_str()]),
        (
            "plot merged",
            vec![
                os("plot"),
                merged.as_os_str(),
                os("-o"),
                merged_svg.as_os_str(),
            ],
        ),
        // Against a merge of as many runs (a merge of one is another shape: exit 2).
        (
            "compare merged",
            vec![os("compare"), merged.as_os_str(), merged.as_os_str()],
        ),
        (
            "merge merged",
            vec![os("merge"), merged.as_os_str(), os("-o"), again.as_os_str()],
        ),
    ];
    let mut times = Vec::new();
    for (what, args) in cases {
        let ran = run(dir.path(), &args);
        let allowed: &[i32] = if what.starts_with("compare") {
            &[0, 1, 2]
        } else {
            &[0, 2]
        };
        assert!(
            ran.code.is_some_and(|c| allowed.contains(&c)),
            "{name}: {what}: exit {:?}\n{}",
            ran.code,
            ran.stderr
        );
        assert!(
            !ran.stderr.contains("panicked"),
            "{name}: {what}: {}",
            ran.stderr
        );
        if ran.code == Some(2) {
            assert_eq!(
                ran.stderr.lines().count(),
                1,
                "{name}: {what}: {}",
                ran.stderr
            );
        }
        for (stream, text) in [("stdout", &ran.stdout), ("stderr", &ran.stderr)] {
            if let Some(c) = raw_control(text) {
                panic!("{name}: {what}: raw {c:?} in {stream}:\n{text}");
            }
        }
        eprintln!("{name}: {what}: exit {:?} in {:?}", ran.code, ran.took);
        times.push((what.to_owned(), ran.took, ran.code));
    }
    for svg in [&svg, &merged_svg] {
        if svg.exists() {
            let text = std::fs::read_to_string(svg).unwrap();
            roxmltree::Document::parse(&text).unwrap_or_else(|e| panic!("{name}: SVG: {e}"));
            assert_eq!(raw_control(&text), None, "{name}: SVG");
        }
    }
    if merged.exists() {
        // Every stage of both inputs, the hostile one's paths kept as they were.
        let text = std::fs::read(&merged).unwrap();
        let report = stemmon_report::read(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        let paths: std::collections::HashSet<&str> =
            report.stages.iter().map(|s| s.path.as_str()).collect();
        let hostile_paths = hostile["stages"].as_array().unwrap();
        assert!(
            hostile_paths
                .iter()
                .all(|s| paths.contains(s["path"].as_str().unwrap())),
            "{name}: a stage lost in the merge"
        );
        assert!(paths.contains("fit"), "{name}: the good report's stage");
    }
    times
}

#[test]
fn a_hundred_thousand_flat_stages() {
    let times = every_subcommand("flat", &flat());
    // Nothing wrong with them but their number: every subcommand gives output.
    for (what, _, code) in times {
        assert_ne!(code, Some(2), "flat: {what}");
    }
}

#[test]
fn a_hundred_thousand_deep_chain() {
    every_subcommand("chain", &deep_chain());
    let dir = TempDir::new("hostile-chain-show");
    let path = write(dir.path(), "chain.json", &deep_chain());
    let ran = run(
        dir.path(),
        &[std::ffi::OsStr::new("show"), path.as_os_str()],
    );
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    // The indentation stops at 32 levels; a deeper stage says how deep it is.
    let row = ran
        .stdout
        .lines()
        .find(|l| l.contains("[depth 99999]"))
        .unwrap_or_else(|| panic!("no depth shown:\n{}", &ran.stdout[..4000]));
    assert!(row.len() < 400, "{row}");
}

#[test]
fn a_parent_cycle_is_exit_2_everywhere() {
    for (what, _, code) in every_subcommand("cycle", &cycle()) {
        assert_eq!(code, Some(2), "cycle: {what}");
    }
}

#[test]
fn times_at_the_edge_of_f64_are_exit_2_everywhere() {
    for (what, _, code) in every_subcommand("huge", &huge_times()) {
        assert_eq!(code, Some(2), "1e308: {what}");
    }
    // A number past f64 is not JSON a report can hold.
    let dir = TempDir::new("hostile-overflow");
    let text = serde_json::to_string(&good())
        .unwrap()
        .replace("\"wall_seconds\":10.0", "\"wall_seconds\":1e999");
    assert!(text.contains("1e999"));
    let path = dir.path().join("overflow.json");
    std::fs::write(&path, text).unwrap();
    let ran = run(
        dir.path(),
        &[std::ffi::OsStr::new("show"), path.as_os_str()],
    );
    assert_eq!(ran.code, Some(2), "{}", ran.stdout);
}

#[test]
fn control_characters_everywhere_reach_no_output_raw() {
    for (what, _, code) in every_subcommand("control", &control_characters()) {
        assert_ne!(code, Some(2), "control: {what}");
    }
}

/// The JSON `text` written to `path` with its string `"LARGE"` replaced by `open`, `fill`
/// repeated `count` times (rounded down to 65 536) and `close`, without the whole file in
/// memory.
fn with_large_value(path: &Path, text: &str, parts: (&str, &str, &str), count: usize) {
    use std::io::Write;
    let (open, fill, close) = parts;
    let (head, tail) = text.split_once("\"LARGE\"").unwrap();
    let mut file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    write!(file, "{head}{open}").unwrap();
    let chunk = fill.repeat(1 << 16);
    for _ in 0..count >> 16 {
        file.write_all(chunk.as_bytes()).unwrap();
    }
    write!(file, "{close}{tail}").unwrap();
    file.flush().unwrap();
}

/// Unknown keys are skipped, not kept, and a `format_version` is a short string: on a
/// report of 100 MB with one unknown key (at the top, in a stage), or a 100 MB version,
/// every reader stays within twice the file plus 64 MiB (they cost 32 times the file
/// when the unknown keys were kept), as `wait4` measures it.
#[test]
fn a_large_unknown_key_or_version_costs_at_most_twice_the_file() {
    const SIZE: usize = 100 << 20;
    if !common::has_python3("a_large_unknown_key_or_version_costs_at_most_twice_the_file") {
        return;
    }
    let dir = TempDir::new("hostile-large-key");
    let mut top = good();
    top["later"] = json!("LARGE");
    let mut in_stage = good();
    in_stage["stages"][0]["skipped"] = json!("LARGE");
    let (top, stage, version) = (
        (dir.path().join("top.json"), top.to_string()),
        (dir.path().join("stage.json"), in_stage.to_string()),
        (
            dir.path().join("version.json"),
            json!({"format_version": "LARGE", "pid": 1}).to_string(),
        ),
    );
    with_large_value(&top.0, &top.1, ("[", "0,", "0]"), SIZE / 2);
    with_large_value(&stage.0, &stage.1, ("[", "[],", "[]]"), SIZE / 3);
    with_large_value(&version.0, &version.1, ("\"", "x", "\""), SIZE);
    let (top, stage, version) = (top.0, stage.0, version.0);
    let mut other = good();
    other["pid"] = json!(3);
    let other = write(dir.path(), "other.json", &other);
    let (html, merged, trace) = (
        dir.path().join("out.html"),
        dir.path().join("merged.json"),
        dir.path().join("trace.json"),
    );
    let os = std::ffi::OsStr::new;
    for (input, readable) in [(&top, true), (&stage, true), (&version, false)] {
        let size = std::fs::metadata(input).unwrap().len();
        assert!(size >= SIZE as u64 - MIB, "{size}");
        let cases: Vec<Vec<&std::ffi::OsStr>> = vec![
            vec![os("show"), input.as_os_str()],
            vec![os("compare"), other.as_os_str(), input.as_os_str()],
            vec![os("plot"), input.as_os_str(), os("-o"), html.as_os_str()],
            vec![
                os("merge"),
                input.as_os_str(),
                other.as_os_str(),
                os("-o"),
                merged.as_os_str(),
            ],
            vec![
                os("export"),
                input.as_os_str(),
                os("--format"),
                os("chrome"),
                os("-o"),
                trace.as_os_str(),
            ],
        ];
        for args in cases {
            let (code, peak, stderr) = common::exit_and_peak(dir.path(), &args, DEADLINE);
            let limit = 2 * size + 64 * MIB;
            eprintln!(
                "{args:?}: exit {code:?}, peak {} MiB, file {} MiB",
                peak / MIB,
                size / MIB
            );
            assert!(peak <= limit, "{args:?}: peak {peak} > {limit}: {stderr}");
            if readable {
                // `compare` of a different run may fail its gate (1); nothing is refused.
                assert!(
                    matches!(code, Some(0 | 1)),
                    "{args:?}: exit {code:?}: {stderr}"
                );
            } else {
                assert_eq!(code, Some(2), "{args:?}: {stderr}");
                assert_eq!(stderr.lines().count(), 1, "{stderr}");
                assert!(stderr.contains("format_version is"), "{stderr}");
                assert!(stderr.len() < 300, "{stderr}");
            }
        }
        if readable {
            // What was skipped is not written on: the merge holds no trace of it.
            let merged = std::fs::read_to_string(&merged).unwrap();
            assert!(!merged.contains("later") && !merged.contains("skipped"));
            assert!(merged.len() < 1 << 20, "{}", merged.len());
        }
    }
}

/// Whatever is not a regular file is refused at once, exit 2 with one line, by every
/// subcommand that reads a report: a FIFO with no writer, one with a writer that never
/// writes (each used to hang the reader in `open` or `read`), a device and a socket.
#[test]
fn an_input_that_is_not_a_regular_file_is_refused_at_once() {
    use std::os::unix::ffi::OsStrExt;
    let dir = TempDir::new("hostile-special");
    let fifo = dir.path().join("fifo.json");
    let silent = dir.path().join("silent.json");
    for path in [&fifo, &silent] {
        let name = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
        // SAFETY: `name` is a NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
    }
    // A writer that holds the FIFO open and never writes (read-write does not block).
    let _writer = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&silent)
        .unwrap();
    let socket = dir.path().join("socket.json");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let device = Path::new("/dev/zero");
    let good = write(dir.path(), "good.json", &good());
    let (html, svg, merged, trace) = (
        dir.path().join("out.html"),
        dir.path().join("out.svg"),
        dir.path().join("merged.json"),
        dir.path().join("trace.json"),
    );
    let os = std::ffi::OsStr::new;
    for (input, kind) in [
        (&*fifo, "a FIFO"),
        (&*silent, "a FIFO"),
        (device, "a device"),
        (&*socket, "a socket"),
    ] {
        let cases: Vec<Vec<&std::ffi::OsStr>> = vec![
            vec![os("show"), input.as_os_str()],
            vec![os("compare"), good.as_os_str(), input.as_os_str()],
            vec![os("compare"), input.as_os_str(), good.as_os_str()],
            vec![os("plot"), input.as_os_str(), os("-o"), html.as_os_str()],
            vec![os("plot"), input.as_os_str(), os("-o"), svg.as_os_str()],
            vec![
                os("merge"),
                good.as_os_str(),
                input.as_os_str(),
                os("-o"),
                merged.as_os_str(),
            ],
            vec![
                os("export"),
                input.as_os_str(),
                os("--format"),
                os("chrome"),
                os("-o"),
                trace.as_os_str(),
            ],
            vec![
                os("export"),
                input.as_os_str(),
                os("--format"),
                os("otlp"),
                os("--endpoint"),
                os("http://127.0.0.1:9"),
            ],
        ];
        for args in cases {
            let ran = run(dir.path(), &args);
            assert_eq!(ran.code, Some(2), "{args:?}: {}", ran.stderr);
            assert_eq!(ran.stderr.lines().count(), 1, "{args:?}: {}", ran.stderr);
            assert!(
                ran.stderr.contains(&format!("{kind}, not a regular file")),
                "{args:?}: {}",
                ran.stderr
            );
            // At once: no wait for a writer, on a loaded machine too.
            assert!(
                ran.took < Duration::from_secs(5),
                "{args:?}: {:?}",
                ran.took
            );
        }
    }
    for output in [&html, &svg, &merged, &trace] {
        assert!(!output.exists(), "{} written", output.display());
    }
}

/// A 256 KiB tmpfs at `dir` for one test, unmounted when dropped; `None` where this
/// machine may not mount one (not root).
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path) -> Option<Tmpfs> {
        std::fs::create_dir_all(dir).unwrap();
        std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=256k,mode=0700", "tmpfs"])
            .arg(dir)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
            .then(|| Tmpfs(dir.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

/// `stemmon run` whose report's disk fills mid-run, freed before the end (`free`) or
/// not: its exit status, its stderr, and the report if one is there.
fn run_on_full_disk(dir: &Path, free: bool) -> (Option<i32>, String, Option<stemmon::Report>) {
    use std::io::{BufRead, BufReader};
    let disk = dir.join(if free { "freed" } else { "full" });
    let Some(_tmpfs) = Tmpfs::mount(&disk) else {
        common::cannot_run("a_full_disk", "cannot mount a tmpfs (needs root)");
        return (None, String::new(), None);
    };
    let (report, go) = (disk.join("report.json"), dir.join(format!("go-{free}")));
    let script = format!(
        "while [ ! -e '{}' ]; do sleep 0.01; done; exit 7",
        go.display()
    );
    let mut child = stemmon()
        .arg("run")
        .arg("-o")
        .arg(&report)
        .args([
            "--sample-interval",
            "0.05",
            "--log-interval",
            "0.1",
            "--",
            "sh",
            "-c",
        ])
        .arg(&script)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while !report.exists() {
        assert!(started.elapsed() < DEADLINE, "no first report");
        std::thread::sleep(Duration::from_millis(5));
    }
    let filler = disk.join("filler");
    {
        use std::io::Write;
        let mut file = std::fs::File::create(&filler).unwrap();
        while file.write_all(&[0u8; 4096]).is_ok() {}
    }
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut stderr = String::new();
    for line in lines.by_ref().map_while(Result::ok) {
        stderr.push_str(&line);
        stderr.push('\n');
        if line.contains("could not write the report") {
            break;
        }
    }
    if free {
        std::fs::remove_file(&filler).unwrap();
    }
    std::fs::write(&go, "").unwrap();
    for line in lines.map_while(Result::ok) {
        stderr.push_str(&line);
        stderr.push('\n');
    }
    let code = child.wait().unwrap().code();
    let text = std::fs::read(&report).unwrap();
    let report = stemmon_report::read(&text).ok();
    (code, stderr, report)
}

/// A full disk under `stemmon run`: each failure is warned once, and the last word on
/// the report says what became of it: written once space came back (where it used to
/// say "the report was not written"), or not written, for the reason warned.
#[test]
fn a_full_disk_is_warned_once_and_the_last_word_is_what_happened() {
    let dir = TempDir::new("full-disk-run");
    let (code, stderr, report) = run_on_full_disk(dir.path(), true);
    if code.is_none() {
        return;
    }
    assert_eq!(code, Some(7), "{stderr}");
    let report = report.expect("the final report");
    assert!(!report.running && report.exit_code == Some(7), "{report:?}");
    let warnings: Vec<&str> = stderr.lines().filter(|l| l.contains("warning:")).collect();
    let failures = warnings
        .iter()
        .filter(|l| l.contains("could not write"))
        .count();
    assert_eq!(failures, 1, "{stderr}");
    assert!(!stderr.contains("not written"), "{stderr}");
    assert!(
        warnings
            .last()
            .unwrap()
            .contains("the final report was written to"),
        "{stderr}"
    );

    let (code, stderr, report) = run_on_full_disk(dir.path(), false);
    assert_eq!(code, Some(7), "{stderr}");
    assert!(
        report.is_some_and(|r| r.running),
        "the last whole report stays"
    );
    let warnings: Vec<&str> = stderr.lines().filter(|l| l.contains("warning:")).collect();
    let failures = warnings
        .iter()
        .filter(|l| l.contains("could not write"))
        .count();
    assert_eq!(failures, 1, "{stderr}");
    assert!(
        warnings
            .last()
            .unwrap()
            .contains("the final report was not written either"),
        "{stderr}"
    );
}

/// A report of many tiny records (`"stages": [{}, {}, ...]`, `"spans"` too: 3 bytes of
/// JSON each, hundreds in memory) is refused once its records would cost more than its
/// size plus 32 MiB, as `wait4` measures it: it cost 180 times the file.
#[test]
fn many_tiny_records_are_refused_at_a_bounded_cost() {
    const COUNT: usize = 8 << 20;
    if !common::has_python3("many_tiny_records_are_refused_at_a_bounded_cost") {
        return;
    }
    let dir = TempDir::new("hostile-tiny");
    for key in ["stages", "spans", "timeline", "command"] {
        let mut report = good();
        report[key] = json!("LARGE");
        let path = dir.path().join(format!("{key}.json"));
        let fill = if key == "command" { "\"\"," } else { "{}," };
        let last = if key == "command" { "\"\"]" } else { "{}]" };
        with_large_value(&path, &report.to_string(), ("[", fill, last), COUNT);
        let size = std::fs::metadata(&path).unwrap().len();
        let (code, peak, stderr) = common::exit_and_peak(
            dir.path(),
            &[std::ffi::OsStr::new("show"), path.as_os_str()],
            DEADLINE,
        );
        eprintln!(
            "{key}: exit {code:?}, peak {} MiB, file {} MiB",
            peak / MIB,
            size / MIB
        );
        assert_eq!(code, Some(2), "{key}: {stderr}");
        assert!(
            stderr.contains("more records than a report of its size can"),
            "{stderr}"
        );
        assert!(
            peak <= 2 * size + 64 * MIB,
            "{key}: peak {peak} for {size} bytes"
        );
    }
}
