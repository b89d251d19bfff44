//! The four stages of the engine and how they hand work to each other.

use std::collections::{BTreeMap, HashMap};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::FutureExt;
use hourglass_core::misfire::{self, FireDecision};
use hourglass_core::{
    Action, AttemptRecord, Clock, Completion, JobId, Occurrence, add_saturating, duration_ms,
};
use hourglass_store::{Applied, ClaimScope, DueEvent, Lease, Release, Store, StoreEvent};
use jiff::Timestamp;
use rand::Rng;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{Notify, Semaphore, broadcast, mpsc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::deliver::{Deliverer, DeliveryResult, Verdict};
use crate::{EngineConfig, Forget, Metrics, Shared};

/// Batches of claimed occurrences waiting for the timer.
const TIMER_QUEUE_BATCHES: usize = 64;
/// Due occurrences waiting for a dispatch slot.
const DISPATCH_QUEUE: usize = 4096;
/// Finished occurrences waiting to be written.
const COMPLETION_QUEUE: usize = 8192;
const COMPLETION_BATCH: usize = 1000;
/// Backoff bounds for a stage whose store calls fail.
const ERROR_BACKOFF_MIN: Duration = Duration::from_millis(50);
const ERROR_BACKOFF_MAX: Duration = Duration::from_secs(1);
/// Most claims renewed per store call.
const RENEW_BATCH: usize = 5000;
/// Shortest sleep of a planner that found due work it could not claim (a live lease elsewhere,
/// or rows another node is claiming this instant), so it does not spin on the store.
const UNCLAIMABLE_RETRY: Duration = Duration::from_millis(5);

pub(crate) struct Context {
    pub config: EngineConfig,
    pub store: Arc<dyn Store>,
    pub deliverer: Arc<dyn Deliverer>,
    pub clock: Arc<dyn Clock>,
    pub metrics: Metrics,
    pub shared: Arc<Shared>,
    /// Cancelled at shutdown. Only the planner and timer watch it: later stages drain what they
    /// were given and exit when their input channel closes, which is what orders the shutdown.
    pub stop: CancellationToken,
}

pub(crate) fn spawn(ctx: Context, forget_rx: mpsc::UnboundedReceiver<Forget>, tasks: &TaskTracker) {
    let ctx = Arc::new(ctx);
    let (timer_tx, timer_rx) = mpsc::channel(TIMER_QUEUE_BATCHES);
    let (dispatch_tx, dispatch_rx) = mpsc::channel(DISPATCH_QUEUE);
    let (complete_tx, complete_rx) = mpsc::channel(COMPLETION_QUEUE);
    // Claimed-and-not-completed occurrences. The planner takes permits as it claims; the completer
    // returns them once the outcome is durable.
    let in_flight = Arc::new(Semaphore::new(ctx.config.max_in_flight));
    let held = Arc::new(Held::default());
    // Cancelled by the completer when it has written its last outcome: until then some claim may
    // still need its lease renewed, even during shutdown.
    let drained = CancellationToken::new();
    let failed = ctx.shared.failed.clone();
    let stage = |name, fut| supervise(tasks, name, failed.clone(), fut);
    stage(
        "planner",
        planner(ctx.clone(), timer_tx, in_flight.clone(), held.clone()).boxed(),
    );
    stage(
        "timer",
        timer(
            ctx.clone(),
            timer_rx,
            forget_rx,
            dispatch_tx,
            complete_tx.clone(),
            held.clone(),
        )
        .boxed(),
    );
    stage(
        "dispatcher",
        dispatcher(ctx.clone(), dispatch_rx, complete_tx).boxed(),
    );
    stage(
        "renewer",
        renewer(ctx.clone(), held.clone(), drained.clone()).boxed(),
    );
    if let Some(events) = ctx.store.events() {
        stage("listener", listener(ctx.clone(), events).boxed());
    }
    stage(
        "completer",
        completer(ctx, complete_rx, in_flight, held, drained).boxed(),
    );
}

/// Runs one pipeline stage. A stage that panics cannot be restarted in place (its channels and
/// the claims it held are gone with it), so its death cancels `failed`: the node then answers
/// `/readyz` with 503 and exits, and its supervisor starts a fresh process — never a node that
/// accepts jobs and silently fires nothing.
fn supervise(
    tasks: &TaskTracker,
    name: &'static str,
    failed: CancellationToken,
    stage: futures_util::future::BoxFuture<'static, ()>,
) {
    tasks.spawn(async move {
        if let Err(panic) = AssertUnwindSafe(stage).catch_unwind().await {
            tracing::error!(
                stage = name,
                panic = %panic_message(&*panic),
                "pipeline stage died; the node is no longer ready and will exit"
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
    Completion {
        job_id: occ.job_id,
        token: occ.token,
        due: occ.due,
        attempt: Some(AttemptRecord {
            attempt: occ.attempt,
            started_at: now,
            latency_ms: 0,
            status: None,
            error: Some(format!("{INTERNAL_ERROR}: {message}")),
        }),
        action: Action::DeadLetter {
            next: None,
            skipped: 0,
            reason: INTERNAL_ERROR.to_string(),
        },
    }
}

/// The claims this node holds — in the timer, waiting for a slot, being delivered, or waiting to
/// be written — each with the lease expiry (ms) it has in the store: what the renewer keeps
/// alive. The planner adds, the completer removes once the outcome is durable (or dropped).
#[derive(Default)]
pub(crate) struct Held {
    claims: Mutex<HashMap<(JobId, i64), i64>>,
    /// Wakes the renewer when claims arrive after an idle spell, so an idle node has no timer.
    arrived: Notify,
}

impl Held {
    fn add(&self, claimed: &[Occurrence], lease_until: i64) {
        let mut claims = self.claims.lock().expect("held claims poisoned");
        for occ in claimed {
            claims.insert((occ.job_id, occ.token), lease_until);
        }
        drop(claims);
        self.arrived.notify_one();
    }

    fn remove(&self, done: impl IntoIterator<Item = (JobId, i64)>) {
        let mut claims = self.claims.lock().expect("held claims poisoned");
        for key in done {
            claims.remove(&key);
        }
    }

    fn is_empty(&self) -> bool {
        self.claims.lock().expect("held claims poisoned").is_empty()
    }

    /// Applies the store's answers to a renewal of `claims`, under one lock: a renewed claim
    /// gets expiry `until_ms`; one the store refused (another node holds the occurrence now, or
    /// an edit fenced it) is marked lost. A lease never comes back, so a lost claim is not renewed
    /// again (a node back from a pause may hold thousands, and renewing them every round would
    /// only load the database), and the timer drops it if it has not fired yet. It stays held
    /// until the completer has seen its end, as every claim does. Answers the claims newly found
    /// lost (a claim completed meanwhile is no longer held, and is not among them).
    fn renewed(
        &self,
        claims: &[(JobId, i64)],
        applied: Vec<Applied>,
        until_ms: i64,
    ) -> Vec<(JobId, i64)> {
        let mut held = self.claims.lock().expect("held claims poisoned");
        let mut lost = Vec::new();
        for (key, result) in claims.iter().zip(applied) {
            let Some(until) = held.get_mut(key) else {
                continue;
            };
            match result {
                Applied::Yes => *until = until_ms,
                Applied::StaleLease if *until != LOST => {
                    *until = LOST;
                    lost.push(*key);
                }
                Applied::StaleLease => {}
            }
        }
        lost
    }

    /// The held claims whose lease expiry is at or before `before_ms`, lost ones left out.
    fn expiring(&self, before_ms: i64) -> Vec<(JobId, i64)> {
        self.claims
            .lock()
            .expect("held claims poisoned")
            .iter()
            .filter(|(_, until)| **until != LOST && **until <= before_ms)
            .map(|(key, _)| *key)
            .collect()
    }

    /// Whether this claim's lease has run out by `now_ms` as far as this node knows (it was
    /// neither completed nor renewed in time, or the store said it is lost): another node may
    /// hold the occurrence by now.
    fn lapsed(&self, job_id: JobId, token: i64, now_ms: i64) -> bool {
        self.claims
            .lock()
            .expect("held claims poisoned")
            .get(&(job_id, token))
            .is_some_and(|until| *until <= now_ms)
    }
}

/// The lease expiry of a held claim the store refused to renew: it is no longer this node's.
const LOST: i64 = i64::MIN;

/// The planner wakes this long before the next fire time and then claims everything due within
/// the full lookahead. The gap between the two is hysteresis: each wake-up claims about half a
/// lookahead of work in one transaction, instead of one occurrence per wake-up when due times are
/// spread thinly, while every claim still lands at least this long before its fire time.
pub(crate) fn wake_lead(lookahead: Duration) -> Duration {
    lookahead / 2
}

/// How long the completer waits for more outcomes once one arrives, so that at low fire rates
/// many completions share one commit (one fsync) instead of one each. It delays only the
/// bookkeeping after a delivery, never a delivery.
const COMPLETION_LINGER: Duration = Duration::from_millis(10);

fn backoff(current: Duration) -> Duration {
    (current * 2).clamp(ERROR_BACKOFF_MIN, ERROR_BACKOFF_MAX)
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

/// Claims what is due within the lookahead, in batches, and hands it to the timer. With nothing
/// due it sleeps until the earliest due time (minus the lookahead) or until poked: an idle node
/// makes one cheap "next due" query and then no work at all.
async fn planner(
    ctx: Arc<Context>,
    timer_tx: mpsc::Sender<Vec<Occurrence>>,
    in_flight: Arc<Semaphore>,
    held: Arc<Held>,
) {
    let shared = &ctx.shared;
    let lead = wake_lead(ctx.config.lookahead);
    let mut error_backoff = Duration::ZERO;
    tracing::debug!(node = %ctx.config.node_id, "planner started");
    while !ctx.stop.is_cancelled() {
        shared.planner_wake_at.store(i64::MAX, Ordering::Release);
        let available = in_flight.available_permits();
        if available == 0 {
            // Full: the completer pokes us when it frees permits.
            tokio::select! {
                _ = shared.planner_wake.notified() => {}
                _ = ctx.stop.cancelled() => break,
            }
            continue;
        }
        let limit = available.min(ctx.config.claim_batch);
        let now = ctx.clock.now();
        let lease = Lease {
            owner: ctx.config.node_id.clone(),
            ttl: ctx.config.lease_ttl,
            now,
        };
        let horizon = add_saturating(now, ctx.config.lookahead);
        let claimed = match ctx
            .store
            .claim_due(ClaimScope::Fired, horizon, limit, &lease)
            .await
        {
            Ok(claimed) => claimed,
            Err(e) => {
                ctx.metrics.store_errors.inc();
                error_backoff = backoff(error_backoff);
                tracing::warn!(error = %e, retry_in_ms = error_backoff.as_millis() as u64, "claim failed");
                sleep_or_stop(&ctx.stop, error_backoff).await;
                continue;
            }
        };
        error_backoff = Duration::ZERO;
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
            held.add(&claimed, lease_until);
            if timer_tx.send(claimed).await.is_err() {
                break;
            }
        }
        if count == limit {
            continue;
        }
        let next = match ctx.store.next_due(ClaimScope::Fired).await {
            Ok(next) => next,
            Err(e) => {
                ctx.metrics.store_errors.inc();
                error_backoff = backoff(error_backoff);
                tracing::warn!(error = %e, "next-due probe failed");
                sleep_or_stop(&ctx.stop, error_backoff).await;
                continue;
            }
        };
        // Something due within the horizon just claimed is something that could not be claimed:
        // a live lease of another node (claimable at its expiry) or rows being claimed by
        // another node this instant. Look again then, not half a lookahead before.
        let wake_at = next.map(|n| {
            if n <= horizon {
                n.max(add_saturating(ctx.clock.now(), UNCLAIMABLE_RETRY))
            } else {
                hourglass_core::sub_saturating(n, lead)
            }
        });
        shared.planner_wake_at.store(
            wake_at.map_or(i64::MAX, |w| w.as_millisecond()),
            Ordering::Release,
        );
        match wake_at {
            Some(wake_at) if wake_at <= ctx.clock.now() => continue,
            Some(wake_at) => {
                let sleep = tokio::time::sleep(ms_until(&*ctx.clock, wake_at));
                tokio::select! {
                    _ = sleep => {}
                    _ = shared.planner_wake.notified() => {}
                    _ = ctx.stop.cancelled() => break,
                }
            }
            None => {
                tokio::select! {
                    _ = shared.planner_wake.notified() => {}
                    _ = ctx.stop.cancelled() => break,
                }
            }
        }
    }
    tracing::debug!("planner stopped");
}

/// Holds claimed occurrences in memory ordered by fire time and releases each to the dispatcher
/// at its instant, never before: it fires only once the clock reads the due millisecond.
async fn timer(
    ctx: Arc<Context>,
    mut claimed_rx: mpsc::Receiver<Vec<Occurrence>>,
    mut forget_rx: mpsc::UnboundedReceiver<Forget>,
    dispatch_tx: mpsc::Sender<Occurrence>,
    complete_tx: mpsc::Sender<Finished>,
    held: Arc<Held>,
) {
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
            if held.lapsed(occ.job_id, occ.token, now_ms) {
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
                        // Never before the due time, whatever the claim says.
                        let key = (occ.fire_at.max(occ.due).as_millisecond(), seq);
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

/// What the completer receives: a completion to write, or a claim that ended without one.
pub(crate) enum Finished {
    Done(Completion),
    /// Released, superseded or forgotten: only its in-flight permit is returned (and the claim
    /// is no longer renewed).
    Dropped {
        job_id: JobId,
        token: i64,
    },
}

impl Finished {
    fn dropped(occ: &Occurrence) -> Self {
        Finished::Dropped {
            job_id: occ.job_id,
            token: occ.token,
        }
    }
}

/// Runs deliveries with bounded concurrency and turns their results into completions.
async fn dispatcher(
    ctx: Arc<Context>,
    mut due_rx: mpsc::Receiver<Occurrence>,
    complete_tx: mpsc::Sender<Finished>,
) {
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
    };
    let label = |outcome| crate::metrics::OutcomeLabels {
        target: spec.target.kind(),
        outcome,
    };
    let moved_on = || {
        misfire::next_after_run(
            &spec.schedule,
            spec.misfire,
            occ.due,
            now,
            misfire_threshold,
            occ.runs_done + 1,
        )
    };
    let (attempt, action) = match result.verdict {
        Verdict::Delivered => {
            metrics.fired.get_or_create(&label("delivered")).inc();
            let (next, skipped) = moved_on();
            metrics.skipped_occurrences.inc_by(skipped);
            (record(None), Action::Delivered { next, skipped })
        }
        Verdict::Retry { after, reason } if !spec.retry.exhausted(occ.attempt) => {
            metrics.fired.get_or_create(&label("retry")).inc();
            let wait = match after {
                Some(after) => after.min(hourglass_core::retry::MAX_RETRY_AFTER),
                None => spec.retry.backoff(occ.attempt, rand::rng().random::<f64>()),
            };
            tracing::info!(job_id = %occ.job_id, delivery_id = %occ.delivery_id(), attempt = occ.attempt, status = ?result.status, reason = %reason, retry_in_ms = wait.as_millis() as u64, "delivery failed, will retry");
            let at = add_saturating(now, wait);
            (record(Some(reason)), Action::Retry { at })
        }
        Verdict::Retry { reason, .. } | Verdict::GiveUp { reason } => {
            metrics.fired.get_or_create(&label("dead_letter")).inc();
            tracing::warn!(job_id = %occ.job_id, delivery_id = %occ.delivery_id(), attempt = occ.attempt, status = ?result.status, reason = %reason, "delivery failed for good, dead-lettered");
            let (next, skipped) = moved_on();
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
    Completion {
        job_id: occ.job_id,
        token: occ.token,
        due: occ.due,
        attempt: Some(attempt),
        action,
    }
}

/// Writes completions in batches, retrying while the store is unavailable, then returns the
/// in-flight permits and pokes the planner (a recurring job's next occurrence may be due soon).
async fn completer(
    ctx: Arc<Context>,
    mut rx: mpsc::Receiver<Finished>,
    in_flight: Arc<Semaphore>,
    held: Arc<Held>,
    drained: CancellationToken,
) {
    let mut buffer = Vec::with_capacity(COMPLETION_BATCH);
    let mut shutdown_deadline: Option<tokio::time::Instant> = None;
    while rx.recv_many(&mut buffer, COMPLETION_BATCH).await > 0 {
        let linger_until = tokio::time::Instant::now() + COMPLETION_LINGER;
        while buffer.len() < COMPLETION_BATCH {
            let room = COMPLETION_BATCH - buffer.len();
            match tokio::time::timeout_at(linger_until, rx.recv_many(&mut buffer, room)).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
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
                Finished::Dropped { job_id, token } => released.push((job_id, token)),
            }
        }
        let count = batch.len();
        let mut error_backoff = Duration::ZERO;
        while !batch.is_empty() {
            match ctx.store.complete(batch.clone(), ctx.clock.now()).await {
                Ok(applied) => {
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
                    error_backoff = backoff(error_backoff);
                    tracing::warn!(error = %e, count, retry_in_ms = error_backoff.as_millis() as u64, "could not record completions; retrying");
                    tokio::time::sleep(error_backoff).await;
                }
            }
        }
        let total = count + released.len();
        held.remove(batch.iter().map(|c| (c.job_id, c.token)).chain(released));
        ctx.metrics.in_flight.dec_by(total as i64);
        in_flight.add_permits(total);
        // Poke the planner when it may be waiting for permits or for a next occurrence.
        ctx.shared.planner_wake.notify_one();
    }
    drained.cancel();
}

/// Keeps this node's claims alive: every third of the lease TTL it moves the lease expiry of each
/// claim it still holds that is at least that old. A claim found stale (taken over by another
/// node after this one stalled, or fenced by an edit) is dropped from the timer if it has not
/// fired; a delivery already running finishes and its completion is refused. With no claims held
/// it sleeps until the planner adds some: an idle node has no timer running.
async fn renewer(ctx: Arc<Context>, held: Arc<Held>, drained: CancellationToken) {
    let ttl = ctx.config.lease_ttl;
    let every = (ttl / 3).max(Duration::from_millis(10));
    let ttl_ms = duration_ms(ttl);
    let every_ms = duration_ms(every);
    loop {
        if held.is_empty() {
            tokio::select! {
                _ = held.arrived.notified() => {}
                _ = drained.cancelled() => break,
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = drained.cancelled() => break,
        }
        let now = ctx.clock.now();
        // Claims whose remaining lease is down to two thirds or less.
        let renew_before = now.as_millisecond().saturating_add(ttl_ms - every_ms);
        let due = held.expiring(renew_before);
        let until = add_saturating(now, ttl);
        for chunk in due.chunks(RENEW_BATCH) {
            match ctx.store.extend_claims(chunk.to_vec(), until, now).await {
                Ok(applied) => {
                    let lost = held.renewed(chunk, applied, until.as_millisecond());
                    for &(job_id, token) in &lost {
                        let _ = ctx.shared.forget_tx.send(Forget {
                            job_id,
                            below: token + 1,
                        });
                    }
                    let lost = lost.len() as u64;
                    if lost > 0 {
                        ctx.metrics.lost_leases.inc_by(lost);
                        tracing::warn!(
                            lost,
                            "claims were taken over or fenced before this node finished them"
                        );
                    }
                }
                Err(e) => {
                    // The next round tries again; a lease that lapses meanwhile is taken over,
                    // and this node's completion for it is refused (a redelivery, not a loss).
                    ctx.metrics.store_errors.inc();
                    tracing::warn!(error = %e, count = chunk.len(), "could not renew leases");
                    break;
                }
            }
        }
    }
    tracing::debug!("renewer stopped");
}

/// Turns the store's events (other nodes' writes, and this node's own) into planner wake-ups and
/// timer fences. Queue events are for queue consumers, not the engine.
async fn listener(ctx: Arc<Context>, mut events: broadcast::Receiver<StoreEvent>) {
    loop {
        let event = tokio::select! {
            event = events.recv() => event,
            _ = ctx.stop.cancelled() => break,
        };
        match event {
            Ok(StoreEvent::Due(DueEvent {
                queue: None, at, ..
            })) => ctx.shared.wake_for(at),
            Ok(StoreEvent::Due(_)) => {}
            Ok(StoreEvent::Fenced { job_id, token }) => {
                let _ = ctx.shared.forget_tx.send(Forget {
                    job_id,
                    below: token,
                });
            }
            // Events were missed: anything may be due now.
            Ok(StoreEvent::Resync) | Err(RecvError::Lagged(_)) => {
                ctx.shared.planner_wake.notify_one()
            }
            Err(RecvError::Closed) => break,
        }
    }
    tracing::debug!("event listener stopped");
}
