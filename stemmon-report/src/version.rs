//! The report's `format_version`: `"MAJOR.MINOR"`. A new key bumps MINOR, which every
//! reader of the same MAJOR reads (the key it does not know is left out); a renamed or
//! removed key bumps MAJOR, which older readers refuse.
//!
//! A report without `format_version` was written by stemmon 0.1 to 0.3, which did not
//! write one. It is read as such when it holds the keys every one of those versions
//! wrote (`pid`, `wall_seconds`, `sampler`, `stages`); the keys a version lacked read
//! as their defaults (`null`, 0, empty).

use std::fmt;

/// The format this crate writes and reads: `"0.5"`.
pub const FORMAT_VERSION: &str = "0.5";

/// The MAJOR of [`FORMAT_VERSION`]: reports of a higher one are refused.
pub const FORMAT_MAJOR: u32 = 0;

/// A report's format, as its `format_version` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    /// Bumped by a renamed or removed key.
    pub major: u32,
    /// Bumped by a new key.
    pub minor: u32,
}

impl Version {
    /// `"MAJOR.MINOR"` parsed, `None` for anything else.
    pub fn parse(text: &str) -> Option<Version> {
        let (major, minor) = text.split_once('.')?;
        let number = |part: &str| {
            (!part.is_empty() && part.len() <= 9 && part.bytes().all(|b| b.is_ascii_digit()))
                .then(|| part.parse().ok())
                .flatten()
        };
        Some(Version {
            major: number(major)?,
            minor: number(minor)?,
        })
    }

    /// Whether this crate reads reports of this version: those of its own MAJOR.
    pub fn is_readable(&self) -> bool {
        self.major.cmp(&FORMAT_MAJOR).is_le()
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_and_a_newer_major_is_not_readable() {
        let own = Version::parse(FORMAT_VERSION).unwrap();
        assert_eq!(own.major, FORMAT_MAJOR);
        assert!(own.is_readable());
        assert!(Version::parse("0.9").unwrap().is_readable());
        assert!(!Version::parse("9.0").unwrap().is_readable());
        for bad in [
            "",
            "0",
            "0.",
            ".4",
            "0.4.1",
            "a.b",
            "-1.0",
            "1e3.0",
            "0.4 ",
            "99999999999.0",
        ] {
            assert_eq!(Version::parse(bad), None, "{bad:?}");
        }
        assert_eq!(Version::parse("1.12").unwrap().to_string(), "1.12");
    }
}
