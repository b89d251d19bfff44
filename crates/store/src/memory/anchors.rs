//! Anchors in memory: the records by (namespace, name), and moves, deletes and creates that
//! refer to them, each under the store's one lock (so a move is one transaction, as in SQL).
//! Jobs are found by scanning: this store holds test-sized data.

use hourglass_core::JobId;
use jiff::Timestamp;

use super::jobs;
use super::state::State;
use crate::anchors::{anchor_of, cancel_reason, check_room, is_live, move_update, rebase_new};
use crate::{
    AnchorDelete, AnchorDeleted, AnchorRecord, JobRecord, NewJob, Result, StoreError, Transition,
};

/// The live jobs of `namespace` referring to anchor `name`, in id order.
fn live_jobs(state: &State, namespace: &str, name: &str) -> Vec<JobId> {
    state
        .jobs
        .values()
        .filter(|job| job.namespace == namespace && is_live(job.state))
        .filter(|job| anchor_of(&job.spec) == Some(name))
        .map(|job| job.id)
        .collect()
}

/// Re-bases a batch's anchored jobs on their anchors as stored now, and refuses the batch when
/// one names an anchor that is gone or would pass an anchor's bound.
pub(super) fn prepare(state: &State, jobs: &mut [NewJob]) -> Result<()> {
    let mut adding: std::collections::HashMap<(String, String), u64> = Default::default();
    for job in jobs.iter_mut() {
        let Some(name) = anchor_of(&job.spec).map(str::to_owned) else {
            continue;
        };
        let key = (job.namespace.clone(), name.clone());
        let record = state
            .anchors
            .get(&key)
            .ok_or_else(|| StoreError::UnknownAnchor { name: name.clone() })?;
        rebase_new(job, record.at);
        *adding.entry(key).or_default() += 1;
    }
    for ((namespace, name), n) in adding {
        check_room(&name, live_jobs(state, &namespace, &name).len() as u64, n)?;
    }
    Ok(())
}

pub(super) fn put(state: &mut State, record: &AnchorRecord) -> Result<Vec<JobRecord>> {
    let key = (record.namespace.clone(), record.name.clone());
    state.anchors.insert(key, record.clone());
    let mut moved = vec![];
    for id in live_jobs(state, &record.namespace, &record.name) {
        let Some(job) = state.jobs.get(&id).map(|j| j.record()) else {
            continue;
        };
        let Some(update) = move_update(&job, &record.name, record.at, record.updated_at) else {
            continue;
        };
        moved.push(jobs::update_job(
            state,
            Some(&record.namespace),
            id,
            update,
        )?);
    }
    Ok(moved)
}

pub(super) fn delete(
    state: &mut State,
    namespace: &str,
    name: &str,
    how: AnchorDelete,
) -> Result<AnchorDeleted> {
    let key = (namespace.to_owned(), name.to_owned());
    if !state.anchors.contains_key(&key) {
        return Ok(AnchorDeleted::NotFound);
    }
    let live = live_jobs(state, namespace, name);
    let now: Timestamp = match how {
        AnchorDelete::IfUnused => match live.first() {
            Some(id) => return Ok(AnchorDeleted::InUse(*id)),
            None => Timestamp::UNIX_EPOCH,
        },
        AnchorDelete::Cancel { now } => now,
    };
    state.anchors.remove(&key);
    let reason = cancel_reason(name);
    for id in &live {
        jobs::transition(
            state,
            Some(namespace),
            *id,
            Transition::Cancel { now },
            None,
        )?;
        state.change(*id, |job| job.last_error = Some(reason.clone()));
    }
    Ok(AnchorDeleted::Deleted {
        cancelled: live.len() as u64,
    })
}
