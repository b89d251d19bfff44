//! The binary's logs in `--log-format json` at debug level: every line is one JSON object, each
//! failed delivery gets a line with its job id, delivery id, attempt and reason, and no secret
//! appears anywhere — not the API key, not the signing secret, not a webhook header's value, not
//! the payload. And a payload damaged in the store is logged with its job, not answered silently.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{Api, NodeOptions, Nodes, Receiver};

const API_KEY: &str = "hg_log-test-key-0123456789abcdef0123456789abcdef";
const HEADER_SECRET: &str = "Bearer header-secret-5f1c9a";
const PAYLOAD_SECRET: &str = "payload-secret-77e2b4";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_name_each_failure_and_leak_no_secret() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("hourglass.toml");
    std::fs::write(
        &config,
        format!(
            "[[api_keys]]\nnamespace = \"acme\"\nsha256 = \"{}\"\n",
            hourglass_server::auth::hash_key(API_KEY)
        ),
    )
    .unwrap();
    let nodes = Nodes::default();
    let node = nodes
        .start(&NodeOptions {
            log_level: "debug",
            args: vec![
                "--log-format".into(),
                "json".into(),
                "--config".into(),
                config.display().to_string(),
            ],
            ..NodeOptions::embedded("json-logs")
        })
        .await;
    let addr = node.addr;

    let api = Api::new(addr).with_key(API_KEY);
    let receiver = Receiver::start().await;
    let (status, secret) = api.call("POST", "/v1/signing-secret", None).await;
    assert_eq!(status, 200);
    let signing_secret = secret["signing_secret"].as_str().unwrap().to_string();
    // Fails twice with 500, then for good: two retries and a dead letter, three log lines.
    let job = api
        .create(json!({
            "type": "log.test",
            "schedule": {"after": "100ms"},
            "target": {"webhook": {
                "url": receiver.url("/status/500"),
                "headers": {"Authorization": HEADER_SECRET}
            }},
            "retry": {"max_attempts": 3, "initial_backoff": "100ms", "max_backoff": "200ms"},
            "payload": {"secret": PAYLOAD_SECRET}
        }))
        .await;
    let job_id = job["id"].as_str().unwrap().to_string();
    assert!(
        receiver.wait_count(3, Duration::from_secs(20)).await,
        "only {} of three attempts arrived",
        receiver.count()
    );
    assert!(
        receiver
            .deliveries()
            .iter()
            .all(|h| h.path == "/status/500" && h.status == 500),
        "every attempt was answered 500"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (_, letters) = api.call("GET", "/v1/dead-letters", None).await;
        if letters["dead_letters"]
            .as_array()
            .is_some_and(|l| !l.is_empty())
        {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no dead letter");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A rejected request with the key in it, to see that auth failures do not echo it either.
    let (status, _) = Api::new(addr)
        .with_key(&format!("{API_KEY}x"))
        .call("GET", "/v1/jobs", None)
        .await;
    assert_eq!(status, 401);

    // Killed, the node has written everything into its log: stdout and stderr, every line,
    // the "listening" line the harness reads its address from too.
    let log = node.log.clone();
    node.kill().await;
    let text = std::fs::read_to_string(&log).expect("node log");
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines.len() > 3,
        "debug logging produced {} lines",
        lines.len()
    );

    let mut failures = Vec::new();
    for line in &lines {
        let line = *line;
        let event: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not a JSON log line ({e}): {line}"));
        for secret in [
            API_KEY,
            signing_secret.as_str(),
            HEADER_SECRET,
            PAYLOAD_SECRET,
        ] {
            assert!(!line.contains(secret), "a secret in the logs: {line}");
        }
        let fields = &event["fields"];
        if fields["job_id"] == json!(job_id) && fields["reason"].is_string() {
            failures.push(fields.clone());
        }
    }
    let delivery_id = format!(
        "{}_{}",
        job_id.replace('-', ""),
        job["next_due_at"]
            .as_str()
            .unwrap()
            .parse::<jiff::Timestamp>()
            .unwrap()
            .as_millisecond()
    );
    let attempts: Vec<u64> = failures
        .iter()
        .map(|f| f["attempt"].as_u64().expect("attempt"))
        .collect();
    assert_eq!(
        attempts,
        vec![1, 2, 3],
        "one line per failed attempt: {failures:?}"
    );
    for f in &failures {
        assert_eq!(f["delivery_id"], json!(delivery_id), "{f}");
        assert!(f["reason"].as_str().unwrap().contains("500"), "{f}");
        assert_eq!(
            f["status"],
            json!("500"),
            "the status code, not Some(500): {f}"
        );
    }
}

/// `hourglass tick --log-format json`, and a node that cannot start: every line either writes,
/// on stdout and on stderr, is one JSON object (what it has to say is in its message), for log
/// collectors that take nothing else.
#[test]
fn tick_and_a_failed_start_print_only_json_lines_with_json_logs() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_hourglass"))
            .args(args)
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .args(["--log-format", "json"])
            .env("HOURGLASS_LOG", "info")
            .env_remove("HOURGLASS_CONFIG")
            .env_remove("HOURGLASS_STORE")
            .output()
            .expect("run hourglass");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code(), text)
    };
    let messages = |text: &str| -> Vec<String> {
        text.lines()
            .map(|line| {
                let event: Value = serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("not a JSON log line ({e}): {line}\n{text}"));
                event["fields"]["message"].as_str().unwrap_or("").to_owned()
            })
            .collect()
    };

    let (code, text) = run(&["tick", "--for", "1s"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        messages(&text)
            .iter()
            .any(|m| m.starts_with("tick: nothing due")),
        "the tick's outcome is a log event: {text}"
    );

    // A port in use: the node fails to start, and says so in JSON.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let (code, text) = run(&["serve", "--listen", &addr]);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        messages(&text)
            .iter()
            .any(|m| m.contains("cannot start the node")),
        "the failure is a log event: {text}"
    );
}

/// A node that cannot start says why on stderr and exits by what a restart would do: 78
/// (`EX_CONFIG`; the systemd unit does not restart on it) for a configuration that cannot work,
/// 1 for an address in use, which may be free on the next try.
#[test]
fn a_start_that_cannot_work_exits_78_and_one_that_may_work_later_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_hourglass"))
            .arg("serve")
            .args(args)
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .env_remove("HOURGLASS_CONFIG")
            .env_remove("HOURGLASS_STORE")
            .env_remove("HOURGLASS_LISTEN")
            .output()
            .expect("run hourglass");
        let text = String::from_utf8_lossy(&out.stderr).into_owned();
        (out.status.code(), text)
    };

    // A config file with a key no version knows.
    let file = dir.path().join("hourglass.toml");
    std::fs::write(&file, "listen = \"127.0.0.1:0\"\nlisten_to_me = true\n").unwrap();
    let (code, text) = run(&["--config", file.to_str().unwrap()]);
    assert_eq!(code, Some(78), "{text}");
    assert!(
        text.contains("invalid configuration") && text.contains("listen_to_me"),
        "the error names the key: {text}"
    );

    // An API key whose role no version knows.
    std::fs::write(
        &file,
        format!(
            "listen = \"127.0.0.1:0\"\n[[api_keys]]\nnamespace = \"a\"\nsha256 = \"{}\"\nrole = \"owner\"\n",
            "0".repeat(64)
        ),
    )
    .unwrap();
    let (code, text) = run(&["--config", file.to_str().unwrap()]);
    assert_eq!(code, Some(78), "{text}");
    assert!(
        text.contains("invalid configuration")
            && text.contains("role must be one of reader, worker, writer or admin, not \"owner\""),
        "the error names the field and the roles: {text}"
    );

    // Listening beyond loopback without API keys (refused before anything is bound).
    let (code, text) = run(&["--listen", "0.0.0.0:0"]);
    assert_eq!(code, Some(78), "{text}");
    assert!(text.contains("without api keys"), "{text}");

    // A database url the store cannot use, whatever the database's state (an sslmode no
    // version knows): refused when the store opens, before any connection is tried.
    let (code, text) = run(&["--store", "postgres://127.0.0.1:1/test?sslmode=sometimes"]);
    assert_eq!(code, Some(78), "{text}");
    assert!(
        text.contains("sslmode"),
        "the error names the setting: {text}"
    );

    // A database that does not answer: starting again may find it.
    let (code, text) = run(&[
        "--store",
        "postgres://postgres@127.0.0.1:1/test?connect_timeout=1",
    ]);
    assert_eq!(code, Some(1), "{text}");

    // An address in use: starting again may work once it is free.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let (code, text) = run(&["--listen", &addr]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("cannot listen on"), "{text}");
}

/// A stored payload damaged behind the node's back (here by hand, in the file) does not break
/// the answers it is part of: a lease of several messages still answers every message, with
/// `null` for the damaged one, and the node logs an error naming the job, not silently.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_stored_payload_is_logged_and_answered_null() {
    let nodes = Nodes::default();
    let opts = NodeOptions::embedded("damaged-payload");
    let node = nodes.start(&opts).await;
    let api = Api::new(node.addr);
    let mut ids = Vec::new();
    for n in 0..3 {
        let job = api
            .create(json!({
                "schedule": {"after": "1ms"},
                "target": {"queue": "q"},
                "payload": {"n": n}
            }))
            .await;
        ids.push(job["id"].as_str().unwrap().to_string());
    }
    node.kill().await;
    {
        let db = nodes.data_dir(&opts.name).join("hourglass.db");
        let conn = rusqlite::Connection::open(&db).expect("open the store");
        let changed = conn
            .execute(
                "UPDATE jobs SET payload = '{\"n\": 1' WHERE payload = '{\"n\":1}'",
                [],
            )
            .expect("damage one payload");
        assert_eq!(changed, 1, "the payload to damage was not found as stored");
    }

    let node = nodes.start(&opts).await;
    let api = Api::new(node.addr);
    let (status, leased) = api
        .call(
            "POST",
            "/v1/queues/q/lease",
            Some(json!({"max": 10, "wait_ms": 2000})),
        )
        .await;
    assert_eq!(status, 200, "{leased}");
    let messages = leased["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 3, "{leased}");
    for m in messages {
        let id = m["job_id"].as_str().unwrap();
        let expected = match ids.iter().position(|i| i == id) {
            Some(1) => Value::Null,
            Some(n) => json!({"n": n}),
            None => panic!("a message of another job: {m}"),
        };
        assert_eq!(m["payload"], expected, "{m}");
    }
    let (status, job) = api.call("GET", &format!("/v1/jobs/{}", ids[1]), None).await;
    assert_eq!(status, 200);
    assert_eq!(job["payload"], Value::Null);

    let log = node.log.clone();
    node.kill().await;
    let text = std::fs::read_to_string(&log).expect("node log");
    let logged = text
        .lines()
        .filter(|l| l.contains("not valid JSON") && l.contains(ids[1].as_str()))
        .count();
    assert!(
        logged >= 2,
        "the lease and the read each log the damaged payload with its job: {text}"
    );
}
