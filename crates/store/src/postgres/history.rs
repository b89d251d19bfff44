//! What remains of work done: a job's runs, page by page; dead letters; and retention, which
//! purges finished jobs, old runs and old dead letters in small batches.

use hourglass_core::{JobId, from_ms};
use jiff::Timestamp;

use super::PostgresStore;
use super::codec::{DEAD_LETTER_COLUMNS, Filters, col, dead_letter_from_row, load_job};
use crate::{
    DeadLetter, PURGE_DEAD_LETTERS, Purged, Result, RunCursor, RunOutcome, RunRecord, StoreError,
};

pub(super) async fn runs(
    store: &PostgresStore,
    namespace: Option<&str>,
    id: JobId,
    before: Option<RunCursor>,
    limit: usize,
) -> Result<Vec<RunRecord>> {
    let before = before.unwrap_or(RunCursor::NEWEST);
    store
        .bounded(async {
            let client = store.client().await?;
            if load_job(&client, namespace, id, false).await?.is_none() {
                return Err(StoreError::NotFound);
            }
            let stmt = client
                .prepare_cached(
                    "SELECT due_ms, attempt, started_ms, latency_ms, status, error, outcome, id,
                        response
                 FROM runs WHERE job_id = $1 AND (started_ms, id) < ($3, $4)
                 ORDER BY started_ms DESC, id DESC LIMIT $2",
                )
                .await?;
            client
                .query(
                    &stmt,
                    &[&id, &(limit as i64), &before.started_ms, &before.seq],
                )
                .await?
                .iter()
                .map(|row| {
                    Ok(RunRecord {
                        cursor: RunCursor {
                            started_ms: col(row, 2)?,
                            seq: col(row, 7)?,
                        },
                        job_id: id,
                        due: from_ms(col(row, 0)?),
                        attempt: col::<i64>(row, 1)? as u32,
                        started_at: from_ms(col(row, 2)?),
                        latency_ms: col::<i64>(row, 3)? as u32,
                        status: col::<Option<i64>>(row, 4)?.map(|s| s as u16),
                        error: col(row, 5)?,
                        response: col(row, 8)?,
                        outcome: RunOutcome::from_stored(col(row, 6)?)?,
                    })
                })
                .collect()
        })
        .await
}

pub(super) async fn dead_letters(
    store: &PostgresStore,
    namespace: Option<&str>,
    after: Option<i64>,
    limit: usize,
) -> Result<Vec<DeadLetter>> {
    store
        .bounded(async {
            let client = store.client().await?;
            let after = after.unwrap_or(0);
            let limit = limit as i64;
            let mut filters = Filters::new('$');
            filters.add("namespace =", namespace.as_ref().map(|v| v as _));
            filters.add("id >", Some(&after as _));
            let sql = format!(
                "SELECT {DEAD_LETTER_COLUMNS} FROM dead_letters{} ORDER BY id LIMIT {}",
                filters.where_clause(),
                filters.next_param()
            );
            let mut params = filters.params;
            params.push(&limit);
            let stmt = client.prepare_cached(&sql).await?;
            client
                .query(&stmt, &params)
                .await?
                .iter()
                .map(dead_letter_from_row)
                .collect()
        })
        .await
}

pub(super) async fn get_dead_letter(
    store: &PostgresStore,
    namespace: Option<&str>,
    id: i64,
) -> Result<Option<DeadLetter>> {
    store
        .bounded(async {
            let client = store.client().await?;
            let stmt = client
                .prepare_cached(&format!(
                    "SELECT {DEAD_LETTER_COLUMNS} FROM dead_letters
                 WHERE id = $1 AND ($2::text IS NULL OR namespace = $2)"
                ))
                .await?;
            match client.query_opt(&stmt, &[&id, &namespace]).await? {
                Some(row) => Ok(Some(dead_letter_from_row(&row)?)),
                None => Ok(None),
            }
        })
        .await
}

pub(super) async fn delete_dead_letter(
    store: &PostgresStore,
    namespace: Option<&str>,
    id: i64,
    audit: Option<crate::AuditRecord>,
) -> Result<bool> {
    store
        .bounded(async {
            let mut client = store.client().await?;
            let tx = client.transaction().await?;
            let stmt = tx
                .prepare_cached(
                    "DELETE FROM dead_letters
                     WHERE id = $1 AND ($2::text IS NULL OR namespace = $2)",
                )
                .await?;
            let deleted = tx.execute(&stmt, &[&id, &namespace]).await? > 0;
            super::audit::append_in(&tx, audit.as_ref().filter(|_| deleted)).await?;
            tx.commit().await?;
            Ok(deleted)
        })
        .await
}

pub(super) async fn purge(
    store: &PostgresStore,
    before: Timestamp,
    limit: usize,
) -> Result<Purged> {
    let (before, limit) = (before.as_millisecond(), limit as i64);
    store
        .bounded(async {
            let mut client = store.client().await?;
            let tx = client.transaction().await?;
            // Every node sweeps; SKIP LOCKED lets two sweeps split the work instead of queueing.
            let stmt = tx
                .prepare_cached(
                    "WITH gone AS (
                     DELETE FROM jobs WHERE id IN (
                         SELECT id FROM jobs WHERE state >= 2 AND updated_ms < $1
                         ORDER BY updated_ms LIMIT $2 FOR UPDATE SKIP LOCKED)
                     RETURNING id),
                 gone_runs AS (
                     DELETE FROM runs WHERE job_id IN (SELECT id FROM gone) RETURNING 1)
                 SELECT (SELECT COUNT(*) FROM gone), (SELECT COUNT(*) FROM gone_runs)",
                )
                .await?;
            let row = tx.query_one(&stmt, &[&before, &limit]).await?;
            let mut purged = Purged {
                jobs: col::<i64>(&row, 0)? as u64,
                runs: col::<i64>(&row, 1)? as u64,
            };
            // Old runs of jobs that live on (recurring ones), by row address: no id index needed.
            let stmt = tx
                .prepare_cached(
                    "WITH old AS (
                     DELETE FROM runs WHERE ctid = ANY(ARRAY(
                         SELECT ctid FROM runs WHERE started_ms < $1 LIMIT $2))
                     RETURNING 1)
                 SELECT COUNT(*) FROM old",
                )
                .await?;
            let row = tx.query_one(&stmt, &[&before, &limit]).await?;
            purged.runs += col::<i64>(&row, 0)? as u64;
            tx.commit().await?;
            Ok(purged)
        })
        .await
}

pub(super) async fn purge_dead_letters(
    store: &PostgresStore,
    before: Timestamp,
    limit: usize,
) -> Result<u64> {
    let (before, limit) = (before.as_millisecond(), limit as i64);
    store
        .bounded(async {
            let client = store.client().await?;
            let stmt = client.prepare_cached(PURGE_DEAD_LETTERS).await?;
            Ok(client.execute(&stmt, &[&before, &limit]).await?)
        })
        .await
}
