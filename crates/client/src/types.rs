//! The API's JSON shapes as Rust types: what the client sends (jobs, schedules, targets) and what
//! it reads back (jobs, queue messages, receipt results, queue counts, dead letters). Durations
//! are `std::time::Duration` here and become `"90s"` strings or `_ms` integers only on the wire.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use jiff::Timestamp;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;
use uuid::Uuid;

/// `Duration` → `"1h 30m"` (jiff's friendly format, which the server's duration parser reads).
/// Sub-millisecond parts are dropped: the server refuses them.
fn duration_text(d: Duration) -> String {
    let ms = Duration::from_millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let signed = jiff::SignedDuration::try_from(ms).unwrap_or(jiff::SignedDuration::MAX);
    format!("{signed:#}")
}

pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// `Option<Duration>` as an optional integer of milliseconds.
mod opt_millis {
    use super::*;

    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        d.map(millis).serialize(s)
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<u64>::deserialize(d)?.map(Duration::from_millis))
    }
}

// ---------------------------------------------------------------------------------------------
// Queues

/// An opaque lease token: the proof that this consumer holds the message. Ack, nack and extend
/// take it back.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Receipt(pub String);

impl fmt::Display for Receipt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<String> for Receipt {
    fn from(s: String) -> Self {
        Receipt(s)
    }
}

impl From<&str> for Receipt {
    fn from(s: &str) -> Self {
        Receipt(s.to_owned())
    }
}

/// What a lease asks for. The server's bounds: `max` 1..=1000, `wait` ≤ 20 s, `visibility`
/// 1 s..=12 h, at most 32 `types`; the client passes values through and lets the server judge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseOptions {
    /// At most this many messages.
    pub max: u32,
    /// Long-poll up to this long when nothing is available (zero: answer at once).
    pub wait: Duration,
    /// How long the leased messages stay invisible to other consumers.
    pub visibility: Duration,
    /// Only messages of these job types; empty means any type.
    pub types: Vec<String>,
}

impl Default for LeaseOptions {
    fn default() -> Self {
        Self {
            max: 10,
            wait: Duration::ZERO,
            visibility: Duration::from_secs(30),
            types: Vec::new(),
        }
    }
}

#[derive(Serialize)]
pub(crate) struct LeaseBody<'a> {
    pub max: u32,
    pub wait_ms: u64,
    pub visibility_ms: u64,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub types: &'a [String],
}

impl<'a> From<&'a LeaseOptions> for LeaseBody<'a> {
    fn from(o: &'a LeaseOptions) -> Self {
        Self {
            max: o.max,
            wait_ms: millis(o.wait),
            visibility_ms: millis(o.visibility),
            types: &o.types,
        }
    }
}

#[derive(Deserialize)]
pub(crate) struct LeaseAnswer {
    pub messages: Vec<Message>,
}

#[derive(Serialize)]
pub(crate) struct ReceiptsBody<'a> {
    pub receipts: &'a [Receipt],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub visibility_ms: Option<u64>,
}

/// One leased occurrence of a job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub job_id: Uuid,
    #[serde(rename = "type")]
    pub job_type: Option<String>,
    /// The job's payload; `null` when it has none.
    #[serde(default)]
    pub payload: Value,
    /// `<job id without hyphens>_<due unix ms>`: the same on every redelivery of this
    /// occurrence, so consumers that must act once deduplicate on it.
    pub delivery_id: String,
    /// 1-based; grows with each nack or expired lease.
    pub attempt: u32,
    pub max_attempts: u32,
    pub due_at: Timestamp,
    pub visible_until: Timestamp,
    pub receipt: Receipt,
}

/// The answer to ack, nack and extend: each receipt either succeeded or failed on its own.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReceiptResults {
    pub succeeded: Vec<Receipt>,
    pub failed: Vec<ReceiptFailure>,
    /// Extend only: when the extended messages become visible again (the node's clock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub visible_until: Option<Timestamp>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReceiptFailure {
    pub receipt: Receipt,
    pub code: String,
    #[serde(default)]
    pub message: String,
}

impl ReceiptFailure {
    /// The lease expired and another consumer leased the message since.
    pub fn is_stale_receipt(&self) -> bool {
        self.code == crate::error::STALE_RECEIPT
    }
}

/// A namespace's current webhook signing secret (`Client::signing_secret`). Its `Debug` leaves
/// the secret out.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SigningSecret {
    pub namespace: String,
    /// `whsec_` and the base64 of the key: what a receiver verifies deliveries with.
    pub signing_secret: String,
    /// Until when deliveries also carry a signature by the secret the last rotation replaced.
    pub previous_valid_until: Option<Timestamp>,
}

impl std::fmt::Debug for SigningSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningSecret")
            .field("namespace", &self.namespace)
            .field("signing_secret", &"<redacted>")
            .field("previous_valid_until", &self.previous_valid_until)
            .finish()
    }
}

/// A live node of the cluster, as its latest heartbeat said (`Client::list_nodes`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    /// The node's id, its name in leases.
    pub id: String,
    pub version: String,
    pub started_at: Timestamp,
    pub last_heartbeat: Timestamp,
    /// Occurrences the node held claimed at its latest heartbeat, by its own count.
    pub claims_held: u64,
}

#[derive(Deserialize)]
pub(crate) struct NodeList {
    pub nodes: Vec<Node>,
}

/// A queue's counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueStats {
    pub name: String,
    /// Due and waiting to be leased.
    pub available: u64,
    /// Leased, not yet acked, nacked or expired.
    pub in_flight: u64,
    /// Not yet due.
    pub scheduled: u64,
    /// How long the oldest available message has been waiting.
    #[serde(rename = "oldest_available_age_ms", with = "opt_millis", default)]
    pub oldest_available_age: Option<Duration>,
}

#[derive(Deserialize)]
pub(crate) struct QueueList {
    pub queues: Vec<QueueStats>,
    /// The last queue of this page when more follow.
    #[serde(default)]
    pub next_cursor: Option<String>,
}

/// Where a queue's message stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageStatus {
    /// Due and waiting for a lease (a lapsed lease included).
    Available,
    /// Not due yet, or waiting out a nack's delay.
    Scheduled,
    /// Held by a worker until `leased_until`.
    Leased,
    /// A status this client does not know yet.
    #[serde(other)]
    Unknown,
}

/// A queue's message as [`Client::queue_messages`](crate::Client::queue_messages) lists it: an
/// active job targeting the queue. It has no receipt: only the worker holding a lease settles it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueMessage {
    pub job_id: Uuid,
    pub key: Option<String>,
    #[serde(rename = "type")]
    pub job_type: Option<String>,
    pub status: MessageStatus,
    pub due_at: Timestamp,
    /// When a lease can take it; `None` while leased.
    pub available_at: Option<Timestamp>,
    /// While leased: when the lease lapses unless its worker settles or extends it first.
    pub leased_until: Option<Timestamp>,
    /// Failed attempts of this occurrence so far (nacks, lapsed leases).
    pub failed_attempts: u32,
    pub max_attempts: u32,
    pub delivery_id: String,
    /// Why the latest failed attempt failed.
    pub last_error: Option<String>,
    #[serde(default)]
    pub payload: Value,
    pub created_at: Timestamp,
}

/// One page of a queue's messages, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueMessagePage {
    pub messages: Vec<QueueMessage>,
    /// Present when there may be more: pass it as the next call's `cursor`.
    pub next_cursor: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// Jobs

/// A job to create. Build it with [`NewJob::new`] and the setters:
///
/// ```
/// # use std::time::Duration;
/// use hourglass_client::{NewJob, Schedule, Target};
/// let job = NewJob::new(Schedule::after(Duration::from_secs(90)), Target::queue("emails"))
///     .job_type("email.send")
///     .payload(serde_json::json!({"to": "a@example.com"}))
///     .key("welcome-42");
/// ```
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NewJob {
    #[serde(skip_serializing_if = "Option::is_none")]
    key: Option<String>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    job_type: Option<String>,
    schedule: Schedule,
    target: Target,
    #[serde(skip_serializing_if = "Option::is_none")]
    payload: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    retry: Option<Retry>,
    #[serde(skip_serializing_if = "Option::is_none")]
    misfire: Option<Misfire>,
}

impl NewJob {
    pub fn new(schedule: Schedule, target: Target) -> Self {
        Self {
            key: None,
            job_type: None,
            schedule,
            target,
            payload: None,
            retry: None,
            misfire: None,
        }
    }

    /// Idempotency key: creating the same key with the same body again returns the existing job.
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// The job's type; queue workers pick their handler by it.
    pub fn job_type(mut self, job_type: impl Into<String>) -> Self {
        self.job_type = Some(job_type.into());
        self
    }

    pub fn payload(mut self, payload: Value) -> Self {
        self.payload = Some(payload);
        self
    }

    /// The payload from any serializable value.
    pub fn try_payload<T: Serialize>(self, payload: &T) -> Result<Self, serde_json::Error> {
        Ok(self.payload(serde_json::to_value(payload)?))
    }

    pub fn retry(mut self, retry: Retry) -> Self {
        self.retry = Some(retry);
        self
    }

    pub fn misfire(mut self, misfire: Misfire) -> Self {
        self.misfire = Some(misfire);
        self
    }
}

/// When a job fires: once ([`Schedule::at`], [`Schedule::after`]) or recurring
/// ([`Schedule::cron`], [`Schedule::every`], which take `start`, `end` and `max_runs`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Schedule {
    #[serde(skip_serializing_if = "Option::is_none")]
    at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    after: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cron: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timezone: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    every: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    start: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    end: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_runs: Option<u64>,
}

impl Schedule {
    pub fn at(instant: Timestamp) -> Self {
        Self {
            at: Some(instant.to_string()),
            ..Self::default()
        }
    }

    /// Once, this long after the node accepts the job.
    pub fn after(delay: Duration) -> Self {
        Self {
            after: Some(duration_text(delay)),
            ..Self::default()
        }
    }

    /// A cron expression (5 fields, or 6 with seconds first), in UTC unless [`Self::timezone`].
    pub fn cron(expression: impl Into<String>) -> Self {
        Self {
            cron: Some(expression.into()),
            ..Self::default()
        }
    }

    /// The IANA zone a cron expression runs in.
    pub fn timezone(mut self, zone: impl Into<String>) -> Self {
        self.timezone = Some(zone.into());
        self
    }

    /// A fixed interval (at least 1 s), anchored at `start` or at creation + interval.
    pub fn every(interval: Duration) -> Self {
        Self {
            every: Some(duration_text(interval)),
            ..Self::default()
        }
    }

    pub fn start(mut self, start: Timestamp) -> Self {
        self.start = Some(start.to_string());
        self
    }

    pub fn end(mut self, end: Timestamp) -> Self {
        self.end = Some(end.to_string());
        self
    }

    pub fn max_runs(mut self, runs: u64) -> Self {
        self.max_runs = Some(runs);
        self
    }
}

/// Where an occurrence goes when it is due.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    /// `{"webhook": {"url": ..., "headers": {...}}}`: the node POSTs the payload.
    Webhook {
        url: String,
        #[serde(skip_serializing_if = "BTreeMap::is_empty")]
        headers: BTreeMap<String, String>,
        /// At most this many deliveries a second to the URL's destination (scheme, host and
        /// port) from the job's namespace.
        #[serde(skip_serializing_if = "Option::is_none")]
        rate_limit: Option<u32>,
    },
    /// `{"queue": "emails"}`: the occurrence waits on the queue until a worker leases it.
    Queue(String),
}

impl Target {
    pub fn webhook(url: impl Into<String>) -> Self {
        Target::Webhook {
            url: url.into(),
            headers: BTreeMap::new(),
            rate_limit: None,
        }
    }

    pub fn queue(name: impl Into<String>) -> Self {
        Target::Queue(name.into())
    }
}

/// The retry policy; unset fields take the server's defaults (10 attempts).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Retry {
    pub max_attempts: Option<u32>,
    pub initial_backoff: Option<Duration>,
    pub max_backoff: Option<Duration>,
}

impl Serialize for Retry {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Wire {
            #[serde(skip_serializing_if = "Option::is_none")]
            max_attempts: Option<u32>,
            #[serde(skip_serializing_if = "Option::is_none")]
            initial_backoff: Option<String>,
            #[serde(skip_serializing_if = "Option::is_none")]
            max_backoff: Option<String>,
        }
        Wire {
            max_attempts: self.max_attempts,
            initial_backoff: self.initial_backoff.map(duration_text),
            max_backoff: self.max_backoff.map(duration_text),
        }
        .serialize(s)
    }
}

/// What a recurring job does with occurrences it missed by more than the node's threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Misfire {
    Skip,
    Once,
    /// Fire each missed occurrence younger than `window` (server default 1 h).
    All {
        window: Option<Duration>,
    },
}

impl Serialize for Misfire {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Misfire::Skip => s.serialize_str("skip"),
            Misfire::Once => s.serialize_str("once"),
            Misfire::All { window: None } => s.serialize_str("all"),
            Misfire::All {
                window: Some(window),
            } => {
                serde_json::json!({"policy": "all", "window": duration_text(*window)}).serialize(s)
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    Active,
    Paused,
    Completed,
    Failed,
    Cancelled,
    /// A state this client does not know yet.
    #[serde(other)]
    Unknown,
}

impl JobState {
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
}

/// How a request names a job: by its id, or by the `key` it was created with. A key names the job
/// of the namespace that holds it now (a cancelled job gives its key up). Every job method takes
/// either: `client.get_job(id)` or `client.get_job(JobRef::key("nightly-export"))`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum JobRef {
    Id(Uuid),
    Key(String),
}

impl JobRef {
    pub fn key(key: impl Into<String>) -> Self {
        JobRef::Key(key.into())
    }

    /// The job's path segment, before percent-encoding: the id, or `key:` and the key.
    pub(crate) fn segment(&self) -> String {
        match self {
            JobRef::Id(id) => id.to_string(),
            JobRef::Key(key) => format!("key:{key}"),
        }
    }
}

impl From<Uuid> for JobRef {
    fn from(id: Uuid) -> Self {
        JobRef::Id(id)
    }
}

impl From<&Uuid> for JobRef {
    fn from(id: &Uuid) -> Self {
        JobRef::Id(*id)
    }
}

/// A job as the node shows it. Schedule, target, retry and misfire are kept as the node's JSON:
/// they are for display, and the node's normalised form (an `after` shown as its `at`) is not
/// what one builds a job from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobInfo {
    pub id: Uuid,
    pub namespace: String,
    pub key: Option<String>,
    #[serde(rename = "type")]
    pub job_type: Option<String>,
    pub state: JobState,
    pub schedule: Value,
    pub target: Value,
    #[serde(default)]
    pub payload: Value,
    #[serde(default)]
    pub retry: Value,
    #[serde(default)]
    pub misfire: Value,
    pub next_due_at: Option<Timestamp>,
    pub attempt: u32,
    /// The error of the latest failed attempt (at most 1 KiB), until an occurrence is delivered.
    /// (`None` from a node older than this field, too.)
    #[serde(default)]
    pub last_error: Option<String>,
    pub runs: u64,
    pub skipped: u64,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// Filters for listing jobs; `cursor` is the `next_cursor` of the previous page.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobFilter {
    pub state: Option<JobState>,
    pub job_type: Option<String>,
    pub due_before: Option<Timestamp>,
    pub due_after: Option<Timestamp>,
    /// 1..=1000, server default 100.
    pub limit: Option<usize>,
    pub cursor: Option<String>,
    /// Include each job's payload: listings leave it out (`JobInfo::payload` reads `null`)
    /// unless asked.
    pub payload: bool,
}

impl JobFilter {
    pub(crate) fn query_pairs(&self) -> Vec<(&'static str, String)> {
        let mut pairs = Vec::new();
        if let Some(state) = self.state {
            pairs.push(("state", state.as_str().to_owned()));
        }
        if let Some(t) = &self.job_type {
            pairs.push(("type", t.clone()));
        }
        if let Some(t) = self.due_before {
            pairs.push(("due_before", t.to_string()));
        }
        if let Some(t) = self.due_after {
            pairs.push(("due_after", t.to_string()));
        }
        if let Some(limit) = self.limit {
            pairs.push(("limit", limit.to_string()));
        }
        if let Some(cursor) = &self.cursor {
            pairs.push(("cursor", cursor.clone()));
        }
        if self.payload {
            pairs.push(("payload", "true".to_owned()));
        }
        pairs
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobPage {
    pub jobs: Vec<JobInfo>,
    /// Present when there may be more: pass it as the next filter's `cursor`.
    pub next_cursor: Option<String>,
}

/// One delivery attempt of a job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    pub delivery_id: String,
    pub due_at: Timestamp,
    pub attempt: u32,
    pub started_at: Timestamp,
    pub latency_ms: Option<u64>,
    pub status_code: Option<u16>,
    pub error: Option<String>,
    pub outcome: String,
}

/// One page of a job's runs, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunPage {
    pub runs: Vec<Run>,
    /// Present when there may be older runs: pass it as the next call's `cursor`.
    pub next_cursor: Option<String>,
}

/// An occurrence that failed its last attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeadLetter {
    pub id: String,
    pub job_id: Uuid,
    pub delivery_id: String,
    pub due_at: Timestamp,
    pub attempts: u32,
    pub reason: String,
    #[serde(rename = "type")]
    pub job_type: Option<String>,
    pub target: Value,
    #[serde(default)]
    pub payload: Value,
    pub created_at: Timestamp,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeadLetterPage {
    pub dead_letters: Vec<DeadLetter>,
    pub next_cursor: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_queue_job_serializes_to_the_api_shape() {
        let job = NewJob::new(
            Schedule::every(Duration::from_secs(5400)).max_runs(3),
            Target::queue("emails"),
        )
        .job_type("email.send")
        .payload(json!({"to": "a@example.com"}))
        .retry(Retry {
            max_attempts: Some(3),
            initial_backoff: Some(Duration::from_millis(1500)),
            max_backoff: None,
        })
        .misfire(Misfire::All {
            window: Some(Duration::from_secs(7200)),
        });
        assert_eq!(
            serde_json::to_value(&job).unwrap(),
            json!({
                "type": "email.send",
                "schedule": {"every": "1h 30m", "max_runs": 3},
                "target": {"queue": "emails"},
                "payload": {"to": "a@example.com"},
                "retry": {"max_attempts": 3, "initial_backoff": "1s 500ms"},
                "misfire": {"policy": "all", "window": "2h"},
            })
        );
    }

    #[test]
    fn schedules_and_targets_serialize() {
        let at: Timestamp = "2027-03-01T08:00:00Z".parse().unwrap();
        assert_eq!(
            serde_json::to_value(Schedule::at(at)).unwrap(),
            json!({"at": "2027-03-01T08:00:00Z"})
        );
        assert_eq!(
            serde_json::to_value(Schedule::cron("0 9 * * 1").timezone("Europe/Berlin")).unwrap(),
            json!({"cron": "0 9 * * 1", "timezone": "Europe/Berlin"})
        );
        assert_eq!(
            serde_json::to_value(Target::webhook("https://example.com/h")).unwrap(),
            json!({"webhook": {"url": "https://example.com/h"}})
        );
        assert_eq!(serde_json::to_value(Misfire::Skip).unwrap(), json!("skip"));
    }

    #[test]
    fn lease_body_omits_empty_types() {
        let options = LeaseOptions::default();
        assert_eq!(
            serde_json::to_value(LeaseBody::from(&options)).unwrap(),
            json!({"max": 10, "wait_ms": 0, "visibility_ms": 30000})
        );
    }

    #[test]
    fn reads_a_message_and_queue_stats() {
        let message: Message = serde_json::from_value(json!({
            "job_id": "01a1fed9-5e42-7700-a219-abc57afebe01",
            "type": null,
            "payload": null,
            "delivery_id": "01a1fed95e427700a219abc57afebe01_1700000000000",
            "attempt": 1,
            "max_attempts": 10,
            "due_at": "2023-11-14T22:13:20.000Z",
            "visible_until": "2023-11-14T22:13:50.000Z",
            "receipt": "r-1",
        }))
        .unwrap();
        assert_eq!(message.receipt, Receipt::from("r-1"));
        assert_eq!(message.payload, Value::Null);
        let stats: QueueStats = serde_json::from_value(json!({
            "name": "emails", "available": 3, "in_flight": 1, "scheduled": 10,
            "oldest_available_age_ms": 1200,
        }))
        .unwrap();
        assert_eq!(
            stats.oldest_available_age,
            Some(Duration::from_millis(1200))
        );
        let empty: QueueStats = serde_json::from_value(json!({
            "name": "x", "available": 0, "in_flight": 0, "scheduled": 0,
            "oldest_available_age_ms": null,
        }))
        .unwrap();
        assert_eq!(empty.oldest_available_age, None);
    }
}
