//! `hourglass backup PATH`: a consistent copy of a node's embedded store, taken on the node's
//! machine while it runs (see `hourglass_store::sqlite::backup` for why a separate read-only
//! connection is safe and what makes the copy consistent).

use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::Args;

use crate::config;

#[derive(Args, Debug)]
pub struct BackupArgs {
    /// The file to write (must not exist). Restore it as DATA_DIR/hourglass.db with the node
    /// stopped.
    path: PathBuf,
    /// The node's data directory [default: data_dir of --config, else ./hourglass-data].
    #[arg(long, env = "HOURGLASS_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// The node's TOML config file, to find its data_dir.
    #[arg(long, env = "HOURGLASS_CONFIG")]
    config: Option<PathBuf>,
}

pub fn run(args: BackupArgs) -> anyhow::Result<()> {
    let file = config::StoreLocation::read(args.config.as_deref())?;
    if file.is_postgres {
        bail!(
            "this node's store is PostgreSQL: back it up with the database's own tools (pg_dump)"
        );
    }
    let data_dir = args
        .data_dir
        .or(file.data_dir)
        .unwrap_or_else(|| hourglass_server::NodeConfig::default().data_dir);
    let summary = hourglass_store::sqlite::backup(&data_dir, &args.path).with_context(|| {
        format!(
            "cannot back up {} to {}",
            data_dir.display(),
            args.path.display()
        )
    })?;
    println!(
        "backed up {} jobs ({} bytes, integrity ok) to {}",
        summary.jobs,
        summary.bytes,
        args.path.display()
    );
    Ok(())
}
