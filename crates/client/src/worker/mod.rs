//! The worker runtime: leases messages from one queue, runs the handler registered for each
//! message's job type with bounded concurrency, keeps long-running messages leased, and writes
//! the outcomes back in batches.
//!
//! ```text
//! lease loop ──(message + slot)──► message task ──(outcome + slot)──► completer ──► ack / nack
//!  long-polls for                  handler in its own task             batches by
//!  as many messages                (a panic is a failure),             a few ms / N,
//!  as there are free slots         extends the lease at half           retries while the
//!                                  the visibility                      node is unavailable
//! ```
//!
//! A slot (a semaphore permit) travels with its message and returns only once the outcome is
//! written, so handlers running plus outcomes pending never exceed `concurrency`.
//!
//! Shutdown, when the future given to [`Worker::run`] resolves: stop leasing (a lease still
//! long-polling is dropped; anything the node handed out in that instant comes back after its
//! visibility timeout), give running handlers `shutdown_grace` to finish, then cancel the rest
//! and **nack them with delay 0** so another worker gets them at once rather than after the
//! visibility timeout (the interrupted try counts as an attempt), then write every outcome,
//! waiting for the node at most `shutdown_grace` again, and return.

mod backoff;
mod completer;
mod handler;

#[cfg(test)]
mod fake_server;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use self::backoff::Backoff;
use self::completer::{Completer, Finished, Outcome};
use self::handler::{ErasedHandler, HandlerFuture, erase};
pub use self::handler::{HandlerError, HandlerResult, Job};
use crate::Client;
use crate::error::Error;
use crate::types::{LeaseOptions, Message, Receipt};

/// The server's cap on one lease.
const MAX_LEASE: usize = 1000;
/// The server's cap on `types` in one lease.
const MAX_TYPES: usize = 32;

/// Configures a [`Worker`]: `Worker::builder(client, "emails").handle(...).build()`.
pub struct WorkerBuilder {
    client: Client,
    queue: String,
    concurrency: usize,
    visibility: Duration,
    poll_wait: Duration,
    shutdown_grace: Duration,
    ack_batch: usize,
    ack_linger: Duration,
    handlers: HashMap<String, ErasedHandler>,
    fallback: Option<ErasedHandler>,
}

impl WorkerBuilder {
    /// How many handlers run at once (default 16).
    pub fn concurrency(mut self, concurrency: usize) -> Self {
        self.concurrency = concurrency.max(1);
        self
    }

    /// How long a lease keeps a message from other consumers (default 30 s). A handler that runs
    /// longer is extended by this much whenever half of it has passed.
    pub fn visibility(mut self, visibility: Duration) -> Self {
        self.visibility = visibility;
        self
    }

    /// How long one lease long-polls an empty queue (default 20 s, the server's maximum).
    pub fn poll_wait(mut self, wait: Duration) -> Self {
        self.poll_wait = wait;
        self
    }

    /// How long running handlers get to finish after shutdown is requested (default 30 s); also
    /// how long the worker then waits for the node to take the outcomes.
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }

    /// Outcomes are written once this many are waiting (default 100, at most 1000)...
    pub fn ack_batch(mut self, max: usize) -> Self {
        self.ack_batch = max.clamp(1, MAX_LEASE);
        self
    }

    /// ...or this long after the first of them finished (default 5 ms).
    pub fn ack_linger(mut self, linger: Duration) -> Self {
        self.ack_linger = linger;
        self
    }

    /// Runs `handler` for messages of job type `job_type`, with the payload decoded into `T`
    /// (a payload that does not decode is a failure: the message is nacked). `Ok` acks the
    /// message; `Err` nacks it, with the error's retry delay if it has one.
    pub fn handle<T, F, Fut>(mut self, job_type: impl Into<String>, handler: F) -> Self
    where
        T: DeserializeOwned + Send + 'static,
        F: Fn(Job<T>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult> + Send + 'static,
    {
        self.handlers.insert(job_type.into(), erase(handler));
        self
    }

    /// Runs `handler` for messages of any other type, including jobs without a type. With a
    /// fallback the worker leases every message of the queue; without one it asks only for the
    /// types it handles.
    pub fn fallback<T, F, Fut>(mut self, handler: F) -> Self
    where
        T: DeserializeOwned + Send + 'static,
        F: Fn(Job<T>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult> + Send + 'static,
    {
        self.fallback = Some(erase(handler));
        self
    }

    pub fn build(self) -> Result<Worker, Error> {
        if self.handlers.is_empty() && self.fallback.is_none() {
            return Err(Error::Config(
                "a worker needs at least one handler or a fallback".into(),
            ));
        }
        if self.fallback.is_none() && self.handlers.len() > MAX_TYPES {
            return Err(Error::Config(format!(
                "a lease names at most {MAX_TYPES} types; add a fallback to handle more"
            )));
        }
        let mut types: Vec<String> = if self.fallback.is_some() {
            Vec::new()
        } else {
            self.handlers.keys().cloned().collect()
        };
        types.sort();
        Ok(Worker {
            shared: Arc::new(Shared {
                client: self.client,
                queue: self.queue,
                visibility: self.visibility,
                handlers: self.handlers,
                fallback: self.fallback,
            }),
            concurrency: self.concurrency,
            poll_wait: self.poll_wait,
            shutdown_grace: self.shutdown_grace,
            ack_batch: self.ack_batch,
            ack_linger: self.ack_linger,
            types,
        })
    }
}

/// Processes one queue until shut down. See the [module documentation](self) for the lifecycle.
pub struct Worker {
    shared: Arc<Shared>,
    concurrency: usize,
    poll_wait: Duration,
    shutdown_grace: Duration,
    ack_batch: usize,
    ack_linger: Duration,
    /// Sent as the lease's `types`; empty (any type) when there is a fallback.
    types: Vec<String>,
}

/// What every message task needs.
struct Shared {
    client: Client,
    queue: String,
    visibility: Duration,
    handlers: HashMap<String, ErasedHandler>,
    fallback: Option<ErasedHandler>,
}

impl Worker {
    pub fn builder(client: Client, queue: impl Into<String>) -> WorkerBuilder {
        WorkerBuilder {
            client,
            queue: queue.into(),
            concurrency: 16,
            visibility: Duration::from_secs(30),
            poll_wait: Duration::from_secs(20),
            shutdown_grace: Duration::from_secs(30),
            ack_batch: 100,
            ack_linger: Duration::from_millis(5),
            handlers: HashMap::new(),
            fallback: None,
        }
    }

    /// Runs until `shutdown` resolves (e.g. `token.cancelled()` or a signal), then drains and
    /// returns `Ok`. Returns `Err` after draining when the node refuses the lease itself in a
    /// way that retrying cannot fix (bad API key, invalid options); an unavailable node is
    /// retried with backoff, honouring `Retry-After`, for as long as it takes.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send) -> Result<(), Error> {
        // One permit per handler slot; see `Finished::slot` for when a permit comes back.
        let slots = Arc::new(Semaphore::new(self.concurrency));
        // Outcomes from message tasks to the completer. Every sender holds a slot, so the
        // channel never holds more than `concurrency` (plus the rare message beyond a lease's
        // `max`, which carries no slot).
        let (outcomes_tx, outcomes_rx) = mpsc::channel(self.concurrency);
        // Cancelled at the grace deadline: handlers still running are stopped and nacked.
        let hard_stop = CancellationToken::new();
        let give_up = CancellationToken::new();
        let completer = tokio::spawn(
            Completer {
                client: self.shared.client.clone(),
                queue: self.shared.queue.clone(),
                max_batch: self.ack_batch,
                linger: self.ack_linger,
                give_up: give_up.clone(),
            }
            .run(outcomes_rx),
        );
        let mut tasks = JoinSet::new();
        let stopped_by = self
            .lease_loop(shutdown, &slots, &outcomes_tx, &hard_stop, &mut tasks)
            .await;
        tracing::info!(queue = %self.shared.queue, running = tasks.len(), "worker stopping; draining running handlers");

        let grace = tokio::time::sleep(self.shutdown_grace);
        tokio::pin!(grace);
        loop {
            tokio::select! {
                joined = tasks.join_next() => if joined.is_none() { break },
                _ = &mut grace => {
                    tracing::warn!(queue = %self.shared.queue, running = tasks.len(), "grace period over; nacking unfinished handlers");
                    hard_stop.cancel();
                    while tasks.join_next().await.is_some() {}
                    break;
                }
            }
        }
        drop(outcomes_tx);
        tokio::pin!(completer);
        tokio::select! {
            _ = &mut completer => {}
            _ = tokio::time::sleep(self.shutdown_grace) => {
                give_up.cancel();
                let _ = completer.await;
            }
        }
        tracing::info!(queue = %self.shared.queue, "worker stopped");
        stopped_by.map_or(Ok(()), Err)
    }

    /// Leases and starts messages until shutdown (`None`) or a lease error that retrying cannot
    /// fix (`Some`).
    async fn lease_loop(
        &self,
        shutdown: impl Future<Output = ()>,
        slots: &Arc<Semaphore>,
        outcomes: &mpsc::Sender<Finished>,
        hard_stop: &CancellationToken,
        tasks: &mut JoinSet<()>,
    ) -> Option<Error> {
        tokio::pin!(shutdown);
        let queue = &self.shared.queue;
        let mut backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(30));
        loop {
            // Reap finished tasks so the set holds only running ones.
            while tasks.try_join_next().is_some() {}
            let first = tokio::select! {
                biased;
                _ = &mut shutdown => return None,
                permit = slots.clone().acquire_owned() => permit.expect("the slot semaphore is never closed"),
            };
            let mut permits = vec![first];
            while permits.len() < MAX_LEASE {
                match slots.clone().try_acquire_owned() {
                    Ok(permit) => permits.push(permit),
                    Err(_) => break,
                }
            }
            let options = LeaseOptions {
                max: permits.len() as u32,
                wait: self.poll_wait,
                visibility: self.shared.visibility,
                types: self.types.clone(),
            };
            let leased_at = Instant::now();
            let result = tokio::select! {
                biased;
                _ = &mut shutdown => return None,
                result = self.shared.client.lease(queue, &options) => result,
            };
            match result {
                Ok(messages) => {
                    backoff.reset();
                    let empty = messages.is_empty();
                    tracing::debug!(queue = %queue, count = messages.len(), "leased");
                    for message in messages {
                        let slot = permits.pop();
                        if slot.is_none() {
                            tracing::warn!(queue = %queue, "the node returned more messages than asked for; handing the extra back");
                            let finished = Finished {
                                receipt: message.receipt,
                                outcome: Outcome::Nack {
                                    delay: Some(Duration::ZERO),
                                },
                                slot: None,
                            };
                            let _ = outcomes.send(finished).await;
                            continue;
                        }
                        tasks.spawn(process(
                            self.shared.clone(),
                            message,
                            slot,
                            leased_at,
                            outcomes.clone(),
                            hard_stop.clone(),
                        ));
                    }
                    drop(permits);
                    // A node that answers an empty poll at once (or a zero wait) would make this
                    // loop spin; pause as if it had waited.
                    if empty && leased_at.elapsed() < self.poll_wait / 2 {
                        let pause = (self.poll_wait / 2).max(Duration::from_millis(100));
                        tokio::select! {
                            _ = &mut shutdown => return None,
                            _ = tokio::time::sleep_until(leased_at + pause) => {}
                        }
                    }
                }
                Err(e) if e.is_retryable() => {
                    drop(permits);
                    let wait = backoff.next(e.retry_after());
                    tracing::warn!(queue = %queue, error = %e, wait_ms = wait.as_millis() as u64, "lease failed; retrying");
                    tokio::select! {
                        _ = &mut shutdown => return None,
                        _ = tokio::time::sleep(wait) => {}
                    }
                }
                Err(e) => {
                    tracing::error!(queue = %queue, error = %e, "lease refused; stopping the worker");
                    return Some(e);
                }
            }
        }
    }
}

/// Runs one message's handler to an outcome and hands the outcome (with the message's slot) to
/// the completer.
async fn process(
    shared: Arc<Shared>,
    message: Message,
    slot: Option<OwnedSemaphorePermit>,
    leased_at: Instant,
    outcomes: mpsc::Sender<Finished>,
    hard_stop: CancellationToken,
) {
    let receipt = message.receipt.clone();
    let span = tracing::info_span!(
        "job",
        queue = %shared.queue,
        job_id = %message.job_id,
        delivery_id = %message.delivery_id,
        attempt = message.attempt,
    );
    let handler = message
        .job_type
        .as_deref()
        .and_then(|t| shared.handlers.get(t))
        .or(shared.fallback.as_ref())
        .cloned();
    let outcome = match handler {
        None => {
            span.in_scope(|| tracing::warn!(job_type = ?message.job_type, "no handler for this type; nacking"));
            Outcome::Nack { delay: None }
        }
        Some(handler) => {
            // The handler runs in a task of its own so that a panic ends that task, not this
            // one, and so it can be stopped at the grace deadline. Decoding happens there too.
            let mut running = tokio::spawn(async move {
                let future: HandlerFuture = handler(message)?;
                future.await
            });
            let keeper = tokio::spawn(keep_leased(shared.clone(), receipt.clone(), leased_at));
            let outcome = tokio::select! {
                joined = &mut running => match joined {
                    Ok(Ok(())) => Outcome::Ack,
                    Ok(Err(e)) => {
                        span.in_scope(|| tracing::warn!(error = %e, retry_after_ms = e.delay().map(|d| d.as_millis() as u64), "handler failed"));
                        Outcome::Nack { delay: e.delay() }
                    }
                    Err(e) => {
                        span.in_scope(|| tracing::error!(error = %e, "handler panicked"));
                        Outcome::Nack { delay: None }
                    }
                },
                _ = hard_stop.cancelled() => {
                    running.abort();
                    span.in_scope(|| tracing::warn!("handler still running at the shutdown deadline; stopped and nacked"));
                    Outcome::Nack { delay: Some(Duration::ZERO) }
                }
            };
            keeper.abort();
            outcome
        }
    };
    // The send fails only if the completer is gone, which happens after every task ended.
    let _ = outcomes
        .send(Finished {
            receipt,
            outcome,
            slot,
        })
        .await;
}

/// Extends a message's lease by the visibility whenever half of it has passed, for as long as
/// its handler runs (the caller aborts this task when the handler ends).
async fn keep_leased(shared: Arc<Shared>, receipt: Receipt, leased_at: Instant) {
    let visibility = shared.visibility;
    let mut lease_ends = leased_at + visibility;
    let receipts = [receipt];
    loop {
        // Renew at half the remaining lease; retries after a failure come sooner but never
        // closer than 100 ms apart.
        let now = Instant::now();
        let renew_at =
            now + (lease_ends.saturating_duration_since(now) / 2).max(Duration::from_millis(100));
        tokio::time::sleep_until(renew_at).await;
        let asked_at = Instant::now();
        match shared
            .client
            .extend(&shared.queue, &receipts, visibility)
            .await
        {
            Ok(results) => {
                if let Some(failure) = results.failed.first() {
                    // Stale or unknown: the lease is gone, and extending again cannot bring it
                    // back. The handler keeps running; its outcome will be refused as stale.
                    tracing::warn!(queue = %shared.queue, receipt = %receipts[0], code = %failure.code, "lease lost while the handler runs; another consumer may get the message");
                    return;
                }
                lease_ends = asked_at + visibility;
            }
            Err(e) if e.is_retryable() => {
                tracing::warn!(queue = %shared.queue, error = %e, "cannot extend the lease yet; retrying");
            }
            Err(e) => {
                tracing::warn!(queue = %shared.queue, error = %e, "extending the lease refused; giving up on it");
                return;
            }
        }
    }
}
