//! Reading a report, with one clear message per way it can be wrong. Every report a
//! reader takes may come from anyone (a CI artifact of an untrusted pull request): the
//! work and the memory are linear in its size, and it is refused past a size cap.
//!
//! The checks, in order: the JSON is an object; its `format_version` is one this crate
//! reads (a newer MAJOR is refused, naming it); without one, it holds the keys every
//! report of 0.1 to 0.3 wrote (see [`version`](crate::version)); its stage tree is
//! whole (ids, parents, no cycle, no path twice); its times are finite and within
//! 0 to [`MAX_SECONDS`]; its bounds hold (a bound is never below the sampled figure it
//! bounds, an exact peak never below the sampled one).

use crate::tree::StageTree;
use crate::version::{Version, FORMAT_VERSION};
use crate::Report;
use std::fmt;
use std::path::Path;

/// The largest report read: a 100 000-stage report is far smaller; a 1 GiB or endless
/// file (`/dev/zero`, a FIFO that never closes) is refused, not held in memory.
pub const MAX_REPORT_BYTES: u64 = 256 << 20;

/// The longest time a report may hold, in seconds (about 31 years): past it a figure is
/// hostile, and sums of such figures would overflow to infinity.
pub const MAX_SECONDS: f64 = 1e9;

/// Why a report could not be read: one line, the file's name left to the caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadError(String);

impl ReadError {
    fn new(message: impl Into<String>) -> ReadError {
        ReadError(message.into())
    }

    /// The message, one line.
    pub fn message(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ReadError {}

/// A report read and checked, with its stage tree.
#[derive(Debug)]
pub struct Checked {
    /// The report.
    pub report: Report,
    /// Its stage tree, checked.
    pub tree: StageTree,
}

/// Reads and checks the bytes of a report file (see the module docs).
pub fn read(bytes: &[u8]) -> Result<Report, ReadError> {
    read_checked(bytes).map(|checked| checked.report)
}

/// [`read`], keeping the checked stage tree.
pub fn read_checked(bytes: &[u8]) -> Result<Checked, ReadError> {
    if bytes.len() as u64 > MAX_REPORT_BYTES {
        return Err(too_large());
    }
    let report = parse(&mut Bytes(bytes), record_budget(bytes.len()))?;
    check(report)
}

/// The largest report file parsed from its text in memory; a larger one is parsed as it
/// is read (about twice as slow), so that a reader holds its records and never its text
/// beside them: a 250 MB report of 240 000 stages reads within twice its size.
const HELD_BYTES: u64 = 16 << 20;

/// What a report is parsed from, once a pass: its bytes in memory, or its file, read
/// again from the start for each pass.
trait Input {
    /// Its first byte that is not whitespace, if any.
    fn first(&mut self) -> Option<u8>;
    /// One pass over the whole input, parsing a `T`.
    fn pass<T: serde::de::DeserializeOwned>(&mut self) -> Result<T, serde_json::Error>;
}

struct Bytes<'a>(&'a [u8]);

impl Input for Bytes<'_> {
    fn first(&mut self) -> Option<u8> {
        self.0.iter().copied().find(|b| !b.is_ascii_whitespace())
    }

    fn pass<T: serde::de::DeserializeOwned>(&mut self) -> Result<T, serde_json::Error> {
        serde_json::from_slice(self.0)
    }
}

/// A report file, parsed as it is read: its text is never held whole, so what a reader
/// holds is the report's records alone (a report of 500 000 stages of a dozen keys each
/// costs more in records than in text, and the two together more than twice the file).
struct FileInput(std::fs::File);

impl FileInput {
    /// The file from its start, through a buffer, at most [`MAX_REPORT_BYTES`] and one
    /// more (a file that grows past the cap while it is read ends early, and is refused).
    fn reader(&mut self) -> std::io::Result<impl std::io::Read + '_> {
        use std::io::{Read, Seek};
        self.0.rewind()?;
        Ok(std::io::BufReader::with_capacity(
            256 << 10,
            (&self.0).take(MAX_REPORT_BYTES + 1),
        ))
    }
}

impl Input for FileInput {
    fn first(&mut self) -> Option<u8> {
        use std::io::Read;
        let mut reader = self.reader().ok()?;
        let mut byte = [0u8];
        loop {
            match reader.read(&mut byte) {
                Ok(1) if byte[0].is_ascii_whitespace() => continue,
                Ok(1) => return Some(byte[0]),
                _ => return None,
            }
        }
    }

    fn pass<T: serde::de::DeserializeOwned>(&mut self) -> Result<T, serde_json::Error> {
        let reader = self.reader().map_err(serde_json::Error::io)?;
        serde_json::from_reader(reader)
    }
}

/// The error for a report past [`MAX_REPORT_BYTES`].
fn too_large() -> ReadError {
    ReadError::new(format!(
        "larger than {} MiB, not a stemmon report",
        MAX_REPORT_BYTES >> 20
    ))
}

/// Reads and checks the report file at `path`, reading at most [`MAX_REPORT_BYTES`]
/// (one more to tell a larger one). The error names the file.
///
/// Only a regular file is read: a FIFO, a device or a socket is refused at once, without
/// waiting in `open` for a writer that may never come (it is opened non-blocking, and
/// what was opened is checked before a byte is read).
pub fn read_file(path: &Path) -> Result<Checked, ReadError> {
    let shown = path.display();
    let file = open_regular(path).map_err(|why| ReadError::new(format!("{shown}: {why}")))?;
    // Past the cap by its size: refused before a byte is read.
    if file.metadata().is_ok_and(|m| m.len() > MAX_REPORT_BYTES) {
        return Err(ReadError::new(format!("{shown}: {}", too_large())));
    }
    let len = file
        .metadata()
        .map_err(|e| ReadError::new(format!("cannot read {shown}: {e}")))?
        .len();
    let checked = if len <= HELD_BYTES {
        use std::io::Read;
        let mut text = Vec::new();
        file.take(MAX_REPORT_BYTES + 1)
            .read_to_end(&mut text)
            .map_err(|e| ReadError::new(format!("cannot read {shown}: {e}")))?;
        read_checked(&text)
    } else {
        parse(&mut FileInput(file), record_budget(len as usize)).and_then(check)
    };
    checked.map_err(|why| ReadError::new(format!("{shown}: {why}")))
}

/// Opens `path` for reading if it is a regular file: the kind of file otherwise.
fn open_regular(path: &Path) -> Result<std::fs::File, String> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // A FIFO opens at once, writer or not; a regular file reads as it would anyway.
        options.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
    }
    let kind = |metadata: &std::fs::Metadata| not_regular(&metadata.file_type());
    let file = options.open(path).map_err(|e| {
        // A socket cannot be opened at all: name it rather than the errno.
        match std::fs::metadata(path).ok().as_ref().and_then(kind) {
            Some(kind) => format!("{kind}, not a regular file: not a stemmon report"),
            None => format!("cannot read it: {e}"),
        }
    })?;
    let metadata = file
        .metadata()
        .map_err(|e| format!("cannot read it: {e}"))?;
    match kind(&metadata) {
        Some(kind) => Err(format!("{kind}, not a regular file: not a stemmon report")),
        None => Ok(file),
    }
}

/// What a file that is not a regular one is, `None` for a regular file.
fn not_regular(kind: &std::fs::FileType) -> Option<&'static str> {
    if kind.is_file() {
        return None;
    }
    if kind.is_dir() {
        return Some("a directory");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return Some("a FIFO");
        }
        if kind.is_socket() {
            return Some("a socket");
        }
        if kind.is_char_device() || kind.is_block_device() {
            return Some("a device");
        }
    }
    Some("not a file")
}

/// Checks a report already parsed: its tree, its times and its bounds.
pub fn check(report: Report) -> Result<Checked, ReadError> {
    let tree = StageTree::of(&report).map_err(ReadError::new)?;
    check_times(&report).map_err(ReadError::new)?;
    if let Some(broken) = crate::bounds::violations(&report).into_iter().next() {
        return Err(ReadError::new(format!(
            "{broken}: a bound below the figure it bounds, not a report stemmon wrote"
        )));
    }
    Ok(Checked { report, tree })
}

/// Every time in `report` is a number of seconds from 0 to [`MAX_SECONDS`].
fn check_times(report: &Report) -> Result<(), String> {
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
    // CPU seconds and cores (the book's `cpu-io.md`) are bounded like times: a hostile 1e308 would
    // print as 309 digits and overflow the sums of `merge`.
    let cpu = |what: &dyn Fn(&str) -> String, cpu_io: &crate::CpuIo| {
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

/// The keys every stemmon version since 0.1 wrote, and the version, each only noted as
/// there or not (nothing is built; every other key is skipped as it is parsed).
#[derive(serde::Deserialize)]
struct Keys {
    format_version: Option<VersionText>,
    pid: Option<serde::de::IgnoredAny>,
    wall_seconds: Option<serde::de::IgnoredAny>,
    sampler: Option<serde::de::IgnoredAny>,
    stages: Option<serde::de::IgnoredAny>,
}

/// The longest `format_version` read: `"MAJOR.MINOR"` of nine digits each fits.
pub const MAX_VERSION_BYTES: usize = 32;

/// A `format_version` as found, never copied past [`MAX_VERSION_BYTES`].
enum VersionText {
    /// A string short enough to be a version.
    Short(String),
    /// A string of this many bytes.
    Long(usize),
    /// Not a string.
    Other,
}

impl<'de> serde::Deserialize<'de> for VersionText {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::{IgnoredAny, MapAccess, SeqAccess};
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = VersionText;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a version")
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<VersionText, E> {
                Ok(if text.len() > MAX_VERSION_BYTES {
                    VersionText::Long(text.len())
                } else {
                    VersionText::Short(text.to_owned())
                })
            }
            fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<VersionText, E> {
                Ok(VersionText::Other)
            }
            fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<VersionText, E> {
                Ok(VersionText::Other)
            }
            fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<VersionText, E> {
                Ok(VersionText::Other)
            }
            fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<VersionText, E> {
                Ok(VersionText::Other)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<VersionText, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(VersionText::Other)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<VersionText, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(VersionText::Other)
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// Parses the bytes of a report file; the error says what is wrong with them.
///
/// Two passes, neither building a `serde_json::Value` (which costs ten times the file)
/// nor keeping a key it does not know: one that only notes which keys are there, then
/// the report itself. Memory stays within the file's size plus the report's own.
fn parse(text: &mut impl Input, budget: u64) -> Result<Report, ReadError> {
    let Some(first) = text.first() else {
        return Err(ReadError::new("the file is empty, not a stemmon report"));
    };
    let not_json = |e: serde_json::Error| {
        ReadError::new(if e.is_eof() {
            format!(
                "the file is truncated (the JSON ends early at line {})",
                e.line()
            )
        } else {
            format!("not JSON ({e}), so not a stemmon report")
        })
    };
    if first != b'{' {
        // Valid JSON of another kind, or not JSON at all.
        return match text.pass::<serde::de::IgnoredAny>() {
            Ok(_) => Err(ReadError::new(
                "not a stemmon report (the JSON is not an object)",
            )),
            Err(e) => Err(not_json(e)),
        };
    }
    let keys: Keys = text.pass().map_err(|e| {
        if e.is_data() {
            ReadError::new(format!("not a stemmon report: {e}"))
        } else {
            not_json(e)
        }
    })?;
    match &keys.format_version {
        Some(VersionText::Short(text)) => {
            let shown = crate::text::escape(&crate::text::short(text)).into_owned();
            let version = Version::parse(text).ok_or_else(|| {
                ReadError::new(format!(
                    "its format_version `{shown}` is not MAJOR.MINOR, so not a stemmon report"
                ))
            })?;
            if !version.is_readable() {
                return Err(ReadError::new(format!(
                    "report format {version} is newer than this stemmon reads \
                     ({FORMAT_VERSION}); read it with the stemmon that wrote it, or a newer one"
                )));
            }
        }
        None => {
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
                return Err(ReadError::new(format!(
                    "not a stemmon report (no `{}` key)",
                    missing.join("`, `")
                )));
            }
        }
        Some(VersionText::Long(bytes)) => {
            return Err(ReadError::new(format!(
                "its format_version is {bytes} bytes long, not MAJOR.MINOR, so not a stemmon report"
            )))
        }
        Some(VersionText::Other) => {
            return Err(ReadError::new(
                "its format_version is not a string, so not a stemmon report",
            ))
        }
    }
    crate::keyed::with_budget(budget, || text.pass())
        .map_err(|e| ReadError::new(format!("not a stemmon report: {e}")))
}

/// The bytes the records of a report of `len` bytes may take in memory, counted at
/// each record's size: its size plus 32 MiB. A report stemmon wrote holds far less (a
/// stage is about 1.5 KiB of JSON for 552 bytes in memory, a timeline point about 300
/// for 160), and 100 000 stages of a dozen keys each still read; a file of tiny
/// records (`[{}, {}, ...]`: 3 bytes of JSON, hundreds in memory) is refused at that
/// cost instead of hundreds of times its size.
pub fn record_budget(len: usize) -> u64 {
    len as u64 + (32 << 20)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(text: &str) -> String {
        read(text.as_bytes()).unwrap_err().to_string()
    }

    #[test]
    fn each_kind_of_bad_input_has_its_own_message() {
        assert!(error("  \n").contains("empty"));
        assert!(error("{\"pid\": 1, \"wall_se").contains("truncated"));
        assert!(error("[1, 2]").contains("not an object"));
        assert!(error("{\"name\": \"x\"}").contains("no `pid`"));
        assert!(error("nonsense").contains("not JSON"));
        let wrong_type = r#"{"pid": 1, "wall_seconds": "long", "sampler": "x", "stages": []}"#;
        assert!(error(wrong_type).contains("invalid type"));
    }

    #[test]
    fn a_minimal_report_of_any_version_reads() {
        let old =
            read(br#"{"pid": 7, "wall_seconds": 1.5, "sampler": "linux-proc", "stages": []}"#)
                .unwrap();
        assert_eq!(
            (old.pid, old.wall_seconds, old.format_version),
            (7, 1.5, None)
        );
        let new = read(br#"{"format_version": "0.4", "pid": 7}"#).unwrap();
        assert_eq!(new.format_version.as_deref(), Some("0.4"));
        // A newer minor adds keys: read, the new ones left out.
        let newer = read(br#"{"format_version": "0.9", "pid": 7, "new_key": [1]}"#).unwrap();
        assert_eq!(newer.pid, 7);
    }

    #[test]
    fn a_newer_major_is_refused_by_name() {
        let message = error(r#"{"format_version": "9.0", "pid": 7}"#);
        assert!(
            message.starts_with("report format 9.0 is newer than"),
            "{message}"
        );
        assert!(message.contains(FORMAT_VERSION), "{message}");
        assert!(error(r#"{"format_version": "nine", "pid": 7}"#).contains("not MAJOR.MINOR"));
        assert!(error(r#"{"format_version": 9, "pid": 7}"#).contains("not a string"));
        // A hostile version string is quoted escaped, and a long one not at all.
        let evil = r#"{"format_version": "0.\u001b\u202e", "pid": 7}"#;
        let message = error(evil);
        assert!(message.contains("not MAJOR.MINOR"), "{message}");
        assert!(
            !message.contains('\u{1b}') && !message.contains('\u{202e}'),
            "{message}"
        );
        let long = format!(r#"{{"format_version": "{}", "pid": 7}}"#, "x".repeat(500));
        assert_eq!(
            error(&long),
            "its format_version is 500 bytes long, not MAJOR.MINOR, so not a stemmon report"
        );
        assert!(error(r#"{"format_version": [1], "pid": 7}"#).contains("not a string"));
    }

    #[test]
    fn a_bound_below_its_sampled_figure_is_refused() {
        let text = r#"{"format_version": "0.4", "peak_tree_rss_bytes": 200,
                       "peak_tree_rss_bound_bytes": 100}"#;
        assert!(error(text).contains("peak_tree_rss_bound_bytes 100 < peak_tree_rss_bytes 200"));
    }
}
