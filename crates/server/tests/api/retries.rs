//! Retries as a client sees them: a job waiting out a failed attempt's backoff says when it is
//! attempted next and why the last attempt failed.

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
    let receiver = Receiver::start().await;
    let recv_addr = receiver.addr();
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
    assert_eq!(waiting["last_error"], "http 503", "why it waits: {waiting}");
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

/// A failed attempt keeps the start of what the receiver answered: the first 1 KiB of its body,
/// so the reason for a 500 can be read from the job's runs. A delivered attempt keeps nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_attempt_keeps_the_start_of_the_answer() {
    use axum::http::StatusCode;
    let answer = format!(
        "{{\"error\": \"quota exceeded\", \"detail\": \"{}\"}}",
        "x".repeat(3000)
    );
    let body = answer.clone();
    let app = axum::Router::new()
        .route(
            "/fail",
            axum::routing::post(move || {
                let body = body.clone();
                async move { (StatusCode::INTERNAL_SERVER_ERROR, body) }
            }),
        )
        .route("/ok", axum::routing::post(|| async { "fine, and ignored" }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });

    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let api = Api::new(node.addr());
    let failing = api
        .create(json!({
            "schedule": {"after": "1ms"},
            "target": {"webhook": {"url": format!("http://{addr}/fail")}},
            "retry": {"max_attempts": 3, "initial_backoff": "1h", "max_backoff": "1h"},
        }))
        .await;
    let fine = api
        .create(json!({
            "schedule": {"after": "1ms"},
            "target": {"webhook": {"url": format!("http://{addr}/ok")}},
        }))
        .await;
    let runs_of = |id: &serde_json::Value| format!("/v1/jobs/{}/runs", id.as_str().unwrap());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let (failed, delivered) = loop {
        let (_, failed) = api.call("GET", &runs_of(&failing["id"]), None).await;
        let (_, delivered) = api.call("GET", &runs_of(&fine["id"]), None).await;
        if failed["runs"].as_array().is_some_and(|r| !r.is_empty())
            && delivered["runs"].as_array().is_some_and(|r| !r.is_empty())
        {
            break (failed["runs"][0].clone(), delivered["runs"][0].clone());
        }
        assert!(tokio::time::Instant::now() < deadline, "no runs recorded");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(failed["status_code"], 500, "{failed}");
    assert_eq!(failed["outcome"], "retry");
    assert_eq!(failed["response"].as_str().unwrap(), &answer[..1024]);
    assert_eq!(delivered["outcome"], "delivered");
    assert_eq!(
        delivered["response"],
        serde_json::Value::Null,
        "{delivered}"
    );
    node.shutdown().await;
}

/// A job carries the error of its latest failed attempt, the one its runs record, until an
/// occurrence is delivered; a job that never failed carries none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_shows_its_last_error_until_a_delivery() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let api = Api::new(node.addr());
    let receiver = Receiver::start().await;
    let recv_addr = receiver.addr();
    // Fails its first attempt with 500, then is delivered after a backoff of 1–2 s.
    let job = api
        .create(json!({
            "key": "flaky",
            "schedule": {"after": "1ms"},
            "target": {"webhook": {"url": format!("http://{recv_addr}/flaky/1")}},
            "retry": {"max_attempts": 3, "initial_backoff": "2s", "max_backoff": "2s"},
        }))
        .await;
    assert_eq!(job["last_error"], serde_json::Value::Null, "{job}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let waiting = loop {
        let (_, job) = api.call("GET", "/v1/jobs/key:flaky", None).await;
        if job["attempt"] == 1 {
            break job;
        }
        assert!(tokio::time::Instant::now() < deadline, "no failure: {job}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let (_, runs) = api.call("GET", "/v1/jobs/key:flaky/runs", None).await;
    assert_eq!(runs["runs"][0]["outcome"], "retry", "{runs}");
    assert_eq!(waiting["last_error"], runs["runs"][0]["error"], "{waiting}");
    assert_eq!(waiting["last_error"], "http 500");
    let (_, listed) = api.call("GET", "/v1/jobs?state=active", None).await;
    assert_eq!(listed["jobs"][0]["last_error"], "http 500", "{listed}");

    let done = api.settled_job(job["id"].as_str().unwrap()).await;
    assert_eq!(done["state"], "completed", "{done}");
    assert_eq!(done["last_error"], serde_json::Value::Null, "{done}");
    node.shutdown().await;
}
