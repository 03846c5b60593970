//! Every setting of a monitor, as the builder gathers them: plain data that the engine
//! reads and nothing here depends on.

use std::path::PathBuf;
use std::time::Duration;

/// Which source the monitor reads memory from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Reader {
    /// The platform's best: `/proc` read directly on Linux, sysinfo elsewhere.
    #[default]
    Native,
    /// sysinfo on every platform: slower, and without high-water marks.
    Portable,
}

/// Every setting of a monitor, as validated by [`MonitorBuilder::start`].
#[derive(Clone, Debug)]
pub(crate) struct Config {
    pub(crate) sample_interval: Duration,
    pub(crate) log_interval: Option<Duration>,
    pub(crate) output: Option<PathBuf>,
    pub(crate) detailed_memory: bool,
    pub(crate) max_samples: usize,
    /// Cover the starting thread only, not the whole process.
    pub(crate) current_thread_only: bool,
    pub(crate) high_water_marks: bool,
    /// Each reading of the marks resets them (else each runs from its process's start).
    pub(crate) reset_marks: bool,
    /// Labels given with `.label(k, v)`, in order.
    pub(crate) labels: Vec<(String, String)>,
    pub(crate) prometheus_textfile: Option<PathBuf>,
    pub(crate) pushgateway: Option<String>,
    /// The OTLP base endpoint given with `.otlp(endpoint)`.
    #[cfg(feature = "otlp")]
    pub(crate) otlp: Option<String>,
    /// `.otlp_command_args(true)`: the OTLP resource carries `process.command_args`.
    #[cfg(feature = "otlp")]
    pub(crate) otlp_command_args: bool,
    pub(crate) reader: Reader,
    /// The root of the sampled tree: this process unless told otherwise.
    pub(crate) root: Option<u32>,
    /// The argv of the command `stemmon run` started.
    pub(crate) command: Option<Vec<String>>,
    /// The starter's high-water mark when it started the root (see the builder).
    pub(crate) spawn_floor: Option<u64>,
    /// With `root`: this process's other children count as descendants too.
    pub(crate) adopted_orphans: bool,
    /// The GPU is read (`STEMMON_GPU` overrides it).
    pub(crate) gpu: bool,
    /// NVML is read in a helper process this command starts, not in this process.
    pub(crate) gpu_helper: Option<HelperCommand>,
    /// The measurements read at samples (GPU, descriptors, pressure) are made: off only
    /// in the benches, which time a sample without them beside one with them.
    pub(crate) measurements: bool,
}

/// A command that starts a helper process (see `MonitorBuilder::gpu_helper`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct HelperCommand {
    /// The program.
    pub(crate) program: PathBuf,
    /// Its arguments.
    pub(crate) args: Vec<std::ffi::OsString>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            sample_interval: Duration::from_secs(1),
            log_interval: Some(Duration::from_secs(30)),
            output: None,
            detailed_memory: false,
            max_samples: 0,
            current_thread_only: false,
            high_water_marks: true,
            reset_marks: true,
            labels: Vec::new(),
            prometheus_textfile: None,
            pushgateway: None,
            #[cfg(feature = "otlp")]
            otlp: None,
            #[cfg(feature = "otlp")]
            otlp_command_args: false,
            reader: Reader::Native,
            root: None,
            command: None,
            spawn_floor: None,
            adopted_orphans: false,
            gpu: true,
            measurements: true,
            gpu_helper: None,
        }
    }
}
