//! Callbacks: what a job asks to be told when one of its occurrences fails for good
//! (`on_failure`) or is delivered (`on_success`).
//!
//! A callback is delivered as a job of its own: the completion that dead-letters or delivers the
//! occurrence carries a [`CallbackJob`], and the store creates it in the same transaction, due
//! at once. So a callback is never lost between the completion and its send (a crash leaves
//! either neither or both), it is retried, signed, capped and dead-lettered like any delivery,
//! and it is visible as a job. A callback job is marked ([`JobSpec::callback_of`]) and carries no
//! callbacks itself, so a failing callback dead-letters and never starts another.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::{JobId, JobSpec, RetryPolicy, Target};

/// A job's callback: where its event goes, and which events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Callback {
    pub target: Target,
    /// On `on_failure` only: also on every failed attempt that will be retried, not just when
    /// the occurrence is dead-lettered.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub every_attempt: bool,
    /// Whether the event carries the job's payload.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub include_payload: bool,
    /// The callback delivery's own retry policy (the default one when left out).
    #[serde(default, skip_serializing_if = "RetryPolicy::is_default")]
    pub retry: RetryPolicy,
}

/// Which event a callback reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallbackEvent {
    /// An attempt failed (with `every_attempt`) or the occurrence was dead-lettered.
    Failed,
    /// The occurrence was delivered (for a queue target: a worker acknowledged it).
    Succeeded,
}

impl CallbackEvent {
    /// The event's name in its JSON and the callback job's type.
    pub fn as_str(self) -> &'static str {
        match self {
            CallbackEvent::Failed => "occurrence.failed",
            CallbackEvent::Succeeded => "occurrence.succeeded",
        }
    }
}

/// The mark of a callback job: whose occurrence it reports, and which event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallbackOf {
    pub job_id: JobId,
    pub event: CallbackEvent,
}

/// A job a completion creates, in its namespace and in the same transaction, when the
/// completion is applied (never when it is refused as stale): a callback, or the job an `allow`
/// job hands an occurrence to ([`crate::overlap`]). Its one occurrence is due at `due`.
#[derive(Debug, Clone, PartialEq)]
pub struct CallbackJob {
    pub id: JobId,
    pub namespace: String,
    pub spec: JobSpec,
    /// As JSON text: a callback's event, or the handed-off occurrence's payload.
    pub payload: Option<String>,
    pub due: Timestamp,
}

impl JobSpec {
    /// The callback to fire for `event`, if the job has one and is not a callback itself
    /// (callbacks never trigger callbacks). `dead_lettered` tells a failure that ends the
    /// occurrence from one that will be retried, which only `every_attempt` reports.
    pub fn callback_for(&self, event: CallbackEvent, dead_lettered: bool) -> Option<&Callback> {
        if self.callback_of.is_some() {
            return None;
        }
        match event {
            CallbackEvent::Succeeded => self.on_success.as_ref(),
            CallbackEvent::Failed => self
                .on_failure
                .as_ref()
                .filter(|c| dead_lettered || c.every_attempt),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{QueueTarget, Schedule};

    fn spec() -> JobSpec {
        let target = Target::Queue(QueueTarget { name: "q".into() });
        JobSpec {
            job_type: None,
            schedule: Schedule::at(Timestamp::UNIX_EPOCH),
            target: target.clone(),
            retry: RetryPolicy::default(),
            misfire: Default::default(),
            overlap: Default::default(),
            backfill: None,
            labels: Default::default(),
            on_failure: Some(Callback {
                target: target.clone(),
                every_attempt: false,
                include_payload: false,
                retry: RetryPolicy::default(),
            }),
            on_success: Some(Callback {
                target,
                every_attempt: false,
                include_payload: true,
                retry: RetryPolicy::default(),
            }),
            callback_of: None,
            callback_key: None,
            occurrence_of: None,
        }
    }

    #[test]
    fn a_failure_is_reported_when_dead_lettered_or_with_every_attempt() {
        let mut spec = spec();
        assert!(spec.callback_for(CallbackEvent::Failed, true).is_some());
        assert!(spec.callback_for(CallbackEvent::Failed, false).is_none());
        assert!(spec.callback_for(CallbackEvent::Succeeded, false).is_some());
        if let Some(c) = spec.on_failure.as_mut() {
            c.every_attempt = true;
        }
        assert!(spec.callback_for(CallbackEvent::Failed, false).is_some());
    }

    #[test]
    fn a_callback_job_never_calls_back() {
        let mut spec = spec();
        spec.callback_of = Some(CallbackOf {
            job_id: JobId::nil(),
            event: CallbackEvent::Failed,
        });
        assert!(spec.callback_for(CallbackEvent::Failed, true).is_none());
        assert!(spec.callback_for(CallbackEvent::Succeeded, false).is_none());
    }

    #[test]
    fn a_spec_without_callbacks_is_stored_as_before() {
        let mut spec = spec();
        spec.on_failure = None;
        spec.on_success = None;
        let json = serde_json::to_value(&spec).unwrap();
        assert!(json.get("on_failure").is_none() && json.get("callback_of").is_none());
        let old = serde_json::json!({"schedule": json["schedule"], "target": json["target"]});
        assert_eq!(serde_json::from_value::<JobSpec>(old).unwrap(), spec);
    }
}
