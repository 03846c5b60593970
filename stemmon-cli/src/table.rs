//! The aligned text table of `show` and `compare`, drawn in one pass over its cells.
//!
//! A report may hold 100 000 stages; a general table crate spent seconds per 100 000
//! rows measuring and wrapping each cell. Cells here are one line each (the text is
//! escaped before it gets here), so a column's width is its longest cell in characters.

/// Rows of cells under a header; columns are left-aligned unless set right.
#[derive(Debug, Default)]
pub(crate) struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    right: Vec<bool>,
}

impl Table {
    pub(crate) fn new(header: Vec<String>) -> Table {
        Table {
            right: vec![false; header.len()],
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
        self.rows.push(row);
    }
}

impl std::fmt::Display for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let columns = self.header.len();
        let mut width: Vec<usize> = self.header.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (column, cell) in row.iter().enumerate().take(columns) {
                width[column] = width[column].max(cell.chars().count());
            }
        }
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
        let mut out = String::with_capacity(self.rows.len() * width.iter().sum::<usize>() * 2);
        let line = |out: &mut String, cells: &[String]| {
            out.push('│');
            for (column, w) in width.iter().enumerate() {
                if column > 0 {
                    out.push('┆');
                }
                let cell = cells.get(column).map_or("", String::as_str);
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
        out.push_str(&rule("┌", "─", "┬", "┐\n"));
        line(&mut out, &self.header);
        out.push_str(&rule("╞", "═", "╪", "╡\n"));
        for row in &self.rows {
            line(&mut out, row);
        }
        out.push_str(&rule("└", "─", "┴", "┘"));
        f.write_str(&out)
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
}
