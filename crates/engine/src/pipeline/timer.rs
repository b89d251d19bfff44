//! The timer: holds claimed occurrences in memory ordered by fire time and hands each to the
//! dispatcher when the clock reads its due millisecond.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use hourglass_core::{JobId, Occurrence};
use hourglass_store::Release;
use tokio::sync::mpsc;

use super::{Context, Finished, Held, Stage};
use crate::Forget;

/// Holds claimed occurrences in memory ordered by fire time and releases each to the dispatcher
/// at its instant, never before: it fires only once the clock reads the due millisecond.
pub(super) struct Timer {
    /// The engine's configuration, store, clock, metrics and wake-ups.
    pub ctx: Arc<Context>,
    /// Batches from the planner.
    pub claimed_rx: mpsc::Receiver<Vec<Occurrence>>,
    /// Claims to drop unfired (fenced by an edit, or lost at renewal).
    pub forget_rx: mpsc::UnboundedReceiver<Forget>,
    /// Occurrences whose due millisecond has come.
    pub dispatch_tx: mpsc::Sender<Occurrence>,
    /// Where dropped and released claims are reported, so their permits return.
    pub complete_tx: mpsc::Sender<Finished>,
    /// Tells whether a claim lapsed while this node was paused, or was fenced.
    pub held: Arc<Held>,
}

impl Stage for Timer {
    const NAME: &'static str = "timer";

    async fn run(self) {
        let Self {
            ctx,
            mut claimed_rx,
            mut forget_rx,
            dispatch_tx,
            complete_tx,
            held,
        } = self;
        // Keyed by (fire ms, sequence) so equal fire times keep arrival order.
        let mut queue: BTreeMap<(i64, u64), Occurrence> = BTreeMap::new();
        let mut by_job: HashMap<JobId, (i64, u64)> = HashMap::new();
        let mut seq: u64 = 0;
        loop {
            let now_ms = ctx.clock.now().as_millisecond();
            while let Some(entry) = queue.first_entry() {
                if entry.key().0 > now_ms {
                    break;
                }
                let occ = entry.remove();
                by_job.remove(&occ.job_id);
                ctx.metrics.timer_queue.dec();
                // A node that was stopped (SIGSTOP, a long pause) past its leases wakes up with
                // everything in its timer due at once; those occurrences may be another node's now.
                // Firing them would only make duplicates: let them go, to whoever claims them next.
                if !held.still_ours(occ.claim(), now_ms) {
                    ctx.metrics.lost_leases.inc();
                    let _ = complete_tx.send(Finished::dropped(&occ)).await;
                    continue;
                }
                if dispatch_tx.send(occ).await.is_err() {
                    return;
                }
            }
            let next_fire = queue.first_key_value().map(|(k, _)| k.0);
            let sleep = tokio::time::sleep(Duration::from_millis(
                next_fire.map_or(0, |f| (f - now_ms).max(0) as u64),
            ));
            tokio::select! {
                batch = claimed_rx.recv() => match batch {
                    Some(batch) => {
                        for occ in batch {
                            seq += 1;
                            // Never before the occurrence's own time, whatever the claim
                            // says: its due time, or the earlier day its calendar rolls it
                            // back to (which the claim's fire time then is).
                            let earliest = occ
                                .spec
                                .schedule
                                .resolve(occ.due)
                                .map_or(occ.due, |rolled| rolled.min(occ.due));
                            let key = (occ.fire_at.max(earliest).as_millisecond(), seq);
                            if let Some(old) = by_job.insert(occ.job_id, key) {
                                // A newer claim of the same job supersedes the old one.
                                if let Some(old) = queue.remove(&old) {
                                    ctx.metrics.timer_queue.dec();
                                    let _ = complete_tx.send(Finished::dropped(&old)).await;
                                }
                            }
                            queue.insert(key, occ);
                            ctx.metrics.timer_queue.inc();
                        }
                    }
                    None => break,
                },
                Some(forget) = forget_rx.recv() => {
                    let stale = by_job.get(&forget.job_id).is_some_and(|key| {
                        queue
                            .get(key)
                            .is_some_and(|occ| occ.token < forget.below)
                    });
                    if stale
                        && let Some(key) = by_job.remove(&forget.job_id)
                        && let Some(old) = queue.remove(&key)
                    {
                        ctx.metrics.timer_queue.dec();
                        let _ = complete_tx.send(Finished::dropped(&old)).await;
                    }
                }
                _ = sleep, if next_fire.is_some() => {}
                _ = ctx.stop.cancelled() => break,
            }
        }
        // Shutdown: hand unfired claims back so they fire at once on the next start (or on another
        // node) instead of waiting out their lease. That includes batches still in the channel: the
        // planner may have claimed one just before it saw the stop, and it drops its sender (ending
        // this loop) only once it has exited.
        let mut unfired: Vec<Occurrence> = queue.into_values().collect();
        while let Some(batch) = claimed_rx.recv().await {
            unfired.extend(batch);
        }
        if !unfired.is_empty() {
            let releases = unfired
                .iter()
                .map(|o| Release {
                    job_id: o.job_id,
                    token: o.token,
                    fire_at: o.fire_at,
                })
                .collect();
            if let Err(e) = ctx.store.release(releases).await {
                tracing::warn!(error = %e, count = unfired.len(), "could not release unfired claims; they fire after their lease expires");
            }
            ctx.metrics.timer_queue.set(0);
            for occ in &unfired {
                let _ = complete_tx.send(Finished::dropped(occ)).await;
            }
        }
    }
}
