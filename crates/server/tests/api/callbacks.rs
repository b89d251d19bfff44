//! Callbacks at the API: every invalid callback refused with its field named (and nothing
//! created), the callbacks shown on the job and replaced or removed by PATCH, and callbacks
//! delivered through a real receiver: a dead-lettered occurrence's `on_failure` and a delivered
//! one's `on_success`, each a signed webhook of its own carrying the documented event.

use std::time::Duration;

use serde_json::{Value, json};
use standardwebhooks::Webhook;

use crate::support::{Api, Receiver, start_node};

fn job_with(callbacks: Value) -> Value {
    let mut job = json!({
        "key": "order-7",
        "type": "reminder",
        "schedule": {"after": "1h"},
        "target": {"webhook": {"url": "http://127.0.0.1:9/hook"}},
        "payload": {"order": 7},
    });
    for (name, value) in callbacks.as_object().unwrap() {
        job[name] = value.clone();
    }
    job
}

#[tokio::test]
async fn an_invalid_callback_is_refused_naming_its_field() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let api = Api::new(node.addr());
    let hook = json!({"webhook": {"url": "http://127.0.0.1:9/cb"}});
    let cases = [
        (
            json!({"on_failure": {"target": {}}}),
            "invalid_target",
            "on_failure.target",
        ),
        (
            json!({"on_success": {"target": {"webhook": {"url": "not a url"}}}}),
            "invalid_url",
            "on_success.target.webhook.url",
        ),
        (
            // Outside the node's address policy, as a job's own target would be.
            json!({"on_failure": {"target": {"webhook": {"url": "http://10.1.2.3/cb"}}}}),
            "forbidden_target",
            "on_failure.target.webhook.url",
        ),
        (
            json!({"on_failure": {"target": {"queue": "no spaces allowed"}}}),
            "invalid_queue",
            "on_failure.target.queue",
        ),
        (
            json!({"on_failure": {"target": {"nats": {"connection": "none", "subject": "a"}}}}),
            "unknown_connection",
            "on_failure.target.nats.connection",
        ),
        (
            json!({"on_failure": {"target": hook, "retry": {"max_attempts": 0}}}),
            "invalid_field",
            "on_failure.retry.max_attempts",
        ),
        (
            json!({"on_success": {"target": hook, "every_attempt": true}}),
            "invalid_field",
            "on_success.every_attempt",
        ),
    ];
    for (callbacks, code, field) in cases {
        let body = job_with(callbacks.clone());
        let (status, answer) = api.call("POST", "/v1/jobs", Some(body.clone())).await;
        assert_eq!(status, 422, "{callbacks}: {answer}");
        assert_eq!(answer["error"]["code"], code, "{callbacks}: {answer}");
        assert_eq!(answer["error"]["field"], field, "{callbacks}: {answer}");
        // In a batch, under the job's index.
        let batch = json!({"jobs": [job_with(json!({})), body]});
        let (status, answer) = api.call("POST", "/v1/jobs/batch", Some(batch)).await;
        assert_eq!(status, 422, "{answer}");
        assert_eq!(answer["error"]["field"], format!("jobs[1].{field}"));
    }
    // A field a callback does not have.
    let (status, answer) = api
        .call(
            "POST",
            "/v1/jobs",
            Some(job_with(
                json!({"on_failure": {"target": hook, "url": "x"}}),
            )),
        )
        .await;
    assert_eq!(status, 422, "{answer}");
    // Nothing was created.
    let (_, listed) = api.call("GET", "/v1/jobs", None).await;
    assert_eq!(listed["jobs"], json!([]), "{listed}");

    // PATCH checks the same way.
    let job = api.create(job_with(json!({}))).await;
    let path = format!("/v1/jobs/{}", job["id"].as_str().unwrap());
    let (status, answer) = api
        .call(
            "PATCH",
            &path,
            Some(json!({"on_failure": {"target": {"webhook": {"url": "ftp://x"}}}})),
        )
        .await;
    assert_eq!(status, 422, "{answer}");
    assert_eq!(answer["error"]["field"], "on_failure.target.webhook.url");
    node.shutdown().await;
}

#[tokio::test]
async fn callbacks_are_shown_on_the_job_and_replaced_or_removed_by_patch() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let api = Api::new(node.addr());
    let job = api
        .create(job_with(json!({
            "on_failure": {
                "target": {"queue": "alerts"},
                "every_attempt": true,
                "include_payload": true,
                "retry": {"max_attempts": 3}
            },
            "on_success": {"target": {"webhook": {"url": "http://127.0.0.1:9/done"}}},
        })))
        .await;
    assert_eq!(
        job["on_failure"],
        json!({
            "target": {"queue": "alerts"},
            "every_attempt": true,
            "include_payload": true,
            "retry": {"max_attempts": 3, "initial_backoff": "1s", "max_backoff": "15m"}
        })
    );
    assert_eq!(
        job["on_success"]["target"]["webhook"]["url"],
        "http://127.0.0.1:9/done"
    );
    assert_eq!(job["on_success"]["every_attempt"], false);
    assert!(job.get("callback_of").is_none(), "{job}");

    let path = format!("/v1/jobs/{}", job["id"].as_str().unwrap());
    let (status, edited) = api
        .call(
            "PATCH",
            &path,
            Some(json!({"on_failure": null, "on_success": {"target": {"queue": "done"}}})),
        )
        .await;
    assert_eq!(status, 200, "{edited}");
    assert!(edited.get("on_failure").is_none(), "{edited}");
    assert_eq!(edited["on_success"]["target"], json!({"queue": "done"}));
    // A PATCH without them keeps them.
    let (_, kept) = api
        .call("PATCH", &path, Some(json!({"type": "renamed"})))
        .await;
    assert_eq!(kept["on_success"], edited["on_success"]);

    // A keyed create repeated with other callbacks is another body.
    let (status, answer) = api
        .call(
            "POST",
            "/v1/jobs",
            Some(job_with(json!({"on_failure": {"target": {"queue": "x"}}}))),
        )
        .await;
    assert_eq!(status, 409, "{answer}");
    node.shutdown().await;
}

/// A job whose receiver answers 410 is dead-lettered and its `on_failure` told; a delivered job's
/// `on_success` is told; each callback is a signed delivery of its own, visible as a job that
/// names what it reports.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callbacks_are_delivered_signed_with_the_event() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let api = Api::new(node.addr());
    let receiver = Receiver::start().await;
    let (_, secret) = api.call("POST", "/v1/signing-secret", None).await;
    let secret = secret["signing_secret"].as_str().unwrap().to_string();
    let callbacks = json!({
        "on_failure": {"target": {"webhook": {"url": receiver.url("/failed")}}, "include_payload": true},
        "on_success": {"target": {"webhook": {"url": receiver.url("/succeeded")}}},
    });
    let mut failing = job_with(callbacks.clone());
    failing["schedule"] = json!({"after": "100ms"});
    failing["target"] = json!({"webhook": {"url": receiver.url("/status/410")}});
    let failing = api.create(failing).await;
    let mut succeeding = job_with(callbacks);
    succeeding["key"] = json!("order-8");
    succeeding["schedule"] = json!({"after": "100ms"});
    succeeding["target"] = json!({"webhook": {"url": receiver.url("/ok")}});
    let succeeding = api.create(succeeding).await;

    let seen = receiver
        .wait_for(Duration::from_secs(20), "both callbacks", |d| {
            d.iter().any(|x| x.path == "/failed") && d.iter().any(|x| x.path == "/succeeded")
        })
        .await;
    let verifier = Webhook::new(&secret).unwrap();
    let failed = seen.iter().find(|d| d.path == "/failed").unwrap();
    verifier.verify(&failed.body, &failed.headers).unwrap();
    let event = failed.json();
    assert_eq!(event["event"], "occurrence.failed");
    assert_eq!(event["job_id"], failing["id"]);
    assert_eq!(event["key"], "order-7");
    assert_eq!(event["type"], "reminder");
    assert_eq!(event["attempts"], 1);
    assert_eq!(event["response_status"], 410);
    assert_eq!(event["dead_lettered"], true);
    assert_eq!(event["payload"], json!({"order": 7}));
    assert!(
        event["last_error"].as_str().unwrap().contains("410"),
        "{event}"
    );
    let original = seen
        .iter()
        .find(|d| d.path == "/status/410")
        .expect("the failed attempt");
    assert_eq!(event["delivery_id"], original.webhook_id());
    assert_eq!(failed.header("hourglass-job-type"), "occurrence.failed");

    let succeeded = seen.iter().find(|d| d.path == "/succeeded").unwrap();
    verifier
        .verify(&succeeded.body, &succeeded.headers)
        .unwrap();
    let event = succeeded.json();
    assert_eq!(event["event"], "occurrence.succeeded");
    assert_eq!(event["job_id"], succeeding["id"]);
    assert_eq!(event["response_status"], 204, "what the receiver answered");
    assert!(event.get("payload").is_none(), "{event}");

    // The callback is a job of the namespace, marked with what it reports.
    let callback_job = api.settled_job(failed.job_id()).await;
    assert_eq!(callback_job["state"], "completed");
    assert_eq!(
        callback_job["callback_of"],
        json!({"job_id": failing["id"], "event": "occurrence.failed"})
    );
    assert!(callback_job.get("on_failure").is_none());
    // It cannot be given callbacks of its own: they would never fire.
    let (status, refused) = api
        .call(
            "PATCH",
            &format!("/v1/jobs/{}", failed.job_id()),
            Some(json!({"on_failure": {"target": {"queue": "alerts"}}})),
        )
        .await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(refused["error"]["field"], "on_failure", "{refused}");
    // Each callback once: more time passes and nothing more arrives on their paths.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let deliveries = receiver.deliveries();
    let count = |p: &str| deliveries.iter().filter(|d| d.path == p).count();
    assert_eq!((count("/failed"), count("/succeeded")), (1, 1));
    node.shutdown().await;
}

/// For a pull queue, success is the worker's acknowledgement: the ack creates the `on_success`
/// callback, delivered as any webhook.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acked_queue_message_reports_its_success() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let api = Api::new(node.addr());
    let receiver = Receiver::start().await;
    let job = api
        .create(json!({
            "schedule": {"after": "1ms"},
            "target": {"queue": "work"},
            "payload": {"n": 1},
            "on_success": {"target": {"webhook": {"url": receiver.url("/acked")}}},
        }))
        .await;
    let (status, leased) = api
        .call(
            "POST",
            "/v1/queues/work/lease",
            Some(json!({"wait_ms": 5000})),
        )
        .await;
    assert_eq!(status, 200, "{leased}");
    let message = &leased["messages"][0];
    assert_eq!(message["job_id"], job["id"], "{leased}");
    assert!(receiver.deliveries().is_empty(), "nothing before the ack");
    let (status, acked) = api
        .call(
            "POST",
            "/v1/queues/work/ack",
            Some(json!({"receipts": [message["receipt"]]})),
        )
        .await;
    assert_eq!(status, 200, "{acked}");
    let seen = receiver
        .wait_for(Duration::from_secs(20), "the ack's callback", |d| {
            d.iter().any(|x| x.path == "/acked")
        })
        .await;
    let event = seen[0].json();
    assert_eq!(event["event"], "occurrence.succeeded");
    assert_eq!(event["job_id"], job["id"]);
    assert_eq!(event["delivery_id"], message["delivery_id"]);
    node.shutdown().await;
}

/// A callback to a pull queue wakes the long polls waiting on it: a worker polling before the
/// job fails gets the `occurrence.failed` event when the completion creates it. An unwoken poll
/// would look again only when its (longest allowed) wait ran out, so what tells them apart is
/// that the poll returned before then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callback_to_a_pull_queue_wakes_its_long_polls() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let api = Api::new(node.addr());
    let receiver = Receiver::start().await;
    let job = api
        .create(json!({
            "schedule": {"after": "500ms"},
            "target": {"webhook": {"url": format!("http://{}/status/410", receiver.addr())}},
            "on_failure": {"target": {"queue": "alerts"}},
        }))
        .await;
    let wait = Duration::from_millis(hourglass_server::queues::MAX_WAIT_MS);
    let started = std::time::Instant::now();
    let (status, leased) = api
        .call(
            "POST",
            "/v1/queues/alerts/lease",
            Some(json!({"wait_ms": wait.as_millis() as u64})),
        )
        .await;
    assert_eq!(status, 200, "{leased}");
    assert!(
        started.elapsed() < wait,
        "the long poll ran out its wait ({:?}) instead of waking for the callback",
        started.elapsed()
    );
    let message = &leased["messages"][0];
    assert_eq!(message["type"], "occurrence.failed", "{leased}");
    assert_eq!(message["payload"]["job_id"], job["id"], "{leased}");
    node.shutdown().await;
}
