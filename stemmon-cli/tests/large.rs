//! Large reports made from one the runtime wrote (100 000 stages, each with the keys of
//! the tree, its marks and the measurements read at samples, about 51 MB): every reader
//! stays within twice the size of its
//! inputs plus 64 MiB, as `wait4` measures it, and its output is whole. Memory beside a
//! report's text is what such a bound is about: a stage costs its record in memory
//! whatever its text, so the fewer keys it has the closer a reader comes to the bound.

mod common;

use common::{staged_report, TempDir, Workload, MIB};
use serde_json::{json, Value};
use std::ffi::OsStr;
use std::io::Write;
use std::path::Path;
use std::time::Duration;

/// The stages of each large report.
const STAGES: usize = 100_000;

/// The most spans the runtime keeps (its `MAX_SPANS`).
const SPANS: usize = 10_000;

/// Whether the stage key `key` is a figure of a source beyond the calls, the tree, its
/// marks and the measurements read at samples (descriptors, pressure), as the field
/// table says: the cgroup, the heap, CPU and I/O.
fn other_source(key: &str) -> bool {
    use stemmon_report::fields::{field, Source};
    field(key).is_some_and(|f| {
        !matches!(
            f.source,
            Source::Calls | Source::Tree | Source::Marks | Source::Measurement(_)
        )
    })
}

/// What each reader gets: an unoptimized build on a loaded 2-core machine is slow, but a
/// walk over the stages that is not linear takes far longer.
const DEADLINE: Duration = Duration::from_secs(if cfg!(debug_assertions) { 240 } else { 60 });

/// A real report of a staged program (written by the runtime), once per test binary.
fn seed(dir: &Path) -> Value {
    let path = staged_report(dir, "seed.json", Workload::default(), 0);
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// `seed` grown to [`STAGES`] stages: its stages again and again (group `g`'s top-level
/// names end in `-g`, their children's keep theirs), every time and byte figure scaled
/// by a factor of the group and `rank` (the same factor for a record's figures, so its
/// bounds still hold), only the figures of the tree, its marks and the measurements
/// kept, and [`SPANS`]
/// spans over them. Written to `path` without the whole text in memory; its size.
fn large(seed: &Value, rank: u32, path: &Path) -> u64 {
    let stages = seed["stages"].as_array().unwrap();
    let spans = seed["spans"].as_array().unwrap();
    assert!(stages.len() >= 3 && !spans.is_empty(), "{seed}");
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    out.write_all(b"{").unwrap();
    for (key, value) in seed.as_object().unwrap() {
        let value = match key.as_str() {
            "stages" | "spans" => continue,
            "run_id" => json!(format!("large-{rank}")),
            "pid" => json!(1000 + rank),
            "labels" => json!({ "rank": rank.to_string() }),
            _ => value.clone(),
        };
        write!(out, "{}:{value},", json!(key)).unwrap();
    }
    out.write_all(b"\"stages\":[").unwrap();
    let groups = STAGES.div_ceil(stages.len());
    let mut paths = vec![String::new(); stages.len()];
    let mut written = 0;
    'groups: for group in 0..groups {
        let factor = 1.0 + ((group * 7 + rank as usize * 13) % 101) as f64 / 1000.0;
        let base = group * stages.len();
        for (index, stage) in stages.iter().enumerate() {
            if written == STAGES {
                break 'groups;
            }
            let mut stage = stage.clone();
            let name = stage["name"].as_str().unwrap().to_owned();
            let parent = stage["parent_id"].as_u64().map(|p| p as usize);
            let (name, path) = match parent {
                None => {
                    let name = format!("{name}-{group}");
                    (name.clone(), name)
                }
                Some(p) => (name.clone(), format!("{}/{name}", paths[p])),
            };
            paths[index] = path.clone();
            stage["id"] = json!(base + index);
            stage["parent_id"] = json!(parent.map(|p| base + p));
            stage["name"] = json!(name);
            stage["path"] = json!(path);
            let keys = stage.as_object_mut().unwrap();
            // The figures of the sources beyond the tree, its marks and the measurements
            // are left out, and what was not read (`null`): about 500 bytes a stage.
            keys.retain(|key, value| !value.is_null() && !other_source(key));
            for (key, value) in keys.iter_mut() {
                if key.ends_with("_bytes") && value.is_u64() {
                    *value = json!((value.as_u64().unwrap() as f64 * factor) as u64);
                } else if key.ends_with("_seconds") && value.is_f64() {
                    *value = json!(value.as_f64().unwrap() * factor);
                }
            }
            if written > 0 {
                out.write_all(b",").unwrap();
            }
            serde_json::to_writer(&mut out, &stage).unwrap();
            written += 1;
        }
    }
    out.write_all(b"],\"spans\":[").unwrap();
    for at in 0..SPANS {
        let mut span = spans[at % spans.len()].clone();
        let group = at / spans.len();
        let id = span["stage_id"].as_u64().unwrap() as usize + group * stages.len();
        span["stage_id"] = json!(id);
        if at > 0 {
            out.write_all(b",").unwrap();
        }
        serde_json::to_writer(&mut out, &span).unwrap();
    }
    out.write_all(b"]}\n").unwrap();
    out.flush().unwrap();
    std::fs::metadata(path).unwrap().len()
}

/// Runs `stemmon args` on inputs of `sizes` bytes: its exit code, after asserting that
/// its peak RSS is at most twice their sum plus 64 MiB.
fn within_bound(dir: &Path, args: &[&OsStr], sizes: &[u64]) -> Option<i32> {
    let (code, peak, stderr) = common::exit_and_peak(dir, args, DEADLINE);
    let input: u64 = sizes.iter().sum();
    let limit = 2 * input + 64 * MIB;
    eprintln!(
        "{:?}: exit {code:?}, peak {} MiB, input {} MiB, limit {} MiB",
        args[0],
        peak / MIB,
        input / MIB,
        limit / MIB
    );
    assert!(peak <= limit, "{args:?}: peak {peak} > {limit}: {stderr}");
    code
}

/// A large report's readers: `show`, `plot` and `export --format chrome` of one;
/// `compare` of two copies of it (which pass); `merge` of it alone, and of two ranks'
/// (the same stage paths), whose merged report reads back with every stage.
#[test]
fn every_reader_of_a_large_report_stays_within_twice_its_inputs() {
    if !common::has_python3("every_reader_of_a_large_report_stays_within_twice_its_inputs") {
        return;
    }
    let dir = TempDir::new("large");
    let seed = seed(dir.path());
    let (a, b, copy) = (
        dir.path().join("rank0.json"),
        dir.path().join("rank1.json"),
        dir.path().join("copy.json"),
    );
    let size_a = large(&seed, 0, &a);
    let size_b = large(&seed, 1, &b);
    std::fs::copy(&a, &copy).unwrap();
    assert!(size_a > 40 * MIB && size_b > 40 * MIB, "{size_a} {size_b}");
    let (html, trace, merged) = (
        dir.path().join("plot.html"),
        dir.path().join("trace.json"),
        dir.path().join("merged.json"),
    );
    let os = OsStr::new;
    let d = dir.path();

    let code = within_bound(d, &[os("show"), a.as_os_str()], &[size_a]);
    assert_eq!(code, Some(0));
    let code = within_bound(
        d,
        &[os("compare"), a.as_os_str(), copy.as_os_str()],
        &[size_a, size_a],
    );
    assert_eq!(code, Some(0), "a report compared with itself passes");
    // Each output removed once checked: the disk holds the inputs and one output at most.
    std::fs::remove_file(&copy).unwrap();
    let code = within_bound(
        d,
        &[os("plot"), a.as_os_str(), os("-o"), html.as_os_str()],
        &[size_a],
    );
    assert_eq!(code, Some(0));
    assert!(std::fs::metadata(&html).unwrap().len() > 0);
    std::fs::remove_file(&html).unwrap();
    let code = within_bound(
        d,
        &[
            os("export"),
            a.as_os_str(),
            os("--format"),
            os("chrome"),
            os("-o"),
            trace.as_os_str(),
        ],
        &[size_a],
    );
    assert_eq!(code, Some(0));
    let events: Value = serde_json::from_slice(&std::fs::read(&trace).unwrap()).unwrap();
    assert!(events["traceEvents"].as_array().unwrap().len() >= SPANS);
    std::fs::remove_file(&trace).unwrap();
    // OTLP to a loopback endpoint: a metric's points are encoded and dropped one metric
    // at a time (all of them at once cost 208 MiB here).
    let sink = Sink::start();
    let code = within_bound(
        d,
        &[
            os("export"),
            a.as_os_str(),
            os("--format"),
            os("otlp"),
            os("--endpoint"),
            os(&sink.url),
        ],
        &[size_a],
    );
    assert_eq!(code, Some(0));
    // The metrics in requests of about 1 MiB each, the trace in one.
    let received = sink.received();
    let metrics: Vec<usize> = received
        .iter()
        .filter(|(p, _)| p == "/v1/metrics")
        .map(|(_, len)| *len)
        .collect();
    assert!(metrics.len() > 10, "{received:?}");
    assert!(metrics.iter().all(|len| *len < 2 << 20), "{received:?}");
    assert!(
        received
            .iter()
            .any(|(p, len)| p == "/v1/traces" && *len > 1 << 20),
        "{received:?}"
    );

    // One report alone, as a job of one rank: the merge is the report again.
    let code = within_bound(
        d,
        &[os("merge"), a.as_os_str(), os("-o"), merged.as_os_str()],
        &[size_a],
    );
    assert_eq!(code, Some(0));
    let alone = stemmon_report::read_file(&merged).unwrap().report;
    assert_eq!(alone.stages.len(), STAGES);
    drop(alone);
    std::fs::remove_file(&merged).unwrap();
    let code = within_bound(
        d,
        &[
            os("merge"),
            a.as_os_str(),
            b.as_os_str(),
            os("-o"),
            merged.as_os_str(),
        ],
        &[size_a, size_b],
    );
    assert_eq!(code, Some(0));
    let report = stemmon_report::read_file(&merged).unwrap().report;
    assert_eq!(report.stages.len(), STAGES);
    let calls = |path: &Path| stemmon_report::read_file(path).unwrap().report.stages[0].calls;
    assert_eq!(report.stages[0].calls, calls(&a) + calls(&b));
    let text = std::fs::read(&merged).unwrap();
    let merged: Value = serde_json::from_slice(&text).unwrap();
    let section = &merged["merge"];
    assert_eq!(section["inputs"].as_array().unwrap().len(), 2);
    assert_eq!(section["stages"].as_array().unwrap().len(), STAGES);
    // Each stage both ranks ran: its calls summed, their spread kept.
    let first = &section["stages"][0];
    assert_eq!(first["reports"], 2, "{first}");
    assert_eq!(first["calls"]["count"], 2, "{first}");
}

/// A loopback OTLP endpoint that answers 200 with an empty response to every POST and
/// keeps each request's path and body length.
struct Sink {
    url: String,
    received: std::sync::Arc<std::sync::Mutex<Vec<(String, usize)>>>,
}

impl Sink {
    fn start() -> Sink {
        use std::io::{BufRead, BufReader, Read};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let received = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let kept = std::sync::Arc::clone(&received);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let kept = std::sync::Arc::clone(&kept);
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    let mut writer = stream;
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        let path = line.split(' ').nth(1).unwrap_or("").to_owned();
                        let mut length = 0;
                        loop {
                            let mut header = String::new();
                            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                                return;
                            }
                            if header.trim().is_empty() {
                                break;
                            }
                            let lower = header.to_ascii_lowercase();
                            if let Some(value) = lower.strip_prefix("content-length:") {
                                length = value.trim().parse().unwrap_or(0);
                            }
                        }
                        let mut body = vec![0u8; length];
                        if reader.read_exact(&mut body).is_err() {
                            return;
                        }
                        kept.lock().unwrap().push((path, length));
                        let answer = "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
                        if writer.write_all(answer.as_bytes()).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        Sink { url, received }
    }

    fn received(&self) -> Vec<(String, usize)> {
        self.received.lock().unwrap().clone()
    }
}
