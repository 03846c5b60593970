//! `stemmon merge`.
use crate::Failure;
use std::path::PathBuf;
/// Merges reports.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The reports.
    reports: Vec<PathBuf>,
}
pub(crate) fn merge(_args: &Args) -> Result<(), Failure> {
    Err(Failure::input("todo"))
}
