//! End-to-end delivery through a real node and a local receiver: one-off, delay, cron with seconds
//! and interval jobs arrive with the right payload and headers, and their signatures verify with
//! the `standardwebhooks` reference library.

use std::time::Duration;

use crate::support::{Api, Receiver, start_node};
use hourglass_engine::signing::{Metadata, SigningKey};
use serde_json::json;
use standardwebhooks::Webhook;

fn in_ms(ms: i64) -> String {
    let at = jiff::Timestamp::now() + jiff::SignedDuration::from_millis(ms);
    format!("{at:.3}")
}

/// The `webhook-id` README documents: the job id without its hyphens, `_`, the due instant in
/// unix milliseconds. Deployed receivers deduplicate on this exact text, so it never changes.
fn documented_webhook_id(job_id: &str, due_ms: i64) -> String {
    format!("{}_{due_ms}", job_id.replace('-', ""))
}

/// Issue 12, defect 9: README said `<job id>_<due unix ms>`, which reads as the hyphenated id the
/// API shows, while the header (and the OpenAPI document) carry the id without hyphens.
#[test]
fn readme_documents_the_webhook_id_that_is_sent() {
    let readme = include_str!("../../../../README.md");
    let row = readme
        .lines()
        .find(|l| l.starts_with("| `webhook-id` |"))
        .expect("README has a webhook-id row");
    assert!(
        row.contains("`<job id without hyphens>_<due unix ms>`"),
        "README's webhook-id row does not document the sent form: {row}"
    );
    let example = documented_webhook_id("01a1fee1-265e-739b-9809-3d3692d507c6", 1795277530719);
    assert!(
        row.contains(&format!("`{example}`")),
        "README's webhook-id example is not {example}: {row}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_schedule_kind_is_delivered_signed_and_on_time() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let api = Api::new(node.addr());
    let receiver = Receiver::start().await;
    let recv_addr = receiver.addr();
    let hook = |path: &str| format!("http://{recv_addr}{path}");

    let (status, secret) = api.call("POST", "/v1/signing-secret", None).await;
    assert_eq!(status, 200);
    let secret = secret["signing_secret"].as_str().unwrap().to_string();
    assert!(secret.starts_with("whsec_"));

    let at_job = api
        .create(json!({
            "type": "article.publish",
            "schedule": {"at": in_ms(700)},
            "target": {"webhook": {"url": hook("/at"), "headers": {"X-Tenant": "acme"}}},
            "payload": {"article": 42, "title": "Hello"}
        }))
        .await;
    let after_job = api
        .create(json!({
            "schedule": {"after": "900ms"},
            "target": {"webhook": {"url": hook("/after")}},
            "payload": [1, 2, 3]
        }))
        .await;
    let cron_job = api
        .create(json!({
            "schedule": {"cron": "* * * * * *", "timezone": "Europe/Berlin"},
            "target": {"webhook": {"url": hook("/cron")}},
            "payload": {"kind": "cron"}
        }))
        .await;
    let every_job = api
        .create(json!({
            "schedule": {"every": "1s", "max_runs": 2},
            "target": {"webhook": {"url": hook("/every")}},
        }))
        .await;
    assert_eq!(at_job["state"], "active");
    assert!(at_job["next_due_at"].is_string());

    let all = receiver
        .wait_for(Duration::from_secs(10), "all schedule kinds", |d| {
            let count = |p: &str| d.iter().filter(|x| x.path == p).count();
            count("/at") >= 1 && count("/after") >= 1 && count("/cron") >= 2 && count("/every") >= 2
        })
        .await;

    let verifier = Webhook::new(&secret).expect("secret accepted by the reference library");
    let key = SigningKey::parse(&secret).expect("the node's secret parses");
    for d in &all {
        verifier
            .verify(&d.body, &d.headers)
            .unwrap_or_else(|e| panic!("signature of {} does not verify: {e:?}", d.path));
        // Issue 39, defect 8: the hourglass-* headers are signed too, and a replay with a forged
        // one does not verify.
        let job_type = d
            .headers
            .get("hourglass-job-type")
            .map(|_| d.header("hourglass-job-type"));
        let meta = Metadata {
            job_id: d.header("hourglass-job-id"),
            due_at: d.header("hourglass-due-at"),
            attempt: d.header("hourglass-attempt"),
            job_type,
        };
        let verify = |meta: &Metadata<'_>| {
            key.verify_metadata(
                d.header("webhook-id"),
                d.header("webhook-timestamp"),
                meta,
                &d.body,
                d.header("hourglass-signature"),
            )
        };
        assert!(verify(&meta), "metadata of {} does not verify", d.path);
        let forged = Metadata {
            job_type: Some("account.delete"),
            ..meta
        };
        assert!(!verify(&forged), "a forged type verifies on {}", d.path);
        assert!(
            d.received_ms >= d.due_ms(),
            "{} fired early: received {} < due {}",
            d.path,
            d.received_ms,
            d.due_ms()
        );
        assert_eq!(d.header("content-type"), "application/json");
        assert!(d.header("webhook-id").contains('_'));
    }

    let at = &receiver.on_path("/at")[0];
    assert_eq!(
        at.header("webhook-id"),
        documented_webhook_id(at_job["id"].as_str().unwrap(), at.due_ms()),
        "webhook-id is not in the form README documents"
    );
    assert_eq!(at.json(), json!({"article": 42, "title": "Hello"}));
    assert_eq!(at.header("x-tenant"), "acme");
    assert_eq!(at.header("hourglass-job-type"), "article.publish");
    assert_eq!(
        at.header("hourglass-job-id"),
        at_job["id"].as_str().unwrap()
    );
    assert_eq!(at.header("hourglass-attempt"), "1");
    assert_eq!(
        at.due_ms(),
        at_job["next_due_at"]
            .as_str()
            .unwrap()
            .parse::<jiff::Timestamp>()
            .unwrap()
            .as_millisecond()
    );
    assert_eq!(receiver.on_path("/after")[0].json(), json!([1, 2, 3]));
    assert_eq!(receiver.on_path("/every")[0].body, b"null");

    // Cron occurrences land on whole seconds, one second apart, with distinct delivery ids.
    let cron = receiver.on_path("/cron");
    assert_eq!(cron[0].due_ms() % 1000, 0);
    assert_eq!(cron[1].due_ms() - cron[0].due_ms(), 1000);
    assert_ne!(cron[0].header("webhook-id"), cron[1].header("webhook-id"));
    assert_eq!(cron[0].json(), json!({"kind": "cron"}));

    // One-offs complete; the interval job completes after max_runs; the cron job goes on.
    // (Outcomes are written after the receiver answered: wait for each job to settle.)
    let settled = |job: &serde_json::Value| {
        let api = api.clone();
        let id = job["id"].as_str().unwrap().to_string();
        async move { api.settled_job(&id).await }
    };
    let at_now = settled(&at_job).await;
    assert_eq!(at_now["state"], "completed");
    assert_eq!(at_now["runs"], 1);
    assert_eq!(settled(&after_job).await["state"], "completed");
    assert_eq!(settled(&every_job).await["state"], "completed");
    assert_eq!(receiver.on_path("/every").len(), 2);
    let (_, cron_now) = api
        .call(
            "GET",
            &format!("/v1/jobs/{}", cron_job["id"].as_str().unwrap()),
            None,
        )
        .await;
    assert_eq!(cron_now["state"], "active");

    let (status, runs) = api
        .call(
            "GET",
            &format!("/v1/jobs/{}/runs", at_job["id"].as_str().unwrap()),
            None,
        )
        .await;
    assert_eq!(status, 200);
    let run = &runs["runs"][0];
    assert_eq!(run["status_code"], 204);
    assert_eq!(run["outcome"], "delivered");
    assert_eq!(run["delivery_id"], at.header("webhook-id"));
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_retry_with_the_same_delivery_id_then_dead_letter() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let api = Api::new(node.addr());
    let receiver = Receiver::start().await;
    let recv_addr = receiver.addr();
    let retry = json!({"max_attempts": 3, "initial_backoff": "100ms", "max_backoff": "200ms"});

    let flaky = api
        .create(json!({
            "schedule": {"after": "100ms"},
            "target": {"webhook": {"url": format!("http://{recv_addr}/flaky/2")}},
            "retry": retry,
        }))
        .await;
    let broken = api
        .create(json!({
            "schedule": {"after": "100ms"},
            "target": {"webhook": {"url": format!("http://{recv_addr}/status/503")}},
            "retry": retry,
            "payload": {"keep": "me"}
        }))
        .await;
    let gone = api
        .create(json!({
            "schedule": {"after": "100ms"},
            "target": {"webhook": {"url": format!("http://{recv_addr}/status/410")}},
            "retry": retry,
        }))
        .await;

    receiver
        .wait_for(Duration::from_secs(10), "retries", |d| {
            let count = |p: &str| d.iter().filter(|x| x.path == p).count();
            count("/flaky/2") >= 3 && count("/status/503") >= 3 && count("/status/410") >= 1
        })
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;

    let flaky_hits = receiver.on_path("/flaky/2");
    assert_eq!(flaky_hits.len(), 3, "two failures, then success");
    let ids: Vec<_> = flaky_hits
        .iter()
        .map(|d| d.header("webhook-id").to_string())
        .collect();
    assert!(
        ids.iter().all(|id| *id == ids[0]),
        "one delivery id across retries: {ids:?}"
    );
    let attempts: Vec<_> = flaky_hits
        .iter()
        .map(|d| d.header("hourglass-attempt").to_string())
        .collect();
    assert_eq!(attempts, ["1", "2", "3"]);
    // Backoff is at least half the nominal 100ms step.
    assert!(flaky_hits[1].received_ms - flaky_hits[0].received_ms >= 50);

    assert_eq!(
        receiver.on_path("/status/503").len(),
        3,
        "stops after max_attempts"
    );
    assert_eq!(
        receiver.on_path("/status/410").len(),
        1,
        "a 410 is permanent"
    );

    let get = |job: &serde_json::Value| {
        let api = api.clone();
        let id = job["id"].as_str().unwrap().to_string();
        async move { api.settled_job(&id).await }
    };
    assert_eq!(get(&flaky).await["state"], "completed");
    // A dead-lettered job counts every attempt its occurrence made, the last one included (it
    // showed one fewer).
    let broken_now = get(&broken).await;
    assert_eq!(
        (&broken_now["state"], &broken_now["attempt"]),
        (&json!("failed"), &json!(3))
    );
    let gone_now = get(&gone).await;
    assert_eq!(
        (&gone_now["state"], &gone_now["attempt"]),
        (&json!("failed"), &json!(1))
    );

    // The flaky job's three runs, two a page, newest first: the cursor of a full page leads to
    // the rest, and the last page has none.
    let runs_path = format!("/v1/jobs/{}/runs", flaky["id"].as_str().unwrap());
    let (status, first) = api.call("GET", &format!("{runs_path}?limit=2"), None).await;
    assert_eq!(status, 200, "{first}");
    let cursor = first["next_cursor"]
        .as_str()
        .expect("a full page has a cursor");
    let (status, second) = api
        .call("GET", &format!("{runs_path}?limit=2&cursor={cursor}"), None)
        .await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(second["next_cursor"], serde_json::Value::Null);
    let paged: Vec<(serde_json::Value, serde_json::Value)> = [&first, &second]
        .iter()
        .flat_map(|page| page["runs"].as_array().unwrap().clone())
        .map(|run| (run["attempt"].clone(), run["outcome"].clone()))
        .collect();
    assert_eq!(
        paged,
        vec![
            (json!(3), json!("delivered")),
            (json!(2), json!("retry")),
            (json!(1), json!("retry")),
        ]
    );

    let (_, letters) = api.call("GET", "/v1/dead-letters", None).await;
    let letters = letters["dead_letters"].as_array().unwrap().clone();
    assert_eq!(letters.len(), 2);
    let broken_letter = letters
        .iter()
        .find(|l| l["job_id"] == broken["id"])
        .expect("dead letter of the 503 job");
    assert_eq!(broken_letter["attempts"], 3);
    assert_eq!(broken_letter["reason"], "http 503");
    assert_eq!(broken_letter["payload"], json!({"keep": "me"}));

    // Replay re-delivers the payload once more as a new job, and removes the dead letter.
    let letter_id = broken_letter["id"].as_str().unwrap();
    let (status, replayed) = api
        .call(
            "POST",
            &format!("/v1/dead-letters/{letter_id}/replay"),
            None,
        )
        .await;
    assert_eq!(status, 201, "{replayed}");
    receiver
        .wait_for(Duration::from_secs(5), "replayed delivery", |d| {
            d.iter().filter(|x| x.path == "/status/503").count() >= 4
        })
        .await;
    let (status, _) = api
        .call("GET", &format!("/v1/dead-letters/{letter_id}"), None)
        .await;
    assert_eq!(status, 404);
    node.shutdown().await;
}

#[tokio::test]
async fn development_mode_refuses_non_loopback_addresses() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = crate::support::test_config(dir.path());
    config.listen = "0.0.0.0:0".parse().unwrap();
    let err = match hourglass_server::Node::start(
        config,
        std::sync::Arc::new(hourglass_core::SystemClock),
    )
    .await
    {
        Ok(_) => panic!("a node without api keys must not listen on 0.0.0.0"),
        Err(e) => e,
    };
    assert!(err.to_string().contains("without api keys"), "{err}");

    // With a key configured the same address is fine.
    let mut config = crate::support::test_config(dir.path());
    config.listen = "0.0.0.0:0".parse().unwrap();
    config.api_keys = vec![hourglass_server::auth::ApiKeyConfig {
        sha256: hourglass_server::auth::hash_key("secret-key"),
        namespace: Some("acme".into()),
        all_namespaces: false,
        ..Default::default()
    }];
    let node = crate::support::start_node_with(config).await;
    let port = node.addr().port();
    let api = Api::new(format!("127.0.0.1:{port}").parse().unwrap()).with_key("secret-key");
    let (status, _) = api.call("GET", "/v1/jobs", None).await;
    assert_eq!(status, 200);
    node.shutdown().await;
}

/// A rotation with an overlap: deliveries carry signatures by both secrets, so a receiver still on
/// the old secret and one already on the new both verify; a rotation without overlap drops the old.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotating_the_signing_secret_keeps_the_old_one_valid_during_the_overlap() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let api = Api::new(node.addr());
    let receiver = Receiver::start().await;
    let recv_addr = receiver.addr();

    let rotate = |body: Option<serde_json::Value>| {
        let api = &api;
        async move {
            let (status, out) = api.call("POST", "/v1/signing-secret", body).await;
            assert_eq!(status, 200, "{out}");
            out
        }
    };
    let old = rotate(None).await["signing_secret"]
        .as_str()
        .unwrap()
        .to_string();
    let rotated = rotate(Some(json!({"overlap": "1h"}))).await;
    let new = rotated["signing_secret"].as_str().unwrap().to_string();
    assert!(rotated["previous_valid_until"].is_string(), "{rotated}");

    api.create(json!({
        "schedule": {"after": "100ms"},
        "target": {"webhook": {"url": format!("http://{recv_addr}/overlap")}},
        "payload": {"n": 1}
    }))
    .await;
    let got = receiver
        .wait_for(Duration::from_secs(10), "the overlap delivery", |d| {
            d.iter().any(|x| x.path == "/overlap")
        })
        .await;
    let d = got.iter().find(|x| x.path == "/overlap").unwrap();
    assert_eq!(d.header("webhook-signature").split(' ').count(), 2);
    for secret in [&old, &new] {
        Webhook::new(secret)
            .unwrap()
            .verify(&d.body, &d.headers)
            .unwrap_or_else(|e| panic!("does not verify with {secret}: {e:?}"));
    }

    // Without an overlap the replaced secret stops signing at once.
    let dropped = rotate(Some(json!({"overlap": "0s"}))).await;
    assert!(dropped["previous_valid_until"].is_null(), "{dropped}");
    let newest = dropped["signing_secret"].as_str().unwrap().to_string();
    api.create(json!({
        "schedule": {"after": "100ms"},
        "target": {"webhook": {"url": format!("http://{recv_addr}/no-overlap")}},
    }))
    .await;
    let got = receiver
        .wait_for(Duration::from_secs(10), "the second delivery", |d| {
            d.iter().any(|x| x.path == "/no-overlap")
        })
        .await;
    let d = got.iter().find(|x| x.path == "/no-overlap").unwrap();
    assert_eq!(d.header("webhook-signature").split(' ').count(), 1);
    Webhook::new(&newest)
        .unwrap()
        .verify(&d.body, &d.headers)
        .unwrap();
    assert!(
        Webhook::new(&new)
            .unwrap()
            .verify(&d.body, &d.headers)
            .is_err()
    );

    for (body, field) in [
        (json!({"overlap": "8d"}), "overlap"),
        (json!({"overlap": "200h"}), "overlap"),
        (json!({"overlapp": "1h"}), "overlapp"),
    ] {
        let (status, out) = api.call("POST", "/v1/signing-secret", Some(body)).await;
        assert_eq!(status, 422, "{out}");
        assert_eq!(out["error"]["field"], field, "{out}");
    }
    node.shutdown().await;
}

/// `GET /v1/signing-secret` shows the namespace's current secret without rotating it: the one
/// deliveries are signed with (made at the first read when the namespace has none yet), the same
/// at every read, the new one after a rotation. Only a key of that namespace (or an admin key
/// naming it) reads it: another tenant's key is refused, and reads its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_current_signing_secret_is_read_without_rotating_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = crate::support::test_config(dir.path());
    let key = |key: &str, namespace: Option<&str>| hourglass_server::auth::ApiKeyConfig {
        sha256: hourglass_server::auth::hash_key(key),
        namespace: namespace.map(Into::into),
        all_namespaces: namespace.is_none(),
        ..Default::default()
    };
    config.api_keys = vec![
        key("acme-key", Some("acme")),
        key("globex-key", Some("globex")),
        key("admin-key", None),
    ];
    let node = crate::support::start_node_with(config).await;
    let acme = Api::new(node.addr()).with_key("acme-key");
    let globex = Api::new(node.addr()).with_key("globex-key");
    let receiver = Receiver::start().await;
    let recv_addr = receiver.addr();

    let (status, first) = acme.call("GET", "/v1/signing-secret", None).await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(first["namespace"], "acme", "{first}");
    let secret = first["signing_secret"].as_str().unwrap().to_string();
    assert!(secret.starts_with("whsec_"), "{first}");
    assert!(first["previous_valid_until"].is_null(), "{first}");
    let (_, again) = acme.call("GET", "/v1/signing-secret", None).await;
    assert_eq!(
        again["signing_secret"],
        json!(secret),
        "a read rotates nothing"
    );

    // It is the secret deliveries are signed with.
    acme.create(json!({
        "schedule": {"after": "10ms"},
        "target": {"webhook": {"url": format!("http://{recv_addr}/read")}},
        "payload": {"n": 1}
    }))
    .await;
    let got = receiver
        .wait_for(Duration::from_secs(10), "the delivery", |d| {
            d.iter().any(|x| x.path == "/read")
        })
        .await;
    let d = got.iter().find(|x| x.path == "/read").unwrap();
    Webhook::new(&secret)
        .unwrap()
        .verify(&d.body, &d.headers)
        .expect("the delivery verifies with the secret read");

    // Another tenant: its own secret, and a 403 for acme's.
    let (status, theirs) = globex.call("GET", "/v1/signing-secret", None).await;
    assert_eq!(status, 200, "{theirs}");
    assert_eq!(theirs["namespace"], "globex");
    assert_ne!(theirs["signing_secret"], json!(secret));
    let client = reqwest::Client::new();
    let url = format!("http://{}/v1/signing-secret", node.addr());
    let read_as = |key: &'static str, namespace: Option<&'static str>| {
        let mut request = client.get(&url);
        if !key.is_empty() {
            request = request.bearer_auth(key);
        }
        if let Some(ns) = namespace {
            request = request.header("hourglass-namespace", ns);
        }
        async move {
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            let body: serde_json::Value = response.json().await.unwrap();
            (status, body)
        }
    };
    let (status, refused) = read_as("globex-key", Some("acme")).await;
    assert_eq!(status, 403, "{refused}");
    assert!(!refused.to_string().contains(&secret), "{refused}");
    let (status, refused) = read_as("", None).await;
    assert_eq!(status, 401, "{refused}");
    let (status, by_admin) = read_as("admin-key", Some("acme")).await;
    assert_eq!(status, 200, "{by_admin}");
    assert_eq!(by_admin["signing_secret"], json!(secret));

    // After a rotation with an overlap: the new secret, and until when the old one signs too.
    let (status, rotated) = acme
        .call("POST", "/v1/signing-secret", Some(json!({"overlap": "1h"})))
        .await;
    assert_eq!(status, 200, "{rotated}");
    let (_, now) = acme.call("GET", "/v1/signing-secret", None).await;
    assert_eq!(now["signing_secret"], rotated["signing_secret"], "{now}");
    assert_ne!(now["signing_secret"], json!(secret));
    assert!(now["previous_valid_until"].is_string(), "{now}");
    node.shutdown().await;
}

/// Regression: a retried trigger made a second occurrence, with a delivery id of its own, that
/// receivers could not tell from a new trigger. With the same `Idempotency-Key` a retry changes
/// nothing and answers the first trigger's delivery id, also after that occurrence ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_trigger_with_the_same_idempotency_key_delivers_once() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let api = Api::new(node.addr());
    let receiver = Receiver::start().await;
    let recv_addr = receiver.addr();
    let job = api
        .create(json!({
            "schedule": {"every": "1h"},
            "target": {"webhook": {"url": format!("http://{recv_addr}/hook")}},
        }))
        .await;
    let id = job["id"].as_str().unwrap().to_string();
    let trigger = |key: Option<&str>| {
        let api = api.clone();
        let (id, key) = (id.clone(), key.map(str::to_owned));
        async move {
            let mut request = api
                .client
                .post(format!("{}/v1/jobs/{id}/trigger", api.base))
                .header("content-type", "application/json");
            if let Some(key) = key {
                request = request.header("Idempotency-Key", key);
            }
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            (status, response.json::<serde_json::Value>().await.unwrap())
        }
    };

    let (status, first) = trigger(Some("retry-me")).await;
    assert_eq!(status, 200, "{first}");
    let delivery_id = first["delivery_id"].as_str().unwrap().to_string();
    let due_ms = first["next_due_at"]
        .as_str()
        .unwrap()
        .parse::<jiff::Timestamp>()
        .unwrap()
        .as_millisecond();
    assert!(
        delivery_id.ends_with(&format!("_{due_ms}")),
        "{delivery_id}: the delivery id of the occurrence due now"
    );
    let (status, retried) = trigger(Some("retry-me")).await;
    assert_eq!(status, 200, "{retried}");
    assert_eq!(retried["delivery_id"], first["delivery_id"]);
    assert_eq!(
        retried["next_due_at"], first["next_due_at"],
        "nothing changed"
    );

    let delivered = receiver
        .wait_for(Duration::from_secs(10), "the triggered delivery", |d| {
            !d.is_empty()
        })
        .await;
    assert_eq!(delivered[0].header("webhook-id"), delivery_id);
    // Once it ran, the job waits for its next hourly run; a retry still answers the same and
    // does not fire again.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let after_run = loop {
        let (_, now) = api.call("GET", &format!("/v1/jobs/{id}"), None).await;
        if now["runs"] == 1 {
            break now;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the run was never recorded"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let (status, late_retry) = trigger(Some("retry-me")).await;
    assert_eq!(status, 200, "{late_retry}");
    assert_eq!(late_retry["delivery_id"], first["delivery_id"]);
    assert_eq!(late_retry["next_due_at"], after_run["next_due_at"]);
    assert_eq!(late_retry["runs"], 1);

    // Another key, or none, is another trigger.
    let (status, second) = trigger(Some("another")).await;
    assert_eq!(status, 200, "{second}");
    assert_ne!(second["delivery_id"], first["delivery_id"]);
    let second_id = second["delivery_id"].as_str().unwrap().to_string();
    receiver
        .wait_for(Duration::from_secs(10), "the second trigger", |d| {
            d.iter().any(|x| x.header("webhook-id") == second_id)
        })
        .await;
    assert_eq!(
        receiver
            .deliveries()
            .iter()
            .filter(|d| d.header("webhook-id") == delivery_id)
            .count(),
        1,
        "the first trigger was delivered once"
    );

    // A key that is too long or not printable ASCII is refused, and changes nothing.
    for bad in ["x".repeat(257), "tab\tkey".to_string(), String::new()] {
        let (status, error) = trigger(Some(&bad)).await;
        assert_eq!(status, 400, "{bad:?}: {error}");
        assert_eq!(error["error"]["code"], "invalid_idempotency_key");
        assert_eq!(error["error"]["field"], "idempotency-key");
    }
    node.shutdown().await;
}

/// A receiver that keeps answering 503 opens its destination's breaker (here after 2 failures):
/// `GET /v1/breakers` lists it for the namespace that sends to it, and for no other; the
/// occurrences then wait for the breaker instead of spending attempts, so none is dead-lettered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_receiver_opens_its_breaker_which_the_namespace_can_see() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = crate::support::test_config(dir.path());
    config.engine.breaker_failures = 2;
    config.engine.breaker_open_for = Duration::from_secs(600);
    let node = crate::support::start_node_with(config).await;
    let api = Api::new(node.addr());
    let receiver = Receiver::start().await;
    let recv_addr = receiver.addr();
    for _ in 0..4 {
        api.create(json!({
            "schedule": {"after": "1s"},
            "target": {"webhook": {"url": format!("http://{recv_addr}/status/503")}},
            "retry": {"max_attempts": 2, "initial_backoff": "1s", "max_backoff": "1s"},
        }))
        .await;
    }
    receiver
        .wait_for(Duration::from_secs(30), "two failed deliveries", |d| {
            d.len() >= 2
        })
        .await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let breakers = loop {
        let (status, body) = api.call("GET", "/v1/breakers", None).await;
        assert_eq!(status, 200, "{body}");
        if !body["breakers"].as_array().unwrap().is_empty() {
            break body["breakers"].clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the breaker never opened"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(breakers.as_array().unwrap().len(), 1, "{breakers}");
    assert_eq!(breakers[0]["destination"], format!("http://{recv_addr}"));
    assert!(breakers[0]["open_since"].as_str().is_some(), "{breakers}");
    let other = reqwest::Client::new()
        .get(format!("http://{}/v1/breakers", node.addr()))
        .header("hourglass-namespace", "other")
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), 200);
    let other: serde_json::Value = other.json().await.unwrap();
    assert_eq!(other, json!({"breakers": []}));
    // Retries (1 s backoff, 2 attempts) come due while the breaker is open: they wait instead
    // of failing for good.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (status, letters) = api.call("GET", "/v1/dead-letters", None).await;
    assert_eq!(status, 200);
    assert_eq!(letters["dead_letters"], json!([]), "{letters}");
    node.shutdown().await;
}

/// A webhook target's `rate_limit` is kept and shown, and a job without one shows none.
#[tokio::test]
async fn a_targets_rate_limit_is_stored_and_shown() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let api = Api::new(node.addr());
    let limited = api
        .create(json!({
            "schedule": {"after": "1h"},
            "target": {"webhook": {"url": "http://127.0.0.1:9/hook", "rate_limit": 10}},
        }))
        .await;
    assert_eq!(limited["target"]["webhook"]["rate_limit"], 10, "{limited}");
    let id = limited["id"].as_str().unwrap();
    let (_, read) = api.call("GET", &format!("/v1/jobs/{id}"), None).await;
    assert_eq!(read["target"]["webhook"]["rate_limit"], 10, "{read}");
    let plain = api
        .create(json!({
            "schedule": {"after": "1h"},
            "target": {"webhook": {"url": "http://127.0.0.1:9/hook"}},
        }))
        .await;
    assert!(
        plain["target"]["webhook"].get("rate_limit").is_none(),
        "{plain}"
    );
    node.shutdown().await;
}
