//! Edits racing the planner: a job changed through the API while the planner claims it must still
//! fire, and never wait out a lease.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::support::{Api, Receiver, start_node_with, test_config};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

const JOBS: usize = 1000;
/// The node's lease, set here rather than left to the embedded store's default (lookahead +
/// delivery timeout + 30 s) so that the bug's signature does not depend on other settings: a job
/// left leased by an edit waits out all of it.
const LEASE: Duration = Duration::from_secs(120);

/// What is done to one job once a PATCH moved it 1.5 s ahead, inside the planner's lookahead
/// (2 s).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Edit {
    /// PATCH of the payload.
    Patch,
    /// Pause, then resume.
    PauseResume,
    /// Trigger: due now.
    Trigger,
}

fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

/// Regression: the API told the engine to drop every claim of an edited job, so a claim the
/// planner made between the edit's commit and that message was dropped too, and the job stayed
/// leased until the lease ran out (~119 s). Every job must complete, and its completing delivery
/// must not wait for a lease.
///
/// The one timed assertion kept in the suites, because this bug shows only as a delay: no
/// completing delivery may come later than a quarter of the lease after its due time (or after
/// the edit that made it fire, when that came later). Correct behaviour delivers within
/// milliseconds, a second on a loaded machine; the bug, after at least the lease less the
/// lookahead (~118 s). The bound sits 30 times above the one and 4 times below the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_racing_the_planner_does_not_delay_the_job_by_a_lease() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(dir.path());
    config.lease_ttl = Some(LEASE);
    let node = start_node_with(config).await;
    let api = Api::new(node.addr());
    let receiver = Receiver::start().await;
    let recv_addr = receiver.addr();

    // Far in the future, so nothing fires before its edit.
    let jobs: Vec<Value> = (0..JOBS)
        .map(|i| {
            json!({
                "schedule": {"after": "1h"},
                "target": {"webhook": {"url": format!("http://{recv_addr}/job/{i}")}},
                "payload": {"v": 1},
            })
        })
        .collect();
    let (status, created) = api
        .call("POST", "/v1/jobs/batch", Some(json!({"jobs": jobs})))
        .await;
    assert_eq!(status, 201, "{created}");
    let ids: Vec<String> = created["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), JOBS);

    let edit_of = |i: usize| match i % 3 {
        0 => Edit::Patch,
        1 => Edit::PauseResume,
        _ => Edit::Trigger,
    };
    // Enough requests at once that the planner claims while edits commit.
    let slots = Arc::new(Semaphore::new(16));
    let mut tasks = tokio::task::JoinSet::new();
    for (i, id) in ids.iter().enumerate() {
        let (api, id, slots) = (api.clone(), id.clone(), slots.clone());
        let edit = edit_of(i);
        tasks.spawn(async move {
            let _slot = slots.acquire_owned().await.unwrap();
            let call = |method: &'static str, path: String, body: Option<Value>| {
                let api = api.clone();
                async move {
                    let (status, answer) = api.call(method, &path, body).await;
                    assert_eq!(status, 200, "{method} {path}: {answer}");
                }
            };
            let job = format!("/v1/jobs/{id}");
            // Into the lookahead, where the planner claims it; then the edit under test.
            let move_in = json!({"schedule": {"after": "1500ms"}});
            call("PATCH", job.clone(), Some(move_in)).await;
            match edit {
                Edit::Patch => {
                    let patch = json!({"payload": {"v": 2}});
                    call("PATCH", job.clone(), Some(patch)).await;
                }
                Edit::PauseResume => {
                    call("POST", format!("{job}/pause"), None).await;
                    call("POST", format!("{job}/resume"), None).await;
                }
                Edit::Trigger => call("POST", format!("{job}/trigger"), None).await,
            }
            (i, now_ms())
        });
    }
    let mut edited_ms = vec![0i64; JOBS];
    while let Some(done) = tasks.join_next().await {
        let (i, at) = done.unwrap();
        edited_ms[i] = at;
    }

    // Every job completes. One still leased waits out its lease; waiting half of it tells the
    // two apart however slow the machine. Jobs not yet completed, at most `limit` of them:
    // polling asks for one, since a page of a thousand jobs would take CPU that the node (on
    // this runtime) needs to fire on time.
    let open = |limit: usize| {
        let api = api.clone();
        async move {
            let mut open = 0;
            for state in ["active", "paused"] {
                let path = format!("/v1/jobs?state={state}&limit={limit}");
                let (status, page) = api.call("GET", &path, None).await;
                assert_eq!(status, 200, "{page}");
                open += page["jobs"].as_array().unwrap().len();
            }
            open
        }
    };
    let deadline = std::time::Instant::now() + LEASE / 2;
    while open(1).await > 0 {
        if std::time::Instant::now() > deadline {
            panic!(
                "{} of {JOBS} edited jobs were not delivered within half a lease (left leased by \
                 the edit?)",
                open(JOBS).await
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The completing delivery of each job is its last one with the job's final payload (a claim
    // made before a PATCH may still have delivered the old one, which is allowed).
    let mut by_job: HashMap<String, Vec<crate::support::Delivery>> = HashMap::new();
    for d in receiver.deliveries() {
        by_job.entry(d.path.clone()).or_default().push(d);
    }
    let mut late = Vec::new();
    let mut slowest_ms = 0;
    for (i, edited) in edited_ms.iter().enumerate() {
        let payload = json!({"v": if edit_of(i) == Edit::Patch { 2 } else { 1 }});
        let all = by_job
            .get(&format!("/job/{i}"))
            .cloned()
            .unwrap_or_default();
        let d = all
            .iter()
            .filter(|d| d.json() == payload)
            .max_by_key(|d| d.received_ms)
            .unwrap_or_else(|| {
                panic!(
                    "job {i} ({:?}) completed without delivering {payload}",
                    edit_of(i)
                )
            });
        let fire_from = d.due_ms().max(*edited);
        slowest_ms = slowest_ms.max(d.received_ms - fire_from);
        if d.received_ms - fire_from > (LEASE / 4).as_millis() as i64 {
            let all: Vec<(i64, i64)> = all.iter().map(|d| (d.due_ms(), d.received_ms)).collect();
            late.push((i, edit_of(i), *edited, all));
        }
    }
    println!("the slowest completing delivery came {slowest_ms} ms after it was due");
    assert!(
        late.is_empty(),
        "delivered more than a quarter of the lease late, as if left leased (job, edit, edited \
         ms, [(due ms, received ms)]): {late:?}"
    );
    node.shutdown().await;
}
