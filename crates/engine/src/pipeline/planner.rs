//! The planner: claims what is due within the lookahead, in batches, under a lease, and hands
//! it to the timer; sleeps until the next due time when there is nothing to claim.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use hourglass_core::{Clock, Occurrence, add_saturating};
use hourglass_store::{ClaimScope, Lease};
use jiff::Timestamp;
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use super::{Backoff, Context, Held, Stage, wake_lead};

/// Shortest sleep of a planner that found due work it could not claim (a live lease elsewhere,
/// or rows another node is claiming this instant), so it does not spin on the store.
const UNCLAIMABLE_RETRY: Duration = Duration::from_millis(5);

/// Claims what is due within the lookahead, in batches, and hands it to the timer. With nothing
/// due it sleeps until the earliest due time (minus the lookahead) or until poked: an idle node
/// makes one cheap "next due" query and then no work at all.
pub(super) struct Planner {
    /// The engine's configuration, store, clock, metrics and wake-ups.
    pub ctx: Arc<Context>,
    /// Claimed batches, on their way to the timer.
    pub timer_tx: mpsc::Sender<Vec<Occurrence>>,
    /// One permit per occurrence claimed and not yet completed; the completer returns them.
    pub in_flight: Arc<Semaphore>,
    /// Every claim is recorded here, for the renewer, before the timer gets it.
    pub held: Arc<Held>,
}

impl Stage for Planner {
    const NAME: &'static str = "planner";

    async fn run(self) {
        let Self {
            ctx,
            timer_tx,
            in_flight,
            held,
        } = self;
        let shared = &ctx.shared;
        let lead = wake_lead(ctx.config.lookahead);
        let mut backoff = Backoff::default();
        tracing::debug!(node = %ctx.config.node_id, "planner started");
        while !ctx.stop.is_cancelled() {
            shared.planner_wake_at.store(i64::MAX, Ordering::Release);
            let available = in_flight.available_permits();
            if available == 0 {
                // Full: the completer tells us when it returns permits (a notice sent before we
                // wait is kept, so none is lost between the check and the wait).
                tokio::select! {
                    _ = shared.permits_returned.notified() => {}
                    _ = ctx.stop.cancelled() => break,
                }
                continue;
            }
            let limit = available.min(ctx.config.claim_batch);
            let now = ctx.clock.now();
            let horizon = add_saturating(now, ctx.config.lookahead);
            // Woken by a resync: look at the next due time before claiming, and claim only if
            // something is due within the lookahead (the probe then serves the sleep below).
            let mut probed = None;
            let claim_now = shared.claim_now.swap(false, Ordering::AcqRel);
            if shared.probe_first.swap(false, Ordering::AcqRel) && !claim_now {
                tokio::select! {
                    probe = ctx.store.next_due(ClaimScope::Fired) => match probe {
                        Ok(Some(next)) if next <= horizon => {}
                        // A failed probe: the claim tells the store's state, and backs off.
                        Err(_) => {}
                        Ok(next) => probed = Some(next),
                    },
                    _ = ctx.stop.cancelled() => break,
                }
            }
            if probed.is_none() {
                let lease = Lease {
                    owner: ctx.config.node_id.clone(),
                    ttl: ctx.config.lease_ttl,
                    now,
                };
                // Fences that arrive while the claim is on its way back apply to what it brings.
                let claiming = held.claiming();
                let claimed = match ctx
                    .store
                    .claim_due(ClaimScope::Fired, horizon, limit, &lease)
                    .await
                {
                    Ok(claimed) => claimed,
                    Err(e) => {
                        ctx.metrics.store_errors.inc();
                        let wait = backoff.failed();
                        tracing::warn!(error = %e, retry_in_ms = wait.as_millis() as u64, "claim failed");
                        sleep_or_stop(&ctx.stop, wait).await;
                        continue;
                    }
                };
                backoff.succeeded();
                warn_of_takeover(&claimed);
                let count = claimed.len();
                if count > 0 {
                    // Permits are returned by the completer, one per completed occurrence.
                    in_flight
                        .try_acquire_many(count as u32)
                        .expect("claimed no more than the available permits")
                        .forget();
                    ctx.metrics.claimed.inc_by(count as u64);
                    ctx.metrics.in_flight.inc_by(count as i64);
                    let lease_until = add_saturating(now, ctx.config.lease_ttl).as_millisecond();
                    claiming.add(&claimed, lease_until);
                    if timer_tx.send(claimed).await.is_err() {
                        break;
                    }
                }
                if count == limit {
                    continue;
                }
            }
            // The next due time this planner sleeps for, and its extra lead (see `wake_jitter`):
            // drawn afresh for every new next due time, kept when looking again finds the same
            // one, so that looking again does not by itself move the wake-up.
            let mut planned: Option<(Timestamp, Duration)> = None;
            let stopped = loop {
                // A read, so a stop need not wait for it (a claim in flight is waited for: its
                // claims are then handed back at once instead of lapsing after their lease).
                let probe = match probed.take() {
                    Some(next) => Ok(next),
                    None => tokio::select! {
                        probe = ctx.store.next_due(ClaimScope::Fired) => probe,
                        _ = ctx.stop.cancelled() => break true,
                    },
                };
                let next = match probe {
                    Ok(next) => next,
                    Err(e) => {
                        ctx.metrics.store_errors.inc();
                        let wait = backoff.failed();
                        tracing::warn!(error = %e, "next-due probe failed");
                        sleep_or_stop(&ctx.stop, wait).await;
                        break false;
                    }
                };
                // Something due within the horizon just claimed is something that could not be
                // claimed: a live lease of another node (claimable at its expiry) or rows being
                // claimed by another node this instant. Look again then, not half a lookahead
                // before, and claim at once.
                let (wake_at, look_again) = match next {
                    Some(n) if n <= horizon => (
                        Some(n.max(add_saturating(ctx.clock.now(), UNCLAIMABLE_RETRY))),
                        false,
                    ),
                    Some(n) => {
                        let extra = match planned {
                            Some((at, extra)) if at == n => extra,
                            _ => wake_jitter(lead),
                        };
                        planned = Some((n, extra));
                        (Some(hourglass_core::sub_saturating(n, lead + extra)), true)
                    }
                    None => (None, false),
                };
                shared.planner_wake_at.store(
                    wake_at.map_or(i64::MAX, |w| w.as_millisecond()),
                    Ordering::Release,
                );
                match wake_at {
                    Some(wake_at) if wake_at <= ctx.clock.now() => break false,
                    Some(wake_at) => {
                        let sleep = tokio::time::sleep(ms_until(&*ctx.clock, wake_at));
                        tokio::select! {
                            // Another node may have claimed what this wake-up was planned for
                            // while this one slept: look at the next due time again, and sleep on
                            // if it moved. Every node then races for the same next due time, and
                            // the fresh extra leads, not who won the last round, decide who wins.
                            _ = sleep => if !look_again { break false },
                            _ = shared.planner_wake.notified() => break false,
                            _ = ctx.stop.cancelled() => break true,
                        }
                    }
                    None => {
                        tokio::select! {
                            _ = shared.planner_wake.notified() => break false,
                            _ = ctx.stop.cancelled() => break true,
                        }
                    }
                }
            };
            if stopped {
                break;
            }
        }
        tracing::debug!("planner stopped");
    }
}

/// One WARN per claim that took over occurrences whose lease another owner (a node that died or
/// stalled) let lapse: how many, and whose they were. Their first attempt may be late by up to a
/// lease, and this is the line that says why.
fn warn_of_takeover(claimed: &[Occurrence]) {
    let mut owners: Vec<&str> = Vec::new();
    let mut count = 0u64;
    for owner in claimed.iter().filter_map(|o| o.lapsed_owner.as_deref()) {
        count += 1;
        if !owners.contains(&owner) {
            owners.push(owner);
        }
    }
    if count > 0 {
        tracing::warn!(
            count,
            from = %owners.join(","),
            "took over the lapsed claims of another node: {count} occurrence(s) from {}",
            owners.join(", ")
        );
    }
}

/// A random extra lead of up to half the wake lead, drawn for every next due time a planner sleeps
/// for. Nodes sharing a store compute the same next due time; waking at the same millisecond, the
/// fastest would claim the whole lookahead every time and the others nothing (seen: one node of
/// three claiming 96 % of the work). With a fresh draw for each, on every node (the ones that lost
/// the last round too), the first to wake differs from round to round and the work spreads. Waking
/// earlier is always safe: a claim then lands longer before its fire time, never later.
fn wake_jitter(lead: Duration) -> Duration {
    let half = lead.as_millis() as u64 / 2;
    Duration::from_millis(crate::random::up_to(half))
}

async fn sleep_or_stop(stop: &CancellationToken, d: Duration) {
    tokio::select! {
        _ = tokio::time::sleep(d) => {}
        _ = stop.cancelled() => {}
    }
}

fn ms_until(clock: &dyn Clock, at: Timestamp) -> Duration {
    let wait = at.as_millisecond() - clock.now().as_millisecond();
    Duration::from_millis(wait.max(0) as u64)
}
