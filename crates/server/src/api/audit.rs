//! `GET /v1/audit`: the namespace's audit log, newest first, for its writers and admins (the
//! route's `Need` in `routes.rs`). The entries are written by the engine's `Scheduler` with each
//! change; this only reads them.

use super::*;

use hourglass_api::{AuditEntry, AuditList, AuditQuery};
use hourglass_store::AuditCursor;

pub(crate) async fn list_audit(
    State(state): State<AppState>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> ApiResult {
    let principal = principal(&state, &headers)?;
    let q: AuditQuery = parse_query(query)?;
    let limit = page_limit(q.limit)?;
    let before = parse_cursor(q.cursor.as_deref(), AuditCursor::parse)?;
    let job = q
        .job
        .as_deref()
        .map(|text| {
            JobId::parse_str(text).map_err(|_| {
                ApiError::bad_request(
                    ErrorCode::InvalidQuery,
                    "job",
                    format!("{text:?} is not a job id"),
                )
            })
        })
        .transpose()?;
    let entries = state
        .scheduler
        .audit(&principal.namespace, before, job, limit)
        .await?;
    let next_cursor = (entries.len() == limit)
        .then(|| entries.last().map(|e| e.cursor.encode()))
        .flatten();
    Ok(typed_response(
        StatusCode::OK,
        &AuditList {
            entries: entries.iter().map(entry_out).collect(),
            next_cursor,
        },
    ))
}

fn entry_out(entry: &hourglass_store::AuditEntry) -> AuditEntry {
    let record = &entry.record;
    AuditEntry {
        action: record.action.as_str().to_owned(),
        at: record.at,
        cursor: entry.cursor.encode(),
        dead_letter_id: record.dead_letter.map(|id| id.to_string()),
        fields: record.fields.clone(),
        job_count: record.count,
        jobs: record.jobs.clone(),
        key_id: record.key_id.clone(),
        name: record.name.clone(),
        namespace: record.namespace.clone(),
    }
}
