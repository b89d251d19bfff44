//! Label selectors in a query string (`?label=tenant=acme&label=kind`), and the bulk actions
//! that change every job of the namespace they select.

use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use hourglass_api::{BulkChanged, BulkQuery};
use hourglass_core::labels::MAX_SELECTORS;
use hourglass_core::{JobId, Selector};
use hourglass_engine::BulkAction;
use hourglass_store::JobQuery;

use crate::error::{ApiError, ErrorCode};
use crate::extract::{Segment, parse_cursor, parse_query, principal};
use crate::respond::{ApiResult, typed_response};
use crate::state::AppState;

/// The query parameter that carries one selector; it may repeat.
const LABEL: &str = "label";

/// Takes the `label` parameters out of a query string: their selectors (at most
/// [`MAX_SELECTORS`], ANDed), and the rest of the query for its typed parse. A malformed
/// selector is `400 invalid_query` naming `label`.
pub(super) fn selectors(
    query: Option<String>,
) -> Result<(Vec<Selector>, Option<String>), ApiError> {
    let Some(query) = query else {
        return Ok((Vec::new(), None));
    };
    let mut selectors = Vec::new();
    let mut rest = url::form_urlencoded::Serializer::new(String::new());
    for (name, value) in url::form_urlencoded::parse(query.as_bytes()) {
        if name != LABEL {
            rest.append_pair(&name, &value);
            continue;
        }
        if selectors.len() == MAX_SELECTORS {
            return Err(ApiError::bad_request(
                ErrorCode::InvalidQuery,
                LABEL,
                format!("at most {MAX_SELECTORS} label selectors a request"),
            ));
        }
        let selector = Selector::parse(&value)
            .map_err(|why| ApiError::bad_request(ErrorCode::InvalidQuery, LABEL, why))?;
        selectors.push(selector);
    }
    Ok((selectors, Some(rest.finish())))
}

/// `POST /v1/jobs/bulk/{action}?label=...`: pauses, resumes, cancels or triggers the selected
/// jobs of the namespace (see `hourglass_engine`'s `bulk.rs`). At least one selector: a bulk
/// action over every job of a namespace is not made by leaving the selector out.
pub(crate) async fn bulk_jobs(
    State(state): State<AppState>,
    headers: HeaderMap,
    Segment(action): Segment,
    RawQuery(query): RawQuery,
) -> ApiResult {
    let principal = principal(&state, &headers)?;
    let action = BulkAction::ALL
        .into_iter()
        .find(|a| a.as_str() == action)
        .ok_or_else(|| ApiError::not_found("route"))?;
    let (selectors, rest) = selectors(query)?;
    let q: BulkQuery = parse_query(rest)?;
    if selectors.is_empty() {
        return Err(ApiError::new(
            ErrorCode::SelectorRequired,
            "a bulk action needs at least one label selector (label=key=value or label=key)",
        )
        .field(LABEL));
    }
    if let Some(job_type) = &q.job_type {
        crate::wire::validate_name(job_type, "type", 128)?;
    }
    let after = parse_cursor(q.cursor.as_deref(), |c| JobId::parse_str(c).ok())?;
    let query = JobQuery {
        job_type: q.job_type,
        labels: selectors,
        after,
        ..Default::default()
    };
    let bulked = state
        .scheduler
        .bulk(&principal.namespace, query, action, &principal.actor())
        .await?;
    Ok(typed_response(
        StatusCode::OK,
        &BulkChanged {
            changed: bulked.changed,
            more: bulked.next.is_some(),
            next_cursor: bulked.next.map(|id| id.to_string()),
        },
    ))
}
