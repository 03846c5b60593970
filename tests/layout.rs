//! The runtime's modules depend one way (STYLE: memory/ and report ← recorder ← context
//! ← stage / future; recorder ← sampler ← monitor ← builder): no import cycle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Top-level module → the top-level modules its non-test code names as `crate::x`.
fn dependencies() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("stemmon/src");
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut files = vec![src.clone()];
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        let relative = path.strip_prefix(&src).unwrap();
        let top = relative
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_owned();
        // The crate root and the expansions' door re-export everything by design.
        if top == "lib" || top == "private" || path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let code = text.split("#[cfg(test)]\nmod tests").next().unwrap();
        let deps = graph.entry(top.clone()).or_default();
        for line in code.lines() {
            let line = line.split("//").next().unwrap();
            for (i, _) in line.match_indices("crate::") {
                let rest = &line[i + "crate::".len()..];
                let names: Vec<&str> = match rest.strip_prefix('{') {
                    Some(group) => group.split([',', '}']).collect(),
                    None => vec![rest],
                };
                for name in names {
                    let name: String = name
                        .trim()
                        .chars()
                        .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                        .collect();
                    if !name.is_empty() && name != top && name != "self" {
                        deps.insert(name);
                    }
                }
            }
        }
    }
    graph
}

/// Panics on a cycle of `graph`'s edges (a depth-first search for a back edge).
fn assert_acyclic(graph: &BTreeMap<String, BTreeSet<String>>) {
    fn visit<'a>(
        node: &'a str,
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) {
        if let Some(start) = path.iter().position(|n| *n == node) {
            panic!("import cycle: {} -> {node}", path[start..].join(" -> "));
        }
        if !done.insert(node) {
            return;
        }
        path.push(node);
        for next in graph.get(node).into_iter().flatten() {
            visit(next, graph, path, done);
        }
        path.pop();
    }
    let mut done = BTreeSet::new();
    for node in graph.keys() {
        visit(node, graph, &mut Vec::new(), &mut done);
    }
}

#[test]
fn the_runtime_modules_have_no_import_cycle() {
    let graph = dependencies();
    assert!(graph.contains_key("recorder") && graph.contains_key("monitor"));
    assert_acyclic(&graph);
    // The engine never reaches back to the lifecycle or the sampler.
    for low in ["recorder", "context", "stage", "memory", "report"] {
        for high in ["monitor", "builder", "sampler"] {
            assert!(!graph[low].contains(high), "{low} depends on {high}");
        }
    }
}

/// For each folder of the command's modules (`stemmon-cli/src/plot`...), its files →
/// the sibling files their non-test code names (`super::x`, `crate::<folder>::x`,
/// `super::{x, y}`); the folder's `mod.rs` declares them all and is left out.
fn command_dependencies() -> Vec<(String, BTreeMap<String, BTreeSet<String>>)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("stemmon-cli/src");
    let mut folders = Vec::new();
    for entry in std::fs::read_dir(&src).unwrap() {
        let folder = entry.unwrap().path();
        if !folder.is_dir() {
            continue;
        }
        let dir = folder.file_name().unwrap().to_string_lossy().into_owned();
        let files: BTreeMap<String, String> = std::fs::read_dir(&folder)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "rs"))
            .map(|p| {
                let name = p.file_stem().unwrap().to_string_lossy().into_owned();
                let text = std::fs::read_to_string(&p).unwrap();
                (name, text.split("#[cfg(test)]").next().unwrap().to_owned())
            })
            .filter(|(name, _)| name != "mod")
            .collect();
        let mut graph = BTreeMap::new();
        for (name, code) in &files {
            let mut deps = BTreeSet::new();
            for line in code.lines() {
                let line = line.split("//").next().unwrap();
                let inside = format!("crate::{dir}::");
                for prefix in ["super::", inside.as_str()] {
                    for (i, _) in line.match_indices(prefix) {
                        let rest = &line[i + prefix.len()..];
                        let names: Vec<&str> = match rest.strip_prefix('{') {
                            Some(group) => group.split([',', '}']).collect(),
                            None => vec![rest],
                        };
                        for sibling in names {
                            let sibling: String = sibling
                                .trim()
                                .chars()
                                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                                .collect();
                            if sibling != *name && files.contains_key(&sibling) {
                                deps.insert(sibling);
                            }
                        }
                    }
                }
            }
            graph.insert(name.clone(), deps);
        }
        folders.push((dir, graph));
    }
    folders
}

#[test]
fn the_command_modules_have_no_import_cycle() {
    let folders = command_dependencies();
    let plot = folders.iter().find(|(dir, _)| dir == "plot").unwrap();
    assert!(plot.1["svg"].contains("frame"), "{:?}", plot.1);
    for (_, graph) in &folders {
        assert_acyclic(graph);
    }
}

/// The non-test code of every `.rs` file under `stemmon/src/<dir>`, with its path.
fn sources_under(dir: &str) -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("stemmon/src")
        .join(dir);
    let mut found = Vec::new();
    let mut pending = vec![root];
    while let Some(path) = pending.pop() {
        if path.is_dir() {
            pending.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        } else if path.extension().is_some_and(|e| e == "rs")
            && path
                .file_name()
                .is_some_and(|n| n != "tests.rs" && n != "fake.rs")
        {
            let text = std::fs::read_to_string(&path).unwrap();
            let code = text
                .split("#[cfg(test)]")
                .next()
                .unwrap()
                .split("#[cfg(all(test")
                .next()
                .unwrap()
                .to_owned();
            let name = path
                .strip_prefix(env!("CARGO_MANIFEST_DIR"))
                .unwrap_or(&path);
            found.push((name.display().to_string(), code));
        }
    }
    assert!(!found.is_empty(), "no sources under stemmon/src/{dir}");
    found
}

#[test]
fn the_engine_does_no_io() {
    // The publisher writes, prints and pushes; the engine only records.
    let forbidden = [
        "std::fs",
        "File::",
        "std::io::Write",
        "stderr",
        "stdout",
        "println!",
        "eprintln!",
        "print!",
        "ureq",
        "TcpStream",
    ];
    for (path, code) in sources_under("recorder") {
        for line in code.lines().map(|l| l.split("//").next().unwrap()) {
            for api in forbidden {
                assert!(!line.contains(api), "{path} uses {api}: {line}");
            }
        }
    }
}

#[test]
fn the_readers_keep_no_process_wide_state() {
    // Each monitor owns its ledger: no mutable static is shared by every monitor. (The
    // one thing monitors share on purpose, the process's one high-water mark, is
    // exchanged in sys/linux/own_mark.rs.)
    let readers = sources_under("memory")
        .into_iter()
        .chain(sources_under("sys"));
    for (path, code) in readers.filter(|(path, _)| !path.ends_with("own_mark.rs")) {
        for line in code.lines().map(|l| l.split("//").next().unwrap().trim()) {
            let is_static = line.starts_with("static ") || line.starts_with("pub(crate) static ");
            assert!(
                !(is_static || line.contains("thread_local!") || line.contains("static mut")),
                "{path} keeps process-wide state: {line}"
            );
        }
    }
}

#[test]
fn no_source_file_is_over_500_lines_before_its_tests() {
    let mut long = Vec::new();
    for crate_src in ["stemmon/src", "stemmon-cli/src"] {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(crate_src);
        let mut pending = vec![root];
        while let Some(path) = pending.pop() {
            if path.is_dir() {
                pending.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
                continue;
            }
            // A file of unit tests only (`mod tests;`) is all tests.
            if path.extension().is_none_or(|e| e != "rs") || path.ends_with("tests.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let lines = text
                .lines()
                .take_while(|line| {
                    !line.starts_with("#[cfg(test)]") && !line.starts_with("#[cfg(all(test")
                })
                .count();
            if lines > 500 {
                let name = path
                    .strip_prefix(env!("CARGO_MANIFEST_DIR"))
                    .unwrap_or(&path);
                long.push(format!("{} ({lines} lines)", name.display()));
            }
        }
    }
    assert!(
        long.is_empty(),
        "over 500 lines before their tests: {long:?}"
    );
}
