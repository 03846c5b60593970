//! Reading a report file, with one clear message per way it can be wrong: the checks
//! are `stemmon_report`'s (size, JSON, `format_version`, stage tree, times, bounds).
//! Writing a file goes through the runtime's one writer.

use crate::Failure;
use std::fs;
use std::path::Path;
pub(crate) use stemmon_report::Checked as Loaded;

/// Reads and checks the report at `path`.
pub(crate) fn load(path: &Path) -> Result<Loaded, Failure> {
    stemmon_report::read_file(path).map_err(|why| Failure::input(why.to_string()))
}

/// Writes `bytes` to `path` with the runtime's writer (the book's `security.md`): atomically, and never
/// through a link or into a FIFO that another user planted at the name.
pub(crate) fn write_file(path: &Path, bytes: &[u8]) -> Result<(), Failure> {
    stemmon::Output::resolve(path)
        .and_then(|output| output.write(bytes, true))
        .map_err(|e| Failure::input(format!("cannot write {}: {e}", path.display())))
}

/// Writes to `path` what `content` writes, as it writes it (never whole in memory),
/// with the runtime's writer, as [`write_file`] does: the file is replaced only once
/// `content` is done and every byte is written. `content` may be called again from the
/// start, and must write the same bytes each time.
pub(crate) fn write_file_with(
    path: &Path,
    content: impl FnMut(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> Result<(), Failure> {
    stemmon::Output::resolve(path)
        .and_then(|output| output.write_with(content, true))
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
