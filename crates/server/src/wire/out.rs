//! How jobs, runs and dead letters look in the API's answers: borrowed serializable shapes built
//! from store records, so a list or batch answer does not build a JSON tree per job.

use std::collections::BTreeMap;

use hourglass_core::duration::format_duration;
use hourglass_core::{JobId, MisfirePolicy, Schedule, ScheduleKind, Target};
use hourglass_store::{DeadLetter, JobRecord, RunRecord};
use jiff::Timestamp;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::ScheduleIn;

pub fn rfc3339(ts: Timestamp) -> String {
    format!("{ts:.3}")
}

/// The schedule as the API shows it; `after` appears as the `at` it resolved to.
pub fn schedule_out(s: &Schedule) -> ScheduleIn {
    let mut out = ScheduleIn {
        start: s.start.map(rfc3339),
        end: s.end.map(rfc3339),
        max_runs: s.max_runs,
        ..Default::default()
    };
    match &s.kind {
        ScheduleKind::At(at) => out.at = Some(rfc3339(*at)),
        ScheduleKind::Cron(c) => {
            out.cron = Some(c.expr().to_string());
            out.timezone = Some(c.timezone().to_string());
        }
        ScheduleKind::Every { interval, anchor } => {
            out.every = Some(format_duration(*interval));
            out.start = Some(rfc3339(*anchor));
        }
    }
    out
}

/// The misfire policy as the API shows it: a name, or the `all` policy with its window.
#[derive(Serialize)]
#[serde(untagged)]
pub enum MisfireOut {
    Name(&'static str),
    All {
        policy: &'static str,
        window: String,
    },
}

fn misfire_out(m: MisfirePolicy) -> MisfireOut {
    match m {
        MisfirePolicy::Skip => MisfireOut::Name("skip"),
        MisfirePolicy::Once => MisfireOut::Name("once"),
        MisfirePolicy::All { window } => MisfireOut::All {
            policy: "all",
            window: format_duration(window),
        },
    }
}

#[derive(Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetOut<'a> {
    Webhook(WebhookOut<'a>),
    Queue(&'a str),
    /// A bus or cloud target, shown as it was given (it holds no secret: the connection does).
    #[serde(untagged)]
    Connection(&'a Target),
}

#[derive(Serialize)]
pub struct WebhookOut<'a> {
    url: &'a str,
    /// Header names only: values often carry the receiver's credentials and are never echoed.
    headers: BTreeMap<&'a str, &'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rate_limit: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    batch: Option<BatchOut>,
}

#[derive(Serialize)]
pub struct BatchOut {
    max_items: u16,
}

fn target_out(t: &Target) -> TargetOut<'_> {
    match t {
        Target::Webhook(w) => TargetOut::Webhook(WebhookOut {
            url: w.url.as_str(),
            headers: w
                .headers
                .keys()
                .map(|k| (k.as_str(), "<redacted>"))
                .collect(),
            rate_limit: w.rate_limit,
            batch: w.batch.map(|b| BatchOut {
                max_items: b.max_items,
            }),
        }),
        Target::Queue(q) => TargetOut::Queue(&q.name),
        other => TargetOut::Connection(other),
    }
}

/// The stored payload text of job `job`, emitted as-is once checked to be JSON: it was stored
/// valid, and emitting it unchecked would let one damaged row break a whole answer (a lease of
/// many messages, a page of jobs). A damaged one is answered as `null` and logged, not silently.
pub fn payload_out(job: JobId, payload: Option<&str>) -> Option<&RawValue> {
    let text = payload?;
    match serde_json::from_str(text) {
        Ok(raw) => Some(raw),
        Err(e) => {
            tracing::error!(
                job = %job,
                error = %e,
                bytes = text.len(),
                "a stored payload is not valid JSON (the store's data is damaged); answered as null"
            );
            None
        }
    }
}

#[derive(Serialize)]
pub struct RetryOut {
    max_attempts: u32,
    initial_backoff: String,
    max_backoff: String,
}

/// A job as the API shows it. Serialized straight from borrowed fields: building a JSON value
/// tree per job was the largest cost of a 1,000-job batch.
#[derive(Serialize)]
pub struct JobOut<'a> {
    id: JobId,
    namespace: &'a str,
    key: Option<&'a str>,
    #[serde(rename = "type")]
    job_type: Option<&'a str>,
    state: &'static str,
    schedule: ScheduleIn,
    target: TargetOut<'a>,
    /// `None` leaves the field out (a listing that was not asked for payloads); `Some(None)` is
    /// a job without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    payload: Option<Option<&'a RawValue>>,
    retry: RetryOut,
    misfire: MisfireOut,
    next_due_at: Option<String>,
    /// When the next attempt runs, when that is not `next_due_at`: a failed attempt waiting out
    /// its backoff, or an occurrence held back by its destination's open breaker.
    next_attempt_at: Option<String>,
    attempt: u32,
    /// Why the latest failed attempt failed (at most 1 KiB), until an occurrence is delivered.
    last_error: Option<&'a str>,
    runs: u64,
    skipped: u64,
    created_at: String,
    updated_at: String,
    /// Batch answers only: whether this job was created by the request (or already existed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created: Option<bool>,
    /// Trigger answers only: the delivery id of the occurrence the trigger made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivery_id: Option<String>,
}

impl JobOut<'_> {
    /// The job as a listing shows it when payloads were not asked for: without the field.
    pub fn without_payload(mut self) -> Self {
        self.payload = None;
        self
    }
}

/// A job in a batch answer under `Prefer: return=minimal`: what a bulk submitter needs to find
/// its jobs again, without echoing each one whole (a full job is about 550 bytes).
#[derive(Serialize)]
pub struct JobBrief<'a> {
    id: JobId,
    key: Option<&'a str>,
    state: &'static str,
    next_due_at: Option<String>,
    created: bool,
}

pub fn job_brief(j: &JobRecord, created: bool) -> JobBrief<'_> {
    JobBrief {
        id: j.id,
        key: j.key.as_deref(),
        state: j.state.as_str(),
        next_due_at: next_due_at(j),
        created,
    }
}

fn next_due_at(j: &JobRecord) -> Option<String> {
    if j.state.is_terminal() {
        None
    } else {
        j.next_due.map(rfc3339)
    }
}

pub fn job_out(j: &JobRecord) -> JobOut<'_> {
    JobOut {
        id: j.id,
        namespace: &j.namespace,
        key: j.key.as_deref(),
        job_type: j.spec.job_type.as_deref(),
        state: j.state.as_str(),
        schedule: schedule_out(&j.spec.schedule),
        target: target_out(&j.spec.target),
        payload: Some(payload_out(j.id, j.payload.as_deref())),
        retry: RetryOut {
            max_attempts: j.spec.retry.max_attempts,
            initial_backoff: format_duration(j.spec.retry.initial_backoff),
            max_backoff: format_duration(j.spec.retry.max_backoff),
        },
        misfire: misfire_out(j.spec.misfire),
        next_due_at: next_due_at(j),
        next_attempt_at: j
            .next_attempt
            .filter(|at| Some(*at) != j.next_due)
            .map(rfc3339),
        attempt: j.attempt,
        last_error: j.last_error.as_deref(),
        runs: j.runs,
        skipped: j.skipped,
        created_at: rfc3339(j.created_at),
        updated_at: rfc3339(j.updated_at),
        created: None,
        delivery_id: None,
    }
}

pub fn run_out(r: &RunRecord) -> Value {
    json!({
        "delivery_id": hourglass_core::DeliveryId::new(r.job_id, r.due).to_string(),
        "due_at": rfc3339(r.due),
        "attempt": r.attempt,
        "started_at": rfc3339(r.started_at),
        "latency_ms": r.latency_ms,
        "status_code": r.status,
        "error": r.error,
        "response": r.response,
        "outcome": r.outcome,
    })
}

pub fn dead_letter_out(d: &DeadLetter) -> Value {
    json!({
        "id": d.id.to_string(),
        "job_id": d.job_id,
        "delivery_id": hourglass_core::DeliveryId::new(d.job_id, d.due).to_string(),
        "due_at": rfc3339(d.due),
        "attempts": d.attempts,
        "reason": d.reason,
        "type": d.spec.job_type,
        "target": target_out(&d.spec.target),
        "payload": payload_out(d.job_id, d.payload.as_deref()),
        "created_at": rfc3339(d.created_at),
    })
}
