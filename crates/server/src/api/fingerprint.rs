//! A keyed create's idempotency fingerprint: a hash of the request, to recognise a retry of the
//! same create. Stores keep it with the job, so its input must never change: it is a fixed form
//! of the parsed request, every field in the order below and `null` for an absent one, which is
//! how `hourglass-api`'s `CreateJob` serialized when fingerprints were first stored. (That type
//! now leaves absent fields out, as a client sends it; this form does not follow it.)

use hourglass_api::{
    AmqpTarget, CreateJob, EventBridgeTarget, LambdaTarget, MisfireIn, NatsTarget,
    RedisStreamTarget, RetryIn, ScheduleIn, SnsTarget, SqsTarget, TargetIn, WebhookIn,
};
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The hash of a keyed create. It is taken over the parsed request re-serialized (payload keys
/// sorted), so key order and whitespace in the original body do not matter. Unkeyed jobs need
/// none.
pub(super) fn fingerprint(req: &CreateJob) -> i64 {
    let bytes = serde_json::to_vec(&Printed::of(req)).expect("requests serialize");
    let digest = Sha256::digest(&bytes);
    i64::from_le_bytes(digest[..8].try_into().expect("8 bytes"))
}

#[derive(Serialize)]
struct Printed<'a> {
    key: &'a Option<String>,
    #[serde(rename = "type")]
    job_type: &'a Option<String>,
    schedule: &'a ScheduleIn,
    target: PrintedTarget<'a>,
    payload: &'a Option<Value>,
    retry: Option<PrintedRetry<'a>>,
    misfire: &'a Option<MisfireIn>,
    /// Left out when absent: a create without it keeps the fingerprint it always had.
    #[serde(skip_serializing_if = "Option::is_none")]
    overlap: &'a Option<String>,
    /// Left out when absent or empty, as `overlap`.
    #[serde(skip_serializing_if = "Option::is_none")]
    labels: Option<&'a std::collections::BTreeMap<String, String>>,
    /// Left out when absent, as `overlap`.
    #[serde(skip_serializing_if = "Option::is_none")]
    on_failure: &'a Option<hourglass_api::CallbackIn>,
    #[serde(skip_serializing_if = "Option::is_none")]
    on_success: &'a Option<hourglass_api::CallbackIn>,
}

#[derive(Serialize)]
struct PrintedTarget<'a> {
    webhook: &'a Option<WebhookIn>,
    queue: &'a Option<String>,
    eventbridge: &'a Option<EventBridgeTarget>,
    sqs: &'a Option<SqsTarget>,
    sns: &'a Option<SnsTarget>,
    lambda: &'a Option<LambdaTarget>,
    nats: &'a Option<NatsTarget>,
    redis_stream: &'a Option<RedisStreamTarget>,
    amqp: &'a Option<AmqpTarget>,
}

#[derive(Serialize)]
struct PrintedRetry<'a> {
    max_attempts: &'a Option<u32>,
    initial_backoff: &'a Option<String>,
    max_backoff: &'a Option<String>,
}

impl<'a> Printed<'a> {
    fn of(req: &'a CreateJob) -> Self {
        let t: &'a TargetIn = &req.target;
        Printed {
            key: &req.key,
            job_type: &req.job_type,
            schedule: &req.schedule,
            target: PrintedTarget {
                webhook: &t.webhook,
                queue: &t.queue,
                eventbridge: &t.eventbridge,
                sqs: &t.sqs,
                sns: &t.sns,
                lambda: &t.lambda,
                nats: &t.nats,
                redis_stream: &t.redis_stream,
                amqp: &t.amqp,
            },
            payload: &req.payload,
            retry: req.retry.as_ref().map(|r: &'a RetryIn| PrintedRetry {
                max_attempts: &r.max_attempts,
                initial_backoff: &r.initial_backoff,
                max_backoff: &r.max_backoff,
            }),
            misfire: &req.misfire,
            overlap: &req.overlap,
            labels: req.labels.as_ref().filter(|l| !l.is_empty()),
            on_failure: &req.on_failure,
            on_success: &req.on_success,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fixed form, byte for byte, as `CreateJob` serialized before it left absent fields
    /// out (these lines were printed by that code): a stored fingerprint stays valid.
    #[test]
    fn the_fingerprinted_form_never_changes() {
        let cases = [
            (
                r#"{"key": "nightly", "type": "report", "schedule": {"cron": "0 2 * * *", "timezone": "Europe/Paris"},
                    "target": {"webhook": {"url": "https://example.com/h", "headers": {"x-b": "2", "authorization": "Bearer s"}, "rate_limit": 5}},
                    "payload": {"z": 1, "a": [true, null]}, "retry": {"max_attempts": 3}, "misfire": {"policy": "all", "window": "6h"}}"#,
                r#"{"key":"nightly","type":"report","schedule":{"cron":"0 2 * * *","timezone":"Europe/Paris"},"target":{"webhook":{"url":"https://example.com/h","headers":{"authorization":"Bearer s","x-b":"2"},"rate_limit":5},"queue":null,"eventbridge":null,"sqs":null,"sns":null,"lambda":null,"nats":null,"redis_stream":null,"amqp":null},"payload":{"a":[true,null],"z":1},"retry":{"max_attempts":3,"initial_backoff":null,"max_backoff":null},"misfire":{"policy":"all","window":"6h"}}"#,
            ),
            (
                r#"{"key": "k", "schedule": {"after": "5s"}, "target": {"queue": "emails"}}"#,
                r#"{"key":"k","type":null,"schedule":{"after":"5s"},"target":{"webhook":null,"queue":"emails","eventbridge":null,"sqs":null,"sns":null,"lambda":null,"nats":null,"redis_stream":null,"amqp":null},"payload":null,"retry":null,"misfire":null}"#,
            ),
            (
                r#"{"key": "k2", "schedule": {"every": "1m"}, "target": {"amqp": {"connection": "rmq", "exchange": "jobs"}}, "retry": {}, "misfire": "skip", "payload": null}"#,
                r#"{"key":"k2","type":null,"schedule":{"every":"1m"},"target":{"webhook":null,"queue":null,"eventbridge":null,"sqs":null,"sns":null,"lambda":null,"nats":null,"redis_stream":null,"amqp":{"connection":"rmq","exchange":"jobs","routing_key":""}},"payload":null,"retry":{"max_attempts":null,"initial_backoff":null,"max_backoff":null},"misfire":"skip"}"#,
            ),
        ];
        // Labels are part of the request: another set is another create.
        let labeled = |labels: &str| -> CreateJob {
            serde_json::from_str(&format!(
                r#"{{"key": "k", "schedule": {{"after": "5s"}}, "target": {{"queue": "q"}}{labels}}}"#
            ))
            .unwrap()
        };
        let plain = fingerprint(&labeled(""));
        assert_eq!(fingerprint(&labeled(r#", "labels": {}"#)), plain);
        assert_ne!(fingerprint(&labeled(r#", "labels": {"a": "1"}"#)), plain);
        assert_ne!(
            fingerprint(&labeled(r#", "labels": {"a": "1"}"#)),
            fingerprint(&labeled(r#", "labels": {"a": "2"}"#))
        );
        for (body, printed) in cases {
            let req: CreateJob = serde_json::from_str(body).unwrap();
            assert_eq!(serde_json::to_string(&Printed::of(&req)).unwrap(), printed);
            // The same request with every absent field sent as `null` reads as the same create,
            // and `CreateJob` now sends it without them.
            let with_nulls: CreateJob = serde_json::from_str(printed).unwrap();
            assert_eq!(fingerprint(&with_nulls), fingerprint(&req));
            let sent: CreateJob =
                serde_json::from_slice(&serde_json::to_vec(&req).unwrap()).unwrap();
            assert_eq!(fingerprint(&sent), fingerprint(&req));
        }
    }
}
