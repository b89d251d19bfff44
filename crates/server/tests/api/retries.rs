//! Retries as a client sees them: a job waiting out a failed attempt's backoff says when it is
//! attempted next.

use std::time::Duration;

use serde_json::json;

use crate::support::{Api, Receiver, start_node};

/// A job whose attempt failed shows when it is next attempted beside its nominal due time, and
/// nothing there while it is due on time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_in_backoff_shows_its_next_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let api = Api::new(node.addr());
    let (receiver, recv_addr) = Receiver::start().await;
    let job = api
        .create(json!({
            "key": "backoff",
            "schedule": {"after": "1s"},
            "target": {"webhook": {"url": format!("http://{recv_addr}/status/503")}},
            "retry": {"max_attempts": 3, "initial_backoff": "1h", "max_backoff": "1h"},
        }))
        .await;
    assert_eq!(job["next_attempt_at"], serde_json::Value::Null, "{job}");
    receiver
        .wait_for(Duration::from_secs(10), "the failed attempt", |d| {
            !d.is_empty()
        })
        .await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let waiting = loop {
        let (status, job) = api.call("GET", "/v1/jobs/key:backoff", None).await;
        assert_eq!(status, 200, "{job}");
        if job["attempt"] == 1 && !job["next_attempt_at"].is_null() {
            break job;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no retry recorded: {job}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(waiting["state"], "active");
    let at = |field: &str| {
        waiting[field]
            .as_str()
            .unwrap()
            .parse::<jiff::Timestamp>()
            .unwrap()
    };
    let backoff = at("next_attempt_at").duration_since(at("next_due_at"));
    assert!(
        backoff >= jiff::SignedDuration::from_mins(29),
        "the next attempt waits out the backoff (jittered in the upper half of 1h): {waiting}"
    );
    node.shutdown().await;
}
