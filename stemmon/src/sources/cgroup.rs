//! The job's cgroup, a measurement of the core: the tree's reader reads it with the
//! tree at every sample (the charge, its peak since the previous sample, the anonymous
//! memory, the OOM kills since then), and this hands the figures to the engine as any
//! measurement does. Its fields are typed ones of the report (`high_water`, the
//! timeline's `cgroup_memory_bytes`, the `cgroup` section).

use crate::config::Config;
use crate::memory::TreeReading;
use crate::report::CgroupReport;
use crate::sources::{Measure, Measurement, Reading};
use std::fmt::Write as _;
use stemmon_report::fields::measures::cgroup::MEASURE;

/// Makes the measurement: always on, as the tree's memory is; a tree without a cgroup
/// leaves its figures `null`.
pub(crate) fn open(_config: &Config) -> Option<Box<dyn Measurement>> {
    Some(Box::new(Cgroup::default()))
}

/// The job's cgroup as the samples read it.
#[derive(Debug, Default)]
struct Cgroup {
    /// The peak charge, the anonymous memory, the kills.
    figures: [Option<f64>; 3],
    series: [Option<f64>; 1],
    /// The cgroup as last read, and whether it changed since the engine took it.
    last: Option<CgroupReport>,
    changed: bool,
    /// The log line of this sample's kills.
    note: String,
}

impl Measurement for Cgroup {
    fn declared(&self) -> &'static Measure {
        &MEASURE
    }

    fn active(&self) -> bool {
        true
    }

    fn sample(&mut self, tree: &TreeReading, _elapsed: f64) -> Reading<'_> {
        let number = |value: Option<u64>| value.map(|v| v as f64);
        self.figures = [
            number(tree.cgroup_peak),
            number(tree.cgroup_anon),
            number(tree.oom_kills),
        ];
        self.series = [number(tree.cgroup_peak)];
        if tree.cgroup.is_some() && self.last != tree.cgroup {
            self.last.clone_from(&tree.cgroup);
            self.changed = true;
        }
        self.note.clear();
        if let Some(kills) = tree.oom_kills.filter(|kills| *kills > 0) {
            let _ = write!(self.note, "OOM kill in the job's cgroup ({kills})");
        }
        Reading {
            figures: &self.figures,
            series: &self.series,
            processes: &[],
            note: Some(self.note.as_str()).filter(|note| !note.is_empty()),
            counters: &[],
        }
    }

    fn section(&mut self) -> Option<serde_json::Value> {
        if !std::mem::replace(&mut self.changed, false) {
            return None;
        }
        serde_json::to_value(self.last.as_ref()?).ok()
    }
}
