//! Jobs as the API changes them: creating batches (with idempotent keys), edits, lifecycle
//! transitions (decided by `rules.rs`), listing and counting, and the integer keys of queues.

use hourglass_core::{JobId, JobSpec};
use rusqlite::{Connection, OptionalExtension, params};

use super::codec::{
    Filters, JOB_COLUMNS, encode_spec, id_from_blob, load_job, place_payload, query_jobs,
    unavailable,
};
use crate::rules::{TransitionPlan, plan_transition, plan_update, state_code};
use crate::{
    AuditRecord, Created, JobQuery, JobRecord, JobUpdate, NewJob, Result, StoreError, Transition,
};

/// The key of a namespace's queue, given it on first use.
pub(super) fn queue_key(conn: &Connection, namespace: &str, queue: &str) -> Result<i64> {
    if let Some(key) = find_queue_key(conn, namespace, queue)? {
        return Ok(key);
    }
    conn.prepare_cached("INSERT INTO queues (namespace, name) VALUES (?1, ?2)")
        .map_err(unavailable)?
        .execute(params![namespace, queue])
        .map_err(unavailable)?;
    Ok(conn.last_insert_rowid())
}

/// The key of a namespace's queue, if it was ever used.
pub(super) fn find_queue_key(
    conn: &Connection,
    namespace: &str,
    queue: &str,
) -> Result<Option<i64>> {
    conn.prepare_cached("SELECT key FROM queues WHERE namespace = ?1 AND name = ?2")
        .map_err(unavailable)?
        .query_row(params![namespace, queue], |r| r.get(0))
        .optional()
        .map_err(unavailable)
}

/// Queue keys looked up so far, within one write: a batch's jobs mostly share a queue or two.
#[derive(Default)]
struct QueueKeys(Vec<(String, String, i64)>);

impl QueueKeys {
    /// The queue key a job with `spec` in `namespace` is stored with: none for fired targets.
    fn of(&mut self, conn: &Connection, namespace: &str, spec: &JobSpec) -> Result<Option<i64>> {
        let Some(queue) = spec.target.queue() else {
            return Ok(None);
        };
        if let Some((.., key)) = self
            .0
            .iter()
            .find(|(ns, name, _)| ns == namespace && name == queue)
        {
            return Ok(Some(*key));
        }
        let key = queue_key(conn, namespace, queue)?;
        self.0.push((namespace.to_owned(), queue.to_owned(), key));
        Ok(Some(key))
    }
}

/// The job of `namespace` holding `key` (the unique index `jobs_namespace_key` finds it).
pub(super) fn load_job_by_key(
    conn: &Connection,
    namespace: &str,
    key: &str,
) -> Result<Option<JobRecord>> {
    let sql = format!("SELECT {JOB_COLUMNS} FROM jobs WHERE namespace = ?1 AND key = ?2");
    Ok(query_jobs(conn, &sql, &[&namespace, &key])?
        .into_iter()
        .next())
}

/// Creates `jobs`, each beside its spec as the caller encoded it before the write, so that work
/// is not done on the writer thread. Each statement is prepared once a batch (a cached-statement
/// lookup hashes the SQL text).
pub(super) fn create_in_tx(
    conn: &Connection,
    mut jobs: Vec<(NewJob, Vec<u8>)>,
) -> Result<Vec<Created>> {
    super::anchors::prepare(conn, &mut jobs)?;
    let mut out = Vec::with_capacity(jobs.len());
    let mut queue_keys = QueueKeys::default();
    let mut insert = conn
        .prepare_cached(
            "INSERT INTO jobs (id, namespace, key, job_type, state, spec, payload, fingerprint,
                               due_ms, fire_ms, created_ms, updated_ms, queue, queue_key,
                               payload_out, anchor)
             VALUES (?1, ?2, ?3, ?4, 0, ?5, ?6, ?7, ?8, ?13, ?9, ?9, ?10, ?11, ?12, ?14)",
        )
        .map_err(unavailable)?;
    let mut insert_payload = conn
        .prepare_cached("INSERT INTO job_payloads (seq, payload) VALUES (?1, ?2)")
        .map_err(unavailable)?;
    let mut by_key = conn
        .prepare_cached("SELECT id, fingerprint FROM jobs WHERE namespace = ?1 AND key = ?2")
        .map_err(unavailable)?;
    for (index, (job, spec)) in jobs.into_iter().enumerate() {
        if let Some(key) = &job.key {
            let existing: Option<(Vec<u8>, i64)> = by_key
                .query_row(params![job.namespace, key], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()
                .map_err(unavailable)?;
            if let Some((id, fingerprint)) = existing {
                let id = id_from_blob(id)?;
                if fingerprint != job.fingerprint {
                    return Err(StoreError::KeyConflict {
                        index,
                        key: key.clone(),
                        existing: id,
                    });
                }
                let record = load_job(conn, None, id)?.ok_or(StoreError::NotFound)?;
                out.push(Created::Existing(record));
                continue;
            }
        }
        let queue_key = queue_keys.of(conn, &job.namespace, &job.spec)?;
        let (inline, out_of_line) = place_payload(job.payload.as_deref());
        insert
            .execute(params![
                job.id.as_bytes().as_slice(),
                job.namespace,
                job.key,
                job.spec.job_type,
                spec,
                inline,
                job.fingerprint,
                job.first_due.as_millisecond(),
                job.now.as_millisecond(),
                job.spec.target.queue(),
                queue_key,
                out_of_line.is_some(),
                job.first_fire().as_millisecond(),
                crate::anchors::anchor_of(&job.spec),
            ])
            .map_err(unavailable)?;
        if let Some(payload) = out_of_line {
            insert_payload
                .execute(params![conn.last_insert_rowid(), payload])
                .map_err(unavailable)?;
        }
        insert_labels(conn, &job.namespace, job.id, &job.spec.labels)?;
        out.push(Created::New(job.into_record()));
    }
    Ok(out)
}

/// Replaces an active or paused job's definition (see [`plan_update`]); any claim on it becomes
/// stale.
pub(super) fn update_in_tx(
    conn: &Connection,
    namespace: Option<&str>,
    id: JobId,
    update: JobUpdate,
) -> Result<JobRecord> {
    let job = load_job(conn, namespace, id)?.ok_or(StoreError::NotFound)?;
    let (state, due, fire) = plan_update(&job, &update)?;
    let queue_key = QueueKeys::default().of(conn, &job.namespace, &update.spec)?;
    let (inline, out_of_line) = place_payload(update.payload.as_deref());
    let seq: i64 = conn
        .prepare_cached(
            "UPDATE jobs SET spec = ?2, payload = ?3, job_type = ?4, state = ?5, due_ms = ?6,
                             fire_ms = ?7, attempt = 0, lease_owner = NULL, lease_fire_ms = NULL,
                             lease_token = lease_token + 1, updated_ms = ?8, queue = ?9,
                             queue_key = ?10, payload_out = ?11, anchor = ?12
             WHERE id = ?1
             RETURNING seq",
        )
        .map_err(unavailable)?
        .query_row(
            params![
                id.as_bytes().as_slice(),
                encode_spec(&update.spec),
                inline,
                update.spec.job_type,
                state_code(state),
                due,
                fire,
                update.now.as_millisecond(),
                update.spec.target.queue(),
                queue_key,
                out_of_line.is_some(),
                crate::anchors::anchor_of(&update.spec),
            ],
            |row| row.get(0),
        )
        .map_err(unavailable)?;
    match out_of_line {
        Some(payload) => conn
            .prepare_cached("INSERT OR REPLACE INTO job_payloads (seq, payload) VALUES (?1, ?2)")
            .map_err(unavailable)?
            .execute(params![seq, payload]),
        None => conn
            .prepare_cached("DELETE FROM job_payloads WHERE seq = ?1")
            .map_err(unavailable)?
            .execute([seq]),
    }
    .map_err(unavailable)?;
    // Most updates (a re-plan, a backfill, an edit of another field) keep the labels: their
    // index entries stay as they are.
    if job.spec.labels != update.spec.labels {
        conn.prepare_cached("DELETE FROM job_labels WHERE job_id = ?1")
            .map_err(unavailable)?
            .execute([id.as_bytes().as_slice()])
            .map_err(unavailable)?;
        insert_labels(conn, &job.namespace, id, &update.spec.labels)?;
    }
    load_job(conn, None, id)?.ok_or(StoreError::NotFound)
}

/// Indexes a job's labels (`job_labels`, migration 15), in the transaction that writes its spec.
fn insert_labels(
    conn: &Connection,
    namespace: &str,
    id: JobId,
    labels: &hourglass_core::Labels,
) -> Result<()> {
    if labels.is_empty() {
        return Ok(());
    }
    let mut insert = conn
        .prepare_cached(
            "INSERT INTO job_labels (job_id, label_key, label_value, namespace)
             VALUES (?1, ?2, ?3, ?4)",
        )
        .map_err(unavailable)?;
    for (key, value) in labels {
        insert
            .execute(params![id.as_bytes().as_slice(), key, value, namespace])
            .map_err(unavailable)?;
    }
    Ok(())
}

pub(super) fn transition_in_tx(
    conn: &Connection,
    namespace: Option<&str>,
    id: JobId,
    transition: Transition,
    audit: Option<&AuditRecord>,
) -> Result<JobRecord> {
    let job = load_job(conn, namespace, id)?.ok_or(StoreError::NotFound)?;
    let (state, due, fire, clear_key, trigger_key, now) = match plan_transition(&job, transition)? {
        TransitionPlan::Unchanged => return Ok(job),
        TransitionPlan::Apply {
            state,
            due,
            fire,
            clear_key,
            trigger_key,
            now,
        } => (state, due, fire, clear_key, trigger_key, now),
    };
    conn.prepare_cached(
        "UPDATE jobs SET state = ?2, due_ms = ?3, fire_ms = ?4, attempt = 0, lease_owner = NULL,
                         lease_fire_ms = NULL, lease_token = lease_token + 1, updated_ms = ?5,
                         key = CASE WHEN ?6 THEN NULL ELSE key END,
                         trigger_key = COALESCE(?7, trigger_key),
                         trigger_due_ms = CASE WHEN ?7 IS NULL THEN trigger_due_ms ELSE ?5 END
         WHERE id = ?1",
    )
    .map_err(unavailable)?
    .execute(params![
        id.as_bytes().as_slice(),
        state_code(state),
        due,
        fire,
        now,
        clear_key,
        trigger_key,
    ])
    .map_err(unavailable)?;
    if let Some(entry) = audit {
        super::audit::append(conn, entry)?;
    }
    load_job(conn, None, id)?.ok_or(StoreError::NotFound)
}

pub(super) fn list_jobs(conn: &Connection, query: JobQuery) -> Result<Vec<JobRecord>> {
    with_list_statement(&query, |sql, params| query_jobs(conn, sql, params))
}

/// Calls `f` with the statement that lists `query`'s jobs and its parameters. Only the filters
/// given are in it: with a namespace, `jobs_namespace` (namespace, id) answers in id order from
/// the cursor on, whatever other namespaces hold; with label selectors too, the label index does
/// (see `Filters::job_source`).
pub(super) fn with_list_statement<T>(
    query: &JobQuery,
    f: impl FnOnce(&str, &[&dyn rusqlite::ToSql]) -> T,
) -> T {
    let state = query.state.map(state_code);
    let due_before = query.due_before.map(|t| t.as_millisecond());
    let due_after = query.due_after.map(|t| t.as_millisecond());
    let after = query.after.map(|id| id.as_bytes().to_vec());
    let limit = query.limit as i64;
    let selectors: Vec<(&dyn rusqlite::ToSql, Option<&dyn rusqlite::ToSql>)> = query
        .labels
        .iter()
        .map(|s| (&s.key as _, s.value.as_ref().map(|v| v as _)))
        .collect();
    let mut filters = Filters::new('?');
    let (source, order) = filters.job_source(
        query.namespace.as_ref().map(|v| v as _),
        after.as_ref().map(|v| v as _),
        &selectors,
        "CROSS JOIN",
    );
    filters.add("state =", state.as_ref().map(|v| v as _));
    filters.add("job_type =", query.job_type.as_ref().map(|v| v as _));
    filters.add("due_ms <", due_before.as_ref().map(|v| v as _));
    filters.add("due_ms >=", due_after.as_ref().map(|v| v as _));
    filters.add("queue =", query.queue.as_ref().map(|v| v as _));
    filters.add("anchor =", query.anchor.as_ref().map(|v| v as _));
    let sql = format!(
        "SELECT {JOB_COLUMNS} FROM {source}{} ORDER BY {order} LIMIT {}",
        filters.where_clause(),
        filters.next_param()
    );
    let mut params = filters.params;
    params.push(&limit);
    f(&sql, &params)
}

pub(super) fn count_jobs(conn: &Connection, namespace: Option<&str>) -> Result<u64> {
    let mut filters = Filters::new('?');
    filters.add("namespace =", namespace.as_ref().map(|v| v as _));
    let n: i64 = conn
        .prepare_cached(&format!(
            "SELECT COUNT(*) FROM jobs{}",
            filters.where_clause()
        ))
        .map_err(unavailable)?
        .query_row(filters.params.as_slice(), |r| r.get(0))
        .map_err(unavailable)?;
    Ok(n as u64)
}
