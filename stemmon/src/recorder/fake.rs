//! Test support: a recorder on a mock clock, with a scripted boundary reader and a
//! tree reader that returns what it is given.

use super::{Recorder, RunInfo, ThreadSlot};
use crate::config::Config;
use crate::memory::{
    Descendant, LiveChildren, SelfReader, SelfReading, TreeReader, TreeReading, Usage,
};
use std::cell::Cell;
use std::sync::{Arc, Mutex};

/// What the fake boundary reader answers, and how often it was asked.
#[derive(Debug)]
struct Script {
    reading: SelfReading,
    /// What `live_children` answers.
    live: LiveChildren,
    /// `live_children` finds every descendant gone.
    gone: bool,
    reads: u32,
}

thread_local! {
    /// What the fake thread clock reads on this (the test's) thread.
    static THREAD_CPU: Cell<Option<u64>> = const { Cell::new(None) };
}

fn fake_thread_cpu() -> Option<u64> {
    THREAD_CPU.with(Cell::get)
}

/// A [`SelfReader`] that answers from a script the test changes as it goes.
struct FakeSelf(Arc<Mutex<Script>>);

impl SelfReader for FakeSelf {
    fn read(&mut self) -> Option<SelfReading> {
        let mut script = self.0.lock().unwrap();
        script.reads += 1;
        // Room for a sample's reading between two of these (see `Rig::sample`).
        let epoch = 2 * u64::from(script.reads);
        Some(SelfReading {
            epoch,
            ..script.reading
        })
    }

    fn live_children(&mut self, descendants: &[Descendant], gone: &mut Vec<bool>) -> LiveChildren {
        let script = self.0.lock().unwrap();
        gone.resize(descendants.len(), false);
        if script.gone {
            gone.iter_mut().for_each(|g| *g = true);
        }
        script.live
    }
}

/// A [`TreeReader`] whose one reading is given.
pub(super) struct FakeTree(pub(super) TreeReading);

impl TreeReader for FakeTree {
    fn name(&self) -> &'static str {
        "fake"
    }

    fn read_tree(&mut self, _root: u32) -> std::io::Result<TreeReading> {
        Ok(self.0.clone())
    }
}

/// A [`TreeReader`] whose one reading is what its function does and returns: what a
/// test runs in it happens while the sample reads the tree (a stage that exits then).
struct During<F>(Option<F>);

impl<F: FnOnce() -> TreeReading + Send> TreeReader for During<F> {
    fn name(&self) -> &'static str {
        "during"
    }

    fn read_tree(&mut self, _root: u32) -> std::io::Result<TreeReading> {
        let read = self.0.take().expect("one reading");
        Ok(read())
    }
}

/// A recorder, its mock clock and its boundary reader's script.
pub(super) struct Rig {
    pub(super) recorder: Recorder,
    clock: Arc<quanta::Mock>,
    script: Arc<Mutex<Script>>,
}

impl Rig {
    /// A recorder at time zero whose boundary reads 1 MiB and no mark.
    pub(super) fn new() -> Rig {
        Rig::with_config(Config::default())
    }

    /// [`Rig::new`] with `config`.
    pub(super) fn with_config(config: Config) -> Rig {
        let (clock, mock) = quanta::Clock::mock();
        let script = Arc::new(Mutex::new(Script {
            reading: SelfReading {
                rss: 1 << 20,
                ..SelfReading::default()
            },
            live: LiveChildren::default(),
            gone: false,
            reads: 0,
        }));
        let info = RunInfo {
            sampler: "fake",
            ..RunInfo::default()
        };
        let reader = Box::new(FakeSelf(Arc::clone(&script)));
        let tree = crate::sources::tree::open(reader, Default::default(), &config);
        let mut recorder = Recorder::new(
            config,
            info,
            crate::clock::Clock::Quanta(clock),
            &mut vec![tree, crate::sources::cpu::open()],
        );
        THREAD_CPU.with(|cpu| cpu.set(None));
        recorder.counters.thread_clock = fake_thread_cpu;
        Rig {
            recorder,
            clock: mock,
            script,
        }
    }

    /// A new thread slot; the first one is the monitor's own thread.
    pub(super) fn thread(&self) -> Arc<ThreadSlot> {
        self.recorder.register_thread()
    }

    pub(super) fn advance_micros(&self, micros: u64) {
        self.clock.increment(micros * 1_000);
    }

    /// What the boundary reads from now on: RSS and the mark since the last reading.
    pub(super) fn set_self(&self, rss: u64, hwm: Option<u64>) {
        let mut script = self.script.lock().unwrap();
        script.reading.rss = rss;
        script.reading.hwm = hwm;
    }

    /// From now on a child has exited at each reading, and the live ones hold `live`.
    pub(super) fn set_children_changed(&self, live: LiveChildren) {
        let mut script = self.script.lock().unwrap();
        script.reading.children_changed = true;
        script.live = live;
    }

    /// From now on each reading tells of a reaping (the kernel's figure `bytes`) of
    /// `ended` processes no sample read (`None`: none).
    pub(super) fn set_reaped(&self, bytes: Option<u64>, ended: Option<u32>) {
        let mut script = self.script.lock().unwrap();
        script.reading.reaped = bytes;
        script.reading.reaped_at_most = bytes;
        script.reading.ended_unsampled = ended;
        script.reading.children_changed = ended.is_some();
    }

    /// Whether every exit comes with its record, from now on.
    pub(super) fn set_exits_recorded(&self, recorded: bool) {
        self.script.lock().unwrap().reading.exits_recorded = recorded;
    }

    /// What the boundary reads of the tree's CPU and I/O (this process and its reaped
    /// children) from now on.
    pub(super) fn set_usage(&self, usage: Usage) {
        self.script.lock().unwrap().reading.usage = Some(usage);
    }

    /// What the thread clock reads from now on.
    pub(super) fn set_thread_cpu(&self, micros: Option<u64>) {
        THREAD_CPU.with(|cpu| cpu.set(micros));
    }

    /// From now on `live_children` finds every descendant gone (or none).
    pub(super) fn set_gone(&self, gone: bool) {
        self.script.lock().unwrap().gone = gone;
    }

    /// How many boundary readings were taken.
    pub(super) fn self_reads(&self) -> u32 {
        self.script.lock().unwrap().reads
    }

    /// Takes a full sample whose reading is what `read` does and returns (what it does
    /// happens while the sample reads the tree).
    pub(super) fn sample_during(&self, read: impl FnOnce() -> TreeReading + Send) {
        self.recorder
            .take_sample(&mut During(Some(read)), &mut [])
            .expect("a fake sample");
    }

    /// Takes a full sample that reads `reading`.
    pub(super) fn sample(&self, reading: TreeReading) {
        self.recorder
            .take_sample(&mut FakeTree(reading), &mut [])
            .expect("a fake sample");
    }
}
