//! Several nodes on one PostgreSQL: any node accepts API calls, every occurrence fires once, and a
//! job created on one node fires on another (wake-ups by LISTEN/NOTIFY, not polling).
//!
//! Needs `HOURGLASS_TEST_DATABASE_URL` (`scripts/test` provides one); each test works in a schema
//! of its own and drops it afterwards.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::json;

use crate::support::postgres::Schema;
use crate::support::{Api, PATIENCE, Receiver, start_node_with};

/// The queue long polls' wait: the longest the API allows.
const POLL_WAIT_MS: u64 = hourglass_server::queues::MAX_WAIT_MS;
const POLL_WAIT: Duration = Duration::from_millis(POLL_WAIT_MS);

fn in_ms(ms: i64) -> String {
    let at = jiff::Timestamp::now() + jiff::SignedDuration::from_millis(ms);
    format!("{at:.3}")
}

/// Node A only takes API calls (it has no room to claim anything), so node B must fire what A
/// creates. B is asleep with nothing due when each job arrives, and an idle planner sleeps until
/// it is poked: only A's NOTIFY wakes it, so without the wake-up the job never fires at all. The
/// test asserts that event (delivered, not early); how late it was is printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_created_on_one_node_fires_on_another() {
    let schema = Schema::new();
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let receiver = Receiver::start().await;
    let recv_addr = receiver.addr();
    let b = start_node_with(schema.node_config(dir_b.path())).await;
    let mut api_only = schema.node_config(dir_a.path());
    api_only.engine.max_in_flight = 0;
    let a = start_node_with(api_only).await;
    let api = Api::new(a.addr());
    tokio::time::sleep(Duration::from_millis(300)).await;

    for i in 0..5 {
        let path = format!("/soon/{i}");
        api.create(json!({
            "schedule": {"at": in_ms(200)},
            "target": {"webhook": {"url": format!("http://{recv_addr}{path}")}},
        }))
        .await;
        let got = receiver
            .wait_for(PATIENCE, "the job created on A, fired by B", |d| {
                d.iter().any(|d| d.path == path)
            })
            .await;
        let delivery = got.iter().find(|d| d.path == path).unwrap();
        let late_ms = delivery.received_ms - delivery.due_ms();
        assert!(late_ms >= 0, "fired {} ms early", -late_ms);
        println!("fired on the other node {late_ms} ms after its due time");
        // Let B settle back into its idle sleep before the next one.
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    a.shutdown().await;
    b.shutdown().await;
}

/// Two full nodes on one database, jobs created through both: each occurrence is delivered once
/// and none early.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_share_one_database_and_fire_each_occurrence_once() {
    let schema = Schema::new();
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let receiver = Receiver::start().await;
    let recv_addr = receiver.addr();
    let a = start_node_with(schema.node_config(dir_a.path())).await;
    let b = start_node_with(schema.node_config(dir_b.path())).await;
    let per_node = 100;
    for (n, node) in [&a, &b].into_iter().enumerate() {
        let jobs: Vec<_> = (0..per_node)
            .map(|i| {
                json!({
                    "schedule": {"at": in_ms(300 + i * 10)},
                    "target": {"webhook": {"url": format!("http://{recv_addr}/n{n}/{i}")}},
                })
            })
            .collect();
        let (status, body) = Api::new(node.addr())
            .call("POST", "/v1/jobs/batch", Some(json!({ "jobs": jobs })))
            .await;
        assert_eq!(status, 201, "{body}");
    }
    let total = 2 * per_node as usize;
    receiver
        .wait_for(Duration::from_secs(10), "every occurrence", |d| {
            d.len() >= total
        })
        .await;
    // Time for a duplicate to show up, if there were one.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let deliveries = receiver.deliveries();
    let mut by_id: HashMap<String, usize> = HashMap::new();
    for d in &deliveries {
        *by_id.entry(d.header("webhook-id").to_owned()).or_default() += 1;
        assert!(d.received_ms >= d.due_ms(), "{} fired early", d.path);
    }
    assert_eq!(by_id.len(), total, "every occurrence delivered");
    assert!(by_id.values().all(|n| *n == 1), "an occurrence fired twice");
    a.shutdown().await;
    b.shutdown().await;
}

/// A worker long-polling node B gets a queue message created on node A at its due time, and the
/// next occurrence of a recurring queue job acked through A wakes B's poll too.
///
/// A poll on an empty queue sleeps until it is poked or its wait runs out, and then looks once
/// more, so an unwoken poll would still return the message, at the end of its wait. What tells
/// the two apart is the event that ended the poll: it returned before its (longest allowed) wait
/// ran out, i.e. it was woken. Correct behaviour returns within about a second of a 20 s wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_long_poll_on_one_node_wakes_for_messages_made_on_another() {
    let schema = Schema::new();
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = start_node_with(schema.node_config(dir_a.path())).await;
    let b = start_node_with(schema.node_config(dir_b.path())).await;
    let (api_a, api_b) = (Api::new(a.addr()), Api::new(b.addr()));

    let poll = {
        let api_b = Api::new(b.addr());
        tokio::spawn(async move {
            let started = std::time::Instant::now();
            let (status, out) = api_b
                .call(
                    "POST",
                    "/v1/queues/q/lease",
                    Some(json!({"wait_ms": POLL_WAIT_MS, "visibility_ms": 60_000})),
                )
                .await;
            (
                status,
                out,
                started.elapsed(),
                jiff::Timestamp::now().as_millisecond(),
            )
        })
    };
    // Let B's poll find the queue empty and go to sleep.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let created = api_a
        .create(json!({"schedule": {"every": "1s", "max_runs": 2}, "target": {"queue": "q"}}))
        .await;
    let (status, out, waited, leased_at) = poll.await.unwrap();
    assert_eq!(status, 200, "{out}");
    let first = &out["messages"][0];
    assert_eq!(first["job_id"], created["id"], "{out}");
    let due: jiff::Timestamp = first["due_at"].as_str().unwrap().parse().unwrap();
    let late = leased_at - due.as_millisecond();
    println!("leased on B {late} ms after its due time (poll waited {waited:?})");
    assert!(late >= 0, "leased {} ms early", -late);
    assert!(
        waited < POLL_WAIT,
        "B's poll ran out its wait ({waited:?}): it was not woken"
    );

    // B polls again while A acks: the next occurrence (due a second after the first) wakes it.
    let poll = tokio::spawn(async move {
        let started = std::time::Instant::now();
        let (status, out) = api_b
            .call(
                "POST",
                "/v1/queues/q/lease",
                Some(json!({"wait_ms": POLL_WAIT_MS})),
            )
            .await;
        (status, out, started.elapsed())
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (status, acked) = api_a
        .call(
            "POST",
            "/v1/queues/q/ack",
            Some(json!({"receipts": [first["receipt"]]})),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(acked["succeeded"].as_array().unwrap().len(), 1, "{acked}");
    let (status, out, waited) = poll.await.unwrap();
    assert_eq!(status, 200, "{out}");
    assert_eq!(out["messages"][0]["job_id"], created["id"], "{out}");
    assert!(
        waited < POLL_WAIT,
        "B's poll ran out its wait ({waited:?}): the ack on A did not wake it"
    );
    a.shutdown().await;
    b.shutdown().await;
}

/// `GET /v1/nodes` on either node lists both, each with the claims it holds: node A claims
/// nothing (no room in flight), node B claims a job due in a minute at once (its lookahead is two
/// minutes) and holds it in its timer. Once B stops, its last heartbeat takes it off the list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_nodes_are_listed_with_the_claims_they_hold_until_one_stops() {
    let schema = Schema::new();
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut config_a = schema.node_config(dir_a.path());
    config_a.engine.max_in_flight = 0;
    config_a.engine.heartbeat_interval = Some(Duration::from_millis(100));
    let mut config_b = schema.node_config(dir_b.path());
    config_b.engine.lookahead = Duration::from_secs(120);
    config_b.lease_ttl = Some(Duration::from_secs(300));
    config_b.engine.heartbeat_interval = Some(Duration::from_millis(100));
    let a = start_node_with(config_a).await;
    let b = start_node_with(config_b).await;
    let (api_a, api_b) = (Api::new(a.addr()), Api::new(b.addr()));
    api_a
        .create(json!({
            "schedule": {"at": in_ms(60_000)},
            "target": {"webhook": {"url": "http://127.0.0.1:9/never"}},
        }))
        .await;

    // Both nodes answer the same list: B holding the one claim, A none.
    let listed = |api: Api| async move {
        let (status, body) = api.call("GET", "/v1/nodes", None).await;
        assert_eq!(status, 200, "{body}");
        body["nodes"].as_array().unwrap().clone()
    };
    let deadline = std::time::Instant::now() + PATIENCE;
    let nodes = loop {
        let nodes = listed(api_a.clone()).await;
        let claims: Vec<u64> = nodes
            .iter()
            .map(|n| n["claims_held"].as_u64().unwrap())
            .collect();
        if nodes.len() == 2 && claims.iter().sum::<u64>() == 1 {
            break nodes;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never saw both nodes with B's claim: {nodes:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let ids: Vec<&str> = nodes.iter().map(|n| n["id"].as_str().unwrap()).collect();
    assert!(ids[0] < ids[1], "listed by id: {ids:?}");
    let holder = nodes.iter().find(|n| n["claims_held"] == 1).unwrap();
    let idle = nodes.iter().find(|n| n["claims_held"] == 0).unwrap();
    for node in &nodes {
        assert_eq!(node["version"], env!("CARGO_PKG_VERSION"));
    }
    let from_b = listed(api_b.clone()).await;
    let ids_b: Vec<&str> = from_b.iter().map(|n| n["id"].as_str().unwrap()).collect();
    assert_eq!(ids_b, ids, "B lists the same nodes");

    // B stops: its claim is handed back, and its last heartbeat ends its listing.
    b.shutdown().await;
    let after = listed(api_a.clone()).await;
    let ids_after: Vec<&str> = after.iter().map(|n| n["id"].as_str().unwrap()).collect();
    assert_eq!(
        ids_after,
        vec![idle["id"].as_str().unwrap()],
        "B left: {after:?}"
    );
    assert_ne!(holder["id"], idle["id"]);
    a.shutdown().await;
}
