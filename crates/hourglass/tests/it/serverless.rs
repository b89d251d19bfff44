//! The serverless shape on DynamoDB (moto): the API without its engine, as the API function
//! runs it (in-process here, with the hook that would start a tick), and `hourglass tick`, the
//! tick function's code, as a process: it fires what the API created at its due time to a local
//! receiver and to an SQS queue, stops once nothing more is due in its window, and a tick killed
//! mid-window has its claims taken over by the next one after their lease.
//!
//! moto comes from `scripts/with-buses` (`HOURGLASS_TEST_MOTO_URL`).

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hourglass_server::auth::{ApiKeyConfig, generate_key, hash_key};
use hourglass_server::{ApiOnly, NodeConfig, StoreBackend};
use hourglass_store::{DynamoOptions, Store};
use jiff::Timestamp;
use serde_json::{Value, json};

use crate::support::{Receiver, aws_env_for_moto, moto, now_ms, one_heavy_test_at_a_time};

fn table() -> String {
    format!("hg-tick-{}-{}", std::process::id(), now_ms())
}

/// The table in moto, for a store in this process.
fn moto_table(table: &str) -> DynamoOptions {
    let mut options = DynamoOptions::new(table);
    options.region = Some("us-east-1".into());
    options.endpoint_url = Some(moto());
    options.credentials = Some(("testing".into(), "testing".into()));
    options
}

/// What the API function's hook was told.
#[derive(Default)]
struct Recorded(Mutex<Vec<Timestamp>>);

impl hourglass_engine::DueHook for Recorded {
    fn due(&self, at: Timestamp) {
        self.0.lock().unwrap().push(at);
    }
}

/// The API function's code in this process, on the table, behind an API key; its address.
async fn api(table: &str, key: &str, hook: Arc<Recorded>) -> (ApiOnly, String) {
    let config = NodeConfig {
        store: StoreBackend::Dynamo(moto_table(table)),
        api_keys: vec![ApiKeyConfig {
            sha256: hash_key(key),
            namespace: Some("default".into()),
            all_namespaces: false,
            ..Default::default()
        }],
        allow_targets: vec!["127.0.0.0/8".parse().unwrap()],
        connections: hourglass_targets::Connections::new(
            serde_json::from_value(json!({"aws": {
                "kind": "aws", "region": "us-east-1", "endpoint_url": moto(),
                "access_key_id": "testing", "secret_access_key": "testing",
            }}))
            .unwrap(),
        )
        .unwrap(),
        ..NodeConfig::default()
    };
    let api = ApiOnly::start(config, Arc::new(hourglass_core::SystemClock), hook)
        .await
        .expect("the API starts without an engine");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let router = api.router.clone();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    (api, url)
}

/// How a test's tick ends.
enum End {
    /// By itself: the test waits for it and expects success.
    Itself,
    /// SIGKILL after this long; no output.
    Kill(Duration),
    /// SIGTERM once this future is ready; the test waits for the tick and expects success.
    Term(std::pin::Pin<Box<dyn Future<Output = ()> + Send>>),
}

/// Runs `hourglass tick` on the table for `window` with the connections of `config`; its
/// output and how long it took.
async fn tick(
    table: &str,
    config: &std::path::Path,
    window: &str,
    lease: &str,
    end: End,
) -> (String, Duration) {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_hourglass"));
    command
        .args([
            "tick",
            "--for",
            window,
            "--store",
            &format!("dynamodb://{table}"),
        ])
        .args(["--allow-targets", "127.0.0.0/8", "--lease-ttl", lease])
        .arg("--config")
        .arg(config)
        .env("HOURGLASS_LOG", "warn")
        .env_remove("HOURGLASS_STORE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    command.envs(aws_env_for_moto());
    let started = Instant::now();
    let mut child = command.spawn().expect("spawn hourglass tick");
    match end {
        End::Itself => {}
        End::Kill(after) => {
            tokio::time::sleep(after).await;
            child.kill().await.unwrap();
            return (String::new(), started.elapsed());
        }
        End::Term(when) => {
            when.await;
            let pid = child.id().expect("the tick still runs").to_string();
            let sent = std::process::Command::new("kill")
                .args(["-TERM", &pid])
                .status()
                .unwrap();
            assert!(sent.success(), "kill -TERM {pid}: {sent}");
        }
    }
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("the tick ends within its window")
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "tick failed: {text}");
    (text, started.elapsed())
}

fn config_with_aws(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("tick.toml");
    std::fs::write(
        &path,
        format!(
            "[connections.aws]\nkind = \"aws\"\nregion = \"us-east-1\"\nendpoint_url = \"{}\"\n\
             access_key_id = \"testing\"\nsecret_access_key = \"testing\"\n",
            moto()
        ),
    )
    .unwrap();
    path
}

async fn create(url: &str, key: &str, body: Value) -> Value {
    let response = reqwest::Client::new()
        .post(format!("{url}/v1/jobs"))
        .bearer_auth(key)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status();
    let body: Value = response.json().await.unwrap();
    assert_eq!(status, 201, "{body}");
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tick_fires_what_the_api_created_on_time_and_stops_when_done() {
    let _heavy = one_heavy_test_at_a_time().await;
    let table = table();
    let dir = tempfile::tempdir().unwrap();
    let config = config_with_aws(dir.path());
    let key = generate_key();
    let hook = Arc::new(Recorded::default());
    let (api, url) = api(&table, &key, hook.clone()).await;

    // Nothing due: the tick returns at once without starting an engine.
    let (out, took) = tick(&table, &config, "30s", "5s", End::Itself).await;
    assert!(out.contains("nothing due"), "{out}");
    assert!(took < Duration::from_secs(20), "an idle tick took {took:?}");

    let connection: hourglass_targets::ConnectionConfig = serde_json::from_value(json!({
        "kind": "aws", "region": "us-east-1", "endpoint_url": moto(),
        "access_key_id": "testing", "secret_access_key": "testing",
    }))
    .unwrap();
    let sdk = hourglass_targets::sdk_config(&connection, Duration::from_secs(10)).await;
    let sqs = aws_sdk_sqs::Client::new(&sdk);
    let queue_url = sqs
        .create_queue()
        .queue_name(format!("reminders-{}", now_ms()))
        .send()
        .await
        .unwrap()
        .queue_url()
        .unwrap()
        .to_string();
    let hooks = Receiver::start().await;
    let hook_url = hooks.url("/hook");
    let due = now_ms() + 4_000;
    let due_text = Timestamp::from_millisecond(due).unwrap().to_string();
    let webhook = create(
        &url,
        &key,
        json!({"schedule": {"at": due_text}, "target": {"webhook": {"url": hook_url}},
               "payload": {"n": 1}}),
    )
    .await;
    create(
        &url,
        &key,
        json!({"schedule": {"at": due_text},
               "target": {"sqs": {"connection": "aws", "queue_url": queue_url}},
               "payload": {"n": 2}}),
    )
    .await;
    // The API function was told, so that it can start a tick for a job due this soon.
    let told = hook.0.lock().unwrap().clone();
    assert!(
        told.iter().any(|at| at.as_millisecond() == due),
        "the hook heard {told:?}"
    );

    let (out, took) = tick(&table, &config, "40s", "5s", End::Itself).await;
    assert!(out.contains("tick: ran for"), "{out}");
    assert!(
        took < Duration::from_secs(30),
        "the tick kept running after its work was done: {took:?}\n{out}"
    );
    let seen = hooks.deliveries();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(
        seen[0].job_id().replace('-', ""),
        webhook["id"].as_str().unwrap().replace('-', "")
    );
    assert!(seen[0].received_ms >= due, "fired early: {seen:?}");
    let received = sqs
        .receive_message()
        .queue_url(&queue_url)
        .max_number_of_messages(10)
        .wait_time_seconds(5)
        .send()
        .await
        .unwrap();
    let messages = received.messages();
    assert_eq!(messages.len(), 1, "{messages:?}");
    let body: Value = serde_json::from_str(messages[0].body().unwrap()).unwrap();
    assert!(body.to_string().contains("\"n\":2"), "{body}");
    api.shutdown().await;
}

/// A table with one webhook job due in `due_in_ms`, created through the API function's code,
/// and what a test needs to tick it.
struct OneJob {
    table: String,
    /// Holds the tick's config file.
    _dir: tempfile::TempDir,
    config: std::path::PathBuf,
    api: ApiOnly,
    hooks: Receiver,
    due: i64,
    job: Value,
}

async fn one_webhook_job(due_in_ms: i64) -> OneJob {
    let table = table();
    let dir = tempfile::tempdir().unwrap();
    let config = config_with_aws(dir.path());
    let key = generate_key();
    let (api, url) = api(&table, &key, Arc::new(Recorded::default())).await;
    let hooks = Receiver::start().await;
    let hook_url = hooks.url("/hook");
    let due = now_ms() + due_in_ms;
    let due_text = Timestamp::from_millisecond(due).unwrap().to_string();
    let job = create(
        &url,
        &key,
        json!({"schedule": {"at": due_text}, "target": {"webhook": {"url": hook_url}}}),
    )
    .await;
    OneJob {
        table,
        _dir: dir,
        config,
        api,
        hooks,
        due,
        job,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tick_killed_mid_window_has_its_claims_taken_over_after_the_lease() {
    let _heavy = one_heavy_test_at_a_time().await;
    let OneJob {
        table,
        _dir,
        config,
        api,
        hooks,
        due,
        ..
    } = one_webhook_job(5_000).await;
    // The first tick claims the job (within its lookahead) and dies before it is due.
    let (_, _) = tick(
        &table,
        &config,
        "30s",
        "4s",
        End::Kill(Duration::from_millis(4_200)),
    )
    .await;
    assert!(hooks.deliveries().is_empty(), "fired before its due time");
    // The next tick finds the claim, waits for its lease to lapse, and fires it.
    let (out, _) = tick(&table, &config, "30s", "4s", End::Itself).await;
    assert!(out.contains("tick: ran for"), "{out}");
    let seen = hooks.deliveries();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(seen[0].received_ms >= due, "fired early: {seen:?}");
    api.shutdown().await;
}

/// SIGTERM ends a tick as its window's end would: at once, successfully, firing nothing early,
/// and handing back its claim, so that the next tick fires the job on time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminated_tick_stops_at_once_and_hands_back_its_claims() {
    let _heavy = one_heavy_test_at_a_time().await;
    let OneJob {
        table,
        _dir,
        config,
        api,
        hooks,
        due,
        job,
    } = one_webhook_job(8_000).await;
    // The signal comes once the tick has claimed the job (due within its lookahead).
    let id: hourglass_core::JobId = job["id"].as_str().unwrap().parse().unwrap();
    let store = hourglass_store::DynamoStore::open(moto_table(&table))
        .await
        .unwrap();
    let claimed = async move {
        loop {
            let job = store.get_job(None, id).await.unwrap().expect("the job");
            if job.leased_until.is_some() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let (out, took) = tick(&table, &config, "60s", "30s", End::Term(Box::pin(claimed))).await;
    assert!(out.contains("tick: stopped by a signal"), "{out}");
    assert!(
        now_ms() < due,
        "the stopped tick took until the job's due time ({took:?}): the test proves nothing"
    );
    assert!(hooks.deliveries().is_empty(), "fired before its due time");
    // Handed back, not left leased for 30 s: the next tick fires it at its due time.
    let (out, _) = tick(&table, &config, "20s", "30s", End::Itself).await;
    assert!(out.contains("tick: ran for"), "{out}");
    let seen = hooks.deliveries();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(seen[0].received_ms >= due, "fired early: {seen:?}");
    assert!(
        seen[0].received_ms < due + 10_000,
        "fired {} ms late: the claim was not handed back",
        seen[0].received_ms - due
    );
    api.shutdown().await;
}
