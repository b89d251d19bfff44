//! What deliveries leave behind: a job's runs newest first, dead letters read and deleted, and
//! the retention sweeps of finished jobs, old runs and old dead letters.

use std::ops::Bound;

use hourglass_core::{JobId, from_ms};
use jiff::Timestamp;

use super::state::State;
use crate::{DeadLetter, Purged, Result, RunCursor, RunRecord, StoreError};

pub(super) fn runs(
    state: &State,
    namespace: Option<&str>,
    id: JobId,
    before: Option<RunCursor>,
    limit: usize,
) -> Result<Vec<RunRecord>> {
    if state.job_in(namespace, id).is_none() {
        return Err(StoreError::NotFound);
    }
    let Some(history) = state.runs_by_job.get(&id) else {
        return Ok(Vec::new());
    };
    let before = before.unwrap_or(RunCursor::NEWEST);
    let end = Bound::Excluded((before.started_ms, before.seq));
    Ok(history
        .range((Bound::Unbounded, end))
        .rev()
        .take(limit)
        .filter_map(|&(started_ms, seq)| {
            let run = state.runs.get(&seq)?;
            Some(RunRecord {
                cursor: RunCursor { started_ms, seq },
                job_id: id,
                due: from_ms(run.due),
                attempt: run.attempt,
                started_at: from_ms(run.started),
                latency_ms: run.latency_ms,
                status: run.status,
                error: run.error.clone(),
                response: run.response.clone(),
                outcome: run.outcome,
            })
        })
        .collect())
}

pub(super) fn dead_letters(
    state: &State,
    namespace: Option<&str>,
    after: Option<i64>,
    limit: usize,
) -> Result<Vec<DeadLetter>> {
    let from = Bound::Excluded(after.unwrap_or(0));
    Ok(state
        .dead_letters
        .range((from, Bound::Unbounded))
        .map(|(_, letter)| letter)
        .filter(|letter| namespace.is_none_or(|ns| ns == letter.namespace))
        .take(limit)
        .cloned()
        .collect())
}

pub(super) fn get_dead_letter(
    state: &State,
    namespace: Option<&str>,
    id: i64,
) -> Result<Option<DeadLetter>> {
    Ok(state
        .dead_letters
        .get(&id)
        .filter(|letter| namespace.is_none_or(|ns| ns == letter.namespace))
        .cloned())
}

pub(super) fn delete_dead_letter(
    state: &mut State,
    namespace: Option<&str>,
    id: i64,
) -> Result<bool> {
    let found = state
        .dead_letters
        .get(&id)
        .is_some_and(|letter| namespace.is_none_or(|ns| ns == letter.namespace));
    if found {
        state.dead_letters.remove(&id);
    }
    Ok(found)
}

pub(super) fn purge(state: &mut State, before: Timestamp, limit: usize) -> Result<Purged> {
    let before = before.as_millisecond();
    let mut purged = Purged::default();
    // Finished jobs last changed before the cutoff, longest finished first, with their runs.
    let mut finished: Vec<(i64, u64, JobId)> = state
        .jobs
        .values()
        .filter(|job| job.state.is_terminal() && job.updated < before)
        .map(|job| (job.updated, job.seq, job.id))
        .collect();
    finished.sort_unstable();
    for (_, _, id) in finished.into_iter().take(limit) {
        purged.runs += state.delete_job(id);
        purged.jobs += 1;
    }
    // Then old runs of any job (recurring ones live on), in the order they were recorded.
    let old: Vec<i64> = state
        .runs
        .iter()
        .filter(|(_, run)| run.started < before)
        .map(|(seq, _)| *seq)
        .take(limit)
        .collect();
    purged.runs += old.len() as u64;
    for seq in old {
        state.delete_run(seq);
    }
    Ok(purged)
}

pub(super) fn purge_dead_letters(
    state: &mut State,
    before: Timestamp,
    limit: usize,
) -> Result<u64> {
    let before = before.as_millisecond();
    // Only the `limit` oldest letters are looked at, as the SQL sweep does.
    let old: Vec<i64> = state
        .dead_letters
        .values()
        .take(limit)
        .filter(|letter| letter.created_at.as_millisecond() < before)
        .map(|letter| letter.id)
        .collect();
    for id in &old {
        state.dead_letters.remove(id);
    }
    Ok(old.len() as u64)
}
