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

    /// Prints an answer of the API: its JSON pretty-printed, keys sorted (as the CLI has always
    /// printed the node's answers), or its view (table).
    pub(super) fn answer(&self, view: View, answer: &impl serde::Serialize) -> anyhow::Result<()> {
        let value = serde_json::to_value(answer)?;
        match self.format {
            Format::Json => outln!("{}", serde_json::to_string_pretty(&value)?),
            Format::Table => self.table(view, &value),
        }
        Ok(())
    }

    /// Prints an answer of the API as its JSON, whatever the format (`job next-fires` prints
    /// text otherwise).
    pub(super) fn json(&self, answer: &impl serde::Serialize) -> anyhow::Result<()> {
        let value = serde_json::to_value(answer)?;
        outln!("{}", serde_json::to_string_pretty(&value)?);
        Ok(())
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
