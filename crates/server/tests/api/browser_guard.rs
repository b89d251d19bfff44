//! A web page cannot drive the API (issue 39, defect 7): every request that may carry a body
//! needs `Content-Type: application/json`, empty ones too (what `fetch` sends without a
//! preflight, `text/plain`, a form or no type, is refused with 415), and in development mode the
//! `Host` header must name this machine (DNS rebinding is refused with 421).

use hourglass_server::auth::{ApiKeyConfig, hash_key};
use serde_json::{Value, json};

use crate::support::{Api, start_node_with, test_config};

/// Sends `method path` with the given content type (none when `None`) and `Host` (reqwest's own
/// when `None`) and body; answers the status and the error code, if any.
async fn send(
    api: &Api,
    method: &str,
    path: &str,
    content_type: Option<&str>,
    host: Option<&str>,
    body: &str,
) -> (u16, Value) {
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let mut request = api
        .client
        .request(method, format!("{}{path}", api.base))
        .body(body.to_owned());
    if let Some(key) = &api.api_key {
        request = request.bearer_auth(key);
    }
    if let Some(ct) = content_type {
        request = request.header("content-type", ct);
    }
    if let Some(host) = host {
        request = request.header("host", host);
    }
    let response = request.send().await.expect("request sent");
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    let code = serde_json::from_str::<Value>(&text)
        .map(|v| v["error"]["code"].clone())
        .unwrap_or(Value::Null);
    (status, code)
}

async fn job(api: &Api) -> String {
    let job = api
        .create(json!({"schedule": {"after": "1h"}, "target": {"queue": "q"}}))
        .await;
    job["id"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn development_mode_wants_json_on_every_write_and_a_local_host() {
    let dir = tempfile::tempdir().unwrap();
    let node = start_node_with(test_config(dir.path())).await;
    let api = Api::new(node.addr());
    let id = job(&api).await;
    let create = r#"{"schedule": {"after": "1h"}, "target": {"queue": "q"}}"#;
    let json = Some("application/json");

    for (method, path, body) in [
        ("POST", "/v1/jobs".to_owned(), create),
        ("POST", format!("/v1/jobs/{id}/pause"), ""),
        ("POST", format!("/v1/jobs/{id}/resume"), ""),
        ("POST", format!("/v1/jobs/{id}/trigger"), ""),
        ("POST", "/v1/signing-secret".to_owned(), ""),
        ("PATCH", format!("/v1/jobs/{id}"), r#"{"type": "t"}"#),
        ("DELETE", format!("/v1/jobs/{id}"), "{}"),
    ] {
        for content_type in [
            None,
            Some("text/plain"),
            Some("application/x-www-form-urlencoded"),
        ] {
            assert_eq!(
                send(&api, method, &path, content_type, None, body).await,
                (415, json!("unsupported_media_type")),
                "{method} {path} with {content_type:?}"
            );
        }
    }
    // Nothing of that changed the job.
    let (_, unchanged) = api.call("GET", &format!("/v1/jobs/{id}"), None).await;
    assert_eq!(
        (unchanged["state"].as_str(), unchanged["type"].as_str()),
        (Some("active"), None)
    );

    // With the JSON type they pass, empty bodies included; a DELETE without a body needs none.
    let path = format!("/v1/jobs/{id}/pause");
    assert_eq!(send(&api, "POST", &path, json, None, "").await.0, 200);
    assert_eq!(
        send(&api, "POST", "/v1/signing-secret", json, None, "")
            .await
            .0,
        200
    );
    let path = format!("/v1/jobs/{id}");
    assert_eq!(send(&api, "DELETE", &path, None, None, "").await.0, 200);

    // DNS rebinding: a page's own name, resolving to 127.0.0.1, is not this node's.
    let port = node.addr().port();
    for host in [
        format!("evil.example:{port}"),
        "10.1.2.3".into(),
        format!("[::]:{port}"),
    ] {
        assert_eq!(
            send(&api, "GET", "/v1/jobs", None, Some(&host), "").await,
            (421, json!("invalid_host")),
            "{host}"
        );
        assert_eq!(
            send(&api, "GET", "/", None, Some(&host), "").await.0,
            421,
            "the dashboard for {host}"
        );
    }
    for host in [
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        "[::1]".into(),
    ] {
        assert_eq!(
            send(&api, "GET", "/v1/jobs", None, Some(&host), "").await.0,
            200,
            "{host}"
        );
    }
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_api_keys_any_host_is_served_and_writes_still_want_json() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(dir.path());
    config.api_keys = vec![ApiKeyConfig {
        sha256: hash_key("k"),
        namespace: Some("acme".into()),
        all_namespaces: false,
        ..Default::default()
    }];
    let node = start_node_with(config).await;
    let api = Api::new(node.addr()).with_key("k");
    let id = job(&api).await;
    let path = format!("/v1/jobs/{id}/pause");
    assert_eq!(
        send(&api, "POST", &path, None, None, "").await,
        (415, json!("unsupported_media_type"))
    );
    let host = Some("hourglass.internal.example");
    assert_eq!(send(&api, "GET", "/v1/jobs", None, host, "").await.0, 200);
    node.shutdown().await;
}
