//! The GPU as a measurement source of the engine (see `sources`): at each sample the
//! tree's GPU memory and the busiest device's, per process, and the `gpu` section.
//!
//! NVML is opened and read on the sampler thread alone, never on the program's: the
//! source is made at start without touching the driver, and opened when the sampler
//! thread begins. In-process, a driver that blocks holds only the sampler (the
//! monitor's finish waits for it at most a tenth of a second), and one that takes over
//! [`SLOW`] to answer is read no more. Through a helper process (`stemmon run`), a
//! driver that crashes takes only the helper down.

use super::helper::{Client, Reply};
use super::{GpuInfo, GpuReading, GpuSource, Reason};
use crate::memory::TreeReading;
use crate::sources::{Measure, Measurement, Reading};
use serde_json::json;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// What it adds to a report.
use stemmon_report::fields::measures::gpu::MEASURE;

/// An in-process reading that takes longer than this turns the source off: the sampler
/// thread it holds also reads the tree's memory.
const SLOW: Duration = Duration::from_secs(1);

/// How the GPU is to be read, decided at start on the program's thread (no NVML call).
#[derive(Clone, Debug)]
pub(crate) enum Plan {
    /// Not read: why.
    Off(String),
    /// NVML in this process, from this library (the driver's when `None`).
    InProcess(Option<PathBuf>),
    /// NVML in a helper process that this command starts.
    Helper(Option<PathBuf>, super::helper::Command),
}

/// Where the readings come from once opened.
enum Backend {
    /// Not opened yet: the sampler thread opens it.
    Pending(Plan),
    InProcess(Box<GpuSource>),
    Helper(Box<Client>),
    /// Reads nothing more.
    Off,
}

/// The GPU source with what the engine needs between samples.
pub(crate) struct Gpu {
    backend: Backend,
    info: GpuInfo,
    /// The tree's pids of the current sample (kept to reuse its capacity), and when
    /// each started.
    pids: Vec<u32>,
    started: Vec<Option<f64>>,
    figures: [Option<f64>; 2],
    series: [Option<f64>; 1],
    processes: Vec<(u32, f64)>,
    /// Each device's highest used memory so far.
    device_peaks: Vec<Option<u64>>,
    /// Why figures were unknown at some reading: each reason once, in order.
    missing: Vec<String>,
    /// The section changed since it was last handed out.
    changed: bool,
    /// Closed on the sampler thread as it ended: nothing more is read.
    closed: bool,
}

impl Gpu {
    /// A source that reads as `plan` says, opened later on the sampler thread.
    pub(crate) fn new(plan: Plan) -> Gpu {
        let mut gpu = Gpu {
            backend: Backend::Off,
            info: GpuInfo::default(),
            pids: Vec::new(),
            started: Vec::new(),
            figures: [None; 2],
            series: [None; 1],
            processes: Vec::new(),
            device_peaks: Vec::new(),
            missing: Vec::new(),
            changed: true,
            closed: false,
        };
        match plan {
            Plan::Off(why) => gpu.info.missing = Some(why),
            plan => {
                gpu.backend = Backend::Pending(plan);
                gpu.info.missing = Some("NVML was not opened yet".to_owned());
            }
        }
        gpu
    }

    /// Takes what NVML said at its start.
    fn adopt(&mut self, info: GpuInfo) {
        self.device_peaks = vec![None; info.devices.len()];
        self.info = info;
        if let Some(dropped) = self.info.dropped.clone() {
            self.note(dropped);
        }
        self.changed = true;
    }

    /// Keeps `reason` for the section, once.
    fn note(&mut self, reason: String) {
        if !self.missing.contains(&reason) {
            self.missing.push(reason);
            self.changed = true;
        }
    }

    /// Stops reading, for `reason`: the figures from now on are unknown.
    fn turn_off(&mut self, reason: String) {
        self.backend = Backend::Off;
        self.note(reason);
    }

    /// Folds one reading into the figures of this sample.
    fn take(&mut self, reading: &GpuReading) {
        let bytes = |value: Option<u64>| value.map(|v| v as f64);
        self.figures = [bytes(reading.tree_bytes), bytes(reading.device_bytes)];
        self.series = [bytes(reading.tree_bytes)];
        self.processes.clear();
        self.processes.extend(
            reading
                .processes
                .iter()
                .filter_map(|p| Some((p.pid, p.bytes? as f64))),
        );
        for (peak, device) in self.device_peaks.iter_mut().zip(&reading.devices) {
            if device.used_bytes > *peak {
                *peak = device.used_bytes;
                self.changed = true;
            }
        }
        let unknown = (reading.unknown_processes > 0).then(|| {
            "NVML gave some processes' GPU memory as not available: the tree's figure leaves \
             them out (a lower bound)"
                .to_owned()
        });
        let reasons: Vec<String> = reading
            .devices
            .iter()
            .flat_map(|d| [&d.used_missing, &d.processes_missing])
            .flatten()
            .map(Reason::to_string)
            .chain(unknown)
            .collect();
        for reason in reasons {
            self.note(reason);
        }
    }
}

impl Measurement for Gpu {
    fn declared(&self) -> &'static Measure {
        &MEASURE
    }

    fn active(&self) -> bool {
        self.info.missing.is_none()
    }

    fn helper(&self) -> Option<u32> {
        match &self.backend {
            Backend::Helper(client) => Some(client.pid()),
            _ => None,
        }
    }

    fn close(&mut self) {
        match self.backend {
            Backend::InProcess(_) => self.backend = Backend::Off,
            // The helper stays until this is dropped, after the last sample, which
            // reads no GPU: it would ask the helper from the program's thread.
            Backend::Helper(_) => self.closed = true,
            Backend::Pending(_) | Backend::Off => {}
        }
    }

    fn open(&mut self) {
        let Backend::Pending(plan) = std::mem::replace(&mut self.backend, Backend::Off) else {
            return;
        };
        self.changed = true;
        match plan {
            Plan::Off(_) => {}
            Plan::InProcess(library) => {
                let source = GpuSource::open(library.as_deref());
                let info = source.info().clone();
                let live = info.missing.is_none();
                self.adopt(info);
                if live {
                    self.backend = Backend::InProcess(Box::new(source));
                }
            }
            Plan::Helper(library, command) => match Client::start(&command, library.as_deref()) {
                Ok(client) => {
                    self.info.missing = Some("NVML has not answered yet".to_owned());
                    self.backend = Backend::Helper(Box::new(client));
                }
                Err(error) => {
                    self.info.missing = Some(format!("the NVML helper did not start: {error}"));
                }
            },
        }
    }

    fn sample(&mut self, tree: &TreeReading, _elapsed: f64) -> Reading<'_> {
        self.figures = [None; 2];
        self.series = [None; 1];
        self.processes.clear();
        if self.closed || matches!(self.backend, Backend::Pending(_) | Backend::Off) {
            return Reading::default();
        }
        self.pids.clear();
        self.started.clear();
        for process in tree.root_process.iter().chain(&tree.descendants) {
            self.pids.push(process.pid);
            self.started.push(process.started);
        }
        match &mut self.backend {
            Backend::InProcess(source) => {
                let began = Instant::now();
                let reading = source.read(&self.pids, &self.started).clone();
                let took = began.elapsed();
                self.take(&reading);
                if took > SLOW {
                    self.turn_off(format!(
                        "NVML took {:.1} s to answer one reading (over {} s): the GPU is no \
                         longer read",
                        took.as_secs_f64(),
                        SLOW.as_secs()
                    ));
                }
            }
            Backend::Helper(client) => match client.read(&self.pids, &self.started) {
                Reply::Info(info, reading) => {
                    let live = info.missing.is_none();
                    self.adopt(info);
                    if let Some(reading) = reading {
                        self.take(&reading);
                    }
                    if !live {
                        self.backend = Backend::Off;
                    }
                }
                Reply::Reading(reading) => self.take(&reading),
                Reply::Late(why) => {
                    if let Some(why) = why {
                        self.note(why);
                    }
                }
                Reply::Ended(why) => {
                    if self.info.missing.is_some() {
                        // It never said what NVML found: that is all there is to say.
                        self.info.missing = Some(why);
                        self.backend = Backend::Off;
                        self.changed = true;
                    } else {
                        self.turn_off(why);
                    }
                }
            },
            Backend::Pending(_) | Backend::Off => {}
        }
        Reading {
            figures: &self.figures,
            series: &self.series,
            processes: &self.processes,
            note: None,
            counters: &[],
        }
    }

    fn section(&mut self) -> Option<serde_json::Value> {
        if !std::mem::replace(&mut self.changed, false) {
            return None;
        }
        let info = &self.info;
        let devices: Vec<serde_json::Value> = info
            .devices
            .iter()
            .zip(&self.device_peaks)
            .map(|(device, peak)| {
                json!({
                    "index": device.index,
                    "name": device.name,
                    "uuid": device.uuid,
                    "memory_total_bytes": device.memory_total_bytes,
                    "peak_memory_used_bytes": peak,
                    "missing": device.missing.as_ref().map(Reason::to_string),
                })
            })
            .collect();
        let missing: Vec<&str> = info
            .missing
            .iter()
            .map(String::as_str)
            .chain(self.missing.iter().map(String::as_str))
            .collect();
        Some(json!({
            "driver_version": info.driver_version,
            "devices": devices,
            "missing": (!missing.is_empty()).then(|| missing.join("; ")),
        }))
    }
}
