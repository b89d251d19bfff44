//! The renewer: keeps the leases of the claims this node holds alive, and drops from the timer
//! the ones the store says are no longer this node's.

use std::sync::Arc;
use std::time::Duration;

use hourglass_core::{add_saturating, duration_ms};
use tokio_util::sync::CancellationToken;

use super::{Context, Held, Stage};
use crate::Forget;

/// Most claims renewed per store call.
const RENEW_BATCH: usize = 5000;

/// Keeps this node's claims alive: every third of the lease TTL it moves the lease expiry of each
/// claim it still holds that is at least that old. A claim found stale (taken over by another
/// node after this one stalled, or fenced by an edit) is dropped from the timer if it has not
/// fired; a delivery already running finishes and its completion is refused. With no claims held
/// it sleeps until the planner adds some: an idle node has no timer running.
pub(super) struct Renewer {
    /// The engine's configuration, store, clock, metrics and wake-ups.
    pub ctx: Arc<Context>,
    /// The claims to keep alive.
    pub held: Arc<Held>,
    /// The completer's end: no claim is held after it.
    pub drained: CancellationToken,
}

impl Stage for Renewer {
    const NAME: &'static str = "renewer";

    async fn run(self) {
        let Self { ctx, held, drained } = self;
        let ttl = ctx.config.lease_ttl;
        let every = (ttl / 3).max(Duration::from_millis(10));
        let ttl_ms = duration_ms(ttl);
        let every_ms = duration_ms(every);
        loop {
            if held.is_empty() {
                tokio::select! {
                    _ = held.arrived.notified() => {}
                    _ = drained.cancelled() => break,
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(every) => {}
                _ = drained.cancelled() => break,
            }
            let now = ctx.clock.now();
            // Claims whose remaining lease is down to two thirds or less.
            let renew_before = now.as_millisecond().saturating_add(ttl_ms - every_ms);
            let due = held.expiring(renew_before);
            let until = add_saturating(now, ttl);
            for chunk in due.chunks(RENEW_BATCH) {
                match ctx.store.extend_claims(chunk.to_vec(), until, now).await {
                    Ok(applied) => {
                        let lost = held.renewed(chunk, applied, until.as_millisecond());
                        for claim in &lost {
                            let _ = ctx.shared.forget_tx.send(Forget {
                                job_id: claim.job_id,
                                below: claim.token.next(),
                            });
                        }
                        let lost = lost.len() as u64;
                        if lost > 0 {
                            ctx.metrics.lost_leases.inc_by(lost);
                            tracing::warn!(
                                lost,
                                "claims were taken over or fenced before this node finished them"
                            );
                        }
                    }
                    Err(e) => {
                        // The next round tries again; a lease that lapses meanwhile is taken over,
                        // and this node's completion for it is refused (a redelivery, not a loss).
                        ctx.metrics.store_errors.inc();
                        tracing::warn!(error = %e, count = chunk.len(), "could not renew leases");
                        break;
                    }
                }
            }
        }
        tracing::debug!("renewer stopped");
    }
}
