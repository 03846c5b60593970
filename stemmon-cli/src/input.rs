//! Reading a report file, with one clear message per way it can be wrong.
//!
//! Every key of [`Report`] has a default (0.1 reports lack the 0.2 keys), so any JSON
//! object would deserialize; a file is taken as a report only if it holds the keys every
//! version has written.

use crate::Failure;
use std::fs;
use std::path::Path;
use stemmon::Report;

/// Keys written by every stemmon version since 0.1.
const REQUIRED_KEYS: [&str; 4] = ["pid", "wall_seconds", "sampler", "stages"];

/// The largest report read: a 100 000-stage report is far smaller; a 1 GiB or endless
/// file (`/dev/zero`, a FIFO that never closes) is refused here, not held in memory.
const MAX_REPORT_BYTES: u64 = 256 << 20;

/// Reads and checks the report at `path`.
pub(crate) fn load(path: &Path) -> Result<Report, Failure> {
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

/// Parses the bytes of a report file; the error says what is wrong with them.
pub(crate) fn parse(text: &[u8]) -> Result<Report, String> {
    if text.iter().all(u8::is_ascii_whitespace) {
        return Err("the file is empty, not a stemmon report".into());
    }
    let value: serde_json::Value = serde_json::from_slice(text).map_err(|e| {
        if e.is_eof() {
            format!(
                "the file is truncated (the JSON ends early at line {})",
                e.line()
            )
        } else {
            format!("not JSON ({e}), so not a stemmon report")
        }
    })?;
    let Some(object) = value.as_object() else {
        return Err("not a stemmon report (the JSON is not an object)".into());
    };
    let missing: Vec<&str> = REQUIRED_KEYS
        .into_iter()
        .filter(|key| !object.contains_key(*key))
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "not a stemmon report (no `{}` key)",
            missing.join("`, `")
        ));
    }
    serde_json::from_value(value).map_err(|e| format!("not a stemmon report: {e}"))
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
