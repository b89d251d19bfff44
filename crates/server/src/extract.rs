//! Reading a request: its body (bounded, JSON only, errors naming the field), its query, its
//! path segments, and the principal its API key names. Every refusal here is an `ApiError`
//! from the one table, so handlers only chain these and call the scheduler.

use std::pin::Pin;

use axum::body::{Body, Bytes};
use axum::extract::Path;
use axum::http::{HeaderMap, header};
use bytes::BytesMut;
use hourglass_core::JobId;
use hourglass_engine::JobRef;
use hyper::body::Body as _;
use serde::de::DeserializeOwned;

use crate::auth::Principal;
use crate::budget::Held;
use crate::error::{ApiError, ErrorCode};
use crate::state::AppState;
use crate::wire::{self, Limits};

/// Whether a `Content-Type` names JSON: the media type `application/json` in any case, with or
/// without parameters (`; charset=utf-8`). `application/jsonfoo` is not JSON.
pub(crate) fn is_json(content_type: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(content_type) else {
        return false;
    };
    let essence = text.split(';').next().unwrap_or_default();
    essence
        .trim_matches([' ', '\t'])
        .eq_ignore_ascii_case("application/json")
}

/// A request body read whole, holding its bytes of the node's body budget until it is dropped.
pub(crate) struct BodyBytes {
    bytes: Bytes,
    _held: Held,
}

impl std::ops::Deref for BodyBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

/// Reads a request body of at most `limit` bytes. A declared `Content-Length` over the limit is
/// refused before a byte of the body is read; a chunked body is read only up to the limit. The
/// whole body must arrive within `body_read_timeout`: a client trickling it would otherwise hold
/// its connection slot forever. Its bytes are taken from the node's body budget (and the API
/// key's share of it) as they arrive, all at once for a declared `Content-Length`: a body that
/// finds the budget spent is refused at once with `503 server_busy`, before it is buffered.
pub(crate) async fn read_body(
    state: &AppState,
    headers: &HeaderMap,
    body: Body,
    limit: usize,
) -> Result<BodyBytes, ApiError> {
    if let Some(ct) = headers.get(header::CONTENT_TYPE)
        && !is_json(ct.as_bytes())
    {
        return Err(ApiError::new(
            ErrorCode::UnsupportedMediaType,
            "send the body as application/json",
        )
        .field("content-type"));
    }
    let too_large = || {
        ApiError::new(
            ErrorCode::BodyTooLarge,
            format!("request body exceeds {limit} bytes"),
        )
        .field("body")
    };
    // hyper has already refused a malformed or repeated Content-Length.
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    let busy = || {
        ApiError::new(
            ErrorCode::ServerBusy,
            "the node holds as many request bodies as its memory budget allows; retry shortly",
        )
        .field("body")
    };
    let key = state.auth.budget_key(headers);
    let mut hold = state.bodies.hold(key.as_deref());
    // Checked above: at most `limit`.
    let declared = declared.map_or(0, |n| n as usize);
    if !hold.take(declared) {
        return Err(busy());
    }
    let read = async {
        let mut body = body;
        let mut buf = BytesMut::with_capacity(declared);
        while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await
        {
            let Ok(data) = frame.map_err(|_| too_large())?.into_data() else {
                continue;
            };
            let len = buf.len() + data.len();
            if len > limit {
                return Err(too_large());
            }
            if !hold.take(len.saturating_sub(hold.bytes())) {
                return Err(busy());
            }
            buf.extend_from_slice(&data);
        }
        Ok(buf.freeze())
    };
    let timeout = state.limits.body_read_timeout;
    let outcome = tokio::time::timeout(timeout, read).await;
    match outcome {
        Ok(read) => Ok(BodyBytes {
            bytes: read?,
            _held: hold.finish(),
        }),
        Err(_) => Err(ApiError::new(
            ErrorCode::BodyTimeout,
            format!(
                "the request body did not arrive within {}",
                hourglass_core::duration::format_duration(timeout)
            ),
        )
        .field("body")),
    }
}

/// Deserializes a request body straight into its typed shape. Syntax errors answer 400
/// `invalid_json`; shape errors answer 422 with the JSON path of the offending field, e.g.
/// `schedule.at` or `jobs[3].target`.
pub(crate) fn parse_body<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request(
            ErrorCode::InvalidJson,
            "body",
            "request body is empty; send a JSON object",
        ));
    }
    let malformed = |e: &serde_json::Error| {
        ApiError::bad_request(
            ErrorCode::InvalidJson,
            "body",
            format!("malformed json: {e}"),
        )
    };
    // Derived struct deserializers also take positional arrays; a request body is an object.
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if first != Some(&b'{') {
        if let Err(e) = serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
            return Err(malformed(&e));
        }
        return Err(ApiError::new(ErrorCode::InvalidField, "expected a JSON object").field("body"));
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        if e.inner().is_data() {
            shape_error(e)
        } else {
            malformed(e.inner())
        }
    })?;
    de.end().map_err(|e| malformed(&e))?;
    Ok(value)
}

fn shape_error(e: serde_path_to_error::Error<serde_json::Error>) -> ApiError {
    let message = e.inner().to_string();
    // serde_json appends " at line L column C"; the field path says where more usefully.
    let message = message
        .rsplit_once(" at line ")
        .map_or(message.as_str(), |(head, _)| head)
        .to_string();
    let mut path = e.path().to_string();
    if path == "." {
        path.clear();
    }
    let named = |marker: &str| {
        message
            .strip_prefix(marker)
            .and_then(|rest| rest.split('`').next())
            .map(str::to_string)
    };
    let (code, leaf) = if let Some(name) = named("unknown field `") {
        (ErrorCode::UnknownField, Some(name))
    } else if let Some(name) = named("missing field `") {
        (ErrorCode::MissingField, Some(name))
    } else {
        (ErrorCode::InvalidField, None)
    };
    // serde reports an unknown field at its own path already; a missing one at its parent.
    if let (Some(leaf), ErrorCode::MissingField) = (&leaf, code) {
        path = if path.is_empty() {
            leaf.clone()
        } else {
            format!("{path}.{leaf}")
        };
    }
    if path.is_empty() {
        path = leaf.unwrap_or_else(|| "body".to_string());
    }
    ApiError::new(code, message).field(path)
}

pub(crate) fn parse_query<T: DeserializeOwned>(query: Option<String>) -> Result<T, ApiError> {
    let query = query.unwrap_or_default();
    let de = serde_urlencoded::Deserializer::new(url::form_urlencoded::parse(query.as_bytes()));
    serde_path_to_error::deserialize(de).map_err(|e| {
        let message = e.inner().to_string();
        let field = message
            .strip_prefix("unknown field `")
            .and_then(|rest| rest.split('`').next())
            .map(str::to_string)
            .unwrap_or_else(|| e.path().to_string());
        ApiError::bad_request(ErrorCode::InvalidQuery, &field, message)
    })
}

/// What a job's path segment starts with when it names the job by its key instead of its id
/// (`/v1/jobs/key:nightly-export`). An id is a UUID, which never starts with it.
const KEY_PREFIX: &str = "key:";

/// The job a path names: a job id, or `key:` and the job's key, percent-decoded (axum's `Path`
/// decodes it, so `key:a%2Fb` names the key `a/b`). A key is checked like a create's `key`.
pub(crate) fn parse_job_ref(text: &str, limits: &Limits) -> Result<JobRef, ApiError> {
    if let Some(key) = text.strip_prefix(KEY_PREFIX) {
        if wire::validate_name(key, "id", limits.max_key_len).is_err() {
            return Err(ApiError::bad_request(
                ErrorCode::InvalidId,
                "id",
                format!(
                    "the key after {KEY_PREFIX:?} must be 1 to {} characters without control \
                     characters",
                    limits.max_key_len
                ),
            ));
        }
        return Ok(JobRef::Key(key.to_owned()));
    }
    JobId::parse_str(text).map(JobRef::Id).map_err(|_| {
        ApiError::bad_request(
            ErrorCode::InvalidId,
            "id",
            format!("{text:?} is not a job id, nor {KEY_PREFIX:?} and a job's key"),
        )
    })
}

pub(crate) fn principal(state: &AppState, headers: &HeaderMap) -> Result<Principal, ApiError> {
    state.auth.authenticate(headers)
}

pub(crate) fn page_limit(limit: Option<usize>) -> Result<usize, ApiError> {
    match limit.unwrap_or(100) {
        n @ 1..=1000 => Ok(n),
        _ => Err(ApiError::bad_request(
            ErrorCode::InvalidQuery,
            "limit",
            "limit must be between 1 and 1000",
        )),
    }
}

/// A list's `cursor` query parameter, read by `parse`: 400 `invalid_query` naming `cursor` when
/// it is not one this list hands out.
pub(crate) fn parse_cursor<T>(
    cursor: Option<&str>,
    parse: impl FnOnce(&str) -> Option<T>,
) -> Result<Option<T>, ApiError> {
    cursor
        .map(|c| {
            parse(c).ok_or_else(|| {
                ApiError::bad_request(ErrorCode::InvalidQuery, "cursor", "malformed cursor")
            })
        })
        .transpose()
}

/// A path segment (`{id}`, `{name}`), percent-decoded. axum's own `Path` answers a segment that
/// does not decode to UTF-8 with a plain-text 400; this answers it like every other error: JSON,
/// a stable code, the field named.
pub(crate) struct Segment(pub String);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Segment {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, Self::Rejection> {
        match Path::<String>::from_request_parts(parts, state).await {
            Ok(Path(segment)) => Ok(Segment(segment)),
            Err(rejection) => {
                let (code, field) = if parts.uri.path().starts_with("/v1/queues/") {
                    (ErrorCode::InvalidQueue, "name")
                } else {
                    (ErrorCode::InvalidId, "id")
                };
                Err(ApiError::bad_request(
                    code,
                    field,
                    format!("the path segment cannot be read: {}", rejection.body_text()),
                ))
            }
        }
    }
}
