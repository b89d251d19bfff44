//! What the node keeps for the namespace, and the cluster: `signing-secret` (rotate or show),
//! `breakers` (open circuit breakers), `connections` (bus and cloud connections with their
//! publish counts) and `nodes` (the live nodes).

use clap::Args;

use super::output::Output;
use super::{Connection, call};
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
    let conn = &args.conn.resolve()?;
    let path = "/v1/signing-secret".to_string();
    let method = if args.show {
        reqwest::Method::GET
    } else {
        reqwest::Method::POST
    };
    call(conn, out, View::Secret, method, path, None).await
}

/// The namespace's destinations whose circuit breaker is open on this node.
pub async fn breakers(conn: Connection, out: Output) -> anyhow::Result<()> {
    let conn = &conn.resolve()?;
    let path = "/v1/breakers".to_string();
    call(conn, out, View::Breakers, reqwest::Method::GET, path, None).await
}

/// The bus and cloud connections the namespace may use, with this node's publish counts.
pub async fn connections(conn: Connection, out: Output) -> anyhow::Result<()> {
    let conn = &conn.resolve()?;
    let path = "/v1/connections".to_string();
    call(
        conn,
        out,
        View::Connections,
        reqwest::Method::GET,
        path,
        None,
    )
    .await
}

/// The cluster's live nodes (an admin key when the node has keys).
pub async fn nodes(conn: Connection, out: Output) -> anyhow::Result<()> {
    let conn = &conn.resolve()?;
    let path = "/v1/nodes".to_string();
    call(conn, out, View::Nodes, reqwest::Method::GET, path, None).await
}
