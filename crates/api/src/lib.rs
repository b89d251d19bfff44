//! The contract of Hourglass's HTTP API: every request and answer shape, the error body and its
//! stable codes, as serde types. The server (`hourglass-server`) reads requests into these types,
//! validates them into core drafts and writes its answers from them; the Rust client
//! (`hourglass-client`) sends and reads the same types. The crate holds shapes only: no HTTP, no
//! validation, no domain rules (those need `hourglass-core` and stay in the server).
//!
//! Answers the server writes in bulk (jobs, leased and listed queue messages, dead letters)
//! borrow: their text fields are `Cow<'a, str>`, so a page of a thousand jobs is written from the
//! store's records without copying them. A client reads them owned, as `Job<'static>` and so on.
//!
//! Serialization is the API's wire format byte for byte: field order is key order. Shapes the
//! server once built as JSON trees (runs, dead letters, nodes, errors) keep their keys sorted.
//!
//! With the `openapi` feature (for tests and `scripts/openapi-generate` only: the server and the
//! binaries build without it), [`openapi::document`] writes the OpenAPI document from these types:
//! their field docs are the schemas' descriptions, `#[schema(...)]` adds bounds and formats.

use std::borrow::Cow;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

mod anchors;
mod answers;
mod audit;
mod calendars;
mod error;
mod jobs;
#[cfg(feature = "openapi")]
pub mod openapi;
mod queues;
mod service;
mod summary;
mod targets;

pub use anchors::{Anchor, AnchorDeleteQuery, AnchorDeleted, AnchorIn, AnchorList};
pub use answers::{
    BatchCreated, CallbackOf, CallbackOut, DeadLetter, DeadLetterList, Job, JobBrief, JobList,
    JobState, MisfireOut, OccurrenceOf, RetryOut, Run, RunList, RunOutcome, TargetOut, WebhookOut,
};
pub use audit::{AUDIT_ACTIONS, AuditEntry, AuditList, AuditQuery};
pub use calendars::{Calendar, CalendarIn, CalendarList, DateRangeIn, ExcludeIn};
pub use error::{ErrorBody, ErrorCode, ErrorDetail};
pub use jobs::{
    BackfillAccepted, BackfillRequest, BatchCreate, BulkChanged, BulkQuery, CallbackIn, CreateJob,
    HeadersIn, JobListQuery, MisfireIn, PageQuery, PatchJob, PreviewRequest, RetryIn, ScheduleIn,
    SchedulePreview, TargetIn, WebhookBatch, WebhookIn,
};
pub use queues::{
    AckRequest, ExtendRequest, LeaseRequest, LeaseResult, Message, NackRequest, Queue, QueueList,
    QueueListQuery, QueueMessage, QueueMessageList, QueueMessageStatus, QueueMessagesQuery,
    Receipt, ReceiptFailure, ReceiptResults, STALE_RECEIPT,
};
pub use service::{
    AllowedRoute, Breaker, BreakerList, Connection, ConnectionList, Identity, KeyRole, Node,
    NodeList, Published, RotateSecret, SigningSecret, Status,
};
pub use summary::{Lateness, LatenessBucket, NodeFigures, QueueFigures, StoreFigures, Summary};
pub use targets::{
    AmqpTarget, EventBridgeTarget, LambdaTarget, NatsTarget, RedisStreamTarget, SnsTarget,
    SqsTarget,
};

/// Instants as the API writes them: RFC 3339 in UTC with milliseconds
/// (`2027-03-01T08:00:00.000Z`). Any RFC 3339 instant reads.
pub mod instant {
    use super::*;
    use jiff::Timestamp;

    /// The API's text of `ts`.
    pub fn format(ts: Timestamp) -> String {
        format!("{ts:.3}")
    }

    pub fn serialize<S: Serializer>(ts: &Timestamp, s: S) -> Result<S::Ok, S::Error> {
        // Written straight into the output, without a `String` of its own.
        s.collect_str(&format_args!("{ts:.3}"))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Timestamp, D::Error> {
        let text = Cow::<str>::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }

    /// `Option<Timestamp>`: an instant or `null`.
    pub mod option {
        use super::*;

        pub fn serialize<S: Serializer>(ts: &Option<Timestamp>, s: S) -> Result<S::Ok, S::Error> {
            match ts {
                Some(ts) => super::serialize(ts, s),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Timestamp>, D::Error> {
            Option::<Cow<str>>::deserialize(d)?
                .map(|text| text.parse().map_err(serde::de::Error::custom))
                .transpose()
        }
    }
}

/// A job's payload, any JSON value, kept as its text: the server writes the stored text as it
/// is, and a reader decodes it into the type it expects ([`Payload::decode`]).
#[derive(Clone, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Payload<'a>(pub Cow<'a, RawValue>);

impl<'a> Payload<'a> {
    /// A payload borrowing JSON text already known to be valid.
    pub fn borrowed(raw: &'a RawValue) -> Self {
        Payload(Cow::Borrowed(raw))
    }

    /// The payload's JSON text.
    pub fn get(&self) -> &str {
        self.0.get()
    }

    /// The payload decoded into `T`.
    pub fn decode<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_str(self.get())
    }

    /// The payload as a JSON value.
    pub fn to_value(&self) -> serde_json::Value {
        // Valid JSON by construction (it was read or checked as JSON).
        self.decode().unwrap_or(serde_json::Value::Null)
    }

    /// The payload owning its text.
    pub fn into_owned(self) -> Payload<'static> {
        Payload(Cow::Owned(self.0.into_owned()))
    }
}

impl Payload<'static> {
    /// A payload from any serializable value.
    pub fn from_value<T: Serialize + ?Sized>(value: &T) -> Result<Self, serde_json::Error> {
        Ok(Payload(Cow::Owned(serde_json::value::to_raw_value(value)?)))
    }
}

impl fmt::Debug for Payload<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.get())
    }
}

impl PartialEq for Payload<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

/// `Option<Option<T>>` that tells an absent field (`None`) from an explicit `null` (`Some(None)`).
pub(crate) fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    Ok(Some(Option::deserialize(d)?))
}

#[cfg(test)]
mod tests;
