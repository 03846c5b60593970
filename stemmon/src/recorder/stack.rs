//! The hot path: a call entered and left on a thread's own stack, and the merge of a
//! thread's counters into the shared records. A call costs its thread's slot and, at
//! most about once a millisecond per thread, or on an error or a long call, the shared
//! state: a boundary reading younger than the reuse window is reused.

use super::thread::{bucket, ThreadSlot, ThreadState, NO_PARENT};
use super::{counters, short_type_name, threaded, Entered, OpenStage, Recorder, StageName, State};
use crate::sources::Edge;
use std::borrow::Cow;
use std::sync::atomic::Ordering;

impl Recorder {
    /// Opens a call of `name` on `slot`'s thread.
    #[inline]
    pub(crate) fn enter(&self, slot: &ThreadSlot, name: StageName) -> Entered {
        let _engine = crate::heap::attach::pause(); // the record is no test's heap
        let now = self.clock.raw();
        let mut thread = slot.lock();
        if self.is_ended() {
            return Entered::Ignored;
        }
        // Recursion, direct or not, folds into the open call: counted, timed once.
        let bucket = bucket(&name);
        if let Some(index) = thread.open_named_in(&name, bucket) {
            let frame = &mut thread.stack[index];
            frame.folded += 1;
            let (record, seq) = (frame.record, frame.seq);
            thread.delta(record).calls += 1;
            return Entered::Folded(seq);
        }
        let record = self.record_here(slot, &mut thread, &name, now);
        let seq = thread.push_call(record, now, &name, bucket);
        if slot.id == 0 {
            self.owner_top.0.store(record + 1, Ordering::Relaxed);
        }
        self.count_entry(&mut thread, record, now);
        // The counters' mark first: a list it grows is the engine's, not the call's heap.
        self.counters.enter(&mut thread, now);
        threaded::entered(&mut thread, slot.id != 0, self.counted_threads);
        Entered::Pushed(seq)
    }

    /// Counts a call of `record` entered at `now` on `thread`, a sync call or an async
    /// one: a boundary reading under 1 ms old is reused; else the thread's counters are
    /// merged and the parent is read.
    #[inline(always)]
    pub(super) fn count_entry(&self, thread: &mut ThreadState, record: u32, now: u64) {
        let reuse = now.wrapping_sub(self.boundary_at.0.load(Ordering::Relaxed)) < self.reuse_ticks;
        let delta = thread.delta(record);
        delta.calls += 1;
        delta.saw_boundary |= reuse;
        if !reuse {
            self.entry_reading(thread, record, now);
        }
    }

    /// The merge and the fresh boundary reading of an entry the last one is too old for.
    #[inline(never)]
    fn entry_reading(&self, thread: &mut ThreadState, record: u32, now: u64) {
        let mut state = self.lock();
        self.merge(&mut state, thread);
        self.boundary_reading(&mut state, thread, now, record, Edge::Entry);
    }

    /// The record of `name` entered now on `slot`'s thread: under the thread's open
    /// stage, or, on an idle thread, under the stage open on the monitor's own thread
    /// (`owner_top` holds record + 1, so 0 becomes `NO_PARENT`).
    #[inline]
    pub(super) fn record_here(
        &self,
        slot: &ThreadSlot,
        thread: &mut ThreadState,
        name: &StageName,
        now: u64,
    ) -> u32 {
        let parent = match thread.stack.last() {
            Some(top) => top.record,
            None if slot.id != 0 => self.owner_top.0.load(Ordering::Relaxed).wrapping_sub(1),
            None => NO_PARENT,
        };
        self.record_under(thread, parent, name, now)
    }

    /// The record of `name` under `parent` (`NO_PARENT`: top level), learned by
    /// `thread` if new to it.
    #[inline]
    pub(super) fn record_under(
        &self,
        thread: &mut ThreadState,
        parent: u32,
        name: &StageName,
        now: u64,
    ) -> u32 {
        match thread.find(parent, name) {
            Some(record) => record,
            None => self.learn(thread, parent, name, now),
        }
    }

    /// Finds or makes the record of `name` under `parent` and teaches it to the thread.
    #[cold]
    fn learn(&self, thread: &mut ThreadState, parent: u32, name: &StageName, now: u64) -> u32 {
        let parent_id = (parent != NO_PARENT).then_some(parent);
        let record = self
            .lock()
            .records
            .find_or_add(parent_id, name, self.elapsed(now));
        thread.learn(parent, name, record);
        record
    }

    /// Records the `Err` the open call `seq` returned: its type and `Display` text.
    pub(crate) fn set_error(
        &self,
        slot: &ThreadSlot,
        seq: u32,
        type_name: &'static str,
        message: Option<Box<str>>,
    ) {
        slot.lock().set_error(seq, type_name, message);
    }

    /// Records the `Display` text of the `Err` `main` returned, for the report.
    pub(crate) fn set_run_message(&self, message: Option<Box<str>>) {
        self.lock().run_message = message.map(String::from);
    }

    /// Closes the call `entered` returned.
    #[inline]
    pub(crate) fn exit(&self, slot: &ThreadSlot, entered: Entered) {
        let _engine = crate::heap::attach::pause(); // the record is no test's heap
        let now = self.clock.raw();
        let mut thread = slot.lock();
        if self.is_ended() {
            return;
        }
        let seq = match entered {
            Entered::Pushed(seq) => seq,
            Entered::Folded(seq) => {
                if let Some(index) = thread.position(seq) {
                    let frame = &mut thread.stack[index];
                    frame.folded = frame.folded.saturating_sub(1);
                }
                return;
            }
            Entered::Ignored => return,
        };
        let Some(index) = thread.position(seq) else {
            return;
        };
        let frame = thread.remove_frame(index);
        threaded::exited(&mut thread, &frame);
        if slot.id == 0 {
            let top = thread.stack.last().map_or(0, |top| top.record + 1);
            self.owner_top.0.store(top, Ordering::Relaxed);
        }
        let panicking = std::thread::panicking();
        let ticks = now.saturating_sub(frame.entered);
        let reuse = now.wrapping_sub(self.boundary_at.0.load(Ordering::Relaxed)) < self.reuse_ticks;
        // Only a call shorter than the reuse window may skip the shared state: a longer
        // one may have overlapped intervals other threads' readings closed.
        let quiet = !frame.failed && !panicking && ticks < self.reuse_ticks;
        let fast = quiet && reuse && thread.has_completed(frame.record);
        let delta = thread.delta(frame.record);
        delta.completed += 1;
        delta.wall_ticks += ticks;
        delta.min_ticks = delta.min_ticks.min(ticks);
        delta.max_ticks = delta.max_ticks.max(ticks);
        if fast {
            delta.saw_boundary = true;
            self.counters
                .exit(&mut thread, &frame, now, counters::Clock::Window);
            return;
        }
        thread.mark_completed(frame.record);
        let (type_name, message) = match frame.failed {
            true => thread.take_error(frame.seq).unzip(),
            false => (None, None),
        };
        let error = if panicking {
            Some(Cow::Borrowed("panic"))
        } else {
            type_name.map(|e| Cow::Owned(short_type_name(e)))
        };
        let mut state = self.lock();
        self.merge(&mut state, &mut thread);
        if slot.id == 0 {
            // Idle threads' counts of the call's time are its own (fork-join).
            self.sweep_threads_to(&mut state, now, Some(frame.record));
        }
        let edge = Edge::exit_after(self.clock.delta_as_nanos(0, ticks));
        self.boundary_reading(&mut state, &thread, now, frame.record, edge);
        self.counters
            .exit(&mut thread, &frame, now, counters::Clock::Fresh);
        state.call_closed(frame.record, frame.entered);
        let nanos = self.clock.delta_as_nanos(0, ticks);
        let timed = (self.elapsed(frame.entered), nanos);
        let message = message.flatten();
        let spans = &mut state.spans;
        spans.keep_call(&frame, slot.id, timed, &error, message);
        let message = state.finish_call(frame.record, nanos, error);
        if let Some(message) = message {
            let stage = OpenStage::on_thread(&thread.stack, slot.id);
            drop(state);
            drop(thread);
            self.log_event(message, stage);
        }
    }

    /// Moves `thread`'s counters into the shared records.
    pub(super) fn merge(&self, state: &mut State, thread: &mut ThreadState) {
        let State {
            records,
            by_record,
            reused,
            ..
        } = state;
        reused.clear();
        thread.drain(|id, delta, first| {
            threaded::merge(records, id, &delta.slots);
            let record = records.get_mut(id);
            record.calls += delta.calls;
            record.threads += u32::from(first);
            record.counted.add(&delta.counted);
            if delta.completed > 0 {
                record.completed += delta.completed;
                record.wall_seconds += self.ticks_seconds(delta.wall_ticks);
                record.min_wall_seconds = record
                    .min_wall_seconds
                    .min(self.ticks_seconds(delta.min_ticks));
                record.max_wall_seconds = record
                    .max_wall_seconds
                    .max(self.ticks_seconds(delta.max_ticks));
            }
            if delta.saw_boundary {
                reused.push(id);
            }
        });
        if let (false, Some(measurement)) = (reused.is_empty(), by_record.as_mut()) {
            // The calls came after the reading they reused, the newest at most.
            measurement.reused_by(reused);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fake::Rig;

    #[test]
    fn direct_recursion_folds_into_the_open_call() {
        let rig = Rig::new();
        let main = rig.thread();
        let outer = rig.recorder.enter(&main, "walk".into());
        rig.advance_micros(10);
        let inner = rig.recorder.enter(&main, "walk".into());
        let innermost = rig.recorder.enter(&main, "walk".into());
        rig.advance_micros(10);
        rig.recorder.exit(&main, innermost);
        rig.recorder.exit(&main, inner);
        // A different stage below the folded calls nests under the one open call.
        let step = rig.recorder.enter(&main, "step".into());
        rig.recorder.exit(&main, step);
        rig.advance_micros(10);
        rig.recorder.exit(&main, outer);
        let report = rig.recorder.snapshot();
        let walk = report.stage("walk").expect("one record for the recursion");
        assert_eq!(walk.calls, 3);
        assert!(report.stage("walk/walk").is_none(), "{:?}", report.stages);
        assert!(
            (walk.wall_seconds - 30e-6).abs() < 1e-9,
            "timed once: {}",
            walk.wall_seconds
        );
        assert_eq!(report.stage("walk/step").unwrap().calls, 1);
        assert!(rig.recorder.open_calls().is_empty());
    }

    #[test]
    fn indirect_recursion_folds_into_the_open_call_of_the_same_name() {
        let rig = Rig::new();
        let main = rig.thread();
        // expr → term → expr → term ..., 1 000 deep, then unwound.
        let mut guards = Vec::new();
        for depth in 0..1_000 {
            let name = if depth % 2 == 0 { "expr" } else { "term" };
            guards.push(rig.recorder.enter(&main, name.into()));
            rig.advance_micros(1);
        }
        assert_eq!(main.lock().stack.len(), 2, "distinct names only");
        // A stage new to the recursion nests under the top of the stack.
        let factor = rig.recorder.enter(&main, "factor".into());
        rig.recorder.exit(&main, factor);
        while let Some(guard) = guards.pop() {
            rig.recorder.exit(&main, guard);
        }
        let report = rig.recorder.snapshot();
        let paths: Vec<&str> = report.stages.iter().map(|s| s.path.as_str()).collect();
        assert_eq!(paths, ["expr", "expr/term", "expr/term/factor"]);
        let (expr, term) = (
            report.stage("expr").unwrap(),
            report.stage("expr/term").unwrap(),
        );
        assert_eq!((expr.calls, term.calls), (500, 500));
        assert!(
            (expr.wall_seconds - 1e-3).abs() < 1e-9,
            "timed once: {}",
            expr.wall_seconds
        );
        assert!(
            (term.wall_seconds - 999e-6).abs() < 1e-9,
            "{}",
            term.wall_seconds
        );
        assert!(rig.recorder.open_calls().is_empty());
        // Once unwound, the same names open frames of their own again.
        let again = rig.recorder.enter(&main, "expr".into());
        assert!(matches!(again, super::Entered::Pushed(_)));
        rig.recorder.exit(&main, again);
        assert_eq!(rig.recorder.snapshot().stage("expr").unwrap().calls, 501);
    }

    #[test]
    fn recursion_does_not_fold_across_a_poll_frame() {
        let rig = Rig::new();
        let main = rig.thread();
        let outer = rig.recorder.enter(&main, "walk".into());
        let call = rig
            .recorder
            .open_async(&main, "fetch".into(), super::super::Parent::Here);
        let poll = rig.recorder.push_poll(&main, call.record).unwrap();
        let inner = rig.recorder.enter(&main, "walk".into());
        assert!(matches!(inner, super::Entered::Pushed(_)));
        rig.recorder.exit(&main, inner);
        rig.recorder.pop_poll(&main, poll);
        rig.recorder.close_async(Some(&main), call, None);
        rig.recorder.exit(&main, outer);
        let report = rig.recorder.snapshot();
        assert_eq!(report.stage("walk/fetch/walk").unwrap().calls, 1);
        assert_eq!(report.stage("walk").unwrap().calls, 1);
    }

    #[test]
    fn a_stage_on_an_idle_thread_nests_under_the_owner_threads_open_stage() {
        let rig = Rig::new();
        let main = rig.thread();
        let worker = rig.thread();
        let before = rig.recorder.enter(&worker, "predict".into());
        rig.recorder.exit(&worker, before);
        let fit = rig.recorder.enter(&main, "fit".into());
        let during = rig.recorder.enter(&worker, "predict".into());
        // Nested on the worker's own stack from there on.
        let inner = rig.recorder.enter(&worker, "score".into());
        rig.recorder.exit(&worker, inner);
        rig.recorder.exit(&worker, during);
        rig.recorder.exit(&main, fit);
        let after = rig.recorder.enter(&worker, "predict".into());
        rig.recorder.exit(&worker, after);
        let report = rig.recorder.snapshot();
        assert_eq!(report.stage("predict").unwrap().calls, 2);
        let nested = report.stage("fit/predict").expect("fork-join nesting");
        assert_eq!(nested.calls, 1);
        assert_eq!(nested.threads, 1);
        assert_eq!(report.stage("fit/predict/score").unwrap().calls, 1);
        // The owner's own idle stack is the top level, never another thread's stage.
        let top = rig.recorder.enter(&main, "load".into());
        rig.recorder.exit(&main, top);
        assert!(rig.recorder.snapshot().stage("load").is_some());
    }

    #[test]
    fn calls_of_one_path_from_two_threads_are_one_record() {
        let rig = Rig::new();
        let (a, b) = (rig.thread(), rig.thread());
        for slot in [&a, &b, &a] {
            let call = rig.recorder.enter(slot, "load".into());
            rig.advance_micros(100);
            rig.recorder.exit(slot, call);
        }
        let report = rig.recorder.snapshot();
        let load = report.stage("load").unwrap();
        assert_eq!((load.calls, load.threads), (3, 2));
        assert!(
            (load.wall_seconds - 300e-6).abs() < 1e-9,
            "{}",
            load.wall_seconds
        );
        assert!((load.max_wall_seconds - 100e-6).abs() < 1e-9);
    }

    #[test]
    fn nothing_is_recorded_after_the_end() {
        let rig = Rig::new();
        let main = rig.thread();
        let open = rig.recorder.enter(&main, "fit".into());
        rig.recorder.end(Some("SIGTERM".into()));
        rig.recorder.exit(&main, open);
        let late = rig.recorder.enter(&main, "late".into());
        rig.recorder.exit(&main, late);
        let report = rig.recorder.snapshot();
        assert!(!report.running);
        assert_eq!(report.error.as_deref(), Some("SIGTERM"));
        assert!(report.stage("late").is_none());
        assert_eq!(report.stage("fit").unwrap().calls, 1);
    }
}
