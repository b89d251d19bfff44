//! The bench's webhook receiver: HTTP/1.1 with keep-alive on loopback, doing as little as possible
//! per request (parse two headers, push 32 bytes onto a preallocated vector, answer 204), and the
//! raw-socket load generator that measures its ceiling.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use http_body_util::{BodyExt, Empty};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

use super::accounting::{DeliveryKey, Receipt};
use super::now_ms;
use super::recorder::Recorder;

pub struct Receiver {
    inner: Arc<Inner>,
    addr: SocketAddr,
    accept: tokio::task::JoinHandle<()>,
}

struct Inner {
    receipts: Recorder,
    /// Requests without a parsable `webhook-id`.
    foreign: AtomicU64,
    /// TCP connections accepted: far more than the node's delivery concurrency means its client
    /// is not keeping connections alive.
    connections: AtomicU64,
}

impl Receiver {
    /// Listens on a loopback port and records every delivery into `receipts`.
    pub async fn start(receipts: Recorder) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .context("receiver cannot bind a loopback port")?;
        let addr = listener.local_addr()?;
        let inner = Arc::new(Inner {
            receipts,
            foreign: AtomicU64::new(0),
            connections: AtomicU64::new(0),
        });
        let state = inner.clone();
        let accept = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    // Out of file descriptors or similar: back off instead of spinning.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                let _ = stream.set_nodelay(true);
                state.connections.fetch_add(1, Ordering::Relaxed);
                let state = state.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req| handle(state.clone(), req));
                    let _ = http1::Builder::new()
                        .keep_alive(true)
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(Self {
            inner,
            addr,
            accept,
        })
    }

    pub fn url(&self) -> String {
        format!("http://{}/hook", self.addr)
    }

    pub fn foreign(&self) -> u64 {
        self.inner.foreign.load(Ordering::Relaxed)
    }

    pub fn connections(&self) -> u64 {
        self.inner.connections.load(Ordering::Relaxed)
    }

    /// Forgets everything recorded (after the ceiling measurement).
    pub fn reset(&self) {
        self.inner.receipts.clear();
        self.inner.foreign.store(0, Ordering::Relaxed);
        self.inner.connections.store(0, Ordering::Relaxed);
    }

    /// Requests per second the receiver answers from `connections` keep-alive connections driven
    /// as hard as this process can for `duration`. The generator shares the CPU with the receiver,
    /// so this is a lower bound of what the receiver alone could take.
    pub async fn measure_ceiling(
        &self,
        connections: usize,
        duration: Duration,
    ) -> anyhow::Result<f64> {
        let request = Arc::new(ceiling_request(self.addr));
        let stop = Arc::new(AtomicBool::new(false));
        let started = Instant::now();
        let mut tasks = JoinSet::new();
        for _ in 0..connections {
            let (request, stop, addr) = (request.clone(), stop.clone(), self.addr);
            tasks.spawn(async move { hammer(addr, &request, &stop).await });
        }
        tokio::time::sleep(duration).await;
        stop.store(true, Ordering::Relaxed);
        let mut total = 0u64;
        while let Some(joined) = tasks.join_next().await {
            total += joined.context("load generator task failed")??;
        }
        let elapsed = started.elapsed().as_secs_f64();
        Ok(total as f64 / elapsed)
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

async fn handle(
    state: Arc<Inner>,
    req: Request<Incoming>,
) -> Result<Response<Empty<Bytes>>, Infallible> {
    let received_ms = now_ms();
    let headers = req.headers();
    let id = headers
        .get("webhook-id")
        .and_then(|v| DeliveryKey::parse(v.as_bytes()));
    let due_header_ms = headers
        .get("hourglass-due-at")
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.parse::<jiff::Timestamp>().ok())
        .map_or(i64::MIN, |t| t.as_millisecond());
    // Read the (tiny) body so the connection can carry the next request.
    let _ = req.into_body().collect().await;
    match id {
        Some(id) => state.receipts.push(Receipt {
            id,
            due_header_ms,
            received_ms,
        }),
        None => {
            state.foreign.fetch_add(1, Ordering::Relaxed);
        }
    }
    let mut response = Response::new(Empty::new());
    *response.status_mut() = StatusCode::NO_CONTENT;
    Ok(response)
}

/// A request shaped like a real delivery (same headers, similar size).
fn ceiling_request(addr: SocketAddr) -> Vec<u8> {
    format!(
        "POST /hook HTTP/1.1\r\n\
         host: {addr}\r\n\
         content-type: application/json\r\n\
         webhook-id: 0000000000007000800000000000000a_1700000000000\r\n\
         webhook-timestamp: 1700000000\r\n\
         webhook-signature: v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=\r\n\
         hourglass-job-id: 00000000-0000-7000-8000-00000000000a\r\n\
         hourglass-due-at: 2023-11-14T22:13:20.000Z\r\n\
         hourglass-attempt: 1\r\n\
         user-agent: hourglass/{}\r\n\
         accept: */*\r\n\
         content-length: 4\r\n\
         \r\n\
         null",
        env!("CARGO_PKG_VERSION")
    )
    .into_bytes()
}

/// One keep-alive connection sending a request, reading its (bodiless 204) response, repeat.
async fn hammer(addr: SocketAddr, request: &[u8], stop: &AtomicBool) -> anyhow::Result<u64> {
    let mut stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let mut buf = vec![0u8; 4096];
    let mut done = 0u64;
    while !stop.load(Ordering::Relaxed) {
        stream.write_all(request).await?;
        let mut filled = 0;
        loop {
            let n = stream.read(&mut buf[filled..]).await?;
            if n == 0 {
                anyhow::bail!("receiver closed the connection");
            }
            filled += n;
            if buf[..filled].windows(4).any(|w| w == b"\r\n\r\n") {
                break;
            }
            if filled == buf.len() {
                anyhow::bail!("response head too large");
            }
        }
        if !buf.starts_with(b"HTTP/1.1 204") {
            anyhow::bail!(
                "unexpected response: {}",
                String::from_utf8_lossy(&buf[..filled.min(64)])
            );
        }
        done += 1;
    }
    Ok(done)
}
