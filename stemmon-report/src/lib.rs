//! The report that [stemmon](https://docs.rs/stemmon) writes: its types, the JSON keys
//! of `report.json`, its [`FORMAT_VERSION`], validated reading of a report that may come
//! from anyone ([`read`], [`read_file`]), and the text helpers that the runtime and the
//! `stemmon` command share ([`format_bytes`], [`escape`], [`check_label`]).
//!
//! Sizes are bytes, times are seconds, readings that were not taken are `null`.
//!
//! ```
//! let text = br#"{"format_version": "0.4", "pid": 42, "wall_seconds": 1.5,
//!                 "stages": [{"id": 0, "name": "fit", "path": "fit", "calls": 3}]}"#;
//! let checked = stemmon_report::read_checked(text)?;
//! assert_eq!(checked.report.stage("fit").unwrap().calls, 3);
//! assert_eq!(checked.tree.depth(0), 0);
//!
//! let newer = br#"{"format_version": "9.0", "pid": 42}"#;
//! let refused = stemmon_report::read(newer).unwrap_err();
//! assert!(refused.to_string().starts_with("report format 9.0 is newer than"));
//! # Ok::<(), stemmon_report::ReadError>(())
//! ```
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod bounds;
pub mod read;
mod report;
mod sections;
mod stage;
mod text;
mod tree;
pub mod version;

pub use bounds::violations as bound_violations;
pub use read::{check, read, read_checked, read_file, Checked, ReadError};
pub use report::Report;
pub use sections::{
    CgroupReport, HeapReport, HighWaterMarks, ProcessReport, SampleReport, Span, ThreadReport,
    TimelinePoint,
};
pub use stage::{CpuIo, HighWater, Peaks, StageHeap, StageReport};
pub use text::{check_label, check_label_name, check_label_value, escape, format_bytes, short};
pub use tree::StageTree;
pub use version::{Version, FORMAT_VERSION};
