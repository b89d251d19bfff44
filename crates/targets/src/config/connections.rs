//! The node's connections by name, as the API and the router consult them when a job names one,
//! and the one-worded refusals a tenant gets when it may not use what it names.

use std::collections::BTreeMap;

use hourglass_core::Target;

use super::ConnectionConfig;

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
    pub fn new(by_name: BTreeMap<String, ConnectionConfig>) -> Result<Self, super::ConfigError> {
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
