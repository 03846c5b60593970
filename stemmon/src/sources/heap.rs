//! The heap (the book's `heap.md`): a measurement of thread counters. `stemmon::Alloc`
//! counts what each thread allocates and frees in counters of its own
//! ([`crate::heap::slots`]); the engine notes the calling thread's at every frame's
//! ends, sweeps every thread's at readings and charges what they grew by to stages (the
//! book's `architecture.md`). This measurement turns what a record's frames counted into
//! its figures, keeps the whole process's live heap and its peak, and gives the
//! report's `heap` section.

use crate::heap::slots::{self, Counts};
use crate::memory::TreeReading;
use crate::sources::{Growth, Measure, Measurement, Reading, Threads};
use stemmon_report::fields::measures::heap::MEASURE;
use stemmon_report::HeapReport;

/// Why the heap figures are `null`.
const MISSING: &str = "stemmon::Alloc is not the global allocator";

/// The measurement, made on the monitor's own thread as it starts: the run's counts
/// count from here. The engine holds it (it has thread counters).
pub(crate) fn open() -> Box<dyn Measurement> {
    Box::new(Heap {
        start: totals(),
        ..Heap::default()
    })
}

/// The whole process's heap as this measurement keeps it.
#[derive(Debug, Default)]
struct Heap {
    /// The process's counts when the monitor started.
    start: Counts,
    /// The highest live heap at any sweep.
    peak_live: u64,
    /// The live heap at the last sweep, as its series.
    series: [Option<f64>; 1],
}

/// Every thread's counts together now (those of threads past the table's size
/// included).
fn totals() -> Counts {
    slots::claimed()
        .iter()
        .fold(slots::shared(), |sum, slot| sum.plus(&slot.counts()))
}

/// The live heap of `counts`: allocated minus freed, never below zero.
fn live(counts: &Counts) -> u64 {
    counts.net().max(0) as u64
}

impl Measurement for Heap {
    fn declared(&self) -> &'static Measure {
        &MEASURE
    }

    fn active(&self) -> bool {
        slots::installed()
    }

    fn sample(&mut self, _: &TreeReading, _: f64) -> Reading<'_> {
        // The engine sweeps the threads' counters at every sample: see `swept`.
        Reading::default()
    }

    fn per_thread(&self) -> bool {
        true
    }

    fn threads(&self) -> Option<Threads> {
        slots::installed().then_some(Threads {
            this_thread: slots::this_thread,
            claimed: slots::claimed,
        })
    }

    fn swept(&mut self) -> &[Option<f64>] {
        let live = live(&totals());
        self.peak_live = self.peak_live.max(live);
        self.series = [Some(live as f64)];
        &self.series
    }

    fn level(&self) -> Option<u64> {
        slots::allocator().map(|_| live(&totals()))
    }

    fn figures(&self, growth: &Growth<'_>, wall_seconds: f64, out: &mut Vec<Option<f64>>) {
        let _ = wall_seconds;
        out.clear();
        // Asked only where `threads` gave the table: `stemmon::Alloc` counts.
        let counter = |index: usize| growth.counters.get(index).copied().unwrap_or(0);
        let (allocated, freed) = (counter(1), counter(2));
        // In the order of the declaration's fields.
        out.extend([
            Some(counter(0) as f64),
            Some(allocated as f64),
            Some(freed as f64),
            Some(allocated.wrapping_sub(freed) as i64 as f64),
            Some(growth.peak as f64),
        ]);
    }

    fn section(&mut self) -> Option<serde_json::Value> {
        let mut built = HeapReport::default();
        match slots::allocator() {
            Some(inner) => {
                let all = totals();
                let since = all.since(&self.start);
                let live = live(&all);
                built.allocator = Some(format!("stemmon::Alloc<{inner}>"));
                built.allocations = Some(since.allocations);
                built.allocated_bytes = Some(since.allocated);
                built.live_bytes = Some(live);
                built.peak_live_bytes = Some(self.peak_live.max(live));
            }
            None => built.missing = Some(MISSING.to_owned()),
        }
        serde_json::to_value(built).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_records_figures_are_its_counts_its_retained_bytes_and_its_peak() {
        let heap = Heap::default();
        let mut out = Vec::new();
        let growth = Growth {
            counters: &[3, 1000, 1200],
            peak: 700,
            ..Growth::default()
        };
        heap.figures(&growth, 1.0, &mut out);
        let keys: Vec<_> = MEASURE.fields.iter().map(|f| f.key).collect();
        let figures: Vec<_> = keys.into_iter().zip(out).collect();
        assert_eq!(
            figures,
            [
                ("heap_allocations", Some(3.0)),
                ("heap_allocated_bytes", Some(1000.0)),
                ("heap_freed_bytes", Some(1200.0)),
                // More freed than allocated: what the calls released of earlier ones.
                ("heap_retained_bytes", Some(-200.0)),
                ("peak_heap_bytes", Some(700.0)),
            ]
        );
    }
}
