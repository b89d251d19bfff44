//! The bus and cloud targets, each publishing through a connection the operator configured.
//! The same shape goes in (a create) and comes out (a job, a dead letter); none holds a secret.

use serde::{Deserialize, Serialize};

/// `{"eventbridge": {"connection": "events", "bus": "orders", "source": "hourglass",
/// "detail_type": "job-reminder"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(
        description = "PutEvents to an EventBridge bus: the payload (a JSON object) is the \
            event's `detail`, the due time its `time`, and `resources` carry \
            `hourglass:delivery-id/...`, `hourglass:job-id/...`, `hourglass:due-at/...`, \
            `hourglass:attempt/...` and `hourglass:job-type/...`."
    )
)]
#[serde(deny_unknown_fields)]
pub struct EventBridgeTarget {
    /// The name of a connection the operator configured (`[connections.NAME]`) that this namespace
    /// may use; `GET /v1/connections` lists them.
    #[cfg_attr(feature = "openapi", schema(example = "aws"))]
    pub connection: String,
    /// The event bus's name or ARN.
    #[cfg_attr(
        feature = "openapi",
        schema(min_length = 1, max_length = 1600, example = "orders")
    )]
    pub bus: String,
    #[cfg_attr(
        feature = "openapi",
        schema(min_length = 1, max_length = 256, example = "hourglass")
    )]
    pub source: String,
    #[cfg_attr(
        feature = "openapi",
        schema(min_length = 1, max_length = 128, example = "job-reminder")
    )]
    pub detail_type: String,
}

/// `{"sqs": {"connection": "aws", "queue_url": "https://...", "group_id": "..."}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(
        description = "SendMessage(Batch) to an SQS queue: the body is the payload; message \
            attributes `hourglass-delivery-id`, `hourglass-job-id`, `hourglass-due-at`, \
            `hourglass-attempt` and `hourglass-job-type`. FIFO queues (`.fifo`) get the delivery \
            id as deduplication id."
    )
)]
#[serde(deny_unknown_fields)]
pub struct SqsTarget {
    /// The name of a connection the operator configured (`[connections.NAME]`) that this namespace
    /// may use; `GET /v1/connections` lists them.
    #[cfg_attr(feature = "openapi", schema(example = "aws"))]
    pub connection: String,
    #[cfg_attr(
        feature = "openapi",
        schema(
            format = Uri,
            example = "https://sqs.eu-central-1.amazonaws.com/123456789012/reminders",
        )
    )]
    pub queue_url: String,
    /// FIFO only: the message group (the job id when left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(nullable = false, min_length = 1, max_length = 128)
    )]
    pub group_id: Option<String>,
}

/// `{"sns": {"connection": "aws", "topic_arn": "arn:aws:sns:..."}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(
        description = "Publish(Batch) to an SNS topic: the message is the payload, with the same \
            message attributes as SQS."
    )
)]
#[serde(deny_unknown_fields)]
pub struct SnsTarget {
    /// The name of a connection the operator configured (`[connections.NAME]`) that this namespace
    /// may use; `GET /v1/connections` lists them.
    #[cfg_attr(feature = "openapi", schema(example = "aws"))]
    pub connection: String,
    #[cfg_attr(
        feature = "openapi",
        schema(
            min_length = 1,
            max_length = 256,
            example = "arn:aws:sns:eu-central-1:123456789012:reminders"
        )
    )]
    pub topic_arn: String,
    /// FIFO only: the message group (the job id when left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(nullable = false, min_length = 1, max_length = 128)
    )]
    pub group_id: Option<String>,
}

/// `{"lambda": {"connection": "aws", "function": "name or ARN"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(
        description = "An asynchronous invocation; the event is `{\"delivery_id\", \"job_id\", \
            \"type\", \"due_at\", \"attempt\", \"payload\"}`."
    )
)]
#[serde(deny_unknown_fields)]
pub struct LambdaTarget {
    /// The name of a connection the operator configured (`[connections.NAME]`) that this namespace
    /// may use; `GET /v1/connections` lists them.
    #[cfg_attr(feature = "openapi", schema(example = "aws"))]
    pub connection: String,
    /// A function name or ARN.
    #[cfg_attr(
        feature = "openapi",
        schema(min_length = 1, max_length = 170, example = "reminders")
    )]
    pub function: String,
}

/// `{"nats": {"connection": "bus", "subject": "jobs.reminder"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(
        description = "A JetStream publish, acknowledged by the stream: `Nats-Msg-Id` is the \
            delivery id; headers `Hourglass-Delivery-Id`, `Hourglass-Job-Id`, `Hourglass-Due-At`, \
            `Hourglass-Attempt`, `Hourglass-Job-Type`."
    )
)]
#[serde(deny_unknown_fields)]
pub struct NatsTarget {
    /// The name of a connection the operator configured (`[connections.NAME]`) that this namespace
    /// may use; `GET /v1/connections` lists them.
    #[cfg_attr(feature = "openapi", schema(example = "bus"))]
    pub connection: String,
    #[cfg_attr(
        feature = "openapi",
        schema(min_length = 1, max_length = 256, example = "jobs.reminder")
    )]
    pub subject: String,
}

/// `{"redis_stream": {"connection": "r", "stream": "jobs"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(
        description = "XADD to a Redis stream with fields `payload`, `delivery_id`, `job_id`, \
            `due_at`, `attempt` and `job_type`."
    )
)]
#[serde(deny_unknown_fields)]
pub struct RedisStreamTarget {
    /// The name of a connection the operator configured (`[connections.NAME]`) that this namespace
    /// may use; `GET /v1/connections` lists them.
    #[cfg_attr(feature = "openapi", schema(example = "r"))]
    pub connection: String,
    #[cfg_attr(
        feature = "openapi",
        schema(min_length = 1, max_length = 512, example = "jobs")
    )]
    pub stream: String,
}

/// `{"amqp": {"connection": "rmq", "exchange": "jobs", "routing_key": "reminder"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(
        description = "A persistent, mandatory AMQP 0-9-1 publish with publisher confirms: \
            `message_id` is the delivery id; headers `hourglass-delivery-id`, `hourglass-job-id`, \
            `hourglass-due-at`, `hourglass-attempt`, `hourglass-job-type`."
    )
)]
#[serde(deny_unknown_fields)]
pub struct AmqpTarget {
    /// The name of a connection the operator configured (`[connections.NAME]`) that this namespace
    /// may use; `GET /v1/connections` lists them.
    #[cfg_attr(feature = "openapi", schema(example = "rmq"))]
    pub connection: String,
    /// `""` is the default exchange.
    #[cfg_attr(feature = "openapi", schema(max_length = 255, example = "jobs"))]
    pub exchange: String,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_length = 255, example = "reminder"))]
    pub routing_key: String,
}
