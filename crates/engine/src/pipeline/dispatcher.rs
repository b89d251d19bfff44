//! The dispatcher: applies the misfire policy, takes a delivery slot and runs each delivery,
//! turning its result into a completion; a panic there quarantines the one occurrence.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt;
use hourglass_core::misfire::{self, FireDecision};
use hourglass_core::{Action, Completion, Occurrence};
use jiff::Timestamp;
use tokio::sync::{Semaphore, mpsc};
use tokio_util::task::TaskTracker;

use super::{Context, Finished, Stage, quarantined, settle};
use crate::deliver::DeliveryResult;

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
        // Delivery slots; a due occurrence waits here for one, and the timer waits behind it.
        let slots = Arc::new(Semaphore::new(ctx.config.delivery_concurrency));
        let deliveries = TaskTracker::new();
        while let Some(occ) = due_rx.recv().await {
            let now = ctx.clock.now();
            let spec = &occ.spec;
            let decision = std::panic::catch_unwind(AssertUnwindSafe(|| {
                misfire::decide(
                    &spec.schedule,
                    spec.misfire,
                    occ.due,
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
                let completion = Completion {
                    job_id: occ.job_id,
                    token: occ.token,
                    due: occ.due,
                    attempt: None,
                    action: Action::Skipped { next, skipped },
                };
                if complete_tx.send(Finished::Done(completion)).await.is_err() {
                    break;
                }
                continue;
            }
            let Ok(permit) = slots.clone().acquire_owned().await else {
                break;
            };
            if occ.attempt == 1 {
                let late_ms = (now.as_millisecond() - occ.due.as_millisecond()).max(0);
                ctx.metrics.lateness.observe(late_ms as f64 / 1000.0);
            }
            let ctx = ctx.clone();
            let complete_tx = complete_tx.clone();
            ctx.metrics
                .stage_queue
                .get_or_create(&crate::metrics::StageLabels { stage: "dispatch" })
                .set(due_rx.len() as i64);
            deliveries.spawn(async move {
                let attempt = async {
                    let started_at = ctx.clock.now();
                    let result = ctx.deliverer.deliver(&occ).await;
                    let code = result
                        .status
                        .map_or_else(|| "none".to_string(), |s| s.to_string());
                    ctx.metrics
                        .webhook_responses
                        .get_or_create(&crate::metrics::CodeLabels { code })
                        .inc();
                    completion_for(&ctx, &occ, started_at, result)
                };
                // A panic in the target or in settling its result ends this one occurrence (dead
                // letter, job quarantined), never the dispatcher, and never leaves the claim held.
                let completion = match AssertUnwindSafe(attempt).catch_unwind().await {
                    Ok(completion) => completion,
                    Err(panic) => {
                        ctx.metrics.quarantined.inc();
                        quarantined(&occ, ctx.clock.now(), &*panic)
                    }
                };
                let _ = complete_tx.send(Finished::Done(completion)).await;
                drop(permit);
            });
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
