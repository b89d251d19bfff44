//! What remains of work done: a job's runs, page by page; dead letters; and retention, which
//! purges finished jobs, old runs and old dead letters in small batches.

use hourglass_core::{JobId, from_ms};
use rusqlite::{Connection, params};

use super::codec::{
    DEAD_LETTER_COLUMNS, Filters, corrupt, dead_letter_from_row, load_job, unavailable,
};
use crate::{
    DeadLetter, PURGE_DEAD_LETTERS, Purged, Result, RunCursor, RunOutcome, RunRecord, StoreError,
};

pub(super) fn runs(
    conn: &Connection,
    namespace: Option<&str>,
    id: JobId,
    before: RunCursor,
    limit: usize,
) -> Result<Vec<RunRecord>> {
    if load_job(conn, namespace, id)?.is_none() {
        return Err(StoreError::NotFound);
    }
    let mut stmt = conn
        .prepare_cached(
            "SELECT due_ms, attempt, started_ms, latency_ms, status, error, outcome, rowid,
                    response
             FROM runs WHERE job_id = ?1 AND (started_ms, rowid) < (?3, ?4)
             ORDER BY started_ms DESC, rowid DESC LIMIT ?2",
        )
        .map_err(unavailable)?;
    let mut rows = stmt
        .query(params![
            id.as_bytes().as_slice(),
            limit as i64,
            before.started_ms,
            before.seq
        ])
        .map_err(unavailable)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(unavailable)? {
        out.push(RunRecord {
            cursor: RunCursor {
                started_ms: row.get(2).map_err(corrupt)?,
                seq: row.get(7).map_err(corrupt)?,
            },
            job_id: id,
            due: from_ms(row.get(0).map_err(corrupt)?),
            attempt: row.get(1).map_err(corrupt)?,
            started_at: from_ms(row.get(2).map_err(corrupt)?),
            latency_ms: row.get(3).map_err(corrupt)?,
            status: row.get(4).map_err(corrupt)?,
            error: row.get(5).map_err(corrupt)?,
            response: row.get(8).map_err(corrupt)?,
            outcome: RunOutcome::from_stored(&row.get::<_, String>(6).map_err(corrupt)?)?,
        });
    }
    Ok(out)
}

pub(super) fn dead_letters(
    conn: &Connection,
    namespace: Option<&str>,
    after: Option<i64>,
    limit: usize,
) -> Result<Vec<DeadLetter>> {
    with_dead_letters_statement(namespace, after, limit, |sql, params| {
        let mut stmt = conn.prepare_cached(sql).map_err(unavailable)?;
        let mut rows = stmt.query(params).map_err(unavailable)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(unavailable)? {
            out.push(dead_letter_from_row(row)?);
        }
        Ok(out)
    })
}

/// Calls `f` with the statement that lists dead letters and its parameters. With a namespace,
/// `dead_letters_namespace` (namespace, id) answers from the cursor on.
pub(super) fn with_dead_letters_statement<T>(
    namespace: Option<&str>,
    after: Option<i64>,
    limit: usize,
    f: impl FnOnce(&str, &[&dyn rusqlite::ToSql]) -> T,
) -> T {
    let (after, limit) = (after.unwrap_or(0), limit as i64);
    let mut filters = Filters::new('?');
    filters.add("namespace =", namespace.as_ref().map(|v| v as _));
    filters.add("id >", Some(&after as _));
    let sql = format!(
        "SELECT {DEAD_LETTER_COLUMNS} FROM dead_letters{} ORDER BY id LIMIT {}",
        filters.where_clause(),
        filters.next_param()
    );
    let mut params = filters.params;
    params.push(&limit);
    f(&sql, &params)
}

pub(super) fn get_dead_letter(
    conn: &Connection,
    namespace: Option<&str>,
    id: i64,
) -> Result<Option<DeadLetter>> {
    let sql = format!(
        "SELECT {DEAD_LETTER_COLUMNS} FROM dead_letters
         WHERE id = ?1 AND (?2 IS NULL OR namespace = ?2)"
    );
    let mut stmt = conn.prepare_cached(&sql).map_err(unavailable)?;
    let mut rows = stmt.query(params![id, namespace]).map_err(unavailable)?;
    match rows.next().map_err(unavailable)? {
        Some(row) => Ok(Some(dead_letter_from_row(row)?)),
        None => Ok(None),
    }
}

pub(super) fn delete_dead_letter(
    conn: &Connection,
    namespace: Option<&str>,
    id: i64,
) -> Result<bool> {
    let n = conn
        .prepare_cached("DELETE FROM dead_letters WHERE id = ?1 AND (?2 IS NULL OR namespace = ?2)")
        .map_err(unavailable)?
        .execute(params![id, namespace])
        .map_err(unavailable)?;
    Ok(n > 0)
}

pub(super) fn purge(conn: &Connection, before: i64, limit: usize) -> Result<Purged> {
    let mut purged = Purged::default();
    let ids: Vec<Vec<u8>> = {
        let mut stmt = conn
            .prepare_cached(
                "SELECT id FROM jobs WHERE state >= 2 AND updated_ms < ?1
                 ORDER BY updated_ms LIMIT ?2",
            )
            .map_err(unavailable)?;
        let rows = stmt
            .query_map(params![before, limit as i64], |r| r.get(0))
            .map_err(unavailable)?;
        rows.collect::<rusqlite::Result<_>>().map_err(unavailable)?
    };
    for id in &ids {
        purged.runs += conn
            .prepare_cached("DELETE FROM runs WHERE job_id = ?1")
            .map_err(unavailable)?
            .execute([id])
            .map_err(unavailable)? as u64;
        purged.jobs += conn
            .prepare_cached("DELETE FROM jobs WHERE id = ?1")
            .map_err(unavailable)?
            .execute([id])
            .map_err(unavailable)? as u64;
    }
    // Runs are appended in time order, so the oldest rowids are the oldest runs: take
    // them from the front and stop at the first one young enough to keep. No index on
    // the start time is needed, and a table of only young runs costs one row read.
    let old: Vec<i64> = {
        let mut stmt = conn
            .prepare_cached("SELECT rowid, started_ms FROM runs ORDER BY rowid LIMIT ?1")
            .map_err(unavailable)?;
        let rows = stmt
            .query_map([limit as i64], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?))
            })
            .map_err(unavailable)?;
        let mut old = Vec::new();
        for row in rows {
            let (rowid, started) = row.map_err(unavailable)?;
            if started >= before {
                break;
            }
            old.push(rowid);
        }
        old
    };
    for rowid in old {
        purged.runs += conn
            .prepare_cached("DELETE FROM runs WHERE rowid = ?1")
            .map_err(unavailable)?
            .execute([rowid])
            .map_err(unavailable)? as u64;
    }
    Ok(purged)
}

pub(super) fn purge_dead_letters(conn: &Connection, before: i64, limit: usize) -> Result<u64> {
    conn.prepare_cached(PURGE_DEAD_LETTERS)
        .map_err(unavailable)?
        .execute(params![before, limit as i64])
        .map(|n| n as u64)
        .map_err(unavailable)
}
