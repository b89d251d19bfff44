use hourglass_core::{RedisStreamTarget, Target};
use hourglass_engine::Verdict;
use redis::AsyncCommands;
use serde_json::json;

use crate::support::*;

fn target(stream: &str) -> Target {
    Target::RedisStream(RedisStreamTarget {
        connection: "r".into(),
        stream: stream.into(),
    })
}

async fn streams(url: &str) -> hourglass_targets::Router {
    router(vec![("r", json!({"kind": "redis", "url": url}))]).await
}

#[tokio::test]
async fn an_entry_carries_the_payload_and_the_occurrence() {
    let url = server("HOURGLASS_TEST_REDIS_URL");
    let router = streams(&url).await;
    let stream = unique("hg:");
    let occ = occurrence(target(&stream), r#"{"flight":"LH 400"}"#, 3);
    assert_eq!(publish(&router, &occ).await, Verdict::Delivered);
    let mut redis = redis::Client::open(url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let entries: redis::streams::StreamRangeReply = redis.xrange_all(&stream).await.unwrap();
    assert_eq!(entries.ids.len(), 1);
    let entry = &entries.ids[0];
    let field = |name: &str| -> String {
        entry
            .get(name)
            .unwrap_or_else(|| panic!("no {name} field in {:?}", entry.map))
    };
    assert_eq!(field("payload"), r#"{"flight":"LH 400"}"#);
    assert_eq!(field("delivery_id"), occ.delivery_id().to_string());
    assert_eq!(field("job_id"), occ.job_id.to_string());
    assert_eq!(field("job_type"), "reminder.flight");
    assert_eq!(field("due_at"), "2026-11-24T08:11:20.656Z");
    assert_eq!(field("attempt"), "3");
    let _: () = redis.del(&stream).await.unwrap();
}

#[tokio::test]
async fn a_key_of_another_type_is_given_up() {
    let url = server("HOURGLASS_TEST_REDIS_URL");
    let key = unique("hg:");
    let mut redis = redis::Client::open(url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let _: () = redis.set(&key, "a string").await.unwrap();
    let router = streams(&url).await;
    let occ = occurrence(target(&key), "{}", 1);
    // Said without Redis's own text, and the same as for a key the user may not write.
    assert_give_up(
        &publish(&router, &occ).await,
        "the key holds something other than a stream, or the connection's user may not write it",
    );
    let _: () = redis.del(&key).await.unwrap();
}

#[tokio::test]
async fn an_unreachable_server_is_retried_and_the_retry_keeps_the_delivery_id() {
    let router = streams(&format!("redis://127.0.0.1:{}", closed_port())).await;
    let stream = unique("hg:");
    let occ = occurrence(target(&stream), "{}", 1);
    assert_retry(&publish(&router, &occ).await, "redis");
    // The same occurrence through a reachable connection: its id has not changed.
    let url = server("HOURGLASS_TEST_REDIS_URL");
    let good = streams(&url).await;
    assert_eq!(publish(&good, &again(&occ)).await, Verdict::Delivered);
    let mut redis = redis::Client::open(url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let entries: redis::streams::StreamRangeReply = redis.xrange_all(&stream).await.unwrap();
    let id: String = entries.ids[0].get("delivery_id").unwrap();
    assert_eq!(id, occ.delivery_id().to_string());
    let _: () = redis.del(&stream).await.unwrap();
}

#[tokio::test]
async fn a_stream_off_the_connections_list_is_given_up_and_not_written() {
    let url = server("HOURGLASS_TEST_REDIS_URL");
    let prefix = unique("hg:app:");
    let router = router(vec![(
        "r",
        json!({"kind": "redis", "url": url, "streams": [format!("{prefix}:*")]}),
    )])
    .await;
    let mut redis = redis::Client::open(url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    // Another application's key: the job is refused before anything reaches Redis.
    let other = unique("hg:other:");
    let occ = occurrence(target(&other), "{}", 1);
    assert_give_up(
        &publish(&router, &occ).await,
        "is available to this namespace through the connection",
    );
    let exists: bool = redis.exists(&other).await.unwrap();
    assert!(!exists, "nothing was written to {other}");
    let mine = format!("{prefix}:jobs");
    let occ = occurrence(target(&mine), "{}", 1);
    assert_eq!(publish(&router, &occ).await, Verdict::Delivered);
    let _: () = redis.del(&mine).await.unwrap();
}
