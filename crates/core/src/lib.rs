//! Hourglass domain model: jobs, schedules, occurrences, completions and the policies that decide
//! when an occurrence fires, retries or is skipped.
//!
//! Architecture Invariant: this crate does no I/O. It knows nothing of SQL, HTTP or the API's wire
//! shapes. Its serde derives describe the *storage* encoding of a job spec, which the stores persist;
//! the API has its own wire types and converts at the edge.

pub mod clock;
pub mod duration;
pub mod job;
pub mod misfire;
pub mod occurrence;
pub mod retry;
pub mod schedule;
pub mod validation;

pub use clock::{Clock, ManualClock, SystemClock};
pub use job::{JobId, JobSpec, JobState, QueueTarget, Target, WebhookTarget};
pub use misfire::MisfirePolicy;
pub use occurrence::{Action, AttemptRecord, Completion, DeliveryId, Occurrence};
pub use retry::RetryPolicy;
pub use schedule::{Schedule, ScheduleKind};
pub use validation::ValidationError;

/// Instants are whole milliseconds since the Unix epoch everywhere in Hourglass.
pub fn to_ms(ts: jiff::Timestamp) -> i64 {
    ts.as_millisecond()
}

/// The inverse of [`to_ms`]; out-of-range values saturate to jiff's bounds.
pub fn from_ms(ms: i64) -> jiff::Timestamp {
    jiff::Timestamp::from_millisecond(ms).unwrap_or(if ms < 0 {
        jiff::Timestamp::MIN
    } else {
        jiff::Timestamp::MAX
    })
}
