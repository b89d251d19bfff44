//! A job: what a user asked for — a schedule, a target and the policies that govern delivery.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::{MisfirePolicy, OverlapPolicy, RetryPolicy, Schedule};

pub type JobId = uuid::Uuid;

/// The job state machine:
///
/// ```text
///            pause              cancel
///   active ────────► paused ──────────► cancelled
///     │  ◄──────────                       ▲
///     │    resume                          │ cancel (from active too)
///     ├─ last occurrence delivered ──► completed
///     └─ one-off dead-lettered ──────► failed
/// ```
/// `trigger` moves any non-cancelled job back to active with an extra occurrence due now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobState {
    Active,
    Paused,
    Completed,
    Failed,
    Cancelled,
}

impl JobState {
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
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|state| state.as_str() == s)
    }

    /// Terminal jobs have no pending occurrence.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            JobState::Completed | JobState::Failed | JobState::Cancelled
        )
    }
}

/// Everything about a job except its identity, payload and progress. Persisted by the stores in
/// this (storage) encoding; the payload is kept beside it as raw JSON text so it is never re-encoded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobSpec {
    /// Caller-chosen type name, forwarded to the target so one endpoint can route by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_type: Option<String>,
    pub schedule: Schedule,
    pub target: Target,
    #[serde(default, skip_serializing_if = "RetryPolicy::is_default")]
    pub retry: RetryPolicy,
    #[serde(default, skip_serializing_if = "MisfirePolicy::is_default")]
    pub misfire: MisfirePolicy,
    /// What happens to occurrences that fall due while the previous one is in flight.
    #[serde(default, skip_serializing_if = "OverlapPolicy::is_default")]
    pub overlap: OverlapPolicy,
    /// The job's backfills ([`crate::backfill`]): kept by the backfill request, not set by
    /// clients.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backfill: Option<crate::backfill::Backfill>,
    /// The job's labels ([`crate::labels`]), which listings and bulk actions select by. Last, and
    /// left out when empty, so a spec without labels is stored as before.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: crate::Labels,
    /// Where to report an occurrence that failed ([`crate::callback`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_failure: Option<crate::callback::Callback>,
    /// Where to report an occurrence that was delivered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_success: Option<crate::callback::Callback>,
    /// Set on the jobs that deliver callbacks, by the engine, never by clients: such a job
    /// triggers no callbacks itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callback_of: Option<crate::callback::CallbackOf>,
    /// The job's key, kept here when the job has callbacks so that their events can name it:
    /// a claim does not carry the key, and a job's key never changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callback_key: Option<String>,
    /// Set, by the engine and never by clients, on the job an `allow` job hands one occurrence
    /// to ([`crate::overlap`]): the job and occurrence it delivers, which name its delivery id
    /// and under which its runs are recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub occurrence_of: Option<OccurrenceOf>,
}

/// The mark of a job that delivers one occurrence of another (an `allow` job's,
/// [`crate::overlap`]): that job, and the occurrence's nominal due time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OccurrenceOf {
    pub job_id: JobId,
    pub due: Timestamp,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    Webhook(WebhookTarget),
    /// A pull queue: at the due time the occurrence becomes available to workers that lease from
    /// the queue of this name in the job's namespace. The engine never fires these itself.
    Queue(QueueTarget),
    /// An event on an EventBridge bus (PutEvents): the payload is the event's `detail`.
    Eventbridge(EventBridgeTarget),
    /// A message in an SQS queue (SendMessageBatch).
    Sqs(SqsTarget),
    /// A message to an SNS topic (PublishBatch).
    Sns(SnsTarget),
    /// An asynchronous invocation of a Lambda function.
    Lambda(LambdaTarget),
    /// A JetStream publish, acknowledged by the stream.
    Nats(NatsTarget),
    /// An entry appended to a Redis stream (XADD).
    RedisStream(RedisStreamTarget),
    /// A persistent AMQP 0-9-1 message, confirmed by the broker.
    Amqp(AmqpTarget),
}

impl Target {
    /// The label used in metrics and logs, and the target's key in the API's JSON.
    pub fn kind(&self) -> &'static str {
        match self {
            Target::Webhook(_) => "webhook",
            Target::Queue(_) => "queue",
            Target::Eventbridge(_) => "eventbridge",
            Target::Sqs(_) => "sqs",
            Target::Sns(_) => "sns",
            Target::Lambda(_) => "lambda",
            Target::Nats(_) => "nats",
            Target::RedisStream(_) => "redis_stream",
            Target::Amqp(_) => "amqp",
        }
    }

    /// Every kind [`Target::kind`] can answer.
    pub const KINDS: [&'static str; 9] = [
        "webhook",
        "queue",
        "eventbridge",
        "sqs",
        "sns",
        "lambda",
        "nats",
        "redis_stream",
        "amqp",
    ];

    /// The operator's named connection a bus or cloud target publishes through; `None` for
    /// webhooks and queues.
    pub fn connection(&self) -> Option<&str> {
        self.published_to().map(|(connection, _)| connection)
    }

    /// A bus or cloud target's connection and the resource it names there (bus, queue URL,
    /// topic, function, subject, stream or exchange).
    fn published_to(&self) -> Option<(&str, &str)> {
        match self {
            Target::Webhook(_) | Target::Queue(_) => None,
            Target::Eventbridge(t) => Some((&t.connection, &t.bus)),
            Target::Sqs(t) => Some((&t.connection, &t.queue_url)),
            Target::Sns(t) => Some((&t.connection, &t.topic_arn)),
            Target::Lambda(t) => Some((&t.connection, &t.function)),
            Target::Nats(t) => Some((&t.connection, &t.subject)),
            Target::RedisStream(t) => Some((&t.connection, &t.stream)),
            Target::Amqp(t) => Some((&t.connection, &t.exchange)),
        }
    }

    /// Where a fired occurrence goes, as one key per receiving service: a webhook's scheme, host
    /// and port (`https://api.example.com:443`); for a connection target its kind, connection
    /// and the resource it names (`sqs://aws/https://sqs.../orders`). Deliveries are capped per
    /// destination, so one slow receiver cannot hold every delivery slot. `None` for queues:
    /// workers pull them.
    pub fn destination(&self) -> Option<String> {
        match self {
            Target::Webhook(w) => {
                // `scheme://host:port`, written directly: the dispatcher asks for every delivery.
                let (scheme, host) = (w.url.scheme(), w.url.host_str().unwrap_or_default());
                let mut port = itoa::Buffer::new();
                let port = port.format(w.url.port_or_known_default().unwrap_or_default());
                let mut destination =
                    String::with_capacity(scheme.len() + 3 + host.len() + 1 + port.len());
                destination.push_str(scheme);
                destination.push_str("://");
                destination.push_str(host);
                destination.push(':');
                destination.push_str(port);
                Some(destination)
            }
            _ => self
                .published_to()
                .map(|(connection, resource)| format!("{}://{connection}/{resource}", self.kind())),
        }
    }

    /// The queue name for a queue target.
    pub fn queue(&self) -> Option<&str> {
        match self {
            Target::Queue(q) => Some(&q.name),
            _ => None,
        }
    }
}

/// `{"eventbridge": {"connection": "events", "bus": "orders", "source": "hourglass",
/// "detail_type": "job-reminder"}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventBridgeTarget {
    pub connection: String,
    /// The event bus's name or ARN.
    pub bus: String,
    pub source: String,
    pub detail_type: String,
}

/// `{"sqs": {"connection": "aws", "queue_url": "https://...", "group_id": "..."}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SqsTarget {
    pub connection: String,
    pub queue_url: String,
    /// The message group of a FIFO queue (the job id when left out); not sent to standard queues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_id: Option<String>,
}

/// `{"sns": {"connection": "aws", "topic_arn": "arn:aws:sns:..."}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnsTarget {
    pub connection: String,
    pub topic_arn: String,
    /// The message group of a FIFO topic (the job id when left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_id: Option<String>,
}

/// `{"lambda": {"connection": "aws", "function": "name or ARN"}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LambdaTarget {
    pub connection: String,
    pub function: String,
}

/// `{"nats": {"connection": "bus", "subject": "jobs.reminder"}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NatsTarget {
    pub connection: String,
    pub subject: String,
}

/// `{"redis_stream": {"connection": "r", "stream": "jobs"}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedisStreamTarget {
    pub connection: String,
    pub stream: String,
}

/// `{"amqp": {"connection": "rmq", "exchange": "jobs", "routing_key": "reminder"}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AmqpTarget {
    pub connection: String,
    /// The exchange; `""` is the default exchange, which routes by queue name.
    pub exchange: String,
    #[serde(default)]
    pub routing_key: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueTarget {
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WebhookTarget {
    pub url: url::Url,
    /// Extra request headers chosen by the user. Names are lowercase and never override the
    /// delivery and signature headers Hourglass sets.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// At most this many deliveries a second from the job's namespace to the URL's destination
    /// (scheme, host and port), shared with the namespace's other jobs there: for a receiver
    /// with limits of its own. `None`: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<u32>,
    /// Deliver in batches: occurrences of the namespace's jobs with this same URL, headers and
    /// batch size that are ready together go out as one signed `POST` of up to `max_items`
    /// deliveries, each with its own delivery id and verdict. `None`: one request a delivery.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<WebhookBatch>,
}

/// How a webhook target's deliveries are batched (see [`WebhookTarget::batch`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookBatch {
    /// Most deliveries in one request.
    pub max_items: u16,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_targets_destination_is_its_kind_connection_and_resource() {
        let nats = Target::Nats(NatsTarget {
            connection: "bus".into(),
            subject: "jobs.reminder".into(),
        });
        assert_eq!(nats.connection(), Some("bus"));
        assert_eq!(
            nats.destination().as_deref(),
            Some("nats://bus/jobs.reminder")
        );
        let sqs = Target::Sqs(SqsTarget {
            connection: "aws".into(),
            queue_url: "https://sqs.example/1/q".into(),
            group_id: None,
        });
        assert_eq!(
            sqs.destination().as_deref(),
            Some("sqs://aws/https://sqs.example/1/q")
        );
        let webhook = Target::Webhook(WebhookTarget {
            url: "https://api.example.com/hook".parse().unwrap(),
            headers: BTreeMap::new(),
            rate_limit: None,
            batch: None,
        });
        assert_eq!(webhook.connection(), None);
        assert_eq!(
            webhook.destination().as_deref(),
            Some("https://api.example.com:443")
        );
        let queue = Target::Queue(QueueTarget { name: "q".into() });
        assert_eq!((queue.connection(), queue.destination()), (None, None));
    }
}
