//! EventBridge: PutEvents, up to 10 entries and 256 KB a request, per bus. The payload is the
//! event's `detail` (EventBridge takes only a JSON object there); the due time is the event's
//! `time`; the occurrence's facts are the event's `resources`, as `hourglass:<name>/<value>`
//! strings that rules can match by prefix. EventBridge reports failures per entry, so only the
//! entries it refused are retried.

use aws_config::SdkConfig;
use aws_sdk_eventbridge::types::PutEventsRequestEntry;
use hourglass_core::{EventBridgeTarget, Occurrence};
use hourglass_engine::{ClaimCheck, Verdict};

use super::{all, entry_verdict, transient_code, verdict_of};
use crate::envelope::{Meta, RESOURCE_NAMES, payload};
use hourglass_engine::batch::{Batches, Shape};

const SHAPE: Shape = Shape {
    max_entries: 10,
    max_bytes: 256 * 1024,
    in_flight: 8,
};

pub struct EventBridge {
    batches: Batches<PutEventsRequestEntry>,
}

impl EventBridge {
    pub fn new(_connection: &str, sdk: &SdkConfig) -> Self {
        let client = aws_sdk_eventbridge::Client::new(sdk);
        Self {
            batches: Batches::new(SHAPE, move |_bus: String, entries| {
                let client = client.clone();
                async move { send(&client, entries).await }
            }),
        }
    }

    pub async fn publish(
        &self,
        target: &EventBridgeTarget,
        occ: &Occurrence,
        claim: &ClaimCheck,
    ) -> Verdict {
        let meta = Meta::of(occ);
        let detail = payload(occ);
        if !detail.trim_start().starts_with('{') {
            return Verdict::GiveUp {
                reason: "eventbridge takes only a JSON object as an event's detail; this job's payload is not one".into(),
            };
        }
        let resources: Vec<String> = meta
            .pairs(&RESOURCE_NAMES)
            .map(|(name, value)| format!("hourglass:{name}/{value}"))
            .collect();
        // The entry size as EventBridge counts it: 14 bytes for the time, then each text.
        let size = 14
            + target.source.len()
            + target.detail_type.len()
            + detail.len()
            + resources.iter().map(String::len).sum::<usize>();
        let entry = PutEventsRequestEntry::builder()
            .event_bus_name(&target.bus)
            .source(&target.source)
            .detail_type(&target.detail_type)
            .detail(detail)
            .time(aws_sdk_eventbridge::primitives::DateTime::from_millis(
                occ.due.as_millisecond(),
            ))
            .set_resources(Some(resources))
            .build();
        self.batches
            .submit(&target.bus, entry, size, claim.clone())
            .await
    }
}

async fn send(
    client: &aws_sdk_eventbridge::Client,
    entries: Vec<PutEventsRequestEntry>,
) -> Vec<Verdict> {
    let count = entries.len();
    let answer = client.put_events().set_entries(Some(entries)).send().await;
    let out = match answer {
        Ok(out) => out,
        Err(e) => return all(count, verdict_of("eventbridge", &e)),
    };
    // Results come in the order of the entries sent.
    let mut verdicts: Vec<Verdict> = out
        .entries()
        .iter()
        .map(|result| match result.error_code() {
            None => Verdict::Delivered,
            // EventBridge reports no sender fault per entry: only throttling and internal
            // failures are worth another try.
            Some(code) => entry_verdict(
                "eventbridge",
                code,
                result.error_message().unwrap_or_default(),
                !transient_code(code),
            ),
        })
        .collect();
    verdicts.resize(
        count,
        Verdict::Retry {
            after: None,
            reason: "eventbridge did not report this entry".into(),
        },
    );
    verdicts
}
