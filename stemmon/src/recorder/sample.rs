//! Full tree samples: taken on the sampler thread, they count toward every stage open
//! on any thread, close the intervals of the kernel's marks, and feed the report's
//! latest sample, recent samples and timeline.

use super::calls::OpenFrame;
use super::thread::POLL;
use super::timeline::Timeline;
use super::{seconds, Line, OpenStage, Recorder, State};
use crate::memory::{TreeReader, TreeReading};
use crate::report::{CgroupReport, SampleReport, TimelinePoint};
use std::collections::VecDeque;
use std::sync::atomic::Ordering;

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

/// What full samples leave for the report.
#[derive(Debug)]
pub(crate) struct Samples {
    /// The newest sample.
    pub(crate) latest: Option<SampleReport>,
    /// The most recent ones, at most `max` (`max_samples`).
    pub(crate) recent: VecDeque<SampleReport>,
    max: usize,
    /// The whole run, bounded.
    pub(crate) timeline: Timeline,
    /// The job's cgroup as last read.
    pub(crate) cgroup: Option<CgroupReport>,
    /// How the sampling itself went.
    pub(crate) health: Health,
}

impl Samples {
    /// None yet; at most `max` kept one by one.
    pub(super) fn new(max: usize) -> Samples {
        Samples {
            latest: None,
            recent: VecDeque::with_capacity(max.min(4096)),
            max,
            timeline: Timeline::new(),
            cgroup: None,
            health: Health::default(),
        }
    }

    /// Keeps `sample` as the latest, among the recent ones and on the timeline, with
    /// `bound` as the interval's bound of the tree.
    fn push(&mut self, sample: SampleReport, reading: &TreeReading, bound: Option<u64>) {
        if let Some(latest) = &self.latest {
            let gap = sample.elapsed_seconds - latest.elapsed_seconds;
            self.health.max_gap_seconds = self.health.max_gap_seconds.max(gap);
        }
        if reading.cgroup.is_some() {
            self.cgroup = reading.cgroup.clone();
        }
        if self.max > 0 {
            if self.recent.len() == self.max {
                self.recent.pop_front();
            }
            self.recent.push_back(sample.clone());
        }
        self.timeline.push(TimelinePoint {
            elapsed_seconds: sample.elapsed_seconds,
            end_seconds: sample.elapsed_seconds,
            tree_rss_bytes: reading.tree_rss,
            parent_rss_bytes: reading.parent_rss,
            children_rss_bytes: reading.children_rss,
            tree_rss_bound_bytes: bound,
            cgroup_memory_bytes: reading.cgroup_peak,
            process_count: reading.process_count,
            samples: 1,
            ..TimelinePoint::default()
        });
        self.latest = Some(sample);
    }
}

impl Recorder {
    /// Takes one full tree sample with `reader` and applies it. A failure is kept in
    /// `sampling_error` and returned, for the publisher to warn about.
    pub(crate) fn take_sample(&self, reader: &mut dyn TreeReader) -> Result<(), String> {
        // The stages open when the reading starts overlap its interval too.
        let open_before = self.open_calls();
        let started = self.clock.raw();
        let reading = reader.read_tree(self.pid);
        let done = self.clock.raw();
        let took = seconds(self.clock.delta_as_nanos(started, done));
        let open = self.open_calls();
        let mut state = self.lock();
        let health = &mut state.samples.health;
        health.attempts += 1;
        health.seconds += took;
        health.max_seconds = health.max_seconds.max(took);
        let reading = match reading {
            Ok(reading) => reading,
            Err(error) => {
                let message = format!("could not read the process tree: {error}");
                state.failures.sampling = Some(message.clone());
                return Err(message);
            }
        };
        let kills = reading.oom_kills.unwrap_or(0);
        let stage = self.owner_stage(&state.records);
        state.apply_sample(
            reading,
            &open,
            &open_before,
            stage,
            self.elapsed(done),
            done,
        );
        self.boundary_at.0.store(done, Ordering::Relaxed);
        drop(state);
        if kills > 0 {
            self.log_event(
                Line::Text(format!("OOM kill in the job's cgroup ({kills})")),
                OpenStage::OwnerNow,
            );
        }
        Ok(())
    }
}

impl State {
    /// Applies a full sample taken at `done` ticks: `open` are the calls open now on
    /// every thread (async calls included), `open_before` those open when the reading
    /// started.
    fn apply_sample(
        &mut self,
        reading: TreeReading,
        open: &[OpenFrame],
        open_before: &[OpenFrame],
        stage: String,
        elapsed: f64,
        done: u64,
    ) {
        // The run's bound for this interval, as the total is about to count it (its
        // boundary intervals widened by the descendants' marks, never below the
        // sample), so that the timeline's bound reaches the report's.
        let bound = reading
            .tree_rss_bound
            .max(
                self.total
                    .stats
                    .pending_local
                    .zip(reading.children_hwm)
                    .map(|(local, children)| local + children),
            )
            .map(|bound| bound.max(reading.tree_rss.unwrap_or(0)));
        if self.total.stats.apply_sample(&reading) {
            self.total.peaked(stage.clone(), elapsed);
        }
        // A stage open on another thread saw the intervals other threads' boundary
        // readings closed since it was entered: each counts for it now.
        // (A poll frame is skipped: its async call is in `open` with its own start.)
        for frame in open.iter().chain(open_before) {
            if frame.entered != POLL {
                self.apply_intervals_since(frame.record, frame.entered);
            }
        }
        self.boundary.sample_gave_intervals();
        let mut seen: Vec<u32> = open.iter().map(|frame| frame.record).collect();
        seen.sort_unstable();
        seen.dedup();
        for &record in &seen {
            if let Some(record) = self.records.list.get_mut(record as usize) {
                record.stats.apply_sample(&reading);
            }
        }
        // Records that closed during this interval, or saw only a reused reading, get
        // the interval this sample closes; others only widen their pending bound.
        let mut closed: Vec<u32> = open_before
            .iter()
            .map(|frame| frame.record)
            .chain(self.boundary.take_awaiting())
            .filter(|record| seen.binary_search(record).is_err())
            .collect();
        closed.sort_unstable();
        closed.dedup();
        for &record in &closed {
            self.records
                .get_mut(record)
                .stats
                .apply_sample_interval(&reading);
        }
        for record in self.boundary.take_pending() {
            let stats = &mut self.records.get_mut(record).stats;
            if stats.pending_local.is_some() {
                stats.close_interval(reading.children_hwm);
            }
        }
        let sample = SampleReport {
            elapsed_seconds: elapsed,
            stage,
            tree_rss_bytes: reading.tree_rss,
            parent_rss_bytes: reading.parent_rss,
            children_rss_bytes: reading.children_rss,
            tree_uss_bytes: reading.tree_uss,
            tree_pss_bytes: reading.tree_pss,
            tree_physical_footprint_bytes: reading.tree_physical_footprint,
            process_count: reading.process_count,
            rss_processes: reading.rss_processes,
            rss_complete: reading.rss_complete,
        };
        self.samples.push(sample, &reading, bound);
        self.boundary.sampled(reading, done);
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
        rig.recorder.close_async(None, call, None);
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

    #[test]
    fn a_mark_read_below_the_sample_never_leaves_the_bound_below_it() {
        let rig = Rig::new();
        let main = rig.thread();
        let fit = rig.recorder.enter(&main, "fit".into());
        rig.advance_micros(5_000);
        // A zombie root's reading: its mark is gone, the descendants' are low.
        rig.sample(TreeReading {
            parent_hwm: Some(1 << 20),
            tree_rss_bound: Some(2 << 20),
            ..tree(300)
        });
        rig.recorder.exit(&main, fit);
        let report = rig.recorder.snapshot();
        for (peaks, high_water) in [
            (&report.peaks, &report.high_water),
            (
                &report.stage("fit").unwrap().peaks,
                &report.stage("fit").unwrap().high_water,
            ),
        ] {
            assert_eq!(high_water.peak_tree_rss_bound_bytes, Some(300 << 20));
            assert_eq!(high_water.peak_parent_hwm_bytes, Some(300 << 20));
            assert_eq!(peaks.peak_tree_rss_bytes, Some(300 << 20));
        }
        assert_eq!(
            report.timeline.last().unwrap().tree_rss_bound_bytes,
            Some(300 << 20)
        );
    }

    #[test]
    fn the_timelines_bound_reaches_the_reports_through_boundary_readings() {
        let rig = Rig::new();
        let main = rig.thread();
        rig.set_self(10 << 20, Some(10 << 20));
        rig.sample(TreeReading {
            parent_hwm: Some(10 << 20),
            children_hwm: Some(0),
            tree_rss_bound: Some(10 << 20),
            ..tree(10)
        });
        rig.advance_micros(5_000);
        // A spike between samples that only a stage's boundary reading sees.
        let spike = rig.recorder.enter(&main, "spike".into());
        rig.advance_micros(5_000);
        rig.set_self(20 << 20, Some(700 << 20));
        rig.recorder.exit(&main, spike);
        let report = rig.recorder.snapshot();
        let bound = report.high_water.peak_tree_rss_bound_bytes;
        assert_eq!(bound, Some(700 << 20));
        assert_eq!(report.timeline.len(), 1, "folded into the newest point");
        let line = report
            .timeline
            .iter()
            .filter_map(|p| p.tree_rss_bound_bytes)
            .max();
        assert_eq!(line, bound);
        assert_eq!(report.timeline[0].parent_rss_bytes, Some(20 << 20));
        assert_eq!(report.timeline[0].samples, 1);
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
        let error = rig.recorder.take_sample(&mut Failing).unwrap_err();
        assert_eq!(error, "could not read the process tree: no /proc");
        let report = rig.recorder.snapshot();
        assert_eq!(report.sampling_error.as_deref(), Some(error.as_str()));
        assert_eq!((report.sampling_attempts, report.samples), (1, 0));
    }
}
