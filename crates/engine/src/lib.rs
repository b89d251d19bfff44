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
pub use queue::{LeaseRequest, Leased, Queues, Receipt, ReceiptOutcome};
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
    /// How long a claim stays exclusive. Must exceed lookahead plus the time a claimed occurrence
    /// can wait for a dispatch slot and its delivery timeout.
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
        }
    }
}

/// What the API needs from a running engine: a way to say "something new is due" and "forget
/// this job's claimed occurrence".
#[derive(Clone)]
pub struct EngineHandle {
    shared: Arc<Shared>,
    queues: Queues,
}

struct Shared {
    /// Wakes the planner early: a job became due sooner than its planned wake-up.
    planner_wake: Notify,
    /// The instant (ms) the sleeping planner will next look at the store; `i64::MAX` while it is
    /// busy or has nothing planned, so that any new job pokes it.
    planner_wake_at: AtomicI64,
    /// How long before an occurrence's fire time the planner must have claimed it.
    wake_lead_ms: i64,
    /// Job ids whose claimed occurrence must be dropped from the timer (paused, cancelled, edited).
    forget_tx: mpsc::UnboundedSender<JobId>,
}

impl EngineHandle {
    /// Tell the planner that a job's next attempt is due at `fire_at`.
    pub fn job_due(&self, fire_at: Timestamp) {
        let wake_at = self.shared.planner_wake_at.load(Ordering::Acquire);
        if fire_at.as_millisecond() - self.shared.wake_lead_ms < wake_at {
            self.shared.planner_wake.notify_one();
        }
    }

    /// Leasing, acking and waiting on pull queues.
    pub fn queues(&self) -> &Queues {
        &self.queues
    }

    /// Drop a job's claimed occurrence from the timer if it has not fired yet.
    pub fn forget(&self, job_id: JobId) {
        let _ = self.shared.forget_tx.send(job_id);
    }
}

/// A running engine. Dropping it does not stop it; call [`Engine::shutdown`].
pub struct Engine {
    handle: EngineHandle,
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
            wake_lead_ms: pipeline::wake_lead(config.lookahead).as_millis() as i64,
            forget_tx,
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
            handle: EngineHandle { shared, queues },
            stop,
            tasks,
        }
    }

    pub fn handle(&self) -> EngineHandle {
        self.handle.clone()
    }

    /// Stops claiming, hands back unfired claims, lets in-flight deliveries finish within the
    /// grace period, flushes completions, and returns when every stage has exited.
    pub async fn shutdown(self) {
        self.stop.cancel();
        self.tasks.wait().await;
    }
}
