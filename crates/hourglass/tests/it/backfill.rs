//! A backfill across a SIGKILL (issue 37): the node is killed while it runs a backfill; the
//! restarted node runs the rest from the store, and every backfilled occurrence reaches the
//! receiver under its nominal time's delivery id (the one in flight at the kill at most twice,
//! under the same id); the same request again runs nothing.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::json;

use crate::support::{NodeOptions, Nodes, Receiver, eventually};

const OCCURRENCES: i64 = 30;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backfill_is_delivered_once_across_a_sigkill() {
    let nodes = Nodes::default();
    let options = NodeOptions::embedded("node");
    let server = nodes.start(&options).await;
    let hooks = Receiver::start().await;
    let now = jiff::Timestamp::now().as_second();
    let start = jiff::Timestamp::from_second(now - 100 * 3600).unwrap();
    let job = server
        .api
        .create(json!({
            "schedule": {"every": "1h", "start": start.to_string()},
            "target": {"webhook": {"url": format!("http://{}/ok", hooks.addr())}},
        }))
        .await;
    let id = job["id"].as_str().unwrap().to_owned();
    let hour = |h: i64| start + jiff::SignedDuration::from_hours(h);
    let range = json!({"from": hour(1).to_string(), "to": hour(1 + OCCURRENCES).to_string()});
    let path = format!("/v1/jobs/{id}/backfill");
    let (status, answer) = server.api.call("POST", &path, Some(range.clone())).await;
    assert_eq!((status, answer), (202, json!({"occurrences": OCCURRENCES})));
    // Paced at 10 a second: killed a third of the way through.
    hooks
        .wait_for(Duration::from_secs(30), "a third delivered", |d| {
            d.len() >= OCCURRENCES as usize / 3
        })
        .await;
    server.kill().await;
    let server = nodes.start(&options).await;
    let simple = id.replace('-', "");
    let expected: BTreeSet<String> = (1..=OCCURRENCES)
        .map(|h| format!("{simple}_{}", hour(h).as_millisecond()))
        .collect();
    let delivered = hooks
        .wait_for(
            Duration::from_secs(90),
            "every backfilled occurrence",
            |d| {
                let ids: BTreeSet<&str> = d.iter().map(|x| x.webhook_id()).collect();
                expected.iter().all(|e| ids.contains(e.as_str()))
            },
        )
        .await;
    let ids: Vec<&str> = delivered.iter().map(|d| d.webhook_id()).collect();
    let distinct: BTreeSet<&str> = ids.iter().copied().collect();
    assert_eq!(
        distinct,
        expected.iter().map(String::as_str).collect(),
        "only the backfilled occurrences"
    );
    assert!(
        ids.len() <= expected.len() + 1,
        "at most the one in flight at the kill twice: {ids:?}"
    );
    // The job is back on its own occurrence, and the same backfill runs nothing.
    let (api, job_path) = (&server.api, format!("/v1/jobs/{id}"));
    let back = eventually(Duration::from_secs(30), Duration::from_millis(50), || {
        let job_path = job_path.clone();
        async move {
            let (_, job) = api.call("GET", &job_path, None).await;
            job["runs"].as_u64() >= Some(OCCURRENCES as u64)
        }
    })
    .await;
    assert!(back, "the backfill's last run was never written");
    let (status, answer) = server.api.call("POST", &path, Some(range)).await;
    assert_eq!((status, answer), (202, json!({"occurrences": 0})));
    server.terminate(Duration::from_secs(10)).await;
}
