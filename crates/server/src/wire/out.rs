//! How jobs, runs and dead letters look in the API's answers: the contract's shapes
//! (`hourglass_api`) built from store records, borrowing their text, so a list or batch answer
//! copies no job and builds no JSON tree.

use std::borrow::Cow;

use hourglass_api::{
    CallbackOf, CallbackOut, DeadLetter as DeadLetterOut, Job, JobBrief, MisfireOut, Payload,
    RetryOut, Run, ScheduleIn,
};
use hourglass_core::duration::format_duration;
use hourglass_core::{DeliveryId, JobId, MisfirePolicy, Schedule, ScheduleKind};
use hourglass_store::{DeadLetter, JobRecord, RunRecord};
use jiff::Timestamp;
use serde_json::value::RawValue;

use super::convert::{job_state, run_outcome, target_out};

pub fn rfc3339(ts: Timestamp) -> String {
    hourglass_api::instant::format(ts)
}

/// The schedule as the API shows it; `after` appears as the `at` it resolved to.
pub fn schedule_out(s: &Schedule) -> ScheduleIn {
    let mut out = ScheduleIn {
        start: s.start.map(rfc3339),
        end: s.end.map(rfc3339),
        max_runs: s.max_runs,
        jitter: s.jitter.map(format_duration),
        calendar: s.calendar.as_ref().map(|c| c.name.clone()),
        roll: s.calendar.as_ref().map(|c| c.roll.as_str().to_owned()),
        anchor: s.anchor.as_ref().map(|a| a.name.clone()),
        offset: s.anchor.as_ref().map(|a| super::offset_out(a.offset_ms)),
        ..Default::default()
    };
    match &s.kind {
        ScheduleKind::At(at) => out.at = Some(rfc3339(*at)),
        ScheduleKind::Cron(c) => {
            out.cron = Some(c.expr().to_string());
            out.timezone = Some(c.timezone().to_string());
        }
        ScheduleKind::Every { interval, anchor } => {
            out.every = Some(format_duration(*interval));
            out.start = Some(rfc3339(*anchor));
        }
    }
    out
}

/// The misfire policy as the API shows it: a name, or the `all` policy with its window.
fn misfire_out(m: MisfirePolicy) -> MisfireOut {
    match m {
        MisfirePolicy::Skip => MisfireOut::Name(Cow::Borrowed("skip")),
        MisfirePolicy::Once => MisfireOut::Name(Cow::Borrowed("once")),
        MisfirePolicy::All { window } => MisfireOut::All {
            policy: Cow::Borrowed("all"),
            window: format_duration(window),
        },
    }
}

/// The stored payload text of job `job`, emitted as-is once checked to be JSON: it was stored
/// valid, and emitting it unchecked would let one damaged row break a whole answer (a lease of
/// many messages, a page of jobs). A damaged one is answered as `null` and logged, not silently.
pub fn payload_out(job: JobId, payload: Option<&str>) -> Option<Payload<'_>> {
    let text = payload?;
    match serde_json::from_str::<&RawValue>(text) {
        Ok(raw) => Some(Payload::borrowed(raw)),
        Err(e) => {
            tracing::error!(
                job = %job,
                error = %e,
                bytes = text.len(),
                "a stored payload is not valid JSON (the store's data is damaged); answered as null"
            );
            None
        }
    }
}

/// A job in a batch answer under `Prefer: return=minimal`.
pub fn job_brief(j: &JobRecord, created: bool) -> JobBrief<'_> {
    JobBrief {
        id: j.id,
        key: j.key.as_deref().map(Cow::Borrowed),
        state: job_state(j.state),
        next_due_at: next_due_at(j),
        created,
    }
}

fn next_due_at(j: &JobRecord) -> Option<Timestamp> {
    if j.state.is_terminal() {
        None
    } else {
        j.next_due
    }
}

/// When a jittered job's pending occurrence fires (its due time plus its jitter offset), or a
/// job with a calendar's (its due time moved by the roll, then jittered).
pub fn next_fire_at(j: &JobRecord) -> Option<Timestamp> {
    if j.spec.schedule.jitter.is_none() && j.spec.schedule.calendar.is_none() {
        return None;
    }
    next_due_at(j).map(|due| j.spec.schedule.fire_time(j.id, due))
}

/// A job as the API shows it, with its payload (a listing may leave it out: set `payload` to
/// `None`).
pub fn job_out(j: &JobRecord) -> Job<'_> {
    Job {
        id: j.id,
        namespace: Cow::Borrowed(&j.namespace),
        key: j.key.as_deref().map(Cow::Borrowed),
        job_type: j.spec.job_type.as_deref().map(Cow::Borrowed),
        state: job_state(j.state),
        schedule: schedule_out(&j.spec.schedule),
        target: target_out(&j.spec.target),
        payload: Some(payload_out(j.id, j.payload.as_deref())),
        retry: retry_out(&j.spec.retry),
        misfire: misfire_out(j.spec.misfire),
        overlap: Cow::Borrowed(j.spec.overlap.as_str()),
        labels: Cow::Borrowed(&j.spec.labels),
        next_due_at: next_due_at(j),
        next_fire_at: next_fire_at(j),
        next_attempt_at: j.next_attempt.filter(|at| Some(*at) != j.next_due),
        attempt: j.attempt,
        last_error: j.last_error.as_deref().map(Cow::Borrowed),
        runs: j.runs,
        skipped: j.skipped,
        created_at: j.created_at,
        updated_at: j.updated_at,
        on_failure: j.spec.on_failure.as_ref().map(callback_out),
        on_success: j.spec.on_success.as_ref().map(callback_out),
        callback_of: j.spec.callback_of.as_ref().map(|of| CallbackOf {
            job_id: of.job_id,
            event: of.event.as_str().to_owned(),
        }),
        occurrence_of: j.spec.occurrence_of.map(|of| hourglass_api::OccurrenceOf {
            job_id: of.job_id,
            due_at: of.due,
            delivery_id: DeliveryId::new(of.job_id, of.due).to_string(),
        }),
        created: None,
        delivery_id: None,
    }
}

fn retry_out(retry: &hourglass_core::RetryPolicy) -> RetryOut {
    RetryOut {
        max_attempts: retry.max_attempts,
        initial_backoff: format_duration(retry.initial_backoff),
        max_backoff: format_duration(retry.max_backoff),
    }
}

fn callback_out(c: &hourglass_core::Callback) -> CallbackOut<'_> {
    CallbackOut {
        target: target_out(&c.target),
        every_attempt: c.every_attempt,
        include_payload: c.include_payload,
        retry: retry_out(&c.retry),
    }
}

/// A run as the API shows it, marked when its job's `backfill` says a backfill ran it.
pub fn run_out(r: &RunRecord, backfill: Option<&hourglass_core::backfill::Backfill>) -> Run {
    Run {
        attempt: r.attempt,
        backfill: backfill.is_some_and(|b| b.marks(r.due, r.started_at)),
        delivery_id: DeliveryId::new(r.job_id, r.due).to_string(),
        due_at: r.due,
        error: r.error.clone(),
        latency_ms: r.latency_ms.into(),
        outcome: run_outcome(r.outcome),
        response: r.response.clone(),
        started_at: r.started_at,
        status_code: r.status,
    }
}

pub fn dead_letter_out(d: &DeadLetter) -> DeadLetterOut<'_> {
    DeadLetterOut {
        attempts: d.attempts,
        created_at: d.created_at,
        delivery_id: DeliveryId::new(d.job_id, d.due).to_string(),
        due_at: d.due,
        id: d.id.to_string(),
        job_id: d.job_id,
        payload: payload_out(d.job_id, d.payload.as_deref()),
        reason: Cow::Borrowed(&d.reason),
        target: target_out(&d.spec.target),
        job_type: d.spec.job_type.as_deref().map(Cow::Borrowed),
    }
}
