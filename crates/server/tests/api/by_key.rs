//! Jobs named by their key instead of their id: `/v1/jobs/key:<key>` on every job route, the key
//! percent-decoded (so it may hold `/` and spaces), scoped to the namespace, freed by a cancel.

use std::time::Duration;

use serde_json::json;

use crate::support::{Api, Receiver, start_node};

/// The key `nightly export/a b`, as one path segment.
const KEY: &str = "nightly export/a b";
const KEYED: &str = "key:nightly%20export%2Fa%20b";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_job_route_accepts_a_key_in_place_of_the_id() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let api = Api::new(node.addr());
    let receiver = Receiver::start().await;
    let recv_addr = receiver.addr();
    let job = api
        .create(json!({
            "key": KEY,
            "schedule": {"every": "1h"},
            "target": {"webhook": {"url": format!("http://{recv_addr}/hook")}},
        }))
        .await;
    let id = job["id"].as_str().unwrap().to_string();
    // Another job, so a lookup that ignored the key would be seen.
    api.create(json!({
        "key": "nightly export",
        "schedule": {"every": "1h"},
        "target": {"webhook": {"url": format!("http://{recv_addr}/other")}},
    }))
    .await;

    let (status, got) = api.call("GET", &format!("/v1/jobs/{KEYED}"), None).await;
    assert_eq!(status, 200, "{got}");
    assert_eq!(got["id"], id.as_str());
    assert_eq!(got["key"], KEY);

    let (status, patched) = api
        .call(
            "PATCH",
            &format!("/v1/jobs/{KEYED}"),
            Some(json!({"payload": {"edited": true}})),
        )
        .await;
    assert_eq!(status, 200, "{patched}");
    assert_eq!(patched["id"], id.as_str());
    assert_eq!(patched["payload"], json!({"edited": true}));

    let (status, paused) = api
        .call("POST", &format!("/v1/jobs/{KEYED}/pause"), None)
        .await;
    assert_eq!(status, 200, "{paused}");
    assert_eq!(paused["state"], "paused");
    let (status, resumed) = api
        .call("POST", &format!("/v1/jobs/{KEYED}/resume"), None)
        .await;
    assert_eq!(status, 200, "{resumed}");
    assert_eq!(resumed["state"], "active");

    let (status, triggered) = api
        .call("POST", &format!("/v1/jobs/{KEYED}/trigger"), None)
        .await;
    assert_eq!(status, 200, "{triggered}");
    let delivery_id = triggered["delivery_id"].as_str().unwrap().to_string();
    receiver
        .wait_for(Duration::from_secs(10), "the triggered delivery", |d| {
            d.iter().any(|x| x.header("webhook-id") == delivery_id)
        })
        .await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let runs = loop {
        let (status, page) = api
            .call("GET", &format!("/v1/jobs/{KEYED}/runs?limit=10"), None)
            .await;
        assert_eq!(status, 200, "{page}");
        if !page["runs"].as_array().unwrap().is_empty() {
            break page;
        }
        assert!(tokio::time::Instant::now() < deadline, "no run recorded");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(runs["runs"][0]["outcome"], "delivered");

    // A cancel frees the key: the job is then found by its id only.
    let (status, cancelled) = api.call("DELETE", &format!("/v1/jobs/{KEYED}"), None).await;
    assert_eq!(status, 200, "{cancelled}");
    assert_eq!(cancelled["state"], "cancelled");
    let (status, error) = api.call("GET", &format!("/v1/jobs/{KEYED}"), None).await;
    assert_eq!(status, 404, "{error}");
    assert_eq!(error["error"]["code"], "not_found");
    let (status, by_id) = api.call("GET", &format!("/v1/jobs/{id}"), None).await;
    assert_eq!(status, 200, "{by_id}");
    assert_eq!(by_id["state"], "cancelled");
    node.shutdown().await;
}

#[tokio::test]
async fn an_unknown_key_is_not_found_and_a_malformed_one_names_the_id() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node(dir.path()).await;
    let api = Api::new(node.addr());
    for (method, suffix) in [
        ("GET", ""),
        ("PATCH", ""),
        ("DELETE", ""),
        ("POST", "/pause"),
        ("POST", "/resume"),
        ("POST", "/trigger"),
        ("GET", "/runs"),
    ] {
        let body = (method == "PATCH").then(|| json!({"payload": 1}));
        let (status, error) = api
            .call(
                method,
                &format!("/v1/jobs/key:nobody%2Fhas%20it{suffix}"),
                body.clone(),
            )
            .await;
        assert_eq!(status, 404, "{method} {suffix}: {error}");
        assert_eq!(error["error"]["code"], "not_found");

        for bad in [
            "key:",
            "key:tab%09key",
            "nightly-export",
            &format!("key:{}", "k".repeat(257)),
        ] {
            let (status, error) = api
                .call(method, &format!("/v1/jobs/{bad}{suffix}"), body.clone())
                .await;
            assert_eq!(status, 400, "{method} {bad}{suffix}: {error}");
            assert_eq!(error["error"]["code"], "invalid_id");
            assert_eq!(error["error"]["field"], "id");
        }
    }
    node.shutdown().await;
}
