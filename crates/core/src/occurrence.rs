//! An occurrence is one due time of a job; a completion is what became of one delivery attempt.

use std::fmt;
use std::sync::Arc;

use jiff::Timestamp;

use crate::overlap::OverlapSkip;
use crate::{Claim, FencingToken, JobId, JobSpec, Schedule};

/// One pending due time of a job, as claimed by a node. `token` is the fencing token of the claim:
/// a completion carrying an older token is rejected by the store.
#[derive(Debug, Clone)]
pub struct Occurrence {
    pub job_id: JobId,
    pub namespace: Arc<str>,
    /// The nominal due time. With the job id it forms the occurrence's identity.
    pub due: Timestamp,
    /// When this attempt should run: the due time, or a retry time after it.
    pub fire_at: Timestamp,
    /// 1-based number of the attempt about to be made.
    pub attempt: u32,
    pub token: FencingToken,
    /// Occurrences of this job that already ran (delivered or dead-lettered).
    pub runs_done: u64,
    pub spec: Arc<JobSpec>,
    /// The payload as raw JSON text, sent byte for byte.
    pub payload: Option<Arc<str>>,
    /// Set when this claim took the occurrence over from another lease owner whose lease on it
    /// lapsed (a node that died or stalled, or a worker's unacked queue lease through another
    /// node): that owner, as its lease named it. `None` for an occurrence nobody held, or one
    /// this same owner held before.
    pub lapsed_owner: Option<Arc<str>>,
}

impl Occurrence {
    /// The delivery id receivers deduplicate by: the job's and the due time's, or, for a job
    /// that delivers another's occurrence (an `allow` job's), that occurrence's.
    pub fn delivery_id(&self) -> DeliveryId {
        let (job_id, due) = self.origin();
        DeliveryId::new(job_id, due)
    }

    /// The job and nominal time this occurrence is one of, as targets and the run history name
    /// it: its own, or those of the occurrence it delivers for another job
    /// ([`JobSpec::occurrence_of`]).
    pub fn origin(&self) -> (JobId, Timestamp) {
        match &self.spec.occurrence_of {
            Some(of) => (of.job_id, of.due),
            None => (self.job_id, self.due),
        }
    }

    /// The claim this occurrence was handed out under.
    pub fn claim(&self) -> Claim {
        Claim::new(self.job_id, self.token)
    }
}

/// The idempotency key of an occurrence's delivery: the same on every retry and redelivery.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DeliveryId(String);

impl DeliveryId {
    pub fn new(job_id: JobId, due: Timestamp) -> Self {
        // `{job id, 32 hex digits}_{due ms}`, written directly: this runs for every delivery.
        let mut hex = uuid::Uuid::encode_buffer();
        let mut ms = itoa::Buffer::new();
        let ms = ms.format(due.as_millisecond());
        let mut id = String::with_capacity(uuid::fmt::Simple::LENGTH + 1 + ms.len());
        id.push_str(job_id.simple().encode_lower(&mut hex));
        id.push('_');
        id.push_str(ms);
        Self(id)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for DeliveryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The record of one delivery attempt, kept as the job's run history.
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptRecord {
    pub attempt: u32,
    pub started_at: Timestamp,
    pub latency_ms: u32,
    /// The HTTP status, when a response arrived.
    pub status: Option<u16>,
    /// Why the attempt failed, when it did. Never contains secrets.
    pub error: Option<String>,
    /// The start of what the target answered to a failed attempt (a webhook's response body, at
    /// most [`RESPONSE_SNIPPET_BYTES`]), so a failure can be read without the receiver's logs.
    /// Never request headers or payloads.
    pub response: Option<String>,
}

/// The most bytes of a failed attempt's response kept with its run.
pub const RESPONSE_SNIPPET_BYTES: usize = 1024;

/// A job's next occurrence: its due (nominal) time, which names it, and when it fires (later by
/// the schedule's jitter, [`Schedule::fire_time`]; the same without jitter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Next {
    pub due: Timestamp,
    pub fire: Timestamp,
    /// The occurrences before it that the job's overlap policy dropped, recorded as one skipped
    /// run with the reason [`crate::overlap::REASON`].
    pub overlap: Option<OverlapSkip>,
}

impl Next {
    /// The occurrence of `job` due at `due` under `schedule`, firing when its jitter says.
    pub fn of(schedule: &Schedule, job: JobId, due: Timestamp) -> Self {
        Self {
            due,
            fire: schedule.fire_time(job, due),
            overlap: None,
        }
    }

    /// An occurrence that fires at its due time.
    pub fn at(due: Timestamp) -> Self {
        Self {
            due,
            fire: due,
            overlap: None,
        }
    }
}

/// What the store must do with a claimed occurrence.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Delivered. The job moves to `next`, or completes when there is none.
    Delivered { next: Option<Next>, skipped: u64 },
    /// Failed, to be attempted again at `at`.
    Retry { at: Timestamp },
    /// Failed for good: recorded as a dead letter; the job moves on like after a delivery, or is
    /// marked failed when it has no next occurrence.
    DeadLetter {
        next: Option<Next>,
        skipped: u64,
        reason: String,
    },
    /// Not delivered because the misfire policy dropped it.
    Skipped { next: Option<Next>, skipped: u64 },
    /// Handed off to a job of its own, created with this completion ([`crate::overlap`]'s
    /// `allow`): it counts as one of the job's runs, and the job moves to `next` at once, or
    /// completes when there is none. Its outcome is recorded by the job it was handed to.
    HandedOff { next: Option<Next>, skipped: u64 },
}

impl Action {
    /// When the job fires again after this action: its next occurrence, or the retry.
    pub fn fire_again(&self) -> Option<Timestamp> {
        match self {
            Action::Delivered { next, .. }
            | Action::DeadLetter { next, .. }
            | Action::Skipped { next, .. }
            | Action::HandedOff { next, .. } => next.map(|next| next.fire),
            Action::Retry { at } => Some(*at),
        }
    }
}

/// The outcome of handling one claimed occurrence, applied by the store under the claim's fence.
#[derive(Debug, Clone)]
pub struct Completion {
    pub job_id: JobId,
    pub token: FencingToken,
    pub due: Timestamp,
    pub attempt: Option<AttemptRecord>,
    pub action: Action,
    /// The job to create with this completion, atomically, if it is applied: a callback
    /// ([`crate::callback`]), or the job an occurrence is handed off to ([`Action::HandedOff`]).
    pub callback: Option<Box<crate::CallbackJob>>,
    /// The occurrence the attempt's run is recorded under, when the job delivers another's
    /// ([`JobSpec::occurrence_of`]); `None` records it under `job_id` and `due`. Boxed: only
    /// those jobs' completions carry one, and completions are passed around by value.
    pub origin: Option<Box<crate::OccurrenceOf>>,
}

impl Completion {
    /// A completion of `occ`'s claim, its run recorded under the occurrence's origin.
    pub fn of(
        occ: &Occurrence,
        attempt: Option<AttemptRecord>,
        action: Action,
        callback: Option<Box<crate::CallbackJob>>,
    ) -> Self {
        Self {
            job_id: occ.job_id,
            token: occ.token,
            due: occ.due,
            attempt,
            action,
            callback,
            origin: occ.spec.occurrence_of.map(Box::new),
        }
    }

    /// The job and nominal time the attempt's run is recorded under.
    pub fn run_of(&self) -> (JobId, Timestamp) {
        match &self.origin {
            Some(of) => (of.job_id, of.due),
            None => (self.job_id, self.due),
        }
    }

    /// The soonest this completion makes something due once written: its job again (the next
    /// occurrence or a retry), or the callback job it creates.
    pub fn due_again(&self) -> Option<Timestamp> {
        let callback = self.callback.as_ref().map(|c| c.due);
        match (self.action.fire_again(), callback) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The claim this completion is written under.
    pub fn claim(&self) -> Claim {
        Claim::new(self.job_id, self.token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delivery_id_is_stable_per_occurrence() {
        let id = uuid::Uuid::now_v7();
        let due: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        assert_eq!(DeliveryId::new(id, due), DeliveryId::new(id, due));
        assert_ne!(
            DeliveryId::new(id, due),
            DeliveryId::new(id, due + jiff::SignedDuration::from_millis(1))
        );
    }

    #[test]
    fn delivery_id_is_the_simple_job_id_and_the_due_millisecond() {
        // Receivers deduplicate by this string: its form must never change.
        let id: JobId = "0190F3C2-7B1E-7A3B-9C4D-5E6F708192A3".parse().unwrap();
        let due: Timestamp = "2026-01-01T00:00:00.123Z".parse().unwrap();
        assert_eq!(
            DeliveryId::new(id, due).as_str(),
            "0190f3c27b1e7a3b9c4d5e6f708192a3_1767225600123"
        );
        let before_1970: Timestamp = "1969-12-31T23:59:59.999Z".parse().unwrap();
        assert_eq!(
            DeliveryId::new(id, before_1970).as_str(),
            "0190f3c27b1e7a3b9c4d5e6f708192a3_-1"
        );
    }
}
