//! The API's other resources beside jobs: dead letters (list, read, delete, replay), open
//! breakers, the connections and nodes a caller may see, and the namespace's webhook signing
//! secret. Handlers as in the parent module: extract, one scheduler call, answer.

use super::*;

fn parse_dead_letter_id(id: &str) -> Result<i64, ApiError> {
    id.parse::<i64>().ok().filter(|n| *n > 0).ok_or_else(|| {
        ApiError::bad_request(
            ErrorCode::InvalidId,
            "id",
            format!("{id:?} is not a dead letter id"),
        )
    })
}

pub(crate) async fn list_dead_letters(
    State(state): State<AppState>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> ApiResult {
    let principal = principal(&state, &headers)?;
    let q: PageQuery = parse_query(query)?;
    let limit = page_limit(q.limit)?;
    let after = parse_cursor(q.cursor.as_deref(), |c| c.parse::<i64>().ok())?;
    let letters = state
        .scheduler
        .dead_letters(&principal.namespace, after, limit)
        .await?;
    let next_cursor = (letters.len() == limit)
        .then(|| letters.last().map(|d| d.id.to_string()))
        .flatten();
    Ok(typed_response(
        StatusCode::OK,
        &DeadLetterList {
            dead_letters: letters.iter().map(wire::dead_letter_out).collect(),
            next_cursor,
        },
    ))
}

/// The namespace's destinations whose circuit breaker is open on this node.
pub(crate) async fn list_open_breakers(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> ApiResult {
    let principal = principal(&state, &headers)?;
    let breakers = state
        .scheduler
        .open_breakers(&principal.namespace)
        .into_iter()
        .map(|b| Breaker {
            destination: b.destination,
            open_since: b.since,
        })
        .collect();
    Ok(typed_response(StatusCode::OK, &BreakerList { breakers }))
}

/// The bus and cloud connections the namespace may use. Names and kinds only: endpoints, regions
/// and credentials stay the operator's. This node counts publishes per connection, not per
/// namespace, so the counts are shown only for a connection the namespace has to itself: a
/// shared connection's would tell one tenant how much another publishes.
pub(crate) async fn list_connections(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> ApiResult {
    let principal = principal(&state, &headers)?;
    let namespace = principal.namespace.as_str();
    let connections = state
        .targets
        .figures(namespace)
        .into_iter()
        .map(|c| {
            let own = state
                .targets
                .connections()
                .get(&c.name)
                .and_then(|config| config.namespaces.as_deref())
                .is_some_and(|names| !names.is_empty() && names.iter().all(|n| n == namespace));
            let published = own.then_some(Published {
                delivered: c.delivered,
                rejected: c.rejected,
                retry: c.retried,
            });
            Connection {
                kind: c.kind.to_string(),
                name: c.name,
                published,
            }
        })
        .collect();
    Ok(typed_response(
        StatusCode::OK,
        &ConnectionList { connections },
    ))
}

/// The cluster's live nodes, each as its latest heartbeat said: cluster-wide, so an admin key of
/// every namespace (like `/metrics`; the route table's `NodeAdmin`).
pub(crate) async fn list_nodes(State(state): State<AppState>) -> ApiResult {
    let nodes = state
        .scheduler
        .nodes()
        .await?
        .into_iter()
        .map(|node| hourglass_api::Node {
            claims_held: node.claims_held,
            id: node.id,
            last_heartbeat: node.beat_at,
            started_at: node.started_at,
            version: node.version,
        })
        .collect();
    Ok(typed_response(StatusCode::OK, &NodeList { nodes }))
}

pub(crate) async fn get_dead_letter(
    State(state): State<AppState>,
    headers: HeaderMap,
    Segment(id): Segment,
) -> ApiResult {
    let principal = principal(&state, &headers)?;
    let id = parse_dead_letter_id(&id)?;
    let letter = state
        .scheduler
        .dead_letter(&principal.namespace, id)
        .await?
        .ok_or_else(|| ApiError::not_found("dead letter"))?;
    Ok(typed_response(
        StatusCode::OK,
        &wire::dead_letter_out(&letter),
    ))
}

pub(crate) async fn delete_dead_letter(
    State(state): State<AppState>,
    headers: HeaderMap,
    Segment(id): Segment,
) -> ApiResult {
    let principal = principal(&state, &headers)?;
    let id = parse_dead_letter_id(&id)?;
    if !state
        .scheduler
        .delete_dead_letter(&principal.namespace, id, &principal.actor())
        .await?
    {
        return Err(ApiError::not_found("dead letter"));
    }
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// Replays a dead letter as a new one-off job due now; see [`Scheduler::replay`].
pub(crate) async fn replay_dead_letter(
    State(state): State<AppState>,
    headers: HeaderMap,
    Segment(id): Segment,
) -> ApiResult {
    let principal = principal(&state, &headers)?;
    let id = parse_dead_letter_id(&id)?;
    // A replay stores a new job, so it is admitted like a create: past the namespace's
    // `creates_per_second` or `max_jobs` it gets the same 429 and the dead letter stays. A
    // letter that does not exist is a 404 before it spends any of the quota.
    if state
        .scheduler
        .dead_letter(&principal.namespace, id)
        .await?
        .is_none()
    {
        return Err(ApiError::not_found("dead letter"));
    }
    crate::quotas::admit(&state.scheduler, &principal.namespace, 1).await?;
    let created = state
        .scheduler
        .replay(&principal.namespace, id, &principal.actor())
        .await?
        .ok_or_else(|| ApiError::not_found("dead letter"))?;
    // Concurrent replays of one letter share the key `replay-<id>`: only the one that made the
    // job counts it.
    if let Created::New(record) = &created {
        state.metrics.job_created(&record.spec.schedule.kind);
    }
    Ok(typed_response(
        StatusCode::CREATED,
        &wire::job_out(created.record()),
    ))
}

/// How long a replaced signing secret keeps signing unless the rotation says otherwise.
const DEFAULT_SECRET_OVERLAP: std::time::Duration = std::time::Duration::from_secs(24 * 3600);
const MAX_SECRET_OVERLAP: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3600);

pub(crate) async fn rotate_signing_secret(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult {
    let principal = principal(&state, &headers)?;
    let bytes = read_body(&state, &headers, body, SMALL_BODY_BYTES).await?;
    // The body is optional: no body rotates with the default overlap.
    let req: RotateSecret = if bytes.iter().all(u8::is_ascii_whitespace) {
        RotateSecret { overlap: None }
    } else {
        parse_body(&bytes)?
    };
    let overlap = match req.overlap.as_deref() {
        None => DEFAULT_SECRET_OVERLAP,
        Some("0s" | "0") => std::time::Duration::ZERO,
        Some(text) => hourglass_core::duration::parse_duration(text, "overlap")?,
    };
    if overlap > MAX_SECRET_OVERLAP {
        return Err(ApiError::new(
            ErrorCode::InvalidDuration,
            "the overlap is at most 7 days (168h)",
        )
        .field("overlap"));
    }
    let secret = state
        .secrets
        .rotate(&principal.namespace, overlap, &principal.actor())
        .await?;
    let previous_valid_until = (!overlap.is_zero()).then(|| {
        state.scheduler.now() + jiff::SignedDuration::try_from(overlap).unwrap_or_default()
    });
    Ok(typed_response(
        StatusCode::OK,
        &SigningSecret {
            namespace: principal.namespace,
            note: Some(
                "deliveries are signed with it from now on; until previous_valid_until \
                 they carry a signature by the previous secret too. GET /v1/signing-secret \
                 shows the current secret"
                    .to_owned(),
            ),
            previous_valid_until,
            signing_secret: secret,
        },
    ))
}

/// The namespace's current signing secret, without rotating it: for the namespace's own key (or
/// an admin key naming it), like a rotation. A namespace without one gets it now, as its first
/// delivery would.
pub(crate) async fn read_signing_secret(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> ApiResult {
    let principal = principal(&state, &headers)?;
    let (secret, previous_until) = state.secrets.current(&principal.namespace).await?;
    Ok(typed_response(
        StatusCode::OK,
        &SigningSecret {
            namespace: principal.namespace,
            note: None,
            previous_valid_until: previous_until,
            signing_secret: secret,
        },
    ))
}
