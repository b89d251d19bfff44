//! `hourglass queue`: lease, ack, nack and extend messages of a pull queue, and its counts,
//! through the typed client.

use anyhow::bail;
use clap::{Args, Subcommand};
use hourglass_client::QueueStats;
use hourglass_client::api::LeaseResult;

use super::output::Output;
use super::{Connection, failed};
use crate::views::View;

#[derive(Args, Debug)]
pub struct QueueArgs {
    #[command(flatten)]
    conn: Connection,
    #[command(subcommand)]
    command: QueueCommand,
}

#[derive(Subcommand, Debug)]
enum QueueCommand {
    /// Lease messages and print them with their receipts; ack or nack each receipt afterwards.
    Lease {
        /// The queue's name.
        name: String,
        /// At most this many messages (1 to 1000).
        #[arg(long, default_value_t = 1)]
        max: u32,
        /// Long-poll up to this many milliseconds when the queue is empty (at most 20000).
        #[arg(long, default_value_t = 0)]
        wait_ms: u64,
        /// Keep the messages from other consumers this long (1000 to 43200000).
        #[arg(long, default_value_t = 30_000)]
        visibility_ms: u64,
        /// Only messages of this job type (repeat for several).
        #[arg(long = "type")]
        types: Vec<String>,
    },
    /// Complete leased messages.
    Ack {
        /// The queue's name.
        name: String,
        /// Receipts from `queue lease`.
        #[arg(required = true)]
        receipts: Vec<String>,
    },
    /// Hand leased messages back for another attempt.
    Nack {
        /// The queue's name.
        name: String,
        /// Receipts from `queue lease`.
        #[arg(required = true)]
        receipts: Vec<String>,
        /// Retry after this many milliseconds instead of the job's retry backoff.
        #[arg(long)]
        delay_ms: Option<u64>,
    },
    /// Keep leased messages invisible for another --visibility-ms from now.
    Extend {
        /// The queue's name.
        name: String,
        /// Receipts from `queue lease`.
        #[arg(required = true)]
        receipts: Vec<String>,
        /// How long from now the messages stay leased (1000 to 43200000).
        #[arg(long, default_value_t = 30_000)]
        visibility_ms: u64,
    },
    /// Counts of one queue, or of every queue.
    Stats {
        /// The queue's name [default: every queue of the namespace].
        name: Option<String>,
    },
}

pub const QUEUE_EXAMPLES: &str = "\
Examples:
  hourglass queue stats
  hourglass queue lease emails --max 10 --wait-ms 20000
  hourglass queue ack emails RECEIPT...
  hourglass queue nack emails RECEIPT --delay-ms 60000";

pub async fn queue(args: QueueArgs, out: Output) -> anyhow::Result<()> {
    use hourglass_client::{LeaseOptions, Receipt, ReceiptResults};
    use std::time::Duration;

    let client = args.conn.resolve()?.api_client()?;
    let receipts = |r: Vec<String>| r.into_iter().map(Receipt).collect::<Vec<_>>();
    // Prints the per-receipt results; any refused receipt fails the command.
    let results = |r: ReceiptResults| -> anyhow::Result<()> {
        out.value(View::Receipts, &r)?;
        if !r.failed.is_empty() {
            bail!("{} of the receipts failed", r.failed.len());
        }
        Ok(())
    };
    match args.command {
        QueueCommand::Lease {
            name,
            max,
            wait_ms,
            visibility_ms,
            types,
        } => {
            let options = LeaseOptions {
                max,
                wait: Duration::from_millis(wait_ms),
                visibility: Duration::from_millis(visibility_ms),
                types,
            };
            let messages = client.lease(&name, &options).await.map_err(failed)?;
            out.value(View::Messages, &LeaseResult { messages })
        }
        QueueCommand::Ack { name, receipts: r } => {
            results(client.ack(&name, &receipts(r)).await.map_err(failed)?)
        }
        QueueCommand::Nack {
            name,
            receipts: r,
            delay_ms,
        } => results(
            client
                .nack(&name, &receipts(r), delay_ms.map(Duration::from_millis))
                .await
                .map_err(failed)?,
        ),
        QueueCommand::Extend {
            name,
            receipts: r,
            visibility_ms,
        } => results(
            client
                .extend(&name, &receipts(r), Duration::from_millis(visibility_ms))
                .await
                .map_err(failed)?,
        ),
        QueueCommand::Stats { name: Some(name) } => out.value(
            View::Queue,
            &client.queue_stats(&name).await.map_err(failed)?,
        ),
        QueueCommand::Stats { name: None } => out.value(
            View::Queues,
            &AllQueues {
                queues: client.list_queues().await.map_err(failed)?,
            },
        ),
    }
}

/// Every queue of the namespace, as `queue stats` prints them: the pages the client followed,
/// in one list.
#[derive(serde::Serialize)]
struct AllQueues {
    queues: Vec<QueueStats>,
}
