//! GPU memory of the process tree, through NVML (the book's `gpu.md`).
//!
//! [`GpuSource::open`] loads the NVIDIA driver's management library at run time and
//! never fails: without a driver the source is inert and [`GpuSource::missing`] says
//! why. Each [`GpuSource::read`] asks every device for its used memory and its compute
//! and graphics processes, and matches those to the tree's pids (through `NSpid`, see
//! the `pids` module). A failed NVML call is data: that figure is `None` with its [`Reason`], and
//! the other figures go on. A lost GPU stays lost: it is not asked again.
//!
//! The source holds no lock and is meant for the sampler thread alone: NVML is read
//! there and nowhere else.

use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings::nvmlProcessInfo_t;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::Path;

mod device;
pub(crate) mod helper;
mod pids;
mod plan;
pub(crate) mod source;

use device::{read_device, Lists};
pub(crate) use plan::plan;

pub use pids::ProcessGpu;
use pids::{Matcher, Procfs, StatusSource};

/// The library loaded when the caller names none: the driver's, on the loader's path.
const DEFAULT_LIBRARY: &str = "libnvidia-ml.so.1";

/// The most devices read: NVML's own limit. A driver that counts more gets the first
/// ones read, and the section says so.
pub(crate) const MAX_DEVICES: u32 = 64;
/// The most processes read on one device's list. The lists are read into a buffer of
/// this size, made once: a longer list is not read (the section says so), and no
/// allocation grows with a count the driver claims.
pub(crate) const MAX_PROCESSES: usize = 4096;

/// The entry points a reading needs; a library without one of them is too old.
const REQUIRED: [&str; 5] = [
    "nvmlDeviceGetCount_v2",
    "nvmlDeviceGetHandleByIndex_v2",
    "nvmlDeviceGetMemoryInfo_v2",
    "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetGraphicsRunningProcesses_v3",
];

/// Why one NVML figure is unknown.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reason {
    /// NVML refused the call (`NoPermission`): MIG in a container, or no rights to the
    /// device.
    NoPermission,
    /// The device or the driver does not offer the call (`NotSupported`).
    NotSupported,
    /// The GPU fell off the bus or is otherwise gone (`GpuLost`); it is not read again.
    GpuLost,
    /// NVML gave the value as not available (`NVML_VALUE_NOT_AVAILABLE`).
    NotAvailable,
    /// A device's process list is longer than [`MAX_PROCESSES`]: it was not read.
    TooManyProcesses(u32),
    /// NVML gave a figure that cannot be true (used memory above the device's total).
    Implausible(String),
    /// Any other NVML failure, as NVML describes it.
    Failed(String),
}

impl Reason {
    fn of(error: &NvmlError) -> Reason {
        match error {
            NvmlError::NoPermission => Reason::NoPermission,
            NvmlError::NotSupported => Reason::NotSupported,
            NvmlError::GpuLost => Reason::GpuLost,
            other => Reason::Failed(other.to_string()),
        }
    }

    /// Whether asking again can never give a figure.
    fn is_final(&self) -> bool {
        matches!(self, Reason::NotSupported | Reason::GpuLost)
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::NoPermission => f.write_str(
                "NVML refused the query (NoPermission: a MIG GPU seen from a container, or no rights to the device)",
            ),
            Reason::NotSupported => {
                f.write_str("the GPU or its driver does not support the query (NotSupported)")
            }
            Reason::GpuLost => f.write_str(
                "the GPU fell off the bus or became inaccessible (GpuLost); it is no longer read",
            ),
            Reason::NotAvailable => f.write_str("NVML reported the value as not available"),
            Reason::TooManyProcesses(count) => write!(
                f,
                "NVML lists {count} processes on the device, more than the {MAX_PROCESSES} stemmon reads: its processes are left out"
            ),
            Reason::Implausible(what) => write!(f, "NVML gave an impossible figure ({what})"),
            Reason::Failed(error) => write!(f, "NVML failed: {error}"),
        }
    }
}

/// What NVML says once, at [`GpuSource::open`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuInfo {
    /// The driver's version, `None` where NVML did not give it or was not loaded.
    pub driver_version: Option<String>,
    /// Every device NVML counted, in its index order; empty without a driver.
    pub devices: Vec<DeviceInfo>,
    /// Why the source reads nothing (no driver, no GPU), in one sentence; `None` when it
    /// reads.
    pub missing: Option<String>,
    /// What was left unread past a cap (a driver that counts more than
    /// [`MAX_DEVICES`] GPUs), in one sentence.
    pub dropped: Option<String>,
}

/// One device as [`GpuSource::open`] found it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceInfo {
    /// NVML's index of the device.
    pub index: u32,
    /// Its name (`NVIDIA H100 80GB HBM3`), `None` where NVML did not give it.
    pub name: Option<String>,
    /// Its UUID (`GPU-...`), `None` where NVML did not give it.
    pub uuid: Option<String>,
    /// Its memory, in bytes, `None` where NVML did not give it.
    pub memory_total_bytes: Option<u64>,
    /// Why the device is not read at all (its handle was refused, or it is lost).
    pub missing: Option<Reason>,
}

/// One reading of the tree's GPU memory. Sizes in bytes; `None` where unknown.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuReading {
    /// The sum of the known figures of the tree's processes over every device (a process
    /// on both of a device's lists counted once). `None` when no device's processes
    /// could be read, or when the tree's processes were listed with no known figure at
    /// all. A figure NVML marks not available is left out of the sum and counted in
    /// `unknown_processes`: the sum is then a lower bound, and `tree_complete` false.
    pub tree_bytes: Option<u64>,
    /// Every device's processes were read, and every tree process they listed had a
    /// figure that counted: `tree_bytes` is the whole of the tree's GPU memory.
    pub tree_complete: bool,
    /// Tree processes listed without a figure (one per process and device).
    pub unknown_processes: u32,
    /// Listed pids left out as belonging to more than one tree process (see the `pids` module).
    pub ambiguous_pids: u32,
    /// The busiest device's used memory: the largest known `used_bytes`.
    pub device_bytes: Option<u64>,
    /// Each device of the source's [`GpuInfo`], in the same order.
    pub devices: Vec<DeviceReading>,
    /// The tree's processes that some device listed, in the tree's order.
    pub processes: Vec<ProcessGpu>,
}

impl GpuReading {
    /// The first reason some figure of this reading is unknown, if any is.
    #[cfg(test)]
    pub fn missing(&self) -> Option<&Reason> {
        self.devices
            .iter()
            .find_map(|d| d.processes_missing.as_ref().or(d.used_missing.as_ref()))
    }
}

/// One device at one reading.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceReading {
    /// Its used memory now (`nvmlDeviceGetMemoryInfo`), all processes of the machine.
    pub used_bytes: Option<u64>,
    /// Why `used_bytes` is `None`.
    pub used_missing: Option<Reason>,
    /// Why its processes, or some of them, were not read (a failed compute or graphics
    /// list); the tree's figure then leaves them out.
    pub processes_missing: Option<Reason>,
}

/// NVML's GPU memory of a process tree. `Send`, used from one thread (the sampler's).
#[derive(Debug)]
pub struct GpuSource {
    info: GpuInfo,
    live: Option<Live>,
    reading: GpuReading,
}

/// The loaded library and what a reading keeps between readings.
struct Live {
    nvml: Nvml,
    devices: Vec<LiveDevice>,
    matcher: Matcher,
    /// The buffer every process list is read into, [`MAX_PROCESSES`] long.
    buffer: Vec<nvmlProcessInfo_t>,
}

impl fmt::Debug for Live {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Live")
            .field("devices", &self.devices)
            .finish_non_exhaustive()
    }
}

/// A device's calls that can never give a figure again, kept so they are not made.
#[derive(Debug, Default)]
struct LiveDevice {
    index: u32,
    /// The device is not read at all (lost, or its handle was refused at open).
    gone: Option<Reason>,
    memory: Option<Reason>,
    compute: Option<Reason>,
    graphics: Option<Reason>,
}

impl GpuSource {
    /// Loads NVML from `library` (the driver's `libnvidia-ml.so.1` on the loader's path
    /// when `None`) and reads what it says once: the driver version and every device's
    /// name, UUID and memory. Never fails: without the library, without one of the
    /// entry points a reading needs, or when NVML does not start, the source is inert
    /// and [`missing`](GpuSource::missing) says why.
    pub fn open(library: Option<&Path>) -> GpuSource {
        let name =
            library.map_or_else(|| DEFAULT_LIBRARY.into(), |path| path.display().to_string());
        let path = library.map_or(DEFAULT_LIBRARY.as_ref(), Path::as_os_str);
        let (info, live) = match Nvml::builder().lib_path(path).init() {
            Ok(nvml) => match required_symbols(&nvml, &name) {
                Ok(()) => start(nvml),
                Err(missing) => (inert(missing), None),
            },
            Err(error) => (inert(init_failure(&name, &error)), None),
        };
        let reading = GpuReading {
            devices: vec![DeviceReading::default(); info.devices.len()],
            ..GpuReading::default()
        };
        GpuSource {
            info,
            live,
            reading,
        }
    }

    /// What NVML said at [`open`](GpuSource::open).
    pub fn info(&self) -> &GpuInfo {
        &self.info
    }

    /// Why the source reads nothing, in one sentence; `None` when it reads.
    #[cfg(test)]
    pub fn missing(&self) -> Option<&str> {
        self.info.missing.as_deref()
    }

    /// Reads every device now and matches its processes to `tree`: the pids of the
    /// process tree as this process sees them, root first. The reading is kept in the
    /// source and overwritten by the next one; an inert source gives an empty one.
    ///
    /// `started` gives each tree process's start, in seconds since boot (`None` where
    /// unknown), in the order of `tree`: a process that started after this reading
    /// began is not charged what NVML lists under its pid (a stale entry of an earlier
    /// process that had the same pid).
    pub fn read(&mut self, tree: &[u32], started: &[Option<f64>]) -> &GpuReading {
        let now = crate::sys::boot_seconds();
        self.read_with(tree, started, now, &mut Procfs)
    }

    fn read_with(
        &mut self,
        tree: &[u32],
        started: &[Option<f64>],
        now: Option<f64>,
        status: &mut dyn StatusSource,
    ) -> &GpuReading {
        let reading = &mut self.reading;
        reading.processes.clear();
        let Some(live) = &mut self.live else {
            return reading;
        };
        live.matcher.start(tree, status);
        live.matcher.exclude_later(tree, started, now);
        let mut all_read = true;
        let mut any_read = false;
        let (nvml, buffer) = (&live.nvml, &mut live.buffer);
        for (device, out) in live.devices.iter_mut().zip(&mut reading.devices) {
            let lists = read_device(nvml, device, out, &mut live.matcher, buffer);
            all_read &= lists == Lists::Both;
            any_read |= lists != Lists::None;
        }
        let tally = live.matcher.tally();
        reading.tree_bytes =
            (any_read && (tally.known > 0 || tally.unknown == 0)).then_some(tally.known_bytes);
        reading.tree_complete = all_read && tally.unknown == 0 && tally.ambiguous == 0;
        reading.unknown_processes = tally.unknown;
        reading.ambiguous_pids = tally.ambiguous;
        reading.device_bytes = reading.devices.iter().filter_map(|d| d.used_bytes).max();
        live.matcher.processes(tree, &mut reading.processes);
        reading
    }
}

fn inert(missing: String) -> GpuInfo {
    GpuInfo {
        missing: Some(missing),
        ..GpuInfo::default()
    }
}

/// At most `limit` characters of `text`, for what a driver says (its version, a
/// device's name): a driver's string is never kept whole if it is absurd.
fn bounded(mut text: String, limit: usize) -> String {
    if let Some((cut, _)) = text.char_indices().nth(limit) {
        text.truncate(cut);
    }
    text
}

/// The sentence for a library that did not load or an NVML that did not start.
fn init_failure(name: &str, error: &NvmlError) -> String {
    match error {
        NvmlError::LibloadingError(error) => {
            format!("no NVIDIA driver: {name} could not be loaded ({error})")
        }
        NvmlError::FailedToLoadSymbol(error) => {
            format!("{name} is not a usable NVML library: it lacks nvmlInit_v2 ({error})")
        }
        NvmlError::DriverNotLoaded => {
            format!("the NVIDIA driver is not running: {name} loaded, but NVML could not start ({error})")
        }
        error => format!("NVML could not start: nvmlInit_v2 of {name} failed ({error})"),
    }
}

/// Checks that the library has every entry point a reading calls.
fn required_symbols(nvml: &Nvml, name: &str) -> Result<(), String> {
    let lib = nvml.lib();
    let present = [
        lib.nvmlDeviceGetCount_v2.is_ok(),
        lib.nvmlDeviceGetHandleByIndex_v2.is_ok(),
        lib.nvmlDeviceGetMemoryInfo_v2.is_ok(),
        lib.nvmlDeviceGetComputeRunningProcesses_v3.is_ok(),
        lib.nvmlDeviceGetGraphicsRunningProcesses_v3.is_ok(),
    ];
    match REQUIRED.iter().zip(present).find(|(_, present)| !present) {
        Some((symbol, _)) => Err(format!(
            "the NVIDIA driver is too old for stemmon: {name} lacks {symbol}"
        )),
        None => Ok(()),
    }
}

/// Reads the driver version and the devices of a started NVML.
fn start(nvml: Nvml) -> (GpuInfo, Option<Live>) {
    let driver_version = nvml.sys_driver_version().ok().map(|v| bounded(v, 80));
    let count = match nvml.device_count() {
        Ok(count) => count,
        Err(error) => {
            let missing = format!("NVML could not count the GPUs ({error})");
            return (
                GpuInfo {
                    driver_version,
                    missing: Some(missing),
                    ..GpuInfo::default()
                },
                None,
            );
        }
    };
    if count == 0 {
        let info = GpuInfo {
            driver_version,
            missing: Some("NVML lists no GPU on this machine".into()),
            ..GpuInfo::default()
        };
        return (info, None);
    }
    let dropped = (count > MAX_DEVICES)
        .then(|| format!("NVML counts {count} GPUs: stemmon reads the first {MAX_DEVICES}"));
    let mut devices = Vec::new();
    let mut live = Vec::new();
    for index in 0..count.min(MAX_DEVICES) {
        let (info, device) = match nvml.device_by_index(index) {
            Ok(device) => describe(index, &device),
            Err(error) => {
                let reason = Reason::of(&error);
                let info = DeviceInfo {
                    index,
                    name: None,
                    uuid: None,
                    memory_total_bytes: None,
                    missing: Some(reason.clone()),
                };
                let device = LiveDevice {
                    index,
                    gone: Some(reason),
                    ..LiveDevice::default()
                };
                (info, device)
            }
        };
        devices.push(info);
        live.push(device);
    }
    let info = GpuInfo {
        driver_version,
        devices,
        missing: None,
        dropped,
    };
    let live = Live {
        nvml,
        devices: live,
        matcher: Matcher::default(),
        // SAFETY: nvmlProcessInfo_t is plain integers: all zeros is a valid value.
        buffer: vec![unsafe { std::mem::zeroed() }; MAX_PROCESSES],
    };
    (info, Some(live))
}

/// A device's name, UUID and memory; a device lost already is not read again.
fn describe(index: u32, device: &Device<'_>) -> (DeviceInfo, LiveDevice) {
    let total = device.memory_info().map(|m| m.total);
    let lost = matches!(total, Err(NvmlError::GpuLost));
    let info = DeviceInfo {
        index,
        name: device.name().ok().map(|name| bounded(name, 96)),
        uuid: device.uuid().ok().map(|uuid| bounded(uuid, 96)),
        memory_total_bytes: total.ok().filter(|&total| total != u64::MAX),
        missing: lost.then_some(Reason::GpuLost),
    };
    let live = LiveDevice {
        index,
        gone: lost.then_some(Reason::GpuLost),
        ..LiveDevice::default()
    };
    (info, live)
}

#[cfg(test)]
mod tests;
