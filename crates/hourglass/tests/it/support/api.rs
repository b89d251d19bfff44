//! A JSON client for one node process.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;

/// A JSON client for one node, with a request timeout so that a wedged node fails the test
/// instead of hanging it.
#[derive(Clone)]
pub struct Api {
    pub base: String,
    pub client: reqwest::Client,
    pub api_key: Option<String>,
}

/// An answer: status, the headers a test looks at, and the JSON body (a string if not JSON).
pub struct Answer {
    pub status: u16,
    pub retry_after: Option<String>,
    pub body: Value,
}

impl Api {
    pub fn new(addr: SocketAddr) -> Self {
        // reqwest is built without a default TLS provider; the binary installs ring, so do we.
        let _ = rustls::crypto::ring::default_provider().install_default();
        Self {
            base: format!("http://{addr}"),
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .expect("http client"),
            api_key: None,
        }
    }

    pub fn with_key(mut self, key: &str) -> Self {
        self.api_key = Some(key.to_string());
        self
    }

    /// Sends a request; a transport error is an error, not a panic (a node may be down).
    pub async fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Answer, reqwest::Error> {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("method");
        let writes = matches!(
            method,
            reqwest::Method::POST | reqwest::Method::PUT | reqwest::Method::PATCH
        );
        let mut request = self.client.request(method, format!("{}{path}", self.base));
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        match body {
            Some(body) => request = request.json(body),
            // As every client does: the node wants JSON on each of these, empty or not.
            None if writes => request = request.header("content-type", "application/json"),
            None => {}
        }
        let response = request.send().await?;
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let text = response.text().await?;
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        Ok(Answer {
            status,
            retry_after,
            body,
        })
    }

    /// Sends a request that must reach the node; returns status and body.
    pub async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let answer = self
            .send(method, path, body.as_ref())
            .await
            .unwrap_or_else(|e| panic!("{method} {}{path}: {e}", self.base));
        (answer.status, answer.body)
    }

    /// Creates one job, which must be created (201).
    pub async fn create(&self, body: Value) -> Value {
        let (status, job) = self.call("POST", "/v1/jobs", Some(body)).await;
        assert_eq!(status, 201, "create failed: {job}");
        job
    }
}
