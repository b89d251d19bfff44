//! The HTTP edge against hostile or careless clients, on real loopback sockets: silent, trickling
//! and idle connections are closed, the connection cap holds, oversized bodies are refused before
//! they are read, and the `Authorization`, `Content-Type` and `/metrics` contracts (issue 12,
//! defects 4, 5, 8 and 9).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hourglass_server::auth::{ApiKeyConfig, hash_key};
use hourglass_server::{HttpConfig, Node, NodeConfig};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout};

/// Long enough for any step of these tests on a loaded machine; reaching it is a failure.
const PATIENCE: Duration = Duration::from_secs(20);

struct TestNode {
    node: Node,
    _dir: tempfile::TempDir,
}

impl TestNode {
    async fn start(configure: impl FnOnce(&mut NodeConfig)) -> TestNode {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut config = NodeConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            data_dir: dir.path().to_path_buf(),
            allow_targets: vec!["127.0.0.0/8".parse().unwrap()],
            ..NodeConfig::default()
        };
        config.engine.shutdown_grace = Duration::from_secs(2);
        configure(&mut config);
        let node = Node::start(config, Arc::new(hourglass_core::SystemClock))
            .await
            .expect("node starts");
        TestNode { node, _dir: dir }
    }

    fn addr(&self) -> SocketAddr {
        self.node.addr()
    }
}

fn keys() -> Vec<ApiKeyConfig> {
    vec![
        ApiKeyConfig {
            sha256: hash_key("tenant-key"),
            namespace: Some("acme".into()),
            all_namespaces: false,
            ..Default::default()
        },
        ApiKeyConfig {
            sha256: hash_key("admin-key"),
            namespace: None,
            all_namespaces: true,
            ..Default::default()
        },
    ]
}

/// Sends `request` as is and reads the response until the server closes the connection (send
/// `Connection: close`). Returns the status and the body.
async fn raw(addr: SocketAddr, request: &[u8]) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.write_all(request).await.expect("request sent");
    read_response(&mut stream).await
}

async fn read_response(stream: &mut TcpStream) -> (u16, String) {
    let mut bytes = Vec::new();
    timeout(PATIENCE, async {
        let mut buf = [0u8; 8192];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) => break,
                Ok(n) => bytes.extend_from_slice(&buf[..n]),
                // The node may reset a connection whose body it did not read; what arrived
                // before the reset is the response.
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
                Err(e) => panic!("read failed: {e}"),
            }
        }
    })
    .await
    .expect("a response within the patience");
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {text:?}"));
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or_default();
    (status, body)
}

/// Reads a single keep-alive response (headers and a `Content-Length` body), leaving the
/// connection open.
async fn read_one_response(stream: &mut TcpStream) -> u16 {
    let mut bytes = Vec::new();
    timeout(PATIENCE, async {
        let mut buf = [0u8; 4096];
        loop {
            let n = stream.read(&mut buf).await.expect("read");
            assert!(n > 0, "closed before the response was complete");
            bytes.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&bytes);
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let length: usize = head
                    .lines()
                    .find_map(|l| {
                        let (name, value) = l.split_once(':')?;
                        name.eq_ignore_ascii_case("content-length")
                            .then(|| value.trim().parse().ok())?
                    })
                    .expect("content-length");
                if body.len() >= length {
                    return head.split(' ').nth(1).unwrap().parse().unwrap();
                }
            }
        }
    })
    .await
    .expect("a response within the patience")
}

/// Waits until the server closes `stream` (EOF or reset) and returns when that was seen.
async fn closed_by_server(stream: &mut TcpStream) -> Instant {
    timeout(PATIENCE, async {
        let mut buf = [0u8; 1024];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return Instant::now(),
                Ok(_) => {}
            }
        }
    })
    .await
    .expect("the server closes the connection")
}

fn error_code(body: &str) -> String {
    let value: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    value["error"]["code"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test]
async fn silent_and_half_sent_headers_are_closed_after_the_header_timeout() {
    let header = Duration::from_millis(400);
    let idle = Duration::from_secs(60);
    let node = TestNode::start(|c| {
        c.http = HttpConfig {
            header_read_timeout: header,
            idle_timeout: idle,
            ..HttpConfig::default()
        }
    })
    .await;

    // Says nothing at all.
    let opened = Instant::now();
    let mut silent = TcpStream::connect(node.addr()).await.unwrap();
    // Sends half a request head, then a byte every 100 ms, never finishing it: the timeout runs
    // from the first byte and is not renewed by each trickle.
    let mut trickle = TcpStream::connect(node.addr()).await.unwrap();
    trickle
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
        .await
        .unwrap();
    let trickling = async {
        for _ in 0..200 {
            if trickle.write_all(b"a").await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        closed_by_server(&mut trickle).await
    };
    let (silent_closed, trickle_closed) = tokio::join!(closed_by_server(&mut silent), trickling);
    for (what, closed) in [("silent", silent_closed), ("trickling", trickle_closed)] {
        let after = closed - opened;
        assert!(
            after >= header,
            "{what} connection closed early, after {after:?}"
        );
        // Which of the two timers closed it: the header timeout, not the idle one.
        assert!(
            after < idle,
            "{what} connection closed after {after:?}, by the idle timeout"
        );
    }

    // A complete request is still served.
    let (status, _) = raw(
        node.addr(),
        b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(status, 200);
    node.node.shutdown().await;
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_after_the_idle_timeout() {
    let header = Duration::from_millis(300);
    let idle = Duration::from_millis(1500);
    let node = TestNode::start(|c| {
        c.http = HttpConfig {
            header_read_timeout: header,
            idle_timeout: idle,
            ..HttpConfig::default()
        }
    })
    .await;
    let mut stream = TcpStream::connect(node.addr()).await.unwrap();
    for _ in 0..2 {
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .await
            .unwrap();
        assert_eq!(read_one_response(&mut stream).await, 200);
    }
    let answered = Instant::now();
    let closed = closed_by_server(&mut stream).await;
    let after = closed - answered;
    // Kept open past the (shorter) header timeout: waiting for the next request is idling, not
    // a slow request head. (That it closes at all, closed_by_server checks.)
    assert!(
        after >= idle,
        "closed after {after:?}, before the idle timeout"
    );

    // After an idle pause shorter than the idle timeout, the next request head is timed from its
    // first byte by the header timeout.
    let mut stream = TcpStream::connect(node.addr()).await.unwrap();
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    assert_eq!(read_one_response(&mut stream).await, 200);
    tokio::time::sleep(Duration::from_millis(500)).await;
    stream.write_all(b"GET /heal").await.unwrap();
    let started = Instant::now();
    let closed = closed_by_server(&mut stream).await;
    let after = closed - started;
    assert!(after >= header, "closed after {after:?}");
    node.node.shutdown().await;
}

#[tokio::test]
async fn at_the_connection_cap_new_connections_wait_until_a_slot_frees() {
    let header = Duration::from_millis(1500);
    let node = TestNode::start(|c| {
        c.http = HttpConfig {
            max_connections: 3,
            header_read_timeout: header,
            idle_timeout: Duration::from_secs(60),
        }
    })
    .await;
    // A kept-alive client holds one slot, two silent connections the others.
    let mut kept = TcpStream::connect(node.addr()).await.unwrap();
    kept.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    assert_eq!(read_one_response(&mut kept).await, 200);
    let opened = Instant::now();
    let mut silent = Vec::new();
    for _ in 0..2 {
        silent.push(TcpStream::connect(node.addr()).await.unwrap());
    }
    // A fourth connection waits in the backlog, unanswered, until the header timeout frees a
    // slot; then it is served.
    let addr = node.addr();
    let fourth = tokio::spawn(async move {
        let answer = raw(
            addr,
            b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
        )
        .await;
        (answer, Instant::now())
    });
    // Meanwhile the connection already open is served as usual.
    kept.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    assert_eq!(read_one_response(&mut kept).await, 200);
    assert!(
        !fourth.is_finished(),
        "the fourth connection was served while every slot was held"
    );
    let ((status, body), served) = fourth.await.unwrap();
    assert_eq!(status, 200, "{body}");
    let waited = served - opened;
    assert!(
        waited >= header,
        "served after {waited:?}, while every slot was held"
    );
    for stream in &mut silent {
        closed_by_server(stream).await;
    }

    // Slots held by clients that hang up come back too.
    drop(kept);
    let mut held = Vec::new();
    for _ in 0..3 {
        let mut s = TcpStream::connect(node.addr()).await.unwrap();
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .await
            .unwrap();
        assert_eq!(read_one_response(&mut s).await, 200);
        held.push(s);
    }
    drop(held);
    let (status, _) = raw(
        node.addr(),
        b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(status, 200);
    node.node.shutdown().await;
}

#[tokio::test]
async fn a_huge_content_length_is_refused_before_the_body_is_sent() {
    let node = TestNode::start(|_| {}).await;
    for path in [
        "/v1/jobs",
        "/v1/jobs/batch",
        "/v1/schedules/preview",
        "/v1/queues/q/ack",
    ] {
        // No body follows: an answer can only come from the declared length.
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
             Content-Length: 104857600\r\nConnection: close\r\n\r\n"
        );
        let (status, body) = raw(node.addr(), request.as_bytes()).await;
        assert_eq!(status, 413, "{path}: {body}");
        assert_eq!(error_code(&body), "body_too_large", "{path}: {body}");
    }
    node.node.shutdown().await;
}

#[tokio::test]
async fn a_chunked_body_over_the_limit_is_refused() {
    let node = TestNode::start(|c| c.limits.max_batch_bytes = 128 * 1024).await;
    // A single job's body may hold the 256 KiB payload and a 64 KiB envelope: 1 MiB is refused,
    // though far below the old 32 MiB read limit.
    for (path, size) in [
        ("/v1/jobs", 1024 * 1024),
        ("/v1/jobs/batch", 200 * 1024),
        ("/v1/queues/q/lease", 1024 * 1024),
    ] {
        let mut request = format!(
            "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
             Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        )
        .into_bytes();
        let chunk = vec![b' '; 16 * 1024];
        for _ in 0..size / chunk.len() {
            request.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
            request.extend_from_slice(&chunk);
            request.extend_from_slice(b"\r\n");
        }
        request.extend_from_slice(b"0\r\n\r\n");
        let mut stream = TcpStream::connect(node.addr()).await.unwrap();
        // The node may stop reading (and answer) before all of it is written.
        let _ = stream.write_all(&request).await;
        let (status, body) = read_response(&mut stream).await;
        assert_eq!(status, 413, "{path}: {body}");
        assert_eq!(error_code(&body), "body_too_large", "{path}: {body}");
    }

    // A body within the limits is still read whole, chunked or not.
    let client = reqwest::Client::new();
    let job = json!({
        "schedule": {"after": "1h"},
        "target": {"queue": "q"},
        "payload": {"blob": "x".repeat(200 * 1024)},
    });
    let response = client
        .post(format!("http://{}/v1/jobs", node.addr()))
        .json(&job)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    node.node.shutdown().await;
}

#[tokio::test]
async fn a_body_that_does_not_arrive_in_time_is_refused() {
    let timeout_after = Duration::from_millis(500);
    let node = TestNode::start(|c| c.limits.body_read_timeout = timeout_after).await;
    let mut stream = TcpStream::connect(node.addr()).await.unwrap();
    // The head is complete, so the header timeout is over; the body never is.
    stream
        .write_all(
            b"POST /v1/jobs HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
              Content-Length: 100\r\n\r\n{\"schedule\"",
        )
        .await
        .unwrap();
    let sent = Instant::now();
    let (status, body) = read_response(&mut stream).await;
    assert_eq!(status, 408, "{body}");
    assert_eq!(error_code(&body), "body_timeout", "{body}");
    assert!(sent.elapsed() >= timeout_after);
    node.node.shutdown().await;
}

#[tokio::test]
async fn the_bearer_scheme_is_case_insensitive() {
    let node = TestNode::start(|c| c.api_keys = keys()).await;
    let client = reqwest::Client::new();
    let url = format!("http://{}/v1/jobs", node.addr());
    for header in [
        "Bearer tenant-key",
        "bearer tenant-key",
        "BEARER tenant-key",
        "bEaReR tenant-key",
        "Bearer    tenant-key",
        "bearer\ttenant-key",
    ] {
        let response = client
            .get(&url)
            .header("authorization", header)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{header:?}");
    }
    for header in [
        "Bearertenant-key",
        "Bearer",
        "Beare tenant-key",
        "Basic tenant-key",
    ] {
        let response = client
            .get(&url)
            .header("authorization", header)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 401, "{header:?}");
    }
    node.node.shutdown().await;
}

#[tokio::test]
async fn only_the_json_media_type_is_accepted_as_json() {
    let node = TestNode::start(|_| {}).await;
    let client = reqwest::Client::new();
    let url = format!("http://{}/v1/jobs", node.addr());
    let body = json!({"schedule": {"after": "1h"}, "target": {"queue": "q"}}).to_string();
    for ct in [
        "application/jsonfoo",
        "application/json-seq",
        "application/jsonp; charset=utf-8",
        "application/json+x",
        "application/ json",
    ] {
        let response = client
            .post(&url)
            .header("content-type", ct)
            .body(body.clone())
            .send()
            .await
            .unwrap();
        let status = response.status();
        let text = response.text().await.unwrap();
        assert_eq!(status, 415, "{ct:?}: {text}");
        assert_eq!(error_code(&text), "unsupported_media_type", "{ct:?}");
    }
    for ct in [
        "application/json",
        "Application/JSON",
        "application/json; charset=utf-8",
        "application/json;charset=UTF-8",
        "application/json ; charset=utf-8",
    ] {
        let response = client
            .post(&url)
            .header("content-type", ct)
            .body(body.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 201, "{ct:?}");
    }
    node.node.shutdown().await;
}

/// The list of nodes covers the whole cluster: an admin key's, never a tenant's.
#[tokio::test]
async fn the_list_of_nodes_needs_an_admin_key() {
    let node = TestNode::start(|c| c.api_keys = keys()).await;
    let client = reqwest::Client::new();
    let url = format!("http://{}/v1/nodes", node.addr());
    let get = |key: Option<&'static str>| {
        let request = client.get(&url);
        let request = match key {
            Some(key) => request.bearer_auth(key),
            None => request,
        };
        async move {
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            (status, response.json::<serde_json::Value>().await.unwrap())
        }
    };
    assert_eq!(get(None).await.0, 401);
    let (status, refused) = get(Some("tenant-key")).await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(refused["error"]["code"], "forbidden");
    assert_eq!(refused["error"]["field"], "authorization");
    // The node's first heartbeat is written as its engine starts; wait for it to be visible.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let listed = loop {
        let (status, listed) = get(Some("admin-key")).await;
        assert_eq!(status, 200, "{listed}");
        if listed["nodes"].as_array().unwrap().len() == 1 {
            break listed;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the node never listed itself: {listed}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let me = &listed["nodes"][0];
    assert_eq!(me["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(me["claims_held"], 0);
    assert!(me["id"].as_str().is_some_and(|id| !id.is_empty()));
    assert!(me["started_at"].as_str().unwrap() <= me["last_heartbeat"].as_str().unwrap());
    node.node.shutdown().await;
}

#[tokio::test]
async fn metrics_need_an_admin_key_in_key_mode_or_the_metrics_listener() {
    let node = TestNode::start(|c| {
        c.api_keys = keys();
        c.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
    })
    .await;
    let client = reqwest::Client::new();
    let url = format!("http://{}/metrics", node.addr());
    let status = |r: reqwest::Response| r.status().as_u16();
    assert_eq!(status(client.get(&url).send().await.unwrap()), 401);
    assert_eq!(
        status(client.get(&url).bearer_auth("nope").send().await.unwrap()),
        401
    );
    // A tenant's key must not see every namespace's counts.
    assert_eq!(
        status(
            client
                .get(&url)
                .bearer_auth("tenant-key")
                .send()
                .await
                .unwrap()
        ),
        403
    );
    let response = client
        .get(&url)
        .bearer_auth("admin-key")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.text().await.unwrap().contains("hourglass_"));

    // The metrics listener serves /metrics without a key, and nothing else.
    let metrics = node.node.metrics_addr().expect("metrics listener");
    let response = client
        .get(format!("http://{metrics}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.text().await.unwrap().contains("hourglass_"));
    let response = client
        .get(format!("http://{metrics}/v1/jobs"))
        .bearer_auth("admin-key")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
    node.node.shutdown().await;

    // Development mode (no keys, loopback only) stays open.
    let dev = TestNode::start(|_| {}).await;
    let response = client
        .get(format!("http://{}/metrics", dev.addr()))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(dev.node.metrics_addr(), None);
    dev.node.shutdown().await;
}

#[tokio::test]
async fn shutdown_lets_a_request_in_progress_finish() {
    let node = TestNode::start(|_| {}).await;
    let client = reqwest::Client::new();
    let url = format!("http://{}/v1/queues/empty/lease", node.addr());
    let lease = tokio::spawn(async move {
        client
            .post(url)
            .json(&json!({"wait_ms": 1500}))
            .send()
            .await
            .map(|r| r.status().as_u16())
    });
    // Wait until the long poll is in progress: its request counts in the node's metrics only
    // once answered, so give it a moment, then stop the node while it waits.
    tokio::time::sleep(Duration::from_millis(300)).await;
    node.node.shutdown().await;
    let status = lease.await.unwrap().expect("the long poll got an answer");
    assert_eq!(status, 200);
}

/// Development mode serves `/metrics` without a key like everything else, so its listener stays
/// on loopback like the API's (issue 39, defect 14).
#[tokio::test]
async fn development_mode_refuses_a_metrics_listener_off_loopback() {
    for at in ["0.0.0.0:0", "[::]:0"] {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = NodeConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            metrics_listen: Some(at.parse().unwrap()),
            data_dir: dir.path().to_path_buf(),
            ..NodeConfig::default()
        };
        let Err(refused) = Node::start(config, Arc::new(hourglass_core::SystemClock)).await else {
            panic!("a development node served /metrics on {at}");
        };
        assert!(
            matches!(&refused, hourglass_server::StartError::Config(m) if m.contains("metrics")),
            "{refused}"
        );
    }
    // Loopback is served.
    let dev = TestNode::start(|c| c.metrics_listen = Some("127.0.0.1:0".parse().unwrap())).await;
    dev.node.shutdown().await;
}
