//! The TOML config file: every key it may hold (all optional), reading it, and where it puts the
//! embedded store for `hourglass backup`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::Context;
use hourglass_server::StoreBackend;
use hourglass_server::auth::ApiKeyConfig;
use ipnet::IpNet;
use serde::Deserialize;

use super::quotas::QuotasFile;
use super::{LogFormat, store_backend};

/// The config file. Every key is optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileConfig {
    pub(super) listen: Option<SocketAddr>,
    pub(super) metrics_listen: Option<SocketAddr>,
    /// HTTP connections open at once, per listener.
    pub(super) max_connections: Option<usize>,
    /// How long a client has to send a complete request head, e.g. "10s".
    pub(super) header_read_timeout: Option<String>,
    /// How long a kept-alive connection may wait for its next request, e.g. "75s".
    pub(super) idle_timeout: Option<String>,
    /// Largest body of a batch create, in bytes.
    pub(super) max_batch_bytes: Option<usize>,
    /// Encoded size past which a listing's page or a lease's answer stops, in bytes.
    pub(super) max_answer_bytes: Option<usize>,
    /// Bytes of request bodies the node holds at once, in bytes.
    pub(super) body_budget_bytes: Option<usize>,
    /// Bytes of request bodies the node holds at once for one API key, in bytes.
    pub(super) body_budget_bytes_per_key: Option<usize>,
    /// How long a request body may take to arrive, whole, e.g. "60s".
    pub(super) body_read_timeout: Option<String>,
    pub(super) data_dir: Option<PathBuf>,
    /// `embedded` or a PostgreSQL URL.
    pub(super) store: Option<String>,
    /// Lease TTL on claims, e.g. "10s".
    pub(super) lease_ttl: Option<String>,
    pub(super) allow_targets: Option<Vec<IpNet>>,
    pub(super) log_format: Option<LogFormat>,
    /// API keys by hash; with none the node runs in development mode (loopback only).
    #[serde(default)]
    pub(super) api_keys: Vec<ApiKeyConfig>,
    /// Per-namespace quotas: defaults for every namespace, and `[quotas.namespaces.NAME]`.
    #[serde(default)]
    pub(super) quotas: QuotasFile,
    /// Bus and cloud connections jobs may publish through, by name: `[connections.NAME]`.
    #[serde(default)]
    pub(super) connections: std::collections::BTreeMap<String, hourglass_targets::ConnectionConfig>,
    /// How long a webhook may take to answer, e.g. "10s".
    pub(super) delivery_timeout: Option<String>,
    /// Largest job payload in bytes.
    pub(super) max_payload_bytes: Option<usize>,
    /// Longest webhook URL in bytes.
    pub(super) max_url_bytes: Option<usize>,
    /// Most extra headers on a webhook target.
    pub(super) max_webhook_headers: Option<usize>,
    /// Most bytes of a webhook target's extra header names and values together.
    pub(super) max_webhook_header_bytes: Option<usize>,
    /// How far ahead the planner claims occurrences, e.g. "2s".
    pub(super) lookahead: Option<String>,
    /// Deliveries running at once.
    pub(super) delivery_concurrency: Option<usize>,
    /// Deliveries running at once to one destination (scheme, host and port).
    pub(super) destination_concurrency: Option<usize>,
    /// Publishes running at once from one namespace to one bus or cloud destination.
    pub(super) connection_concurrency: Option<usize>,
    /// Deliveries running at once from one namespace (default: three quarters of
    /// `delivery_concurrency`).
    pub(super) namespace_concurrency: Option<usize>,
    /// Consecutive failed deliveries to a destination that open its breaker; 0 turns them off.
    pub(super) breaker_failures: Option<u32>,
    /// How long an open breaker holds deliveries back before a probe, e.g. "30s".
    pub(super) breaker_open_for: Option<String>,
    /// Occurrences claimed and not yet completed, at most.
    pub(super) max_in_flight: Option<usize>,
    /// A recurring occurrence picked up later than this is a misfire, e.g. "60s".
    pub(super) misfire_threshold: Option<String>,
    /// At shutdown, how long in-flight deliveries may take, e.g. "10s".
    pub(super) shutdown_grace: Option<String>,
    /// How long finished jobs and runs are kept, e.g. "30d", or "off".
    pub(super) retention: Option<String>,
    /// How long dead letters are kept, e.g. "14d", or "off" (the default).
    pub(super) dead_letter_retention: Option<String>,
    /// A file holding the secrets key that seals signing secrets at rest (64 hex digits);
    /// `HOURGLASS_SECRETS_KEY` gives the key itself instead.
    pub(super) secrets_key_file: Option<PathBuf>,
    /// Or the secrets key as a data key wrapped by AWS KMS: its CiphertextBlob in base64
    /// (`HOURGLASS_SECRETS_KEY_KMS` in the environment), unwrapped by KMS at start.
    pub(super) secrets_key_kms: Option<String>,
    /// While changing secrets keys, a file holding the one in use before
    /// (`HOURGLASS_SECRETS_PREVIOUS_KEY` gives the key itself).
    pub(super) secrets_previous_key_file: Option<PathBuf>,
    /// Or the one in use before wrapped by AWS KMS (`HOURGLASS_SECRETS_PREVIOUS_KEY_KMS`).
    pub(super) secrets_previous_key_kms: Option<String>,
}

/// Where a config file puts the embedded store, for `hourglass backup`.
pub struct StoreLocation {
    pub data_dir: Option<PathBuf>,
    /// `store` names a PostgreSQL database (or `HOURGLASS_STORE` does).
    pub is_postgres: bool,
}

impl StoreLocation {
    pub fn read(config: Option<&Path>) -> anyhow::Result<Self> {
        let file = match config {
            Some(path) => read_file(path)?,
            None => FileConfig::default(),
        };
        let store = std::env::var("HOURGLASS_STORE").ok().or(file.store);
        let is_postgres = match store {
            Some(store) => matches!(store_backend(&store)?, StoreBackend::Postgres(_)),
            None => false,
        };
        Ok(Self {
            data_dir: file.data_dir,
            is_postgres,
        })
    }
}

pub(super) fn read_file(path: &Path) -> anyhow::Result<FileConfig> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read config file {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("invalid config file {}", path.display()))
}
