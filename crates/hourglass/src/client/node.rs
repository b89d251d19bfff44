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
