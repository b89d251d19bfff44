//! Pull queues: workers lease due occurrences of queue-target jobs, then ack, nack or extend them.
//!
//! A lease is a store claim (`ClaimScope::Queue`) whose lease time is the worker's visibility
//! timeout, so everything the engine relies on carries over: a lapsed lease makes the message due
//! again by itself, every write is fenced by the claim's token (the receipt), and no lease is held
//! only in memory. What lives here is waiting (long polls woken at the due millisecond or when a
//! job is created) and turning acks and nacks into the same completions webhook deliveries make.
//!
//! Receipts, and the MAC that makes them unguessable, are in `receipt.rs`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use hourglass_core::misfire::{self, FireDecision};
use hourglass_core::{Action, Claim, Clock, Completion, Next, Occurrence};
use hourglass_store::{
    Applied, ClaimScope, DueEvent, Lease, QueueStats, Result, Store, StoreEvent,
};
use jiff::Timestamp;
use tokio::sync::Notify;
use tokio::sync::broadcast::{self, error::RecvError};
use tokio_util::sync::CancellationToken;

use crate::deliver::{DeliveryResult, Verdict};
use crate::metrics::{Metrics, OutcomeLabels};
use crate::pipeline::settle;
use crate::receipt::{Receipt, ReceiptKey, genuine, seal};

/// What a worker asks for.
#[derive(Debug, Clone)]
pub struct LeaseRequest {
    pub max: usize,
    /// How long to wait for a message when none is available.
    pub wait: Duration,
    /// How long leased messages stay invisible to other workers.
    pub visibility: Duration,
    /// Only messages of these job types; `None` for all.
    pub types: Option<Vec<String>>,
    /// Stop leasing once the messages' payloads reach this many bytes (one message is always
    /// leased when one is available); `None` for no budget.
    pub max_bytes: Option<usize>,
}

/// One leased message.
#[derive(Debug, Clone)]
pub struct Leased {
    pub occurrence: Occurrence,
    pub receipt: Receipt,
    pub visible_until: Timestamp,
}

/// The answer for one receipt of an ack, nack or extend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReceiptOutcome {
    Applied,
    /// The lease behind the receipt is no longer current (it lapsed and another worker leased the
    /// message, or it was acked, nacked, edited or cancelled), or the receipt is not for this queue.
    Stale,
}

/// A message leased through this node, kept so an ack needs no read of the job.
#[derive(Clone)]
struct Held {
    occurrence: Occurrence,
    namespace: Arc<str>,
    queue: Arc<str>,
    leased_at: Timestamp,
    visible_until: Timestamp,
}

/// The queue side of an engine. Cheap to clone.
#[derive(Clone)]
pub struct Queues {
    inner: Arc<Inner>,
}

struct Inner {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    metrics: Metrics,
    node_id: String,
    misfire_threshold: Duration,
    /// One per queue that was ever polled on this node: long polls wait on it, pokes wake them.
    bells: Mutex<HashMap<QueueKey, Arc<Notify>>>,
    held: Mutex<HashMap<Receipt, Held>>,
    receipt_key: ReceiptKey,
    /// Ends long polls at shutdown.
    stop: CancellationToken,
    /// The engine's wake-ups: an ack or nack that creates a callback job wakes the planner.
    shared: Arc<crate::Shared>,
}

/// A queue: its namespace and name.
type QueueKey = (Arc<str>, Arc<str>);

/// Sweep lapsed entries from the held map once it grows past this many.
const HELD_SWEEP_AT: usize = 100_000;
/// When due messages exist but none match a poll's type filter, re-check this often at first.
const FILTERED_RECHECK_MIN: Duration = Duration::from_millis(5);
const FILTERED_RECHECK_MAX: Duration = Duration::from_millis(500);

impl Queues {
    pub(crate) fn new(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        metrics: Metrics,
        node_id: String,
        misfire_threshold: Duration,
        stop: CancellationToken,
        shared: Arc<crate::Shared>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                store,
                clock,
                metrics,
                node_id,
                misfire_threshold,
                bells: Mutex::new(HashMap::new()),
                held: Mutex::new(HashMap::new()),
                receipt_key: ReceiptKey::default(),
                stop,
                shared,
            }),
        }
    }

    /// Something in this queue became due, or will at a time a waiting poll has not seen yet (a
    /// job was created, edited, resumed or triggered, a message was nacked).
    pub fn poke(&self, namespace: &str, queue: &str) {
        let bell = self
            .inner
            .bells
            .lock()
            .expect("bells lock")
            .get(&(Arc::from(namespace), Arc::from(queue)))
            .cloned();
        if let Some(bell) = bell {
            bell.notify_waiters();
        }
    }

    /// Wakes every long poll on this node, whatever its queue.
    fn poke_all(&self) {
        for bell in self.inner.bells.lock().expect("bells lock").values() {
            bell.notify_waiters();
        }
    }

    fn bell(&self, namespace: &str, queue: &str) -> Arc<Notify> {
        self.inner
            .bells
            .lock()
            .expect("bells lock")
            .entry((Arc::from(namespace), Arc::from(queue)))
            .or_default()
            .clone()
    }

    /// Leases up to `req.max` available messages, waiting up to `req.wait` for the first one.
    /// Returns as soon as at least one is leased; an empty answer means the wait ran out (or the
    /// node is shutting down).
    pub async fn lease(
        &self,
        namespace: &str,
        queue: &str,
        req: &LeaseRequest,
    ) -> Result<Vec<Leased>> {
        let deadline = Instant::now() + req.wait;
        let bell = self.bell(namespace, queue);
        let scope = ClaimScope::Queue {
            namespace,
            queue,
            types: req.types.as_deref(),
            max_bytes: req.max_bytes,
        };
        let mut recheck = FILTERED_RECHECK_MIN;
        loop {
            // Listen before looking, so a poke between the claim and the wait is not lost.
            let rung = bell.notified();
            tokio::pin!(rung);
            rung.as_mut().enable();

            let got = self.try_lease(namespace, queue, scope, req).await?;
            let left = deadline.saturating_duration_since(Instant::now());
            if !got.is_empty() || left.is_zero() || self.inner.stop.is_cancelled() {
                return Ok(got);
            }
            let now = self.inner.clock.now();
            let nap =
                match self.inner.store.next_due(scope).await? {
                    // Due messages this poll may not take (other types, or just taken by another
                    // worker): look again soon, then less and less often.
                    Some(at) if at <= now => {
                        let nap = recheck;
                        recheck = (recheck * 2).min(FILTERED_RECHECK_MAX);
                        nap
                    }
                    // Wake on the due millisecond itself: the clock must read it for the claim to
                    // see the message, so never sleep less than a millisecond.
                    Some(at) => {
                        recheck = FILTERED_RECHECK_MIN;
                        Duration::from_millis(
                            (at.as_millisecond() - now.as_millisecond()).max(1) as u64
                        )
                    }
                    None => left,
                }
                .min(left);
            tokio::select! {
                _ = &mut rung => {}
                _ = tokio::time::sleep(nap) => {}
                _ = self.inner.stop.cancelled() => return Ok(Vec::new()),
            }
        }
    }

    /// One claim, with the messages that must not go out settled on the spot: occurrences a
    /// misfire policy drops, and messages whose lapsed leases used up their attempts.
    async fn try_lease(
        &self,
        namespace: &str,
        queue: &str,
        scope: ClaimScope<'_>,
        req: &LeaseRequest,
    ) -> Result<Vec<Leased>> {
        let inner = &self.inner;
        let mut out = Vec::new();
        // Payload bytes leased so far, against `req.max_bytes` across this lease's claims.
        let mut bytes = 0usize;
        while out.len() < req.max && hourglass_store::under_byte_budget(req.max_bytes, bytes) {
            let now = inner.clock.now();
            let lease = Lease {
                owner: inner.node_id.clone(),
                ttl: req.visibility,
                now,
            };
            let want = req.max - out.len();
            let scope = match scope {
                ClaimScope::Queue {
                    namespace,
                    queue,
                    types,
                    max_bytes,
                } => ClaimScope::Queue {
                    namespace,
                    queue,
                    types,
                    max_bytes: max_bytes.map(|max| max.saturating_sub(bytes)),
                },
                fired => fired,
            };
            let claimed = inner.store.claim_due(scope, now, want, &lease).await?;
            bytes += claimed
                .iter()
                .map(|o| o.payload.as_deref().map_or(0, str::len))
                .sum::<usize>();
            let exhausted = claimed.len() < want;
            let visible_until = hourglass_core::add_saturating(now, req.visibility);
            let mut settled = Vec::new();
            let mut handed_off = false;
            for occ in claimed {
                // A panic deciding one message quarantines that message (dead letter, job
                // failed) instead of failing every lease on the queue while it stays claimable.
                let refused = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    self.refuse(&occ, now)
                }))
                .unwrap_or_else(|panic| {
                    inner.metrics.quarantined.inc();
                    Some(crate::pipeline::quarantined(&occ, now, &*panic))
                });
                if let Some(completion) = refused {
                    handed_off |= matches!(completion.action, Action::HandedOff { .. });
                    settled.push(completion);
                    continue;
                }
                if occ.attempt == 1 {
                    let late_ms = (now.as_millisecond() - occ.origin().1.as_millisecond()).max(0);
                    inner.metrics.lateness.observe(late_ms as f64 / 1000.0);
                }
                let receipt = seal(inner.receipt_key.get(&*inner.store).await?, occ.claim());
                out.push(Leased {
                    occurrence: occ,
                    receipt,
                    visible_until,
                });
            }
            if !settled.is_empty() {
                let applied = inner.store.complete(settled, now).await?;
                let stale = applied
                    .iter()
                    .filter(|a| **a == Applied::StaleLease)
                    .count();
                inner.metrics.stale_completions.inc_by(stale as u64);
            }
            // Messages handed off just now are claimable at once: claim again for them.
            if exhausted && !handed_off {
                break;
            }
        }
        if !out.is_empty() {
            inner.metrics.queue_leased.inc_by(out.len() as u64);
            let (ns, q): (Arc<str>, Arc<str>) = (Arc::from(namespace), Arc::from(queue));
            let leased_at = inner.clock.now();
            let mut held = inner.held.lock().expect("held lock");
            if held.len() >= HELD_SWEEP_AT {
                held.retain(|_, h| h.visible_until > leased_at);
            }
            for l in &out {
                held.insert(
                    l.receipt,
                    Held {
                        occurrence: l.occurrence.clone(),
                        namespace: ns.clone(),
                        queue: q.clone(),
                        leased_at,
                        visible_until: l.visible_until,
                    },
                );
            }
        }
        Ok(out)
    }

    /// The completion for a claimed message that must not be handed out, if any.
    fn refuse(&self, occ: &Occurrence, now: Timestamp) -> Option<Completion> {
        let inner = &self.inner;
        let spec = &occ.spec;
        let label = |outcome| OutcomeLabels {
            target: "queue",
            outcome,
        };
        let backfilled = spec.backfill.as_ref().is_some_and(|b| b.covers(occ.due));
        if !backfilled
            && let FireDecision::Skip { next, skipped } = misfire::decide(
                &spec.schedule,
                spec.misfire,
                occ.due,
                spec.schedule.fire_time(occ.job_id, occ.due),
                now,
                inner.misfire_threshold,
                occ.runs_done,
            )
        {
            inner.metrics.skipped_occurrences.inc_by(skipped);
            inner.metrics.fired.get_or_create(&label("skipped")).inc();
            return Some(Completion::of(
                occ,
                None,
                Action::Skipped {
                    next: next.map(|due| Next::of(&spec.schedule, occ.job_id, due)),
                    skipped,
                },
                None,
            ));
        }
        // An `allow` job's occurrence goes out as a message of its own, created with this
        // completion and leased by the next claim; the job's next occurrence is available at
        // its time whether or not this one is acknowledged.
        if spec.overlap.hands_off(&spec.schedule) {
            return Some(crate::pipeline::hand_off(
                &inner.metrics,
                inner.misfire_threshold,
                now,
                occ,
            ));
        }
        if occ.attempt > spec.retry.max_attempts {
            // Every attempt was leased and never acked: the last lease lapsed too.
            let previous = Occurrence {
                attempt: occ.attempt - 1,
                ..occ.clone()
            };
            let reason = format!(
                "not acknowledged within the visibility timeout in {} attempts",
                spec.retry.max_attempts
            );
            return Some(settle(
                &inner.metrics,
                inner.misfire_threshold,
                now,
                &previous,
                now,
                DeliveryResult {
                    status: None,
                    latency: Duration::ZERO,
                    verdict: Verdict::GiveUp { reason },
                    response: None,
                    shared: false,
                },
            ));
        }
        None
    }

    /// Resolves receipts to the messages they hold, checking each belongs to this queue of this
    /// namespace. `None` for a receipt that is not (or no longer) a current lease here.
    async fn resolve(
        &self,
        namespace: &str,
        queue: &str,
        receipts: &[Receipt],
        take: bool,
    ) -> Result<Vec<Option<(Occurrence, Option<Timestamp>)>>> {
        let mut out = Vec::with_capacity(receipts.len());
        let mut missing = Vec::new();
        let key = self.inner.receipt_key.get(&*self.inner.store).await?;
        {
            let mut held = self.inner.held.lock().expect("held lock");
            for (i, r) in receipts.iter().enumerate() {
                // A forged receipt (a guessed token, no MAC of ours) is no lease of ours.
                if !genuine(key, r) {
                    out.push(None);
                    continue;
                }
                let found = if take {
                    held.remove(r)
                } else {
                    held.get(r).cloned()
                };
                match found {
                    Some(h) if &*h.namespace == namespace && &*h.queue == queue => {
                        out.push(Some((h.occurrence, Some(h.leased_at))));
                    }
                    Some(_) => out.push(None),
                    None => {
                        out.push(None);
                        missing.push(i);
                    }
                }
            }
        }
        // Leased through another node, or before a restart: read the job. Its pending occurrence
        // is the one the receipt leased if the token is still current; the store's fence decides.
        for i in missing {
            let r = receipts[i];
            let Some(job) = self
                .inner
                .store
                .get_job(Some(namespace), r.claim.job_id)
                .await?
            else {
                continue;
            };
            let (Some(due), Some(q)) = (job.next_due, job.spec.target.queue()) else {
                continue;
            };
            if q != queue {
                continue;
            }
            let occurrence = Occurrence {
                job_id: job.id,
                namespace: Arc::from(job.namespace.as_str()),
                due,
                fire_at: due,
                attempt: job.attempt + 1,
                token: r.claim.token,
                runs_done: job.runs,
                spec: Arc::new(job.spec),
                payload: job.payload.map(Into::into),
                lapsed_owner: None,
            };
            // When it was leased is not stored: the attempt's latency stays unknown (0).
            out[i] = Some((occurrence, None));
        }
        Ok(out)
    }

    /// Acknowledges messages: each occurrence counts as delivered and its job moves on.
    pub async fn ack(
        &self,
        namespace: &str,
        queue: &str,
        receipts: &[Receipt],
    ) -> Result<Vec<ReceiptOutcome>> {
        let (outcomes, advanced) = self
            .finish(namespace, queue, receipts, |_| Verdict::Delivered)
            .await?;
        // An acked recurring job has its next occurrence now, perhaps due already. Acked one-offs
        // leave nothing to lease, and waking every waiting poll for them costs a claim each.
        if advanced {
            self.poke(namespace, queue);
        }
        Ok(outcomes)
    }

    /// Hands messages back as failed attempts: retried after `delay` (the job's backoff when
    /// `None`), or dead-lettered once the job's attempts are used up.
    pub async fn nack(
        &self,
        namespace: &str,
        queue: &str,
        receipts: &[Receipt],
        delay: Option<Duration>,
    ) -> Result<Vec<ReceiptOutcome>> {
        let (outcomes, _) = self
            .finish(namespace, queue, receipts, |_| Verdict::Retry {
                after: delay,
                reason: "nacked by the worker".into(),
            })
            .await?;
        self.poke(namespace, queue);
        Ok(outcomes)
    }

    /// Settles leased messages with `verdict`. Also answers whether an applied completion moved
    /// a job on to a next occurrence.
    async fn finish(
        &self,
        namespace: &str,
        queue: &str,
        receipts: &[Receipt],
        verdict: impl Fn(&Occurrence) -> Verdict,
    ) -> Result<(Vec<ReceiptOutcome>, bool)> {
        let inner = &self.inner;
        let resolved = self.resolve(namespace, queue, receipts, true).await?;
        let now = inner.clock.now();
        let mut batch: Vec<Completion> = Vec::new();
        let mut slots = Vec::with_capacity(receipts.len());
        for found in &resolved {
            match found {
                Some((occ, leased_at)) => {
                    let leased_at = leased_at.unwrap_or(now);
                    let held_for = (now.as_millisecond() - leased_at.as_millisecond()).max(0);
                    let result = DeliveryResult {
                        status: None,
                        latency: Duration::from_millis(held_for as u64),
                        verdict: verdict(occ),
                        response: None,
                        shared: false,
                    };
                    slots.push(Some(batch.len()));
                    batch.push(settle(
                        &inner.metrics,
                        inner.misfire_threshold,
                        now,
                        occ,
                        leased_at,
                        result,
                    ));
                }
                None => slots.push(None),
            }
        }
        let has_next: Vec<bool> = batch
            .iter()
            .map(|c| match &c.action {
                Action::Delivered { next, .. }
                | Action::DeadLetter { next, .. }
                | Action::Skipped { next, .. }
                | Action::HandedOff { next, .. } => next.is_some(),
                Action::Retry { .. } => false,
            })
            .collect();
        // Callback jobs the batch creates, woken for once written.
        let callbacks: Vec<(Timestamp, Option<(String, String)>)> = batch
            .iter()
            .filter_map(|c| c.callback.as_ref())
            .map(|cb| {
                let queue = cb.spec.target.queue();
                (cb.due, queue.map(|q| (cb.namespace.clone(), q.to_owned())))
            })
            .collect();
        let applied = if batch.is_empty() {
            Vec::new()
        } else {
            inner.store.complete(batch, now).await?
        };
        for (due, queue) in callbacks {
            match queue {
                Some((namespace, queue)) => self.poke(&namespace, &queue),
                None => inner.shared.wake_for(due),
            }
        }
        let stale = applied
            .iter()
            .filter(|a| **a == Applied::StaleLease)
            .count();
        inner.metrics.stale_completions.inc_by(stale as u64);
        let advanced = applied
            .iter()
            .zip(&has_next)
            .any(|(a, next)| *a == Applied::Yes && *next);
        let outcomes = slots
            .into_iter()
            .map(|slot| match slot.map(|i| applied[i]) {
                Some(Applied::Yes) => ReceiptOutcome::Applied,
                _ => ReceiptOutcome::Stale,
            })
            .collect();
        Ok((outcomes, advanced))
    }

    /// Keeps messages invisible for `visibility` from now. Answers the new expiry too.
    pub async fn extend(
        &self,
        namespace: &str,
        queue: &str,
        receipts: &[Receipt],
        visibility: Duration,
    ) -> Result<(Vec<ReceiptOutcome>, Timestamp)> {
        let inner = &self.inner;
        let resolved = self.resolve(namespace, queue, receipts, false).await?;
        let now = inner.clock.now();
        let until = hourglass_core::add_saturating(now, visibility);
        let mine: Vec<Claim> = receipts
            .iter()
            .zip(&resolved)
            .filter(|(_, found)| found.is_some())
            .map(|(r, _)| r.claim)
            .collect();
        let applied = if mine.is_empty() {
            Vec::new()
        } else {
            inner.store.extend_claims(mine, until, now).await?
        };
        let mut applied = applied.into_iter();
        let outcomes: Vec<ReceiptOutcome> = resolved
            .iter()
            .map(|found| match found.as_ref().and(applied.next()) {
                Some(Applied::Yes) => ReceiptOutcome::Applied,
                _ => ReceiptOutcome::Stale,
            })
            .collect();
        let mut held = inner.held.lock().expect("held lock");
        for (r, o) in receipts.iter().zip(&outcomes) {
            if *o == ReceiptOutcome::Applied
                && let Some(h) = held.get_mut(r)
            {
                h.visible_until = until;
            }
        }
        Ok((outcomes, until))
    }

    pub async fn stats(&self, namespace: &str, queue: Option<&str>) -> Result<Vec<QueueStats>> {
        self.inner
            .store
            .queue_stats(namespace, queue, self.inner.clock.now())
            .await
    }
}

/// Relays the store's events to this node's long polls: a queue message that became due through
/// another node (created, nacked, acked into its next occurrence there) wakes the polls on its
/// queue here; missed events wake them all to look again.
pub(crate) struct QueueListener {
    pub queues: Queues,
    /// The store's events.
    pub events: broadcast::Receiver<StoreEvent>,
}

impl crate::pipeline::Stage for QueueListener {
    const NAME: &'static str = "queue listener";

    async fn run(self) {
        let Self { queues, mut events } = self;
        loop {
            let event = tokio::select! {
                event = events.recv() => event,
                _ = queues.inner.stop.cancelled() => break,
            };
            match event {
                Ok(StoreEvent::Due(DueEvent {
                    namespace,
                    queue: Some(queue),
                    ..
                })) => queues.poke(&namespace, &queue),
                Ok(StoreEvent::Due(_) | StoreEvent::Fenced { .. }) => {}
                Ok(StoreEvent::Resync) | Err(RecvError::Lagged(_)) => queues.poke_all(),
                Err(RecvError::Closed) => break,
            }
        }
    }
}
