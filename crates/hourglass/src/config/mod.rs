//! `hourglass serve` settings: command-line flags, each also settable as `HOURGLASS_<NAME>`, over
//! an optional TOML config file, over defaults. Parsed once into validated types.
//!
//! This file holds the flags and their merge over the file into a `NodeConfig`, with the parsers
//! of durations, retentions and the store URL; `file.rs` the config file's keys; `quotas.rs` its
//! `[quotas]` tables; `keys.rs` the secrets keys' settings (and AWS KMS for those it wraps).

mod file;
mod keys;
mod quotas;
#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::bail;
use clap::{Args, ValueEnum};
use hourglass_core::duration::parse_duration;
use hourglass_server::{NodeConfig, StoreBackend};
use hourglass_store::{DynamoOptions, PostgresOptions};
use ipnet::IpNet;
use serde::Deserialize;

use self::file::{FileConfig, read_file};
use self::keys::SecretsKeys;
use self::quotas::quotas;

pub use self::file::StoreLocation;
pub use self::keys::KmsUnavailable;

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Address for the HTTP API [default: 127.0.0.1:7070].
    #[arg(long, env = "HOURGLASS_LISTEN")]
    listen: Option<SocketAddr>,
    /// A second address serving only /metrics, without an API key, for scrapers; keep it on an
    /// internal interface; loopback only without api keys [default: none: /metrics on --listen,
    /// which needs an admin key when keys are configured].
    #[arg(long, env = "HOURGLASS_METRICS_LISTEN")]
    metrics_listen: Option<SocketAddr>,
    /// Directory of the embedded store [default: ./hourglass-data].
    #[arg(long, env = "HOURGLASS_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Where jobs live: `embedded` (the SQLite store in --data-dir), a PostgreSQL URL
    /// (`postgres://user:password@host:5432/db`, TLS with `?sslmode=verify-full` and optionally
    /// `sslrootcert=/path/ca.pem`) shared by every node of a cluster, its schema created and
    /// migrated at start, or a DynamoDB table (`dynamodb://TABLE`, optionally `?shards=8&poll=1s`;
    /// region and credentials from the standard AWS chain, AWS_ENDPOINT_URL honoured), created
    /// if missing [default: embedded].
    #[arg(long, env = "HOURGLASS_STORE", hide_env_values = true)]
    store: Option<String>,
    /// How long a claimed occurrence stays exclusive without renewal (renewed every third of
    /// it); a dead node's claims are taken over after this [default: 10s on PostgreSQL; on the
    /// embedded store lookahead + delivery timeout + 30s].
    #[arg(long, env = "HOURGLASS_LEASE_TTL")]
    lease_ttl: Option<String>,
    /// Comma-separated CIDR ranges webhooks may reach although they are not globally reachable
    /// (loopback, private, link-local, ...), e.g. 127.0.0.0/8,10.0.0.0/8.
    #[arg(long, env = "HOURGLASS_ALLOW_TARGETS", value_delimiter = ',')]
    allow_targets: Option<Vec<IpNet>>,
    /// TOML config file; flags and environment variables override it.
    #[arg(long, env = "HOURGLASS_CONFIG")]
    config: Option<PathBuf>,
    /// Log format [default: text].
    #[arg(long, env = "HOURGLASS_LOG_FORMAT")]
    log_format: Option<LogFormat>,
    /// How long finished jobs and run records are kept, e.g. 30d, or `off` to keep them forever
    /// [default: 7d].
    #[arg(long, env = "HOURGLASS_RETENTION")]
    retention: Option<String>,
    /// How long dead letters are kept, e.g. 14d, or `off` to keep them until they are replayed
    /// or deleted [default: off].
    #[arg(long, env = "HOURGLASS_DEAD_LETTER_RETENTION")]
    dead_letter_retention: Option<String>,
}

impl ServeArgs {
    /// The log format the flag or `HOURGLASS_LOG_FORMAT` asks for, before the config file is read.
    pub fn log_format(&self) -> Option<LogFormat> {
        self.log_format
    }
}

#[derive(Debug, Clone, Copy, Deserialize, ValueEnum, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

pub struct Settings {
    pub node: NodeConfig,
    pub log_format: LogFormat,
}

/// `embedded`, a `postgres://` / `postgresql://` URL, or `dynamodb://TABLE`.
fn store_backend(value: &str) -> anyhow::Result<StoreBackend> {
    let value = value.trim();
    if value.is_empty() || value == "embedded" {
        Ok(StoreBackend::Embedded)
    } else if value.starts_with("postgres://") || value.starts_with("postgresql://") {
        Ok(StoreBackend::Postgres(PostgresOptions::new(value)))
    } else if value.starts_with("dynamodb://") {
        DynamoOptions::from_url(value)
            .map(StoreBackend::Dynamo)
            .map_err(|e| anyhow::anyhow!("store: {e}"))
    } else {
        bail!("store must be `embedded`, a postgres:// URL or dynamodb://TABLE")
    }
}

fn duration(value: Option<&str>, name: &str, default: Duration) -> anyhow::Result<Duration> {
    match value {
        None => Ok(default),
        Some(text) => {
            parse_duration(text, name).map_err(|e| anyhow::anyhow!("config {name}: {}", e.message))
        }
    }
}

/// The node's settings from the flags, the environment and the config file. A secrets key
/// wrapped by AWS KMS is unwrapped here, with one KMS request; an error then carries
/// [`KmsUnavailable`] when KMS could not be asked, rather than refused.
pub async fn resolve(args: ServeArgs) -> anyhow::Result<Settings> {
    let (mut settings, keys) = read(args)?;
    settings.node.sealing = keys.open().await?;
    Ok(settings)
}

/// The settings, and the secrets keys as given (those KMS wraps not yet unwrapped).
fn read(args: ServeArgs) -> anyhow::Result<(Settings, SecretsKeys)> {
    let file: FileConfig = match &args.config {
        Some(path) => read_file(path)?,
        None => FileConfig::default(),
    };
    let keys = SecretsKeys::read(&|name| std::env::var(name).ok(), &file)?;
    let mut node = NodeConfig::default();
    if let Some(listen) = args.listen.or(file.listen) {
        node.listen = listen;
    }
    node.metrics_listen = args.metrics_listen.or(file.metrics_listen);
    if let Some(n) = file.max_connections {
        if !(1..=1_000_000).contains(&n) {
            bail!("config max_connections must be between 1 and 1000000");
        }
        node.http.max_connections = n;
    }
    node.http.header_read_timeout = duration(
        file.header_read_timeout.as_deref(),
        "header_read_timeout",
        node.http.header_read_timeout,
    )?;
    node.http.idle_timeout = duration(
        file.idle_timeout.as_deref(),
        "idle_timeout",
        node.http.idle_timeout,
    )?;
    node.limits.body_read_timeout = duration(
        file.body_read_timeout.as_deref(),
        "body_read_timeout",
        node.limits.body_read_timeout,
    )?;
    for (name, value) in [
        ("header_read_timeout", node.http.header_read_timeout),
        ("idle_timeout", node.http.idle_timeout),
        ("body_read_timeout", node.limits.body_read_timeout),
    ] {
        if value > Duration::from_secs(24 * 3600) {
            bail!("config {name} must be at most 24h");
        }
    }
    if let Some(max) = file.max_batch_bytes {
        if max < 64 * 1024 {
            bail!("config max_batch_bytes must be at least 65536");
        }
        node.limits.max_batch_bytes = max;
    }
    if let Some(max) = file.max_answer_bytes {
        if max < 64 * 1024 {
            bail!("config max_answer_bytes must be at least 65536");
        }
        node.limits.max_answer_bytes = max;
    }
    if let Some(n) = file.body_budget_bytes {
        node.limits.body_budget.node_bytes = n;
    }
    if let Some(n) = file.body_budget_bytes_per_key {
        node.limits.body_budget.key_bytes = n;
    }
    if let Some(dir) = args.data_dir.or(file.data_dir) {
        node.data_dir = dir;
    }
    if let Some(store) = args.store.or(file.store) {
        node.store = store_backend(&store)?;
    }
    if let Some(ttl) = args.lease_ttl.or(file.lease_ttl) {
        let ttl = duration(Some(&ttl), "lease_ttl", Duration::ZERO)?;
        if ttl < Duration::from_secs(1) {
            bail!("config lease_ttl must be at least 1s");
        }
        node.lease_ttl = Some(ttl);
    }
    node.allow_targets = args
        .allow_targets
        .or(file.allow_targets)
        .unwrap_or_default();
    node.api_keys = file.api_keys;
    node.quotas = quotas(file.quotas)?;
    node.connections = hourglass_targets::Connections::new(file.connections)
        .map_err(|e| anyhow::anyhow!("config {e}"))?;
    node.delivery_timeout = duration(
        file.delivery_timeout.as_deref(),
        "delivery_timeout",
        node.delivery_timeout,
    )?;
    if let Some(max) = file.max_payload_bytes {
        node.limits.max_payload_bytes = max;
    }
    if let Some(max) = file.max_url_bytes {
        node.limits.max_url_bytes = max;
    }
    if let Some(max) = file.max_webhook_headers {
        node.limits.max_webhook_headers = max;
    }
    if let Some(max) = file.max_webhook_header_bytes {
        node.limits.max_webhook_header_bytes = max;
    }
    // Every body the API takes must fit a key's share, and a share the node's budget.
    let largest_body = node
        .limits
        .max_batch_bytes
        .max(node.limits.job_body_bytes());
    let budget = node.limits.body_budget;
    if budget.key_bytes < largest_body {
        bail!(
            "config body_budget_bytes_per_key must be at least the largest request body \
             ({largest_body} bytes: max_batch_bytes, or max_payload_bytes + 65536)"
        );
    }
    if budget.node_bytes < budget.key_bytes {
        bail!("config body_budget_bytes must be at least body_budget_bytes_per_key");
    }
    let engine = &mut node.engine;
    engine.lookahead = duration(file.lookahead.as_deref(), "lookahead", engine.lookahead)?;
    engine.misfire_threshold = duration(
        file.misfire_threshold.as_deref(),
        "misfire_threshold",
        engine.misfire_threshold,
    )?;
    engine.shutdown_grace = duration(
        file.shutdown_grace.as_deref(),
        "shutdown_grace",
        engine.shutdown_grace,
    )?;
    if let Some(n) = file.breaker_failures {
        engine.breaker_failures = n;
    }
    engine.breaker_open_for = duration(
        file.breaker_open_for.as_deref(),
        "breaker_open_for",
        engine.breaker_open_for,
    )?;
    if engine.breaker_open_for < std::time::Duration::from_secs(1)
        || engine.breaker_open_for > std::time::Duration::from_secs(24 * 3600)
    {
        bail!("config breaker_open_for must be between 1s and 24h");
    }
    if let Some(text) = args.retention.as_deref().or(file.retention.as_deref()) {
        engine.retention = retention(text, "retention")?;
    }
    if let Some(text) = args
        .dead_letter_retention
        .as_deref()
        .or(file.dead_letter_retention.as_deref())
    {
        engine.dead_letter_retention = retention(text, "dead_letter_retention")?;
    }
    if let Some(n) = file.delivery_concurrency {
        if n == 0 {
            bail!("config delivery_concurrency must be at least 1");
        }
        engine.delivery_concurrency = n;
    }
    if let Some(n) = file.destination_concurrency {
        if n == 0 {
            bail!("config destination_concurrency must be at least 1");
        }
        engine.destination_concurrency = n;
    }
    if let Some(n) = file.namespace_concurrency {
        if n == 0 {
            bail!("config namespace_concurrency must be at least 1");
        }
        engine.namespace_concurrency = Some(n);
    }
    if let Some(n) = file.connection_concurrency {
        if n == 0 {
            bail!("config connection_concurrency must be at least 1");
        }
        engine.connection_concurrency = n;
    }
    if let Some(n) = file.max_in_flight {
        if n == 0 {
            bail!("config max_in_flight must be at least 1");
        }
        engine.max_in_flight = n;
    }
    // The DynamoDB store keeps finished work for the retention through DynamoDB's time to live,
    // set on the items as they are written; the sweep then has nothing to delete there.
    if let StoreBackend::Dynamo(options) = &mut node.store {
        options.retention = engine.retention;
    }
    let settings = Settings {
        node,
        log_format: args.log_format.or(file.log_format).unwrap_or_default(),
    };
    Ok((settings, keys))
}

/// A retention setting: `off`, whole days ("30d", the usual unit), or any duration ("36h").
fn retention(text: &str, name: &str) -> anyhow::Result<Option<Duration>> {
    Ok(match text {
        "off" => None,
        text => match text.strip_suffix('d').and_then(|n| n.parse::<u64>().ok()) {
            Some(days) if days > 0 => Some(Duration::from_secs(days * 24 * 3600)),
            _ => Some(duration(Some(text), name, Duration::ZERO)?),
        },
    })
}
