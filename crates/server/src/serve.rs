//! The HTTP/1 server loop: accepts connections up to a cap, and closes those that send no complete
//! request head in time or sit idle between requests for too long.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower_service::Service;

/// How the node's HTTP listeners treat connections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpConfig {
    /// Connections open at once, per listener. At the cap the node stops accepting: new
    /// connections wait in the kernel's listen backlog until one closes.
    pub max_connections: usize,
    /// How long a client has to send a complete request head: from the moment it connects, and on
    /// a kept-alive connection from the first byte of its next request. A silent or trickling
    /// client is disconnected after this, before it is authenticated.
    pub header_read_timeout: Duration,
    /// How long a kept-alive connection may wait for its next request before it is closed.
    pub idle_timeout: Duration,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            max_connections: 1024,
            header_read_timeout: Duration::from_secs(10),
            // Longer than the 60 s idle timeout of common load balancers, so the balancer closes
            // an idle connection first and never sends a request down one the node is closing.
            idle_timeout: Duration::from_secs(75),
        }
    }
}

/// Serves `app` on `listener` until `stop` is cancelled, then lets requests in progress finish
/// (idle connections close at once) and returns when every connection is closed.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    config: HttpConfig,
    stop: CancellationToken,
) {
    // Clamped: a semaphore panics above MAX_PERMITS, and no cap of 0 can serve anything.
    let cap = config.max_connections.clamp(1, Semaphore::MAX_PERMITS);
    let slots = Arc::new(Semaphore::new(cap));
    let connections = TaskTracker::new();
    loop {
        // A slot is taken before accepting, so at the cap connections queue in the backlog
        // instead of being accepted and holding a descriptor each.
        let permit = tokio::select! {
            () = stop.cancelled() => break,
            permit = slots.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
        };
        let accepted = tokio::select! {
            () = stop.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, _)) => {
                connections.spawn(connection(
                    stream,
                    app.clone(),
                    config.clone(),
                    stop.clone(),
                    permit,
                ));
            }
            // The peer gave up before we took it: nothing to do.
            Err(e) if is_connection_error(&e) => {}
            Err(e) => {
                // Out of descriptors, typically: retrying at once would spin.
                tracing::warn!(error = %e, "accepting a connection failed");
                tokio::select! {
                    () = stop.cancelled() => break,
                    () = tokio::time::sleep(Duration::from_millis(100)) => {}
                }
            }
        }
    }
    drop(listener);
    connections.close();
    connections.wait().await;
}

fn is_connection_error(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::ConnectionRefused
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::ConnectionReset
    )
}

async fn connection(
    stream: TcpStream,
    app: Router,
    config: HttpConfig,
    stop: CancellationToken,
    _slot: OwnedSemaphorePermit,
) {
    let activity = Arc::new(Activity::new(&config));
    let io = TokioIo::new(Watched {
        inner: stream,
        activity: activity.clone(),
    });
    let watched = activity.clone();
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        let busy = Busy::start(watched.clone());
        // A router is always ready: `call` needs no `poll_ready` first.
        let mut app = app.clone();
        // Boxed: polling a connection without shutting its socket down needs an `Unpin` future.
        Box::pin(async move {
            let response = match app.call(request.map(Body::new)).await {
                Ok(response) => response,
                Err(never) => match never {},
            };
            Ok::<_, Infallible>(response.map(|body| Tracked { body, _busy: busy }))
        }) as Pin<Box<dyn Future<Output = Result<_, Infallible>> + Send>>
    });
    let mut connection = http1::Builder::new()
        // The watchdog below times request heads and idle periods; hyper's own header timer
        // would start at the end of each response and cut idle keep-alive connections short.
        .header_read_timeout(None)
        .keep_alive(true)
        .serve_connection(io, service);
    let mut draining = false;
    loop {
        tokio::select! {
            result = std::future::poll_fn(|cx| connection.poll_without_shutdown(cx)) => {
                if let Err(e) = result {
                    tracing::debug!(error = %e, "http connection ended with an error");
                }
                break;
            }
            () = stop.cancelled(), if !draining => {
                draining = true;
                Pin::new(&mut connection).graceful_shutdown();
            }
            () = activity.expired() => {
                tracing::debug!("closing an http connection that sent no request in time");
                return;
            }
        }
    }
    let stream = connection.into_parts().io.into_inner().inner;
    tokio::select! {
        () = linger(stream) => {}
        () = stop.cancelled() => {}
    }
}

/// How long a closing connection keeps discarding what its client still sends.
const LINGER: Duration = Duration::from_secs(2);

/// Closes a connection after its last response. The client may still be sending a body the node
/// refused unread (a 413 on its `Content-Length`); closing at once would reset the connection,
/// and a reset can destroy the response before the client reads it (RFC 9112, 9.6). So the node
/// half-closes and discards whatever still arrives, for at most [`LINGER`].
async fn linger(mut stream: TcpStream) {
    if stream.shutdown().await.is_err() {
        return;
    }
    let mut discard = [0u8; 8192];
    let _ = tokio::time::timeout(LINGER, async {
        while let Ok(1..) = stream.read(&mut discard).await {}
    })
    .await;
}

/// Where a connection is in its request cycle, and so by when it must show progress.
struct Activity {
    phase: Mutex<Phase>,
    /// Told when a deadline is set, so the watchdog sleeps until the new one.
    changed: Notify,
    header_read_timeout: Duration,
    idle_timeout: Duration,
}

struct Phase {
    /// Requests handed to the router whose response is not yet written.
    requests: usize,
    /// Idle between requests: waiting for the first byte of the next one.
    idle: bool,
    /// When the connection is closed unless a request head completes (`None` while busy, and for
    /// a timeout too long to represent).
    deadline: Option<Instant>,
}

impl Activity {
    fn new(config: &HttpConfig) -> Self {
        Self {
            phase: Mutex::new(Phase {
                requests: 0,
                // A new connection owes its first request head within the header timeout.
                idle: false,
                deadline: Instant::now().checked_add(config.header_read_timeout),
            }),
            changed: Notify::new(),
            header_read_timeout: config.header_read_timeout,
            idle_timeout: config.idle_timeout,
        }
    }

    fn phase(&self) -> MutexGuard<'_, Phase> {
        // The phase is three plain fields, always consistent: a panic elsewhere leaves it usable.
        self.phase.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Bytes arrived: on an idle connection they start a request head, which is now timed.
    fn read_some(&self) {
        let mut phase = self.phase();
        if phase.idle && phase.requests == 0 {
            phase.idle = false;
            phase.deadline = Instant::now().checked_add(self.header_read_timeout);
            drop(phase);
            self.changed.notify_one();
        }
    }

    fn request_started(&self) {
        let mut phase = self.phase();
        phase.requests += 1;
        phase.idle = false;
        phase.deadline = None;
    }

    fn request_finished(&self) {
        let mut phase = self.phase();
        phase.requests = phase.requests.saturating_sub(1);
        if phase.requests == 0 {
            phase.idle = true;
            phase.deadline = Instant::now().checked_add(self.idle_timeout);
            drop(phase);
            self.changed.notify_one();
        }
    }

    /// Completes once the current deadline passes without progress.
    async fn expired(&self) {
        loop {
            // Registered before the deadline is read, so a change in between is not missed.
            let changed = self.changed.notified();
            let deadline = self.phase().deadline;
            match deadline {
                None => changed.await,
                Some(deadline) => {
                    tokio::select! {
                        () = changed => {}
                        () = tokio::time::sleep_until(deadline) => {
                            if self.phase().deadline.is_some_and(|d| d <= Instant::now()) {
                                return;
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Marks a connection busy from the moment its request head is complete until the response
/// body has been handed to hyper (or dropped, if the connection went away first).
struct Busy(Arc<Activity>);

impl Busy {
    fn start(activity: Arc<Activity>) -> Self {
        activity.request_started();
        Self(activity)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.request_finished();
    }
}

/// A response body that keeps its connection busy until hyper is done with it.
struct Tracked {
    body: Body,
    _busy: Busy,
}

impl hyper::body::Body for Tracked {
    type Data = <Body as hyper::body::Body>::Data;
    type Error = <Body as hyper::body::Body>::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// The connection's socket, reporting to its `Activity` when bytes arrive.
struct Watched {
    inner: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.read_some();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
