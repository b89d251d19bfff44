//! A job: what a user asked for — a schedule, a target and the policies that govern delivery.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{MisfirePolicy, RetryPolicy, Schedule};

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
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    Webhook(WebhookTarget),
    /// A pull queue: at the due time the occurrence becomes available to workers that lease from
    /// the queue of this name in the job's namespace. The engine never fires these itself.
    Queue(QueueTarget),
}

impl Target {
    /// The label used in metrics and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Target::Webhook(_) => "webhook",
            Target::Queue(_) => "queue",
        }
    }

    /// Where a fired occurrence goes, as one key per receiving service: a webhook's scheme, host
    /// and port (`https://api.example.com:443`). Deliveries are capped per destination, so one
    /// slow receiver cannot hold every delivery slot. `None` for queues: workers pull them.
    pub fn destination(&self) -> Option<String> {
        match self {
            Target::Webhook(w) => Some(format!(
                "{}://{}:{}",
                w.url.scheme(),
                w.url.host_str().unwrap_or_default(),
                w.url.port_or_known_default().unwrap_or_default()
            )),
            Target::Queue(_) => None,
        }
    }

    /// The queue name for a queue target.
    pub fn queue(&self) -> Option<&str> {
        match self {
            Target::Queue(q) => Some(&q.name),
            Target::Webhook(_) => None,
        }
    }
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
}
