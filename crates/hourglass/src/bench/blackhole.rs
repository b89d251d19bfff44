//! The noisy neighbour's receiver: a loopback listener that misbehaves in one chosen way, for
//! `bench noisy-neighbour`. It speaks just enough HTTP/1.1 to answer (a status line, then close).

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

pub struct Blackhole {
    url: String,
    requests: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

impl Blackhole {
    pub async fn start(mode: SlowMode) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/slow", listener.local_addr()?);
        let requests = Arc::new(AtomicU64::new(0));
        let counter = requests.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let counter = counter.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 16 * 1024];
                    let mut seen = Vec::new();
                    // Read until the end of the request head (a delivery's body is small and
                    // follows at once; the answer does not depend on it).
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
                    counter.fetch_add(1, Ordering::Relaxed);
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
        });
        Ok(Self {
            url,
            requests,
            task,
        })
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// Requests received (each delivery attempt to the noisy namespace).
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }
}

impl Drop for Blackhole {
    fn drop(&mut self) {
        self.task.abort();
    }
}
