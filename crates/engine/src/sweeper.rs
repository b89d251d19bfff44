//! The retention sweep: deletes finished jobs, their runs and audit entries, and (optionally) dead
//! letters once they are older than their retention.

use std::sync::Arc;
use std::time::Duration;

use hourglass_core::Clock;
use hourglass_store::Store;
use tokio_util::sync::CancellationToken;

use crate::Metrics;
use crate::pipeline::Stage;

/// How often the retention sweep looks for old finished work, and how much it deletes per store
/// call (one short write transaction each, so creates and completions are never held up long).
const SWEEP_EVERY: Duration = Duration::from_secs(60);
const SWEEP_BATCH: usize = 1000;

/// The retention sweep's settings: what it deletes, and after how long.
#[derive(Clone, Copy)]
pub(crate) struct Retention {
    /// Finished jobs, runs and audit entries.
    pub work: Option<Duration>,
    pub dead_letters: Option<Duration>,
}

/// Deletes what is older than its retention, in small batches, once a minute: finished jobs and
/// runs, and dead letters when they have a retention of their own.
pub(crate) struct Sweeper {
    pub store: Arc<dyn Store>,
    pub clock: Arc<dyn Clock>,
    pub metrics: Metrics,
    /// What to delete, and after how long.
    pub retention: Retention,
    /// The engine's stop: the sweep ends between batches.
    pub stop: CancellationToken,
}

impl Stage for Sweeper {
    const NAME: &'static str = "sweeper";

    async fn run(self) {
        let Self {
            store,
            clock,
            metrics,
            retention,
            stop,
        } = self;
        let cutoff = |keep: Duration| Some(hourglass_core::sub_saturating(clock.now(), keep));
        loop {
            tokio::select! {
                _ = tokio::time::sleep(SWEEP_EVERY) => {}
                _ = stop.cancelled() => return,
            }
            if let Some(before) = retention.work.and_then(cutoff) {
                sweep(&stop, &metrics, "finished jobs and runs", || async {
                    let purged = store.purge(before, SWEEP_BATCH).await?;
                    metrics.purged_jobs.inc_by(purged.jobs);
                    metrics.purged_runs.inc_by(purged.runs);
                    Ok(purged.jobs.max(purged.runs))
                })
                .await;
                // The audit log is kept as long as runs are.
                sweep(&stop, &metrics, "audit entries", || async {
                    store.purge_audit(before, SWEEP_BATCH).await
                })
                .await;
            }
            if let Some(before) = retention.dead_letters.and_then(cutoff) {
                sweep(&stop, &metrics, "dead letters", || async {
                    let purged = store.purge_dead_letters(before, SWEEP_BATCH).await?;
                    metrics.purged_dead_letters.inc_by(purged);
                    Ok(purged)
                })
                .await;
            }
        }
    }
}

/// Calls `batch` until it deletes less than a full batch, the store fails (counted, retried at the
/// next sweep), or the engine stops.
async fn sweep<F, Fut>(stop: &CancellationToken, metrics: &Metrics, what: &str, mut batch: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = hourglass_store::Result<u64>>,
{
    while !stop.is_cancelled() {
        match batch().await {
            Ok(deleted) if deleted < SWEEP_BATCH as u64 => break,
            // Let other writers in between batches.
            Ok(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            Err(e) => {
                metrics.store_errors.inc();
                tracing::warn!(error = %e, what, "retention sweep failed; retrying in a minute");
                break;
            }
        }
    }
}
