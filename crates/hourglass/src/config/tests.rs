//! The config's tests: the shipped example file against the parser's keys and defaults, flags
//! over the file over defaults, and the values refused.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use hourglass_server::StoreBackend;
use hourglass_server::auth::ApiKeyConfig;
use hourglass_store::PostgresOptions;
use ipnet::IpNet;

use super::quotas::{NamespaceQuotaFile, QuotasFile};
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

/// `resolve` on a runtime of its own. No test here gives a key AWS KMS wraps, so it asks nothing
/// of KMS (`keys.rs` tests those settings without KMS; `tests/it/sealed_kms.rs` with it).
fn resolve(args: ServeArgs) -> anyhow::Result<Settings> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(super::resolve(args))
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

    let dir = tempfile::tempdir().unwrap();
    // The examples' secrets key files, made here with keys of their own.
    let mut enabled: String = text
        .lines()
        .map(|l| format!("{}\n", switch_on(l)))
        .collect();
    for example in [
        "/etc/hourglass/secrets.key",
        "/etc/hourglass/secrets-previous.key",
    ] {
        assert!(enabled.contains(example), "{example}");
        let file = dir.path().join(example.rsplit('/').next().unwrap());
        std::fs::write(&file, hourglass_engine::sealing::SecretsKey::generate()).unwrap();
        enabled = enabled.replace(example, file.to_str().unwrap());
    }
    // The example's wrapped key stands for a real one, which is base64.
    assert!(enabled.contains("\"AQIDAHh...==\""));
    enabled = enabled.replace("\"AQIDAHh...==\"", "\"AQIDAHhzZWNyZXQ=\"");
    // The keys wrapped by AWS KMS are the other way to give the same two keys: read alone (KMS
    // is not asked), and left out of the rest, which gives them as files.
    let (kms, files): (Vec<&str>, Vec<&str>) = enabled.lines().partition(|l| {
        l.starts_with("secrets_key_kms =") || l.starts_with("secrets_previous_key_kms =")
    });
    assert_eq!(kms.len(), 2, "{kms:?}");
    let path = dir.path().join("kms.toml");
    std::fs::write(&path, kms.join("\n")).unwrap();
    let (_, wrapped) = read(args(Some(path))).expect("the wrapped keys read");
    assert_eq!(wrapped.wrapped(), (true, true));
    let path = dir.path().join("enabled.toml");
    std::fs::write(&path, files.join("\n")).unwrap();
    let on = resolve(args(Some(path))).expect("every example switched on resolves");
    assert_eq!(on.node.api_keys.len(), 2, "both example keys are read");
    let sealing = on.node.sealing.as_ref().expect("a secrets key");
    assert!(sealing.previous_id().is_some(), "and the previous one");
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
    // `admin`, the old name of `all_namespaces`, is still read but no longer shown.
    let mut api_key_fields = names(serde_fields::<ApiKeyConfig>());
    assert!(api_key_fields.remove("admin"), "the old name is still read");
    assert_eq!(api_keys, api_key_fields, "[[api_keys]]");
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

/// Each `[[api_keys]]` entry carries a role (`admin` when absent, as before roles existed) and a
/// scope: a namespace, or every namespace (`all_namespaces = true`, still read as `admin = true`).
/// A role no version knows is refused, naming the field and the roles there are.
#[test]
fn api_key_roles_and_scopes_are_read_and_an_unknown_role_is_refused() {
    use hourglass_server::auth::Role;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keys.toml");
    let hash = "0".repeat(64);
    std::fs::write(
        &path,
        format!(
            r#"
[[api_keys]]
namespace = "acme"
sha256 = "{hash}"
role = "reader"
[[api_keys]]
namespace = "acme"
sha256 = "{hash}"
role = "worker"
[[api_keys]]
namespace = "acme"
sha256 = "{hash}"
role = "writer"
[[api_keys]]
namespace = "acme"
sha256 = "{hash}"
[[api_keys]]
admin = true
sha256 = "{hash}"
[[api_keys]]
all_namespaces = true
sha256 = "{hash}"
role = "reader"
"#
        ),
    )
    .unwrap();
    let keys = resolve(args(Some(path))).unwrap().node.api_keys;
    let read: Vec<(Option<&str>, bool, Role)> = keys
        .iter()
        .map(|k| (k.namespace.as_deref(), k.all_namespaces, k.role))
        .collect();
    assert_eq!(
        read,
        vec![
            (Some("acme"), false, Role::Reader),
            (Some("acme"), false, Role::Worker),
            (Some("acme"), false, Role::Writer),
            (Some("acme"), false, Role::Admin),
            (None, true, Role::Admin),
            (None, true, Role::Reader),
        ]
    );

    for (text, needles) in [
        (
            "[[api_keys]]\nnamespace = \"acme\"\nsha256 = \"00\"\nrole = \"owner\"\n",
            &["role must be one of reader, worker, writer or admin, not \"owner\""][..],
        ),
        (
            "[[api_keys]]\nnamespace = \"acme\"\nsha256 = \"00\"\nrole = \"Admin\"\n",
            &["role", "Admin"][..],
        ),
        (
            "[[api_keys]]\nsha256 = \"00\"\nadmin = true\nall_namespaces = true\n",
            &["all_namespaces"][..],
        ),
    ] {
        let path = dir.path().join("bad-key.toml");
        std::fs::write(&path, text).unwrap();
        let err = format!("{:#}", resolve(args(Some(path))).err().expect("rejected"));
        for needle in needles {
            assert!(err.contains(needle), "{text}: {needle} not in {err}");
        }
    }
}
