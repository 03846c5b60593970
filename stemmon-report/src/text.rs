//! Text from a report as a person reads it: byte figures, escaping of what would break
//! a line or a terminal, short quotes, and the label check every surface shares.

use std::borrow::Cow;

/// `812.4 MiB`, `1.1 GiB`, `512 KiB`, `0 B`: one decimal from a MiB up, as the live log
/// line and the `stemmon` command write them.
pub fn format_bytes(bytes: u64) -> String {
    const KIB: f64 = 1024.0;
    const MIB: f64 = KIB * 1024.0;
    const GIB: f64 = MIB * 1024.0;
    let b = bytes as f64;
    if b >= GIB {
        format!("{:.1} GiB", b / GIB)
    } else if b >= MIB {
        format!("{:.1} MiB", b / MIB)
    } else if b >= KIB {
        format!("{:.0} KiB", b / KIB)
    } else {
        format!("{bytes} B")
    }
}

/// Whether `c` would break the line or change how a terminal shows what follows.
fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{2028}' | '\u{2029}' | '\u{200e}' | '\u{200f}')
        || ('\u{202a}'..='\u{202e}').contains(&c)
        || ('\u{2066}'..='\u{2069}').contains(&c)
}

/// `text` with every control, line-separator and bidirectional character written as
/// Rust writes it in a string literal (`\n`, `\r`, `\t`, `\0`, `\u{1b}`): a report's
/// names come from anyone, and never reach a terminal raw.
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return text.into();
    }
    let mut escaped = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if needs_escape(c) {
            escaped.extend(c.escape_default());
        } else {
            escaped.push(c);
        }
    }
    escaped.into()
}

/// `text` as quoted in a one-line message: at most 80 characters, then `…` (a hostile
/// stage name may be megabytes).
pub fn short(text: &str) -> String {
    match text.char_indices().nth(80) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// Label names stemmon sets itself (`host`, `stage`), or that Prometheus and the
/// Pushgateway set on the series they scrape (`job`, `instance`).
const RESERVED_LABELS: [&str; 4] = ["host", "job", "stage", "instance"];

/// The longest label value accepted: a path or an id fits, a pasted document does not.
pub const MAX_LABEL_VALUE_BYTES: usize = 1024;

/// A label's name and value as every surface takes them (the builder, `STEMMON_LABELS`,
/// `stemmon run --label`): a Prometheus label name (`[a-zA-Z_][a-zA-Z0-9_]*`, not
/// starting with `__`, not `host`, `job`, `stage` or `instance`) and a non-empty value
/// without control characters of at most 1024 bytes (`MAX_LABEL_VALUE_BYTES`).
pub fn check_label(name: &str, value: &str) -> Result<(), String> {
    check_label_name(name)?;
    check_label_value(value).map_err(|reason| format!("label `{name}`: {reason}"))
}

/// A label's name alone (see [`check_label`]).
pub fn check_label_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let valid = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid {
        return Err(format!(
            "{name:?} is not a Prometheus label name: use letters, digits and `_`, not \
             starting with a digit"
        ));
    }
    if name.starts_with("__") {
        return Err(format!(
            "{name:?} starts with `__`, which Prometheus reserves for internal use"
        ));
    }
    if RESERVED_LABELS.contains(&name) {
        return Err(format!(
            "{name:?} is reserved: stemmon or Prometheus sets `host`, `job`, `stage` and \
             `instance` itself"
        ));
    }
    Ok(())
}

/// A label's value alone (see [`check_label`]).
pub fn check_label_value(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Err("the value is empty (Prometheus treats an empty label as absent)".into());
    }
    if value.len() > MAX_LABEL_VALUE_BYTES {
        return Err(format!(
            "the value is {} bytes long; at most {MAX_LABEL_VALUE_BYTES} are accepted",
            value.len()
        ));
    }
    if value.chars().any(char::is_control) {
        return Err(format!("the value {value:?} holds a control character"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_read_like_a_person_writes_them() {
        assert_eq!(format_bytes(812 * (1 << 20) + 400 * 1024), "812.4 MiB");
        assert_eq!(format_bytes(1181116006), "1.1 GiB");
        assert_eq!(format_bytes(2048), "2 KiB");
        assert_eq!(format_bytes(0), "0 B");
    }

    #[test]
    fn control_characters_are_escaped_and_the_rest_kept() {
        assert_eq!(escape("naïve 検索 ✓"), "naïve 検索 ✓");
        assert_eq!(
            escape("a\nb\rc\td\0e\u{1b}[31mf\u{7f}g\u{85}h"),
            "a\\nb\\rc\\td\\u{0}e\\u{1b}[31mf\\u{7f}g\\u{85}h"
        );
        assert_eq!(escape("x\u{2028}y\u{202e}z"), "x\\u{2028}y\\u{202e}z");
        assert_eq!(short(&"y".repeat(100)).chars().count(), 81);
    }
}
