//! The merged stage tree: the union of the inputs' stage paths, parents before
//! children, each stage's figures folded, in linear time (one map of paths).

use super::fold::{fold_fields, keep_bounds, recompute, within};
use super::section::{spreads, StageSpreads};
use crate::input::Loaded;
use std::collections::{BTreeMap, HashMap};
use stemmon::report::StageReport;
use stemmon_report::fields::{field, Unit};

/// A stage path across the inputs: where it sits, and the input stages that have it.
struct Slot<'a> {
    name: &'a str,
    path: &'a str,
    parent: Option<u32>,
    found: Vec<(usize, &'a StageReport)>,
}

/// The merged stages, their spreads, and for each input the merged id of each of its
/// stages (to carry its spans over).
pub(super) fn merged_stages(
    reports: &[(String, Loaded)],
) -> (Vec<StageReport>, Vec<StageSpreads>, Vec<Vec<u32>>) {
    let mut at: HashMap<&str, u32> = HashMap::new();
    let mut slots: Vec<Slot> = Vec::new();
    let mut ids: Vec<Vec<u32>> = Vec::with_capacity(reports.len());
    for (index, (_, loaded)) in reports.iter().enumerate() {
        let stages = &loaded.report.stages;
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
                let slot = match at.get(stage.path.as_str()) {
                    Some(&slot) => slot,
                    None => {
                        let slot = slots.len() as u32;
                        slots.push(Slot {
                            name: &stage.name,
                            path: &stage.path,
                            parent: stage.parent_id.and_then(|p| id_of[p as usize]),
                            found: Vec::new(),
                        });
                        at.insert(&stage.path, slot);
                        slot
                    }
                };
                id_of[i] = Some(slot);
                slots[slot as usize].found.push((index, stage));
            }
        }
        ids.push(id_of.into_iter().map(|id| id.unwrap_or(0)).collect());
    }
    let mut stages = Vec::with_capacity(slots.len());
    let mut spread_list = Vec::with_capacity(slots.len());
    for (id, slot) in slots.into_iter().enumerate() {
        let found = &slot.found;
        let mut stage = StageReport::default();
        stage.id = id as u32;
        stage.name = slot.name.to_owned();
        stage.path = slot.path.to_owned();
        stage.parent_id = slot.parent;
        fold_fields(&mut stage, found, |field, s| field.of_stage(s));
        let with_cpu =
            |s: &StageReport| field("cpu_seconds").is_some_and(|f| f.of_stage(s).is_some());
        let cpu_wall: f64 = found
            .iter()
            .filter(|(_, s)| with_cpu(s))
            .map(|(_, s)| s.wall_seconds)
            .sum();
        recompute(&mut stage, within(Unit::Seconds, cpu_wall));
        let StageReport {
            peaks, high_water, ..
        } = &mut stage;
        keep_bounds(peaks, high_water);
        let each = || found.iter().map(|(_, s)| *s);
        stage.threads = each().map(|s| s.threads).fold(0u32, u32::saturating_add);
        stage.start_seconds = each().map(|s| s.start_seconds).fold(f64::MAX, f64::min);
        stage.min_wall_seconds = each().map(|s| s.min_wall_seconds).fold(f64::MAX, f64::min);
        stage.max_wall_seconds = each().map(|s| s.max_wall_seconds).fold(0.0, f64::max);
        stage.error = each().find_map(|s| s.error.clone());
        stage.samples = each().map(|s| s.samples).fold(0u64, u64::saturating_add);
        stage.partial_rss_samples = each()
            .map(|s| s.partial_rss_samples)
            .fold(0u64, u64::saturating_add);
        spread_list.push(StageSpreads {
            path: stage.path.clone(),
            reports: found.len() as u32,
            first_report: found.first().map_or(0, |(at, _)| *at),
            figures: if found.len() > 1 {
                spreads(found, |field, s| field.of_stage(s))
            } else {
                BTreeMap::new()
            },
        });
        stages.push(stage);
    }
    (stages, spread_list, ids)
}
