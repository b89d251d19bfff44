//! The typed API client: one method per operation of the API (`crate::OPERATIONS` lists them
//! with their routes), requests and answers as `hourglass-api` shapes, every failure an
//! [`Error`]. This file holds the client and how a request is sent; the methods are in one file
//! per group: `jobs.rs` (jobs, dead letters, schedule previews), `queues.rs` (pull queues) and
//! `node.rs` (the namespace's signing secret, the node's and the cluster's state, health).

mod jobs;
mod node;
mod queues;

use std::time::Duration;

use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use reqwest::{Method, Url};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Error, parse_retry_after};
use hourglass_api::ErrorBody;

/// A request without a long poll gets this long for the whole exchange.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// A lease gets its long-poll wait on top of the ordinary timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A handle on one node (cheap to clone: clones share the connection pool).
///
/// ```no_run
/// # async fn demo() -> Result<(), hourglass_client::Error> {
/// use hourglass_client::{Client, LeaseOptions};
/// let client = Client::new("http://127.0.0.1:7070")?.api_key("hg_...");
/// let messages = client.lease("emails", &LeaseOptions::default()).await?;
/// let receipts: Vec<_> = messages.iter().map(|m| m.receipt.clone()).collect();
/// client.ack("emails", &receipts).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    base: Url,
    api_key: Option<String>,
    namespace: Option<String>,
}

impl std::fmt::Debug for Client {
    // The API key stays out of logs and panics.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("base", &self.base.as_str())
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("namespace", &self.namespace)
            .finish()
    }
}

impl Client {
    /// A client for the node at `base_url` (e.g. `http://127.0.0.1:7070`; a path prefix is kept).
    pub fn new(base_url: impl AsRef<str>) -> Result<Client, Error> {
        // The workspace builds reqwest without a crypto provider; ring is this process's
        // default unless the application installed another one first.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(|e| Error::Config(format!("cannot build the http client: {e}")))?;
        Self::with_http_client(base_url, http)
    }

    /// Like [`Client::new`], over a `reqwest::Client` the caller configured (proxies, TLS roots).
    /// Its timeouts should allow a lease's long poll (up to 20 s).
    pub fn with_http_client(
        base_url: impl AsRef<str>,
        http: reqwest::Client,
    ) -> Result<Client, Error> {
        let text = base_url.as_ref();
        let base =
            Url::parse(text).map_err(|e| Error::Config(format!("base url {text:?}: {e}")))?;
        if base.cannot_be_a_base() || !matches!(base.scheme(), "http" | "https") {
            return Err(Error::Config(format!(
                "base url {text:?} is not an http(s) url"
            )));
        }
        Ok(Client {
            http,
            base,
            api_key: None,
            namespace: None,
        })
    }

    /// Sent as `Authorization: Bearer <key>`.
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// Sent as `hourglass-namespace`; honoured for admin keys and in development mode.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    pub fn base_url(&self) -> &Url {
        &self.base
    }

    // -----------------------------------------------------------------------------------------
    // Plumbing

    /// Joins path segments onto the base URL, percent-encoding each (queue names and ids are
    /// user data).
    fn url(&self, segments: &[&str], query: &[(String, String)]) -> Url {
        let mut url = self.base.clone();
        url.path_segments_mut()
            .expect("checked in the constructor: the base url can be a base")
            .pop_if_empty()
            .extend(segments);
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        url
    }

    /// A GET without a query.
    async fn get<T: DeserializeOwned>(&self, segments: &[&str]) -> Result<T, Error> {
        self.send(Request::new(Method::GET, segments)).await
    }

    /// Sends the request and reads the 2xx answer's JSON body as `T`.
    async fn send<T: DeserializeOwned>(&self, request: Request) -> Result<T, Error> {
        let (url, bytes) = self.exchange(request).await?;
        serde_json::from_slice(&bytes).map_err(|source| Error::Decode {
            url: url.to_string(),
            source,
        })
    }

    /// Sends one request and returns the body of a 2xx answer; anything else becomes an error.
    async fn exchange(&self, r: Request) -> Result<(Url, Vec<u8>), Error> {
        let segments: Vec<&str> = r.segments.iter().map(String::as_str).collect();
        let url = self.url(&segments, &r.query);
        let writes = method_writes(&r.method);
        let mut request = self.http.request(r.method, url.clone()).timeout(r.timeout);
        if let Some(key) = &self.api_key {
            let value = HeaderValue::from_str(&format!("Bearer {key}"))
                .map_err(|_| Error::Config("the api key is not a valid header value".into()))?;
            request = request.header(AUTHORIZATION, value);
        }
        if let Some(ns) = &self.namespace {
            let value = HeaderValue::from_str(ns)
                .map_err(|_| Error::Config("the namespace is not a valid header value".into()))?;
            request = request.header("hourglass-namespace", value);
        }
        for (name, value) in r.headers {
            let value = HeaderValue::from_str(&value)
                .map_err(|_| Error::Config(format!("the {name} is not a valid header value")))?;
            request = request.header(name, value);
        }
        match r.body {
            Some(body) => {
                request = request
                    .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
                    .body(body);
            }
            // The node wants the JSON type on every write, also without a body (pause, trigger,
            // replay).
            None if writes => {
                request =
                    request.header(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            }
            None => {}
        }
        let transport = |source| Error::Transport {
            url: url.to_string(),
            source,
        };
        let response = request.send().await.map_err(transport)?;
        let status = response.status();
        let retry_after = parse_retry_after(response.headers().get(RETRY_AFTER));
        let bytes = response.bytes().await.map_err(transport)?;
        if status.is_success() {
            return Ok((url, bytes.to_vec()));
        }
        Err(error_from_answer(
            status.as_u16(),
            &url,
            &bytes,
            retry_after,
        ))
    }
}

/// One request as a method builds it: the route's segments, its query, extra headers, the JSON
/// body, and how long the whole exchange may take.
struct Request {
    method: Method,
    segments: Vec<String>,
    query: Vec<(String, String)>,
    headers: Vec<(&'static str, String)>,
    body: Option<Vec<u8>>,
    timeout: Duration,
}

impl Request {
    fn new(method: Method, segments: &[&str]) -> Self {
        Request {
            method,
            segments: segments.iter().map(|s| (*s).to_owned()).collect(),
            query: Vec::new(),
            headers: Vec::new(),
            body: None,
            timeout: REQUEST_TIMEOUT,
        }
    }

    /// The JSON body: one of the contract's request shapes.
    fn json(mut self, body: &impl Serialize) -> Result<Self, Error> {
        let bytes = serde_json::to_vec(body)
            .map_err(|e| Error::Config(format!("the request body does not serialize: {e}")))?;
        self.body = Some(bytes);
        Ok(self)
    }

    /// The query: one of the contract's query shapes, each field that is set as a parameter.
    fn query(mut self, query: &impl Serialize) -> Self {
        self.query = query_pairs(query);
        self
    }

    fn header(mut self, name: &'static str, value: Option<&str>) -> Self {
        if let Some(value) = value {
            self.headers.push((name, value.to_owned()));
        }
        self
    }

    fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

/// A query shape's set fields as `name=value` pairs (a string as it is, a number or a boolean
/// as its JSON text); unset fields are left out by the shapes themselves.
fn query_pairs(query: &impl Serialize) -> Vec<(String, String)> {
    let Ok(serde_json::Value::Object(fields)) = serde_json::to_value(query) else {
        return Vec::new();
    };
    let mut pairs = Vec::new();
    for (name, value) in fields {
        match value {
            serde_json::Value::Null => {}
            serde_json::Value::String(text) => pairs.push((name, text)),
            // A parameter that repeats (`label`): one pair a value.
            serde_json::Value::Array(values) => {
                for value in values {
                    let text = match value {
                        serde_json::Value::String(text) => text,
                        other => other.to_string(),
                    };
                    pairs.push((name.clone(), text));
                }
            }
            other => pairs.push((name, other.to_string())),
        }
    }
    pairs
}

/// Methods the node reads a `Content-Type` on, body or not.
fn method_writes(method: &Method) -> bool {
    matches!(*method, Method::POST | Method::PUT | Method::PATCH)
}

fn error_from_answer(status: u16, url: &Url, body: &[u8], retry_after: Option<Duration>) -> Error {
    match serde_json::from_slice::<ErrorBody>(body) {
        Ok(ErrorBody { error }) => Error::Api {
            status,
            code: error.code,
            message: error.message,
            field: error.field,
            retry_after,
        },
        Err(_) => Error::Http {
            status,
            url: url.to_string(),
            retry_after,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::JobRef;

    #[test]
    fn joins_and_encodes_paths() {
        let client = Client::new("http://127.0.0.1:7070/prefix/").unwrap();
        assert_eq!(
            client
                .url(&["v1", "queues", "a b/c", "lease"], &[])
                .as_str(),
            "http://127.0.0.1:7070/prefix/v1/queues/a%20b%2Fc/lease"
        );
        let client = Client::new("http://127.0.0.1:7070").unwrap();
        assert_eq!(
            client
                .url(&["v1", "jobs"], &[("type".into(), "a&b".into())])
                .as_str(),
            "http://127.0.0.1:7070/v1/jobs?type=a%26b"
        );
    }

    #[test]
    fn a_job_key_is_one_percent_encoded_segment() {
        let client = Client::new("http://127.0.0.1:7070").unwrap();
        let job = JobRef::key("nightly export/a%b?#");
        assert_eq!(
            client
                .url(&["v1", "jobs", &job.segment(), "runs"], &[])
                .as_str(),
            "http://127.0.0.1:7070/v1/jobs/key:nightly%20export%2Fa%25b%3F%23/runs"
        );
        let id = uuid::Uuid::nil();
        assert_eq!(
            JobRef::from(id).segment(),
            "00000000-0000-0000-0000-000000000000"
        );
    }

    #[test]
    fn refuses_non_http_base_urls() {
        assert!(matches!(
            Client::new("mailto:a@example.com"),
            Err(Error::Config(_))
        ));
        assert!(matches!(Client::new("not a url"), Err(Error::Config(_))));
    }

    #[test]
    fn reads_the_api_error_body() {
        let url = Url::parse("http://x/v1/queues/q/ack").unwrap();
        let body =
            br#"{"error": {"code": "invalid_field", "message": "bad", "field": "receipts[2]"}}"#;
        match error_from_answer(422, &url, body, None) {
            Error::Api {
                status,
                code,
                field,
                ..
            } => {
                assert_eq!(status, 422);
                assert_eq!(code, "invalid_field");
                assert_eq!(field.as_deref(), Some("receipts[2]"));
            }
            other => panic!("expected an api error, got {other:?}"),
        }
        let other = error_from_answer(502, &url, b"<html>bad gateway</html>", None);
        assert!(matches!(other, Error::Http { status: 502, .. }));
        assert!(other.is_retryable());
    }
}
