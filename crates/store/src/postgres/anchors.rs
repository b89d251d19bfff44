//! Each namespace's anchors, one row each, and the moves, deletes and creates that refer to them.
//!
//! A move is one transaction: it writes the anchor's row (taking its row lock), locks the live
//! jobs on the anchor (index `jobs_anchor`, in id order), and re-times them all with one
//! statement, raising each one's fencing token and notifying the fences and the earliest new
//! fire time with the commit. A reader sees all of them moved or none. A create of a job on the
//! anchor reads the anchor's row `FOR SHARE` in its own transaction, so it waits for a move under
//! way and then re-bases on the moved instant (`crate::anchors::rebase_new`); a move that starts
//! after it waits for the create to commit, and then moves the created job too.

use std::collections::HashMap;

use deadpool_postgres::GenericClient;
use hourglass_core::JobId;

use super::PostgresStore;
use super::codec::{JOB_COLUMNS, col, encode_spec, job_from_row};
use super::notify::Due;
use crate::anchors::{cancel_reason, check_room, move_update, rebase_new};
use crate::rules::{plan_update, state_code};
use crate::{
    AnchorDelete, AnchorDeleted, AnchorRecord, AuditRecord, JobRecord, NewJob, Result, StoreError,
};

fn record(namespace: &str, name: String, at_ms: i64, updated_ms: i64) -> AnchorRecord {
    AnchorRecord {
        namespace: namespace.to_owned(),
        name,
        at: hourglass_core::from_ms(at_ms),
        updated_at: hourglass_core::from_ms(updated_ms),
    }
}

/// Inside a create's transaction: re-bases the batch's anchored jobs on their anchors as stored
/// now (waiting for a move under way), and refuses the batch when one names an anchor that is
/// gone or would pass an anchor's bound.
pub(super) async fn prepare(client: &impl GenericClient, jobs: &mut [NewJob]) -> Result<()> {
    let mut adding: HashMap<(String, String), u64> = HashMap::new();
    for job in jobs.iter_mut() {
        let Some(name) = crate::anchors::anchor_of(&job.spec).map(str::to_owned) else {
            continue;
        };
        let stmt = client
            .prepare_cached(
                "SELECT at_ms FROM anchors WHERE namespace = $1 AND name = $2 FOR SHARE",
            )
            .await?;
        let row = client.query_opt(&stmt, &[&job.namespace, &name]).await?;
        let Some(row) = row else {
            return Err(StoreError::UnknownAnchor { name });
        };
        rebase_new(job, hourglass_core::from_ms(col(&row, 0)?));
        *adding.entry((job.namespace.clone(), name)).or_default() += 1;
    }
    for ((namespace, name), n) in adding {
        let stmt = client
            .prepare_cached(
                "SELECT COUNT(*) FROM jobs WHERE namespace = $1 AND anchor = $2
                 AND state IN (0, 1)",
            )
            .await?;
        let row = client.query_one(&stmt, &[&namespace, &name]).await?;
        check_room(&name, col::<i64>(&row, 0)? as u64, n)?;
    }
    Ok(())
}

/// The live jobs of the anchor, locked, in id order.
async fn lock_live(
    client: &impl GenericClient,
    namespace: &str,
    name: &str,
) -> Result<Vec<JobRecord>> {
    let stmt = client
        .prepare_cached(&format!(
            "SELECT {JOB_COLUMNS} FROM jobs
             WHERE namespace = $1 AND anchor = $2 AND state IN (0, 1)
             ORDER BY id FOR UPDATE"
        ))
        .await?;
    client
        .query(&stmt, &[&namespace, &name])
        .await?
        .iter()
        .map(job_from_row)
        .collect()
}

pub(super) async fn put(
    store: &PostgresStore,
    record: &AnchorRecord,
    audit: Option<AuditRecord>,
) -> Result<Vec<JobRecord>> {
    store
        .bounded(async {
            let mut client = store.client().await?;
            let tx = client.transaction().await?;
            let stmt = tx
                .prepare_cached(
                    "INSERT INTO anchors (namespace, name, at_ms, updated_ms)
                     VALUES ($1, $2, $3, $4)
                     ON CONFLICT (namespace, name) DO UPDATE
                     SET at_ms = EXCLUDED.at_ms, updated_ms = EXCLUDED.updated_ms",
                )
                .await?;
            let (at, now) = (
                record.at.as_millisecond(),
                record.updated_at.as_millisecond(),
            );
            tx.execute(&stmt, &[&record.namespace, &record.name, &at, &now])
                .await?;
            let live = lock_live(&tx, &record.namespace, &record.name).await?;
            let (mut ids, mut specs, mut states, mut dues, mut fires) =
                (vec![], vec![], vec![], vec![], vec![]);
            for job in &live {
                let Some(update) = move_update(job, &record.name, record.at, record.updated_at)
                else {
                    continue;
                };
                let (state, due, fire) = plan_update(job, &update)?;
                ids.push(job.id);
                specs.push(encode_spec(&update.spec));
                states.push(state_code(state) as i16);
                dues.push(due);
                fires.push(fire);
            }
            let stmt = tx
                .prepare_cached(&format!(
                    "UPDATE jobs SET spec = n.n_spec, state = n.n_state, due_ms = n.n_due,
                                 fire_ms = n.n_fire, attempt = 0, lease_owner = NULL,
                                 lease_fire_ms = NULL, lease_token = lease_token + 1,
                                 updated_ms = $6
                     FROM unnest($1::uuid[], $2::text[], $3::smallint[], $4::bigint[],
                                 $5::bigint[]) AS n(n_id, n_spec, n_state, n_due, n_fire)
                     WHERE id = n.n_id
                     RETURNING {JOB_COLUMNS}"
                ))
                .await?;
            let rows = tx
                .query(&stmt, &[&ids, &specs, &states, &dues, &fires, &now])
                .await?;
            let moved = rows.iter().map(job_from_row).collect::<Result<Vec<_>>>()?;
            let mut due = Due::default();
            for job in &moved {
                due.fenced.push((job.id, job.token));
                if let Some(fire) = job.next_attempt {
                    due.add(
                        &job.namespace,
                        job.spec.target.queue(),
                        fire.as_millisecond(),
                    );
                }
            }
            let entry = audit.map(|entry| entry.naming(moved.iter().map(|job| job.id)));
            super::audit::append_in(&tx, entry.as_ref()).await?;
            store.notify(&tx, &due).await?;
            tx.commit().await?;
            Ok(moved)
        })
        .await
}

pub(super) async fn get(
    store: &PostgresStore,
    namespace: &str,
    name: &str,
) -> Result<Option<AnchorRecord>> {
    store
        .bounded(async {
            let client = store.client().await?;
            let stmt = client
                .prepare_cached(
                    "SELECT at_ms, updated_ms FROM anchors WHERE namespace = $1 AND name = $2",
                )
                .await?;
            let Some(row) = client.query_opt(&stmt, &[&namespace, &name]).await? else {
                return Ok(None);
            };
            Ok(Some(record(
                namespace,
                name.into(),
                col(&row, 0)?,
                col(&row, 1)?,
            )))
        })
        .await
}

pub(super) async fn list(store: &PostgresStore, namespace: &str) -> Result<Vec<AnchorRecord>> {
    store
        .bounded(async {
            let client = store.client().await?;
            let stmt = client
                .prepare_cached(
                    "SELECT name, at_ms, updated_ms FROM anchors WHERE namespace = $1
                     ORDER BY name",
                )
                .await?;
            let rows = client.query(&stmt, &[&namespace]).await?;
            rows.iter()
                .map(|row| Ok(record(namespace, col(row, 0)?, col(row, 1)?, col(row, 2)?)))
                .collect()
        })
        .await
}

pub(super) async fn delete(
    store: &PostgresStore,
    namespace: &str,
    name: &str,
    how: AnchorDelete,
    audit: Option<AuditRecord>,
) -> Result<AnchorDeleted> {
    store
        .bounded(async {
            let mut client = store.client().await?;
            let tx = client.transaction().await?;
            let stmt = tx
                .prepare_cached(
                    "SELECT at_ms FROM anchors WHERE namespace = $1 AND name = $2 FOR UPDATE",
                )
                .await?;
            if tx.query_opt(&stmt, &[&namespace, &name]).await?.is_none() {
                return Ok(AnchorDeleted::NotFound);
            }
            let live = lock_live(&tx, namespace, name).await?;
            let now = match how {
                AnchorDelete::IfUnused => match live.first() {
                    Some(job) => return Ok(AnchorDeleted::InUse(job.id)),
                    None => 0,
                },
                AnchorDelete::Cancel { now } => now.as_millisecond(),
            };
            let stmt = tx
                .prepare_cached("DELETE FROM anchors WHERE namespace = $1 AND name = $2")
                .await?;
            tx.execute(&stmt, &[&namespace, &name]).await?;
            let ids: Vec<JobId> = live.iter().map(|j| j.id).collect();
            let cancelled = state_code(hourglass_core::JobState::Cancelled) as i16;
            // As a cancel transition does (`rules::plan_transition`), with the reason kept.
            let stmt = tx
                .prepare_cached(
                    "UPDATE jobs SET state = $2, fire_ms = NULL, attempt = 0, lease_owner = NULL,
                                 lease_fire_ms = NULL, lease_token = lease_token + 1,
                                 updated_ms = $3, key = NULL, last_error = $4
                     WHERE id = ANY($1)
                     RETURNING id, lease_token",
                )
                .await?;
            let reason = cancel_reason(name);
            let rows = tx.query(&stmt, &[&ids, &cancelled, &now, &reason]).await?;
            let mut due = Due::default();
            for row in &rows {
                let token: i64 = col(row, 1)?;
                due.fenced
                    .push((col(row, 0)?, hourglass_core::FencingToken::from_i64(token)));
            }
            let entry = audit.map(|mut entry| {
                entry.count = u32::try_from(rows.len()).unwrap_or(u32::MAX);
                entry
            });
            super::audit::append_in(&tx, entry.as_ref()).await?;
            store.notify(&tx, &due).await?;
            tx.commit().await?;
            Ok(AnchorDeleted::Deleted {
                cancelled: rows.len() as u64,
            })
        })
        .await
}
