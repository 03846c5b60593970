//! The merged stage tree: the union of the inputs' stage paths, parents before
//! children, each stage's figures folded, in linear time (one map of paths).
//!
//! The inputs are folded in one at a time, each dropped once folded: what is held
//! between them is, per stage path, its place in the tree and its figures so far (one
//! input's values, 16 bytes a figure; from a second input on, the spread of each, 40
//! bytes, from which its folded figures come: a sum is the spread's sum, a peak its
//! max), never the inputs' records.

use super::fold::{keep_bounds, recompute, within};
use super::section::{Spread, StageSpreads};
use std::collections::HashMap;
use std::rc::Rc;
use stemmon::report::StageReport;
use stemmon_report::fields::{field, Field, Fold, Unit, FIELDS};

/// The stage paths of the inputs folded so far.
#[derive(Default)]
pub(super) struct Stages {
    /// Each path's index in `slots`.
    at: HashMap<Rc<str>, u32>,
    slots: Vec<Slot>,
}

/// A stage path's figures: one input's values, or their spreads over several.
enum Figures {
    /// The values of the one input that ran it: (index in [`FIELDS`], value).
    One(Vec<(u8, f64)>),
    /// Each figure's spread over the inputs that had it.
    Many(Vec<Spread>),
}

/// A stage path across the inputs folded so far: where it sits, and its figures.
struct Slot {
    name: String,
    path: Rc<str>,
    parent: Option<u32>,
    /// How many inputs ran it, and the first that did.
    reports: u32,
    first_report: usize,
    /// Its figures, in the order of [`FIELDS`].
    figures: Figures,
    /// The wall seconds of the inputs' stages that had CPU figures.
    cpu_wall: f64,
    threads: u32,
    start_seconds: f64,
    min_wall_seconds: f64,
    max_wall_seconds: f64,
    error: Option<String>,
    samples: u64,
    partial_rss_samples: u64,
}

impl Stages {
    /// Folds in the (checked) stages of the input at index `input`: the merged id of each
    /// of its stages (to carry its spans over).
    pub(super) fn add(&mut self, input: usize, stages: &[StageReport]) -> Vec<u32> {
        let mut id_of: Vec<Option<u32>> = vec![None; stages.len()];
        let mut chain = Vec::new();
        for start in 0..stages.len() {
            // In order of index, each stage after its parent: where a (hand-made) report
            // lists a child first, its ancestors not yet placed go before it. The tree is
            // checked, so the walk up ends; each stage is placed once.
            let mut at_stage = Some(start);
            while let Some(i) = at_stage.filter(|&i| id_of[i].is_none()) {
                chain.push(i);
                at_stage = stages[i].parent_id.map(|p| p as usize);
            }
            while let Some(i) = chain.pop() {
                let stage = &stages[i];
                let slot = match self.at.get(stage.path.as_str()) {
                    Some(&slot) => slot,
                    None => {
                        let slot = self.slots.len() as u32;
                        let path: Rc<str> = Rc::from(stage.path.as_str());
                        self.slots.push(Slot::new(
                            &stage.name,
                            Rc::clone(&path),
                            stage.parent_id.and_then(|p| id_of[p as usize]),
                            input,
                        ));
                        self.at.insert(path, slot);
                        slot
                    }
                };
                id_of[i] = Some(slot);
                self.slots[slot as usize].add(input, stage);
            }
        }
        id_of.into_iter().map(|id| id.unwrap_or(0)).collect()
    }

    /// The merged stages and their spreads.
    pub(super) fn finish(self) -> (Vec<StageReport>, Vec<StageSpreads>) {
        drop(self.at);
        let mut slots = self.slots;
        let mut stages = Vec::with_capacity(slots.len());
        let mut spread_list = Vec::with_capacity(slots.len());
        // From the last: the slots' memory goes back as the stages take theirs.
        while let Some(slot) = slots.pop() {
            let (stage, spreads) = slot.finish(slots.len() as u32);
            stages.push(stage);
            spread_list.push(spreads);
            if slots.len().is_multiple_of(4096) {
                slots.shrink_to_fit();
            }
        }
        stages.reverse();
        spread_list.reverse();
        (stages, spread_list)
    }
}

impl Slot {
    fn new(name: &str, path: Rc<str>, parent: Option<u32>, input: usize) -> Slot {
        Slot {
            name: name.to_owned(),
            path,
            parent,
            reports: 0,
            first_report: input,
            figures: Figures::One(Vec::new()),
            cpu_wall: 0.0,
            threads: 0,
            start_seconds: f64::MAX,
            min_wall_seconds: f64::MAX,
            max_wall_seconds: 0.0,
            error: None,
            samples: 0,
            partial_rss_samples: 0,
        }
    }

    /// Takes in the stage of this path of the input at index `input`.
    fn add(&mut self, input: usize, stage: &StageReport) {
        self.reports += 1;
        let values = FIELDS
            .iter()
            .enumerate()
            .filter_map(|(index, field)| field.of_stage(stage).map(|value| (index, value)));
        if self.reports == 1 {
            // The first input's figures: room for exactly those.
            self.figures = Figures::One(values.map(|(at, value)| (at as u8, value)).collect());
            return self.add_the_rest(stage);
        }
        if let Figures::One(first) = &self.figures {
            let first = first
                .iter()
                .map(|&(at, value)| Spread::new(usize::from(at), self.first_report, value))
                .collect();
            self.figures = Figures::Many(first);
        }
        if let Figures::Many(spreads) = &mut self.figures {
            for (index, value) in values {
                match spreads.binary_search_by_key(&index, |spread| spread.field_index()) {
                    Ok(at) => spreads[at].add(input, value),
                    Err(at) => spreads.insert(at, Spread::new(index, input, value)),
                }
            }
        }
        self.add_the_rest(stage);
    }

    /// Takes in `stage`'s own figures beside those of the field table.
    fn add_the_rest(&mut self, stage: &StageReport) {
        if field("cpu_seconds").is_some_and(|f| f.of_stage(stage).is_some()) {
            self.cpu_wall += stage.wall_seconds;
        }
        self.threads = self.threads.saturating_add(stage.threads);
        self.start_seconds = self.start_seconds.min(stage.start_seconds);
        self.min_wall_seconds = self.min_wall_seconds.min(stage.min_wall_seconds);
        self.max_wall_seconds = self.max_wall_seconds.max(stage.max_wall_seconds);
        if self.error.is_none() {
            self.error.clone_from(&stage.error);
        }
        self.samples = self.samples.saturating_add(stage.samples);
        self.partial_rss_samples = self
            .partial_rss_samples
            .saturating_add(stage.partial_rss_samples);
    }

    /// The merged stage `id`, and its spreads (none for a stage one input ran).
    fn finish(self, id: u32) -> (StageReport, StageSpreads) {
        let mut stage = StageReport::default();
        stage.id = id;
        stage.name = self.name;
        stage.path = self.path.as_ref().to_owned();
        stage.parent_id = self.parent;
        // Each figure the table lets be set, folded by its `fold` (one computed from
        // others is recomputed below): of one input, its value.
        let folded: Vec<(&Field, f64)> = match &self.figures {
            Figures::One(values) => values
                .iter()
                .map(|&(at, value)| (&FIELDS[usize::from(at)], value))
                .collect(),
            Figures::Many(spreads) => spreads
                .iter()
                .filter_map(|spread| match spread.field().fold {
                    Fold::Sum => Some((spread.field(), spread.sum)),
                    Fold::Max => Some((spread.field(), spread.max)),
                    Fold::Derived => None,
                })
                .collect(),
        };
        for (field, value) in folded {
            if field.is_key() && field.fold != Fold::Derived {
                field.set(&mut stage, Some(within(field.unit, value)));
            }
        }
        recompute(&mut stage, within(Unit::Seconds, self.cpu_wall));
        let StageReport {
            peaks, high_water, ..
        } = &mut stage;
        keep_bounds(peaks, high_water);
        stage.threads = self.threads;
        stage.start_seconds = self.start_seconds;
        stage.min_wall_seconds = self.min_wall_seconds;
        stage.max_wall_seconds = self.max_wall_seconds;
        stage.error = self.error;
        stage.samples = self.samples;
        stage.partial_rss_samples = self.partial_rss_samples;
        let mut figures = match self.figures {
            Figures::Many(spreads) => spreads,
            Figures::One(_) => Vec::new(),
        };
        // Written in the order of their keys.
        figures.sort_unstable_by_key(|spread| spread.field().key);
        let spreads = StageSpreads {
            path: stage.path.clone(),
            reports: self.reports,
            first_report: self.first_report,
            figures,
        };
        (stage, spreads)
    }
}
