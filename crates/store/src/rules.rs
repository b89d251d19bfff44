//! The decisions every backend applies the same way: how a lifecycle transition or an edit
//! changes a job's state and due times, and how states are encoded. Pure functions, so the
//! backends differ only in how they read and write rows.

use hourglass_core::{Action, Completion, JobState};

use crate::{JobRecord, JobUpdate, Result, StoreError, Transition};

/// What a job's row becomes after a transition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TransitionPlan {
    /// Nothing to write (cancelling a cancelled job, repeating a keyed trigger): answer with the
    /// job as it is.
    Unchanged,
    Apply {
        state: JobState,
        /// Nominal due time of the pending (or last) occurrence.
        due: Option<i64>,
        /// When it fires; `None` leaves the due index (paused, finished).
        fire: Option<i64>,
        /// A cancelled job frees its key for a new job.
        clear_key: bool,
        /// A keyed trigger: the key to remember as the job's last keyed trigger, whose
        /// occurrence is due `now`.
        trigger_key: Option<String>,
        now: i64,
    },
}

pub(crate) fn plan_transition(job: &JobRecord, transition: Transition) -> Result<TransitionPlan> {
    let invalid = |action| StoreError::InvalidState {
        state: job.state,
        action,
    };
    let next_due = job.next_due.map(|t| t.as_millisecond());
    let now = match transition {
        Transition::Pause { now }
        | Transition::Resume { now }
        | Transition::Cancel { now }
        | Transition::Trigger { now, .. } => now.as_millisecond(),
    };
    let mut trigger_key = None;
    let (state, due, fire, clear_key) = match transition {
        Transition::Pause { .. } => match job.state {
            JobState::Active | JobState::Paused => (JobState::Paused, next_due, None, false),
            _ => return Err(invalid("pause")),
        },
        Transition::Resume { now } => match job.state {
            JobState::Paused | JobState::Active => {
                let due = if job.spec.schedule.is_recurring() {
                    job.spec.schedule.next_for_run(
                        hourglass_core::sub_saturating(now, std::time::Duration::from_millis(1)),
                        job.runs,
                    )
                } else {
                    job.next_due
                };
                match due {
                    Some(due) => {
                        let due = due.as_millisecond();
                        (JobState::Active, Some(due), Some(due), false)
                    }
                    None => (JobState::Completed, None, None, false),
                }
            }
            _ => return Err(invalid("resume")),
        },
        Transition::Cancel { .. } => match job.state {
            JobState::Cancelled => return Ok(TransitionPlan::Unchanged),
            _ => (JobState::Cancelled, next_due, None, true),
        },
        Transition::Trigger { key, .. } => {
            // A retried request: it was applied once, whatever happened to the job since (the
            // occurrence ran, the job was paused or cancelled), so it is answered, not repeated.
            if key.is_some() && job.last_trigger.as_ref().map(|t| &t.key) == key.as_ref() {
                return Ok(TransitionPlan::Unchanged);
            }
            trigger_key = key;
            match job.state {
                JobState::Cancelled => return Err(invalid("trigger")),
                _ => (JobState::Active, Some(now), Some(now), false),
            }
        }
    };
    Ok(TransitionPlan::Apply {
        state,
        due,
        fire,
        clear_key,
        trigger_key,
        now,
    })
}

/// What a job's row becomes after an edit: (state, due, fire).
pub(crate) fn plan_update(
    job: &JobRecord,
    update: &JobUpdate,
) -> Result<(JobState, Option<i64>, Option<i64>)> {
    if job.state.is_terminal() {
        return Err(StoreError::InvalidState {
            state: job.state,
            action: "update",
        });
    }
    let due = update.next_due.map(|t| t.as_millisecond());
    // A paused job stays paused (out of the due index) with its new due time.
    let (state, fire) = match (job.state, due) {
        (_, None) => (JobState::Completed, None),
        (JobState::Paused, Some(_)) => (JobState::Paused, None),
        (_, Some(due)) => (JobState::Active, Some(due)),
    };
    Ok((
        state,
        due.or(job.next_due.map(|t| t.as_millisecond())),
        fire,
    ))
}

/// What a job's `attempt` becomes when `c` finishes it as a dead letter: every attempt its
/// occurrence made failed, the last one included (which no retry counted). `None` keeps it.
pub(crate) fn dead_lettered_after(c: &Completion) -> Option<u32> {
    match (&c.action, &c.attempt) {
        (Action::DeadLetter { .. }, Some(a)) => Some(a.attempt),
        _ => None,
    }
}

pub(crate) fn state_code(state: JobState) -> i64 {
    match state {
        JobState::Active => 0,
        JobState::Paused => 1,
        JobState::Completed => 2,
        JobState::Failed => 3,
        JobState::Cancelled => 4,
    }
}

pub(crate) fn state_from_code(code: i64) -> Result<JobState> {
    Ok(match code {
        0 => JobState::Active,
        1 => JobState::Paused,
        2 => JobState::Completed,
        3 => JobState::Failed,
        4 => JobState::Cancelled,
        other => return Err(StoreError::Corrupt(format!("unknown state code {other}"))),
    })
}
