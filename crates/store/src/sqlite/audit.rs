//! The audit log in SQLite: one row per entry in `audit_log`, its integer key the order of
//! appending (the cursor's `seq`), read newest first through `audit_log_namespace` (namespace,
//! time, key) and purged oldest first by key. An entry is inserted by the write that makes its
//! change, inside that write's savepoint of the writer thread's group commit: a failed change
//! rolls its entry back with it, and a commit makes both durable at once.

use hourglass_core::from_ms;
use rusqlite::{Connection, params};

use super::codec::{corrupt, unavailable};
use crate::{AuditAction, AuditCursor, AuditEntry, AuditQuery, AuditRecord, Result, StoreError};

/// Appends `record`, if there is one, in the caller's savepoint: the change it records and the
/// entry commit together or not at all.
pub(super) fn append_some(conn: &Connection, record: Option<&AuditRecord>) -> Result<()> {
    match record {
        Some(record) => append(conn, record),
        None => Ok(()),
    }
}

pub(super) fn append(conn: &Connection, record: &AuditRecord) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO audit_log
             (namespace, at_ms, key_id, action, jobs, job_count, dead_letter, fields, name)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )
    .map_err(unavailable)?
    .execute(params![
        record.namespace,
        record.at.as_millisecond(),
        record.key_id,
        record.action.as_str(),
        record.jobs_text(),
        record.count,
        record.dead_letter,
        record.fields_text(),
        record.name,
    ])
    .map_err(unavailable)?;
    Ok(())
}

/// Reads in pages of `limit` (more when a job filter skips entries) until the answer is full or
/// the namespace's log ends.
pub(super) fn read(conn: &Connection, query: &AuditQuery) -> Result<Vec<AuditEntry>> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT id, at_ms, key_id, action, jobs, job_count, dead_letter, fields, name
             FROM audit_log
             WHERE namespace = ?1 AND (at_ms, id) < (?2, ?3)
               AND (?4 IS NULL OR instr(jobs, ?4) > 0)
             ORDER BY at_ms DESC, id DESC LIMIT ?5",
        )
        .map_err(unavailable)?;
    let before = query.before.unwrap_or(AuditCursor::NEWEST);
    let job = query.job.map(|id| id.to_string());
    let mut rows = stmt
        .query(params![
            query.namespace,
            before.at_ms,
            before.seq,
            job,
            query.limit as i64
        ])
        .map_err(unavailable)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(unavailable)? {
        let cursor = AuditCursor {
            seq: row.get(0).map_err(corrupt)?,
            at_ms: row.get(1).map_err(corrupt)?,
        };
        let action: String = row.get(3).map_err(corrupt)?;
        let record = AuditRecord {
            at: from_ms(cursor.at_ms),
            namespace: query.namespace.clone(),
            key_id: row.get(2).map_err(corrupt)?,
            action: AuditAction::parse(&action)
                .ok_or_else(|| StoreError::Corrupt(format!("audit action {action:?}")))?,
            jobs: AuditRecord::jobs_from_text(&row.get::<_, String>(4).map_err(corrupt)?)?,
            count: row.get(5).map_err(corrupt)?,
            dead_letter: row.get(6).map_err(corrupt)?,
            fields: AuditRecord::fields_from_text(&row.get::<_, String>(7).map_err(corrupt)?),
            name: row.get(8).map_err(corrupt)?,
        };
        out.push(AuditEntry { cursor, record });
    }
    Ok(out)
}

/// Entries are appended in time order, so the lowest keys are the oldest: like the dead-letter
/// sweep, it looks only at the `limit` oldest.
pub(super) fn purge(conn: &Connection, before: i64, limit: usize) -> Result<u64> {
    let deleted = conn
        .prepare_cached(
            "DELETE FROM audit_log
             WHERE at_ms < ?1
               AND id IN (SELECT id FROM audit_log ORDER BY id LIMIT ?2)",
        )
        .map_err(unavailable)?
        .execute(params![before, limit as i64])
        .map_err(unavailable)?;
    Ok(deleted as u64)
}
