//! The completer: turns handler outcomes into ack and nack requests, batched. It waits a few
//! milliseconds for company after the first outcome (or until a batch is full), groups nacks by
//! their delay (one request carries one delay), and retries a node that is unavailable, so a
//! finished handler's result is not lost to a short outage.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, mpsc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::backoff::Backoff;
use crate::Client;
use crate::error::Error;
use crate::types::{Receipt, ReceiptResults};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Ack,
    /// `None`: the job's retry backoff decides when it comes back.
    Nack {
        delay: Option<Duration>,
    },
}

/// A handled message on its way to the node.
pub(crate) struct Finished {
    pub receipt: Receipt,
    pub outcome: Outcome,
    /// The message's concurrency slot, returned only once its outcome is written (or given up):
    /// this keeps handlers running plus outcomes not yet written within `concurrency`, so an
    /// outage that stalls acks also stalls leasing instead of piling up results.
    #[allow(dead_code, reason = "held, never read: dropping it returns the slot")]
    pub slot: Option<OwnedSemaphorePermit>,
}

pub(crate) struct Completer {
    pub client: Client,
    pub queue: String,
    pub max_batch: usize,
    pub linger: Duration,
    /// Cancelled when the runtime stops waiting for the node at shutdown: unwritten outcomes are
    /// then left to the visibility timeout, which redelivers them.
    pub give_up: CancellationToken,
}

impl Completer {
    pub async fn run(self, mut outcomes: mpsc::Receiver<Finished>) {
        while let Some(first) = outcomes.recv().await {
            let mut batch = vec![first];
            let deadline = Instant::now() + self.linger;
            while batch.len() < self.max_batch {
                tokio::select! {
                    next = outcomes.recv() => match next {
                        Some(finished) => batch.push(finished),
                        None => break,
                    },
                    _ = tokio::time::sleep_until(deadline) => break,
                }
            }
            self.flush(batch).await;
        }
    }

    async fn flush(&self, batch: Vec<Finished>) {
        let mut acks = Vec::new();
        let mut nacks: BTreeMap<Option<Duration>, Vec<Receipt>> = BTreeMap::new();
        for finished in &batch {
            match finished.outcome {
                Outcome::Ack => acks.push(finished.receipt.clone()),
                Outcome::Nack { delay } => nacks
                    .entry(delay)
                    .or_default()
                    .push(finished.receipt.clone()),
            }
        }
        if !acks.is_empty() {
            self.write("ack", &acks, || self.client.ack(&self.queue, &acks))
                .await;
        }
        for (delay, receipts) in &nacks {
            self.write("nack", receipts, || {
                self.client.nack(&self.queue, receipts, *delay)
            })
            .await;
        }
        // Dropping the batch returns its slots.
        drop(batch);
    }

    /// Sends one ack or nack request, retrying while the node is unavailable.
    async fn write<F, Fut>(&self, verb: &'static str, receipts: &[Receipt], send: F)
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<ReceiptResults, Error>>,
    {
        let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(10));
        loop {
            let result = tokio::select! {
                biased;
                _ = self.give_up.cancelled() => {
                    tracing::warn!(queue = %self.queue, verb, count = receipts.len(), "shutting down before the node took these outcomes; they will be redelivered");
                    return;
                }
                result = send() => result,
            };
            match result {
                Ok(results) => {
                    for failure in &results.failed {
                        if failure.is_stale_receipt() {
                            tracing::warn!(queue = %self.queue, verb, receipt = %failure.receipt, "lease lost before the outcome was written; another consumer has the message");
                        } else {
                            tracing::warn!(queue = %self.queue, verb, receipt = %failure.receipt, code = %failure.code, message = %failure.message, "outcome refused");
                        }
                    }
                    return;
                }
                Err(e) if e.is_retryable() => {
                    let wait = backoff.next(e.retry_after());
                    tracing::warn!(queue = %self.queue, verb, error = %e, wait_ms = wait.as_millis() as u64, "node unavailable; retrying outcomes");
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        _ = self.give_up.cancelled() => {}
                    }
                }
                Err(e) => {
                    tracing::error!(queue = %self.queue, verb, error = %e, count = receipts.len(), "outcomes refused; the messages will be redelivered after their visibility timeout");
                    return;
                }
            }
        }
    }
}
