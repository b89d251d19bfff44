//! The engine's stages and how they hand work to each other:
//!
//! ```text
//! planner ──► timer ──► dispatcher ──► completer
//!    │          ▲                          │
//!    └── held ──┴──── renewer ◄────────────┘      listener: store events → planner, timer
//!                                                  heartbeat: held's count → store
//! ```
//!
//! Every stage has one shape: a struct whose fields are its inputs and outputs (documented where
//! they are declared), a [`Stage::NAME`] for logs, and [`Stage::run`], which consumes it. Stages
//! whose store calls fail wait with one shared [`Backoff`]. `spawn` wires them and states the
//! shutdown order.

pub(crate) mod breakers;
mod completer;
mod destinations;
mod dispatcher;
mod fair;
mod heartbeat;
mod listener;
mod planner;
pub(crate) mod rates;
mod renewer;
mod timer;

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use hourglass_core::{
    Action, AttemptRecord, Claim, Clock, Completion, Next, Occurrence, add_saturating,
};
use hourglass_core::{misfire, overlap};
use hourglass_store::Store;
use jiff::Timestamp;
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::deliver::{Deliverer, DeliveryResult, Verdict};
use crate::{EngineConfig, Forget, Metrics, Shared};

pub(crate) use crate::held::Held;

/// Where an occurrence goes: its namespace and its target's destination (a webhook's scheme,
/// host and port; a bus or cloud connection). The key of destination slots, breakers and
/// webhook rate limits, so one tenant's destination never shares them with another's.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Route {
    pub(crate) namespace: Arc<str>,
    pub(crate) destination: String,
}

/// Batches of claimed occurrences waiting for the timer.
const TIMER_QUEUE_BATCHES: usize = 64;
/// Due occurrences waiting for a dispatch slot.
const DISPATCH_QUEUE: usize = 4096;
/// Finished occurrences waiting to be written.
const COMPLETION_QUEUE: usize = 8192;

pub(crate) struct Context {
    pub config: EngineConfig,
    pub store: Arc<dyn Store>,
    pub deliverer: Arc<dyn Deliverer>,
    pub clock: Arc<dyn Clock>,
    pub metrics: Metrics,
    pub shared: Arc<Shared>,
    /// This node's pull queues: a completion that creates a callback to one wakes its long polls.
    pub queues: crate::Queues,
    /// Cancelled at shutdown. The planner and timer watch it, and so do occurrences parked for a
    /// destination at its cap (they are released, like the timer's); later stages drain what
    /// they were given and exit when their input channel closes (see `spawn`).
    pub stop: CancellationToken,
}

/// A long-running task of the engine.
pub(crate) trait Stage: Send + 'static {
    /// The stage's name in logs and in the supervisor's report of its death.
    const NAME: &'static str;
    /// Runs until the stage's shutdown condition (see `spawn`).
    fn run(self) -> impl Future<Output = ()> + Send;
}

/// How long a stage waits after a failed store call: doubling from 50 ms to at most 1 s, back to
/// nothing after a success.
#[derive(Debug, Default)]
pub(crate) struct Backoff {
    current: Duration,
}

impl Backoff {
    const MIN: Duration = Duration::from_millis(50);
    const MAX: Duration = Duration::from_secs(1);

    /// The wait after one more failure.
    pub fn failed(&mut self) -> Duration {
        self.current = (self.current * 2).clamp(Self::MIN, Self::MAX);
        self.current
    }

    pub fn succeeded(&mut self) {
        self.current = Duration::ZERO;
    }
}

/// Starts every stage under supervision.
///
/// Shutdown order, declared here and carried out by the channels: `stop` ends the **planner**
/// (no new claims) and the **timer**, which releases its unfired claims to the store and drops
/// its sender; the **dispatcher** sees its input end, lets running deliveries finish within the
/// grace period and drops its sender; the **completer** writes what it was given, then cancels
/// `drained`; only then does the **renewer** stop, because until the last completion is durable
/// some claim may still need its lease renewed. The **listener** stops with `stop`, and so does
/// the **heartbeat**, after a last heartbeat that ends the node's listing at once.
/// Starts the firing stages; answers the claims they hold, for [`crate::Engine::holds_claims`].
pub(crate) fn spawn(
    ctx: Context,
    forget_rx: mpsc::UnboundedReceiver<Forget>,
    tasks: &TaskTracker,
) -> Arc<Held> {
    let ctx = Arc::new(ctx);
    let (timer_tx, timer_rx) = mpsc::channel(TIMER_QUEUE_BATCHES);
    let (dispatch_tx, dispatch_rx) = mpsc::channel(DISPATCH_QUEUE);
    let (complete_tx, complete_rx) = mpsc::channel(COMPLETION_QUEUE);
    let in_flight = Arc::new(Semaphore::new(ctx.config.max_in_flight));
    let held = ctx.shared.held.clone();
    let drained = CancellationToken::new();
    let failed = ctx.shared.failed.clone();
    supervise(
        tasks,
        &failed,
        planner::Planner {
            ctx: ctx.clone(),
            timer_tx,
            in_flight: in_flight.clone(),
            held: held.clone(),
        },
    );
    supervise(
        tasks,
        &failed,
        timer::Timer {
            ctx: ctx.clone(),
            claimed_rx: timer_rx,
            forget_rx,
            dispatch_tx,
            complete_tx: complete_tx.clone(),
            held: held.clone(),
        },
    );
    supervise(
        tasks,
        &failed,
        dispatcher::Dispatcher {
            ctx: ctx.clone(),
            due_rx: dispatch_rx,
            complete_tx,
        },
    );
    supervise(
        tasks,
        &failed,
        renewer::Renewer {
            ctx: ctx.clone(),
            held: held.clone(),
            drained: drained.clone(),
        },
    );
    if let Some(events) = ctx.store.events() {
        supervise(
            tasks,
            &failed,
            listener::Listener {
                ctx: ctx.clone(),
                events,
            },
        );
    }
    supervise(
        tasks,
        &failed,
        heartbeat::Heartbeat {
            ctx: ctx.clone(),
            held: held.clone(),
        },
    );
    supervise(
        tasks,
        &failed,
        completer::Completer {
            ctx,
            rx: complete_rx,
            in_flight,
            held: held.clone(),
            drained,
        },
    );
    held
}

/// Runs one stage. A stage that panics cannot be restarted in place (its channels and the claims
/// it held are gone with it), so its death cancels `failed`: the node then answers `/readyz`
/// with 503 and exits, and its supervisor starts a fresh process — never a node that accepts
/// jobs and silently fires nothing.
pub(crate) fn supervise<S: Stage>(tasks: &TaskTracker, failed: &CancellationToken, stage: S) {
    let failed = failed.clone();
    tasks.spawn(async move {
        if let Err(panic) = AssertUnwindSafe(stage.run()).catch_unwind().await {
            tracing::error!(
                stage = S::NAME,
                panic = %panic_message(&*panic),
                "engine stage died; the node is no longer ready and will exit"
            );
            failed.cancel();
        }
    });
}

/// The text a panic carried, for the log line that replaces it.
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text.clone()
    } else {
        "panic without a message".to_string()
    }
}

/// The reason recorded on an occurrence whose handling panicked.
pub const INTERNAL_ERROR: &str = "internal_error";

/// Quarantines an occurrence whose handling panicked: it is dead-lettered with reason
/// `internal_error` and the job ends as failed (no next occurrence), so the same poison is never
/// picked up again in a loop. Computing a next occurrence could panic the same way, so none is
/// computed; replaying the dead letter after a fix fires it again.
pub(crate) fn quarantined(
    occ: &Occurrence,
    now: Timestamp,
    panic: &(dyn std::any::Any + Send),
) -> Completion {
    let message = panic_message(panic);
    tracing::error!(
        job_id = %occ.job_id,
        delivery_id = %occ.delivery_id(),
        attempt = occ.attempt,
        panic = %message,
        "handling this occurrence panicked; dead-lettered and the job quarantined (failed)"
    );
    let attempt = AttemptRecord {
        attempt: occ.attempt,
        started_at: now,
        latency_ms: 0,
        status: None,
        error: Some(format!("{INTERNAL_ERROR}: {message}")),
        response: None,
    };
    let action = Action::DeadLetter {
        next: None,
        skipped: 0,
        reason: INTERNAL_ERROR.to_string(),
    };
    // A quarantined occurrence is dead-lettered like any other: its on_failure hears of it.
    let callback = crate::callbacks::callback_for(occ, &attempt, &action, now);
    Completion::of(occ, Some(attempt), action, callback)
}

/// The planner wakes this long before the next fire time and then claims everything due within
/// the full lookahead. The gap between the two is hysteresis: each wake-up claims about half a
/// lookahead of work in one transaction, instead of one occurrence per wake-up when due times are
/// spread thinly, while every claim still lands at least this long before its fire time.
pub(crate) fn wake_lead(lookahead: Duration) -> Duration {
    lookahead / 2
}

/// What the completer receives: a completion to write, or a claim that ended without one.
#[expect(
    clippy::large_enum_variant,
    reason = "nearly every value is a completion, and boxing one would allocate per occurrence"
)]
pub(crate) enum Finished {
    Done(Completion),
    /// Released, superseded or forgotten: only its in-flight permit is returned (and the claim
    /// is no longer renewed).
    Dropped(Claim),
}

impl Finished {
    fn dropped(occ: &Occurrence) -> Self {
        Finished::Dropped(occ.claim())
    }
}

/// Turns the result of an attempt (a webhook's answer, a worker's ack or nack) into the completion
/// that records it and moves the job on: the next occurrence, a retry, or a dead letter.
pub(crate) fn settle(
    metrics: &Metrics,
    misfire_threshold: Duration,
    now: Timestamp,
    occ: &Occurrence,
    started_at: Timestamp,
    result: DeliveryResult,
) -> Completion {
    let spec = &occ.spec;
    let record = |error: Option<String>| AttemptRecord {
        attempt: occ.attempt,
        started_at,
        latency_ms: result.latency.as_millis().min(u32::MAX as u128) as u32,
        status: result.status,
        error,
        response: result.response.clone(),
    };
    let label = |outcome| crate::metrics::OutcomeLabels {
        target: spec.target.kind(),
        outcome,
    };
    let moved_on = || moved_on(metrics, misfire_threshold, now, occ, started_at);
    let withdrawn = matches!(result.verdict, Verdict::Withdrawn);
    let (attempt, action) = match result.verdict {
        Verdict::Delivered => {
            metrics.fired.get_or_create(&label("delivered")).inc();
            let (next, missed, skipped) = moved_on();
            metrics.skipped_occurrences.inc_by(missed);
            (record(None), Action::Delivered { next, skipped })
        }
        Verdict::Retry { after, reason } if !spec.retry.exhausted(occ.attempt) => {
            metrics.fired.get_or_create(&label("retry")).inc();
            let wait = match after {
                Some(after) => after.min(hourglass_core::retry::MAX_RETRY_AFTER),
                None => spec.retry.backoff(occ.attempt, crate::random::unit()),
            };
            tracing::info!(job_id = %occ.job_id, delivery_id = %occ.delivery_id(), attempt = occ.attempt, status = %HttpStatus(result.status), reason = %reason, retry_in_ms = wait.as_millis() as u64, "delivery failed, will retry");
            let at = add_saturating(now, wait);
            (record(Some(reason)), Action::Retry { at })
        }
        // The dispatcher writes nothing for a withdrawn occurrence and never settles it; were it
        // settled, a retry now under its stale token is refused by the store.
        Verdict::Withdrawn => (
            record(Some("withdrawn".to_string())),
            Action::Retry { at: now },
        ),
        Verdict::Retry { reason, .. } | Verdict::GiveUp { reason } => {
            metrics.fired.get_or_create(&label("dead_letter")).inc();
            tracing::warn!(job_id = %occ.job_id, delivery_id = %occ.delivery_id(), attempt = occ.attempt, status = %HttpStatus(result.status), reason = %reason, "delivery failed for good, dead-lettered");
            let (next, _, skipped) = moved_on();
            (
                record(Some(reason.clone())),
                Action::DeadLetter {
                    next,
                    skipped,
                    reason,
                },
            )
        }
    };
    // A withdrawn occurrence is never written, so it reports nothing either.
    let callback = if withdrawn {
        None
    } else {
        crate::callbacks::callback_for(occ, &attempt, &action, now)
    };
    Completion::of(occ, Some(attempt), action, callback)
}

/// Where `occ`'s job goes after the occurrence ran (or was handed off) at `started_at`, seen at
/// `now`: its next occurrence under the misfire and overlap policies (or a backfill's next),
/// with the occurrences the misfire policy dropped and all that were dropped.
fn moved_on(
    metrics: &Metrics,
    misfire_threshold: Duration,
    now: Timestamp,
    occ: &Occurrence,
    started_at: Timestamp,
) -> (Option<Next>, u64, u64) {
    let spec = &occ.spec;
    if let Some(backfill) = spec.backfill.as_ref().filter(|b| b.covers(occ.due)) {
        let (next, overlapped) = after_backfilled(occ, backfill, started_at, now, metrics);
        return (next, 0, overlapped);
    }
    let (next, skipped) = misfire::next_after_run(
        &spec.schedule,
        spec.misfire,
        occ.due,
        spec.schedule.fire_time(occ.job_id, occ.due),
        now,
        misfire_threshold,
        occ.runs_done + 1,
    );
    // Then the overlap policy, over the successors that fell due while this one ran.
    let (next, overlapped) = overlap_next(metrics, occ, next, now);
    // The misfire counter counts the misfire policy's drops only (as it always did, after
    // a delivery).
    (next, skipped, skipped.saturating_add(overlapped))
}

/// `next`, the occurrence `occ`'s job resumes with after a run that ended at `now`, under the
/// job's overlap policy: the occurrence to move to, and how many that policy dropped.
fn overlap_next(
    metrics: &Metrics,
    occ: &Occurrence,
    next: Option<Timestamp>,
    now: Timestamp,
) -> (Option<Next>, u64) {
    let spec = &occ.spec;
    let (next, overlapped) = overlap::after_run(
        &spec.schedule,
        spec.overlap,
        occ.job_id,
        next,
        now,
        occ.runs_done + 1,
    );
    let next = next.map(|due| Next {
        overlap: overlapped,
        ..Next::of(&spec.schedule, occ.job_id, due)
    });
    let overlapped = overlapped.map_or(0, |o| o.count);
    metrics.overlap_skipped.inc_by(overlapped);
    (next, overlapped)
}

/// The completion that hands `occ`, an occurrence of an `allow` job falling due at `now`, to a
/// one-off job of its own ([`hourglass_core::overlap`]), created with it: the child fires at
/// once under the occurrence's delivery id, and the job moves on to its next occurrence as
/// after a run, however long the child's delivery takes.
pub(crate) fn hand_off(
    metrics: &Metrics,
    misfire_threshold: Duration,
    now: Timestamp,
    occ: &Occurrence,
) -> Completion {
    let (next, missed, skipped) = moved_on(metrics, misfire_threshold, now, occ, now);
    metrics.skipped_occurrences.inc_by(missed);
    let parent = &*occ.spec;
    // The job's labels, so that its selectors reach the occurrences it handed off, and the
    // mark that lists them and lets its cancel reach them.
    let mut labels = parent.labels.clone();
    labels.insert(
        hourglass_core::overlap::OCCURRENCE_OF_LABEL.to_owned(),
        occ.job_id.to_string(),
    );
    let spec = hourglass_core::JobSpec {
        labels,
        // It is this one occurrence, firing now; it was judged late or not by the parent's
        // misfire policy already, and has nothing to overlap with or backfill.
        schedule: hourglass_core::Schedule::at(now),
        misfire: hourglass_core::MisfirePolicy::default(),
        overlap: hourglass_core::OverlapPolicy::default(),
        backfill: None,
        occurrence_of: Some(hourglass_core::OccurrenceOf {
            job_id: occ.job_id,
            due: occ.due,
        }),
        ..parent.clone()
    };
    let child = hourglass_core::CallbackJob {
        id: uuid::Uuid::now_v7(),
        namespace: occ.namespace.to_string(),
        spec,
        payload: occ.payload.as_deref().map(str::to_owned),
        due: now,
    };
    Completion::of(
        occ,
        None,
        Action::HandedOff { next, skipped },
        Some(Box::new(child)),
    )
}

/// Where a job goes after a backfilled occurrence ran ([`hourglass_core::backfill`]): the
/// backfill's next occurrence, paced; or, after its last, the job's own pending occurrence, with
/// the overlap policy over the job's own occurrences that fell due meanwhile.
fn after_backfilled(
    occ: &Occurrence,
    backfill: &hourglass_core::backfill::Backfill,
    started_at: Timestamp,
    now: Timestamp,
    metrics: &Metrics,
) -> (Option<Next>, u64) {
    let spec = &occ.spec;
    if let Some(due) = backfill.next_after(&spec.schedule, occ.due) {
        // Paced from when this one's attempt started (its fire time is its nominal time's).
        let fire = hourglass_core::backfill::paced(started_at, now);
        return (
            Some(Next {
                due,
                fire,
                overlap: None,
            }),
            0,
        );
    }
    overlap_next(metrics, occ, Some(backfill.resume), now)
}

/// A delivery's HTTP status for logs: the code, or `none` when no answer came (a timeout, a
/// refused connection), instead of Rust's `Some(500)`.
struct HttpStatus(Option<u16>);

impl std::fmt::Display for HttpStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(code) => write!(f, "{code}"),
            None => f.write_str("none"),
        }
    }
}
