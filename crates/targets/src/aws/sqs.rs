//! SQS: SendMessageBatch, up to 10 messages and 1 MiB a request, per queue. The body is the
//! payload; the occurrence's facts are message attributes. A FIFO queue (its URL ends in
//! `.fifo`) gets the delivery id as its deduplication id, so a redelivery within SQS's five
//! minutes is dropped, and the target's `group_id` (else the job id) as message group.

use aws_config::SdkConfig;
use aws_sdk_sqs::types::{MessageAttributeValue, SendMessageBatchRequestEntry};
use hourglass_core::{Occurrence, SqsTarget};
use hourglass_engine::{ClaimCheck, Verdict};

use super::{all, batch_verdicts, verdict_of};
use crate::envelope::{HEADER_NAMES, Meta, payload};
use hourglass_engine::batch::{Batches, Shape};

const SHAPE: Shape = Shape {
    max_entries: 10,
    max_bytes: 1024 * 1024,
    in_flight: 8,
};

pub struct Sqs {
    batches: Batches<SendMessageBatchRequestEntry>,
}

impl Sqs {
    pub fn new(_connection: &str, sdk: &SdkConfig) -> Self {
        let client = aws_sdk_sqs::Client::new(sdk);
        Self {
            batches: Batches::new(SHAPE, move |queue_url: String, entries| {
                let client = client.clone();
                async move { send(&client, queue_url, entries).await }
            }),
        }
    }

    pub async fn publish(
        &self,
        target: &SqsTarget,
        occ: &Occurrence,
        claim: &ClaimCheck,
    ) -> Verdict {
        let meta = Meta::of(occ);
        let body = payload(occ).to_string();
        let mut size = body.len();
        let mut entry = SendMessageBatchRequestEntry::builder()
            .id("0")
            .message_body(body);
        for (name, value) in meta.pairs(&HEADER_NAMES) {
            size += name.len() + value.len() + 6;
            let value = MessageAttributeValue::builder()
                .data_type("String")
                .string_value(value)
                .build();
            match value {
                Ok(value) => entry = entry.message_attributes(name, value),
                Err(e) => {
                    return Verdict::GiveUp {
                        reason: format!("sqs attribute: {e}"),
                    };
                }
            }
        }
        if target.queue_url.ends_with(".fifo") {
            entry = entry
                .message_deduplication_id(meta.delivery_id.clone())
                .message_group_id(target.group_id.clone().unwrap_or(meta.job_id.clone()));
        }
        match entry.build() {
            Ok(entry) => {
                self.batches
                    .submit(&target.queue_url, entry, size, claim.clone())
                    .await
            }
            Err(e) => Verdict::GiveUp {
                reason: format!("the sqs message could not be built: {e}"),
            },
        }
    }
}

async fn send(
    client: &aws_sdk_sqs::Client,
    queue_url: String,
    mut entries: Vec<SendMessageBatchRequestEntry>,
) -> Vec<Verdict> {
    let count = entries.len();
    for (i, entry) in entries.iter_mut().enumerate() {
        entry.id = i.to_string();
    }
    let answer = client
        .send_message_batch()
        .queue_url(queue_url)
        .set_entries(Some(entries))
        .send()
        .await;
    let out = match answer {
        Ok(out) => out,
        Err(e) => return all(count, verdict_of("sqs", &e)),
    };
    batch_verdicts(
        "sqs",
        count,
        out.successful().iter().map(|ok| ok.id()),
        out.failed().iter().map(|f| {
            (
                f.id(),
                f.code(),
                f.message().unwrap_or_default(),
                f.sender_fault(),
            )
        }),
    )
}
