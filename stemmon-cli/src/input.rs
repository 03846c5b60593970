//! Reading a report file, with one clear message per way it can be wrong.
//!
//! Every key of [`Report`] has a default (0.1 reports lack the 0.2 keys), so any JSON
//! object would deserialize; a file is taken as a report only if it holds the keys every
//! version has written (`pid`, `wall_seconds`, `sampler`, `stages`).

use crate::tree::Tree;
use crate::Failure;
use std::fs;
use std::path::Path;
use stemmon::Report;

/// The largest report read: a 100 000-stage report is far smaller; a 1 GiB or endless
/// file (`/dev/zero`, a FIFO that never closes) is refused here, not held in memory.
const MAX_REPORT_BYTES: u64 = 256 << 20;

/// The longest time a report may hold, in seconds (about 31 years): past it a figure is
/// hostile, and sums of such figures would overflow to infinity.
const MAX_SECONDS: f64 = 1e9;

/// A report read and checked, with its stage tree.
#[derive(Debug)]
pub(crate) struct Loaded {
    pub(crate) report: Report,
    pub(crate) tree: Tree,
}

/// Reads and checks the report at `path`: its JSON, its stage tree ([`Tree::of`]) and
/// its times (finite, from 0 to [`MAX_SECONDS`]).
pub(crate) fn load(path: &Path) -> Result<Loaded, Failure> {
    let report = read(path)?;
    let checked = times(&report).and_then(|()| Tree::of(&report));
    match checked {
        Ok(tree) => Ok(Loaded { report, tree }),
        Err(why) => Err(Failure::input(format!("{}: {why}", path.display()))),
    }
}

/// Every time in `report` is a number of seconds from 0 to [`MAX_SECONDS`].
fn times(report: &Report) -> Result<(), String> {
    let check = |what: &dyn Fn() -> String, value: f64| {
        if (0.0..=MAX_SECONDS).contains(&value) {
            Ok(())
        } else {
            Err(format!(
                "{} is {value:e}, not a time (0 to {MAX_SECONDS:e} seconds)",
                what()
            ))
        }
    };
    let run = |key: &'static str| move || format!("`{key}`");
    check(&run("wall_seconds"), report.wall_seconds)?;
    check(&run("sample_interval"), report.sample_interval)?;
    check(&run("sampling_seconds"), report.sampling_seconds)?;
    check(&run("max_sampling_seconds"), report.max_sampling_seconds)?;
    check(
        &run("max_sample_gap_seconds"),
        report.max_sample_gap_seconds,
    )?;
    if let Some(at) = report.peak_rss_elapsed_seconds {
        check(&run("peak_rss_elapsed_seconds"), at)?;
    }
    for (index, stage) in report.stages.iter().enumerate() {
        for (key, value) in [
            ("start_seconds", stage.start_seconds),
            ("wall_seconds", stage.wall_seconds),
            ("min_wall_seconds", stage.min_wall_seconds),
            ("max_wall_seconds", stage.max_wall_seconds),
        ] {
            check(&|| format!("stage {index}'s `{key}`"), value)?;
        }
    }
    for (index, point) in report.timeline.iter().enumerate() {
        check(
            &|| format!("timeline point {index}'s `elapsed_seconds`"),
            point.elapsed_seconds,
        )?;
        check(
            &|| format!("timeline point {index}'s `end_seconds`"),
            point.end_seconds,
        )?;
    }
    for (index, span) in report.spans.iter().enumerate() {
        check(
            &|| format!("span {index}'s `start_seconds`"),
            span.start_seconds,
        )?;
        check(
            &|| format!("span {index}'s `wall_seconds`"),
            span.wall_seconds,
        )?;
    }
    // CPU seconds and cores (SPEC §12) are bounded like times: a hostile 1e308 would
    // print as 309 digits and overflow the sums of `merge`.
    let cpu = |what: &dyn Fn(&str) -> String, cpu_io: &stemmon::report::CpuIo| {
        for (key, value) in [
            ("cpu_user_seconds", cpu_io.cpu_user_seconds),
            ("cpu_system_seconds", cpu_io.cpu_system_seconds),
            ("cpu_cores", cpu_io.cpu_cores),
            ("cpu_thread_seconds", cpu_io.cpu_thread_seconds),
        ] {
            if let Some(value) = value {
                check(&|| what(key), value)?;
            }
        }
        Ok::<(), String>(())
    };
    cpu(&|key| format!("`{key}`"), &report.cpu_io)?;
    for (index, stage) in report.stages.iter().enumerate() {
        cpu(&|key| format!("stage {index}'s `{key}`"), &stage.cpu_io)?;
    }
    for (index, point) in report.timeline.iter().enumerate() {
        if let Some(cores) = point.cpu_cores {
            check(&|| format!("timeline point {index}'s `cpu_cores`"), cores)?;
        }
    }
    for (index, process) in report.processes.iter().enumerate() {
        let what = |key: &str| format!("process {index}'s `{key}`");
        check(&|| what("first_seconds"), process.first_seconds)?;
        check(&|| what("last_seconds"), process.last_seconds)?;
        if let Some(cpu) = process.cpu_seconds {
            check(&|| what("cpu_seconds"), cpu)?;
        }
    }
    let samples = report.recent_samples.iter().chain(&report.latest_sample);
    for (index, sample) in samples.enumerate() {
        check(
            &|| format!("sample {index}'s `elapsed_seconds`"),
            sample.elapsed_seconds,
        )?;
    }
    Ok(())
}

/// Reads the report at `path` and parses it, its tree unchecked.
fn read(path: &Path) -> Result<Report, Failure> {
    use std::io::Read;
    let shown = path.display();
    let cannot = |e: std::io::Error| Failure::input(format!("cannot read {shown}: {e}"));
    let mut text = Vec::new();
    fs::File::open(path)
        .and_then(|file| file.take(MAX_REPORT_BYTES + 1).read_to_end(&mut text))
        .map_err(cannot)?;
    if text.len() as u64 > MAX_REPORT_BYTES {
        return Err(Failure::input(format!(
            "{shown}: larger than {} MiB, not a stemmon report",
            MAX_REPORT_BYTES >> 20
        )));
    }
    parse(&text).map_err(|why| Failure::input(format!("{shown}: {why}")))
}

/// The keys every stemmon version since 0.1 wrote, each only noted as there or not (nothing is built).
#[derive(serde::Deserialize)]
struct Keys {
    pid: Option<serde::de::IgnoredAny>,
    wall_seconds: Option<serde::de::IgnoredAny>,
    sampler: Option<serde::de::IgnoredAny>,
    stages: Option<serde::de::IgnoredAny>,
}

/// Parses the bytes of a report file; the error says what is wrong with them.
///
/// Two passes, neither building a `serde_json::Value` (which costs ten times the file):
/// one that only notes which keys are there, then the report itself.
pub(crate) fn parse(text: &[u8]) -> Result<Report, String> {
    let Some(first) = text.iter().find(|b| !b.is_ascii_whitespace()) else {
        return Err("the file is empty, not a stemmon report".into());
    };
    let not_json = |e: serde_json::Error| {
        if e.is_eof() {
            format!(
                "the file is truncated (the JSON ends early at line {})",
                e.line()
            )
        } else {
            format!("not JSON ({e}), so not a stemmon report")
        }
    };
    if *first != b'{' {
        // Valid JSON of another kind, or not JSON at all.
        return match serde_json::from_slice::<serde::de::IgnoredAny>(text) {
            Ok(_) => Err("not a stemmon report (the JSON is not an object)".into()),
            Err(e) => Err(not_json(e)),
        };
    }
    let keys: Keys = serde_json::from_slice(text).map_err(|e| {
        if e.is_data() {
            format!("not a stemmon report: {e}")
        } else {
            not_json(e)
        }
    })?;
    let missing: Vec<&str> = [
        ("pid", keys.pid.is_some()),
        ("wall_seconds", keys.wall_seconds.is_some()),
        ("sampler", keys.sampler.is_some()),
        ("stages", keys.stages.is_some()),
    ]
    .into_iter()
    .filter_map(|(key, there)| (!there).then_some(key))
    .collect();
    if !missing.is_empty() {
        return Err(format!(
            "not a stemmon report (no `{}` key)",
            missing.join("`, `")
        ));
    }
    serde_json::from_slice(text).map_err(|e| format!("not a stemmon report: {e}"))
}

/// Writes `bytes` to `path` with the runtime's writer (SPEC §4): atomically, and never
/// through a link or into a FIFO that another user planted at the name.
pub(crate) fn write_file(path: &Path, bytes: &[u8]) -> Result<(), Failure> {
    stemmon::__cli::Output::resolve(path)
        .and_then(|output| output.write(bytes, true))
        .map_err(|e| Failure::input(format!("cannot write {}: {e}", path.display())))
}

/// Refuses an output that is one of the inputs: a report is never overwritten by
/// something made from it.
pub(crate) fn not_an_input(output: &Path, inputs: &[&Path]) -> Result<(), Failure> {
    let Ok(output_real) = fs::canonicalize(output) else {
        return Ok(()); // Not there yet: it cannot be an input.
    };
    if inputs
        .iter()
        .any(|input| fs::canonicalize(input).is_ok_and(|real| real == output_real))
    {
        return Err(Failure::input(format!(
            "{} is an input: choose another output file",
            output.display()
        )));
    }
    Ok(())
}

/// Writes to `path`, or to standard output when there is none.
pub(crate) fn write_or_print(path: Option<&Path>, bytes: &[u8]) -> Result<(), Failure> {
    match path {
        Some(path) => write_file(path, bytes),
        None => {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            match out.write_all(bytes).and_then(|()| out.flush()) {
                // The reader went away (`| head`): what it wanted, it has.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
                written => written
                    .map_err(|e| Failure::input(format!("cannot write to standard output: {e}"))),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_bad_input_has_its_own_message() {
        assert!(parse(b"  \n").unwrap_err().contains("empty"));
        assert!(parse(b"{\"pid\": 1, \"wall_se")
            .unwrap_err()
            .contains("truncated"));
        assert!(parse(b"[1, 2]").unwrap_err().contains("not an object"));
        assert!(parse(b"{\"name\": \"x\"}")
            .unwrap_err()
            .contains("no `pid`"));
        assert!(parse(b"nonsense").unwrap_err().contains("not JSON"));
        let wrong_type = r#"{"pid": 1, "wall_seconds": "long", "sampler": "x", "stages": []}"#;
        assert!(parse(wrong_type.as_bytes())
            .unwrap_err()
            .contains("invalid type"));
    }

    #[test]
    fn a_minimal_report_reads() {
        let report =
            parse(br#"{"pid": 7, "wall_seconds": 1.5, "sampler": "linux-proc", "stages": []}"#)
                .unwrap();
        assert_eq!((report.pid, report.wall_seconds), (7, 1.5));
        assert!(report.timeline.is_empty());
    }
}
