//! The firing pipeline. Each stage is a named task joined by bounded channels:
//!
//! ```text
//! Store ──► planner ──► timer ──► dispatcher ──► completer ──► Store
//!           claims due   sleeps    per-target     batched,
//!           within the   until     concurrency,   fenced
//!           lookahead    due       delivery       completions
//! ```
//! The API reaches jobs and queues only through [`Scheduler`] (`scheduler.rs`); the stages live
//! in `pipeline/`, one file each, all of one shape (`pipeline::Stage`), as do the retention sweep
//! (`sweeper.rs`) and the queue event listener (`queue.rs`).
//!
//! Architecture Invariant: the engine never speaks HTTP to API clients and never touches SQL; it
//! sees the store only through the `Store` trait and calendar time only through the injected
//! `Clock`.

mod audit;
mod callbacks;
pub mod deliver;
mod held;
pub mod instrumented;
pub mod metrics;
pub mod netguard;
mod pipeline;
pub mod queue;
mod quotas;
pub mod random;
pub mod receipt;
pub mod scheduler;
pub mod sealing;
pub mod secrets;
pub mod signing;
mod sweeper;

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use hourglass_core::{Clock, FencingToken, JobId};
use hourglass_store::Store;
use jiff::Timestamp;
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use deliver::batch;
pub use deliver::{ClaimCheck, Deliverer, DeliveryResult, Verdict, WebhookDeliverer};
pub use metrics::Metrics;
pub use netguard::TargetPolicy;
pub use pipeline::{INTERNAL_ERROR, panic_message};
pub use queue::{LeaseRequest, Leased, Queues, ReceiptOutcome};
pub use quotas::{NamespaceQuota, QuotaRefusal, Quotas};
pub use receipt::Receipt;
pub use scheduler::{
    Actor, BULK_MAX, BackfillRefusal, Backfilled, BulkAction, Bulked, JobEdit, JobRef, OpenBreaker,
    Scheduler,
};
pub use secrets::{SealingError, Secrets};

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
    /// Most deliveries running at once to one destination (a webhook's scheme, host and port).
    /// More wait for one of that destination's deliveries to end while others go ahead, so a
    /// receiver that hangs holds at most this many of the `delivery_concurrency` slots.
    pub destination_concurrency: usize,
    /// `destination_concurrency` for bus and cloud targets (a connection with its queue, topic,
    /// subject, stream or exchange). Their servers are the operator's, answer in about a
    /// millisecond and pipeline, so at 64 in flight one subject tops out near 50,000 publishes a
    /// second; a stalled one still holds at most this many slots, for at most the delivery timeout.
    pub connection_concurrency: usize,
    /// Most of the `delivery_concurrency` slots one namespace may hold; `None` is three
    /// quarters of them, so that a namespace whose deliveries hang to many destinations leaves
    /// a quarter of the node to the others.
    pub namespace_concurrency: Option<usize>,
    /// Consecutive failed deliveries to one namespace's destination (no answer, a timeout, a
    /// 5xx or a 429) that open its circuit breaker; 0 turns breakers off. A webhook batch counts
    /// as one delivery.
    pub breaker_failures: u32,
    /// How long an open breaker holds its destination's deliveries back before one probe goes.
    pub breaker_open_for: Duration,
    /// The operator's quotas per namespace (none by default): create and delivery rates, stored
    /// jobs, and a namespace's own `destination_concurrency` and `namespace_concurrency`.
    pub quotas: Quotas,
    /// A recurring occurrence picked up later than this counts as missed (misfire policy).
    pub misfire_threshold: Duration,
    /// At shutdown, how long in-flight deliveries may take to finish.
    pub shutdown_grace: Duration,
    /// How often the node writes its heartbeat to the store (its id, version, start and the
    /// claims it holds; `GET /v1/nodes` lists them). A node is live while its latest heartbeat
    /// is younger than three of these (so one or two slow or failed writes do not drop a live
    /// node). `None` writes none:
    /// a serverless tick, which runs for seconds, is not a node of the cluster's list.
    pub heartbeat_interval: Option<Duration>,
    /// Finished jobs, runs and audit entries older than this are deleted; `None` keeps everything.
    pub retention: Option<Duration>,
    /// Dead letters older than this are deleted; `None` (the default) keeps them until they are
    /// replayed or deleted.
    pub dead_letter_retention: Option<Duration>,
}

impl EngineConfig {
    /// The most delivery slots a namespace may hold, unless it has a cap of its own.
    pub fn namespace_cap(&self) -> usize {
        self.namespace_concurrency
            .unwrap_or_else(|| self.delivery_concurrency.saturating_mul(3).div_ceil(4))
            .clamp(1, self.delivery_concurrency.max(1))
    }
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
            destination_concurrency: 64,
            connection_concurrency: 256,
            namespace_concurrency: None,
            breaker_failures: 10,
            breaker_open_for: Duration::from_secs(30),
            quotas: Quotas::default(),
            misfire_threshold: Duration::from_secs(60),
            shutdown_grace: Duration::from_secs(10),
            heartbeat_interval: Some(Duration::from_secs(5)),
            retention: Some(Duration::from_secs(7 * 24 * 3600)),
            dead_letter_retention: None,
        }
    }
}

struct Shared {
    /// Wakes the planner early: a job became due sooner than its planned wake-up.
    planner_wake: Notify,
    /// Set with a wake-up after the store said events may have been missed (a shared store
    /// polled for other writers' changes says so every poll): the planner then reads the next due
    /// time first and claims only if something is due within its lookahead, instead of claiming
    /// at once. On DynamoDB an idle claim reads every shard strongly, the probe at half price.
    probe_first: std::sync::atomic::AtomicBool,
    /// Set with a wake-up for something known to be due (`wake_for`): the planner claims at once
    /// even if a resync asked it to probe first, since a probe read eventually consistent may not
    /// see a write made this instant.
    claim_now: std::sync::atomic::AtomicBool,
    /// Told by the completer each time it returns in-flight permits; the planner waits on it
    /// only while it has none. Apart from `planner_wake`, so that a node busy completing does not
    /// keep waking a planner that is waiting for due work.
    permits_returned: Notify,
    /// The instant (ms) the sleeping planner will next look at the store; `i64::MAX` while it is
    /// busy or has nothing planned, so that any new job pokes it.
    planner_wake_at: AtomicI64,
    /// How long before an occurrence's fire time the planner must have claimed it.
    wake_lead_ms: i64,
    /// Claims whose occurrence must be dropped from the timer (paused, cancelled, edited, or
    /// found taken over at renewal).
    forget_tx: mpsc::UnboundedSender<Forget>,
    /// The claims this node holds, which a fence marks as no longer ours wherever their
    /// occurrence waits (see `held.rs`).
    held: Arc<held::Held>,
    /// Cancelled when a pipeline stage has died: the engine no longer fires anything, and the
    /// node must say so (unready) and exit so that it is restarted.
    failed: CancellationToken,
    /// Circuit breakers per namespace and destination: the dispatcher consults and feeds them,
    /// the scheduler shows the open ones.
    breakers: pipeline::breakers::Breakers,
    /// Where wake-ups go when this engine does not fire (see [`Engine::start_without_firing`]).
    due_hook: Option<Arc<dyn DueHook>>,
}

/// Told when an API call made something due that this process will not fire itself: an engine
/// started with [`Engine::start_without_firing`] (a serverless API function) passes its
/// wake-ups here, so that whatever fires (a tick function) can be started in time.
pub trait DueHook: Send + Sync {
    /// An occurrence fired by the engine became due at `at` (possibly in the past).
    fn due(&self, at: Timestamp);
}

/// Drop a job's claimed occurrence from the timer if it has not fired yet and its token is below
/// `below`: a claim made before a change (announced by this node's API or by another node), or
/// one found stale at renewal. Never "any claim": the planner may already hold a claim made after
/// the change.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Forget {
    pub job_id: JobId,
    pub below: FencingToken,
}

impl Shared {
    /// A change to the job (a pause, cancel, edit or trigger, here or on another node) made its
    /// claims with a token below `below` stale: none of them may be sent from now on, and the
    /// timer drops the one it holds.
    fn fence(&self, job_id: JobId, below: FencingToken) {
        self.held.fence(job_id, below);
        let _ = self.forget_tx.send(Forget { job_id, below });
    }

    /// Pokes the planner if `fire_at` is due before its planned look at the store.
    fn wake_for(&self, fire_at: Timestamp) {
        if let Some(hook) = &self.due_hook {
            hook.due(fire_at);
            return;
        }
        let wake_at = self.planner_wake_at.load(Ordering::Acquire);
        if fire_at.as_millisecond() - self.wake_lead_ms < wake_at {
            self.claim_now.store(true, Ordering::Release);
            self.planner_wake.notify_one();
        }
    }
}

/// A running engine. Dropping it does not stop it; call [`Engine::shutdown`].
pub struct Engine {
    scheduler: Scheduler,
    stop: CancellationToken,
    tasks: TaskTracker,
    /// The firing stages' claims; `None` for an engine that does not fire.
    held: Option<Arc<held::Held>>,
}

impl Engine {
    pub fn start(
        config: EngineConfig,
        store: Arc<dyn Store>,
        deliverer: Arc<dyn Deliverer>,
        clock: Arc<dyn Clock>,
        metrics: Metrics,
    ) -> Self {
        Self::start_inner(config, store, Some(deliverer), clock, metrics, None)
    }

    /// An engine that serves the API and pull queues but fires nothing and sweeps nothing: for a
    /// process that lives only while it answers requests (a serverless API function). What its
    /// API calls make due goes to `hook`, whose owner starts something that fires.
    pub fn start_without_firing(
        config: EngineConfig,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        metrics: Metrics,
        hook: Arc<dyn DueHook>,
    ) -> Self {
        Self::start_inner(config, store, None, clock, metrics, Some(hook))
    }

    fn start_inner(
        config: EngineConfig,
        store: Arc<dyn Store>,
        deliverer: Option<Arc<dyn Deliverer>>,
        clock: Arc<dyn Clock>,
        metrics: Metrics,
        due_hook: Option<Arc<dyn DueHook>>,
    ) -> Self {
        let (forget_tx, forget_rx) = mpsc::unbounded_channel();
        let admission = Arc::new(quotas::Admission::new(config.quotas.clone()));
        let shared = Arc::new(Shared {
            due_hook,
            planner_wake: Notify::new(),
            probe_first: std::sync::atomic::AtomicBool::new(false),
            claim_now: std::sync::atomic::AtomicBool::new(false),
            permits_returned: Notify::new(),
            planner_wake_at: AtomicI64::new(i64::MAX),
            wake_lead_ms: hourglass_core::duration_ms(pipeline::wake_lead(config.lookahead)),
            forget_tx,
            held: Arc::new(held::Held::default()),
            failed: CancellationToken::new(),
            breakers: pipeline::breakers::Breakers::new(
                config.breaker_failures,
                config.breaker_open_for,
            ),
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
            shared.clone(),
        );
        if let Some(events) = store.events() {
            // Other nodes' creates, nacks and acks wake this node's long polls.
            pipeline::supervise(
                &tasks,
                &shared.failed,
                queue::QueueListener {
                    queues: queues.clone(),
                    events,
                },
            );
        }
        let retention = sweeper::Retention {
            work: config.retention,
            dead_letters: config.dead_letter_retention,
        };
        let fires = deliverer.is_some();
        if fires && (retention.work.is_some() || retention.dead_letters.is_some()) {
            pipeline::supervise(
                &tasks,
                &shared.failed,
                sweeper::Sweeper {
                    store: store.clone(),
                    clock: clock.clone(),
                    metrics: metrics.clone(),
                    retention,
                    stop: stop.clone(),
                },
            );
        }
        let (store_for_api, clock_for_api) = (store.clone(), clock.clone());
        let held = deliverer.map(|deliverer| {
            pipeline::spawn(
                pipeline::Context {
                    config,
                    store,
                    deliverer,
                    clock,
                    metrics,
                    shared: shared.clone(),
                    queues: queues.clone(),
                    stop: stop.clone(),
                },
                forget_rx,
                &tasks,
            )
        });
        tasks.close();
        Self {
            scheduler: Scheduler::new(store_for_api, clock_for_api, shared, queues, admission),
            stop,
            tasks,
            held,
        }
    }

    /// Whether this engine holds claims: occurrences waiting for their due time, being
    /// delivered, or whose outcome is not yet written. A claim is held from just after the store
    /// granted it until its completion is durable (or it was handed back).
    pub fn holds_claims(&self) -> bool {
        self.held.as_ref().is_some_and(|held| !held.is_empty())
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
