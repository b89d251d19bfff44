//! `hourglass audit`: the namespace's audit log, newest first — who (which key id) changed what,
//! when. Needs a writer's or an admin's key.

use clap::Args;

use super::output::Output;
use super::{Connection, failed};
use crate::views::View;

#[derive(Args, Debug)]
pub struct AuditArgs {
    #[command(flatten)]
    conn: Connection,
    /// Only the entries about this job (its id).
    #[arg(long)]
    job: Option<String>,
    /// How many entries, at most (1 to 1000) [default: 100].
    #[arg(long)]
    limit: Option<usize>,
    /// Start after this cursor: the `next_cursor` a previous page printed.
    #[arg(long)]
    cursor: Option<String>,
}

pub const AUDIT_EXAMPLES: &str = "\
Examples:
  hourglass audit
  hourglass audit --job 01890a5d-ac96-774b-bcce-b302099a8057
  hourglass audit --limit 20 --cursor 1767225600000.42";

pub async fn audit(args: AuditArgs, out: Output) -> anyhow::Result<()> {
    let client = args.conn.resolve()?.api_client()?;
    let page = client
        .list_audit(args.limit, args.cursor.as_deref(), args.job.as_deref())
        .await
        .map_err(failed)?;
    out.answer(View::Audit, &page)
}
