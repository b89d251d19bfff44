//! Claims and what ends them without a completion: one `FOR UPDATE SKIP LOCKED` statement
//! takes due occurrences under a lease; extending and releasing claims lock their rows in id
//! order first; and the next due time a planner or a queue consumer waits for.

use std::collections::HashSet;
use std::sync::Arc;

use deadpool_postgres::GenericClient;
use hourglass_core::{Claim, FencingToken, JobId, Occurrence, from_ms};
use jiff::Timestamp;

use super::PostgresStore;
use super::codec::{col, decode_spec};
use super::notify::Due;
use crate::{Applied, ClaimScope, Lease, Release, Result};

/// Locks, in id order and in `tx`, the rows of the claims `(ids[i], tokens[i])` that still hold
/// that lease. Every statement that updates several claimed rows at once (completions, lease
/// renewals, releases) takes its locks this way first: two such statements on overlapping rows
/// (a node completing a batch while renewing its leases) then wait for each other instead of
/// deadlocking, which PostgreSQL would only break after a `deadlock_timeout`, long enough for a
/// short lease to lapse.
///
/// A row whose lease has moved on (another node took it over, an edit fenced it) is not locked:
/// the statement would leave it alone anyway, and waiting for its new owner's transactions would
/// tie a stalled node's clean-up to the healthy node's work. A node back from a pause holds
/// thousands of such claims; when they were locked too, its renewals and completions queued
/// behind the node that took them over and ran into the statement timeout (seen in CI, where
/// the multi-node test's two surviving nodes then kept losing claims to each other).
pub(super) async fn lock_in_id_order(
    tx: &impl GenericClient,
    ids: &[JobId],
    tokens: &[i64],
) -> Result<()> {
    let stmt = tx
        .prepare_cached(
            "SELECT j.id FROM jobs j
             JOIN unnest($1::uuid[], $2::bigint[]) AS c(id, token)
               ON j.id = c.id AND j.lease_token = c.token
             WHERE j.state = 0
             ORDER BY j.id FOR UPDATE OF j",
        )
        .await?;
    tx.query(&stmt, &[&ids, &tokens]).await?;
    Ok(())
}

/// The claim statements' shared tail: move the fire time to the lease expiry (keeping the old
/// one), take the owner and a fresh token. `$4` lease expiry, `$5` owner. `due` names each row
/// with the owner of its lapsed lease as it was locked (`previous_owner`, NULL when unleased).
const CLAIM_UPDATE: &str = "
    UPDATE jobs j SET fire_ms = $4, lease_owner = $5,
                      -- The occurrence's own fire time: fire_ms when unclaimed; for a lapsed
                      -- lease (fire_ms is its expiry) the time the first claim kept.
                      lease_fire_ms = CASE WHEN j.lease_owner IS NULL THEN j.fire_ms
                                           ELSE COALESCE(j.lease_fire_ms, j.fire_ms) END,
                      lease_token = j.lease_token + 1,
                      attempt = j.attempt + CASE WHEN $6 AND j.lease_owner IS NOT NULL
                                                 THEN 1 ELSE 0 END
    FROM due WHERE j.id = due.id
    RETURNING j.id, j.namespace, j.spec, j.payload, j.due_ms, j.lease_fire_ms, j.attempt,
              j.lease_token, j.runs, due.previous_owner";

pub(super) async fn claim_due(
    store: &PostgresStore,
    scope: ClaimScope<'_>,
    horizon: Timestamp,
    limit: usize,
    lease: &Lease,
) -> Result<Vec<Occurrence>> {
    let now = lease.now.as_millisecond();
    let lease_until = now.saturating_add(hourglass_core::duration_ms(lease.ttl));
    let horizon = horizon.as_millisecond();
    let limit = limit as i64;
    store
        .bounded(async {
            let client = store.client().await?;
            // A row still leased (its fire time is the lease expiry) is claimable only once that
            // expiry has passed by the claimer's clock, even when it lies within the horizon.
            let rows = match scope {
                ClaimScope::Fired => {
                    let stmt = client
                        .prepare_cached(&format!(
                            "WITH due AS MATERIALIZED (
                             SELECT id, lease_owner AS previous_owner FROM jobs
                             WHERE state = 0 AND queue IS NULL AND fire_ms <= $1
                               AND (lease_owner IS NULL OR fire_ms <= $2)
                             ORDER BY fire_ms LIMIT $3
                             FOR UPDATE SKIP LOCKED)
                         {CLAIM_UPDATE}"
                        ))
                        .await?;
                    client
                        .query(
                            &stmt,
                            &[&horizon, &now, &limit, &lease_until, &lease.owner, &false],
                        )
                        .await?
                }
                ClaimScope::Queue {
                    namespace,
                    queue,
                    types,
                    max_bytes,
                } => {
                    // A queue message still marked as leased is here because its lease ran out
                    // unacked: that lease was a failed attempt ($6). With a byte budget ($10),
                    // the rows locked past it are left unchanged (their locks end with the
                    // statement's transaction).
                    let max_bytes = max_bytes.map(|b| i64::try_from(b).unwrap_or(i64::MAX));
                    let stmt = client
                        .prepare_cached(&format!(
                            "WITH locked AS MATERIALIZED (
                             SELECT id, fire_ms, COALESCE(octet_length(payload), 0) AS bytes,
                                    lease_owner AS previous_owner
                             FROM jobs
                             WHERE state = 0 AND namespace = $7 AND queue = $8
                               AND fire_ms <= $1 AND (lease_owner IS NULL OR fire_ms <= $2)
                               AND ($9::text[] IS NULL OR job_type = ANY($9))
                             ORDER BY fire_ms LIMIT $3
                             FOR UPDATE SKIP LOCKED),
                             due AS (
                             SELECT id, previous_owner FROM (
                               SELECT id, previous_owner, SUM(bytes) OVER (ORDER BY fire_ms, id
                                                           ROWS UNBOUNDED PRECEDING) - bytes
                                        AS before
                               FROM locked) running
                             WHERE $10::bigint IS NULL OR before < GREATEST($10::bigint, 1))
                         {CLAIM_UPDATE}"
                        ))
                        .await?;
                    client
                        .query(
                            &stmt,
                            &[
                                &horizon,
                                &now,
                                &limit,
                                &lease_until,
                                &lease.owner,
                                &true,
                                &namespace,
                                &queue,
                                &types,
                                &max_bytes,
                            ],
                        )
                        .await?
                }
            };
            let mut claimed = rows
                .iter()
                .map(|row| {
                    let spec: String = col(row, 2)?;
                    let namespace: String = col(row, 1)?;
                    Ok(Occurrence {
                        job_id: col(row, 0)?,
                        namespace: namespace.into(),
                        spec: Arc::new(decode_spec(&spec)?),
                        payload: col::<Option<String>>(row, 3)?.map(Into::into),
                        due: from_ms(col(row, 4)?),
                        fire_at: from_ms(col(row, 5)?),
                        attempt: col::<i64>(row, 6)? as u32 + 1,
                        token: FencingToken::from_i64(col(row, 7)?),
                        runs_done: col::<i64>(row, 8)? as u64,
                        lapsed_owner: col::<Option<String>>(row, 9)?
                            .filter(|previous| *previous != lease.owner)
                            .map(Into::into),
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            // RETURNING keeps no order; callers get the earliest first, like the claim chose.
            claimed.sort_by_key(|o| o.fire_at);
            Ok(claimed)
        })
        .await
}

pub(super) async fn extend_claims(
    store: &PostgresStore,
    claims: Vec<Claim>,
    until: Timestamp,
    now: Timestamp,
) -> Result<Vec<Applied>> {
    if claims.is_empty() {
        return Ok(Vec::new());
    }
    let (until, now) = (until.as_millisecond(), now.as_millisecond());
    store
        .bounded(async {
            let mut client = store.client().await?;
            let (ids, tokens): (Vec<JobId>, Vec<i64>) =
                claims.iter().map(|c| (c.job_id, c.token.as_i64())).unzip();
            let tx = client.transaction().await?;
            lock_in_id_order(&tx, &ids, &tokens).await?;
            let stmt = tx
                .prepare_cached(
                    "UPDATE jobs j SET fire_ms = $3, updated_ms = $4
                 FROM unnest($1::uuid[], $2::bigint[]) AS c(id, token)
                 WHERE j.id = c.id AND j.lease_token = c.token AND j.state = 0
                   AND j.lease_owner IS NOT NULL
                 RETURNING j.id, j.lease_token",
                )
                .await?;
            let extended: HashSet<Claim> = tx
                .query(&stmt, &[&ids, &tokens, &until, &now])
                .await?
                .iter()
                .map(|row| {
                    Ok(Claim::new(
                        col(row, 0)?,
                        FencingToken::from_i64(col(row, 1)?),
                    ))
                })
                .collect::<Result<_>>()?;
            tx.commit().await?;
            Ok(claims
                .iter()
                .map(|claim| {
                    if extended.contains(claim) {
                        Applied::Yes
                    } else {
                        Applied::StaleLease
                    }
                })
                .collect())
        })
        .await
}

pub(super) async fn release(store: &PostgresStore, claims: Vec<Release>) -> Result<()> {
    if claims.is_empty() {
        return Ok(());
    }
    store
        .bounded(async {
            let ids: Vec<JobId> = claims.iter().map(|c| c.job_id).collect();
            let tokens: Vec<i64> = claims.iter().map(|c| c.token.as_i64()).collect();
            let fires: Vec<i64> = claims.iter().map(|c| c.fire_at.as_millisecond()).collect();
            let mut client = store.client().await?;
            let tx = client.transaction().await?;
            lock_in_id_order(&tx, &ids, &tokens).await?;
            let stmt = tx
                .prepare_cached(
                    "UPDATE jobs j SET fire_ms = r.fire_ms, lease_owner = NULL,
                                   lease_fire_ms = NULL
                 FROM unnest($1::uuid[], $2::bigint[], $3::bigint[]) AS r(id, token, fire_ms)
                 WHERE j.id = r.id AND j.lease_token = r.token AND j.state = 0
                 RETURNING j.namespace, j.queue, j.fire_ms",
                )
                .await?;
            let mut due = Due::default();
            for row in tx.query(&stmt, &[&ids, &tokens, &fires]).await? {
                let namespace: String = col(&row, 0)?;
                let queue: Option<String> = col(&row, 1)?;
                due.add(&namespace, queue.as_deref(), col(&row, 2)?);
            }
            // Released claims are due at once: other nodes should take them now.
            store.notify(&tx, &due).await?;
            tx.commit().await?;
            Ok(())
        })
        .await
}

pub(super) async fn next_due(
    store: &PostgresStore,
    scope: ClaimScope<'_>,
) -> Result<Option<Timestamp>> {
    store
        .bounded(async {
            let client = store.client().await?;
            let row = match scope {
                ClaimScope::Fired => {
                    let stmt = client
                        .prepare_cached(
                            "SELECT MIN(fire_ms) FROM jobs WHERE state = 0 AND queue IS NULL",
                        )
                        .await?;
                    client.query_one(&stmt, &[]).await?
                }
                ClaimScope::Queue {
                    namespace, queue, ..
                } => {
                    let stmt = client
                        .prepare_cached(
                            "SELECT MIN(fire_ms) FROM jobs
                         WHERE state = 0 AND namespace = $1 AND queue = $2",
                        )
                        .await?;
                    client.query_one(&stmt, &[&namespace, &queue]).await?
                }
            };
            Ok(col::<Option<i64>>(&row, 0)?.map(from_ms))
        })
        .await
}
