//! The webhook receiver: records each delivery's ids, due time and payload number without
//! scanning what came before, so it keeps up with thousands of deliveries a second. A path
//! `/status/NNN` answers NNN; every other path answers 204.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use serde_json::Value;
use tokio::sync::Notify;

use super::now_ms;

/// One webhook delivery as the receiver saw it.
#[derive(Debug, Clone)]
pub struct Hook {
    pub path: String,
    pub webhook_id: String,
    pub job_id: String,
    /// The `hourglass-due-at` header, unix ms (`i64::MIN` when absent or unparsable).
    pub due_ms: i64,
    pub received_ms: i64,
    /// `n` of the payload `{"n": n}`, if it has one.
    pub n: Option<u64>,
    /// The status the receiver answered with.
    pub status: u16,
}

#[derive(Clone)]
pub struct Hooks {
    inner: Arc<HooksInner>,
}

struct HooksInner {
    addr: SocketAddr,
    seen: Mutex<Vec<Hook>>,
    count: AtomicUsize,
    /// Woken on every delivery, for waiters on a count.
    arrived: Notify,
}

impl Hooks {
    /// Starts the receiver on a loopback port; returns it and the URL of its `/hook` path.
    pub async fn start() -> (Hooks, String) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let hooks = Hooks {
            inner: Arc::new(HooksInner {
                addr: listener.local_addr().unwrap(),
                seen: Mutex::default(),
                count: AtomicUsize::new(0),
                arrived: Notify::new(),
            }),
        };
        let app = axum::Router::new()
            .fallback(receive)
            .with_state(hooks.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        let url = hooks.url("/hook");
        (hooks, url)
    }

    /// The URL of `path` on this receiver.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.inner.addr)
    }

    pub fn count(&self) -> usize {
        self.inner.count.load(Ordering::Acquire)
    }

    pub fn snapshot(&self) -> Vec<Hook> {
        self.inner.seen.lock().unwrap().clone()
    }

    /// Waits until at least `n` deliveries arrived; false after `timeout`.
    pub async fn wait_count(&self, n: usize, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.inner.arrived.notified();
            if self.count() >= n {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.count() >= n;
            }
        }
    }
}

async fn receive(
    State(hooks): State<Hooks>,
    uri: Uri,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> StatusCode {
    let received_ms = now_ms();
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    let due_ms = header("hourglass-due-at")
        .parse::<jiff::Timestamp>()
        .map(|t| t.as_millisecond())
        .unwrap_or(i64::MIN);
    let n = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|v| v["n"].as_u64());
    let path = uri.path().to_string();
    let status = path
        .strip_prefix("/status/")
        .and_then(|code| code.parse::<u16>().ok())
        .and_then(|code| StatusCode::from_u16(code).ok())
        .unwrap_or(StatusCode::NO_CONTENT);
    let hook = Hook {
        path,
        webhook_id: header("webhook-id"),
        job_id: header("hourglass-job-id"),
        due_ms,
        received_ms,
        n,
        status: status.as_u16(),
    };
    hooks.inner.seen.lock().unwrap().push(hook);
    hooks.inner.count.fetch_add(1, Ordering::AcqRel);
    hooks.inner.arrived.notify_waiters();
    status
}
