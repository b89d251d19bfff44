//! The bench's queue workers (`--target queue`): long-polling lease loops that write down each
//! message the moment its lease answer arrives, and ack tasks that hand the receipts back in
//! batches. They stand in for the webhook receiver, so they must stay cheap: one shared HTTP
//! client with keep-alive, responses parsed into borrowed structs, ack bodies written by hand.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, bail};
use hyper::body::Bytes;
use serde::Deserialize;
use serde::de::IgnoredAny;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::accounting::{DeliveryKey, Receipt};
use super::now_ms;
use super::recorder::Recorder;
use super::submit::Api;

/// The most receipts one ack request may carry (the API's limit).
pub const MAX_ACK: usize = 1000;
/// How long a lease waits for a message when none is due (the API's maximum).
const LEASE_WAIT_MS: u64 = 20_000;
/// How long leased messages stay invisible: far longer than an ack takes, so a message is only
/// leased twice if its ack was lost.
const VISIBILITY_MS: u64 = 60_000;
/// Attempts per ack request before its receipts count as failed.
const ACK_ATTEMPTS: u32 = 3;

pub struct WorkerOptions {
    pub queue: String,
    /// Concurrent lease loops; as many ack tasks drain their receipts.
    pub workers: usize,
    /// Most messages one lease asks for.
    pub lease_max: usize,
}

/// What the workers did, for the report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkerStats {
    pub workers: usize,
    pub lease_max: usize,
    /// Lease requests answered 200, with messages or not.
    pub leases: u64,
    /// Of those, the ones whose wait ran out with nothing due.
    pub empty_leases: u64,
    /// Messages received.
    pub leased: u64,
    /// Lease requests that failed (transport error or non-200); the loop retried after a pause.
    pub lease_errors: u64,
    pub ack_requests: u64,
    /// Receipts the node confirmed (`succeeded`).
    pub acked: u64,
    /// Receipts not acked: listed under `failed`, or in an ack request that failed every attempt.
    pub acks_failed: u64,
    /// Messages without an Hourglass delivery id (not recorded).
    pub foreign: u64,
    /// The first error met, if any.
    pub first_error: Option<String>,
}

impl WorkerStats {
    /// Messages per lease that returned any.
    pub fn mean_batch(&self) -> Option<f64> {
        let full = self.leases.saturating_sub(self.empty_leases);
        (full > 0).then(|| self.leased as f64 / full as f64)
    }
}

#[derive(Default)]
struct Counters {
    leases: AtomicU64,
    empty_leases: AtomicU64,
    leased: AtomicU64,
    lease_errors: AtomicU64,
    ack_requests: AtomicU64,
    acked: AtomicU64,
    acks_failed: AtomicU64,
    foreign: AtomicU64,
    first_error: Mutex<Option<String>>,
}

impl Counters {
    fn error(&self, e: &anyhow::Error) {
        let mut first = self
            .first_error
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        first.get_or_insert_with(|| format!("{e:#}"));
    }
}

struct Ctx {
    /// One client per node; worker `i` leases from node `i % len` and acks there, where its
    /// leases are held.
    nodes: Vec<Api>,
    lease_path: String,
    ack_path: String,
    /// The lease request, the same every time.
    lease_body: Bytes,
    recorder: Recorder,
    counters: Counters,
}

/// Receipts of leased messages waiting to be acked, as a JSON array's inside: `"r1","r2"`.
struct AckBatch {
    receipts: String,
    count: usize,
}

impl AckBatch {
    fn merge(&mut self, other: AckBatch) {
        if self.count > 0 && other.count > 0 {
            self.receipts.push(',');
        }
        self.receipts.push_str(&other.receipts);
        self.count += other.count;
    }
}

pub struct Workers {
    ctx: Arc<Ctx>,
    options: (usize, usize),
    /// Ends the lease loops (their long polls are dropped mid-wait); the ack tasks then drain
    /// what is queued and exit when the channel closes.
    stop: CancellationToken,
    pollers: JoinSet<()>,
    ackers: JoinSet<()>,
}

#[derive(Deserialize)]
struct LeaseOut<'a> {
    #[serde(borrow)]
    messages: Vec<MessageOut<'a>>,
}

/// The fields of a leased message the bench uses; the others are skipped unparsed. Borrowed from
/// the response body unless a string holds escapes.
#[derive(Deserialize)]
struct MessageOut<'a> {
    #[serde(borrow)]
    delivery_id: Cow<'a, str>,
    #[serde(borrow)]
    due_at: Cow<'a, str>,
    #[serde(borrow)]
    receipt: Cow<'a, str>,
}

#[derive(Deserialize)]
struct AckOut {
    succeeded: Vec<IgnoredAny>,
    failed: Vec<IgnoredAny>,
}

impl Workers {
    /// Starts the lease loops and ack tasks; every message leased is recorded into `recorder`.
    pub fn start(api: &Api, options: &WorkerOptions, recorder: Recorder) -> Self {
        let workers = options.workers.max(1);
        let ctx = Arc::new(Ctx {
            nodes: api.per_node(),
            lease_path: format!("/v1/queues/{}/lease", options.queue),
            ack_path: format!("/v1/queues/{}/ack", options.queue),
            lease_body: Bytes::from(format!(
                "{{\"max\":{},\"wait_ms\":{LEASE_WAIT_MS},\"visibility_ms\":{VISIBILITY_MS}}}",
                options.lease_max
            )),
            recorder,
            counters: Counters::default(),
        });
        let stop = CancellationToken::new();
        // Per node, bounded: when acks fall behind, the lease loops wait instead of piling up
        // receipts.
        let channels: Vec<_> = (0..ctx.nodes.len())
            .map(|_| {
                let (tx, rx) = mpsc::channel::<AckBatch>(workers * 2);
                (tx, Arc::new(tokio::sync::Mutex::new(rx)))
            })
            .collect();
        let mut pollers = JoinSet::new();
        let mut ackers = JoinSet::new();
        for i in 0..workers {
            let node = i % ctx.nodes.len();
            let (tx, rx) = &channels[node];
            pollers.spawn(lease_loop(ctx.clone(), node, tx.clone(), stop.clone()));
            ackers.spawn(ack_loop(ctx.clone(), node, rx.clone()));
        }
        Self {
            ctx,
            options: (workers, options.lease_max),
            stop,
            pollers,
            ackers,
        }
    }

    /// The counts so far.
    pub fn stats(&self) -> WorkerStats {
        let c = &self.ctx.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        WorkerStats {
            workers: self.options.0,
            lease_max: self.options.1,
            leases: get(&c.leases),
            empty_leases: get(&c.empty_leases),
            leased: get(&c.leased),
            lease_errors: get(&c.lease_errors),
            ack_requests: get(&c.ack_requests),
            acked: get(&c.acked),
            acks_failed: get(&c.acks_failed),
            foreign: get(&c.foreign),
            first_error: c
                .first_error
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .clone(),
        }
    }

    /// Stops leasing, lets every queued ack go out, and returns the final counts.
    pub async fn stop(mut self) -> WorkerStats {
        self.stop.cancel();
        while self.pollers.join_next().await.is_some() {}
        while self.ackers.join_next().await.is_some() {}
        self.stats()
    }
}

async fn lease_loop(
    ctx: Arc<Ctx>,
    node: usize,
    acks: mpsc::Sender<AckBatch>,
    stop: CancellationToken,
) {
    let mut pause = Duration::from_millis(50);
    loop {
        let leased = tokio::select! {
            biased;
            _ = stop.cancelled() => return,
            leased = lease_once(&ctx, node) => leased,
        };
        match leased {
            Ok(Some(batch)) => {
                pause = Duration::from_millis(50);
                if acks.send(batch).await.is_err() {
                    return;
                }
            }
            Ok(None) => pause = Duration::from_millis(50),
            Err(e) => {
                ctx.counters.lease_errors.fetch_add(1, Ordering::Relaxed);
                ctx.counters.error(&e.context("lease"));
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(pause) => {}
                }
                pause = (pause * 2).min(Duration::from_secs(1));
            }
        }
    }
}

/// One lease request. Records what it got and returns the receipts to ack (`None`: nothing due
/// before the wait ran out).
async fn lease_once(ctx: &Ctx, node: usize) -> anyhow::Result<Option<AckBatch>> {
    let response = ctx.nodes[node]
        .request(reqwest::Method::POST, &ctx.lease_path)
        .header("content-type", "application/json")
        .body(ctx.lease_body.clone())
        .send()
        .await?;
    let status = response.status();
    if !status.is_success() {
        let text = response.text().await.unwrap_or_default();
        bail!("HTTP {status}: {text}");
    }
    let bytes = response.bytes().await?;
    // The instant the messages reached the worker: lateness is measured to here.
    let received_ms = now_ms();
    let out: LeaseOut<'_> = serde_json::from_slice(&bytes).context("unexpected lease answer")?;
    let counters = &ctx.counters;
    counters.leases.fetch_add(1, Ordering::Relaxed);
    if out.messages.is_empty() {
        counters.empty_leases.fetch_add(1, Ordering::Relaxed);
        return Ok(None);
    }
    counters
        .leased
        .fetch_add(out.messages.len() as u64, Ordering::Relaxed);
    let (batch, receipts) = read_messages(&out.messages, received_ms);
    let foreign = out.messages.len() - receipts.len();
    if foreign > 0 {
        counters
            .foreign
            .fetch_add(foreign as u64, Ordering::Relaxed);
    }
    ctx.recorder.extend(receipts);
    Ok(Some(batch))
}

/// The receipts to ack and the deliveries to record for one lease answer. Messages without an
/// Hourglass delivery id are acked but not recorded.
fn read_messages(messages: &[MessageOut<'_>], received_ms: i64) -> (AckBatch, Vec<Receipt>) {
    let mut batch = AckBatch {
        receipts: String::with_capacity(messages.len() * 56),
        count: 0,
    };
    let mut receipts = Vec::with_capacity(messages.len());
    for m in messages {
        if batch.count > 0 {
            batch.receipts.push(',');
        }
        push_json_string(&mut batch.receipts, &m.receipt);
        batch.count += 1;
        let Some(id) = DeliveryKey::parse(m.delivery_id.as_bytes()) else {
            continue;
        };
        let due_header_ms = m
            .due_at
            .parse::<jiff::Timestamp>()
            .map_or(i64::MIN, |t| t.as_millisecond());
        receipts.push(Receipt {
            id,
            due_header_ms,
            received_ms,
        });
    }
    (batch, receipts)
}

/// Appends `text` as a JSON string. Receipts are plain ASCII (`<hex>.<digits>`), written as they
/// are; anything else goes through serde_json.
fn push_json_string(out: &mut String, text: &str) {
    if text
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-' || b == b'_')
    {
        out.push('"');
        out.push_str(text);
        out.push('"');
    } else {
        let _ = write!(
            out,
            "{}",
            serde_json::to_string(text).expect("strings encode")
        );
    }
}

/// Takes receipt batches off the shared channel, merges what is already queued (up to
/// [`MAX_ACK`] receipts), and acks them, until the channel closes and is empty.
async fn ack_loop(
    ctx: Arc<Ctx>,
    node: usize,
    rx: Arc<tokio::sync::Mutex<mpsc::Receiver<AckBatch>>>,
) {
    // A batch taken off the channel that did not fit into the previous request.
    let mut carry: Option<AckBatch> = None;
    loop {
        let batch = {
            let mut rx = rx.lock().await;
            let first = match carry.take() {
                Some(b) => b,
                None => match rx.recv().await {
                    Some(b) => b,
                    None => return,
                },
            };
            let mut batch = first;
            while batch.count < MAX_ACK {
                match rx.try_recv() {
                    Ok(next) if batch.count + next.count <= MAX_ACK => batch.merge(next),
                    Ok(next) => {
                        carry = Some(next);
                        break;
                    }
                    Err(_) => break,
                }
            }
            batch
        };
        ack(&ctx, node, &batch).await;
    }
}

async fn ack(ctx: &Ctx, node: usize, batch: &AckBatch) {
    let counters = &ctx.counters;
    let mut body = String::with_capacity(batch.receipts.len() + 16);
    body.push_str("{\"receipts\":[");
    body.push_str(&batch.receipts);
    body.push_str("]}");
    let body = Bytes::from(body);
    let mut last_error = None;
    for attempt in 1..=ACK_ATTEMPTS {
        counters.ack_requests.fetch_add(1, Ordering::Relaxed);
        match ack_once(ctx, node, body.clone()).await {
            Ok(out) => {
                counters
                    .acked
                    .fetch_add(out.succeeded.len() as u64, Ordering::Relaxed);
                let failed = out.failed.len();
                if failed > 0 {
                    counters
                        .acks_failed
                        .fetch_add(failed as u64, Ordering::Relaxed);
                    counters.error(&anyhow::anyhow!(
                        "ack: {failed} of {} receipts failed",
                        batch.count
                    ));
                }
                return;
            }
            Err(e) => last_error = Some(e),
        }
        if attempt < ACK_ATTEMPTS {
            tokio::time::sleep(Duration::from_millis(100 << attempt)).await;
        }
    }
    counters
        .acks_failed
        .fetch_add(batch.count as u64, Ordering::Relaxed);
    if let Some(e) = last_error {
        counters.error(&e.context("ack"));
    }
}

async fn ack_once(ctx: &Ctx, node: usize, body: Bytes) -> anyhow::Result<AckOut> {
    let response = ctx.nodes[node]
        .request(reqwest::Method::POST, &ctx.ack_path)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await?;
    let status = response.status();
    if !status.is_success() {
        let text = response.text().await.unwrap_or_default();
        bail!("HTTP {status}: {text}");
    }
    let bytes = response.bytes().await?;
    serde_json::from_slice(&bytes).context("unexpected ack answer")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lease answer as the node writes it: every message becomes a receipt to ack, and those
    /// with an Hourglass delivery id a recorded delivery (due from `due_at`, received when the
    /// answer arrived).
    #[test]
    fn lease_answers_become_receipts_and_acks() {
        let body = r#"{"messages":[
            {"job_id":"0190abcd-0000-7000-8000-000000000001","type":null,"payload":{"a":[1,2]},
             "delivery_id":"0190abcd000070008000000000000001_1700000000123","attempt":1,
             "max_attempts":10,"due_at":"2023-11-14T22:13:20.123Z",
             "visible_until":"2023-11-14T22:14:20.200Z",
             "receipt":"0190abcd000070008000000000000001.7"},
            {"job_id":"x","type":"t","payload":null,"delivery_id":"not-ours","attempt":2,
             "max_attempts":10,"due_at":"garbage","visible_until":"","receipt":"odd\"one"}
        ]}"#;
        let out: LeaseOut<'_> = serde_json::from_str(body).unwrap();
        let (batch, receipts) = read_messages(&out.messages, 1_700_000_000_130);
        assert_eq!(batch.count, 2);
        assert_eq!(
            batch.receipts,
            r#""0190abcd000070008000000000000001.7","odd\"one""#
        );
        assert_eq!(
            receipts,
            vec![Receipt {
                id: DeliveryKey::new(0x0190_abcd_0000_7000_8000_0000_0000_0001, 1_700_000_000_123),
                due_header_ms: 1_700_000_000_123,
                received_ms: 1_700_000_000_130,
            }]
        );
        let ack = format!("{{\"receipts\":[{}]}}", batch.receipts);
        let parsed: serde_json::Value = serde_json::from_str(&ack).unwrap();
        assert_eq!(parsed["receipts"][1], "odd\"one");
    }

    /// A message whose lease lapsed comes back under the same delivery id: the accounting counts
    /// the second lease as a duplicate and takes lateness from the first.
    #[test]
    fn a_message_leased_twice_is_one_fire_and_a_duplicate() {
        let message = |receipt: &str| {
            format!(
                r#"{{"messages":[{{"delivery_id":"0000000000000000000000000000000a_1000",
                    "due_at":"1970-01-01T00:00:01Z","receipt":"{receipt}"}}]}}"#
            )
        };
        let (first, second) = (message("a.1"), message("a.2"));
        let first: LeaseOut<'_> = serde_json::from_str(&first).unwrap();
        let second: LeaseOut<'_> = serde_json::from_str(&second).unwrap();
        let mut receipts = read_messages(&first.messages, 1_004).1;
        receipts.extend(read_messages(&second.messages, 61_010).1);
        let key = DeliveryKey::new(0xa, 1000);
        let expected = std::collections::HashMap::from([(key, 1000)]);
        let acc = super::super::accounting::account(&expected, &receipts);
        assert_eq!((acc.executed, acc.duplicates, acc.early), (1, 1, 0));
        assert_eq!(acc.due_mismatch, 0);
        assert_eq!(acc.lateness.unwrap().max, 4);
    }

    #[test]
    fn ack_batches_merge_into_one_array() {
        let batch = |receipts: &str, count| AckBatch {
            receipts: receipts.to_string(),
            count,
        };
        let mut a = batch("\"a\"", 1);
        a.merge(batch("\"b\",\"c\"", 2));
        a.merge(batch("", 0));
        assert_eq!((a.receipts.as_str(), a.count), ("\"a\",\"b\",\"c\"", 3));
        let mut empty = batch("", 0);
        empty.merge(batch("\"d\"", 1));
        assert_eq!(empty.receipts, "\"d\"");
    }

    #[test]
    fn ack_answers_count_failures() {
        let out: AckOut = serde_json::from_str(
            r#"{"succeeded":["a","b"],"failed":[{"receipt":"c","code":"stale_receipt","message":"…"}]}"#,
        )
        .unwrap();
        assert_eq!((out.succeeded.len(), out.failed.len()), (2, 1));
        let stats = WorkerStats {
            leases: 10,
            empty_leases: 2,
            leased: 400,
            ..WorkerStats::default()
        };
        assert_eq!(stats.mean_batch(), Some(50.0));
        assert_eq!(WorkerStats::default().mean_batch(), None);
    }
}
