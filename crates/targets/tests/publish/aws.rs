//! The AWS kinds against moto's emulator (an emulator: it enforces batch limits, FIFO
//! deduplication and EventBridge rule routing, and echoes Lambda invocations without running
//! them, so Lambda is checked for the request's fate only).

use std::time::Duration;

use aws_config::SdkConfig;
use aws_sdk_sqs::types::QueueAttributeName;
use hourglass_core::{EventBridgeTarget, LambdaTarget, SnsTarget, SqsTarget, Target};
use hourglass_engine::Verdict;
use serde_json::{Value, json};

use crate::support::*;

fn moto() -> String {
    server("HOURGLASS_TEST_MOTO_URL")
}

fn connection(endpoint: &str) -> Value {
    json!({
        "kind": "aws",
        "region": "us-east-1",
        "endpoint_url": endpoint,
        "access_key_id": "testing",
        "secret_access_key": "testing",
    })
}

async fn aws() -> hourglass_targets::Router {
    router(vec![("aws", connection(&moto()))]).await
}

/// The test's own SDK configuration, to set up and read queues, topics and buses.
async fn sdk() -> SdkConfig {
    let connection = serde_json::from_value(connection(&moto())).unwrap();
    hourglass_targets::sdk_config(&connection, Duration::from_secs(10)).await
}

async fn queue(sqs: &aws_sdk_sqs::Client, fifo: bool) -> String {
    let mut create = sqs.create_queue();
    if fifo {
        create = create
            .queue_name(format!("{}.fifo", unique("hg-")))
            .attributes(QueueAttributeName::FifoQueue, "true");
    } else {
        create = create.queue_name(unique("hg-"));
    }
    create
        .send()
        .await
        .unwrap()
        .queue_url()
        .unwrap()
        .to_string()
}

async fn queue_arn(sqs: &aws_sdk_sqs::Client, url: &str) -> String {
    sqs.get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .unwrap()
        .attributes()
        .unwrap()[&QueueAttributeName::QueueArn]
        .clone()
}

/// Every message in the queue, waiting up to 10 s for `expect` of them.
async fn drain(
    sqs: &aws_sdk_sqs::Client,
    url: &str,
    expect: usize,
) -> Vec<aws_sdk_sqs::types::Message> {
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while out.len() < expect && tokio::time::Instant::now() < deadline {
        let got = sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .message_attribute_names("All")
            .wait_time_seconds(1)
            .send()
            .await
            .unwrap();
        out.extend(got.messages().iter().cloned());
    }
    out
}

fn attribute(message: &aws_sdk_sqs::types::Message, name: &str) -> String {
    message
        .message_attributes()
        .and_then(|a| a.get(name))
        .and_then(|v| v.string_value())
        .unwrap_or_else(|| panic!("no {name} attribute on {message:?}"))
        .to_string()
}

#[tokio::test]
async fn sqs_messages_go_in_batches_and_carry_the_occurrence() {
    let sdk = sdk().await;
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let url = queue(&sqs, false).await;
    let router = std::sync::Arc::new(aws().await);
    let target = Target::Sqs(SqsTarget {
        connection: "aws".into(),
        queue_url: url.clone(),
        group_id: None,
    });
    let occurrences: Vec<_> = (0..25)
        .map(|n| occurrence(target.clone(), &format!(r#"{{"n":{n}}}"#), 1))
        .collect();
    let tasks: Vec<_> = occurrences
        .iter()
        .cloned()
        .map(|occ| {
            let router = router.clone();
            tokio::spawn(async move { publish(&router, &occ).await })
        })
        .collect();
    for task in tasks {
        assert_eq!(task.await.unwrap(), Verdict::Delivered);
    }
    let messages = drain(&sqs, &url, 25).await;
    assert_eq!(messages.len(), 25);
    let first = &occurrences[0];
    let message = messages
        .iter()
        .find(|m| m.body() == Some(r#"{"n":0}"#))
        .expect("the first message");
    assert_eq!(
        attribute(message, "hourglass-delivery-id"),
        first.delivery_id().to_string()
    );
    assert_eq!(
        attribute(message, "hourglass-job-id"),
        first.job_id.to_string()
    );
    assert_eq!(attribute(message, "hourglass-job-type"), "reminder.flight");
    assert_eq!(
        attribute(message, "hourglass-due-at"),
        "2026-11-24T08:11:20.656Z"
    );
    assert_eq!(attribute(message, "hourglass-attempt"), "1");
}

#[tokio::test]
async fn a_fifo_queue_drops_a_redelivery_by_its_delivery_id() {
    let sdk = sdk().await;
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let url = queue(&sqs, true).await;
    let router = aws().await;
    let occ = occurrence(
        Target::Sqs(SqsTarget {
            connection: "aws".into(),
            queue_url: url.clone(),
            group_id: Some("passenger-p-123".into()),
        }),
        r#"{"flight":"LH 400"}"#,
        1,
    );
    assert_eq!(publish(&router, &occ).await, Verdict::Delivered);
    assert_eq!(publish(&router, &again(&occ)).await, Verdict::Delivered);
    let messages = drain(&sqs, &url, 2).await;
    assert_eq!(messages.len(), 1, "the second publish was deduplicated");
    assert_eq!(attribute(&messages[0], "hourglass-attempt"), "1");
}

#[tokio::test]
async fn a_missing_queue_is_given_up_and_an_unreachable_endpoint_retried() {
    let aws_router = aws().await;
    let missing = format!("{}/123456789012/{}", moto(), unique("nope-"));
    let occ = occurrence(
        Target::Sqs(SqsTarget {
            connection: "aws".into(),
            queue_url: missing,
            group_id: None,
        }),
        "{}",
        1,
    );
    // The reason says the same for a missing queue as for a denied one, and names nothing.
    assert_give_up(
        &publish(&aws_router, &occ).await,
        "sqs refused the request: the target does not exist or the connection's credentials may not use it",
    );
    let down = router(vec![(
        "aws",
        connection(&format!("http://127.0.0.1:{}", closed_port())),
    )])
    .await;
    assert_retry(&publish(&down, &occ).await, "sqs could not be reached");
}

#[tokio::test]
async fn sns_messages_reach_a_subscribed_queue_with_their_attributes() {
    let sdk = sdk().await;
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let sns = aws_sdk_sns::Client::new(&sdk);
    let url = queue(&sqs, false).await;
    let topic = sns
        .create_topic()
        .name(unique("hg-"))
        .send()
        .await
        .unwrap()
        .topic_arn()
        .unwrap()
        .to_string();
    sns.subscribe()
        .topic_arn(&topic)
        .protocol("sqs")
        .endpoint(queue_arn(&sqs, &url).await)
        .attributes("RawMessageDelivery", "true")
        .send()
        .await
        .unwrap();
    let router = aws().await;
    let occ = occurrence(
        Target::Sns(SnsTarget {
            connection: "aws".into(),
            topic_arn: topic.clone(),
            group_id: None,
        }),
        r#"{"flight":"LH 400"}"#,
        1,
    );
    assert_eq!(publish(&router, &occ).await, Verdict::Delivered);
    let messages = drain(&sqs, &url, 1).await;
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0].body(), Some(r#"{"flight":"LH 400"}"#));
    assert_eq!(
        attribute(&messages[0], "hourglass-delivery-id"),
        occ.delivery_id().to_string()
    );
    let gone = occurrence(
        Target::Sns(SnsTarget {
            connection: "aws".into(),
            topic_arn: format!("{topic}-missing"),
            group_id: None,
        }),
        "{}",
        1,
    );
    assert_give_up(&publish(&router, &gone).await, "sns");
}

#[tokio::test]
async fn an_eventbridge_rule_routes_the_event_to_sqs_with_the_payload_as_detail() {
    let sdk = sdk().await;
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let events = aws_sdk_eventbridge::Client::new(&sdk);
    let url = queue(&sqs, false).await;
    let bus = unique("orders-");
    events.create_event_bus().name(&bus).send().await.unwrap();
    let rule = unique("reminders-");
    events
        .put_rule()
        .name(&rule)
        .event_bus_name(&bus)
        .event_pattern(r#"{"detail-type": ["job-reminder"]}"#)
        .send()
        .await
        .unwrap();
    events
        .put_targets()
        .rule(&rule)
        .event_bus_name(&bus)
        .targets(
            aws_sdk_eventbridge::types::Target::builder()
                .id("queue")
                .arn(queue_arn(&sqs, &url).await)
                .build()
                .unwrap(),
        )
        .send()
        .await
        .unwrap();
    let router = aws().await;
    let target = |detail_type: &str| {
        Target::Eventbridge(EventBridgeTarget {
            connection: "aws".into(),
            bus: bus.clone(),
            source: "hourglass".into(),
            detail_type: detail_type.into(),
        })
    };
    let occ = occurrence(target("job-reminder"), r#"{"flight":"LH 400"}"#, 1);
    assert_eq!(publish(&router, &occ).await, Verdict::Delivered);
    // Another detail-type is published too, but the rule does not route it.
    let other = occurrence(target("something-else"), r#"{"x":1}"#, 1);
    assert_eq!(publish(&router, &other).await, Verdict::Delivered);
    let messages = drain(&sqs, &url, 2).await;
    assert_eq!(
        messages.len(),
        1,
        "only the matching event reached the queue"
    );
    let event: Value = serde_json::from_str(messages[0].body().unwrap()).unwrap();
    assert_eq!(event["detail"], json!({"flight": "LH 400"}));
    assert_eq!(event["detail-type"], "job-reminder");
    assert_eq!(event["source"], "hourglass");
    let resources: Vec<&str> = event["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    let delivery = format!("hourglass:delivery-id/{}", occ.delivery_id());
    assert!(resources.contains(&delivery.as_str()), "{resources:?}");
    assert!(
        resources.contains(&"hourglass:job-type/reminder.flight"),
        "{resources:?}"
    );
    assert!(resources.contains(&"hourglass:attempt/1"), "{resources:?}");

    let not_an_object = occurrence(target("job-reminder"), "[1, 2]", 1);
    assert_give_up(&publish(&router, &not_an_object).await, "JSON object");
}

#[tokio::test]
async fn a_lambda_is_invoked_asynchronously_and_a_missing_function_is_given_up() {
    let router = aws().await;
    let occ = occurrence(
        Target::Lambda(LambdaTarget {
            connection: "aws".into(),
            function: unique("reminders-"),
        }),
        r#"{"flight":"LH 400"}"#,
        1,
    );
    // moto in its default mode answers a function it does not have with 404.
    assert_give_up(
        &publish(&router, &occ).await,
        "lambda refused the request: the target does not exist",
    );
    // Told not to run functions, moto accepts every invocation as Lambda accepts an
    // asynchronous one (202): all an emulator can show of the happy path.
    moto_config(r#"{"lambda": {"use_docker": false}}"#).await;
    let accepted = publish(&router, &again(&occ)).await;
    moto_config(r#"{"lambda": {"use_docker": true}}"#).await;
    assert_eq!(accepted, Verdict::Delivered);
}

/// `POST /moto-api/config`, moto's own switchboard, over a plain HTTP/1.1 request.
async fn moto_config(body: &str) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let url = url::Url::parse(&moto()).unwrap();
    let mut stream = tokio::net::TcpStream::connect((url.host_str().unwrap(), url.port().unwrap()))
        .await
        .unwrap();
    let request = format!(
        "POST /moto-api/config HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        url.host_str().unwrap(),
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 20"), "moto config: {answer}");
}

#[tokio::test]
async fn a_queue_off_the_connections_list_is_given_up_and_not_sent() {
    let sdk = sdk().await;
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let mine = queue(&sqs, false).await;
    let others = queue(&sqs, false).await;
    let mut listed = connection(&moto());
    listed["queue_urls"] = json!([mine]);
    let router = router(vec![("aws", listed)]).await;
    let to = |url: &str| {
        occurrence(
            Target::Sqs(SqsTarget {
                connection: "aws".into(),
                queue_url: url.to_string(),
                group_id: None,
            }),
            r#"{"n":1}"#,
            1,
        )
    };
    // The credentials reach the other application's queue; the list keeps the job out of it.
    assert_give_up(
        &publish(&router, &to(&others)).await,
        "is available to this namespace through the connection",
    );
    assert!(drain(&sqs, &others, 1).await.is_empty());
    assert_eq!(publish(&router, &to(&mine)).await, Verdict::Delivered);
    assert_eq!(drain(&sqs, &mine, 1).await.len(), 1);
}
