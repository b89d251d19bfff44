//! SNS: PublishBatch, up to 10 messages and 256 KiB a request, per topic. The message is the
//! payload; the occurrence's facts are message attributes (subscribers' filter policies can
//! match them, and raw delivery to SQS keeps them as SQS attributes). A FIFO topic (`.fifo`)
//! gets the delivery id as deduplication id and `group_id` (else the job id) as message group.

use aws_config::SdkConfig;
use aws_sdk_sns::types::{MessageAttributeValue, PublishBatchRequestEntry};
use hourglass_core::{Occurrence, SnsTarget};
use hourglass_engine::{ClaimCheck, Verdict};

use super::{all, batch_verdicts, verdict_of};
use crate::envelope::{HEADER_NAMES, Meta, payload};
use hourglass_engine::batch::{Batches, Shape};

const SHAPE: Shape = Shape {
    max_entries: 10,
    max_bytes: 256 * 1024,
    in_flight: 8,
};

pub struct Sns {
    batches: Batches<PublishBatchRequestEntry>,
}

impl Sns {
    pub fn new(_connection: &str, sdk: &SdkConfig) -> Self {
        let client = aws_sdk_sns::Client::new(sdk);
        Self {
            batches: Batches::new(SHAPE, move |topic_arn: String, entries| {
                let client = client.clone();
                async move { send(&client, topic_arn, entries).await }
            }),
        }
    }

    pub async fn publish(
        &self,
        target: &SnsTarget,
        occ: &Occurrence,
        claim: &ClaimCheck,
    ) -> Verdict {
        let meta = Meta::of(occ);
        let message = payload(occ).to_string();
        let mut size = message.len();
        let mut entry = PublishBatchRequestEntry::builder().id("0").message(message);
        for (name, value) in meta.pairs(&HEADER_NAMES) {
            size += name.len() + value.len() + 6;
            match MessageAttributeValue::builder()
                .data_type("String")
                .string_value(value)
                .build()
            {
                Ok(value) => entry = entry.message_attributes(name, value),
                Err(e) => {
                    return Verdict::GiveUp {
                        reason: format!("sns attribute: {e}"),
                    };
                }
            }
        }
        if target.topic_arn.ends_with(".fifo") {
            entry = entry
                .message_deduplication_id(meta.delivery_id.clone())
                .message_group_id(target.group_id.clone().unwrap_or(meta.job_id.clone()));
        }
        match entry.build() {
            Ok(entry) => {
                self.batches
                    .submit(&target.topic_arn, entry, size, claim.clone())
                    .await
            }
            Err(e) => Verdict::GiveUp {
                reason: format!("the sns message could not be built: {e}"),
            },
        }
    }
}

async fn send(
    client: &aws_sdk_sns::Client,
    topic_arn: String,
    mut entries: Vec<PublishBatchRequestEntry>,
) -> Vec<Verdict> {
    let count = entries.len();
    for (i, entry) in entries.iter_mut().enumerate() {
        entry.id = i.to_string();
    }
    let answer = client
        .publish_batch()
        .topic_arn(topic_arn)
        .set_publish_batch_request_entries(Some(entries))
        .send()
        .await;
    let out = match answer {
        Ok(out) => out,
        Err(e) => return all(count, verdict_of("sns", &e)),
    };
    batch_verdicts(
        "sns",
        count,
        out.successful().iter().filter_map(|ok| ok.id()),
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
