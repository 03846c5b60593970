//! Full tree samples: taken on the sampler thread, they count toward every stage open
//! on any thread, close the intervals of the kernel's marks, and feed the report's
//! latest sample, recent samples and timeline.
//!
//! A sample at 1 ms must stay cheap: it allocates nothing once warm (the lists of
//! open calls are kept from one sample to the next, a kept sample names its stage by
//! record id and gets its path at snapshot time) and does work in the calls open,
//! never in the records.

use super::calls::OpenFrame;
use super::timeline::Timeline;
use super::{Line, OpenStage, Recorder, State};
use crate::memory::{TreeReader, TreeReading};
use crate::report::{SampleReport, TimelinePoint};
use crate::sources::{Measurement, SampleCalls};
use std::collections::VecDeque;

/// How the sampling itself went (the report's `sampling_*` and `max_sample_gap_*`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Health {
    /// Samples tried, failed ones included.
    pub(crate) attempts: u64,
    /// Time spent reading, in total and at most once.
    pub(crate) seconds: f64,
    pub(crate) max_seconds: f64,
    /// The longest time between two samples.
    pub(crate) max_gap_seconds: f64,
}

/// A sample as kept: its `stage` is left empty, named by `record` instead (`None`: the
/// workflow) and filled in at snapshot time.
#[derive(Clone, Debug)]
pub(crate) struct Kept {
    pub(crate) sample: SampleReport,
    pub(crate) record: Option<u32>,
}

/// Lists a sample fills and empties, kept so that the next one allocates nothing.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    /// The calls open when the reading started.
    before: Vec<OpenFrame>,
    /// The calls open when it ended, async calls included.
    open: Vec<OpenFrame>,
    /// The measurement sources' readings.
    taken: super::extra::Taken,
}

/// What full samples leave for the report.
#[derive(Debug)]
pub(crate) struct Samples {
    /// The newest sample.
    pub(crate) latest: Option<Kept>,
    /// The most recent ones, at most `max` (`max_samples`).
    pub(crate) recent: VecDeque<Kept>,
    max: usize,
    /// The whole run, bounded.
    pub(crate) timeline: Timeline,
    /// How the sampling itself went.
    pub(crate) health: Health,
    /// Lent to the sample being taken.
    scratch: Scratch,
}

impl Samples {
    /// None yet; at most `max` kept one by one.
    pub(super) fn new(max: usize) -> Samples {
        Samples {
            latest: None,
            recent: VecDeque::with_capacity(max.min(4096)),
            max,
            timeline: Timeline::new(),
            health: Health::default(),
            scratch: Scratch::default(),
        }
    }

    /// Keeps `sample` as the latest, among the recent ones and on the timeline at
    /// `point`, with the other measurements' series.
    fn push(
        &mut self,
        sample: Kept,
        point: TimelinePoint,
        counted: &super::counters::Counted,
        taken: &super::extra::Taken,
    ) {
        let elapsed = sample.sample.elapsed_seconds;
        if let Some(latest) = &self.latest {
            let gap = elapsed - latest.sample.elapsed_seconds;
            self.health.max_gap_seconds = self.health.max_gap_seconds.max(gap);
        }
        if self.max > 0 {
            if self.recent.len() == self.max {
                self.recent.pop_front();
            }
            // The stage is empty: a clone allocates nothing.
            self.recent.push_back(sample.clone());
        }
        self.timeline.push({
            let mut built = point;
            counted.series_into(&mut built);
            taken.series_into(&mut built);
            built
        });
        self.latest = Some(sample);
    }
}

impl Recorder {
    /// Takes one full tree sample with `reader` and applies it. A failure is kept in
    /// `sampling_error` and returned, for the publisher to warn about.
    pub(crate) fn take_sample(
        &self,
        reader: &mut dyn TreeReader,
        sources: &mut [Box<dyn Measurement>],
    ) -> Result<(), String> {
        // A sample's cost is all of it: the reading, the sources and the fold.
        let begun = self.clock.raw();
        let mut scratch = std::mem::take(&mut self.lock().samples.scratch);
        // The stages open when the reading starts overlap its interval too.
        self.open_calls_into(&mut scratch.before);
        let started = self.clock.raw();
        let reading = reader.read_tree(self.pid);
        let done = self.clock.raw();
        // The sources (NVML) are read here, on the sampler thread, outside the lock.
        if let Ok(tree) = &reading {
            scratch.taken.take(sources, tree, self.elapsed(done));
        }
        self.open_calls_into(&mut scratch.open);
        let mut state = self.lock();
        let reading = match reading {
            Ok(reading) => reading,
            Err(error) => {
                let message = format!("could not read the process tree: {error}");
                state.failures.sampling = Some(message.clone());
                state.samples.scratch = scratch;
                state.samples.health.count(self.since(begun));
                return Err(message);
            }
        };
        let stage = self.owner_record(&state.records);
        let times = Times {
            started,
            elapsed: self.elapsed(done),
        };
        state.apply_sample(reading, &mut scratch, stage, times);
        self.sweep_threads(&mut state, done);
        self.counters.publish(state.counted.take_sampled());
        // Empty but for a sample that has a line to log: taking it costs nothing.
        let notes = scratch.taken.take_notes();
        state.samples.scratch = scratch;
        state.samples.health.count(self.since(begun));
        drop(state);
        for note in notes {
            self.log_event(Line::Text(note), OpenStage::OwnerNow);
        }
        Ok(())
    }
}

impl Health {
    /// Counts a sample attempt that took `took` seconds.
    fn count(&mut self, took: f64) {
        self.attempts += 1;
        self.seconds += took;
        self.max_seconds = self.max_seconds.max(took);
    }
}

/// When a sample's reading began (clock ticks), and when it ended in seconds from the
/// start.
#[derive(Clone, Copy, Debug)]
struct Times {
    started: u64,
    elapsed: f64,
}

impl State {
    /// Applies a full sample: `scratch.open` are the calls open when its reading ended,
    /// on every thread (async calls included), `scratch.before` those open when it
    /// started; `stage` is the record open on the monitor's thread. The measurement by
    /// record counts it toward the records it fell in, and says which they are: the
    /// other measurements' figures fold into the same ones.
    fn apply_sample(
        &mut self,
        reading: TreeReading,
        scratch: &mut Scratch,
        stage: Option<u32>,
        times: Times,
    ) {
        let Times { started, elapsed } = times;
        let mut reading = reading;
        let Scratch {
            before,
            open,
            taken,
        } = scratch;
        let calls = SampleCalls {
            before,
            open,
            started,
            elapsed,
            stage,
        };
        let State {
            by_record,
            records,
            extra,
            ..
        } = self;
        let sampled = by_record
            .as_mut()
            .and_then(|measurement| measurement.sampled_calls(&mut reading, &calls));
        let (sample, point) = match sampled {
            Some(sampled) => {
                for &record in sampled.seen {
                    if let Some(record) = records.list.get_mut(record as usize) {
                        extra.fold_into(&mut record.extra, taken);
                    }
                }
                extra.sampled(taken);
                for &record in sampled.interval {
                    if let Some(record) = records.list.get_mut(record as usize) {
                        extra.fold_interval_into(&mut record.extra, taken);
                    }
                }
                (sampled.sample, sampled.point)
            }
            None => {
                extra.sampled(taken);
                let mut sample = SampleReport::default();
                sample.elapsed_seconds = elapsed;
                let mut point = TimelinePoint::default();
                (point.elapsed_seconds, point.end_seconds) = (elapsed, elapsed);
                (sample, point)
            }
        };
        let kept = Kept {
            sample,
            record: stage,
        };
        self.counted.sampled(&reading, elapsed, &mut self.extra);
        // After the processes this sample saw first, so that their first figures count.
        if let Some(measurement) = self.by_record.as_mut() {
            for &(pid, key, value) in taken.processes() {
                measurement.process_figure(pid, key, value);
            }
        }
        self.samples.push(kept, point, &self.counted, taken);
        if let Some(measurement) = self.by_record.as_mut() {
            measurement.keep_sample(reading, started);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fake::Rig;
    use super::*;

    fn tree(mib: u64) -> TreeReading {
        TreeReading {
            tree_rss: Some(mib << 20),
            parent_rss: Some(mib << 20),
            children_rss: Some(0),
            process_count: 1,
            rss_processes: 1,
            rss_complete: true,
            ..TreeReading::default()
        }
    }

    #[test]
    fn a_sample_counts_toward_every_stage_open_on_any_thread() {
        let rig = Rig::new();
        let (main, worker) = (rig.thread(), rig.thread());
        let fit = rig.recorder.enter(&main, "fit".into());
        let predict = rig.recorder.enter(&worker, "predict".into());
        let idle = rig.recorder.enter(&worker, "idle".into());
        rig.recorder.exit(&worker, idle);
        let call = rig
            .recorder
            .open_async(&worker, "fetch".into(), super::super::Parent::Here);
        rig.advance_micros(5_000);
        rig.sample(tree(700));
        let report = rig.recorder.snapshot();
        for path in ["fit", "fit/predict", "fit/predict/fetch"] {
            let stage = report.stage(path).unwrap();
            assert_eq!(stage.samples, 1, "{path}");
            assert_eq!(stage.peaks.peak_tree_rss_bytes, Some(700 << 20), "{path}");
        }
        assert_eq!(report.stage("fit/predict/idle").unwrap().samples, 0);
        assert_eq!(report.samples, 1);
        assert_eq!(report.peak_rss_stage.as_deref(), Some("fit"));
        assert_eq!(report.peak_rss_elapsed_seconds, Some(5e-3));
        let latest = report.latest_sample.unwrap();
        assert_eq!(
            (latest.stage.as_str(), latest.tree_rss_bytes),
            ("fit", Some(700 << 20))
        );
        rig.recorder.close_async(Some(&worker), call, None);
        rig.recorder.exit(&worker, predict);
        rig.recorder.exit(&main, fit);
        rig.advance_micros(5_000);
        rig.sample(tree(100));
        let report = rig.recorder.snapshot();
        assert_eq!(report.stage("fit").unwrap().samples, 1, "closed before");
        assert_eq!(report.samples, 2);
        assert_eq!(report.max_sample_gap_seconds, 5e-3);
        assert_eq!(report.timeline.len(), 2);
    }

    /// A stage that begins and ends while a sample reads the tree, reusing the reading
    /// that closed the stage before it, never takes the sample's interval: the sample
    /// read the marks before that reading, while the earlier stage held its peak. (The
    /// quickstart's 4 µs `predict` took `fit`'s 200 MiB exact peak in one run of six.)
    #[test]
    fn a_stage_inside_a_sample_keeps_out_of_the_marks_read_before_it() {
        let rig = Rig::new();
        let main = rig.thread();
        rig.set_self(2 << 20, Some(2 << 20));
        let fit = rig.recorder.enter(&main, "fit".into());
        rig.advance_micros(5_000);
        rig.sample_during(|| {
            // The walk read the parent's mark first (fit's 200 MiB) and reset it ...
            rig.advance_micros(100);
            // ... then fit ended: its exit reading closes a small interval ...
            rig.set_self(3 << 20, Some(3 << 20));
            rig.recorder.exit(&main, fit);
            // ... and predict ran 4 µs on that reading, reused.
            rig.advance_micros(1);
            let predict = rig.recorder.enter(&main, "predict".into());
            rig.advance_micros(4);
            rig.recorder.exit(&main, predict);
            rig.advance_micros(100);
            let mut reading = tree(200);
            // Read between fit's entry reading (2) and its exit reading (4).
            reading.parent_mark_epoch = Some(3);
            reading.parent_hwm = Some(200 << 20);
            reading.tree_rss_bound = Some(200 << 20);
            reading
        });
        assert_eq!(rig.self_reads(), 2, "fit's entry and exit; predict reused");
        // The next reading closes predict's interval.
        rig.advance_micros(5_000);
        rig.set_self(3 << 20, Some(4 << 20));
        let mut last = tree(3);
        last.parent_mark_epoch = Some(5);
        last.parent_hwm = Some(4 << 20);
        last.tree_rss_bound = Some(4 << 20);
        rig.sample(last);
        let report = rig.recorder.snapshot();
        let exact = |path: &str| report.stage(path).unwrap().high_water.peak_parent_hwm_bytes;
        assert_eq!(exact("fit"), Some(200 << 20));
        assert_eq!(
            exact("predict"),
            Some(4 << 20),
            "the interval after the sample's"
        );
    }

    /// Three workers of 64 MiB, alive when a sample's walk reads them, exit and are
    /// reaped before it ends; the stage's exit reading finds them gone. The stage's
    /// figure counts each worker once: the quickstart's `workers` once had 268.5 MiB
    /// for 202 (a worker counted twice).
    #[test]
    fn a_child_a_sample_read_alive_and_a_boundary_found_exited_counts_once() {
        const MIB: u64 = 1 << 20;
        fn workers(parent: u64) -> TreeReading {
            let pids = [101, 102, 103];
            let mut reading = tree(parent);
            reading.children_rss = Some(3 * 64 * MIB);
            reading.tree_rss = Some((parent << 20) + 3 * 64 * MIB);
            reading.parent_hwm = Some(parent << 20);
            reading.children_hwm = Some(3 * 64 * MIB);
            reading.tree_rss_bound = Some((parent << 20) + 3 * 64 * MIB);
            reading.process_count = 4;
            reading.descendants = pids
                .iter()
                .map(|&pid| crate::memory::Descendant {
                    pid,
                    rss: 64 * MIB,
                    peak: 64 * MIB,
                    ..crate::memory::Descendant::default()
                })
                .collect();
            reading.bound_parts = pids
                .iter()
                .map(|&pid| crate::memory::BoundPart {
                    pid,
                    started: None,
                    bytes: 64 * MIB,
                    departed: false,
                    gone_by: None,
                })
                .collect();
            reading
        }
        // With exit records the sample counts each worker (the boundary counts none);
        // without, the boundary counts the three at their last marks, and since they
        // may have grown after, the figure is at least that.
        for recorded in [true, false] {
            let rig = Rig::new();
            let main = rig.thread();
            rig.set_self(3 * MIB, Some(3 * MIB));
            rig.set_exits_recorded(recorded);
            let stage = rig.recorder.enter(&main, "workers".into());
            rig.advance_micros(200_000);
            let mut first = workers(3);
            first.parent_mark_epoch = Some(1);
            rig.sample(first);
            rig.advance_micros(200_000);
            rig.sample_during(|| {
                // The walk read the parent's mark and the three workers alive ...
                let mut reading = workers(3);
                reading.parent_mark_epoch = Some(3);
                // ... then they exited, were reaped, and the stage ended.
                rig.advance_micros(2_000);
                rig.set_children_changed(crate::memory::LiveChildren {
                    rss: 0,
                    exited_peak: Some(64 * MIB),
                    exited: 3,
                    exited_peaks: 3 * 64 * MIB,
                });
                rig.set_gone(true);
                rig.recorder.exit(&main, stage);
                reading
            });
            let report = rig.recorder.snapshot();
            let workers = report.stage("workers").unwrap().high_water.clone();
            let run = report.high_water;
            let figure = |h: &stemmon_report::HighWater| match recorded {
                true => h.peak_tree_rss_bound_bytes,
                false => h.peak_tree_rss_at_least_bytes,
            };
            let want = Some(3 * MIB + 3 * 64 * MIB);
            assert_eq!(figure(&workers), want, "records {recorded}: {workers:?}");
            assert_eq!(figure(&run), want, "records {recorded}: {run:?}");
            assert_eq!(report.high_water_marks.unseen, if recorded { 0 } else { 2 });
        }
    }

    #[test]
    fn a_failed_sample_is_kept_as_data() {
        struct Failing;
        impl TreeReader for Failing {
            fn name(&self) -> &'static str {
                "failing"
            }
            fn read_tree(&mut self, _root: u32) -> std::io::Result<TreeReading> {
                Err(std::io::Error::other("no /proc"))
            }
        }
        let rig = Rig::new();
        let error = rig.recorder.take_sample(&mut Failing, &mut []).unwrap_err();
        assert_eq!(error, "could not read the process tree: no /proc");
        let report = rig.recorder.snapshot();
        assert_eq!(report.sampling_error.as_deref(), Some(error.as_str()));
        assert_eq!((report.sampling_attempts, report.samples), (1, 0));
    }

    #[test]
    fn a_process_has_a_measurements_figure_from_the_first_sample_that_saw_it() {
        struct Counted([(u32, f64); 1]);
        impl Measurement for Counted {
            fn declared(&self) -> &'static crate::sources::Measure {
                &stemmon_report::fields::measures::fds::MEASURE
            }
            fn active(&self) -> bool {
                true
            }
            fn sample(&mut self, _tree: &TreeReading, _at: f64) -> crate::sources::Reading<'_> {
                crate::sources::Reading {
                    processes: &self.0,
                    ..crate::sources::Reading::default()
                }
            }
        }
        let rig = Rig::new();
        let mut reading = tree(10);
        reading.own_usage = Some(crate::memory::Usage::default());
        reading.descendants = vec![crate::memory::Descendant {
            pid: 7,
            rss: 1 << 20,
            peak: 1 << 20,
            ..crate::memory::Descendant::default()
        }];
        let mut sources: Vec<Box<dyn Measurement>> = vec![Box::new(Counted([(7, 12.0)]))];
        rig.recorder.set_sources(&sources);
        let mut reader = super::super::fake::FakeTree(reading);
        rig.recorder.take_sample(&mut reader, &mut sources).unwrap();
        let report = rig.recorder.snapshot();
        let child = report.processes.iter().find(|p| p.pid == 7);
        let figure = child.and_then(|p| p.figures.number("peak_fds"));
        assert_eq!(figure, Some(12.0), "{:?}", report.processes);
    }

    #[test]
    fn a_cgroup_figure_counts_for_a_stage_that_closed_in_the_interval_it_covers() {
        let rig = Rig::new();
        let main = rig.thread();
        let config = crate::config::Config::default();
        let mut sources: Vec<Box<dyn Measurement>> =
            crate::sources::cgroup::open(&config).into_iter().collect();
        rig.recorder.set_sources(&sources);
        rig.set_self(10 << 20, None);
        let open = rig.recorder.enter(&main, "open".into());
        rig.advance_micros(100);
        // Under a millisecond after the entry's reading: it reuses it, and the interval
        // the next sample closes is its own.
        let short = rig.recorder.enter(&main, "short".into());
        rig.advance_micros(100);
        rig.recorder.exit(&main, short);
        let mut reading = tree(10);
        reading.cgroup_peak = Some(500 << 20);
        reading.cgroup_anon = Some(300 << 20);
        reading.oom_kills = Some(1);
        let mut reader = super::super::fake::FakeTree(reading);
        rig.recorder.take_sample(&mut reader, &mut sources).unwrap();
        let report = rig.recorder.snapshot();
        for (path, high_water) in [
            (
                "open/short",
                &report.stage("open/short").unwrap().high_water,
            ),
            ("open", &report.stage("open").unwrap().high_water),
            ("the run", &report.high_water),
        ] {
            assert_eq!(
                high_water.peak_cgroup_memory_bytes,
                Some(500 << 20),
                "{path}"
            );
            assert_eq!(high_water.peak_cgroup_anon_bytes, Some(300 << 20), "{path}");
            assert_eq!(high_water.oom_kills, Some(1), "{path}");
        }
        let point = report.timeline.last().expect("a point");
        assert_eq!(point.cgroup_memory_bytes, Some(500 << 20));
        rig.recorder.exit(&main, open);
    }
}
