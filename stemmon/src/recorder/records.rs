//! The aggregated record of each stage path, and the index that finds a path's record
//! without scanning its siblings.

use std::borrow::Cow;
use std::collections::HashMap;

/// A stage's name: `'static` for `#[monitored]`, owned for names built at run time.
pub(crate) type StageName = Cow<'static, str>;

/// The aggregate of every call of one stage path, over every thread. It holds its name
/// and its parent's id, not its path: a path is built where it is needed, on the
/// sampler thread ([`Records::path`], and every path at once in a snapshot), so deep
/// nesting costs memory linear in depth, not quadratic.
#[derive(Debug)]
pub(crate) struct Record {
    pub(crate) name: StageName,
    /// Always an earlier record: ids grow in order of creation.
    pub(crate) parent: Option<u32>,
    pub(crate) calls: u64,
    pub(crate) completed: u64,
    pub(crate) errors: u64,
    /// Threads whose calls were merged in.
    pub(crate) threads: u32,
    pub(crate) start_seconds: f64,
    pub(crate) wall_seconds: f64,
    pub(crate) min_wall_seconds: f64,
    pub(crate) max_wall_seconds: f64,
    pub(crate) error: Option<String>,
    /// Whether the first completion was logged.
    pub(crate) logged: bool,
    /// What its frames counted in their threads' counters (the heap: the book's
    /// `heap.md`).
    pub(crate) slots: super::tally::SlotTally,
    /// The counters' growth over its completed calls.
    pub(crate) counted: super::tally::Tally,
    /// The measurement sources' figures, one slot per key (empty before its first sample).
    pub(crate) extra: Vec<Option<f64>>,
}

impl Record {
    /// Adds one completed call of `seconds`.
    pub(super) fn complete(&mut self, seconds: f64) {
        self.completed += 1;
        self.wall_seconds += seconds;
        self.min_wall_seconds = self.min_wall_seconds.min(seconds);
        self.max_wall_seconds = self.max_wall_seconds.max(seconds);
    }
}

/// Every record, in order of creation, and the `(parent, name) → id` index.
#[derive(Debug, Default)]
pub(crate) struct Records {
    pub(crate) list: Vec<Record>,
    index: HashMap<(Option<u32>, StageName), u32>,
}

impl Records {
    /// The id of `name` under `parent`, made if new (`start` is its first entry).
    pub(super) fn find_or_add(&mut self, parent: Option<u32>, name: &StageName, start: f64) -> u32 {
        if let Some(id) = self.index.get(&(parent, name.clone())) {
            return *id;
        }
        let id = self.list.len() as u32;
        self.list.push(Record {
            name: name.clone(),
            parent,
            calls: 0,
            completed: 0,
            errors: 0,
            threads: 0,
            start_seconds: start,
            wall_seconds: 0.0,
            min_wall_seconds: f64::INFINITY,
            max_wall_seconds: 0.0,
            error: None,
            logged: false,
            slots: Default::default(),
            counted: super::tally::Tally::ZERO,
            extra: Vec::new(),
        });
        self.index.insert((parent, name.clone()), id);
        id
    }

    pub(super) fn get_mut(&mut self, id: u32) -> &mut Record {
        &mut self.list[id as usize]
    }

    pub(super) fn get(&self, id: u32) -> &Record {
        &self.list[id as usize]
    }

    /// The path of record `id` (`"fit/inner"`), built from its ancestors' names: for
    /// one path now and then (log lines, the sampled stage); a snapshot builds them all
    /// with [`extend_path`].
    pub(super) fn path(&self, id: u32) -> String {
        let mut chain = Vec::new();
        let mut next = Some(id);
        let mut len = 0;
        while let Some(id) = next {
            let record = self.get(id);
            len += record.name.len() + 1;
            chain.push(id);
            next = record.parent;
        }
        let mut path = String::with_capacity(len);
        for &id in chain.iter().rev() {
            if !path.is_empty() {
                path.push('/');
            }
            path.push_str(&self.get(id).name);
        }
        path
    }
}

/// The path of a stage named `name` under the stage at `parent` (`None`: top level).
pub(super) fn extend_path(parent: Option<&str>, name: &str) -> String {
    match parent {
        Some(parent) => {
            let mut path = String::with_capacity(parent.len() + 1 + name.len());
            path.push_str(parent);
            path.push('/');
            path.push_str(name);
            path
        }
        None => name.to_owned(),
    }
}

/// Shortens a `std::any::type_name` to the last segment of every path in it:
/// `alloc::boxed::Box<dyn core::error::Error>` becomes `Box<dyn Error>`.
pub(crate) fn short_type_name(full: &str) -> String {
    let mut out = String::with_capacity(full.len());
    let mut segment_start = 0;
    for (i, c) in full.char_indices() {
        if c == ':' {
            segment_start = i + 1;
        } else if !(c.is_alphanumeric() || c == '_') {
            out.push_str(&full[segment_start..i]);
            out.push(c);
            segment_start = i + c.len_utf8();
        }
    }
    out.push_str(&full[segment_start..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_type_names() {
        assert_eq!(short_type_name("std::io::error::Error"), "Error");
        assert_eq!(
            short_type_name("alloc::boxed::Box<dyn core::error::Error + core::marker::Send>"),
            "Box<dyn Error + Send>"
        );
        assert_eq!(short_type_name("my_crate::PredictError"), "PredictError");
        assert_eq!(short_type_name("(u8, a::B)"), "(u8, B)");
    }

    #[test]
    fn a_path_is_found_again_and_named_from_its_parent() {
        let mut records = Records::default();
        let fit = records.find_or_add(None, &Cow::Borrowed("fit"), 0.0);
        let inner = records.find_or_add(Some(fit), &Cow::Owned("inner".into()), 0.1);
        assert_eq!(
            records.find_or_add(Some(fit), &Cow::Borrowed("inner"), 0.2),
            inner
        );
        assert_eq!(records.find_or_add(None, &Cow::Borrowed("fit"), 0.2), fit);
        assert_eq!(records.path(inner), "fit/inner");
        assert_eq!(records.path(fit), "fit");
        assert_eq!(records.get(inner).start_seconds, 0.1);
        assert_eq!(records.list.len(), 2);
    }

    #[test]
    fn a_deep_path_is_built_from_the_parents_and_no_record_holds_one() {
        let mut records = Records::default();
        let mut parent = None;
        for depth in 0..2_000 {
            let name = StageName::Owned(format!("s{depth}"));
            parent = Some(records.find_or_add(parent, &name, 0.0));
        }
        let deepest = parent.unwrap();
        let path = records.path(deepest);
        assert_eq!(path.matches('/').count(), 1_999);
        assert!(path.starts_with("s0/s1/s2/") && path.ends_with("/s1998/s1999"));
        assert_eq!(records.path(2), "s0/s1/s2");
        assert_eq!(extend_path(Some("s0/s1"), "s2"), "s0/s1/s2");
        assert_eq!(extend_path(None, "s0"), "s0");
        // A record is its name and counters, whatever its depth.
        let names: usize = records.list.iter().map(|r| r.name.len()).sum();
        assert!(names < 2_000 * 6, "{names}");
    }
}
