//! Overlap `allow` end to end (issue 37): an every-second job whose receiver holds each request
//! open for three seconds. Its occurrences still go out at their own seconds, several open at
//! once, each under its own delivery id and the job's id; the runs the API reads back are the
//! job's; cancelling the job stops what it handed off.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{NodeOptions, Nodes, Receiver, eventually, now_ms};

const HOLD_MS: i64 = 3_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_sends_each_occurrence_beside_the_ones_still_open() {
    let nodes = Nodes::default();
    let server = nodes.start(&NodeOptions::embedded("node")).await;
    let hooks = Receiver::start().await;
    let job = server
        .api
        .create(json!({
            "schedule": {"every": "1s"},
            "target": {"webhook": {"url": hooks.url(&format!("/slow/{HOLD_MS}"))}},
            "overlap": "allow",
            "labels": {"team": "reports"},
        }))
        .await;
    assert_eq!(job["overlap"], "allow", "{job}");
    let id = job["id"].as_str().unwrap().to_owned();
    let simple = id.replace('-', "");
    let delivered = hooks
        .wait_for(Duration::from_secs(30), "five occurrences", |d| {
            d.len() >= 5
        })
        .await;
    let mut ids = BTreeSet::new();
    for d in &delivered[..5] {
        assert_eq!(d.job_id(), id, "sent under the job's id");
        assert_eq!(d.webhook_id(), format!("{simple}_{}", d.due_ms()));
        assert!(ids.insert(d.webhook_id().to_owned()), "one delivery each");
    }
    // Under any other policy an occurrence waits for the previous one's answer, three seconds
    // after it arrived; here the next one arrives while it is still open.
    let overlapped = delivered[..5]
        .windows(2)
        .filter(|w| w[1].received_ms < w[0].received_ms + HOLD_MS)
        .count();
    assert!(
        overlapped >= 1,
        "no occurrence was sent while another was open"
    );

    // The delivering jobs are listed by their mark, carry the job's labels and name the
    // occurrence they deliver; their runs are the job's.
    let marked = format!("/v1/jobs?label=hourglass/occurrence-of={id}&label=team=reports");
    let (status, children) = server.api.call("GET", &marked, None).await;
    assert_eq!(status, 200, "{children}");
    let children = children["jobs"].as_array().cloned().unwrap_or_default();
    assert!(children.len() >= 5, "{children:?}");
    let child = &children[0];
    let child_path = format!("/v1/jobs/{}", child["id"].as_str().unwrap());
    let (_, child) = server.api.call("GET", &child_path, None).await;
    assert_eq!(child["occurrence_of"]["job_id"], id.as_str(), "{child}");
    assert!(
        ids.contains(child["occurrence_of"]["delivery_id"].as_str().unwrap()),
        "{child}"
    );
    let runs_path = format!("/v1/jobs/{id}/runs");
    let api = &server.api;
    let recorded = eventually(Duration::from_secs(20), Duration::from_millis(100), || {
        let runs_path = runs_path.clone();
        async move {
            let (_, runs) = api.call("GET", &runs_path, None).await;
            runs["runs"]
                .as_array()
                .is_some_and(|runs| runs.iter().filter(|r| delivered_run(r)).count() >= 3)
        }
    })
    .await;
    assert!(
        recorded,
        "{:?}",
        server.api.call("GET", &runs_path, None).await
    );
    let (_, runs) = server.api.call("GET", &runs_path, None).await;
    for run in runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| delivered_run(r))
    {
        let delivery = run["delivery_id"].as_str().unwrap();
        assert!(delivery.starts_with(&simple), "{run}");
    }

    // Cancelling the job cancels what it handed off and still holds: nothing more goes out.
    let (status, cancelled) = server
        .api
        .call("DELETE", &format!("/v1/jobs/{id}"), None)
        .await;
    assert_eq!(status, 200, "{cancelled}");
    let answered_ms = now_ms();
    let (_, children) = server.api.call("GET", &marked, None).await;
    let states: Vec<&str> = children["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["state"].as_str().unwrap_or_default())
        .collect();
    assert!(
        states
            .iter()
            .all(|s| *s == "completed" || *s == "cancelled"),
        "{states:?}"
    );
    // A request sent just before the answer may still be on its way; nothing sent after it.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after: Vec<String> = hooks
        .deliveries()
        .iter()
        .filter(|d| d.received_ms > answered_ms + 500)
        .map(|d| d.webhook_id().to_owned())
        .collect();
    assert!(after.is_empty(), "sent after the cancel: {after:?}");
}

fn delivered_run(run: &Value) -> bool {
    run["outcome"] == "delivered"
}
