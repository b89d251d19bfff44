//! NATS JetStream: a publish is delivered when the stream acknowledged it. `Nats-Msg-Id` is the
//! delivery id, so a stream drops a redelivery inside its duplicate window; the occurrence's
//! facts are `Hourglass-*` headers. Publishes from concurrent deliveries share one connection
//! and are pipelined: each waits only for its own acknowledgement.

use std::error::Error as _;
use std::time::Duration;

use async_nats::jetstream::{self, context::PublishErrorKind};
use hourglass_core::{NatsTarget, Occurrence};
use hourglass_engine::Verdict;

use crate::envelope::{Meta, NATS_NAMES, payload};

pub struct Nats {
    js: jetstream::Context,
}

impl Nats {
    /// Connects in the background: a server that is down at start is retried, and deliveries
    /// meanwhile get a transient error.
    pub async fn open(url: &str, timeout: Duration) -> Result<Self, String> {
        let client = async_nats::ConnectOptions::new()
            .retry_on_initial_connect()
            .connection_timeout(timeout.min(Duration::from_secs(5)))
            .request_timeout(Some(timeout))
            .connect(url)
            .await
            .map_err(|e| format!("nats {url}: {e}"))?;
        let mut js = jetstream::new(client);
        js.set_timeout(timeout);
        Ok(Self { js })
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
