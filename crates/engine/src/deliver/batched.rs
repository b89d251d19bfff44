//! Batched webhook deliveries, for targets with `batch`. Each occurrence is still delivered by its
//! own task, holding its own slots, and gets its own result; the task hands its delivery to the
//! line of its namespace, URL, headers and batch size (`super::batch`), which sends what gathered
//! as one signed request as soon as one of its [`IN_FLIGHT`] requests is free.
//!
//! The request: `POST` of `{"deliveries": [item, ...]}` where each item is
//! `{"id", "job_id", "due_at", "attempt", "job_type" (when the job has one), "payload"}` — what a
//! single delivery carries in its headers and body. `webhook-id` is the batch's own id
//! (`batch_` and a UUIDv7); the signature covers it, the timestamp and the body as for any
//! delivery; `hourglass-batch-size` counts the items. Receivers deduplicate by each item's `id`.
//!
//! The answer: a non-2xx status, a timeout or a connection failure is every item's result, as it
//! would be a single delivery's. A 2xx acknowledges every item, except the ids a JSON object
//! answer lists in `"failed"` (`{"failed": ["<delivery id>", ...]}`): those are retried under their
//! own job's retry policy. A 2xx whose body starts like a JSON object and cannot be read as one
//! (within the first [`DRAIN_LIMIT`] bytes and the 100 ms the deliverer waits for a body) is
//! retried whole, so a cut or garbled answer never acknowledges a failure.

use std::collections::HashSet;
use std::io::Write as _;
use std::sync::Arc;

use bytes::Bytes;
use hourglass_core::occurrence::RESPONSE_SNIPPET_BYTES;
use hourglass_core::{DeliveryId, JobSpec, Occurrence, Target, WebhookBatch, WebhookTarget};
use http::header::{HeaderName, HeaderValue};
use tokio::time::Instant;

use super::batch::{Batches, Shape, Unanswered};
use super::{
    ClaimCheck, DRAIN_LIMIT, DeliveryResult, Exchange, Http, Verdict, classify, give_up, snippet,
};

/// Requests in flight at once on one line. Each occurrence in a batch holds one of its
/// destination's slots (`destination_concurrency`), so under load a line's batches share those
/// slots: with the default 64, two requests of up to 32 deliveries each.
const IN_FLIGHT: usize = 2;

/// Most bytes of items in one request body; a larger item goes alone.
const MAX_BYTES: usize = 1024 * 1024;

const HOURGLASS_BATCH_SIZE: HeaderName = HeaderName::from_static("hourglass-batch-size");

/// Why an item the receiver listed as failed is retried.
const LISTED_FAILED: &str = "the receiver listed this delivery as failed in its batch's answer";

/// One delivery waiting in a line: its id, its JSON item, and what the request needs from it.
pub(super) struct Item {
    id: DeliveryId,
    json: Vec<u8>,
    namespace: Arc<str>,
    spec: Arc<JobSpec>,
}

/// The batch lines of one webhook deliverer.
pub(super) struct Lines(Batches<Item, DeliveryResult>);

pub(super) fn lines(http: Arc<Http>) -> Lines {
    let shape = Shape {
        max_entries: 1,
        max_bytes: MAX_BYTES,
        in_flight: IN_FLIGHT,
    };
    Lines(Batches::new(shape, move |_key, items| {
        let http = http.clone();
        async move {
            let mut results = http.send_batch(items).await;
            // One request, one outcome for the destination's breaker.
            for result in results.iter_mut().skip(1) {
                result.shared = true;
            }
            results
        }
    }))
}

impl Lines {
    /// Delivers `occ` in the next batch of its line and answers its own result; the latency is
    /// the occurrence's, from `started` (time in the line included).
    pub(super) async fn deliver(
        &self,
        occ: &Occurrence,
        target: &WebhookTarget,
        batch: WebhookBatch,
        claim: &ClaimCheck,
        started: Instant,
    ) -> DeliveryResult {
        let id = occ.delivery_id();
        let json = item_json(occ, &id);
        let size = json.len();
        let item = Item {
            id,
            json,
            namespace: occ.namespace.clone(),
            spec: occ.spec.clone(),
        };
        let shape = Shape {
            max_entries: usize::from(batch.max_items.max(1)),
            max_bytes: MAX_BYTES,
            in_flight: IN_FLIGHT,
        };
        let key = line_key(&occ.namespace, target, batch);
        let mut result = self
            .0
            .submit_shaped(&key, item, size, shape, claim.clone())
            .await;
        result.latency = started.elapsed();
        result
    }
}

/// What a batch shares: the namespace (its signing keys), the URL, the headers and the batch
/// size. Each part is length-prefixed, so no two different targets make the same key.
fn line_key(namespace: &str, target: &WebhookTarget, batch: WebhookBatch) -> String {
    let mut key = String::with_capacity(namespace.len() + target.url.as_str().len() + 32);
    let mut part = |text: &str| {
        key.push_str(itoa::Buffer::new().format(text.len()));
        key.push(':');
        key.push_str(text);
    };
    part(namespace);
    part(target.url.as_str());
    part(itoa::Buffer::new().format(batch.max_items));
    for (name, value) in &target.headers {
        part(name);
        part(value);
    }
    key
}

/// One item of a batch's `deliveries`: the facts a single delivery carries in its headers, and
/// the payload as it was stored (valid JSON text, written byte for byte).
fn item_json(occ: &Occurrence, id: &DeliveryId) -> Vec<u8> {
    let payload = occ.payload.as_deref().unwrap_or("null");
    let mut out = Vec::with_capacity(payload.len() + 160);
    // Writing to a Vec cannot fail.
    let _ = write!(
        out,
        r#"{{"id":"{id}","job_id":"{}","due_at":"{:.3}","attempt":{}"#,
        occ.job_id, occ.due, occ.attempt
    );
    if let Some(job_type) = &occ.spec.job_type {
        out.extend_from_slice(br#","job_type":"#);
        let _ = serde_json::to_writer(&mut out, job_type);
    }
    out.extend_from_slice(br#","payload":"#);
    out.extend_from_slice(payload.as_bytes());
    out.push(b'}');
    out
}

/// A batch keeps a 2xx answer's body (up to the drain limit) for its `failed` list, and the start
/// of any other answer.
fn keep_answer(status: u16) -> usize {
    if (200..300).contains(&status) {
        DRAIN_LIMIT
    } else {
        RESPONSE_SNIPPET_BYTES
    }
}

/// The delivery ids a 2xx answer's body lists in `failed`: none for an empty or non-JSON body or
/// an object without `failed`; an error for a body that starts like an object and is not one, or
/// a `failed` that is not a list of strings.
fn failed_ids(body: &[u8]) -> Result<Vec<String>, String> {
    if !body.trim_ascii_start().starts_with(b"{") {
        return Ok(Vec::new());
    }
    let answer: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| format!("not readable JSON: {e}"))?;
    let Some(failed) = answer.get("failed") else {
        return Ok(Vec::new());
    };
    let listed = failed.as_array().ok_or("`failed` is not a list")?;
    listed
        .iter()
        .map(|id| id.as_str().map(str::to_owned))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| "`failed` lists something other than delivery ids".to_string())
}

impl Http {
    /// Sends one batch and answers one result per item, in order.
    async fn send_batch(&self, items: Vec<Item>) -> Vec<DeliveryResult> {
        let started = Instant::now();
        let Some(first) = items.first() else {
            return Vec::new();
        };
        let Target::Webhook(target) = &first.spec.target else {
            // Only webhook targets with `batch` reach a line.
            let result = give_up("not a webhook target", started);
            return vec![result; items.len()];
        };
        let count = items.len();
        self.batch_sizes.observe(count as f64);
        let mut body =
            Vec::with_capacity(items.iter().map(|i| i.json.len() + 1).sum::<usize>() + 18);
        body.extend_from_slice(br#"{"deliveries":["#);
        for (n, item) in items.iter().enumerate() {
            if n > 0 {
                body.push(b',');
            }
            body.extend_from_slice(&item.json);
        }
        body.extend_from_slice(b"]}");
        let batch_id = format!("batch_{}", uuid::Uuid::now_v7().simple());
        let exchange = self
            .post(
                &first.namespace,
                target,
                &batch_id,
                Bytes::from(body),
                keep_answer,
                // Every item's facts are inside the signed body: no metadata signature.
                |headers, _keys, _timestamp, _body| {
                    headers.insert(HOURGLASS_BATCH_SIZE, HeaderValue::from(count));
                },
            )
            .await;
        let (status, retry_after, body, latency) = match exchange {
            Exchange::Failed(result) => return vec![result; count],
            Exchange::Answered {
                status,
                retry_after,
                body,
                latency,
            } => (status, retry_after, body, latency),
        };
        let answered = |verdict: Verdict, response: Option<String>| DeliveryResult {
            status: Some(status),
            latency,
            verdict,
            response,
            shared: false,
        };
        let verdict = classify(status, retry_after);
        if verdict != Verdict::Delivered {
            let response = snippet(&body);
            return vec![answered(verdict, response); count];
        }
        let failed = match failed_ids(&body) {
            Ok(failed) => failed,
            Err(e) => {
                let reason = format!("the batch's answer cannot be read: {e}");
                let result = answered(Verdict::unanswered(reason), snippet(&body));
                return vec![result; count];
            }
        };
        if failed.is_empty() {
            return vec![answered(Verdict::Delivered, None); count];
        }
        let failed: HashSet<&str> = failed.iter().map(String::as_str).collect();
        let response = snippet(&body);
        items
            .iter()
            .map(|item| {
                if failed.contains(item.id.as_str()) {
                    answered(Verdict::unanswered(LISTED_FAILED.into()), response.clone())
                } else {
                    answered(Verdict::Delivered, None)
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn target(headers: &[(&str, &str)]) -> WebhookTarget {
        WebhookTarget {
            url: "https://example.com/hook".parse().unwrap(),
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
            rate_limit: None,
            batch: Some(WebhookBatch { max_items: 10 }),
        }
    }

    #[test]
    fn failed_lists_are_read_strictly() {
        assert_eq!(failed_ids(b""), Ok(vec![]));
        assert_eq!(failed_ids(b"OK"), Ok(vec![]));
        assert_eq!(failed_ids(br#"{"received": 3}"#), Ok(vec![]));
        assert_eq!(
            failed_ids(br#" {"failed": ["a_1", "b_2"]}"#),
            Ok(vec!["a_1".to_string(), "b_2".to_string()])
        );
        // A cut answer or a list of something else never acknowledges what it meant to fail.
        assert!(failed_ids(br#"{"failed": ["a_1", "b_"#).is_err());
        assert!(failed_ids(br#"{"failed": "a_1"}"#).is_err());
        assert!(failed_ids(br#"{"failed": [1, 2]}"#).is_err());
    }

    #[test]
    fn line_keys_tell_namespaces_headers_and_sizes_apart() {
        let batch = WebhookBatch { max_items: 10 };
        let plain = line_key("a", &target(&[]), batch);
        assert_eq!(plain, line_key("a", &target(&[]), batch));
        assert_ne!(plain, line_key("b", &target(&[]), batch));
        assert_ne!(
            plain,
            line_key("a", &target(&[]), WebhookBatch { max_items: 11 })
        );
        // Moving text between a header's name and value changes the key.
        assert_ne!(
            line_key("a", &target(&[("x-a", "bc")]), batch),
            line_key("a", &target(&[("x-ab", "c")]), batch)
        );
    }
}
