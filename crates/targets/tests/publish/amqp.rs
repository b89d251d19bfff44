use hourglass_core::{AmqpTarget, Target};
use hourglass_engine::Verdict;
use lapin::options::{
    BasicGetOptions, ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{Channel, Connection, ConnectionProperties, ExchangeKind};
use serde_json::json;

use crate::support::*;

fn target(exchange: &str, routing_key: &str) -> Target {
    Target::Amqp(AmqpTarget {
        connection: "rmq".into(),
        exchange: exchange.into(),
        routing_key: routing_key.into(),
    })
}

async fn broker() -> hourglass_targets::Router {
    router(vec![(
        "rmq",
        json!({"kind": "amqp", "url": server("HOURGLASS_TEST_AMQP_URL")}),
    )])
    .await
}

/// An exchange with one queue bound to routing key `reminder`.
async fn exchange_with_queue() -> (Channel, String, String) {
    let conn = Connection::connect(
        &server("HOURGLASS_TEST_AMQP_URL"),
        ConnectionProperties::default(),
    )
    .await
    .unwrap();
    let channel = conn.create_channel().await.unwrap();
    let exchange = unique("hg.");
    let queue = unique("hg.q.");
    channel
        .exchange_declare(
            exchange.as_str().into(),
            ExchangeKind::Direct,
            ExchangeDeclareOptions {
                auto_delete: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await
        .unwrap();
    channel
        .queue_declare(
            queue.as_str().into(),
            QueueDeclareOptions {
                auto_delete: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await
        .unwrap();
    channel
        .queue_bind(
            queue.as_str().into(),
            exchange.as_str().into(),
            "reminder".into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    (channel, exchange, queue)
}

fn text(value: Option<&AMQPValue>) -> String {
    match value {
        Some(AMQPValue::LongString(s)) => String::from_utf8(s.as_bytes().to_vec()).unwrap(),
        other => panic!("expected a string header, got {other:?}"),
    }
}

#[tokio::test]
async fn a_confirmed_message_is_persistent_and_carries_the_occurrence() {
    let (channel, exchange, queue) = exchange_with_queue().await;
    let router = broker().await;
    let occ = occurrence(target(&exchange, "reminder"), r#"{"flight":"LH 400"}"#, 1);
    assert_eq!(publish(&router, &occ).await, Verdict::Delivered);
    let got = channel
        .basic_get(queue.as_str().into(), BasicGetOptions { no_ack: true })
        .await
        .unwrap()
        .expect("the message is in the queue");
    assert_eq!(&got.delivery.data[..], br#"{"flight":"LH 400"}"#);
    let props = &got.delivery.properties;
    assert_eq!(
        props.message_id().as_ref().map(|s| s.as_str().to_string()),
        Some(occ.delivery_id().to_string())
    );
    assert_eq!(*props.delivery_mode(), Some(2), "persistent");
    let headers = props.headers().as_ref().expect("headers");
    let inner = headers.inner();
    assert_eq!(text(inner.get("hourglass-job-id")), occ.job_id.to_string());
    assert_eq!(text(inner.get("hourglass-job-type")), "reminder.flight");
    assert_eq!(
        text(inner.get("hourglass-due-at")),
        "2026-11-24T08:11:20.656Z"
    );
    assert_eq!(text(inner.get("hourglass-attempt")), "1");
}

#[tokio::test]
async fn an_unroutable_message_is_retried_not_counted_delivered() {
    let (_channel, exchange, _queue) = exchange_with_queue().await;
    let router = broker().await;
    let occ = occurrence(target(&exchange, "nobody-listens"), "{}", 1);
    assert_retry(
        &publish(&router, &occ).await,
        "routed the message to no queue",
    );
}

#[tokio::test]
async fn a_missing_exchange_is_given_up_and_other_exchanges_keep_publishing() {
    let (channel, exchange, queue) = exchange_with_queue().await;
    let router = broker().await;
    // Warm the good exchange's channel first, so the failure below would hit it if the
    // channels were shared.
    let first = occurrence(target(&exchange, "reminder"), r#"{"n":1}"#, 1);
    assert_eq!(publish(&router, &first).await, Verdict::Delivered);
    let missing = occurrence(target(&unique("hg.none."), "reminder"), "{}", 1);
    assert_give_up(
        &publish(&router, &missing).await,
        "it does not exist or the connection's user may not publish to it",
    );
    let second = occurrence(target(&exchange, "reminder"), r#"{"n":2}"#, 1);
    assert_eq!(publish(&router, &second).await, Verdict::Delivered);
    for n in [1, 2] {
        let got = channel
            .basic_get(queue.as_str().into(), BasicGetOptions { no_ack: true })
            .await
            .unwrap()
            .expect("both messages arrived");
        assert_eq!(got.delivery.data, format!(r#"{{"n":{n}}}"#).into_bytes());
    }
}

#[tokio::test]
async fn the_default_exchange_and_unlisted_routing_keys_are_refused_unless_listed() {
    let (channel, exchange, queue) = exchange_with_queue().await;
    let router = router(vec![(
        "rmq",
        json!({
            "kind": "amqp",
            "url": server("HOURGLASS_TEST_AMQP_URL"),
            "exchanges": [exchange],
            "routing_keys": ["remind*"],
        }),
    )])
    .await;
    // Through the default exchange a routing key reaches any queue by name: another
    // application's queue here. The exchange is not listed, so nothing is sent.
    let sideways = occurrence(target("", &queue), r#"{"n":0}"#, 1);
    assert_give_up(
        &publish(&router, &sideways).await,
        "no exchange \"\" is available to this namespace",
    );
    let off_list = occurrence(target(&exchange, "other"), r#"{"n":0}"#, 1);
    assert_give_up(
        &publish(&router, &off_list).await,
        "no routing key \"other\"",
    );
    let empty = channel
        .basic_get(queue.as_str().into(), BasicGetOptions { no_ack: true })
        .await
        .unwrap();
    assert!(empty.is_none(), "nothing reached the queue");
    let allowed = occurrence(target(&exchange, "reminder"), r#"{"n":1}"#, 1);
    assert_eq!(publish(&router, &allowed).await, Verdict::Delivered);
}
