//! Each namespace's anchors, one row each, and the moves, deletes and creates that refer to them.
//! Every one runs inside one write of the writer thread (its own savepoint of a group commit), so
//! a move's jobs change together or not at all, and a reader never sees half a move. Jobs are
//! found by their `anchor` column (index `jobs_anchor`).

use std::collections::HashMap;

use hourglass_core::JobId;
use jiff::Timestamp;
use rusqlite::{Connection, OptionalExtension, params};

use super::codec::{encode_spec, id_from_blob, load_job, unavailable};
use super::jobs;
use crate::anchors::{cancel_reason, check_room, move_update, rebase_new};
use crate::{
    AnchorDelete, AnchorDeleted, AnchorRecord, JobRecord, NewJob, Result, StoreError, Transition,
};

fn record(namespace: &str, name: String, at_ms: i64, updated_ms: i64) -> AnchorRecord {
    AnchorRecord {
        namespace: namespace.to_owned(),
        name,
        at: hourglass_core::from_ms(at_ms),
        updated_at: hourglass_core::from_ms(updated_ms),
    }
}

fn at_ms(conn: &Connection, namespace: &str, name: &str) -> Result<Option<i64>> {
    conn.prepare_cached("SELECT at_ms FROM anchors WHERE namespace = ?1 AND name = ?2")
        .map_err(unavailable)?
        .query_row(params![namespace, name], |r| r.get(0))
        .optional()
        .map_err(unavailable)
}

/// The ids of the active (0) and paused (1) jobs of `namespace` on anchor `name`, in id order.
fn live_jobs(conn: &Connection, namespace: &str, name: &str) -> Result<Vec<JobId>> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT id FROM jobs WHERE namespace = ?1 AND anchor = ?2 AND state IN (0, 1)
             ORDER BY id",
        )
        .map_err(unavailable)?;
    let rows = stmt
        .query_map(params![namespace, name], |r| r.get::<_, Vec<u8>>(0))
        .map_err(unavailable)?;
    let mut out = vec![];
    for row in rows {
        out.push(id_from_blob(row.map_err(unavailable)?)?);
    }
    Ok(out)
}

fn live_count(conn: &Connection, namespace: &str, name: &str) -> Result<u64> {
    let n: i64 = conn
        .prepare_cached(
            "SELECT COUNT(*) FROM jobs WHERE namespace = ?1 AND anchor = ?2 AND state IN (0, 1)",
        )
        .map_err(unavailable)?
        .query_row(params![namespace, name], |r| r.get(0))
        .map_err(unavailable)?;
    Ok(n as u64)
}

/// Inside a create's write: re-bases the batch's anchored jobs on their anchors as stored now
/// (re-encoding the specs that changed), and refuses the batch when one names an anchor that is
/// gone or would pass an anchor's bound.
pub(super) fn prepare(conn: &Connection, jobs: &mut [(NewJob, Vec<u8>)]) -> Result<()> {
    let mut adding: HashMap<(String, String), u64> = HashMap::new();
    for (job, encoded) in jobs.iter_mut() {
        let Some(name) = crate::anchors::anchor_of(&job.spec).map(str::to_owned) else {
            continue;
        };
        let at = at_ms(conn, &job.namespace, &name)?
            .ok_or_else(|| StoreError::UnknownAnchor { name: name.clone() })?;
        let before = job.spec.schedule.kind.clone();
        rebase_new(job, hourglass_core::from_ms(at));
        if job.spec.schedule.kind != before {
            *encoded = encode_spec(&job.spec);
        }
        *adding.entry((job.namespace.clone(), name)).or_default() += 1;
    }
    for ((namespace, name), n) in adding {
        check_room(&name, live_count(conn, &namespace, &name)?, n)?;
    }
    Ok(())
}

pub(super) fn put(conn: &Connection, record: &AnchorRecord) -> Result<Vec<JobRecord>> {
    conn.prepare_cached(
        "INSERT INTO anchors (namespace, name, at_ms, updated_ms) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT(namespace, name) DO UPDATE
         SET at_ms = excluded.at_ms, updated_ms = excluded.updated_ms",
    )
    .map_err(unavailable)?
    .execute(params![
        record.namespace,
        record.name,
        record.at.as_millisecond(),
        record.updated_at.as_millisecond()
    ])
    .map_err(unavailable)?;
    let mut moved = vec![];
    for id in live_jobs(conn, &record.namespace, &record.name)? {
        let Some(job) = load_job(conn, Some(&record.namespace), id)? else {
            continue;
        };
        let Some(update) = move_update(&job, &record.name, record.at, record.updated_at) else {
            continue;
        };
        moved.push(jobs::update_in_tx(
            conn,
            Some(&record.namespace),
            id,
            update,
        )?);
    }
    Ok(moved)
}

pub(super) fn get(conn: &Connection, namespace: &str, name: &str) -> Result<Option<AnchorRecord>> {
    conn.prepare_cached("SELECT at_ms, updated_ms FROM anchors WHERE namespace = ?1 AND name = ?2")
        .map_err(unavailable)?
        .query_row(params![namespace, name], |r| {
            Ok(record(namespace, name.to_owned(), r.get(0)?, r.get(1)?))
        })
        .optional()
        .map_err(unavailable)
}

pub(super) fn list(conn: &Connection, namespace: &str) -> Result<Vec<AnchorRecord>> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT name, at_ms, updated_ms FROM anchors WHERE namespace = ?1 ORDER BY name",
        )
        .map_err(unavailable)?;
    let rows = stmt
        .query_map(params![namespace], |r| {
            Ok(record(namespace, r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .map_err(unavailable)?;
    rows.collect::<rusqlite::Result<_>>().map_err(unavailable)
}

pub(super) fn delete(
    conn: &Connection,
    namespace: &str,
    name: &str,
    how: AnchorDelete,
) -> Result<AnchorDeleted> {
    if at_ms(conn, namespace, name)?.is_none() {
        return Ok(AnchorDeleted::NotFound);
    }
    let live = live_jobs(conn, namespace, name)?;
    let now: Timestamp = match how {
        AnchorDelete::IfUnused => match live.first() {
            Some(id) => return Ok(AnchorDeleted::InUse(*id)),
            None => Timestamp::UNIX_EPOCH,
        },
        AnchorDelete::Cancel { now } => now,
    };
    conn.prepare_cached("DELETE FROM anchors WHERE namespace = ?1 AND name = ?2")
        .map_err(unavailable)?
        .execute(params![namespace, name])
        .map_err(unavailable)?;
    let reason = cancel_reason(name);
    let mut set_reason = conn
        .prepare_cached("UPDATE jobs SET last_error = ?2 WHERE id = ?1")
        .map_err(unavailable)?;
    for id in &live {
        jobs::transition_in_tx(conn, Some(namespace), *id, Transition::Cancel { now }, None)?;
        set_reason
            .execute(params![id.as_bytes().as_slice(), reason])
            .map_err(unavailable)?;
    }
    Ok(AnchorDeleted::Deleted {
        cancelled: live.len() as u64,
    })
}
