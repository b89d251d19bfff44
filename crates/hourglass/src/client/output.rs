//! How answers are printed: the API's JSON, pretty, or a table or key/value view for people
//! (`--output`, else a table on a terminal and JSON elsewhere).

use std::io::IsTerminal;

use serde_json::Value;

use crate::table::Style;
use crate::views::{self, View};

/// How answers are printed: `--output`, else a table on a terminal and JSON elsewhere.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    // The API's JSON answer, pretty-printed (the default when stdout is not a terminal).
    Json,
    // A table or a key/value view for people (the default on a terminal).
    Table,
}

#[derive(Clone, Copy, Debug)]
pub struct Output {
    pub(super) format: Format,
    /// `--output` or `HOURGLASS_OUTPUT` chose the format (not the terminal test).
    pub(super) explicit: bool,
    style: Style,
}

impl Output {
    pub fn new(chosen: Option<Format>) -> Self {
        let terminal = std::io::stdout().is_terminal();
        Self {
            format: chosen.unwrap_or(if terminal {
                Format::Table
            } else {
                Format::Json
            }),
            explicit: chosen.is_some(),
            style: Style::detect(),
        }
    }

    /// Prints an answer's body: as it came, pretty (JSON), or in its view (table).
    pub(super) fn body(&self, view: View, text: &str) {
        if text.is_empty() {
            return;
        }
        match self.format {
            Format::Json => outln!("{}", pretty(text.to_string())),
            Format::Table => match serde_json::from_str::<Value>(text) {
                Ok(value) => self.table(view, &value),
                Err(_) => outln!("{text}"),
            },
        }
    }

    /// Prints a typed answer: serialized as it is (JSON), or in its view (table).
    pub(super) fn value(&self, view: View, value: &impl serde::Serialize) -> anyhow::Result<()> {
        match self.format {
            Format::Json => print_json(value),
            Format::Table => {
                self.table(view, &serde_json::to_value(value)?);
                Ok(())
            }
        }
    }

    fn table(&self, view: View, value: &Value) {
        out!(
            "{}",
            views::render(view, value, self.style, jiff::Timestamp::now())
        );
    }
}

fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    outln!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

pub(super) fn pretty(text: String) -> String {
    serde_json::from_str::<Value>(&text)
        .map(|v| serde_json::to_string_pretty(&v).unwrap_or(text.clone()))
        .unwrap_or(text)
}
