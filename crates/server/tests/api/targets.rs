//! Bus and cloud targets at the API: which connections a namespace may name, and the 422s that
//! refuse a target the service could never take. Nothing is published here (the publishers are
//! tested against their servers in crates/targets and crates/hourglass).

use std::collections::BTreeMap;

use hourglass_targets::{ConnectionConfig, Connections};
use serde_json::{Value, json};

use crate::support::{Api, start_node_with, test_config};

const QUEUE: &str = "https://sqs.eu-central-1.amazonaws.com/123456789012/acme-jobs";

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
        (
            "scoped-bus".to_string(),
            parse(json!({"kind": "nats", "url": "nats://127.0.0.1:1", "subjects": ["orders.>"]})),
        ),
        (
            "scoped-rmq".to_string(),
            parse(json!({"kind": "amqp", "url": "amqp://127.0.0.1:1/%2f", "exchanges": ["jobs"], "routing_keys": ["remind*"]})),
        ),
        (
            "scoped-redis".to_string(),
            parse(json!({"kind": "redis", "url": "redis://127.0.0.1:1", "streams": ["acme:*"]})),
        ),
        (
            "scoped-aws".to_string(),
            parse(json!({
                "kind": "aws",
                "region": "eu-central-1",
                "endpoint_url": "http://127.0.0.1:1",
                "queue_urls": [QUEUE],
                "topic_arns": ["arn:aws:sns:eu-central-1:123456789012:acme-*"],
                "buses": ["acme"],
                "functions": [],
            })),
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
    assert_eq!(
        names,
        [
            "acme-only",
            "aws",
            "scoped-aws",
            "scoped-bus",
            "scoped-redis",
            "scoped-rmq"
        ]
    );
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
    let others = other["connections"].as_array().unwrap();
    assert_eq!(others.len(), 5, "{other}");
    assert!(
        others.iter().all(|c| c["published"] == Value::Null),
        "shared connections show no counts: {other}"
    );

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
            json!({"sqs": {"connection": "aws", "queue_url": QUEUE, "group_id": "with space"}}),
            json!({}),
            "invalid_field",
            "target.sqs.group_id",
        ),
        (
            json!({"sqs": {"connection": "aws", "queue_url": QUEUE, "delay": 5}}),
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
        // A queue URL with a host and the queue's path, nothing else.
        (
            json!({"sqs": {"connection": "aws", "queue_url": "https:///q"}}),
            json!({}),
            "invalid_url",
            "target.sqs.queue_url",
        ),
        (
            json!({"sqs": {"connection": "aws", "queue_url": "https://sqs.eu-central-1.amazonaws.com/"}}),
            json!({}),
            "invalid_url",
            "target.sqs.queue_url",
        ),
        (
            json!({"sqs": {"connection": "aws", "queue_url": "https://sqs.eu-central-1.amazonaws.com/12/q"}}),
            json!({}),
            "invalid_url",
            "target.sqs.queue_url",
        ),
        (
            json!({"sqs": {"connection": "aws", "queue_url": format!("{QUEUE}?Action=DeleteQueue")}}),
            json!({}),
            "invalid_url",
            "target.sqs.queue_url",
        ),
        // A topic ARN with its partition, service, region, account and name.
        (
            json!({"sns": {"connection": "aws", "topic_arn": "arn:::::"}}),
            json!({}),
            "invalid_field",
            "target.sns.topic_arn",
        ),
        (
            json!({"sns": {"connection": "aws", "topic_arn": "arn:aws:lambda:eu-central-1:123456789012:function:f"}}),
            json!({}),
            "invalid_field",
            "target.sns.topic_arn",
        ),
        (
            json!({"sns": {"connection": "aws", "topic_arn": "arn:aws:sns:eu-central-1:1234:t"}}),
            json!({}),
            "invalid_field",
            "target.sns.topic_arn",
        ),
        (
            json!({"lambda": {"connection": "aws", "function": "arn:aws:sns:eu-central-1:123456789012:t"}}),
            json!({}),
            "invalid_field",
            "target.lambda.function",
        ),
        (
            json!({"eventbridge": {"connection": "aws", "bus": "arn:aws:sns:eu-central-1:123456789012:b", "source": "s", "detail_type": "d"}}),
            json!({}),
            "invalid_field",
            "target.eventbridge.bus",
        ),
        // EventBridge reserves "aws." whatever its case.
        (
            json!({"eventbridge": {"connection": "aws", "bus": "b", "source": "AWS.events", "detail_type": "d"}}),
            json!({}),
            "invalid_field",
            "target.eventbridge.source",
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

#[tokio::test]
async fn well_formed_cloud_names_are_taken() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(dir.path());
    config.connections = connections();
    let node = start_node_with(config).await;
    let api = Api::new(node.addr());
    for target in [
        json!({"sqs": {"connection": "aws", "queue_url": QUEUE}}),
        json!({"sqs": {"connection": "aws", "queue_url": "http://127.0.0.1:5000/123456789012/jobs.fifo"}}),
        json!({"sns": {"connection": "aws", "topic_arn": "arn:aws-cn:sns:cn-north-1:123456789012:t.fifo"}}),
        json!({"lambda": {"connection": "aws", "function": "reminders"}}),
        json!({"lambda": {"connection": "aws", "function": "reminders:prod"}}),
        json!({"lambda": {"connection": "aws", "function": "123456789012:function:reminders"}}),
        json!({"lambda": {"connection": "aws", "function": "arn:aws:lambda:eu-central-1:123456789012:function:reminders:7"}}),
        json!({"eventbridge": {"connection": "aws", "bus": "arn:aws:events:eu-central-1:123456789012:event-bus/orders", "source": "awsome.app", "detail_type": "d"}}),
    ] {
        let (status, created) = call_in(
            &api,
            "acme",
            "POST",
            "/v1/jobs",
            Some(job(target.clone(), json!({}))),
        )
        .await;
        assert_eq!(status, 201, "{target}: {created}");
    }
    node.shutdown().await;
}

#[tokio::test]
async fn the_nats_systems_subjects_are_refused_at_create() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(dir.path());
    config.connections = connections();
    let node = start_node_with(config).await;
    let api = Api::new(node.addr());
    for connection in ["acme-only", "scoped-bus"] {
        for subject in [
            "$JS.API.STREAM.PURGE.ORDERS",
            "$JS.API.STREAM.DELETE.ORDERS",
            "$JS.API.STREAM.UPDATE.ORDERS",
            "$JS.API.STREAM.CREATE.MINE",
            "$SYS.REQ.SERVER.PING",
            "_INBOX.abc",
        ] {
            let target = json!({"nats": {"connection": connection, "subject": subject}});
            let (status, refused) = call_in(
                &api,
                "acme",
                "POST",
                "/v1/jobs",
                Some(job(target.clone(), json!({"name": "ORDERS"}))),
            )
            .await;
            assert_eq!(status, 422, "{target}: {refused}");
            assert_eq!(refused["error"]["code"], "invalid_field", "{refused}");
            assert_eq!(
                refused["error"]["field"], "target.nats.subject",
                "{refused}"
            );
        }
    }
    let (_, list) = call_in(&api, "acme", "GET", "/v1/jobs", None).await;
    assert_eq!(list["jobs"].as_array().unwrap().len(), 0, "{list}");
    node.shutdown().await;
}

#[tokio::test]
async fn resources_off_a_connections_lists_get_the_answer_an_unknown_connection_gets() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = test_config(dir.path());
    config.connections = connections();
    let node = start_node_with(config).await;
    let api = Api::new(node.addr());
    let other_queue = "https://sqs.eu-central-1.amazonaws.com/123456789012/billing";
    let refused = [
        (
            json!({"nats": {"connection": "scoped-bus", "subject": "billing.eu"}}),
            "target.nats.subject",
            "billing.eu",
        ),
        // The default exchange routes to any queue by name: not listed, not open.
        (
            json!({"amqp": {"connection": "scoped-rmq", "exchange": "", "routing_key": "billing.q"}}),
            "target.amqp.exchange",
            "",
        ),
        (
            json!({"amqp": {"connection": "scoped-rmq", "exchange": "jobs", "routing_key": "billing"}}),
            "target.amqp.routing_key",
            "billing",
        ),
        (
            json!({"redis_stream": {"connection": "scoped-redis", "stream": "billing:jobs"}}),
            "target.redis_stream.stream",
            "billing:jobs",
        ),
        (
            json!({"sqs": {"connection": "scoped-aws", "queue_url": other_queue}}),
            "target.sqs.queue_url",
            other_queue,
        ),
        (
            json!({"sns": {"connection": "scoped-aws", "topic_arn": "arn:aws:sns:eu-central-1:123456789012:billing"}}),
            "target.sns.topic_arn",
            "arn:aws:sns:eu-central-1:123456789012:billing",
        ),
        (
            json!({"eventbridge": {"connection": "scoped-aws", "bus": "billing", "source": "s", "detail_type": "d"}}),
            "target.eventbridge.bus",
            "billing",
        ),
        // An empty list allows nothing.
        (
            json!({"lambda": {"connection": "scoped-aws", "function": "acme-reminders"}}),
            "target.lambda.function",
            "acme-reminders",
        ),
    ];
    let (_, unknown) = call_in(
        &api,
        "acme",
        "POST",
        "/v1/jobs",
        Some(job(
            json!({"nats": {"connection": "nope", "subject": "a"}}),
            json!({}),
        )),
    )
    .await;
    let mut messages = Vec::new();
    for (target, field, value) in refused {
        let (status, answer) = call_in(
            &api,
            "acme",
            "POST",
            "/v1/jobs",
            Some(job(target.clone(), json!({}))),
        )
        .await;
        assert_eq!(status, 422, "{target}: {answer}");
        // The code an unknown connection gets, naming the field that is off the list.
        assert_eq!(
            answer["error"]["code"], unknown["error"]["code"],
            "{answer}"
        );
        assert_eq!(answer["error"]["field"], field, "{answer}");
        let message = answer["error"]["message"].as_str().unwrap().to_string();
        assert!(
            message.contains(&format!("{value:?} is available to this namespace")),
            "{message}"
        );
        messages.push(message.replace(&format!("{value:?}"), "V"));
    }
    // Nothing in the answer depends on the resource: the NATS, Redis and SQS ones differ only by
    // the value given, the kind of resource and the connection's name.
    assert!(
        messages[0].starts_with("no subject V is available"),
        "{}",
        messages[0]
    );
    assert_eq!(
        messages[3]
            .replace("stream", "subject")
            .replace("scoped-redis", "scoped-bus"),
        messages[0]
    );
    let (_, list) = call_in(&api, "acme", "GET", "/v1/jobs", None).await;
    assert_eq!(list["jobs"].as_array().unwrap().len(), 0, "{list}");

    // What the lists name is taken.
    for target in [
        json!({"nats": {"connection": "scoped-bus", "subject": "orders.eu.new"}}),
        json!({"amqp": {"connection": "scoped-rmq", "exchange": "jobs", "routing_key": "reminder"}}),
        json!({"redis_stream": {"connection": "scoped-redis", "stream": "acme:jobs"}}),
        json!({"sqs": {"connection": "scoped-aws", "queue_url": QUEUE}}),
        json!({"sns": {"connection": "scoped-aws", "topic_arn": "arn:aws:sns:eu-central-1:123456789012:acme-news"}}),
        json!({"eventbridge": {"connection": "scoped-aws", "bus": "acme", "source": "s", "detail_type": "d"}}),
    ] {
        let (status, created) = call_in(
            &api,
            "acme",
            "POST",
            "/v1/jobs",
            Some(job(target.clone(), json!({}))),
        )
        .await;
        assert_eq!(status, 201, "{target}: {created}");
    }
    node.shutdown().await;
}
