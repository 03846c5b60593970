//! Stage-boundary readings in the engine: at a call's entry and exit (or where the
//! newest reading is under 1 ms old, reused), the measurement by record reads this
//! process and counts the reading toward the call's records (the book's
//! `architecture.md`); a fresh reading gives the measurements of counters theirs,
//! raises the timeline's newest point and sweeps the threads' counters.

use super::thread::ThreadState;
use super::{Recorder, State, BOUNDARY_REUSE_NANOS};
use crate::sources::{AtBoundary, CallAt, Edge};
use std::sync::atomic::Ordering;

impl Recorder {
    /// Reads this process at the boundary of a call of `record` on `thread` (`edge`
    /// says which), or reuses the newest reading where it is under 1 ms old, through
    /// the measurement by record, which counts it toward the call's records.
    pub(super) fn boundary_reading(
        &self,
        state: &mut State,
        thread: &ThreadState,
        now: u64,
        record: u32,
        edge: Edge,
    ) {
        let newest = self.boundary_at.0.load(Ordering::Relaxed);
        let young = self.clock.delta_as_nanos(newest, now) < BOUNDARY_REUSE_NANOS;
        let State {
            by_record,
            counted,
            extra,
            samples,
            stack,
            ..
        } = state;
        let Some(measurement) = by_record.as_mut() else {
            return;
        };
        stack.clear();
        stack.extend(thread.stack.iter().map(|frame| frame.record));
        let seconds = |ticks: u64| self.elapsed(ticks);
        let call = CallAt {
            record,
            edge,
            stack,
            now,
            elapsed: self.elapsed(now),
            seconds: &seconds,
        };
        let mut fresh = |at: &AtBoundary<'_>| {
            self.boundary_at.0.store(now, Ordering::Relaxed);
            let counters = counted.boundary(at, extra);
            self.counters.publish(counters);
        };
        let Some(point) = measurement.boundary_call(young, &call, &mut fresh) else {
            return;
        };
        // The plot's series gets the fresh reading too (at most one a millisecond),
        // folded into the newest point.
        samples.timeline.raise_last(point);
        self.sweep_threads(state, now);
    }
}

impl State {
    /// A call of `record`, entered at clock ticks `entered`, closed after its exit
    /// reading: what other threads' readings read while it was open counts for it.
    pub(super) fn call_closed(&mut self, record: u32, entered: u64) {
        if let Some(measurement) = self.by_record.as_mut() {
            measurement.call_closed(record, entered);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fake::Rig;
    use super::*;
    use crate::memory::TreeReading;

    /// Without exit records, a child no sample read, started in one stage and reaped in
    /// the next, counts in both: the next sample widens every interval since the last
    /// one by the kernel's figure (it counted only in the second).
    #[test]
    fn an_unsampled_child_reaped_a_stage_later_counts_in_both() {
        const MIB: u64 = 1 << 20;
        let rig = Rig::new();
        let main = rig.thread();
        rig.set_self(10 * MIB, Some(10 * MIB));
        let sample = || TreeReading {
            parent_rss: Some(10 * MIB),
            children_rss: Some(0),
            tree_rss: Some(10 * MIB),
            parent_hwm: Some(10 * MIB),
            children_hwm: Some(0),
            tree_rss_bound: Some(10 * MIB),
            process_count: 1,
            ..TreeReading::default()
        };
        rig.sample(sample());
        for stage in ["starts", "reaps"] {
            rig.advance_micros(2_000);
            let call = rig.recorder.enter(&main, stage.into());
            rig.advance_micros(2_000);
            if stage == "reaps" {
                rig.set_reaped(Some(150 * MIB), Some(1));
            }
            rig.recorder.exit(&main, call);
            rig.set_reaped(None, None);
        }
        rig.advance_micros(2_000);
        rig.sample(sample());
        let report = rig.recorder.snapshot();
        for stage in ["starts", "reaps"] {
            let bound = report
                .stage(stage)
                .unwrap()
                .high_water
                .peak_tree_rss_bound_bytes;
            assert_eq!(bound, Some(160 * MIB), "{stage}");
        }
        assert_eq!(report.high_water.peak_tree_rss_bound_bytes, Some(160 * MIB));
        assert_eq!(report.high_water_marks.unseen, 0);
    }

    #[test]
    fn a_reading_under_a_millisecond_old_is_reused_an_older_one_is_not() {
        let rig = Rig::new();
        let main = rig.thread();
        rig.set_self(100 << 20, None);
        let first = rig.recorder.enter(&main, "a".into());
        assert_eq!(rig.self_reads(), 1, "the first entry reads");
        rig.advance_micros(400);
        rig.set_self(300 << 20, None);
        rig.recorder.exit(&main, first);
        let again = rig.recorder.enter(&main, "b".into());
        rig.recorder.exit(&main, again);
        assert_eq!(rig.self_reads(), 1, "0.4 ms later the reading is reused");
        let report = rig.recorder.snapshot();
        assert_eq!(
            report.stage("b").unwrap().peaks.peak_parent_rss_bytes,
            Some(100 << 20)
        );
        rig.advance_micros(1_100);
        let fresh = rig.recorder.enter(&main, "c".into());
        assert_eq!(rig.self_reads(), 2, "1.5 ms after the reading, a fresh one");
        rig.recorder.exit(&main, fresh);
        let report = rig.recorder.snapshot();
        assert_eq!(
            report.stage("c").unwrap().peaks.peak_parent_rss_bytes,
            Some(300 << 20)
        );
        assert_eq!(report.peaks.peak_parent_rss_bytes, Some(300 << 20));
        assert_eq!(report.peak_rss_stage.as_deref(), Some("c"));
        let at = rig.recorder.boundary_at.0.load(Ordering::Relaxed);
        assert_eq!(rig.recorder.elapsed(at), 1.5e-3);
    }

    #[test]
    fn a_fresh_reading_counts_toward_every_stage_on_the_threads_stack() {
        let rig = Rig::new();
        let main = rig.thread();
        rig.set_self(10 << 20, Some(10 << 20));
        let outer = rig.recorder.enter(&main, "outer".into());
        rig.advance_micros(2_000);
        rig.set_self(20 << 20, Some(50 << 20));
        let inner = rig.recorder.enter(&main, "inner".into());
        let report = rig.recorder.snapshot();
        let hwm = |path: &str| report.stage(path).unwrap().high_water.peak_parent_hwm_bytes;
        assert_eq!(hwm("outer"), Some(50 << 20), "the interval since its entry");
        assert_eq!(hwm("outer/inner"), None, "entered as the interval closed");
        assert_eq!(
            report.stage("outer").unwrap().peaks.peak_parent_rss_bytes,
            Some(20 << 20)
        );
        rig.recorder.exit(&main, inner);
        rig.recorder.exit(&main, outer);
    }

    #[test]
    fn an_interval_another_thread_closed_counts_for_a_stage_open_meanwhile() {
        let rig = Rig::new();
        let main = rig.thread();
        let worker = rig.thread();
        rig.set_self(10 << 20, Some(10 << 20));
        let long = rig.recorder.enter(&main, "long".into());
        rig.advance_micros(2_000);
        // The worker's reading closes an interval with a spike in it, while `long`
        // is open on the main thread, whose stack the worker cannot see.
        rig.set_self(10 << 20, Some(900 << 20));
        let short = rig.recorder.enter(&worker, "short".into());
        rig.advance_micros(2_000);
        rig.set_self(10 << 20, Some(10 << 20));
        rig.recorder.exit(&worker, short);
        let hwm = |report: &crate::Report, path: &str| {
            report.stage(path).unwrap().high_water.peak_parent_hwm_bytes
        };
        assert_eq!(hwm(&rig.recorder.snapshot(), "long"), None, "not yet");
        // The next sample gives the interval to the stages open on other threads.
        rig.sample(TreeReading {
            parent_rss: Some(10 << 20),
            tree_rss: Some(10 << 20),
            process_count: 1,
            ..TreeReading::default()
        });
        let report = rig.recorder.snapshot();
        assert_eq!(hwm(&report, "long"), Some(900 << 20));
        assert_eq!(
            hwm(&report, "long/short"),
            Some(10 << 20),
            "its own interval only"
        );
        assert_eq!(report.high_water.peak_parent_hwm_bytes, Some(900 << 20));
        // And the same interval is not counted again for a stage entered after it.
        rig.advance_micros(2_000);
        let later = rig.recorder.enter(&worker, "later".into());
        rig.advance_micros(2_000);
        rig.recorder.exit(&worker, later);
        let report = rig.recorder.snapshot();
        assert_eq!(hwm(&report, "long/later"), Some(10 << 20));
        rig.recorder.exit(&main, long);
    }

    #[test]
    fn an_exited_child_is_left_out_of_the_next_boundary() {
        let rig = Rig::new();
        let main = rig.thread();
        rig.set_self(10 << 20, None);
        rig.sample(TreeReading {
            parent_rss: Some(10 << 20),
            children_rss: Some(40 << 20),
            tree_rss: Some(50 << 20),
            process_count: 2,
            descendants: vec![crate::memory::Descendant {
                pid: 7,
                rss: 40 << 20,
                peak: 40 << 20,
                ..crate::memory::Descendant::default()
            }],
            ..TreeReading::default()
        });
        rig.advance_micros(2_000);
        rig.set_children_changed(crate::memory::LiveChildren {
            rss: 0,
            exited_peak: Some(40 << 20),
            exited: 1,
            exited_peaks: 40 << 20,
        });
        let call = rig.recorder.enter(&main, "after_exit".into());
        rig.recorder.exit(&main, call);
        let report = rig.recorder.snapshot();
        let stage = report.stage("after_exit").unwrap();
        assert_eq!(stage.peaks.peak_children_rss_bytes, Some(0));
        assert_eq!(stage.peaks.peak_tree_rss_bytes, Some(10 << 20));
    }

    /// A boundary never reuses a sample's reading of the parent: one read while a stage
    /// was freeing its memory would give the stage entered just after that one's exit
    /// the older, higher figure.
    #[test]
    fn a_stage_entered_just_after_a_sample_never_takes_its_parent_figure() {
        // The sample reads the parent while `fit` is freeing its memory, and ends; `fit`
        // exits within the millisecond, having freed it all; `predict` follows.
        let rig = Rig::new();
        let main = rig.thread();
        rig.set_self(206 << 20, None);
        let fit = rig.recorder.enter(&main, "fit".into());
        rig.advance_micros(2_000);
        rig.sample(TreeReading {
            parent_rss: Some(127 << 20),
            tree_rss: Some(127 << 20),
            process_count: 1,
            ..TreeReading::default()
        });
        let reads = rig.self_reads();
        rig.set_self(3 << 20, None);
        rig.advance_micros(100);
        rig.recorder.exit(&main, fit);
        assert_eq!(
            rig.self_reads(),
            reads + 1,
            "fit's exit reads the parent afresh"
        );
        rig.advance_micros(100);
        let predict = rig.recorder.enter(&main, "predict".into());
        rig.recorder.exit(&main, predict);
        assert_eq!(
            rig.self_reads(),
            reads + 1,
            "predict reuses fit's exit reading"
        );
        let report = rig.recorder.snapshot();
        let predict = report.stage("predict").unwrap();
        assert_eq!(predict.peaks.peak_parent_rss_bytes, Some(3 << 20));
        assert!(
            predict.high_water.peak_parent_hwm_bytes <= Some(3 << 20),
            "{:?}",
            predict.high_water
        );
    }

    /// A sample whose reading of the parent came before a boundary reading that ran
    /// while it was taken leaves that newer reading as the one later calls reuse: a call
    /// just after a stage freed its memory never takes the sample's older figure.
    #[test]
    fn a_sample_read_before_a_boundary_reading_never_replaces_it() {
        let rig = Rig::new();
        let main = rig.thread();
        rig.set_self(206 << 20, None);
        let fit = rig.recorder.enter(&main, "fit".into());
        rig.advance_micros(2_000);
        rig.sample_during(|| {
            // The parent is read while `fit` still holds its memory; then `fit` frees
            // it and exits, its exit reading fresh, before the sample ends.
            let reading = TreeReading {
                parent_rss: Some(206 << 20),
                tree_rss: Some(206 << 20),
                process_count: 1,
                ..TreeReading::default()
            };
            rig.advance_micros(2_000);
            rig.set_self(3 << 20, None);
            rig.recorder.exit(&main, fit);
            reading
        });
        let reads = rig.self_reads();
        // Within a millisecond of the sample: a reused reading.
        rig.advance_micros(100);
        let predict = rig.recorder.enter(&main, "predict".into());
        rig.recorder.exit(&main, predict);
        assert_eq!(rig.self_reads(), reads, "predict reuses a reading");
        let report = rig.recorder.snapshot();
        let peaks = &report.stage("predict").unwrap().peaks;
        assert_eq!(peaks.peak_parent_rss_bytes, Some(3 << 20), "{peaks:?}");
    }
}
