//! The connection settings' tests: parsing and start-time checks, which namespace may use which
//! connection, and which resources a target may name through it.

use std::collections::BTreeMap;

use hourglass_core::Target;

use super::*;

fn parse(toml_text: &str) -> ConnectionConfig {
    serde_json::from_value(toml_like(toml_text)).unwrap()
}

// The tests describe connections as JSON objects; the binary reads the same fields from TOML.
fn toml_like(json: &str) -> serde_json::Value {
    serde_json::from_str(json).unwrap()
}

#[test]
fn a_namespace_list_limits_who_may_use_a_connection() {
    let events =
        parse(r#"{"kind": "eventbridge", "region": "eu-central-1", "namespaces": ["acme"]}"#);
    let bus = parse(r#"{"kind": "nats", "url": "nats://127.0.0.1:4222"}"#);
    let connections = Connections::new(BTreeMap::from([
        ("events".to_string(), events),
        ("bus".to_string(), bus),
    ]))
    .unwrap();
    assert!(connections.check("acme", "events", "eventbridge").is_ok());
    let refused = connections
        .check("other", "events", "eventbridge")
        .unwrap_err();
    // The same answer as for a name that does not exist.
    assert_eq!(
        refused.to_string(),
        connections
            .check("other", "nope", "eventbridge")
            .unwrap_err()
            .to_string()
            .replace("nope", "events")
    );
    assert!(connections.check("other", "bus", "nats").is_ok());
    assert!(matches!(
        connections.check("acme", "bus", "sqs"),
        Err(ConnectionRefused::WrongKind { .. })
    ));
}

#[test]
fn an_aws_connection_serves_every_aws_kind_and_nothing_else() {
    for kind in ["eventbridge", "sqs", "sns", "lambda"] {
        assert!(ConnectionKind::Aws.serves(kind));
    }
    for kind in ["nats", "redis_stream", "amqp", "webhook", "queue"] {
        assert!(!ConnectionKind::Aws.serves(kind));
    }
    assert!(ConnectionKind::Redis.serves("redis_stream"));
    assert!(!ConnectionKind::Sqs.serves("sns"));
}

#[test]
fn each_kind_is_checked_for_the_settings_it_needs() {
    let bad = [
        (r#"{"kind": "nats"}"#, "connections.c.url"),
        (
            r#"{"kind": "nats", "url": "redis://x"}"#,
            "connections.c.url",
        ),
        (r#"{"kind": "redis", "url": "::"}"#, "connections.c.url"),
        (
            r#"{"kind": "sqs", "url": "https://x"}"#,
            "connections.c.url",
        ),
        (
            r#"{"kind": "aws", "access_key_id": "a"}"#,
            "connections.c.access_key_id",
        ),
        (
            r#"{"kind": "amqp", "url": "amqp://x", "region": "r"}"#,
            "connections.c.region",
        ),
        (
            r#"{"kind": "aws", "endpoint_url": "not a url"}"#,
            "connections.c.endpoint_url",
        ),
    ];
    for (json, field) in bad {
        let err = parse(json).check("c").unwrap_err();
        assert_eq!(err.setting, field, "{json}: {err}");
    }
    assert!(parse(r#"{"kind": "aws"}"#).check("c").is_ok());
    assert!(
        parse(r#"{"kind": "amqp", "url": "amqps://h/%2f"}"#)
            .check("c")
            .is_ok()
    );
    let err = parse(r#"{"kind": "aws"}"#).check("bad name").unwrap_err();
    assert_eq!(err.setting, "connections.bad name");
    assert!(serde_json::from_str::<ConnectionConfig>(r#"{"kind": "kafka"}"#).is_err());
    assert!(serde_json::from_str::<ConnectionConfig>(r#"{"kind": "aws", "extra": 1}"#).is_err());
}
fn nats(subject: &str) -> Target {
    Target::Nats(hourglass_core::NatsTarget {
        connection: "bus".into(),
        subject: subject.into(),
    })
}

fn amqp(exchange: &str, routing_key: &str) -> Target {
    Target::Amqp(hourglass_core::AmqpTarget {
        connection: "rmq".into(),
        exchange: exchange.into(),
        routing_key: routing_key.into(),
    })
}

fn one(name: &str, json: &str) -> Connections {
    Connections::new(BTreeMap::from([(name.to_string(), parse(json))])).unwrap()
}

#[test]
fn the_nats_systems_subjects_are_refused_whatever_is_listed() {
    let open = one("bus", r#"{"kind": "nats", "url": "nats://127.0.0.1:4222"}"#);
    let everything = one(
        "bus",
        r#"{"kind": "nats", "url": "nats://127.0.0.1:4222", "subjects": [">"]}"#,
    );
    for subject in [
        "$JS.API.STREAM.PURGE.X",
        "$JS.API.STREAM.DELETE.X",
        "$JS.API.STREAM.CREATE.Y",
        "$SYS.REQ.SERVER.PING",
        "$KV.bucket.key",
        "$G",
        "_INBOX.abc.def",
        "_INBOX",
    ] {
        for connections in [&open, &everything] {
            assert!(
                matches!(
                    connections.check_target("acme", &nats(subject)),
                    Err(ConnectionRefused::Reserved { .. })
                ),
                "{subject}"
            );
        }
    }
    // Only the first token counts.
    assert!(open.check_target("acme", &nats("orders.$JS.x")).is_ok());
    assert!(open.check_target("acme", &nats("orders._INBOX")).is_ok());
}
#[test]
fn resources_off_the_lists_are_refused_like_an_unknown_connection() {
    let bus = one(
        "bus",
        r#"{"kind": "nats", "url": "nats://127.0.0.1:4222", "subjects": ["orders.>"]}"#,
    );
    assert!(bus.check_target("acme", &nats("orders.eu")).is_ok());
    let refused = bus.check_target("acme", &nats("billing.eu")).unwrap_err();
    assert!(matches!(
        refused,
        ConnectionRefused::NotAllowed {
            field: "subject",
            ..
        }
    ));
    assert_eq!(
        refused.to_string(),
        "no subject \"billing.eu\" is available to this namespace through the connection \"bus\""
    );

    let rmq = one(
        "rmq",
        r#"{"kind": "amqp", "url": "amqp://h", "exchanges": ["jobs", "app.*"], "routing_keys": ["remind*"]}"#,
    );
    assert!(rmq.check_target("acme", &amqp("jobs", "reminder")).is_ok());
    assert!(
        rmq.check_target("acme", &amqp("app.events", "reminders"))
            .is_ok()
    );
    for (exchange, key, field) in [
        // The default exchange reaches any queue by name: only an explicit "" opens it.
        ("", "reminder", "exchange"),
        ("other", "reminder", "exchange"),
        ("jobs", "other", "routing_key"),
    ] {
        assert!(
            matches!(
                rmq.check_target("acme", &amqp(exchange, key)),
                Err(ConnectionRefused::NotAllowed { field: f, .. }) if f == field
            ),
            "{exchange} {key}"
        );
    }
    let default_exchange = one(
        "rmq",
        r#"{"kind": "amqp", "url": "amqp://h", "exchanges": [""], "routing_keys": ["app.q"]}"#,
    );
    assert!(
        default_exchange
            .check_target("acme", &amqp("", "app.q"))
            .is_ok()
    );
    assert!(
        default_exchange
            .check_target("acme", &amqp("", "other.q"))
            .is_err()
    );

    let aws = one(
        "aws",
        r#"{"kind": "aws", "queue_urls": ["https://sqs.eu-central-1.amazonaws.com/123456789012/app-*"], "functions": []}"#,
    );
    let sqs = |url: &str| {
        Target::Sqs(hourglass_core::SqsTarget {
            connection: "aws".into(),
            queue_url: url.into(),
            group_id: None,
        })
    };
    assert!(
        aws.check_target(
            "acme",
            &sqs("https://sqs.eu-central-1.amazonaws.com/123456789012/app-orders")
        )
        .is_ok()
    );
    assert!(
        aws.check_target(
            "acme",
            &sqs("https://sqs.eu-central-1.amazonaws.com/123456789012/billing")
        )
        .is_err()
    );
    // An empty list allows nothing; a list left out allows everything (sns here).
    let lambda = Target::Lambda(hourglass_core::LambdaTarget {
        connection: "aws".into(),
        function: "f".into(),
    });
    assert!(aws.check_target("acme", &lambda).is_err());
    let sns = Target::Sns(hourglass_core::SnsTarget {
        connection: "aws".into(),
        topic_arn: "arn:aws:sns:eu-central-1:123456789012:t".into(),
        group_id: None,
    });
    assert!(aws.check_target("acme", &sns).is_ok());
    assert_eq!(
        aws.get("aws").unwrap().unlimited_lists(),
        ["buses", "topic_arns"]
    );
}

#[test]
fn resource_lists_are_checked_at_start() {
    let bad = [
        (
            r#"{"kind": "redis", "url": "redis://h", "subjects": ["a"]}"#,
            "connections.c.subjects",
        ),
        (
            r#"{"kind": "sqs", "topic_arns": ["arn:aws:sns:r:1:t"]}"#,
            "connections.c.topic_arns",
        ),
        (
            r#"{"kind": "nats", "url": "nats://h", "subjects": ["a.>.b"]}"#,
            "connections.c.subjects",
        ),
        (
            r#"{"kind": "nats", "url": "nats://h", "subjects": ["a..b"]}"#,
            "connections.c.subjects",
        ),
        (
            r#"{"kind": "redis", "url": "redis://h", "streams": ["a*b"]}"#,
            "connections.c.streams",
        ),
        (
            r#"{"kind": "redis", "url": "redis://h", "streams": [""]}"#,
            "connections.c.streams",
        ),
        (
            r#"{"kind": "redis", "url": "redis://h", "streams": ["é*é"]}"#,
            "connections.c.streams",
        ),
    ];
    for (json, field) in bad {
        let err = parse(json).check("c").unwrap_err();
        assert_eq!(err.setting, field, "{json}: {err}");
    }
    assert!(
        parse(r#"{"kind": "amqp", "url": "amqp://h", "exchanges": ["", "jobs.*"]}"#)
            .check("c")
            .is_ok()
    );
    assert!(
        parse(r#"{"kind": "aws", "buses": ["orders"], "functions": ["app-*"]}"#)
            .check("c")
            .is_ok()
    );
}
