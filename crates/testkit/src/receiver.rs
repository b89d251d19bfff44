//! A webhook receiver for tests: an HTTP (or HTTPS) server on a loopback port that keeps every
//! request whole — path, headers, body, when it arrived and what it was answered — and wakes
//! whoever waits on what arrived. Recording does not scan what came before, so it keeps up with
//! the tens of thousands of deliveries the soak tests send.
//!
//! What it answers depends on the path alone:
//! - `/status/NNN` answers NNN;
//! - `/flaky/N` answers 500 to the first N requests of each delivery (same `webhook-id`), then
//!   204; `/flaky` answers 503 to the first request of each delivery, then 204;
//! - `/slow/MS` is recorded on arrival and answers 204 after holding the request open MS
//!   milliseconds (a receiver whose work takes a while);
//! - any other path answers 204.
//!
//! Every answer's body is `answered NNN` (a 204's is dropped on the wire).
//!
//! The server stops when the last clone of its [`Receiver`] is dropped.

mod tls;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use serde_json::Value;
use tokio::sync::Notify;

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
    /// A header's value; empty when it is absent or not text.
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }

    /// The delivery id (`webhook-id`).
    pub fn webhook_id(&self) -> &str {
        self.header("webhook-id")
    }

    /// The job's id (`hourglass-job-id`).
    pub fn job_id(&self) -> &str {
        self.header("hourglass-job-id")
    }

    /// The occurrence's due time from the `hourglass-due-at` header, unix ms; panics without one.
    pub fn due_ms(&self) -> i64 {
        self.header("hourglass-due-at")
            .parse::<jiff::Timestamp>()
            .unwrap_or_else(|e| panic!("no hourglass-due-at instant ({e}) in {self:?}"))
            .as_millisecond()
    }

    /// The body as JSON; panics when it is not.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("json body")
    }

    /// `n` of a payload `{"n": n, ...}`, if it has one.
    pub fn n(&self) -> Option<u64> {
        serde_json::from_slice::<Value>(&self.body)
            .ok()
            .and_then(|v| v["n"].as_u64())
    }
}

/// The receiver: cheap to clone, every clone sees the same deliveries.
#[derive(Clone)]
pub struct Receiver {
    record: Arc<Record>,
    server: Arc<Server>,
}

/// What the handler writes and the test reads.
#[derive(Default)]
struct Record {
    deliveries: Mutex<Vec<Delivery>>,
    count: AtomicUsize,
    /// Requests so far per delivery id, on the `/flaky` paths only.
    flaky_attempts: Mutex<HashMap<String, usize>>,
    /// Woken on every delivery, for waiters.
    arrived: Notify,
}

/// The running server; aborted when the last [`Receiver`] clone goes.
struct Server {
    addr: SocketAddr,
    /// "http", or "https" for [`Receiver::start_tls`].
    scheme: &'static str,
    task: tokio::task::AbortHandle,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Receiver {
    /// Starts a receiver on a free loopback port.
    pub async fn start() -> Receiver {
        Self::start_on(0).await
    }

    /// Starts a receiver on this loopback port (0: a free one); panics when it is taken.
    pub async fn start_on(port: u16) -> Receiver {
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .unwrap_or_else(|e| panic!("the receiver's port {addr}: {e}"));
        let addr = listener.local_addr().expect("the receiver's address");
        let (record, app) = Self::app();
        let task = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self::running(record, addr, "http", task)
    }

    /// The same receiver over TLS with this certificate chain and key (PEM files), named
    /// `localhost` in its URLs: `https://localhost:PORT/...`.
    pub async fn start_tls(cert: &Path, key: &Path) -> Receiver {
        let listener = tls::Listener::bind(cert, key).await;
        let addr = listener.local_addr();
        let (record, app) = Self::app();
        let task = tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self::running(record, addr, "https", task)
    }

    fn app() -> (Arc<Record>, axum::Router) {
        let record = Arc::new(Record::default());
        let app = axum::Router::new()
            .fallback(receive)
            .with_state(record.clone());
        (record, app)
    }

    fn running(
        record: Arc<Record>,
        addr: SocketAddr,
        scheme: &'static str,
        task: tokio::task::JoinHandle<()>,
    ) -> Receiver {
        let task = task.abort_handle();
        Receiver {
            record,
            server: Arc::new(Server { addr, scheme, task }),
        }
    }

    /// Its loopback address.
    pub fn addr(&self) -> SocketAddr {
        self.server.addr
    }

    pub fn port(&self) -> u16 {
        self.server.addr.port()
    }

    /// The URL of `path` on this receiver (`https://localhost:PORT` over TLS).
    pub fn url(&self, path: &str) -> String {
        match self.server.scheme {
            "https" => format!("https://localhost:{}{path}", self.port()),
            _ => format!("http://{}{path}", self.addr()),
        }
    }

    /// How many requests arrived.
    pub fn count(&self) -> usize {
        self.record.count.load(Ordering::Acquire)
    }

    /// Every request so far, in the order they were recorded.
    pub fn deliveries(&self) -> Vec<Delivery> {
        self.record.deliveries.lock().unwrap().clone()
    }

    /// The requests on this path.
    pub fn on_path(&self, path: &str) -> Vec<Delivery> {
        self.filtered(|d| d.path == path)
    }

    /// The requests for this job (`hourglass-job-id`).
    pub fn of_job(&self, id: &str) -> Vec<Delivery> {
        self.filtered(|d| d.job_id() == id)
    }

    fn filtered(&self, keep: impl Fn(&Delivery) -> bool) -> Vec<Delivery> {
        let deliveries = self.record.deliveries.lock().unwrap();
        deliveries.iter().filter(|d| keep(d)).cloned().collect()
    }

    /// Waits until at least `n` requests arrived; false after `timeout`.
    pub async fn wait_count(&self, n: usize, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.record.arrived.notified();
            if self.count() >= n {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.count() >= n;
            }
        }
    }

    /// Waits until `pred` holds over the requests and returns them; panics after `timeout`,
    /// naming `what` it waited for.
    pub async fn wait_for(
        &self,
        timeout: Duration,
        what: &str,
        pred: impl Fn(&[Delivery]) -> bool,
    ) -> Vec<Delivery> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.record.arrived.notified();
            {
                let deliveries = self.record.deliveries.lock().unwrap();
                if pred(&deliveries) {
                    return deliveries.clone();
                }
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                let seen = self.count();
                panic!("timed out waiting for {what} ({seen} deliveries seen)");
            }
        }
    }
}

async fn receive(
    State(record): State<Arc<Record>>,
    uri: Uri,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> (StatusCode, String) {
    let received_ms = jiff::Timestamp::now().as_millisecond();
    let path = uri.path().to_string();
    let status = answer(&record, &path, &headers);
    let hold = path
        .strip_prefix("/slow/")
        .and_then(|ms| ms.parse::<u64>().ok());
    record.deliveries.lock().unwrap().push(Delivery {
        path,
        headers,
        body: body.to_vec(),
        received_ms,
        status: status.as_u16(),
    });
    record.count.fetch_add(1, Ordering::AcqRel);
    record.arrived.notify_waiters();
    if let Some(hold) = hold {
        tokio::time::sleep(Duration::from_millis(hold)).await;
    }
    (status, format!("answered {}", status.as_u16()))
}

/// The status for a request on `path` (the module's opening comment).
fn answer(record: &Record, path: &str, headers: &HeaderMap) -> StatusCode {
    let mut parts = path.trim_start_matches('/').split('/');
    let (first, second) = (parts.next(), parts.next());
    let code = second.and_then(|n| n.parse::<u16>().ok());
    match (first, second, code) {
        (Some("status"), _, Some(code)) => {
            StatusCode::from_u16(code).unwrap_or(StatusCode::NO_CONTENT)
        }
        (Some("flaky"), None, _) => {
            let earlier = flaky_attempt(record, headers);
            if earlier < 1 {
                StatusCode::SERVICE_UNAVAILABLE
            } else {
                StatusCode::NO_CONTENT
            }
        }
        (Some("flaky"), Some(_), Some(n)) => {
            let earlier = flaky_attempt(record, headers);
            if earlier < usize::from(n) {
                StatusCode::INTERNAL_SERVER_ERROR
            } else {
                StatusCode::NO_CONTENT
            }
        }
        _ => StatusCode::NO_CONTENT,
    }
}

/// How many requests of this delivery (its `webhook-id`) came before this one.
fn flaky_attempt(record: &Record, headers: &HeaderMap) -> usize {
    let id = headers
        .get("webhook-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let mut attempts = record.flaky_attempts.lock().unwrap();
    let seen = attempts.entry(id.to_string()).or_default();
    *seen += 1;
    *seen - 1
}
