//! The pull queues' shapes: a lease and the messages it hands out, the receipts that settle them
//! (ack, nack, extend) and what became of each, a queue's counts, a queue's listed messages.

use std::borrow::Cow;
use std::fmt;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::{Payload, instant};

/// The code a receipt fails with when its lease is no longer current.
pub const STALE_RECEIPT: &str = "stale_receipt";

/// An opaque lease token: the proof that a consumer holds the message. Ack, nack and extend take
/// it back.
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

/// `POST /v1/queues/{name}/lease`. Bounds: `max` 1..=1000 (default 10), `wait_ms` ≤ 20 000,
/// `visibility_ms` 1 000..=43 200 000 (default 30 000), 1 to 32 `types` (left out: any type).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(description = "What a lease asks for; every field may be left out.")
)]
#[serde(deny_unknown_fields)]
pub struct LeaseRequest {
    /// Most messages to return, 1–1000 (default 10).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(nullable = false, minimum = 1, maximum = 1000, default = 10)
    )]
    pub max: Option<u32>,
    /// Long poll: when nothing is available, wait up to this long (at most 20000 ms, default 0)
    /// for a message to become due. The answer comes as soon as one is leased.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(nullable = false, minimum = 0, maximum = 20000, default = 0)
    )]
    pub wait_ms: Option<u64>,
    /// How long leased messages stay invisible to other workers (1000–43200000 ms, default
    /// 30000). A lease that lapses without ack or nack counts as a failed attempt; the message
    /// becomes available again with the next attempt number, or is dead-lettered after the
    /// job's `retry.max_attempts`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(nullable = false, minimum = 1000, maximum = 43200000, default = 30000)
    )]
    pub visibility_ms: Option<u64>,
    /// Only messages of these job types (1–32 of them).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(nullable = false, schema_with = crate::openapi::job_types)
    )]
    pub types: Option<Vec<String>>,
}

/// `POST /v1/queues/{name}/ack`: 1 to 1000 receipts.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(description = "The receipts of the messages to complete.")
)]
#[serde(deny_unknown_fields)]
pub struct AckRequest {
    #[cfg_attr(feature = "openapi", schema(value_type = crate::openapi::Receipts))]
    pub receipts: Vec<Receipt>,
}

/// `POST /v1/queues/{name}/nack`: the messages come back after `delay_ms` (≤ 24 h; left out:
/// the job's retry backoff).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(
        description = "The receipts of the messages whose attempt failed, and when to offer them \
            again."
    )
)]
#[serde(deny_unknown_fields)]
pub struct NackRequest {
    #[cfg_attr(feature = "openapi", schema(value_type = crate::openapi::Receipts))]
    pub receipts: Vec<Receipt>,
    /// Make the message available again after this long. Without it, the job's retry backoff
    /// applies. A nack of the last attempt dead-letters the message.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(nullable = false, minimum = 0, maximum = 86400000)
    )]
    pub delay_ms: Option<u64>,
}

/// `POST /v1/queues/{name}/extend`: the leases run `visibility_ms` from now.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(description = "The receipts of the messages to keep invisible, and for how long.")
)]
#[serde(deny_unknown_fields)]
pub struct ExtendRequest {
    #[cfg_attr(feature = "openapi", schema(value_type = crate::openapi::Receipts))]
    pub receipts: Vec<Receipt>,
    /// The messages stay invisible for this long from now.
    #[cfg_attr(feature = "openapi", schema(minimum = 1000, maximum = 43200000))]
    pub visibility_ms: u64,
}

/// One leased occurrence of a job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(description = "One leased occurrence of a job on a pull queue.")
)]
pub struct Message<'a> {
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = Uuid))]
    pub job_id: Uuid,
    #[serde(rename = "type")]
    #[cfg_attr(feature = "openapi", schema(required = true, value_type = Option<String>))]
    pub job_type: Option<Cow<'a, str>>,
    /// The job's payload as submitted, or null.
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(
            nullable = false,
            required = true,
            value_type = Option<serde_json::Value>,
        )
    )]
    pub payload: Option<Payload<'a>>,
    /// The same on every redelivery of this occurrence: deduplicate on it.
    #[cfg_attr(feature = "openapi", schema(value_type = crate::openapi::DeliveryId))]
    pub delivery_id: Cow<'a, str>,
    /// 1 for the first lease of this occurrence; higher after nacks and lapsed leases.
    #[cfg_attr(feature = "openapi", schema(minimum = 1))]
    pub attempt: u32,
    pub max_attempts: u32,
    #[serde(with = "instant")]
    #[cfg_attr(feature = "openapi", schema(value_type = crate::openapi::InstantOut))]
    pub due_at: Timestamp,
    #[serde(with = "instant")]
    #[cfg_attr(feature = "openapi", schema(value_type = crate::openapi::InstantOut))]
    pub visible_until: Timestamp,
    #[cfg_attr(feature = "openapi", schema(value_type = crate::openapi::Receipt))]
    pub receipt: Receipt,
}

/// A lease's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(description = "What a lease answers: the messages leased, none when the wait ran out.")
)]
pub struct LeaseResult<'a> {
    pub messages: Vec<Message<'a>>,
}

/// The answer to ack, nack and extend: each receipt either succeeded or failed on its own.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(
        description = "Per receipt: applied, or refused with `stale_receipt` (the others in the \
            request are still applied)."
    )
)]
pub struct ReceiptResults {
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<crate::openapi::Receipt>))]
    pub succeeded: Vec<Receipt>,
    #[cfg_attr(feature = "openapi", schema(inline))]
    pub failed: Vec<ReceiptFailure>,
    /// Extend only: the new end of visibility of the succeeded receipts.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "instant::option"
    )]
    #[cfg_attr(
        feature = "openapi",
        schema(
            nullable = false,
            value_type = Option<crate::openapi::InstantOut>,
        )
    )]
    pub visible_until: Option<Timestamp>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(description = "A receipt the ack, nack or extend did not apply to.")
)]
pub struct ReceiptFailure {
    #[cfg_attr(feature = "openapi", schema(value_type = crate::openapi::Receipt))]
    pub receipt: Receipt,
    #[cfg_attr(feature = "openapi", schema(schema_with = crate::openapi::receipt_failure_code))]
    pub code: Cow<'static, str>,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(required = true, value_type = String))]
    pub message: Cow<'static, str>,
}

impl ReceiptFailure {
    /// The lease expired and another consumer leased the message since.
    pub fn is_stale_receipt(&self) -> bool {
        self.code == STALE_RECEIPT
    }
}

/// A queue's counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(description = "A pull queue's counts."))]
pub struct Queue {
    #[cfg_attr(feature = "openapi", schema(value_type = crate::openapi::QueueName))]
    pub name: String,
    /// Due and not leased (lapsed leases included).
    pub available: u64,
    /// Leased, lease not yet expired.
    pub in_flight: u64,
    /// Not yet due.
    pub scheduled: u64,
    /// How long the oldest available message has been waiting.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub oldest_available_age_ms: Option<i64>,
}

impl Queue {
    /// How long the oldest available message has been waiting.
    pub fn oldest_available_age(&self) -> Option<std::time::Duration> {
        self.oldest_available_age_ms
            .map(|ms| std::time::Duration::from_millis(u64::try_from(ms).unwrap_or(0)))
    }
}

/// `GET /v1/queues`: the namespace's queues by name, a page at a time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(description = "A page of the namespace's queues, by name.")
)]
pub struct QueueList {
    pub queues: Vec<Queue>,
    /// The last queue of this page when more follow: pass it as `cursor`; `null` on the last page.
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub next_cursor: Option<String>,
}

/// `GET /v1/queues`'s query.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct QueueListQuery {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// The previous page's `next_cursor`: a queue name; this page starts after it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// `GET /v1/queues/{name}/messages`'s query.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct QueueMessagesQuery {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// `true` includes each message's payload; left out by default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload: Option<bool>,
}

/// Where a queue's message stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueMessageStatus {
    /// Due and waiting for a lease (a lapsed lease included).
    Available,
    /// Not due yet, or waiting out a nack's delay.
    Scheduled,
    /// Held by a worker until `leased_until`.
    Leased,
    /// A status this build does not know yet; the server never sends it.
    #[serde(other)]
    Unknown,
}

/// A queue's message as a listing shows it: an active job targeting the queue. It has no
/// receipt: only the worker holding a lease settles it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(
        description = "A message of a pull queue as an operator sees it: an active job targeting \
            the queue. Unlike a leased `Message` it carries no receipt: only the worker holding a \
            lease can settle it."
    )
)]
pub struct QueueMessage<'a> {
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = Uuid))]
    pub job_id: Uuid,
    #[cfg_attr(feature = "openapi", schema(required = true, value_type = Option<String>))]
    pub key: Option<Cow<'a, str>>,
    #[serde(rename = "type")]
    #[cfg_attr(feature = "openapi", schema(required = true, value_type = Option<String>))]
    pub job_type: Option<Cow<'a, str>>,
    pub status: QueueMessageStatus,
    /// Nominal due time of the message's occurrence (the delivery id's time).
    #[serde(with = "instant")]
    #[cfg_attr(feature = "openapi", schema(value_type = crate::openapi::InstantOut))]
    pub due_at: Timestamp,
    /// When a lease can take it: its due time, the end of a nack's delay, or when a lapsed lease
    /// ran out. `null` while leased.
    #[serde(with = "instant::option")]
    #[cfg_attr(
        feature = "openapi",
        schema(
            required = true,
            value_type = Option<String>,
            format = DateTime,
        )
    )]
    pub available_at: Option<Timestamp>,
    /// While leased: when the lease lapses unless the worker acks, nacks or extends it first.
    /// `null` otherwise.
    #[serde(with = "instant::option")]
    #[cfg_attr(
        feature = "openapi",
        schema(
            required = true,
            value_type = Option<String>,
            format = DateTime,
        )
    )]
    pub leased_until: Option<Timestamp>,
    /// Failed attempts of this occurrence so far (nacks, and lapsed leases once the message is
    /// leased again), as the job's `attempt`; a lease now would be attempt `failed_attempts + 1`.
    #[cfg_attr(feature = "openapi", schema(minimum = 0))]
    pub failed_attempts: u32,
    pub max_attempts: u32,
    #[cfg_attr(feature = "openapi", schema(value_type = crate::openapi::DeliveryId))]
    pub delivery_id: String,
    /// The job's `last_error`: why its latest failed attempt failed.
    #[cfg_attr(feature = "openapi", schema(required = true, value_type = Option<String>))]
    pub last_error: Option<Cow<'a, str>>,
    /// The job's payload as submitted, or null. Left out unless the listing asks for it with
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
    #[serde(with = "instant")]
    #[cfg_attr(feature = "openapi", schema(value_type = crate::openapi::InstantOut))]
    pub created_at: Timestamp,
}

/// One page of a queue's messages, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(
        description = "A page of a queue's messages; `next_cursor` is set when the page is full."
    )
)]
pub struct QueueMessageList<'a> {
    /// Oldest first (by job id, which is creation order): the messages that have waited longest
    /// come first.
    pub messages: Vec<QueueMessage<'a>>,
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub next_cursor: Option<String>,
}
