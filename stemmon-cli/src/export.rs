//! `stemmon export`.
use crate::Failure;
use std::path::Path;
pub(crate) fn chrome(_report: &Path, _out: Option<&Path>) -> Result<(), Failure> {
    Err(Failure::input("todo"))
}
