//! The noisy neighbour's receivers: loopback listeners (one port per destination) that misbehave
//! in one chosen way, for `bench noisy-neighbour`. They speak just enough HTTP/1.1 to answer (a
//! status line, then close).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use clap::ValueEnum;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// How the noisy neighbour's receiver misbehaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SlowMode {
    /// Accepts the connection, reads the request, never answers (until the node's delivery
    /// timeout gives up).
    Hang,
    /// Answers 500 at once.
    Error,
    /// Answers 429 with `Retry-After: 5` at once.
    Throttle,
}

impl SlowMode {
    pub fn name(self) -> &'static str {
        match self {
            SlowMode::Hang => "hang",
            SlowMode::Error => "error",
            SlowMode::Throttle => "throttle",
        }
    }

    fn answer(self) -> Option<&'static [u8]> {
        match self {
            SlowMode::Hang => None,
            SlowMode::Error => Some(
                b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            ),
            SlowMode::Throttle => Some(
                b"HTTP/1.1 429 Too Many Requests\r\nretry-after: 5\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            ),
        }
    }
}

/// The noisy namespace's destinations: one listener per port, each misbehaving the same way.
/// Distinct ports are distinct destinations to the node, so each has its own slots.
pub struct Blackhole {
    urls: Vec<String>,
    counters: Arc<Counters>,
    tasks: Vec<JoinHandle<()>>,
}

#[derive(Default)]
struct Counters {
    /// Requests received, over all the listeners.
    requests: AtomicU64,
    /// Requests read and not yet let go (answered, or dropped by the node).
    open: AtomicU64,
    /// The most requests open at once.
    peak_open: AtomicU64,
}

/// Counts one request as open while it lives.
struct Held<'a>(&'a Counters);

impl<'a> Held<'a> {
    fn new(counters: &'a Counters) -> Self {
        counters.requests.fetch_add(1, Ordering::Relaxed);
        let open = counters.open.fetch_add(1, Ordering::Relaxed) + 1;
        counters.peak_open.fetch_max(open, Ordering::Relaxed);
        Self(counters)
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Blackhole {
    /// `destinations` listeners on loopback, each on a port of its own.
    pub async fn start(mode: SlowMode, destinations: usize) -> anyhow::Result<Self> {
        let counters = Arc::new(Counters::default());
        let mut urls = Vec::with_capacity(destinations);
        let mut tasks = Vec::with_capacity(destinations);
        for _ in 0..destinations.max(1) {
            let listener = TcpListener::bind("127.0.0.1:0").await?;
            urls.push(format!("http://{}/slow", listener.local_addr()?));
            tasks.push(tokio::spawn(serve(listener, mode, counters.clone())));
        }
        Ok(Self {
            urls,
            counters,
            tasks,
        })
    }

    /// The destinations' URLs, one per port.
    pub fn urls(&self) -> &[String] {
        &self.urls
    }

    /// Requests received (each delivery attempt to the noisy namespace).
    pub fn requests(&self) -> u64 {
        self.counters.requests.load(Ordering::Relaxed)
    }

    /// The most requests held open at once over all the destinations: with `hang`, the noisy
    /// namespace's deliveries in flight at their peak.
    pub fn peak_open(&self) -> u64 {
        self.counters.peak_open.load(Ordering::Relaxed)
    }
}

async fn serve(listener: TcpListener, mode: SlowMode, counters: Arc<Counters>) {
    while let Ok((mut socket, _)) = listener.accept().await {
        let counters = counters.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 16 * 1024];
            let mut seen = Vec::new();
            // Read until the end of the request head (a delivery's body is small and follows
            // at once; the answer does not depend on it).
            loop {
                match socket.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => {
                        seen.extend_from_slice(&buf[..n]);
                        if seen.windows(4).any(|w| w == b"\r\n\r\n") {
                            break;
                        }
                    }
                }
            }
            let _held = Held::new(&counters);
            match mode.answer() {
                Some(answer) => {
                    let _ = socket.write_all(answer).await;
                    let _ = socket.shutdown().await;
                }
                // Hold the connection, discarding whatever comes, until the node gives up.
                None => while matches!(socket.read(&mut buf).await, Ok(n) if n > 0) {},
            }
        });
    }
}

impl Drop for Blackhole {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}
