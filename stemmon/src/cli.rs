//! What the `stemmon` command reuses from the runtime, so that each rule is written
//! once. Not a public API: it changes with the command.

pub use crate::output::Output;
