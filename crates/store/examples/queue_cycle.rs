//! The store's side of a pull queue, without HTTP: create one-off queue messages, then lease them
//! in batches and ack each batch, the way a node serves workers. Prints the time each phase took
//! per message, so a change to the store's queue path can be measured on its own:
//!
//! ```sh
//! cargo run --release -p hourglass-store --example queue_cycle -- 200000 1000
//! ```
//!
//! The arguments are the number of messages (default 200,000) and the lease batch (default
//! 1,000), then which phases run (`all`, `lease`, `none`), then the target: `queue` (default), or
//! `webhook` for the fired path (one-off webhook jobs claimed as the engine claims them and
//! completed as delivered; nothing is sent), then the payload's size in bytes (default: a
//! dozen; larger ones are padded with one string). Each phase runs its requests one after another, so the figures are the single writer's
//! cost without group commit across callers; under `valgrind --tool=callgrind` they become
//! instruction counts that do not depend on what else the machine is doing.

#![allow(
    clippy::disallowed_methods,
    reason = "a measuring tool: its jobs are due by the wall clock"
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use hourglass_core::{
    Action, AttemptRecord, Completion, JobSpec, QueueTarget, Schedule, Target, WebhookTarget,
};
use hourglass_store::{Applied, ClaimScope, Lease, NewJob, SqliteStore, Store};
use jiff::Timestamp;

const NAMESPACE: &str = "default";
const QUEUE: &str = "bench";

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map_or(Ok(200_000), |a| a.parse())?;
    let batch: usize = args.next().map_or(Ok(1_000), |a| a.parse())?;
    // Which phases run after the creates: "lease" leases without acking, "none" stops there
    // (under callgrind, subtracting runs isolates one phase).
    let phases = args.next().unwrap_or_else(|| "all".into());
    let webhook = match args.next().as_deref() {
        None | Some("queue") => false,
        Some("webhook") => true,
        Some(other) => anyhow::bail!("target {other:?}: queue or webhook"),
    };
    let pad: usize = args.next().map_or(Ok(0), |a| a.parse())?;
    let pad = "x".repeat(pad.saturating_sub(r#"{"n":0,"pad":""}"#.len()));
    let dir = tempfile::tempdir()?;
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir.path())?);

    let now = Timestamp::now();
    let started = Instant::now();
    for chunk in (0..n).collect::<Vec<_>>().chunks(batch) {
        let jobs = chunk
            .iter()
            .map(|&i| message(i, now, webhook, &pad))
            .collect();
        store.create_jobs(jobs, None).await?;
    }
    let created = started.elapsed();
    if phases == "none" {
        println!(
            "create  {:>6.2} µs a message",
            created.as_secs_f64() * 1e6 / n as f64
        );
        return Ok(());
    }

    let lease = Lease {
        owner: "queue-cycle".into(),
        ttl: Duration::from_secs(60),
        now: Timestamp::now(),
    };
    let scope = if webhook {
        ClaimScope::Fired
    } else {
        ClaimScope::Queue {
            namespace: NAMESPACE,
            queue: QUEUE,
            types: None,
            max_bytes: None,
        }
    };
    let (mut claiming, mut acking) = (Duration::ZERO, Duration::ZERO);
    let mut moved = 0;
    loop {
        let t = Instant::now();
        let claimed = store.claim_due(scope, lease.now, batch, &lease).await?;
        claiming += t.elapsed();
        if claimed.is_empty() {
            break;
        }
        moved += claimed.len();
        if phases == "lease" {
            continue;
        }
        let acks = claimed
            .iter()
            .map(|occ| Completion {
                job_id: occ.job_id,
                token: occ.token,
                due: occ.due,
                attempt: Some(AttemptRecord {
                    attempt: occ.attempt,
                    started_at: lease.now,
                    latency_ms: 1,
                    status: None,
                    error: None,
                    response: None,
                }),
                action: Action::Delivered {
                    next: None,
                    skipped: 0,
                },
                callback: None,
                origin: None,
            })
            .collect();
        let t = Instant::now();
        let applied = store.complete(acks, lease.now).await?;
        acking += t.elapsed();
        anyhow::ensure!(
            applied.iter().all(|a| *a == Applied::Yes),
            "an ack was refused"
        );
    }
    anyhow::ensure!(moved == n, "leased {moved} of {n} messages");

    let per = |d: Duration| d.as_secs_f64() * 1e6 / n as f64;
    println!("messages {n}, batch {batch}");
    println!("create  {:>6.2} µs a message", per(created));
    println!("lease   {:>6.2} µs a message", per(claiming));
    println!("ack     {:>6.2} µs a message", per(acking));
    println!(
        "lease + ack: {:.0} messages/s",
        n as f64 / (claiming + acking).as_secs_f64()
    );
    Ok(())
}

/// One message as `hourglass-bench` creates it (`--target queue`, or a webhook): a one-off, due
/// already. A `pad` makes its payload that much larger.
fn message(i: usize, now: Timestamp, webhook: bool, pad: &str) -> NewJob {
    let due = now - Duration::from_millis(1);
    NewJob {
        id: uuid::Uuid::now_v7(),
        namespace: NAMESPACE.into(),
        key: None,
        spec: JobSpec {
            job_type: Some("bench".into()),
            schedule: Schedule::at(due),
            target: if webhook {
                Target::Webhook(WebhookTarget {
                    url: "http://127.0.0.1:9/hook".parse().expect("a valid URL"),
                    headers: Default::default(),
                    rate_limit: None,
                    batch: None,
                })
            } else {
                Target::Queue(QueueTarget { name: QUEUE.into() })
            },
            retry: Default::default(),
            misfire: Default::default(),
            overlap: Default::default(),
            backfill: None,
            labels: Default::default(),
            on_failure: None,
            on_success: None,
            callback_of: None,
            callback_key: None,
            occurrence_of: None,
        },
        payload: Some(if pad.is_empty() {
            format!(r#"{{"n":{i}}}"#)
        } else {
            format!(r#"{{"n":{i},"pad":"{pad}"}}"#)
        }),
        fingerprint: i as i64,
        first_due: due,
        now,
    }
}
