//! The API's JSON shapes and their conversion to and from the domain. Only this module knows how
//! a job looks on the wire; validation errors name the offending field by its JSON path.

use std::collections::BTreeMap;
use std::time::Duration;

use hourglass_core::duration::{format_duration, parse_duration};
use hourglass_core::schedule::CronSchedule;
use hourglass_core::{
    JobId, JobSpec, MisfirePolicy, QueueTarget, RetryPolicy, Schedule, ScheduleKind, Target,
    ValidationError, WebhookTarget,
};
use hourglass_engine::TargetPolicy;
use hourglass_engine::deliver::{RESERVED_HEADER_PREFIXES, RESERVED_HEADERS};
use hourglass_store::{DeadLetter, JobRecord, RunRecord};
use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Value, json};

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
}

impl Limits {
    /// Largest body of a single job's create or edit: its payload plus the rest of the request.
    pub fn job_body_bytes(&self) -> usize {
        self.max_payload_bytes
            .saturating_add(crate::api::ENVELOPE_BYTES)
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
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookIn {
    pub url: String,
    #[serde(default)]
    pub headers: HeadersIn,
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
    pub fn validate(
        &self,
        policy: &TargetPolicy,
        limits: &Limits,
    ) -> Result<Target, ValidationError> {
        let webhook = match (&self.webhook, &self.queue) {
            (Some(webhook), None) => webhook,
            (None, Some(name)) => {
                if !valid_queue_name(name) {
                    return Err(ValidationError::new(
                        "invalid_queue",
                        "target.queue",
                        QUEUE_NAME_RULE,
                    ));
                }
                return Ok(Target::Queue(QueueTarget { name: name.clone() }));
            }
            _ => {
                return Err(ValidationError::new(
                    "invalid_target",
                    "target",
                    "give one target: {\"webhook\": {\"url\": \"https://...\"}} or {\"queue\": \"name\"}",
                ));
            }
        };
        let url_too_long = |len: usize| {
            ValidationError::new(
                "invalid_url",
                "target.webhook.url",
                format!(
                    "the url is {len} bytes; the limit is {}",
                    limits.max_url_bytes
                ),
            )
        };
        if webhook.url.len() > limits.max_url_bytes {
            return Err(url_too_long(webhook.url.len()));
        }
        let url: url::Url = webhook.url.parse().map_err(|e| {
            ValidationError::new(
                "invalid_url",
                "target.webhook.url",
                format!("not a valid url: {e}"),
            )
        })?;
        // Normalizing percent-encodes and punycodes, which can lengthen what was sent.
        if url.as_str().len() > limits.max_url_bytes {
            return Err(url_too_long(url.as_str().len()));
        }
        policy.check_url(&url, "target.webhook.url")?;
        let headers = validate_headers(&webhook.headers, limits)?;
        Ok(Target::Webhook(WebhookTarget { url, headers }))
    }
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
        policy: &TargetPolicy,
    ) -> Result<ValidJob, ValidationError> {
        if let Some(key) = &self.key {
            validate_name(key, "key", limits.max_key_len)?;
        }
        if let Some(job_type) = &self.job_type {
            validate_name(job_type, "type", 128)?;
        }
        let schedule = self.schedule.validate(now, limits)?;
        let target = self.target.validate(policy, limits)?;
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

pub fn rfc3339(ts: Timestamp) -> String {
    format!("{ts:.3}")
}

/// The schedule as the API shows it; `after` appears as the `at` it resolved to.
pub fn schedule_out(s: &Schedule) -> ScheduleIn {
    let mut out = ScheduleIn {
        start: s.start.map(rfc3339),
        end: s.end.map(rfc3339),
        max_runs: s.max_runs,
        ..Default::default()
    };
    match &s.kind {
        ScheduleKind::At(at) => out.at = Some(rfc3339(*at)),
        ScheduleKind::Cron(c) => {
            out.cron = Some(c.expr().to_string());
            out.timezone = Some(c.timezone().to_string());
        }
        ScheduleKind::Every { interval, anchor } => {
            out.every = Some(format_duration(*interval));
            out.start = Some(rfc3339(*anchor));
        }
    }
    out
}

/// The misfire policy as the API shows it: a name, or the `all` policy with its window.
#[derive(Serialize)]
#[serde(untagged)]
pub enum MisfireOut {
    Name(&'static str),
    All {
        policy: &'static str,
        window: String,
    },
}

fn misfire_out(m: MisfirePolicy) -> MisfireOut {
    match m {
        MisfirePolicy::Skip => MisfireOut::Name("skip"),
        MisfirePolicy::Once => MisfireOut::Name("once"),
        MisfirePolicy::All { window } => MisfireOut::All {
            policy: "all",
            window: format_duration(window),
        },
    }
}

#[derive(Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetOut<'a> {
    Webhook(WebhookOut<'a>),
    Queue(&'a str),
}

#[derive(Serialize)]
pub struct WebhookOut<'a> {
    url: &'a str,
    /// Header names only: values often carry the receiver's credentials and are never echoed.
    headers: BTreeMap<&'a str, &'static str>,
}

fn target_out(t: &Target) -> TargetOut<'_> {
    match t {
        Target::Webhook(w) => TargetOut::Webhook(WebhookOut {
            url: w.url.as_str(),
            headers: w
                .headers
                .keys()
                .map(|k| (k.as_str(), "<redacted>"))
                .collect(),
        }),
        Target::Queue(q) => TargetOut::Queue(&q.name),
    }
}

/// The stored payload text, emitted as-is (it was produced by serde_json, so it is valid JSON).
pub fn payload_out(payload: Option<&str>) -> Option<&RawValue> {
    payload.and_then(|p| serde_json::from_str(p).ok())
}

#[derive(Serialize)]
pub struct RetryOut {
    max_attempts: u32,
    initial_backoff: String,
    max_backoff: String,
}

/// A job as the API shows it. Serialized straight from borrowed fields: building a JSON value
/// tree per job was the largest cost of a 1,000-job batch.
#[derive(Serialize)]
pub struct JobOut<'a> {
    id: JobId,
    namespace: &'a str,
    key: Option<&'a str>,
    #[serde(rename = "type")]
    job_type: Option<&'a str>,
    state: &'static str,
    schedule: ScheduleIn,
    target: TargetOut<'a>,
    payload: Option<&'a RawValue>,
    retry: RetryOut,
    misfire: MisfireOut,
    next_due_at: Option<String>,
    attempt: u32,
    runs: u64,
    skipped: u64,
    created_at: String,
    updated_at: String,
    /// Batch answers only: whether this job was created by the request (or already existed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created: Option<bool>,
    /// Trigger answers only: the delivery id of the occurrence the trigger made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivery_id: Option<String>,
}

pub fn job_out(j: &JobRecord) -> JobOut<'_> {
    JobOut {
        id: j.id,
        namespace: &j.namespace,
        key: j.key.as_deref(),
        job_type: j.spec.job_type.as_deref(),
        state: j.state.as_str(),
        schedule: schedule_out(&j.spec.schedule),
        target: target_out(&j.spec.target),
        payload: payload_out(j.payload.as_deref()),
        retry: RetryOut {
            max_attempts: j.spec.retry.max_attempts,
            initial_backoff: format_duration(j.spec.retry.initial_backoff),
            max_backoff: format_duration(j.spec.retry.max_backoff),
        },
        misfire: misfire_out(j.spec.misfire),
        next_due_at: if j.state.is_terminal() {
            None
        } else {
            j.next_due.map(rfc3339)
        },
        attempt: j.attempt,
        runs: j.runs,
        skipped: j.skipped,
        created_at: rfc3339(j.created_at),
        updated_at: rfc3339(j.updated_at),
        created: None,
        delivery_id: None,
    }
}

pub fn run_out(r: &RunRecord) -> Value {
    json!({
        "delivery_id": hourglass_core::DeliveryId::new(r.job_id, r.due).to_string(),
        "due_at": rfc3339(r.due),
        "attempt": r.attempt,
        "started_at": rfc3339(r.started_at),
        "latency_ms": r.latency_ms,
        "status_code": r.status,
        "error": r.error,
        "outcome": r.outcome,
    })
}

pub fn dead_letter_out(d: &DeadLetter) -> Value {
    json!({
        "id": d.id.to_string(),
        "job_id": d.job_id,
        "delivery_id": hourglass_core::DeliveryId::new(d.job_id, d.due).to_string(),
        "due_at": rfc3339(d.due),
        "attempts": d.attempts,
        "reason": d.reason,
        "type": d.spec.job_type,
        "target": target_out(&d.spec.target),
        "payload": payload_out(d.payload.as_deref()),
        "created_at": rfc3339(d.created_at),
    })
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
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    const NOW: &str = "2026-11-23T21:10:00.250Z";

    fn preview(schedule: Value, count: u64) -> Result<PreviewOut, ValidationError> {
        let request = PreviewRequest {
            schedule: serde_json::from_value(schedule).unwrap(),
            count: Some(count),
        };
        request.preview(ts(NOW), &Limits::default())
    }

    #[test]
    fn past_start_anchors_an_interval_and_nothing_before_now_runs() {
        // start yesterday at :30 → runs at :30 of every hour, from the first one after now.
        let out = preview(json!({"every": "1h", "start": "2026-11-22T08:30:00Z"}), 3).unwrap();
        assert_eq!(
            out.fire_times,
            [
                "2026-11-23T21:30:00.000Z",
                "2026-11-23T22:30:00.000Z",
                "2026-11-23T23:30:00.000Z"
            ]
        );
        assert_eq!(
            out.description,
            "every 1h aligned to 2026-11-22T08:30:00.000Z"
        );
        // A cron job's past start bounds nothing still to come, and the words do not name it.
        let out = preview(
            json!({"cron": "0 0 * * * *", "start": "2026-11-22T08:30:00Z"}),
            2,
        )
        .unwrap();
        assert_eq!(
            out.fire_times,
            ["2026-11-23T22:00:00.000Z", "2026-11-23T23:00:00.000Z"]
        );
        let words = CronSchedule::parse("0 0 * * * *", "UTC")
            .unwrap()
            .describe();
        assert_eq!(out.description, format!("{words} (UTC)"));
        // A future start is still named.
        let out = preview(
            json!({"cron": "0 0 * * * *", "start": "2026-12-01T00:00:00Z"}),
            1,
        )
        .unwrap();
        assert_eq!(out.fire_times, ["2026-12-01T00:00:00.000Z"]);
        assert!(
            out.description.ends_with(", from 2026-12-01T00:00:00.000Z"),
            "{}",
            out.description
        );
    }

    #[test]
    fn leap_day_starting_2096_is_accepted_with_its_2104_run() {
        let out = preview(
            json!({"cron": "0 0 0 29 2 *", "start": "2096-03-01T00:00:00Z"}),
            2,
        )
        .unwrap();
        assert_eq!(
            out.fire_times,
            ["2104-02-29T00:00:00.000Z", "2108-02-29T00:00:00.000Z"]
        );
        // Still refused when the first run would be past the 100-year horizon, or never.
        for (cron, start) in [
            ("0 0 0 29 2 *", "2125-03-01T00:00:00Z"),
            ("0 0 30 2 *", "2026-12-01T00:00:00Z"),
        ] {
            let err = preview(json!({"cron": cron, "start": start}), 1).unwrap_err();
            assert_eq!(
                (err.code, err.field.as_str()),
                ("cron_never_fires", "schedule.cron")
            );
        }
    }

    #[test]
    fn zone_names_that_are_no_place_are_refused() {
        for zone in ["localtime", "Factory", "posixrules", "Etc/Unknown"] {
            let err = preview(json!({"cron": "0 0 * * *", "timezone": zone}), 1).unwrap_err();
            assert_eq!(
                (err.code, err.field.as_str()),
                ("unknown_timezone", "schedule.timezone"),
                "{zone}"
            );
        }
        for zone in ["US/Eastern", "UTC", "America/Nuuk"] {
            preview(json!({"cron": "0 0 * * *", "timezone": zone}), 1)
                .unwrap_or_else(|e| panic!("{zone}: {e:?}"));
        }
    }

    #[test]
    fn lw_preview_words_say_last_weekday() {
        let out = preview(json!({"cron": "0 0 LW * *"}), 2).unwrap();
        assert_eq!(
            out.description,
            "At 00:00, on the last weekday of the month (UTC)"
        );
        assert_eq!(
            out.fire_times,
            ["2026-11-30T00:00:00.000Z", "2026-12-31T00:00:00.000Z"]
        );
    }
}
