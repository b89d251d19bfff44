//! The API's JSON shapes and their conversion to and from the domain. Only this module knows how
//! a job looks on the wire; validation errors name the offending field by its JSON path.

use std::collections::BTreeMap;
use std::time::Duration;

use hourglass_core::duration::{format_duration, parse_duration};
use hourglass_core::schedule::CronSchedule;
use hourglass_core::{
    AmqpTarget, EventBridgeTarget, JobSpec, LambdaTarget, MisfirePolicy, NatsTarget, QueueTarget,
    RedisStreamTarget, RetryPolicy, Schedule, ScheduleKind, SnsTarget, SqsTarget, Target,
    ValidationError, WebhookBatch, WebhookTarget,
};
use hourglass_engine::TargetPolicy;
use hourglass_engine::deliver::{RESERVED_HEADER_PREFIXES, RESERVED_HEADERS};
use hourglass_targets::Connections;
use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::Value;

mod connection;
pub use connection::check_payload;
mod out;
pub use out::{
    JobBrief, JobOut, MisfireOut, RetryOut, TargetOut, WebhookOut, dead_letter_out, job_brief,
    job_out, payload_out, rfc3339, run_out, schedule_out,
};

/// Limits that validation enforces; the operator can change them in config.
#[derive(Debug, Clone)]
pub struct Limits {
    pub max_payload_bytes: usize,
    /// How far in the past an `at` instant may be (clock skew, slow clients); it fires at once.
    pub max_past: Duration,
    pub max_key_len: usize,
    /// A webhook URL's length, as sent and once normalized. 8 KiB is what common HTTP servers
    /// take in a request line (nginx, Apache), and leaves room for presigned URLs.
    pub max_url_bytes: usize,
    /// Extra headers on a webhook target.
    pub max_webhook_headers: usize,
    /// The extra headers' names and values together. 16 KiB is Node.js's default cap on a whole
    /// request head; every header this adds is stored with the job and sent on every attempt.
    pub max_webhook_header_bytes: usize,
    /// Largest body of a batch create (`POST /v1/jobs/batch`), refused with 413 above it.
    pub max_batch_bytes: usize,
    /// How long a request body may take to arrive, whole; 408 `body_timeout` after it.
    pub body_read_timeout: Duration,
    /// The encoded size past which a listing's page, or a lease's answer, stops: the rest comes
    /// on the next page (or lease). An answer may pass it by one item.
    pub max_answer_bytes: usize,
    /// Bytes of request bodies the node holds at once, in total and per API key.
    pub body_budget: crate::budget::BodyBudget,
}

impl Limits {
    /// Largest body of a single job's create or edit: its payload plus the rest of the request.
    pub fn job_body_bytes(&self) -> usize {
        self.max_payload_bytes
            .saturating_add(crate::api::ENVELOPE_BYTES)
    }

    /// The most a stored job weighs, in memory or encoded in an answer: its payload and
    /// everything else its create could carry.
    pub fn max_job_bytes(&self) -> usize {
        self.job_body_bytes()
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_payload_bytes: 256 * 1024,
            max_past: Duration::from_secs(300),
            max_key_len: 256,
            max_url_bytes: 8 * 1024,
            max_webhook_headers: 32,
            max_webhook_header_bytes: 16 * 1024,
            max_batch_bytes: 16 * 1024 * 1024,
            body_read_timeout: Duration::from_secs(60),
            max_answer_bytes: 4 * 1024 * 1024,
            body_budget: crate::budget::BodyBudget::default(),
        }
    }
}

/// A header name's length. Real header names are a few dozen bytes.
pub const MAX_HEADER_NAME_BYTES: usize = 256;
/// A header value's length: nginx's and Apache's default cap on one header line, so a longer
/// value would be refused by most receivers anyway.
pub const MAX_HEADER_VALUE_BYTES: usize = 8 * 1024;
/// A cron expression's length. Six fields each listing every value they can take come to
/// about 530 characters; nothing meaningful is longer, and expressions are cached by their text.
pub const MAX_CRON_BYTES: usize = 1024;
/// The highest `rate_limit` a webhook target may ask for, in deliveries a second.
pub const MAX_RATE_LIMIT: u32 = 100_000;
/// The most deliveries a batched webhook target may put in one request.
pub const MAX_BATCH_ITEMS: u16 = 1000;
/// A time zone name's length; the longest IANA name has 32 characters.
pub const MAX_TIMEZONE_BYTES: usize = 64;

/// The latest instant a job may be scheduled for.
const MAX_FUTURE: SignedDuration = SignedDuration::from_hours(100 * 366 * 24);
/// The longest `every` interval: one occurrence per scheduling horizon.
const MAX_EVERY: Duration = Duration::from_secs(100 * 366 * 24 * 3600);
/// The longest misfire catch-up window. Past it, a missed run is an outage to look at, not a
/// backlog to replay; and every bound on a duration keeps the engine's time arithmetic in range.
pub const MAX_MISFIRE_WINDOW: Duration = Duration::from_secs(30 * 24 * 3600);

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CreateJob {
    pub key: Option<String>,
    #[serde(rename = "type")]
    pub job_type: Option<String>,
    pub schedule: ScheduleIn,
    pub target: TargetIn,
    #[serde(default)]
    pub payload: Option<Value>,
    pub retry: Option<RetryIn>,
    pub misfire: Option<MisfireIn>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleIn {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cron: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub every: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_runs: Option<u64>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TargetIn {
    pub webhook: Option<WebhookIn>,
    /// A pull queue's name: `{"queue": "emails"}`.
    pub queue: Option<String>,
    /// The bus and cloud targets, each through a connection the operator configured. Their
    /// stored shape is their wire shape.
    pub eventbridge: Option<EventBridgeTarget>,
    pub sqs: Option<SqsTarget>,
    pub sns: Option<SnsTarget>,
    pub lambda: Option<LambdaTarget>,
    pub nats: Option<NatsTarget>,
    pub redis_stream: Option<RedisStreamTarget>,
    pub amqp: Option<AmqpTarget>,
}

/// What a target is checked against: the webhook address policy, and the connections the
/// job's namespace may use.
#[derive(Clone, Copy)]
pub struct TargetRules<'a> {
    pub policy: &'a TargetPolicy,
    pub connections: &'a Connections,
    pub namespace: &'a str,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookIn {
    pub url: String,
    #[serde(default)]
    pub headers: HeadersIn,
    /// Deliveries a second to the URL's destination, at most.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<u32>,
    /// Deliver in batches of up to `max_items` deliveries a request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<BatchIn>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct BatchIn {
    pub max_items: u32,
}

/// A webhook's extra headers, a JSON object of strings. It serializes as that object (the
/// idempotency fingerprint hashes it), and it remembers a name the body gave twice, which a map
/// would silently collapse into one of the values; validation refuses it.
#[derive(Debug, Clone, Default)]
pub struct HeadersIn {
    pub headers: BTreeMap<String, String>,
    pub repeated: Option<String>,
}

impl Serialize for HeadersIn {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.headers.serialize(s)
    }
}

impl<'de> Deserialize<'de> for HeadersIn {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = HeadersIn;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a map of header names to string values")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<HeadersIn, A::Error> {
                let mut out = HeadersIn::default();
                while let Some((name, value)) = map.next_entry::<String, String>()? {
                    if out.headers.contains_key(&name) && out.repeated.is_none() {
                        out.repeated = Some(name.clone());
                    }
                    out.headers.insert(name, value);
                }
                Ok(out)
            }
        }
        d.deserialize_map(Visitor)
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RetryIn {
    pub max_attempts: Option<u32>,
    pub initial_backoff: Option<String>,
    pub max_backoff: Option<String>,
}

/// `"skip"`, `"once"`, `"all"` (1 hour window) or `{"policy": "all", "window": "6h"}`. Kept as
/// raw JSON until validation so every malformed shape gets the same `invalid_misfire` answer.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(transparent)]
pub struct MisfireIn(Value);

/// `PATCH /v1/jobs/{id}`: each present field replaces the job's.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PatchJob {
    #[serde(rename = "type")]
    pub job_type: Option<String>,
    pub schedule: Option<ScheduleIn>,
    pub target: Option<TargetIn>,
    #[serde(default, deserialize_with = "present")]
    pub payload: Option<Option<Value>>,
    pub retry: Option<RetryIn>,
    pub misfire: Option<MisfireIn>,
}

/// Distinguishes an absent field (`None`) from an explicit `null` (`Some(None)`).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<Value>>, D::Error> {
    Ok(Some(Option::deserialize(d)?))
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchCreate {
    pub jobs: Vec<CreateJob>,
}

/// A validated create request.
pub struct ValidJob {
    pub key: Option<String>,
    pub spec: JobSpec,
    pub payload: Option<String>,
    pub first_due: Timestamp,
}

fn parse_instant(text: &str, field: &str) -> Result<Timestamp, ValidationError> {
    // jiff reads offsets up to ±25:59; RFC 3339 allows ±23:59 only.
    let offset_hours = text
        .len()
        .checked_sub(6)
        .and_then(|i| text.get(i..))
        .filter(|tail| tail.starts_with(['+', '-']) && tail.as_bytes()[3] == b':')
        .and_then(|tail| tail[1..3].parse::<u8>().ok());
    if offset_hours.is_some_and(|h| h > 23) {
        return Err(ValidationError::new(
            "invalid_instant",
            field,
            format!("{text:?} has an offset beyond ±23:59"),
        ));
    }
    text.parse::<Timestamp>().map_err(|_| {
        ValidationError::new(
            "invalid_instant",
            field,
            format!(
                "{text:?} is not an RFC 3339 instant with an offset, e.g. \"2027-03-01T09:00:00+01:00\""
            ),
        )
    })
}

/// Whole milliseconds: sub-millisecond instants would make the delivery id ambiguous.
fn truncate_ms(ts: Timestamp) -> Timestamp {
    hourglass_core::from_ms(ts.as_millisecond())
}

pub fn validate_name(value: &str, field: &str, max: usize) -> Result<(), ValidationError> {
    if value.is_empty() || value.len() > max || value.chars().any(|c| c.is_control()) {
        return Err(ValidationError::new(
            "invalid_field",
            field,
            format!("must be 1 to {max} characters without control characters"),
        ));
    }
    Ok(())
}

impl ScheduleIn {
    pub fn validate(&self, now: Timestamp, limits: &Limits) -> Result<Schedule, ValidationError> {
        let within = |e: ValidationError| e.within("schedule");
        let kinds = [
            self.at.is_some(),
            self.after.is_some(),
            self.cron.is_some(),
            self.every.is_some(),
        ]
        .iter()
        .filter(|k| **k)
        .count();
        if kinds != 1 {
            return Err(ValidationError::new(
                "invalid_schedule",
                "schedule",
                "give exactly one of at, after, cron or every",
            ));
        }
        if self.timezone.is_some() && self.cron.is_none() {
            return Err(ValidationError::new(
                "invalid_schedule",
                "schedule.timezone",
                "timezone applies to cron schedules only",
            ));
        }
        let start = self
            .start
            .as_deref()
            .map(|s| parse_instant(s, "start").map(truncate_ms))
            .transpose()
            .map_err(within)?;
        let end = self
            .end
            .as_deref()
            .map(|s| parse_instant(s, "end").map(truncate_ms))
            .transpose()
            .map_err(within)?;
        let one_off = self.at.is_some() || self.after.is_some();
        if one_off {
            let extra = [
                ("start", self.start.is_some()),
                ("end", self.end.is_some()),
                ("max_runs", self.max_runs.is_some()),
            ];
            if let Some((name, _)) = extra.iter().find(|(_, present)| *present) {
                return Err(ValidationError::new(
                    "invalid_schedule",
                    format!("schedule.{name}"),
                    "start, end and max_runs apply to recurring schedules only",
                ));
            }
        }
        if let (Some(start), Some(end)) = (start, end)
            && end < start
        {
            return Err(ValidationError::new(
                "invalid_schedule",
                "schedule.end",
                "end is before start",
            ));
        }
        if self.max_runs == Some(0) {
            return Err(ValidationError::new(
                "invalid_field",
                "schedule.max_runs",
                "max_runs must be at least 1",
            ));
        }
        let latest = now.saturating_add(MAX_FUTURE).unwrap_or(Timestamp::MAX);
        let too_far = |field: &str| {
            ValidationError::new(
                "instant_too_far",
                format!("schedule.{field}"),
                "jobs may be scheduled at most 100 years ahead",
            )
        };
        if start.is_some_and(|start| start > latest) {
            return Err(too_far("start"));
        }
        let kind = if let Some(at) = &self.at {
            let at = truncate_ms(parse_instant(at, "at").map_err(within)?);
            if at < hourglass_core::sub_saturating(now, limits.max_past) {
                return Err(ValidationError::new(
                    "instant_in_past",
                    "schedule.at",
                    format!(
                        "{at} is more than {} in the past",
                        format_duration(limits.max_past)
                    ),
                ));
            }
            if at > latest {
                return Err(too_far("at"));
            }
            ScheduleKind::At(at)
        } else if let Some(after) = &self.after {
            let delay = parse_duration(after, "after").map_err(within)?;
            match SignedDuration::try_from(delay) {
                Ok(delay) if delay <= MAX_FUTURE => {
                    ScheduleKind::At(hourglass_core::add_saturating(now, delay.unsigned_abs()))
                }
                _ => return Err(too_far("after")),
            }
        } else if let Some(expr) = &self.cron {
            if expr.len() > MAX_CRON_BYTES {
                return Err(ValidationError::new(
                    "invalid_cron",
                    "schedule.cron",
                    format!(
                        "the cron expression is {} bytes; the limit is {MAX_CRON_BYTES}",
                        expr.len()
                    ),
                ));
            }
            let tz = self.timezone.as_deref().unwrap_or("UTC");
            if tz.len() > MAX_TIMEZONE_BYTES {
                return Err(ValidationError::new(
                    "unknown_timezone",
                    "schedule.timezone",
                    format!(
                        "not an IANA time zone name (those have at most {MAX_TIMEZONE_BYTES} bytes)"
                    ),
                ));
            }
            let cron = CronSchedule::parse(expr, tz).map_err(within)?;
            // Any occurrence the job could get counts, however far (a leap day from 2097 is in
            // 2104): from its start, or from now when the start has passed, to the horizon.
            cron.check_fires_between(start.unwrap_or(now).max(now), latest)
                .map_err(within)?;
            ScheduleKind::Cron(Box::new(cron))
        } else {
            let every = self.every.as_deref().unwrap_or_default();
            let interval = parse_duration(every, "every").map_err(within)?;
            if interval < Duration::from_secs(1) {
                return Err(ValidationError::new(
                    "invalid_duration",
                    "schedule.every",
                    "the shortest interval is 1s",
                ));
            }
            if interval > MAX_EVERY {
                return Err(ValidationError::new(
                    "invalid_duration",
                    "schedule.every",
                    "the longest interval is 100 years (878400h): jobs may be scheduled at most 100 years ahead",
                ));
            }
            let anchor = start.unwrap_or(hourglass_core::add_saturating(now, interval));
            ScheduleKind::Every { interval, anchor }
        };
        Ok(Schedule {
            kind,
            start: if self.every.is_some() { None } else { start },
            end,
            max_runs: self.max_runs,
        })
    }
}

impl TargetIn {
    pub fn validate(&self, rules: TargetRules, limits: &Limits) -> Result<Target, ValidationError> {
        let given = [
            self.webhook.is_some(),
            self.queue.is_some(),
            self.eventbridge.is_some(),
            self.sqs.is_some(),
            self.sns.is_some(),
            self.lambda.is_some(),
            self.nats.is_some(),
            self.redis_stream.is_some(),
            self.amqp.is_some(),
        ];
        if given.iter().filter(|&&g| g).count() != 1 {
            return Err(ValidationError::new(
                "invalid_target",
                "target",
                "give one target: {\"webhook\": {\"url\": \"https://...\"}}, {\"queue\": \"name\"}, or one of eventbridge, sqs, sns, lambda, nats, redis_stream, amqp with its connection",
            ));
        }
        if let Some(name) = &self.queue {
            if !valid_queue_name(name) {
                return Err(ValidationError::new(
                    "invalid_queue",
                    "target.queue",
                    QUEUE_NAME_RULE,
                ));
            }
            return Ok(Target::Queue(QueueTarget { name: name.clone() }));
        }
        let connection_target = if let Some(t) = &self.eventbridge {
            Some(Target::Eventbridge(t.clone()))
        } else if let Some(t) = &self.sqs {
            Some(Target::Sqs(t.clone()))
        } else if let Some(t) = &self.sns {
            Some(Target::Sns(t.clone()))
        } else if let Some(t) = &self.lambda {
            Some(Target::Lambda(t.clone()))
        } else if let Some(t) = &self.nats {
            Some(Target::Nats(t.clone()))
        } else if let Some(t) = &self.redis_stream {
            Some(Target::RedisStream(t.clone()))
        } else {
            self.amqp.clone().map(Target::Amqp)
        };
        if let Some(target) = connection_target {
            connection::validate(&target, rules, limits)?;
            return Ok(target);
        }
        let Some(webhook) = &self.webhook else {
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
}

/// A URL the API takes (a webhook's, an SQS queue's): within the length limit, and parsed.
/// A batch's jobs mostly share one URL: each API thread keeps the last URL text it parsed and
/// what it parsed to, and exactly that text again is a copy instead of a parse (with IDNA host
/// processing). Parsing is a function of the text alone, so the copy is what a parse would give.
fn parse_url(text: &str, field: &str, limits: &Limits) -> Result<url::Url, ValidationError> {
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

impl RetryIn {
    pub fn validate(&self) -> Result<RetryPolicy, ValidationError> {
        let defaults = RetryPolicy::default();
        let max_attempts = self.max_attempts.unwrap_or(defaults.max_attempts);
        if !(1..=100).contains(&max_attempts) {
            return Err(ValidationError::new(
                "invalid_field",
                "retry.max_attempts",
                "max_attempts must be between 1 and 100",
            ));
        }
        let duration = |v: &Option<String>, name: &str, default: Duration| {
            v.as_deref().map_or(Ok(default), |text| {
                parse_duration(text, name).map_err(|e| e.within("retry"))
            })
        };
        let initial_backoff = duration(
            &self.initial_backoff,
            "initial_backoff",
            defaults.initial_backoff,
        )?;
        let max_backoff = duration(&self.max_backoff, "max_backoff", defaults.max_backoff)?;
        if max_backoff < initial_backoff {
            return Err(ValidationError::new(
                "invalid_field",
                "retry.max_backoff",
                "max_backoff is shorter than initial_backoff",
            ));
        }
        if max_backoff > Duration::from_secs(7 * 24 * 3600) {
            return Err(ValidationError::new(
                "invalid_field",
                "retry.max_backoff",
                "max_backoff is at most 7 days",
            ));
        }
        Ok(RetryPolicy {
            max_attempts,
            initial_backoff,
            max_backoff,
        })
    }
}

impl MisfireIn {
    pub fn validate(&self) -> Result<MisfirePolicy, ValidationError> {
        let invalid = || {
            ValidationError::new(
                "invalid_misfire",
                "misfire",
                "misfire is \"skip\", \"once\", \"all\" or {\"policy\": \"all\", \"window\": \"6h\"}",
            )
        };
        let (name, window) = match &self.0 {
            Value::String(name) => (name.as_str(), None),
            Value::Object(fields) => {
                if let Some(unknown) = fields.keys().find(|k| *k != "policy" && *k != "window") {
                    return Err(ValidationError::new(
                        "unknown_field",
                        format!("misfire.{unknown}"),
                        format!("unknown field `{unknown}`, expected `policy` or `window`"),
                    ));
                }
                let text = |key: &str| match fields.get(key) {
                    None | Some(Value::Null) => Ok(None),
                    Some(Value::String(s)) => Ok(Some(s.as_str())),
                    Some(_) => Err(ValidationError::new(
                        "invalid_misfire",
                        format!("misfire.{key}"),
                        format!("{key} must be a string"),
                    )),
                };
                (text("policy")?.ok_or_else(invalid)?, text("window")?)
            }
            _ => return Err(invalid()),
        };
        match (name, window) {
            ("skip", None) => Ok(MisfirePolicy::Skip),
            ("once", None) => Ok(MisfirePolicy::Once),
            ("all", window) => {
                let window = window
                    .map(|w| parse_duration(w, "misfire.window"))
                    .transpose()?
                    .unwrap_or(Duration::from_secs(3600));
                if window > MAX_MISFIRE_WINDOW {
                    return Err(ValidationError::new(
                        "invalid_duration",
                        "misfire.window",
                        "the catch-up window is at most 30 days (720h)",
                    ));
                }
                Ok(MisfirePolicy::All { window })
            }
            _ => Err(invalid()),
        }
    }
}

impl CreateJob {
    pub fn validate(
        &self,
        now: Timestamp,
        limits: &Limits,
        rules: TargetRules,
    ) -> Result<ValidJob, ValidationError> {
        if let Some(key) = &self.key {
            validate_name(key, "key", limits.max_key_len)?;
        }
        if let Some(job_type) = &self.job_type {
            validate_name(job_type, "type", 128)?;
        }
        let schedule = self.schedule.validate(now, limits)?;
        let target = self.target.validate(rules, limits)?;
        connection::check_payload(&target, self.payload.as_ref())?;
        let retry = self
            .retry
            .as_ref()
            .map(RetryIn::validate)
            .transpose()?
            .unwrap_or_default();
        let misfire = self
            .misfire
            .as_ref()
            .map(MisfireIn::validate)
            .transpose()?
            .unwrap_or_default();
        let payload = encode_payload(self.payload.as_ref(), limits)?;
        let first_due = first_due(&schedule, now)?;
        Ok(ValidJob {
            key: self.key.clone(),
            spec: JobSpec {
                job_type: self.job_type.clone(),
                schedule,
                target,
                retry,
                misfire,
            },
            payload,
            first_due,
        })
    }
}

/// The first due time of a validated schedule for a job accepted at `now`, or
/// `schedule_never_fires` when its end (or max runs) leaves it none.
pub fn first_due(schedule: &Schedule, now: Timestamp) -> Result<Timestamp, ValidationError> {
    schedule.first_due(now).ok_or_else(|| {
        ValidationError::new(
            "schedule_never_fires",
            "schedule",
            "the schedule has no occurrence before its end",
        )
    })
}

/// `POST /v1/schedules/preview`: a schedule as jobs take it, and how many due times to list.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PreviewRequest {
    pub schedule: ScheduleIn,
    pub count: Option<u64>,
}

pub const PREVIEW_DEFAULT_COUNT: u64 = 10;
pub const PREVIEW_MAX_COUNT: u64 = 100;

#[derive(Debug, Serialize)]
pub struct PreviewOut {
    pub fire_times: Vec<String>,
    pub description: String,
}

impl PreviewRequest {
    /// The due times a job with this schedule would get if it were created at `now`: validated
    /// exactly as a create validates it (same codes, same `schedule.*` paths), then walked the
    /// way the engine advances an on-time job, so `start`, `end` and `max_runs` cut the list
    /// where they would cut the job.
    pub fn preview(&self, now: Timestamp, limits: &Limits) -> Result<PreviewOut, ValidationError> {
        let schedule = self.schedule.validate(now, limits)?;
        let count = self.count.unwrap_or(PREVIEW_DEFAULT_COUNT);
        if !(1..=PREVIEW_MAX_COUNT).contains(&count) {
            return Err(ValidationError::new(
                "invalid_field",
                "count",
                format!("count must be between 1 and {PREVIEW_MAX_COUNT}"),
            ));
        }
        let mut due = first_due(&schedule, now)?;
        let mut fire_times = vec![rfc3339(due)];
        while (fire_times.len() as u64) < count {
            // The runs listed so far count as done, which is how max_runs ends the list.
            match schedule.next_for_run(due, fire_times.len() as u64) {
                Some(next) => {
                    due = next;
                    fire_times.push(rfc3339(due));
                }
                None => break,
            }
        }
        Ok(PreviewOut {
            fire_times,
            description: describe_schedule(&schedule, now),
        })
    }
}

/// A validated schedule in words, as of `now`: "once at ...", "every 15m from ...", or croner's
/// wording of a cron expression with its zone, followed by whatever bounds it has. A start that
/// has passed is not called "from": nothing before `now` runs. An interval keeps it as the
/// cadence it is aligned to; a cron expression has no use for it.
pub fn describe_schedule(s: &Schedule, now: Timestamp) -> String {
    let mut words = match &s.kind {
        ScheduleKind::At(at) => return format!("once at {}", rfc3339(*at)),
        ScheduleKind::Every { interval, anchor } => {
            let from = if *anchor < now { "aligned to" } else { "from" };
            format!(
                "every {} {from} {}",
                format_duration(*interval),
                rfc3339(*anchor)
            )
        }
        ScheduleKind::Cron(cron) => {
            let mut words = format!("{} ({})", cron.describe(), cron.timezone());
            if let Some(start) = s.start.filter(|start| *start > now) {
                words.push_str(&format!(", from {}", rfc3339(start)));
            }
            words
        }
    };
    if let Some(end) = s.end {
        words.push_str(&format!(", until {}", rfc3339(end)));
    }
    match s.max_runs {
        Some(1) => words.push_str(", at most 1 run"),
        Some(n) => words.push_str(&format!(", at most {n} runs")),
        None => {}
    }
    words
}

pub fn encode_payload(
    payload: Option<&Value>,
    limits: &Limits,
) -> Result<Option<String>, ValidationError> {
    let Some(value) = payload.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let text = serde_json::to_string(value).expect("json values serialize");
    if text.len() > limits.max_payload_bytes {
        return Err(ValidationError::new(
            "payload_too_large",
            "payload",
            format!(
                "payload is {} bytes; the limit is {} bytes",
                text.len(),
                limits.max_payload_bytes
            ),
        ));
    }
    Ok(Some(text))
}

/// What a queue name may be, as error messages say it.
pub const QUEUE_NAME_RULE: &str =
    "a queue name is 1-64 letters, digits, '-', '_' or '.', and not \".\" or \"..\"";

/// Queue names: the same alphabet as namespaces, so they are safe in paths, metrics and logs.
/// `.` and `..` are refused: in a URL path they are dot segments, which clients and proxies
/// resolve away (`/v1/queues/../lease`), so such a queue could not be addressed.
pub fn valid_queue_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

#[cfg(test)]
mod tests;
