//! What a request sends about jobs: a create (alone or in a batch), an edit, a listing's query,
//! a schedule preview. Durations and instants are text here (`"90s"`, RFC 3339) and are parsed,
//! bounded and checked by the server, which names the offending field by its JSON path.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::targets::{
    AmqpTarget, EventBridgeTarget, LambdaTarget, NatsTarget, RedisStreamTarget, SnsTarget,
    SqsTarget,
};

/// `POST /v1/jobs`, and each job of a batch. It serializes as a client sends it: an absent
/// field is left out (the server reads a `null` the same way). A keyed create's idempotency
/// fingerprint does not hash this serialization but a fixed form of its own, in the server.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CreateJob {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub job_type: Option<String>,
    pub schedule: ScheduleIn,
    pub target: TargetIn,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetryIn>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub misfire: Option<MisfireIn>,
}

/// A schedule: exactly one of `at`, `after`, `cron` or `every`, with `timezone` for cron and
/// `start`, `end`, `max_runs` for the recurring kinds. Jobs show theirs in the same shape (an
/// `after` as the `at` it resolved to, an interval with its anchor as `start`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
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

/// Where occurrences go: exactly one field (the others are left out when serialized).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TargetIn {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub webhook: Option<WebhookIn>,
    /// A pull queue's name: `{"queue": "emails"}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// The bus and cloud targets, each through a connection the operator configured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eventbridge: Option<EventBridgeTarget>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sqs: Option<SqsTarget>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sns: Option<SnsTarget>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lambda: Option<LambdaTarget>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nats: Option<NatsTarget>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redis_stream: Option<RedisStreamTarget>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub amqp: Option<AmqpTarget>,
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
    pub batch: Option<WebhookBatch>,
}

/// A webhook target's batching, as sent and as shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookBatch {
    pub max_items: u32,
}

/// A webhook's extra headers, a JSON object of strings. It serializes as that object (the
/// idempotency fingerprint hashes it), and it remembers a name the body gave twice, which a map
/// would silently collapse into one of the values; the server refuses it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
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

/// The retry policy; an absent field takes the server's default.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RetryIn {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initial_backoff: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_backoff: Option<String>,
}

/// `"skip"`, `"once"`, `"all"` (1 hour window) or `{"policy": "all", "window": "6h"}`. Kept as
/// raw JSON until validation so every malformed shape gets the same `invalid_misfire` answer.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(transparent)]
pub struct MisfireIn(pub Value);

/// `PATCH /v1/jobs/{id}`: each present field replaces the job's; `"payload": null` removes it.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PatchJob {
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub job_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule: Option<ScheduleIn>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<TargetIn>,
    #[serde(
        default,
        deserialize_with = "crate::present",
        skip_serializing_if = "Option::is_none"
    )]
    pub payload: Option<Option<Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetryIn>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub misfire: Option<MisfireIn>,
}

/// `POST /v1/jobs/batch`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct BatchCreate {
    pub jobs: Vec<CreateJob>,
}

/// `GET /v1/jobs`'s query.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct JobListQuery {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub job_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub due_before: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub due_after: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// `true` includes each job's payload; a listing leaves payloads out by default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload: Option<bool>,
}

/// The query of a listing paged by `limit` and `cursor` only (a job's runs, dead letters).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PageQuery {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// `POST /v1/schedules/preview`: a schedule as jobs take it, and how many due times to list.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PreviewRequest {
    pub schedule: ScheduleIn,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
}

/// A schedule preview's answer: the next due times, and the schedule in words.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct SchedulePreview {
    pub fire_times: Vec<String>,
    pub description: String,
}
