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

use std::collections::BTreeMap;

use hourglass_core::Target;
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

/// A connection's lists of allowed resources: the config key, the target kind it limits, and
/// how to read it from a config.
struct ResourceList {
    key: &'static str,
    /// The target kind (as `Target::kind` names it) whose field the list limits.
    target_kind: &'static str,
    get: fn(&ConnectionConfig) -> Option<&Vec<String>>,
}

const RESOURCE_LISTS: [ResourceList; 8] = [
    ResourceList {
        key: "subjects",
        target_kind: "nats",
        get: |c| c.subjects.as_ref(),
    },
    ResourceList {
        key: "streams",
        target_kind: "redis_stream",
        get: |c| c.streams.as_ref(),
    },
    ResourceList {
        key: "exchanges",
        target_kind: "amqp",
        get: |c| c.exchanges.as_ref(),
    },
    ResourceList {
        key: "routing_keys",
        target_kind: "amqp",
        get: |c| c.routing_keys.as_ref(),
    },
    ResourceList {
        key: "buses",
        target_kind: "eventbridge",
        get: |c| c.buses.as_ref(),
    },
    ResourceList {
        key: "queue_urls",
        target_kind: "sqs",
        get: |c| c.queue_urls.as_ref(),
    },
    ResourceList {
        key: "topic_arns",
        target_kind: "sns",
        get: |c| c.topic_arns.as_ref(),
    },
    ResourceList {
        key: "functions",
        target_kind: "lambda",
        get: |c| c.functions.as_ref(),
    },
];

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
        for list in &RESOURCE_LISTS {
            let Some(patterns) = (list.get)(self) else {
                continue;
            };
            if !self.kind.serves(list.target_kind) {
                return Err(format!(
                    "{}: a {} connection does not serve {} targets, which this setting limits",
                    at(list.key),
                    self.kind.as_str(),
                    list.target_kind
                ));
            }
            for pattern in patterns {
                check_pattern(list.key, pattern).map_err(|e| format!("{}: {e}", at(list.key)))?;
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

    /// The resource lists this connection leaves out although it serves the target kind they
    /// limit: with them left out, its namespaces may name anything its credentials reach.
    pub fn unlimited_lists(&self) -> Vec<&'static str> {
        RESOURCE_LISTS
            .iter()
            .filter(|list| self.kind.serves(list.target_kind) && (list.get)(self).is_none())
            .map(|list| list.key)
            .collect()
    }

    /// Whether this connection may carry `target`: the resources it names must be on the
    /// connection's lists, and a NATS subject must not be one of the system's. Called once the
    /// namespace and the kind were checked ([`Connections::check`]).
    pub fn reaches(&self, name: &str, target: &Target) -> Result<(), ConnectionRefused> {
        let refuse = |field: &'static str, what: &'static str, value: &str| {
            Err(ConnectionRefused::NotAllowed {
                connection: name.to_string(),
                field,
                what,
                value: value.to_string(),
            })
        };
        let listed = |patterns: &Option<Vec<String>>, value: &str| {
            patterns
                .as_ref()
                .is_none_or(|patterns| patterns.iter().any(|p| name_matches(p, value)))
        };
        match target {
            Target::Nats(t) => {
                if reserved_subject(&t.subject) {
                    return Err(ConnectionRefused::Reserved {
                        field: "subject",
                        value: t.subject.clone(),
                    });
                }
                let allowed = self
                    .subjects
                    .as_ref()
                    .is_none_or(|patterns| patterns.iter().any(|p| subject_matches(p, &t.subject)));
                if !allowed {
                    return refuse("subject", "subject", &t.subject);
                }
            }
            Target::RedisStream(t) if !listed(&self.streams, &t.stream) => {
                return refuse("stream", "stream", &t.stream);
            }
            Target::Amqp(t) => {
                // Only an explicit `""` opens the default exchange: through it a routing key
                // reaches any queue of the vhost by name.
                let exchange_allowed = self.exchanges.as_ref().is_none_or(|patterns| {
                    patterns.iter().any(|p| {
                        if t.exchange.is_empty() {
                            p.is_empty()
                        } else {
                            name_matches(p, &t.exchange)
                        }
                    })
                });
                if !exchange_allowed {
                    return refuse("exchange", "exchange", &t.exchange);
                }
                if !listed(&self.routing_keys, &t.routing_key) {
                    return refuse("routing_key", "routing key", &t.routing_key);
                }
            }
            Target::Eventbridge(t) if !listed(&self.buses, &t.bus) => {
                return refuse("bus", "event bus", &t.bus);
            }
            Target::Sqs(t) if !listed(&self.queue_urls, &t.queue_url) => {
                return refuse("queue_url", "queue", &t.queue_url);
            }
            Target::Sns(t) if !listed(&self.topic_arns, &t.topic_arn) => {
                return refuse("topic_arn", "topic", &t.topic_arn);
            }
            Target::Lambda(t) if !listed(&self.functions, &t.function) => {
                return refuse("function", "function", &t.function);
            }
            _ => {}
        }
        Ok(())
    }
}

/// Subjects of the NATS system itself, never a tenant's to publish to: the first token
/// starting with `$` (`$JS.API.…` drives JetStream: purging, deleting and creating streams;
/// `$SYS.…`, `$KV.…`, `$O.…`), or an `_INBOX` one (where request replies go, so a publish
/// there answers another client's request).
pub fn reserved_subject(subject: &str) -> bool {
    let first = subject.split('.').next().unwrap_or_default();
    first.starts_with('$') || first.starts_with("_INBOX")
}

/// Whether a NATS subject pattern matches a subject: tokens equal, `*` any one token, `>` one
/// or more tokens to the end.
fn subject_matches(pattern: &str, subject: &str) -> bool {
    let mut subject_tokens = subject.split('.');
    for token in pattern.split('.') {
        match (token, subject_tokens.next()) {
            (">", Some(_)) => return true,
            ("*", Some(_)) => {}
            (token, Some(given)) if token == given => {}
            _ => return false,
        }
    }
    subject_tokens.next().is_none()
}

/// Whether a listed name matches a value: equal, or, for a pattern ending in `*`, the value
/// starts with what precedes it.
fn name_matches(pattern: &str, value: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => value.starts_with(prefix),
        None => pattern == value,
    }
}

/// A listed pattern must be one that can match something meant: no empty entries (but the
/// default exchange `""`), and NATS patterns of whole tokens with `>` only last.
fn check_pattern(key: &str, pattern: &str) -> Result<(), String> {
    if pattern.is_empty() {
        return if key == "exchanges" {
            Ok(())
        } else {
            Err("an empty entry matches nothing".into())
        };
    }
    if key == "subjects" {
        let tokens: Vec<&str> = pattern.split('.').collect();
        if tokens.iter().any(|t| t.is_empty()) {
            return Err(format!(
                "{pattern:?}: a subject pattern has no empty tokens"
            ));
        }
        if let Some(position) = tokens.iter().position(|t| *t == ">")
            && position + 1 != tokens.len()
        {
            return Err(format!("{pattern:?}: '>' may only be the last token"));
        }
    } else if pattern.strip_suffix('*').unwrap_or(pattern).contains('*') {
        return Err(format!("{pattern:?}: '*' may only end an entry (a prefix)"));
    }
    Ok(())
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
    /// The connection may be used, but not for this resource. Worded like `Unavailable`, and
    /// decided from the operator's lists alone, so the answer says nothing of what exists.
    #[error(
        "no {what} {value:?} is available to this namespace through the connection {connection:?}"
    )]
    NotAllowed {
        connection: String,
        /// The target's field that names the resource (`subject`, `queue_url`, …).
        field: &'static str,
        what: &'static str,
        value: String,
    },
    /// A NATS subject of the system (JetStream's API, `$SYS`, reply inboxes).
    #[error(
        "the subject {value:?} is reserved: subjects whose first token starts with '$' or is _INBOX belong to the NATS system"
    )]
    Reserved { field: &'static str, value: String },
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

    /// [`Connections::check`] and then [`ConnectionConfig::reaches`]: whether a job in
    /// `namespace` may publish `target` at all. What the router asks before every publish.
    pub fn check_target(
        &self,
        namespace: &str,
        target: &Target,
    ) -> Result<&ConnectionConfig, ConnectionRefused> {
        let name = target.connection().unwrap_or_default();
        let config = self.check(namespace, name, target.kind())?;
        config.reaches(name, target)?;
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
    fn nats(subject: &str) -> Target {
        Target::Nats(hourglass_core::NatsTarget {
            connection: "bus".into(),
            subject: subject.into(),
        })
    }

    fn amqp(exchange: &str, routing_key: &str) -> Target {
        Target::Amqp(hourglass_core::AmqpTarget {
            connection: "rmq".into(),
            exchange: exchange.into(),
            routing_key: routing_key.into(),
        })
    }

    fn one(name: &str, json: &str) -> Connections {
        Connections::new(BTreeMap::from([(name.to_string(), parse(json))])).unwrap()
    }

    #[test]
    fn the_nats_systems_subjects_are_refused_whatever_is_listed() {
        let open = one("bus", r#"{"kind": "nats", "url": "nats://127.0.0.1:4222"}"#);
        let everything = one(
            "bus",
            r#"{"kind": "nats", "url": "nats://127.0.0.1:4222", "subjects": [">"]}"#,
        );
        for subject in [
            "$JS.API.STREAM.PURGE.X",
            "$JS.API.STREAM.DELETE.X",
            "$JS.API.STREAM.CREATE.Y",
            "$SYS.REQ.SERVER.PING",
            "$KV.bucket.key",
            "$G",
            "_INBOX.abc.def",
            "_INBOX",
        ] {
            for connections in [&open, &everything] {
                assert!(
                    matches!(
                        connections.check_target("acme", &nats(subject)),
                        Err(ConnectionRefused::Reserved { .. })
                    ),
                    "{subject}"
                );
            }
        }
        // Only the first token counts.
        assert!(open.check_target("acme", &nats("orders.$JS.x")).is_ok());
        assert!(open.check_target("acme", &nats("orders._INBOX")).is_ok());
    }

    #[test]
    fn subject_patterns_match_as_nats_permissions_do() {
        for (pattern, subject, matches) in [
            ("orders.>", "orders.eu", true),
            ("orders.>", "orders.eu.new", true),
            ("orders.>", "orders", false),
            ("orders.*", "orders.eu", true),
            ("orders.*", "orders.eu.new", false),
            ("orders.*.new", "orders.eu.new", true),
            ("orders.eu", "orders.eu", true),
            ("orders.eu", "orders.eu2", false),
            ("orders.eu", "orders", false),
            (">", "anything.at.all", true),
        ] {
            assert_eq!(
                subject_matches(pattern, subject),
                matches,
                "{pattern} {subject}"
            );
        }
    }

    #[test]
    fn resources_off_the_lists_are_refused_like_an_unknown_connection() {
        let bus = one(
            "bus",
            r#"{"kind": "nats", "url": "nats://127.0.0.1:4222", "subjects": ["orders.>"]}"#,
        );
        assert!(bus.check_target("acme", &nats("orders.eu")).is_ok());
        let refused = bus.check_target("acme", &nats("billing.eu")).unwrap_err();
        assert!(matches!(
            refused,
            ConnectionRefused::NotAllowed {
                field: "subject",
                ..
            }
        ));
        assert_eq!(
            refused.to_string(),
            "no subject \"billing.eu\" is available to this namespace through the connection \"bus\""
        );

        let rmq = one(
            "rmq",
            r#"{"kind": "amqp", "url": "amqp://h", "exchanges": ["jobs", "app.*"], "routing_keys": ["remind*"]}"#,
        );
        assert!(rmq.check_target("acme", &amqp("jobs", "reminder")).is_ok());
        assert!(
            rmq.check_target("acme", &amqp("app.events", "reminders"))
                .is_ok()
        );
        for (exchange, key, field) in [
            // The default exchange reaches any queue by name: only an explicit "" opens it.
            ("", "reminder", "exchange"),
            ("other", "reminder", "exchange"),
            ("jobs", "other", "routing_key"),
        ] {
            assert!(
                matches!(
                    rmq.check_target("acme", &amqp(exchange, key)),
                    Err(ConnectionRefused::NotAllowed { field: f, .. }) if f == field
                ),
                "{exchange} {key}"
            );
        }
        let default_exchange = one(
            "rmq",
            r#"{"kind": "amqp", "url": "amqp://h", "exchanges": [""], "routing_keys": ["app.q"]}"#,
        );
        assert!(
            default_exchange
                .check_target("acme", &amqp("", "app.q"))
                .is_ok()
        );
        assert!(
            default_exchange
                .check_target("acme", &amqp("", "other.q"))
                .is_err()
        );

        let aws = one(
            "aws",
            r#"{"kind": "aws", "queue_urls": ["https://sqs.eu-central-1.amazonaws.com/123456789012/app-*"], "functions": []}"#,
        );
        let sqs = |url: &str| {
            Target::Sqs(hourglass_core::SqsTarget {
                connection: "aws".into(),
                queue_url: url.into(),
                group_id: None,
            })
        };
        assert!(
            aws.check_target(
                "acme",
                &sqs("https://sqs.eu-central-1.amazonaws.com/123456789012/app-orders")
            )
            .is_ok()
        );
        assert!(
            aws.check_target(
                "acme",
                &sqs("https://sqs.eu-central-1.amazonaws.com/123456789012/billing")
            )
            .is_err()
        );
        // An empty list allows nothing; a list left out allows everything (sns here).
        let lambda = Target::Lambda(hourglass_core::LambdaTarget {
            connection: "aws".into(),
            function: "f".into(),
        });
        assert!(aws.check_target("acme", &lambda).is_err());
        let sns = Target::Sns(hourglass_core::SnsTarget {
            connection: "aws".into(),
            topic_arn: "arn:aws:sns:eu-central-1:123456789012:t".into(),
            group_id: None,
        });
        assert!(aws.check_target("acme", &sns).is_ok());
        assert_eq!(
            aws.get("aws").unwrap().unlimited_lists(),
            ["buses", "topic_arns"]
        );
    }

    #[test]
    fn resource_lists_are_checked_at_start() {
        let bad = [
            (
                r#"{"kind": "redis", "url": "redis://h", "subjects": ["a"]}"#,
                "connections.c.subjects",
            ),
            (
                r#"{"kind": "sqs", "topic_arns": ["arn:aws:sns:r:1:t"]}"#,
                "connections.c.topic_arns",
            ),
            (
                r#"{"kind": "nats", "url": "nats://h", "subjects": ["a.>.b"]}"#,
                "connections.c.subjects",
            ),
            (
                r#"{"kind": "nats", "url": "nats://h", "subjects": ["a..b"]}"#,
                "connections.c.subjects",
            ),
            (
                r#"{"kind": "redis", "url": "redis://h", "streams": ["a*b"]}"#,
                "connections.c.streams",
            ),
            (
                r#"{"kind": "redis", "url": "redis://h", "streams": [""]}"#,
                "connections.c.streams",
            ),
            (
                r#"{"kind": "redis", "url": "redis://h", "streams": ["é*é"]}"#,
                "connections.c.streams",
            ),
        ];
        for (json, field) in bad {
            let err = parse(json).check("c").unwrap_err();
            assert!(err.starts_with(field), "{json}: {err}");
        }
        assert!(
            parse(r#"{"kind": "amqp", "url": "amqp://h", "exchanges": ["", "jobs.*"]}"#)
                .check("c")
                .is_ok()
        );
        assert!(
            parse(r#"{"kind": "aws", "buses": ["orders"], "functions": ["app-*"]}"#)
                .check("c")
                .is_ok()
        );
    }
}
