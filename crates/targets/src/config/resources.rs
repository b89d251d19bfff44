//! A connection's resource lists (`subjects`, `streams`, `exchanges`, `routing_keys`, `buses`,
//! `queue_urls`, `topic_arns`, `functions`): which list limits which target kind, how their
//! patterns match, and whether a target names only resources its connection's lists allow. NATS
//! subjects of the system are refused whatever is listed.

use hourglass_core::Target;

use super::{ConnectionConfig, ConnectionRefused};

/// A connection's lists of allowed resources: the config key, the target kind it limits, and
/// how to read it from a config.
pub(super) struct ResourceList {
    pub(super) key: &'static str,
    /// The target kind (as `Target::kind` names it) whose field the list limits.
    pub(super) target_kind: &'static str,
    pub(super) get: fn(&ConnectionConfig) -> Option<&Vec<String>>,
}

pub(super) const RESOURCE_LISTS: [ResourceList; 8] = [
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
    /// namespace and the kind were checked ([`Connections::check`](super::Connections::check)).
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
pub(super) fn check_pattern(key: &str, pattern: &str) -> Result<(), String> {
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

#[cfg(test)]
mod tests {
    use super::subject_matches;

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
}
