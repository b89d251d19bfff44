//! NATS JetStream: a publish is delivered when the stream acknowledged it. `Nats-Msg-Id` is the
//! delivery id, so a stream drops a redelivery inside its duplicate window; the occurrence's
//! facts are `Hourglass-*` headers. Publishes from concurrent deliveries share one connection
//! and are pipelined: each waits only for its own acknowledgement.
//!
//! A job's subject is checked when it is created ([`Nats::stream_captures`]): JetStream refuses a
//! publish no stream captures, so such a job would only ever dead-letter. A found stream is
//! remembered a minute; a server that is down, slow or will not say leaves the job to its
//! publishes.

use std::collections::HashMap;
use std::error::Error as _;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use async_nats::jetstream::{
    self,
    context::{GetStreamByNameErrorKind, PublishErrorKind},
};
use hourglass_core::{NatsTarget, Occurrence};
use hourglass_engine::Verdict;

use crate::envelope::{Meta, NATS_NAMES, payload};

pub struct Nats {
    js: jetstream::Context,
    /// Subjects a stream was found for lately, and when.
    streams: Mutex<HashMap<String, Instant>>,
    /// When the node began connecting: a create in the first moments waits for the connection.
    opened: Instant,
}

/// How long a found stream is trusted (deleting it makes publishes fail and retry, as before).
/// A missing one is asked about again at the next create, so a job created right after its
/// stream is accepted.
const FOUND_FOR: Duration = Duration::from_secs(60);
/// Subjects remembered at most, per connection: tenants choose subjects, so the cache is bounded.
const REMEMBERED: usize = 4096;
/// The longest a create waits for the server's answer before taking the job unchecked.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
/// After the node starts, a create waits (up to [`PROBE_TIMEOUT`]) for the first connection,
/// which is made in the background; later, a create on a lost connection does not wait.
const FIRST_CONNECT: Duration = Duration::from_secs(5);

impl Nats {
    /// Connects in the background: a server that is down at start is retried, and deliveries
    /// meanwhile get a transient error.
    pub async fn open(url: &str, timeout: Duration) -> Result<Self, async_nats::ConnectError> {
        let client = async_nats::ConnectOptions::new()
            .retry_on_initial_connect()
            .connection_timeout(timeout.min(Duration::from_secs(5)))
            .request_timeout(Some(timeout))
            .connect(url)
            .await?;
        let mut js = jetstream::new(client);
        js.set_timeout(timeout);
        Ok(Self {
            js,
            streams: Mutex::new(HashMap::new()),
            opened: Instant::now(),
        })
    }

    /// Whether a JetStream stream captures `subject`: `Some(false)` only when the server said no
    /// stream does. `None` when it cannot tell: not connected now (a create waits only for the
    /// node's first connection, and only [`PROBE_TIMEOUT`]), no answer within [`PROBE_TIMEOUT`],
    /// JetStream off, or no permission to list streams.
    pub async fn stream_captures(&self, subject: &str) -> Option<bool> {
        let now = Instant::now();
        if let Some(&at) = self.remembered().get(subject)
            && now.duration_since(at) < FOUND_FOR
        {
            return Some(true);
        }
        let asked = tokio::time::timeout(PROBE_TIMEOUT, async {
            let connected =
                || self.js.client().connection_state() == async_nats::connection::State::Connected;
            if !connected() {
                if now.duration_since(self.opened) > FIRST_CONNECT {
                    return None;
                }
                while !connected() {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
            Some(self.js.stream_by_subject(subject).await)
        });
        match asked.await.ok().flatten() {
            Some(Ok(_stream)) => {}
            Some(Err(e)) if matches!(e.kind(), GetStreamByNameErrorKind::NotFound) => {
                return Some(false);
            }
            Some(Err(_)) | None => return None,
        }
        let mut streams = self.remembered();
        if streams.len() >= REMEMBERED {
            streams.retain(|_, at| now.duration_since(*at) < FOUND_FOR);
            if streams.len() >= REMEMBERED {
                streams.clear();
            }
        }
        streams.insert(subject.to_string(), now);
        Some(true)
    }

    fn remembered(&self) -> std::sync::MutexGuard<'_, HashMap<String, Instant>> {
        self.streams
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub async fn publish(&self, target: &NatsTarget, occ: &Occurrence) -> Verdict {
        let meta = Meta::of(occ);
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("Nats-Msg-Id", meta.delivery_id.as_str());
        for (name, value) in meta.pairs(&NATS_NAMES) {
            headers.insert(name, value);
        }
        let body = bytes::Bytes::copy_from_slice(payload(occ).as_bytes());
        let acked = match self
            .js
            .publish_with_headers(target.subject.clone(), headers, body)
            .await
        {
            Ok(ack) => ack.await,
            Err(e) => Err(e),
        };
        match acked {
            Ok(_) => Verdict::Delivered,
            Err(e) => verdict_of(&e),
        }
    }
}

fn verdict_of(e: &jetstream::context::PublishError) -> Verdict {
    let reason = format!("nats: {e}");
    match e.kind() {
        PublishErrorKind::MaxPayloadExceeded => Verdict::GiveUp { reason },
        // A JetStream refusal: 4xx (a message larger than the stream takes, a sealed stream)
        // is permanent; 5xx (no leader yet, storage unavailable) is not.
        PublishErrorKind::Other => {
            let code = e
                .source()
                .and_then(|s| s.downcast_ref::<jetstream::Error>())
                .map(|api| api.code());
            match code {
                Some(code) if (400..500).contains(&code) => Verdict::GiveUp { reason },
                _ => Verdict::Retry {
                    after: None,
                    reason,
                },
            }
        }
        // No stream answered for the subject (no stream captures it, or JetStream is
        // restarting), a timeout, a broken connection: a later try may succeed, and the retry
        // policy dead-letters the occurrence if none does.
        _ => Verdict::Retry {
            after: None,
            reason,
        },
    }
}
