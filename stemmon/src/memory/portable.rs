//! The portable reader: sysinfo's process table, walked by parent links.

use super::{TreeReader, TreeReading};
use std::collections::HashMap;
use std::io;
use sysinfo::{Pid, ProcessRefreshKind, ProcessesToUpdate, System};

/// Reads a tree through sysinfo; works wherever sysinfo does.
pub(crate) struct SysinfoReader {
    system: Option<System>,
}

impl SysinfoReader {
    pub(crate) fn new(_detailed: bool) -> SysinfoReader {
        SysinfoReader {
            system: System::new().ok(),
        }
    }
}

impl TreeReader for SysinfoReader {
    fn name(&self) -> &'static str {
        "sysinfo"
    }

    fn read_tree(&mut self, root: u32) -> io::Result<TreeReading> {
        let system = self
            .system
            .as_mut()
            .ok_or_else(|| io::Error::other("sysinfo could not open the process table"))?;
        system.refresh_processes_specifics(
            ProcessesToUpdate::All,
            true,
            ProcessRefreshKind::nothing().with_memory(),
        );
        let processes = system.processes();
        let root_process = processes
            .get(&Pid::from_u32(root))
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no process {root}")))?;
        let mut kids: HashMap<Pid, Vec<Pid>> = HashMap::new();
        for (pid, process) in processes {
            // Threads show as processes on some systems; they are not descendants.
            if process.thread_kind().is_some() {
                continue;
            }
            if let Some(parent) = process.parent() {
                kids.entry(parent).or_default().push(*pid);
            }
        }
        let parent_rss = root_process.memory();
        let (mut children_rss, mut count) = (0u64, 1u32);
        let mut queue = kids.remove(&Pid::from_u32(root)).unwrap_or_default();
        while let Some(pid) = queue.pop() {
            count += 1;
            if let Some(process) = processes.get(&pid) {
                children_rss += process.memory();
            }
            if let Some(more) = kids.remove(&pid) {
                queue.extend(more);
            }
        }
        Ok(TreeReading {
            tree_rss: Some(parent_rss + children_rss),
            parent_rss: Some(parent_rss),
            children_rss: Some(children_rss),
            process_count: count,
            rss_processes: count,
            rss_complete: true,
            ..TreeReading::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_child_and_its_memory() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let reading = SysinfoReader::new(false)
            .read_tree(std::process::id())
            .unwrap();
        assert!(reading.process_count >= 2, "{reading:?}");
        assert!(reading.parent_rss.unwrap() > 1 << 20);
        assert!(reading.children_rss.unwrap() > 0);
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
