//! Claims: handing out due occurrences under a lease and a new fencing token, extending and
//! releasing those leases, and the next due time a planner or a queue's long poll waits for.

use hourglass_core::{Claim, FencingToken, Occurrence, duration_ms, from_ms};
use jiff::Timestamp;

use super::state::{Held, Lane, State};
use crate::{Applied, ClaimScope, Lease, Release, Result, StoreError};

pub(super) fn claim_due(
    state: &mut State,
    scope: ClaimScope<'_>,
    horizon: Timestamp,
    limit: usize,
    lease: &Lease,
) -> Result<Vec<Occurrence>> {
    let now = lease.now.as_millisecond();
    let until = now.saturating_add(duration_ms(lease.ttl));
    let (is_queue, types) = match scope {
        ClaimScope::Fired => (false, None),
        ClaimScope::Queue { types, .. } => (true, types),
    };
    // Due by the horizon; a job still leased (its fire time is the lease expiry) only once
    // that expiry has passed by the claimer's clock, however soon within the horizon.
    let max_bytes = scope.max_bytes();
    let mut picked = Vec::new();
    let mut bytes = 0usize;
    for (_, fire, _, id) in state.due_in(Lane::of(scope), horizon.as_millisecond()) {
        if picked.len() >= limit || !crate::under_byte_budget(max_bytes, bytes) {
            break;
        }
        let Some(job) = state.jobs.get(id) else {
            return Err(StoreError::Corrupt(format!(
                "due index names missing job {id}"
            )));
        };
        if job.lease.is_some() && *fire > now {
            continue;
        }
        if let Some(types) = types
            && !job
                .spec
                .job_type
                .as_ref()
                .is_some_and(|t| types.contains(t))
        {
            continue;
        }
        if job.due.is_none() {
            return Err(StoreError::Corrupt(format!(
                "active job {id} has no due time"
            )));
        }
        bytes += job.payload.as_deref().map_or(0, str::len);
        picked.push(*id);
    }
    let mut claimed = Vec::with_capacity(picked.len());
    let owner: std::sync::Arc<str> = lease.owner.as_str().into();
    for id in picked {
        let occurrence = state.change(id, |job| {
            let own_fire = match &job.lease {
                None => job.fire.unwrap_or_default(),
                Some(held) => held.own_fire,
            };
            let lapsed_owner = job
                .lease
                .as_ref()
                .map(|held| held.owner.clone())
                .filter(|previous| *previous != owner);
            // A queue message still leased is here because its lease ran out unacked: that
            // lease was a failed attempt. (The engine's own lapsed claims are not: the node
            // that held them may never have fired them.)
            if is_queue && job.lease.is_some() {
                job.attempt += 1;
            }
            job.lease = Some(Held {
                own_fire,
                owner: owner.clone(),
            });
            job.fire = Some(until);
            job.token += 1;
            Occurrence {
                job_id: job.id,
                namespace: job.namespace.as_str().into(),
                due: from_ms(job.due.unwrap_or(own_fire)),
                fire_at: from_ms(own_fire),
                attempt: job.attempt + 1,
                token: FencingToken::from_i64(job.token),
                runs_done: job.runs,
                spec: job.spec.clone(),
                payload: job.payload.as_deref().map(Into::into),
                lapsed_owner,
            }
        });
        claimed.extend(occurrence);
    }
    // Earliest own fire time first (a lapsed lease was picked at its expiry).
    claimed.sort_by_key(|o| o.fire_at);
    Ok(claimed)
}

pub(super) fn extend_claims(
    state: &mut State,
    claims: Vec<Claim>,
    until: Timestamp,
    now: Timestamp,
) -> Result<Vec<Applied>> {
    let (until, now) = (until.as_millisecond(), now.as_millisecond());
    Ok(claims
        .into_iter()
        .map(|Claim { job_id, token }| {
            let extended = state.change(job_id, |job| {
                // Only a claim still held: a released or completed one has nothing to extend.
                let held = job.fenced_by(token) && job.lease.is_some();
                if held {
                    job.fire = Some(until);
                    job.updated = now;
                }
                held
            });
            if extended == Some(true) {
                Applied::Yes
            } else {
                Applied::StaleLease
            }
        })
        .collect())
}

pub(super) fn release(state: &mut State, claims: Vec<Release>) -> Result<()> {
    for c in claims {
        state.change(c.job_id, |job| {
            if job.fenced_by(c.token) {
                job.fire = Some(c.fire_at.as_millisecond());
                job.lease = None;
            }
        });
    }
    Ok(())
}

pub(super) fn next_due(state: &State, scope: ClaimScope<'_>) -> Result<Option<Timestamp>> {
    // Claimed jobs count at their lease expiry; a queue scope's type filter is ignored.
    Ok(state
        .due_in(Lane::of(scope), i64::MAX)
        .next()
        .map(|(_, fire, ..)| from_ms(*fire)))
}
