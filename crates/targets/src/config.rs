//! Connections as the operator declares them (`[connections.NAME]` in the config file), and the
//! rule for which namespace may publish through which connection. Tenants never supply
//! endpoints or credentials: a job names a connection, and the node holds the rest.

use std::collections::BTreeMap;

use serde::Deserialize;

/// What a connection speaks. `aws` serves every AWS target kind (EventBridge, SQS, SNS and
/// Lambda) through one region and credential chain; the others serve their own kind only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConnectionKind {
    Aws,
    Eventbridge,
    Sqs,
    Sns,
    Lambda,
    Nats,
    Redis,
    Amqp,
}

impl ConnectionKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ConnectionKind::Aws => "aws",
            ConnectionKind::Eventbridge => "eventbridge",
            ConnectionKind::Sqs => "sqs",
            ConnectionKind::Sns => "sns",
            ConnectionKind::Lambda => "lambda",
            ConnectionKind::Nats => "nats",
            ConnectionKind::Redis => "redis",
            ConnectionKind::Amqp => "amqp",
        }
    }

    /// Whether a target of `target_kind` (as `Target::kind` names it) may use a connection of
    /// this kind.
    pub fn serves(self, target_kind: &str) -> bool {
        match self {
            ConnectionKind::Aws => matches!(target_kind, "eventbridge" | "sqs" | "sns" | "lambda"),
            ConnectionKind::Redis => target_kind == "redis_stream",
            other => other.as_str() == target_kind,
        }
    }

    pub fn is_aws(self) -> bool {
        matches!(
            self,
            ConnectionKind::Aws
                | ConnectionKind::Eventbridge
                | ConnectionKind::Sqs
                | ConnectionKind::Sns
                | ConnectionKind::Lambda
        )
    }
}

/// One `[connections.NAME]` table.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConnectionConfig {
    pub kind: ConnectionKind,
    /// The server's URL: `nats://host:4222` (`tls://` for TLS), `redis://host:6379/0`,
    /// `amqp://user:password@host:5672/%2f` (`amqps://` for TLS). Not for AWS kinds.
    #[serde(default)]
    pub url: Option<String>,
    /// AWS kinds: the region; left out, the standard chain decides (`AWS_REGION`, the profile).
    #[serde(default)]
    pub region: Option<String>,
    /// AWS kinds: an endpoint other than the service's own (a VPC endpoint, an emulator).
    /// `AWS_ENDPOINT_URL` in the node's environment does the same for every connection.
    #[serde(default)]
    pub endpoint_url: Option<String>,
    /// AWS kinds: static credentials, for hosts without an instance role or profile and for
    /// emulators. Left out (the recommended way), credentials come from the standard AWS chain.
    #[serde(default)]
    pub access_key_id: Option<String>,
    #[serde(default)]
    pub secret_access_key: Option<String>,
    /// The namespaces that may use this connection; left out, every namespace may.
    #[serde(default)]
    pub namespaces: Option<Vec<String>>,
}

impl ConnectionConfig {
    /// Checks the settings a connection of its kind needs, naming the setting that is wrong.
    pub fn check(&self, name: &str) -> Result<(), String> {
        let at = |key: &str| format!("connections.{name}.{key}");
        if name.is_empty() || name.len() > 64 || !name.bytes().all(is_name_byte) {
            return Err(format!(
                "connection name {name:?}: use 1 to 64 letters, digits, '-' or '_'"
            ));
        }
        if self.kind.is_aws() {
            if self.url.is_some() {
                return Err(format!(
                    "{}: AWS connections take region (and endpoint_url), not url",
                    at("url")
                ));
            }
            if self.access_key_id.is_some() != self.secret_access_key.is_some() {
                return Err(format!(
                    "{}: give access_key_id and secret_access_key together, or neither",
                    at("access_key_id")
                ));
            }
            if let Some(endpoint) = &self.endpoint_url {
                url::Url::parse(endpoint)
                    .map_err(|e| format!("{}: not a valid url: {e}", at("endpoint_url")))?;
            }
        } else {
            let schemes: &[&str] = match self.kind {
                ConnectionKind::Nats => &["nats", "tls"],
                ConnectionKind::Redis => &["redis"],
                ConnectionKind::Amqp => &["amqp", "amqps"],
                _ => &[],
            };
            let Some(url) = &self.url else {
                return Err(format!(
                    "{}: a {} connection needs its server's url",
                    at("url"),
                    self.kind.as_str()
                ));
            };
            let parsed =
                url::Url::parse(url).map_err(|e| format!("{}: not a valid url: {e}", at("url")))?;
            if !schemes.contains(&parsed.scheme()) {
                return Err(format!(
                    "{}: the scheme must be one of {}",
                    at("url"),
                    schemes.join(", ")
                ));
            }
            for key in ["region", "endpoint_url", "access_key_id"] {
                let set = match key {
                    "region" => self.region.is_some(),
                    "endpoint_url" => self.endpoint_url.is_some(),
                    _ => self.access_key_id.is_some() || self.secret_access_key.is_some(),
                };
                if set {
                    return Err(format!(
                        "{}: only AWS connections take this setting",
                        at(key)
                    ));
                }
            }
        }
        Ok(())
    }

    /// Whether `namespace` may publish through this connection.
    pub fn allows(&self, namespace: &str) -> bool {
        self.namespaces
            .as_ref()
            .is_none_or(|names| names.iter().any(|n| n == namespace))
    }
}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}

/// The node's connections by name: what the API consults when a job names one.
#[derive(Debug, Clone, Default)]
pub struct Connections {
    by_name: BTreeMap<String, ConnectionConfig>,
}

/// Why a job may not use the connection it names. Deliberately one answer for "no such
/// connection" and "not for your namespace": a tenant learns nothing of others' connections.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConnectionRefused {
    #[error("no connection named {0:?} is available to this namespace")]
    Unavailable(String),
    #[error("the connection {name:?} is of kind {kind}; {target} targets need {needs}")]
    WrongKind {
        name: String,
        kind: &'static str,
        target: String,
        needs: &'static str,
    },
}

impl Connections {
    /// Checks every connection and keeps them.
    pub fn new(by_name: BTreeMap<String, ConnectionConfig>) -> Result<Self, String> {
        for (name, config) in &by_name {
            config.check(name)?;
        }
        Ok(Self { by_name })
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    pub fn get(&self, name: &str) -> Option<&ConnectionConfig> {
        self.by_name.get(name)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &ConnectionConfig)> {
        self.by_name.iter().map(|(n, c)| (n.as_str(), c))
    }

    /// The connections `namespace` may use, by name.
    pub fn visible_to<'a>(
        &'a self,
        namespace: &'a str,
    ) -> impl Iterator<Item = (&'a str, &'a ConnectionConfig)> {
        self.iter().filter(move |(_, c)| c.allows(namespace))
    }

    /// Whether a job in `namespace` with a `target_kind` target may publish through `name`.
    pub fn check(
        &self,
        namespace: &str,
        name: &str,
        target_kind: &str,
    ) -> Result<&ConnectionConfig, ConnectionRefused> {
        let config = self
            .by_name
            .get(name)
            .filter(|c| c.allows(namespace))
            .ok_or_else(|| ConnectionRefused::Unavailable(name.to_string()))?;
        if !config.kind.serves(target_kind) {
            return Err(ConnectionRefused::WrongKind {
                name: name.to_string(),
                kind: config.kind.as_str(),
                target: target_kind.to_string(),
                needs: needs(target_kind),
            });
        }
        Ok(config)
    }
}

fn needs(target_kind: &str) -> &'static str {
    match target_kind {
        "eventbridge" => "an eventbridge or aws connection",
        "sqs" => "an sqs or aws connection",
        "sns" => "an sns or aws connection",
        "lambda" => "a lambda or aws connection",
        "nats" => "a nats connection",
        "redis_stream" => "a redis connection",
        "amqp" => "an amqp connection",
        _ => "no connection",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(toml_text: &str) -> ConnectionConfig {
        serde_json::from_value(toml_like(toml_text)).unwrap()
    }

    // The tests describe connections as JSON objects; the binary reads the same fields from TOML.
    fn toml_like(json: &str) -> serde_json::Value {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn a_namespace_list_limits_who_may_use_a_connection() {
        let events =
            parse(r#"{"kind": "eventbridge", "region": "eu-central-1", "namespaces": ["acme"]}"#);
        let bus = parse(r#"{"kind": "nats", "url": "nats://127.0.0.1:4222"}"#);
        let connections = Connections::new(BTreeMap::from([
            ("events".to_string(), events),
            ("bus".to_string(), bus),
        ]))
        .unwrap();
        assert!(connections.check("acme", "events", "eventbridge").is_ok());
        let refused = connections
            .check("other", "events", "eventbridge")
            .unwrap_err();
        // The same answer as for a name that does not exist.
        assert_eq!(
            refused.to_string(),
            connections
                .check("other", "nope", "eventbridge")
                .unwrap_err()
                .to_string()
                .replace("nope", "events")
        );
        assert!(connections.check("other", "bus", "nats").is_ok());
        assert!(matches!(
            connections.check("acme", "bus", "sqs"),
            Err(ConnectionRefused::WrongKind { .. })
        ));
    }

    #[test]
    fn an_aws_connection_serves_every_aws_kind_and_nothing_else() {
        for kind in ["eventbridge", "sqs", "sns", "lambda"] {
            assert!(ConnectionKind::Aws.serves(kind));
        }
        for kind in ["nats", "redis_stream", "amqp", "webhook", "queue"] {
            assert!(!ConnectionKind::Aws.serves(kind));
        }
        assert!(ConnectionKind::Redis.serves("redis_stream"));
        assert!(!ConnectionKind::Sqs.serves("sns"));
    }

    #[test]
    fn each_kind_is_checked_for_the_settings_it_needs() {
        let bad = [
            (r#"{"kind": "nats"}"#, "connections.c.url"),
            (
                r#"{"kind": "nats", "url": "redis://x"}"#,
                "connections.c.url",
            ),
            (r#"{"kind": "redis", "url": "::"}"#, "connections.c.url"),
            (
                r#"{"kind": "sqs", "url": "https://x"}"#,
                "connections.c.url",
            ),
            (
                r#"{"kind": "aws", "access_key_id": "a"}"#,
                "connections.c.access_key_id",
            ),
            (
                r#"{"kind": "amqp", "url": "amqp://x", "region": "r"}"#,
                "connections.c.region",
            ),
            (
                r#"{"kind": "aws", "endpoint_url": "not a url"}"#,
                "connections.c.endpoint_url",
            ),
        ];
        for (json, field) in bad {
            let err = parse(json).check("c").unwrap_err();
            assert!(err.starts_with(field), "{json}: {err}");
        }
        assert!(parse(r#"{"kind": "aws"}"#).check("c").is_ok());
        assert!(
            parse(r#"{"kind": "amqp", "url": "amqps://h/%2f"}"#)
                .check("c")
                .is_ok()
        );
        assert!(parse(r#"{"kind": "aws"}"#).check("bad name").is_err());
        assert!(serde_json::from_str::<ConnectionConfig>(r#"{"kind": "kafka"}"#).is_err());
        assert!(
            serde_json::from_str::<ConnectionConfig>(r#"{"kind": "aws", "extra": 1}"#).is_err()
        );
    }
}
