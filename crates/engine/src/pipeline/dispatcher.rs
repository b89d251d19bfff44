//! The dispatcher: applies the misfire policy, takes a slot at the occurrence's destination and a
//! delivery slot, and runs each delivery, turning its result into a completion; a panic there
//! quarantines the one occurrence.
//!
//! An occurrence that cannot start at once — its destination is at its cap
//! (`destination_concurrency`), its namespace holds its share of the delivery slots
//! (`namespace_concurrency`), or every delivery slot is taken — is parked in a task of its own
//! that waits for its destination, then for a delivery slot in its namespace's turn (`fair.rs`),
//! so the dispatcher goes on with everyone else's: one hanging receiver or one namespace's
//! backlog delays only its own occurrences. Parked occurrences are claims the node holds, so
//! `max_in_flight` bounds them (the planner stops claiming) and the renewer keeps their leases.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use hourglass_core::misfire::{self, FireDecision};
use hourglass_core::{Action, Completion, Next, Occurrence, Target};
use hourglass_store::Release;
use jiff::Timestamp;
use tokio::sync::mpsc;
use tokio_util::task::TaskTracker;

use super::breakers::Admit;
use super::destinations::{DestinationPermit, Destinations, Slot, WaitForSlot};
use super::fair::{FairSlots, SlotPermit};
use super::rates::Rates;
use super::{Context, Finished, Route, Stage, quarantined, settle};
use crate::deliver::{ClaimCheck, DeliveryResult, Verdict};

/// Runs deliveries with bounded concurrency and turns their results into completions.
pub(super) struct Dispatcher {
    /// The engine's configuration, store, clock, metrics and wake-ups.
    pub ctx: Arc<Context>,
    /// Due occurrences from the timer.
    pub due_rx: mpsc::Receiver<Occurrence>,
    /// Each attempt's completion.
    pub complete_tx: mpsc::Sender<Finished>,
}

impl Stage for Dispatcher {
    const NAME: &'static str = "dispatcher";

    async fn run(self) {
        let Self {
            ctx,
            mut due_rx,
            complete_tx,
        } = self;
        let gates = Arc::new(Gates {
            slots: FairSlots::new(
                ctx.config.delivery_concurrency,
                ctx.config.namespace_cap(),
                ctx.config.quotas.namespace_caps(),
            ),
            destinations: Destinations::new(),
            quotas: Rates::default(),
            rate_limits: Rates::default(),
        });
        let (slots, destinations) = (&gates.slots, &gates.destinations);
        let any_delivery_rate = ctx.config.quotas.any_delivery_rate();

        let deliveries = TaskTracker::new();
        while let Some(occ) = due_rx.recv().await {
            let now = ctx.clock.now();
            let spec = &occ.spec;
            let decision = std::panic::catch_unwind(AssertUnwindSafe(|| {
                // A backfilled occurrence is late by design: no misfire policy applies to it.
                if spec.backfill.as_ref().is_some_and(|b| b.covers(occ.due)) {
                    return FireDecision::Fire;
                }
                misfire::decide(
                    &spec.schedule,
                    spec.misfire,
                    occ.due,
                    spec.schedule.fire_time(occ.job_id, occ.due),
                    now,
                    ctx.config.misfire_threshold,
                    occ.runs_done,
                )
            }));
            let decision = match decision {
                Ok(decision) => decision,
                Err(panic) => {
                    ctx.metrics.quarantined.inc();
                    let completion = quarantined(&occ, now, &*panic);
                    if complete_tx.send(Finished::Done(completion)).await.is_err() {
                        break;
                    }
                    continue;
                }
            };
            if let FireDecision::Skip { next, skipped } = decision {
                ctx.metrics.skipped_occurrences.inc_by(skipped);
                ctx.metrics
                    .fired
                    .get_or_create(&crate::metrics::OutcomeLabels {
                        target: spec.target.kind(),
                        outcome: "skipped",
                    })
                    .inc();
                let completion = Completion::of(
                    &occ,
                    None,
                    Action::Skipped {
                        next: next.map(|due| Next::of(&spec.schedule, occ.job_id, due)),
                        skipped,
                    },
                    None,
                );
                if complete_tx.send(Finished::Done(completion)).await.is_err() {
                    break;
                }
                continue;
            }
            // An `allow` job's occurrence is handed to a job of its own, delivered like any
            // other, and the job moves on at once: nothing of it is ever in flight to overlap.
            if spec.overlap.hands_off(&spec.schedule) {
                let threshold = ctx.config.misfire_threshold;
                let completion = std::panic::catch_unwind(AssertUnwindSafe(|| {
                    super::hand_off(&ctx.metrics, threshold, now, &occ)
                }))
                .unwrap_or_else(|panic| {
                    ctx.metrics.quarantined.inc();
                    quarantined(&occ, now, &*panic)
                });
                if complete_tx.send(Finished::Done(completion)).await.is_err() {
                    break;
                }
                continue;
            }
            // Capped and broken per namespace and destination: one tenant's backlog to (or bad
            // luck with) a receiver that tenants share must not hold up another's.
            let route = occ.spec.target.destination().map(|destination| Route {
                namespace: occ.namespace.clone(),
                destination,
            });
            if let Some(route) = &route
                && let Admit::Defer(until) = ctx.shared.breakers.admit(route, now.as_millisecond())
            {
                ctx.metrics.breaker_deferred.inc();
                let (ctx, complete_tx) = (ctx.clone(), complete_tx.clone());
                deliveries.spawn(async move {
                    give_back(&ctx, &occ, &complete_tx, hourglass_core::from_ms(until)).await;
                });
                continue;
            }
            // Past its namespace's delivery quota, or its target's rate limit, an occurrence waits
            // for its reserved start (the later of the two).
            let started = tokio::time::Instant::now();
            let mut wait = Duration::ZERO;
            if any_delivery_rate
                && let Some(rate) = ctx.config.quotas.of(&occ.namespace).deliveries_per_second
            {
                wait = gates.quotas.reserve(&*occ.namespace, rate, started);
            }
            if let (Some(route), Target::Webhook(webhook)) = (&route, &occ.spec.target)
                && let Some(rate) = webhook.rate_limit
            {
                wait = wait.max(gates.rate_limits.reserve(route, rate, started));
            }
            if !wait.is_zero() {
                deliveries.spawn(park(
                    ctx.clone(),
                    occ,
                    complete_tx.clone(),
                    gates.clone(),
                    Some(started + wait),
                    None,
                    route,
                ));
                continue;
            }
            let destination = gates.take_destination(&ctx, &occ, route.as_ref());
            ctx.metrics
                .stage_queue
                .get_or_create(&crate::metrics::StageLabels { stage: "dispatch" })
                .set(due_rx.len() as i64);
            ctx.metrics
                .destinations_busy
                .set(destinations.in_use() as i64);
            match destination {
                Destination::Held(permit) => match slots.try_acquire(&occ.namespace) {
                    Some(slot) => {
                        deliveries.spawn(deliver(
                            ctx.clone(),
                            occ,
                            complete_tx.clone(),
                            slot,
                            permit,
                            route,
                        ));
                    }
                    None => {
                        deliveries.spawn(park(
                            ctx.clone(),
                            occ,
                            complete_tx.clone(),
                            gates.clone(),
                            None,
                            Some(Destination::Held(permit)),
                            route,
                        ));
                    }
                },
                waiting @ Destination::Waiting(_) => {
                    deliveries.spawn(park(
                        ctx.clone(),
                        occ,
                        complete_tx.clone(),
                        gates.clone(),
                        None,
                        Some(waiting),
                        route,
                    ));
                }
            }
        }
        deliveries.close();
        if tokio::time::timeout(ctx.config.shutdown_grace, deliveries.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                "deliveries still running after the shutdown grace period; their occurrences will be delivered again after restart"
            );
        }
    }
}

/// The cap on the occurrence's namespace's deliveries to one destination: the namespace's own
/// when the operator gave it one, else `connection_concurrency` for bus and cloud targets and
/// `destination_concurrency` for webhooks.
fn destination_cap(ctx: &Context, occ: &Occurrence) -> usize {
    let default = if occ.spec.target.connection().is_some() {
        ctx.config.connection_concurrency
    } else {
        ctx.config.destination_concurrency
    };
    ctx.config
        .quotas
        .of(&occ.namespace)
        .destination_concurrency
        .unwrap_or(default)
}

/// What an occurrence must get before it is delivered, shared by the dispatcher and the
/// occurrences it parked.
struct Gates {
    /// The node's delivery slots, shared fairly between namespaces when scarce.
    slots: Arc<FairSlots>,
    /// Slots per namespace and destination, taken before a delivery slot.
    destinations: Arc<Destinations>,
    /// The namespaces' delivery quotas, before either kind of slot.
    quotas: Rates<String>,
    /// The webhook targets' rate limits (per namespace and destination), likewise.
    rate_limits: Rates<Route>,
}

impl Gates {
    /// The occurrence's place at its destination: a slot there if one is free, else its place
    /// in the destination's line (a target without a destination needs none).
    fn take_destination(
        &self,
        ctx: &Context,
        occ: &Occurrence,
        route: Option<&Route>,
    ) -> Destination {
        match route {
            Some(route) => match self
                .destinations
                .try_acquire(route.clone(), destination_cap(ctx, occ))
            {
                Slot::Ready(permit) => Destination::Held(Some(permit)),
                Slot::Full(wait) => Destination::Waiting(wait),
            },
            None => Destination::Held(None),
        }
    }
}

/// An occurrence's place at its destination.
enum Destination {
    /// A slot there is held (or the target has no destination).
    Held(Option<DestinationPermit>),
    /// The destination is at its cap.
    Waiting(WaitForSlot),
}

/// Waits until `not_before` (its namespace's quota or its target's rate limit), then for the
/// occurrence's destination slot (taken then, when `destination` is `None`), then for a delivery
/// slot in its namespace's turn, then delivers; at shutdown it stops waiting and hands the
/// occurrence back, as the timer does with those it holds, so it fires after a restart or on
/// another node without waiting out its lease.
async fn park(
    ctx: Arc<Context>,
    occ: Occurrence,
    complete_tx: mpsc::Sender<Finished>,
    gates: Arc<Gates>,
    not_before: Option<tokio::time::Instant>,
    destination: Option<Destination>,
    route: Option<Route>,
) {
    // Borrowed, not cloned: `Metrics` is some twenty-five `Arc`s.
    let metrics = &ctx.metrics;
    let slots_for = async {
        if let Some(start) = not_before {
            metrics.quota_waiting.inc();
            tokio::time::sleep_until(start).await;
            metrics.quota_waiting.dec();
        }
        let destination =
            destination.unwrap_or_else(|| gates.take_destination(&ctx, &occ, route.as_ref()));
        let permit = match destination {
            Destination::Held(permit) => permit,
            Destination::Waiting(wait) => {
                metrics.destination_waiting.inc();
                let permit = wait.acquire().await;
                metrics.destination_waiting.dec();
                Some(permit)
            }
        };
        metrics.slot_waiting.inc();
        let slot = gates.slots.acquire(&occ.namespace).await;
        metrics.slot_waiting.dec();
        (slot, permit)
    };
    let waited = tokio::select! {
        slots = slots_for => Some(slots),
        () = ctx.stop.cancelled() => None,
    };
    match waited {
        Some((slot, permit)) => deliver(ctx, occ, complete_tx, slot, permit, route).await,
        None => give_back(&ctx, &occ, &complete_tx, occ.fire_at).await,
    }
}

/// Runs one delivery holding its slots, and sends its completion on.
///
/// The claim is checked here, after every wait the dispatcher imposes (quota, rate limit,
/// destination and delivery slots), and again by the deliverer before it sends (after a batch
/// line's wait): a pause, cancel or edit that reached the claim meanwhile keeps the occurrence
/// from being sent, and nothing is written for it.
async fn deliver(
    ctx: Arc<Context>,
    occ: Occurrence,
    complete_tx: mpsc::Sender<Finished>,
    slot: SlotPermit,
    destination: Option<DestinationPermit>,
    route: Option<Route>,
) {
    let claim = ClaimCheck::new(ctx.shared.held.clone(), ctx.clock.clone(), occ.claim());
    if !claim.still_held() {
        drop((destination, slot));
        withdrawn(&ctx, &occ, &complete_tx).await;
        return;
    }
    if occ.attempt == 1 {
        // Late against the nominal time, the parent's for a handed-off `allow` occurrence.
        let late_ms = (ctx.clock.now().as_millisecond() - occ.origin().1.as_millisecond()).max(0);
        ctx.metrics.lateness.observe(late_ms as f64 / 1000.0);
    }
    let attempt = async {
        let started_at = ctx.clock.now();
        let result = ctx.deliverer.deliver(&occ, &claim).await;
        if result.verdict == Verdict::Withdrawn {
            return None;
        }
        if let Target::Webhook(_) = occ.spec.target {
            let code = result
                .status
                .map_or_else(|| "none".to_string(), |s| s.to_string());
            ctx.metrics
                .webhook_responses
                .get_or_create(&crate::metrics::CodeLabels { code })
                .inc();
        }
        if let Some(route) = &route
            && !result.shared
        {
            let failed = matches!(result.verdict, Verdict::Retry { .. })
                && result.status.is_none_or(|s| s >= 500 || s == 429);
            let breakers = &ctx.shared.breakers;
            if breakers.record(route, failed, ctx.clock.now().as_millisecond()) {
                ctx.metrics.breakers_open.set(breakers.open() as i64);
            }
        }
        Some(completion_for(&ctx, &occ, started_at, result))
    };
    // A panic in the target or in settling its result ends this one occurrence (dead letter, job
    // quarantined), never the dispatcher, and never leaves the claim held.
    let completion = match AssertUnwindSafe(attempt).catch_unwind().await {
        Ok(completion) => completion,
        Err(panic) => {
            ctx.metrics.quarantined.inc();
            Some(quarantined(&occ, ctx.clock.now(), &*panic))
        }
    };
    // The slots go back before the completion is queued: the next delivery to this destination
    // need not wait for the completer.
    drop(destination);
    drop(slot);
    match completion {
        Some(completion) => {
            let _ = complete_tx.send(Finished::Done(completion)).await;
        }
        None => withdrawn(&ctx, &occ, &complete_tx).await,
    }
}

/// An occurrence whose claim was taken back before it was sent: nothing is written (the change
/// that took it back owns the job now), only its in-flight permit returns.
async fn withdrawn(ctx: &Context, occ: &Occurrence, complete_tx: &mpsc::Sender<Finished>) {
    ctx.metrics.withdrawn.inc();
    tracing::debug!(job_id = %occ.job_id, delivery_id = %occ.delivery_id(), "not sent: the job was paused, cancelled or edited, or the claim lost, while it waited");
    let _ = complete_tx.send(Finished::dropped(occ)).await;
}

/// Releases a claimed occurrence that will not be delivered by this node now, to fire at
/// `fire_at` (its own fire time at shutdown; when its breaker closes if that is open).
async fn give_back(
    ctx: &Context,
    occ: &Occurrence,
    complete_tx: &mpsc::Sender<Finished>,
    fire_at: Timestamp,
) {
    let release = Release {
        job_id: occ.job_id,
        token: occ.token,
        fire_at,
    };
    match ctx.store.release(vec![release]).await {
        // Due again at `fire_at`: the planner must look by then.
        Ok(()) => ctx.shared.wake_for(fire_at),
        Err(e) => {
            tracing::warn!(error = %e, job_id = %occ.job_id, "could not release a waiting occurrence; it fires after its lease expires")
        }
    }
    let _ = complete_tx.send(Finished::dropped(occ)).await;
}

fn completion_for(
    ctx: &Context,
    occ: &Occurrence,
    started_at: Timestamp,
    result: DeliveryResult,
) -> Completion {
    settle(
        &ctx.metrics,
        ctx.config.misfire_threshold,
        ctx.clock.now(),
        occ,
        started_at,
        result,
    )
}
