//! Jobs as the API changes them: creating batches (with idempotent keys), edits, lifecycle
//! transitions (decided by `rules.rs`), reading, listing and counting.

use std::collections::{HashMap, HashSet};

use hourglass_core::JobId;

use super::PostgresStore;
use super::codec::{
    Filters, JOB_COLUMN_COUNT, JOB_COLUMNS, col, encode_spec, job_from_row, load_job,
};
use super::notify::Due;
use crate::failpoint;
use crate::rules::{TransitionPlan, plan_transition, plan_update, state_code};
use crate::{
    AuditRecord, Created, JobQuery, JobRecord, JobUpdate, NewJob, Result, StoreError, Transition,
};

pub(super) async fn create_jobs(
    store: &PostgresStore,
    mut jobs: Vec<NewJob>,
    audit: Option<AuditRecord>,
) -> Result<Vec<Created>> {
    if jobs.is_empty() {
        return Ok(Vec::new());
    }
    store
        .bounded(async {
            let mut client = store.client().await?;
            let tx = client.transaction().await?;
            super::anchors::prepare(&tx, &mut jobs).await?;
            let n = jobs.len();
            let (mut ids, mut namespaces, mut keys, mut types, mut queues) = (
                Vec::with_capacity(n),
                Vec::with_capacity(n),
                Vec::with_capacity(n),
                Vec::with_capacity(n),
                Vec::with_capacity(n),
            );
            let (mut specs, mut payloads, mut prints, mut dues, mut nows) = (
                Vec::with_capacity(n),
                Vec::with_capacity(n),
                Vec::with_capacity(n),
                Vec::with_capacity(n),
                Vec::with_capacity(n),
            );
            let mut fires = Vec::with_capacity(n);
            let mut anchors = Vec::with_capacity(n);
            for job in &jobs {
                anchors.push(crate::anchors::anchor_of(&job.spec));
                ids.push(job.id);
                namespaces.push(job.namespace.as_str());
                keys.push(job.key.as_deref());
                types.push(job.spec.job_type.as_deref());
                queues.push(job.spec.target.queue());
                specs.push(encode_spec(&job.spec));
                payloads.push(job.payload.as_deref());
                prints.push(job.fingerprint);
                dues.push(job.first_due.as_millisecond());
                fires.push(job.first_fire().as_millisecond());
                nows.push(job.now.as_millisecond());
            }
            // A key already taken is skipped here (waiting for a concurrent insert of the same key
            // to commit or roll back) and sorted out below.
            let stmt = tx
                .prepare_cached(
                    "INSERT INTO jobs (id, namespace, key, job_type, queue, state, spec, payload,
                                   fingerprint, due_ms, fire_ms, created_ms, updated_ms, anchor)
                 SELECT id, namespace, key, job_type, queue, 0, spec, payload, fingerprint,
                        due_ms, fire_ms, now_ms, now_ms, anchor
                 FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[],
                             $6::text[], $7::text[], $8::bigint[], $9::bigint[], $10::bigint[],
                             $11::bigint[], $12::text[])
                      AS n(id, namespace, key, job_type, queue, spec, payload, fingerprint,
                           due_ms, now_ms, fire_ms, anchor)
                 ON CONFLICT (namespace, key) WHERE key IS NOT NULL DO NOTHING
                 RETURNING id",
                )
                .await?;
            let inserted: HashSet<JobId> = tx
                .query(
                    &stmt,
                    &[
                        &ids,
                        &namespaces,
                        &keys,
                        &types,
                        &queues,
                        &specs,
                        &payloads,
                        &prints,
                        &dues,
                        &nows,
                        &fires,
                        &anchors,
                    ],
                )
                .await?
                .iter()
                .map(|row| col(row, 0))
                .collect::<Result<_>>()?;
            let mut labels = Vec::new();
            for job in &jobs {
                if inserted.contains(&job.id) {
                    for (key, value) in &job.spec.labels {
                        labels.push((job.id, job.namespace.as_str(), key.as_str(), value.as_str()));
                    }
                }
            }
            insert_labels(&tx, labels).await?;
            let mut existing: HashMap<(String, String), (JobRecord, i64)> = HashMap::new();
            if inserted.len() < n {
                let (mut ns, mut ks) = (Vec::new(), Vec::new());
                for job in jobs.iter().filter(|j| !inserted.contains(&j.id)) {
                    ns.push(job.namespace.as_str());
                    ks.push(job.key.as_deref().unwrap_or_default());
                }
                let stmt = tx
                    .prepare_cached(&format!(
                        "SELECT {JOB_COLUMNS}, fingerprint, key FROM jobs
                     WHERE key IS NOT NULL
                       AND (namespace, key) IN (SELECT * FROM unnest($1::text[], $2::text[]))"
                    ))
                    .await?;
                for row in tx.query(&stmt, &[&ns, &ks]).await? {
                    let record = job_from_row(&row)?;
                    let print: i64 = col(&row, JOB_COLUMN_COUNT)?;
                    let key: String = col(&row, JOB_COLUMN_COUNT + 1)?;
                    existing.insert((record.namespace.clone(), key), (record, print));
                }
            }
            let mut due = Due::default();
            let mut out = Vec::with_capacity(n);
            for (index, job) in jobs.into_iter().enumerate() {
                if inserted.contains(&job.id) {
                    due.add(
                        &job.namespace,
                        job.spec.target.queue(),
                        job.first_fire().as_millisecond(),
                    );
                    out.push(Created::New(job.into_record()));
                    continue;
                }
                let key = job.key.clone().unwrap_or_default();
                let Some((record, print)) = existing.get(&(job.namespace.clone(), key.clone()))
                else {
                    // The key's holder was cancelled (freeing the key) between the two statements.
                    return Err(StoreError::Unavailable(
                        "a concurrent change to a job with the same key; retry".into(),
                    ));
                };
                if *print != job.fingerprint {
                    return Err(StoreError::KeyConflict {
                        index,
                        key,
                        existing: record.id,
                    });
                }
                out.push(Created::Existing(record.clone()));
            }
            let entry = crate::audit::of_created(audit, &out);
            super::audit::append_in(&tx, entry.as_ref()).await?;
            store.notify(&tx, &due).await?;
            // A crash here: the connection closes with the transaction open.
            if store
                .failpoints
                .hit(failpoint::POSTGRES_CREATE_BEFORE_COMMIT)
            {
                drop(tx);
                return Err(died(client));
            }
            tx.commit().await?;
            // A crash here: committed, and no one is answered.
            if store
                .failpoints
                .hit(failpoint::POSTGRES_CREATE_AFTER_COMMIT)
            {
                return Err(died(client));
            }
            Ok(out)
        })
        .await
}

/// A call that died at a failpoint: its connection is closed, never handed back to the pool,
/// as a process that dies closes its sockets.
fn died(client: deadpool_postgres::Object) -> StoreError {
    drop(deadpool_postgres::Object::take(client));
    StoreError::Unavailable("died at a failpoint".into())
}

pub(super) async fn get_job(
    store: &PostgresStore,
    namespace: Option<&str>,
    id: JobId,
) -> Result<Option<JobRecord>> {
    store
        .bounded(async {
            let client = store.client().await?;
            load_job(&client, namespace, id, false).await
        })
        .await
}

/// The job of `namespace` holding `key` (the unique index on `(namespace, key)` finds it).
pub(super) async fn get_job_by_key(
    store: &PostgresStore,
    namespace: &str,
    key: &str,
) -> Result<Option<JobRecord>> {
    store
        .bounded(async {
            let client = store.client().await?;
            let sql = format!("SELECT {JOB_COLUMNS} FROM jobs WHERE namespace = $1 AND key = $2");
            let stmt = client.prepare_cached(&sql).await?;
            match client.query_opt(&stmt, &[&namespace, &key]).await? {
                Some(row) => Ok(Some(job_from_row(&row)?)),
                None => Ok(None),
            }
        })
        .await
}

pub(super) async fn list_jobs(store: &PostgresStore, query: JobQuery) -> Result<Vec<JobRecord>> {
    store
        .bounded(async {
            let client = store.client().await?;
            let state = query.state.map(|s| state_code(s) as i16);
            let due_before = query.due_before.map(|t| t.as_millisecond());
            let due_after = query.due_after.map(|t| t.as_millisecond());
            let limit = query.limit as i64;
            // Only the filters given, so each combination gets a plan that uses its index.
            let selectors: Vec<_> = query
                .labels
                .iter()
                .map(|s| (&s.key as _, s.value.as_ref().map(|v| v as _)))
                .collect();
            let mut filters = Filters::new('$');
            // With label selectors the label index drives the listing: `Filters::job_source`.
            let (source, order) = filters.job_source(
                query.namespace.as_ref().map(|v| v as _),
                query.after.as_ref().map(|v| v as _),
                &selectors,
                "JOIN",
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
            let stmt = client.prepare_cached(&sql).await?;
            client
                .query(&stmt, &params)
                .await?
                .iter()
                .map(job_from_row)
                .collect()
        })
        .await
}

pub(super) async fn count_jobs(store: &PostgresStore, namespace: Option<&str>) -> Result<u64> {
    store
        .bounded(async {
            let client = store.client().await?;
            let mut filters = Filters::new('$');
            filters.add("namespace =", namespace.as_ref().map(|v| v as _));
            let sql = format!("SELECT COUNT(*) FROM jobs{}", filters.where_clause());
            let stmt = client.prepare_cached(&sql).await?;
            let row = client.query_one(&stmt, &filters.params).await?;
            Ok(col::<i64>(&row, 0)? as u64)
        })
        .await
}

pub(super) async fn update_job(
    store: &PostgresStore,
    namespace: Option<&str>,
    id: JobId,
    update: JobUpdate,
    audit: Option<AuditRecord>,
) -> Result<JobRecord> {
    store
        .bounded(async {
            let mut client = store.client().await?;
            let tx = client.transaction().await?;
            let job = load_job(&tx, namespace, id, true)
                .await?
                .ok_or(StoreError::NotFound)?;
            let (state, due_ms, fire) = plan_update(&job, &update)?;
            let stmt = tx
                .prepare_cached(&format!(
                    "UPDATE jobs SET spec = $2, payload = $3, job_type = $4, state = $5,
                                 due_ms = $6, fire_ms = $7, attempt = 0, lease_owner = NULL,
                                 lease_fire_ms = NULL, lease_token = lease_token + 1,
                                 updated_ms = $8, queue = $9, anchor = $10
                 WHERE id = $1
                 RETURNING {JOB_COLUMNS}"
                ))
                .await?;
            let row = tx
                .query_one(
                    &stmt,
                    &[
                        &id,
                        &encode_spec(&update.spec),
                        &update.payload,
                        &update.spec.job_type,
                        &(state_code(state) as i16),
                        &due_ms,
                        &fire,
                        &update.now.as_millisecond(),
                        &update.spec.target.queue(),
                        &crate::anchors::anchor_of(&update.spec),
                    ],
                )
                .await?;
            // Most updates (a re-plan, a backfill, an edit of another field) keep the labels:
            // their index entries stay as they are.
            if job.spec.labels != update.spec.labels {
                let stmt = tx
                    .prepare_cached("DELETE FROM job_labels WHERE job_id = $1")
                    .await?;
                tx.execute(&stmt, &[&id]).await?;
                let mut labels = Vec::new();
                for (key, value) in &update.spec.labels {
                    labels.push((id, job.namespace.as_str(), key.as_str(), value.as_str()));
                }
                insert_labels(&tx, labels).await?;
            }
            super::audit::append_in(&tx, audit.as_ref()).await?;
            store.commit_job_change(tx, id, &row, fire).await
        })
        .await
}

/// Indexes labels (`job_labels`, migration 8), each as its job, the job's namespace, its key and
/// its value, in the transaction that writes the jobs' specs: one statement for a whole batch.
pub(super) async fn insert_labels(
    tx: &deadpool_postgres::Transaction<'_>,
    labels: Vec<(JobId, &str, &str, &str)>,
) -> Result<()> {
    if labels.is_empty() {
        return Ok(());
    }
    let (mut ids, mut namespaces, mut keys, mut values) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (id, namespace, key, value) in labels {
        ids.push(id);
        namespaces.push(namespace);
        keys.push(key);
        values.push(value);
    }
    let stmt = tx
        .prepare_cached(
            "INSERT INTO job_labels (job_id, label_key, label_value, namespace)
             SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[])",
        )
        .await?;
    tx.execute(&stmt, &[&ids, &keys, &values, &namespaces])
        .await?;
    Ok(())
}

pub(super) async fn transition(
    store: &PostgresStore,
    namespace: Option<&str>,
    id: JobId,
    transition: Transition,
    audit: Option<AuditRecord>,
) -> Result<JobRecord> {
    store
        .bounded(async {
            let mut client = store.client().await?;
            let tx = client.transaction().await?;
            let job = load_job(&tx, namespace, id, true)
                .await?
                .ok_or(StoreError::NotFound)?;
            let (state, due_ms, fire, clear_key, trigger_key, now) =
                match plan_transition(&job, transition)? {
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
            let stmt = tx
                .prepare_cached(&format!(
                    "UPDATE jobs SET state = $2, due_ms = $3, fire_ms = $4, attempt = 0,
                                 lease_owner = NULL, lease_fire_ms = NULL,
                                 lease_token = lease_token + 1, updated_ms = $5,
                                 key = CASE WHEN $6 THEN NULL ELSE key END,
                                 trigger_key = COALESCE($7, trigger_key),
                                 trigger_due_ms = CASE WHEN $7::text IS NULL
                                                  THEN trigger_due_ms ELSE $5 END
                 WHERE id = $1
                 RETURNING {JOB_COLUMNS}"
                ))
                .await?;
            let row = tx
                .query_one(
                    &stmt,
                    &[
                        &id,
                        &(state_code(state) as i16),
                        &due_ms,
                        &fire,
                        &now,
                        &clear_key,
                        &trigger_key,
                    ],
                )
                .await?;
            super::audit::append_in(&tx, audit.as_ref()).await?;
            store.commit_job_change(tx, id, &row, fire).await
        })
        .await
}
