//! The client's methods beside jobs' and queues' basics, against a real node: batch creates
//! (whole and minimal answers), edits, keyed triggers, keyed creates sent as the contract's
//! shapes, schedule previews, the signing secret's rotation, breakers, connections, the API
//! document, health and metrics.

mod common;

use std::time::Duration;

use hourglass_client::api::{
    CreateJob, JobListQuery, PatchJob, QueueMessagesQuery, RetryIn, ScheduleIn, TargetIn,
};
use hourglass_client::{JobRef, JobState, NewJob, Schedule, Target};
use serde_json::json;

fn in_an_hour(queue: &str) -> NewJob {
    NewJob::new(
        Schedule::after(Duration::from_secs(3600)),
        Target::queue(queue),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_edits_and_keyed_triggers() {
    let t = common::start_node().await;
    let client = &t.client;

    let jobs = [
        in_an_hour("a").key("batch-1"),
        in_an_hour("a").job_type("t"),
    ];
    let whole = client.create_jobs(&jobs).await.unwrap();
    assert_eq!(whole.created, 2);
    assert_eq!(whole.jobs.len(), 2);
    assert_eq!(whole.jobs[0].key.as_deref(), Some("batch-1"));
    assert_eq!(whole.jobs[0].created, Some(true));
    // The keyed job again, minimal: it exists already, so nothing is created.
    let brief = client
        .create_jobs_minimal([in_an_hour("a").key("batch-1")])
        .await
        .unwrap();
    assert_eq!(brief.created, 0);
    assert_eq!(brief.jobs[0].id, whole.jobs[0].id);
    assert!(!brief.jobs[0].created);

    // A keyed create is idempotent through the contract's shape as through the builder.
    let shaped: CreateJob = (&in_an_hour("a").key("batch-1")).into();
    assert_eq!(
        client.create_job(shaped).await.unwrap().id,
        whole.jobs[0].id
    );
    let mut changed: CreateJob = (&in_an_hour("b").key("batch-1")).into();
    changed.retry = Some(RetryIn {
        max_attempts: Some(2),
        ..RetryIn::default()
    });
    let conflict = client.create_job(changed).await.unwrap_err();
    assert_eq!(conflict.status(), Some(409), "{conflict}");

    let patch = PatchJob {
        job_type: Some("report.v2".into()),
        target: Some(TargetIn {
            queue: Some("b".into()),
            ..TargetIn::default()
        }),
        payload: Some(Some(json!({"v": 2}))),
        ..PatchJob::default()
    };
    let updated = client
        .update_job(JobRef::key("batch-1"), &patch)
        .await
        .unwrap();
    assert_eq!(updated.job_type.as_deref(), Some("report.v2"));
    assert_eq!(updated.payload_value(), json!({"v": 2}));
    let cleared = client
        .update_job(
            updated.id,
            &PatchJob {
                payload: Some(None),
                ..PatchJob::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(cleared.payload_value(), serde_json::Value::Null);

    let first = client
        .trigger_job(updated.id, Some("deploy-42"))
        .await
        .unwrap();
    let again = client
        .trigger_job(updated.id, Some("deploy-42"))
        .await
        .unwrap();
    assert!(first.delivery_id.is_some());
    assert_eq!(again.delivery_id, first.delivery_id, "the same trigger");
    let other = client.trigger_job(updated.id, None).await.unwrap();
    assert_ne!(other.delivery_id, first.delivery_id);
    // The triggered occurrence waits on the queue, its payload (none now) included on request.
    let page = client
        .queue_messages(
            "b",
            &QueueMessagesQuery {
                payload: Some(true),
                ..QueueMessagesQuery::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(page.messages.len(), 1, "{page:?}");
    assert_eq!(page.messages[0].job_id, updated.id);
    assert_eq!(
        page.messages[0].payload,
        Some(None),
        "asked for, and cleared"
    );

    // A state the node does not know is the node's to refuse, with the field named.
    let bad = client
        .list_jobs(JobListQuery {
            state: Some("sleeping".into()),
            ..JobListQuery::default()
        })
        .await
        .unwrap_err();
    assert_eq!(bad.field(), Some("state"), "{bad}");
    let active = client
        .list_jobs(JobListQuery {
            state: Some(JobState::Active.as_str().into()),
            ..JobListQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(active.jobs.len(), 2);
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn previews_secrets_and_the_nodes_state() {
    let t = common::start_node().await;
    let client = &t.client;

    let preview = client
        .preview_schedule(Schedule::cron("0 9 * * 1").timezone("UTC"), Some(3))
        .await
        .unwrap();
    assert_eq!(preview.fire_times.len(), 3);
    assert!(!preview.description.is_empty());
    let bad = client
        .preview_schedule(
            ScheduleIn {
                every: Some("soon".into()),
                ..ScheduleIn::default()
            },
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(bad.field(), Some("schedule.every"), "{bad}");

    let before = client.signing_secret().await.unwrap();
    let rotated = client.rotate_signing_secret(None).await.unwrap();
    assert_ne!(rotated.signing_secret, before.signing_secret);
    assert!(rotated.previous_valid_until.is_some(), "a day of overlap");
    let dropped = client
        .rotate_signing_secret(Some(Duration::ZERO))
        .await
        .unwrap();
    assert_eq!(dropped.previous_valid_until, None, "no overlap");
    assert_eq!(client.signing_secret().await.unwrap(), {
        let mut current = dropped.clone();
        current.note = None;
        current
    });

    assert_eq!(client.list_breakers().await.unwrap(), vec![]);
    assert_eq!(client.list_connections().await.unwrap(), vec![]);
    let document = client.openapi().await.unwrap();
    assert!(document["paths"]["/v1/jobs"].is_object());
    assert_eq!(client.healthz().await.unwrap().status, "ok");
    assert_eq!(client.readyz().await.unwrap().status, "ready");
    let metrics = client.metrics().await.unwrap();
    assert!(metrics.contains("hourglass_"), "{metrics}");
    assert!(metrics.trim_end().ends_with("# EOF"), "OpenMetrics text");
    t.stop().await;
}
