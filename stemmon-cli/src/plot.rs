//! `stemmon plot`.
use crate::Failure;
use std::path::PathBuf;
/// Draws memory over time.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The report.
    report: PathBuf,
}
pub(crate) fn plot(_args: &Args) -> Result<(), Failure> {
    Err(Failure::input("todo"))
}
