//! `hourglass serve` settings: command-line flags, each also settable as `HOURGLASS_<NAME>`, over
//! an optional TOML config file, over defaults. Parsed once into validated types.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use hourglass_core::duration::parse_duration;
use hourglass_server::auth::ApiKeyConfig;
use hourglass_server::{NodeConfig, StoreBackend};
use hourglass_store::{DynamoOptions, PostgresOptions};
use ipnet::IpNet;
use serde::Deserialize;

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

/// `[quotas]`: what every namespace may do, unless `[quotas.namespaces.NAME]` says otherwise.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct QuotasFile {
    /// Jobs a namespace may create per second on one node.
    creates_per_second: Option<u32>,
    /// Deliveries a namespace may start per second on one node.
    deliveries_per_second: Option<u32>,
    /// Jobs the store may hold for a namespace, in every state.
    max_jobs: Option<u64>,
    #[serde(default)]
    namespaces: std::collections::HashMap<String, NamespaceQuotaFile>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct NamespaceQuotaFile {
    creates_per_second: Option<u32>,
    deliveries_per_second: Option<u32>,
    max_jobs: Option<u64>,
    /// This namespace's own `destination_concurrency`.
    destination_concurrency: Option<usize>,
    /// This namespace's own `namespace_concurrency`.
    namespace_concurrency: Option<usize>,
}

fn quotas(file: QuotasFile) -> anyhow::Result<hourglass_server::quotas::Quotas> {
    use hourglass_server::quotas::{NamespaceQuota, Quotas};
    let check = |creates: Option<u32>, deliveries: Option<u32>, max_jobs: Option<u64>, at: &str| {
        for (zero, key) in [
            (creates == Some(0), "creates_per_second"),
            (deliveries == Some(0), "deliveries_per_second"),
            (max_jobs == Some(0), "max_jobs"),
        ] {
            if zero {
                bail!("config {at}.{key} must be at least 1 (leave it out for no quota)");
            }
        }
        Ok(NamespaceQuota {
            creates_per_second: creates,
            deliveries_per_second: deliveries,
            max_jobs,
            destination_concurrency: None,
            namespace_concurrency: None,
        })
    };
    let mut namespaces = std::collections::HashMap::new();
    for (name, q) in file.namespaces {
        let at = format!("quotas.namespaces.{name}");
        let mut quota = check(
            q.creates_per_second,
            q.deliveries_per_second,
            q.max_jobs,
            &at,
        )?;
        if q.destination_concurrency == Some(0) {
            bail!("config {at}.destination_concurrency must be at least 1");
        }
        if q.namespace_concurrency == Some(0) {
            bail!("config {at}.namespace_concurrency must be at least 1");
        }
        quota.destination_concurrency = q.destination_concurrency;
        quota.namespace_concurrency = q.namespace_concurrency;
        namespaces.insert(name, quota);
    }
    Ok(Quotas {
        default: check(
            file.creates_per_second,
            file.deliveries_per_second,
            file.max_jobs,
            "quotas",
        )?,
        namespaces,
    })
}

/// The config file. Every key is optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    listen: Option<SocketAddr>,
    metrics_listen: Option<SocketAddr>,
    /// HTTP connections open at once, per listener.
    max_connections: Option<usize>,
    /// How long a client has to send a complete request head, e.g. "10s".
    header_read_timeout: Option<String>,
    /// How long a kept-alive connection may wait for its next request, e.g. "75s".
    idle_timeout: Option<String>,
    /// Largest body of a batch create, in bytes.
    max_batch_bytes: Option<usize>,
    /// Encoded size past which a listing's page or a lease's answer stops, in bytes.
    max_answer_bytes: Option<usize>,
    /// Bytes of request bodies the node holds at once, in bytes.
    body_budget_bytes: Option<usize>,
    /// Bytes of request bodies the node holds at once for one API key, in bytes.
    body_budget_bytes_per_key: Option<usize>,
    /// How long a request body may take to arrive, whole, e.g. "60s".
    body_read_timeout: Option<String>,
    data_dir: Option<PathBuf>,
    /// `embedded` or a PostgreSQL URL.
    store: Option<String>,
    /// Lease TTL on claims, e.g. "10s".
    lease_ttl: Option<String>,
    allow_targets: Option<Vec<IpNet>>,
    log_format: Option<LogFormat>,
    /// API keys by hash; with none the node runs in development mode (loopback only).
    #[serde(default)]
    api_keys: Vec<ApiKeyConfig>,
    /// Per-namespace quotas: defaults for every namespace, and `[quotas.namespaces.NAME]`.
    #[serde(default)]
    quotas: QuotasFile,
    /// Bus and cloud connections jobs may publish through, by name: `[connections.NAME]`.
    #[serde(default)]
    connections: std::collections::BTreeMap<String, hourglass_targets::ConnectionConfig>,
    /// How long a webhook may take to answer, e.g. "10s".
    delivery_timeout: Option<String>,
    /// Largest job payload in bytes.
    max_payload_bytes: Option<usize>,
    /// Longest webhook URL in bytes.
    max_url_bytes: Option<usize>,
    /// Most extra headers on a webhook target.
    max_webhook_headers: Option<usize>,
    /// Most bytes of a webhook target's extra header names and values together.
    max_webhook_header_bytes: Option<usize>,
    /// How far ahead the planner claims occurrences, e.g. "2s".
    lookahead: Option<String>,
    /// Deliveries running at once.
    delivery_concurrency: Option<usize>,
    /// Deliveries running at once to one destination (scheme, host and port).
    destination_concurrency: Option<usize>,
    /// Publishes running at once from one namespace to one bus or cloud destination.
    connection_concurrency: Option<usize>,
    /// Deliveries running at once from one namespace (default: three quarters of
    /// `delivery_concurrency`).
    namespace_concurrency: Option<usize>,
    /// Consecutive failed deliveries to a destination that open its breaker; 0 turns them off.
    breaker_failures: Option<u32>,
    /// How long an open breaker holds deliveries back before a probe, e.g. "30s".
    breaker_open_for: Option<String>,
    /// Occurrences claimed and not yet completed, at most.
    max_in_flight: Option<usize>,
    /// A recurring occurrence picked up later than this is a misfire, e.g. "60s".
    misfire_threshold: Option<String>,
    /// At shutdown, how long in-flight deliveries may take, e.g. "10s".
    shutdown_grace: Option<String>,
    /// How long finished jobs and runs are kept, e.g. "30d", or "off".
    retention: Option<String>,
    /// How long dead letters are kept, e.g. "14d", or "off" (the default).
    dead_letter_retention: Option<String>,
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

fn read_file(path: &Path) -> anyhow::Result<FileConfig> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read config file {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("invalid config file {}", path.display()))
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

pub fn resolve(args: ServeArgs) -> anyhow::Result<Settings> {
    let file: FileConfig = match &args.config {
        Some(path) => read_file(path)?,
        None => FileConfig::default(),
    };
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
    Ok(Settings {
        node,
        log_format: args.log_format.or(file.log_format).unwrap_or_default(),
    })
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    fn args(config: Option<PathBuf>) -> ServeArgs {
        ServeArgs {
            listen: None,
            metrics_listen: None,
            data_dir: None,
            store: None,
            lease_ttl: None,
            allow_targets: None,
            config,
            log_format: None,
            retention: None,
            dead_letter_retention: None,
        }
    }

    /// The field names serde knows for `T`: a deserializer that only records the names
    /// `deserialize_struct` is given (every derived struct passes its own), then gives up.
    fn serde_fields<T: serde::de::DeserializeOwned>() -> &'static [&'static str] {
        struct FieldNames<'a>(&'a mut &'static [&'static str]);
        impl<'de> serde::Deserializer<'de> for FieldNames<'_> {
            type Error = serde::de::value::Error;
            fn deserialize_any<V: serde::de::Visitor<'de>>(
                self,
                _: V,
            ) -> Result<V::Value, Self::Error> {
                Err(serde::de::Error::custom("not a struct"))
            }
            fn deserialize_struct<V: serde::de::Visitor<'de>>(
                self,
                _name: &'static str,
                fields: &'static [&'static str],
                _: V,
            ) -> Result<V::Value, Self::Error> {
                *self.0 = fields;
                Err(serde::de::Error::custom("only the field names were wanted"))
            }
            serde::forward_to_deserialize_any! {
                bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
                byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
                identifier ignored_any
            }
        }
        let mut fields: &'static [&'static str] = &[];
        let _ = T::deserialize(FieldNames(&mut fields));
        assert!(
            !fields.is_empty(),
            "{} names no fields",
            std::any::type_name::<T>()
        );
        fields
    }

    /// A commented-out setting of the example (`# key = value`, `# [section]`) switched on;
    /// prose comments and everything else unchanged.
    fn switch_on(line: &str) -> &str {
        let Some(rest) = line.strip_prefix("# ") else {
            return line;
        };
        let is_key = |key: &str| {
            !key.is_empty()
                && key
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        };
        if rest.starts_with('[') || rest.split_once(" = ").is_some_and(|(key, _)| is_key(key)) {
            rest
        } else {
            line
        }
    }

    fn keys(table: &toml::Table) -> BTreeSet<&str> {
        table.keys().map(String::as_str).collect()
    }

    fn names(fields: &[&'static str]) -> BTreeSet<&'static str> {
        fields.iter().copied().collect()
    }

    /// `ops/hourglass.toml` goes through the real parser: as shipped it resolves to exactly the
    /// defaults, and with every commented-out example switched on it is still valid and names
    /// every key serde knows, at every level, and no other.
    #[test]
    fn the_example_config_has_every_key_at_its_default() {
        let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../ops/hourglass.toml");
        let text = std::fs::read_to_string(&example).expect("read ops/hourglass.toml");
        let shipped = resolve(args(Some(example))).expect("ops/hourglass.toml resolves");
        let defaults = resolve(args(None)).unwrap();
        assert_eq!(
            format!("{:?} {:?}", shipped.node, shipped.log_format),
            format!("{:?} {:?}", defaults.node, defaults.log_format),
            "a setting in ops/hourglass.toml is not at its default"
        );

        let enabled: String = text
            .lines()
            .map(|l| format!("{}\n", switch_on(l)))
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("enabled.toml");
        std::fs::write(&path, &enabled).unwrap();
        let on = resolve(args(Some(path))).expect("every example switched on resolves");
        assert_eq!(on.node.api_keys.len(), 2, "both example keys are read");
        assert!(on.node.quotas.namespaces.contains_key("acme"));

        let table: toml::Table = toml::from_str(&enabled).unwrap();
        assert_eq!(
            keys(&table),
            names(serde_fields::<FileConfig>()),
            "top level"
        );
        let quotas = table["quotas"].as_table().expect("[quotas]");
        assert_eq!(
            keys(quotas),
            names(serde_fields::<QuotasFile>()),
            "[quotas]"
        );
        let namespaces = quotas["namespaces"]
            .as_table()
            .expect("[quotas.namespaces]");
        for (name, quota) in namespaces {
            let quota = quota.as_table().expect("a namespace's quotas");
            assert_eq!(
                keys(quota),
                names(serde_fields::<NamespaceQuotaFile>()),
                "[quotas.namespaces.{name}]"
            );
        }
        let connections = table["connections"].as_table().expect("[connections.NAME]");
        let connection_keys: BTreeSet<&str> = connections
            .values()
            .flat_map(|c| c.as_table().expect("a connection").keys())
            .map(String::as_str)
            .collect();
        assert_eq!(
            connection_keys,
            names(serde_fields::<hourglass_targets::ConnectionConfig>()),
            "[connections.NAME]"
        );
        assert_eq!(on.node.connections.iter().count(), connections.len());
        let api_keys: BTreeSet<&str> = table["api_keys"]
            .as_array()
            .expect("[[api_keys]]")
            .iter()
            .flat_map(|key| key.as_table().expect("an api key").keys())
            .map(String::as_str)
            .collect();
        assert_eq!(
            api_keys,
            names(serde_fields::<ApiKeyConfig>()),
            "[[api_keys]]"
        );
    }

    #[test]
    fn flags_override_the_file_which_overrides_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hourglass.toml");
        std::fs::write(
            &path,
            r#"
listen = "127.0.0.1:9000"
data_dir = "/var/lib/hourglass"
allow_targets = ["10.0.0.0/8"]
delivery_timeout = "3s"
lookahead = "500ms"
metrics_listen = "127.0.0.1:9100"
max_connections = 200
header_read_timeout = "5s"
idle_timeout = "2m"
max_batch_bytes = 1048576
max_answer_bytes = 1048576
body_budget_bytes = 100000000
body_budget_bytes_per_key = 20000000
body_read_timeout = "30s"
retention = "30d"
dead_letter_retention = "14d"
max_url_bytes = 16384
max_webhook_headers = 64
max_webhook_header_bytes = 65536
[[api_keys]]
namespace = "acme"
sha256 = "0000000000000000000000000000000000000000000000000000000000000000"
[quotas]
creates_per_second = 100
deliveries_per_second = 50
max_jobs = 1000000
[quotas.namespaces.acme]
creates_per_second = 2000
destination_concurrency = 8
"#,
        )
        .unwrap();
        let from_file = resolve(args(Some(path.clone()))).unwrap().node;
        assert_eq!(from_file.listen, "127.0.0.1:9000".parse().unwrap());
        assert_eq!(from_file.data_dir, PathBuf::from("/var/lib/hourglass"));
        assert_eq!(
            from_file.allow_targets,
            vec!["10.0.0.0/8".parse::<IpNet>().unwrap()]
        );
        assert_eq!(from_file.delivery_timeout, Duration::from_secs(3));
        assert_eq!(from_file.engine.lookahead, Duration::from_millis(500));
        assert_eq!(
            from_file.metrics_listen,
            Some("127.0.0.1:9100".parse().unwrap())
        );
        assert_eq!(from_file.http.max_connections, 200);
        assert_eq!(from_file.http.header_read_timeout, Duration::from_secs(5));
        assert_eq!(from_file.http.idle_timeout, Duration::from_secs(120));
        assert_eq!(from_file.limits.max_batch_bytes, 1024 * 1024);
        assert_eq!(from_file.limits.max_answer_bytes, 1024 * 1024);
        assert_eq!(from_file.limits.body_budget.node_bytes, 100_000_000);
        assert_eq!(from_file.limits.body_budget.key_bytes, 20_000_000);
        assert_eq!(from_file.limits.body_read_timeout, Duration::from_secs(30));
        assert_eq!(from_file.api_keys.len(), 1);
        assert_eq!(from_file.quotas.default.creates_per_second, Some(100));
        assert_eq!(
            from_file.quotas.namespaces["acme"].creates_per_second,
            Some(2000)
        );
        assert_eq!(from_file.quotas.default.deliveries_per_second, Some(50));
        assert_eq!(from_file.quotas.default.max_jobs, Some(1_000_000));
        assert_eq!(from_file.quotas.of("acme").destination_concurrency, Some(8));
        // acme inherits the default delivery quota and stored-jobs quota, field by field.
        assert_eq!(from_file.quotas.of("acme").deliveries_per_second, Some(50));
        assert_eq!(from_file.quotas.of("acme").max_jobs, Some(1_000_000));
        assert_eq!(from_file.limits.max_url_bytes, 16384);
        assert_eq!(from_file.limits.max_webhook_headers, 64);
        assert_eq!(from_file.limits.max_webhook_header_bytes, 65536);
        assert_eq!(
            from_file.engine.retention,
            Some(Duration::from_secs(30 * 24 * 3600))
        );
        assert_eq!(
            from_file.engine.dead_letter_retention,
            Some(Duration::from_secs(14 * 24 * 3600))
        );

        let mut flagged = args(Some(path));
        flagged.listen = Some("127.0.0.1:7777".parse().unwrap());
        flagged.metrics_listen = Some("127.0.0.1:9200".parse().unwrap());
        flagged.allow_targets = Some(vec!["127.0.0.0/8".parse().unwrap()]);
        flagged.retention = Some("off".into());
        flagged.dead_letter_retention = Some("36h".into());
        let node = resolve(flagged).unwrap().node;
        assert_eq!(node.engine.retention, None);
        assert_eq!(
            node.engine.dead_letter_retention,
            Some(Duration::from_secs(36 * 3600))
        );
        assert_eq!(node.listen, "127.0.0.1:7777".parse().unwrap());
        assert_eq!(node.metrics_listen, Some("127.0.0.1:9200".parse().unwrap()));
        assert_eq!(
            node.allow_targets,
            vec!["127.0.0.0/8".parse::<IpNet>().unwrap()]
        );
        assert_eq!(node.data_dir, PathBuf::from("/var/lib/hourglass"));

        let defaults = resolve(args(None)).unwrap().node;
        assert_eq!(defaults.listen, "127.0.0.1:7070".parse().unwrap());
        assert_eq!(defaults.data_dir, PathBuf::from("hourglass-data"));
        assert_eq!(defaults.store, StoreBackend::Embedded);
        assert_eq!(defaults.lease_ttl, None);
        assert_eq!(defaults.metrics_listen, None);
        assert_eq!(defaults.http, hourglass_server::HttpConfig::default());
        assert_eq!(
            defaults.engine.retention,
            Some(Duration::from_secs(7 * 24 * 3600))
        );
        assert_eq!(defaults.engine.dead_letter_retention, None);
        assert_eq!(defaults.limits.max_url_bytes, 8192);
        assert_eq!(defaults.limits.max_webhook_headers, 32);
        assert_eq!(defaults.limits.max_webhook_header_bytes, 16384);
    }

    #[test]
    fn store_and_lease_ttl_come_from_flag_env_or_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hourglass.toml");
        std::fs::write(
            &path,
            "store = \"postgres://hg@db.internal:5432/jobs\"\nlease_ttl = \"15s\"\n",
        )
        .unwrap();
        let from_file = resolve(args(Some(path.clone()))).unwrap().node;
        assert_eq!(
            from_file.store,
            StoreBackend::Postgres(PostgresOptions::new("postgres://hg@db.internal:5432/jobs"))
        );
        assert_eq!(from_file.lease_ttl, Some(Duration::from_secs(15)));

        // A flag (or HOURGLASS_STORE / HOURGLASS_LEASE_TTL, which clap reads into the same
        // fields) overrides the file.
        let mut flagged = args(Some(path));
        flagged.store = Some("embedded".into());
        flagged.lease_ttl = Some("5s".into());
        let node = resolve(flagged).unwrap().node;
        assert_eq!(node.store, StoreBackend::Embedded);
        assert_eq!(node.lease_ttl, Some(Duration::from_secs(5)));

        for (store, ttl, needle) in [
            (Some("mysql://x"), None, "store must be"),
            (None, Some("500ms"), "lease_ttl must be at least 1s"),
            (None, Some("soon"), "lease_ttl"),
        ] {
            let mut bad = args(None);
            bad.store = store.map(Into::into);
            bad.lease_ttl = ttl.map(Into::into);
            let err = resolve(bad).err().expect("rejected");
            assert!(format!("{err:#}").contains(needle), "{err:#}");
        }
    }

    #[test]
    fn unknown_keys_and_bad_values_are_rejected() {
        let dir = tempfile::tempdir().unwrap();
        for (text, needle) in [
            ("lisen = \"127.0.0.1:1\"", "invalid config file"),
            ("delivery_timeout = \"soon\"", "delivery_timeout"),
            ("delivery_concurrency = 0", "delivery_concurrency"),
            ("destination_concurrency = 0", "destination_concurrency"),
            ("namespace_concurrency = 0", "namespace_concurrency"),
            (
                "[quotas.namespaces.acme]\ncreates_per_second = 0",
                "quotas.namespaces.acme.creates_per_second",
            ),
            ("breaker_open_for = \"0s\"", "breaker_open_for"),
            ("breaker_open_for = \"2d\"", "breaker_open_for"),
            ("max_connections = 0", "max_connections"),
            ("header_read_timeout = \"soon\"", "header_read_timeout"),
            ("idle_timeout = \"0s\"", "idle_timeout"),
            ("max_batch_bytes = 10", "max_batch_bytes"),
            ("max_answer_bytes = 1000", "max_answer_bytes"),
            (
                "body_budget_bytes_per_key = 65536",
                "body_budget_bytes_per_key",
            ),
            (
                "body_budget_bytes = 16777216",
                "body_budget_bytes must be at least",
            ),
            (
                "body_read_timeout = \"48h\"",
                "body_read_timeout must be at most 24h",
            ),
            ("retention = \"a week\"", "retention"),
            (
                "dead_letter_retention = \"a fortnight\"",
                "dead_letter_retention",
            ),
        ] {
            let path = dir.path().join("bad.toml");
            std::fs::write(&path, text).unwrap();
            let err = resolve(args(Some(path))).err().expect("rejected");
            assert!(format!("{err:#}").contains(needle), "{text}: {err:#}");
        }
    }
}
