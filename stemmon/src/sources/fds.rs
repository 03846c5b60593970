//! Open file descriptors of the process tree, read at samples: each process's count
//! (one `stat` of its descriptor directory), summed over the tree. A process whose
//! count cannot be read (another user's, gone) leaves the tree's figure a floor, and
//! the `fds` section says how many were unread.

use crate::config::Config;
use crate::memory::TreeReading;
use crate::sources::{Measure, Measurement, Reading};
use std::time::{Duration, Instant};
use stemmon_report::fields::measures::fds::MEASURE;

/// The counts are read again once this old: a sample at 1 ms reads them at most every
/// tenth of a second (they change slowly, and each is a system call per process).
const EVERY: Duration = Duration::from_millis(100);

/// Makes the measurement: always on, as the tree's memory is.
pub(crate) fn open(_config: &Config) -> Option<Box<dyn Measurement>> {
    Some(Box::new(Fds::default()))
}

/// The tree's open descriptors.
#[derive(Debug, Default)]
struct Fds {
    /// When the counts were last read.
    read_at: Option<Instant>,
    figures: [Option<f64>; 1],
    series: [Option<f64>; 1],
    processes: Vec<(u32, f64)>,
    /// Processes whose count was unreadable at the last reading, and the most so far.
    unread: u32,
    most_unread: u32,
    /// Whether any count was read: without one, the figure is not measured here.
    read_any: bool,
    /// The section changed since the engine last took it.
    changed: bool,
    path: String,
}

impl Measurement for Fds {
    fn declared(&self) -> &'static Measure {
        &MEASURE
    }

    fn active(&self) -> bool {
        self.read_any
    }

    fn sample(&mut self, tree: &TreeReading) -> Reading<'_> {
        let due = self.read_at.is_none_or(|at| at.elapsed() >= EVERY);
        if due {
            self.read_at = Some(Instant::now());
            self.processes.clear();
            let (mut total, mut unread) = (0u64, 0u32);
            for process in tree.root_process.iter().chain(&tree.descendants) {
                match crate::sys::open_fds(process.pid, &mut self.path) {
                    Ok(count) => {
                        total += count;
                        self.processes.push((process.pid, count as f64));
                    }
                    Err(_) => unread += 1,
                }
            }
            let any = !self.processes.is_empty();
            self.changed |= any != self.read_any || unread > self.most_unread;
            self.read_any |= any;
            self.unread = unread;
            self.most_unread = self.most_unread.max(unread);
            let figure = any.then_some(total as f64);
            self.figures = [figure];
            self.series = [figure];
        }
        Reading {
            figures: &self.figures,
            series: &self.series,
            processes: &self.processes,
        }
    }

    fn section(&mut self) -> Option<serde_json::Value> {
        if !std::mem::replace(&mut self.changed, false) {
            return None;
        }
        let missing = if !self.read_any {
            Some("no process's open descriptors could be read here".to_owned())
        } else {
            (self.most_unread > 0).then(|| {
                format!(
                    "up to {} processes' descriptors could not be read (another user's, or \
                     gone): the tree's figure is a floor",
                    self.most_unread
                )
            })
        };
        Some(serde_json::json!({ "missing": missing }))
    }
}
