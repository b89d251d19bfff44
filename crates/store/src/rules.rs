//! The decisions every backend applies the same way: how a lifecycle transition, an edit or a
//! completion changes a job's state and due times, what a completion records, and how states and
//! run outcomes are encoded. Pure functions, so the backends differ only in how they read and
//! write rows.

use hourglass_core::{Action, AttemptRecord, Completion, JobState};

use crate::{JobRecord, JobUpdate, LAST_ERROR_BYTES, Result, StoreError, Transition};

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
                        let fire = job.spec.schedule.fire_time(job.id, due).as_millisecond();
                        (
                            JobState::Active,
                            Some(due.as_millisecond()),
                            Some(fire),
                            false,
                        )
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
            // A trigger's occurrence is asked for now: it fires now, whatever the jitter.
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

/// What a job's row becomes after an edit: (state, due, fire). The new due time fires when the
/// new schedule's jitter says.
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
    if update.read_token.is_some_and(|read| read != job.token) {
        return Err(StoreError::Changed);
    }
    let due = update.next_due.map(|t| t.as_millisecond());
    // A paused job stays paused (out of the due index) with its new due time.
    let (state, fire) = match (job.state, due) {
        (_, None) => (JobState::Completed, None),
        (JobState::Paused, Some(_)) => (JobState::Paused, None),
        (_, Some(due)) => {
            let fire = update
                .spec
                .schedule
                .fire_time(job.id, hourglass_core::from_ms(due));
            (JobState::Active, Some(fire.as_millisecond()))
        }
    };
    Ok((
        state,
        due.or(job.next_due.map(|t| t.as_millisecond())),
        fire,
    ))
}

/// How a run ended. Its text is stored (`runs.outcome`) and shown by the API, so it never
/// changes for an existing value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunOutcome {
    /// The attempt failed and the occurrence is tried again later.
    Retry,
    Delivered,
    /// The attempt failed for good.
    DeadLetter,
    /// The misfire policy dropped the occurrence.
    Skipped,
}

impl RunOutcome {
    const ALL: [RunOutcome; 4] = [
        RunOutcome::Retry,
        RunOutcome::Delivered,
        RunOutcome::DeadLetter,
        RunOutcome::Skipped,
    ];

    /// The stored text.
    pub fn as_str(self) -> &'static str {
        match self {
            RunOutcome::Retry => "retry",
            RunOutcome::Delivered => "delivered",
            RunOutcome::DeadLetter => "dead_letter",
            RunOutcome::Skipped => "skipped",
        }
    }

    /// The outcome a stored text names. Stores write only [`RunOutcome::as_str`], so any other
    /// text is a damaged record.
    pub fn from_stored(text: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|o| o.as_str() == text)
            .ok_or_else(|| StoreError::Corrupt(format!("a run with the unknown outcome {text:?}")))
    }
}

/// What an applied completion does to its job's row (which also always drops the lease and sets
/// `updated_ms` to the completion time). Instants are unix milliseconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RowChange {
    /// The occurrence is attempted again at `fire`: its failed attempt is counted
    /// (`attempt + 1`); state and due time stay.
    Retry { fire: i64 },
    /// The job moves on to its next occurrence, due at `due` and firing at `fire` (later by the
    /// schedule's jitter), with no attempts yet; `ran` occurrences ran and `skipped` were dropped
    /// on the way.
    Advance {
        due: i64,
        fire: i64,
        ran: u64,
        skipped: u64,
    },
    /// The job has no next occurrence: it ends in `state`, out of the due index. `attempt`, when
    /// present, replaces the stored attempt count (see [`CompletionPlan`]).
    Finish {
        state: JobState,
        ran: u64,
        skipped: u64,
        attempt: Option<u32>,
    },
}

impl RowChange {
    /// When the job fires next, if it stays in the due index.
    #[cfg_attr(
        not(feature = "postgres"),
        allow(dead_code, reason = "only the PostgreSQL backend announces due times")
    )]
    pub(crate) fn fire(&self) -> Option<i64> {
        match *self {
            RowChange::Retry { fire } => Some(fire),
            RowChange::Advance { fire, .. } => Some(fire),
            RowChange::Finish { .. } => None,
        }
    }
}

/// The run history entry an applied completion adds: its attempt as the engine made it, and how
/// it ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct PlannedRun<'a> {
    pub attempt: &'a AttemptRecord,
    pub outcome: RunOutcome,
}

/// The dead letter an applied completion records, beside the job's namespace, spec and payload
/// as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PlannedDeadLetter<'a> {
    pub reason: &'a str,
    /// Attempts the occurrence made (0 when the completion carries no attempt).
    pub attempts: u32,
}

/// What an applied completion does to the job's `last_error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LastError<'a> {
    /// Left as it is: the completion records no attempt (a skipped occurrence).
    Keep,
    /// Replaced: by the failed attempt's error (at most [`LAST_ERROR_BYTES`]), or cleared by a
    /// delivery (`None`).
    Write(Option<&'a str>),
}

impl<'a> LastError<'a> {
    /// As two values a SQL statement binds: whether to write, and what.
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    pub(crate) fn as_columns(self) -> (bool, Option<&'a str>) {
        match self {
            LastError::Keep => (false, None),
            LastError::Write(error) => (true, error),
        }
    }
}

/// Everything a completion does when its fencing token is still current. A backend checks the
/// token, then writes exactly this; a stale completion changes and records nothing.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CompletionPlan<'a> {
    pub row: RowChange,
    /// Recorded only when the completion carries an attempt.
    pub run: Option<PlannedRun<'a>>,
    pub dead_letter: Option<PlannedDeadLetter<'a>>,
    pub last_error: LastError<'a>,
}

/// `error` cut to at most [`LAST_ERROR_BYTES`], at a character boundary.
fn bounded(error: &str) -> &str {
    &error[..error.floor_char_boundary(LAST_ERROR_BYTES)]
}

/// Decides what `c` does to its job. A dead-lettered occurrence that ends its job leaves the job
/// with the attempts that occurrence made, the last one included (which no retry counted).
pub(crate) fn plan_completion(c: &Completion) -> CompletionPlan<'_> {
    let (row, outcome, dead_letter) = match &c.action {
        Action::Retry { at } => (
            RowChange::Retry {
                fire: at.as_millisecond(),
            },
            RunOutcome::Retry,
            None,
        ),
        Action::Delivered { next, skipped }
        | Action::DeadLetter { next, skipped, .. }
        | Action::Skipped { next, skipped }
        | Action::HandedOff { next, skipped } => {
            let skipped = *skipped;
            let (ran, finished, outcome, dead_letter) = match &c.action {
                // Counted as a run here; its outcome is recorded by the job it was handed to,
                // under this job's id (`Completion::origin`), so this completion records none.
                Action::HandedOff { .. } => (1, JobState::Completed, RunOutcome::Skipped, None),
                Action::Delivered { .. } => (1, JobState::Completed, RunOutcome::Delivered, None),
                Action::DeadLetter { reason, .. } => (
                    1,
                    JobState::Failed,
                    RunOutcome::DeadLetter,
                    Some(PlannedDeadLetter {
                        reason: reason.as_str(),
                        attempts: c.attempt.as_ref().map_or(0, |a| a.attempt),
                    }),
                ),
                _ => (0, JobState::Completed, RunOutcome::Skipped, None),
            };
            let row = match next {
                Some(next) => RowChange::Advance {
                    due: next.due.as_millisecond(),
                    fire: next.fire.as_millisecond(),
                    ran,
                    skipped,
                },
                None => RowChange::Finish {
                    state: finished,
                    ran,
                    skipped,
                    attempt: dead_letter.and(c.attempt.as_ref()).map(|a| a.attempt),
                },
            };
            (row, outcome, dead_letter)
        }
    };
    // The job keeps the error of its latest failed attempt until an occurrence is delivered.
    let last_error = match (outcome, &c.attempt) {
        (RunOutcome::Delivered, _) => LastError::Write(None),
        (RunOutcome::Retry | RunOutcome::DeadLetter, Some(attempt)) => {
            LastError::Write(attempt.error.as_deref().map(bounded))
        }
        (RunOutcome::Retry | RunOutcome::DeadLetter | RunOutcome::Skipped, _) => LastError::Keep,
    };
    CompletionPlan {
        row,
        run: c
            .attempt
            .as_ref()
            .map(|attempt| PlannedRun { attempt, outcome }),
        dead_letter,
        last_error,
    }
}

/// The skipped run a completion records when the job's overlap policy dropped occurrences on
/// the way to its next one: `(due, record)`, due the first dropped occurrence's due time, the
/// record attempt 0, outcome [`RunOutcome::Skipped`] and an error that opens with the reason
/// `overlap`. Stamped when the run that overlapped ended (at least a millisecond after it
/// started, so that it sorts after that run and a store keying runs by start time keeps both).
pub(crate) fn overlap_run(c: &Completion) -> Option<(i64, AttemptRecord)> {
    let next = match &c.action {
        Action::Delivered { next, .. }
        | Action::DeadLetter { next, .. }
        | Action::Skipped { next, .. }
        | Action::HandedOff { next, .. } => next.as_ref()?,
        Action::Retry { .. } => return None,
    };
    let skip = next.overlap?;
    let ended = c.attempt.as_ref().map_or(c.due.as_millisecond(), |a| {
        let started = a.started_at.as_millisecond();
        started
            .saturating_add(i64::from(a.latency_ms))
            .max(started.saturating_add(1))
    });
    let plural = if skip.count == 1 { "" } else { "s" };
    Some((
        skip.first.as_millisecond(),
        AttemptRecord {
            attempt: 0,
            started_at: hourglass_core::from_ms(ended),
            latency_ms: 0,
            status: None,
            error: Some(format!(
                "{}: {} occurrence{plural} fell due while the previous one was in flight",
                hourglass_core::overlap::REASON,
                skip.count
            )),
            response: None,
        },
    ))
}

/// Counts of one queue (or of all), as [`crate::QueueStats`] and [`crate::StoreGauges`] report
/// them, for the backends that count in Rust (the memory and DynamoDB stores).
#[derive(Default)]
pub(crate) struct Visibility {
    pub available: u64,
    pub in_flight: u64,
    pub scheduled: u64,
    pub oldest_available: Option<i64>,
}

impl Visibility {
    /// Counts one active message whose fire time is `fire`. A lease that lapsed (its expiry is
    /// the fire time, and it has passed) is available again since that expiry.
    pub(crate) fn count(&mut self, fire: i64, leased: bool, now: i64) {
        if fire <= now {
            self.available += 1;
            self.oldest_available = Some(self.oldest_available.map_or(fire, |o| o.min(fire)));
        } else if leased {
            self.in_flight += 1;
        } else {
            self.scheduled += 1;
        }
    }

    /// Messages counted.
    #[cfg_attr(
        not(feature = "dynamodb"),
        allow(
            dead_code,
            reason = "only the DynamoDB store skips empty queues by their total"
        )
    )]
    pub(crate) fn total(&self) -> u64 {
        self.available + self.in_flight + self.scheduled
    }
}

/// A state as the backends store it.
#[cfg(any(feature = "sqlite", feature = "postgres", feature = "dynamodb"))]
pub(crate) fn state_code(state: JobState) -> i64 {
    match state {
        JobState::Active => 0,
        JobState::Paused => 1,
        JobState::Completed => 2,
        JobState::Failed => 3,
        JobState::Cancelled => 4,
    }
}

#[cfg(any(feature = "sqlite", feature = "postgres", feature = "dynamodb"))]
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

#[cfg(test)]
mod tests {
    use hourglass_core::from_ms;

    use super::*;

    #[test]
    fn a_run_outcome_reads_back_what_was_stored_and_refuses_other_text() {
        for outcome in RunOutcome::ALL {
            assert_eq!(
                RunOutcome::from_stored(outcome.as_str()).ok(),
                Some(outcome)
            );
        }
        for damaged in ["", "Delivered", "unknown", "dead-letter"] {
            match RunOutcome::from_stored(damaged) {
                Err(StoreError::Corrupt(message)) => assert!(message.contains("outcome")),
                other => panic!("{damaged:?} read as {other:?}"),
            }
        }
    }

    fn completion(action: Action, attempt: Option<u32>) -> Completion {
        Completion {
            job_id: uuid::Uuid::now_v7(),
            token: hourglass_core::FencingToken::from_i64(7),
            due: from_ms(1_000),
            attempt: attempt.map(|n| AttemptRecord {
                attempt: n,
                started_at: from_ms(1_010),
                latency_ms: 4,
                status: Some(500),
                error: Some("boom".into()),
                response: None,
            }),
            action,
            callback: None,
            origin: None,
        }
    }

    #[test]
    fn run_outcomes_keep_their_stored_text() {
        let stored = [
            (RunOutcome::Retry, "retry"),
            (RunOutcome::Delivered, "delivered"),
            (RunOutcome::DeadLetter, "dead_letter"),
            (RunOutcome::Skipped, "skipped"),
        ];
        for (outcome, text) in stored {
            assert_eq!(outcome.as_str(), text);
        }
    }

    #[test]
    fn a_retry_counts_the_attempt_and_fires_again() {
        let c = completion(Action::Retry { at: from_ms(5_000) }, Some(1));
        let plan = plan_completion(&c);
        assert_eq!(plan.row, RowChange::Retry { fire: 5_000 });
        assert_eq!(plan.row.fire(), Some(5_000));
        let run = plan.run.expect("the attempt is recorded");
        assert_eq!((run.attempt.attempt, run.outcome), (1, RunOutcome::Retry));
        assert_eq!(plan.dead_letter, None);
        assert_eq!(plan.last_error, LastError::Write(Some("boom")));
    }

    #[test]
    fn a_delivery_advances_a_recurring_job_or_completes_a_one_off() {
        let next = Action::Delivered {
            next: Some(hourglass_core::Next {
                due: from_ms(9_000),
                fire: from_ms(9_400),
                overlap: None,
            }),
            skipped: 2,
        };
        let c = completion(next, Some(1));
        let plan = plan_completion(&c);
        assert_eq!(
            plan.row,
            RowChange::Advance {
                due: 9_000,
                fire: 9_400,
                ran: 1,
                skipped: 2
            }
        );
        assert_eq!(plan.row.fire(), Some(9_400), "a jittered next fires late");
        assert_eq!(plan.run.map(|r| r.outcome), Some(RunOutcome::Delivered));

        let last = Action::Delivered {
            next: None,
            skipped: 0,
        };
        let c = completion(last, Some(3));
        let plan = plan_completion(&c);
        assert_eq!(
            plan.row,
            RowChange::Finish {
                state: JobState::Completed,
                ran: 1,
                skipped: 0,
                attempt: None
            }
        );
        assert_eq!(plan.row.fire(), None);
        assert_eq!(plan.dead_letter, None);
        assert_eq!(
            plan.last_error,
            LastError::Write(None),
            "a delivery clears it"
        );
    }

    #[test]
    fn a_dead_letter_fails_a_finished_job_with_every_attempt_counted() {
        let action = |next| Action::DeadLetter {
            next,
            skipped: 1,
            reason: "gave up".into(),
        };
        let c = completion(action(None), Some(3));
        let plan = plan_completion(&c);
        assert_eq!(
            plan.row,
            RowChange::Finish {
                state: JobState::Failed,
                ran: 1,
                skipped: 1,
                attempt: Some(3)
            }
        );
        assert_eq!(plan.run.map(|r| r.outcome), Some(RunOutcome::DeadLetter));
        assert_eq!(
            plan.dead_letter,
            Some(PlannedDeadLetter {
                reason: "gave up",
                attempts: 3
            })
        );
        assert_eq!(plan.last_error, LastError::Write(Some("boom")));

        // A recurring job moves on (its attempts start again) and still records the letter.
        let c = completion(
            action(Some(hourglass_core::Next::at(from_ms(9_000)))),
            Some(3),
        );
        let plan = plan_completion(&c);
        assert_eq!(
            plan.row,
            RowChange::Advance {
                due: 9_000,
                fire: 9_000,
                ran: 1,
                skipped: 1
            }
        );
        assert_eq!(plan.dead_letter.map(|d| d.attempts), Some(3));

        // Without an attempt: no run, a letter of zero attempts, the job's count kept.
        let c = completion(action(None), None);
        let plan = plan_completion(&c);
        assert_eq!(plan.run, None);
        assert_eq!(plan.dead_letter.map(|d| d.attempts), Some(0));
        assert!(matches!(plan.row, RowChange::Finish { attempt: None, .. }));
        assert_eq!(
            plan.last_error,
            LastError::Keep,
            "no attempt, no error of one"
        );
    }

    #[test]
    fn a_skipped_occurrence_ran_nothing() {
        let skipped = Action::Skipped {
            next: None,
            skipped: 1,
        };
        let c = completion(skipped, None);
        let plan = plan_completion(&c);
        assert_eq!(
            plan.row,
            RowChange::Finish {
                state: JobState::Completed,
                ran: 0,
                skipped: 1,
                attempt: None
            }
        );
        assert_eq!(plan.run, None);
        assert_eq!(plan.dead_letter, None);
        assert_eq!(plan.last_error, LastError::Keep);
    }

    #[test]
    fn a_long_error_is_kept_up_to_its_bound_at_a_character_boundary() {
        // 'é' is two bytes: at an odd offset the bound falls inside one.
        let long = format!("x{}", "é".repeat(LAST_ERROR_BYTES));
        let mut c = completion(Action::Retry { at: from_ms(5_000) }, Some(1));
        if let Some(a) = c.attempt.as_mut() {
            a.error = Some(long.clone());
        }
        let LastError::Write(Some(kept)) = plan_completion(&c).last_error else {
            panic!("a failed attempt writes its error");
        };
        assert_eq!(kept.len(), LAST_ERROR_BYTES - 1);
        assert!(long.starts_with(kept));

        // A failed attempt without an error text clears the previous one: it is the latest.
        if let Some(a) = c.attempt.as_mut() {
            a.error = None;
        }
        assert_eq!(plan_completion(&c).last_error, LastError::Write(None));
    }

    #[test]
    fn an_overlap_skip_becomes_one_skipped_run_after_the_run_that_overlapped() {
        let skip = hourglass_core::overlap::OverlapSkip {
            first: from_ms(2_000),
            count: 3,
        };
        let next = hourglass_core::Next {
            overlap: Some(skip),
            ..hourglass_core::Next::at(from_ms(5_000))
        };
        for action in [
            Action::Delivered {
                next: Some(next),
                skipped: 3,
            },
            Action::DeadLetter {
                next: Some(next),
                skipped: 3,
                reason: "http 410".into(),
            },
        ] {
            let c = completion(action, Some(1));
            let (due, run) = overlap_run(&c).expect("a skipped run");
            assert_eq!(due, 2_000);
            assert_eq!((run.attempt, run.latency_ms, run.status), (0, 0, None));
            let ran = c.attempt.as_ref().unwrap();
            assert!(run.started_at > ran.started_at);
            assert_eq!(
                run.error.as_deref(),
                Some("overlap: 3 occurrences fell due while the previous one was in flight")
            );
        }
        // Nothing dropped, a retry or no next occurrence: no skipped run.
        let plain = Action::Delivered {
            next: Some(hourglass_core::Next::at(from_ms(5_000))),
            skipped: 0,
        };
        assert_eq!(overlap_run(&completion(plain, Some(1))), None);
        let retry = Action::Retry { at: from_ms(9_000) };
        assert_eq!(overlap_run(&completion(retry, Some(1))), None);
    }
}
