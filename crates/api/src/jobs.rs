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
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(
        description = "A job to create: when its occurrences are due (`schedule`), where they go \
            (`target`) and what they carry (`payload`). With a `key`, creating the same job again \
            is safe: the answer is the existing job (same body) or `409 key_conflict` (another \
            body)."
    )
)]
#[serde(deny_unknown_fields)]
pub struct CreateJob {
    /// An idempotency key, unique in the namespace among jobs that are not cancelled. Repeating a
    /// create with the same key and the same body returns the existing job (`200`); another body is
    /// a `409 key_conflict`. Cancelling a job frees its key. No control characters.
    #[cfg_attr(
        feature = "openapi",
        schema(nullable = false, min_length = 1, max_length = 256)
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// A free label, e.g. for filtering; sent as `hourglass-job-type`. No control characters.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(nullable = false, min_length = 1, max_length = 128)
    )]
    pub job_type: Option<String>,
    #[cfg_attr(feature = "openapi", schema(value_type = crate::openapi::Schedule))]
    pub schedule: ScheduleIn,
    pub target: TargetIn,
    /// Any JSON value, delivered as the request body. `null` or absent means no payload (the body
    /// is then `null`). At most 256 KiB serialized by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub payload: Option<Value>,
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetryIn>,
    #[cfg_attr(
        feature = "openapi",
        schema(
            nullable = false,
            value_type = Option<crate::openapi::Misfire>,
        )
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub misfire: Option<MisfireIn>,
    /// What a recurring job does with occurrences that fall due while the previous one is still
    /// in flight: `"skip"`, `"buffer_one"`, `"buffer_all"` (the default) or `"allow"`.
    #[cfg_attr(
        feature = "openapi",
        schema(nullable = false, value_type = Option<crate::openapi::Overlap>)
    )]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlap: Option<String>,
    /// Labels to select the job by (`GET /v1/jobs?label=tenant=acme`, the bulk actions): at
    /// most 16; a key is 1-63 bytes of `a-z 0-9 _ . - /` starting with a letter or digit, a
    /// value 1-255 bytes without control characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(nullable = false, value_type = Option<crate::openapi::Labels>)
    )]
    pub labels: Option<BTreeMap<String, String>>,
    /// Told when an occurrence is dead-lettered (and, with `every_attempt`, when any attempt
    /// fails): an `occurrence.failed` event delivered to its target as a job of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub on_failure: Option<CallbackIn>,
    /// Told when an occurrence is delivered (for a queue target: when a worker acknowledges
    /// it): an `occurrence.succeeded` event delivered to its target as a job of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub on_success: Option<CallbackIn>,
}

/// A callback: where a job's `occurrence.failed` or `occurrence.succeeded` events go.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(
        as = Callback,
        description = "Where a job's events go: any target a job may have, checked the same way. \
            Each event is delivered at least once, as a job of its own created with the \
            completion that caused it, signed, retried (by `retry`) and dead-lettered like any \
            delivery; a callback never causes another callback."
    )
)]
#[serde(deny_unknown_fields)]
pub struct CallbackIn {
    pub target: TargetIn,
    /// `on_failure` only: report every failed attempt, not just the dead letter.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    #[cfg_attr(feature = "openapi", schema(default = false))]
    pub every_attempt: bool,
    /// Whether the event carries the job's payload (as `payload`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    #[cfg_attr(feature = "openapi", schema(default = false))]
    pub include_payload: bool,
    /// How the callback's delivery is retried (the defaults when left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub retry: Option<RetryIn>,
}

/// A schedule: exactly one of `at`, `after`, `cron` or `every`, with `timezone` for cron and
/// `start`, `end`, `max_runs` for the recurring kinds, and `jitter` for any. Jobs show theirs in
/// the same shape (an `after` as the `at` it resolved to, an interval with its anchor as
/// `start`).
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
    /// Each occurrence fires up to this long after its due time, by an offset fixed by the job
    /// and the due time (`"10m"`); left out when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jitter: Option<String>,
    /// The name of a calendar of the job's namespace (`PUT /v1/calendars/{name}`) whose excluded
    /// days the occurrences may not fall on; left out when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calendar: Option<String>,
    /// What an occurrence on an excluded day does: `skip` (the default) does not occur,
    /// `previous` / `next` fire on the nearest included day before / after at the same wall-clock
    /// time (dropped if that would reach another occurrence). Only with `calendar`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub roll: Option<String>,
    /// The name of an anchor of the job's namespace (`PUT /v1/anchors/{name}`): without `every`,
    /// a one-off due at the anchor's instant plus `offset`; with `every`, an interval starting
    /// there. Moving the anchor re-times the job. Jobs show the instant it resolved to as `at`
    /// (or `start`) beside it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub anchor: Option<String>,
    /// A signed duration from the anchor's instant (`"-8h"`, `"30m"`); zero when left out.
    /// Only with `anchor`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset: Option<String>,
}

/// Where occurrences go: exactly one field (the others are left out when serialized).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(
        as = Target,
        min_properties = 1,
        max_properties = 1,
        description = "Where occurrences go: a webhook Hourglass calls, a pull queue workers lease \
            from, or a bus or cloud service through a connection the operator configured. Exactly \
            one.",
    )
)]
#[serde(deny_unknown_fields)]
pub struct TargetIn {
    #[cfg_attr(
        feature = "openapi",
        schema(nullable = false, value_type = Option<crate::openapi::Webhook>)
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub webhook: Option<WebhookIn>,
    /// A pull queue's name: workers lease the occurrences from it.
    #[cfg_attr(
        feature = "openapi",
        schema(
            nullable = false,
            value_type = Option<crate::openapi::QueueName>,
        )
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eventbridge: Option<EventBridgeTarget>,
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sqs: Option<SqsTarget>,
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sns: Option<SnsTarget>,
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lambda: Option<LambdaTarget>,
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nats: Option<NatsTarget>,
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redis_stream: Option<RedisStreamTarget>,
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
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
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(
        description = "Deliver in batches: occurrences of the namespace's jobs with the same URL, \
            headers and batch size that are ready together go out as one signed POST of \
            `{\"deliveries\": [{\"id\", \"job_id\", \"due_at\", \"attempt\", \"job_type\", \
            \"payload\"}, ...]}`, with `webhook-id` the batch's own id (`batch_...`) and \
            `hourglass-batch-size` the item count. Nothing waits for a batch to fill: a lone \
            occurrence goes at once. A 2xx acknowledges every item except the delivery ids a JSON \
            answer lists in `failed` (`{\"failed\": [\"<delivery id>\"]}`), which are retried \
            under their own job's retry policy; any other answer is every item's result. Leave it \
            out for one request a delivery."
    )
)]
#[serde(deny_unknown_fields)]
pub struct WebhookBatch {
    /// Most deliveries in one request, 1 to 1000.
    #[cfg_attr(
        feature = "openapi",
        schema(minimum = 1, maximum = 1000, examples(100))
    )]
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
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(
        as = Retry,
        description = "How failed deliveries of an occurrence are retried. After failed attempt n \
            the wait is a random point between half and all of min(`initial_backoff` * 2^(n-1), \
            `max_backoff`); a receiver's `Retry-After` replaces it (capped at 24 h). Fields left \
            out take their defaults: 10 attempts, `1s`, `15m`.",
    )
)]
#[serde(deny_unknown_fields)]
pub struct RetryIn {
    /// Attempts per occurrence, the first included. After the last one fails the occurrence becomes
    /// a dead letter.
    #[cfg_attr(
        feature = "openapi",
        schema(nullable = false, minimum = 1, maximum = 100, default = 10)
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    #[cfg_attr(
        feature = "openapi",
        schema(
            nullable = false,
            value_type = Option<crate::openapi::Duration>,
            default = "1s",
        )
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initial_backoff: Option<String>,
    /// At least `initial_backoff`, at most 7 days.
    #[cfg_attr(
        feature = "openapi",
        schema(
            nullable = false,
            value_type = Option<crate::openapi::Duration>,
            default = "15m",
        )
    )]
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
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(
        description = "Each field present replaces the job's whole field (an omitted `retry` \
            sub-field reverts to its default). `payload: null` removes the payload; `type: null` \
            leaves the type unchanged. A new `schedule` moves the pending occurrence to its first \
            due time from now. The key cannot be changed."
    )
)]
#[serde(deny_unknown_fields)]
pub struct PatchJob {
    /// A free label, e.g. for filtering; sent as `hourglass-job-type`. No control characters.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(nullable = false, min_length = 1, max_length = 128)
    )]
    pub job_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(
            nullable = false,
            value_type = Option<crate::openapi::Schedule>,
        )
    )]
    pub schedule: Option<ScheduleIn>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub target: Option<TargetIn>,
    /// Any JSON value, delivered as the request body. `null` or absent means no payload (the body
    /// is then `null`). At most 256 KiB serialized by default.
    #[serde(
        default,
        deserialize_with = "crate::present",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub payload: Option<Option<Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub retry: Option<RetryIn>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(
            nullable = false,
            value_type = Option<crate::openapi::Misfire>,
        )
    )]
    pub misfire: Option<MisfireIn>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(nullable = false, value_type = Option<crate::openapi::Overlap>)
    )]
    pub overlap: Option<String>,
    /// The job's new labels, replacing all of its labels (`{}` removes them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(nullable = false, value_type = Option<crate::openapi::Labels>)
    )]
    pub labels: Option<BTreeMap<String, String>>,
    /// Replaces the job's `on_failure`; `null` removes it.
    #[serde(
        default,
        deserialize_with = "crate::present",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<CallbackIn>))]
    pub on_failure: Option<Option<CallbackIn>>,
    /// Replaces the job's `on_success`; `null` removes it.
    #[serde(
        default,
        deserialize_with = "crate::present",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<CallbackIn>))]
    pub on_success: Option<Option<CallbackIn>>,
}

/// `POST /v1/jobs/batch`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(description = "Up to 1000 jobs to create in one transaction: all or none.")
)]
#[serde(deny_unknown_fields)]
pub struct BatchCreate {
    #[cfg_attr(feature = "openapi", schema(min_items = 1, max_items = 1000))]
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
    /// Label selectors (`tenant=acme`, `kind`), ANDed; each is one `label=` parameter. The
    /// server reads them apart from the other parameters (a query string repeats them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub label: Vec<String>,
    /// Only the jobs whose schedule refers to this anchor.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub anchor: Option<String>,
}

/// `POST /v1/jobs/bulk/{action}`'s query besides its `label` selectors (which repeat, and are
/// read apart from it).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct BulkQuery {
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub job_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// A bulk action's answer.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(
        description = "What a bulk action changed. A request reads at most 1000 of the selected \
            jobs, in id order from `cursor`; when it read that many, `more` is true and \
            `next_cursor` says where the next request goes on from."
    )
)]
pub struct BulkChanged {
    /// The jobs the request changed: of those it read, the ones its action applies to.
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 1000))]
    pub changed: u64,
    /// Whether more jobs may be selected past the ones this request read.
    pub more: bool,
    /// With `more`: the `cursor` of the next request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub next_cursor: Option<String>,
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

/// `POST /v1/jobs/{id}/backfill`: run each of a recurring job's nominal occurrences in
/// `[from, to)` once.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(
        description = "A past range of a recurring job's nominal occurrences to run, \
                          `[from, to)`."
    )
)]
#[serde(deny_unknown_fields)]
pub struct BackfillRequest {
    /// The first nominal time the range holds.
    #[cfg_attr(feature = "openapi", schema(value_type = crate::openapi::Instant))]
    pub from: String,
    /// The end of the range (not in it): after `from`, not in the future, and not after the
    /// job's pending due time (`next_due_at`).
    #[cfg_attr(feature = "openapi", schema(value_type = crate::openapi::Instant))]
    pub to: String,
}

/// The answer to a backfill request (`202`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(
        description = "How many occurrences the backfill runs: those of the range that no \
                          earlier backfill of the job ran (0 when all did)."
    )
)]
pub struct BackfillAccepted {
    pub occurrences: u64,
}

/// `POST /v1/schedules/preview`: a schedule as jobs take it, and how many due times to list.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(
        as = SchedulePreviewRequest,
        description = "A schedule to preview; nothing is stored.",
    )
)]
#[serde(deny_unknown_fields)]
pub struct PreviewRequest {
    #[cfg_attr(feature = "openapi", schema(value_type = crate::openapi::Schedule))]
    pub schedule: ScheduleIn,
    /// How many due times to list, 1–100 (default 10); outside that is `422 invalid_field` with
    /// field `count`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(nullable = false, minimum = 1, maximum = 100, default = 10)
    )]
    pub count: Option<u64>,
    /// The job whose jitter offsets to show (they depend on the job's id). Without it, a
    /// jittered schedule's `fire_times` are those of a stand-in job (the nil UUID): the same
    /// spread, not a future job's own times. No effect without `schedule.jitter`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(nullable = false, value_type = Option<String>, format = Uuid)
    )]
    pub job_id: Option<String>,
}

/// A schedule preview's answer: the next due times, and the schedule in words.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(description = "The next due times of a schedule, and the schedule in words.")
)]
pub struct SchedulePreview {
    /// When the next occurrences fire, earliest first, strictly increasing: `count` of them, or
    /// fewer when `end` or `max_runs` ends the schedule sooner (one for `at` and `after`).
    /// Without jitter these are the due times; with it, each due time plus its jitter offset.
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<crate::openapi::InstantOut>))]
    pub fire_times: Vec<String>,
    /// Each occurrence's due time (its identity: the time in its delivery id), as many as
    /// `fire_times` and in the same order. Present for a schedule with `jitter` or a `calendar`
    /// only: without them they equal `fire_times`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(nullable = false, value_type = Option<Vec<crate::openapi::InstantOut>>)
    )]
    pub nominal_times: Option<Vec<String>>,
    /// The schedule in English, for people; the wording may change. Cron expressions are described
    /// on their zone's wall clock, followed by the zone.
    #[cfg_attr(
        feature = "openapi",
        schema(examples(
            "At 09:30, on Monday, Tuesday, Wednesday, Thursday, and Friday (Europe/Berlin)",
            "every 15m from 2030-03-01T08:00:00.000Z, at most 3 runs",
            "once at 2030-03-01T08:00:00.000Z"
        ))
    )]
    pub description: String,
}
