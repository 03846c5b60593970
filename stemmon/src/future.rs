//! The stage of one `#[monitored] async fn` call: it takes its path at the first poll,
//! is entered on every poll (on whichever thread polls it), and closes when the future
//! completes or, as `"cancelled"`, when it is dropped before.

use crate::context;
use crate::recorder::{short_type_name, OpenCall, Parent, Recorder, StageName, ThreadSlot};
use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// The open call of an async stage.
#[doc(hidden)]
pub struct AsyncStage {
    name: &'static str,
    open: Option<OpenAsync>,
    completed: bool,
    error: Option<&'static str>,
}

struct OpenAsync {
    recorder: Arc<Recorder>,
    call: OpenCall,
}

/// The stage entered for one poll on the polling thread: dropped when the poll
/// returns or unwinds, so a panicking poll leaves nothing open on that thread.
struct PollFrame<'a> {
    recorder: &'a Recorder,
    slot: Arc<ThreadSlot>,
    seq: u32,
}

impl PollFrame<'_> {
    /// Enters `open` for one poll, if the calling thread records to its monitor.
    fn enter(open: &OpenAsync) -> Option<PollFrame<'_>> {
        context::with_attachment(|a| {
            if !Arc::ptr_eq(&a.recorder, &open.recorder) {
                return None;
            }
            let seq = a.recorder.push_poll(&a.slot, open.call.record)?;
            Some(PollFrame {
                recorder: &open.recorder,
                slot: Arc::clone(&a.slot),
                seq,
            })
        })?
    }
}

impl Drop for PollFrame<'_> {
    fn drop(&mut self) {
        self.recorder.pop_poll(&self.slot, self.seq);
    }
}

impl AsyncStage {
    /// Records the error this call returned (see [`crate::__private::ErrorOf`]): its
    /// type's name; an async call keeps no span, so no `Display` text either.
    pub fn set_error(&mut self, error: Option<crate::__private::CallError>) {
        if let Some(error) = error {
            self.error = Some(error.type_name);
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
            let (recorder, call) = (&open.recorder, open.call);
            context::with_own(recorder.epoch, |own| {
                recorder.close_async(own.map(|a| &*a.slot), call, error);
            });
        }
    }
}

pin_project_lite::pin_project! {
    /// A future wrapped by `#[monitored] async fn`; yields the output and the still-open
    /// stage, so the expansion can record an `Err` before the stage closes.
    #[doc(hidden)]
    pub struct Instrumented<F> {
        #[pin]
        future: F,
        stage: Option<AsyncStage>,
    }
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
        let this = self.project();
        let Some(stage) = this.stage.as_mut() else {
            panic!("`Instrumented` polled after it completed");
        };
        if stage.open.is_none() {
            // The path is fixed here, at the first poll, and kept across threads.
            stage.open = context::with_attachment(|a| OpenAsync {
                recorder: Arc::clone(&a.recorder),
                call: a
                    .recorder
                    .open_async(&a.slot, StageName::Borrowed(stage.name), Parent::Here),
            });
        }
        // Enter the stage for this poll when the polling thread records to its monitor.
        let frame = stage.open.as_ref().and_then(PollFrame::enter);
        let polled = this.future.poll(cx);
        drop(frame);
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
