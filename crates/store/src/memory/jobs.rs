//! Jobs as the API changes them: creating batches all or nothing (with idempotent keys, also
//! repeated within a batch), reading by id or key, listing and counting, edits, and lifecycle
//! transitions as `rules.rs` plans them.

use std::collections::{BTreeSet, HashMap};
use std::ops::Bound;
use std::sync::Arc;

use hourglass_core::JobId;

use super::state::{Job, State};
use crate::rules::{TransitionPlan, plan_transition, plan_update};
use crate::{
    AuditRecord, Created, JobQuery, JobRecord, JobUpdate, NewJob, Result, StoreError, Transition,
};

/// A decision of [`Store::create_jobs`](crate::Store::create_jobs) about one job of the batch, made before anything is
/// written.
enum Creation {
    New,
    /// The key is held, with the same fingerprint, by this stored job.
    Existing(Box<JobRecord>),
    /// The key is taken, with the same fingerprint, by the job at this index of the same batch.
    SameAs(usize),
}

pub(super) fn create_jobs(state: &mut State, jobs: Vec<NewJob>) -> Result<Vec<Created>> {
    // All or nothing: decide every job first, so that a conflict changes nothing.
    let mut decisions = Vec::with_capacity(jobs.len());
    // The keys taken by earlier jobs of this batch, and by which one.
    let mut batch_keys: HashMap<(&str, &str), usize> = HashMap::new();
    let mut batch_ids = BTreeSet::new();
    for (index, job) in jobs.iter().enumerate() {
        if let Some(key) = &job.key {
            let stored = state
                .keys
                .get(&(job.namespace.clone(), key.clone()))
                .and_then(|id| state.jobs.get(id));
            let earlier = batch_keys.get(&(job.namespace.as_str(), key.as_str()));
            let (holder, fingerprint, decision) = match (stored, earlier) {
                (Some(held), _) => (
                    held.id,
                    held.fingerprint,
                    Creation::Existing(Box::new(held.record())),
                ),
                (None, Some(&i)) => (jobs[i].id, jobs[i].fingerprint, Creation::SameAs(i)),
                (None, None) => {
                    batch_keys.insert((&job.namespace, key), index);
                    (job.id, job.fingerprint, Creation::New)
                }
            };
            if fingerprint != job.fingerprint {
                return Err(StoreError::KeyConflict {
                    index,
                    key: key.clone(),
                    existing: holder,
                });
            }
            if !matches!(decision, Creation::New) {
                decisions.push(decision);
                continue;
            }
        }
        // Ids are the caller's (uuid v7); a repeated one is refused like a primary key.
        if state.jobs.contains_key(&job.id) || !batch_ids.insert(job.id) {
            return Err(StoreError::Unavailable(format!(
                "job id {} is already used",
                job.id
            )));
        }
        decisions.push(Creation::New);
    }
    // Nothing below can fail.
    let mut out: Vec<Created> = Vec::with_capacity(jobs.len());
    for (job, decision) in jobs.into_iter().zip(decisions) {
        let created = match decision {
            Creation::New => {
                state.insert_job(&job);
                Created::New(job.into_record())
            }
            Creation::Existing(record) => Created::Existing(*record),
            Creation::SameAs(i) => Created::Existing(out[i].record().clone()),
        };
        out.push(created);
    }
    Ok(out)
}

pub(super) fn get_job_by_key(
    state: &State,
    namespace: &str,
    key: &str,
) -> Result<Option<JobRecord>> {
    let slot = (namespace.to_owned(), key.to_owned());
    Ok(state
        .keys
        .get(&slot)
        .and_then(|id| state.job_in(Some(namespace), *id))
        .map(Job::record))
}

pub(super) fn list_jobs(state: &State, query: JobQuery) -> Result<Vec<JobRecord>> {
    let from = query.after.map_or(Bound::Unbounded, Bound::Excluded);
    let before = query.due_before.map(|t| t.as_millisecond());
    let after = query.due_after.map(|t| t.as_millisecond());
    Ok(state
        .jobs
        .range((from, Bound::Unbounded))
        .map(|(_, job)| job)
        .filter(|job| job.visible_in(query.namespace.as_deref()))
        .filter(|job| query.state.is_none_or(|s| s == job.state))
        .filter(|job| {
            query
                .job_type
                .as_ref()
                .is_none_or(|t| job.spec.job_type.as_ref() == Some(t))
        })
        // A job without a due time is in no due window (as NULL compares in SQL).
        .filter(|job| before.is_none_or(|b| job.due.is_some_and(|d| d < b)))
        .filter(|job| after.is_none_or(|a| job.due.is_some_and(|d| d >= a)))
        .filter(|job| {
            query
                .queue
                .as_deref()
                .is_none_or(|q| job.spec.target.queue() == Some(q))
        })
        .filter(|job| hourglass_core::labels::matches_all(&query.labels, &job.spec.labels))
        .filter(|job| {
            query.anchor.as_deref().is_none_or(|a| {
                job.spec.schedule.anchor.as_deref().map(|x| x.name.as_str()) == Some(a)
            })
        })
        .take(query.limit)
        .map(Job::record)
        .collect())
}

pub(super) fn count_jobs(state: &State, namespace: Option<&str>) -> Result<u64> {
    Ok(state
        .jobs
        .values()
        .filter(|job| job.visible_in(namespace))
        .count() as u64)
}

pub(super) fn update_job(
    state: &mut State,
    namespace: Option<&str>,
    id: JobId,
    update: JobUpdate,
) -> Result<JobRecord> {
    let job = state.job_in(namespace, id).ok_or(StoreError::NotFound)?;
    let (new_state, due, fire) = plan_update(&job.record(), &update)?;
    let JobUpdate {
        spec, payload, now, ..
    } = update;
    state
        .change(id, |job| {
            job.spec = Arc::new(spec);
            job.payload = payload;
            job.state = new_state;
            job.due = due;
            job.fire = fire;
            job.attempt = 0;
            job.lease = None;
            job.token += 1;
            job.updated = now.as_millisecond();
            job.record()
        })
        .ok_or(StoreError::NotFound)
}

pub(super) fn transition(
    state: &mut State,
    namespace: Option<&str>,
    id: JobId,
    transition: Transition,
    audit: Option<AuditRecord>,
) -> Result<JobRecord> {
    let job = state.job_in(namespace, id).ok_or(StoreError::NotFound)?;
    let record = job.record();
    let (new_state, due, fire, clear_key, trigger_key, now) =
        match plan_transition(&record, transition)? {
            TransitionPlan::Unchanged => return Ok(record),
            TransitionPlan::Apply {
                state,
                due,
                fire,
                clear_key,
                trigger_key,
                now,
            } => (state, due, fire, clear_key, trigger_key, now),
        };
    if clear_key && let Some(key) = &record.key {
        let slot = (record.namespace.clone(), key.clone());
        if state.keys.get(&slot) == Some(&id) {
            state.keys.remove(&slot);
        }
    }
    let changed = state
        .change(id, |job| {
            job.state = new_state;
            job.due = due;
            job.fire = fire;
            job.attempt = 0;
            job.lease = None;
            job.token += 1;
            job.updated = now;
            if clear_key {
                job.key = None;
            }
            if let Some(key) = trigger_key {
                job.trigger = Some((key, now));
            }
            job.record()
        })
        .ok_or(StoreError::NotFound)?;
    if let Some(entry) = audit {
        state.audit.append(entry)?;
    }
    Ok(changed)
}
