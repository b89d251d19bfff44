//! Anchor handlers: `PUT`, `GET`, `DELETE /v1/anchors/{name}` and `GET /v1/anchors`, and the fetch
//! of the anchor a request's schedule names (before wire validation, which does no I/O).

use hourglass_api::{
    AnchorDeleteQuery, AnchorDeleted as DeletedOut, AnchorIn, AnchorList, ScheduleIn,
};
use hourglass_store::AnchorDeleted;

use super::*;

/// An anchor name in the path: 400 `invalid_anchor` naming `name` when it is not one.
fn path_name(name: &str) -> Result<&str, ApiError> {
    wire::anchor_name(name, "name")
        .map_err(|e| ApiError::bad_request(ErrorCode::InvalidAnchor, "name", e.message))?;
    Ok(name)
}

/// Adds to `known` the anchor `schedule` names, if it names a valid one that exists; wire
/// validation then refuses a missing or malformed name, naming the field.
pub(crate) async fn fetch_named(
    state: &AppState,
    namespace: &str,
    schedule: &ScheduleIn,
    known: &mut wire::Calendars,
) -> Result<(), ApiError> {
    let Some(name) = wire::named_anchor(schedule) else {
        return Ok(());
    };
    if known.anchors.contains_key(name) || wire::anchor_name(name, "").is_err() {
        return Ok(());
    }
    if let Some(record) = state.scheduler.anchor(namespace, name).await? {
        known.anchors.insert(name.to_owned(), record.at);
    }
    Ok(())
}

pub(crate) async fn put_anchor(
    State(state): State<AppState>,
    headers: HeaderMap,
    Segment(name): Segment,
    body: Body,
) -> ApiResult {
    let principal = principal(&state, &headers)?;
    let name = path_name(&name)?;
    let req: AnchorIn = parse_body(&read_body(&state, &headers, body, SMALL_BODY_BYTES).await?)?;
    let at = wire::anchor_at(&req, state.scheduler.now())?;
    let existed = state
        .scheduler
        .anchor(&principal.namespace, name)
        .await?
        .is_some();
    let (record, moved) = state
        .scheduler
        .put_anchor(&principal.namespace, name, at, &principal.actor())
        .await?;
    let status = if existed {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok(typed_response(
        status,
        &wire::anchor_out(&record, Some(moved)),
    ))
}

pub(crate) async fn get_anchor(
    State(state): State<AppState>,
    headers: HeaderMap,
    Segment(name): Segment,
) -> ApiResult {
    let principal = principal(&state, &headers)?;
    let name = path_name(&name)?;
    let record = state
        .scheduler
        .anchor(&principal.namespace, name)
        .await?
        .ok_or_else(|| ApiError::not_found("anchor"))?;
    Ok(typed_response(
        StatusCode::OK,
        &wire::anchor_out(&record, None),
    ))
}

pub(crate) async fn list_anchors(State(state): State<AppState>, headers: HeaderMap) -> ApiResult {
    let principal = principal(&state, &headers)?;
    let records = state.scheduler.anchors(&principal.namespace).await?;
    let list = AnchorList {
        anchors: records.iter().map(|r| wire::anchor_out(r, None)).collect(),
    };
    Ok(typed_response(StatusCode::OK, &list))
}

pub(crate) async fn delete_anchor(
    State(state): State<AppState>,
    headers: HeaderMap,
    Segment(name): Segment,
    RawQuery(query): RawQuery,
) -> ApiResult {
    let principal = principal(&state, &headers)?;
    let name = path_name(&name)?;
    let q: AnchorDeleteQuery = parse_query(query)?;
    match state
        .scheduler
        .delete_anchor(
            &principal.namespace,
            name,
            q.if_unused.unwrap_or(false),
            &principal.actor(),
        )
        .await?
    {
        AnchorDeleted::Deleted { cancelled } => Ok(typed_response(
            StatusCode::OK,
            &DeletedOut {
                name: name.to_owned(),
                jobs_cancelled: cancelled,
            },
        )),
        AnchorDeleted::NotFound => Err(ApiError::not_found("anchor")),
        AnchorDeleted::InUse(job) => Err(ApiError::new(
            ErrorCode::AnchorInUse,
            format!(
                "job {job} refers to anchor {name:?}; cancel or edit the jobs on it first, or \
                 delete without if_unused to cancel them"
            ),
        )),
    }
}
