//! Figures as a person writes them: `812.4 MiB`, `1.52s`, `+12.5 %`.

/// `812.4 MiB`, `1.1 GiB`, `512 KiB` (the runtime's log line writes them the same way),
/// or `-` for a reading that was not taken.
pub(crate) fn bytes(value: Option<u64>) -> String {
    value.map_or_else(|| "-".to_owned(), stemmon_report::format_bytes)
}

/// `text` with control characters (and anything else that would break a line or
/// reorder a terminal's text) escaped as `\n`, `\u{1b}`: a report may come from anyone.
pub(crate) fn clean(text: &str) -> std::borrow::Cow<'_, str> {
    stemmon_report::escape(text)
}

pub(crate) use stemmon_report::short;

/// `1.523s`, `12.3ms`, `40µs`: three significant figures or so.
pub(crate) fn seconds(value: f64) -> String {
    if value >= 100.0 {
        format!("{value:.1}s")
    } else if value >= 1.0 {
        format!("{value:.3}s")
    } else if value >= 1e-3 {
        format!("{:.1}ms", value * 1e3)
    } else {
        format!("{:.0}µs", value * 1e6)
    }
}

/// `3.80` cores, or `-` for a reading that was not taken.
pub(crate) fn cores(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| format!("{v:.2}"))
}

/// CPU seconds as [`seconds`] writes them, or `-` for a reading that was not taken.
pub(crate) fn cpu_seconds(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_owned(), seconds)
}

/// User plus system CPU seconds of a record, where either was read.
pub(crate) fn cpu_total(cpu_io: &stemmon_report::CpuIo) -> Option<f64> {
    match (cpu_io.cpu_user_seconds, cpu_io.cpu_system_seconds) {
        (Some(user), Some(system)) => Some(user + system),
        (user, system) => user.or(system),
    }
}

/// A figure of the field table as a person reads it, by its unit: bytes (`-` before
/// those that went negative), seconds, cores, or a count; `-` for a reading not taken.
pub(crate) fn figure(unit: stemmon_report::fields::Unit, value: Option<f64>) -> String {
    use stemmon_report::fields::Unit;
    let Some(value) = value.filter(|v| v.is_finite()) else {
        return "-".to_owned();
    };
    // `as` saturates: a hostile 1e300 prints as the largest figure, not as garbage.
    match unit {
        Unit::Bytes if value < 0.0 => format!("-{}", bytes(Some(value.abs().round() as u64))),
        Unit::Bytes => bytes(Some(value.round() as u64)),
        Unit::Seconds => seconds(value),
        Unit::Cores => cores(Some(value)),
        Unit::Count => format!("{}", value.max(0.0).round() as u64),
        // A share (and any unit a later table adds) as the table shows it.
        other => other.show(value),
    }
}

/// `text` escaped and, past `width` characters, cut in the middle (`python3 … train.py`):
/// the head and the tail of a command or a path say the most. Linear in `text`.
pub(crate) fn middle(text: &str, width: usize) -> String {
    cut_middle(&clean(text), width)
}

/// [`middle`] for text already escaped: at most `width` characters, the middle taken out
/// and replaced by `…`, at a space or `/` where one is near the cut.
pub(crate) fn cut_middle(text: &str, width: usize) -> String {
    let count = text.chars().count();
    if count <= width {
        return text.to_owned();
    }
    if width <= 1 {
        return "…".chars().take(width).collect();
    }
    let keep = width - 1;
    let (head, tail) = (keep.div_ceil(2), keep / 2);
    let head: String = text.chars().take(head).collect();
    let tail: String = text.chars().skip(count - tail).collect();
    // A word or path part cut in two reads worse than one left out: snap to a separator
    // in the third of each side nearest the cut.
    let separator = |c: char| c == ' ' || c == '/';
    let head_len = head.chars().count();
    let head = match head.char_indices().rev().find(|&(_, c)| separator(c)) {
        Some((at, c)) if head[..at].chars().count() * 3 >= head_len * 2 => {
            head[..at + c.len_utf8()].to_owned()
        }
        _ => head,
    };
    let tail_len = tail.chars().count();
    let tail = match tail.char_indices().find(|&(_, c)| separator(c)) {
        Some((at, _)) if tail[..at].chars().count() * 3 <= tail_len => tail[at..].to_owned(),
        _ => tail,
    };
    format!("{head}…{tail}")
}

/// The width output is fitted to: `COLUMNS` when it is set to a number, else the
/// terminal's width when standard output is one, else `None` (a pipe or a file gets
/// every column and every line whole, for scripts and CI logs).
pub(crate) fn output_width() -> Option<usize> {
    let columns = std::env::var("COLUMNS").ok();
    width_from(columns.as_deref(), || {
        terminal_size::terminal_size_of(std::io::stdout()).map(|(w, _)| usize::from(w.0))
    })
}

/// [`output_width`]'s rule, apart from the environment.
fn width_from(columns: Option<&str>, terminal: impl Fn() -> Option<usize>) -> Option<usize> {
    match columns.and_then(|c| c.trim().parse::<usize>().ok()) {
        Some(width) if width > 0 => Some(width),
        _ => terminal().filter(|&w| w > 0),
    }
}

/// A header line (`key:       a; b; c`) folded to `width` characters, its value's lines
/// indented by `indent` (the key's column): at a `;` where that leaves the line at least
/// half full, else at a space. A word longer than a line stays whole.
pub(crate) fn wrap(line: &str, width: usize, indent: usize) -> String {
    let split = line
        .char_indices()
        .nth(indent)
        .map_or(line.len(), |(at, _)| at);
    let (key, value) = line.split_at(split);
    let room = width.saturating_sub(indent).max(1);
    if line.chars().count() <= width {
        return line.to_owned();
    }
    let mut lines: Vec<Vec<&str>> = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    let length = |words: &[&str]| {
        words.iter().map(|w| w.chars().count()).sum::<usize>() + words.len().saturating_sub(1)
    };
    for word in value.split(' ') {
        current.push(word);
        if current.len() == 1 || length(&current) <= room {
            continue;
        }
        let word = current.pop().unwrap_or_default();
        let at_semicolon = (0..current.len())
            .rev()
            .find(|&k| current[k].ends_with(';') && length(&current[..=k]) * 2 >= room);
        let carried = match at_semicolon {
            Some(k) => current.split_off(k + 1),
            None => Vec::new(),
        };
        lines.push(std::mem::replace(&mut current, carried));
        current.push(word);
    }
    lines.push(current);
    let pad = " ".repeat(indent);
    lines
        .iter()
        .enumerate()
        .map(|(i, words)| format!("{}{}", if i == 0 { key } else { &pad }, words.join(" ")))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `+12.5 %` / `-3.0 %`, or `-` when there is no base to compare with.
pub(crate) fn percent(change: Option<f64>) -> String {
    match change {
        // No `-0.0 %` for a change that rounds to nothing.
        Some(change) if change.is_finite() && change.abs() < 0.05 => "0.0 %".to_owned(),
        Some(change) if change.is_finite() => format!("{:+.1} %", change),
        _ => "-".to_owned(),
    }
}

/// The change from `base` to `new`, in percent of `base`; `None` without a positive base.
pub(crate) fn change(base: f64, new: f64) -> Option<f64> {
    (base > 0.0).then(|| (new - base) / base * 100.0)
}

/// An argv as a shell would take it back: words with spaces or quotes are quoted.
pub(crate) fn command_line(argv: &[String]) -> String {
    let quote = |word: &String| {
        let plain = !word.is_empty()
            && word
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
        if plain {
            word.clone()
        } else {
            format!("'{}'", word.replace('\'', "'\\''"))
        }
    };
    argv.iter().map(quote).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_read_like_a_person_writes_them() {
        assert_eq!(bytes(None), "-");
        assert_eq!(bytes(Some(812 * (1 << 20) + 400 * 1024)), "812.4 MiB");
        assert_eq!(bytes(Some(3 << 30)), "3.0 GiB");
        assert_eq!(bytes(Some(2048)), "2 KiB");
        assert_eq!(seconds(1.5234), "1.523s");
        assert_eq!(seconds(0.0123), "12.3ms");
        assert_eq!(seconds(0.00004), "40µs");
        assert_eq!(seconds(250.0), "250.0s");
        assert_eq!(percent(change(2.0, 2.5)), "+25.0 %");
        assert_eq!(percent(change(0.0, 2.5)), "-");
        assert_eq!(percent(change(100.0, 99.99)), "0.0 %");
        assert_eq!(clean("fit\n\u{1b}[2J"), "fit\\n\\u{1b}[2J");
        assert_eq!(cores(Some(3.8)), "3.80");
        use stemmon_report::fields::Unit;
        assert_eq!(
            figure(Unit::Bytes, Some(-((12u64 << 20) as f64))),
            "-12.0 MiB"
        );
        assert_eq!(
            figure(Unit::Bytes, Some(i64::MIN as f64)),
            "-8589934592.0 GiB"
        );
        assert_eq!(figure(Unit::Bytes, Some(1e300)), "17179869184.0 GiB");
        assert_eq!(figure(Unit::Seconds, Some(0.0123)), "12.3ms");
        assert_eq!(figure(Unit::Cores, Some(3.8)), "3.80");
        assert_eq!(figure(Unit::Count, Some(12.0)), "12");
        assert_eq!(figure(Unit::Count, None), "-");
        assert_eq!(middle("sh -c 'x\u{1b}'", 80), "sh -c 'x\\u{1b}'");
        assert_eq!(middle(&"y".repeat(1 << 20), 5), "yy…yy");
        assert_eq!(middle("ab\ncd", 3), "a…d");
        let argv = ["sh", "-c", "echo 'hi' there"].map(String::from);
        assert_eq!(command_line(&argv), "sh -c 'echo '\\''hi'\\'' there'");
    }

    #[test]
    fn long_commands_and_paths_are_cut_in_the_middle() {
        let argv = "python3 -m torch.distributed.run --nproc_per_node 8 train.py";
        assert_eq!(middle(argv, 80), argv);
        assert_eq!(middle(argv, 20), "python3 … train.py");
        assert_eq!(middle("fit/inner/deeper/deepest/leaf", 14), "fit/inn…/leaf");
        assert_eq!(
            middle("fit/inner/deeper/deepest/leaf", 20),
            "fit/inner/…pest/leaf"
        );
        assert_eq!(middle("abcdefghij", 5), "ab…ij");
        assert_eq!(middle("x\u{1b}[2J\u{7}y", 8), "x\\u{…7}y");
        assert!(!middle("\u{1b}".repeat(1000).as_str(), 9)
            .chars()
            .any(char::is_control));
        assert_eq!(middle("abc", 1), "…");
        assert_eq!(middle("abc", 0), "");
    }

    #[test]
    fn the_width_is_columns_else_the_terminal_s_else_none() {
        assert_eq!(width_from(Some("80"), || Some(200)), Some(80));
        assert_eq!(width_from(Some(" 120 "), || None), Some(120));
        assert_eq!(width_from(Some("wide"), || Some(200)), Some(200));
        assert_eq!(width_from(Some("0"), || None), None);
        assert_eq!(width_from(None, || Some(132)), Some(132));
        assert_eq!(width_from(None, || None), None);
    }

    #[test]
    fn header_lines_fold_at_semicolons_under_their_value() {
        let line = "peak:       tree RSS 1.2 GiB (sampled, at 3.100s in fit); bound ≤ 1.3 GiB; \
                    parent's exact peak 1.1 GiB";
        assert_eq!(wrap(line, 200, 12), line);
        assert_eq!(
            wrap(line, 60, 12),
            "peak:       tree RSS 1.2 GiB (sampled, at 3.100s in fit);\n            \
             bound ≤ 1.3 GiB; parent's exact peak 1.1 GiB"
        );
        for folded in [wrap(line, 40, 12), wrap(line, 60, 12)] {
            assert!(folded.lines().all(|l| l.chars().count() <= 60), "{folded}");
        }
        assert_eq!(wrap("errors:     none", 10, 12), "errors:     none");
    }
}
