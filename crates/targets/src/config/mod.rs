//! Connections as the operator declares them (`[connections.NAME]` in the config file), and the
//! rules for which namespace may publish through which connection, and to what. Tenants never
//! supply endpoints or credentials: a job names a connection, and the node holds the rest.
//!
//! A connection's credentials usually reach far more than one application's resources (a NATS
//! account with its JetStream API, every queue of a RabbitMQ vhost, every key of a Redis
//! database, whatever an IAM role may touch). So besides the namespaces that may use it, a
//! connection lists the resources they may name: `subjects` (NATS subject patterns), `streams`,
//! `exchanges` and `routing_keys`, `buses`, `queue_urls`, `topic_arns` and `functions`, each
//! the plural of the target field it limits. A list left out allows every value (as before
//! these lists existed; the router warns about it at start); an empty list allows none. NATS
//! subjects of the system (`$JS.API.…`, `$SYS.…`, `_INBOX.…`) are refused whatever is listed.
//!
//! The rooms: this file holds what a connection is (its kind and settings) and the checks its
//! settings get at start; `resources.rs` the resource lists and whether a target's resources are
//! on them; `connections.rs` the node's connections by name and why a job may not use one.

mod connections;
mod resources;
#[cfg(test)]
mod tests;

use serde::Deserialize;

use self::resources::{RESOURCE_LISTS, check_pattern};

pub use self::connections::{ConnectionRefused, Connections};
pub use self::resources::reserved_subject;

/// A connection setting that cannot work, found when the node starts (so the node refuses to
/// start: a config error, which no retry mends). `setting` is its path in the config file,
/// `connections.<name>.<key>`, or `connections.<name>` for the name itself.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{setting}: {problem}")]
pub struct ConfigError {
    pub setting: String,
    pub problem: String,
}

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
    /// NATS: the subjects jobs may publish to, as NATS subject patterns (`*` one token, `>` the
    /// tokens left), e.g. `["orders.>"]`.
    #[serde(default)]
    pub subjects: Option<Vec<String>>,
    /// Redis: the streams (keys) jobs may append to; exact, or a prefix ending in `*`.
    #[serde(default)]
    pub streams: Option<Vec<String>>,
    /// AMQP: the exchanges jobs may publish to; exact, or a prefix ending in `*`. The default
    /// exchange (`""`, which routes to any queue by name) only when `""` is listed itself.
    #[serde(default)]
    pub exchanges: Option<Vec<String>>,
    /// AMQP: the routing keys jobs may give, on every listed exchange; exact, or a prefix
    /// ending in `*`. With the default exchange these are queue names.
    #[serde(default)]
    pub routing_keys: Option<Vec<String>>,
    /// EventBridge: the event buses (as the target names them: name or ARN); exact, or a
    /// prefix ending in `*`.
    #[serde(default)]
    pub buses: Option<Vec<String>>,
    /// SQS: the queue URLs; exact, or a prefix ending in `*`.
    #[serde(default)]
    pub queue_urls: Option<Vec<String>>,
    /// SNS: the topic ARNs; exact, or a prefix ending in `*`.
    #[serde(default)]
    pub topic_arns: Option<Vec<String>>,
    /// Lambda: the functions (as the target names them: name, name with qualifier, or ARN);
    /// exact, or a prefix ending in `*`.
    #[serde(default)]
    pub functions: Option<Vec<String>>,
}

impl ConnectionConfig {
    /// Checks the settings a connection of its kind needs, naming the setting that is wrong.
    pub fn check(&self, name: &str) -> Result<(), ConfigError> {
        let refuse = |key: &str, problem: String| {
            Err(ConfigError {
                setting: format!("connections.{name}.{key}"),
                problem,
            })
        };
        if name.is_empty() || name.len() > 64 || !name.bytes().all(is_name_byte) {
            return Err(ConfigError {
                setting: format!("connections.{name}"),
                problem: "a connection's name is 1 to 64 letters, digits, '-' or '_'".into(),
            });
        }
        if self.kind.is_aws() {
            if self.url.is_some() {
                return refuse(
                    "url",
                    "AWS connections take region (and endpoint_url), not url".into(),
                );
            }
            if self.access_key_id.is_some() != self.secret_access_key.is_some() {
                return refuse(
                    "access_key_id",
                    "give access_key_id and secret_access_key together, or neither".into(),
                );
            }
            if let Some(endpoint) = &self.endpoint_url
                && let Err(e) = url::Url::parse(endpoint)
            {
                return refuse("endpoint_url", format!("not a valid url: {e}"));
            }
        } else {
            let schemes: &[&str] = match self.kind {
                ConnectionKind::Nats => &["nats", "tls"],
                ConnectionKind::Redis => &["redis"],
                ConnectionKind::Amqp => &["amqp", "amqps"],
                _ => &[],
            };
            let Some(url) = &self.url else {
                return refuse(
                    "url",
                    format!("a {} connection needs its server's url", self.kind.as_str()),
                );
            };
            let parsed = match url::Url::parse(url) {
                Ok(parsed) => parsed,
                Err(e) => return refuse("url", format!("not a valid url: {e}")),
            };
            if !schemes.contains(&parsed.scheme()) {
                return refuse(
                    "url",
                    format!("the scheme must be one of {}", schemes.join(", ")),
                );
            }
            for key in ["region", "endpoint_url", "access_key_id"] {
                let set = match key {
                    "region" => self.region.is_some(),
                    "endpoint_url" => self.endpoint_url.is_some(),
                    _ => self.access_key_id.is_some() || self.secret_access_key.is_some(),
                };
                if set {
                    return refuse(key, "only AWS connections take this setting".into());
                }
            }
        }
        for list in &RESOURCE_LISTS {
            let Some(patterns) = (list.get)(self) else {
                continue;
            };
            if !self.kind.serves(list.target_kind) {
                return refuse(
                    list.key,
                    format!(
                        "a {} connection does not serve {} targets, which this setting limits",
                        self.kind.as_str(),
                        list.target_kind
                    ),
                );
            }
            for pattern in patterns {
                if let Err(problem) = check_pattern(list.key, pattern) {
                    return refuse(list.key, problem);
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
