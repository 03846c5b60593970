//! The GPU as a measurement source of the engine (see `sources`): at each sample the
//! tree's GPU memory and the busiest device's, per process, and the `gpu` section.

use super::{GpuSource, Reason};
use crate::memory::TreeReading;
use crate::sources::{Reading, Source};
use serde_json::json;

/// The record figures it fills.
const FIELDS: &[&str] = &["peak_tree_gpu_bytes", "peak_device_gpu_bytes"];
/// The timeline's series it adds.
const SERIES: &[&str] = &["tree_gpu_bytes"];

/// The GPU source with what the engine needs between samples.
pub(crate) struct Gpu {
    source: GpuSource,
    /// The tree's pids of the current sample (kept to reuse its capacity).
    pids: Vec<u32>,
    figures: [Option<u64>; 2],
    series: [Option<u64>; 1],
    processes: Vec<(u32, u64)>,
    /// Each device's highest used memory so far.
    device_peaks: Vec<Option<u64>>,
    /// Why figures were unknown at some reading: each reason once, in order.
    missing: Vec<String>,
    /// The section changed since it was last handed out.
    changed: bool,
}

impl Gpu {
    /// NVML from `STEMMON_NVML_LIBRARY`, else the driver's `libnvidia-ml.so.1`.
    pub(crate) fn open() -> Gpu {
        let library = crate::env::var("STEMMON_NVML_LIBRARY")
            .filter(|path| !path.is_empty())
            .map(std::path::PathBuf::from);
        Gpu::of(GpuSource::open(library.as_deref()))
    }

    fn of(source: GpuSource) -> Gpu {
        let devices = source.info().devices.len();
        Gpu {
            missing: source.missing().map(str::to_owned).into_iter().collect(),
            source,
            pids: Vec::new(),
            figures: [None; 2],
            series: [None; 1],
            processes: Vec::new(),
            device_peaks: vec![None; devices],
            changed: true,
        }
    }
}

impl Source for Gpu {
    fn active(&self) -> bool {
        self.source.missing().is_none()
    }

    fn fields(&self) -> &'static [&'static str] {
        FIELDS
    }

    fn series(&self) -> &'static [&'static str] {
        SERIES
    }

    fn process_field(&self) -> Option<&'static str> {
        Some("peak_gpu_bytes")
    }

    fn sample(&mut self, tree: &TreeReading) -> Reading<'_> {
        self.pids.clear();
        self.pids.extend(
            tree.root_process
                .iter()
                .chain(&tree.descendants)
                .map(|p| p.pid),
        );
        let reading = self.source.read(&self.pids);
        self.figures = [reading.tree_bytes, reading.device_bytes];
        self.series = [reading.tree_bytes];
        self.processes.clear();
        self.processes.extend(
            reading
                .processes
                .iter()
                .filter_map(|p| Some((p.pid, p.bytes?))),
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
        for reason in reading
            .missing()
            .map(reason_text)
            .into_iter()
            .chain(unknown)
        {
            if !self.missing.contains(&reason) {
                self.missing.push(reason);
                self.changed = true;
            }
        }
        Reading {
            figures: &self.figures,
            series: &self.series,
            processes: &self.processes,
        }
    }

    fn section(&mut self) -> Option<(&'static str, serde_json::Value)> {
        if !std::mem::replace(&mut self.changed, false) {
            return None;
        }
        let info = self.source.info();
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
                    "missing": device.missing.as_ref().map(reason_text),
                })
            })
            .collect();
        Some((
            "gpu",
            json!({
                "driver_version": info.driver_version,
                "devices": devices,
                "missing": (!self.missing.is_empty()).then(|| self.missing.join("; ")),
            }),
        ))
    }
}

fn reason_text(reason: &Reason) -> String {
    reason.to_string()
}
