//! The house's shape (issue 26): the runtime's modules depend one way (memory/
//! and report ← recorder ← context ← stage / future; recorder ← sampler ← monitor ←
//! builder), no module of any crate imports in a circle at any level, no source file is
//! over 500 lines before its tests, one module reads the environment and one writes the
//! warning prefix.

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
            // Up to its tests module: a `#[cfg(test)]` item above it (a test rig's
            // module) does not end the code.
            let code: String = text
                .lines()
                .take(lines_before_tests(&text))
                .flat_map(|line| [line, "\n"])
                .collect();
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

/// The engine aggregates the measurements' figures by their declarations alone: no
/// code of `recorder/` names a figure of a measurement (the tree's memory and marks,
/// the heap's, CPU and I/O's, the cgroup's, the GPU's, the descriptors', the
/// pressure's) or what one reads.
#[test]
fn the_engine_names_no_measurements_figure() {
    let forbidden = [
        "cpu_io",
        "CpuIo",
        "cpu_cores",
        "cpu_user",
        "io_missing",
        "io_read",
        "Usage",
        "thread_cpu",
        "cgroup_",
        "oom_kill",
        "gpu",
        "tree_fds",
        "pressure",
        "sources::cpu",
        "Heap",
        "heap_",
        "heap::slots",
        "sources::heap",
        "allocat",
        "freed",
        "rss",
        "hwm",
        "high_water",
        "HighWater",
        "Peaks",
        "reaped",
        "bound_parts",
        "Stats",
        "sources::tree",
        "descendants",
    ];
    let mut found = Vec::new();
    for (path, code) in sources_under("recorder") {
        for line in code.lines().map(|l| l.split("//").next().unwrap()) {
            for name in forbidden.iter().filter(|name| line.contains(*name)) {
                found.push(format!("{path} names {name}: {}", line.trim()));
            }
        }
    }
    assert!(found.is_empty(), "{found:#?}");
}

/// The runtime's code outside `sys/`, line by line with its comments left out: each
/// line where it names one of `names`, as `path names name: line`.
fn outside_sys_naming(names: &[&str]) -> Vec<String> {
    let sys = format!("stemmon{0}src{0}sys{0}", std::path::MAIN_SEPARATOR);
    let mut found = Vec::new();
    for (path, code) in sources_under("")
        .into_iter()
        .filter(|(p, _)| !p.starts_with(&sys))
    {
        for line in code.lines().map(|l| l.split("//").next().unwrap()) {
            for name in names.iter().filter(|name| line.contains(*name)) {
                found.push(format!("{path} names {name}: {}", line.trim()));
            }
        }
    }
    found
}

/// The runtime's one OS seam: no code outside `sys/` names a path of `/proc` or `/sys`
/// (a message may say that a figure comes from `/proc`; a literal path is a read).
#[test]
fn only_the_platform_reads_proc_and_sys() {
    let found = outside_sys_naming(&["\"/proc", "\"/sys/"]);
    assert!(
        found.is_empty(),
        "paths of /proc or /sys outside sys/: {found:#?}"
    );
}

/// The runtime's one OS seam for what it reads of the system through calls as well: no
/// code outside `sys/` calls the kernel for a figure (a peak, a usage, an exit).
#[test]
fn only_the_platform_calls_the_kernel_for_figures() {
    let calls = [
        "libc::getrusage",
        "libc::wait4",
        "libc::waitid",
        "libc::sysinfo",
    ];
    let found = outside_sys_naming(&calls);
    assert!(found.is_empty(), "kernel reads outside sys/: {found:#?}");
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

/// The source folders of the workspace's crates.
const CRATES: [&str; 7] = [
    "stemmon/src",
    "stemmon-cli/src",
    "stemmon-report/src",
    "stemmon-macros/src",
    "src",
    "bench/src",
    "examples",
];

/// The code of `text` before its unit tests.
fn before_tests(text: &str) -> &str {
    let end = ["#[cfg(test)]", "#[cfg(all(test"]
        .iter()
        .filter_map(|marker| text.find(marker))
        .min()
        .unwrap_or(text.len());
    &text[..end]
}

/// Every `.rs` file of the crate at `crate_src` that is not a file of tests, with its
/// module path (`recorder/calls.rs` is `["recorder", "calls"]`, `sys/mod.rs` is
/// `["sys"]`, the crate root `[]`) and its code before its tests.
fn modules(crate_src: &str) -> Vec<(Vec<String>, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(crate_src);
    let mut found = Vec::new();
    let mut pending = vec![root.clone()];
    while let Some(path) = pending.pop() {
        if path.is_dir() {
            pending.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.ends_with(".rs") || name == "tests.rs" || name == "fake.rs" {
            continue;
        }
        let relative = path.strip_prefix(&root).unwrap();
        let mut module: Vec<String> = relative
            .components()
            .map(|c| {
                c.as_os_str()
                    .to_string_lossy()
                    .trim_end_matches(".rs")
                    .to_owned()
            })
            .collect();
        if matches!(
            module.last().map(String::as_str),
            Some("mod" | "lib" | "main")
        ) {
            module.pop();
        }
        let text = std::fs::read_to_string(&path).unwrap();
        found.push((module, before_tests(&text).to_owned()));
    }
    found
}

/// The module paths that `code`, in module `module`, names through `crate::`, `super::`
/// or `self::`, each cut to the longest prefix that is one of `known`.
fn named_modules(
    module: &[String],
    code: &str,
    known: &BTreeSet<Vec<String>>,
) -> BTreeSet<Vec<String>> {
    let mut named = BTreeSet::new();
    for line in code.lines() {
        let line = line.split("//").next().unwrap();
        for (start, base) in [("crate::", 0usize), ("super::", 1), ("self::", 2)] {
            for (i, _) in line.match_indices(start) {
                let before = line[..i].chars().next_back();
                if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                    continue;
                }
                let mut prefix: Vec<String> = match base {
                    0 => Vec::new(),
                    1 => module[..module.len().saturating_sub(1)].to_vec(),
                    _ => module.to_vec(),
                };
                let mut rest = &line[i + start.len()..];
                while let Some(super_rest) = rest.strip_prefix("super::") {
                    prefix.pop();
                    rest = super_rest;
                }
                let heads: Vec<&str> = match rest.strip_prefix('{') {
                    Some(group) => group.split([',', '}']).collect(),
                    None => vec![rest],
                };
                for head in heads {
                    let mut path = prefix.clone();
                    let mut longest = None;
                    for part in head.trim().split("::") {
                        let part: String = part
                            .chars()
                            .take_while(|c| {
                                c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_'
                            })
                            .collect();
                        if part.is_empty() {
                            break;
                        }
                        path.push(part);
                        if known.contains(&path) {
                            longest = Some(path.clone());
                        }
                    }
                    named.extend(longest);
                }
            }
        }
    }
    named
}

#[test]
fn no_modules_import_in_a_circle_at_any_level() {
    let mut checked = 0;
    for crate_src in CRATES {
        let files = modules(crate_src);
        let known: BTreeSet<Vec<String>> = files.iter().map(|(m, _)| m.clone()).collect();
        // An edge between two siblings: something in `a` (or below it) names `b` (or
        // something below it), both children of the same module.
        let mut graph: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
        for (module, code) in &files {
            // The crate roots and the expansions' door re-export by design.
            if module.is_empty() || module == &["private".to_owned()] {
                continue;
            }
            for target in named_modules(module, code, &known) {
                let common = module
                    .iter()
                    .zip(&target)
                    .take_while(|(a, b)| a == b)
                    .count();
                if common < module.len() && common < target.len() {
                    if std::env::var_os("LAYOUT_DEBUG").is_some() {
                        eprintln!("{module:?} -> {target:?}");
                    }
                    graph
                        .entry(module[..=common].to_vec())
                        .or_default()
                        .insert(target[..=common].to_vec());
                }
            }
        }
        checked += graph.len();
        fn visit<'a>(
            node: &'a Vec<String>,
            graph: &'a BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
            path: &mut Vec<&'a Vec<String>>,
            done: &mut BTreeSet<&'a Vec<String>>,
            crate_src: &str,
        ) {
            if let Some(start) = path.iter().position(|n| *n == node) {
                let names: Vec<String> = path[start..]
                    .iter()
                    .chain([&node])
                    .map(|m| m.join("::"))
                    .collect();
                panic!("import cycle in {crate_src}: {}", names.join(" -> "));
            }
            if !done.insert(node) {
                return;
            }
            path.push(node);
            for next in graph.get(node).into_iter().flatten() {
                visit(next, graph, path, done, crate_src);
            }
            path.pop();
        }
        let mut done = BTreeSet::new();
        for node in graph.keys() {
            visit(node, &graph, &mut Vec::new(), &mut done, crate_src);
        }
    }
    // The walk saw the modules (a broken walk would pass vacuously).
    assert!(checked > 40, "only {checked} modules with imports");
}

#[test]
fn one_module_reads_the_environment_and_one_writes_the_warning_prefix() {
    let mut readers = BTreeSet::new();
    let mut prefix = BTreeSet::new();
    for (module, code) in modules("stemmon/src") {
        let name = module.join("/");
        for line in code.lines().map(|l| l.split("//").next().unwrap()) {
            if ["env::var(", "env::var_os(", "env::vars(", "env::vars_os("]
                .iter()
                .any(|call| line.contains(&format!("std::{call}")))
            {
                readers.insert(name.clone());
            }
            if line.contains("[stemmon] warning") {
                prefix.insert(name.clone());
            }
        }
    }
    assert_eq!(
        readers,
        BTreeSet::from(["env".to_owned()]),
        "modules that read the environment"
    );
    assert_eq!(
        prefix,
        BTreeSet::from(["warn".to_owned()]),
        "modules that spell the warning prefix"
    );
}

/// The lines of `text` before its unit tests: up to the attributes of its `mod tests`
/// (inline or a file of its own). Code under another `#[cfg(test)]` counts: only the
/// tests module ends the count.
fn lines_before_tests(text: &str) -> usize {
    let lines: Vec<&str> = text.lines().collect();
    let is_tests = |line: &str| {
        let line = line.strip_prefix("pub(crate) ").unwrap_or(line);
        line == "mod tests {" || line == "mod tests;"
    };
    let Some(mut end) = lines.iter().position(|line| is_tests(line)) else {
        return lines.len();
    };
    while end > 0 && lines[end - 1].starts_with("#[") {
        end -= 1;
    }
    end
}

#[test]
fn the_line_count_ends_at_the_tests_module_only() {
    let code = "use a;\n#[cfg(test)]\nfn helper() {}\nfn more() {}\n";
    let text = format!("{code}#[cfg(test)]\n#[allow(unused)]\nmod tests {{\n    fn t() {{}}\n}}\n");
    assert_eq!(lines_before_tests(&text), 4, "a cfg(test) helper is code");
    assert_eq!(
        lines_before_tests(code),
        4,
        "no tests module: the whole file"
    );
    assert_eq!(
        lines_before_tests("fn a() {}\n#[cfg(test)]\nmod tests;\n"),
        1
    );
    assert_eq!(
        lines_before_tests("#[cfg(test)]\npub(crate) mod tests {\n}\n"),
        0
    );
}

#[test]
fn no_source_file_is_over_500_lines_before_its_tests() {
    let mut long = Vec::new();
    for crate_src in CRATES {
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
            let lines = lines_before_tests(&text);
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

/// The exporters sit behind one `Sink` trait, chosen at start: the features pick their
/// sinks in their own modules (or `export/chosen.rs`), so the module that holds the
/// exporter is not a switchboard of `#[cfg(...)]` lines. Its module declarations and at
/// most one more line may name a `cfg`; its tests module may have as many as it needs.
#[test]
fn the_sinks_module_has_at_most_three_cfg_lines() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("stemmon/src/export/mod.rs");
    let text = std::fs::read_to_string(&path).unwrap();
    let cfg_lines: Vec<&str> = text
        .lines()
        .take(lines_before_tests(&text))
        .filter(|line| line.contains("cfg"))
        .collect();
    assert!(
        cfg_lines.len() <= 3,
        "{} lines of stemmon/src/export/mod.rs name a cfg before its tests: {cfg_lines:#?}",
        cfg_lines.len()
    );
}

/// The engine's interface is readable in one file: every `pub(crate)` function of
/// `recorder/` is in the table of `recorder/mod.rs`'s docs, under its own file, and
/// every function the table names is one.
#[test]
fn the_engines_interface_is_the_table_in_its_module_docs() {
    let docs = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("stemmon/src/recorder/mod.rs"),
    )
    .unwrap();
    // Each row: `| what | functions | file |`, the functions in backticks.
    let mut listed = BTreeSet::new();
    for row in docs.lines().filter_map(|l| l.strip_prefix("//! | ")) {
        let cells: Vec<&str> = row.split(" | ").collect();
        let (Some(functions), Some(file)) = (cells.get(1), cells.get(2)) else {
            continue;
        };
        let file = file.trim_end_matches(" |").trim_matches('`');
        for name in functions.split('`').skip(1).step_by(2) {
            let name = name.rsplit("::").next().unwrap();
            listed.insert((file.to_owned(), name.to_owned()));
        }
    }
    assert!(listed.len() > 10, "no interface table in recorder/mod.rs");
    let mut found = BTreeSet::new();
    for (path, code) in sources_under("recorder") {
        let file = path.rsplit("recorder/").next().unwrap().to_owned();
        for line in code.lines() {
            if let Some(rest) = line.trim_start().strip_prefix("pub(crate) fn ") {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                found.insert((file.clone(), name));
            }
        }
    }
    let unlisted: Vec<_> = found.difference(&listed).collect();
    let missing: Vec<_> = listed.difference(&found).collect();
    assert!(
        unlisted.is_empty() && missing.is_empty(),
        "pub(crate) in recorder/ but not in mod.rs's interface table: {unlisted:?}; \
         in the table but no pub(crate) fn there: {missing:?}"
    );
}

/// The project cites its own book, never a design kept outside the repository: no
/// citation of a design document by section and no path into a folder beside the checkout, in any source, test, bench,
/// script or page.
#[test]
fn nothing_cites_a_design_outside_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let spec = ["SPEC", " §"].concat();
    let beside = ["../", "shared/"].concat();
    let mut found = Vec::new();
    let mut pending: Vec<std::path::PathBuf> = [
        "stemmon",
        "stemmon-macros",
        "stemmon-report",
        "stemmon-cli",
        "examples",
        "tests",
        "bench",
        "docs",
        "src",
        ".ci",
        "README.md",
    ]
    .iter()
    .map(|p| root.join(p))
    .collect();
    while let Some(path) = pending.pop() {
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "target") {
                continue;
            }
            pending.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        } else if let Ok(text) = std::fs::read_to_string(&path) {
            for (number, line) in text.lines().enumerate() {
                if line.contains(&spec) || line.contains(&beside) {
                    found.push(format!("{}:{}", path.display(), number + 1));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "citations outside the repository: {found:?}"
    );
}

/// The keys the field table knows: every record figure, series, process figure and
/// section of a measurement, and a merge's section.
fn table_keys() -> BTreeSet<&'static str> {
    use stemmon_report::fields::{FIELDS, MEASURES, SERIES};
    let mut keys: BTreeSet<&str> = FIELDS.iter().map(|f| f.key).collect();
    keys.extend(SERIES.iter().map(|s| s.key));
    for measure in MEASURES {
        keys.extend(measure.process.iter().map(|p| p.key));
        keys.extend(measure.section.iter().map(|(key, _)| *key));
    }
    keys.insert("merge");
    keys
}

/// The string keys non-test code reads or writes a record's figures by, or looks a
/// field up by: `figures.count("key")`, `fields::field("key")`, with the file.
fn string_keys(text: &str) -> Vec<String> {
    const CALLS: [&str; 6] = [
        "figures.count(\"",
        "figures.number(\"",
        "figures.set_count(\"",
        "figures.set_number(\"",
        "figures.value(\"",
        "field(\"",
    ];
    let mut keys = Vec::new();
    for call in CALLS {
        let mut rest = text;
        while let Some(at) = rest.find(call) {
            let before = rest[..at].chars().last();
            let tail = &rest[at + call.len()..];
            // `.field("name")` is a `Debug` builder's, not the table's lookup.
            let lookup = call != "field(\"" || !matches!(before, Some('.') | Some('_'));
            if lookup {
                if let Some(end) = tail.find('"') {
                    keys.push(tail[..end].to_owned());
                }
            }
            rest = tail;
        }
    }
    keys
}

#[test]
fn no_string_key_is_one_the_field_table_lacks() {
    assert_eq!(
        string_keys("a.figures.count(\"x_bytes\"); s.field(\"y\"); fields::field(\"z\")"),
        ["x_bytes", "z"]
    );
    let known = table_keys();
    let mut unknown = Vec::new();
    let mut seen = 0;
    for dir in ["stemmon/src", "stemmon-cli/src", "stemmon-report/src"] {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
        let mut pending = vec![root];
        while let Some(path) = pending.pop() {
            if path.is_dir() {
                pending.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            } else if path.extension().is_some_and(|e| e == "rs")
                && path.file_name().is_some_and(|n| n != "tests.rs")
            {
                let text = std::fs::read_to_string(&path).unwrap();
                for key in string_keys(before_tests(&text)) {
                    seen += 1;
                    if !known.contains(key.as_str()) {
                        unknown.push(format!("{}: {key}", path.display()));
                    }
                }
            }
        }
    }
    assert!(
        seen >= 5,
        "only {seen} string keys found: the scan reads nothing"
    );
    assert!(
        unknown.is_empty(),
        "string keys the field table lacks (declare them in a measurement): {unknown:#?}"
    );
}
