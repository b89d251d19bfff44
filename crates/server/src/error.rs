//! The API's errors as the server raises them: a code from the contract's table
//! (`hourglass_api::ErrorCode`, which maps each to its HTTP status), a message and the field.
//! Every error body is `{"error": {"code": "...", "message": "...", "field": "..."}}`.
//!
//! A code's status is the table's, with one rule on top: [`ApiError::bad_request`] is for a part
//! of the request outside the body (path, query, headers) that cannot be read, and always answers
//! 400 — so `invalid_queue` is 422 for a queue name in a job's body and 400 in a URL path.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use hourglass_api::{ErrorBody, ErrorDetail};
use hourglass_core::ValidationError;
use hourglass_store::StoreError;

/// The codes and their statuses are the API contract's table (`hourglass_api::ErrorCode`).
pub use hourglass_api::ErrorCode;

/// The status `code` answers, from the contract's table.
pub fn status_of(code: ErrorCode) -> StatusCode {
    // Every row of the table is a valid status.
    StatusCode::from_u16(code.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: ErrorCode,
    pub message: String,
    pub field: Option<String>,
    /// Seconds for the `Retry-After` header (503 answers say 1 without it).
    pub retry_after: Option<u64>,
}

impl ApiError {
    /// An error answering its code's status from the table.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            status: status_of(code),
            code,
            message: message.into(),
            field: None,
            retry_after: None,
        }
    }

    pub fn field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }

    pub fn not_found(what: &str) -> Self {
        Self::new(ErrorCode::NotFound, format!("{what} not found"))
    }

    /// A path segment, query parameter or header that cannot be read: always 400 (see the
    /// module doc).
    pub fn bad_request(code: ErrorCode, field: &str, message: impl Into<String>) -> Self {
        let mut e = Self::new(code, message).field(field);
        e.status = StatusCode::BAD_REQUEST;
        e
    }
}

impl From<ValidationError> for ApiError {
    fn from(e: ValidationError) -> Self {
        let code = ErrorCode::parse(e.code).unwrap_or_else(|| {
            // A code core added without a row above: still a refusal of the input, not a 500.
            // `every_validation_code_is_in_the_table` keeps this from happening.
            tracing::error!(
                code = e.code,
                "validation code missing from the error table"
            );
            ErrorCode::InvalidField
        });
        Self {
            status: status_of(code),
            code,
            message: e.message,
            field: (!e.field.is_empty()).then_some(e.field),
            retry_after: None,
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::KeyConflict { .. } => {
                Self::new(ErrorCode::KeyConflict, e.to_string()).field("key")
            }
            StoreError::NotFound => Self::not_found("job"),
            // The anchor was deleted, or filled, between validation and the create.
            StoreError::UnknownAnchor { name } => Self::new(
                ErrorCode::UnknownAnchor,
                format!("the namespace has no anchor {name:?} (PUT /v1/anchors/{name})"),
            )
            .field("schedule.anchor"),
            StoreError::AnchorFull { name } => Self::new(
                ErrorCode::AnchorFull,
                format!(
                    "anchor {name:?} has {} jobs, the most an anchor may have",
                    hourglass_core::anchor::MAX_JOBS_PER_ANCHOR
                ),
            )
            .field("schedule.anchor"),
            StoreError::InvalidState { .. } => Self::new(ErrorCode::InvalidState, e.to_string()),
            // The scheduler reads again and retries; still racing after that, the client may.
            StoreError::Changed | StoreError::Unavailable(_) => {
                tracing::error!(error = %e, "store unavailable");
                Self::new(
                    ErrorCode::StoreUnavailable,
                    "the store is unavailable; nothing was changed, retry later",
                )
            }
            // Misconfigured comes only from opening a store, never from a request's call.
            StoreError::Corrupt(_) | StoreError::Misconfigured(_) => {
                tracing::error!(error = %e, "corrupt data in store");
                Self::new(ErrorCode::Internal, "internal error")
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code.as_str().to_owned(),
                field: self.field,
                message: self.message,
            },
        };
        let mut response = (self.status, axum::Json(body)).into_response();
        let retry_after = match (self.retry_after, self.status) {
            (Some(seconds), _) => Some(seconds),
            (None, StatusCode::SERVICE_UNAVAILABLE) => Some(1),
            (None, _) => None,
        };
        if let Some(seconds) = retry_after {
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from(seconds),
            );
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for code in ErrorCode::ALL {
            assert_eq!(ErrorCode::parse(code.as_str()), Some(*code));
            assert!(seen.insert(code.as_str()), "{} twice", code.as_str());
        }
        assert_eq!(ErrorCode::parse("no_such_code"), None);
    }

    #[test]
    fn validation_errors_take_their_status_from_the_table() {
        let too_big = ApiError::from(ValidationError::new("payload_too_large", "payload", "x"));
        assert_eq!(too_big.status, StatusCode::PAYLOAD_TOO_LARGE);
        let cron = ApiError::from(ValidationError::new("invalid_cron", "schedule.cron", "x"));
        assert_eq!(
            (cron.status, cron.code),
            (StatusCode::UNPROCESSABLE_ENTITY, ErrorCode::InvalidCron)
        );
        let queue = ApiError::bad_request(ErrorCode::InvalidQueue, "name", "x");
        assert_eq!(queue.status, StatusCode::BAD_REQUEST);
    }
}
