//! Lambda: an asynchronous invocation (`InvocationType=Event`), delivered once Lambda has queued
//! it (202). The event is an envelope: the occurrence's facts beside the job's payload, since an
//! asynchronous invocation has nowhere else to carry them.

use aws_config::SdkConfig;
use aws_sdk_lambda::primitives::Blob;
use aws_sdk_lambda::types::InvocationType;
use hourglass_core::{LambdaTarget, Occurrence};
use hourglass_engine::Verdict;

use super::verdict_of;
use crate::envelope::{Meta, payload};

pub struct Lambda {
    client: aws_sdk_lambda::Client,
}

impl Lambda {
    pub fn new(sdk: &SdkConfig) -> Self {
        Self {
            client: aws_sdk_lambda::Client::new(sdk),
        }
    }

    pub async fn publish(&self, target: &LambdaTarget, occ: &Occurrence) -> Verdict {
        let event = envelope(occ);
        let answer = self
            .client
            .invoke()
            .function_name(&target.function)
            .invocation_type(InvocationType::Event)
            .payload(Blob::new(event))
            .send()
            .await;
        match answer {
            Ok(out) if (200..300).contains(&out.status_code()) => Verdict::Delivered,
            Ok(out) => Verdict::Retry {
                after: None,
                reason: format!("lambda answered {}", out.status_code()),
            },
            Err(e) => verdict_of("lambda", &e),
        }
    }
}

/// `{"delivery_id": ..., "job_id": ..., "type": ..., "due_at": ..., "attempt": 1, "payload": ...}`.
pub(crate) fn envelope(occ: &Occurrence) -> Vec<u8> {
    let meta = Meta::of(occ);
    let mut out = String::with_capacity(192 + payload(occ).len());
    out.push_str("{\"delivery_id\":");
    out.push_str(&serde_json::Value::from(meta.delivery_id).to_string());
    out.push_str(",\"job_id\":");
    out.push_str(&serde_json::Value::from(meta.job_id).to_string());
    out.push_str(",\"type\":");
    out.push_str(&serde_json::Value::from(meta.job_type).to_string());
    out.push_str(",\"due_at\":");
    out.push_str(&serde_json::Value::from(meta.due_at).to_string());
    out.push_str(",\"attempt\":");
    out.push_str(&occ.attempt.to_string());
    // The stored payload is JSON text already: embedded as it is, never re-encoded.
    out.push_str(",\"payload\":");
    out.push_str(payload(occ));
    out.push('}');
    out.into_bytes()
}
