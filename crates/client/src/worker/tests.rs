//! The worker runtime against the in-memory fake queue server: outcomes, lease extension, the
//! concurrency bound, shutdown, and riding out an unavailable node. Tests wait on recorded
//! events, never on elapsed time.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::fake_server::FakeServer;
use super::*;

#[derive(Debug, Deserialize)]
struct Greeting {
    name: String,
}

struct Running {
    stop: CancellationToken,
    worker: JoinHandle<Result<(), Error>>,
}

impl Running {
    async fn start(
        fake: &FakeServer,
        configure: impl FnOnce(WorkerBuilder) -> WorkerBuilder,
    ) -> Self {
        let client = Client::new(fake.url()).unwrap();
        let builder = Worker::builder(client, "q")
            .poll_wait(Duration::from_millis(200))
            .shutdown_grace(Duration::from_secs(5));
        let worker = configure(builder).build().unwrap();
        let stop = CancellationToken::new();
        let token = stop.clone();
        let worker = tokio::spawn(async move { worker.run(token.cancelled_owned()).await });
        Running { stop, worker }
    }

    /// Requests shutdown and waits (at most 10 s) for the worker to return.
    async fn stop(self) -> Result<(), Error> {
        self.stop.cancel();
        tokio::time::timeout(Duration::from_secs(10), self.worker)
            .await
            .expect("the worker stops within its grace periods")
            .expect("the worker task does not panic")
    }
}

fn set(items: &[String]) -> BTreeSet<String> {
    items.iter().cloned().collect()
}

#[tokio::test]
async fn acks_each_message_its_handler_finished() {
    let fake = FakeServer::start().await;
    let receipts: Vec<String> = ["ada", "grace", "edsger"]
        .iter()
        .map(|name| fake.push(Some("greet"), json!({ "name": name })))
        .collect();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let running = Running::start(&fake, |b| {
        let seen = seen.clone();
        b.handle("greet", move |job: Job<Greeting>| {
            let seen = seen.clone();
            async move {
                seen.lock().unwrap().push(job.payload.name);
                Ok(())
            }
        })
    })
    .await;

    fake.wait_for("three acks", |s| s.acked.len() == 3).await;
    running.stop().await.unwrap();

    fake.read(|s| {
        assert_eq!(set(&s.acked), set(&receipts));
        assert!(s.nacked.is_empty(), "nacked: {:?}", s.nacked);
        // Without a fallback the lease names the handled types.
        assert!(s.leases.iter().all(|l| l["types"] == json!(["greet"])));
    });
    let mut seen = seen.lock().unwrap().clone();
    seen.sort();
    assert_eq!(seen, ["ada", "edsger", "grace"]);
}

#[tokio::test]
async fn nacks_on_error_on_undecodable_payload_and_on_panic() {
    let fake = FakeServer::start().await;
    let failing = fake.push(Some("fail"), json!({"name": "x"}));
    let undecodable = fake.push(Some("greet"), json!({"wrong": 1}));
    let panicking = fake.push(Some("panic"), Value::Null);
    let untyped_payload = fake.push(Some("greet"), Value::Null);
    let greeted = Arc::new(AtomicUsize::new(0));
    let running = Running::start(&fake, |b| {
        let greeted = greeted.clone();
        b.handle("fail", |_: Job<Value>| async {
            Err(HandlerError::new("smtp said no").retry_after(Duration::from_secs(7)))
        })
        .handle("greet", move |_: Job<Greeting>| {
            greeted.fetch_add(1, Ordering::SeqCst);
            async { Ok(()) }
        })
        .handle("panic", |_: Job<Value>| async {
            if true {
                panic!("handler bug");
            }
            Ok(())
        })
    })
    .await;

    fake.wait_for("four nacks", |s| s.nacked.len() == 4).await;
    running.stop().await.unwrap();

    fake.read(|s| {
        assert!(s.acked.is_empty(), "acked: {:?}", s.acked);
        let nacked: BTreeSet<_> = s.nacked.iter().cloned().collect();
        let expected: BTreeSet<_> = [
            (failing, Some(7000)),
            (undecodable, None),
            (panicking, None),
            (untyped_payload, None),
        ]
        .into_iter()
        .collect();
        assert_eq!(nacked, expected);
    });
    assert_eq!(
        greeted.load(Ordering::SeqCst),
        0,
        "a payload that does not decode never reaches the handler"
    );
}

#[tokio::test]
async fn extends_the_lease_of_a_long_handler() {
    let fake = FakeServer::start().await;
    let receipt = fake.push(Some("slow"), Value::Null);
    let release = Arc::new(Notify::new());
    let running = Running::start(&fake, |b| {
        let release = release.clone();
        b.visibility(Duration::from_millis(400))
            .handle("slow", move |_: Job<Value>| {
                let release = release.clone();
                async move {
                    release.notified().await;
                    Ok(())
                }
            })
    })
    .await;

    // The handler only finishes once the lease was extended twice, so a worker that never
    // extends fails here (by timing out) rather than passing by luck.
    fake.wait_for("two extensions", |s| s.extended.len() >= 2)
        .await;
    fake.read(|s| {
        assert!(s.acked.is_empty(), "acked before the handler finished");
        for (r, visibility_ms) in &s.extended {
            assert_eq!((r, *visibility_ms), (&receipt, 400));
        }
    });
    release.notify_one();
    fake.wait_for("the ack", |s| s.acked.len() == 1).await;
    running.stop().await.unwrap();
    fake.read(|s| assert_eq!(s.acked, [receipt]));
}

#[tokio::test]
async fn never_runs_more_handlers_than_its_concurrency() {
    let fake = FakeServer::start().await;
    let receipts: Vec<String> = (0..10).map(|i| fake.push(Some("work"), json!(i))).collect();
    let running_now = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let (open_tx, open_rx) = tokio::sync::watch::channel(false);
    let started = Arc::new(Semaphore::new(0));
    let running = Running::start(&fake, |b| {
        let (running_now, most, started) = (running_now.clone(), most.clone(), started.clone());
        b.concurrency(3).handle("work", move |_: Job<u32>| {
            let (running_now, most) = (running_now.clone(), most.clone());
            let started = started.clone();
            let mut open = open_rx.clone();
            async move {
                let now = running_now.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                started.add_permits(1);
                open.wait_for(|open| *open).await.expect("gate kept");
                running_now.fetch_sub(1, Ordering::SeqCst);
                Ok(())
            }
        })
    })
    .await;

    // Fill every slot first, so the bound is actually tested.
    let _three = started.acquire_many(3).await.unwrap();
    open_tx.send(true).unwrap();
    fake.wait_for("ten acks", |s| s.acked.len() == 10).await;
    running.stop().await.unwrap();

    assert_eq!(most.load(Ordering::SeqCst), 3);
    fake.read(|s| {
        assert_eq!(set(&s.acked), set(&receipts));
        assert!(
            s.max_in_flight <= 3,
            "{} messages leased at once with concurrency 3",
            s.max_in_flight
        );
        for lease in &s.leases {
            let max = lease["max"].as_u64().unwrap();
            assert!((1..=3).contains(&max), "lease asked for {max}");
        }
    });
}

#[tokio::test]
async fn shutdown_lets_running_handlers_finish_and_acks_them() {
    let fake = FakeServer::start().await;
    let receipts = [
        fake.push(Some("drain"), Value::Null),
        fake.push(Some("drain"), Value::Null),
    ];
    let started = Arc::new(Semaphore::new(0));
    let stop_seen = CancellationToken::new();
    let running = Running::start(&fake, |b| {
        let (started, stop_seen) = (started.clone(), stop_seen.clone());
        b.handle("drain", move |_: Job<Value>| {
            let (started, stop_seen) = (started.clone(), stop_seen.clone());
            async move {
                started.add_permits(1);
                // Finish only after shutdown was requested.
                stop_seen.cancelled().await;
                Ok(())
            }
        })
    })
    .await;

    // Both handlers run before shutdown is requested. (Waiting on the fake's record instead
    // would race: a lease answer still on the wire when shutdown comes is dropped.)
    let _both = started.acquire_many(2).await.unwrap();
    let stop = running.stop.clone();
    let stopper = tokio::spawn(running.stop());
    // The worker has been told to stop before the handlers are allowed to finish.
    stop.cancelled().await;
    stop_seen.cancel();
    stopper.await.unwrap().unwrap();

    fake.read(|s| {
        assert_eq!(set(&s.acked), set(&receipts));
        assert!(s.nacked.is_empty());
    });
}

#[tokio::test]
async fn shutdown_nacks_handlers_still_running_at_the_deadline() {
    let fake = FakeServer::start().await;
    let receipt = fake.push(Some("stuck"), Value::Null);
    let started = Arc::new(Semaphore::new(0));
    let running = Running::start(&fake, |b| {
        let started = started.clone();
        b.shutdown_grace(Duration::from_millis(200))
            .handle("stuck", move |_: Job<Value>| {
                started.add_permits(1);
                std::future::pending()
            })
    })
    .await;

    let _started = started.acquire().await.unwrap();
    running.stop().await.unwrap();

    fake.read(|s| {
        assert_eq!(s.nacked, [(receipt, Some(0))]);
        assert!(s.acked.is_empty());
    });
}

#[tokio::test]
async fn rides_out_an_unavailable_node_without_losing_outcomes() {
    let fake = FakeServer::start().await;
    fake.change(|s| {
        s.fail_leases = 2;
        s.fail_acks = 2;
    });
    let receipt = fake.push(Some("work"), Value::Null);
    let running = Running::start(&fake, |b| {
        b.handle("work", |_: Job<Value>| async { Ok(()) })
    })
    .await;

    fake.wait_for("the ack", |s| s.acked.len() == 1).await;
    running.stop().await.unwrap();

    fake.read(|s| {
        assert_eq!(s.acked, [receipt]);
        assert!(s.leases.len() >= 3, "the two 503s were retried");
        assert_eq!(
            s.ack_requests, 3,
            "two refused acks, then the one that held"
        );
    });
}

#[tokio::test]
async fn a_fallback_takes_other_types_and_widens_the_lease() {
    let fake = FakeServer::start().await;
    fake.push(Some("known"), Value::Null);
    fake.push(Some("other"), json!({"a": 1}));
    fake.push(None, json!("untyped"));
    let fell_back = Arc::new(Mutex::new(Vec::new()));
    let running = Running::start(&fake, |b| {
        let fell_back = fell_back.clone();
        b.handle("known", |_: Job<Value>| async { Ok(()) })
            .fallback(move |job: Job<Value>| {
                fell_back.lock().unwrap().push(job.payload);
                async { Ok(()) }
            })
    })
    .await;

    fake.wait_for("three acks", |s| s.acked.len() == 3).await;
    running.stop().await.unwrap();

    fake.read(|s| assert!(s.leases.iter().all(|l| l.get("types").is_none())));
    let mut fell_back = fell_back.lock().unwrap().clone();
    fell_back.sort_by_key(|v| v.to_string());
    assert_eq!(fell_back, [json!("untyped"), json!({"a": 1})]);
}

#[tokio::test]
async fn a_refused_lease_stops_the_worker_with_the_error() {
    let fake = FakeServer::start().await;
    fake.change(|s| s.refuse_leases = true);
    let running = Running::start(&fake, |b| b.handle("x", |_: Job<Value>| async { Ok(()) })).await;
    let result = tokio::time::timeout(Duration::from_secs(10), running.worker)
        .await
        .expect("the worker stops on its own")
        .unwrap();
    match result {
        Err(e) => assert_eq!((e.status(), e.code()), (Some(401), Some("unauthorized"))),
        Ok(()) => panic!("a refused lease must end the worker with an error"),
    }
}

#[test]
fn a_worker_needs_a_handler() {
    let client = Client::new("http://127.0.0.1:1").unwrap();
    assert!(matches!(
        Worker::builder(client, "q").build(),
        Err(Error::Config(_))
    ));
}
