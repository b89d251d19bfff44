//! `GET /v1/summary`, the dashboard's figures as JSON: they agree with the receiver's ground truth
//! and with `/metrics` (the same figures by name), and they are an admin's to read when the node
//! has API keys, as `/metrics` is (they cover every namespace).

use std::collections::BTreeMap;
use std::time::Duration;

use hourglass_server::auth::{ApiKeyConfig, hash_key};
use serde_json::{Value, json};

use crate::support::{Api, Receiver, start_node_with, test_config};

/// `/metrics` as series name (with its labels, sorted, as written) → value.
async fn scrape(api: &Api) -> BTreeMap<String, f64> {
    let mut request = api.client.get(format!("{}/metrics", api.base));
    if let Some(key) = &api.api_key {
        request = request.bearer_auth(key);
    }
    let response = request.send().await.expect("scrape");
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    text.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (series, value) = l.rsplit_once(' ').expect("series and value");
            (series.to_string(), value.parse().expect("a number"))
        })
        .collect()
}

async fn summary(api: &Api) -> Value {
    let (status, body) = api.call("GET", "/v1/summary", None).await;
    assert_eq!(status, 200, "{body}");
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_summary_agrees_with_the_receiver_and_the_metrics() {
    let dir = tempfile::tempdir().unwrap();
    // Store figures read afresh at every request, so both reads see the final state.
    let mut config = test_config(dir.path());
    config.store_figures_ttl = Duration::ZERO;
    let server = start_node_with(config).await;
    let api = Api::new(server.addr());
    let receiver = Receiver::start().await;
    let recv_addr = receiver.addr();

    let fresh = summary(&api).await;
    for outcome in ["delivered", "retry", "dead_letter", "skipped"] {
        assert_eq!(fresh["node"]["deliveries"][outcome], 0, "{fresh}");
    }
    assert_eq!(fresh["node"]["fire_lateness"]["count"], 0, "{fresh}");
    assert_eq!(fresh["store"]["jobs"]["active"], 0, "{fresh}");

    // Two deliveries that succeed, one that fails for good, one job left waiting an hour, one
    // queue message waiting for a worker.
    let retry = json!({"max_attempts": 1});
    let mut fired = Vec::new();
    for path in ["/status/204", "/status/204", "/status/410"] {
        let job = api
            .create(json!({
                "schedule": {"after": "100ms"},
                "target": {"webhook": {"url": format!("http://{recv_addr}{path}")}},
                "retry": retry,
            }))
            .await;
        fired.push(job["id"].as_str().unwrap().to_string());
    }
    api.create(json!({
        "schedule": {"after": "1h"},
        "target": {"webhook": {"url": format!("http://{recv_addr}/later")}},
    }))
    .await;
    api.create(json!({"schedule": {"after": "1ms"}, "target": {"queue": "q"}}))
        .await;
    receiver
        .wait_for(Duration::from_secs(15), "three deliveries", |d| {
            d.len() >= 3
        })
        .await;
    for id in &fired {
        api.settled_job(id).await;
    }
    // The in-flight gauge drops just after the completion commits; let it settle.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let (figures, metrics) = loop {
        let figures = summary(&api).await;
        let metrics = scrape(&api).await;
        let settled = figures["node"]["in_flight"] == 0
            && metrics["hourglass_in_flight"] == 0.0
            && figures["store"]["queue_messages"]["available"] == 1;
        if settled || tokio::time::Instant::now() >= deadline {
            break (figures, metrics);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let report = format!("\n{figures:#}");

    // Ground truth: what the receiver saw and the jobs were built to do.
    let seen = receiver.deliveries();
    assert_eq!(seen.len(), 3, "no extra deliveries");
    let node = &figures["node"];
    assert_eq!(node["deliveries"]["delivered"], 2, "{report}");
    assert_eq!(node["deliveries"]["dead_letter"], 1, "{report}");
    assert_eq!(node["deliveries"]["retry"], 0, "{report}");
    assert_eq!(node["fire_lateness"]["count"], 3, "{report}");
    assert_eq!(node["in_flight"], 0, "{report}");
    let store = &figures["store"];
    assert_eq!(store["jobs"]["completed"], 2, "{report}");
    assert_eq!(store["jobs"]["failed"], 1, "{report}");
    // The waiting webhook job and the queue message.
    assert_eq!(store["jobs"]["active"], 2, "{report}");
    assert_eq!(store["queue_messages"]["available"], 1, "{report}");
    assert_eq!(store["queue_messages"]["in_flight"], 0, "{report}");

    // The same figures /metrics serves, field for series.
    let series = |name: &str| metrics.get(name).copied().unwrap_or(0.0);
    for outcome in ["delivered", "retry", "dead_letter", "skipped"] {
        assert_eq!(
            node["deliveries"][outcome].as_f64(),
            Some(series(&format!(
                "hourglass_deliveries_total{{target=\"webhook\",outcome=\"{outcome}\"}}"
            ))),
            "{outcome}{report}"
        );
    }
    let lateness = &node["fire_lateness"];
    assert_eq!(
        lateness["sum_seconds"].as_f64(),
        Some(series("hourglass_fire_lateness_seconds_sum")),
        "{report}"
    );
    let buckets = lateness["buckets"].as_array().unwrap();
    assert_eq!(buckets.len(), 13, "every finite bound{report}");
    let mut previous = 0;
    for bucket in buckets {
        let count = bucket["count"].as_u64().unwrap();
        assert!(count >= previous, "cumulative{report}");
        previous = count;
        let le = bucket["le"].as_f64().unwrap();
        let name = format!("hourglass_fire_lateness_seconds_bucket{{le=\"{le:?}\"}}");
        assert_eq!(
            Some(count as f64),
            metrics.get(&name).copied(),
            "{name}{report}"
        );
    }
    assert_eq!(
        series("hourglass_fire_lateness_seconds_bucket{le=\"+Inf\"}"),
        3.0
    );
    assert_eq!(
        node["timer_queue"].as_f64(),
        Some(series("hourglass_timer_queue"))
    );
    for state in ["active", "paused", "completed", "failed", "cancelled"] {
        assert_eq!(
            store["jobs"][state].as_f64(),
            Some(series(&format!("hourglass_jobs{{state=\"{state}\"}}"))),
            "{state}{report}"
        );
    }
    for state in ["available", "in_flight", "scheduled"] {
        assert_eq!(
            store["queue_messages"][state].as_f64(),
            Some(series(&format!(
                "hourglass_queue_messages{{state=\"{state}\"}}"
            ))),
            "{state}{report}"
        );
    }
    assert_eq!(
        store["due_backlog"].as_f64(),
        Some(series("hourglass_due_backlog"))
    );
    assert_eq!(
        store["due_backlog_age_seconds"].as_f64(),
        Some(series("hourglass_due_backlog_age_seconds"))
    );

    server.shutdown().await;
}

/// The figures cover every namespace: with API keys, an admin key reads them, a namespace key is
/// refused (403, as for /metrics and /v1/nodes), and no key is 401.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_an_admin_key_reads_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(dir.path());
    config.api_keys = vec![
        ApiKeyConfig {
            sha256: hash_key("admin"),
            namespace: None,
            all_namespaces: true,
            ..Default::default()
        },
        ApiKeyConfig {
            sha256: hash_key("tenant"),
            namespace: Some("a".into()),
            all_namespaces: false,
            ..Default::default()
        },
    ];
    let node = start_node_with(config).await;
    let admin = Api::new(node.addr()).with_key("admin");
    let tenant = Api::new(node.addr()).with_key("tenant");
    let anonymous = Api::new(node.addr());

    let figures = summary(&admin).await;
    assert!(figures["store"]["jobs"].is_object(), "{figures}");
    for (who, api, status, code) in [
        ("namespace key", &tenant, 403, "forbidden"),
        ("no key", &anonymous, 401, "unauthorized"),
    ] {
        let (got, body) = api.call("GET", "/v1/summary", None).await;
        assert_eq!(got, status, "{who}: {body}");
        assert_eq!(body["error"]["code"], code, "{who}: {body}");
        assert_eq!(body["error"]["field"], "authorization", "{who}: {body}");
        // /metrics, with the same figures, answers the same.
        let mut request = api.client.get(format!("{}/metrics", api.base));
        if let Some(key) = &api.api_key {
            request = request.bearer_auth(key);
        }
        assert_eq!(request.send().await.unwrap().status(), status, "{who}");
    }
    node.shutdown().await;
}
