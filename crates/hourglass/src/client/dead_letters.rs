//! `hourglass dead-letters`: list the namespace's dead letters, replay one as a new job, or
//! delete one.

use clap::{Args, Subcommand};

use super::output::{Format, Output};
use super::{Connection, failed};
use crate::views::View;

#[derive(Args, Debug)]
pub struct DeadLetterArgs {
    #[command(flatten)]
    conn: Connection,
    #[command(subcommand)]
    command: DeadLetterCommand,
}

#[derive(Subcommand, Debug)]
enum DeadLetterCommand {
    /// List the namespace's dead letters: occurrences that used up their attempts.
    List,
    /// Deliver a dead letter again, as a new one-off job due now.
    Replay {
        /// The dead letter's id (a number, from `dead-letters list`).
        id: String,
    },
    /// Delete a dead letter for good.
    Delete {
        /// The dead letter's id (a number, from `dead-letters list`).
        id: String,
    },
}

pub const DEAD_LETTER_EXAMPLES: &str = "\
Examples:
  hourglass dead-letters list
  hourglass dead-letters replay 7
  hourglass dead-letters delete 7";

pub async fn dead_letters(args: DeadLetterArgs, out: Output) -> anyhow::Result<()> {
    let client = args.conn.resolve()?.api_client()?;
    match args.command {
        DeadLetterCommand::List => {
            let page = client.list_dead_letters(None, None).await.map_err(failed)?;
            out.answer(View::DeadLetters, &page)
        }
        // The answer is the new job.
        DeadLetterCommand::Replay { id } => out.answer(
            View::Job,
            &client.replay_dead_letter(&id).await.map_err(failed)?,
        ),
        DeadLetterCommand::Delete { id } => {
            client.delete_dead_letter(&id).await.map_err(failed)?;
            // The answer is empty: JSON output prints nothing, as it always did.
            if out.format == Format::Table {
                outln!("dead letter {id} deleted");
            }
            Ok(())
        }
    }
}
