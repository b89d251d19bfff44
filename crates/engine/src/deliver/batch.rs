//! Natural batching, for targets whose requests carry batches: the AWS batch APIs (PutEvents,
//! SendMessageBatch, PublishBatch: 10 entries each) and batched webhooks. Each delivery still runs
//! as its own task and gets its own result; it hands its entry to the line for its batch key (a
//! queue, a topic, a namespace's webhook URL) and waits for its entry's result. A line sends what
//! has gathered as soon as one of its batches in flight finishes: nothing waits for a batch to
//! fill, so a lone occurrence goes out at once, and under load batches fill while earlier ones
//! are on the wire. One entry's failure is that entry's result only.
//!
//! A line that stays idle ends by itself, so keys that tenants choose (queue URLs, topic ARNs,
//! webhook URLs) cannot pile up tasks.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc, oneshot};

use super::{ClaimCheck, Verdict};

/// Sends one batch under its key and answers one result per entry, in order.
type SendBatch<I, R> =
    Arc<dyn Fn(String, Vec<I>) -> Pin<Box<dyn Future<Output = Vec<R>> + Send>> + Send + Sync>;

/// The results a line answers itself, for entries its batches did not carry.
pub trait Unanswered {
    /// The batch could not give one: a transient failure with this reason.
    fn unanswered(reason: String) -> Self;
    /// The entry's claim was taken back before its batch was assembled: left out, not sent.
    fn withdrawn() -> Self;
}

impl Unanswered for Verdict {
    fn unanswered(reason: String) -> Self {
        Verdict::Retry {
            after: None,
            reason,
        }
    }

    fn withdrawn() -> Self {
        Verdict::Withdrawn
    }
}

/// How a service batches.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// Most entries in one request.
    pub max_entries: usize,
    /// Most bytes of entries in one request (as [`Batches::submit`]'s `size` counts them).
    pub max_bytes: usize,
    /// Requests in flight at once per key.
    pub in_flight: usize,
}

/// A line ends after this long without an entry.
const IDLE: Duration = Duration::from_secs(60);

struct Entry<I, R> {
    item: I,
    size: usize,
    /// Checked as the entry is put in a batch: a claim taken back while it waited in the line
    /// (a pause, cancel or edit of its job) leaves it out.
    claim: ClaimCheck,
    reply: oneshot::Sender<R>,
}

impl<I, R: Unanswered> Entry<I, R> {
    /// The entry, if it may still be sent; else it is answered withdrawn here.
    fn if_still_held(self) -> Option<Self> {
        if self.claim.still_held() {
            return Some(self);
        }
        let _ = self.reply.send(R::withdrawn());
        None
    }
}

/// Batch lines by key. `R` is what each entry is answered: a publisher's [`Verdict`], or a
/// webhook's whole [`DeliveryResult`](crate::deliver::DeliveryResult).
pub struct Batches<I: Send + 'static, R: Unanswered + Send + 'static = Verdict> {
    lines: Mutex<HashMap<String, mpsc::Sender<Entry<I, R>>>>,
    send: SendBatch<I, R>,
    shape: Shape,
}

impl<I: Send + 'static, R: Unanswered + Send + 'static> Batches<I, R> {
    /// `send` sends one batch under its key and answers one result per entry, in order. `shape`
    /// is every line's, unless [`Batches::submit_shaped`] gives one.
    pub fn new<F, Fut>(shape: Shape, send: F) -> Self
    where
        F: Fn(String, Vec<I>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Vec<R>> + Send + 'static,
    {
        Self {
            lines: Mutex::new(HashMap::new()),
            send: Arc::new(move |key, items| Box::pin(send(key, items))),
            shape,
        }
    }

    /// Queues `item` (of `size` bytes) into the next batch for `key` and waits for its result:
    /// [`Unanswered::withdrawn`] if `claim` is no longer held when its batch is assembled.
    pub async fn submit(&self, key: &str, item: I, size: usize, claim: ClaimCheck) -> R {
        self.submit_shaped(key, item, size, self.shape, claim).await
    }

    /// As [`Batches::submit`], for keys whose batches have a shape of their own: `shape` is the
    /// line's when this entry opens it. Entries of one key must agree on it.
    pub async fn submit_shaped(
        &self,
        key: &str,
        item: I,
        size: usize,
        shape: Shape,
        claim: ClaimCheck,
    ) -> R {
        let mut entry = Some(item);
        // A line that just ended for idleness refuses the entry; the second try makes a new one.
        for _ in 0..2 {
            let Some(item) = entry.take() else { break };
            let line = self.line(key, shape);
            let (reply, answer) = oneshot::channel();
            let sent = line
                .send(Entry {
                    item,
                    size,
                    claim: claim.clone(),
                    reply,
                })
                .await;
            match sent {
                Ok(()) => {
                    return answer.await.unwrap_or_else(|_| {
                        R::unanswered("the batch was dropped before it was sent".into())
                    });
                }
                Err(mpsc::error::SendError(back)) => {
                    self.forget(key, &line);
                    entry = Some(back.item);
                }
            }
        }
        R::unanswered("no batch line could be opened".into())
    }

    fn line(&self, key: &str, shape: Shape) -> mpsc::Sender<Entry<I, R>> {
        let mut lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(line) = lines.get(key)
            && !line.is_closed()
        {
            return line.clone();
        }
        let (tx, rx) = mpsc::channel(shape.max_entries * shape.in_flight * 4);
        tokio::spawn(run_line(key.to_string(), rx, self.send.clone(), shape));
        lines.insert(key.to_string(), tx.clone());
        tx
    }

    fn forget(&self, key: &str, line: &mpsc::Sender<Entry<I, R>>) {
        let mut lines = self.lines.lock().unwrap_or_else(|e| e.into_inner());
        if lines.get(key).is_some_and(|l| l.same_channel(line)) {
            lines.remove(key);
        }
    }
}

async fn run_line<I: Send + 'static, R: Unanswered + Send + 'static>(
    key: String,
    mut rx: mpsc::Receiver<Entry<I, R>>,
    send: SendBatch<I, R>,
    shape: Shape,
) {
    let slots = Arc::new(Semaphore::new(shape.in_flight));
    let mut held: Option<Entry<I, R>> = None;
    let mut closing = false;
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let first = match held.take() {
            Some(entry) => entry,
            None if closing => match rx.try_recv() {
                Ok(entry) => entry,
                Err(_) => return,
            },
            None => match tokio::time::timeout(IDLE, rx.recv()).await {
                Ok(Some(entry)) => entry,
                Ok(None) => return,
                Err(_) => {
                    // Idle: refuse new entries, then send whatever slipped in before that.
                    rx.close();
                    closing = true;
                    continue;
                }
            },
        };
        // Claims are checked as late as possible: an entry may have waited here for a free
        // request while its job was paused, cancelled or edited.
        let Some(first) = first.if_still_held() else {
            continue;
        };
        // Let deliveries released in the same instant reach the line before it sends.
        tokio::task::yield_now().await;
        let mut bytes = first.size;
        let mut batch = vec![first];
        while batch.len() < shape.max_entries {
            match rx.try_recv() {
                Ok(entry) if bytes + entry.size > shape.max_bytes => {
                    held = Some(entry);
                    break;
                }
                Ok(entry) => {
                    if let Some(entry) = entry.if_still_held() {
                        bytes += entry.size;
                        batch.push(entry);
                    }
                }
                Err(_) => break,
            }
        }
        let send = send.clone();
        let key = key.clone();
        tokio::spawn(async move {
            let (items, replies): (Vec<I>, Vec<oneshot::Sender<R>>) =
                batch.into_iter().map(|e| (e.item, e.reply)).unzip();
            let count = items.len();
            let mut results = send(key, items).await.into_iter();
            for reply in replies {
                let result = results.next().unwrap_or_else(|| {
                    R::unanswered(format!(
                        "the service answered fewer results than the {count} sent"
                    ))
                });
                let _ = reply.send(result);
            }
            drop(slot);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn recording(
        sizes: Arc<Mutex<Vec<usize>>>,
        gate: Arc<Semaphore>,
    ) -> impl Fn(String, Vec<u32>) -> Pin<Box<dyn Future<Output = Vec<Verdict>> + Send>>
    + Send
    + Sync
    + 'static {
        move |_key, items: Vec<u32>| {
            let sizes = sizes.clone();
            let gate = gate.clone();
            Box::pin(async move {
                let _open = gate.acquire().await;
                sizes.lock().unwrap().push(items.len());
                items
                    .into_iter()
                    .map(|i| {
                        if i % 2 == 0 {
                            Verdict::Delivered
                        } else {
                            Verdict::GiveUp {
                                reason: format!("odd {i}"),
                            }
                        }
                    })
                    .collect()
            })
        }
    }

    /// The sizes of the batches a test line sent, in order.
    type Sizes = Arc<Mutex<Vec<usize>>>;

    /// A line of one request in flight at a time, whose batches record their sizes and wait at
    /// `gate` (shut at first: the first batch stays in flight while the rest queue up).
    fn gated_line(max_bytes: usize) -> (Arc<Batches<u32>>, Sizes, Arc<Semaphore>) {
        let sizes = Arc::new(Mutex::new(Vec::new()));
        let gate = Arc::new(Semaphore::new(0));
        let shape = Shape {
            max_entries: 10,
            max_bytes,
            in_flight: 1,
        };
        let batches = Arc::new(Batches::new(shape, recording(sizes.clone(), gate.clone())));
        (batches, sizes, gate)
    }

    #[tokio::test]
    async fn entries_gather_while_a_batch_is_in_flight_and_each_gets_its_own_verdict() {
        let (batches, sizes, gate) = gated_line(1_000);
        let mut tasks = Vec::new();
        for i in 0..25u32 {
            let batches = batches.clone();
            tasks.push(tokio::spawn(async move {
                (i, batches.submit("q", i, 10, ClaimCheck::unchecked()).await)
            }));
        }
        // Wait until every entry is queued or in the first batch, then open the gate.
        tokio::time::sleep(Duration::from_millis(50)).await;
        gate.add_permits(100);
        for task in tasks {
            let (i, verdict) = task.await.unwrap();
            if i % 2 == 0 {
                assert_eq!(verdict, Verdict::Delivered);
            } else {
                assert_eq!(
                    verdict,
                    Verdict::GiveUp {
                        reason: format!("odd {i}")
                    }
                );
            }
        }
        let sizes = sizes.lock().unwrap().clone();
        assert_eq!(sizes.iter().sum::<usize>(), 25);
        assert!(sizes.iter().all(|&n| n <= 10), "{sizes:?}");
        // The queued 24 (or 25) went in full batches of ten, not one by one.
        assert!(sizes.len() <= 4, "{sizes:?}");
    }

    #[tokio::test]
    async fn a_batch_stops_at_its_byte_budget() {
        let (batches, sizes, gate) = gated_line(250);
        let sent = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for i in 0..10u32 {
            let (batches, sent) = (batches.clone(), sent.clone());
            tasks.push(tokio::spawn(async move {
                batches
                    .submit("q", i * 2, 100, ClaimCheck::unchecked())
                    .await;
                sent.fetch_add(1, Ordering::Relaxed);
            }));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        gate.add_permits(100);
        for task in tasks {
            task.await.unwrap();
        }
        assert_eq!(sent.load(Ordering::Relaxed), 10);
        let sizes = sizes.lock().unwrap().clone();
        assert!(sizes.iter().all(|&n| n <= 2), "{sizes:?}");
    }

    /// An entry whose claim was taken back while it waited for its line's one request in flight
    /// is left out of the next batch and answered withdrawn; the others go.
    #[tokio::test]
    async fn an_entry_whose_claim_was_taken_back_is_left_out() {
        let (batches, sizes, gate) = gated_line(1_000);
        let held = Arc::new(crate::held::Held::default());
        let clock: Arc<dyn hourglass_core::Clock> = Arc::new(hourglass_core::SystemClock);
        let job = hourglass_core::JobId::from_u128(7);
        let token = hourglass_core::FencingToken::from_i64(1);
        held.hold_for_test(hourglass_core::Claim::new(job, token), i64::MAX);
        let claim = ClaimCheck::new(held.clone(), clock, hourglass_core::Claim::new(job, token));
        // The first entry opens the line and its request stays in flight (the gate is shut).
        let first = {
            let batches = batches.clone();
            tokio::spawn(async move { batches.submit("q", 0, 10, ClaimCheck::unchecked()).await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        let waiting = {
            let (batches, claim) = (batches.clone(), claim.clone());
            tokio::spawn(async move { batches.submit("q", 2, 10, claim).await })
        };
        let other = {
            let batches = batches.clone();
            tokio::spawn(async move { batches.submit("q", 4, 10, ClaimCheck::unchecked()).await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        // The job is cancelled while its entry waits in the line.
        held.fence(job, token.next());
        gate.add_permits(100);
        assert_eq!(first.await.unwrap(), Verdict::Delivered);
        assert_eq!(waiting.await.unwrap(), Verdict::Withdrawn);
        assert_eq!(other.await.unwrap(), Verdict::Delivered);
        assert_eq!(
            *sizes.lock().unwrap(),
            vec![1, 1],
            "the withdrawn entry was sent"
        );
    }
}
