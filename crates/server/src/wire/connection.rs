//! Validation of the bus and cloud targets: the connection must be one the job's namespace may
//! use, and every name must be one the service can take, so a job that would only ever
//! dead-letter is refused when it is created, with the field that is wrong.

use hourglass_core::{Target, ValidationError};
use hourglass_targets::ConnectionRefused;
use serde_json::Value;

use super::{Limits, TargetRules, parse_url};

pub(super) fn validate(
    target: &Target,
    rules: TargetRules,
    limits: &Limits,
) -> Result<(), ValidationError> {
    let kind = target.kind();
    let field = |name: &str| format!("target.{kind}.{name}");
    let name = target.connection().unwrap_or_default();
    let config = rules
        .connections
        .check(rules.namespace, name, kind)
        .map_err(|refused| refusal(kind, refused))?;
    fields(target, &field, limits)?;
    // Last, once every field is well formed: the operator's lists of what the connection may
    // reach, and the NATS system's subjects. A resource off the lists gets the answer an
    // unknown connection gets, decided from the lists alone (nothing asks the service whether
    // it exists).
    config
        .reaches(name, target)
        .map_err(|refused| refusal(kind, refused))
}

/// The 422 for a connection or resource the job may not use.
fn refusal(kind: &str, refused: ConnectionRefused) -> ValidationError {
    let field = |name: &str| format!("target.{kind}.{name}");
    match refused {
        ConnectionRefused::Unavailable(_) => ValidationError::new(
            "unknown_connection",
            field("connection"),
            format!(
                "{refused}; connections are set up by the node's operator (GET /v1/connections lists yours)"
            ),
        ),
        ConnectionRefused::NotAllowed { field: name, .. } => ValidationError::new(
            "unknown_connection",
            field(name),
            format!("{refused}; what a connection may reach is set up by the node's operator"),
        ),
        ConnectionRefused::Reserved { field: name, .. } => {
            ValidationError::new("invalid_field", field(name), refused.to_string())
        }
        ConnectionRefused::WrongKind { .. } => {
            ValidationError::new("invalid_field", field("connection"), refused.to_string())
        }
    }
}

/// Each field of a bus or cloud target, checked for what the service can take.
fn fields(
    target: &Target,
    field: &dyn Fn(&str) -> String,
    limits: &Limits,
) -> Result<(), ValidationError> {
    match target {
        Target::Eventbridge(t) => {
            text(
                &t.bus,
                &field("bus"),
                1,
                1600,
                is_arn_byte,
                "letters, digits and / . _ - :",
            )?;
            if t.bus.starts_with("arn:") {
                match arn(&t.bus, "events") {
                    Some(resource)
                        if resource
                            .strip_prefix("event-bus/")
                            .is_some_and(|name| !name.is_empty() && !name.contains(':')) => {}
                    _ => {
                        return Err(ValidationError::new(
                            "invalid_field",
                            field("bus"),
                            "not an event bus ARN: arn:aws:events:REGION:ACCOUNT:event-bus/NAME (or give the bus's name)",
                        ));
                    }
                }
            } else if t.bus.contains(':') {
                return Err(ValidationError::new(
                    "invalid_field",
                    field("bus"),
                    "an event bus's name has no ':' (or give its ARN: arn:aws:events:REGION:ACCOUNT:event-bus/NAME)",
                ));
            }
            text(
                &t.source,
                &field("source"),
                1,
                256,
                is_printable,
                "printable characters",
            )?;
            // EventBridge compares sources without regard to case.
            if t.source
                .get(..4)
                .is_some_and(|start| start.eq_ignore_ascii_case("aws."))
            {
                return Err(ValidationError::new(
                    "invalid_field",
                    field("source"),
                    "sources starting with \"aws.\" are reserved for AWS services",
                ));
            }
            text(
                &t.detail_type,
                &field("detail_type"),
                1,
                128,
                is_printable,
                "printable characters",
            )?;
        }
        Target::Sqs(t) => {
            queue_url(&t.queue_url, &field("queue_url"), limits)?;
            group_id(t.group_id.as_ref(), &field("group_id"))?;
        }
        Target::Sns(t) => {
            text(
                &t.topic_arn,
                &field("topic_arn"),
                1,
                256,
                is_arn_byte,
                "an ARN: arn:aws:sns:REGION:ACCOUNT:NAME",
            )?;
            if !arn(&t.topic_arn, "sns").is_some_and(is_topic_name) {
                return Err(ValidationError::new(
                    "invalid_field",
                    field("topic_arn"),
                    "not a topic ARN: arn:aws:sns:REGION:ACCOUNT:NAME",
                ));
            }
            group_id(t.group_id.as_ref(), &field("group_id"))?;
        }
        Target::Lambda(t) => {
            text(
                &t.function,
                &field("function"),
                1,
                170,
                is_arn_byte,
                "a function name or ARN (letters, digits and / . _ - :)",
            )?;
            if !is_function(&t.function) {
                return Err(ValidationError::new(
                    "invalid_field",
                    field("function"),
                    "not a function: NAME, NAME:QUALIFIER, ACCOUNT:function:NAME or arn:aws:lambda:REGION:ACCOUNT:function:NAME (each optionally with :QUALIFIER)",
                ));
            }
        }
        Target::Nats(t) => {
            text(
                &t.subject,
                &field("subject"),
                1,
                256,
                is_visible,
                "visible ASCII characters",
            )?;
            if t.subject
                .split('.')
                .any(|token| token.is_empty() || token == "*" || token == ">")
            {
                return Err(ValidationError::new(
                    "invalid_field",
                    field("subject"),
                    "a subject is dot-separated tokens, none empty, and no wildcards (* or >)",
                ));
            }
        }
        Target::RedisStream(t) => {
            text(
                &t.stream,
                &field("stream"),
                1,
                512,
                is_printable,
                "printable characters",
            )?;
        }
        Target::Amqp(t) => {
            // "" is the default exchange, which routes by queue name.
            text(
                &t.exchange,
                &field("exchange"),
                0,
                255,
                is_exchange_byte,
                "letters, digits and - _ . :",
            )?;
            text(
                &t.routing_key,
                &field("routing_key"),
                0,
                255,
                is_printable,
                "printable characters",
            )?;
        }
        Target::Webhook(_) | Target::Queue(_) => {}
    }
    Ok(())
}

/// EventBridge takes only a JSON object as an event's `detail`.
pub fn check_payload(target: &Target, payload: Option<&Value>) -> Result<(), ValidationError> {
    if let Target::Eventbridge(_) = target
        && !matches!(payload, Some(Value::Object(_)))
    {
        return Err(ValidationError::new(
            "invalid_field",
            "payload",
            "an eventbridge target takes a JSON object as payload: it becomes the event's detail",
        ));
    }
    Ok(())
}

fn text(
    value: &str,
    field: &str,
    min: usize,
    max: usize,
    allowed: fn(char) -> bool,
    rule: &str,
) -> Result<(), ValidationError> {
    if value.len() < min || value.len() > max {
        return Err(ValidationError::new(
            "invalid_field",
            field,
            format!("{} bytes; it takes {min} to {max}", value.len()),
        ));
    }
    if let Some(bad) = value.chars().find(|&c| !allowed(c)) {
        return Err(ValidationError::new(
            "invalid_field",
            field,
            format!("{bad:?} is not allowed here: use {rule}"),
        ));
    }
    Ok(())
}

/// An SQS queue URL: `https://HOST/ACCOUNT/NAME` (http for emulators), nothing more. The
/// text itself must have the host: the URL parser reads `https:///q` as host `q`.
fn queue_url(value: &str, field: &str, limits: &Limits) -> Result<(), ValidationError> {
    let url = parse_url(value, field, limits)?;
    let written_host = value
        .split_once("://")
        .is_some_and(|(_, rest)| !rest.is_empty() && !rest.starts_with('/'));
    let path: Vec<&str> = url.path().split('/').skip(1).collect();
    let well_formed = matches!(url.scheme(), "https" | "http")
        && written_host
        && url.host_str().is_some_and(|host| !host.is_empty())
        && url.username().is_empty()
        && url.password().is_none()
        && url.query().is_none()
        && url.fragment().is_none()
        && matches!(path.as_slice(), [account, name] if is_account(account) && is_queue_name(name));
    if well_formed {
        Ok(())
    } else {
        Err(ValidationError::new(
            "invalid_url",
            field,
            "not a queue URL: https://sqs.REGION.amazonaws.com/ACCOUNT/NAME",
        ))
    }
}

/// The resource of an ARN `arn:PARTITION:SERVICE:REGION:ACCOUNT:RESOURCE` for `service`, with
/// an AWS partition, a region and a 12-digit account; `None` for anything else.
fn arn<'a>(value: &'a str, service: &str) -> Option<&'a str> {
    let mut parts = value.splitn(6, ':');
    let (prefix, partition, named, region, account, resource) = (
        parts.next()?,
        parts.next()?,
        parts.next()?,
        parts.next()?,
        parts.next()?,
        parts.next()?,
    );
    let partition_ok = partition.starts_with("aws")
        && partition
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b == b'-');
    let region_ok = !region.is_empty()
        && region
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    (prefix == "arn"
        && partition_ok
        && named == service
        && region_ok
        && is_account(account)
        && !resource.is_empty())
    .then_some(resource)
}

fn is_account(text: &str) -> bool {
    text.len() == 12 && text.bytes().all(|b| b.is_ascii_digit())
}

/// An SQS queue's name: up to 80 letters, digits, `-` and `_`, a FIFO queue's with `.fifo`.
fn is_queue_name(name: &str) -> bool {
    let base = name.strip_suffix(".fifo").unwrap_or(name);
    (1..=80).contains(&name.len()) && !base.is_empty() && base.bytes().all(is_resource_name_byte)
}

/// An SNS topic's name: up to 256 letters, digits, `-` and `_`, a FIFO topic's with `.fifo`.
fn is_topic_name(name: &str) -> bool {
    let base = name.strip_suffix(".fifo").unwrap_or(name);
    (1..=256).contains(&name.len()) && !base.is_empty() && base.bytes().all(is_resource_name_byte)
}

fn is_resource_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}

/// A Lambda function as Invoke takes it: a name, a partial ARN (`ACCOUNT:function:NAME`) or
/// a full one, each with an optional `:QUALIFIER` (a version or an alias).
fn is_function(value: &str) -> bool {
    let rest = if value.starts_with("arn:") {
        match arn(value, "lambda").and_then(|r| r.strip_prefix("function:")) {
            Some(rest) => rest,
            None => return false,
        }
    } else {
        match value.split_once(':') {
            Some((account, rest)) if is_account(account) => match rest.strip_prefix("function:") {
                Some(rest) => rest,
                None => return false,
            },
            _ => value,
        }
    };
    let (name, qualifier) = match rest.split_once(':') {
        Some((name, qualifier)) => (name, Some(qualifier)),
        None => (rest, None),
    };
    let name_ok = (1..=64).contains(&name.len()) && name.bytes().all(is_resource_name_byte);
    let qualifier_ok = qualifier
        .is_none_or(|q| (1..=128).contains(&q.len()) && q.bytes().all(is_resource_name_byte));
    name_ok && qualifier_ok
}

/// A FIFO queue's or topic's message group.
fn group_id(group: Option<&String>, field: &str) -> Result<(), ValidationError> {
    match group {
        Some(group) => text(group, field, 1, 128, is_visible, "visible ASCII characters"),
        None => Ok(()),
    }
}

fn is_printable(c: char) -> bool {
    !c.is_control()
}

fn is_visible(c: char) -> bool {
    c.is_ascii_graphic()
}

fn is_arn_byte(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '_' | '-' | ':')
}

fn is_exchange_byte(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':')
}
