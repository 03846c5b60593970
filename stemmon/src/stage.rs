//! The guard of one synchronous stage call, and the functions that open one.

use crate::context;
use crate::recorder::{Entered, StageName};
use std::marker::PhantomData;

/// The guard of one open stage: the stage ends when it is dropped.
///
/// Returned by [`Monitor::stage`](crate::Monitor::stage) and [`stage`](crate::stage());
/// `#[monitored]` holds one for the length of each call. If the guard is dropped while
/// a panic unwinds, the call is recorded as failed with `error: "panic"`. A guard
/// belongs to the thread that opened it (it is neither `Send` nor `Sync`).
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
    entered: Entered,
    _not_send: PhantomData<*const ()>,
}

impl Stage {
    #[inline(always)]
    pub(crate) fn inert() -> Stage {
        Stage::new(0, Entered::Ignored)
    }

    #[inline(always)]
    pub(crate) fn new(epoch: u64, entered: Entered) -> Stage {
        Stage {
            epoch,
            entered,
            _not_send: PhantomData,
        }
    }

    /// Records that this call failed with `error`: its type (a `std::any::type_name`,
    /// shortened when the stage closes) and its `Display` text, if any. Inline, so that
    /// an inert guard or an `Ok` costs a branch, not a call.
    #[inline(always)]
    pub(crate) fn set_error(&self, error: Option<crate::__private::CallError>) {
        // A folded (directly recursive) call shares its parent's frame: the outermost
        // call's own result decides whether that one failed.
        if let (true, Some(error), Entered::Pushed(seq)) = (self.epoch != 0, error, self.entered) {
            record_error(self.epoch, seq, error);
        }
    }
}

impl Drop for Stage {
    #[inline]
    fn drop(&mut self) {
        if self.epoch != 0 {
            close(self);
        }
    }
}

#[cold]
#[inline(never)]
fn record_error(epoch: u64, seq: u32, error: crate::__private::CallError) {
    context::with_epoch(epoch, |a| {
        a.recorder
            .set_error(&a.slot, seq, error.type_name, error.message);
    });
}

#[cold]
#[inline(never)]
fn close(stage: &Stage) {
    context::with_epoch(stage.epoch, |a| a.recorder.exit(&a.slot, stage.entered));
}

impl std::fmt::Debug for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stage")
            .field("active", &(self.epoch != 0))
            .finish()
    }
}

/// Opens a stage named `name` on the monitor that covers this thread; an inert guard
/// when there is none. This is what `#[monitored]` expands to.
#[inline(always)]
pub fn enter(name: &'static str) -> Stage {
    if !context::any_running() {
        return Stage::inert();
    }
    enter_named(StageName::Borrowed(name))
}

// Kept out of line so that the check above stays small enough to inline at every call site.
#[cold]
#[inline(never)]
fn enter_named(name: StageName) -> Stage {
    context::with_attachment(|a| {
        let entered = a.recorder.enter(&a.slot, name);
        Stage::new(a.recorder.epoch, entered)
    })
    .unwrap_or_else(Stage::inert)
}

/// The report file of the monitor that covers the calling thread (the process-wide one
/// that `#[monitor_main]` starts, or a thread-only one started here), as it writes it:
/// the `output` setting after `STEMMON_OUTPUT`. `None` with no monitor, or one that
/// writes no file.
///
/// ```
/// let monitor = stemmon::Monitor::builder()
///     .log_interval(None)
///     .output("target/stemmon/doc-output-path.json")
///     .start()?;
/// let path = stemmon::output_path();
/// assert_eq!(path.as_deref(), Some(std::path::Path::new("target/stemmon/doc-output-path.json")));
/// monitor.finish();
/// assert_eq!(stemmon::output_path(), None);
/// # std::fs::remove_file("target/stemmon/doc-output-path.json").ok();
/// # Ok::<(), stemmon::Error>(())
/// ```
pub fn output_path() -> Option<std::path::PathBuf> {
    context::with_attachment(|a| a.recorder.config.output.clone()).flatten()
}

/// Opens a stage on the monitor that covers the calling thread: the process-wide one,
/// or a thread-only one started here. With no monitor, or an empty name, the guard
/// records nothing.
///
/// ```
/// let monitor = stemmon::Monitor::builder().log_interval(None).start()?;
/// std::thread::scope(|scope| {
///     scope.spawn(|| {
///         let _load = stemmon::stage("load");
///         // ... work on another thread, recorded all the same ...
///     });
/// });
/// let report = monitor.finish();
/// assert_eq!(report.stage("load").unwrap().calls, 1);
/// # Ok::<(), stemmon::Error>(())
/// ```
pub fn stage(name: impl Into<std::borrow::Cow<'static, str>>) -> Stage {
    let name = name.into();
    if name.is_empty() || !context::any_running() {
        return Stage::inert();
    }
    enter_named(name)
}
