//! The firing pipeline. Each stage is a named task joined by bounded channels:
//!
//! ```text
//! Store ──► planner ──► timer ──► dispatcher ──► completer ──► Store
//!           claims due   sleeps    per-target     batched,
//!           within the   until     concurrency,   fenced
//!           lookahead    due       delivery       completions
//! ```
//! Architecture Invariant: the engine never speaks HTTP to API clients and never touches SQL; it
//! sees the store only through the `Store` trait and time only through the injected `Clock`.

pub mod deliver;
pub mod instrumented;
pub mod metrics;
pub mod netguard;
mod pipeline;
pub mod queue;
pub mod scheduler;
pub mod signing;

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use hourglass_core::{Clock, JobId};
use hourglass_store::Store;
use jiff::Timestamp;
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use deliver::{Deliverer, DeliveryResult, Verdict, WebhookDeliverer};
pub use metrics::Metrics;
pub use netguard::TargetPolicy;
pub use pipeline::{INTERNAL_ERROR, panic_message};
pub use queue::{LeaseRequest, Leased, Queues, Receipt, ReceiptOutcome};
pub use scheduler::{JobEdit, Scheduler};
pub use signing::Secrets;

#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// This node's name in leases.
    pub node_id: String,
    /// How far ahead the planner claims. Hides store latency: an occurrence is in the timer's
    /// memory before it is due.
    pub lookahead: Duration,
    /// Most occurrences claimed per store call.
    pub claim_batch: usize,
    /// How long a claim stays exclusive without renewal. The engine renews the claims it still
    /// holds (in the timer, waiting for a slot, being delivered, being written) every third of
    /// it, so a slow delivery keeps its claim while the node lives, and a dead or paused node's
    /// claims are taken over by other nodes about this long after it stopped renewing.
    pub lease_ttl: Duration,
    /// Most occurrences claimed and not yet completed. When reached the planner stops claiming:
    /// lateness grows (visibly, in metrics), memory does not.
    pub max_in_flight: usize,
    /// Most deliveries running at once.
    pub delivery_concurrency: usize,
    /// A recurring occurrence picked up later than this counts as missed (misfire policy).
    pub misfire_threshold: Duration,
    /// At shutdown, how long in-flight deliveries may take to finish.
    pub shutdown_grace: Duration,
    /// Finished jobs and runs older than this are deleted; `None` keeps everything.
    pub retention: Option<Duration>,
    /// Dead letters older than this are deleted; `None` (the default) keeps them until they are
    /// replayed or deleted.
    pub dead_letter_retention: Option<Duration>,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            node_id: "node-1".into(),
            lookahead: Duration::from_secs(2),
            claim_batch: 1000,
            lease_ttl: Duration::from_secs(120),
            max_in_flight: 20_000,
            delivery_concurrency: 512,
            misfire_threshold: Duration::from_secs(60),
            shutdown_grace: Duration::from_secs(10),
            retention: Some(Duration::from_secs(7 * 24 * 3600)),
            dead_letter_retention: None,
        }
    }
}

struct Shared {
    /// Wakes the planner early: a job became due sooner than its planned wake-up.
    planner_wake: Notify,
    /// The instant (ms) the sleeping planner will next look at the store; `i64::MAX` while it is
    /// busy or has nothing planned, so that any new job pokes it.
    planner_wake_at: AtomicI64,
    /// How long before an occurrence's fire time the planner must have claimed it.
    wake_lead_ms: i64,
    /// Claims whose occurrence must be dropped from the timer (paused, cancelled, edited, or
    /// found taken over at renewal).
    forget_tx: mpsc::UnboundedSender<Forget>,
    /// Cancelled when a pipeline stage has died: the engine no longer fires anything, and the
    /// node must say so (unready) and exit so that it is restarted.
    failed: CancellationToken,
}

/// Drop a job's claimed occurrence from the timer if it has not fired yet and its token is below
/// `below`: a claim made before a change (announced by this node's API or by another node), or
/// one found stale at renewal. Never "any claim": the planner may already hold a claim made after
/// the change.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Forget {
    pub job_id: JobId,
    pub below: i64,
}

impl Shared {
    /// Pokes the planner if `fire_at` is due before its planned look at the store.
    fn wake_for(&self, fire_at: Timestamp) {
        let wake_at = self.planner_wake_at.load(Ordering::Acquire);
        if fire_at.as_millisecond() - self.wake_lead_ms < wake_at {
            self.planner_wake.notify_one();
        }
    }
}

/// How often the retention sweep looks for old finished work, and how much it deletes per store
/// call (one short write transaction each, so creates and completions are never held up long).
const SWEEP_EVERY: Duration = Duration::from_secs(60);
const SWEEP_BATCH: usize = 1000;

/// The retention sweep's settings: what it deletes, and after how long.
#[derive(Clone, Copy)]
struct Retention {
    /// Finished jobs and runs.
    work: Option<Duration>,
    dead_letters: Option<Duration>,
}

/// Deletes what is older than its retention, in small batches, once a minute: finished jobs and
/// runs, and dead letters when they have a retention of their own.
async fn sweeper(
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    metrics: Metrics,
    retention: Retention,
    stop: CancellationToken,
) {
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

/// A running engine. Dropping it does not stop it; call [`Engine::shutdown`].
pub struct Engine {
    scheduler: Scheduler,
    stop: CancellationToken,
    tasks: TaskTracker,
}

impl Engine {
    pub fn start(
        config: EngineConfig,
        store: Arc<dyn Store>,
        deliverer: Arc<dyn Deliverer>,
        clock: Arc<dyn Clock>,
        metrics: Metrics,
    ) -> Self {
        let (forget_tx, forget_rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            planner_wake: Notify::new(),
            planner_wake_at: AtomicI64::new(i64::MAX),
            wake_lead_ms: hourglass_core::duration_ms(pipeline::wake_lead(config.lookahead)),
            forget_tx,
            failed: CancellationToken::new(),
        });
        let stop = CancellationToken::new();
        let tasks = TaskTracker::new();
        let queues = Queues::new(
            store.clone(),
            clock.clone(),
            metrics.clone(),
            config.node_id.clone(),
            config.misfire_threshold,
            stop.clone(),
        );
        if let Some(events) = store.events() {
            // Other nodes' creates, nacks and acks wake this node's long polls.
            tasks.spawn(queues.clone().listen(events));
        }
        let retention = Retention {
            work: config.retention,
            dead_letters: config.dead_letter_retention,
        };
        if retention.work.is_some() || retention.dead_letters.is_some() {
            tasks.spawn(sweeper(
                store.clone(),
                clock.clone(),
                metrics.clone(),
                retention,
                stop.clone(),
            ));
        }
        let (store_for_api, clock_for_api) = (store.clone(), clock.clone());
        pipeline::spawn(
            pipeline::Context {
                config,
                store,
                deliverer,
                clock,
                metrics,
                shared: shared.clone(),
                stop: stop.clone(),
            },
            forget_rx,
            &tasks,
        );
        tasks.close();
        Self {
            scheduler: Scheduler::new(store_for_api, clock_for_api, shared, queues),
            stop,
            tasks,
        }
    }

    /// The door through which the API reads and changes jobs and queues.
    pub fn scheduler(&self) -> Scheduler {
        self.scheduler.clone()
    }

    /// Resolves when a pipeline stage has died (a panic the stage could not contain). From then
    /// on nothing fires on this node: its owner must report it unready and restart it.
    pub fn failed(&self) -> tokio_util::sync::WaitForCancellationFutureOwned {
        self.scheduler.failed_token()
    }

    /// Stops claiming, hands back unfired claims, lets in-flight deliveries finish within the
    /// grace period, flushes completions, and returns when every stage has exited.
    pub async fn shutdown(self) {
        self.stop.cancel();
        self.tasks.wait().await;
    }
}
