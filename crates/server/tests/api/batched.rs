//! Batched webhook targets end to end: occurrences due together reach the receiver as signed
//! batches of at most `max_items`, each item carrying its own delivery id and facts; ids the
//! receiver lists as failed are retried alone under their job's policy, a failed batch fails every
//! item in it, and bad batch settings are refused with the field named.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use serde_json::{Value, json};
use standardwebhooks::Webhook;

use crate::support::{Api, start_node, start_node_with, test_config};

/// One batch request as the receiver saw it.
#[derive(Clone, Debug)]
struct BatchRequest {
    path: String,
    headers: HeaderMap,
    body: Vec<u8>,
}

impl BatchRequest {
    fn items(&self) -> Vec<Value> {
        let body: Value = serde_json::from_slice(&self.body).expect("a batch body is JSON");
        body["deliveries"]
            .as_array()
            .expect("a batch body has deliveries")
            .clone()
    }
}

/// Records batches. On `/ack` it lists as failed every first attempt whose payload asks for it;
/// on `/down` it answers 503.
#[derive(Clone, Default)]
struct BatchReceiver {
    requests: Arc<Mutex<Vec<BatchRequest>>>,
}

async fn answer(
    State(receiver): State<BatchReceiver>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> (StatusCode, String) {
    let request = BatchRequest {
        path: uri.path().to_string(),
        headers,
        body: body.to_vec(),
    };
    let failed: Vec<Value> = request
        .items()
        .into_iter()
        .filter(|item| item["payload"]["fail_once"] == true && item["attempt"] == 1)
        .map(|item| item["id"].clone())
        .collect();
    let down = request.path == "/down";
    receiver.requests.lock().unwrap().push(request);
    if down {
        (StatusCode::SERVICE_UNAVAILABLE, "down for now".into())
    } else {
        (StatusCode::OK, json!({"failed": failed}).to_string())
    }
}

impl BatchReceiver {
    async fn start() -> (Self, SocketAddr) {
        let receiver = Self::default();
        let app = axum::Router::new()
            .fallback(answer)
            .with_state(receiver.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (receiver, addr)
    }

    fn requests(&self) -> Vec<BatchRequest> {
        self.requests.lock().unwrap().clone()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn occurrences_due_together_arrive_in_signed_batches_with_their_own_verdicts() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let api = Api::new(node.addr());
    let (receiver, addr) = BatchReceiver::start().await;
    let (_, secret) = api.call("POST", "/v1/signing-secret", None).await;
    let verifier = Webhook::new(secret["signing_secret"].as_str().unwrap()).unwrap();

    let due = jiff::Timestamp::now() + jiff::SignedDuration::from_millis(1500);
    let due = format!("{due:.3}");
    let retry = json!({"max_attempts": 3, "initial_backoff": "100ms", "max_backoff": "200ms"});
    let mut jobs = HashMap::new();
    for n in 0..20 {
        let job = api
            .create(json!({
                "type": "report.nightly",
                "schedule": {"at": due},
                "target": {"webhook": {
                    "url": format!("http://{addr}/ack"),
                    "headers": {"x-tenant": "acme"},
                    "batch": {"max_items": 8}
                }},
                "retry": retry,
                "payload": {"n": n, "fail_once": n % 5 == 0}
            }))
            .await;
        assert_eq!(job["target"]["webhook"]["batch"], json!({"max_items": 8}));
        jobs.insert(job["id"].as_str().unwrap().to_string(), n);
    }
    // A receiver that is down fails every item of its batches, each under its own policy.
    let mut doomed = Vec::new();
    for _ in 0..3 {
        let job = api
            .create(json!({
                "schedule": {"at": due},
                "target": {"webhook": {"url": format!("http://{addr}/down"), "batch": {"max_items": 8}}},
                "retry": {"max_attempts": 2, "initial_backoff": "100ms", "max_backoff": "100ms"},
            }))
            .await;
        doomed.push(job["id"].as_str().unwrap().to_string());
    }
    for id in jobs.keys() {
        assert_eq!(api.settled_job(id).await["state"], "completed", "job {id}");
    }
    for id in &doomed {
        let job = api.settled_job(id).await;
        assert_eq!(
            (&job["state"], &job["attempt"]),
            (&json!("failed"), &json!(2))
        );
    }

    // Every item on /ack: per delivery id, the attempts that arrived.
    let mut attempts: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let mut sizes = Vec::new();
    for request in receiver.requests().iter().filter(|r| r.path == "/ack") {
        verifier
            .verify(&request.body, &request.headers)
            .unwrap_or_else(|e| panic!("a batch's signature does not verify: {e:?}"));
        let header = |name: &str| request.headers[name].to_str().unwrap().to_string();
        assert!(header("webhook-id").starts_with("batch_"));
        assert_eq!(header("x-tenant"), "acme");
        let items = request.items();
        assert_eq!(header("hourglass-batch-size"), items.len().to_string());
        sizes.push(items.len());
        for item in items {
            let job_id = item["job_id"].as_str().unwrap();
            let n = jobs[job_id];
            let due_ms = item["due_at"]
                .as_str()
                .unwrap()
                .parse::<jiff::Timestamp>()
                .unwrap()
                .as_millisecond();
            assert_eq!(
                item["id"].as_str().unwrap(),
                format!("{}_{due_ms}", job_id.replace('-', "")),
                "an item's id is the delivery id a single delivery would carry"
            );
            assert_eq!(item["due_at"], due.as_str());
            assert_eq!(item["job_type"], "report.nightly");
            assert_eq!(item["payload"], json!({"n": n, "fail_once": n % 5 == 0}));
            attempts
                .entry(item["id"].as_str().unwrap().to_string())
                .or_default()
                .push(item["attempt"].as_u64().unwrap());
        }
    }
    assert!(sizes.iter().all(|&n| (1..=8).contains(&n)), "{sizes:?}");
    assert!(
        sizes.iter().any(|&n| n > 1),
        "twenty occurrences due in the same millisecond went one a request: {sizes:?}"
    );
    assert_eq!(attempts.len(), 20, "every occurrence arrived");
    for (id, seen) in &attempts {
        let job_id = jobs
            .keys()
            .find(|job| id.starts_with(&job.replace('-', "")))
            .unwrap();
        if jobs[job_id] % 5 == 0 {
            assert_eq!(seen, &[1, 2], "{id}: listed as failed once, then delivered");
        } else {
            assert_eq!(seen, &[1], "{id}: acknowledged by its batch");
        }
    }

    // A listed failure is recorded against its own job with the reason and the answer.
    let retried = jobs.iter().find(|(_, n)| **n == 0).unwrap().0;
    let (_, runs) = api
        .call("GET", &format!("/v1/jobs/{retried}/runs"), None)
        .await;
    let first = runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|run| run["attempt"] == 1)
        .unwrap()
        .clone();
    assert_eq!(first["outcome"], "retry");
    assert_eq!(first["status_code"], 200);
    assert!(
        first["error"]
            .as_str()
            .unwrap()
            .contains("listed this delivery as failed"),
        "{first}"
    );

    let (_, letters) = api.call("GET", "/v1/dead-letters", None).await;
    let letters = letters["dead_letters"].as_array().unwrap();
    assert_eq!(letters.len(), 3);
    assert!(
        letters.iter().all(|l| l["reason"] == "http 503"),
        "{letters:?}"
    );

    // The batch-size histogram saw every request the receiver got, and every item in them.
    let all = receiver.requests();
    let items: usize = all.iter().map(|r| r.items().len()).sum();
    let text = api
        .client
        .get(format!("{}/metrics", api.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let series = |name: &str| -> f64 {
        text.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
            .unwrap_or_else(|| panic!("{name} is not exposed"))
            .parse()
            .unwrap()
    };
    assert_eq!(
        series("hourglass_webhook_batch_size_count"),
        all.len() as f64
    );
    assert_eq!(series("hourglass_webhook_batch_size_sum"), items as f64);
    node.shutdown().await;
}

#[tokio::test]
async fn batch_settings_out_of_range_are_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let api = Api::new(node.addr());
    // Out of range: `invalid_field` naming max_items. A batch without max_items or with a field
    // it does not have: refused naming the batch.
    for (batch, out_of_range) in [
        (json!({"max_items": 0}), true),
        (json!({"max_items": 1001}), true),
        (json!({"max_items": 70000}), true),
        (json!({}), false),
        (json!({"max_items": 10, "linger": "1s"}), false),
    ] {
        let (status, body) = api
            .call(
                "POST",
                "/v1/jobs",
                Some(json!({
                    "schedule": {"after": "1h"},
                    "target": {"webhook": {"url": "http://127.0.0.1:9/x", "batch": batch}}
                })),
            )
            .await;
        assert_eq!(status, 422, "{batch}: {body}");
        let field = body["error"]["field"].as_str().unwrap_or_default();
        assert!(
            field.starts_with("target.webhook.batch"),
            "{batch}: the error names {field:?}: {body}"
        );
        if out_of_range {
            assert_eq!(body["error"]["code"], "invalid_field", "{body}");
            assert_eq!(field, "target.webhook.batch.max_items", "{body}");
        }
    }
    let (_, listed) = api.call("GET", "/v1/jobs", None).await;
    assert_eq!(listed["jobs"], json!([]), "nothing was created");
    node.shutdown().await;
}

/// A batch is one request: a receiver that fails it once has failed once, however many
/// deliveries it carried, so a few failed batches do not open the breaker that as many failed
/// single deliveries would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_batch_counts_once_for_the_breaker() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(dir.path());
    config.engine.breaker_failures = 6;
    let node = start_node_with(config).await;
    let api = Api::new(node.addr());
    let (receiver, addr) = BatchReceiver::start().await;
    let due = jiff::Timestamp::now() + jiff::SignedDuration::from_millis(1000);
    let due = format!("{due:.3}");
    let mut jobs = Vec::new();
    for _ in 0..20 {
        let job = api
            .create(json!({
                "schedule": {"at": due},
                "target": {"webhook": {"url": format!("http://{addr}/down"), "batch": {"max_items": 100}}},
                "retry": {"max_attempts": 1},
            }))
            .await;
        jobs.push(job["id"].as_str().unwrap().to_string());
    }
    for id in &jobs {
        assert_eq!(api.settled_job(id).await["state"], "failed", "job {id}");
    }
    let requests = receiver.requests().len();
    assert!(
        requests < 6,
        "20 deliveries due together went in {requests} requests: too many to tell batches from deliveries"
    );
    let (status, breakers) = api.call("GET", "/v1/breakers", None).await;
    assert_eq!(status, 200);
    assert_eq!(
        breakers["breakers"],
        json!([]),
        "{requests} failed requests opened the breaker"
    );
    node.shutdown().await;
}
