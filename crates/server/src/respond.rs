//! Turning an answer into a response: typed JSON bodies, sized for large ones, and the result
//! type every handler returns.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;

pub(crate) type ApiResult = Result<Response, ApiError>;

pub(crate) fn typed_response<T: serde::Serialize>(status: StatusCode, body: &T) -> Response {
    (status, axum::Json(body)).into_response()
}

/// As [`typed_response`], for a body of about `size_hint` bytes: serialized into one buffer
/// of that size, where `axum::Json` starts at 128 bytes and copies the body each time it grows
/// (a batch of a thousand jobs answers about half a megabyte).
pub(crate) fn sized_response<T: serde::Serialize>(
    status: StatusCode,
    body: &T,
    size_hint: usize,
) -> Response {
    let mut buf = Vec::with_capacity(size_hint);
    match serde_json::to_writer(&mut buf, body) {
        Ok(()) => (status, [(header::CONTENT_TYPE, "application/json")], buf).into_response(),
        // As `axum::Json` answers it; our response types always serialize.
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}
