//! The audit log in PostgreSQL: one row per entry in `audit_log`, its `bigserial` key the order
//! of appending (the cursor's `seq`), read newest first through `audit_log_namespace`
//! (namespace, time, key) and purged oldest first by key. An entry is inserted in the
//! transaction of the change it records ([`append_in`]): both commit, or neither.

use deadpool_postgres::GenericClient;
use hourglass_core::from_ms;
use jiff::Timestamp;

use super::PostgresStore;
use super::codec::col;
use crate::{AuditAction, AuditCursor, AuditEntry, AuditQuery, AuditRecord, Result, StoreError};

pub(super) async fn append(store: &PostgresStore, record: AuditRecord) -> Result<()> {
    store
        .bounded(async {
            let client = store.client().await?;
            append_in(&client, Some(&record)).await
        })
        .await
}

/// Inserts `record`, if there is one, through `client`: inside the transaction of the change it
/// records, so that the two commit together or not at all.
pub(super) async fn append_in(
    client: &impl GenericClient,
    record: Option<&AuditRecord>,
) -> Result<()> {
    let Some(record) = record else {
        return Ok(());
    };
    let stmt = client
        .prepare_cached(
            "INSERT INTO audit_log
                 (namespace, at_ms, key_id, action, jobs, job_count, dead_letter, fields, name)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .await?;
    client
        .execute(
            &stmt,
            &[
                &record.namespace,
                &record.at.as_millisecond(),
                &record.key_id,
                &record.action.as_str(),
                &record.jobs_text(),
                &i64::from(record.count),
                &record.dead_letter,
                &record.fields_text(),
                &record.name,
            ],
        )
        .await?;
    Ok(())
}

pub(super) async fn read(store: &PostgresStore, query: AuditQuery) -> Result<Vec<AuditEntry>> {
    let before = query.before.unwrap_or(AuditCursor::NEWEST);
    let job = query.job.map(|id| id.to_string());
    store
        .bounded(async {
            let client = store.client().await?;
            let stmt = client
                .prepare_cached(
                    "SELECT id, at_ms, key_id, action, jobs, job_count, dead_letter, fields, name
                     FROM audit_log
                     WHERE namespace = $1 AND (at_ms, id) < ($2, $3)
                       AND ($4::text IS NULL OR strpos(jobs, $4::text) > 0)
                     ORDER BY at_ms DESC, id DESC LIMIT $5",
                )
                .await?;
            client
                .query(
                    &stmt,
                    &[
                        &query.namespace,
                        &before.at_ms,
                        &before.seq,
                        &job,
                        &(query.limit as i64),
                    ],
                )
                .await?
                .iter()
                .map(|row| {
                    let cursor = AuditCursor {
                        seq: col(row, 0)?,
                        at_ms: col(row, 1)?,
                    };
                    let action: String = col(row, 3)?;
                    let record = AuditRecord {
                        at: from_ms(cursor.at_ms),
                        namespace: query.namespace.clone(),
                        key_id: col(row, 2)?,
                        action: AuditAction::parse(&action).ok_or_else(|| {
                            StoreError::Corrupt(format!("audit action {action:?}"))
                        })?,
                        jobs: AuditRecord::jobs_from_text(&col::<String>(row, 4)?)?,
                        count: u32::try_from(col::<i64>(row, 5)?).unwrap_or(u32::MAX),
                        dead_letter: col(row, 6)?,
                        fields: AuditRecord::fields_from_text(&col::<String>(row, 7)?),
                        name: col(row, 8)?,
                    };
                    Ok(AuditEntry { cursor, record })
                })
                .collect()
        })
        .await
}

/// Entries are appended in (nearly) time order, so the lowest keys are the oldest: like the
/// dead-letter sweep, it looks only at the `limit` oldest.
pub(super) async fn purge(store: &PostgresStore, before: Timestamp, limit: usize) -> Result<u64> {
    let (before, limit) = (before.as_millisecond(), limit as i64);
    store
        .bounded(async {
            let client = store.client().await?;
            let stmt = client
                .prepare_cached(
                    "DELETE FROM audit_log
                     WHERE at_ms < $1
                       AND id IN (SELECT id FROM audit_log ORDER BY id LIMIT $2)",
                )
                .await?;
            Ok(client.execute(&stmt, &[&before, &limit]).await?)
        })
        .await
}
