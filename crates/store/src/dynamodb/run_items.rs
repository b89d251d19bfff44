//! The run items a completion writes: its attempt's, and the skipped run of the occurrences an
//! overlap policy dropped. Each is recorded under the job and occurrence the completion's run
//! belongs to (`Completion::run_of`): its own, or the `allow` job's whose occurrence it delivered.

use hourglass_core::Completion;

use super::Inner;
use super::item::{Item, key, n, run_pk, run_sk, s};
use super::table::TTL;
use crate::RunCursor;

/// The run item of a completion's attempt (`None` for a skip).
pub(super) fn run_item(
    inner: &Inner,
    c: &Completion,
    plan: &crate::rules::CompletionPlan<'_>,
) -> Option<Item> {
    let run = plan.run.as_ref().filter(|_| inner.history)?;
    Some(attempt_item(
        inner,
        c,
        c.run_of().1.as_millisecond(),
        run.attempt,
        run.outcome,
    ))
}

/// The skipped run item of the occurrences a completion's overlap policy dropped, if any
/// (`rules::overlap_run`): one more put, only on a completion that dropped some.
pub(super) fn overlap_item(inner: &Inner, c: &Completion) -> Option<Item> {
    let (due, attempt) = crate::rules::overlap_run(c).filter(|_| inner.history)?;
    Some(attempt_item(
        inner,
        c,
        due,
        &attempt,
        crate::rules::RunOutcome::Skipped,
    ))
}

/// A run item: `attempt` of the occurrence of `c`'s job due at `due`, under the job its runs are
/// recorded as (`Completion::run_of`).
fn attempt_item(
    inner: &Inner,
    c: &Completion,
    due: i64,
    attempt: &hourglass_core::AttemptRecord,
    outcome: crate::rules::RunOutcome,
) -> Item {
    // The token orders one job's runs that start in the same millisecond. Runs recorded under
    // another job (its `allow` occurrences, each delivered by a job of its own) come from many
    // jobs' tokens, so theirs also carry 36 bits of the delivering job's id: below 2^53.
    let own_seq = c.token.as_i64() + 1;
    let seq = match c.origin {
        None => own_seq,
        Some(_) => {
            let id_bits = (c.job_id.as_u128() & 0xF_FFFF_FFFF) as i64;
            (id_bits << 16) | (own_seq & 0xFFFF)
        }
    };
    let cursor = RunCursor {
        started_ms: attempt.started_at.as_millisecond(),
        seq,
    };
    let job_id = c.run_of().0;
    let mut item = key(run_pk(job_id), &run_sk(cursor));
    let mut put_attr = |name: &str, value| {
        item.insert(name.to_owned(), value);
    };
    put_attr("job", s(job_id.to_string()));
    put_attr("seq", n(cursor.seq));
    put_attr("due", n(due));
    put_attr("att", n(i64::from(attempt.attempt)));
    put_attr("started", n(cursor.started_ms));
    put_attr("lat", n(i64::from(attempt.latency_ms)));
    if let Some(status) = attempt.status {
        put_attr("status", n(i64::from(status)));
    }
    if let Some(error) = &attempt.error {
        put_attr("err", s(error));
    }
    if let Some(response) = &attempt.response {
        put_attr("resp", s(response));
    }
    put_attr("outcome", s(outcome.as_str()));
    if let Some(ttl) = inner.finished_ttl(cursor.started_ms) {
        put_attr(TTL, n(ttl));
    }
    item
}
