//! The platform, one module per OS, chosen here once: [`linux`] reads `/proc` (the tree,
//! the kernel's high-water marks, reaped children, the cgroup); elsewhere `other`
//! reads through sysinfo. Both give the same items, so nothing outside this module
//! asks which OS it is on. A figure a platform does not measure stays `null`, with its
//! reason in the report (`high_water_marks.missing`, `io_missing`); the macOS physical
//! footprint is not measured yet (no macOS reader is tested).
//!
//! A monitor makes its readers together with [`Readers::new`]: on Linux they share that
//! monitor's ledger, so each interval of the marks is counted once and by that monitor
//! alone; nothing here is process-wide.

mod clocksource;
#[cfg(all(unix, feature = "gpu"))]
pub(crate) mod helpers;
#[cfg(unix)]
mod peaks;
#[cfg(unix)]
pub(crate) use peaks::{own_peak, reap_with_peak};
#[cfg(target_os = "linux")]
pub(crate) mod linux;
#[cfg(target_os = "linux")]
use linux::platform as imp;
#[cfg(not(target_os = "linux"))]
mod other;
#[cfg(not(target_os = "linux"))]
use other as imp;

pub(crate) use clocksource::tsc_trusted;
#[cfg(all(unix, feature = "gpu"))]
pub(crate) use helpers::{child_end, die_with_parent, set_nonblocking, wait_readable};
pub(crate) use imp::kernel_host_name;
#[cfg(feature = "gpu")]
pub(crate) use imp::process_status;
pub(crate) use imp::{
    boot_seconds, exited_child, has_exited, heavy_barrier, register_barrier, start_tick_seconds,
    thread_cpu_micros, ReaderHandle,
};
#[cfg(feature = "unstable-readers")]
pub(crate) use imp::{boundary_reader_alone, default_reader, full_reader};
pub(crate) use imp::{open_fds, MemoryPressure};
#[cfg(target_os = "linux")]
pub(crate) use linux::files::link_unnamed;

use crate::memory::{Descendant, LiveChildren, ReaderSettings, SelfReader, TreeReader};
use crate::report::HighWaterMarks;

/// One monitor's readers, made together: the tree reader the sampler owns, the boundary
/// reader the engine owns, and a handle that makes another tree reader of the same
/// monitor (for a last sample taken while the sampler still holds its own, as on a
/// signal).
pub(crate) struct Readers {
    /// The full tree sample.
    pub(crate) tree: Box<dyn TreeReader>,
    /// The reading of this process alone at stage boundaries.
    pub(crate) boundary: Box<dyn SelfReader>,
    /// The marks as asked and as the tree reader can read them.
    pub(crate) marks: HighWaterMarks,
    /// Makes another tree reader of the same monitor.
    pub(crate) spare: ReaderHandle,
}

impl Readers {
    /// Makes the readers, turns the marks on or off (probing, where the platform has
    /// them, that this process may reset them, which starts the first interval) and
    /// says which marks can be read.
    pub(crate) fn new(settings: ReaderSettings) -> Readers {
        let spare = ReaderHandle::new(settings);
        let mut tree = spare.first_tree_reader();
        tree.adopt_orphans(settings.adopted_orphans);
        let marks = tree.configure_marks(
            settings.high_water_marks,
            settings.reset_marks,
            settings.root_pid(),
        );
        // The boundary reads this process's marks only when it is the root.
        let boundary = spare.boundary_reader(marks.parent && settings.root.is_none());
        Readers {
            tree,
            boundary,
            marks,
            spare,
        }
    }
}

/// The sum of the RSS of `descendants` (as last sampled) that are still alive, and the
/// largest peak of those newly found exited, each of which is given to `exited`.
/// `gone` keeps, per descendant, whether it was already found gone, so each is checked
/// until it goes and never after.
pub(crate) fn live_children_rss(
    descendants: &[Descendant],
    gone: &mut Vec<bool>,
    mut exited: impl FnMut(u32),
) -> LiveChildren {
    gone.resize(descendants.len(), false);
    let (mut sum, mut exited_peak, mut count, mut peaks) = (0, None, 0, 0);
    for (&Descendant { pid, rss, peak, .. }, gone) in descendants.iter().zip(gone.iter_mut()) {
        if !*gone && has_exited(pid) {
            *gone = true;
            exited_peak = exited_peak.max(Some(peak));
            count += 1;
            peaks += peak;
            exited(pid);
        }
        if !*gone {
            sum += rss;
        }
    }
    LiveChildren {
        rss: sum,
        exited_peak,
        exited: count,
        exited_peaks: peaks,
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use crate::config::{Config, Reader};
    use crate::memory::ReaderSettings;

    fn settings(high_water_marks: bool) -> ReaderSettings {
        ReaderSettings::of(&Config {
            high_water_marks,
            ..Config::default()
        })
    }

    #[test]
    fn the_spare_reader_continues_the_samplers_interval() {
        let _mark = linux::tests::self_mark();
        let me = std::process::id();
        let mut readers = Readers::new(settings(true));
        assert!(
            readers.marks.parent && readers.marks.reaped,
            "{:?}",
            readers.marks
        );
        readers.tree.read_tree(me).unwrap();
        let mib = linux::tests::past_reaped_maximum(64);
        let status = linux::tests::python_holding(mib)
            .status()
            .expect("python3 runs");
        assert!(status.success());
        // The signal path: the sampler keeps its reader, the last sample takes another.
        let last = readers.spare.tree_reader().read_tree(me).unwrap();
        let peak = last
            .reaped_child_peak
            .expect("the final interval keeps the reaping");
        assert!(peak >= mib << 20, "{peak}");
        assert!(last.tree_rss_bound.is_some(), "{last:?}");
        // Configured as the sampler's: its cgroup is read too.
        let sampler = readers.tree.read_tree(me).unwrap();
        assert_eq!(last.cgroup.is_some(), sampler.cgroup.is_some());
    }

    #[test]
    fn the_spare_reader_keeps_the_marks_off() {
        let readers = Readers::new(settings(false));
        assert!(!readers.marks.enabled);
        let reading = readers
            .spare
            .tree_reader()
            .read_tree(std::process::id())
            .unwrap();
        assert_eq!((reading.parent_hwm, reading.tree_rss_bound), (None, None));
        let portable = Readers::new(ReaderSettings {
            kind: Reader::Portable,
            ..settings(true)
        });
        assert_eq!(portable.spare.tree_reader().name(), "sysinfo");
        assert!(!portable.marks.parent);
    }
}
