//! The webhook receiver: records each delivery's ids, due time and payload number without
//! scanning what came before, so it keeps up with thousands of deliveries a second. A path
//! `/status/NNN` answers NNN; every other path answers 204.

use std::net::SocketAddr;
use std::path::Path;
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
    /// "http", or "https" for [`Hooks::start_tls`].
    scheme: &'static str,
    seen: Mutex<Vec<Hook>>,
    count: AtomicUsize,
    /// Woken on every delivery, for waiters on a count.
    arrived: Notify,
}

impl Hooks {
    /// Starts the receiver on a loopback port; returns it and the URL of its `/hook` path.
    pub async fn start() -> (Hooks, String) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let (hooks, app) = Self::new(listener.local_addr().unwrap(), "http");
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        let url = hooks.url("/hook");
        (hooks, url)
    }

    /// The same receiver over TLS with this certificate chain and key (PEM files), named
    /// `localhost` in its URL: an `https://localhost:PORT/hook` receiver.
    pub async fn start_tls(cert: &Path, key: &Path) -> (Hooks, String) {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
            .expect("certificate file")
            .collect::<Result<_, _>>()
            .expect("certificate PEM");
        let key = PrivateKeyDer::from_pem_file(key).expect("key PEM");
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .expect("server certificate");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let (hooks, app) = Self::new(listener.local_addr().unwrap(), "https");
        let tls = TlsListener {
            tcp: listener,
            acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
        };
        tokio::spawn(async move { axum::serve(tls, app).await.unwrap() });
        let url = hooks.url("/hook");
        (hooks, url)
    }

    fn new(addr: SocketAddr, scheme: &'static str) -> (Hooks, axum::Router) {
        let hooks = Hooks {
            inner: Arc::new(HooksInner {
                addr,
                scheme,
                seen: Mutex::default(),
                count: AtomicUsize::new(0),
                arrived: Notify::new(),
            }),
        };
        let app = axum::Router::new()
            .fallback(receive)
            .with_state(hooks.clone());
        (hooks, app)
    }

    /// The URL of `path` on this receiver.
    pub fn url(&self, path: &str) -> String {
        match self.inner.scheme {
            "https" => format!("https://localhost:{}{path}", self.inner.addr.port()),
            _ => format!("http://{}{path}", self.inner.addr),
        }
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

/// TLS over a TCP listener for axum: a connection whose handshake fails is dropped (the client
/// sees the failure), and the listener goes on accepting.
struct TlsListener {
    tcp: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((tcp, peer)) = self.tcp.accept().await else {
                continue;
            };
            if let Ok(Ok(tls)) =
                tokio::time::timeout(Duration::from_secs(5), self.acceptor.accept(tcp)).await
            {
                return (tls, peer);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}
