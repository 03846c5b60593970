//! One device's reading: its used memory and its two process lists, each NVML call
//! made only while it can still give a figure, the lists read into a buffer of a fixed
//! size.

use super::pids::Matcher;
use super::{DeviceReading, LiveDevice, Reason};
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::struct_wrappers::device::ProcessInfo;
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings::nvmlProcessInfo_t;

/// How many of a device's two process lists a reading got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Lists {
    None,
    One,
    Both,
}

/// Reads one device into `out` and its processes into `matcher`.
pub(super) fn read_device(
    nvml: &Nvml,
    device: &mut LiveDevice,
    out: &mut DeviceReading,
    matcher: &mut Matcher,
    buffer: &mut [nvmlProcessInfo_t],
) -> Lists {
    *out = DeviceReading::default();
    if let Some(reason) = &device.gone {
        out.used_missing = Some(reason.clone());
        out.processes_missing = Some(reason.clone());
        return Lists::None;
    }
    let handle = match nvml.device_by_index(device.index) {
        Ok(handle) => handle,
        Err(error) => {
            let reason = Reason::of(&error);
            if reason == Reason::GpuLost {
                return lose(device, out);
            }
            out.used_missing = Some(reason.clone());
            out.processes_missing = Some(reason);
            return Lists::None;
        }
    };
    let memory = call(&mut device.memory, || {
        handle.memory_info().map(|m| (m.used, m.total))
    });
    if memory == Err(Reason::GpuLost) {
        return lose(device, out);
    }
    let compute = listed(nvml, &handle, List::Compute, &mut device.compute, buffer);
    if matches!(compute, Err(Reason::GpuLost)) {
        return lose(device, out);
    }
    let graphics = listed(nvml, &handle, List::Graphics, &mut device.graphics, buffer);
    if matches!(graphics, Err(Reason::GpuLost)) {
        return lose(device, out);
    }
    match memory {
        Ok((used, _)) if used == u64::MAX => out.used_missing = Some(Reason::NotAvailable),
        Ok((used, total)) if used > total => {
            out.used_missing = Some(Reason::Implausible(format!(
                "{used} bytes used of a device of {total} bytes"
            )));
        }
        Ok((used, _)) => out.used_bytes = Some(used),
        Err(reason) => out.used_missing = Some(reason),
    }
    let empty: &[ProcessInfo] = &[];
    let (compute, graphics) = match (compute, graphics) {
        (Ok(compute), Ok(graphics)) => (compute, graphics),
        (Ok(list), Err(reason)) | (Err(reason), Ok(list)) => {
            out.processes_missing = Some(reason);
            matcher.device(&[&list, empty]);
            return Lists::One;
        }
        (Err(reason), Err(_)) => {
            out.processes_missing = Some(reason);
            return Lists::None;
        }
    };
    matcher.device(&[&compute, &graphics]);
    Lists::Both
}

/// Which of a device's two process lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum List {
    Compute,
    Graphics,
}

/// One of the device's process lists, read into `buffer` (at most [`MAX_PROCESSES`](super::MAX_PROCESSES)
/// entries): a longer list is [`Reason::TooManyProcesses`], never a larger allocation.
fn listed(
    nvml: &Nvml,
    device: &Device<'_>,
    list: List,
    skip: &mut Option<Reason>,
    buffer: &mut [nvmlProcessInfo_t],
) -> Result<Vec<ProcessInfo>, Reason> {
    if let Some(reason) = skip {
        return Err(reason.clone());
    }
    let lib = nvml.lib();
    let symbol = match list {
        List::Compute => lib.nvmlDeviceGetComputeRunningProcesses_v3.as_ref(),
        List::Graphics => lib.nvmlDeviceGetGraphicsRunningProcesses_v3.as_ref(),
    };
    // Checked at open (`required_symbols`).
    let Ok(symbol) = symbol else {
        return Err(Reason::NotSupported);
    };
    let mut count = u32::try_from(buffer.len()).unwrap_or(u32::MAX);
    // SAFETY: the handle is a live device of this `nvml`; `count` says how many entries
    // `buffer` holds, and NVML writes at most that many (it reports INSUFFICIENT_SIZE
    // otherwise); both outlive the call.
    let code = unsafe { symbol(device.handle(), &mut count, buffer.as_mut_ptr()) };
    match nvml_wrapper::error::nvml_try(code) {
        Ok(()) => Ok(buffer[..(count as usize).min(buffer.len())]
            .iter()
            .map(|raw| ProcessInfo::from(*raw))
            .collect()),
        Err(NvmlError::InsufficientSize(_)) => Err(Reason::TooManyProcesses(count)),
        Err(error) => {
            let reason = Reason::of(&error);
            if reason.is_final() {
                *skip = Some(reason.clone());
            }
            Err(reason)
        }
    }
}

/// Marks a device lost for good: whatever this reading got from it before is dropped.
fn lose(device: &mut LiveDevice, out: &mut DeviceReading) -> Lists {
    device.gone = Some(Reason::GpuLost);
    *out = DeviceReading {
        used_bytes: None,
        used_missing: Some(Reason::GpuLost),
        processes_missing: Some(Reason::GpuLost),
    };
    Lists::None
}

/// One NVML call, unless an earlier one showed it can never succeed; a failure that is
/// final is kept in `skip`.
fn call<T>(
    skip: &mut Option<Reason>,
    f: impl FnOnce() -> Result<T, NvmlError>,
) -> Result<T, Reason> {
    if let Some(reason) = skip {
        return Err(reason.clone());
    }
    f().map_err(|error| {
        let reason = Reason::of(&error);
        if reason.is_final() {
            *skip = Some(reason.clone());
        }
        reason
    })
}
