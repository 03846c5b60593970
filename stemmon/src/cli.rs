//! What the `stemmon` command reuses from the runtime, so that each rule is written
//! once: the one writer of every file, the byte figures, the escaping of text for a
//! terminal, the label check. Not a public API: it changes with the command.

pub use crate::identity::check_label;
pub use crate::log::{escape, format_bytes};
pub use crate::monitor::CommandExit;
pub use crate::output::Output;
