//! Validation of a request's target: exactly one kind; a webhook's URL (within the length
//! limit, allowed by the address policy) and its extra headers; a queue's name; a bus or cloud
//! target through a connection the namespace may use (`connection`).

use std::collections::BTreeMap;

use hourglass_api::{HeadersIn, TargetIn};
use hourglass_core::{QueueTarget, Target, ValidationError, WebhookBatch, WebhookTarget};
use hourglass_engine::TargetPolicy;
use hourglass_engine::deliver::{RESERVED_HEADER_PREFIXES, RESERVED_HEADERS};
use hourglass_targets::Connections;

use super::{
    Limits, MAX_BATCH_ITEMS, MAX_HEADER_NAME_BYTES, MAX_HEADER_VALUE_BYTES, MAX_RATE_LIMIT,
    QUEUE_NAME_RULE, connection, convert, valid_queue_name,
};

/// What a target is checked against: the webhook address policy, and the connections the
/// job's namespace may use.
#[derive(Clone, Copy)]
pub struct TargetRules<'a> {
    pub policy: &'a TargetPolicy,
    pub connections: &'a Connections,
    pub namespace: &'a str,
}
pub fn target(
    input: &TargetIn,
    rules: TargetRules,
    limits: &Limits,
) -> Result<Target, ValidationError> {
    let given = [
        input.webhook.is_some(),
        input.queue.is_some(),
        input.eventbridge.is_some(),
        input.sqs.is_some(),
        input.sns.is_some(),
        input.lambda.is_some(),
        input.nats.is_some(),
        input.redis_stream.is_some(),
        input.amqp.is_some(),
    ];
    if given.iter().filter(|&&g| g).count() != 1 {
        return Err(ValidationError::new(
            "invalid_target",
            "target",
            "give one target: {\"webhook\": {\"url\": \"https://...\"}}, {\"queue\": \"name\"}, or one of eventbridge, sqs, sns, lambda, nats, redis_stream, amqp with its connection",
        ));
    }
    if let Some(name) = &input.queue {
        if !valid_queue_name(name) {
            return Err(ValidationError::new(
                "invalid_queue",
                "target.queue",
                QUEUE_NAME_RULE,
            ));
        }
        return Ok(Target::Queue(QueueTarget { name: name.clone() }));
    }
    let connection_target = convert::connection_target(input);
    if let Some(target) = connection_target {
        connection::validate(&target, rules, limits)?;
        return Ok(target);
    }
    let Some(webhook) = &input.webhook else {
        return Err(ValidationError::new(
            "invalid_target",
            "target",
            "give one target",
        ));
    };
    const FIELD: &str = "target.webhook.url";
    let url = parse_url(&webhook.url, FIELD, limits)?;
    // Normalizing percent-encodes and punycodes, which can lengthen what was sent.
    if url.as_str().len() > limits.max_url_bytes {
        return Err(url_too_long(FIELD, url.as_str().len(), limits));
    }
    rules.policy.check_url(&url, FIELD)?;
    let headers = validate_headers(&webhook.headers, limits)?;
    if let Some(rate) = webhook.rate_limit
        && !(1..=MAX_RATE_LIMIT).contains(&rate)
    {
        return Err(ValidationError::new(
            "invalid_field",
            "target.webhook.rate_limit",
            format!(
                "rate_limit is deliveries a second, 1 to {MAX_RATE_LIMIT}; leave it out for no limit"
            ),
        ));
    }
    let batch = match &webhook.batch {
        None => None,
        Some(batch) => match u16::try_from(batch.max_items) {
            Ok(max_items) if (1..=MAX_BATCH_ITEMS).contains(&max_items) => {
                Some(WebhookBatch { max_items })
            }
            _ => {
                return Err(ValidationError::new(
                    "invalid_field",
                    "target.webhook.batch.max_items",
                    format!(
                        "max_items is deliveries a request, 1 to {MAX_BATCH_ITEMS}; leave batch out for one request a delivery"
                    ),
                ));
            }
        },
    };
    Ok(Target::Webhook(WebhookTarget {
        url,
        headers,
        rate_limit: webhook.rate_limit,
        batch,
    }))
}

/// A URL the API takes (a webhook's, an SQS queue's): within the length limit, and parsed.
/// A batch's jobs mostly share one URL: each API thread keeps the last URL text it parsed and
/// what it parsed to, and exactly that text again is a copy instead of a parse (with IDNA host
/// processing). Parsing is a function of the text alone, so the copy is what a parse would give.
pub(crate) fn parse_url(
    text: &str,
    field: &str,
    limits: &Limits,
) -> Result<url::Url, ValidationError> {
    thread_local! {
        static LAST: std::cell::RefCell<Option<(String, url::Url)>> =
            const { std::cell::RefCell::new(None) };
    }
    if text.len() > limits.max_url_bytes {
        return Err(url_too_long(field, text.len(), limits));
    }
    let hit = LAST.with_borrow(|last| match last {
        Some((seen, url)) if seen == text => Some(url.clone()),
        _ => None,
    });
    if let Some(url) = hit {
        return Ok(url);
    }
    let url: url::Url = text
        .parse()
        .map_err(|e| ValidationError::new("invalid_url", field, format!("not a valid url: {e}")))?;
    LAST.set(Some((text.to_owned(), url.clone())));
    Ok(url)
}

fn url_too_long(field: &str, len: usize, limits: &Limits) -> ValidationError {
    ValidationError::new(
        "invalid_url",
        field,
        format!(
            "the url is {len} bytes; the limit is {}",
            limits.max_url_bytes
        ),
    )
}

/// A webhook's extra headers, with their names lowercased: valid HTTP, none that Hourglass sets
/// itself, no name given twice (in any case), and within the size limits.
fn validate_headers(
    input: &HeadersIn,
    limits: &Limits,
) -> Result<BTreeMap<String, String>, ValidationError> {
    const FIELD: &str = "target.webhook.headers";
    if let Some(name) = &input.repeated {
        return Err(ValidationError::new(
            "invalid_header",
            format!("{FIELD}.{name}"),
            "this header is given twice",
        ));
    }
    if input.headers.len() > limits.max_webhook_headers {
        return Err(ValidationError::new(
            "invalid_header",
            FIELD,
            format!(
                "{} headers; the limit is {}",
                input.headers.len(),
                limits.max_webhook_headers
            ),
        ));
    }
    let mut headers = BTreeMap::new();
    let mut total = 0usize;
    for (name, value) in &input.headers {
        let field = format!("{FIELD}.{name}");
        let invalid = |message: String| ValidationError::new("invalid_header", &field, message);
        if name.len() > MAX_HEADER_NAME_BYTES {
            return Err(invalid(format!(
                "the name is {} bytes; the limit is {MAX_HEADER_NAME_BYTES}",
                name.len()
            )));
        }
        if value.len() > MAX_HEADER_VALUE_BYTES {
            return Err(invalid(format!(
                "the value is {} bytes; the limit is {MAX_HEADER_VALUE_BYTES}",
                value.len()
            )));
        }
        let lower = name.to_ascii_lowercase();
        if axum::http::HeaderName::from_bytes(lower.as_bytes()).is_err()
            || axum::http::HeaderValue::from_str(value).is_err()
        {
            return Err(invalid("not a valid HTTP header name and value".into()));
        }
        if RESERVED_HEADERS.contains(&lower.as_str())
            || RESERVED_HEADER_PREFIXES
                .iter()
                .any(|p| lower.starts_with(p))
        {
            return Err(invalid(
                "this header is set by hourglass and cannot be overridden".into(),
            ));
        }
        if headers.contains_key(&lower) {
            // Names are case-insensitive: keeping either value would drop the other silently.
            return Err(invalid(
                "another header has the same name in other case".into(),
            ));
        }
        total += name.len() + value.len();
        if total > limits.max_webhook_header_bytes {
            return Err(ValidationError::new(
                "invalid_header",
                FIELD,
                format!(
                    "names and values together exceed {} bytes",
                    limits.max_webhook_header_bytes
                ),
            ));
        }
        headers.insert(lower, value.clone());
    }
    Ok(headers)
}
