//! Callback events: what a completion that fails or delivers an occurrence asks the store to
//! create beside it ([`hourglass_core::callback`]). The engine decides the callback job (its
//! target, retry policy, event and due time); the store creates it in the completion's
//! transaction, so a callback is delivered at least once and never for a completion that was
//! refused as stale.

use hourglass_core::{
    Action, AttemptRecord, CallbackEvent, CallbackJob, CallbackOf, JobSpec, MisfirePolicy,
    Occurrence, OverlapPolicy, Schedule,
};
use jiff::Timestamp;

/// The callback job a completion of `occ` with `attempt` and `action` creates at `now`, if the
/// job asks for one (a skipped occurrence and a callback job's own completions create none).
pub(crate) fn callback_for(
    occ: &Occurrence,
    attempt: &AttemptRecord,
    action: &Action,
    now: Timestamp,
) -> Option<Box<CallbackJob>> {
    let (event, dead_lettered) = match action {
        Action::Delivered { .. } => (CallbackEvent::Succeeded, false),
        Action::DeadLetter { .. } => (CallbackEvent::Failed, true),
        Action::Retry { .. } => (CallbackEvent::Failed, false),
        Action::Skipped { .. } | Action::HandedOff { .. } => return None,
    };
    let spec = &occ.spec;
    let callback = spec.callback_for(event, dead_lettered)?;
    // The occurrence as its job knows it: a handed-off `allow` occurrence reports its parent's.
    let (job_id, nominal) = occ.origin();
    // The event as documented in the README. `payload` is spliced in below as the job's raw
    // JSON text when the callback asks for it. `dead_lettered` tells a failure that ended the
    // occurrence from a failed attempt that will be retried (reported with `every_attempt`).
    let body = serde_json::json!({
        "event": event.as_str(),
        "job_id": job_id.to_string(),
        "key": spec.callback_key,
        "type": spec.job_type,
        "delivery_id": occ.delivery_id().to_string(),
        "nominal_at": nominal.to_string(),
        "fired_at": attempt.started_at.to_string(),
        "attempts": attempt.attempt,
        "dead_lettered": dead_lettered,
        "last_error": attempt.error,
        "response_status": attempt.status,
    });
    // Serializing a JSON value cannot fail.
    let mut payload = serde_json::to_string(&body).unwrap_or_default();
    if callback.include_payload && payload.ends_with('}') {
        // The payload was checked to be JSON when the job was created; it is sent as stored.
        payload.pop();
        payload.push_str(",\"payload\":");
        payload.push_str(occ.payload.as_deref().unwrap_or("null"));
        payload.push('}');
    }
    Some(Box::new(CallbackJob {
        id: uuid::Uuid::now_v7(),
        namespace: occ.namespace.to_string(),
        spec: JobSpec {
            job_type: Some(event.as_str().to_string()),
            schedule: Schedule::at(now),
            target: callback.target.clone(),
            retry: callback.retry,
            // A callback reports what happened, however late it can be sent.
            misfire: MisfirePolicy::default(),
            overlap: OverlapPolicy::default(),
            backfill: None,
            on_failure: None,
            on_success: None,
            callback_of: Some(CallbackOf { job_id, event }),
            callback_key: None,
            occurrence_of: None,
            // A callback job reports one job's occurrence; it is not selected with that job.
            labels: Default::default(),
        },
        payload: Some(payload),
        due: now,
    }))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use hourglass_core::{Callback, FencingToken, QueueTarget, RetryPolicy, Target, from_ms};

    use super::*;

    fn occurrence(include_payload: bool) -> Occurrence {
        let target = Target::Queue(QueueTarget { name: "q".into() });
        let callback = Callback {
            target: target.clone(),
            every_attempt: false,
            include_payload,
            retry: RetryPolicy::default(),
        };
        Occurrence {
            job_id: uuid::Uuid::nil(),
            namespace: "ns".into(),
            due: from_ms(1_000),
            fire_at: from_ms(1_000),
            attempt: 3,
            token: FencingToken::from_i64(1),
            runs_done: 0,
            spec: Arc::new(JobSpec {
                job_type: Some("reminder".into()),
                schedule: Schedule::at(from_ms(1_000)),
                target,
                retry: RetryPolicy::default(),
                misfire: MisfirePolicy::default(),
                overlap: OverlapPolicy::default(),
                backfill: None,
                on_failure: Some(callback.clone()),
                on_success: Some(callback),
                callback_of: None,
                callback_key: Some("k1".into()),
                occurrence_of: None,
                labels: Default::default(),
            }),
            payload: Some(Arc::from(r#"{"a":[1,2]}"#)),
            lapsed_owner: None,
        }
    }

    fn attempt() -> AttemptRecord {
        AttemptRecord {
            attempt: 3,
            started_at: from_ms(1_005),
            latency_ms: 2,
            status: Some(503),
            error: Some("http 503".into()),
            response: None,
        }
    }

    #[test]
    fn a_dead_letter_becomes_a_failed_event_due_now() {
        let dead = Action::DeadLetter {
            next: None,
            skipped: 0,
            reason: "http 503".into(),
        };
        let job = callback_for(&occurrence(false), &attempt(), &dead, from_ms(2_000)).unwrap();
        let event: serde_json::Value =
            serde_json::from_str(job.payload.as_deref().unwrap()).unwrap();
        assert_eq!(
            event,
            serde_json::json!({
                "event": "occurrence.failed",
                "job_id": "00000000-0000-0000-0000-000000000000",
                "key": "k1",
                "type": "reminder",
                "delivery_id": "00000000000000000000000000000000_1000",
                "nominal_at": "1970-01-01T00:00:01Z",
                "fired_at": "1970-01-01T00:00:01.005Z",
                "attempts": 3,
                "dead_lettered": true,
                "last_error": "http 503",
                "response_status": 503,
            })
        );
        assert_eq!((job.due, job.namespace.as_str()), (from_ms(2_000), "ns"));
        assert_eq!(job.spec.job_type.as_deref(), Some("occurrence.failed"));
        let mark = job.spec.callback_of.as_ref().unwrap();
        assert_eq!(mark.event, CallbackEvent::Failed);
        assert!(job.spec.on_failure.is_none() && job.spec.on_success.is_none());
    }

    #[test]
    fn a_delivery_carries_the_payload_when_asked_and_a_retry_only_with_every_attempt() {
        let delivered = Action::Delivered {
            next: None,
            skipped: 0,
        };
        let job = callback_for(&occurrence(true), &attempt(), &delivered, from_ms(2_000)).unwrap();
        let event: serde_json::Value =
            serde_json::from_str(job.payload.as_deref().unwrap()).unwrap();
        assert_eq!(event["event"], "occurrence.succeeded");
        assert_eq!(event["payload"], serde_json::json!({"a": [1, 2]}));

        let retry = Action::Retry { at: from_ms(3_000) };
        let mut occ = occurrence(false);
        assert!(callback_for(&occ, &attempt(), &retry, from_ms(2_000)).is_none());
        let mut spec = (*occ.spec).clone();
        if let Some(c) = spec.on_failure.as_mut() {
            c.every_attempt = true;
        }
        occ.spec = Arc::new(spec);
        let job = callback_for(&occ, &attempt(), &retry, from_ms(2_000)).unwrap();
        assert!(
            job.payload
                .as_deref()
                .unwrap()
                .contains("\"dead_lettered\":false")
        );
    }
}
