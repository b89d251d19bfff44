//! Bus and cloud targets behind the engine's `Deliverer` seam. The operator declares named
//! connections (`config/`); a job names one and what to publish to (`hourglass_core::Target`);
//! [`Router`] sends webhooks to the webhook deliverer and everything else to the connection's
//! publisher: `aws/` (EventBridge, SQS, SNS, Lambda), `nats.rs` (JetStream), `redis.rs` (streams),
//! `amqp.rs` (RabbitMQ). Services that take batches get them through the engine's `deliver/batch.rs`.
//!
//! Every publisher answers the engine's verdicts: delivered only once the system acknowledged the
//! message; throttling, timeouts and unreachable servers are retried under the job's retry policy;
//! refusals that no retry can change (no such queue or exchange, access denied, a message the
//! service will not take) give up, which dead-letters the occurrence with the reason.
//!
//! Architecture Invariant: a tenant never supplies an endpoint or a credential. A target names a
//! connection the operator configured, and the namespace must be allowed to use it, both when the
//! job is created and when each occurrence is published.

mod amqp;
mod aws;
pub mod config;
mod envelope;
mod nats;
mod redis;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hourglass_core::{Occurrence, Target};
use hourglass_engine::{ClaimCheck, Deliverer, DeliveryResult, Verdict};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

pub use aws::sdk_config;
pub use config::{ConfigError, ConnectionConfig, ConnectionKind, ConnectionRefused, Connections};

/// One opened connection.
enum Publisher {
    Aws(aws::AwsConnection),
    Nats(nats::Nats),
    Redis(redis::Redis),
    Amqp(amqp::Amqp),
}

impl Publisher {
    async fn publish(&self, occ: &Occurrence, claim: &ClaimCheck) -> Verdict {
        match (self, &occ.spec.target) {
            (Publisher::Aws(aws), _) => aws.publish(occ, claim).await,
            (Publisher::Nats(nats), Target::Nats(t)) => nats.publish(t, occ).await,
            (Publisher::Redis(redis), Target::RedisStream(t)) => redis.publish(t, occ).await,
            (Publisher::Amqp(amqp), Target::Amqp(t)) => amqp.publish(t, occ).await,
            (_, other) => Verdict::GiveUp {
                reason: format!("the connection cannot deliver a {} target", other.kind()),
            },
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PublishLabels {
    kind: &'static str,
    connection: String,
    /// `delivered`, `retry` or `rejected`.
    result: &'static str,
}

/// A target its service said it would refuse every publish to ([`Router::check_deliverable`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undeliverable {
    /// The target's field at fault (`subject`).
    pub field: &'static str,
    pub reason: String,
}

/// What the API shows of a connection: its name, kind and this node's publish counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionFigures {
    pub name: String,
    pub kind: &'static str,
    pub delivered: u64,
    pub retried: u64,
    pub rejected: u64,
}

/// A connection whose client refused its url when the node opened it: the node does not start
/// (a server that is down is not this: it is reconnected to in the background). The message
/// names the setting, never the url, which may carry credentials.
#[derive(Debug, thiserror::Error)]
#[error("connections.{connection}.url: {source}")]
pub struct OpenError {
    pub connection: String,
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

/// The node's deliverer: webhooks to the webhook deliverer, connection targets to their
/// connection's publisher.
pub struct Router {
    webhook: Arc<dyn Deliverer>,
    connections: Connections,
    publishers: HashMap<String, Publisher>,
    /// Also what `figures` reads: the metric is the one count of publishes.
    publishes: Family<PublishLabels, Counter>,
}

impl Router {
    /// Opens every connection (network connections are made in the background or on first use:
    /// a bus that is down at start fails its deliveries transiently, not the node's start) and
    /// registers `hourglass_target_publishes_total`.
    pub async fn open(
        connections: Connections,
        webhook: Arc<dyn Deliverer>,
        timeout: Duration,
        registry: &mut Registry,
    ) -> Result<Self, OpenError> {
        let mut publishers = HashMap::new();
        let publishes = Family::<PublishLabels, Counter>::default();
        for (name, config) in connections.iter() {
            let publisher = match config.kind {
                kind if kind.is_aws() => {
                    Publisher::Aws(aws::AwsConnection::open(name, config, timeout).await)
                }
                ConnectionKind::Nats => Publisher::Nats(
                    nats::Nats::open(config.url.as_deref().unwrap_or_default(), timeout)
                        .await
                        .map_err(|e| OpenError {
                            connection: name.to_string(),
                            source: Box::new(e),
                        })?,
                ),
                ConnectionKind::Redis => Publisher::Redis(
                    redis::Redis::open(config.url.as_deref().unwrap_or_default(), timeout)
                        .map_err(|e| OpenError {
                            connection: name.to_string(),
                            source: Box::new(e),
                        })?,
                ),
                _ => Publisher::Amqp(amqp::Amqp::open(
                    config.url.as_deref().unwrap_or_default(),
                    timeout,
                )),
            };
            tracing::info!(
                connection = name,
                kind = config.kind.as_str(),
                "connection opened"
            );
            let unlimited = config.unlimited_lists();
            if !unlimited.is_empty() {
                tracing::warn!(
                    connection = name,
                    unlisted = unlimited.join(", "),
                    "the connection does not list the resources jobs may name: its namespaces may publish to whatever its credentials reach; list them in [connections.{name}]"
                );
            }
            for kind in hourglass_core::Target::KINDS {
                if config.kind.serves(kind) {
                    for result in ["delivered", "retry", "rejected"] {
                        drop(publishes.get_or_create(&PublishLabels {
                            kind,
                            connection: name.to_string(),
                            result,
                        }));
                    }
                }
            }
            publishers.insert(name.to_string(), publisher);
        }
        registry.register(
            "hourglass_target_publishes",
            "Publishes to bus and cloud targets by target kind, connection and result (delivered, retry, rejected)",
            publishes.clone(),
        );
        Ok(Self {
            webhook,
            connections,
            publishers,
            publishes,
        })
    }

    pub fn connections(&self) -> &Connections {
        &self.connections
    }

    /// The connections `namespace` may use, with this node's publish counts.
    pub fn figures(&self, namespace: &str) -> Vec<ConnectionFigures> {
        self.connections
            .visible_to(namespace)
            .map(|(name, config)| {
                // Summed over the target kinds the connection serves (an aws connection: four).
                let read = |result: &'static str| -> u64 {
                    hourglass_core::Target::KINDS
                        .into_iter()
                        .filter(|kind| config.kind.serves(kind))
                        .map(|kind| {
                            self.publishes
                                .get_or_create(&PublishLabels {
                                    kind,
                                    connection: name.to_string(),
                                    result,
                                })
                                .get()
                        })
                        .sum()
                };
                ConnectionFigures {
                    name: name.to_string(),
                    kind: config.kind.as_str(),
                    delivered: read("delivered"),
                    retried: read("retry"),
                    rejected: read("rejected"),
                }
            })
            .collect()
    }

    /// Asks the target's service, where one question answers it, whether any publish to the
    /// target could land; called when a job is created or its target changed, after the target
    /// passed [`Connections::check_target`]. Today one case: a NATS subject that no JetStream
    /// stream captures (JetStream refuses every such publish, so the job would only dead-letter).
    /// `Ok` whenever the service cannot tell (down, slow, no permission): the publishes' own
    /// verdicts decide then, as for every other kind.
    pub async fn check_deliverable(&self, target: &Target) -> Result<(), Undeliverable> {
        let (Target::Nats(nats), Some(name)) = (target, target.connection()) else {
            return Ok(());
        };
        let Some(Publisher::Nats(publisher)) = self.publishers.get(name) else {
            return Ok(());
        };
        match publisher.stream_captures(&nats.subject).await {
            Some(false) => Err(Undeliverable {
                field: "subject",
                reason: format!(
                    "no JetStream stream on the connection {name:?} captures the subject {:?}: \
                     JetStream refuses publishes to it; create a stream whose subjects include \
                     it (e.g. `nats stream add --subjects '{}'`), or ask the node's operator",
                    nats.subject, nats.subject
                ),
            }),
            _ => Ok(()),
        }
    }

    async fn publish(&self, name: &str, occ: &Occurrence, claim: &ClaimCheck) -> Verdict {
        // Checked again at each publish: the operator may have taken the namespace off the
        // connection, the resource off its lists (or the connection out of the file) since the
        // job was created, and a job stored before a rule existed must meet it too.
        if let Err(refused) = self
            .connections
            .check_target(&occ.namespace, &occ.spec.target)
        {
            return Verdict::GiveUp {
                reason: format!("{refused} on this node"),
            };
        }
        // The dispatcher checked the claim just before; the AWS batch lines check it again as
        // their batches are assembled.
        match self.publishers.get(name) {
            Some(publisher) => publisher.publish(occ, claim).await,
            None => Verdict::GiveUp {
                reason: format!("the connection {name:?} is not open on this node"),
            },
        }
    }
}

#[async_trait]
impl Deliverer for Router {
    async fn deliver(&self, occ: &Occurrence, claim: &ClaimCheck) -> DeliveryResult {
        let Some(name) = occ.spec.target.connection() else {
            return self.webhook.deliver(occ, claim).await;
        };
        let started = tokio::time::Instant::now();
        // Boxed: the publishers' futures (the AWS SDK's run to kilobytes) would otherwise make
        // this whole future that size, allocated and moved for every webhook delivery too.
        let verdict = Box::pin(self.publish(name, occ, claim)).await;
        let result = match verdict {
            Verdict::Delivered => "delivered",
            Verdict::Retry { .. } => "retry",
            Verdict::GiveUp { .. } => "rejected",
            Verdict::Withdrawn => return DeliveryResult::withdrawn(),
        };
        // Only connections this node opened get series: names from stored jobs whose connection
        // left the config file must not grow the label set.
        if self.publishers.contains_key(name) {
            self.publishes
                .get_or_create(&PublishLabels {
                    kind: occ.spec.target.kind(),
                    connection: name.to_string(),
                    result,
                })
                .inc();
        }
        DeliveryResult {
            status: None,
            latency: started.elapsed(),
            verdict,
            response: None,
            shared: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hourglass_core::{JobSpec, MisfirePolicy, RetryPolicy, Schedule, Target, WebhookTarget};

    /// Answers every delivery as delivered.
    struct Accepts;

    #[async_trait]
    impl Deliverer for Accepts {
        async fn deliver(&self, _occ: &Occurrence, _claim: &ClaimCheck) -> DeliveryResult {
            DeliveryResult {
                status: Some(204),
                latency: Duration::ZERO,
                verdict: Verdict::Delivered,
                response: None,
                shared: false,
            }
        }
    }

    fn webhook_occurrence() -> Occurrence {
        let now = jiff::Timestamp::UNIX_EPOCH;
        Occurrence {
            job_id: uuid::Uuid::nil(),
            namespace: "default".into(),
            due: now,
            fire_at: now,
            attempt: 1,
            token: hourglass_core::FencingToken::from_i64(1),
            runs_done: 0,
            spec: Arc::new(JobSpec {
                job_type: None,
                schedule: Schedule::at(now),
                target: Target::Webhook(WebhookTarget {
                    url: "http://127.0.0.1:9/hook".parse().expect("a url"),
                    headers: Default::default(),
                    rate_limit: None,
                    batch: None,
                }),
                retry: RetryPolicy::default(),
                misfire: MisfirePolicy::default(),
                overlap: Default::default(),
                backfill: None,
                labels: Default::default(),
                on_failure: None,
                on_success: None,
                callback_of: None,
                callback_key: None,
                occurrence_of: None,
            }),
            payload: None,
            lapsed_owner: None,
        }
    }

    #[tokio::test]
    async fn a_webhook_delivery_does_not_carry_the_publishers_futures() {
        let router = Router::open(
            Connections::default(),
            Arc::new(Accepts),
            Duration::from_secs(1),
            &mut Registry::default(),
        )
        .await
        .expect("no connections to open");
        let occ = webhook_occurrence();
        let claim = ClaimCheck::unchecked();
        let delivery = router.deliver(&occ, &claim);
        // The boxed future is allocated, and moved into its box, whole, whatever path it takes:
        // the bus publishers' futures (the AWS SDK's are many kilobytes) must sit behind boxes of
        // their own, or every webhook delivery pays for them.
        let size = std::mem::size_of_val(&*delivery);
        assert!(
            size <= 512,
            "a webhook delivery's future takes {size} bytes"
        );
        assert_eq!(delivery.await.verdict, Verdict::Delivered);
    }
}
