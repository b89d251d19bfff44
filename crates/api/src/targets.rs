//! The bus and cloud targets, each publishing through a connection the operator configured.
//! The same shape goes in (a create) and comes out (a job, a dead letter); none holds a secret.

use serde::{Deserialize, Serialize};

/// `{"eventbridge": {"connection": "events", "bus": "orders", "source": "hourglass",
/// "detail_type": "job-reminder"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventBridgeTarget {
    pub connection: String,
    /// The event bus's name or ARN.
    pub bus: String,
    pub source: String,
    pub detail_type: String,
}

/// `{"sqs": {"connection": "aws", "queue_url": "https://...", "group_id": "..."}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SqsTarget {
    pub connection: String,
    pub queue_url: String,
    /// The message group of a FIFO queue (the job id when left out); not sent to standard queues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_id: Option<String>,
}

/// `{"sns": {"connection": "aws", "topic_arn": "arn:aws:sns:..."}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnsTarget {
    pub connection: String,
    pub topic_arn: String,
    /// The message group of a FIFO topic (the job id when left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_id: Option<String>,
}

/// `{"lambda": {"connection": "aws", "function": "name or ARN"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LambdaTarget {
    pub connection: String,
    pub function: String,
}

/// `{"nats": {"connection": "bus", "subject": "jobs.reminder"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NatsTarget {
    pub connection: String,
    pub subject: String,
}

/// `{"redis_stream": {"connection": "r", "stream": "jobs"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedisStreamTarget {
    pub connection: String,
    pub stream: String,
}

/// `{"amqp": {"connection": "rmq", "exchange": "jobs", "routing_key": "reminder"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AmqpTarget {
    pub connection: String,
    /// The exchange; `""` is the default exchange, which routes by queue name.
    pub exchange: String,
    #[serde(default)]
    pub routing_key: String,
}
