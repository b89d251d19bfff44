//! Bus and cloud targets at the API: which connections a namespace may name, and the 422s that
//! refuse a target the service could never take. Nothing is published here (the publishers are
//! tested against their servers in crates/targets and crates/hourglass).

use std::collections::BTreeMap;

use hourglass_targets::{ConnectionConfig, Connections};
use serde_json::{Value, json};

use crate::support::{Api, start_node_with, test_config};

fn connections() -> Connections {
    let parse = |v: Value| serde_json::from_value::<ConnectionConfig>(v).unwrap();
    Connections::new(BTreeMap::from([
        (
            "aws".to_string(),
            parse(
                json!({"kind": "aws", "region": "us-east-1", "endpoint_url": "http://127.0.0.1:1"}),
            ),
        ),
        (
            "acme-only".to_string(),
            parse(json!({"kind": "nats", "url": "nats://127.0.0.1:1", "namespaces": ["acme"]})),
        ),
    ]))
    .unwrap()
}

/// A request in `namespace` (development mode takes it from the header).
async fn call_in(
    api: &Api,
    namespace: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let mut request = api
        .client
        .request(method, format!("{}{path}", api.base))
        .header("hourglass-namespace", namespace);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

fn job(target: Value, payload: Value) -> Value {
    json!({"schedule": {"after": "1h"}, "target": target, "payload": payload})
}

#[tokio::test]
async fn a_namespace_sees_and_uses_only_the_connections_it_may() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(dir.path());
    config.connections = connections();
    let node = start_node_with(config).await;
    let api = Api::new(node.addr());

    let (status, listed) = call_in(&api, "acme", "GET", "/v1/connections", None).await;
    assert_eq!(status, 200);
    let names: Vec<&str> = listed["connections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["acme-only", "aws"]);
    assert_eq!(listed["connections"][0]["kind"], "nats");
    assert_eq!(listed["connections"][0]["published"]["delivered"], 0);
    // A connection other namespaces share shows no counts: they would be theirs too (issue 39,
    // defect 12).
    assert_eq!(
        listed["connections"][1]["published"],
        Value::Null,
        "{listed}"
    );
    let (_, other) = call_in(&api, "other", "GET", "/v1/connections", None).await;
    assert_eq!(other["connections"].as_array().unwrap().len(), 1, "{other}");
    assert_eq!(other["connections"][0]["published"], Value::Null, "{other}");

    let nats = json!({"nats": {"connection": "acme-only", "subject": "jobs.reminder"}});
    let (status, created) = call_in(
        &api,
        "acme",
        "POST",
        "/v1/jobs",
        Some(job(nats.clone(), json!({"n": 1}))),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    // The target comes back as it was given.
    assert_eq!(created["target"], nats);

    // Another namespace gets the answer a connection that does not exist gets.
    let (status, refused) = call_in(
        &api,
        "other",
        "POST",
        "/v1/jobs",
        Some(job(nats, json!({}))),
    )
    .await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(refused["error"]["code"], "unknown_connection");
    assert_eq!(refused["error"]["field"], "target.nats.connection");
    let (_, missing) = call_in(
        &api,
        "other",
        "POST",
        "/v1/jobs",
        Some(job(
            json!({"nats": {"connection": "nope", "subject": "a"}}),
            json!({}),
        )),
    )
    .await;
    assert_eq!(missing["error"]["code"], "unknown_connection");
    assert_eq!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .replace("acme-only", "X"),
        missing["error"]["message"]
            .as_str()
            .unwrap()
            .replace("nope", "X"),
    );
    node.shutdown().await;
}

#[tokio::test]
async fn a_target_the_service_could_never_take_is_refused_naming_its_field() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(dir.path());
    config.connections = connections();
    let node = start_node_with(config).await;
    let api = Api::new(node.addr());
    let cases = [
        (
            json!({"sqs": {"connection": "acme-only", "queue_url": "https://q"}}),
            json!({}),
            "invalid_field",
            "target.sqs.connection",
        ),
        (
            json!({"sqs": {"connection": "aws", "queue_url": "not a url"}}),
            json!({}),
            "invalid_url",
            "target.sqs.queue_url",
        ),
        (
            json!({"sqs": {"connection": "aws", "queue_url": "https://q", "group_id": "with space"}}),
            json!({}),
            "invalid_field",
            "target.sqs.group_id",
        ),
        (
            json!({"sqs": {"connection": "aws", "queue_url": "https://q", "delay": 5}}),
            json!({}),
            "unknown_field",
            "target.sqs.delay",
        ),
        (
            json!({"sqs": {"connection": "aws"}}),
            json!({}),
            "missing_field",
            "target.sqs.queue_url",
        ),
        (
            json!({"sns": {"connection": "aws", "topic_arn": "reminders"}}),
            json!({}),
            "invalid_field",
            "target.sns.topic_arn",
        ),
        (
            json!({"eventbridge": {"connection": "aws", "bus": "b", "source": "s", "detail_type": "d"}}),
            json!([1]),
            "invalid_field",
            "payload",
        ),
        (
            json!({"eventbridge": {"connection": "aws", "bus": "b", "source": "aws.ec2", "detail_type": "d"}}),
            json!({}),
            "invalid_field",
            "target.eventbridge.source",
        ),
        (
            json!({"eventbridge": {"connection": "aws", "bus": "b", "source": "s", "detail_type": ""}}),
            json!({}),
            "invalid_field",
            "target.eventbridge.detail_type",
        ),
        (
            json!({"lambda": {"connection": "aws", "function": "has space"}}),
            json!({}),
            "invalid_field",
            "target.lambda.function",
        ),
        (
            json!({"nats": {"connection": "acme-only", "subject": "jobs.*"}}),
            json!({}),
            "invalid_field",
            "target.nats.subject",
        ),
        (
            json!({"nats": {"connection": "acme-only", "subject": "jobs..x"}}),
            json!({}),
            "invalid_field",
            "target.nats.subject",
        ),
        (
            json!({"amqp": {"connection": "aws", "exchange": "x"}}),
            json!({}),
            "invalid_field",
            "target.amqp.connection",
        ),
        (
            json!({"nats": {"connection": "acme-only", "subject": "a"}, "queue": "q"}),
            json!({}),
            "invalid_target",
            "target",
        ),
    ];
    for (target, payload, code, field) in cases {
        let (status, refused) = call_in(
            &api,
            "acme",
            "POST",
            "/v1/jobs",
            Some(job(target.clone(), payload)),
        )
        .await;
        assert_eq!(status, 422, "{target}: {refused}");
        assert_eq!(refused["error"]["code"], code, "{target}: {refused}");
        assert_eq!(refused["error"]["field"], field, "{target}: {refused}");
    }
    // Nothing was created by any of them.
    let (_, list) = call_in(&api, "acme", "GET", "/v1/jobs", None).await;
    assert_eq!(list["jobs"].as_array().unwrap().len(), 0, "{list}");

    // PATCH checks the same way.
    let created = call_in(
        &api,
        "acme",
        "POST",
        "/v1/jobs",
        Some(job(json!({"queue": "q"}), json!({}))),
    )
    .await
    .1;
    let id = created["id"].as_str().unwrap();
    let (status, refused) = call_in(
        &api,
        "acme",
        "PATCH",
        &format!("/v1/jobs/{id}"),
        Some(json!({"target": {"nats": {"connection": "acme-only", "subject": "a b"}}})),
    )
    .await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(refused["error"]["field"], "target.nats.subject");
    node.shutdown().await;
}
