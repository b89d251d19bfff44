//! What the node keeps for the namespace, and the cluster: `signing-secret` (rotate or show),
//! `breakers` (open circuit breakers), `connections` (bus and cloud connections with their
//! publish counts), `nodes` (the live nodes) and `whoami` (the API key in use).

use clap::Args;

use hourglass_client::api::{BreakerList, ConnectionList, NodeList};

use super::output::Output;
use super::{Connection, failed};
use crate::views::View;

#[derive(Args, Debug)]
pub struct SigningSecretArgs {
    #[command(flatten)]
    conn: Connection,
    /// Print the current secret without rotating it (for `hourglass listen --secret`).
    #[arg(long)]
    show: bool,
}

/// Rotates the namespace's signing secret and prints the new one, or with `--show` prints the
/// current one.
pub async fn signing_secret(args: SigningSecretArgs, out: Output) -> anyhow::Result<()> {
    let client = args.conn.resolve()?.api_client()?;
    let secret = if args.show {
        client.signing_secret().await
    } else {
        client.rotate_signing_secret(None).await
    };
    out.answer(View::Secret, &secret.map_err(failed)?)
}

/// The namespace's destinations whose circuit breaker is open on this node.
pub async fn breakers(conn: Connection, out: Output) -> anyhow::Result<()> {
    let client = conn.resolve()?.api_client()?;
    let breakers = client.list_breakers().await.map_err(failed)?;
    out.answer(View::Breakers, &BreakerList { breakers })
}

/// The bus and cloud connections the namespace may use, with this node's publish counts.
pub async fn connections(conn: Connection, out: Output) -> anyhow::Result<()> {
    let client = conn.resolve()?.api_client()?;
    let connections = client.list_connections().await.map_err(failed)?;
    out.answer(View::Connections, &ConnectionList { connections })
}

/// The cluster's live nodes (an admin key when the node has keys).
pub async fn nodes(conn: Connection, out: Output) -> anyhow::Result<()> {
    let client = conn.resolve()?.api_client()?;
    let nodes = client.list_nodes().await.map_err(failed)?;
    out.answer(View::Nodes, &NodeList { nodes })
}

/// The API key in use: its namespace, role and the routes it may call.
pub async fn whoami(conn: Connection, out: Output) -> anyhow::Result<()> {
    let client = conn.resolve()?.api_client()?;
    let identity = client.whoami().await.map_err(failed)?;
    out.answer(View::Identity, &identity)
}

#[derive(Args, Debug)]
pub struct AnchorArgs {
    #[command(flatten)]
    conn: Connection,
    #[command(subcommand)]
    command: AnchorCommand,
}

#[derive(clap::Subcommand, Debug)]
enum AnchorCommand {
    /// Create an anchor, or move it (re-times every active or paused job on it).
    Put {
        /// The anchor's name (1-64 letters, digits, '-', '_' or '.').
        name: String,
        /// Its instant, RFC 3339.
        #[arg(long)]
        at: String,
    },
    /// Print one anchor.
    Get {
        /// The anchor's name.
        name: String,
    },
    /// List the namespace's anchors.
    List,
    /// Delete an anchor, cancelling its active or paused jobs.
    Delete {
        /// The anchor's name.
        name: String,
        /// Refuse (409 anchor_in_use) instead of cancelling while jobs refer to it.
        #[arg(long)]
        if_unused: bool,
    },
}

/// `hourglass anchor put|get|list|delete`; answers print as JSON. `hourglass job list --anchor`
/// lists an anchor's jobs.
pub async fn anchor(args: AnchorArgs, out: Output) -> anyhow::Result<()> {
    let client = args.conn.resolve()?.api_client()?;
    match args.command {
        AnchorCommand::Put { name, at } => {
            out.json(&client.put_anchor(&name, &at).await.map_err(failed)?)
        }
        AnchorCommand::Get { name } => out.json(&client.get_anchor(&name).await.map_err(failed)?),
        AnchorCommand::List => {
            let anchors = client.list_anchors().await.map_err(failed)?;
            out.json(&hourglass_client::api::AnchorList { anchors })
        }
        AnchorCommand::Delete { name, if_unused } => out.json(
            &client
                .delete_anchor(&name, if_unused)
                .await
                .map_err(failed)?,
        ),
    }
}

#[derive(Args, Debug)]
pub struct CalendarArgs {
    #[command(flatten)]
    conn: Connection,
    #[command(subcommand)]
    command: CalendarCommand,
}

#[derive(clap::Subcommand, Debug)]
enum CalendarCommand {
    /// Create or replace a calendar (re-plans the jobs that name it).
    Put {
        /// The calendar's name (1-64 letters, digits, '-', '_' or '.').
        name: String,
        /// The IANA zone whose wall clock the days are read on.
        #[arg(long)]
        timezone: String,
        /// An excluded date, YYYY-MM-DD (repeatable).
        #[arg(long = "date")]
        dates: Vec<String>,
        /// An excluded inclusive range, FROM..TO (repeatable).
        #[arg(long = "range")]
        ranges: Vec<String>,
        /// An excluded day of the week, MON to SUN (repeatable).
        #[arg(long = "weekday")]
        weekdays: Vec<String>,
    },
    /// Print one calendar.
    Get {
        /// The calendar's name.
        name: String,
    },
    /// List the namespace's calendars.
    List,
    /// Delete a calendar no active or paused job names.
    Delete {
        /// The calendar's name.
        name: String,
    },
}

/// `hourglass calendar put|get|list|delete`; answers print as JSON.
pub async fn calendar(args: CalendarArgs, out: Output) -> anyhow::Result<()> {
    let client = args.conn.resolve()?.api_client()?;
    match args.command {
        CalendarCommand::Put {
            name,
            timezone,
            dates,
            ranges,
            weekdays,
        } => {
            let ranges = ranges
                .iter()
                .map(|r| match r.split_once("..") {
                    Some((from, to)) => Ok(hourglass_client::api::DateRangeIn {
                        from: from.into(),
                        to: to.into(),
                    }),
                    None => Err(anyhow::anyhow!("--range {r:?} is not FROM..TO")),
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            let body = hourglass_client::api::CalendarIn {
                timezone,
                exclude: hourglass_client::api::ExcludeIn {
                    dates,
                    ranges,
                    weekdays,
                },
            };
            out.json(&client.put_calendar(&name, &body).await.map_err(failed)?)
        }
        CalendarCommand::Get { name } => {
            out.json(&client.get_calendar(&name).await.map_err(failed)?)
        }
        CalendarCommand::List => {
            let calendars = client.list_calendars().await.map_err(failed)?;
            out.json(&hourglass_client::api::CalendarList { calendars })
        }
        CalendarCommand::Delete { name } => {
            client.delete_calendar(&name).await.map_err(failed)?;
            out.json(&serde_json::json!({"deleted": name}))
        }
    }
}
