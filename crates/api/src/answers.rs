//! What the server answers about jobs: a job (alone, in a page, in a batch's answer), a run of
//! its history, a dead letter. Text fields borrow (`Cow<'a, str>`) so the server writes pages
//! straight from its records; a client reads them owned (`Job<'static>`).

use std::borrow::Cow;
use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::jobs::{ScheduleIn, WebhookBatch};
use crate::targets::{
    AmqpTarget, EventBridgeTarget, LambdaTarget, NatsTarget, RedisStreamTarget, SnsTarget,
    SqsTarget,
};
use crate::{Payload, instant};

/// Where a job stands. `Unknown` is a state newer than this build; the server never sends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    Active,
    Paused,
    Completed,
    Failed,
    Cancelled,
    /// A state this build does not know yet.
    #[serde(other)]
    Unknown,
}

impl JobState {
    /// The states the server has.
    pub const ALL: [JobState; 5] = [
        JobState::Active,
        JobState::Paused,
        JobState::Completed,
        JobState::Failed,
        JobState::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Active => "active",
            JobState::Paused => "paused",
            JobState::Completed => "completed",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
            JobState::Unknown => "unknown",
        }
    }

    /// One of [`JobState::ALL`] by its name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|state| state.as_str() == s)
    }
}

/// A job's target as the API shows it: a webhook without its header values, a queue by name, a
/// bus or cloud target as it was given (it holds no secret: the connection does).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetOut<'a> {
    Webhook(WebhookOut<'a>),
    Queue(Cow<'a, str>),
    Eventbridge(EventBridgeTarget),
    Sqs(SqsTarget),
    Sns(SnsTarget),
    Lambda(LambdaTarget),
    Nats(NatsTarget),
    RedisStream(RedisStreamTarget),
    Amqp(AmqpTarget),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookOut<'a> {
    pub url: Cow<'a, str>,
    /// Header names, each with `"<redacted>"`: values often carry the receiver's credentials and
    /// are never echoed.
    pub headers: BTreeMap<Cow<'a, str>, Cow<'a, str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<WebhookBatch>,
}

/// The retry policy with the server's defaults filled in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(
        description = "A job's retry policy as stored: every field set, the defaults filled in."
    )
)]
pub struct RetryOut {
    pub max_attempts: u32,
    #[cfg_attr(feature = "openapi", schema(value_type = crate::openapi::Duration))]
    pub initial_backoff: String,
    #[cfg_attr(feature = "openapi", schema(value_type = crate::openapi::Duration))]
    pub max_backoff: String,
}

/// A job's callback as stored, its defaults filled in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CallbackOut<'a> {
    #[cfg_attr(feature = "openapi", schema(value_type = crate::openapi::TargetOut))]
    pub target: TargetOut<'a>,
    pub every_attempt: bool,
    pub include_payload: bool,
    pub retry: RetryOut,
}

/// What a callback job reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CallbackOf {
    /// The job whose occurrence the callback reports.
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = Uuid))]
    pub job_id: Uuid,
    /// `occurrence.failed` or `occurrence.succeeded`.
    pub event: String,
}

/// The occurrence a job delivers for an `overlap: "allow"` job, which handed it off when it fell
/// due.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OccurrenceOf {
    /// The `allow` job whose occurrence this is; the runs and the dead letter are recorded
    /// under it.
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = Uuid))]
    pub job_id: Uuid,
    /// The occurrence's nominal time.
    #[cfg_attr(feature = "openapi", schema(value_type = crate::openapi::InstantOut))]
    pub due_at: Timestamp,
    /// The occurrence's delivery id, which this job's deliveries carry.
    #[cfg_attr(feature = "openapi", schema(value_type = crate::openapi::DeliveryId))]
    pub delivery_id: String,
}

/// The misfire policy as the API shows it: `"skip"`, `"once"`, or
/// `{"policy": "all", "window": "1h"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MisfireOut {
    Name(Cow<'static, str>),
    All {
        policy: Cow<'static, str>,
        window: String,
    },
}

#[allow(
    clippy::ptr_arg,
    reason = "serde's skip_serializing_if passes the field's own type"
)]
fn labels_empty(labels: &Cow<'_, std::collections::BTreeMap<String, String>>) -> bool {
    labels.is_empty()
}

fn buffer_all() -> Cow<'static, str> {
    Cow::Borrowed("buffer_all")
}

/// A job as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(description = "A stored job."))]
pub struct Job<'a> {
    /// A UUIDv7, so ids sort by creation time.
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = Uuid))]
    pub id: Uuid,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub namespace: Cow<'a, str>,
    /// `null` when none was given or once the job is cancelled.
    #[cfg_attr(feature = "openapi", schema(required = true, value_type = Option<String>))]
    pub key: Option<Cow<'a, str>>,
    #[serde(rename = "type")]
    #[cfg_attr(feature = "openapi", schema(required = true, value_type = Option<String>))]
    pub job_type: Option<Cow<'a, str>>,
    pub state: JobState,
    #[cfg_attr(feature = "openapi", schema(value_type = crate::openapi::JobSchedule))]
    pub schedule: ScheduleIn,
    #[cfg_attr(feature = "openapi", schema(value_type = crate::openapi::TargetOut))]
    pub target: TargetOut<'a>,
    /// The payload, `null` when none. Left out of listings (`listJobs`) unless they ask for it with
    /// `payload=true`.
    #[serde(
        default,
        deserialize_with = "crate::present",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(
        feature = "openapi",
        schema(
            nullable = false,
            value_type = Option<serde_json::Value>,
        )
    )]
    pub payload: Option<Option<Payload<'a>>>,
    pub retry: RetryOut,
    #[cfg_attr(feature = "openapi", schema(value_type = crate::openapi::Misfire))]
    pub misfire: MisfireOut,
    /// A node older than overlap policies sends none: its jobs behave as `buffer_all`.
    #[serde(default = "buffer_all")]
    #[cfg_attr(
        feature = "openapi",
        schema(value_type = crate::openapi::Overlap, required = true)
    )]
    pub overlap: Cow<'static, str>,
    /// The job's labels; left out when it has none.
    #[serde(default, skip_serializing_if = "labels_empty")]
    #[cfg_attr(
        feature = "openapi",
        schema(nullable = false, value_type = Option<crate::openapi::Labels>)
    )]
    pub labels: Cow<'a, std::collections::BTreeMap<String, String>>,
    /// Nominal due time of the pending occurrence (the time in its delivery id); `null` in a
    /// terminal state.
    #[serde(with = "instant::option")]
    #[cfg_attr(
        feature = "openapi",
        schema(
            required = true,
            value_type = Option<String>,
            format = DateTime,
        )
    )]
    pub next_due_at: Option<Timestamp>,
    /// When the pending occurrence fires, for a schedule with `jitter` or `calendar`:
    /// `next_due_at` moved by the calendar's roll, plus its jitter offset (retries come later, at
    /// `next_attempt_at`). Left out without either (the occurrence fires at `next_due_at`) and in
    /// a terminal state.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "instant::option"
    )]
    #[cfg_attr(
        feature = "openapi",
        schema(nullable = false, value_type = Option<String>, format = DateTime)
    )]
    pub next_fire_at: Option<Timestamp>,
    /// When the pending occurrence's next attempt runs, when that is not `next_due_at`: its
    /// jittered fire time (`next_fire_at`); after a failed attempt, the end of its backoff (or of
    /// a `Retry-After`); while the destination's circuit breaker holds it back, when the breaker
    /// is next probed. `null` when the next attempt runs at `next_due_at`, while an attempt is
    /// under way, and for a job that is not active.
    #[serde(default, with = "instant::option")]
    #[cfg_attr(
        feature = "openapi",
        schema(
            required = true,
            value_type = Option<String>,
            format = DateTime,
        )
    )]
    pub next_attempt_at: Option<Timestamp>,
    /// Failed attempts of the pending occurrence so far; for a `failed` job, every attempt its
    /// dead-lettered occurrence made.
    #[cfg_attr(feature = "openapi", schema(minimum = 0))]
    pub attempt: u32,
    /// The error of the job's most recent failed attempt (the `error` of its newest run with
    /// outcome `retry` or `dead_letter`), cut to at most 1 KiB; `null` until an attempt fails, and
    /// again once an occurrence is delivered. Edits, pauses and resumes keep it.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(required = true, value_type = Option<String>))]
    pub last_error: Option<Cow<'a, str>>,
    /// Occurrences that ran (delivered or dead-lettered).
    #[cfg_attr(feature = "openapi", schema(minimum = 0))]
    pub runs: u64,
    /// Occurrences dropped by the misfire policy.
    #[cfg_attr(feature = "openapi", schema(minimum = 0))]
    pub skipped: u64,
    #[serde(with = "instant")]
    #[cfg_attr(feature = "openapi", schema(value_type = crate::openapi::InstantOut))]
    pub created_at: Timestamp,
    #[serde(with = "instant")]
    #[cfg_attr(feature = "openapi", schema(value_type = crate::openapi::InstantOut))]
    pub updated_at: Timestamp,
    /// Where the job's `occurrence.failed` events go; left out without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub on_failure: Option<CallbackOut<'a>>,
    /// Where the job's `occurrence.succeeded` events go; left out without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub on_success: Option<CallbackOut<'a>>,
    /// Set on a job Hourglass created to deliver a callback: the job whose occurrence it reports
    /// and the event. Such a job has no callbacks of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub callback_of: Option<CallbackOf>,
    /// Set on a job Hourglass created to deliver one occurrence of an `overlap: "allow"` job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub occurrence_of: Option<OccurrenceOf>,
    /// Batch answers only: whether this job was created by the request (or already existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(ignore))]
    pub created: Option<bool>,
    /// Trigger answers only: the delivery id of the occurrence the trigger made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(ignore))]
    pub delivery_id: Option<String>,
}

impl Job<'_> {
    /// The job's payload as JSON (`null` when it has none or the answer left it out).
    pub fn payload_value(&self) -> serde_json::Value {
        match &self.payload {
            Some(Some(p)) => p.to_value(),
            _ => serde_json::Value::Null,
        }
    }
}

/// A job in a batch answer under `Prefer: return=minimal`: what a bulk submitter needs to find
/// its jobs again, without echoing each one whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobBrief<'a> {
    pub id: Uuid,
    pub key: Option<Cow<'a, str>>,
    pub state: JobState,
    #[serde(with = "instant::option")]
    pub next_due_at: Option<Timestamp>,
    pub created: bool,
}

/// A batch create's answer: how many jobs it created, and every job of the request in order
/// (a [`Job`], or a [`JobBrief`] under `Prefer: return=minimal`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchCreated<J> {
    pub created: usize,
    pub jobs: Vec<J>,
}

/// One page of jobs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(description = "A page of jobs; `next_cursor` is set when the page is full.")
)]
pub struct JobList<'a> {
    /// Ordered by id (creation time).
    pub jobs: Vec<Job<'a>>,
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub next_cursor: Option<String>,
}

/// How a run ended. The text is stored with the run and never changes for an existing value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunOutcome {
    Delivered,
    /// The attempt failed and the occurrence is tried again later.
    Retry,
    /// The attempt failed for good: the occurrence is a dead letter.
    DeadLetter,
    /// The misfire policy dropped the occurrence.
    Skipped,
    /// An outcome this build does not know yet.
    #[serde(other)]
    Unknown,
}

impl RunOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            RunOutcome::Delivered => "delivered",
            RunOutcome::Retry => "retry",
            RunOutcome::DeadLetter => "dead_letter",
            RunOutcome::Skipped => "skipped",
            RunOutcome::Unknown => "unknown",
        }
    }

    /// The outcome named `text`; `Unknown` for any other text.
    pub fn parse(text: &str) -> Self {
        [
            RunOutcome::Delivered,
            RunOutcome::Retry,
            RunOutcome::DeadLetter,
            RunOutcome::Skipped,
        ]
        .into_iter()
        .find(|o| o.as_str() == text)
        .unwrap_or(RunOutcome::Unknown)
    }
}

/// One attempt in a job's history. Keys in this order (they have always come sorted).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Run {
    pub attempt: u32,
    /// Present (`true`) on a run of a backfilled occurrence.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub backfill: bool,
    pub delivery_id: String,
    #[serde(with = "instant")]
    pub due_at: Timestamp,
    pub error: Option<String>,
    pub latency_ms: u64,
    pub outcome: RunOutcome,
    /// The start of what the target answered to a failed attempt (at most 1 KiB).
    #[serde(default)]
    pub response: Option<String>,
    #[serde(with = "instant")]
    pub started_at: Timestamp,
    pub status_code: Option<u16>,
}

/// One page of a job's runs, newest first. Keys sorted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunList {
    /// Present when there may be older runs: the next call's `cursor`.
    pub next_cursor: Option<String>,
    pub runs: Vec<Run>,
}

/// An occurrence that failed its last attempt. Keys in this order (they have always come
/// sorted).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeadLetter<'a> {
    pub attempts: u32,
    #[serde(with = "instant")]
    pub created_at: Timestamp,
    pub delivery_id: String,
    #[serde(with = "instant")]
    pub due_at: Timestamp,
    pub id: String,
    pub job_id: Uuid,
    #[serde(default)]
    pub payload: Option<Payload<'a>>,
    pub reason: Cow<'a, str>,
    pub target: TargetOut<'a>,
    #[serde(rename = "type")]
    pub job_type: Option<Cow<'a, str>>,
}

/// One page of dead letters. Keys sorted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(description = "A page of dead letters."))]
pub struct DeadLetterList<'a> {
    /// Oldest first.
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<crate::openapi::DeadLetter>))]
    pub dead_letters: Vec<DeadLetter<'a>>,
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub next_cursor: Option<String>,
}
