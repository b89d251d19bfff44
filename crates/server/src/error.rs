//! The API's closed set of errors and the one table that maps each code to its HTTP status.
//! Every error body is `{"error": {"code": "...", "message": "...", "field": "..."}}`.
//!
//! A code's status is the table's, with one rule on top: [`ApiError::bad_request`] is for a part
//! of the request outside the body (path, query, headers) that cannot be read, and always answers
//! 400 — so `invalid_queue` is 422 for a queue name in a job's body and 400 in a URL path.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use hourglass_core::ValidationError;
use hourglass_store::StoreError;
use serde_json::json;

/// Declares [`ErrorCode`] from one table of `Variant = "code" => STATUS` rows.
macro_rules! error_codes {
    ($($variant:ident = $code:literal => $status:ident,)*) => {
        /// Every code an API error can carry (the OpenAPI document's `ErrorCode`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ErrorCode {
            $($variant,)*
        }

        impl ErrorCode {
            /// Every code, in table order.
            pub const ALL: &[ErrorCode] = &[$(ErrorCode::$variant,)*];

            /// The stable code clients match on.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $code,)*
                }
            }

            /// The status an error with this code answers.
            pub fn status(self) -> StatusCode {
                match self {
                    $(ErrorCode::$variant => StatusCode::$status,)*
                }
            }

            /// The code core's validation names `code`.
            pub fn parse(code: &str) -> Option<Self> {
                match code {
                    $($code => Some(ErrorCode::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

error_codes! {
    BodyTimeout = "body_timeout" => REQUEST_TIMEOUT,
    BodyTooLarge = "body_too_large" => PAYLOAD_TOO_LARGE,
    CronNeverFires = "cron_never_fires" => UNPROCESSABLE_ENTITY,
    EngineFailed = "engine_failed" => SERVICE_UNAVAILABLE,
    Forbidden = "forbidden" => FORBIDDEN,
    ForbiddenTarget = "forbidden_target" => UNPROCESSABLE_ENTITY,
    InstantInPast = "instant_in_past" => UNPROCESSABLE_ENTITY,
    InstantTooFar = "instant_too_far" => UNPROCESSABLE_ENTITY,
    Internal = "internal" => INTERNAL_SERVER_ERROR,
    InvalidBatch = "invalid_batch" => UNPROCESSABLE_ENTITY,
    InvalidCron = "invalid_cron" => UNPROCESSABLE_ENTITY,
    InvalidDuration = "invalid_duration" => UNPROCESSABLE_ENTITY,
    InvalidField = "invalid_field" => UNPROCESSABLE_ENTITY,
    InvalidHeader = "invalid_header" => UNPROCESSABLE_ENTITY,
    InvalidHost = "invalid_host" => MISDIRECTED_REQUEST,
    InvalidId = "invalid_id" => BAD_REQUEST,
    InvalidIdempotencyKey = "invalid_idempotency_key" => BAD_REQUEST,
    InvalidInstant = "invalid_instant" => UNPROCESSABLE_ENTITY,
    InvalidJson = "invalid_json" => BAD_REQUEST,
    InvalidMisfire = "invalid_misfire" => UNPROCESSABLE_ENTITY,
    InvalidNamespace = "invalid_namespace" => BAD_REQUEST,
    InvalidQuery = "invalid_query" => BAD_REQUEST,
    InvalidQueue = "invalid_queue" => UNPROCESSABLE_ENTITY,
    InvalidReceipt = "invalid_receipt" => UNPROCESSABLE_ENTITY,
    InvalidSchedule = "invalid_schedule" => UNPROCESSABLE_ENTITY,
    InvalidState = "invalid_state" => CONFLICT,
    InvalidTarget = "invalid_target" => UNPROCESSABLE_ENTITY,
    InvalidUrl = "invalid_url" => UNPROCESSABLE_ENTITY,
    KeyConflict = "key_conflict" => CONFLICT,
    MethodNotAllowed = "method_not_allowed" => METHOD_NOT_ALLOWED,
    MissingField = "missing_field" => UNPROCESSABLE_ENTITY,
    NotFound = "not_found" => NOT_FOUND,
    NotReady = "not_ready" => SERVICE_UNAVAILABLE,
    PayloadTooLarge = "payload_too_large" => PAYLOAD_TOO_LARGE,
    QuotaExceeded = "quota_exceeded" => TOO_MANY_REQUESTS,
    RateLimited = "rate_limited" => TOO_MANY_REQUESTS,
    ScheduleNeverFires = "schedule_never_fires" => UNPROCESSABLE_ENTITY,
    ServerBusy = "server_busy" => SERVICE_UNAVAILABLE,
    StoreUnavailable = "store_unavailable" => SERVICE_UNAVAILABLE,
    Unauthorized = "unauthorized" => UNAUTHORIZED,
    UnknownConnection = "unknown_connection" => UNPROCESSABLE_ENTITY,
    UnknownField = "unknown_field" => UNPROCESSABLE_ENTITY,
    UnknownTimezone = "unknown_timezone" => UNPROCESSABLE_ENTITY,
    UnsupportedMediaType = "unsupported_media_type" => UNSUPPORTED_MEDIA_TYPE,
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
            status: code.status(),
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
            status: code.status(),
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
            StoreError::InvalidState { .. } => Self::new(ErrorCode::InvalidState, e.to_string()),
            StoreError::Unavailable(_) => {
                tracing::error!(error = %e, "store unavailable");
                Self::new(
                    ErrorCode::StoreUnavailable,
                    "the store is unavailable; nothing was changed, retry later",
                )
            }
            StoreError::Corrupt(_) => {
                tracing::error!(error = %e, "corrupt data in store");
                Self::new(ErrorCode::Internal, "internal error")
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = json!({ "code": self.code.as_str(), "message": self.message });
        if let Some(field) = self.field {
            body["field"] = json!(field);
        }
        let mut response = (self.status, axum::Json(json!({ "error": body }))).into_response();
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
