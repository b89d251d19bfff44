//! Answers that shrink to fit (issue 39, defect 3): a listing leaves payloads out unless asked
//! for them, a page stops once its encoded size passes `max_answer_bytes` (a cursor continues
//! it), and a lease answers fewer messages when their payloads are large, leaving the rest
//! available rather than leased by nobody.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::support::{Api, start_node_with, test_config};

const BUDGET: usize = 256 * 1024;
const BLOB: usize = 60_000;
const JOBS: usize = 12;

async fn node(dir: &std::path::Path) -> hourglass_server::Node {
    let mut config = test_config(dir);
    config.limits.max_answer_bytes = BUDGET;
    start_node_with(config).await
}

fn now() -> String {
    format!("{:.3}", jiff::Timestamp::now())
}

/// Creates `JOBS` jobs with a payload of about `BLOB` bytes each; answers their ids.
async fn create_big(api: &Api, target: Value, at: String) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0..JOBS {
        let job = api
            .create(json!({
                "schedule": {"at": at},
                "target": target,
                "payload": {"n": i, "blob": "x".repeat(BLOB)}
            }))
            .await;
        ids.push(job["id"].as_str().unwrap().to_string());
    }
    ids
}

/// Reads a listing page by page; answers each page's raw size and its items.
async fn pages(api: &Api, path: &str, field: &str) -> Vec<(usize, Vec<Value>)> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let sep = if path.contains('?') { '&' } else { '?' };
        let url = match &cursor {
            Some(c) => format!("{}{path}{sep}cursor={c}", api.base),
            None => format!("{}{path}", api.base),
        };
        let text = api
            .client
            .get(url)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let page: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("json: {text}"));
        let items = page[field].as_array().expect("items").clone();
        out.push((text.len(), items));
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_string()),
            None => return out,
        }
        assert!(out.len() <= JOBS + 1, "the pages never end");
    }
}

/// Every page stays within the budget plus one item, and together they hold every job once, in
/// order.
fn assert_cut_by_bytes(pages: &[(usize, Vec<Value>)], ids: &[String], id_field: &str) {
    assert!(pages.len() > 1, "one page of {JOBS} large items");
    for (size, items) in pages {
        assert!(
            *size <= BUDGET + BLOB + 2048,
            "a page of {size} bytes ({} items)",
            items.len()
        );
        for item in items {
            assert_eq!(item["payload"]["blob"].as_str().map(str::len), Some(BLOB));
        }
    }
    let listed: Vec<String> = pages
        .iter()
        .flat_map(|(_, items)| items.iter())
        .map(|j| j[id_field].as_str().unwrap().to_string())
        .collect();
    assert_eq!(listed, ids, "every job once, in id order");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_listing_leaves_payloads_out_unless_asked_and_cuts_pages_by_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let node = node(dir.path()).await;
    let api = Api::new(node.addr());
    let receiver = crate::support::Receiver::start().await;
    let addr = receiver.addr();
    let at = format!(
        "{:.3}",
        jiff::Timestamp::now() + jiff::SignedDuration::from_hours(1)
    );
    let ids = create_big(
        &api,
        json!({"webhook": {"url": format!("http://{addr}/hook")}}),
        at,
    )
    .await;

    let plain = pages(&api, "/v1/jobs?limit=1000", "jobs").await;
    assert_eq!(plain.len(), 1, "small items fit one page");
    let (size, jobs) = &plain[0];
    assert_eq!(jobs.len(), JOBS);
    assert!(*size < 16 * 1024, "{size} bytes without payloads");
    for job in jobs {
        assert!(
            job.get("payload").is_none(),
            "payload listed unasked: {job}"
        );
    }

    let full = pages(&api, "/v1/jobs?limit=1000&payload=true", "jobs").await;
    assert_cut_by_bytes(&full, &ids, "id");

    // A single job still answers its payload.
    let (status, one) = api.call("GET", &format!("/v1/jobs/{}", ids[0]), None).await;
    assert_eq!(status, 200);
    assert_eq!(one["payload"]["blob"].as_str().map(str::len), Some(BLOB));
    let (status, bad) = api.call("GET", "/v1/jobs?payload=yes", None).await;
    assert_eq!(status, 400, "{bad}");
    assert_eq!(bad["error"]["field"], "payload");
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_listing_and_a_lease_stay_within_the_answer_budget_and_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let node = node(dir.path()).await;
    let api = Api::new(node.addr());
    let ids = create_big(&api, json!({"queue": "big"}), now()).await;

    let plain = pages(&api, "/v1/queues/big/messages?limit=1000", "messages").await;
    assert_eq!(plain.len(), 1);
    assert_eq!(plain[0].1.len(), JOBS);
    assert!(plain[0].1.iter().all(|m| m.get("payload").is_none()));
    let full = pages(
        &api,
        "/v1/queues/big/messages?limit=1000&payload=true",
        "messages",
    )
    .await;
    assert_cut_by_bytes(&full, &ids, "job_id");

    // A lease of up to 1,000 answers what fits, and only what it answers is leased.
    let mut seen = BTreeSet::new();
    let mut leases = 0;
    while seen.len() < JOBS {
        let response = api
            .client
            .post(format!("{}/v1/queues/big/lease", api.base))
            .json(&json!({"max": 1000, "visibility_ms": 600_000}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let text = response.text().await.unwrap();
        assert!(
            text.len() <= BUDGET + BLOB + 2048,
            "a lease answered {} bytes",
            text.len()
        );
        let messages = serde_json::from_str::<Value>(&text).unwrap()["messages"]
            .as_array()
            .unwrap()
            .clone();
        assert!(!messages.is_empty(), "a lease with messages available");
        assert!(
            messages.len() < JOBS,
            "all {JOBS} large messages in one lease"
        );
        for m in &messages {
            assert!(seen.insert(m["job_id"].as_str().unwrap().to_string()));
        }
        let (status, queue) = api.call("GET", "/v1/queues/big", None).await;
        assert_eq!(status, 200);
        assert_eq!(
            queue["in_flight"].as_u64(),
            Some(seen.len() as u64),
            "leased beyond what was answered: {queue}"
        );
        assert_eq!(
            queue["available"].as_u64(),
            Some((JOBS - seen.len()) as u64)
        );
        leases += 1;
        assert!(leases <= JOBS, "leases never finish");
    }
    assert_eq!(seen, ids.into_iter().collect::<BTreeSet<_>>());
    node.shutdown().await;
}
