//! How the GPU is to be read, decided at start on the program's thread, where nothing
//! of the driver may run: whether at all (`STEMMON_GPU`, the builder), which library
//! (only one that is safe to load), and in which process.

use super::source::Plan;
use std::path::Path;

/// How a monitor of `config` reads the GPU, decided on the program's thread without
/// loading anything: off (`.gpu(false)`, `STEMMON_GPU=0`, or a library that is not
/// safe to load), in this process, or in a helper process.
pub(crate) fn plan(config: &crate::config::Config) -> Plan {
    use stemmon_report::settings::GPU;
    let (on, warnings) = crate::env::flag_override(&GPU, &crate::env::var);
    for warning in &warnings {
        crate::warn::warn(warning);
    }
    if !on.unwrap_or(config.gpu) {
        let by = if on == Some(false) {
            "STEMMON_GPU=0"
        } else {
            "the monitor's gpu(false)"
        };
        return Plan::Off(format!("the GPU is not read: turned off by {by}"));
    }
    let library = crate::env::var("STEMMON_NVML_LIBRARY")
        .filter(|path| !path.is_empty())
        .map(std::path::PathBuf::from);
    if let Some(path) = &library {
        if let Err(why) = trusted_library(path) {
            let message = format!(
                "not loading STEMMON_NVML_LIBRARY={}: {why}; the GPU is not read",
                stemmon_report::escape(&path.to_string_lossy())
            );
            crate::warn::warn(&message);
            return Plan::Off(message);
        }
    }
    match &config.gpu_helper {
        Some(command) => Plan::Helper(library, command.clone()),
        None => Plan::InProcess(library),
    }
}

/// Whether a library named by path may be loaded into this process: as for any file
/// stemmon follows on a shared machine, it (and a link on the way to it) belongs to
/// this user or to root, and neither group nor others may write it.
fn trusted_library(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    let check = |meta: &std::fs::Metadata, what: &str| {
        if meta.uid() != 0 && meta.uid() != me {
            return Err(format!(
                "{what} belongs to uid {}, neither you nor root",
                meta.uid()
            ));
        }
        if !meta.file_type().is_symlink() && meta.mode() & 0o022 != 0 {
            return Err(format!(
                "{what} may be written by its group or by others (mode {:o})",
                meta.mode() & 0o7777
            ));
        }
        Ok(())
    };
    match std::fs::symlink_metadata(path) {
        // A missing file is for NVML to say (no driver).
        Err(_) => return Ok(()),
        Ok(meta) if meta.file_type().is_symlink() => check(&meta, "the link")?,
        Ok(_) => {}
    }
    match std::fs::metadata(path) {
        Ok(meta) => check(&meta, "the file"),
        Err(_) => Ok(()),
    }
}
