//! Stage guards and the aggregated record of each stage path.

use crate::context;
use crate::memory::TreeReading;
use crate::monitor::Shared;
use crate::report::{HighWater, Peaks};
use std::borrow::Cow;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

pub(crate) type StageName = Cow<'static, str>;

/// The guard of one open stage: the stage ends when it is dropped.
///
/// Returned by [`Monitor::stage`](crate::Monitor::stage); `#[monitored]` holds one for the
/// length of each call. If the guard is dropped while a panic unwinds, the call is
/// recorded as failed with `error: "panic"`. A guard belongs to the thread that opened
/// it (it is neither `Send` nor `Sync`).
///
/// ```
/// # fn main() -> Result<(), stemmon::Error> {
/// let monitor = stemmon::Monitor::builder().log_interval(None).start()?;
/// {
///     let _load = monitor.stage("load")?;
///     // ... work measured as "load" ...
/// }
/// let report = monitor.finish();
/// assert_eq!(report.stage("load").unwrap().calls, 1);
/// # Ok(())
/// # }
/// ```
#[must_use = "the stage ends when the guard is dropped: `let _ = ...` ends it at once; bind it \
              to a named variable such as `let _stage = ...`"]
pub struct Stage {
    /// The monitor's epoch, 0 for a guard that records nothing.
    epoch: u64,
    seq: u64,
    _not_send: PhantomData<*const ()>,
}

impl Stage {
    #[inline(always)]
    pub(crate) fn inert() -> Stage {
        Stage::new(0, 0)
    }

    #[inline(always)]
    pub(crate) fn new(epoch: u64, seq: u64) -> Stage {
        Stage {
            epoch,
            seq,
            _not_send: PhantomData,
        }
    }

    /// Records that this call failed with an error of the type named `type_name`
    /// (a `std::any::type_name`); shortened when the stage closes.
    #[inline]
    pub(crate) fn set_error(&self, type_name: Option<&'static str>) {
        if let (true, Some(type_name)) = (self.epoch != 0, type_name) {
            self.with_monitor(|shared| shared.set_error(self.seq, type_name));
        }
    }

    /// Runs `f` with the monitor that opened this stage, if it is still this thread's.
    fn with_monitor(&self, f: impl FnOnce(&Shared)) {
        context::with_active(|shared| {
            // A guard that outlived its monitor, or met a newer one at the same address, is a no-op.
            if shared.epoch == self.epoch {
                f(shared);
            }
        });
    }
}

impl Drop for Stage {
    #[inline]
    fn drop(&mut self) {
        if self.epoch != 0 {
            close_stage(self);
        }
    }
}

#[inline(never)]
fn close_stage(stage: &Stage) {
    stage.with_monitor(|shared| shared.exit(stage.seq));
}

impl std::fmt::Debug for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stage")
            .field("active", &(self.epoch != 0))
            .finish()
    }
}

/// Counters and peaks shared by stage records and the whole run.
#[derive(Clone, Debug, Default)]
pub(crate) struct Stats {
    pub(crate) samples: u64,
    pub(crate) partial_rss_samples: u64,
    pub(crate) peak_process_count: u32,
    pub(crate) peaks: Peaks,
    // peaks: the kernel's marks (SPEC §8).
    pub(crate) high_water: HighWater,
    /// peaks: the largest `parent mark + reaped peak` of the intervals this record
    /// overlapped since the last full sample; that sample adds the descendants' marks.
    pub(crate) pending_local: Option<u64>,
    /// peaks: the record saw only a reused boundary reading, whose interval ended before
    /// it; the next fresh reading's interval is the one it overlaps.
    pub(crate) awaiting_interval: bool,
}

/// peaks: what a fresh stage-boundary reading says about the interval it closes.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct BoundaryInterval {
    /// The parent's peak in the interval (`VmHWM`, reset at each reading).
    pub(crate) parent_hwm: Option<u64>,
    /// The peak of the children reaped in the interval.
    pub(crate) reaped: Option<u64>,
    /// The live descendants as last sampled: the best figure until the next sample.
    pub(crate) children_rss: u64,
}

fn raise(peak: &mut Option<u64>, value: Option<u64>) -> bool {
    match (value, *peak) {
        (Some(v), Some(p)) if v <= p => false,
        (Some(v), _) => {
            *peak = Some(v);
            true
        }
        (None, _) => false,
    }
}

impl Stats {
    /// Counts a full tree sample; returns whether it raised the tree RSS peak.
    pub(crate) fn apply_sample(&mut self, reading: &TreeReading) -> bool {
        self.samples += 1;
        self.partial_rss_samples += u64::from(!reading.rss_complete);
        self.peak_process_count = self.peak_process_count.max(reading.process_count);
        let p = &mut self.peaks;
        raise(&mut p.peak_parent_rss_bytes, reading.parent_rss);
        raise(&mut p.peak_children_rss_bytes, reading.children_rss);
        raise(&mut p.peak_tree_uss_bytes, reading.tree_uss);
        raise(&mut p.peak_tree_pss_bytes, reading.tree_pss);
        raise(
            &mut p.peak_tree_physical_footprint_bytes,
            reading.tree_physical_footprint,
        );
        let raised = raise(&mut p.peak_tree_rss_bytes, reading.tree_rss);
        self.apply_sample_interval(reading); // peaks:
        raised
    }

    /// peaks: counts the interval that a full sample closes (marks, reaped peaks, cgroup).
    pub(crate) fn apply_sample_interval(&mut self, reading: &TreeReading) {
        let h = &mut self.high_water;
        raise(&mut h.peak_parent_hwm_bytes, reading.parent_hwm);
        raise(
            &mut h.peak_reaped_child_rss_bytes,
            reading.reaped_child_peak,
        );
        let widened = self
            .pending_local
            .take()
            .zip(reading.children_hwm)
            .map(|(local, children)| local + children);
        raise(
            &mut h.peak_tree_rss_bound_bytes,
            reading.tree_rss_bound.max(widened),
        );
        raise(&mut h.peak_cgroup_memory_bytes, reading.cgroup_peak);
        if let Some(kills) = reading.oom_kills {
            h.oom_kills = Some(h.oom_kills.unwrap_or(0) + kills);
        }
        self.awaiting_interval = false;
    }

    /// peaks: closes, at a full sample, the interval of a record that is no longer open:
    /// its bound gets the live descendants' marks of that sample.
    pub(crate) fn close_interval(&mut self, children_hwm: Option<u64>) {
        if let (Some(local), Some(children)) = (self.pending_local.take(), children_hwm) {
            raise(
                &mut self.high_water.peak_tree_rss_bound_bytes,
                Some(local + children),
            );
        }
    }

    /// peaks: counts the interval a fresh boundary reading closes.
    pub(crate) fn apply_interval(&mut self, interval: &BoundaryInterval) {
        let Some(hwm) = interval.parent_hwm else {
            return;
        };
        let h = &mut self.high_water;
        raise(&mut h.peak_parent_hwm_bytes, Some(hwm));
        raise(&mut h.peak_reaped_child_rss_bytes, interval.reaped);
        let local = hwm + interval.reaped.unwrap_or(0);
        raise(
            &mut h.peak_tree_rss_bound_bytes,
            Some(local + interval.children_rss),
        );
        self.pending_local = self.pending_local.max(Some(local));
        self.awaiting_interval = false;
    }

    /// Counts a stage-boundary reading: the parent read now, the descendants as last
    /// sampled. Not a sample; returns whether it raised the tree RSS peak.
    pub(crate) fn apply_boundary(&mut self, reading: &TreeReading) -> bool {
        self.peak_process_count = self.peak_process_count.max(reading.process_count);
        let p = &mut self.peaks;
        raise(&mut p.peak_parent_rss_bytes, reading.parent_rss);
        raise(&mut p.peak_children_rss_bytes, reading.children_rss);
        raise(&mut p.peak_tree_rss_bytes, reading.tree_rss)
    }
}

/// The aggregate of every call of one stage path.
#[derive(Debug)]
pub(crate) struct Record {
    pub(crate) name: StageName,
    pub(crate) path: String,
    pub(crate) parent: Option<u32>,
    pub(crate) calls: u64,
    pub(crate) completed: u64,
    pub(crate) errors: u64,
    pub(crate) start_seconds: f64,
    pub(crate) wall_seconds: f64,
    pub(crate) min_wall_seconds: f64,
    pub(crate) max_wall_seconds: f64,
    pub(crate) error: Option<String>,
    pub(crate) stats: Stats,
}

impl Record {
    pub(crate) fn new(name: StageName, path: String, parent: Option<u32>, start: f64) -> Record {
        Record {
            name,
            path,
            parent,
            calls: 0,
            completed: 0,
            errors: 0,
            start_seconds: start,
            wall_seconds: 0.0,
            min_wall_seconds: f64::INFINITY,
            max_wall_seconds: 0.0,
            error: None,
            stats: Stats::default(),
        }
    }
}

/// Shortens a `std::any::type_name` to the last segment of every path in it:
/// `alloc::boxed::Box<dyn core::error::Error>` becomes `Box<dyn Error>`.
pub(crate) fn short_type_name(full: &str) -> String {
    let mut out = String::with_capacity(full.len());
    let mut segment_start = 0;
    for (i, c) in full.char_indices() {
        if c == ':' {
            segment_start = i + 1;
        } else if !(c.is_alphanumeric() || c == '_') {
            out.push_str(&full[segment_start..i]);
            out.push(c);
            segment_start = i + c.len_utf8();
        }
    }
    out.push_str(&full[segment_start..]);
    out
}

/// The stage of one `#[monitored] async fn` call: opened at the first poll, entered on
/// every poll, closed when the future completes or, as `"cancelled"`, when it is dropped.
#[doc(hidden)]
pub struct AsyncStage {
    name: &'static str,
    open: Option<OpenAsync>,
    completed: bool,
    error: Option<&'static str>,
}

struct OpenAsync {
    shared: Arc<Shared>,
    record: u32,
    seq: u64,
    started: u64,
}

impl AsyncStage {
    /// Records the error type this call returned (see [`crate::__private::ErrorOfResult`]).
    pub fn set_error(&mut self, type_name: Option<&'static str>) {
        if type_name.is_some() {
            self.error = type_name;
        }
    }
}

impl Drop for AsyncStage {
    fn drop(&mut self) {
        if let Some(open) = self.open.take() {
            let error = if std::thread::panicking() {
                Some(Cow::Borrowed("panic"))
            } else if !self.completed {
                Some(Cow::Borrowed("cancelled"))
            } else {
                self.error.map(|e| Cow::Owned(short_type_name(e)))
            };
            open.shared
                .close_async(open.record, open.seq, open.started, error);
        }
    }
}

/// A future wrapped by `#[monitored] async fn`; yields the output and the still-open
/// stage, so the expansion can record an `Err` before the stage closes.
#[doc(hidden)]
pub struct Instrumented<F> {
    future: F,
    stage: Option<AsyncStage>,
}

/// Wraps the body of a `#[monitored] async fn`.
#[doc(hidden)]
pub fn instrument<R, F: Future<Output = R>>(name: &'static str, future: F) -> Instrumented<F> {
    Instrumented {
        future,
        stage: Some(AsyncStage {
            name,
            open: None,
            completed: false,
            error: None,
        }),
    }
}

impl<F: Future> Future for Instrumented<F> {
    type Output = (F::Output, AsyncStage);

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: `future` is structurally pinned and never moved; `stage` is not pinned,
        // and `Instrumented` has no `Drop` impl of its own.
        let this = unsafe { self.get_unchecked_mut() };
        let future = unsafe { Pin::new_unchecked(&mut this.future) };
        let Some(stage) = this.stage.as_mut() else {
            panic!("`Instrumented` polled after it completed");
        };
        if stage.open.is_none() {
            stage.open = context::with_active(|shared| {
                // SAFETY: the monitor holds a strong count on `shared` while it is active.
                let shared = unsafe {
                    Arc::increment_strong_count(shared);
                    Arc::from_raw(shared as *const Shared)
                };
                let (record, seq, started) = shared.open_async(stage.name);
                OpenAsync {
                    shared,
                    record,
                    seq,
                    started,
                }
            });
        }
        // Enter the stage for this poll when polled on its monitor's thread.
        let frame = stage.open.as_ref().and_then(|open| {
            context::with_active(|active| {
                if std::ptr::eq(active, Arc::as_ptr(&open.shared)) {
                    active.push_poll_frame(open.record)
                } else {
                    None
                }
            })?
        });
        let polled = future.poll(cx);
        if let Some(seq) = frame {
            context::with_active(|active| active.pop_poll_frame(seq));
        }
        match polled {
            Poll::Pending => Poll::Pending,
            Poll::Ready(output) => {
                let mut stage = this.stage.take().expect("checked above");
                stage.completed = true;
                Poll::Ready((output, stage))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_type_names() {
        assert_eq!(short_type_name("std::io::error::Error"), "Error");
        assert_eq!(
            short_type_name("alloc::boxed::Box<dyn core::error::Error + core::marker::Send>"),
            "Box<dyn Error + Send>"
        );
        assert_eq!(short_type_name("my_crate::PredictError"), "PredictError");
        assert_eq!(short_type_name("(u8, a::B)"), "(u8, B)");
    }
}
