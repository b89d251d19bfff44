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
#[serde(deny_unknown_fields)]
pub struct LeaseRequest {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub visibility_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub types: Option<Vec<String>>,
}

/// `POST /v1/queues/{name}/ack`: 1 to 1000 receipts.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AckRequest {
    pub receipts: Vec<Receipt>,
}

/// `POST /v1/queues/{name}/nack`: the messages come back after `delay_ms` (≤ 24 h; left out:
/// the job's retry backoff).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NackRequest {
    pub receipts: Vec<Receipt>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
}

/// `POST /v1/queues/{name}/extend`: the leases run `visibility_ms` from now.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ExtendRequest {
    pub receipts: Vec<Receipt>,
    pub visibility_ms: u64,
}

/// One leased occurrence of a job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message<'a> {
    pub job_id: Uuid,
    #[serde(rename = "type")]
    pub job_type: Option<Cow<'a, str>>,
    /// The job's payload; `None` when it has none.
    #[serde(default)]
    pub payload: Option<Payload<'a>>,
    /// `<job id without hyphens>_<due unix ms>`: the same on every redelivery of this
    /// occurrence, so consumers that must act once deduplicate on it.
    pub delivery_id: Cow<'a, str>,
    /// 1-based; grows with each nack or expired lease.
    pub attempt: u32,
    pub max_attempts: u32,
    #[serde(with = "instant")]
    pub due_at: Timestamp,
    #[serde(with = "instant")]
    pub visible_until: Timestamp,
    pub receipt: Receipt,
}

/// A lease's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeaseResult<'a> {
    pub messages: Vec<Message<'a>>,
}

/// The answer to ack, nack and extend: each receipt either succeeded or failed on its own.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReceiptResults {
    pub succeeded: Vec<Receipt>,
    pub failed: Vec<ReceiptFailure>,
    /// Extend only: when the extended messages become visible again (the node's clock).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "instant::option"
    )]
    pub visible_until: Option<Timestamp>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReceiptFailure {
    pub receipt: Receipt,
    pub code: Cow<'static, str>,
    #[serde(default)]
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
pub struct Queue {
    pub name: String,
    /// Due and waiting to be leased.
    pub available: u64,
    /// Leased, not yet acked, nacked or expired.
    pub in_flight: u64,
    /// Not yet due.
    pub scheduled: u64,
    /// How long the oldest available message has been waiting, in milliseconds.
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
pub struct QueueList {
    pub queues: Vec<Queue>,
    /// The last queue of this page when more follow.
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
pub struct QueueMessage<'a> {
    pub job_id: Uuid,
    pub key: Option<Cow<'a, str>>,
    #[serde(rename = "type")]
    pub job_type: Option<Cow<'a, str>>,
    pub status: QueueMessageStatus,
    #[serde(with = "instant")]
    pub due_at: Timestamp,
    /// When a lease can take it; `None` while leased.
    #[serde(with = "instant::option")]
    pub available_at: Option<Timestamp>,
    /// While leased: when the lease lapses unless its worker settles or extends it first.
    #[serde(with = "instant::option")]
    pub leased_until: Option<Timestamp>,
    /// Failed attempts of this occurrence so far (nacks, lapsed leases).
    pub failed_attempts: u32,
    pub max_attempts: u32,
    pub delivery_id: String,
    /// Why the latest failed attempt failed.
    pub last_error: Option<Cow<'a, str>>,
    /// `None`: left out (the listing did not ask for payloads); `Some(None)`: no payload.
    #[serde(
        default,
        deserialize_with = "crate::present",
        skip_serializing_if = "Option::is_none"
    )]
    pub payload: Option<Option<Payload<'a>>>,
    #[serde(with = "instant")]
    pub created_at: Timestamp,
}

/// One page of a queue's messages, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueMessageList<'a> {
    pub messages: Vec<QueueMessage<'a>>,
    /// Present when there may be more: the next call's `cursor`.
    pub next_cursor: Option<String>,
}
