//! The API suite's harness: a node in this process on port 0 with a temporary data directory, a
//! webhook receiver that records what arrives (and when), a small JSON client, and a PostgreSQL
//! schema of its own for the tests that put nodes on a shared database.

pub mod postgres;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use hourglass_server::{Node, NodeConfig};
use serde_json::Value;
use tokio::sync::Notify;

/// How long a test waits for something that must happen (a delivery, a state change) before it
/// fails. Long, because machines are shared and slow at times: reaching it is the failure, its
/// length is never what a test measures.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// A node configured for tests: loopback targets allowed, a short shutdown grace and delivery
/// timeout.
pub fn test_config(data_dir: &Path) -> NodeConfig {
    let mut config = NodeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        data_dir: data_dir.to_path_buf(),
        allow_targets: vec!["127.0.0.0/8".parse().unwrap()],
        ..NodeConfig::default()
    };
    config.engine.shutdown_grace = Duration::from_secs(2);
    config.delivery_timeout = Duration::from_secs(2);
    config
}

pub async fn start_node(data_dir: &Path) -> Node {
    start_node_with(test_config(data_dir)).await
}

pub async fn start_node_with(config: NodeConfig) -> Node {
    Node::start(config, Arc::new(hourglass_core::SystemClock))
        .await
        .expect("node starts")
}

/// One request as the receiver saw it.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub path: String,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
    /// Wall-clock receive time, unix ms.
    pub received_ms: i64,
    /// The status the receiver answered with.
    pub status: u16,
}

impl Delivery {
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("json body")
    }

    /// The occurrence's due time from the `hourglass-due-at` header, unix ms.
    pub fn due_ms(&self) -> i64 {
        self.header("hourglass-due-at")
            .parse::<jiff::Timestamp>()
            .expect("due-at header")
            .as_millisecond()
    }
}

/// How the receiver answers a path: `/status/503` answers 503, `/flaky/N` fails the first N
/// requests per delivery id with 500, everything else answers 204.
#[derive(Clone, Default)]
pub struct Receiver {
    inner: Arc<ReceiverInner>,
}

#[derive(Default)]
struct ReceiverInner {
    deliveries: Mutex<Vec<Delivery>>,
    arrived: Notify,
}

impl Receiver {
    pub async fn start() -> (Receiver, SocketAddr) {
        let receiver = Receiver::default();
        let app = axum::Router::new()
            .fallback(record)
            .with_state(receiver.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (receiver, addr)
    }

    pub fn deliveries(&self) -> Vec<Delivery> {
        self.inner.deliveries.lock().unwrap().clone()
    }

    pub fn on_path(&self, path: &str) -> Vec<Delivery> {
        self.deliveries()
            .into_iter()
            .filter(|d| d.path == path)
            .collect()
    }

    /// Waits until `pred` holds over the deliveries, or panics after `timeout`.
    pub async fn wait_for(
        &self,
        timeout: Duration,
        what: &str,
        pred: impl Fn(&[Delivery]) -> bool,
    ) -> Vec<Delivery> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.inner.arrived.notified();
            {
                let deliveries = self.inner.deliveries.lock().unwrap();
                if pred(&deliveries) {
                    return deliveries.clone();
                }
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                let seen = self.deliveries().len();
                panic!("timed out waiting for {what} ({seen} deliveries seen)");
            }
        }
    }
}

async fn record(
    State(receiver): State<Receiver>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> StatusCode {
    let received_ms = jiff::Timestamp::now().as_millisecond();
    let path = uri.path().to_string();
    let delivery_id = headers
        .get("webhook-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let status = {
        let mut deliveries = receiver.inner.deliveries.lock().unwrap();
        let earlier = deliveries
            .iter()
            .filter(|d| d.header("webhook-id") == delivery_id)
            .count();
        let mut parts = path.trim_start_matches('/').split('/');
        let status = match (
            parts.next(),
            parts.next().and_then(|n| n.parse::<u16>().ok()),
        ) {
            (Some("status"), Some(code)) => StatusCode::from_u16(code).unwrap(),
            (Some("flaky"), Some(n)) if earlier < n as usize => StatusCode::INTERNAL_SERVER_ERROR,
            _ => StatusCode::NO_CONTENT,
        };
        deliveries.push(Delivery {
            path,
            headers,
            body: body.to_vec(),
            received_ms,
            status: status.as_u16(),
        });
        status
    };
    receiver.inner.arrived.notify_waiters();
    status
}

/// A JSON client for one node.
#[derive(Clone)]
pub struct Api {
    pub base: String,
    pub client: reqwest::Client,
    pub api_key: Option<String>,
}

impl Api {
    pub fn new(addr: SocketAddr) -> Self {
        Self {
            base: format!("http://{addr}"),
            client: reqwest::Client::new(),
            api_key: None,
        }
    }

    pub fn with_key(mut self, key: &str) -> Self {
        self.api_key = Some(key.to_string());
        self
    }

    /// Sends a request; returns the status and the parsed JSON body (Null when empty).
    pub async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut request = self
            .client
            .request(method.clone(), format!("{}{path}", self.base));
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let bodiless_write = matches!(
            method,
            reqwest::Method::POST | reqwest::Method::PUT | reqwest::Method::PATCH
        );
        match body {
            Some(body) => request = request.json(&body),
            // As every client does: the node wants JSON on each of these, empty or not.
            None if bodiless_write => {
                request = request.header("content-type", "application/json");
            }
            None => {}
        }
        let response = request.send().await.expect("request sent");
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        let value = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        (status, value)
    }

    pub async fn create(&self, body: Value) -> Value {
        let (status, job) = self.call("POST", "/v1/jobs", Some(body)).await;
        assert_eq!(status, 201, "create failed: {job}");
        job
    }

    /// The job once it is no longer active (its last occurrence's outcome is written after the
    /// receiver answered, so a test that saw the delivery waits for this). Panics after
    /// [`PATIENCE`].
    pub async fn settled_job(&self, id: &str) -> Value {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let (status, job) = self.call("GET", &format!("/v1/jobs/{id}"), None).await;
            assert_eq!(status, 200, "GET job {id}: {job}");
            if job["state"] != "active" {
                return job;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "job {id} still active after {PATIENCE:?}: {job}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
