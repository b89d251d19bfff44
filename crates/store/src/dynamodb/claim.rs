//! Claims and what ends them without a completion. A claim reads every shard's due prefix from
//! the `due` index, then takes each candidate with a conditional update of its job item: the
//! condition re-checks on the item itself what the (eventually consistent) index said, so two
//! claimers never both win, and a stale index entry only costs a failed condition.

use std::sync::Arc;

use futures_util::StreamExt;
use hourglass_core::{JobId, Occurrence, duration_ms, from_ms};
use jiff::Timestamp;

use super::Inner;
use super::item::{
    Attrs, DUE_INDEX, Item, Lane, due_sk, due_sk_after, fire_of_due_sk, job_from_item, job_id,
    job_key, n, s, state_code,
};
use super::payload;
use super::table::{Change, Query};
use crate::{Applied, ClaimScope, JobRecord, Lease, Release, Result, StoreError};
use hourglass_core::JobState;

/// Conditional writes a batch sends at once.
pub(super) const CONCURRENCY: usize = 32;

fn lane<'a>(scope: ClaimScope<'a>) -> Lane<'a> {
    match scope {
        ClaimScope::Fired => Lane::Fired,
        ClaimScope::Queue {
            namespace, queue, ..
        } => Lane::Queue { namespace, queue },
    }
}

/// A due-index entry: its job, fire time, and whether a lease held it when the index was read.
struct Candidate {
    id: JobId,
    fire: i64,
    leased: bool,
    partition: String,
}

pub(super) async fn claim_due(
    inner: &Inner,
    scope: ClaimScope<'_>,
    horizon: Timestamp,
    limit: usize,
    lease: &Lease,
) -> Result<Vec<Occurrence>> {
    if limit == 0 {
        return Ok(Vec::new());
    }
    let now = lease.now.as_millisecond();
    let until = now.saturating_add(duration_ms(lease.ttl));
    let horizon = horizon.as_millisecond();
    let (is_queue, types) = match scope {
        ClaimScope::Fired => (false, None),
        ClaimScope::Queue { types, .. } => (true, types),
    };
    let lane = lane(scope);
    // Entries still leased at their expiry within the horizon are read too, and skipped: ask
    // for a few more than needed so they do not crowd out claimable ones.
    let entries = inner
        .query_shards(
            |shard| lane.partition(shard),
            |partition| {
                Query::new(Some(DUE_INDEX), partition)
                    .below(due_sk_after(horizon))
                    .limit(limit.saturating_mul(2).max(16))
            },
        )
        .await?;
    let mut candidates = Vec::new();
    for entry in &entries {
        let dsk = entry.str("dsk")?;
        let fire = fire_of_due_sk(dsk)?;
        let leased = entry.opt_str("lowner")?.is_some();
        // A job still leased (its fire time is the lease expiry) only once that expiry has
        // passed by the claimer's clock, however soon within the horizon.
        if leased && fire > now {
            continue;
        }
        if let Some(types) = types
            && !entry
                .opt_str("jtype")?
                .is_some_and(|t| types.iter().any(|wanted| wanted == t))
        {
            continue;
        }
        let id = dsk
            .split_once('#')
            .map(|(_, id)| id)
            .ok_or_else(|| StoreError::Corrupt(format!("due index sort key {dsk:?}")))?;
        candidates.push(Candidate {
            id: job_id(id)?,
            fire,
            leased,
            partition: entry.str("dpk")?.to_owned(),
        });
        if candidates.len() == limit {
            break;
        }
    }
    let owner: Arc<str> = lease.owner.as_str().into();
    // With a byte budget, candidates are taken in waves until the payloads taken reach it (a
    // payload is known only once its job is taken): the first wave takes one, each later one as
    // many as the budget left holds at the largest payload seen so far (at most `CONCURRENCY`).
    // Payloads of one size stop at the budget exactly; growing ones may pass it by a wave.
    let max_bytes = scope.max_bytes();
    let mut candidates = candidates.into_iter().peekable();
    let mut attempts = Vec::new();
    let (mut bytes, mut largest, mut took_any) = (0usize, 0usize, false);
    while candidates.peek().is_some() && crate::under_byte_budget(max_bytes, bytes) {
        let wave = match max_bytes {
            None => usize::MAX,
            Some(_) if !took_any => 1,
            Some(max) => max
                .saturating_sub(bytes)
                .div_ceil(largest.max(1))
                .clamp(1, CONCURRENCY),
        };
        let taken = futures_util::stream::iter(candidates.by_ref().take(wave))
            .map(|candidate| {
                let owner = owner.clone();
                async move { take(inner, candidate, &owner, now, horizon, until, is_queue).await }
            })
            .buffer_unordered(CONCURRENCY)
            .collect::<Vec<_>>()
            .await;
        for occurrence in taken
            .iter()
            .filter_map(|t| t.as_ref().ok().and_then(Option::as_ref))
        {
            let size = occurrence.payload.as_deref().map_or(0, str::len);
            bytes += size;
            largest = largest.max(size);
            took_any = true;
        }
        attempts.extend(taken);
    }
    let mut claimed = Vec::with_capacity(attempts.len());
    let mut failure = None;
    for attempt in attempts {
        match attempt {
            Ok(Some(occurrence)) => claimed.push(occurrence),
            Ok(None) => {}
            Err(e) => failure = Some(e),
        }
    }
    // Claims that were taken are handed out even when others failed: left unreported, they
    // would wait for their lease to lapse.
    if claimed.is_empty()
        && let Some(e) = failure
    {
        return Err(e);
    }
    claimed.sort_by_key(|o| (o.fire_at, o.job_id));
    Ok(claimed)
}

/// Takes one candidate if the job item still agrees: active, in the same lane, and either
/// unleased and due by the horizon, or leased with the lease lapsed.
async fn take(
    inner: &Inner,
    candidate: Candidate,
    owner: &str,
    now: i64,
    horizon: i64,
    until: i64,
    is_queue: bool,
) -> Result<Option<Occurrence>> {
    let mut change = Change::new(job_key(candidate.id));
    change.when(
        "#st = {} AND #dpk = {}",
        &["st", "dpk"],
        vec![n(state_code(JobState::Active)), s(candidate.partition)],
    );
    if candidate.leased {
        change.when(
            "attribute_exists(#lowner) AND #fire <= {}",
            &["lowner", "fire"],
            vec![n(now)],
        );
        // A queue message still leased is here because its lease ran out unacked: that lease
        // was a failed attempt. (The engine's own lapsed claims are not: the node that held
        // them may never have fired them.)
        if is_queue {
            change.add("att", 1);
        }
    } else {
        change.when(
            "attribute_not_exists(#lowner) AND #fire <= {}",
            &["lowner", "fire"],
            vec![n(horizon)],
        );
        // The occurrence's own fire time, restored by a release.
        change.copy("lfire", "fire");
    }
    change.set("fire", n(until));
    change.set("dsk", s(due_sk(until, candidate.id)));
    change.set("lowner", s(owner));
    change.add("tok", 1);
    let Some(item) = inner.update(change, true).await? else {
        return Ok(None);
    };
    let mut job = job_from_item(&item)?;
    if let Some(version) = payload::version_of(&item)? {
        // `None`: an edit since the claim wrote another payload, and voided the claim (it reset
        // the lease and raised the token).
        match inner.claimed_payload(job.id, version, job.token).await? {
            Some(payload) => job.payload = Some(payload),
            None => return Ok(None),
        }
    }
    occurrence(&item, job, candidate.fire).map(Some)
}

/// The occurrence a claim took: `job` is the claimed item's record, payload filled in.
fn occurrence(item: &Item, job: JobRecord, seen_fire: i64) -> Result<Occurrence> {
    let own_fire = item.opt_num("lfire")?.unwrap_or(seen_fire);
    Ok(Occurrence {
        job_id: job.id,
        namespace: job.namespace.as_str().into(),
        due: job.next_due.unwrap_or(from_ms(own_fire)),
        fire_at: from_ms(own_fire),
        attempt: job.attempt + 1,
        token: job.token,
        runs_done: job.runs,
        spec: Arc::new(job.spec),
        payload: job.payload.map(Into::into),
    })
}

pub(super) async fn extend_claims(
    inner: &Inner,
    claims: Vec<(JobId, i64)>,
    until: Timestamp,
    now: Timestamp,
) -> Result<Vec<Applied>> {
    let (until, now) = (until.as_millisecond(), now.as_millisecond());
    let answers = futures_util::stream::iter(claims)
        .map(|(id, token)| async move {
            // Only a claim still held: a released or completed one has nothing to extend.
            let mut change = Change::new(job_key(id));
            change.when(
                "#tok = {} AND #st = {} AND attribute_exists(#lowner)",
                &["tok", "st", "lowner"],
                vec![n(token), n(state_code(JobState::Active))],
            );
            change.set("fire", n(until));
            change.set("dsk", s(due_sk(until, id)));
            change.set("up", n(now));
            Ok::<_, crate::StoreError>(match inner.update(change, false).await? {
                Some(_) => Applied::Yes,
                None => Applied::StaleLease,
            })
        })
        .buffered(CONCURRENCY)
        .collect::<Vec<_>>()
        .await;
    answers.into_iter().collect()
}

pub(super) async fn release(inner: &Inner, claims: Vec<Release>) -> Result<()> {
    let answers = futures_util::stream::iter(claims)
        .map(|c| async move {
            let mut change = Change::new(job_key(c.job_id));
            change.when(
                "#tok = {} AND #st = {}",
                &["tok", "st"],
                vec![n(c.token), n(state_code(JobState::Active))],
            );
            let fire = c.fire_at.as_millisecond();
            change.set("fire", n(fire));
            change.set("dsk", s(due_sk(fire, c.job_id)));
            change.remove("lowner");
            change.remove("lfire");
            inner.update(change, false).await.map(|_| ())
        })
        .buffer_unordered(CONCURRENCY)
        .collect::<Vec<_>>()
        .await;
    answers.into_iter().collect()
}

pub(super) async fn next_due(inner: &Inner, scope: ClaimScope<'_>) -> Result<Option<Timestamp>> {
    // Claimed jobs count at their lease expiry; a queue scope's type filter is ignored.
    let lane = lane(scope);
    let first = inner
        .query_shards(
            |shard| lane.partition(shard),
            |partition| Query::new(Some(DUE_INDEX), partition).limit(1),
        )
        .await?;
    match first.first() {
        Some(entry) => Ok(Some(from_ms(fire_of_due_sk(entry.str("dsk")?)?))),
        None => Ok(None),
    }
}
