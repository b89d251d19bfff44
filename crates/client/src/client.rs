//! The typed API client: one method per endpoint, JSON in and out, every failure an [`Error`].

use std::time::Duration;

use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use reqwest::{Method, Url};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Error, parse_retry_after};
use hourglass_api::{
    AckRequest, ErrorBody, ExtendRequest, LeaseRequest, LeaseResult, NackRequest, NodeList,
    QueueList,
};

use crate::types::{
    DeadLetter, DeadLetterPage, JobFilter, JobInfo, JobPage, JobRef, LeaseOptions, Message, NewJob,
    Node, QueueMessagePage, QueueStats, Receipt, ReceiptResults, RunPage, SigningSecret, millis,
};

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
    // Queues

    /// Leases up to `options.max` messages, long-polling up to `options.wait` when none is
    /// available. An empty list means the wait ran out.
    pub async fn lease(&self, queue: &str, options: &LeaseOptions) -> Result<Vec<Message>, Error> {
        let answer: LeaseResult<'static> = self
            .send(
                Method::POST,
                &["v1", "queues", queue, "lease"],
                &[],
                Some(&LeaseRequest::from(options)),
                REQUEST_TIMEOUT + options.wait,
            )
            .await?;
        Ok(answer.messages)
    }

    /// Completes the messages (a recurring job moves to its next occurrence).
    pub async fn ack(&self, queue: &str, receipts: &[Receipt]) -> Result<ReceiptResults, Error> {
        let body = AckRequest {
            receipts: receipts.to_vec(),
        };
        self.receipts(queue, "ack", &body).await
    }

    /// Hands the messages back for another attempt after `delay`, or after the job's retry
    /// backoff when `None`. A message past its job's last attempt becomes a dead letter.
    pub async fn nack(
        &self,
        queue: &str,
        receipts: &[Receipt],
        delay: Option<Duration>,
    ) -> Result<ReceiptResults, Error> {
        let body = NackRequest {
            receipts: receipts.to_vec(),
            delay_ms: delay.map(millis),
        };
        self.receipts(queue, "nack", &body).await
    }

    /// Keeps the messages invisible to other consumers for `visibility` from now.
    pub async fn extend(
        &self,
        queue: &str,
        receipts: &[Receipt],
        visibility: Duration,
    ) -> Result<ReceiptResults, Error> {
        let body = ExtendRequest {
            receipts: receipts.to_vec(),
            visibility_ms: millis(visibility),
        };
        self.receipts(queue, "extend", &body).await
    }

    async fn receipts(
        &self,
        queue: &str,
        verb: &str,
        body: &impl Serialize,
    ) -> Result<ReceiptResults, Error> {
        self.send(
            Method::POST,
            &["v1", "queues", queue, verb],
            &[],
            Some(body),
            REQUEST_TIMEOUT,
        )
        .await
    }

    /// One queue's counts (zeros for a queue no job targets).
    pub async fn queue_stats(&self, queue: &str) -> Result<QueueStats, Error> {
        self.get(&["v1", "queues", queue], &[]).await
    }

    /// Every queue of the namespace, by name: the pages the node answers, followed.
    pub async fn list_queues(&self) -> Result<Vec<QueueStats>, Error> {
        let mut queues = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let query = page_query(Some(1000), cursor.as_deref());
            let page: QueueList = self.get(&["v1", "queues"], &query).await?;
            queues.extend(page.queues);
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => return Ok(queues),
            }
        }
    }

    /// The queue's messages, oldest first, a page at a time: waiting or leased, each with when
    /// it becomes available or when its lease lapses. `limit` is 1–1,000 (default 100); `cursor`
    /// the previous page's `next_cursor`. Leases nothing.
    pub async fn queue_messages(
        &self,
        queue: &str,
        limit: Option<usize>,
        cursor: Option<&str>,
    ) -> Result<QueueMessagePage, Error> {
        self.get(
            &["v1", "queues", queue, "messages"],
            &page_query(limit, cursor),
        )
        .await
    }

    // -----------------------------------------------------------------------------------------
    // Jobs

    /// Creates a job. With a `key` that already exists and the same body, the node answers with
    /// the existing job instead.
    pub async fn create_job(&self, job: &NewJob) -> Result<JobInfo, Error> {
        self.send(
            Method::POST,
            &["v1", "jobs"],
            &[],
            Some(job),
            REQUEST_TIMEOUT,
        )
        .await
    }

    /// The job, by id or by key ([`JobRef`]).
    pub async fn get_job(&self, job: impl Into<JobRef>) -> Result<JobInfo, Error> {
        self.get(&["v1", "jobs", &job.into().segment()], &[]).await
    }

    pub async fn list_jobs(&self, filter: &JobFilter) -> Result<JobPage, Error> {
        self.get(&["v1", "jobs"], &filter.query_pairs()).await
    }

    /// Cancels the job; an occurrence being delivered right now may still arrive.
    pub async fn cancel_job(&self, job: impl Into<JobRef>) -> Result<JobInfo, Error> {
        self.send(
            Method::DELETE,
            &["v1", "jobs", &job.into().segment()],
            &[],
            None::<&()>,
            REQUEST_TIMEOUT,
        )
        .await
    }

    pub async fn pause_job(&self, job: impl Into<JobRef>) -> Result<JobInfo, Error> {
        self.job_action(job.into(), "pause").await
    }

    /// Resumes a paused job (a recurring job continues from now).
    pub async fn resume_job(&self, job: impl Into<JobRef>) -> Result<JobInfo, Error> {
        self.job_action(job.into(), "resume").await
    }

    /// Fires an occurrence now.
    pub async fn trigger_job(&self, job: impl Into<JobRef>) -> Result<JobInfo, Error> {
        self.job_action(job.into(), "trigger").await
    }

    async fn job_action(&self, job: JobRef, action: &str) -> Result<JobInfo, Error> {
        self.send(
            Method::POST,
            &["v1", "jobs", &job.segment(), action],
            &[],
            None::<&()>,
            REQUEST_TIMEOUT,
        )
        .await
    }

    /// Delivery attempts of a job, newest first, a page at a time: `limit` (1–1,000, default
    /// 100) of them, older than `cursor` (the previous page's `next_cursor`) when given.
    pub async fn job_runs(
        &self,
        job: impl Into<JobRef>,
        limit: Option<usize>,
        cursor: Option<&str>,
    ) -> Result<RunPage, Error> {
        self.get(
            &["v1", "jobs", &job.into().segment(), "runs"],
            &page_query(limit, cursor),
        )
        .await
    }

    // -----------------------------------------------------------------------------------------
    // Dead letters

    pub async fn list_dead_letters(
        &self,
        limit: Option<usize>,
        cursor: Option<&str>,
    ) -> Result<DeadLetterPage, Error> {
        self.get(&["v1", "dead-letters"], &page_query(limit, cursor))
            .await
    }

    pub async fn get_dead_letter(&self, id: &str) -> Result<DeadLetter, Error> {
        self.get(&["v1", "dead-letters", id], &[]).await
    }

    /// Replays a dead letter as a new one-off job due now, and removes the dead letter.
    pub async fn replay_dead_letter(&self, id: &str) -> Result<JobInfo, Error> {
        self.send(
            Method::POST,
            &["v1", "dead-letters", id, "replay"],
            &[],
            None::<&()>,
            REQUEST_TIMEOUT,
        )
        .await
    }

    pub async fn delete_dead_letter(&self, id: &str) -> Result<(), Error> {
        let url = self.url(&["v1", "dead-letters", id], &[]);
        self.exchange(Method::DELETE, url, None::<&()>, REQUEST_TIMEOUT)
            .await
            .map(drop)
    }

    // -----------------------------------------------------------------------------------------
    // Signing

    /// The namespace's current webhook signing secret, read without rotating it (a namespace
    /// without one gets it now). Needs the namespace's own API key, or an admin key naming it.
    pub async fn signing_secret(&self) -> Result<SigningSecret, Error> {
        self.get(&["v1", "signing-secret"], &[]).await
    }

    // -----------------------------------------------------------------------------------------
    // Operations

    /// The cluster's live nodes, by id, each as its latest heartbeat said. Cluster-wide: needs
    /// an admin API key when the node has keys.
    pub async fn list_nodes(&self) -> Result<Vec<Node>, Error> {
        let list: NodeList = self.get(&["v1", "nodes"], &[]).await?;
        Ok(list.nodes)
    }

    /// The node's and the store's figures, as the dashboard charts them (`GET /v1/summary`):
    /// every namespace's, so an admin key's (a namespace key gets 403).
    pub async fn summary(&self) -> Result<hourglass_api::Summary, Error> {
        self.get(&["v1", "summary"], &[]).await
    }

    // -----------------------------------------------------------------------------------------
    // Plumbing

    /// Joins path segments onto the base URL, percent-encoding each (queue names and ids are
    /// user data).
    fn url(&self, segments: &[&str], query: &[(&str, String)]) -> Url {
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

    async fn get<T: DeserializeOwned>(
        &self,
        segments: &[&str],
        query: &[(&str, String)],
    ) -> Result<T, Error> {
        self.send(Method::GET, segments, query, None::<&()>, REQUEST_TIMEOUT)
            .await
    }

    async fn send<T: DeserializeOwned, B: Serialize + ?Sized>(
        &self,
        method: Method,
        segments: &[&str],
        query: &[(&str, String)],
        body: Option<&B>,
        timeout: Duration,
    ) -> Result<T, Error> {
        let url = self.url(segments, query);
        let bytes = self.exchange(method, url.clone(), body, timeout).await?;
        serde_json::from_slice(&bytes).map_err(|source| Error::Decode {
            url: url.to_string(),
            source,
        })
    }

    /// Sends one request and returns the body of a 2xx answer; anything else becomes an error.
    async fn exchange<B: Serialize + ?Sized>(
        &self,
        method: Method,
        url: Url,
        body: Option<&B>,
        timeout: Duration,
    ) -> Result<Vec<u8>, Error> {
        let writes = method_writes(&method);
        let mut request = self.http.request(method, url.clone()).timeout(timeout);
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
        match body {
            Some(body) => request = request.json(body),
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
            return Ok(bytes.to_vec());
        }
        Err(error_from_answer(
            status.as_u16(),
            &url,
            &bytes,
            retry_after,
        ))
    }
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

/// The query of a paged list: `limit` and `cursor` when given.
fn page_query(limit: Option<usize>, cursor: Option<&str>) -> Vec<(&'static str, String)> {
    let mut query = Vec::new();
    if let Some(limit) = limit {
        query.push(("limit", limit.to_string()));
    }
    if let Some(cursor) = cursor {
        query.push(("cursor", cursor.to_owned()));
    }
    query
}

#[cfg(test)]
mod tests {
    use super::*;

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
                .url(&["v1", "jobs"], &[("type", "a&b".into())])
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
