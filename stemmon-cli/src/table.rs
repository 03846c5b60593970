//! The aligned text table of `show` and `compare`, drawn in one pass over its cells.
//!
//! A report may hold 100 000 stages; a general table crate spent seconds per 100 000
//! rows measuring and wrapping each cell. Cells here are one line each (the text is
//! escaped before it gets here), so a column's width is its longest cell in characters.
//!
//! [`Table::fit`] makes a table fit a width: the columns that give way first are cut
//! (text, in the middle) or left out, in the order their [`Give`] says, until it fits.

use crate::format::cut_middle;

/// How a column gives way when the table is wider than its limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Give {
    /// The order columns give way in: lowest first.
    pub(crate) rank: u8,
    /// Text cut in the middle down to this many characters; `None` for figures, which a
    /// cut would make wrong.
    pub(crate) narrow_to: Option<usize>,
    /// Whether the column may be left out once cut as far as it goes.
    pub(crate) drop: bool,
}

impl Give {
    /// A figure's column, left out at `rank`.
    pub(crate) const fn drop(rank: u8) -> Give {
        Give {
            rank,
            narrow_to: None,
            drop: true,
        }
    }

    /// A text column cut down to `width` at `rank`, never left out.
    pub(crate) const fn narrow(rank: u8, width: usize) -> Give {
        Give {
            rank,
            narrow_to: Some(width),
            drop: false,
        }
    }
}

/// Between two cells of a row as it is kept: a control character, which no cell holds
/// (the text is escaped before it gets here; [`Table::add_row`] makes sure).
const SEP: char = '\u{1f}';

/// Rows of cells under a header; columns are left-aligned unless set right.
///
/// A row is kept as one string, its cells joined by [`SEP`]: 100 000 rows of a dozen
/// cells are about 14 MB so, against some 70 MB as a `String` a cell.
#[derive(Debug, Default)]
pub(crate) struct Table {
    header: Vec<String>,
    rows: Vec<Box<str>>,
    right: Vec<bool>,
    /// How each column gives way; `None`: it never does.
    give: Vec<Option<Give>>,
}

impl Table {
    pub(crate) fn new(header: Vec<String>) -> Table {
        Table {
            right: vec![false; header.len()],
            give: vec![None; header.len()],
            header,
            rows: Vec::new(),
        }
    }

    /// Aligns the columns in `columns` to the right (numbers).
    pub(crate) fn align_right(&mut self, columns: std::ops::Range<usize>) {
        for column in columns {
            if let Some(right) = self.right.get_mut(column) {
                *right = true;
            }
        }
    }

    pub(crate) fn add_row(&mut self, row: Vec<String>) {
        let mut kept = String::with_capacity(row.iter().map(|c| c.len() + 1).sum());
        for (column, cell) in row.iter().enumerate() {
            if column > 0 {
                kept.push(SEP);
            }
            // The separator's own picture where a cell held it.
            kept.extend(cell.chars().map(|c| if c == SEP { '\u{241f}' } else { c }));
        }
        self.rows.push(kept.into_boxed_str());
    }

    /// The cells of each row, in order.
    fn cells(&self) -> impl Iterator<Item = std::str::Split<'_, char>> {
        self.rows.iter().map(|row| row.split(SEP))
    }

    /// Rewrites each row's cells with `each` (its column, its cell; `None` leaves it
    /// out).
    fn rewrite(&mut self, mut each: impl FnMut(usize, &str) -> Option<String>) {
        for row in &mut self.rows {
            let mut kept = String::with_capacity(row.len());
            let mut first = true;
            for (column, cell) in row.split(SEP).enumerate() {
                if let Some(cell) = each(column, cell) {
                    if !first {
                        kept.push(SEP);
                    }
                    first = false;
                    kept.push_str(&cell);
                }
            }
            *row = kept.into_boxed_str();
        }
    }

    /// Sets how column `column` gives way when the table is too wide.
    pub(crate) fn give(&mut self, column: usize, give: Give) {
        if let Some(slot) = self.give.get_mut(column) {
            *slot = Some(give);
        }
    }

    /// Each column's width: its longest cell or header, in characters.
    fn widths(&self) -> Vec<usize> {
        let mut width: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in self.cells() {
            for (column, cell) in row.enumerate().take(width.len()) {
                width[column] = width[column].max(cell.chars().count());
            }
        }
        width
    }

    /// Fits the table into `width` characters (`None`: no limit): columns give way in
    /// the order of their [`Give`], text cut in the middle first, then left out, until
    /// it fits or nothing more may give. Returns the headers of the columns left out.
    pub(crate) fn fit(&mut self, width: Option<usize>) -> Vec<String> {
        let Some(limit) = width else {
            return Vec::new();
        };
        let mut widths = self.widths();
        let natural = widths.clone();
        let mut kept = vec![true; widths.len()];
        let total = |widths: &[usize], kept: &[bool]| {
            let (sum, count) = widths
                .iter()
                .zip(kept)
                .filter(|(_, k)| **k)
                .fold((0, 0), |(sum, count), (w, _)| (sum + w, count + 1));
            sum + 3 * count + 1
        };
        let mut order: Vec<(u8, usize, Give)> = self
            .give
            .iter()
            .enumerate()
            .filter_map(|(column, give)| give.map(|g| (g.rank, column, g)))
            .collect();
        order.sort_by_key(|&(rank, column, _)| (rank, column));
        for (_, column, give) in order {
            let now = total(&widths, &kept);
            if now <= limit {
                break;
            }
            if let Some(narrowest) = give.narrow_to {
                let want = widths[column].saturating_sub(now - limit);
                widths[column] = widths[column].min(want.max(narrowest.max(1)));
            }
            if give.drop && total(&widths, &kept) > limit {
                kept[column] = false;
            }
        }
        // Each column's width where it narrowed, where it is kept.
        let narrowed: Vec<Option<usize>> = widths
            .iter()
            .zip(&natural)
            .zip(&kept)
            .map(|((&to, &from), &kept)| (to < from && kept).then_some(to))
            .collect();
        for (cell, to) in self.header.iter_mut().zip(&narrowed) {
            if let Some(to) = *to {
                if cell.chars().count() > to {
                    *cell = narrow(cell, to);
                }
            }
        }
        let dropped = self
            .header
            .iter()
            .zip(&kept)
            .filter(|(_, k)| !**k)
            .map(|(h, _)| h.clone())
            .collect();
        let keep = |cells: &mut Vec<String>| {
            let mut column = 0;
            cells.retain(|_| {
                column += 1;
                kept.get(column - 1).copied().unwrap_or(true)
            });
        };
        keep(&mut self.header);
        if narrowed.iter().any(Option::is_some) || kept.contains(&false) {
            self.rewrite(|column, cell| {
                match (
                    kept.get(column).copied().unwrap_or(true),
                    narrowed.get(column),
                ) {
                    (false, _) => None,
                    (true, Some(Some(to))) if cell.chars().count() > *to => Some(narrow(cell, *to)),
                    _ => Some(cell.to_owned()),
                }
            });
        }
        let mut column = 0;
        self.right.retain(|_| {
            column += 1;
            kept[column - 1]
        });
        let mut column = 0;
        self.give.retain(|_| {
            column += 1;
            kept[column - 1]
        });
        dropped
    }
}

/// The fewest characters of a name kept after its indentation when a column narrows.
const MIN_NAME: usize = 6;

/// `cell` cut to `width` characters in the middle, its indentation (a stage's depth)
/// kept where room is left for the name.
fn narrow(cell: &str, width: usize) -> String {
    let name = cell.trim_start_matches(' ');
    let indent = (cell.len() - name.len()).min(width.saturating_sub(MIN_NAME));
    format!("{}{}", " ".repeat(indent), cut_middle(name, width - indent))
}

impl std::fmt::Display for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let width = self.widths();
        let rule = |left: &str, line: &str, join: &str, right: &str| {
            let mut out = String::from(left);
            for (column, w) in width.iter().enumerate() {
                if column > 0 {
                    out.push_str(join);
                }
                out.push_str(&line.repeat(w + 2));
            }
            out.push_str(right);
            out
        };
        // A row at a time: a table of 100 000 stages is never held twice.
        let mut out = String::with_capacity(width.iter().sum::<usize>() * 4 + 64);
        let line = |out: &mut String, cells: &mut dyn Iterator<Item = &str>| {
            out.push('│');
            for (column, w) in width.iter().enumerate() {
                if column > 0 {
                    out.push('┆');
                }
                let cell = cells.next().unwrap_or("");
                let pad = w - cell.chars().count();
                out.push(' ');
                let spaces = std::iter::repeat_n(' ', pad);
                if self.right[column] {
                    out.extend(spaces);
                    out.push_str(cell);
                } else {
                    out.push_str(cell);
                    out.extend(spaces);
                }
                out.push(' ');
            }
            out.push_str("│\n");
        };
        f.write_str(&rule("┌", "─", "┬", "┐\n"))?;
        line(&mut out, &mut self.header.iter().map(String::as_str));
        f.write_str(&out)?;
        f.write_str(&rule("╞", "═", "╪", "╡\n"))?;
        for mut row in self.cells() {
            out.clear();
            line(&mut out, &mut row);
            f.write_str(&out)?;
        }
        f.write_str(&rule("└", "─", "┴", "┘"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_and_numbers_sit_right() {
        let mut table = Table::new(vec!["stage".into(), "calls".into()]);
        table.align_right(1..2);
        table.add_row(vec!["fit".into(), "1".into()]);
        table.add_row(vec!["  inner ü".into(), "120".into()]);
        assert_eq!(
            table.to_string(),
            "┌───────────┬───────┐\n\
             │ stage     ┆ calls │\n\
             ╞═══════════╪═══════╡\n\
             │ fit       ┆     1 │\n\
             │   inner ü ┆   120 │\n\
             └───────────┴───────┘"
        );
    }

    #[test]
    fn a_cell_holding_the_separator_stays_one_cell() {
        let mut table = Table::new(vec!["stage".into(), "calls".into()]);
        table.add_row(vec!["a\u{1f}b".into(), "1".into()]);
        assert_eq!(
            table.to_string(),
            "┌───────┬───────┐\n\
             │ stage ┆ calls │\n\
             ╞═══════╪═══════╡\n\
             │ a\u{241f}b   ┆ 1     │\n\
             └───────┴───────┘"
        );
    }

    /// A stage table as `show` gives it way: figures left out from the least important,
    /// the stage's name cut in the middle, indentation kept.
    fn stages() -> Table {
        let mut table = Table::new(
            ["stage", "calls", "total", "min", "max", "peak"]
                .map(String::from)
                .to_vec(),
        );
        table.align_right(1..6);
        table.add_row(
            ["fit", "1", "1.913s", "1.913s", "1.913s", "205.3 MiB"]
                .map(String::from)
                .to_vec(),
        );
        table.add_row(
            [
                "  inner_loop_of_the_model",
                "12",
                "1.2s",
                "10.0ms",
                "200.0ms",
                "300.0 MiB",
            ]
            .map(String::from)
            .to_vec(),
        );
        table.give(0, Give::narrow(2, 14));
        table.give(1, Give::drop(3));
        table.give(3, Give::drop(0));
        table.give(4, Give::drop(1));
        table
    }

    #[test]
    fn a_table_fits_its_width_least_important_columns_first() {
        let whole = stages().to_string();
        let wide = whole.lines().map(|l| l.chars().count()).max().unwrap();
        let mut table = stages();
        assert!(table.fit(None).is_empty());
        assert_eq!(table.to_string(), whole);
        let mut table = stages();
        assert!(table.fit(Some(wide)).is_empty(), "it fits already");
        let mut table = stages();
        assert_eq!(table.fit(Some(60)), ["min", "max"]);
        let text = table.to_string();
        assert!(text.lines().all(|l| l.chars().count() <= 60), "{text}");
        assert!(
            text.contains("inner_loop_of_the_model"),
            "no cut needed yet: {text}"
        );
        let mut table = stages();
        assert_eq!(table.fit(Some(47)), ["min", "max"]);
        let text = table.to_string();
        assert!(text.lines().all(|l| l.chars().count() <= 47), "{text}");
        assert!(
            text.contains("│   inner_…model ┆"),
            "cut in the middle, indented: {text}"
        );
        // Narrower than what may give: the name at its narrowest, calls left out, the rest
        // kept (wider than asked: a figure is never cut).
        let mut table = stages();
        assert_eq!(table.fit(Some(20)), ["calls", "min", "max"]);
        let text = table.to_string();
        assert!(
            text.contains("│   inner_…model ┆   1.2s ┆ 300.0 MiB │"),
            "{text}"
        );
    }
}
