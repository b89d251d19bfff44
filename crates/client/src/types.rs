//! What the client sends, as builders with Rust's types (jobs, schedules, targets, lease
//! options, job filters): durations are `std::time::Duration` here and become `"90s"` strings or
//! `_ms` integers only on the wire. Each builder turns into the API contract's request shape
//! (`NewJob` into `hourglass_api::CreateJob`, `Schedule` into `ScheduleIn`, ...), which is what
//! goes on the wire. What it reads back is the contract's shapes too, under the names this crate
//! has always used (`JobInfo` is a `hourglass_api::Job`, `QueueStats` a `hourglass_api::Queue`).

use std::collections::BTreeMap;
use std::time::Duration;

use hourglass_api::{
    CallbackIn, CreateJob, JobListQuery, MisfireIn, RetryIn, ScheduleIn, TargetIn, WebhookIn,
};
pub use hourglass_api::{
    JobState, Node, QueueMessageStatus as MessageStatus, Receipt, ReceiptFailure, ReceiptResults,
    Run, RunList as RunPage, RunOutcome, SigningSecret,
};
use jiff::Timestamp;
use serde::{Serialize, Serializer};
use serde_json::Value;
use uuid::Uuid;

/// One leased occurrence of a job.
pub type Message = hourglass_api::Message<'static>;
/// A job as the node shows it.
pub type JobInfo = hourglass_api::Job<'static>;
/// One page of jobs.
pub type JobPage = hourglass_api::JobList<'static>;
/// An occurrence that failed its last attempt.
pub type DeadLetter = hourglass_api::DeadLetter<'static>;
/// One page of dead letters.
pub type DeadLetterPage = hourglass_api::DeadLetterList<'static>;
/// A queue's counts.
pub type QueueStats = hourglass_api::Queue;
/// A queue's message as a listing shows it.
pub type QueueMessage = hourglass_api::QueueMessage<'static>;
/// One page of a queue's messages, oldest first.
pub type QueueMessagePage = hourglass_api::QueueMessageList<'static>;

/// `Duration` → `"1h 30m"` (jiff's friendly format, which the server's duration parser reads).
/// Sub-millisecond parts are dropped: the server refuses them.
pub(crate) fn duration_text(d: Duration) -> String {
    let ms = Duration::from_millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let signed = jiff::SignedDuration::try_from(ms).unwrap_or(jiff::SignedDuration::MAX);
    format!("{signed:#}")
}

pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

// ---------------------------------------------------------------------------------------------
// Queues

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

impl From<&LeaseOptions> for hourglass_api::LeaseRequest {
    fn from(o: &LeaseOptions) -> Self {
        Self {
            max: Some(o.max),
            wait_ms: Some(millis(o.wait)),
            visibility_ms: Some(millis(o.visibility)),
            types: (!o.types.is_empty()).then(|| o.types.clone()),
        }
    }
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
///
/// It is sent as the contract's [`CreateJob`] (`CreateJob::from(&job)`), and serializes as one.
#[derive(Debug, Clone, PartialEq)]
pub struct NewJob {
    key: Option<String>,
    job_type: Option<String>,
    schedule: Schedule,
    target: Target,
    payload: Option<Value>,
    retry: Option<Retry>,
    misfire: Option<Misfire>,
    overlap: Option<Overlap>,
    labels: std::collections::BTreeMap<String, String>,
    on_failure: Option<Callback>,
    on_success: Option<Callback>,
}

impl From<&NewJob> for CreateJob {
    fn from(job: &NewJob) -> Self {
        CreateJob {
            key: job.key.clone(),
            job_type: job.job_type.clone(),
            schedule: job.schedule.clone().into(),
            target: (&job.target).into(),
            payload: job.payload.clone(),
            retry: job.retry.as_ref().map(RetryIn::from),
            misfire: job.misfire.map(MisfireIn::from),
            overlap: job.overlap.map(|o| o.as_str().to_owned()),
            labels: (!job.labels.is_empty()).then(|| job.labels.clone()),
            on_failure: job.on_failure.as_ref().map(CallbackIn::from),
            on_success: job.on_success.as_ref().map(CallbackIn::from),
        }
    }
}

impl From<NewJob> for CreateJob {
    fn from(job: NewJob) -> Self {
        CreateJob::from(&job)
    }
}

impl Serialize for NewJob {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        CreateJob::from(self).serialize(s)
    }
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
            overlap: None,
            labels: Default::default(),
            on_failure: None,
            on_success: None,
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

    /// What the job does with occurrences that fall due while the previous one is in flight.
    pub fn overlap(mut self, overlap: Overlap) -> Self {
        self.overlap = Some(overlap);
        self
    }

    /// A label to select the job by (`tenant` = `acme`); a key given twice keeps the last value.
    /// At most 16; the node checks keys and values.
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }

    /// Where an `occurrence.failed` event goes when an occurrence is dead-lettered: a
    /// [`Target`], or a [`Callback`] with its options.
    pub fn on_failure(mut self, callback: impl Into<Callback>) -> Self {
        self.on_failure = Some(callback.into());
        self
    }

    /// Where an `occurrence.succeeded` event goes when an occurrence is delivered.
    pub fn on_success(mut self, callback: impl Into<Callback>) -> Self {
        self.on_success = Some(callback.into());
        self
    }
}

/// What [`crate::Client::bulk_jobs`] does to each job its selectors pick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BulkAction {
    Pause,
    Resume,
    Cancel,
    Trigger,
}

impl BulkAction {
    /// The action's name in the path (`/v1/jobs/bulk/{action}`).
    pub fn as_str(self) -> &'static str {
        match self {
            BulkAction::Pause => "pause",
            BulkAction::Resume => "resume",
            BulkAction::Cancel => "cancel",
            BulkAction::Trigger => "trigger",
        }
    }
}

/// A job's callback ([`NewJob::on_failure`], [`NewJob::on_success`]): where its event goes,
/// delivered at least once as a job of its own.
#[derive(Debug, Clone, PartialEq)]
pub struct Callback {
    target: Target,
    every_attempt: bool,
    include_payload: bool,
    retry: Option<Retry>,
}

impl Callback {
    pub fn new(target: Target) -> Self {
        Self {
            target,
            every_attempt: false,
            include_payload: false,
            retry: None,
        }
    }

    /// `on_failure` only: report every failed attempt, not just the dead letter.
    pub fn every_attempt(mut self) -> Self {
        self.every_attempt = true;
        self
    }

    /// The event carries the job's payload.
    pub fn include_payload(mut self) -> Self {
        self.include_payload = true;
        self
    }

    /// How the callback's own delivery is retried.
    pub fn retry(mut self, retry: Retry) -> Self {
        self.retry = Some(retry);
        self
    }
}

impl From<Target> for Callback {
    fn from(target: Target) -> Self {
        Callback::new(target)
    }
}

impl From<&Callback> for CallbackIn {
    fn from(c: &Callback) -> Self {
        CallbackIn {
            target: (&c.target).into(),
            every_attempt: c.every_attempt,
            include_payload: c.include_payload,
            retry: c.retry.as_ref().map(RetryIn::from),
        }
    }
}

/// When a job fires: once ([`Schedule::at`], [`Schedule::after`]) or recurring
/// ([`Schedule::cron`], [`Schedule::every`], which take `start`, `end` and `max_runs`). It is the
/// contract's [`ScheduleIn`] with typed setters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Schedule(ScheduleIn);

impl From<Schedule> for ScheduleIn {
    fn from(schedule: Schedule) -> Self {
        schedule.0
    }
}

impl Schedule {
    pub fn at(instant: Timestamp) -> Self {
        Self(ScheduleIn {
            at: Some(instant.to_string()),
            ..ScheduleIn::default()
        })
    }

    /// Once, this long after the node accepts the job.
    pub fn after(delay: Duration) -> Self {
        Self(ScheduleIn {
            after: Some(duration_text(delay)),
            ..ScheduleIn::default()
        })
    }

    /// A cron expression (5 fields, or 6 with seconds first), in UTC unless [`Self::timezone`].
    pub fn cron(expression: impl Into<String>) -> Self {
        Self(ScheduleIn {
            cron: Some(expression.into()),
            ..ScheduleIn::default()
        })
    }

    /// The IANA zone a cron expression runs in.
    pub fn timezone(mut self, zone: impl Into<String>) -> Self {
        self.0.timezone = Some(zone.into());
        self
    }

    /// A fixed interval (at least 1 s), anchored at `start` or at creation + interval.
    pub fn every(interval: Duration) -> Self {
        Self(ScheduleIn {
            every: Some(duration_text(interval)),
            ..ScheduleIn::default()
        })
    }

    /// Each occurrence fires up to this long after its due time (at most a day), by an offset
    /// the job and the due time fix.
    pub fn jitter(mut self, jitter: Duration) -> Self {
        self.0.jitter = Some(duration_text(jitter));
        self
    }

    pub fn start(mut self, start: Timestamp) -> Self {
        self.0.start = Some(start.to_string());
        self
    }

    pub fn end(mut self, end: Timestamp) -> Self {
        self.0.end = Some(end.to_string());
        self
    }

    pub fn max_runs(mut self, runs: u64) -> Self {
        self.0.max_runs = Some(runs);
        self
    }
}

/// Where an occurrence goes when it is due. It is sent as the contract's [`TargetIn`] (which
/// also has the bus and cloud targets: build one of those as a `TargetIn` and a
/// [`CreateJob`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `{"webhook": {"url": ..., "headers": {...}}}`: the node POSTs the payload.
    Webhook {
        url: String,
        headers: BTreeMap<String, String>,
        /// At most this many deliveries a second to the URL's destination (scheme, host and
        /// port) from the job's namespace.
        rate_limit: Option<u32>,
    },
    /// `{"queue": "emails"}`: the occurrence waits on the queue until a worker leases it.
    Queue(String),
}

impl From<&Target> for TargetIn {
    fn from(target: &Target) -> Self {
        match target {
            Target::Webhook {
                url,
                headers,
                rate_limit,
            } => TargetIn {
                webhook: Some(WebhookIn {
                    url: url.clone(),
                    headers: hourglass_api::HeadersIn {
                        headers: headers.clone(),
                        repeated: None,
                    },
                    rate_limit: *rate_limit,
                    batch: None,
                }),
                ..TargetIn::default()
            },
            Target::Queue(name) => TargetIn {
                queue: Some(name.clone()),
                ..TargetIn::default()
            },
        }
    }
}

impl Serialize for Target {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        TargetIn::from(self).serialize(s)
    }
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

impl From<&Retry> for RetryIn {
    fn from(r: &Retry) -> Self {
        RetryIn {
            max_attempts: r.max_attempts,
            initial_backoff: r.initial_backoff.map(duration_text),
            max_backoff: r.max_backoff.map(duration_text),
        }
    }
}

impl Serialize for Retry {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        RetryIn::from(self).serialize(s)
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

impl From<Misfire> for MisfireIn {
    fn from(m: Misfire) -> Self {
        let name = |n: &str| Value::String(n.to_owned());
        MisfireIn(match m {
            Misfire::Skip => name("skip"),
            Misfire::Once => name("once"),
            Misfire::All { window: None } => name("all"),
            Misfire::All {
                window: Some(window),
            } => {
                let mut policy = serde_json::Map::new();
                policy.insert("policy".into(), name("all"));
                policy.insert("window".into(), Value::String(duration_text(window)));
                Value::Object(policy)
            }
        })
    }
}

impl Serialize for Misfire {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        MisfireIn::from(*self).serialize(s)
    }
}

/// What a recurring job does with occurrences that fall due while the previous one is still in
/// flight (the server's default is [`Overlap::BufferAll`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overlap {
    /// Drop them (recorded as a skipped run with the reason `overlap`).
    Skip,
    /// Keep the most recent one waiting, drop the older ones.
    BufferOne,
    /// Keep them all; each runs once the one before it ends.
    BufferAll,
    /// Run each at its time, whatever is still in flight (each is handed to a one-off job of
    /// its own, delivered under the occurrence's delivery id).
    Allow,
}

impl Overlap {
    /// The name the API uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Overlap::Skip => "skip",
            Overlap::BufferOne => "buffer_one",
            Overlap::BufferAll => "buffer_all",
            Overlap::Allow => "allow",
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
    /// Label selectors, ANDed: `tenant=acme` (equality) or `kind` (existence); at most 8.
    pub labels: Vec<String>,
    /// Only the jobs whose schedule refers to this anchor.
    pub anchor: Option<String>,
}

impl From<&JobFilter> for JobListQuery {
    fn from(f: &JobFilter) -> Self {
        JobListQuery {
            state: f.state.map(|s| s.as_str().to_owned()),
            job_type: f.job_type.clone(),
            due_before: f.due_before.map(|t| t.to_string()),
            due_after: f.due_after.map(|t| t.to_string()),
            cursor: f.cursor.clone(),
            limit: f.limit,
            payload: f.payload.then_some(true),
            label: f.labels.clone(),
            anchor: f.anchor.clone(),
        }
    }
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
            json!({"webhook": {"url": "https://example.com/h", "headers": {}}})
        );
        assert_eq!(serde_json::to_value(Misfire::Skip).unwrap(), json!("skip"));
    }

    #[test]
    fn lease_body_omits_empty_types() {
        let options = LeaseOptions::default();
        assert_eq!(
            serde_json::to_value(hourglass_api::LeaseRequest::from(&options)).unwrap(),
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
        assert_eq!(message.payload, None);
        let stats: QueueStats = serde_json::from_value(json!({
            "name": "emails", "available": 3, "in_flight": 1, "scheduled": 10,
            "oldest_available_age_ms": 1200,
        }))
        .unwrap();
        assert_eq!(
            stats.oldest_available_age(),
            Some(Duration::from_millis(1200))
        );
        let empty: QueueStats = serde_json::from_value(json!({
            "name": "x", "available": 0, "in_flight": 0, "scheduled": 0,
            "oldest_available_age_ms": null,
        }))
        .unwrap();
        assert_eq!(empty.oldest_available_age(), None);
    }
}
