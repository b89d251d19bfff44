use std::time::Duration;

use async_nats::jetstream;
use hourglass_core::{NatsTarget, Target};
use hourglass_engine::Verdict;
use serde_json::json;

use crate::support::*;

struct Stream {
    js: jetstream::Context,
    name: String,
    subject: String,
}

async fn stream(max_message_size: i32) -> Stream {
    let url = server("HOURGLASS_TEST_NATS_URL");
    let js = jetstream::new(async_nats::connect(&url).await.unwrap());
    let name = unique("HG");
    let root = unique("hg");
    js.create_stream(jetstream::stream::Config {
        name: name.clone(),
        subjects: vec![format!("{root}.>")],
        duplicate_window: Duration::from_secs(120),
        max_message_size,
        ..Default::default()
    })
    .await
    .unwrap();
    Stream {
        js,
        name,
        subject: format!("{root}.reminder"),
    }
}

fn target(subject: &str) -> Target {
    Target::Nats(NatsTarget {
        connection: "bus".into(),
        subject: subject.into(),
    })
}

async fn bus() -> hourglass_targets::Router {
    router(vec![(
        "bus",
        json!({"kind": "nats", "url": server("HOURGLASS_TEST_NATS_URL")}),
    )])
    .await
}

#[tokio::test]
async fn a_jetstream_publish_carries_the_occurrence_and_a_redelivery_is_dropped() {
    let stream = stream(-1).await;
    let router = bus().await;
    let occ = occurrence(target(&stream.subject), r#"{"flight":"LH 400"}"#, 1);
    assert_eq!(publish(&router, &occ).await, Verdict::Delivered);
    // The same occurrence again, as after a crash between publish and completion: the stream
    // recognises its Nats-Msg-Id and keeps one message.
    assert_eq!(publish(&router, &again(&occ)).await, Verdict::Delivered);
    let on_server = stream.js.get_stream(&stream.name).await.unwrap();
    assert_eq!(on_server.get_info().await.unwrap().state.messages, 1);
    let message = on_server.get_raw_message(1).await.unwrap();
    assert_eq!(&message.payload[..], br#"{"flight":"LH 400"}"#);
    let header = |name: &str| {
        message
            .headers
            .get(name)
            .map(|v| v.as_str().to_string())
            .unwrap_or_else(|| panic!("no {name} header"))
    };
    let delivery_id = occ.delivery_id().to_string();
    assert_eq!(header("Nats-Msg-Id"), delivery_id);
    assert_eq!(header("Hourglass-Delivery-Id"), delivery_id);
    assert_eq!(header("Hourglass-Job-Id"), occ.job_id.to_string());
    assert_eq!(header("Hourglass-Job-Type"), "reminder.flight");
    assert_eq!(header("Hourglass-Due-At"), "2026-11-24T08:11:20.656Z");
    assert_eq!(header("Hourglass-Attempt"), "1");
}

#[tokio::test]
async fn a_subject_no_stream_takes_is_retried_and_delivered_once_one_does() {
    let root = unique("hg");
    let router = bus().await;
    let subject = format!("{root}.later");
    let occ = occurrence(target(&subject), r#"{"n":1}"#, 1);
    assert_retry(&publish(&router, &occ).await, "nats");
    // The operator creates the stream; the retry publishes with the same delivery id.
    let js = jetstream::new(
        async_nats::connect(server("HOURGLASS_TEST_NATS_URL"))
            .await
            .unwrap(),
    );
    let name = unique("HG");
    js.create_stream(jetstream::stream::Config {
        name: name.clone(),
        subjects: vec![format!("{root}.>")],
        ..Default::default()
    })
    .await
    .unwrap();
    let retry = again(&occ);
    assert_eq!(publish(&router, &retry).await, Verdict::Delivered);
    let message = js
        .get_stream(&name)
        .await
        .unwrap()
        .get_raw_message(1)
        .await
        .unwrap();
    assert_eq!(
        message.headers.get("Nats-Msg-Id").unwrap().as_str(),
        occ.delivery_id().as_str()
    );
    assert_eq!(
        message.headers.get("Hourglass-Attempt").unwrap().as_str(),
        "2"
    );
}

#[tokio::test]
async fn a_message_larger_than_the_stream_takes_is_given_up() {
    let stream = stream(64).await;
    let router = bus().await;
    let big = format!(r#"{{"text":"{}"}}"#, "x".repeat(200));
    let occ = occurrence(target(&stream.subject), &big, 1);
    assert_give_up(&publish(&router, &occ).await, "nats");
}

#[tokio::test]
async fn an_unreachable_server_is_a_transient_failure() {
    let router = router(vec![(
        "bus",
        json!({"kind": "nats", "url": format!("nats://127.0.0.1:{}", closed_port())}),
    )])
    .await;
    let occ = occurrence(target("hg.nowhere"), "{}", 1);
    assert!(matches!(
        publish(&router, &occ).await,
        Verdict::Retry { .. }
    ));
}

#[tokio::test]
async fn the_jetstream_api_and_reply_inboxes_are_never_published_to() {
    let stream = stream(-1).await;
    // No `subjects` list: even a connection that allows every subject keeps the system's.
    let router = bus().await;
    let kept = occurrence(target(&stream.subject), r#"{"n":1}"#, 1);
    assert_eq!(publish(&router, &kept).await, Verdict::Delivered);
    let api = |verb: &str| format!("$JS.API.STREAM.{verb}.{}", stream.name);
    for subject in [
        api("PURGE"),
        api("DELETE"),
        api("UPDATE"),
        format!("$JS.API.STREAM.CREATE.{}", unique("HG")),
        "$SYS.REQ.SERVER.PING".to_string(),
        format!("_INBOX.{}", unique("x")),
    ] {
        // A job stored before the rule (nothing at create refused it then) meets it at publish.
        let occ = occurrence(target(&subject), r#"{"name":"X","subjects":["x.>"]}"#, 1);
        assert_give_up(&publish(&router, &occ).await, "is reserved");
    }
    // The stream is still there, with its one message.
    let on_server = stream.js.get_stream(&stream.name).await.unwrap();
    assert_eq!(on_server.get_info().await.unwrap().state.messages, 1);
}

#[tokio::test]
async fn a_subject_off_the_connections_list_is_given_up_and_not_sent() {
    let stream = stream(-1).await;
    let root = stream.subject.trim_end_matches(".reminder").to_string();
    let router = router(vec![(
        "bus",
        json!({
            "kind": "nats",
            "url": server("HOURGLASS_TEST_NATS_URL"),
            "subjects": [format!("{root}.reminder"), format!("{root}.orders.>")],
        }),
    )])
    .await;
    // The stream captures `{root}.>`: only the list keeps these out.
    for subject in [format!("{root}.other"), format!("{root}.orders")] {
        let occ = occurrence(target(&subject), "{}", 1);
        assert_give_up(
            &publish(&router, &occ).await,
            "is available to this namespace through the connection",
        );
    }
    let on_server = stream.js.get_stream(&stream.name).await.unwrap();
    assert_eq!(on_server.get_info().await.unwrap().state.messages, 0);
    for subject in [stream.subject.clone(), format!("{root}.orders.eu.new")] {
        let occ = occurrence(target(&subject), "{}", 1);
        assert_eq!(
            publish(&router, &occ).await,
            Verdict::Delivered,
            "{subject}"
        );
    }
    assert_eq!(on_server.get_info().await.unwrap().state.messages, 2);
}
