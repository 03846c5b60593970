//! `Monitor`: the lifecycle of a monitor (start, stage, summary, finish, drop).

use crate::config::Config;
use crate::context;
use crate::error::Error;
use crate::memory;
use crate::publish::{Moment, Publisher};
use crate::recorder::{Event, Line, OpenStage, Recorder, RunInfo, StageName};
use crate::report::Report;
use crate::sampler;
use crate::sources::SampleReaders;
use crate::stage::Stage;
use std::borrow::Cow;
use std::marker::PhantomData;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

/// The sampler's channel, its thread, and where the thread hands back its readers.
type SamplerThread = (Sender<Event>, JoinHandle<()>, Receiver<SampleReaders>);

/// How long `finish` waits for the sampler thread to hand its readers back. It takes
/// a last reading of the measurement sources first (NVML, a few milliseconds); one held
/// in a driver's call is left behind, and the last sample is taken without it.
const SAMPLER_WAIT: Duration = Duration::from_millis(100);

/// A running monitor: samples the process tree in the background, records stages from
/// every thread of the process, and writes the report.
///
/// Started by [`MonitorBuilder::start`](crate::MonitorBuilder::start), it is the process's monitor: `#[monitored]`
/// calls and [`stage`](crate::stage()) on any thread record to it (see the book's `guide/threads.md`,
/// Threads). With [`current_thread_only`](crate::MonitorBuilder::current_thread_only) it
/// covers the starting thread alone. The handle belongs to the thread that started it
/// (it is neither `Send` nor `Sync`).
///
/// ```no_run
/// use std::time::Duration;
///
/// fn main() -> Result<(), stemmon::Error> {
///     let monitor = stemmon::Monitor::builder()
///         .sample_interval(Duration::from_millis(500))
///         .output("report.json")
///         .start()?;
///     {
///         let _fit = monitor.stage("fit")?;
///         // ... fit a model ...
///     }
///     let report = monitor.finish();
///     println!("peak tree RSS: {:?} bytes", report.peaks.peak_tree_rss_bytes);
///     Ok(())
/// }
/// ```
///
/// Dropping a monitor without [`finish`](Monitor::finish) finalizes it as well; when
/// that happens during a panic, the report's `error` is `"panic"`.
#[must_use = "the monitor finishes when dropped: bind it, e.g. `let monitor = ...`"]
pub struct Monitor {
    recorder: Arc<Recorder>,
    publisher: Arc<Publisher>,
    /// Makes a tree reader on this monitor's ledger for a last sample without the
    /// sampler's own.
    spare: crate::sys::ReaderHandle,
    sampler: Option<SamplerThread>,
    finished: bool,
    _not_send: PhantomData<*const ()>,
}

// A panic cannot leave the monitor inconsistent: its state sits behind locks whose
// poisoning is ignored, and a stage dropped while unwinding is recorded as failed.
impl std::panic::UnwindSafe for Monitor {}
impl std::panic::RefUnwindSafe for Monitor {}

impl std::fmt::Debug for Monitor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Monitor")
            .field("config", &self.recorder.config)
            .field("sampler", &self.recorder.info.sampler)
            .finish_non_exhaustive()
    }
}

impl Monitor {
    pub(crate) fn start(config: Config) -> Result<Monitor, Error> {
        let readers = crate::sys::Readers::new(memory::ReaderSettings::of(&config));
        Monitor::start_with(config, readers)
    }

    fn start_with(config: Config, readers: crate::sys::Readers) -> Result<Monitor, Error> {
        let (host, labels) = crate::identity::collect(&config)?;
        let exporter = crate::export::Exporter::from_config(&config, &host, &labels)?;
        let crate::sys::Readers {
            tree: reader,
            boundary,
            marks,
            spare,
        } = readers;
        let info = RunInfo {
            sampler: reader.name(),
            platform: platform(),
            run_id: crate::identity::run_id(&host),
            start_unix_seconds: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |since| since.as_secs_f64()),
            host,
            labels,
        };
        let publisher = Arc::new(Publisher::new(&config, exporter));
        let clock = crate::clock::shared().clone();
        let mut sources = crate::sources::open(&config);
        // The tree's memory reads this process at stage boundaries with `boundary`.
        sources.push(crate::sources::tree::open(boundary, marks, &config));
        let recorder = Arc::new(Recorder::new(config, info, clock, &mut sources));
        // What each source says before it is opened (a GPU turned off, not opened yet).
        recorder.take_sections(&mut sources);
        context::install(&recorder)?;
        // The first sample reads the tree and the measurements of kernel files (the
        // cgroup, descriptors, pressure); a driver's (NVML) is opened and read on the
        // sampler thread only, never on the program's: unopened, it reads nothing.
        let mut reader = SampleReaders {
            tree: reader,
            sources,
        };
        publisher.sample(&recorder, &mut reader);
        let (events, received) = mpsc::channel();
        let (hand_back, handed) = mpsc::channel();
        recorder.connect(events.clone());
        let thread = {
            let recorder = Arc::clone(&recorder);
            let publisher = Arc::clone(&publisher);
            std::thread::Builder::new()
                .name("stemmon-sampler".into())
                .spawn(move || {
                    let mut reader = sampler::run(&recorder, &publisher, reader, &received);
                    // The sources end here too (NVML's shutdown): `finish` samples the
                    // tree alone.
                    for source in &mut reader.sources {
                        source.close();
                    }
                    let _ = hand_back.send(reader);
                })
        };
        let thread = match thread {
            Ok(thread) => thread,
            Err(error) => {
                recorder.end(None);
                context::uninstall(&recorder);
                return Err(Error::Spawn(error));
            }
        };
        recorder.log_event(Line::Text("started".to_owned()), OpenStage::Workflow);
        Ok(Monitor {
            recorder,
            publisher,
            spare,
            sampler: Some((events, thread, handed)),
            finished: false,
            _not_send: PhantomData,
        })
    }

    /// Opens a stage that ends when the returned guard is dropped. Stages opened while
    /// another is open nest inside it; calls of the same path are aggregated.
    ///
    /// Fails if `name` is empty.
    pub fn stage(&self, name: impl Into<Cow<'static, str>>) -> Result<Stage, Error> {
        let name: StageName = name.into();
        if name.is_empty() {
            return Err(Error::EmptyStageName);
        }
        Ok(context::with_attachment(|a| {
            if a.recorder.epoch == self.recorder.epoch {
                Stage::new(a.recorder.epoch, a.recorder.enter(&a.slot, name))
            } else {
                Stage::inert()
            }
        })
        .unwrap_or_else(Stage::inert))
    }

    /// A snapshot of the report so far; the monitor keeps running.
    pub fn summary(&self) -> Report {
        let mut report = self.recorder.snapshot();
        self.publisher.stamp(&mut report);
        report
    }

    /// Takes a last sample, logs `finished`, writes the report and returns it.
    pub fn finish(mut self) -> Report {
        self.finalize(None, None)
    }

    /// Records the `Display` text of `main`'s `Err` for the report's `error_message`
    /// (`#[monitor_main]`, before [`finish_with_error`](Monitor::finish_with_error)).
    pub(crate) fn set_error_message(&self, message: Option<Box<str>>) {
        self.recorder.set_run_message(message);
    }

    /// Finishes like [`finish`](Monitor::finish), with `error` as the run's failure in
    /// the report's `error` and the `failed (<error>)` line: what `#[monitor_main]` does
    /// when `main` returns `Err`, and `stemmon run` when the command was killed.
    pub fn finish_with_error(mut self, error: impl Into<String>) -> Report {
        self.finalize(Some(error.into()), None)
    }

    /// Records a child of this process that has exited and is about to be reaped (an
    /// orphan `stemmon run` adopted as a subreaper): its exit code and final CPU go to
    /// the report's `processes`, even if no sample ever saw it. Call it before the reap.
    pub fn note_exited_child(&self, pid: u32) {
        // The monitor's own helper (NVML's) is no process of the tree.
        if crate::sources::note_helper_end(pid) {
            return;
        }
        if let Some(child) = crate::sys::exited_child(pid) {
            self.recorder.child_exited(&child);
        }
    }

    /// Finishes the monitor of a command `stemmon run` watched, with how it ended: the
    /// report's `exit_code`, and its `error` for a failure (`"exit 3"`, `"SIGKILL"`),
    /// so that a failed run's report never reads as a good one. The last sample is
    /// taken before the caller reaps the command, whose final interval it reads.
    pub fn finish_command(mut self, exit: CommandExit) -> Report {
        let (error, code) = match exit {
            CommandExit::Code(0) => (None, 0),
            CommandExit::Code(code) => (Some(format!("exit {code}")), code),
            CommandExit::Signal { number, name } => (Some(name), 128 + number),
        };
        self.finalize(error, Some(code))
    }

    /// Makes this the monitor that SIGINT, SIGTERM and `process::exit` finalize
    /// (`#[monitor_main]` calls it, with `signals::install(finalize_process_monitor)`).
    pub(crate) fn finalize_on_endings(&self) {
        *ENDINGS.lock().unwrap_or_else(PoisonError::into_inner) = Some(Ending {
            recorder: Arc::clone(&self.recorder),
            publisher: Arc::clone(&self.publisher),
            spare: self.spare.clone(),
        });
    }

    fn finalize(&mut self, error: Option<String>, exit_code: Option<i32>) -> Report {
        if self.finished {
            return self.recorder.snapshot();
        }
        self.finished = true;
        // Held to the end, so a signal waits for this report rather than race it.
        let mut endings = ENDINGS.lock().unwrap_or_else(PoisonError::into_inner);
        if endings
            .as_ref()
            .is_some_and(|ending| Arc::ptr_eq(&ending.recorder, &self.recorder))
        {
            *endings = None;
        }
        let mut reader = match self.sampler.take() {
            Some((events, thread, handed)) => {
                let _ = events.send(Event::Stop);
                // A sampler held in a driver's call is left to end by itself: it
                // samples and publishes nothing once the run has ended.
                let reader = handed.recv_timeout(SAMPLER_WAIT).ok();
                if reader.is_some() {
                    let _ = thread.join();
                }
                reader
            }
            None => None,
        }
        .unwrap_or_else(|| SampleReaders {
            tree: self.spare.tree_reader(),
            // The sampler's are held in a driver's call: the core's anew.
            sources: crate::sources::core(&self.recorder.config),
        });
        // The last sample reads the tree and the measurements of kernel files (the GPU,
        // closed on the sampler thread, reads nothing); a helper process ends after it,
        // with `reader`.
        let report = finish_run(
            &self.recorder,
            &self.publisher,
            &mut reader,
            error,
            exit_code,
        );
        drop(reader);
        context::uninstall(&self.recorder);
        drop(endings);
        report
    }
}

/// How the command `stemmon run` watched ended, for [`Monitor::finish_command`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CommandExit {
    /// It exited with this code.
    Code(i32),
    /// Signal `number`, called `name` (`"SIGKILL"`), killed it.
    Signal {
        /// The signal's number.
        number: i32,
        /// Its name, the report's `error`.
        name: String,
    },
}

/// What a signal or `process::exit` finalizes.
struct Ending {
    recorder: Arc<Recorder>,
    publisher: Arc<Publisher>,
    /// Makes a tree reader on the monitor's ledger (the sampler still holds its own).
    spare: crate::sys::ReaderHandle,
}

/// The monitor `#[monitor_main]` started, until it finishes.
static ENDINGS: Mutex<Option<Ending>> = Mutex::new(None);

/// `<os>-<kernel>-<arch>`, for the report's `platform`.
fn platform() -> String {
    let kernel = sysinfo::System::kernel_version().unwrap_or_else(|_| "unknown".into());
    format!(
        "{}-{}-{}",
        std::env::consts::OS,
        kernel,
        std::env::consts::ARCH
    )
}

/// The finalizer `signals` calls: from the `stemmon-signals` thread with the signal's
/// name, or from the exit hook with `None`. Does nothing once `finish` ran.
pub(crate) fn finalize_process_monitor(error: Option<&'static str>) {
    let ending = ENDINGS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
    if let Some(Ending {
        recorder,
        publisher,
        spare,
    }) = ending
    {
        // The sampler still holds its reader: another on the same ledger continues
        // from its last sample, so the final interval keeps its reaped peaks.
        let mut reader = SampleReaders {
            tree: spare.tree_reader(),
            sources: crate::sources::core(&recorder.config),
        };
        finish_run(
            &recorder,
            &publisher,
            &mut reader,
            error.map(str::to_owned),
            None,
        );
    }
}

/// Ends a run, whatever ends it (`finish`, a drop, a signal, `process::exit`, `stemmon
/// run`'s command exiting): a last sample with `reader`, the end of recording with the
/// run's `error` and the command's `exit_code`, the `finished` or `failed` line, and the
/// final report written and returned.
fn finish_run(
    recorder: &Recorder,
    publisher: &Publisher,
    reader: &mut SampleReaders,
    error: Option<String>,
    exit_code: Option<i32>,
) -> Report {
    // The last sample reads every figure, those read less often than sampled too.
    reader.tree.refresh_all();
    publisher.sample(recorder, reader);
    let line = match &error {
        Some(error) => format!("failed ({error})"),
        None => "finished".to_owned(),
    };
    recorder.end_with(error, exit_code);
    let last = [(Line::Text(line), OpenStage::OwnerNow)];
    publisher.publish(recorder, &last, Moment::Final)
}

impl Drop for Monitor {
    fn drop(&mut self) {
        if !self.finished {
            let error = std::thread::panicking().then(|| "panic".to_owned());
            self.finalize(error, None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::TreeReader;
    use crate::memory::TreeReading;
    use std::io;
    use std::time::Duration;

    /// A reader whose every sample fails, as when `/proc` is not mounted.
    struct Denied;

    impl TreeReader for Denied {
        fn name(&self) -> &'static str {
            "denied"
        }

        fn read_tree(&mut self, _root: u32) -> io::Result<TreeReading> {
            Err(io::Error::new(io::ErrorKind::PermissionDenied, "no access"))
        }
    }

    #[test]
    fn failed_samples_are_the_monitors_error_not_the_programs() {
        let builder = Monitor::builder()
            .log_interval(None)
            .current_thread_only()
            .sample_interval(Duration::from_millis(5));
        let mut readers = crate::sys::Readers::new(memory::ReaderSettings::of(&builder.config));
        readers.tree = Box::new(Denied);
        let monitor = Monitor::start_with(builder.config, readers)
            .expect("a failing reader does not stop the start");
        {
            let _stage = monitor.stage("work").unwrap();
            std::thread::sleep(Duration::from_millis(30));
        }
        let report = monitor.finish();
        let error = report.sampling_error.as_deref().unwrap();
        assert_eq!(error, "could not read the process tree: no access");
        assert!(
            report.sampling_attempts >= 3,
            "{}",
            report.sampling_attempts
        );
        assert_eq!(report.samples, 0);
        assert_eq!(report.latest_sample, None);
        assert_eq!(report.sampler, "denied");
        assert_eq!(report.error, None);
        // Stage timing and the parent's boundary readings go on regardless.
        let work = report.stage("work").unwrap();
        assert!(work.wall_seconds >= 0.03);
        assert!(work.peaks.peak_parent_rss_bytes.is_some());
    }

    #[test]
    fn finish_returns_the_failure_of_the_final_write() {
        // A report path under a regular file: no directory can be made there.
        let blocker = std::env::temp_dir().join(format!("stemmon-blocker-{}", std::process::id()));
        std::fs::write(&blocker, b"not a directory").unwrap();
        let monitor = Monitor::builder()
            .log_interval(None)
            .current_thread_only()
            .output(blocker.join("report.json"))
            .start()
            .unwrap();
        let report = monitor.finish();
        std::fs::remove_file(&blocker).unwrap();
        // With logging off the final write is the only one: its failure is in the report.
        let error = report.output_error.as_deref().expect("the failed write");
        assert!(
            error.starts_with("could not write the report to"),
            "{error}"
        );
        assert_eq!(report.error, None);
    }
}
