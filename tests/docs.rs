//! The docs cannot drift from the code.
//!
//! - The generated parts of the book (between `<!-- generated: NAME -->` and
//!   `<!-- end generated -->`) are rendered from `stemmon_report`'s field and settings
//!   tables, and the report reference names every key a report holds.
//! - Every block the docs mark as output (`<!-- output: NAME -->` on the line before its
//!   fence) is held to the output of a real run made here, the commands of a `console`
//!   block to the commands run, with every number masked (`N`): figures vary from run to
//!   run, the shape may not. Every `text`, `console` and `json` block is such an output.
//! - The README stays the front door (at most 300 lines, its two commands true), every
//!   example is in the docs, every relative link leads to a file, and every dependency
//!   line the docs give resolves.
//!
//! `STEMMON_WRITE_DOCS=1 cargo test --test docs` rewrites the generated parts and the
//! output blocks from this run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use stemmon_report::fields::{Fold, Source};
use stemmon_report::settings::Kind;
use stemmon_report::{FIELDS, SETTINGS};
use stemmon_suite::temp_dir;

const REGENERATE: &str = "STEMMON_WRITE_DOCS=1 cargo test --test docs";

fn workspace() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn write_mode() -> bool {
    std::env::var("STEMMON_WRITE_DOCS").is_ok_and(|v| v == "1")
}

/// README.md and every page of the book, in a stable order.
fn doc_files() -> Vec<PathBuf> {
    let mut files = vec![workspace().join("README.md")];
    let mut dirs = vec![workspace().join("docs/src")];
    let mut pages = Vec::new();
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                pages.push(path);
            }
        }
    }
    pages.sort();
    files.extend(pages);
    files
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn shown(path: &Path) -> String {
    path.strip_prefix(workspace())
        .unwrap_or(path)
        .display()
        .to_string()
}

// ---------------------------------------------------------------------------------
// Fenced blocks and their markers.

/// A fenced code block of a Markdown file.
struct Block {
    /// The fence's line (0-based) and the closing fence's.
    open: usize,
    close: usize,
    /// The fence's indentation, which the body shares.
    indent: String,
    /// The info string: `text`, `rust`, ...
    info: String,
    /// `NAME` of an `<!-- output: NAME -->` on the line before the fence.
    output: Option<String>,
    /// The lines between the fences, without the indentation.
    body: Vec<String>,
}

fn blocks(text: &str) -> Vec<Block> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let trimmed = lines[i].trim_start();
        if let Some(info) = trimmed.strip_prefix("```") {
            let indent = lines[i][..lines[i].len() - trimmed.len()].to_owned();
            let output = i
                .checked_sub(1)
                .and_then(|p| lines[p].trim().strip_prefix("<!-- output:"))
                .and_then(|rest| rest.strip_suffix("-->"))
                .map(|name| name.trim().to_owned());
            let close = (i + 1..lines.len())
                .find(|&j| lines[j].trim() == "```")
                .unwrap_or_else(|| panic!("a fence at line {} is never closed", i + 1));
            let body = lines[i + 1..close]
                .iter()
                .map(|l| l.strip_prefix(indent.as_str()).unwrap_or(l).to_owned())
                .collect();
            found.push(Block {
                open: i,
                close,
                indent,
                info: info.trim().to_owned(),
                output,
                body,
            });
            i = close + 1;
        } else {
            i += 1;
        }
    }
    found
}

/// `text` with the bodies of `blocks` replaced by `bodies` (same order).
fn replace_bodies(text: &str, replaced: &[(&Block, Vec<String>)]) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut next = 0;
    for (block, body) in replaced {
        out.extend(lines[next..=block.open].iter().map(|l| (*l).to_owned()));
        out.extend(body.iter().map(|l| {
            if l.is_empty() {
                String::new()
            } else {
                format!("{}{l}", block.indent)
            }
        }));
        next = block.close;
    }
    out.extend(lines[next..].iter().map(|l| (*l).to_owned()));
    out.join("\n") + "\n"
}

// ---------------------------------------------------------------------------------
// Generated parts.

const END_GENERATED: &str = "<!-- end generated -->";

fn render(name: &str) -> Option<String> {
    match name {
        "fields" => Some(render_fields(FIELDS.iter().filter(|f| {
            !stemmon_report::fields::MEASURES
                .iter()
                .any(|m| m.fields.iter().any(|own| own.key == f.key))
        }))),
        _ if name.starts_with("fields ") => {
            let measure = stemmon_report::fields::MEASURES
                .iter()
                .find(|m| m.name == &name["fields ".len()..])?;
            Some(render_fields(measure.fields.iter()))
        }
        "settings" => Some(render_settings()),
        "test settings" => Some(render_test_settings()),
        _ => None,
    }
}

fn source_words(source: Source) -> String {
    match source {
        Source::Calls => "the calls".to_owned(),
        Source::Tree => "[tree memory](guide/report.md)".to_owned(),
        Source::Marks => "[high-water marks](exact-peaks.md)".to_owned(),
        Source::Cgroup => "[cgroup](exact-peaks.md#the-jobs-cgroup)".to_owned(),
        Source::Heap => "[heap](heap.md)".to_owned(),
        Source::Cpu => "[CPU and I/O](cpu-io.md)".to_owned(),
        Source::Gpu => "[GPU](gpu.md)".to_owned(),
        Source::Measurement(name) => stemmon_report::fields::MEASURES
            .iter()
            .find(|m| m.name == name)
            .map_or(name.to_owned(), |m| format!("[{name}]({})", m.page)),
        other => format!("{other:?}").to_lowercase(),
    }
}

fn fold_words(fold: Fold) -> &'static str {
    match fold {
        Fold::Max => "max",
        Fold::Sum => "sum",
        Fold::Derived => "computed",
    }
}

fn render_fields<'a>(fields: impl Iterator<Item = &'a stemmon_report::Field>) -> String {
    let mut out = String::from(
        "| key | what it is | source | unit | combines as | metric | column | Prometheus |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for field in fields {
        let key = if field.is_key() {
            format!("`{}`", field.key)
        } else {
            format!("`{}` (computed, not a key)", field.key)
        };
        let metrics: Vec<&str> = field.metrics.iter().map(|m| m.name).collect();
        let exported = field.export.map_or(String::new(), |export| {
            let total = if export.counter { "_total" } else { "" };
            format!("`stemmon_stage_{}{total}`", export.name)
        });
        out.push_str(&format!(
            "| {key} | {} | {} | {} | {} | {} | {} | {exported} |\n",
            field.meaning,
            source_words(field.source),
            field.unit.name(),
            fold_words(field.fold),
            metrics.join(", "),
            field.label,
        ));
    }
    out
}

fn kind_words(setting: &stemmon_report::Setting) -> String {
    match setting.kind {
        Kind::Interval { none_ok: false } => "seconds, 0.001 to 86400".to_owned(),
        Kind::Interval { none_ok: true } => "seconds, 0.001 to 86400, or `none`".to_owned(),
        Kind::Flag => "`1`/`0` (`true`/`false`, `yes`/`no`, `on`/`off`)".to_owned(),
        Kind::Count => "a whole number, 0 or more".to_owned(),
        Kind::File => "a file path".to_owned(),
        Kind::Directory => "a directory".to_owned(),
        Kind::Url => "a URL".to_owned(),
        Kind::Labels => "`k=v` pairs".to_owned(),
        Kind::Path => "a path".to_owned(),
        _ => setting
            .expected()
            .trim_start_matches("expected ")
            .to_owned(),
    }
}

/// The limits of `#[stemmon::test]` and their variables.
fn render_test_settings() -> String {
    use stemmon_report::settings::{TEST_LIMITS, TEST_REPORTS};
    let mut out =
        String::from("| key | takes | environment | what it sets |\n| --- | --- | --- | --- |\n");
    for setting in TEST_LIMITS.iter().chain([&TEST_REPORTS]) {
        let key = if setting.name == "test_reports" {
            "—".to_owned()
        } else {
            format!("`{} = …`", setting.name)
        };
        out.push_str(&format!(
            "| {key} | {} | `{}` | {} |\n",
            kind_words(setting),
            setting.env.unwrap_or("—"),
            setting.doc,
        ));
    }
    out
}

fn render_settings() -> String {
    let builder = read(&workspace().join("stemmon/src/builder.rs"));
    let code = |text: Option<&str>| text.map_or("—".to_owned(), |t| format!("`{t}`"));
    let mut out = String::from(
        "| setting | takes | default | builder | `#[monitor_main]` | environment | flag | what it does |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for setting in SETTINGS {
        let method = builder
            .contains(&format!("pub fn {}(", setting.name))
            .then(|| format!(".{}(…)", setting.name));
        let attribute = setting.attribute.then(|| format!("{} = …", setting.name));
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | {} | {} | {} |\n",
            setting.name,
            kind_words(setting),
            setting.default,
            code(method.as_deref()),
            code(attribute.as_deref()),
            code(setting.env),
            code(setting.flag),
            setting.doc,
        ));
    }
    out
}

#[test]
fn the_generated_parts_are_rendered_from_the_tables() {
    let mut stale = Vec::new();
    let mut rendered = Vec::new();
    for path in doc_files() {
        let text = read(&path);
        let mut out = String::new();
        let mut rest = text.as_str();
        while let Some(start) = rest.find("<!-- generated: ") {
            let after = &rest[start..];
            let header_end = after.find("-->").expect("an unclosed generated marker") + 3;
            let name = after["<!-- generated: ".len()..header_end - 3]
                .trim()
                .to_owned();
            let body_start = start + header_end;
            let body_end = rest[body_start..]
                .find(END_GENERATED)
                .map(|e| body_start + e)
                .unwrap_or_else(|| panic!("{}: `{name}` has no {END_GENERATED}", shown(&path)));
            let wanted = render(&name)
                .unwrap_or_else(|| panic!("{}: nothing renders `{name}`", shown(&path)));
            let wanted = format!("\n{wanted}");
            if rest[body_start..body_end] != wanted {
                stale.push(format!("{} ({name})", shown(&path)));
            }
            rendered.push(name);
            out.push_str(&rest[..body_start]);
            out.push_str(&wanted);
            rest = &rest[body_end..];
        }
        out.push_str(rest);
        if write_mode() && out != text {
            std::fs::write(&path, out).unwrap();
        }
    }
    for name in ["fields", "settings"] {
        assert!(
            rendered.iter().any(|r| r == name),
            "no page holds <!-- generated: {name} -->"
        );
    }
    assert!(
        stale.is_empty() || write_mode(),
        "generated parts out of date: {}; regenerate with `{REGENERATE}`",
        stale.join(", ")
    );
}

/// Every key of a report with every section present, as `section.key` (`stages[].id`).
fn report_keys() -> Vec<String> {
    use stemmon_report::{
        CgroupReport, ProcessReport, Report, SampleReport, Span, StageReport, ThreadReport,
        TimelinePoint,
    };
    let mut report = Report::default();
    report.cgroup = Some(CgroupReport::default());
    report.latest_sample = Some(SampleReport::default());
    report.recent_samples = vec![SampleReport::default()];
    report.stages = vec![StageReport::default()];
    report.processes = vec![ProcessReport::default()];
    report.timeline = vec![TimelinePoint::default()];
    report.spans = vec![Span::default()];
    report.threads = vec![ThreadReport::default()];
    let json = serde_json::to_value(&report).unwrap();
    let mut keys = Vec::new();
    fn walk(prefix: &str, value: &serde_json::Value, keys: &mut Vec<String>) {
        match value {
            serde_json::Value::Object(map) => {
                for (key, inner) in map {
                    let path = format!("{prefix}{key}");
                    keys.push(path.clone());
                    walk(&format!("{path}."), inner, keys);
                }
            }
            serde_json::Value::Array(items) => {
                if let Some(first) = items.first() {
                    walk(&format!("{}[].", prefix.trim_end_matches('.')), first, keys);
                }
            }
            _ => {}
        }
    }
    walk("", &json, &mut keys);
    keys
}

#[test]
fn the_reference_names_every_key_of_a_report() {
    let reference = read(&workspace().join("docs/src/reference.md"));
    let missing: Vec<String> = report_keys()
        .into_iter()
        .filter(|path| {
            let key = path.rsplit('.').next().unwrap();
            !reference.contains(&format!("`{key}`"))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "docs/src/reference.md does not name these report keys: {missing:?}"
    );
}

/// Each measurement's page names every key it adds to a report, and holds the table of
/// its figures; the contents list the page.
#[test]
fn every_measurement_has_a_page_that_names_its_keys() {
    let summary = read(&workspace().join("docs/src/SUMMARY.md"));
    for measure in stemmon_report::fields::MEASURES {
        let page = read(&workspace().join("docs/src").join(measure.page));
        assert!(
            page.contains(&format!("<!-- generated: fields {} -->", measure.name)),
            "{}: no table of the figures of `{}`",
            measure.page,
            measure.name
        );
        assert!(
            summary.contains(&format!("]({})", measure.page)),
            "SUMMARY.md does not list {}",
            measure.page
        );
        let keys = measure
            .fields
            .iter()
            .map(|f| f.key)
            .chain(measure.series.iter().map(|s| s.key))
            .chain(measure.process.iter().map(|p| p.key))
            .chain(measure.section.iter().map(|(key, _)| *key));
        names_every_key(&page, measure.page, keys);
    }
    // The core's measurements (the cgroup) are on the reference page, in the core table.
    for measure in stemmon_report::fields::measures::CORE {
        let page = read(&workspace().join("docs/src").join(measure.page));
        let keys = measure
            .fields
            .iter()
            .map(|f| f.key)
            .chain(measure.series.iter().map(|s| s.key))
            .chain(measure.section.iter().map(|(key, _)| *key));
        names_every_key(&page, measure.page, keys);
    }
}

/// Asserts that `page` (the file `name`) names every one of `keys`.
fn names_every_key<'a>(page: &str, name: &str, keys: impl Iterator<Item = &'a str>) {
    for key in keys {
        assert!(
            page.contains(&format!("`{key}`")) || page.contains(&format!(".{key}`")),
            "{name} does not name `{key}`"
        );
    }
}

// ---------------------------------------------------------------------------------
// Outputs of real runs.

/// How a block is held to its output.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// The same lines, masked, in any order (tables whose rows may come in any order).
    Same,
    /// Each line of the block is, masked, one of the output's: for live logs, whose
    /// count of `running` lines depends on the machine's speed. Log masks also drop
    /// what is in brackets (which form a peak takes depends on the figures).
    Log,
    /// A JSON excerpt: the same keys in the same order, values of the same type, the
    /// same strings where they do not name the machine.
    Json,
}

struct Output {
    name: &'static str,
    /// The body the block should have: the commands (`$ ...`) and what they printed.
    text: String,
    mode: Mode,
    /// What an excerpt asked of the run's JSON that it did not have (`merged.format`):
    /// the output's shape changed, and the excerpt's keys here with it.
    lost: Vec<String>,
}

/// Lines whose presence depends on the machine (a cgroup, missing marks, a GPU), left
/// out on both sides.
const MACHINE_LINES: &[&str] = &["cgroup:", "marks:", "gpu:", "detailed:"];
/// Parts of a log line whose presence depends on the machine.
const MACHINE_SEGMENTS: &[&str] = &["limit=", "gpu="];
/// JSON strings that name the machine or the run.
const MACHINE_STRINGS: &[&str] = &["run_id", "host", "platform", "path", "file"];

const UNITS: &[&str] = &[
    "KiB", "MiB", "GiB", "TiB", "B", "ms", "µs", "ns", "s", "%", "x",
];

/// `line` with every number (and the unit right after it) as `N`, runs of spaces and of
/// table rules as one.
fn mask(line: &str, log: bool) -> String {
    let mut line = line.to_owned();
    if log {
        // Brackets: a peak's form (`(exact)`, `(bound; sampled ...)`), `(partial tree)`.
        let mut out = String::new();
        let mut depth = 0usize;
        for c in line.chars() {
            match c {
                '(' => depth += 1,
                ')' if depth > 0 => depth -= 1,
                _ if depth == 0 => out.push(c),
                _ => {}
            }
        }
        // A periodic line's stage is whichever was open when the timer came: on a
        // loaded machine the same run's line at 1 s may fall just after `fit` ends.
        let periodic = out.starts_with("[stemmon] running;");
        line = out
            .replace(" ;", ";")
            .trim_end()
            .split("; ")
            .filter(|part| !MACHINE_SEGMENTS.iter().any(|m| part.trim().starts_with(m)))
            .map(|part| match part.strip_prefix("stage=") {
                Some(_) if periodic => "stage=S",
                _ => part,
            })
            .collect::<Vec<_>>()
            .join("; ");
    }
    let chars: Vec<char> = line.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let signed = matches!(c, '+' | '-' | '−')
            && chars.get(i + 1).is_some_and(char::is_ascii_digit)
            && (i == 0 || !chars[i - 1].is_alphanumeric());
        if c.is_ascii_digit() || signed {
            i += 1;
            while i < chars.len()
                && (chars[i].is_ascii_digit()
                    || (matches!(chars[i], '.' | ',')
                        && chars.get(i + 1).is_some_and(char::is_ascii_digit)))
            {
                i += 1;
            }
            // A unit right after it, or after one space.
            for skip in [0, 1] {
                if skip == 1 && chars.get(i) != Some(&' ') {
                    continue;
                }
                let rest: String = chars[i + skip..].iter().take(4).collect();
                if let Some(unit) = UNITS.iter().find(|u| {
                    rest.starts_with(**u)
                        && !rest[u.len()..]
                            .chars()
                            .next()
                            .is_some_and(char::is_alphanumeric)
                }) {
                    i += skip + unit.chars().count();
                    break;
                }
            }
            out.push('N');
        } else {
            out.push(c);
            i += 1;
        }
    }
    let mut squeezed = String::new();
    for c in out.trim().chars() {
        let last = squeezed.chars().last();
        if matches!(c, ' ' | '─' | '═' | '-') && last == Some(c) {
            continue;
        }
        squeezed.push(c);
    }
    // A table cell of a figure a run may not have (`-`), as one it has.
    for (a, b) in [
        ("┆ - ┆", "┆ N ┆"),
        ("┆ - │", "┆ N │"),
        ("│ - ┆", "│ N ┆"),
        ("| - |", "| N |"),
    ] {
        while squeezed.contains(a) {
            squeezed = squeezed.replace(a, b);
        }
    }
    // `1 major fault`, `4 processes`: the two words after a number, in the singular.
    let mut words: Vec<String> = squeezed.split(' ').map(str::to_owned).collect();
    for i in 0..words.len() {
        let after_number = (1..=2).any(|back| i >= back && words[i - back] == "N");
        if after_number {
            words[i] = singular(&words[i]);
        }
    }
    words.join(" ")
}

fn singular(word: &str) -> String {
    if let Some(stem) = word.strip_suffix("sses") {
        format!("{stem}ss")
    } else if let Some(stem) = word.strip_suffix("ses") {
        format!("{stem}s")
    } else if word.len() > 3 && word.ends_with('s') && !word.ends_with("ss") {
        word[..word.len() - 1].to_owned()
    } else {
        word.to_owned()
    }
}

/// What write mode puts in a block: the output, and of a log, one line of each shape.
fn shown_lines(output: &Output) -> Vec<String> {
    let mut seen = std::collections::BTreeSet::new();
    output
        .text
        .lines()
        .filter(|line| {
            output.mode != Mode::Log
                || line.starts_with("$ ")
                || line.trim().is_empty()
                || seen.insert(mask(line, true))
        })
        .map(str::to_owned)
        .collect()
}

fn masked_lines(lines: &[String], mode: Mode) -> Vec<String> {
    lines
        .iter()
        .filter(|l| !l.trim().is_empty())
        .filter(|l| !MACHINE_LINES.iter().any(|m| l.trim_start().starts_with(m)))
        .map(|l| {
            if l.starts_with("$ ") {
                l.trim_end().to_owned()
            } else {
                mask(l, mode == Mode::Log)
            }
        })
        .collect()
}

/// Why `body` is not `output`'s shape, if it is not.
fn mismatch(body: &[String], output: &Output) -> Option<String> {
    let real: Vec<String> = output.text.lines().map(str::to_owned).collect();
    if output.mode == Mode::Json {
        let shown: serde_json::Value = match serde_json::from_str(&body.join("\n")) {
            Ok(value) => value,
            Err(e) => return Some(format!("not JSON: {e}")),
        };
        let real: serde_json::Value = serde_json::from_str(&output.text).unwrap();
        return json_mismatch("", &shown, &real);
    }
    let shown = masked_lines(body, output.mode);
    let real = masked_lines(&real, output.mode);
    let commands = |lines: &[String]| -> Vec<String> {
        lines
            .iter()
            .filter(|l| l.starts_with("$ "))
            .cloned()
            .collect()
    };
    if commands(&shown) != commands(&real) {
        return Some(format!(
            "the commands shown {:?} are not the commands run {:?}",
            commands(&shown),
            commands(&real)
        ));
    }
    if shown.is_empty() {
        return Some("the block is empty".to_owned());
    }
    let invented: Vec<&String> = shown.iter().filter(|l| !real.contains(l)).collect();
    if !invented.is_empty() {
        return Some(format!(
            "lines of no real run:\n  {}\nthe real ones, masked:\n  {}",
            invented
                .iter()
                .map(|l| l.as_str())
                .collect::<Vec<_>>()
                .join("\n  "),
            real.join("\n  ")
        ));
    }
    if output.mode == Mode::Same {
        let mut a = shown.clone();
        let mut b = real.clone();
        a.sort();
        b.sort();
        if a != b {
            let left_out: Vec<&String> = real.iter().filter(|l| !shown.contains(l)).collect();
            return Some(format!(
                "real lines the block leaves out or repeats:\n  {}",
                left_out
                    .iter()
                    .map(|l| l.as_str())
                    .collect::<Vec<_>>()
                    .join("\n  ")
            ));
        }
    }
    None
}

fn json_mismatch(
    path: &str,
    shown: &serde_json::Value,
    real: &serde_json::Value,
) -> Option<String> {
    use serde_json::Value;
    let kind = |v: &Value| match v {
        Value::Null => "null",
        Value::Bool(_) => "a bool",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    match (shown, real) {
        (Value::Object(a), Value::Object(b)) => {
            let keys_a: Vec<&String> = a.keys().collect();
            let keys_b: Vec<&String> = b.keys().collect();
            if keys_a != keys_b {
                return Some(format!("{path}: keys {keys_a:?}, the run's {keys_b:?}"));
            }
            a.iter()
                .find_map(|(k, v)| json_mismatch(&format!("{path}.{k}"), v, &b[k]))
        }
        (Value::Array(a), Value::Array(b)) => {
            if a.len() != b.len() {
                return Some(format!("{path}: {} items, the run's {}", a.len(), b.len()));
            }
            a.iter()
                .zip(b)
                .enumerate()
                .find_map(|(i, (x, y))| json_mismatch(&format!("{path}[{i}]"), x, y))
        }
        (Value::String(a), Value::String(b)) => {
            let key = path.rsplit('.').next().unwrap_or("");
            (mask(a, false) != mask(b, false) && !MACHINE_STRINGS.contains(&key))
                .then(|| format!("{path}: {a:?}, the run's {b:?}"))
        }
        (Value::Bool(_), Value::Bool(_)) | (Value::Number(_), Value::Number(_)) => None,
        (Value::Null, Value::Null) => None,
        _ => Some(format!("{path}: {}, the run's {}", kind(shown), kind(real))),
    }
}

/// Where the build this test belongs to keeps its outputs, and its profile's folder.
fn target_and_profile() -> (PathBuf, String) {
    let exe = std::env::current_exe().unwrap();
    // <target>/<profile>/deps/docs-<hash>
    let profile_dir = exe.parent().unwrap().parent().unwrap();
    let profile = profile_dir
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    (profile_dir.parent().unwrap().to_owned(), profile)
}

/// Builds the command and the examples the docs run: what `bash .ci/test` builds
/// (`cargo test --workspace --exclude stemmon-bench`, whose examples and `stemmon` binary
/// these are), so that under it nothing is built twice: the same packages, the same
/// features. Run alone, this test builds the workspace's tests once.
fn build(target: &Path, profile: &str) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut command = Command::new(cargo);
    command
        .current_dir(workspace())
        .args([
            "test",
            "--no-run",
            "--quiet",
            "--workspace",
            "--exclude",
            "stemmon-bench",
        ])
        .arg("--target-dir")
        .arg(target);
    if profile == "release" {
        command.arg("--release");
    }
    let status = command.status().expect("run cargo test --no-run");
    assert!(
        status.success(),
        "building the workspace's tests and examples failed"
    );
    // The examples that need a crate of their own, as `bash .ci/test` builds them.
    let mut command = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()));
    command
        .current_dir(workspace())
        .args(["build", "--quiet", "-p", "stemmon-examples", "--examples"])
        .args([
            "--features",
            "parallel,heap,tracing,prometheus,otlp",
            "--target-dir",
        ])
        .arg(target);
    if profile == "release" {
        command.arg("--release");
    }
    assert!(
        command.status().expect("run cargo build").success(),
        "building the examples' features failed"
    );
    for built in [
        "stemmon",
        "examples/quickstart",
        "examples/heap",
        "examples/tracing",
    ] {
        let path = target.join(profile).join(built);
        assert!(
            path.exists(),
            "cargo test --no-run built no {}",
            path.display()
        );
    }
}

/// The runs the docs show, made in `dir` with a clean environment (no GPU driver) and
/// `bin` on the path, and their outputs with this machine's paths and host name taken
/// out.
struct Runs<'a> {
    dir: &'a Path,
    bin: PathBuf,
    examples: PathBuf,
    target: PathBuf,
    host: String,
}

impl Runs<'_> {
    fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut command = Command::new(program);
        let path = std::env::var("PATH").unwrap_or_default();
        command
            .env_clear()
            .env("PATH", format!("{}:{path}", self.bin.display()))
            .env("HOME", self.dir)
            .env("LANG", "C.UTF-8")
            // No GPU driver: the docs show a machine without a GPU, whatever this one has
            // (`; gpu=` and a GPU column would otherwise come and go with the machine).
            .env(
                "STEMMON_NVML_LIBRARY",
                self.dir.join("no-gpu-driver").join("libnvidia-ml.so.1"),
            )
            .current_dir(self.dir);
        command
    }

    /// This machine's paths and host name as the docs write them.
    fn clean(&self, text: &str) -> String {
        let mut text = text.replace(&format!("{}/", self.target.display()), "target/");
        text = text.replace(&format!("{}/", self.dir.display()), "");
        text = text.replace(&self.dir.display().to_string(), ".");
        text = text.replace(&format!("{}/", workspace().display()), "");
        if !self.host.is_empty() && self.host != "vm" {
            text = replace_word(&text, &self.host, "vm");
        }
        text
    }

    /// Runs `script` in `sh`, stderr into stdout; returns what it printed and its status.
    fn sh(&self, script: &str, env: &[(&str, &str)]) -> (String, i32) {
        let mut command = self.command("sh");
        command.arg("-c").arg(format!("exec 2>&1\n{script}"));
        for (k, v) in env {
            command.env(k, v);
        }
        let output = command.output().expect("run sh");
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        (self.clean(&text), output.status.code().unwrap_or(-1))
    }

    /// `$ command` and what it printed, for each command; each must exit as expected.
    fn transcript(&self, commands: &[(&str, i32)]) -> String {
        let mut text = String::new();
        for (command, expected) in commands {
            let (printed, code) = self.sh(command, &[]);
            assert_eq!(code, *expected, "`{command}` exited {code}:\n{printed}");
            text.push_str(&format!("$ {command}\n{printed}"));
        }
        text
    }

    /// Runs an example as `cargo run --example NAME` would, from `dir`: its stdout and stderr.
    fn example(&self, name: &str, env: &[(&str, &str)]) -> (String, String) {
        let mut command = self.command(self.examples.join(name));
        for (k, v) in env {
            command.env(k, v);
        }
        let output = command.output().expect("run the example");
        let stdout = self.clean(&String::from_utf8_lossy(&output.stdout));
        let stderr = self.clean(&String::from_utf8_lossy(&output.stderr));
        assert!(
            output.status.success(),
            "examples/{name}.rs failed:\n{stdout}\n{stderr}"
        );
        (stdout, stderr)
    }
}

fn replace_word(text: &str, word: &str, with: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(word) {
        let before = rest[..at].chars().last();
        let after = rest[at + word.len()..].chars().next();
        let boundary = |c: Option<char>| !c.is_some_and(|c| c.is_alphanumeric() || c == '-');
        out.push_str(&rest[..at]);
        out.push_str(if boundary(before) && boundary(after) {
            with
        } else {
            word
        });
        rest = &rest[at + word.len()..];
    }
    out.push_str(rest);
    out
}

fn python3() -> bool {
    Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The excerpt of a report or a merged document the docs show: `keys` of the top
/// level in that order, and for an array named in `items`, its item whose `field` is
/// `wanted`, with the keys `inner`. What the run's JSON lacks is left out of the
/// excerpt and named in `lost` (`stages[path=workers].calls`), so that a changed
/// shape fails the check with its name and write mode still writes what there is.
fn excerpt(
    value: &serde_json::Value,
    keys: &[&str],
    items: &[(&str, &str, &str, &[&str])],
    lost: &mut Vec<String>,
) -> String {
    let mut pairs = Vec::new();
    for key in keys {
        let Some(top) = value.get(key) else {
            lost.push((*key).to_owned());
            continue;
        };
        let shown = match items.iter().find(|i| i.0 == *key) {
            Some((array, field, wanted, inner)) => {
                let Some(item) = top
                    .as_array()
                    .and_then(|items| items.iter().find(|item| item[*field] == *wanted))
                else {
                    lost.push(format!("{array}[{field}={wanted}]"));
                    continue;
                };
                let fields: Vec<(String, serde_json::Value)> = inner
                    .iter()
                    .filter_map(|k| match item.get(k) {
                        Some(v) => Some(((*k).to_owned(), v.clone())),
                        None => {
                            lost.push(format!("{array}[{field}={wanted}].{k}"));
                            None
                        }
                    })
                    .collect();
                format!("[\n    {}\n  ]", object(&fields, "    "))
            }
            None => indented(top, "  "),
        };
        pairs.push(format!("  \"{key}\": {shown}"));
    }
    format!("{{\n{}\n}}\n", pairs.join(",\n"))
}

/// `fields` as a JSON object in that order, its lines indented by `indent`.
fn object(fields: &[(String, serde_json::Value)], indent: &str) -> String {
    let inner = format!("{indent}  ");
    let lines: Vec<String> = fields
        .iter()
        .map(|(k, v)| format!("{inner}\"{k}\": {}", indented(v, &inner)))
        .collect();
    format!("{{\n{}\n{indent}}}", lines.join(",\n"))
}

/// `value` pretty-printed, its lines after the first indented by `indent`.
fn indented(value: &serde_json::Value, indent: &str) -> String {
    serde_json::to_string_pretty(value)
        .unwrap()
        .replace('\n', &format!("\n{indent}"))
}

const RUN_COMMAND: &str = "stemmon run --sample-interval 0.2 --log-interval 1 -o run.json -- sh -c 'for mib in 100 200 300; do python3 -c \"import time; data = b\\\"x\\\" * ($mib << 20); time.sleep(2)\" & done; wait'";
const RANKS_COMMAND: &str = "for rank in 0 1; do stemmon run --log-interval none --label rank=$rank -o rank$rank.json -- python3 -c \"import time; data = b'x' * ((1 + $rank) * 100 << 20); time.sleep(1)\"; done";

fn real_outputs(runs: &Runs) -> Vec<Output> {
    let mut outputs = Vec::new();
    // What each JSON excerpt asked for and the run lacked, by output.
    let mut lost: BTreeMap<&'static str, Vec<String>> = BTreeMap::new();
    let mut add = |name: &'static str, text: String, mode: Mode| {
        outputs.push(Output {
            name,
            text,
            mode,
            lost: Vec::new(),
        });
    };

    // The quickstart, with a Prometheus textfile beside its report.
    let (_, stderr) = runs.example("quickstart", &[("STEMMON_PROMETHEUS_TEXTFILE_DIR", "prom")]);
    let log: String = stderr
        .lines()
        .filter(|l| l.starts_with("[stemmon]"))
        .map(|l| format!("{l}\n"))
        .collect();
    add("quickstart log", log, Mode::Log);
    let report_path = runs.dir.join("target/stemmon/quickstart.json");
    let report: serde_json::Value = serde_json::from_str(&read(&report_path)).unwrap();
    // Its `fit` holds its 200 MiB in every build (the optimiser may not drop the data).
    let fit = report["stages"]
        .as_array()
        .and_then(|stages| stages.iter().find(|s| s["path"] == "fit"))
        .and_then(|fit| fit["peak_tree_rss_bytes"].as_u64())
        .unwrap_or(0);
    assert!(fit >= 200 << 20, "the quickstart's fit held {fit} bytes");
    // It names the file it really wrote: STEMMON_OUTPUT's, where that is set.
    let (stdout, _) = runs.example("quickstart", &[("STEMMON_OUTPUT", "elsewhere.json")]);
    assert!(stdout.contains("the report is elsewhere.json"), "{stdout}");
    assert!(runs.dir.join("elsewhere.json").exists(), "{stdout}");
    add(
        "quickstart report",
        runs.clean(&excerpt(
            &report,
            &[
                "format_version",
                "running",
                "error",
                "wall_seconds",
                "sampler",
                "high_water_marks",
                "samples",
                "peak_process_count",
                "peak_tree_rss_bytes",
                "peak_parent_rss_bytes",
                "peak_children_rss_bytes",
                "peak_parent_hwm_bytes",
                "peak_tree_rss_bound_bytes",
                "peak_reaped_child_rss_bytes",
                "peak_rss_stage",
                "cpu_user_seconds",
                "cpu_system_seconds",
                "cpu_cores",
                "stages",
            ],
            &[(
                "stages",
                "path",
                "workers",
                &[
                    "id",
                    "name",
                    "path",
                    "parent_id",
                    "calls",
                    "errors",
                    "threads",
                    "start_seconds",
                    "wall_seconds",
                    "samples",
                    "peak_process_count",
                    "peak_tree_rss_bytes",
                    "peak_parent_rss_bytes",
                    "peak_children_rss_bytes",
                    "peak_parent_hwm_bytes",
                    "peak_tree_rss_bound_bytes",
                    "peak_reaped_child_rss_bytes",
                    "cpu_user_seconds",
                    "cpu_system_seconds",
                    "cpu_cores",
                ],
            )],
            lost.entry("quickstart report").or_default(),
        )),
        Mode::Json,
    );
    add(
        "quickstart show",
        runs.transcript(&[("stemmon show target/stemmon/quickstart.json", 0)]),
        Mode::Same,
    );
    add(
        "quickstart show processes",
        runs.transcript(&[("stemmon show --processes target/stemmon/quickstart.json", 0)]),
        Mode::Same,
    );
    add(
        "compare pass",
        runs.transcript(&[(
            "stemmon compare target/stemmon/quickstart.json target/stemmon/quickstart.json --min-seconds 1",
            0,
        )]),
        Mode::Same,
    );
    add(
        "compare several",
        runs.transcript(&[(
            "stemmon compare target/stemmon/quickstart.json target/stemmon/quickstart.json -- target/stemmon/quickstart.json target/stemmon/quickstart.json",
            0,
        )]),
        Mode::Same,
    );
    add(
        "compare fail",
        runs.transcript(&[(
            "stemmon compare target/stemmon/quickstart.json target/stemmon/quickstart.json --min-seconds 1 --max-peak 210MiB",
            1,
        )]),
        Mode::Same,
    );
    add(
        "compare markdown",
        runs.transcript(&[(
            "stemmon compare target/stemmon/quickstart.json target/stemmon/quickstart.json --min-seconds 1 --max-peak 210MiB --format markdown 2>/dev/null",
            1,
        )]),
        Mode::Same,
    );
    runs.transcript(&[(
        "stemmon export target/stemmon/quickstart.json --format chrome -o trace.json",
        0,
    )]);
    let mut trace: serde_json::Value =
        serde_json::from_str(&read(&runs.dir.join("trace.json"))).unwrap();
    let events = trace["traceEvents"].as_array_mut().expect("traceEvents");
    events.truncate(7);
    add(
        "chrome trace",
        runs.clean(&(serde_json::to_string_pretty(&trace).unwrap() + "\n")),
        Mode::Json,
    );
    let prom_files: Vec<PathBuf> = std::fs::read_dir(runs.dir.join("prom"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(prom_files.len(), 1, "one textfile: {prom_files:?}");
    let wanted = [
        "stemmon_peak_tree_rss_bytes",
        "stemmon_peak_tree_rss_bound_bytes",
        "stemmon_stage_calls_total",
        "stemmon_stage_peak_tree_rss_bytes",
        "stemmon_stage_cpu_seconds_total",
    ];
    let prom: String = read(&prom_files[0])
        .lines()
        .filter(|l| {
            let name = l
                .trim_start_matches("# HELP ")
                .trim_start_matches("# TYPE ")
                .split(['{', ' '])
                .next()
                .unwrap();
            wanted.contains(&name)
        })
        .map(|l| format!("{l}\n"))
        .collect();
    add("prometheus textfile", runs.clean(&prom), Mode::Same);
    let file_name = prom_files[0].file_name().unwrap().to_string_lossy();
    add(
        "prometheus file name",
        runs.clean(&format!("prom/{file_name}\n")),
        Mode::Same,
    );

    // The other examples.
    let (stdout, _) = runs.example("heap", &[]);
    add("heap example", stdout, Mode::Same);
    let (stdout, _) = runs.example("tracing", &[]);
    add("tracing example", stdout, Mode::Same);

    // The command on other programs.
    add("run", runs.transcript(&[(RUN_COMMAND, 0)]), Mode::Log);
    add(
        "merge",
        runs.transcript(&[
            (RANKS_COMMAND, 0),
            ("stemmon merge rank0.json rank1.json -o merged.json", 0),
        ]),
        Mode::Same,
    );
    let merged: serde_json::Value =
        serde_json::from_str(&read(&runs.dir.join("merged.json"))).unwrap();
    // The merged report's version and peak, what its `merge` section says of the
    // inputs, and the spread of that peak over them.
    let lost_merge = lost.entry("merged excerpt").or_default();
    let mut shown = serde_json::Map::new();
    for key in ["format_version", "peak_tree_rss_bytes"] {
        match merged.get(key) {
            Some(value) => drop(shown.insert(key.to_owned(), value.clone())),
            None => lost_merge.push(key.to_owned()),
        }
    }
    let section = &merged["merge"];
    match (
        section.get("inputs"),
        section["run"].get("peak_tree_rss_bytes"),
    ) {
        (Some(inputs), Some(spread)) => {
            // An input's identity is its random run id: shown as a placeholder.
            let mut inputs = inputs.clone();
            for input in inputs.as_array_mut().into_iter().flatten() {
                if input.get("identity").is_some() {
                    input["identity"] = serde_json::json!("<run_id>");
                }
            }
            let run = serde_json::json!({ "peak_tree_rss_bytes": spread });
            shown.insert(
                "merge".to_owned(),
                serde_json::json!({ "inputs": inputs, "run": run }),
            );
        }
        _ => lost_merge.push("merge.inputs, merge.run.peak_tree_rss_bytes".to_owned()),
    }
    add(
        "merged excerpt",
        runs.clean(&(serde_json::to_string_pretty(&shown).unwrap() + "\n")),
        Mode::Json,
    );
    add(
        "run help",
        runs.transcript(&[("stemmon run --help", 0)]),
        Mode::Same,
    );
    add(
        "compare help",
        runs.transcript(&[("stemmon compare --help", 0)]),
        Mode::Same,
    );
    // The environment's overrides are `#[monitor_main]`'s: the quickstart again, from
    // the top of the checkout as a user runs it (`target/debug` beside its report).
    let debug = runs.dir.join("target/debug");
    if !debug.exists() {
        std::os::unix::fs::symlink(runs.examples.parent().unwrap(), &debug).unwrap();
    }
    add(
        "bad environment",
        runs.transcript(&[(
            "STEMMON_SAMPLE_INTERVAL=1e19 STEMMON_LOG_INTERVAL=fast target/debug/examples/quickstart",
            0,
        )]),
        Mode::Log,
    );
    add("limits failure", limits_failure(runs), Mode::Same);
    for output in &mut outputs {
        output.lost = lost.remove(output.name).unwrap_or_default();
    }
    outputs
}

/// The message of a failing `#[stemmon::test]`: `leaks_in_a_stage` of the suite's
/// `tests/limits_cases.rs`, run from its test binary (the newest one built).
fn limits_failure(runs: &Runs) -> String {
    let deps = runs.bin.join("deps");
    let binary = std::fs::read_dir(&deps)
        .unwrap()
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            name.starts_with("limits_cases-") && path.extension().is_none()
        })
        .max_by_key(|path| path.metadata().and_then(|m| m.modified()).ok())
        .expect("cargo test --no-run built tests/limits_cases.rs");
    let (printed, code) = runs.sh(
        &format!(
            "{} leaks_in_a_stage --exact --include-ignored",
            binary.display()
        ),
        &[("RUST_BACKTRACE", "0")],
    );
    assert_ne!(code, 0, "leaks_in_a_stage passed:\n{printed}");
    let message: Vec<&str> = printed
        .lines()
        .skip_while(|line| !line.contains("panicked at"))
        .skip(1)
        .take_while(|line| !line.starts_with("note: "))
        .collect();
    format!("{}\n", message.join("\n").trim_end())
}

#[test]
fn every_output_the_docs_show_is_a_real_one() {
    if !python3() {
        stemmon_suite::cannot_run(
            "every_output_the_docs_show_is_a_real_one",
            "python3 is missing (the docs' `stemmon run` examples start it)",
        );
        return;
    }
    let (target, profile) = target_and_profile();
    build(&target, &profile);
    let dir = temp_dir("docs");
    let report_host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_default();
    let runs = Runs {
        dir: &dir,
        bin: target.join(&profile),
        examples: target.join(&profile).join("examples"),
        target: target.clone(),
        host: report_host,
    };
    let outputs = real_outputs(&runs);
    let by_name: BTreeMap<&str, &Output> = outputs.iter().map(|o| (o.name, o)).collect();

    let mut failures = Vec::new();
    let mut used = std::collections::BTreeSet::new();
    for path in doc_files() {
        let text = read(&path);
        let found = blocks(&text);
        let mut rewritten = Vec::new();
        for block in &found {
            let at = format!("{}:{}", shown(&path), block.open + 1);
            let Some(name) = &block.output else {
                if matches!(block.info.as_str(), "text" | "console" | "json") {
                    failures.push(format!(
                        "{at}: a `{}` block with no <!-- output: NAME --> before it (outputs: {:?})",
                        block.info,
                        by_name.keys().collect::<Vec<_>>()
                    ));
                }
                continue;
            };
            let Some(output) = by_name.get(name.as_str()) else {
                failures.push(format!(
                    "{at}: no run makes the output `{name}` (outputs: {:?})",
                    by_name.keys().collect::<Vec<_>>()
                ));
                continue;
            };
            used.insert(output.name);
            if !output.lost.is_empty() {
                failures.push(format!(
                    "{at}: `{name}`: the run's JSON has no {}: the output changed shape; \
                     choose the excerpt's keys again in tests/docs.rs (real_outputs)",
                    output.lost.join(", ")
                ));
            }
            if let Some(why) = mismatch(&block.body, output) {
                failures.push(format!("{at}: `{name}`: {why}"));
            }
            rewritten.push((block, shown_lines(output)));
        }
        if write_mode() && !rewritten.is_empty() {
            let out = replace_bodies(&text, &rewritten);
            if out != text {
                std::fs::write(&path, out).unwrap();
            }
        }
    }
    for output in &outputs {
        if !used.contains(output.name) {
            failures.push(format!("no block shows the output `{}`", output.name));
        }
    }
    assert!(
        failures.is_empty() || write_mode(),
        "the docs are not the real output ({} problems; after a change of the output, \
         regenerate with `{REGENERATE}` and read the diff):\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

// ---------------------------------------------------------------------------------
// The front door, the examples, the links, the dependency lines.

#[test]
fn the_readme_is_the_front_door() {
    let readme = read(&workspace().join("README.md"));
    let lines = readme.lines().count();
    assert!(lines <= 300, "README.md has {lines} lines: at most 300");
    for command in [
        "cargo run -p stemmon-examples --example quickstart",
        "bash .ci/test",
    ] {
        assert!(readme.contains(command), "README.md lacks `{command}`");
    }
    assert!(
        readme.contains("target/stemmon/quickstart.json"),
        "README.md does not say where the quickstart's report is"
    );
    let ci = read(&workspace().join(".ci/run"));
    assert!(
        ci.lines().any(|l| l.trim() == "bash .ci/test"),
        ".ci/run does not run `bash .ci/test`, the README's test command"
    );
    // The layout names every example.
    for name in example_files() {
        let shown = name.strip_suffix(".rs").unwrap_or(&name).to_owned();
        assert!(
            readme.contains(&format!("`{shown}`")),
            "README.md's layout does not name the example `{shown}`"
        );
    }
    let quickstart = read(&workspace().join("examples/quickstart.rs"));
    assert!(quickstart.contains("\"target/stemmon/quickstart.json\""));
}

/// The file names of the examples: `examples/` less its package's manifest and library.
fn example_files() -> Vec<String> {
    std::fs::read_dir(workspace().join("examples"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| !matches!(name.as_str(), "Cargo.toml" | "lib.rs"))
        .collect()
}

#[test]
fn every_example_is_in_the_docs() {
    let docs: String = doc_files().iter().map(|p| read(p)).collect();
    let mut missing = Vec::new();
    for name in example_files() {
        let shown = match name.strip_suffix(".rs") {
            Some(stem) => docs.contains(&format!("--example {stem}")),
            None => docs.contains(&format!("examples/{name}")),
        };
        if !shown {
            missing.push(name);
        }
    }
    assert!(
        missing.is_empty(),
        "examples the docs never name: {missing:?}"
    );
    // And every example the docs run exists.
    for part in docs.split("--example ").skip(1) {
        let stem: String = part
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        assert!(
            workspace().join(format!("examples/{stem}.rs")).exists(),
            "the docs run `--example {stem}`, which does not exist"
        );
    }
}

/// mdBook's id of a heading: lowercase, spaces as `-`, other punctuation dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '_' || c == '-' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(text: &str) -> Vec<String> {
    let mut in_code = false;
    let mut found = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
        } else if !in_code && line.starts_with('#') {
            found.push(anchor(line.trim_start_matches('#')));
        }
    }
    found
}

#[test]
fn every_relative_link_leads_somewhere() {
    let mut broken = Vec::new();
    for path in doc_files() {
        let text = read(&path);
        for part in text.split("](").skip(1) {
            let Some(end) = part.find(')') else { continue };
            let link = &part[..end];
            if link.contains("://") || link.starts_with("mailto:") || link.contains(' ') {
                continue;
            }
            let (file, fragment) = match link.split_once('#') {
                Some((file, fragment)) => (file, Some(fragment)),
                None => (link, None),
            };
            let target = if file.is_empty() {
                path.clone()
            } else {
                path.parent().unwrap().join(file)
            };
            if !target.exists() {
                broken.push(format!("{}: {link}", shown(&path)));
                continue;
            }
            if let Some(fragment) = fragment {
                if target.extension().is_some_and(|e| e == "md")
                    && !anchors(&read(&target)).iter().any(|a| a == fragment)
                {
                    broken.push(format!("{}: {link} (no such heading)", shown(&path)));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links: {broken:#?}");
}

/// Every `stemmon...` dependency line of a `toml` block of the docs.
fn dependency_lines() -> Vec<(String, String)> {
    let mut lines = Vec::new();
    for path in doc_files() {
        for block in blocks(&read(&path)) {
            if block.info != "toml" {
                continue;
            }
            for line in &block.body {
                if line.starts_with("stemmon") && line.contains('=') {
                    lines.push((shown(&path), line.clone()));
                }
            }
        }
    }
    lines
}

#[test]
fn the_dependency_lines_resolve() {
    let manifest = read(&workspace().join("Cargo.toml"));
    let repository = manifest
        .lines()
        .find_map(|l| l.strip_prefix("repository = "))
        .expect("the workspace's repository")
        .trim_matches('"')
        .to_owned();
    let lines = dependency_lines();
    assert!(
        lines.iter().any(|(file, _)| file == "README.md"),
        "README.md gives no dependency line"
    );
    // A scratch crate beside a checkout named `stemmon`, as the path form expects.
    let dir = temp_dir("docs-dependency");
    std::os::unix::fs::symlink(workspace(), dir.join("stemmon")).unwrap();
    let project = dir.join("my-pipeline");
    std::fs::create_dir_all(project.join("src")).unwrap();
    std::fs::write(project.join("src/main.rs"), "fn main() {}\n").unwrap();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    for (file, line) in lines {
        if line.contains("git = ") {
            assert!(
                line.contains(&format!("git = \"{repository}\"")),
                "{file}: `{line}` names another repository than {repository}"
            );
            continue;
        }
        let is_ours = line.starts_with("stemmon =") || line.starts_with("stemmon-report =");
        assert!(
            !is_ours || line.contains("path = "),
            "{file}: `{line}`: the crates are not published; give the git or the path form"
        );
        if !is_ours {
            continue;
        }
        std::fs::write(
            project.join("Cargo.toml"),
            format!(
                "[package]\nname = \"my-pipeline\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
                 [workspace]\n\n[dependencies]\n{line}\n"
            ),
        )
        .unwrap();
        // The versions the workspace locked, all downloaded already.
        std::fs::copy(workspace().join("Cargo.lock"), project.join("Cargo.lock")).unwrap();
        let output = Command::new(&cargo)
            .args(["tree", "--offline", "--depth", "1", "--prefix", "none"])
            .current_dir(&project)
            .output()
            .expect("run cargo tree");
        let tree = String::from_utf8_lossy(&output.stdout);
        let name = line.split([' ', '=']).next().unwrap();
        assert!(
            output.status.success() && tree.lines().any(|l| l.starts_with(&format!("{name} v"))),
            "{file}: `{line}` does not resolve in a crate beside a checkout:\n{tree}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}
