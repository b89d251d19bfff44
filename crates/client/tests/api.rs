//! The typed client against a real node: jobs, queue lease/ack/nack/extend with their per-receipt
//! results and errors, queue counts and messages, and a dead letter made by nacking the last
//! attempt.

mod common;

use std::time::Duration;

use hourglass_client::api::{QueueMessagesQuery, TargetOut};
use hourglass_client::{
    JobFilter, JobState, LeaseOptions, MessageStatus, NewJob, Receipt, Retry, RunOutcome, Schedule,
    Target,
};
use serde_json::json;

fn now_due() -> Schedule {
    Schedule::at(jiff::Timestamp::now())
}

/// Leases from `queue`, long-polling until at least `n` messages arrived in total.
async fn lease_n(
    client: &hourglass_client::Client,
    queue: &str,
    n: usize,
) -> Vec<hourglass_client::Message> {
    let mut got = Vec::new();
    for _ in 0..10 {
        let options = LeaseOptions {
            max: (n - got.len()) as u32,
            wait: Duration::from_secs(5),
            ..LeaseOptions::default()
        };
        got.extend(client.lease(queue, &options).await.unwrap());
        if got.len() >= n {
            return got;
        }
    }
    panic!("only {} of {n} messages arrived", got.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_round_trip_through_the_typed_client() {
    let t = common::start_node().await;
    let client = &t.client;
    let created = client
        .create_job(
            &NewJob::new(
                Schedule::every(Duration::from_secs(3600)),
                Target::queue("reports"),
            )
            .job_type("report.build")
            .key("nightly")
            .payload(json!({"report_id": 7})),
        )
        .await
        .unwrap();
    assert_eq!(created.state, JobState::Active);
    assert_eq!(created.target, TargetOut::Queue("reports".into()));
    assert_eq!(created.payload_value(), json!({"report_id": 7}));
    assert!(created.next_due_at.is_some());

    assert_eq!(client.get_job(created.id).await.unwrap().id, created.id);
    assert_eq!(
        client.pause_job(created.id).await.unwrap().state,
        JobState::Paused
    );
    assert_eq!(
        client.resume_job(created.id).await.unwrap().state,
        JobState::Active
    );
    let page = client
        .list_jobs(&JobFilter {
            job_type: Some("report.build".into()),
            ..JobFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(page.jobs.len(), 1);
    assert_eq!(
        client.cancel_job(created.id).await.unwrap().state,
        JobState::Cancelled
    );

    let missing = client.get_job(uuid::Uuid::nil()).await.unwrap_err();
    assert!(missing.is_not_found(), "{missing}");
    let invalid = client
        .create_job(&NewJob::new(
            Schedule::cron("not cron"),
            Target::queue("reports"),
        ))
        .await
        .unwrap_err();
    assert_eq!(invalid.status(), Some(422));
    assert_eq!(invalid.code(), Some("invalid_cron"));
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_ack_nack_extend_and_counts() {
    let t = common::start_node().await;
    let client = &t.client;
    for i in 0..3 {
        client
            .create_job(
                &NewJob::new(now_due(), Target::queue("emails"))
                    .job_type("email.send")
                    .payload(json!({ "n": i })),
            )
            .await
            .unwrap();
    }
    let messages = lease_n(client, "emails", 3).await;
    let receipts: Vec<Receipt> = messages.iter().map(|m| m.receipt.clone()).collect();
    assert!(messages.iter().all(|m| m.attempt == 1));
    let stats = client.queue_stats("emails").await.unwrap();
    assert_eq!((stats.available, stats.in_flight), (0, 3));
    let queues = client.list_queues().await.unwrap();
    let listed = queues.iter().find(|q| q.name == "emails").expect("listed");
    assert_eq!(listed.in_flight, 3);

    let extended = client
        .extend("emails", &receipts[..1], Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(extended.succeeded, receipts[..1]);
    assert!(extended.visible_until.is_some());

    let acked = client.ack("emails", &receipts[..2]).await.unwrap();
    assert_eq!(acked.succeeded, receipts[..2]);
    // An acked receipt is no longer current: acking it again is refused as stale, per receipt.
    let again = client.ack("emails", &receipts[..1]).await.unwrap();
    assert!(again.succeeded.is_empty());
    assert!(again.failed[0].is_stale_receipt(), "{again:?}");

    // A nack with a delay brings the message back as a second attempt.
    let nacked = client
        .nack("emails", &receipts[2..], Some(Duration::ZERO))
        .await
        .unwrap();
    assert_eq!(nacked.succeeded, receipts[2..]);
    let redelivered = lease_n(client, "emails", 1).await;
    assert_eq!(redelivered[0].job_id, messages[2].job_id);
    assert_eq!(redelivered[0].attempt, 2);
    client
        .ack("emails", &[redelivered[0].receipt.clone()])
        .await
        .unwrap();

    let malformed = client
        .ack("emails", &[Receipt::from("not-a-receipt")])
        .await
        .unwrap_err();
    assert_eq!(malformed.field(), Some("receipts[0]"), "{malformed}");
    assert!(!malformed.is_retryable());

    let emails = client.queue_stats("emails").await.unwrap();
    assert_eq!((emails.available, emails.in_flight), (0, 0));
    let unknown = client.queue_stats("nobody-uses-this").await.unwrap();
    assert_eq!(
        (unknown.available, unknown.in_flight, unknown.scheduled),
        (0, 0, 0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nacking_the_last_attempt_makes_a_dead_letter() {
    let t = common::start_node().await;
    let client = &t.client;
    let job = client
        .create_job(
            &NewJob::new(now_due(), Target::queue("fragile"))
                .job_type("x")
                .retry(Retry {
                    max_attempts: Some(1),
                    ..Retry::default()
                }),
        )
        .await
        .unwrap();
    let message = lease_n(client, "fragile", 1).await.remove(0);
    assert_eq!((message.attempt, message.max_attempts), (1, 1));
    client
        .nack("fragile", std::slice::from_ref(&message.receipt), None)
        .await
        .unwrap();

    // The attempt is in the job's history as the contract's outcome, with the leased delivery id.
    let runs = client.job_runs(job.id, None, None).await.unwrap();
    assert_eq!(runs.runs.len(), 1);
    assert_eq!(runs.runs[0].outcome, RunOutcome::DeadLetter);
    assert_eq!(runs.runs[0].delivery_id, message.delivery_id);
    assert_eq!(runs.next_cursor, None);

    let letters = client.list_dead_letters(None, None).await.unwrap();
    let letter = letters
        .dead_letters
        .iter()
        .find(|d| d.job_id == job.id)
        .expect("a dead letter for the job");
    assert_eq!(letter.target, TargetOut::Queue("fragile".into()));
    assert_eq!(letter.job_type.as_deref(), Some("x"));
    assert_eq!(
        client.get_dead_letter(&letter.id).await.unwrap().id,
        letter.id
    );
    let replayed = client.replay_dead_letter(&letter.id).await.unwrap();
    assert_ne!(replayed.id, job.id);
    assert!(
        client
            .get_dead_letter(&letter.id)
            .await
            .unwrap_err()
            .is_not_found()
    );
}

/// A queue's messages: the leased one with its lease's expiry, a nacked one with its error, a
/// page at a time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_lists_its_messages() {
    let t = common::start_node().await;
    let client = &t.client;
    for key in ["m1", "m2"] {
        client
            .create_job(
                &NewJob::new(now_due(), Target::queue("emails"))
                    .job_type("email.send")
                    .key(key),
            )
            .await
            .unwrap();
    }
    let held = lease_n(client, "emails", 1).await.remove(0);
    let page = client
        .queue_messages("emails", &QueueMessagesQuery::default())
        .await
        .unwrap();
    assert_eq!(page.messages.len(), 2);
    assert_eq!(page.next_cursor, None);
    let leased = page
        .messages
        .iter()
        .find(|m| m.job_id == held.job_id)
        .expect("listed");
    assert_eq!(leased.status, MessageStatus::Leased);
    assert_eq!(leased.leased_until, Some(held.visible_until));
    assert_eq!(leased.delivery_id, held.delivery_id);
    let waiting = page
        .messages
        .iter()
        .find(|m| m.job_id != held.job_id)
        .expect("listed");
    assert_eq!(waiting.status, MessageStatus::Available);
    assert_eq!(waiting.leased_until, None);

    client
        .nack("emails", &[held.receipt], Some(Duration::from_secs(600)))
        .await
        .unwrap();
    let first = client
        .queue_messages(
            "emails",
            &QueueMessagesQuery {
                limit: Some(1),
                ..QueueMessagesQuery::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(first.messages.len(), 1);
    let cursor = first.next_cursor.expect("a full page has a cursor");
    let second = client
        .queue_messages(
            "emails",
            &QueueMessagesQuery {
                limit: Some(1),
                cursor: Some(cursor),
                payload: Some(true),
            },
        )
        .await
        .unwrap();
    let nacked = first
        .messages
        .iter()
        .chain(&second.messages)
        .find(|m| m.job_id == held.job_id)
        .expect("listed");
    assert_eq!(nacked.status, MessageStatus::Scheduled);
    assert_eq!(nacked.failed_attempts, 1);
    assert_eq!(nacked.last_error.as_deref(), Some("nacked by the worker"));
    assert_eq!(
        client.get_job(held.job_id).await.unwrap().last_error,
        nacked.last_error,
        "the job carries the same error"
    );

    let bad = client
        .queue_messages("no spaces", &QueueMessagesQuery::default())
        .await
        .unwrap_err();
    assert_eq!(
        (bad.status(), bad.field()),
        (Some(400), Some("name")),
        "{bad}"
    );
    t.stop().await;
}

/// The namespace's signing secret, read without rotating it: the same at every read, and what
/// `POST /v1/signing-secret` rotated it to afterwards. Its `Debug` does not show it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_signing_secret_is_read_without_rotating_it() {
    let t = common::start_node().await;
    let first = t.client.signing_secret().await.unwrap();
    assert_eq!(first.namespace, "default");
    assert!(first.signing_secret.starts_with("whsec_"));
    assert_eq!(first.previous_valid_until, None);
    assert!(!format!("{first:?}").contains(&first.signing_secret));
    assert_eq!(t.client.signing_secret().await.unwrap(), first);
    // The node itself, as its heartbeat said (no keys: development mode takes any request).
    let nodes = t.client.list_nodes().await.unwrap();
    assert_eq!(nodes.len(), 1);
    assert_eq!(nodes[0].version, env!("CARGO_PKG_VERSION"));
    // The dashboard's figures: nothing delivered yet on this fresh node, no job stored.
    let summary = t.client.summary().await.unwrap();
    assert_eq!(summary.node.deliveries.get("delivered"), Some(&0));
    assert_eq!(summary.node.fire_lateness.count, 0);
    assert!(summary.store.jobs.values().all(|n| *n == 0), "{summary:?}");

    let rotated = t
        .client
        .rotate_signing_secret(Some(Duration::from_secs(3600)))
        .await
        .unwrap();
    let now = t.client.signing_secret().await.unwrap();
    assert_eq!(now.signing_secret, rotated.signing_secret);
    assert_ne!(now.signing_secret, first.signing_secret);
    assert!(now.previous_valid_until.is_some());
    t.stop().await;
}

/// Labels through the typed client: set on create, selected by a listing, and a bulk action by
/// selector answering how many jobs it changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labels_select_jobs_for_listings_and_bulk_actions() {
    let t = common::start_node().await;
    let client = &t.client;
    let job = |tenant: &str| {
        NewJob::new(
            Schedule::every(Duration::from_secs(3600)),
            Target::queue("labelled"),
        )
        .label("tenant", tenant)
        .label("kind", "reminder")
    };
    let acme = client.create_job(&job("acme")).await.unwrap();
    client.create_job(&job("globex")).await.unwrap();
    assert_eq!(acme.labels.get("tenant").map(String::as_str), Some("acme"));
    let filter = JobFilter {
        labels: vec!["tenant=acme".into(), "kind".into()],
        ..JobFilter::default()
    };
    let page = client.list_jobs(&filter).await.unwrap();
    let ids: Vec<_> = page.jobs.iter().map(|j| j.id).collect();
    assert_eq!(ids, [acme.id]);
    let changed = client
        .bulk_jobs(
            hourglass_client::BulkAction::Pause,
            &["kind=reminder".into()],
            None,
            None,
        )
        .await
        .unwrap();
    assert_eq!((changed.changed, changed.more), (2, false));
    let paused = client.get_job(acme.id).await.unwrap();
    assert_eq!(paused.state, JobState::Paused);
}
