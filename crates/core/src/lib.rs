//! Hourglass domain model: jobs, schedules, occurrences, completions and the policies that decide
//! when an occurrence fires, retries or is skipped.
//!
//! Architecture Invariant: this crate does no I/O. It knows nothing of SQL, HTTP or the API's wire
//! shapes. Its serde derives describe the *storage* encoding of a job spec, which the stores persist;
//! the API has its own wire types and converts at the edge.

pub mod anchor;
pub mod backfill;
pub mod calendar;
pub mod callback;
pub mod claim;
pub mod clock;
pub mod cron;
pub mod duration;
pub mod jitter;
pub mod job;
pub mod labels;
pub mod misfire;
pub mod occurrence;
pub mod overlap;
pub mod retry;
pub mod schedule;
pub mod validation;

pub use anchor::ScheduleAnchor;
pub use calendar::{Calendar, DateRange, Roll, ScheduleCalendar};
pub use callback::{Callback, CallbackEvent, CallbackJob, CallbackOf};
pub use claim::{Claim, FencingToken};
pub use clock::{Clock, ManualClock, SystemClock};
pub use job::{
    AmqpTarget, EventBridgeTarget, JobId, JobSpec, JobState, LambdaTarget, NatsTarget,
    OccurrenceOf, QueueTarget, RedisStreamTarget, SnsTarget, SqsTarget, Target, WebhookBatch,
    WebhookTarget,
};
pub use labels::{Labels, Selector};
pub use misfire::MisfirePolicy;
pub use occurrence::{Action, AttemptRecord, Completion, DeliveryId, Next, Occurrence};
pub use overlap::OverlapPolicy;
pub use retry::RetryPolicy;
pub use schedule::{Schedule, ScheduleKind};
pub use validation::ValidationError;

/// Instants are whole milliseconds since the Unix epoch everywhere in Hourglass.
pub fn to_ms(ts: jiff::Timestamp) -> i64 {
    ts.as_millisecond()
}

/// A duration in whole milliseconds, saturating at `i64::MAX` (about 292 million years) so that
/// no configured or stored duration, however large, overflows the arithmetic below.
pub fn duration_ms(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// `ts + d`, saturating at the latest instant jiff represents. Time arithmetic in Hourglass goes
/// through this and [`sub_saturating`] rather than `+`/`-` on `Timestamp`, which panic on
/// overflow: a job's durations come from users (and from rows written by older versions), and
/// one absurd value must not stop the node.
pub fn add_saturating(ts: jiff::Timestamp, d: std::time::Duration) -> jiff::Timestamp {
    from_ms(ts.as_millisecond().saturating_add(duration_ms(d)))
}

/// `ts - d`, saturating at the earliest instant jiff represents.
pub fn sub_saturating(ts: jiff::Timestamp, d: std::time::Duration) -> jiff::Timestamp {
    from_ms(ts.as_millisecond().saturating_sub(duration_ms(d)))
}

/// The inverse of [`to_ms`]; out-of-range values saturate to jiff's bounds.
pub fn from_ms(ms: i64) -> jiff::Timestamp {
    jiff::Timestamp::from_millisecond(ms).unwrap_or(if ms < 0 {
        jiff::Timestamp::MIN
    } else {
        jiff::Timestamp::MAX
    })
}
