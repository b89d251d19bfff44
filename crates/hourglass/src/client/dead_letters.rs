//! `hourglass dead-letters`: list the namespace's dead letters, replay one as a new job, or
//! delete one.

use clap::{Args, Subcommand};

use super::output::{Format, Output};
use super::{Connection, call, send};
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
    use reqwest::Method;
    let conn = &args.conn.resolve()?;
    match args.command {
        DeadLetterCommand::List => {
            let path = "/v1/dead-letters".to_string();
            call(conn, out, View::DeadLetters, Method::GET, path, None).await
        }
        DeadLetterCommand::Replay { id } => {
            // The answer is the new job.
            let path = format!("/v1/dead-letters/{id}/replay");
            call(conn, out, View::Job, Method::POST, path, None).await
        }
        DeadLetterCommand::Delete { id } => {
            send(
                conn,
                Method::DELETE,
                &format!("/v1/dead-letters/{id}"),
                None,
            )
            .await?;
            // The answer is empty: JSON output prints nothing, as it always did.
            if out.format == Format::Table {
                outln!("dead letter {id} deleted");
            }
            Ok(())
        }
    }
}
