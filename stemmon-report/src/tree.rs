//! A report's stage tree, checked once as it is read: every `id` is the stage's index,
//! every `parent_id` names a stage, no parent chain is a cycle, no path is there twice.
//! Then the lookups every subcommand needs, each linear in the report: stage by path,
//! depth, tree order. Nothing here recurses over `parent_id`, so a 100 000-deep chain
//! costs what 100 000 flat stages cost.

use crate::text::short;
use crate::{Report, StageReport};
use std::collections::HashMap;

/// The checked stage tree of one report: lookups by path, depth and tree order.
#[derive(Debug)]
pub struct StageTree {
    by_path: HashMap<String, usize>,
    depth: Vec<usize>,
    order: Vec<usize>,
}

impl StageTree {
    /// Checks `report`'s stages; the error is one line that names the first stage wrong.
    pub fn of(report: &Report) -> Result<StageTree, String> {
        let stages = &report.stages;
        let mut by_path = HashMap::with_capacity(stages.len());
        for (index, stage) in stages.iter().enumerate() {
            if stage.id as usize != index {
                return Err(format!(
                    "stage {index} (`{}`) has id {}: a stage's id is its index in `stages`",
                    short(&stage.path),
                    stage.id
                ));
            }
            if let Some(parent) = stage.parent_id {
                if parent as usize >= stages.len() {
                    return Err(format!(
                        "stage {index} (`{}`) has parent_id {parent}, which names no stage",
                        short(&stage.path)
                    ));
                }
            }
            if let Some(first) = by_path.insert(stage.path.clone(), index) {
                return Err(format!(
                    "the stage path `{}` is there twice (stages {first} and {index})",
                    short(&stage.path)
                ));
            }
        }
        let depth = depths(stages)?;
        let order = tree_order(stages);
        Ok(StageTree {
            by_path,
            depth,
            order,
        })
    }

    /// The index of the stage with `path`.
    pub fn index(&self, path: &str) -> Option<usize> {
        self.by_path.get(path).copied()
    }

    /// The stage with `path` in `report` (the report this tree was made of).
    pub fn stage<'r>(&self, report: &'r Report, path: &str) -> Option<&'r StageReport> {
        self.index(path).map(|index| &report.stages[index])
    }

    /// How many stages enclose stage `index` (0 at the top level).
    pub fn depth(&self, index: usize) -> usize {
        self.depth[index]
    }

    /// Stage indices in tree order: each stage followed by its children, siblings in
    /// order of first entry.
    pub fn order(&self) -> &[usize] {
        &self.order
    }
}

/// Each stage's depth, walking each chain up only as far as a stage already known; a
/// chain that comes back to a stage on it is a cycle.
fn depths(stages: &[StageReport]) -> Result<Vec<usize>, String> {
    const UNKNOWN: usize = usize::MAX;
    const ON_CHAIN: usize = usize::MAX - 1;
    let mut depth = vec![UNKNOWN; stages.len()];
    let mut chain = Vec::new();
    for start in 0..stages.len() {
        let mut at = start;
        // Up to the top or to a stage whose depth is known.
        let base = loop {
            match depth[at] {
                UNKNOWN => {}
                ON_CHAIN => {
                    return Err(format!(
                        "the stage `{}` is its own ancestor (a parent_id cycle)",
                        short(&stages[at].path)
                    ))
                }
                known => break known + 1,
            }
            depth[at] = ON_CHAIN;
            chain.push(at);
            match stages[at].parent_id {
                Some(parent) => at = parent as usize,
                None => break 0,
            }
        };
        // The chain, top first, gets base, base + 1, ...
        for (offset, index) in chain.drain(..).rev().enumerate() {
            depth[index] = base + offset;
        }
    }
    Ok(depth)
}

/// Depth-first over an explicit stack (no recursion), children in order of index.
fn tree_order(stages: &[StageReport]) -> Vec<usize> {
    // Children lists as one array: `first[i]..first[i + 1]` in `children` are i's.
    let mut count = vec![0usize; stages.len() + 1];
    for stage in stages {
        if let Some(parent) = stage.parent_id {
            count[parent as usize + 1] += 1;
        }
    }
    for i in 1..count.len() {
        count[i] += count[i - 1];
    }
    let first = count.clone();
    let mut children = vec![0usize; first[stages.len()]];
    let mut next = count;
    for (index, stage) in stages.iter().enumerate() {
        if let Some(parent) = stage.parent_id {
            children[next[parent as usize]] = index;
            next[parent as usize] += 1;
        }
    }
    let mut order = Vec::with_capacity(stages.len());
    let mut stack: Vec<usize> = (0..stages.len())
        .rev()
        .filter(|&i| stages[i].parent_id.is_none())
        .collect();
    while let Some(index) = stack.pop() {
        order.push(index);
        stack.extend(children[first[index]..first[index + 1]].iter().rev());
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(parents: &[Option<u32>]) -> Report {
        Report {
            stages: parents
                .iter()
                .enumerate()
                .map(|(i, &parent)| StageReport {
                    id: i as u32,
                    path: format!("s{i}"),
                    parent_id: parent,
                    ..StageReport::default()
                })
                .collect(),
            ..Report::default()
        }
    }

    #[test]
    fn order_and_depth_follow_the_parents() {
        let tree = StageTree::of(&report(&[None, Some(0), None, Some(1), Some(0)])).unwrap();
        assert_eq!(tree.order(), &[0, 1, 3, 4, 2]);
        assert_eq!(
            (0..5).map(|i| tree.depth(i)).collect::<Vec<_>>(),
            [0, 1, 0, 2, 1]
        );
        assert_eq!(tree.index("s3"), Some(3));
    }

    #[test]
    fn a_deep_chain_is_walked_without_recursion() {
        let parents: Vec<Option<u32>> = (0..100_000u32).map(|i| i.checked_sub(1)).collect();
        let tree = StageTree::of(&report(&parents)).unwrap();
        assert_eq!(tree.depth(99_999), 99_999);
        assert_eq!(tree.order().len(), 100_000);
    }

    #[test]
    fn cycles_duplicates_and_bad_ids_are_refused() {
        assert!(StageTree::of(&report(&[Some(1), Some(0)]))
            .unwrap_err()
            .contains("cycle"));
        assert!(StageTree::of(&report(&[Some(0)]))
            .unwrap_err()
            .contains("cycle"));
        assert!(StageTree::of(&report(&[Some(7)]))
            .unwrap_err()
            .contains("names no stage"));
        let mut twice = report(&[None, None]);
        twice.stages[1].path = "s0".into();
        assert!(StageTree::of(&twice).unwrap_err().contains("twice"));
        let mut wrong_id = report(&[None]);
        wrong_id.stages[0].id = 3;
        assert!(StageTree::of(&wrong_id).unwrap_err().contains("index"));
    }
}
