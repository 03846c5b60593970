//! A snapshot of the recorder as a [`Report`].

use super::thread::POLL;
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
        if !self.is_ended() {
            self.merge_all();
        }
        let calls = self.open_calls();
        let threads: Vec<ThreadReport> = self
            .lock_threads()
            .iter()
            .map(|slot| ThreadReport {
                id: slot.id,
                name: slot.name.clone(),
                calls: slot.lock().calls,
            })
            .collect();
        let state = self.lock();
        let now = state.ended.unwrap_or_else(|| self.clock.raw());
        let mut open = vec![Open::NONE; state.records.list.len()];
        let timed = calls
            .into_iter()
            .filter(|(_, entered)| *entered != POLL)
            .chain(
                state
                    .open_async
                    .iter()
                    .map(|(_, record, at)| (*record, *at)),
            );
        for (record, entered) in timed {
            if let Some(slot) = open.get_mut(record as usize) {
                slot.add(seconds(self.clock.delta_as_nanos(entered, now)));
            }
        }
        let stages = state
            .records
            .list
            .iter()
            .zip(open)
            .enumerate()
            .map(|(id, (record, open))| {
                let (min, max) = match (record.completed, open.calls) {
                    (0, 0) => (0.0, 0.0),
                    (0, _) => (open.min, open.max),
                    _ => (record.min_wall_seconds, record.max_wall_seconds),
                };
                StageReport {
                    id: id as u32,
                    name: record.name.to_string(),
                    path: record.path.clone(),
                    parent_id: record.parent,
                    calls: record.calls,
                    errors: record.errors,
                    threads: record.threads,
                    start_seconds: record.start_seconds,
                    wall_seconds: record.wall_seconds + open.total,
                    min_wall_seconds: min,
                    max_wall_seconds: max,
                    error: record.error.clone(),
                    samples: record.stats.samples,
                    partial_rss_samples: record.stats.partial_rss_samples,
                    peak_process_count: record.stats.peak_process_count,
                    peaks: record.stats.peaks.clone(),
                    high_water: record.stats.high_water.clone(),
                    ..StageReport::default()
                }
            })
            .collect();
        Report {
            pid: self.pid,
            running: state.ended.is_none(),
            error: state.error.clone(),
            wall_seconds: self.elapsed(now),
            sample_interval: self.config.sample_interval.as_secs_f64(),
            platform: self.platform.clone(),
            sampler: self.sampler.to_owned(),
            command: self.config.command.clone(),
            detailed_memory: self.config.detailed_memory,
            sampling_attempts: state.sampling_attempts,
            sampling_seconds: state.sampling_seconds,
            max_sampling_seconds: state.max_sampling_seconds,
            max_sample_gap_seconds: state.max_sample_gap_seconds,
            sampling_error: state.sampling_error.clone(),
            output_error: state.output_error.clone(),
            export_error: state.export_error.clone(),
            host: self.host.clone(),
            labels: self.labels.clone(),
            samples: state.total.samples,
            partial_rss_samples: state.total.partial_rss_samples,
            peak_process_count: state.total.peak_process_count,
            peaks: state.total.peaks.clone(),
            high_water: state.total.high_water.clone(),
            high_water_marks: self.high_water_marks.clone(),
            cgroup: state.cgroup.clone(),
            peak_rss_stage: state.peak_rss_stage.clone(),
            peak_rss_elapsed_seconds: state.peak_rss_elapsed_seconds,
            threads,
            stages,
            latest_sample: state.latest.clone(),
            recent_samples: state.trace.iter().cloned().collect(),
            spans: state.spans.clone(),
            timeline: state.timeline.points(),
            ..Report::default()
        }
    }
}
