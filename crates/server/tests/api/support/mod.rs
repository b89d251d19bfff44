//! The API suite's harness: a node in this process on port 0 with a temporary data directory, a
//! small JSON client, a PostgreSQL schema of its own for the tests that put nodes on a shared
//! database, and the testkit's webhook receiver, which records what arrives (and when).

pub mod postgres;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hourglass_server::{Node, NodeConfig};
use serde_json::Value;

/// The webhook receiver (the testkit's): `/status/503` answers 503, `/flaky/N` fails the first N
/// requests per delivery id with 500, everything else answers 204.
pub use hourglass_testkit::{Delivery, Receiver};

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
