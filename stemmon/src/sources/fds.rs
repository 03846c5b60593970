//! Open file descriptors of the process tree, read at samples: each process's count
//! (one `stat` of its descriptor directory), summed over the tree. A process whose
//! count cannot be read (another user's, gone) leaves the tree's figure a floor, and
//! the `fds` section says how many were unread.

use crate::config::Config;
use crate::memory::TreeReading;
use crate::sources::{Measure, Measurement, Reading};
use std::time::{Duration, Instant};
use stemmon_report::fields::measures::fds::MEASURE;

/// The counts are read again once this old: a sample at 1 ms reads them at most five
/// times a second. They change slowly, and each is a system call per process: read every
/// tenth of a second, they were most of what the measurements added to a 10 ms sample
/// over a tree of 100 processes (2 to 5 %).
const EVERY: Duration = Duration::from_millis(200);

/// Makes the measurement: always on, as the tree's memory is. Whether this platform
/// gives the counts is known now, from this process's own (one `stat`), so that a
/// report has the figures (`null` until a sample reads them) or says why not, however
/// short the run.
pub(crate) fn open(_config: &Config) -> Option<Box<dyn Measurement>> {
    let probe = crate::sys::open_fds(std::process::id(), &mut String::new());
    Some(Box::new(Fds {
        platform: probe.as_ref().err().map(|e| format!("no open descriptors here: {e}")),
        changed: true,
        ..Fds::default()
    }))
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
    /// Why this platform gives no counts, found at start; `None` where it gives them.
    platform: Option<String>,
    /// Whether any count was read.
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
        self.platform.is_none()
    }

    fn sample(&mut self, tree: &TreeReading, _elapsed: f64) -> Reading<'_> {
        let due = self.active() && self.read_at.is_none_or(|at| at.elapsed() >= EVERY);
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
            self.changed |= (any && !self.read_any) || unread > self.most_unread;
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
            // A process's figure is the highest seen: only a new reading can raise it.
            processes: if due { &self.processes } else { &[] },
            note: None,
            counters: &[],
        }
    }

    fn section(&mut self) -> Option<serde_json::Value> {
        if !std::mem::replace(&mut self.changed, false) {
            return None;
        }
        let missing = if let Some(why) = &self.platform {
            Some(why.clone())
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
