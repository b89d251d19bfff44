//! Plain text tables and key/value views for a person at a terminal. Columns are separated by two
//! spaces and padded to their widest cell; nothing is drawn around them, so the output stays
//! readable when copied and greppable. Colour (bold headings) only when the output is a terminal
//! and `NO_COLOR` is unset: never in a file or a pipe, even with `--output table`.
//!
//! Written here rather than taken from a crate: the views need left-aligned columns and nothing
//! else, which is forty lines; table crates bring width and styling machinery the CLI has no use
//! for.

use std::io::IsTerminal;

#[derive(Clone, Copy, Debug, Default)]
pub struct Style {
    pub color: bool,
}

impl Style {
    /// Colour when standard output is a terminal and `NO_COLOR` is unset.
    pub fn detect() -> Self {
        Self {
            color: std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
        }
    }

    fn bold(self, text: &str) -> String {
        if self.color {
            format!("\x1b[1m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }
}

/// Columns under headings.
pub struct Table {
    headings: Vec<&'static str>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(headings: &[&'static str]) -> Self {
        Self {
            headings: headings.to_vec(),
            rows: Vec::new(),
        }
    }

    /// Adds a row; cells are cleaned of control characters (a server-side string must not move
    /// the cursor or break the row).
    pub fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.headings.len());
        self.rows.push(cells.iter().map(|c| clean(c)).collect());
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn render(&self, style: Style) -> String {
        let mut widths: Vec<usize> = self.headings.iter().map(|h| width(h)).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(width(cell));
            }
        }
        let mut out = String::new();
        let headings: Vec<String> = self.headings.iter().map(|h| h.to_string()).collect();
        for (i, row) in std::iter::once(&headings).chain(&self.rows).enumerate() {
            let mut line = String::new();
            for (col, (cell, w)) in row.iter().zip(&widths).enumerate() {
                if col > 0 {
                    line.push_str("  ");
                }
                line.push_str(cell);
                if col + 1 < row.len() {
                    line.push_str(&" ".repeat(w - width(cell)));
                }
            }
            let line = line.trim_end();
            if i == 0 {
                out.push_str(&style.bold(line));
            } else {
                out.push_str(line);
            }
            out.push('\n');
        }
        out
    }
}

/// `name  value` lines with the values aligned; a `None` value leaves its line out.
pub fn key_values(pairs: &[(&str, Option<String>)], style: Style) -> String {
    let shown: Vec<(&str, &String)> = pairs
        .iter()
        .filter_map(|(k, v)| v.as_ref().map(|v| (*k, v)))
        .collect();
    let w = shown.iter().map(|(k, _)| width(k)).max().unwrap_or(0);
    let mut out = String::new();
    for (key, value) in shown {
        let pad = " ".repeat(w - width(key));
        out.push_str(&format!("{}{pad}  {}\n", style.bold(key), clean(value)));
    }
    out
}

fn width(s: &str) -> usize {
    s.chars().count()
}

/// Control characters (newlines, escapes) become spaces.
pub fn clean(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// At most `max` characters, the last of them `…` when cut.
pub fn ellipsize(s: &str, max: usize) -> String {
    if width(s) <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// An instant as `2026-11-24 08:11:20Z (in 4m 10s)`; text that is not an instant as it is.
pub fn instant(text: &str, now: jiff::Timestamp) -> String {
    match text.parse::<jiff::Timestamp>() {
        Ok(ts) => format!(
            "{} ({})",
            ts.strftime("%Y-%m-%d %H:%M:%SZ"),
            relative(ts, now)
        ),
        Err(_) => text.to_string(),
    }
}

/// `in 4m 10s`, `3h 5m ago`, `now`: the two largest units.
pub fn relative(ts: jiff::Timestamp, now: jiff::Timestamp) -> String {
    let ms = ts.as_millisecond() - now.as_millisecond();
    let secs = ms.unsigned_abs() / 1000;
    if secs == 0 {
        return "now".to_string();
    }
    let span = span(secs);
    if ms > 0 {
        format!("in {span}")
    } else {
        format!("{span} ago")
    }
}

/// `4m 10s`, `2d 3h`, `12s` for a number of seconds.
pub fn span(secs: u64) -> String {
    const UNITS: [(u64, &str); 4] = [(86_400, "d"), (3_600, "h"), (60, "m"), (1, "s")];
    let mut parts = Vec::new();
    let mut rest = secs;
    for (size, name) in UNITS {
        let n = rest / size;
        rest %= size;
        if n > 0 {
            parts.push(format!("{n}{name}"));
        } else if !parts.is_empty() {
            // `2d 0h` says nothing the `2d` does not.
            break;
        }
        if parts.len() == 2 {
            break;
        }
    }
    if parts.is_empty() {
        "0s".to_string()
    } else {
        parts.join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_padded_to_the_widest_cell_and_lines_not_to_the_right() {
        let mut t = Table::new(&["ID", "STATE", "NOTE"]);
        t.row(vec!["a".into(), "active".into(), "x".into()]);
        t.row(vec!["long-key".into(), "paused".into(), String::new()]);
        assert_eq!(
            t.render(Style::default()),
            "ID        STATE   NOTE\na         active  x\nlong-key  paused\n"
        );
    }

    #[test]
    fn colour_is_only_the_headings_and_only_when_asked() {
        let mut t = Table::new(&["A"]);
        t.row(vec!["1".into()]);
        assert_eq!(t.render(Style { color: true }), "\x1b[1mA\x1b[0m\n1\n");
        assert!(!t.render(Style { color: false }).contains('\x1b'));
    }

    #[test]
    fn control_characters_cannot_reach_the_terminal() {
        let mut t = Table::new(&["A"]);
        t.row(vec!["x\x1b[2Jy\nz".into()]);
        assert_eq!(t.render(Style::default()), "A\nx [2Jy z\n");
    }

    #[test]
    fn key_values_align_and_skip_the_absent() {
        let out = key_values(
            &[
                ("id", Some("1".into())),
                ("key", None),
                ("namespace", Some("default".into())),
            ],
            Style::default(),
        );
        assert_eq!(out, "id         1\nnamespace  default\n");
    }

    #[test]
    fn relative_times_use_two_units() {
        let now: jiff::Timestamp = "2026-11-24T08:00:00Z".parse().unwrap();
        let at = |s: &str| s.parse::<jiff::Timestamp>().unwrap();
        assert_eq!(relative(at("2026-11-24T08:04:10Z"), now), "in 4m 10s");
        assert_eq!(relative(at("2026-11-24T08:00:00.400Z"), now), "now");
        assert_eq!(relative(at("2026-11-24T05:00:00Z"), now), "3h ago");
        assert_eq!(relative(at("2026-11-26T09:00:30Z"), now), "in 2d 1h");
        assert_eq!(span(45), "45s");
        assert_eq!(span(3_601), "1h");
        assert_eq!(
            instant("2026-11-24T08:00:12.345Z", now),
            "2026-11-24 08:00:12Z (in 12s)"
        );
        assert_eq!(instant("soon", now), "soon");
        assert_eq!(ellipsize("abcdef", 4), "abc…");
        assert_eq!(ellipsize("abc", 4), "abc");
    }
}
