//! The API's error body, `{"error": {"code": "...", "field": "...", "message": "..."}}`, and the
//! closed set of codes with the HTTP status each answers.

use serde::{Deserialize, Serialize};

/// Declares [`ErrorCode`] from one table of `Variant = "code" => status` rows.
macro_rules! error_codes {
    ($($variant:ident = $code:literal => $status:literal,)*) => {
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

            /// The HTTP status an error with this code answers.
            pub fn status(self) -> u16 {
                match self {
                    $(ErrorCode::$variant => $status,)*
                }
            }

            /// The code named `code`, if this build knows it.
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
    BodyTimeout = "body_timeout" => 408,
    BodyTooLarge = "body_too_large" => 413,
    CronNeverFires = "cron_never_fires" => 422,
    EngineFailed = "engine_failed" => 503,
    Forbidden = "forbidden" => 403,
    ForbiddenTarget = "forbidden_target" => 422,
    InstantInPast = "instant_in_past" => 422,
    InstantTooFar = "instant_too_far" => 422,
    Internal = "internal" => 500,
    InvalidBatch = "invalid_batch" => 422,
    InvalidCron = "invalid_cron" => 422,
    InvalidDuration = "invalid_duration" => 422,
    InvalidField = "invalid_field" => 422,
    InvalidHeader = "invalid_header" => 422,
    InvalidHost = "invalid_host" => 421,
    InvalidId = "invalid_id" => 400,
    InvalidIdempotencyKey = "invalid_idempotency_key" => 400,
    InvalidInstant = "invalid_instant" => 422,
    InvalidJson = "invalid_json" => 400,
    InvalidMisfire = "invalid_misfire" => 422,
    InvalidNamespace = "invalid_namespace" => 400,
    InvalidQuery = "invalid_query" => 400,
    InvalidQueue = "invalid_queue" => 422,
    InvalidReceipt = "invalid_receipt" => 422,
    InvalidSchedule = "invalid_schedule" => 422,
    InvalidState = "invalid_state" => 409,
    InvalidTarget = "invalid_target" => 422,
    InvalidUrl = "invalid_url" => 422,
    KeyConflict = "key_conflict" => 409,
    MethodNotAllowed = "method_not_allowed" => 405,
    MissingField = "missing_field" => 422,
    NotFound = "not_found" => 404,
    NotReady = "not_ready" => 503,
    PayloadTooLarge = "payload_too_large" => 413,
    QuotaExceeded = "quota_exceeded" => 429,
    RateLimited = "rate_limited" => 429,
    ScheduleNeverFires = "schedule_never_fires" => 422,
    ServerBusy = "server_busy" => 503,
    StoreUnavailable = "store_unavailable" => 503,
    Unauthorized = "unauthorized" => 401,
    UnknownConnection = "unknown_connection" => 422,
    UnknownField = "unknown_field" => 422,
    UnknownTimezone = "unknown_timezone" => 422,
    UnsupportedMediaType = "unsupported_media_type" => 415,
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Every error answer's body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

/// What went wrong. Keys in this order (they have always come sorted).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorDetail {
    /// Stable and machine-readable: an [`ErrorCode`] (kept as text, so a code newer than this
    /// build still reads).
    pub code: String,
    /// The JSON path of the offending request field, e.g. `target.webhook.url` or `receipts[3]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    pub message: String,
}
