//! The bench's webhook receiver: HTTP/1.1 with keep-alive on loopback, doing as little as possible
//! per request (parse two headers, push 32 bytes onto a preallocated vector, answer 204; for a
//! batch, read each item's id and due time from the body), and the raw-socket load generator that
//! measures its ceiling.

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
    /// Batch requests (`hourglass-batch-size`), and the items they carried.
    batches: AtomicU64,
    batched_items: AtomicU64,
}

/// What the receiver reads of a batch body: each item's delivery id and due time.
#[derive(serde::Deserialize)]
struct BatchBody<'a> {
    #[serde(borrow)]
    deliveries: Vec<BatchItem<'a>>,
}

#[derive(serde::Deserialize)]
struct BatchItem<'a> {
    id: &'a str,
    due_at: &'a str,
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
            batches: AtomicU64::new(0),
            batched_items: AtomicU64::new(0),
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

    /// Batch requests received, and the items in them.
    pub fn batches(&self) -> (u64, u64) {
        (
            self.inner.batches.load(Ordering::Relaxed),
            self.inner.batched_items.load(Ordering::Relaxed),
        )
    }

    /// Forgets everything recorded (after the ceiling measurement).
    pub fn reset(&self) {
        self.inner.receipts.clear();
        self.inner.foreign.store(0, Ordering::Relaxed);
        self.inner.connections.store(0, Ordering::Relaxed);
        self.inner.batches.store(0, Ordering::Relaxed);
        self.inner.batched_items.store(0, Ordering::Relaxed);
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
    if headers.contains_key("hourglass-batch-size") {
        let body = req.into_body().collect().await.map(|b| b.to_bytes());
        record_batch(&state, body.ok().as_deref(), received_ms);
        return Ok(no_content());
    }
    let id = headers
        .get("webhook-id")
        .and_then(|v| DeliveryKey::parse(v.as_bytes()));
    let due_header_ms = headers
        .get("hourglass-due-at")
        .and_then(|v| v.to_str().ok())
        .map_or(i64::MIN, parse_due);
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
    Ok(no_content())
}

/// A receipt for each item of a batch; a body that is not one counts as a foreign request.
fn record_batch(state: &Inner, body: Option<&[u8]>, received_ms: i64) {
    let Some(batch) = body.and_then(|b| serde_json::from_slice::<BatchBody<'_>>(b).ok()) else {
        state.foreign.fetch_add(1, Ordering::Relaxed);
        return;
    };
    state.batches.fetch_add(1, Ordering::Relaxed);
    state
        .batched_items
        .fetch_add(batch.deliveries.len() as u64, Ordering::Relaxed);
    for item in batch.deliveries {
        match DeliveryKey::parse(item.id.as_bytes()) {
            Some(id) => state.receipts.push(Receipt {
                id,
                due_header_ms: parse_due(item.due_at),
                received_ms,
            }),
            None => {
                state.foreign.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// An RFC 3339 instant as unix ms (`i64::MIN` when unparsable).
fn parse_due(text: &str) -> i64 {
    text.parse::<jiff::Timestamp>()
        .map_or(i64::MIN, |t| t.as_millisecond())
}

fn no_content() -> Response<Empty<Bytes>> {
    let mut response = Response::new(Empty::new());
    *response.status_mut() = StatusCode::NO_CONTENT;
    response
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

#[cfg(test)]
mod tests {
    use super::*;

    fn inner() -> Inner {
        Inner {
            receipts: Recorder::new(8),
            foreign: AtomicU64::new(0),
            connections: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            batched_items: AtomicU64::new(0),
        }
    }

    #[test]
    fn a_batch_gives_a_receipt_per_item() {
        let state = inner();
        let body = br#"{"deliveries": [
            {"id": "0000000000007000800000000000000a_1700000000000", "job_id": "x",
             "due_at": "2023-11-14T22:13:20.000Z", "attempt": 1, "payload": {"a": [1, "b"]}},
            {"id": "0000000000007000800000000000000b_1700000000500", "job_id": "y",
             "due_at": "2023-11-14T22:13:20.500Z", "attempt": 2, "payload": null}
        ]}"#;
        record_batch(&state, Some(body), 1_700_000_000_900);
        let receipts = state.receipts.snapshot();
        assert_eq!(
            receipts,
            vec![
                Receipt {
                    id: DeliveryKey::new(
                        0x0000_0000_0000_7000_8000_0000_0000_000a,
                        1_700_000_000_000
                    ),
                    due_header_ms: 1_700_000_000_000,
                    received_ms: 1_700_000_000_900,
                },
                Receipt {
                    id: DeliveryKey::new(
                        0x0000_0000_0000_7000_8000_0000_0000_000b,
                        1_700_000_000_500
                    ),
                    due_header_ms: 1_700_000_000_500,
                    received_ms: 1_700_000_000_900,
                },
            ]
        );
        assert_eq!(state.batches.load(Ordering::Relaxed), 1);
        assert_eq!(state.batched_items.load(Ordering::Relaxed), 2);

        // A body that is not a batch is a foreign request, not a delivery.
        record_batch(&state, Some(b"null"), 0);
        record_batch(&state, None, 0);
        assert_eq!(state.foreign.load(Ordering::Relaxed), 2);
        assert_eq!(state.receipts.recorded(), 2);
    }
}
