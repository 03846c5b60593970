//! A snapshot of the recorder as a [`Report`].

use super::calls::open_calls_of;
use super::records::extend_path;
use super::sample::Kept;
use super::thread::{ThreadSlot, POLL};
use super::threaded::{open_by_record, open_of};
use super::{seconds, Recorder};
use crate::report::{Report, StageReport, ThreadReport};

/// Open calls of one record at the snapshot: how many, their total, shortest and
/// longest time so far.
#[derive(Clone, Copy)]
struct Open {
    calls: u32,
    total: f64,
    min: f64,
    max: f64,
}

impl Open {
    const NONE: Open = Open {
        calls: 0,
        total: 0.0,
        min: f64::INFINITY,
        max: 0.0,
    };

    fn add(&mut self, seconds: f64) {
        self.calls += 1;
        self.total += seconds;
        self.min = self.min.min(seconds);
        self.max = self.max.max(seconds);
    }
}

impl Recorder {
    /// The report as of now: every thread's counters merged first.
    pub(crate) fn snapshot(&self) -> Report {
        self.snapshot_with(true)
    }

    /// The report as of now, with its series (`timeline`, `spans`) when `series`: a
    /// live line alone needs neither, and copying 2 000 points at every line would be
    /// the largest allocation of a long run.
    pub(crate) fn snapshot_with(&self, series: bool) -> Report {
        let slots = self.lock_threads().clone();
        // Every thread once, with one barrier: merged, then its open calls read, in
        // one view. The threads are let go before the state is taken again below.
        let (calls, open_counted, open_slots, threads) = {
            let mut held = ThreadSlot::lock_all(&slots);
            if !self.is_ended() {
                let mut state = self.lock();
                for thread in &mut held {
                    self.merge(&mut state, thread);
                }
            }
            let mut calls = Vec::new();
            open_calls_of(&held, &mut calls);
            let threads: Vec<ThreadReport> = slots
                .iter()
                .zip(&held)
                .map(|(slot, thread)| {
                    let mut built = ThreadReport::default();
                    built.id = slot.id;
                    built.name = slot.name.clone();
                    built.calls = thread.calls;
                    built
                })
                .collect();
            (calls, self.counters.open_of(&held), open_of(&held), threads)
        };
        let mut state = self.lock();
        if state.ended.is_none() {
            self.sweep_threads(&mut state, self.clock.raw());
        }
        let now = state
            .ended
            .as_ref()
            .map_or_else(|| self.clock.raw(), |ended| ended.at);
        let mut open = vec![Open::NONE; state.records.list.len()];
        let timed = calls.into_iter().filter(|frame| frame.entered != POLL);
        for frame in timed {
            if let Some(slot) = open.get_mut(frame.record as usize) {
                slot.add(seconds(self.clock.delta_as_nanos(frame.entered, now)));
            }
        }
        // Paths are built here, each from its parent's, in one pass (a parent is always
        // an earlier record): the work is linear in the paths written.
        let mut stages: Vec<StageReport> = Vec::with_capacity(state.records.list.len());
        let open_slots = open_by_record(&state.records, &open_slots);
        let mut figures = Vec::new();
        for (id, (record, open)) in state.records.list.iter().zip(open).enumerate() {
            let (min, max) = match (record.completed, open.calls) {
                (0, 0) => (0.0, 0.0),
                (0, _) => (open.min, open.max),
                _ => (record.min_wall_seconds, record.max_wall_seconds),
            };
            let parent = record
                .parent
                .and_then(|parent| stages.get(parent as usize))
                .map(|parent| parent.path.as_str());
            let path = extend_path(parent, &record.name);
            let wall_seconds = record.wall_seconds + open.total;
            stages.push({
                let mut built = StageReport::default();
                built.id = id as u32;
                built.name = record.name.to_string();
                built.path = path;
                built.parent_id = record.parent;
                built.calls = record.calls;
                built.errors = record.errors;
                built.threads = record.threads;
                built.start_seconds = record.start_seconds;
                built.wall_seconds = wall_seconds;
                built.min_wall_seconds = min;
                built.max_wall_seconds = max;
                built.error = record.error.clone();
                if let Some(measurement) = &state.by_record {
                    measurement.stage_report(id as u32, &mut built);
                }
                let mut counted = record.counted;
                if let Some(open) = open_counted.get(id) {
                    counted.add(open);
                }
                let counters = &state.counted;
                counters.stage(&counted, wall_seconds, &mut built, &mut figures);
                let slots = &record.slots;
                let open = open_slots.get(id);
                let threaded = &state.threaded;
                threaded.stage(slots, open, wall_seconds, &mut built, &mut figures);
                state.extra.stage(&record.extra, &mut built);
                built
            });
        }
        let stage_of = |record: Option<u32>| {
            record
                .and_then(|record| stages.get(record as usize))
                .map_or_else(|| "workflow".to_owned(), |stage| stage.path.clone())
        };
        let sample_of = |kept: &Kept| {
            let mut built = kept.sample.clone();
            built.stage = stage_of(kept.record);
            built
        };
        let health = &state.samples.health;
        let latest_sample = state.samples.latest.as_ref().map(sample_of);
        let recent_samples = state.samples.recent.iter().map(sample_of).collect();
        let wall_seconds = self.elapsed(now);
        {
            let mut built = Report::default();
            built.format_version = Some(crate::report::FORMAT_VERSION.to_owned());
            built.pid = self.pid;
            built.run_id = Some(self.info.run_id.clone());
            built.start_unix_seconds = Some(self.info.start_unix_seconds);
            built.running = state.ended.is_none();
            built.error = state.ended.as_ref().and_then(|ended| ended.error.clone());
            built.error_message = built.error.as_ref().and(state.run_message.clone());
            built.exit_code = state.ended.as_ref().and_then(|ended| ended.exit_code);
            built.wall_seconds = wall_seconds;
            built.sample_interval = self.config.sample_interval.as_secs_f64();
            built.platform = self.info.platform.clone();
            built.sampler = self.info.sampler.to_owned();
            built.command = self.config.command.clone();
            built.spawn_floor_bytes = self.config.spawn_floor;
            built.detailed_memory = self.config.detailed_memory;
            built.sampling_attempts = health.attempts;
            built.sampling_seconds = health.seconds;
            built.max_sampling_seconds = health.max_seconds;
            built.max_sample_gap_seconds = health.max_gap_seconds;
            built.sampling_error = state.failures.sampling.clone();
            built.host = self.info.host.clone();
            built.labels = self.info.labels.clone();
            if let Some(measurement) = &state.by_record {
                measurement.run_report(&mut built, &stage_of);
            }
            built.threads = threads;
            built.stages = stages;
            built.latest_sample = latest_sample;
            built.recent_samples = recent_samples;
            if series {
                built.spans = state.spans.list.clone();
                built.timeline = state.samples.timeline.points();
            }
            let state = &mut *state;
            state.threaded.section_into(&mut state.extra);
            state.counted.run(wall_seconds, &mut built);
            state.extra.run(&mut built);
            built
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fake::Rig;
    use crate::memory::TreeReading;

    fn tree(mib: u64) -> TreeReading {
        TreeReading {
            tree_rss: Some(mib << 20),
            parent_rss: Some(mib << 20),
            process_count: 1,
            rss_complete: true,
            ..TreeReading::default()
        }
    }

    #[test]
    fn paths_the_sampled_stage_and_the_peak_stage_are_built_at_snapshot_time() {
        let rig = Rig::new();
        let main = rig.thread();
        let mut open = Vec::new();
        for depth in 0..300 {
            open.push(rig.recorder.enter(&main, format!("d{depth}").into()));
        }
        rig.advance_micros(2_000);
        rig.sample(tree(500));
        let deep: Vec<String> = (0..300).map(|d| format!("d{d}")).collect();
        let deep = deep.join("/");
        let report = rig.recorder.snapshot();
        assert_eq!(report.stages.len(), 300);
        for (id, stage) in report.stages.iter().enumerate() {
            assert_eq!(stage.parent_id, id.checked_sub(1).map(|p| p as u32));
            assert_eq!(stage.path.matches('/').count(), id);
            assert!(deep.starts_with(&stage.path));
        }
        assert_eq!(report.stages[299].path, deep);
        assert_eq!(report.peak_rss_stage.as_deref(), Some(deep.as_str()));
        assert_eq!(report.latest_sample.as_ref().unwrap().stage, deep);
        // A record's path is the same one by one (log lines, the sampled stage).
        assert_eq!(rig.recorder.owner_stage(&rig.recorder.lock().records), deep);
        while let Some(call) = open.pop() {
            rig.recorder.exit(&main, call);
        }
        rig.advance_micros(2_000);
        rig.sample(tree(100));
        let report = rig.recorder.snapshot();
        assert_eq!(report.latest_sample.unwrap().stage, "workflow");
        assert_eq!(
            report.peak_rss_stage.as_deref(),
            Some(deep.as_str()),
            "the peak stays where it was"
        );
        assert_eq!(report.stages[299].path, deep, "closed, the path stays");
    }

    #[test]
    fn recent_samples_name_the_stage_open_at_each_and_keep_the_newest() {
        let config = crate::config::Config {
            max_samples: 2,
            ..crate::config::Config::default()
        };
        let rig = Rig::with_config(config);
        let main = rig.thread();
        for name in ["load", "fit", "score"] {
            let outer = rig.recorder.enter(&main, "run".into());
            let call = rig.recorder.enter(&main, name.into());
            rig.advance_micros(2_000);
            rig.sample(tree(10));
            rig.recorder.exit(&main, call);
            rig.recorder.exit(&main, outer);
        }
        let report = rig.recorder.snapshot();
        let stages: Vec<&str> = report
            .recent_samples
            .iter()
            .map(|s| s.stage.as_str())
            .collect();
        assert_eq!(stages, ["run/fit", "run/score"]);
        assert_eq!(report.latest_sample.unwrap().stage, "run/score");
        assert_eq!(
            report.peak_rss_stage.as_deref(),
            Some("run/load"),
            "the first"
        );
        assert_eq!(report.timeline.len(), 3);
    }

    #[test]
    fn open_calls_count_up_to_now_and_the_end_stops_the_clock() {
        let rig = Rig::new();
        // Two threads other than the monitor's own, so neither nests under the other.
        let (_main, reader, worker) = (rig.thread(), rig.thread(), rig.thread());
        let first = rig.recorder.enter(&reader, "load".into());
        rig.advance_micros(3_000);
        let second = rig.recorder.enter(&worker, "load".into());
        rig.advance_micros(2_000);
        let report = rig.recorder.snapshot();
        assert!(report.running);
        let load = report.stage("load").unwrap();
        assert_eq!(load.calls, 2);
        assert!(
            (load.wall_seconds - 7e-3).abs() < 1e-12,
            "{}",
            load.wall_seconds
        );
        assert!(
            (load.min_wall_seconds - 2e-3).abs() < 1e-12,
            "only open calls: theirs"
        );
        assert!((load.max_wall_seconds - 5e-3).abs() < 1e-12);
        rig.recorder.exit(&worker, second);
        let load = rig.recorder.snapshot().stage("load").unwrap().clone();
        assert!(
            (load.min_wall_seconds - 2e-3).abs() < 1e-12,
            "completed calls decide"
        );
        assert!((load.max_wall_seconds - 2e-3).abs() < 1e-12);
        assert!((load.wall_seconds - 7e-3).abs() < 1e-12);
        rig.recorder.end(None);
        rig.advance_micros(10_000);
        let report = rig.recorder.snapshot();
        assert!(!report.running);
        assert!(
            (report.wall_seconds - 5e-3).abs() < 1e-12,
            "{}",
            report.wall_seconds
        );
        let load = report.stage("load").unwrap();
        assert!(
            (load.wall_seconds - 7e-3).abs() < 1e-12,
            "open at the end, counted to it"
        );
        assert_eq!(report.threads.len(), 3);
        assert_eq!(report.sampler, "fake");
        rig.recorder.exit(&reader, first);
        assert_eq!(
            rig.recorder.snapshot(),
            report,
            "nothing moves after the end"
        );
    }
}
