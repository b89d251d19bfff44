//! The API's shapes and the domain's that are the same thing twice: the bus and cloud targets
//! (stored as they are sent), job states and run outcomes. Each side keeps its own type so the
//! contract crate needs nothing of core, and these functions are the only bridge.

use std::borrow::Cow;

use hourglass_api as api;
use hourglass_core::{self as core, Target};

/// The bus or cloud target a request names, as core stores it; `None` for a webhook or queue.
pub(super) fn connection_target(input: &api::TargetIn) -> Option<Target> {
    if let Some(t) = &input.eventbridge {
        return Some(Target::Eventbridge(core::EventBridgeTarget {
            connection: t.connection.clone(),
            bus: t.bus.clone(),
            source: t.source.clone(),
            detail_type: t.detail_type.clone(),
        }));
    }
    if let Some(t) = &input.sqs {
        return Some(Target::Sqs(core::SqsTarget {
            connection: t.connection.clone(),
            queue_url: t.queue_url.clone(),
            group_id: t.group_id.clone(),
        }));
    }
    if let Some(t) = &input.sns {
        return Some(Target::Sns(core::SnsTarget {
            connection: t.connection.clone(),
            topic_arn: t.topic_arn.clone(),
            group_id: t.group_id.clone(),
        }));
    }
    if let Some(t) = &input.lambda {
        return Some(Target::Lambda(core::LambdaTarget {
            connection: t.connection.clone(),
            function: t.function.clone(),
        }));
    }
    if let Some(t) = &input.nats {
        return Some(Target::Nats(core::NatsTarget {
            connection: t.connection.clone(),
            subject: t.subject.clone(),
        }));
    }
    if let Some(t) = &input.redis_stream {
        return Some(Target::RedisStream(core::RedisStreamTarget {
            connection: t.connection.clone(),
            stream: t.stream.clone(),
        }));
    }
    input.amqp.as_ref().map(|t| {
        Target::Amqp(core::AmqpTarget {
            connection: t.connection.clone(),
            exchange: t.exchange.clone(),
            routing_key: t.routing_key.clone(),
        })
    })
}

/// A stored target as the API shows it: a webhook with header names only (values often carry
/// the receiver's credentials and are never echoed), a queue by name, a bus or cloud target as it
/// was given (it holds no secret: the connection does).
pub(super) fn target_out(target: &Target) -> api::TargetOut<'_> {
    match target {
        Target::Webhook(w) => api::TargetOut::Webhook(api::WebhookOut {
            url: Cow::Borrowed(w.url.as_str()),
            headers: w
                .headers
                .keys()
                .map(|k| (Cow::Borrowed(k.as_str()), Cow::Borrowed("<redacted>")))
                .collect(),
            rate_limit: w.rate_limit,
            batch: w.batch.map(|b| api::WebhookBatch {
                max_items: b.max_items.into(),
            }),
        }),
        Target::Queue(q) => api::TargetOut::Queue(Cow::Borrowed(&q.name)),
        Target::Eventbridge(t) => api::TargetOut::Eventbridge(api::EventBridgeTarget {
            connection: t.connection.clone(),
            bus: t.bus.clone(),
            source: t.source.clone(),
            detail_type: t.detail_type.clone(),
        }),
        Target::Sqs(t) => api::TargetOut::Sqs(api::SqsTarget {
            connection: t.connection.clone(),
            queue_url: t.queue_url.clone(),
            group_id: t.group_id.clone(),
        }),
        Target::Sns(t) => api::TargetOut::Sns(api::SnsTarget {
            connection: t.connection.clone(),
            topic_arn: t.topic_arn.clone(),
            group_id: t.group_id.clone(),
        }),
        Target::Lambda(t) => api::TargetOut::Lambda(api::LambdaTarget {
            connection: t.connection.clone(),
            function: t.function.clone(),
        }),
        Target::Nats(t) => api::TargetOut::Nats(api::NatsTarget {
            connection: t.connection.clone(),
            subject: t.subject.clone(),
        }),
        Target::RedisStream(t) => api::TargetOut::RedisStream(api::RedisStreamTarget {
            connection: t.connection.clone(),
            stream: t.stream.clone(),
        }),
        Target::Amqp(t) => api::TargetOut::Amqp(api::AmqpTarget {
            connection: t.connection.clone(),
            exchange: t.exchange.clone(),
            routing_key: t.routing_key.clone(),
        }),
    }
}

/// A job's state as the API names it.
pub fn job_state(state: core::JobState) -> api::JobState {
    match state {
        core::JobState::Active => api::JobState::Active,
        core::JobState::Paused => api::JobState::Paused,
        core::JobState::Completed => api::JobState::Completed,
        core::JobState::Failed => api::JobState::Failed,
        core::JobState::Cancelled => api::JobState::Cancelled,
    }
}

/// A run's outcome on the wire. (`Unknown` is the clients' side: what a newer server may send.)
pub fn run_outcome(stored: hourglass_store::RunOutcome) -> api::RunOutcome {
    use hourglass_store::RunOutcome as Stored;
    match stored {
        Stored::Delivered => api::RunOutcome::Delivered,
        Stored::Retry => api::RunOutcome::Retry,
        Stored::DeadLetter => api::RunOutcome::DeadLetter,
        Stored::Skipped => api::RunOutcome::Skipped,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_keep_their_names() {
        for state in core::JobState::ALL {
            assert_eq!(job_state(state).as_str(), state.as_str());
        }
    }

    #[test]
    fn a_bus_target_goes_in_and_comes_out_as_it_was_given() {
        let sent = serde_json::json!({"sqs": {"connection": "aws",
            "queue_url": "https://sqs.us-east-1.amazonaws.com/123456789012/q", "group_id": "g"}});
        let input: api::TargetIn = serde_json::from_value(sent.clone()).unwrap();
        let stored = connection_target(&input).unwrap();
        // Core's own serialization of the stored target is the shape the API shows.
        assert_eq!(serde_json::to_value(&stored).unwrap(), sent);
        let out = target_out(&stored);
        assert_eq!(serde_json::to_value(&out).unwrap(), sent);
    }
}
