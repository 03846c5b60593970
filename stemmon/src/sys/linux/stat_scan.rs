//! Where the kernel has no `children` files (no CONFIG_PROC_CHILDREN), the tree is
//! found by a scan of every `/proc/*/stat` parent field instead: slower, and only there.

use super::procfs::{parse_stat_ppid, ProcPath};
use std::collections::HashMap;
use std::fs;
use std::io;

/// Whether this kernel has `children` files (CONFIG_PROC_CHILDREN): this process's
/// main thread has one if any task does.
pub(super) fn has_children_files(own_pid: u32) -> bool {
    let task = ProcPath::of_task(own_pid, own_pid, "children");
    match fs::metadata(task.as_path()) {
        Ok(_) => true,
        // The task exists but the file does not: the kernel lacks them.
        Err(_) => fs::metadata(ProcPath::of_task(own_pid, own_pid, "stat").as_path()).is_err(),
    }
}

/// `root` and its descendants, root first, each with whether it is `root`'s own child,
/// from a scan of every `/proc/*/stat` parent field (the fallback: it allocates, and
/// reads every process of the system).
pub(super) fn scan_stat(root: u32) -> io::Result<Vec<(u32, bool)>> {
    let mut kids: HashMap<u32, Vec<u32>> = HashMap::new();
    for entry in fs::read_dir("/proc")? {
        let Ok(entry) = entry else { continue };
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(text) = fs::read(ProcPath::of(pid, "stat").as_path()) else {
            continue;
        };
        if let Some(ppid) = parse_stat_ppid(&text) {
            kids.entry(ppid).or_default().push(pid);
        }
    }
    fs::metadata(ProcPath::of(root, "").as_path())?;
    let mut tree = vec![(root, false)];
    let mut index = 0;
    while index < tree.len() {
        if let Some(children) = kids.remove(&tree[index].0) {
            let direct = index == 0;
            tree.extend(children.into_iter().map(|pid| (pid, direct)));
        }
        index += 1;
    }
    Ok(tree)
}
