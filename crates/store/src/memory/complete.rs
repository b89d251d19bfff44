//! Completions under their fence: each moves its job on as `rules.rs` plans it (a retry, the
//! next occurrence, or the end), and records the run and any dead letter it makes.

use hourglass_core::{Completion, from_ms};
use jiff::Timestamp;

use super::state::{Run, State};
use crate::rules::{LastError, RowChange, RunOutcome, plan_completion};
use crate::{Applied, DeadLetter, Result};

pub(super) fn complete(
    state: &mut State,
    batch: Vec<Completion>,
    now: Timestamp,
) -> Result<Vec<Applied>> {
    let now = now.as_millisecond();
    // All or nothing, as a transaction: a callback job whose id is taken fails the whole batch
    // before anything is applied. Only an applied completion creates its job, so a stale one
    // (such as a batch written again after its answer was lost, whose jobs exist) is refused
    // as stale, not failed.
    let mut callbacks = std::collections::HashSet::new();
    for c in &batch {
        let applies = state
            .jobs
            .get(&c.job_id)
            .is_some_and(|job| job.fenced_by(c.token));
        if let Some(callback) = c.callback.as_ref().filter(|_| applies)
            && (state.jobs.contains_key(&callback.id) || !callbacks.insert(callback.id))
        {
            return Err(crate::StoreError::Unavailable(format!(
                "job id {} is already used",
                callback.id
            )));
        }
    }
    Ok(batch
        .into_iter()
        .map(|c| {
            if complete_one(state, c, now) {
                Applied::Yes
            } else {
                Applied::StaleLease
            }
        })
        .collect())
}

/// Applies one completion under its fence; `false` when the token is stale.
fn complete_one(state: &mut State, c: Completion, now: i64) -> bool {
    let Some(job) = state.jobs.get(&c.job_id) else {
        return false;
    };
    if !job.fenced_by(c.token) {
        return false;
    }
    let plan = plan_completion(&c);
    let row = plan.row.clone();
    let last_error = plan.last_error;
    state.change(c.job_id, |job| {
        match row {
            RowChange::Retry { fire } => {
                job.fire = Some(fire);
                job.attempt += 1;
            }
            RowChange::Advance {
                due,
                fire,
                ran,
                skipped,
            } => {
                job.due = Some(due);
                job.fire = Some(fire);
                job.attempt = 0;
                job.runs += ran;
                job.skipped += skipped;
            }
            RowChange::Finish {
                state,
                ran,
                skipped,
                attempt,
            } => {
                job.state = state;
                job.fire = None;
                job.attempt = attempt.unwrap_or(job.attempt);
                job.runs += ran;
                job.skipped += skipped;
            }
        }
        job.lease = None;
        // A completion ends its claim: the same token cannot settle the occurrence again.
        job.token += 1;
        job.updated = now;
        if let LastError::Write(error) = last_error {
            job.last_error = error.map(str::to_owned);
        }
    });
    if let Some(run) = &plan.run {
        // Under the occurrence's origin: a job delivering an `allow` job's occurrence records
        // its runs as that job's.
        let (run_job, run_due) = c.run_of();
        state.record_run(Run {
            job_id: run_job,
            due: run_due.as_millisecond(),
            attempt: run.attempt.attempt,
            started: run.attempt.started_at.as_millisecond(),
            latency_ms: run.attempt.latency_ms,
            status: run.attempt.status,
            error: run.attempt.error.clone(),
            response: run.attempt.response.clone(),
            outcome: run.outcome,
        });
    }
    if let Some((due, attempt)) = crate::rules::overlap_run(&c) {
        state.record_run(Run {
            job_id: c.job_id,
            due,
            attempt: attempt.attempt,
            started: attempt.started_at.as_millisecond(),
            latency_ms: attempt.latency_ms,
            status: attempt.status,
            error: attempt.error,
            response: attempt.response,
            outcome: RunOutcome::Skipped,
        });
    }
    if let Some(letter) = &plan.dead_letter
        && let Some(job) = state.jobs.get(&c.job_id)
    {
        state.letters_recorded += 1;
        // Under the occurrence's origin, as its runs: its delivery id is the parent's.
        let (job_id, due) = c.run_of();
        let letter = DeadLetter {
            id: state.letters_recorded,
            namespace: job.namespace.clone(),
            job_id,
            due,
            attempts: letter.attempts,
            reason: letter.reason.to_string(),
            spec: (*job.spec).clone(),
            payload: job.payload.clone(),
            created_at: from_ms(now),
        };
        state.dead_letters.insert(letter.id, letter);
    }
    if let Some(callback) = &c.callback {
        state.insert_job(&crate::NewJob::callback(callback, from_ms(now)));
    }
    true
}
