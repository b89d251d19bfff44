//! The bench's consumers for bus targets (`--target nats|redis|sqs`): each reads what the node
//! published and writes down a receipt per message, as the webhook receiver does per request.
//! Where the receipt's time comes from:
//! - NATS: a core subscriber on the subject sees each publish as the server routes it (every
//!   publish, a redelivery too; the JetStream stream the node publishes to deduplicates, the
//!   subscriber does not, so duplicates are counted as the receiver counts them);
//! - Redis: `XREAD BLOCK` returns each entry as soon as it is appended;
//! - SQS: the message's `SentTimestamp`, stamped when the queue accepted it, so the time the
//!   bench's receive loops take to poll does not count as the node's lateness.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Context;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::accounting::{DeliveryKey, Receipt};
use super::now_ms;
use super::recorder::Recorder;

/// A bus the bench publishes to, with what reads it back.
pub struct Consumer {
    /// The connection's kind and URL, for the node's `[connections.bench]`.
    pub connection_toml: String,
    /// The target object of every job.
    pub target_json: String,
    stop: CancellationToken,
    tasks: JoinSet<()>,
    foreign: Arc<AtomicU64>,
    cleanup: Cleanup,
}

enum Cleanup {
    Nats(async_nats::jetstream::Context, String),
    Redis(redis::Client, String),
    Sqs(aws_sdk_sqs::Client, String),
}

impl Consumer {
    pub async fn nats(url: &str, recorder: Recorder) -> anyhow::Result<Self> {
        let client = async_nats::connect(url)
            .await
            .with_context(|| format!("connect to NATS at {url}"))?;
        let js = async_nats::jetstream::new(client.clone());
        let name = format!("HOURGLASS_BENCH_{}", std::process::id());
        let subject = format!("hourglass-bench.{}", std::process::id());
        js.create_stream(async_nats::jetstream::stream::Config {
            name: name.clone(),
            subjects: vec![subject.clone()],
            duplicate_window: Duration::from_secs(120),
            ..Default::default()
        })
        .await
        .context("create the bench's JetStream stream")?;
        let mut subscriber = client.subscribe(subject.clone()).await?;
        let foreign = Arc::new(AtomicU64::new(0));
        let stop = CancellationToken::new();
        let mut tasks = JoinSet::new();
        let (count, token) = (foreign.clone(), stop.clone());
        tasks.spawn(async move {
            use futures_util::StreamExt;
            loop {
                let message = tokio::select! {
                    m = subscriber.next() => m,
                    () = token.cancelled() => None,
                };
                let Some(message) = message else { break };
                let received_ms = now_ms();
                let header = |name: &str| {
                    message
                        .headers
                        .as_ref()
                        .and_then(|h| h.get(name))
                        .map(|v| v.as_str().to_string())
                };
                record(
                    &recorder,
                    &count,
                    header("Nats-Msg-Id").as_deref(),
                    header("Hourglass-Due-At").as_deref(),
                    received_ms,
                );
            }
        });
        Ok(Self {
            connection_toml: format!("kind = \"nats\"\nurl = \"{url}\"\n"),
            target_json: serde_json::json!({"nats": {"connection": "bench", "subject": subject}})
                .to_string(),
            stop,
            tasks,
            foreign,
            cleanup: Cleanup::Nats(js, name),
        })
    }

    pub async fn redis(url: &str, recorder: Recorder) -> anyhow::Result<Self> {
        let client = redis::Client::open(url)?;
        let stream = format!("hourglass-bench:{}", std::process::id());
        let mut connection = client
            .get_multiplexed_async_connection()
            .await
            .with_context(|| format!("connect to Redis at {url}"))?;
        let foreign = Arc::new(AtomicU64::new(0));
        let stop = CancellationToken::new();
        let mut tasks = JoinSet::new();
        let (count, token, key) = (foreign.clone(), stop.clone(), stream.clone());
        tasks.spawn(async move {
            let mut last = "0-0".to_string();
            let options = redis::streams::StreamReadOptions::default()
                .block(500)
                .count(1000);
            while !token.is_cancelled() {
                let reply: redis::RedisResult<Option<redis::streams::StreamReadReply>> =
                    redis::AsyncCommands::xread_options(
                        &mut connection,
                        &[&key],
                        &[&last],
                        &options,
                    )
                    .await;
                let received_ms = now_ms();
                let Ok(Some(reply)) = reply else { continue };
                for entries in reply.keys {
                    for entry in entries.ids {
                        let id: Option<String> = entry.get("delivery_id");
                        let due: Option<String> = entry.get("due_at");
                        record(
                            &recorder,
                            &count,
                            id.as_deref(),
                            due.as_deref(),
                            received_ms,
                        );
                        last = entry.id;
                    }
                }
            }
        });
        Ok(Self {
            connection_toml: format!("kind = \"redis\"\nurl = \"{url}\"\n"),
            target_json:
                serde_json::json!({"redis_stream": {"connection": "bench", "stream": stream}})
                    .to_string(),
            stop,
            tasks,
            foreign,
            cleanup: Cleanup::Redis(client, stream),
        })
    }

    /// `endpoint` is an SQS endpoint with test credentials, such as moto's server.
    pub async fn sqs(endpoint: &str, recorder: Recorder, loops: usize) -> anyhow::Result<Self> {
        let connection: hourglass_targets::ConnectionConfig =
            serde_json::from_value(serde_json::json!({
                "kind": "sqs",
                "region": "us-east-1",
                "endpoint_url": endpoint,
                "access_key_id": "bench",
                "secret_access_key": "bench",
            }))?;
        let sdk = hourglass_targets::sdk_config(&connection, Duration::from_secs(10)).await;
        let sqs = aws_sdk_sqs::Client::new(&sdk);
        let queue_url = sqs
            .create_queue()
            .queue_name(format!("hourglass-bench-{}", std::process::id()))
            .send()
            .await
            .with_context(|| format!("create the bench's SQS queue at {endpoint}"))?
            .queue_url()
            .unwrap_or_default()
            .to_string();
        let foreign = Arc::new(AtomicU64::new(0));
        let stop = CancellationToken::new();
        let mut tasks = JoinSet::new();
        for _ in 0..loops.max(1) {
            let (sqs, url, count, token, recorder) = (
                sqs.clone(),
                queue_url.clone(),
                foreign.clone(),
                stop.clone(),
                recorder.clone(),
            );
            tasks.spawn(async move {
                use aws_sdk_sqs::types::{
                    DeleteMessageBatchRequestEntry, MessageSystemAttributeName,
                };
                while !token.is_cancelled() {
                    let answer = sqs
                        .receive_message()
                        .queue_url(&url)
                        .max_number_of_messages(10)
                        // Short polls: moto's long poll waits out its whole wait for a full
                        // batch, which throttled the bench's reading to a few messages a second.
                        .wait_time_seconds(0)
                        .message_attribute_names("All")
                        .message_system_attribute_names(MessageSystemAttributeName::SentTimestamp)
                        .send()
                        .await;
                    let Ok(answer) = answer else {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    };
                    if answer.messages().is_empty() {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                    let mut done = Vec::new();
                    for (i, message) in answer.messages().iter().enumerate() {
                        let attribute = |name: &str| {
                            message
                                .message_attributes()
                                .and_then(|a| a.get(name))
                                .and_then(|v| v.string_value())
                                .map(str::to_string)
                        };
                        let sent = message
                            .attributes()
                            .and_then(|a| a.get(&MessageSystemAttributeName::SentTimestamp))
                            .and_then(|v| v.parse::<i64>().ok())
                            .unwrap_or_else(now_ms);
                        record(
                            &recorder,
                            &count,
                            attribute("hourglass-delivery-id").as_deref(),
                            attribute("hourglass-due-at").as_deref(),
                            sent,
                        );
                        if let Some(handle) = message.receipt_handle()
                            && let Ok(entry) = DeleteMessageBatchRequestEntry::builder()
                                .id(i.to_string())
                                .receipt_handle(handle)
                                .build()
                        {
                            done.push(entry);
                        }
                    }
                    if !done.is_empty() {
                        let _ = sqs
                            .delete_message_batch()
                            .queue_url(&url)
                            .set_entries(Some(done))
                            .send()
                            .await;
                    }
                }
            });
        }
        Ok(Self {
            connection_toml: format!(
                "kind = \"sqs\"\nregion = \"us-east-1\"\nendpoint_url = \"{endpoint}\"\naccess_key_id = \"bench\"\nsecret_access_key = \"bench\"\n"
            ),
            target_json:
                serde_json::json!({"sqs": {"connection": "bench", "queue_url": queue_url}})
                    .to_string(),
            stop,
            tasks,
            foreign,
            cleanup: Cleanup::Sqs(sqs, queue_url),
        })
    }

    /// Messages without an Hourglass delivery id.
    pub fn foreign(&self) -> u64 {
        self.foreign.load(Ordering::Relaxed)
    }

    /// Stops reading and removes the stream, key or queue the bench made.
    pub async fn stop(mut self) {
        self.stop.cancel();
        while self.tasks.join_next().await.is_some() {}
        match self.cleanup {
            Cleanup::Nats(js, name) => {
                let _ = js.delete_stream(&name).await;
            }
            Cleanup::Redis(client, key) => {
                if let Ok(mut c) = client.get_multiplexed_async_connection().await {
                    let _: redis::RedisResult<()> = redis::AsyncCommands::del(&mut c, &key).await;
                }
            }
            Cleanup::Sqs(sqs, url) => {
                let _ = sqs.delete_queue().queue_url(url).send().await;
            }
        }
    }
}

fn record(
    recorder: &Recorder,
    foreign: &AtomicU64,
    id: Option<&str>,
    due_at: Option<&str>,
    received_ms: i64,
) {
    match id.and_then(|id| DeliveryKey::parse(id.as_bytes())) {
        Some(id) => recorder.push(Receipt {
            id,
            due_header_ms: due_at
                .and_then(|s| s.parse::<jiff::Timestamp>().ok())
                .map_or(i64::MIN, |t| t.as_millisecond()),
            received_ms,
        }),
        None => {
            foreign.fetch_add(1, Ordering::Relaxed);
        }
    }
}
