//! [`Limits`], the builder, and [`Watch`], the guard that counts a test while it runs.

use super::check;
use super::figures::{Bounds, Exceeded, Figures};
use super::rss;
use crate::heap::attach;
use crate::heap::slots;
use crate::heap::tally::Tally;
use crate::{Error, Monitor};
use std::sync::Arc;
use std::time::{Duration, Instant};
use stemmon_report::settings::{self, Setting, Value};

/// How long a finishing test waits for the threads it started to exit (their last
/// frees), at most.
const THREADS_EXIT_WAIT: Duration = Duration::from_secs(5);

/// The limits of one test. Unset limits take the `STEMMON_TEST_*` variables' values
/// (`STEMMON_TEST_MAX_HEAP`, `STEMMON_TEST_MAX_ALLOCATED`,
/// `STEMMON_TEST_MAX_ALLOCATIONS`, `STEMMON_TEST_LEAKS`, `STEMMON_TEST_MAX_RSS`) at
/// [`start`](Limits::start); a limit set here wins. Sizes read as the settings
/// table reads them: `64 MiB`, `1.5 GiB`, `0 B`.
#[derive(Debug, Default)]
#[must_use = "limits do nothing until `.start()`"]
pub struct Limits {
    pub(super) bounds: Bounds,
    #[cfg_attr(not(feature = "rayon"), allow(dead_code))] // read with the feature
    pub(super) rayon: bool,
    pub(super) bad: Option<Error>,
    /// The `STEMMON_TEST_*` defaults were read.
    pub(super) defaults_read: bool,
}

impl Limits {
    /// No limits yet, for the test named `name` (the file name of its report under
    /// `STEMMON_TEST_REPORTS`).
    pub fn new(name: impl Into<String>) -> Limits {
        let mut limits = Limits::default();
        limits.bounds.name = name.into();
        limits
    }

    fn size(mut self, setting: &'static Setting, text: &str) -> (Self, Option<u64>) {
        match setting.parse(text) {
            Ok(Value::Size(bytes)) => (self, Some(bytes)),
            Ok(_) | Err(_) => {
                self.bad.get_or_insert(Error::InvalidConfig {
                    setting: setting.name,
                    reason: format!("{text:?}: {}", setting.expected()),
                });
                (self, None)
            }
        }
    }

    /// The most heap the test may hold at once (`"64 MiB"`).
    pub fn max_heap(self, size: &str) -> Self {
        let (mut this, bytes) = self.size(&settings::MAX_HEAP, size);
        this.bounds.max_heap = bytes.or(this.bounds.max_heap);
        this
    }

    /// The most bytes the test may allocate in all (`"1 GiB"`).
    pub fn max_allocated(self, size: &str) -> Self {
        let (mut this, bytes) = self.size(&settings::MAX_ALLOCATED, size);
        this.bounds.max_allocated = bytes.or(this.bounds.max_allocated);
        this
    }

    /// The most allocations the test may make.
    pub fn max_allocations(mut self, count: u64) -> Self {
        self.bounds.max_allocations = Some(count);
        self
    }

    /// The most heap the test may leave live when it returns (`"0 B"`).
    pub fn leaks(self, size: &str) -> Self {
        let (mut this, bytes) = self.size(&settings::LEAKS, size);
        this.bounds.leaks = bytes.or(this.bounds.leaks);
        this
    }

    /// The most resident memory a process of the test's tree may reach (`"300 MiB"`).
    /// Exact where the test has its process to itself (`cargo nextest`, or the
    /// attribute's re-run under `cargo test`); here it is the process's own mark.
    pub fn max_rss(self, size: &str) -> Self {
        let (mut this, bytes) = self.size(&settings::MAX_RSS, size);
        this.bounds.max_rss = bytes.or(this.bounds.max_rss);
        this
    }

    /// Runs the test's body (through [`Watch::run`]) on a rayon pool of its own, whose
    /// threads count for the test (feature `rayon`).
    #[cfg(feature = "rayon")]
    pub fn rayon(mut self) -> Self {
        self.rayon = true;
        self
    }

    /// The limits in bytes, as the attribute gives them (already checked at compile
    /// time).
    #[doc(hidden)]
    pub fn __bytes(mut self, key: &str, value: u64) -> Self {
        let slot = match key {
            "max_heap" => &mut self.bounds.max_heap,
            "max_allocated" => &mut self.bounds.max_allocated,
            "max_allocations" => &mut self.bounds.max_allocations,
            "leaks" => &mut self.bounds.leaks,
            _ => &mut self.bounds.max_rss,
        };
        *slot = Some(value);
        self
    }

    /// Fills the unset limits from the `STEMMON_TEST_*` variables (a bad value is one
    /// warning and no limit).
    pub(super) fn with_defaults(mut self) -> Self {
        if std::mem::replace(&mut self.defaults_read, true) {
            return self;
        }
        let defaults = crate::env::test_limits();
        for (setting, value) in defaults {
            let slot = match setting.name {
                "max_heap" => &mut self.bounds.max_heap,
                "max_allocated" => &mut self.bounds.max_allocated,
                "max_allocations" => &mut self.bounds.max_allocations,
                "leaks" => &mut self.bounds.leaks,
                _ => &mut self.bounds.max_rss,
            };
            slot.get_or_insert(value);
        }
        self
    }

    /// Starts counting the calling thread (and the threads it starts) for the test.
    /// Fails on a bad size given to this builder.
    pub fn start(self) -> Result<Watch, Error> {
        let mut limits = self.with_defaults();
        if let Some(bad) = limits.bad.take() {
            return Err(bad);
        }
        Ok(Watch::begin(limits))
    }
}

/// Counts a test while it runs; [`finish`](Watch::finish) checks its limits. Dropped
/// without `finish` (and not while a panic unwinds), it checks them and panics with
/// the message of the first limit broken.
#[must_use = "the test is counted until the watch is finished or dropped"]
pub struct Watch {
    pub(super) limits: Limits,
    tally: Arc<Tally>,
    before: Option<*const Tally>,
    monitor: Option<Monitor>,
    done: bool,
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watch")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl Watch {
    fn begin(limits: Limits) -> Watch {
        // The stage table's monitor, started before counting begins (its sampler thread
        // is not the test's); a thread with a monitor of its own keeps it.
        let monitor = Monitor::builder()
            .current_thread_only()
            .log_interval(None)
            .sample_interval(Duration::from_secs(3600))
            .high_water_marks(false)
            .gpu(false)
            .start()
            .ok();
        #[cfg(all(feature = "testing", target_os = "linux", target_env = "gnu"))]
        std::hint::black_box(super::spawn::linked());
        let tally = Arc::new(Tally::default());
        let before = attach::enter(&tally);
        Watch {
            limits,
            tally,
            before,
            monitor,
            done: false,
        }
    }

    /// Runs `body` as the test: on the calling thread, or on the test's own rayon pool
    /// with `Limits::rayon` (feature `rayon`).
    pub fn run<R: Send>(&self, body: impl FnOnce() -> R + Send) -> R {
        #[cfg(feature = "rayon")]
        if self.limits.rayon {
            return super::pool::install(&self.tally, body);
        }
        body()
    }

    /// The figures so far.
    pub fn figures(&self) -> Figures {
        let counted = slots::installed() && self.before.is_some();
        let now = self.tally.figures();
        Figures {
            heap_counted: counted,
            allocations: now.allocations,
            allocated_bytes: now.allocated,
            peak_heap_bytes: now.peak.max(0) as u64,
            live_bytes: now.live,
            max_rss_bytes: None,
        }
    }

    /// Stops counting and checks the limits: the figures, or the first limit broken
    /// with the test's stage table.
    pub fn finish(mut self) -> Result<Figures, Exceeded> {
        self.end()
    }

    fn end(&mut self) -> Result<Figures, Exceeded> {
        self.done = true;
        // Only a leak needs the threads' last frees (the other figures only rise).
        let deadline = Instant::now() + THREADS_EXIT_WAIT;
        while self.limits.bounds.leaks.is_some()
            && self.tally.threads() > 0
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(1));
        }
        let mut figures = self.figures();
        if let Some(before) = self.before.take() {
            attach::leave(before);
        }
        if self.limits.bounds.max_rss.is_some() && !self.limits.bounds.rss_elsewhere {
            figures.max_rss_bytes = rss::own_peak();
        }
        let report = self.monitor.take().map(Monitor::finish);
        check::limits(&self.limits.bounds, figures, report.as_ref())
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let result = self.end();
        if let Err(exceeded) = result {
            if !std::thread::panicking() {
                panic!("{exceeded}");
            }
        }
    }
}
