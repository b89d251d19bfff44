//! Routes and handlers of the HTTP/JSON API under /v1. A handler authenticates, parses and
//! validates (wire), makes one call to the engine's [`Scheduler`], and turns its answer into the
//! wire response; it holds no scheduling logic and never reaches the store itself.

use std::sync::atomic::Ordering;

use axum::body::Body;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use hourglass_api::{
    BatchCreate, BatchCreated, Breaker, BreakerList, Connection, ConnectionList, CreateJob,
    DeadLetterList, JobListQuery, NodeList, PageQuery, PatchJob, PreviewRequest, Published,
    RotateSecret, RunList, SigningSecret, Status,
};
use hourglass_core::{JobId, JobState};
use hourglass_engine::JobEdit;
use hourglass_store::{Created, JobQuery, NewJob, RunCursor, StoreError, Transition};

use crate::auth::Principal;
use crate::error::{ApiError, ErrorCode};
use crate::extract::{
    Segment, page_limit, parse_body, parse_cursor, parse_job_ref, parse_query, principal, read_body,
};
use crate::pages::{Paging, push_json};
use crate::respond::{ApiResult, sized_response, typed_response};
use crate::state::{AppState, SMALL_BODY_BYTES};
use crate::wire::{self, Limits};

mod anchors;
mod audit;
mod backfill;
mod calendars;
mod fingerprint;
mod labels;
mod others;
pub(crate) use anchors::{delete_anchor, get_anchor, list_anchors, put_anchor};
pub(crate) use audit::list_audit;
pub(crate) use backfill::backfill_job;
pub(crate) use calendars::{delete_calendar, get_calendar, list_calendars, put_calendar};
use fingerprint::fingerprint;
pub(crate) use labels::bulk_jobs;
pub(crate) use others::{
    delete_dead_letter, get_dead_letter, list_connections, list_dead_letters, list_nodes,
    list_open_breakers, read_signing_secret, replay_dead_letter, rotate_signing_secret,
};

pub const MAX_BATCH: usize = 1000;
/// The OpenAPI document, generated from `hourglass-api`'s types (`scripts/openapi-generate`; a test
/// in crates/api fails when the committed file is stale).
const OPENAPI: &str = include_str!("../openapi.json");
/// The request header that makes a trigger idempotent.
const IDEMPOTENCY_KEY: &str = "idempotency-key";

/// The target's service asked, where it can tell, whether a publish could ever land (a NATS
/// subject no JetStream stream captures): a 422 on the field instead of a job that would only
/// dead-letter.
async fn deliverable(
    state: &AppState,
    target: &hourglass_core::Target,
) -> Result<(), hourglass_core::ValidationError> {
    state.targets.check_deliverable(target).await.map_err(|e| {
        hourglass_core::ValidationError::new(
            "invalid_target",
            format!("target.{}.{}", target.kind(), e.field),
            e.reason,
        )
    })
}

/// Hostnames already resolved and found allowed within one request: a batch of a thousand jobs
/// to one endpoint resolves its host once, not a thousand times.
type ResolvedHosts = std::collections::HashSet<(String, u16)>;

async fn validate_create(
    state: &AppState,
    principal: &Principal,
    req: CreateJob,
    index: Option<usize>,
    resolved: &mut ResolvedHosts,
    known: &mut wire::Calendars,
) -> Result<NewJob, ApiError> {
    let print = if req.key.is_some() {
        fingerprint(&req)
    } else {
        0
    };
    // A batch's errors name the job: `jobs[3].target...`. The prefix is made only for an error.
    let within = |e: hourglass_core::ValidationError| match index {
        None => e,
        Some(i) => e.within(&format!("jobs[{i}]")),
    };
    calendars::fetch_named(state, &principal.namespace, &req.schedule, known).await?;
    let now = state.scheduler.now();
    let valid = wire::job(
        &req,
        now,
        &state.limits,
        state.target_rules(&principal.namespace),
        known,
    )
    .map_err(within)?;
    // The job's target, then each callback's, checked the same way: a callback reaches nothing
    // its job could not.
    let callbacks = [
        ("on_failure", valid.spec.on_failure.as_ref()),
        ("on_success", valid.spec.on_success.as_ref()),
    ];
    let targets = std::iter::once((None, &valid.spec.target)).chain(
        callbacks
            .into_iter()
            .filter_map(|(field, c)| Some((Some(field), &c?.target))),
    );
    for (field, target) in targets {
        let within = |e: hourglass_core::ValidationError| match field {
            None => within(e),
            Some(field) => within(e.within(field)),
        };
        if let hourglass_core::Target::Webhook(webhook) = target {
            let host = (
                webhook.url.host_str().unwrap_or_default().to_string(),
                webhook.url.port_or_known_default().unwrap_or_default(),
            );
            if !resolved.contains(&host) {
                state
                    .policy
                    .check_resolved(&webhook.url, "target.webhook.url")
                    .await
                    .map_err(within)?;
                resolved.insert(host);
            }
        }
        deliverable(state, target).await.map_err(within)?;
    }
    Ok(NewJob {
        id: uuid::Uuid::now_v7(),
        namespace: principal.namespace.clone(),
        key: valid.key,
        spec: valid.spec,
        payload: valid.payload,
        fingerprint: print,
        first_due: valid.first_due,
        now,
    })
}

pub(crate) async fn create_job(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult {
    let principal = principal(&state, &headers)?;
    let req: CreateJob =
        parse_body(&read_body(&state, &headers, body, state.limits.job_body_bytes()).await?)?;
    let mut known = wire::Calendars::new();
    let job = validate_create(
        &state,
        &principal,
        req,
        None,
        &mut ResolvedHosts::new(),
        &mut known,
    )
    .await?;
    crate::quotas::admit(&state.scheduler, &principal.namespace, 1).await?;
    let created = state
        .scheduler
        .create(vec![job], &principal.actor())
        .await?;
    let created = created.into_iter().next().expect("one job in, one out");
    Ok(match created {
        Created::New(record) => {
            state.metrics.job_created(&record.spec.schedule.kind);
            typed_response(StatusCode::CREATED, &wire::job_out(&record))
        }
        Created::Existing(record) => typed_response(StatusCode::OK, &wire::job_out(&record)),
    })
}

pub(crate) async fn create_batch(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult {
    let principal = principal(&state, &headers)?;
    let batch: BatchCreate =
        parse_body(&read_body(&state, &headers, body, state.limits.max_batch_bytes).await?)?;
    if batch.jobs.is_empty() || batch.jobs.len() > MAX_BATCH {
        return Err(ApiError::new(
            ErrorCode::InvalidBatch,
            format!("a batch holds 1 to {MAX_BATCH} jobs"),
        )
        .field("jobs"));
    }
    let mut jobs = Vec::with_capacity(batch.jobs.len());
    let mut resolved = ResolvedHosts::new();
    let mut known = wire::Calendars::new();
    for (i, req) in batch.jobs.into_iter().enumerate() {
        let job = validate_create(&state, &principal, req, Some(i), &mut resolved, &mut known);
        jobs.push(job.await?);
    }
    crate::quotas::admit(&state.scheduler, &principal.namespace, jobs.len()).await?;
    let created = state
        .scheduler
        .create(jobs, &principal.actor())
        .await
        .map_err(|e| match e {
            StoreError::KeyConflict { index, .. } => {
                ApiError::from(e).field(format!("jobs[{index}].key"))
            }
            other => other.into(),
        })?;
    let new_count = created
        .iter()
        .filter_map(|c| match c {
            Created::New(r) => Some(r),
            Created::Existing(_) => None,
        })
        .inspect(|r| state.metrics.job_created(&r.spec.schedule.kind))
        .count();
    // As for a single create: 201 when the request created something, 200 when every job was
    // an idempotent repeat of one that already existed.
    let status = if new_count == 0 {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    if prefers_minimal(&headers) {
        let jobs = created
            .iter()
            .map(|c| wire::job_brief(c.record(), matches!(c, Created::New(_))))
            .collect();
        let body = BatchCreated {
            created: new_count,
            jobs,
        };
        let mut response = sized_response(status, &body, 64 + body.jobs.len() * 128);
        response.headers_mut().insert(
            header::HeaderName::from_static("preference-applied"),
            header::HeaderValue::from_static("return=minimal"),
        );
        return Ok(response);
    }
    let jobs = created
        .iter()
        .map(|c| {
            let mut job = wire::job_out(c.record());
            job.created = Some(matches!(c, Created::New(_)));
            job
        })
        .collect();
    // About 550 bytes a job with an inline payload and no headers; the buffer grows past that.
    let size_hint = 64 + created.len() * 640;
    Ok(sized_response(
        status,
        &BatchCreated {
            created: new_count,
            jobs,
        },
        size_hint,
    ))
}

/// Whether the request's `Prefer` headers ask for `return=minimal` (RFC 7240): preferences are
/// comma-separated, case-insensitive tokens, and one the server does not know is ignored.
fn prefers_minimal(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::HeaderName::from_static("prefer"))
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|pref| {
            // A preference may carry parameters after `;`; only its own token counts.
            let token = pref.split(';').next().unwrap_or_default().trim();
            token.split_once('=').is_some_and(|(name, value)| {
                name.trim().eq_ignore_ascii_case("return")
                    && value
                        .trim()
                        .trim_matches('"')
                        .eq_ignore_ascii_case("minimal")
            })
        })
}

pub(crate) async fn list_jobs(
    State(state): State<AppState>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> ApiResult {
    let principal = principal(&state, &headers)?;
    let (selectors, query) = labels::selectors(query)?;
    let q: JobListQuery = parse_query(query)?;
    let instant = |v: &Option<String>, field: &str| -> Result<_, ApiError> {
        v.as_deref()
            .map(|s| {
                s.parse::<jiff::Timestamp>().map_err(|_| {
                    ApiError::bad_request(ErrorCode::InvalidQuery, field, "not an RFC 3339 instant")
                })
            })
            .transpose()
    };
    let job_state = q
        .state
        .as_deref()
        .map(|s| {
            JobState::parse(s).ok_or_else(|| {
                ApiError::bad_request(
                    ErrorCode::InvalidQuery,
                    "state",
                    "state is one of active, paused, completed, failed, cancelled",
                )
            })
        })
        .transpose()?;
    if let Some(anchor) = &q.anchor {
        wire::anchor_name(anchor, "anchor")
            .map_err(|e| ApiError::bad_request(ErrorCode::InvalidQuery, "anchor", e.message))?;
    }
    let limit = page_limit(q.limit)?;
    let with_payload = q.payload.unwrap_or(false);
    let query = JobQuery {
        anchor: q.anchor,
        namespace: Some(principal.namespace),
        state: job_state,
        job_type: q.job_type,
        due_before: instant(&q.due_before, "due_before")?,
        due_after: instant(&q.due_after, "due_after")?,
        labels: selectors,
        ..Default::default()
    };
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
                let (scheduler, mut query) = (state.scheduler.clone(), query.clone());
                query.after = after;
                query.limit = n;
                async move { Ok(scheduler.list(query).await?) }
            },
            |j: &hourglass_store::JobRecord| j.id,
            |j, buf| {
                let mut out = wire::job_out(j);
                if !with_payload {
                    out.payload = None;
                }
                push_json(buf, &out)
            },
        )
        .await?;
    Ok(page.answer("jobs", JobId::to_string))
}

pub(crate) async fn get_job(
    State(state): State<AppState>,
    headers: HeaderMap,
    Segment(id): Segment,
) -> ApiResult {
    let principal = principal(&state, &headers)?;
    let job = parse_job_ref(&id, &state.limits)?;
    let job = state
        .scheduler
        .get(&principal.namespace, &job)
        .await?
        .ok_or_else(|| ApiError::not_found("job"))?;
    Ok(typed_response(StatusCode::OK, &wire::job_out(&job)))
}

pub(crate) async fn patch_job(
    State(state): State<AppState>,
    headers: HeaderMap,
    Segment(id): Segment,
    body: Body,
) -> ApiResult {
    let principal = principal(&state, &headers)?;
    let job = parse_job_ref(&id, &state.limits)?;
    let patch: PatchJob =
        parse_body(&read_body(&state, &headers, body, state.limits.job_body_bytes()).await?)?;
    let now = state.scheduler.now();
    let mut edit = JobEdit::default();
    if let Some(job_type) = patch.job_type {
        wire::validate_name(&job_type, "type", 128)?;
        edit.job_type = Some(job_type);
    }
    if let Some(schedule) = &patch.schedule {
        let mut known = wire::Calendars::new();
        calendars::fetch_named(&state, &principal.namespace, schedule, &mut known).await?;
        let schedule = wire::schedule(schedule, now, &state.limits, &known)?;
        let first_due = wire::first_due(&schedule, now)?;
        edit.schedule = Some((schedule, first_due));
    }
    if let Some(target) = &patch.target {
        let target = wire::target(
            target,
            state.target_rules(&principal.namespace),
            &state.limits,
        )?;
        if let Some(Some(payload)) = &patch.payload {
            wire::check_payload(&target, Some(payload))?;
        }
        if let hourglass_core::Target::Webhook(webhook) = &target {
            state
                .policy
                .check_resolved(&webhook.url, "target.webhook.url")
                .await?;
        }
        deliverable(&state, &target).await?;
        edit.target = Some(target);
    }
    if let Some(retry) = &patch.retry {
        edit.retry = Some(wire::retry(retry)?);
    }
    if let Some(misfire) = &patch.misfire {
        edit.misfire = Some(wire::misfire(misfire)?);
    }
    if let Some(overlap) = &patch.overlap {
        edit.overlap = Some(wire::overlap(overlap)?);
    }
    if let Some(value) = &patch.payload {
        edit.payload = Some(wire::encode_payload(value.as_ref(), &state.limits)?);
    }
    if let Some(labels) = patch.labels {
        hourglass_core::labels::validate(&labels)?;
        edit.labels = Some(labels);
    }
    // A callback job reports another job's occurrence; callbacks of its own would never fire
    // (callbacks never cause callbacks), so giving it some is refused rather than ignored.
    let adds_callbacks = [&patch.on_failure, &patch.on_success]
        .iter()
        .any(|given| matches!(given, Some(Some(_))));
    let reports_another = adds_callbacks
        && state
            .scheduler
            .get(&principal.namespace, &job)
            .await?
            .is_some_and(|job| job.spec.callback_of.is_some());
    for (field, given, slot) in [
        ("on_failure", &patch.on_failure, &mut edit.on_failure),
        ("on_success", &patch.on_success, &mut edit.on_success),
    ] {
        let Some(given) = given else { continue };
        let callback = match given {
            None => None,
            Some(_) if reports_another => {
                return Err(hourglass_core::ValidationError::new(
                    "invalid_field",
                    field,
                    "a callback job (one with callback_of) reports another job's occurrence and \
                     cannot have callbacks of its own",
                )
                .into());
            }
            Some(input) => {
                let rules = state.target_rules(&principal.namespace);
                let callback = wire::callback(input, field, rules, &state.limits)?;
                if let hourglass_core::Target::Webhook(webhook) = &callback.target {
                    state
                        .policy
                        .check_resolved(&webhook.url, "target.webhook.url")
                        .await
                        .map_err(|e| e.within(field))?;
                }
                deliverable(&state, &callback.target)
                    .await
                    .map_err(|e| e.within(field))?;
                Some(callback)
            }
        };
        *slot = Some(callback);
    }
    let updated = state
        .scheduler
        .edit(&principal.namespace, &job, edit, &principal.actor())
        .await?
        .ok_or_else(|| ApiError::not_found("job"))?;
    Ok(typed_response(StatusCode::OK, &wire::job_out(&updated)))
}

async fn transition(
    state: &AppState,
    headers: &HeaderMap,
    id: &str,
    make: impl FnOnce(jiff::Timestamp) -> Transition,
) -> Result<hourglass_store::JobRecord, ApiError> {
    let principal = principal(state, headers)?;
    let job = parse_job_ref(id, &state.limits)?;
    Ok(state
        .scheduler
        .transition(&principal.namespace, &job, make, &principal.actor())
        .await?)
}

async fn transition_answer(
    state: &AppState,
    headers: &HeaderMap,
    id: &str,
    make: fn(jiff::Timestamp) -> Transition,
) -> ApiResult {
    let job = transition(state, headers, id, make).await?;
    Ok(typed_response(StatusCode::OK, &wire::job_out(&job)))
}

pub(crate) async fn cancel_job(
    State(state): State<AppState>,
    headers: HeaderMap,
    Segment(id): Segment,
) -> ApiResult {
    transition_answer(&state, &headers, &id, |now| Transition::Cancel { now }).await
}

pub(crate) async fn pause_job(
    State(state): State<AppState>,
    headers: HeaderMap,
    Segment(id): Segment,
) -> ApiResult {
    transition_answer(&state, &headers, &id, |now| Transition::Pause { now }).await
}

pub(crate) async fn resume_job(
    State(state): State<AppState>,
    headers: HeaderMap,
    Segment(id): Segment,
) -> ApiResult {
    transition_answer(&state, &headers, &id, |now| Transition::Resume { now }).await
}

pub(crate) async fn trigger_job(
    State(state): State<AppState>,
    headers: HeaderMap,
    Segment(id): Segment,
) -> ApiResult {
    // An unauthenticated request is refused as such, whatever its key (`transition` checks the
    // key again; a hash of the API key costs microseconds).
    principal(&state, &headers)?;
    let key = idempotency_key(&headers, &state.limits)?;
    let keyed = key.is_some();
    let job = transition(&state, &headers, &id, |now| Transition::Trigger {
        now,
        key: key.clone(),
    })
    .await?;
    // The triggered occurrence's due time: with a key, the one the job remembers for it (the
    // first trigger's, when this is a retry); without, the pending one this trigger made.
    let due = match &job.last_trigger {
        Some(last) if keyed && key.as_deref() == Some(last.key.as_str()) => Some(last.due),
        _ => job.next_due,
    };
    let mut out = wire::job_out(&job);
    out.delivery_id = due.map(|due| hourglass_core::DeliveryId::new(job.id, due).to_string());
    Ok(typed_response(StatusCode::OK, &out))
}

/// The `Idempotency-Key` header of a trigger: a retry with the same key answers the first
/// trigger instead of firing again. Printable ASCII, at most as long as a job's key.
fn idempotency_key(headers: &HeaderMap, limits: &Limits) -> Result<Option<String>, ApiError> {
    let Some(value) = headers.get(IDEMPOTENCY_KEY) else {
        return Ok(None);
    };
    let key = value
        .to_str()
        .ok()
        .filter(|k| {
            (1..=limits.max_key_len).contains(&k.len())
                && k.bytes().all(|b| (0x20..0x7f).contains(&b))
        })
        .ok_or_else(|| {
            ApiError::bad_request(
                ErrorCode::InvalidIdempotencyKey,
                IDEMPOTENCY_KEY,
                format!(
                    "idempotency-key must be 1 to {} printable ascii characters",
                    limits.max_key_len
                ),
            )
        })?;
    Ok(Some(key.to_owned()))
}

pub(crate) async fn job_runs(
    State(state): State<AppState>,
    headers: HeaderMap,
    Segment(id): Segment,
    RawQuery(query): RawQuery,
) -> ApiResult {
    let principal = principal(&state, &headers)?;
    let job = parse_job_ref(&id, &state.limits)?;
    let q: PageQuery = parse_query(query)?;
    let limit = page_limit(q.limit)?;
    let before = parse_cursor(q.cursor.as_deref(), RunCursor::parse)?;
    let (runs, backfill) = state
        .scheduler
        .runs_marked(&principal.namespace, &job, before, limit)
        .await?;
    let next_cursor = (runs.len() == limit)
        .then(|| runs.last().map(|r| r.cursor.encode()))
        .flatten();
    Ok(typed_response(
        StatusCode::OK,
        &RunList {
            next_cursor,
            runs: runs
                .iter()
                .map(|r| wire::run_out(r, backfill.as_ref()))
                .collect(),
        },
    ))
}

/// Lists the next due times of a schedule without creating anything: the schedule is validated
/// as a create would validate it, and nothing touches the store.
pub(crate) async fn preview_schedule(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult {
    // Reads nothing of the namespace but the calendar the schedule names, if any.
    let principal = principal(&state, &headers)?;
    let req: PreviewRequest =
        parse_body(&read_body(&state, &headers, body, SMALL_BODY_BYTES).await?)?;
    let mut known = wire::Calendars::new();
    calendars::fetch_named(&state, &principal.namespace, &req.schedule, &mut known).await?;
    let preview = wire::preview(&req, state.scheduler.now(), &state.limits, &known)?;
    Ok(typed_response(StatusCode::OK, &preview))
}

pub(crate) async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI).into_response()
}

pub(crate) async fn healthz() -> Response {
    typed_response(
        StatusCode::OK,
        &Status {
            status: "ok".into(),
        },
    )
}

pub(crate) async fn readyz(State(state): State<AppState>) -> Response {
    if state.scheduler.has_failed() {
        return ApiError::new(
            ErrorCode::EngineFailed,
            "a pipeline stage died: this node fires nothing and is about to exit",
        )
        .into_response();
    }
    if state.ready.load(Ordering::Acquire) {
        typed_response(
            StatusCode::OK,
            &Status {
                status: "ready".into(),
            },
        )
    } else {
        ApiError::new(ErrorCode::NotReady, "node is starting or shutting down").into_response()
    }
}

/// Node-wide, so every namespace's counts: an admin key of every namespace in key mode (the route
/// table's `NodeAdmin`; scrapers that cannot send one use the unauthenticated `metrics_listen`
/// address instead).
pub(crate) async fn metrics(State(state): State<AppState>) -> Response {
    render_metrics(&state).await
}

/// The Prometheus text of the node's registry, with the store's figures refreshed.
pub(crate) async fn render_metrics(state: &AppState) -> Response {
    state.metrics.refresh_store_figures(&state.scheduler).await;
    let mut text = String::new();
    if prometheus_client::encoding::text::encode(&mut text, &state.registry).is_err() {
        return ApiError::new(ErrorCode::Internal, "metrics encoding failed").into_response();
    }
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    )
        .into_response()
}
