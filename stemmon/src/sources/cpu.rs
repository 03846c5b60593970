//! CPU and I/O of the process tree (the book's `cpu-io.md`): a measurement of counters.
//!
//! The tree's counters (user and system time, storage bytes read and written, major
//! faults) are one cumulative figure, raised at every fresh boundary reading (this
//! process's `RUSAGE_SELF`, its reaped children's `RUSAGE_CHILDREN`, the live
//! descendants as last sampled, those found exited left out) and at every full sample
//! (every live process's `stat` and `io` read anew). Each counter only rises: a
//! descendant that exited and is not reaped yet leaves the live sum before its figures
//! reach `RUSAGE_CHILDREN`, and the dip this would make is held until they do.
//!
//! The engine differences the counters per call, so a stage's figures are the tree's
//! growth while each of its calls was open, summed over calls: exact to the boundary
//! reuse window (a reused reading is up to 1 ms old) and, for what live descendants
//! did, to the sampling interval (their `stat` is read at samples; what they did since
//! shows at the next sample or when they are reaped). Two calls of one stage open at
//! once on two threads each count the whole tree's growth, as `wall_seconds` counts
//! each call's time: `cpu_cores` (their sum over the sum of the wall times) is still
//! the cores the tree used while the stage was open.
//!
//! The thread's own CPU (`RUSAGE_THREAD`) is this measurement's thread clock: the
//! engine reads it at a call's entry when the thread's last reading is older than the
//! reuse window, and at every exit that takes the shared state, so a call's
//! `cpu_thread_seconds` is exact to 1 ms of its thread's CPU. An async call counts the
//! CPU of the thread that opened it between its open and its close (other work of that
//! thread meanwhile included), and, closed on another thread, up to its thread's last
//! reading.

use crate::memory::{TreeReading, Usage};
use crate::sources::{AtBoundary, Growth, Measure, Measurement, Reading};
use stemmon_report::fields::measures::cpu::MEASURE;

/// A timeline point's cores are measured over at least this long (seconds): a
/// descendant's CPU comes in 10 ms clock ticks, so one tick moves a point by at most
/// 0.1 core.
const MIN_CORES_SECONDS: f64 = 0.1;

/// Why a report has no figures where none was read.
const NOT_READ: &str =
    "CPU and I/O were not read (they are read from getrusage and /proc, on Linux)";

/// The measurement: the engine holds it (it has counters), so that its boundary and
/// sample hooks share what the last sample read.
pub(crate) fn open() -> Box<dyn Measurement> {
    Box::new(Cpu {
        changed: true,
        ..Cpu::default()
    })
}

/// The tree's counters as composed here (see the module docs).
#[derive(Debug, Default)]
struct Cpu {
    /// The first figure given: the run's figures count from it.
    start: Option<Usage>,
    /// The newest figure given (each counter the highest yet).
    now: Option<Usage>,
    /// `now` as the engine's counters.
    counters: [u64; 5],
    /// The root's own counters, where it is not this process.
    root: Usage,
    /// The live descendants' counters as last sampled, the exited ones left out.
    live: Usage,
    /// Seconds and CPU microseconds at the last sample: the timeline's `cpu_cores`.
    last_sample: Option<(f64, u64)>,
    /// The timeline's cores at the last sample.
    series: [Option<f64>; 1],
    /// Why some process's I/O could not be read (the first reason).
    io_missing: Option<String>,
    /// The section changed since the engine last took it.
    changed: bool,
}

impl Cpu {
    /// Takes in the figure `raw` and returns the counters now.
    fn give(&mut self, raw: Usage) -> &[u64] {
        let now = self.now.map_or(raw, |now| now.max(raw));
        self.start.get_or_insert(raw);
        self.changed |= self.now.is_none();
        self.now = Some(now);
        self.counters = [
            now.user_micros,
            now.system_micros,
            now.read_bytes,
            now.write_bytes,
            now.major_faults,
        ];
        &self.counters
    }
}

impl Measurement for Cpu {
    fn declared(&self) -> &'static Measure {
        &MEASURE
    }

    fn active(&self) -> bool {
        true
    }

    fn counters(&self) -> usize {
        self.counters.len()
    }

    fn thread_clock(&self) -> Option<fn() -> Option<u64>> {
        Some(crate::sys::thread_cpu_micros)
    }

    fn boundary(&mut self, at: &AtBoundary<'_>) -> Option<&[u64]> {
        let own = at.reading.usage?;
        if at.changed {
            self.live = at
                .descendants
                .iter()
                .enumerate()
                .filter(|(index, _)| !at.gone.get(*index).copied().unwrap_or(false))
                .fold(Usage::ZERO, |sum, (_, d)| sum.plus(d.usage));
        }
        Some(self.give(own.plus(self.root).plus(self.live)))
    }

    fn sample(&mut self, reading: &TreeReading, elapsed: f64) -> Reading<'_> {
        if self.io_missing.is_none() && reading.io_missing.is_some() {
            self.io_missing.clone_from(&reading.io_missing);
            self.changed = true;
        }
        let Some(own) = reading.own_usage else {
            return Reading::default();
        };
        self.root = reading.root_usage;
        self.live = reading
            .descendants
            .iter()
            .fold(Usage::ZERO, |sum, d| sum.plus(d.usage));
        // A root that is not this process (`stemmon run`'s command, and the tree under
        // it) started with the run: all it did is the run's, even where it was done
        // (or the command ended) before the first sample.
        if self.start.is_none() && reading.root_usage != Usage::ZERO {
            self.start = Some(own);
        }
        self.give(own.plus(self.root).plus(self.live));
        let cpu = self.now.unwrap_or_default().cpu_micros();
        self.series = [None];
        match self.last_sample {
            None => self.last_sample = Some((elapsed, cpu)),
            // Over a few tens of milliseconds (fast sampling, the sample at `finish`)
            // one 10 ms tick would read as a third of a core or more. The interval is
            // carried into the next point.
            Some((at, _)) if elapsed - at < MIN_CORES_SECONDS => {}
            Some((at, before)) => {
                self.last_sample = Some((elapsed, cpu));
                self.series = [Some(
                    cpu.saturating_sub(before) as f64 / 1e6 / (elapsed - at),
                )];
            }
        }
        Reading {
            series: &self.series,
            counters: &self.counters,
            ..Reading::default()
        }
    }

    fn figures(&self, growth: &Growth<'_>, wall_seconds: f64, out: &mut Vec<Option<f64>>) {
        out.clear();
        out.resize(MEASURE.fields.len(), None);
        if self.now.is_none() {
            return;
        }
        let counter = |index: usize| growth.counters.get(index).copied().unwrap_or(0);
        let user = counter(0) as f64 / 1e6;
        let system = counter(1) as f64 / 1e6;
        let io = self.io_missing.is_none();
        // In the order of the declaration's fields; `cpu_seconds` is computed from two.
        out.copy_from_slice(&[
            Some(user),
            Some(system),
            None,
            (wall_seconds > 0.0).then(|| (user + system) / wall_seconds),
            growth.thread_micros.map(|micros| micros as f64 / 1e6),
            io.then(|| counter(2) as f64),
            io.then(|| counter(3) as f64),
            Some(counter(4) as f64),
        ]);
    }

    fn run_figures(&self, wall_seconds: f64, out: &mut Vec<Option<f64>>) {
        let growth = self
            .now
            .unwrap_or_default()
            .minus(self.start.unwrap_or_default());
        let counters = [
            growth.user_micros,
            growth.system_micros,
            growth.read_bytes,
            growth.write_bytes,
            growth.major_faults,
        ];
        let growth = Growth {
            counters: &counters,
            // The threads' own figure belongs to stages: the run's is its tree's.
            thread_micros: None,
            ..Growth::default()
        };
        self.figures(&growth, wall_seconds, out);
    }

    fn section(&mut self) -> Option<serde_json::Value> {
        if !std::mem::replace(&mut self.changed, false) {
            return None;
        }
        let missing = match &self.now {
            None => Some(NOT_READ),
            Some(_) => self.io_missing.as_deref(),
        };
        Some(missing.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::{Descendant, SelfReading};

    fn usage(user_ms: u64, read: u64) -> Usage {
        Usage {
            user_micros: user_ms * 1_000,
            system_micros: 500_000,
            read_bytes: read,
            write_bytes: 2 * read,
            major_faults: 3,
        }
    }

    /// The figures of `growth` over `wall` seconds, by key.
    fn by_key(
        cpu: &dyn Measurement,
        growth: &[u64],
        thread: Option<u64>,
        wall: f64,
    ) -> Vec<(&'static str, Option<f64>)> {
        let growth = Growth {
            counters: growth,
            thread_micros: thread,
            ..Growth::default()
        };
        let mut out = Vec::new();
        cpu.figures(&growth, wall, &mut out);
        MEASURE.fields.iter().map(|f| f.key).zip(out).collect()
    }

    #[test]
    fn each_figure_is_its_own_fields_in_the_declarations_order() {
        let mut cpu = open();
        let reading = TreeReading {
            own_usage: Some(usage(1_000, 4096)),
            ..TreeReading::default()
        };
        let read = cpu.sample(&reading, 1.0);
        assert_eq!(read.counters, [1_000_000, 500_000, 4096, 8192, 3]);
        let figures = by_key(
            &*cpu,
            &[2_000_000, 500_000, 4096, 8192, 3],
            Some(250_000),
            5.0,
        );
        assert_eq!(
            figures,
            [
                ("cpu_user_seconds", Some(2.0)),
                ("cpu_system_seconds", Some(0.5)),
                ("cpu_seconds", None),
                ("cpu_cores", Some(0.5)),
                ("cpu_thread_seconds", Some(0.25)),
                ("io_read_bytes", Some(4096.0)),
                ("io_write_bytes", Some(8192.0)),
                ("major_faults", Some(3.0)),
            ]
        );
    }

    #[test]
    fn unreadable_io_leaves_the_io_figures_out_and_says_why() {
        let mut cpu = open();
        assert_eq!(cpu.section(), Some(NOT_READ.into()));
        let reading = TreeReading {
            own_usage: Some(usage(0, 0)),
            io_missing: Some("another user's io".to_owned()),
            ..TreeReading::default()
        };
        cpu.sample(&reading, 1.0);
        assert_eq!(cpu.section(), Some("another user's io".into()));
        assert_eq!(cpu.section(), None, "unchanged since");
        let figures = by_key(&*cpu, &[1, 1, 1, 1, 1], None, 1.0);
        let read = figures.iter().find(|(key, _)| *key == "io_read_bytes");
        assert_eq!(read, Some(&("io_read_bytes", None)));
        let thread = figures.iter().find(|(key, _)| *key == "cpu_thread_seconds");
        assert_eq!(thread, Some(&("cpu_thread_seconds", None)));
    }

    #[test]
    fn a_boundary_leaves_out_the_descendants_found_gone_and_no_counter_falls() {
        let mut cpu = open();
        let live = |pid, user_ms| Descendant {
            pid,
            usage: usage(user_ms, 0),
            ..Descendant::default()
        };
        let descendants = [live(7, 300), live(8, 100)];
        let reading = TreeReading {
            own_usage: Some(usage(0, 0)),
            descendants: descendants.to_vec(),
            ..TreeReading::default()
        };
        let sampled = cpu.sample(&reading, 1.0).counters[0];
        assert_eq!(sampled, 400_000);
        // 7 exited, not reaped yet: it leaves the live sum, and the sum holds.
        let own = SelfReading {
            usage: Some(usage(0, 0)),
            ..SelfReading::default()
        };
        let at = AtBoundary {
            reading: &own,
            descendants: &descendants,
            changed: true,
            gone: &[true, false],
        };
        assert_eq!(cpu.boundary(&at).unwrap()[0], 400_000);
        // Reaped with 350 ms in all: RUSAGE_CHILDREN has it.
        let reaped = SelfReading {
            usage: Some(usage(350, 0)),
            ..SelfReading::default()
        };
        let at = AtBoundary {
            reading: &reaped,
            ..at
        };
        assert_eq!(cpu.boundary(&at).unwrap()[0], 450_000);
    }

    #[test]
    fn the_cores_of_a_point_cover_at_least_a_tenth_of_a_second() {
        let mut cpu = open();
        let at = |user_ms| TreeReading {
            own_usage: Some(usage(user_ms, 0)),
            ..TreeReading::default()
        };
        assert_eq!(cpu.sample(&at(0), 1.0).series, [None]);
        assert_eq!(cpu.sample(&at(100), 1.05).series, [None]);
        let cores = cpu.sample(&at(300), 1.5).series[0].unwrap();
        assert!((cores - 0.6).abs() < 1e-9, "{cores}");
    }
}
