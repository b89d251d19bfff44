//! The completer: writes completions in batches under the fence, then returns the in-flight
//! permits and pokes the planner when it needs to look at the store sooner.

use std::sync::Arc;
use std::time::Duration;

use hourglass_core::Completion;
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use super::{Backoff, Context, Finished, Held, Stage};

const COMPLETION_BATCH: usize = 1000;
/// How long the completer waits for more outcomes once one arrives, so that at low fire rates
/// many completions share one commit (one fsync) instead of one each. It delays only the
/// bookkeeping after a delivery, never a delivery.
const COMPLETION_LINGER: Duration = Duration::from_millis(10);

/// Writes completions in batches, retrying while the store is unavailable, then returns the
/// in-flight permits (with a notice for a planner that waits for them) and wakes the planner only
/// if a recurring job's next occurrence or a retry is due before its next look at the store.
pub(super) struct Completer {
    /// The engine's configuration, store, clock, metrics and wake-ups.
    pub ctx: Arc<Context>,
    /// Completions and dropped claims from the timer and the dispatcher.
    pub rx: mpsc::Receiver<Finished>,
    /// Returned a permit per finished occurrence, once its outcome is durable.
    pub in_flight: Arc<Semaphore>,
    /// Finished claims leave it.
    pub held: Arc<Held>,
    /// Cancelled after the last completion is written: the renewer may stop then.
    pub drained: CancellationToken,
}

/// Whether the completer may wait the store's longer `linger` for more of `gathered`: only while
/// none of it makes a job due again before the planner must have claimed it (a recurring job's
/// next occurrence or a retry waits for its completion to be written before anyone can claim it:
/// lingered, it must still be written a planner's lead and [`LINGER_SLACK`] before it is due),
/// the planner is not waiting for the in-flight permits these would return, and the node is not
/// stopping.
fn may_linger(
    gathered: &[Finished],
    in_flight: &Semaphore,
    ctx: &Context,
    linger: Duration,
) -> bool {
    let written_by = hourglass_core::add_saturating(
        ctx.clock.now(),
        linger + super::wake_lead(ctx.config.lookahead) + LINGER_SLACK,
    );
    !ctx.stop.is_cancelled()
        && in_flight.available_permits() > 0
        && gathered.iter().all(|f| match f {
            Finished::Done(c) => c.due_again().is_none_or(|at| at >= written_by),
            Finished::Dropped(_) => true,
        })
}

/// What a lingered completion that makes its job due again leaves for its write and the
/// planner's claim.
const LINGER_SLACK: Duration = Duration::from_secs(1);

impl Stage for Completer {
    const NAME: &'static str = "completer";

    async fn run(self) {
        let Self {
            ctx,
            mut rx,
            in_flight,
            held,
            drained,
        } = self;
        let mut buffer = Vec::with_capacity(COMPLETION_BATCH);
        let mut shutdown_deadline: Option<tokio::time::Instant> = None;
        let store_linger = ctx.store.completion_linger();
        while rx.recv_many(&mut buffer, COMPLETION_BATCH).await > 0 {
            let started = tokio::time::Instant::now();
            while buffer.len() < COMPLETION_BATCH {
                let linger = match store_linger {
                    Some(longer) if may_linger(&buffer, &in_flight, &ctx, longer) => longer,
                    _ => COMPLETION_LINGER,
                };
                let room = COMPLETION_BATCH - buffer.len();
                tokio::select! {
                    got = tokio::time::timeout_at(started + linger, rx.recv_many(&mut buffer, room)) => {
                        match got {
                            Ok(0) | Err(_) => break,
                            Ok(_) => {}
                        }
                    }
                    // A stop while lingering writes what is gathered at once.
                    _ = ctx.stop.cancelled(), if linger > COMPLETION_LINGER => {}
                }
            }
            ctx.metrics
                .stage_queue
                .get_or_create(&crate::metrics::StageLabels { stage: "complete" })
                .set(rx.len() as i64);
            let mut released = Vec::new();
            let mut batch = Vec::with_capacity(buffer.len());
            for finished in buffer.drain(..) {
                match finished {
                    Finished::Done(c) => batch.push(c),
                    Finished::Dropped(claim) => released.push(claim),
                }
            }
            let count = batch.len();
            // The soonest a completion makes a job due again: a recurring job's next
            // occurrence, a retry, or a callback it creates.
            let due_again = batch.iter().filter_map(Completion::due_again).min();
            let mut backoff = Backoff::default();
            while !batch.is_empty() {
                match ctx.store.complete(batch.clone(), ctx.clock.now()).await {
                    Ok(applied) => {
                        // A callback created for a pull queue is a message its long polls on
                        // this node wait for (other nodes hear of it from the store, where
                        // it has events).
                        for (completion, applied) in batch.iter().zip(&applied) {
                            let queue = completion.callback.as_ref().and_then(|callback| {
                                Some((&callback.namespace, callback.spec.target.queue()?))
                            });
                            if let (Some((namespace, queue)), hourglass_store::Applied::Yes) =
                                (queue, applied)
                            {
                                ctx.queues.poke(namespace, queue);
                            }
                        }
                        let stale = applied
                            .iter()
                            .filter(|a| **a == hourglass_store::Applied::StaleLease)
                            .count();
                        if stale > 0 {
                            ctx.metrics.stale_completions.inc_by(stale as u64);
                            tracing::info!(stale, "completions refused under a stale lease");
                        }
                        break;
                    }
                    Err(e) => {
                        ctx.metrics.store_errors.inc();
                        // During shutdown, give up after the grace period: an unrecorded completion
                        // only means a redelivery (same delivery id) after restart, never a loss.
                        if ctx.stop.is_cancelled() {
                            let gave_up = *shutdown_deadline.get_or_insert_with(|| {
                                tokio::time::Instant::now() + ctx.config.shutdown_grace
                            });
                            if tokio::time::Instant::now() >= gave_up {
                                tracing::warn!(error = %e, count, "shutting down with completions unrecorded; they will be delivered again");
                                break;
                            }
                        }
                        let wait = backoff.failed();
                        tracing::warn!(error = %e, count, retry_in_ms = wait.as_millis() as u64, "could not record completions; retrying");
                        tokio::time::sleep(wait).await;
                    }
                }
            }
            let total = count + released.len();
            held.remove(batch.iter().map(Completion::claim).chain(released));
            ctx.metrics.in_flight.dec_by(total as i64);
            in_flight.add_permits(total);
            // The planner waits on this only while it has no permits.
            ctx.shared.permits_returned.notify_one();
            // Wake a sleeping planner only when a completion made a job due before its next look
            // at the store. Not after every batch: a node busy firing would then claim whatever
            // entered its lookahead at once, every few milliseconds, and leave nothing for the
            // other nodes sharing the store (seen: one of three nodes claiming 1,493 of 1,500
            // occurrences).
            if let Some(at) = due_again {
                ctx.shared.wake_for(at);
            }
        }
        drained.cancel();
    }
}
