//! The report that [stemmon](https://docs.rs/stemmon) writes: its types, the JSON keys
//! of `report.json`, its [`FORMAT_VERSION`], validated reading of a report that may come
//! from anyone ([`read()`], [`read_file`]), and the text helpers that the runtime and the
//! `stemmon` command share ([`format_bytes`], [`escape`], [`check_label`]), and the
//! table of every setting ([`settings`]), which the attribute macros check against too.
//!
//! Sizes are bytes, times are seconds, readings that were not taken are `null`.
//!
//! ```
//! let text = br#"{"format_version": "0.5", "pid": 42, "wall_seconds": 1.5,
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

#[cfg(feature = "report")]
mod bounds;
#[cfg(feature = "report")]
pub mod fields;
#[cfg(feature = "report")]
mod figures;
#[cfg(feature = "report")]
mod keyed;
#[cfg(feature = "report")]
pub mod read;
#[cfg(feature = "report")]
mod report;
#[cfg(feature = "report")]
mod sections;
pub mod settings;
#[cfg(feature = "report")]
mod stage;
mod text;
#[cfg(feature = "report")]
mod tree;
pub mod version;

#[cfg(feature = "report")]
pub use bounds::violations as bound_violations;
#[cfg(feature = "report")]
pub use fields::{Field, FIELDS};
#[cfg(feature = "report")]
pub use figures::Figures;
#[cfg(feature = "report")]
pub use read::{check, read, read_checked, read_file, Checked, ReadError};
#[cfg(feature = "report")]
pub use report::Report;
#[cfg(feature = "report")]
pub use sections::{
    CgroupReport, HeapReport, HighWaterMarks, ProcessReport, SampleReport, Span, ThreadReport,
    TimelinePoint,
};
pub use settings::{Setting, SETTINGS};
#[cfg(feature = "report")]
pub use stage::{CpuIo, HighWater, Peaks, StageHeap, StageReport};
pub use text::{check_label, check_label_name, check_label_value, escape, format_bytes, short};
#[cfg(feature = "report")]
pub use tree::StageTree;
pub use version::{Version, FORMAT_VERSION};
