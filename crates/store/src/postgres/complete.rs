//! Completions: a batch is one statement, `unnest` of column arrays that encode each
//! completion's plan (`rules::plan_completion`), each row applied only under its current token,
//! its run and dead letter recorded in the same statement.

use hourglass_core::{Completion, JobState};
use jiff::Timestamp;

use super::PostgresStore;
use super::claim::lock_in_id_order;
use super::codec::{col, encode_spec};
use super::notify::Due;
use crate::rules::{RowChange, plan_completion, state_code};
use crate::{Applied, Result};

pub(super) async fn complete(
    store: &PostgresStore,
    batch: Vec<Completion>,
    now: Timestamp,
) -> Result<Vec<Applied>> {
    if batch.is_empty() {
        return Ok(Vec::new());
    }
    let now = now.as_millisecond();
    store
        .bounded(async {
            // One row per completion's plan, as column arrays. kind: 0 retry at `at`, 1 advance
            // to the next occurrence at `at`, 2 finish in `final_state`.
            let n = batch.len();
            let mut ids = Vec::with_capacity(n);
            let mut tokens = Vec::with_capacity(n);
            let mut dues = Vec::with_capacity(n);
            let mut run_ids = Vec::with_capacity(n);
            let mut run_dues: Vec<i64> = Vec::with_capacity(n);
            let mut kinds: Vec<i16> = Vec::with_capacity(n);
            let mut ats: Vec<Option<i64>> = Vec::with_capacity(n);
            let mut next_dues: Vec<Option<i64>> = Vec::with_capacity(n);
            let mut ran: Vec<i64> = Vec::with_capacity(n);
            let mut skipped_counts: Vec<i64> = Vec::with_capacity(n);
            let mut final_states: Vec<i16> = Vec::with_capacity(n);
            let mut attempts: Vec<Option<i64>> = Vec::with_capacity(n);
            let mut started: Vec<Option<i64>> = Vec::with_capacity(n);
            let mut latencies: Vec<Option<i64>> = Vec::with_capacity(n);
            let mut statuses: Vec<Option<i64>> = Vec::with_capacity(n);
            let mut errors: Vec<Option<&str>> = Vec::with_capacity(n);
            let mut responses: Vec<Option<&str>> = Vec::with_capacity(n);
            let mut outcomes: Vec<Option<&str>> = Vec::with_capacity(n);
            let mut reasons: Vec<Option<&str>> = Vec::with_capacity(n);
            let mut letter_attempts: Vec<Option<i64>> = Vec::with_capacity(n);
            let mut final_attempts: Vec<Option<i64>> = Vec::with_capacity(n);
            let mut write_errors: Vec<bool> = Vec::with_capacity(n);
            let mut last_errors: Vec<Option<&str>> = Vec::with_capacity(n);
            for c in &batch {
                let plan = plan_completion(c);
                let (write_error, last_error) = plan.last_error.as_columns();
                write_errors.push(write_error);
                last_errors.push(last_error);
                ids.push(c.job_id);
                tokens.push(c.token.as_i64());
                dues.push(c.due.as_millisecond());
                // A run is recorded under the occurrence's origin (an `allow` job's, for the
                // job it handed one to).
                let (run_job, run_due) = c.run_of();
                run_ids.push(run_job);
                run_dues.push(run_due.as_millisecond());
                let mut next_due = None;
                let (kind, runs, skipped, state, final_attempt) = match plan.row {
                    RowChange::Retry { .. } => (0, 0, 0, JobState::Active, None),
                    RowChange::Advance {
                        due, ran, skipped, ..
                    } => {
                        next_due = Some(due);
                        (1, ran, skipped, JobState::Active, None)
                    }
                    RowChange::Finish {
                        state,
                        ran,
                        skipped,
                        attempt,
                    } => (2, ran, skipped, state, attempt),
                };
                kinds.push(kind);
                ats.push(plan.row.fire());
                next_dues.push(next_due);
                ran.push(runs as i64);
                skipped_counts.push(skipped as i64);
                final_states.push(state_code(state) as i16);
                final_attempts.push(final_attempt.map(i64::from));
                let attempt = plan.run.map(|r| r.attempt);
                outcomes.push(plan.run.map(|r| r.outcome.as_str()));
                reasons.push(plan.dead_letter.map(|d| d.reason));
                letter_attempts.push(plan.dead_letter.map(|d| i64::from(d.attempts)));
                attempts.push(attempt.map(|a| a.attempt as i64));
                started.push(attempt.map(|a| a.started_at.as_millisecond()));
                latencies.push(attempt.map(|a| a.latency_ms as i64));
                statuses.push(attempt.and_then(|a| a.status.map(i64::from)));
                errors.push(attempt.and_then(|a| a.error.as_deref()));
                responses.push(attempt.and_then(|a| a.response.as_deref()));
            }
            let mut client = store.client().await?;
            let tx = client.transaction().await?;
            lock_in_id_order(&tx, &ids, &tokens).await?;
            // Each row is applied only under its current token; the applied ones record their run
            // and dead letter in the same statement.
            let stmt = tx
                .prepare_cached(
                    "WITH c AS (
                     SELECT * FROM unnest($1::uuid[], $2::bigint[], $3::bigint[],
                                          $4::smallint[], $5::bigint[], $6::bigint[],
                                          $7::bigint[], $8::smallint[], $9::bigint[],
                                          $10::bigint[], $11::bigint[], $12::bigint[],
                                          $13::text[], $14::text[], $15::text[],
                                          $17::bigint[], $18::bigint[], $19::text[],
                                          $20::boolean[], $21::text[], $22::bigint[],
                                          $23::uuid[], $24::bigint[])
                         WITH ORDINALITY
                         AS c(id, token, due_ms, kind, at_ms, ran, skipped, final_state,
                              attempt, started_ms, latency_ms, status, error, outcome,
                              reason, final_attempt, letter_attempts, response,
                              write_error, last_error, next_due_ms, run_id, run_due_ms, ord)
                 ),
                 done AS (
                     UPDATE jobs j SET
                         state = CASE WHEN c.kind = 2 THEN c.final_state ELSE j.state END,
                         due_ms = CASE WHEN c.kind = 1 THEN c.next_due_ms ELSE j.due_ms END,
                         fire_ms = CASE WHEN c.kind = 2 THEN NULL ELSE c.at_ms END,
                         attempt = CASE c.kind WHEN 0 THEN j.attempt + 1
                                               WHEN 1 THEN 0
                                               ELSE COALESCE(c.final_attempt, j.attempt) END,
                         runs = j.runs + c.ran,
                         skipped = j.skipped + c.skipped,
                         lease_owner = NULL, lease_fire_ms = NULL, updated_ms = $16,
                         lease_token = j.lease_token + 1,
                         last_error = CASE WHEN c.write_error THEN c.last_error
                                           ELSE j.last_error END
                     FROM c
                     WHERE j.id = c.id AND j.lease_token = c.token AND j.state = 0
                     RETURNING c.ord, j.namespace, j.queue, j.spec, j.payload
                 ),
                 recorded AS (
                     INSERT INTO runs (job_id, due_ms, attempt, started_ms, latency_ms, status,
                                       error, outcome, response)
                     SELECT c.run_id, c.run_due_ms, c.attempt, c.started_ms, c.latency_ms,
                            c.status, c.error, c.outcome, c.response
                     FROM c JOIN done ON done.ord = c.ord
                     WHERE c.attempt IS NOT NULL
                 ),
                 lettered AS (
                     INSERT INTO dead_letters (namespace, job_id, due_ms, attempts, reason,
                                               spec, payload, created_ms)
                     SELECT done.namespace, c.run_id, c.run_due_ms, c.letter_attempts, c.reason,
                            done.spec, done.payload, $16
                     FROM c JOIN done ON done.ord = c.ord
                     WHERE c.reason IS NOT NULL
                 )
                 SELECT ord, namespace, queue FROM done",
                )
                .await?;
            let rows = tx
                .query(
                    &stmt,
                    &[
                        &ids,
                        &tokens,
                        &dues,
                        &kinds,
                        &ats,
                        &ran,
                        &skipped_counts,
                        &final_states,
                        &attempts,
                        &started,
                        &latencies,
                        &statuses,
                        &errors,
                        &outcomes,
                        &reasons,
                        &now,
                        &final_attempts,
                        &letter_attempts,
                        &responses,
                        &write_errors,
                        &last_errors,
                        &next_dues,
                        &run_ids,
                        &run_dues,
                    ],
                )
                .await?;
            let mut applied = vec![Applied::StaleLease; n];
            let mut due = Due::default();
            for row in &rows {
                let i = col::<i64>(row, 0)? as usize - 1;
                applied[i] = Applied::Yes;
                // A retry or the next occurrence may be due before anyone's planned wake-up.
                if kinds[i] != 2
                    && let Some(at) = ats[i]
                {
                    let namespace: String = col(row, 1)?;
                    let queue: Option<String> = col(row, 2)?;
                    due.add(&namespace, queue.as_deref(), at);
                }
            }
            // Occurrences an overlap policy dropped: a skipped run of their own (rare, so one
            // statement each, in the same transaction).
            for (c, applied) in batch.iter().zip(&applied) {
                if *applied != Applied::Yes {
                    continue;
                }
                if let Some((due_ms, a)) = crate::rules::overlap_run(c) {
                    tx.execute(
                        "INSERT INTO runs (job_id, due_ms, attempt, started_ms, latency_ms,
                                           status, error, outcome, response)
                         VALUES ($1, $2, $3, $4, $5, NULL, $6, $7, NULL)",
                        &[
                            &c.job_id,
                            &due_ms,
                            &i64::from(a.attempt),
                            &a.started_at.as_millisecond(),
                            &i64::from(a.latency_ms),
                            &a.error,
                            &crate::rules::RunOutcome::Skipped.as_str(),
                        ],
                    )
                    .await?;
                }
            }
            // The callback jobs of the applied completions, in the same transaction: a crash
            // leaves both the completion and its callback, or neither. Rare, so one statement
            // each.
            for (c, applied) in batch.iter().zip(&applied) {
                if let (Applied::Yes, Some(callback)) = (applied, &c.callback) {
                    let job = crate::NewJob::callback(callback, hourglass_core::from_ms(now));
                    let fire = job.first_fire().as_millisecond();
                    tx.execute(
                        "INSERT INTO jobs (id, namespace, key, job_type, queue, state, spec,
                                           payload, fingerprint, due_ms, fire_ms, created_ms,
                                           updated_ms)
                         VALUES ($1, $2, NULL, $3, $4, 0, $5, $6, 0, $7, $8, $9, $9)",
                        &[
                            &job.id,
                            &job.namespace,
                            &job.spec.job_type,
                            &job.spec.target.queue(),
                            &encode_spec(&job.spec),
                            &job.payload,
                            &job.first_due.as_millisecond(),
                            &fire,
                            &now,
                        ],
                    )
                    .await?;
                    // A handed-off `allow` occurrence carries its job's labels and its mark.
                    let labels = job
                        .spec
                        .labels
                        .iter()
                        .map(|(k, v)| (job.id, job.namespace.as_str(), k.as_str(), v.as_str()))
                        .collect();
                    super::jobs::insert_labels(&tx, labels).await?;
                    due.add(&job.namespace, job.spec.target.queue(), fire);
                }
            }
            store.notify(&tx, &due).await?;
            tx.commit().await?;
            Ok(applied)
        })
        .await
}
