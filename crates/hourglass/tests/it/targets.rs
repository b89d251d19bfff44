//! Bus and cloud targets through a real node process, configured by its config file:
//! - the seeds' own flow: one-off and cron jobs publish to an EventBridge bus whose rule routes
//!   their detail-type to an SQS queue (moto), where the events arrive, never early, with the
//!   payload as `detail`;
//! - the crash guarantee on NATS JetStream: a SIGKILL mid-run loses no acknowledged job, a
//!   redelivery carries the same delivery id, and the stream keeps one message per delivery id.
//!
//! The servers come from `scripts/with-buses` (`HOURGLASS_TEST_NATS_URL`,
//! `HOURGLASS_TEST_MOTO_URL`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use async_nats::jetstream;
use aws_config::SdkConfig;
use aws_sdk_sqs::types::{MessageSystemAttributeName, QueueAttributeName};
use serde_json::{Value, json};

use crate::support::{NodeOptions, Nodes, Rng, now_ms, one_heavy_test_at_a_time, rfc3339_ms};

fn server(var: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| {
        panic!(
            "{var} is not set: run the tests with scripts/test (or scripts/with-buses cargo test)"
        )
    })
}

fn unique(prefix: &str) -> String {
    format!("{prefix}{}", uuid_tail())
}

/// The process, the clock and a counter: distinct across tests and across runs against one
/// long-lived server.
fn uuid_tail() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{}x{}x{n}", std::process::id(), now_ms())
}

/// A config file beside the node with `[connections]` as given.
fn config_file(nodes_dir: &std::path::Path, name: &str, connections: &str) -> PathBuf {
    std::fs::create_dir_all(nodes_dir).expect("config dir");
    let path = nodes_dir.join(format!("{name}.toml"));
    std::fs::write(&path, connections).expect("write config");
    path
}

async fn sdk(endpoint: &str) -> SdkConfig {
    let connection: hourglass_targets::ConnectionConfig = serde_json::from_value(json!({
        "kind": "aws",
        "region": "us-east-1",
        "endpoint_url": endpoint,
        "access_key_id": "testing",
        "secret_access_key": "testing",
    }))
    .unwrap();
    hourglass_targets::sdk_config(&connection, Duration::from_secs(10)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eventbridge_events_reach_the_rules_queue_at_their_due_times() {
    let _heavy = one_heavy_test_at_a_time().await;
    let moto = server("HOURGLASS_TEST_MOTO_URL");
    let sdk = sdk(&moto).await;
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let events = aws_sdk_eventbridge::Client::new(&sdk);
    // The write-ups' shape: a bus, a rule matching the detail-type, an SQS queue behind it.
    let bus = unique("orders-");
    events.create_event_bus().name(&bus).send().await.unwrap();
    let queue_url = sqs
        .create_queue()
        .queue_name(unique("reminders-"))
        .send()
        .await
        .unwrap()
        .queue_url()
        .unwrap()
        .to_string();
    let queue_arn = sqs
        .get_queue_attributes()
        .queue_url(&queue_url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .unwrap()
        .attributes()
        .unwrap()[&QueueAttributeName::QueueArn]
        .clone();
    let rule = unique("job-reminder-");
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
                .id("reminders")
                .arn(queue_arn)
                .build()
                .unwrap(),
        )
        .send()
        .await
        .unwrap();

    let nodes = Nodes::default();
    let config = config_file(
        &nodes.data_dir("events").with_file_name(""),
        "events",
        &format!(
            r#"
[connections.events]
kind = "eventbridge"
region = "us-east-1"
endpoint_url = "{moto}"
access_key_id = "testing"
secret_access_key = "testing"
"#
        ),
    );
    let mut options = NodeOptions::embedded("events");
    options.args = vec!["--config".into(), config.display().to_string()];
    let node = nodes.start(&options).await;

    let target = json!({"eventbridge": {
        "connection": "events", "bus": bus, "source": "hourglass", "detail_type": "job-reminder"
    }});
    let (status, listed) = node.api.call("GET", "/v1/connections", None).await;
    assert_eq!(status, 200);
    assert_eq!(listed["connections"][0]["name"], "events");
    let one_off_due = now_ms() + 2_000;
    let one_off = node
        .api
        .create(json!({
            "type": "reminder.flight",
            "schedule": {"at": rfc3339_ms(one_off_due)},
            "target": target,
            "payload": {"passenger": "p-123", "flight": "LH 400"},
        }))
        .await;
    let cron = node
        .api
        .create(json!({
            "type": "reminder.nightly",
            "schedule": {"cron": "* * * * * *", "max_runs": 3},
            "target": target,
            "payload": {"export": "nightly"},
        }))
        .await;
    let (status, refused) = node
        .api
        .call(
            "POST",
            "/v1/jobs",
            Some(json!({
                "schedule": {"after": "1s"},
                "target": {"eventbridge": {"connection": "nope", "bus": bus, "source": "s", "detail_type": "d"}},
                "payload": {},
            })),
        )
        .await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(refused["error"]["code"], "unknown_connection");
    assert_eq!(refused["error"]["field"], "target.eventbridge.connection");

    // Four events: the one-off and the cron job's three runs.
    let mut got: Vec<(Value, i64)> = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while got.len() < 4 && tokio::time::Instant::now() < deadline {
        let answer = sqs
            .receive_message()
            .queue_url(&queue_url)
            .max_number_of_messages(10)
            .message_system_attribute_names(MessageSystemAttributeName::SentTimestamp)
            .wait_time_seconds(1)
            .send()
            .await
            .unwrap();
        for message in answer.messages() {
            let event: Value = serde_json::from_str(message.body().unwrap()).unwrap();
            let sent: i64 = message
                .attributes()
                .and_then(|a| a.get(&MessageSystemAttributeName::SentTimestamp))
                .and_then(|v| v.parse().ok())
                .expect("SentTimestamp");
            got.push((event, sent));
        }
    }
    assert_eq!(got.len(), 4, "events in the queue: {got:?}");
    let resource = |event: &Value, name: &str| -> String {
        let prefix = format!("hourglass:{name}/");
        event["resources"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|r| r.as_str()?.strip_prefix(&prefix))
            .next()
            .unwrap_or_else(|| panic!("no {name} in {event}"))
            .to_string()
    };
    let mut by_job: BTreeMap<String, Vec<(i64, Value)>> = BTreeMap::new();
    for (event, sent) in &got {
        assert_eq!(event["detail-type"], "job-reminder");
        assert_eq!(event["source"], "hourglass");
        let due_ms = jiff::Timestamp::from_str_lenient(&resource(event, "due-at"));
        let job_id = resource(event, "job-id");
        let delivery = resource(event, "delivery-id");
        assert_eq!(
            delivery,
            format!("{}_{due_ms}", job_id.replace('-', "")),
            "the delivery id is the job and its due time"
        );
        // Never early: SQS stamped the message after the occurrence was due.
        assert!(*sent >= due_ms, "sent at {sent}, due at {due_ms}");
        println!(
            "{job_id}: due {due_ms}, in the queue {} ms later",
            sent - due_ms
        );
        by_job
            .entry(job_id)
            .or_default()
            .push((due_ms, event["detail"].clone()));
    }
    let one_off_events = &by_job[one_off["id"].as_str().unwrap()];
    assert_eq!(one_off_events.len(), 1);
    assert_eq!(one_off_events[0].0, one_off_due);
    assert_eq!(
        one_off_events[0].1,
        json!({"passenger": "p-123", "flight": "LH 400"})
    );
    let cron_events = &by_job[cron["id"].as_str().unwrap()];
    let dues: BTreeSet<i64> = cron_events.iter().map(|(due, _)| *due).collect();
    assert_eq!(dues.len(), 3, "three distinct runs");
    assert!(
        dues.iter().all(|due| due % 1000 == 0),
        "on whole seconds: {dues:?}"
    );
    assert!(
        cron_events
            .iter()
            .all(|(_, d)| *d == json!({"export": "nightly"}))
    );
    node.kill().await;
}

trait FromLenient {
    fn from_str_lenient(text: &str) -> i64;
}

impl FromLenient for jiff::Timestamp {
    fn from_str_lenient(text: &str) -> i64 {
        text.parse::<jiff::Timestamp>()
            .unwrap_or_else(|e| panic!("{text}: {e}"))
            .as_millisecond()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sigkill_mid_run_loses_no_jetstream_publish_and_the_stream_drops_duplicates() {
    let _heavy = one_heavy_test_at_a_time().await;
    let url = server("HOURGLASS_TEST_NATS_URL");
    let client = async_nats::connect(&url).await.unwrap();
    let js = jetstream::new(client.clone());
    let stream_name = unique("HGCRASH");
    let root = unique("hgcrash");
    let subject = format!("{root}.fired");
    js.create_stream(jetstream::stream::Config {
        name: stream_name.clone(),
        subjects: vec![format!("{root}.>")],
        duplicate_window: Duration::from_secs(120),
        ..Default::default()
    })
    .await
    .unwrap();
    // Every publish, duplicates included, as a core subscriber sees them.
    let mut raw = client.subscribe(subject.clone()).await.unwrap();
    let (seen_tx, mut seen_rx) = tokio::sync::mpsc::unbounded_channel::<(String, i64)>();
    tokio::spawn(async move {
        use futures_util::StreamExt;
        while let Some(message) = raw.next().await {
            let id = message
                .headers
                .as_ref()
                .and_then(|h| h.get("Nats-Msg-Id"))
                .map(|v| v.as_str().to_string())
                .unwrap_or_default();
            let _ = seen_tx.send((id, now_ms()));
        }
    });

    let nodes = Nodes::default();
    let config = config_file(
        &nodes.data_dir("bus").with_file_name(""),
        "bus",
        &format!("[connections.bus]\nkind = \"nats\"\nurl = \"{url}\"\n"),
    );
    let mut options = NodeOptions::embedded("bus");
    options.args = vec!["--config".into(), config.display().to_string()];
    let mut node = nodes.start(&options).await;

    let mut rng = Rng::from_env_or_clock("HOURGLASS_CRASH_SEED");
    let jobs = 400usize;
    let start = now_ms() + 2_000;
    let window = 5_000u64;
    let dues: Vec<i64> = (0..jobs).map(|_| start + rng.below(window)).collect();
    let body = json!({"jobs": dues.iter().enumerate().map(|(n, due)| json!({
        "type": "crash.test",
        "schedule": {"at": rfc3339_ms(*due)},
        "target": {"nats": {"connection": "bus", "subject": subject}},
        "payload": {"n": n},
    })).collect::<Vec<_>>()});
    let (status, created) = node.api.call("POST", "/v1/jobs/batch", Some(body)).await;
    assert_eq!(status, 201, "{created}");
    let mut expected: BTreeMap<String, i64> = BTreeMap::new();
    for (job, due) in created["jobs"].as_array().unwrap().iter().zip(&dues) {
        let id = job["id"].as_str().unwrap().replace('-', "");
        expected.insert(format!("{id}_{due}"), *due);
    }
    assert_eq!(expected.len(), jobs);

    // Kill once about 40% were published.
    let mut seen: Vec<(String, i64)> = Vec::new();
    while seen.len() < jobs * 2 / 5 {
        let next = tokio::time::timeout(Duration::from_secs(30), seen_rx.recv())
            .await
            .expect("publishes before the kill")
            .unwrap();
        seen.push(next);
    }
    node.kill().await;
    println!("killed after {} publishes", seen.len());
    node = nodes.start(&options).await;

    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    let distinct = |seen: &[(String, i64)]| {
        seen.iter()
            .map(|(id, _)| id.clone())
            .collect::<BTreeSet<_>>()
    };
    while distinct(&seen).len() < jobs && tokio::time::Instant::now() < deadline {
        if let Ok(Some(next)) = tokio::time::timeout(Duration::from_secs(1), seen_rx.recv()).await {
            seen.push(next);
        }
    }
    let ids = distinct(&seen);
    let missing: Vec<_> = expected.keys().filter(|id| !ids.contains(*id)).collect();
    assert!(
        missing.is_empty(),
        "{} never published: {missing:?}",
        missing.len()
    );
    assert!(
        ids.iter().all(|id| expected.contains_key(id)),
        "unknown ids"
    );
    for (id, at) in &seen {
        assert!(*at >= expected[id], "{id} published before its due time");
    }
    let duplicates = seen.len() - ids.len();
    // The stream recognised every repeated Nats-Msg-Id: one message per occurrence.
    let info = js
        .get_stream(&stream_name)
        .await
        .unwrap()
        .get_info()
        .await
        .unwrap();
    println!(
        "{} publishes, {duplicates} of them redeliveries; the stream holds {}",
        seen.len(),
        info.state.messages
    );
    assert_eq!(info.state.messages, jobs as u64);
    node.kill().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nats_subject_no_stream_captures_is_refused_at_create_and_at_edit() {
    let url = server("HOURGLASS_TEST_NATS_URL");
    let js = jetstream::new(async_nats::connect(&url).await.unwrap());
    let root = unique("hgprobe");
    let nodes = Nodes::default();
    let config = config_file(
        &nodes.data_dir("probe").with_file_name(""),
        "probe",
        &format!("[connections.bus]\nkind = \"nats\"\nurl = \"{url}\"\n"),
    );
    let mut options = NodeOptions::embedded("probe");
    options.args = vec!["--config".into(), config.display().to_string()];
    let node = nodes.start(&options).await;
    let job = |subject: &str| {
        json!({
            "type": "probe.test",
            "schedule": {"at": rfc3339_ms(now_ms() + 3_600_000)},
            "target": {"nats": {"connection": "bus", "subject": subject}},
        })
    };
    let subject = format!("{root}.fired");

    // No stream captures the subject yet: every publish would be refused, so the create is.
    let (status, refused) = node.api.call("POST", "/v1/jobs", Some(job(&subject))).await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(refused["error"]["code"], "invalid_target");
    assert_eq!(refused["error"]["field"], "target.nats.subject");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains(&subject), "{message}");
    // A batch names the job at fault.
    let (status, refused) = node
        .api
        .call(
            "POST",
            "/v1/jobs/batch",
            Some(json!({"jobs": [job(&subject)]})),
        )
        .await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(refused["error"]["field"], "jobs[0].target.nats.subject");
    let (_, listed) = node.api.call("GET", "/v1/jobs", None).await;
    assert_eq!(listed["jobs"].as_array().unwrap().len(), 0, "{listed}");

    // Once a stream captures it, the same job is taken at once (a refusal is not remembered).
    js.create_stream(jetstream::stream::Config {
        name: unique("HGPROBE"),
        subjects: vec![format!("{root}.>")],
        ..Default::default()
    })
    .await
    .unwrap();
    let (status, created) = node.api.call("POST", "/v1/jobs", Some(job(&subject))).await;
    assert_eq!(status, 201, "{created}");

    // An edit that moves the target off every stream is refused and changes nothing.
    let id = created["id"].as_str().unwrap();
    let elsewhere =
        json!({"target": {"nats": {"connection": "bus", "subject": unique("hgnowhere")}}});
    let (status, refused) = node
        .api
        .call("PATCH", &format!("/v1/jobs/{id}"), Some(elsewhere))
        .await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(refused["error"]["field"], "target.nats.subject");
    let (_, unchanged) = node.api.call("GET", &format!("/v1/jobs/{id}"), None).await;
    assert_eq!(unchanged["target"]["nats"]["subject"], subject.as_str());
}
