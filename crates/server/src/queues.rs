//! The pull-queue endpoints under /v1/queues: lease, ack, nack, extend, counts, and the list of a
//! queue's messages. A queue is named per namespace; it exists as long as jobs target it.

use std::borrow::Cow;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use hourglass_api::{
    AckRequest, ExtendRequest, LeaseRequest, Message, NackRequest, Queue, QueueList,
    QueueListQuery, QueueMessage, QueueMessageStatus, QueueMessagesQuery, Receipt as ApiReceipt,
    ReceiptFailure, ReceiptResults, STALE_RECEIPT,
};
use hourglass_core::{DeliveryId, JobId, JobState};
use hourglass_engine::{LeaseRequest as EngineLease, Leased, Receipt, ReceiptOutcome};
use hourglass_store::{JobQuery, JobRecord, QueueStats};
use jiff::Timestamp;
use serde::Serialize;

use crate::error::{ApiError, ErrorCode};
use crate::extract::{
    Segment, page_limit, parse_body, parse_cursor, parse_query, principal, read_body,
};
use crate::pages::{Paging, push_json};
use crate::respond::{ApiResult, sized_response, typed_response};
use crate::state::{AppState, SMALL_BODY_BYTES};
use crate::wire::{self, valid_queue_name, validate_name};

pub const MAX_LEASE: u32 = 1000;
pub const MAX_WAIT_MS: u64 = 20_000;
pub const MIN_VISIBILITY_MS: u64 = 1_000;
pub const MAX_VISIBILITY_MS: u64 = 12 * 3600 * 1000;
pub const MAX_NACK_DELAY_MS: u64 = 24 * 3600 * 1000;
pub const MAX_RECEIPTS: usize = 1000;
pub const MAX_TYPES: usize = 32;
const DEFAULT_LEASE: u32 = 10;
const DEFAULT_VISIBILITY_MS: u64 = 30_000;

/// A lease's answer, `{"messages": [...]}`, written as it is serialized: each message borrows
/// from its leased occurrence, so nothing is copied into the answer but its encoding.
struct LeaseOut<'a>(&'a [Leased]);

impl Serialize for LeaseOut<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(1))?;
        map.serialize_entry("messages", &Messages(self.0))?;
        map.end()
    }
}

struct Messages<'a>(&'a [Leased]);

impl Serialize for Messages<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for l in self.0 {
            let occ = &l.occurrence;
            let delivery_id = occ.delivery_id();
            // The occurrence as its job knows it: a handed-off `allow` occurrence is its
            // parent's (the receipt names the job that holds it).
            let (job_id, due_at) = occ.origin();
            seq.serialize_element(&Message {
                job_id,
                job_type: occ.spec.job_type.as_deref().map(Cow::Borrowed),
                payload: wire::payload_out(occ.job_id, occ.payload.as_deref()),
                delivery_id: Cow::Borrowed(delivery_id.as_str()),
                attempt: occ.attempt,
                max_attempts: occ.spec.retry.max_attempts,
                due_at,
                visible_until: l.visible_until,
                receipt: ApiReceipt(l.receipt.to_string()),
            })?;
        }
        seq.end()
    }
}

fn queue_name(name: &str) -> Result<&str, ApiError> {
    if valid_queue_name(name) {
        Ok(name)
    } else {
        Err(ApiError::bad_request(
            ErrorCode::InvalidQueue,
            "name",
            wire::QUEUE_NAME_RULE,
        ))
    }
}

fn in_range(value: u64, min: u64, max: u64, field: &str) -> Result<u64, ApiError> {
    if (min..=max).contains(&value) {
        Ok(value)
    } else {
        Err(ApiError::new(
            ErrorCode::InvalidField,
            format!("must be between {min} and {max}"),
        )
        .field(field))
    }
}

fn receipts(list: &[ApiReceipt]) -> Result<Vec<Receipt>, ApiError> {
    if list.is_empty() || list.len() > MAX_RECEIPTS {
        return Err(ApiError::new(
            ErrorCode::InvalidField,
            format!("give 1 to {MAX_RECEIPTS} receipts"),
        )
        .field("receipts"));
    }
    list.iter()
        .enumerate()
        .map(|(i, r)| {
            r.0.parse().map_err(|()| {
                ApiError::new(
                    ErrorCode::InvalidReceipt,
                    "not a receipt returned by a lease",
                )
                .field(format!("receipts[{i}]"))
            })
        })
        .collect()
}

fn results(receipts: Vec<ApiReceipt>, outcomes: &[ReceiptOutcome]) -> ReceiptResults {
    let mut out = ReceiptResults {
        succeeded: Vec::with_capacity(receipts.len()),
        failed: Vec::new(),
        visible_until: None,
    };
    for (r, o) in receipts.into_iter().zip(outcomes) {
        match o {
            ReceiptOutcome::Applied => out.succeeded.push(r),
            ReceiptOutcome::Stale => out.failed.push(ReceiptFailure {
                receipt: r,
                code: Cow::Borrowed(STALE_RECEIPT),
                message: Cow::Borrowed(
                    "this receipt's lease is no longer current (it expired and the message \
                     was leased again, or the message was acked, nacked, edited or \
                     cancelled), or it is not for this queue",
                ),
            }),
        }
    }
    out
}

/// An ack's, nack's or extend's answer, in one buffer: a receipt is about 50 bytes, and a failed
/// one's message some 250 more.
fn results_response(out: &ReceiptResults) -> axum::response::Response {
    let size = 64 + 48 * out.succeeded.len() + 320 * out.failed.len();
    sized_response(StatusCode::OK, out, size)
}

pub(crate) async fn lease(
    State(state): State<AppState>,
    headers: HeaderMap,
    Segment(name): Segment,
    body: Body,
) -> ApiResult {
    let principal = principal(&state, &headers)?;
    let queue = queue_name(&name)?;
    let req: LeaseRequest =
        parse_body(&read_body(&state, &headers, body, SMALL_BODY_BYTES).await?)?;
    let max = in_range(
        req.max.unwrap_or(DEFAULT_LEASE).into(),
        1,
        MAX_LEASE.into(),
        "max",
    )?;
    let wait = in_range(req.wait_ms.unwrap_or(0), 0, MAX_WAIT_MS, "wait_ms")?;
    let visibility = in_range(
        req.visibility_ms.unwrap_or(DEFAULT_VISIBILITY_MS),
        MIN_VISIBILITY_MS,
        MAX_VISIBILITY_MS,
        "visibility_ms",
    )?;
    if let Some(types) = &req.types {
        if types.is_empty() || types.len() > MAX_TYPES {
            return Err(ApiError::new(
                ErrorCode::InvalidField,
                format!("give 1 to {MAX_TYPES} types, or leave types out for all"),
            )
            .field("types"));
        }
        for (i, t) in types.iter().enumerate() {
            validate_name(t, &format!("types[{i}]"), 128)?;
        }
    }
    let leased = lease_within(
        &state,
        &principal.namespace,
        queue,
        EngineLease {
            max: max as usize,
            wait: Duration::from_millis(wait),
            visibility: Duration::from_millis(visibility),
            types: req.types,
            max_bytes: None,
        },
    )
    .await?;
    let size = leased.iter().map(message_bytes).sum::<usize>();
    Ok(sized_response(
        StatusCode::OK,
        &LeaseOut(&leased),
        size + 16,
    ))
}

/// About what `l` takes in a lease's answer: its payload, and some 384 bytes of ids, instants
/// and the receipt.
fn message_bytes(l: &Leased) -> usize {
    384 + l.occurrence.payload.as_deref().map_or(0, str::len)
}

/// Leases up to `request.max` messages whose payloads stay within `max_answer_bytes`, in one
/// claim: the store stops taking messages once their payloads reach the budget (one message is
/// always taken), so a lease answers fewer messages when payloads are big, and leaves none
/// leased that it did not answer. A claim cannot be cut after the fact (a message claimed and not
/// handed out would stay invisible until its lease lapsed, and a nack would spend an attempt).
async fn lease_within(
    state: &AppState,
    namespace: &str,
    queue: &str,
    mut request: EngineLease,
) -> Result<Vec<Leased>, ApiError> {
    request.max_bytes = Some(state.limits.max_answer_bytes);
    Ok(state
        .scheduler
        .queues()
        .lease(namespace, queue, &request)
        .await?)
}

pub(crate) async fn ack(
    State(state): State<AppState>,
    headers: HeaderMap,
    Segment(name): Segment,
    body: Body,
) -> ApiResult {
    let principal = principal(&state, &headers)?;
    let queue = queue_name(&name)?;
    let req: AckRequest = parse_body(&read_body(&state, &headers, body, SMALL_BODY_BYTES).await?)?;
    let parsed = receipts(&req.receipts)?;
    let outcomes = state
        .scheduler
        .queues()
        .ack(&principal.namespace, queue, &parsed)
        .await?;
    Ok(results_response(&results(req.receipts, &outcomes)))
}

pub(crate) async fn nack(
    State(state): State<AppState>,
    headers: HeaderMap,
    Segment(name): Segment,
    body: Body,
) -> ApiResult {
    let principal = principal(&state, &headers)?;
    let queue = queue_name(&name)?;
    let req: NackRequest = parse_body(&read_body(&state, &headers, body, SMALL_BODY_BYTES).await?)?;
    let parsed = receipts(&req.receipts)?;
    let delay = req
        .delay_ms
        .map(|d| in_range(d, 0, MAX_NACK_DELAY_MS, "delay_ms"))
        .transpose()?
        .map(Duration::from_millis);
    let outcomes = state
        .scheduler
        .queues()
        .nack(&principal.namespace, queue, &parsed, delay)
        .await?;
    Ok(results_response(&results(req.receipts, &outcomes)))
}

pub(crate) async fn extend(
    State(state): State<AppState>,
    headers: HeaderMap,
    Segment(name): Segment,
    body: Body,
) -> ApiResult {
    let principal = principal(&state, &headers)?;
    let queue = queue_name(&name)?;
    let req: ExtendRequest =
        parse_body(&read_body(&state, &headers, body, SMALL_BODY_BYTES).await?)?;
    let parsed = receipts(&req.receipts)?;
    let visibility = in_range(
        req.visibility_ms,
        MIN_VISIBILITY_MS,
        MAX_VISIBILITY_MS,
        "visibility_ms",
    )?;
    let (outcomes, until) = state
        .scheduler
        .queues()
        .extend(
            &principal.namespace,
            queue,
            &parsed,
            Duration::from_millis(visibility),
        )
        .await?;
    let mut out = results(req.receipts, &outcomes);
    out.visible_until = Some(until);
    Ok(results_response(&out))
}

/// Where an active queue job stands at `now`, and since or until when: a lease that has not
/// lapsed holds it; a lapsed one, like a message no lease holds, leaves it available from its fire
/// time (the lapse) on. `None` for a job that is no message: not active, or without a due time.
fn queue_message_out(
    j: &JobRecord,
    now: Timestamp,
    with_payload: bool,
) -> Option<QueueMessage<'_>> {
    let due = j.next_due.filter(|_| j.state == JobState::Active)?;
    let (status, available_at, leased_until) = match (j.leased_until, j.next_attempt) {
        (Some(until), _) if until > now => (QueueMessageStatus::Leased, None, Some(until)),
        (Some(lapsed), _) => (QueueMessageStatus::Available, Some(lapsed), None),
        (None, Some(at)) if at <= now => (QueueMessageStatus::Available, Some(at), None),
        (None, at) => (QueueMessageStatus::Scheduled, at, None),
    };
    Some(QueueMessage {
        job_id: j.id,
        key: j.key.as_deref().map(Cow::Borrowed),
        job_type: j.spec.job_type.as_deref().map(Cow::Borrowed),
        status,
        due_at: due,
        available_at,
        leased_until,
        failed_attempts: j.attempt,
        max_attempts: j.spec.retry.max_attempts,
        delivery_id: DeliveryId::new(j.id, due).to_string(),
        last_error: j.last_error.as_deref().map(Cow::Borrowed),
        payload: with_payload.then(|| wire::payload_out(j.id, j.payload.as_deref())),
        created_at: j.created_at,
    })
}

/// The queue's messages (its active jobs) in id order, a page at a time: waiting or leased, each
/// with when it becomes available or when its lease lapses. Reads only; nothing is leased.
pub(crate) async fn list_messages(
    State(state): State<AppState>,
    headers: HeaderMap,
    Segment(name): Segment,
    RawQuery(query): RawQuery,
) -> ApiResult {
    let principal = principal(&state, &headers)?;
    let queue = queue_name(&name)?;
    let q: QueueMessagesQuery = parse_query(query)?;
    let limit = page_limit(q.limit)?;
    let with_payload = q.payload.unwrap_or(false);
    let after = parse_cursor(q.cursor.as_deref(), |c| JobId::parse_str(c).ok())?;
    let paging = Paging {
        budget: state.limits.max_answer_bytes,
        worst_item: state.limits.max_job_bytes(),
        limit,
    };
    let page = paging
        .read(
            after,
            |after, n| {
                let scheduler = state.scheduler.clone();
                let query = JobQuery {
                    namespace: Some(principal.namespace.clone()),
                    state: Some(JobState::Active),
                    queue: Some(queue.to_owned()),
                    after,
                    limit: n,
                    ..Default::default()
                };
                async move {
                    let jobs = scheduler.list(query).await?;
                    // Read after the jobs, so a lease read as held has not lapsed before this
                    // instant.
                    let now = scheduler.now();
                    Ok(jobs.into_iter().map(|j| (j, now)).collect())
                }
            },
            |(j, _): &(JobRecord, Timestamp)| j.id,
            // A job that is no message (none is: every active job has a due time) is left out,
            // and the cursor still moves past it.
            |(j, now), buf| {
                queue_message_out(j, *now, with_payload).is_some_and(|out| push_json(buf, &out))
            },
        )
        .await?;
    Ok(page.answer("messages", JobId::to_string))
}

fn queue_out(s: QueueStats, now_ms: i64) -> Queue {
    Queue {
        name: s.name,
        available: s.available,
        in_flight: s.in_flight,
        scheduled: s.scheduled,
        oldest_available_age_ms: s
            .oldest_available
            .map(|t| (now_ms - t.as_millisecond()).max(0)),
    }
}

/// The namespace's queues by name, a page at a time: a namespace may have tens of thousands.
pub(crate) async fn list_queues(
    State(state): State<AppState>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> ApiResult {
    let principal = principal(&state, &headers)?;
    let q: QueueListQuery = parse_query(query)?;
    let limit = page_limit(q.limit)?;
    let after = parse_cursor(q.cursor.as_deref(), |c| {
        valid_queue_name(c).then(|| c.to_owned())
    })?;
    let now = state.scheduler.now().as_millisecond();
    let mut stats = state
        .scheduler
        .queues()
        .stats(&principal.namespace, None)
        .await?;
    // The store answers every queue; the cursor needs them by name in byte order.
    stats.sort_unstable_by(|a, b| a.name.cmp(&b.name));
    let mut page: Vec<QueueStats> = stats
        .into_iter()
        .filter(|s| after.as_ref().is_none_or(|a| s.name.as_str() > a.as_str()))
        .take(limit + 1)
        .collect();
    let more = page.len() > limit;
    page.truncate(limit);
    let next_cursor = more.then(|| page.last().map(|s| s.name.clone())).flatten();
    Ok(typed_response(
        StatusCode::OK,
        &QueueList {
            queues: page.into_iter().map(|s| queue_out(s, now)).collect(),
            next_cursor,
        },
    ))
}

pub(crate) async fn get_queue(
    State(state): State<AppState>,
    headers: HeaderMap,
    Segment(name): Segment,
) -> ApiResult {
    let principal = principal(&state, &headers)?;
    let queue = queue_name(&name)?;
    let now = state.scheduler.now().as_millisecond();
    let stats = state
        .scheduler
        .queues()
        .stats(&principal.namespace, Some(queue))
        .await?;
    let one = stats
        .into_iter()
        .next()
        .ok_or_else(|| ApiError::not_found("queue"))?;
    Ok(typed_response(StatusCode::OK, &queue_out(one, now)))
}
